//! The upload check end to end against moto with SigV4 enforced and
//! presigned URLs verified (`tests/common/s3_upload.rs`), behind a rustls
//! proxy serving a test-PKI chain for www.example.test: vigie presigns
//! with a key limited to `vigie-probe/`, preflights, PUTs and deletes as a
//! browser and the app would, and the bucket's CORS rules decide.
//!
//! moto matches a preflight on its Origin only (see `tests/common/s3.rs`):
//! a rule that does not allow `content-type` still answers 200, listing
//! the headers it allows, and vigie refuses it as a browser would.

use std::time::Duration;

use crate::common::cors_server::{assertion_names, APP};
use crate::common::env::{failure, pretty, Env};
use crate::common::s3::CorsRule;
use crate::common::s3_auth::{http, write_keys};
use crate::common::s3_upload::{BucketSpec, UploadS3, PROBE_PREFIX};
use crate::common::*;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::signer::{SignedUrlOptions, Signer};
use vigie::outcome::{Outcome, Status, UploadReport, UploadStep};

/// What the app's bucket needs: PUT from the app with its content-type,
/// ETag readable.
fn app_rule() -> Vec<CorsRule> {
    vec![CorsRule::new(&[APP], &["PUT", "GET"])
        .headers(&["content-type"])
        .expose(&["ETag"])]
}

/// Admits the app's origin, but not the header its PUT carries.
fn no_content_type_rule() -> Vec<CorsRule> {
    vec![CorsRule::new(&[APP], &["PUT"])
        .headers(&["x-amz-meta-owner"])
        .expose(&["ETag"])]
}

/// Admits the PUT, exposes nothing.
fn no_expose_rule() -> Vec<CorsRule> {
    vec![CorsRule::new(&[APP], &["PUT"]).headers(&["content-type"])]
}

const BUCKETS: &[BucketSpec] = &[
    BucketSpec {
        name: "up-app",
        rules: app_rule,
    },
    BucketSpec {
        name: "up-headers",
        rules: no_content_type_rule,
    },
    BucketSpec {
        name: "up-expose",
        rules: no_expose_rule,
    },
    BucketSpec {
        name: "up-tamper",
        rules: app_rule,
    },
    BucketSpec {
        name: "up-prefix",
        rules: app_rule,
    },
    BucketSpec {
        name: "up-node",
        rules: app_rule,
    },
    BucketSpec {
        name: "up-harness",
        rules: app_rule,
    },
];

fn s3() -> &'static UploadS3 {
    UploadS3::shared(BUCKETS)
}

/// Runs one upload check on `bucket` (path style, through a TLS proxy) with
/// the probe's key, or `secret` instead of its secret; `extra` keys.
async fn probe_upload(bucket: &str, secret: Option<&str>, extra: &str) -> Outcome {
    probe_upload_in(Env::new(), bucket, secret, extra).await
}

/// [`probe_upload`] in `env`.
async fn probe_upload_in(env: Env, bucket: &str, secret: Option<&str>, extra: &str) -> Outcome {
    let s3 = s3();
    let proxy = TlsProxy::start(&valid_leaf(), s3.addr());
    let (id, secret) = write_keys(env.path(), &s3.probe_id, secret.unwrap_or(&s3.probe_secret));
    let check = format!(
        "[[check]]\nname = \"upload\"\nkind = \"upload\"\nurl = {:?}\nresolve = \"127.0.0.1\"\n\
         region = \"fr-par\"\norigin = {APP:?}\ncontent_type = \"image/png\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\n{extra}\n",
        proxy.url(&format!("/{bucket}/")),
        id.display().to_string(),
        secret.display().to_string(),
    );
    env.write_checks("upload.toml", &check);
    let outcome = env.run_all().await.remove(0);
    // The presigned URLs and the key pair are credentials: nothing shown
    // or stored may hold them.
    let json = pretty(&outcome);
    assert!(!json.contains("X-Amz-Signature"), "{json}");
    assert!(!json.contains("X-Amz-Credential"), "{json}");
    assert!(!json.contains(&s3.probe_id), "{json}");
    assert!(!json.contains(&s3.probe_secret), "{json}");
    outcome
}

fn report(outcome: &Outcome) -> &UploadReport {
    outcome
        .upload
        .as_ref()
        .unwrap_or_else(|| panic!("no upload report in {}", pretty(outcome)))
}

/// A signer for the moto server itself (plain http, Host 127.0.0.1:PORT).
fn signer(bucket: &str, id: &str, secret: &str) -> object_store::aws::AmazonS3 {
    // object_store builds a reqwest client it will not use here; reqwest
    // needs a process-wide rustls provider for that.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    AmazonS3Builder::new()
        .with_endpoint(s3().server.endpoint())
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .with_region("fr-par")
        .with_access_key_id(id)
        .with_secret_access_key(secret)
        .build()
        .expect("object_store signer")
}

/// The keys under `prefix` in `bucket`, listed with a presigned
/// ListObjectsV2 of the administrator's key.
async fn keys_under(bucket: &str, prefix: &str) -> Vec<String> {
    let s3 = s3();
    let store = signer(bucket, &s3.admin_id, &s3.admin_secret);
    let options = SignedUrlOptions::default().with_query([("list-type", "2"), ("prefix", prefix)]);
    let url = store
        .signed_url_opts(
            http::Method::GET,
            &ObjectPath::from(""),
            Duration::from_secs(60),
            &options,
        )
        .await
        .expect("presign a listing");
    let target = format!("{}?{}", url.path(), url.query().unwrap_or_default());
    let (status, body) = http(s3.addr(), "GET", &target, &[], "");
    assert_eq!(status, 200, "ListObjectsV2 {bucket}: {body}");
    body.split("<Key>")
        .skip(1)
        .filter_map(|rest| rest.split("</Key>").next())
        .map(str::to_owned)
        .collect()
}

#[track_caller]
fn assert_failures(outcome: &Outcome, expected: &[&str]) {
    assert_eq!(assertion_names(outcome), expected, "{}", pretty(outcome));
    let status = match expected.is_empty() {
        true => Status::Up,
        false => Status::Down,
    };
    assert_eq!(outcome.status, status, "{}", pretty(outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn rule_admitting_preflight_and_put_passes_and_leaves_nothing() {
    let outcome = probe_upload("up-app", None, "").await;
    assert_failures(&outcome, &[]);
    let r = report(&outcome);
    assert!(r.ok, "{}", pretty(&outcome));
    assert_eq!(r.step, UploadStep::Delete);
    assert!(r.key.starts_with(PROBE_PREFIX), "{}", r.key);
    let preflight = r.preflight.as_ref().expect("preflight report");
    assert_eq!(preflight.preflight_status, 200);
    assert_eq!(preflight.allow_headers, ["content-type"]);
    assert_eq!(r.put_status, Some(200));
    assert_eq!(r.allow_origin.as_deref(), Some(APP));
    assert_eq!(r.expose_headers, ["ETag"]);
    assert_eq!(r.delete_status, Some(204));
    assert_eq!(r.error, None);
    assert_eq!(outcome.kind, vigie::check::KindName::Upload);
    assert!(
        outcome.tls.as_ref().is_some_and(|t| t.trusted),
        "{}",
        pretty(&outcome)
    );
    assert_eq!(
        keys_under("up-app", PROBE_PREFIX).await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rule_without_the_put_header_fails_at_preflight() {
    let outcome = probe_upload("up-headers", None, "").await;
    assert_failures(&outcome, &["upload.preflight"]);
    let f = failure(&outcome, "upload.preflight");
    assert!(f.expected.contains("content-type"), "{}", pretty(&outcome));
    assert!(
        f.observed.contains("x-amz-meta-owner"),
        "{}",
        pretty(&outcome)
    );
    let r = report(&outcome);
    assert_eq!((r.step, r.ok), (UploadStep::Preflight, false));
    // A browser stops at the refused preflight: no PUT, nothing to delete.
    assert_eq!(r.put_status, None);
    assert_eq!(r.delete_status, None);
    assert!(keys_under("up-headers", PROBE_PREFIX).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn rule_without_expose_headers_fails_at_expose_and_still_deletes() {
    let outcome = probe_upload("up-expose", None, "").await;
    assert_failures(&outcome, &["upload.expose"]);
    let f = failure(&outcome, "upload.expose");
    assert!(
        f.message.contains("does not expose etag"),
        "{}",
        pretty(&outcome)
    );
    assert_eq!(f.observed, "no Access-Control-Expose-Headers");
    let r = report(&outcome);
    assert_eq!((r.step, r.ok), (UploadStep::Expose, false));
    assert_eq!(r.put_status, Some(200));
    assert_eq!(r.delete_status, Some(204));
    assert!(keys_under("up-expose", PROBE_PREFIX).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_signature_fails_at_put_with_s3_code() {
    let outcome = probe_upload("up-tamper", Some("not-the-secret"), "").await;
    assert_failures(&outcome, &["upload.put"]);
    let f = failure(&outcome, "upload.put");
    assert!(
        f.observed
            .starts_with("403 SignatureDoesNotMatch: The request signature"),
        "{}",
        pretty(&outcome)
    );
    let r = report(&outcome);
    assert_eq!((r.step, r.ok), (UploadStep::Put, false));
    let error = r.error.as_ref().expect("S3 error");
    assert_eq!(error.code, "SignatureDoesNotMatch");
    assert_eq!(r.delete_status, None);
    assert!(keys_under("up-tamper", "").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn key_outside_the_allowed_prefix_is_access_denied() {
    let outcome = probe_upload("up-prefix", None, "key_prefix = \"elsewhere/\"").await;
    assert_failures(&outcome, &["upload.put"]);
    let r = report(&outcome);
    assert!(r.key.starts_with("elsewhere/"), "{}", r.key);
    assert_eq!(
        r.error.as_ref().map(|e| e.code.as_str()),
        Some("AccessDenied")
    );
    assert!(keys_under("up-prefix", "").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_name_the_replication_node() {
    // Replication is configured (never started here): its node names this
    // vigie in the object keys.
    let env = Env::with_config(
        "[replication]\nurl = \"s3://history/probe-7\"\ncredentials = \"environment\"\n",
    );
    let outcome = probe_upload_in(env, "up-node", None, "").await;
    assert_failures(&outcome, &[]);
    let key = &report(&outcome).key;
    assert!(key.starts_with("vigie-probe/probe-7/20"), "{key}");
    assert!(keys_under("up-node", "").await.is_empty());
}

/// The harness itself: moto refuses tampered and expired presigned URLs
/// as S3 does, and accepts a correct one.
#[tokio::test(flavor = "multi_thread")]
async fn moto_verifies_presigned_urls_like_s3() {
    let s3 = s3();
    let store = signer("up-harness", &s3.probe_id, &s3.probe_secret);
    let presign = |key: &str, secs: u64| {
        let options = SignedUrlOptions::default()
            .with_signed_header(http::header::CONTENT_TYPE, "image/png".parse().unwrap());
        let path = ObjectPath::from(key);
        let store = &store;
        async move {
            let url = store
                .signed_url_opts(
                    http::Method::PUT,
                    &path,
                    Duration::from_secs(secs),
                    &options,
                )
                .await
                .expect("presign");
            format!("{}?{}", url.path(), url.query().unwrap_or_default())
        }
    };
    let put = |target: &str| {
        http(
            s3.addr(),
            "PUT",
            target,
            &[("content-type", "image/png")],
            "x",
        )
    };

    let good = presign("vigie-probe/harness/good", 60).await;
    assert_eq!(put(&good).0, 200);
    let (status, body) = http(
        s3.addr(),
        "PUT",
        &good,
        &[("content-type", "text/plain")],
        "x",
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("<Code>SignatureDoesNotMatch</Code>"),
        "{body}"
    );

    let (status, body) = put(&tampered(&good));
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("<Code>SignatureDoesNotMatch</Code>"),
        "{body}"
    );

    let outside = presign("other/harness", 60).await;
    let (status, body) = put(&outside);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("<Code>AccessDenied</Code>"), "{body}");

    let expiring = presign("vigie-probe/harness/late", 1).await;
    // X-Amz-Date has a one-second resolution: past two seconds the URL is
    // expired however the signing second was cut.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, body) = put(&expiring);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("<Code>AccessDenied</Code><Message>Request has expired</Message>"),
        "{body}"
    );
    assert_eq!(
        keys_under("up-harness", PROBE_PREFIX).await,
        ["vigie-probe/harness/good"]
    );
}

/// A presigned target with the last hex digit of its signature changed.
fn tampered(target: &str) -> String {
    let (rest, last) = target.split_at(target.len() - 1);
    format!("{rest}{}", if last == "0" { "1" } else { "0" })
}
