//! Checks that the test harness in `tests/common` behaves as documented,
//! using a plain rustls client (not the program under test).

use std::io;
use std::time::Duration;

use crate::common::client::{
    client_config, http_get, http_get_streaming, rustls_error, test_client_config, tls_connect,
};
use crate::common::pki::{self, Leaf};
use crate::common::servers::{garbage_bytes, BIG_LEN, GARBAGE_LEN, INDEX_BODY};
use crate::common::*;
use http_body_util::BodyExt;
use hyper::StatusCode;
use rustls::{CertificateError, HandshakeKind, ProtocolVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Whole days from now to the leaf's notAfter, and its issuer CN, read back from the DER.
fn inspect(leaf: &Leaf) -> (i64, i64, String) {
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf.cert).expect("parse leaf");
    let nb = cert.validity().not_before.timestamp();
    let na = cert.validity().not_after.timestamp();
    let now = pki::now().unix_timestamp();
    let issuer_cn = cert
        .issuer()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    ((na - now).div_euclid(86_400), (na - nb) / 86_400, issuer_cn)
}

async fn handshake_error(leaf: &Leaf, name: &str) -> rustls::Error {
    let server = TlsServer::start_leaf(leaf, TlsOpts::default());
    let err = tls_connect(server.addr, name, test_client_config())
        .await
        .expect_err("handshake should fail");
    rustls_error(&err)
        .unwrap_or_else(|| panic!("not a rustls error: {err:?}"))
        .clone()
}

fn cert_error(err: rustls::Error) -> CertificateError {
    match err {
        rustls::Error::InvalidCertificate(e) => e,
        other => panic!("not a certificate error: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn valid_chain_serves_index() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let tls = tls_connect(server.addr, HOST, test_client_config())
        .await
        .expect("handshake");
    let resp = http_get(tls, HOST, "/").await.expect("GET /");
    assert_eq!(resp.status, StatusCode::OK);
    assert_eq!(resp.body, INDEX_BODY.as_bytes());
    assert_eq!(
        resp.headers["strict-transport-security"],
        "max-age=31536000"
    );
    assert_eq!(server.handshakes(), 1);
    assert_eq!(server.requests(), 1);
    assert_eq!(server.last_sni().as_deref(), Some(HOST));
    assert_eq!(server.recorded_requests()[0].host(), Some(HOST));
    assert_eq!(server.recorded_requests()[0].uri, "/");
    assert!(server.url("/x").ends_with(&format!(":{}/x", server.port())));
}

#[tokio::test(flavor = "multi_thread")]
async fn routes() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let get = |path: &'static str| {
        let addr = server.addr;
        async move {
            let tls = tls_connect(addr, HOST, test_client_config()).await.unwrap();
            http_get(tls, HOST, path).await.unwrap()
        }
    };
    assert_eq!(get("/status/503").await.status, 503);
    let r = get("/redirect/2").await;
    assert_eq!(r.status, StatusCode::FOUND);
    assert_eq!(r.headers["location"], "/redirect/1");
    assert_eq!(get("/redirect/0").await.status, StatusCode::OK);
    assert_eq!(get("/loop-a").await.headers["location"], "/loop-b");
    assert_eq!(get("/loop-b").await.headers["location"], "/loop-a");
    assert_eq!(get("/headers").await.headers["x-test"], "hello");
    assert_eq!(get("/bytes/10").await.body, "xxxxxxxxxx");
    assert_eq!(get("/nope").await.status, StatusCode::NOT_FOUND);
    let t = std::time::Instant::now();
    assert_eq!(get("/slow/200").await.status, StatusCode::OK);
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!(server.requests(), 9);

    // /big-cl announces 50 MiB; /big is chunked. Read only the first MiB of /big.
    let tls = tls_connect(server.addr, HOST, test_client_config())
        .await
        .unwrap();
    let resp = http_get_streaming(tls, HOST, "/big-cl").await.unwrap();
    assert_eq!(
        resp.headers()["content-length"],
        BIG_LEN.to_string().as_str()
    );
    drop(resp);
    let tls = tls_connect(server.addr, HOST, test_client_config())
        .await
        .unwrap();
    let mut resp = http_get_streaming(tls, HOST, "/big").await.unwrap();
    assert_eq!(resp.headers()["transfer-encoding"], "chunked");
    assert!(resp.headers().get("content-length").is_none());
    let mut got = 0usize;
    while got < 1024 * 1024 {
        let frame = resp.body_mut().frame().await.unwrap().unwrap();
        let data = frame.into_data().unwrap();
        assert!(data.iter().all(|b| *b == b'x'));
        got += data.len();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcard_rsa_and_ecdsa_handshake() {
    let server = TlsServer::start_leaf(&wildcard_leaf(), TlsOpts::default());
    for name in ["foo.example.test", HOST] {
        let tls = tls_connect(server.addr, name, test_client_config())
            .await
            .expect("wildcard handshake");
        assert_eq!(http_get(tls, name, "/").await.unwrap().status, 200);
    }
    assert_eq!(
        server.sni_seen(),
        vec![Some("foo.example.test".into()), Some(HOST.into())]
    );
    // A wildcard does not cover the bare parent domain.
    let err = cert_error(handshake_error(&wildcard_leaf(), "example.test").await);
    assert!(matches!(
        err,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
    ));

    for leaf in [rsa_leaf(), ecdsa_leaf()] {
        let server = TlsServer::start_leaf(&leaf, TlsOpts::default());
        let tls = tls_connect(server.addr, HOST, test_client_config())
            .await
            .unwrap_or_else(|e| panic!("{:?} handshake: {e}", leaf.spec.key));
        assert_eq!(
            tls.get_ref().1.protocol_version(),
            Some(ProtocolVersion::TLSv1_3)
        );
        assert_eq!(http_get(tls, HOST, "/").await.unwrap().status, 200);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tls12_only_and_tls13_only() {
    for leaf in [valid_leaf(), rsa_leaf()] {
        let server = TlsServer::start_leaf(
            &leaf,
            TlsOpts {
                tls12_only: true,
                ..TlsOpts::default()
            },
        );
        let tls = tls_connect(server.addr, HOST, test_client_config())
            .await
            .unwrap();
        assert_eq!(
            tls.get_ref().1.protocol_version(),
            Some(ProtocolVersion::TLSv1_2)
        );
        assert_eq!(http_get(tls, HOST, "/").await.unwrap().status, 200);
        assert_eq!(server.negotiated_versions(), vec![ProtocolVersion::TLSv1_2]);
    }
    let server = TlsServer::start_leaf(
        &valid_leaf(),
        TlsOpts {
            tls13_only: true,
            ..TlsOpts::default()
        },
    );
    let tls = tls_connect(server.addr, HOST, test_client_config())
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(ProtocolVersion::TLSv1_3)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_session_resumption() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let config = test_client_config();
    for _ in 0..3 {
        let tls = tls_connect(server.addr, HOST, config.clone())
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.handshake_kind(), Some(HandshakeKind::Full));
        // Complete one exchange so any ticket would have been received.
        assert_eq!(http_get(tls, HOST, "/").await.unwrap().status, 200);
    }
    assert_eq!(server.handshakes(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_scenarios_fail_as_expected() {
    use CertificateError as C;
    let e = cert_error(handshake_error(&expired_leaf(), HOST).await);
    assert!(matches!(e, C::Expired | C::ExpiredContext { .. }), "{e:?}");
    let e = cert_error(handshake_error(&not_yet_valid_leaf(), HOST).await);
    assert!(
        matches!(e, C::NotValidYet | C::NotValidYetContext { .. }),
        "{e:?}"
    );
    let e = cert_error(handshake_error(&wrong_host_leaf(), HOST).await);
    assert!(
        matches!(e, C::NotValidForName | C::NotValidForNameContext { .. }),
        "{e:?}"
    );
    for leaf in [
        self_signed_leaf(),
        staging_leaf(),
        missing_intermediate_leaf(),
    ] {
        let e = cert_error(handshake_error(&leaf, HOST).await);
        assert!(matches!(e, C::UnknownIssuer), "{e:?}");
    }
    // The wrong-host leaf is fine for its own name.
    let server = TlsServer::start_leaf(&wrong_host_leaf(), TlsOpts::default());
    tls_connect(server.addr, OTHER_HOST, test_client_config())
        .await
        .unwrap();
    // The staging chain verifies against the staging root.
    let server = TlsServer::start_leaf(&staging_leaf(), TlsOpts::default());
    let staging_client = client_config(&[staging_ca().root.cert.clone()]);
    let tls = tls_connect(server.addr, HOST, staging_client)
        .await
        .unwrap();
    // Counters are updated by server tasks: wait for them rather than racing.
    assert!(eventually(Duration::from_secs(2), || server.handshakes() == 1).await);
    drop(tls);
}

#[test]
fn pki_dates_names_and_pem() {
    let ca = test_ca();
    assert_eq!(ca.root.common_name, "Vigie Test Root CA");
    assert_eq!(ca.intermediate.common_name, "Vigie Test Intermediate R1");
    let st = staging_ca();
    assert_eq!(st.root.common_name, "(STAGING) Pretend Pear X1");
    assert_eq!(
        st.intermediate.common_name,
        "(STAGING) Artificial Apricot R3"
    );
    let (_, st_int) = x509_parser::parse_x509_certificate(&st.intermediate.cert).unwrap();
    let subject = st_int.subject().to_string();
    assert!(subject.contains("O=(STAGING) Let's Encrypt"), "{subject}");
    assert!(subject.contains("C=US"), "{subject}");
    assert!(
        subject.contains("CN=(STAGING) Artificial Apricot R3"),
        "{subject}"
    );
    assert!(st_int
        .issuer()
        .to_string()
        .contains("CN=(STAGING) Pretend Pear X1"));

    assert_eq!(
        inspect(&valid_leaf()),
        (60, 90, "Vigie Test Intermediate R1".into())
    );
    assert_eq!(
        inspect(&twenty_days_left_leaf()),
        (20, 90, "Vigie Test Intermediate R1".into())
    );
    assert_eq!(
        inspect(&five_days_left_leaf()),
        (5, 90, "Vigie Test Intermediate R1".into())
    );
    let (left, life, _) = inspect(&expired_leaf());
    assert_eq!((left, life), (-2, 90));
    let nyv = not_yet_valid_leaf();
    let (_, cert) = x509_parser::parse_x509_certificate(&nyv.cert).unwrap();
    let starts_in = cert.validity().not_before.timestamp() - pki::now().unix_timestamp();
    assert!(
        (3 * 86_400 - 5..=3 * 86_400).contains(&starts_in),
        "{starts_in}"
    );
    assert_eq!(
        inspect(&staging_leaf()).2,
        "(STAGING) Artificial Apricot R3"
    );
    let ss = self_signed_leaf();
    assert_eq!(inspect(&ss).2, HOST);
    assert_eq!(ss.chain.len(), 1);
    assert_eq!(missing_intermediate_leaf().chain.len(), 1);
    assert_eq!(valid_leaf().chain.len(), 2);
    assert!(valid_leaf()
        .key_pem
        .starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(rsa_leaf()
        .key_pem
        .starts_with("-----BEGIN PRIVATE KEY-----"));

    let dir = tempfile::tempdir().unwrap();
    let path = write_root_pem(dir.path());
    let pem = std::fs::read_to_string(&path).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(pem, ca.root.pem);
    let path = write_staging_root_pem(dir.path());
    assert_eq!(std::fs::read_to_string(path).unwrap(), st.root.pem);
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_http_server() {
    let server = PlainHttpServer::start_redirecting_to(8443);
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let resp = http_get(tcp, HOST, "/").await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, INDEX_BODY.as_bytes());
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let resp = http_get(tcp, HOST, "/to-https").await.unwrap();
    assert_eq!(resp.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(resp.headers["location"], "https://www.example.test:8443/");
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let resp = http_get(tcp, HOST, "/to-https?port=1234").await.unwrap();
    assert_eq!(resp.headers["location"], "https://www.example.test:1234/");
    assert_eq!(server.requests(), 3);
    assert_eq!(server.connections(), 3);
    assert!(server.url("/").starts_with("http://www.example.test:"));
}

#[tokio::test(flavor = "multi_thread")]
async fn tarpit_never_answers() {
    let tarpit = Tarpit::start();
    let res = tokio::time::timeout(
        Duration::from_millis(300),
        tls_connect(tarpit.addr, HOST, test_client_config()),
    )
    .await;
    assert!(res.is_err(), "tarpit answered: {res:?}");
    assert!(eventually(Duration::from_secs(2), || tarpit.connections() == 1).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_is_not_tls() {
    let garbage = Garbage::start();
    let mut tcp = TcpStream::connect(garbage.addr).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut got))
        .await
        .expect("garbage closes")
        .unwrap();
    assert_eq!(got.len(), GARBAGE_LEN);
    assert_eq!(got, garbage_bytes());
    assert!(got.starts_with(b"HTTP/1.0 200 OK\r\n"));

    let err = tokio::time::timeout(
        Duration::from_secs(2),
        tls_connect(garbage.addr, HOST, test_client_config()),
    )
    .await
    .expect("no hang")
    .expect_err("not TLS");
    assert!(
        matches!(rustls_error(&err), Some(rustls::Error::InvalidMessage(_))),
        "{err:?}"
    );
    assert_eq!(garbage.connections(), 2);
}

fn is_reset(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

/// Connect, optionally send `hello`, then read: the reset may surface at any step.
async fn reset_error(addr: std::net::SocketAddr, hello: bool) -> io::Error {
    let attempt = async {
        let mut tcp = TcpStream::connect(addr).await?;
        if hello {
            tcp.write_all(b"hello").await?;
        }
        let mut buf = [0u8; 16];
        let n = tcp.read(&mut buf).await?;
        Ok::<usize, io::Error>(n)
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .expect("no hang")
        .expect_err("should be reset")
}

#[tokio::test(flavor = "multi_thread")]
async fn resetter_resets() {
    for resetter in [Resetter::start(), Resetter::start_after_first_read()] {
        let err = reset_error(resetter.addr, true).await;
        assert!(is_reset(&err), "{err:?}");
        let err = tls_connect(resetter.addr, HOST, test_client_config())
            .await
            .expect_err("reset");
        assert!(is_reset(&err), "{err:?}");
    }
    let resetter = Resetter::start();
    let err = reset_error(resetter.addr, false).await;
    assert!(is_reset(&err), "{err:?}");
    assert_eq!(resetter.connections(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_and_shutdown_on_drop() {
    let addr = refused_addr();
    assert!(addr.ip().is_loopback());
    let err = TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);

    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let addr = server.addr;
    assert!(addr.ip().is_loopback());
    drop(server);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
            _ if std::time::Instant::now() > deadline => panic!("still listening after drop"),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}
