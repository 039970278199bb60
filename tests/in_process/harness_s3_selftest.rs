//! Checks the CORS harness pieces of `tests/common` (moto S3 server, TLS
//! proxy, scripted TLS server) with a plain rustls/hyper client, not the
//! program under test.

use std::sync::Arc;
use std::time::Duration;

use crate::common::client::{test_client_config, tls_connect, HttpResponse};
use crate::common::s3::{base64, cors_xml, md5, CorsRule, S3Server, MOTO_CORS_REFUSAL};
use crate::common::*;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;

const APP: &str = "https://app.example.com";
const EVIL: &str = "https://evil.example";

/// One request over a fresh TLS connection to `addr` (verified as `HOST`).
async fn tls_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> HttpResponse {
    let tls = tls_connect(addr, HOST, test_client_config())
        .await
        .expect("handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http handshake");
    let conn_task = tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("{HOST}:{}", addr.port()));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .expect("request");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    conn_task.abort();
    HttpResponse {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

fn header<'a>(resp: &'a HttpResponse, name: &str) -> Option<&'a str> {
    resp.headers.get(name).map(|v| v.to_str().unwrap())
}

#[test]
fn md5_and_base64_known_answers() {
    let hex = |d: [u8; 16]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    // RFC 1321 appendix A.5.
    assert_eq!(hex(md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(hex(md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
    assert_eq!(
        hex(md5(
            b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
        )),
        "57edf4a22be3c955ac49da2e2107b67a"
    );
    assert_eq!(
        hex(md5(b"The quick brown fox jumps over the lazy dog")),
        "9e107d9d372bb6826bd81d3542a419d6"
    );
    // 55 and 56 bytes straddle the padding boundary.
    assert_eq!(hex(md5(&[b'a'; 55])), "ef1772b6dff9a122358552954ad0df65");
    assert_eq!(hex(md5(&[b'a'; 56])), "3b0c8ac703f828b04c6c197006d17218");
    assert_eq!(base64(&md5(b"")), "1B2M2Y8AsgTpgAmY7PhCfg==");
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
}

#[test]
fn cors_xml_lists_every_element() {
    let xml = cors_xml(&[CorsRule::new(&[APP], &["PUT", "GET"])
        .headers(&["content-type"])
        .expose(&["ETag"])
        .max_age(600)]);
    assert_eq!(
        xml,
        "<CORSConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><CORSRule>\
         <AllowedOrigin>https://app.example.com</AllowedOrigin>\
         <AllowedMethod>PUT</AllowedMethod><AllowedMethod>GET</AllowedMethod>\
         <AllowedHeader>content-type</AllowedHeader><ExposeHeader>ETag</ExposeHeader>\
         <MaxAgeSeconds>600</MaxAgeSeconds></CORSRule></CORSConfiguration>"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn moto_behind_tls_proxy_answers_preflights() {
    let s3 = S3Server::shared();
    let bucket = s3.new_bucket("selftest").await;
    s3.put_bucket_cors(
        &bucket,
        &cors_xml(&[CorsRule::new(&[APP], &["PUT", "GET"])
            .headers(&["content-type"])
            .expose(&["ETag"])
            .max_age(600)]),
    )
    .await;
    let stored = s3.get_bucket_cors(&bucket).await;
    assert!(
        stored.contains("<AllowedOrigin>https://app.example.com</AllowedOrigin>"),
        "{stored}"
    );
    s3.put_public_object(&bucket, "hello.txt", "hello moto")
        .await;
    s3.put_object(&bucket, "private.txt", "secret").await;

    let proxy = TlsProxy::start(&valid_leaf(), s3.addr);
    assert!(proxy.url("/x").ends_with(&format!(":{}/x", proxy.port())));
    let object = format!("/{bucket}/probe-object");

    // The app origin: admitted, the rule's lists echoed.
    let resp = tls_request(
        proxy.addr,
        "OPTIONS",
        &object,
        &[
            ("origin", APP),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "content-type"),
        ],
    )
    .await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(APP));
    assert_eq!(
        header(&resp, "access-control-allow-methods"),
        Some("PUT, GET")
    );
    assert_eq!(
        header(&resp, "access-control-allow-headers"),
        Some("content-type")
    );
    assert_eq!(header(&resp, "access-control-expose-headers"), Some("ETag"));
    assert_eq!(header(&resp, "access-control-max-age"), Some("600"));
    assert_eq!(header(&resp, "access-control-allow-credentials"), None);
    assert_eq!(header(&resp, "vary"), None);

    // moto matches the Origin only: an unlisted method and header still pass.
    let resp = tls_request(
        proxy.addr,
        "OPTIONS",
        &object,
        &[
            ("origin", APP),
            ("access-control-request-method", "DELETE"),
            ("access-control-request-headers", "x-foo"),
        ],
    )
    .await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(
        header(&resp, "access-control-allow-methods"),
        Some("PUT, GET")
    );

    // Another origin: 403 with the S3 XML error.
    let resp = tls_request(
        proxy.addr,
        "OPTIONS",
        &object,
        &[("origin", EVIL), ("access-control-request-method", "PUT")],
    )
    .await;
    assert_eq!(resp.status, 403, "{resp:?}");
    let body = String::from_utf8_lossy(&resp.body);
    assert!(body.contains("<Code>AccessForbidden</Code>"), "{body}");
    assert!(body.contains(MOTO_CORS_REFUSAL), "{body}");
    assert_eq!(header(&resp, "access-control-allow-origin"), None);

    // The object is served through the proxy too.
    let resp = tls_request(proxy.addr, "GET", &format!("/{bucket}/hello.txt"), &[]).await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.body, "hello moto");
    let resp = tls_request(proxy.addr, "GET", &format!("/{bucket}/private.txt"), &[]).await;
    assert_eq!(resp.status, 403, "{resp:?}");

    // No CORS configuration: 200 without any CORS header.
    s3.delete_bucket_cors(&bucket).await;
    let resp = tls_request(
        proxy.addr,
        "OPTIONS",
        &object,
        &[("origin", APP), ("access-control-request-method", "PUT")],
    )
    .await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert!(
        !resp
            .headers
            .keys()
            .any(|k| k.as_str().starts_with("access-control-")),
        "{resp:?}"
    );

    // A `*` origin rule: the Origin is echoed, not `*`.
    s3.put_bucket_cors(&bucket, &cors_xml(&[CorsRule::new(&["*"], &["PUT"])]))
        .await;
    let resp = tls_request(
        proxy.addr,
        "OPTIONS",
        &object,
        &[("origin", EVIL), ("access-control-request-method", "PUT")],
    )
    .await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(EVIL));

    // A missing bucket: 403, empty body.
    let resp = tls_request(
        proxy.addr,
        "OPTIONS",
        "/no-such-bucket/x",
        &[("origin", APP), ("access-control-request-method", "PUT")],
    )
    .await;
    assert_eq!(resp.status, 403);
    assert!(resp.body.is_empty());

    assert_eq!(proxy.handshakes(), 8);
    assert_eq!(proxy.sni_seen()[0].as_deref(), Some(HOST));
}

#[tokio::test(flavor = "multi_thread")]
async fn moto_rejects_bad_requests_loudly() {
    let s3 = S3Server::shared();
    // Bucket names shorter than 3 characters are refused: the helper panics
    // with moto's answer.
    let err = tokio::spawn(async move { s3.create_bucket("ab").await })
        .await
        .expect_err("create_bucket(\"ab\") should panic");
    let msg = err.into_panic();
    let msg = msg
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert!(msg.contains("CreateBucket"), "{msg}");
    assert!(msg.contains("InvalidBucketName"), "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn own_moto_is_killed_on_drop() {
    let s3 = S3Server::start();
    let addr = s3.addr;
    let bucket = s3.new_bucket("own").await;
    s3.put_object(&bucket, "k", "v").await;
    drop(s3);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::net::TcpStream::connect(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            _ if std::time::Instant::now() > deadline => panic!("moto still listening"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scripted_tls_server_answers_and_records() {
    let handler: Handler = Arc::new(|req: &RecordedRequest| {
        let origin = req
            .headers
            .get("origin")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        (
            204,
            vec![
                ("Access-Control-Allow-Origin".into(), origin),
                ("Access-Control-Allow-Methods".into(), "put".into()),
                ("Vary".into(), "Origin".into()),
                ("Vary".into(), "Access-Control-Request-Method".into()),
            ],
            String::new(),
        )
    });
    let server = TlsServer::start_with(&valid_leaf(), TlsOpts::default(), handler);
    let resp = tls_request(
        server.addr,
        "OPTIONS",
        "/bucket/obj?x=1",
        &[("origin", APP), ("access-control-request-method", "PUT")],
    )
    .await;
    assert_eq!(resp.status, 204);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(APP));
    assert_eq!(header(&resp, "access-control-allow-methods"), Some("put"));
    let vary: Vec<_> = resp.headers.get_all("vary").iter().collect();
    assert_eq!(vary.len(), 2);
    // Routes are replaced: `/` is the handler's too.
    let resp = tls_request(server.addr, "GET", "/", &[]).await;
    assert_eq!(resp.status, 204);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("none"));

    let recorded = server.recorded_requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].method, "OPTIONS");
    assert_eq!(recorded[0].uri, "/bucket/obj?x=1");
    assert_eq!(recorded[0].headers["origin"], APP);
    assert_eq!(recorded[1].method, "GET");
    assert_eq!(server.handshakes(), 2);
}
