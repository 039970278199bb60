//! Judging an upload outcome: each step the probe reached, in order, the
//! way the browser running the app's upload would meet it.
//!
//! The preflight is judged by the cors rules (`evaluate::cors`) for
//! exactly what the app's PUT asks (method `PUT`, header `content-type`);
//! the PUT's own answer must admit the origin and expose the headers the
//! page reads. The probe calls [`preflight_failures`] and
//! [`expose_failures`] too, to stop where a browser would stop: one
//! judgment, used before and after the facts are stored.

use super::cors;
use crate::check::{CorsCheck, UploadCheck};
use crate::outcome::{Assertion, CorsReport, Failure, UploadReport, UploadStep};

/// The header the app's PUT carries that is not CORS-safelisted with a
/// non-form media type, and is therefore in the preflight.
pub const SIGNED_HEADER: &str = "content-type";

pub(super) fn judge(check: &UploadCheck, report: &UploadReport, out: &mut Vec<Failure>) {
    let before = out.len();
    judge_steps(check, report, out);
    // A step that failed without an answer to judge (the DELETE could not
    // be signed) is still a failure of that step.
    if !report.ok && out.len() == before {
        let reason = report
            .reason
            .as_deref()
            .unwrap_or("the step did not complete");
        out.push(Failure {
            assertion: report.step.assertion(),
            expected: format!("the {} step completes", step_name(report.step)),
            observed: reason.to_string(),
            message: format!(
                "upload of {} failed at {}: {reason}",
                report.key,
                step_name(report.step)
            ),
        });
    }
}

fn step_name(step: UploadStep) -> &'static str {
    match step {
        UploadStep::Presign => "presign",
        UploadStep::Preflight => "preflight",
        UploadStep::Put => "put",
        UploadStep::Expose => "expose",
        UploadStep::Delete => "delete",
    }
}

fn judge_steps(check: &UploadCheck, report: &UploadReport, out: &mut Vec<Failure>) {
    if report.step == UploadStep::Presign && !report.ok {
        let reason = report.reason.as_deref().unwrap_or("unknown error");
        out.push(Failure {
            assertion: Assertion::UploadPresign,
            expected: "a presigned PUT URL".to_string(),
            observed: reason.to_string(),
            message: format!("cannot presign a PUT for {}: {reason}", report.key),
        });
        return;
    }
    if let Some(preflight) = &report.preflight {
        for f in preflight_failures(check, preflight) {
            out.push(Failure {
                assertion: Assertion::UploadPreflight,
                message: format!(
                    "an upload from {} fails at the preflight: {}",
                    check.origin, f.message
                ),
                ..f
            });
        }
    }
    if let Some(status) = report.put_status {
        if !(200..300).contains(&status) {
            out.push(refusal(Assertion::UploadPut, "PUT", status, report));
        } else {
            let failures = expose_failures(
                check,
                report.allow_origin.as_deref(),
                &report.expose_headers,
            );
            out.extend(failures);
        }
    }
    if let Some(status) = report.delete_status {
        if !(200..300).contains(&status) {
            out.push(refusal(Assertion::UploadDelete, "DELETE", status, report));
        }
    }
}

/// A PUT or DELETE the bucket refused, with S3's code and message.
fn refusal(assertion: Assertion, method: &str, status: u16, report: &UploadReport) -> Failure {
    let why = report
        .error
        .as_ref()
        .map(|e| format!(" {e}"))
        .unwrap_or_default();
    let consequence = match assertion {
        Assertion::UploadDelete => ": the probe object stays in the bucket",
        _ => ": browsers cannot upload",
    };
    Failure {
        assertion,
        expected: format!("a 2xx answer to the presigned {method}"),
        observed: format!("{status}{why}"),
        message: format!(
            "bucket refused the {method} of {} (HTTP {status}{why}){consequence}",
            report.key
        ),
    }
}

/// What a browser would object to in the preflight of the app's PUT (the
/// cors judgments, with their `cors.*` assertions).
pub fn preflight_failures(check: &UploadCheck, report: &CorsReport) -> Vec<Failure> {
    let cors = CorsCheck {
        origin: check.origin.clone(),
        method: "PUT".to_string(),
        request_headers: vec![SIGNED_HEADER.to_string()],
        deny_origins: Vec::new(),
        // Without credentials a browser accepts `*` as well as its origin.
        allow_any_origin: true,
        credentials: false,
        min_max_age: None,
        // Exposed headers are judged on the PUT's answer, where the
        // browser reads them.
        expose_headers: Vec::new(),
    };
    let mut out = Vec::new();
    cors::judge(&cors, report, &mut out);
    out
}

/// What a browser would object to in the PUT's answer: an
/// Access-Control-Allow-Origin that does not admit the page (the upload
/// fails as a network error), or a header the page must read that is not
/// exposed (a multipart upload cannot read each part's ETag).
pub fn expose_failures(
    check: &UploadCheck,
    allow_origin: Option<&str>,
    exposed: &[String],
) -> Vec<Failure> {
    let mut out = Vec::new();
    if !matches!(allow_origin, Some(a) if a == check.origin || a == "*") {
        let observed = match allow_origin {
            Some(a) => format!("Access-Control-Allow-Origin: {a}"),
            None => "no Access-Control-Allow-Origin".to_string(),
        };
        out.push(Failure {
            assertion: Assertion::UploadExpose,
            expected: format!("Access-Control-Allow-Origin: {} on the PUT's answer", check.origin),
            observed: observed.clone(),
            message: format!(
                "the PUT's answer does not admit {} ({observed}): the browser reports the upload as failed",
                check.origin
            ),
        });
    }
    let any = exposed.iter().any(|h| h == "*");
    let missing: Vec<&str> = check
        .expose_headers
        .iter()
        .filter(|want| !any && !exposed.iter().any(|h| h.eq_ignore_ascii_case(want)))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        let observed = match exposed.is_empty() {
            true => "no Access-Control-Expose-Headers".to_string(),
            false => format!("Access-Control-Expose-Headers: {}", exposed.join(", ")),
        };
        out.push(Failure {
            assertion: Assertion::UploadExpose,
            expected: format!("Access-Control-Expose-Headers including {}", check.expose_headers.join(", ")),
            observed,
            message: format!(
                "the PUT's answer does not expose {} to the page (add ExposeHeader to the bucket's CORS rule)",
                missing.join(", ")
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::UploadKeys;

    fn check() -> UploadCheck {
        UploadCheck {
            bucket: "uploads".into(),
            endpoint: "https://s3.example/".parse().unwrap(),
            virtual_host: false,
            region: "fr-par".into(),
            origin: "https://app.example.com".into(),
            key_prefix: "vigie-probe/".into(),
            node: "n".into(),
            content_type: "image/png".into(),
            expose_headers: vec!["etag".into()],
            keys: UploadKeys {
                access_key_id: "id".into(),
                secret_access_key: "secret".into(),
            },
        }
    }

    fn report(step: UploadStep, ok: bool) -> UploadReport {
        UploadReport {
            ok,
            ..UploadReport::new("vigie-probe/n/1".into(), step)
        }
    }

    #[test]
    fn exposed_headers_compare_without_case_and_star_covers_all() {
        let c = check();
        let origin = Some("https://app.example.com");
        assert!(expose_failures(&c, origin, &["ETag".into()]).is_empty());
        assert!(expose_failures(&c, Some("*"), &["*".into()]).is_empty());
        let f = expose_failures(&c, origin, &["x-amz-request-id".into()]);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("does not expose etag"),
            "{}",
            f[0].message
        );
        let f = expose_failures(&c, Some("https://other.example"), &["etag".into()]);
        assert_eq!(
            f[0].observed,
            "Access-Control-Allow-Origin: https://other.example"
        );
    }

    #[test]
    fn a_refused_put_quotes_s3() {
        let mut r = report(UploadStep::Put, false);
        r.put_status = Some(403);
        r.error = Some(crate::outcome::S3Error {
            code: "SignatureDoesNotMatch".into(),
            message: "The request signature we calculated does not match".into(),
        });
        let mut out = Vec::new();
        judge(&check(), &r, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].assertion, Assertion::UploadPut);
        assert!(
            out[0]
                .observed
                .starts_with("403 SignatureDoesNotMatch: The request"),
            "{}",
            out[0].observed
        );
    }

    #[test]
    fn a_delete_that_could_not_be_signed_fails_delete() {
        let mut r = report(UploadStep::Delete, false);
        r.put_status = Some(200);
        r.allow_origin = Some("https://app.example.com".into());
        r.expose_headers = vec!["ETag".into()];
        r.reason = Some("Generic S3 error: bad".into());
        let mut out = Vec::new();
        judge(&check(), &r, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].assertion, Assertion::UploadDelete);
        assert_eq!(out[0].observed, "Generic S3 error: bad");
    }

    #[test]
    fn a_passed_upload_has_no_failures() {
        let mut r = report(UploadStep::Delete, true);
        r.put_status = Some(200);
        r.allow_origin = Some("https://app.example.com".into());
        r.expose_headers = vec!["ETag".into()];
        r.delete_status = Some(204);
        let mut out = Vec::new();
        judge(&check(), &r, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }
}
