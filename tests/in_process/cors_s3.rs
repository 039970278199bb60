//! The cors check end to end against a real S3 implementation: moto's
//! server (one per test binary, a bucket per test), its bucket CORS set
//! through PutBucketCors, behind a rustls proxy serving a test-PKI chain for
//! www.example.test. The preflight therefore crosses TLS, reaches moto, and
//! is answered from the bucket's CORSConfiguration.
//!
//! moto is not AWS: it matches a preflight on its Origin only, echoes the
//! Origin even for an `AllowedOrigin` of `*`, and answers a bucket without
//! CORS configuration with a bare 200 (see `tests/common/s3.rs` for the full
//! list). Each test asserts what moto really does and says where real S3
//! differs.

use crate::common::cors_server::*;
use crate::common::env::{failure, pretty};
use crate::common::s3::{cors_xml, CorsRule, S3Server, MOTO_CORS_REFUSAL};
use crate::common::*;
use vigie::outcome::{Outcome, Status};

/// The object key the browser PUTs to; it need not exist for a preflight.
const KEY: &str = "probe-object";

/// A fresh bucket with `rules` (none: no CORS configuration), and a proxy
/// serving `leaf` in front of moto. Returns the object URL and the proxy.
async fn bucket_with(prefix: &str, rules: &[CorsRule], leaf: &Leaf) -> (String, TlsProxy) {
    let s3 = S3Server::shared();
    let bucket = s3.new_bucket(prefix).await;
    if !rules.is_empty() {
        s3.put_bucket_cors(&bucket, &cors_xml(rules)).await;
    }
    let proxy = TlsProxy::start(leaf, s3.addr);
    (proxy.url(&format!("/{bucket}/{KEY}")), proxy)
}

/// The rule an upload bucket for the app needs.
fn upload_rule() -> CorsRule {
    CorsRule::new(&[APP], &["PUT", "GET"])
        .headers(&["content-type"])
        .expose(&["ETag"])
        .max_age(3000)
}

#[track_caller]
fn assert_failures(outcome: &Outcome, expected: &[&str]) {
    assert_eq!(assertion_names(outcome), expected, "{}", pretty(outcome));
    let status = if expected.is_empty() {
        Status::Up
    } else {
        Status::Down
    };
    assert_eq!(outcome.status, status, "{}", pretty(outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn allowed_origin_passes() {
    let (url, proxy) = bucket_with("allowed", &[upload_rule()], &valid_leaf()).await;
    let outcome = probe_cors(
        &url,
        r#"request_headers = ["content-type"]
min_max_age = "10m"
expose_headers = ["etag"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
    // Every field comes from moto's answer to this very preflight: the
    // echoed Origin and the rule's lists, in its order and case.
    let report = cors_report(&outcome);
    assert_eq!(report.preflight_status, 200);
    assert_eq!(report.allow_origin.as_deref(), Some(APP));
    assert_eq!(report.allow_methods, ["PUT", "GET"]);
    assert_eq!(report.allow_headers, ["content-type"]);
    assert_eq!(report.expose_headers, ["ETag"]);
    assert_eq!(report.max_age, Some(3000));
    // moto never sends these (real S3 sends `Vary: Origin,
    // Access-Control-Request-Headers, Access-Control-Request-Method`).
    assert_eq!(report.allow_credentials, None);
    assert_eq!(report.vary, None);
    assert_eq!(report.refusal, None);
    assert!(report.denied.is_empty());
    assert_eq!(outcome.kind, vigie::check::KindName::Cors);
    assert_eq!(outcome.target, url);
    // The chain is the proxy's test-PKI chain, trusted through extra_ca_file.
    let tls = outcome.tls.as_ref().expect("tls report");
    assert!(tls.trusted, "{}", pretty(&outcome));
    assert_eq!(tls.chain.len(), 2);
    assert_eq!(proxy.handshakes(), 1);
    assert_eq!(proxy.sni_seen(), [Some(HOST.to_owned())]);
}

#[tokio::test(flavor = "multi_thread")]
async fn app_origin_missing_from_rule_is_refused() {
    // moto (like S3) refuses a preflight whose Origin matches no rule with a
    // 403 and an XML error: vigie reports cors.preflight with moto's message,
    // and nothing else.
    let rule = CorsRule::new(&["https://other.example.com"], &["PUT"]).headers(&["*"]);
    let (url, _proxy) = bucket_with("other-origin", &[rule], &valid_leaf()).await;
    let outcome = probe_cors(&url, r#"request_headers = ["content-type"]"#).await;
    assert_failures(&outcome, &["cors.preflight"]);
    let f = failure(&outcome, "cors.preflight");
    assert!(f.observed.starts_with("403"), "{}", pretty(&outcome));
    assert!(
        f.observed.contains("AccessForbidden"),
        "{}",
        pretty(&outcome)
    );
    assert!(
        f.observed.contains(MOTO_CORS_REFUSAL),
        "{}",
        pretty(&outcome)
    );
    assert!(
        f.message.contains(MOTO_CORS_REFUSAL),
        "{}",
        pretty(&outcome)
    );
    let report = cors_report(&outcome);
    assert_eq!(report.preflight_status, 403);
    assert!(report
        .refusal
        .as_deref()
        .unwrap()
        .contains(MOTO_CORS_REFUSAL));
    // moto sets Access-Control-Allow-Methods before it checks the Origin, so
    // even its refusal lists them; no Allow-Origin, though.
    assert_eq!(report.allow_origin, None);
    assert_eq!(report.allow_methods, ["PUT"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn method_not_allowed_fails_methods() {
    // Real S3 would refuse this preflight (403): no rule allows PUT. moto
    // matches the Origin only and answers 200 with the rule's methods; vigie
    // still fails it, as a browser would, because GET does not cover PUT.
    let rule = CorsRule::new(&[APP], &["GET", "HEAD"]).headers(&["content-type"]);
    let (url, _proxy) = bucket_with("method", &[rule], &valid_leaf()).await;
    let outcome = probe_cors(&url, r#"request_headers = ["content-type"]"#).await;
    assert_failures(&outcome, &["cors.methods"]);
    let f = failure(&outcome, "cors.methods");
    assert!(f.expected.contains("PUT"), "{}", pretty(&outcome));
    assert_eq!(f.observed, "GET, HEAD");
    assert_eq!(cors_report(&outcome).preflight_status, 200);

    // GET itself is safelisted: no listing needed, passes.
    let outcome = probe_cors(&url, "method = \"GET\"").await;
    assert_failures(&outcome, &[]);
}

#[tokio::test(flavor = "multi_thread")]
async fn header_not_allowed_fails_headers() {
    // Same moto quirk as for methods: 200 with the rule's headers listed;
    // vigie compares them with the requested ones.
    let rule = CorsRule::new(&[APP], &["PUT"]).headers(&["content-type"]);
    let (url, _proxy) = bucket_with("header", &[rule], &valid_leaf()).await;
    let outcome = probe_cors(
        &url,
        r#"request_headers = ["content-type", "x-amz-meta-owner"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.headers"]);
    let f = failure(&outcome, "cors.headers");
    assert!(
        f.message.contains("x-amz-meta-owner"),
        "{}",
        pretty(&outcome)
    );
    assert_eq!(f.observed, "content-type");

    // AllowedHeader `*` (sent back as `*`) covers it.
    let rule = CorsRule::new(&[APP], &["PUT"]).headers(&["*"]);
    let (url, _proxy) = bucket_with("header-star", &[rule], &valid_leaf()).await;
    let outcome = probe_cors(
        &url,
        r#"request_headers = ["content-type", "x-amz-meta-owner"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
    assert_eq!(cors_report(&outcome).allow_headers, ["*"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn rule_widened_to_star_admits_every_origin() {
    // Real S3 answers `Access-Control-Allow-Origin: *` for an AllowedOrigin
    // of `*` (without credentials), which vigie fails as cors.origin unless
    // allow_any_origin = true (tests/cors_edge.rs covers that answer). moto
    // echoes the request's Origin instead, so the app's own preflight passes
    // either way; what shows the widened rule is that a deny origin gets
    // in, echoed by name.
    let rule = CorsRule::new(&["*"], &["PUT"]).headers(&["content-type"]);
    let (url, _proxy) = bucket_with("star", &[rule], &valid_leaf()).await;

    for extra in ["", "allow_any_origin = true"] {
        let outcome = probe_cors(
            &url,
            &format!("request_headers = [\"content-type\"]\n{extra}"),
        )
        .await;
        assert_failures(&outcome, &[]);
        assert_eq!(cors_report(&outcome).allow_origin.as_deref(), Some(APP));
    }

    let outcome = probe_cors(
        &url,
        "request_headers = [\"content-type\"]\ndeny_origins = [\"https://evil.example\"]",
    )
    .await;
    assert_failures(&outcome, &["cors.denied_origin"]);
    let d = &cors_report(&outcome).denied[0];
    assert_eq!(d.origin, EVIL);
    assert!(d.admitted);
    assert_eq!(d.allow_origin.as_deref(), Some(EVIL));
}

#[tokio::test(flavor = "multi_thread")]
async fn bucket_without_cors_configuration_fails_origin() {
    // Real S3 refuses the preflight (403, "CORSResponse: CORS is not enabled
    // for this bucket."), which would be cors.preflight. moto answers 200
    // with no CORS header at all, so a browser (and vigie) finds no
    // Access-Control-Allow-Origin: cors.origin, and cors.methods since PUT is
    // not listed.
    let (url, _proxy) = bucket_with("no-cors", &[], &valid_leaf()).await;
    let outcome = probe_cors(&url, "").await;
    assert_failures(&outcome, &["cors.origin", "cors.methods"]);
    assert_eq!(failure(&outcome, "cors.origin").observed, "none");
    let report = cors_report(&outcome);
    assert_eq!(report.preflight_status, 200);
    assert_eq!(report.allow_origin, None);
    assert!(report.allow_methods.is_empty());

    // Same after DeleteBucketCors on a configured bucket.
    let s3 = S3Server::shared();
    let (url, _proxy) = bucket_with("deleted-cors", &[upload_rule()], &valid_leaf()).await;
    assert_failures(&probe_cors(&url, "").await, &[]);
    let bucket = url.split('/').nth(3).unwrap().to_owned();
    s3.delete_bucket_cors(&bucket).await;
    assert_failures(
        &probe_cors(&url, "").await,
        &["cors.origin", "cors.methods"],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_bucket_fails_preflight() {
    // moto answers OPTIONS on a bucket that does not exist with a bare 403
    // (no body, so no refusal excerpt).
    let proxy = TlsProxy::start(&valid_leaf(), S3Server::shared().addr);
    let outcome = probe_cors(&proxy.url("/no-such-bucket-here/probe-object"), "").await;
    assert_failures(&outcome, &["cors.preflight"]);
    assert_eq!(failure(&outcome, "cors.preflight").observed, "403");
    assert_eq!(cors_report(&outcome).refusal, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_origin_admitted_by_the_rule_fails_denied_origin() {
    let rule = CorsRule::new(&[APP, EVIL], &["PUT"]).headers(&["content-type"]);
    let (url, proxy) = bucket_with("deny-admitted", &[rule], &valid_leaf()).await;
    let outcome = probe_cors(
        &url,
        r#"request_headers = ["content-type"]
deny_origins = ["https://evil.example", "https://attacker.example.net"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.denied_origin"]);
    let f = failure(&outcome, "cors.denied_origin");
    assert!(f.message.contains(EVIL), "{}", pretty(&outcome));
    let report = cors_report(&outcome);
    assert_eq!(report.denied.len(), 2);
    assert_eq!(report.denied[0].origin, EVIL);
    assert!(report.denied[0].admitted);
    assert_eq!(report.denied[0].allow_origin.as_deref(), Some(EVIL));
    // The other one gets moto's 403: not admitted.
    assert_eq!(report.denied[1].origin, EVIL2);
    assert!(!report.denied[1].admitted);
    assert_eq!(report.denied[1].allow_origin, None);
    // One connection per preflight.
    assert_eq!(proxy.handshakes(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcard_subdomain_rule_admits_lookalike_deny_origin() {
    // AllowedOrigin `https://*.example.com` covers the app and any other
    // subdomain: a realistic over-wide rule.
    let rule = CorsRule::new(&["https://*.example.com"], &["PUT"]).headers(&["content-type"]);
    let (url, _proxy) = bucket_with("wildcard-sub", &[rule], &valid_leaf()).await;
    let outcome = probe_cors(
        &url,
        r#"request_headers = ["content-type"]
deny_origins = ["https://evil.example.com", "https://evil.example"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.denied_origin"]);
    let report = cors_report(&outcome);
    assert_eq!(report.allow_origin.as_deref(), Some(APP));
    let admitted: Vec<_> = report
        .denied
        .iter()
        .map(|d| (d.origin.as_str(), d.admitted))
        .collect();
    assert_eq!(
        admitted,
        [
            ("https://evil.example.com", true),
            ("https://evil.example", false)
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_origin_not_in_the_rule_passes() {
    let (url, _proxy) = bucket_with("deny-refused", &[upload_rule()], &valid_leaf()).await;
    let outcome = probe_cors(
        &url,
        r#"request_headers = ["content-type"]
deny_origins = ["https://evil.example"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
    let report = cors_report(&outcome);
    assert_eq!(report.denied.len(), 1);
    assert_eq!(report.denied[0].origin, EVIL);
    assert!(!report.denied[0].admitted);
    assert_eq!(report.denied[0].allow_origin, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn short_max_age_and_missing_expose_header_fail() {
    let rule = CorsRule::new(&[APP], &["PUT"])
        .headers(&["content-type"])
        .max_age(60);
    let (url, _proxy) = bucket_with("max-age", &[rule], &valid_leaf()).await;
    let outcome = probe_cors(
        &url,
        r#"request_headers = ["content-type"]
min_max_age = "10m"
expose_headers = ["etag"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.max_age", "cors.expose_headers"]);
    assert_eq!(failure(&outcome, "cors.max_age").observed, "60 s");
    assert_eq!(failure(&outcome, "cors.expose_headers").observed, "none");
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_fail_since_moto_never_allows_them() {
    // moto never sends Access-Control-Allow-Credentials; a page uploading
    // with cookies would be refused.
    let (url, _proxy) = bucket_with("credentials", &[upload_rule()], &valid_leaf()).await;
    let outcome = probe_cors(&url, "credentials = true").await;
    assert_failures(&outcome, &["cors.origin"]);
    let f = failure(&outcome, "cors.origin");
    assert!(f.message.contains("Credentials"), "{}", pretty(&outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_certificate_in_front_of_the_bucket_fails_tls_expiry() {
    let (url, proxy) = bucket_with("expired", &[upload_rule()], &expired_leaf()).await;
    let outcome = probe_cors(&url, "").await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let names = assertion_names(&outcome);
    assert!(names.contains(&"tls.expiry"), "{}", pretty(&outcome));
    // The handshake is refused: no preflight reached moto.
    assert!(outcome.cors.is_none(), "{}", pretty(&outcome));
    let tls = outcome.tls.as_ref().expect("tls report");
    assert!(!tls.trusted);
    assert!(tls.chain[0].days_left < 0, "{}", pretty(&outcome));
    assert_eq!(proxy.handshakes(), 0);
}
