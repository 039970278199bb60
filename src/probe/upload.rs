//! The `upload` probe: the browser's whole presigned upload, done the way
//! the app does it, so that what breaks uploads in browsers breaks here.
//!
//! 1. **presign**: a PUT for `<key_prefix><node>/<timestamp>`, SigV4 in
//!    the query string, signing `content-type` as the app does
//!    (object_store's signer, the one replication uses to sign requests;
//!    it signs offline, no request is made);
//! 2. **preflight**: the browser's CORS preflight for exactly that URL from
//!    `origin` (the cors probe's request);
//! 3. **put**: the PUT with `Origin`, `Content-Type` and a small body;
//! 4. **expose**: the PUT's answer must admit `origin` and expose
//!    `expose_headers` (the browser hides everything else from the page);
//! 5. **delete**: a presigned DELETE of the object.
//!
//! It stops where a browser would (a refused preflight is never followed
//! by the PUT), except that an object that was written is always deleted.
//! Whether a browser would go on is decided by `evaluate::upload`, the same
//! judgment that later turns the report into failures.
//!
//! Secrets. The presigned URLs carry a signature and the access key id in
//! their query string: they are only ever sent, never kept. The report
//! holds the object key; the client's trace the URLs redacted; every
//! value from the bucket is sanitised here.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use http::header::{CONTENT_TYPE, ORIGIN};
use http::{HeaderValue, Method};
use http_body_util::{Empty, Full};
use hyper::body::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
};
use object_store::path::Path as ObjectPath;
use object_store::signer::{SignedUrlOptions, Signer};
use object_store::ClientOptions;
use time::OffsetDateTime;
use url::Url;

use super::client::{self, Client, Hop, Response, Trace};
use super::cors::{self, Preflight};
use super::tls::Trust;
use crate::check::{Check, UploadCheck};
use crate::evaluate::upload::{expose_failures, preflight_failures, SIGNED_HEADER};
use crate::outcome::{Assertion, ProbeError, S3Error, UploadReport, UploadStep};
use crate::redact::redact;
use crate::sanitize;

/// What the probe uploads: small, and saying what it is to whoever finds
/// one left behind.
const BODY: &[u8] = b"vigie upload probe: safe to delete\n";

/// Presigned URLs are good for no longer than one probe may last.
const MIN_EXPIRY: Duration = Duration::from_secs(1);

pub async fn probe(
    client: &Client,
    check: &Check,
    upload: &UploadCheck,
    trust: &Trust,
    trace: &mut Trace,
) -> Result<UploadReport, ProbeError> {
    let key = object_key(upload, client.clock().now());
    let mut report = UploadReport::new(key.clone(), UploadStep::Presign);
    let expires = check.timeout.max(MIN_EXPIRY);
    let content_type = Some(upload.content_type.as_str());
    let put_url = match presign(upload, Method::PUT, &key, expires, content_type).await {
        Ok(url) => url,
        Err(reason) => {
            report.reason = Some(sanitize::message(&reason));
            return Ok(report);
        }
    };
    report.step = UploadStep::Preflight;
    let ask = Preflight {
        url: &put_url,
        connect_to: check.resolve,
        origin: &upload.origin,
        method: "PUT",
        request_headers: &[SIGNED_HEADER.to_string()],
    };
    let answer = cors::send_preflight(client, &ask, trust, trace).await?;
    let preflight = cors::observe(&answer);
    let admitted = preflight_failures(upload, &preflight).is_empty();
    report.preflight = Some(preflight);
    if !admitted {
        return Ok(report);
    }

    report.step = UploadStep::Put;
    let put = client::request(Method::PUT, &put_url)
        .header(ORIGIN, upload.origin.as_str())
        .header(CONTENT_TYPE, upload.content_type.as_str())
        .body(Full::new(Bytes::from_static(BODY)))
        .map_err(|err| build_error(&put_url, err))?;
    let answer = client
        .send(&hop(&put_url, check, trust), put, trace)
        .await?;
    report.put_status = Some(answer.status.as_u16());
    if !answer.status.is_success() {
        report.error = s3_error(&answer);
        return Ok(report);
    }
    // Judged on the answer as received, shown sanitised.
    let allow_origin = cors::header(&answer.headers, "access-control-allow-origin");
    let exposed = cors::list(&answer.headers, "access-control-expose-headers");
    let exposes = expose_failures(upload, allow_origin.as_deref(), &exposed).is_empty();
    report.allow_origin = allow_origin.map(|a| sanitize::value(&a));
    report.expose_headers = sanitize::list(exposed);
    report.step = UploadStep::Expose;

    // The object exists: delete it whatever the expose step found.
    let delete_url = match presign(upload, Method::DELETE, &key, expires, None).await {
        Ok(url) => url,
        Err(reason) => {
            report.reason = Some(sanitize::message(&reason));
            if exposes {
                report.step = UploadStep::Delete;
            }
            return Ok(report);
        }
    };
    let delete = client::request(Method::DELETE, &delete_url)
        .body(Empty::new())
        .map_err(|err| build_error(&delete_url, err))?;
    let answer = client
        .send(&hop(&delete_url, check, trust), delete, trace)
        .await?;
    report.delete_status = Some(answer.status.as_u16());
    let deleted = answer.status.is_success();
    if !deleted && report.error.is_none() {
        report.error = s3_error(&answer);
    }
    if exposes {
        report.step = UploadStep::Delete;
        report.ok = deleted;
    }
    Ok(report)
}

/// `<key_prefix><node>/<UTC timestamp, milliseconds>`, without characters
/// that need escaping in a URL path.
fn object_key(upload: &UploadCheck, now: OffsetDateTime) -> String {
    let format = time::macros::format_description!(
        "[year][month][day]T[hour][minute][second].[subsecond digits:3]Z"
    );
    let stamp = now
        .to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_else(|_| now.unix_timestamp().to_string());
    format!("{}{}/{stamp}", upload.key_prefix, upload.node)
}

fn hop<'a>(url: &'a Url, check: &Check, trust: &'a Trust) -> Hop<'a> {
    Hop {
        url,
        connect_to: check.resolve,
        trust,
        redirect: None,
    }
}

fn build_error(url: &Url, err: http::Error) -> ProbeError {
    ProbeError {
        kind: Assertion::HttpProtocol,
        message: format!("cannot build a request for {}: {err}", redact(url)),
    }
}

/// A URL presigned for `method` on `key`, signing `content_type` when
/// given. object_store's errors never include the secret.
async fn presign(
    upload: &UploadCheck,
    method: Method,
    key: &str,
    expires: Duration,
    content_type: Option<&str>,
) -> Result<Url, String> {
    let store = AmazonS3Builder::new()
        .with_bucket_name(&upload.bucket)
        .with_region(&upload.region)
        .with_endpoint(upload.endpoint.as_str().trim_end_matches('/'))
        .with_virtual_hosted_style_request(upload.virtual_host)
        .with_access_key_id(&upload.keys.access_key_id)
        .with_secret_access_key(&upload.keys.secret_access_key)
        .with_http_connector(Offline)
        .build()
        .map_err(|e| e.to_string())?;
    let mut options = SignedUrlOptions::default();
    if let Some(value) = content_type {
        let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
        options = options.with_signed_header(CONTENT_TYPE, value);
    }
    store
        .signed_url_opts(method, &ObjectPath::from(key), expires, &options)
        .await
        .map_err(|e| e.to_string())
}

/// S3's `<Code>` and `<Message>` from an error answer, sanitised; the
/// status line's reason when the body has none (a HEAD-like empty 403).
fn s3_error(answer: &Response) -> Option<S3Error> {
    let text = String::from_utf8_lossy(&answer.body);
    let code = cors::element(&text, "Code");
    let message = cors::element(&text, "Message");
    match (code, message) {
        (Some(code), message) => Some(S3Error {
            code: sanitize::value(&code),
            message: sanitize::value(&message.unwrap_or_default()),
        }),
        (None, Some(message)) => Some(S3Error {
            code: String::new(),
            message: sanitize::value(&message),
        }),
        (None, None) => None,
    }
}

/// object_store's builder insists on an HTTP client; signing needs none,
/// and this one refuses every request, so the signer can never reach the
/// network (or the cloud's metadata service) behind the probe's back.
#[derive(Debug)]
struct Offline;

impl HttpConnector for Offline {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Offline))
    }
}

impl fmt::Display for Offline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the upload probe's signer makes no requests")
    }
}

impl std::error::Error for Offline {}

// `HttpService` is an `async_trait`; this is what the macro would write.
impl HttpService for Offline {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        _req: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async { Err(HttpError::new(HttpErrorKind::Request, Offline)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::UploadKeys;

    fn upload(url: &str, virtual_host: bool) -> UploadCheck {
        UploadCheck {
            bucket: "uploads".into(),
            endpoint: url.parse().unwrap(),
            virtual_host,
            region: "fr-par".into(),
            origin: "https://app.example.com".into(),
            key_prefix: "vigie-probe/".into(),
            node: "probe-1".into(),
            content_type: "image/png".into(),
            expose_headers: vec!["etag".into()],
            keys: UploadKeys {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            },
        }
    }

    #[test]
    fn keys_name_node_and_instant() {
        let now = time::macros::datetime!(2026-12-01 12:15:00.123 UTC);
        assert_eq!(
            object_key(&upload("https://s3.example/", false), now),
            "vigie-probe/probe-1/20261201T121500.123Z"
        );
    }

    #[tokio::test]
    async fn presigned_urls_start_with_the_object_url_and_sign_content_type() {
        let key = "vigie-probe/probe-1/20261201T121500.123Z";
        let expires = Duration::from_secs(10);
        let path = upload("https://s3.fr-par.scw.cloud/", false);
        let url = presign(&path, Method::PUT, key, expires, Some("image/png"))
            .await
            .unwrap();
        assert_eq!(
            url.as_str().split('?').next().unwrap(),
            format!("https://s3.fr-par.scw.cloud/uploads/{key}")
        );
        let query = url.query().unwrap();
        assert!(
            query.contains("X-Amz-SignedHeaders=content-type%3Bhost"),
            "{query}"
        );
        assert!(query.contains("X-Amz-Expires=10"), "{query}");
        assert!(query.contains("%2Ffr-par%2Fs3%2Faws4_request"), "{query}");
        let vhost = upload("https://uploads.s3.fr-par.scw.cloud/", true);
        let url = presign(&vhost, Method::DELETE, key, expires, None)
            .await
            .unwrap();
        assert_eq!(
            url.as_str().split('?').next().unwrap(),
            format!("https://uploads.s3.fr-par.scw.cloud/{key}")
        );
        assert!(url.query().unwrap().contains("X-Amz-SignedHeaders=host"));
    }
}
