//! Judging a CORS preflight the way a browser does (Fetch standard, "CORS
//! check" and "CORS-preflight fetch"), so that a pass here means uploads
//! work from the app origin and a fail says which header a browser would
//! stumble on.

use crate::check::CorsCheck;
use crate::outcome::{Assertion, CorsReport, Failure};

/// Methods a browser never asks permission for.
const SAFELISTED_METHODS: [&str; 3] = ["GET", "HEAD", "POST"];

pub(super) fn judge(check: &CorsCheck, report: &CorsReport, out: &mut Vec<Failure>) {
    if !preflight_ok(check, report, out) {
        denied_origins(report, out);
        return;
    }
    allow_origin(check, report, out);
    methods(check, report, out);
    headers(check, report, out);
    max_age(check, report, out);
    expose_headers(check, report, out);
    denied_origins(report, out);
}

/// A refused or redirected preflight fails everything after it; the other
/// headers would only be noise.
fn preflight_ok(check: &CorsCheck, report: &CorsReport, out: &mut Vec<Failure>) -> bool {
    let status = report.preflight_status;
    if (200..300).contains(&status) {
        return true;
    }
    let (observed, message) = if (300..400).contains(&status) {
        let target = report.location.as_deref().unwrap_or("no Location");
        (
            format!("{status} redirect to {target}"),
            format!(
                "preflight for {} was redirected (HTTP {status} to {target}): browsers refuse a redirected preflight, so uploads fail",
                check.origin
            ),
        )
    } else {
        let why = report
            .refusal
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        (
            format!("{status}{why}"),
            format!(
                "bucket refused the preflight for {} {} (HTTP {status}{why})",
                check.method, check.origin
            ),
        )
    };
    out.push(Failure {
        assertion: Assertion::CorsPreflight,
        expected: "a 2xx answer to the preflight".to_string(),
        observed,
        message,
    });
    false
}

fn allow_origin(check: &CorsCheck, report: &CorsReport, out: &mut Vec<Failure>) {
    let credentials_allowed = report.allow_credentials == Some(true);
    let problem = match report.allow_origin.as_deref() {
        None => Some(format!(
            "the preflight answer has no Access-Control-Allow-Origin: browsers refuse uploads from {}",
            check.origin
        )),
        Some("*") if credentials_allowed => Some(
            "Access-Control-Allow-Origin: * together with Access-Control-Allow-Credentials: true is invalid: browsers refuse it"
                .to_string(),
        ),
        Some("*") if check.credentials => Some(
            "Access-Control-Allow-Origin: * never admits a request with credentials".to_string(),
        ),
        Some("*") if !check.allow_any_origin => Some(format!(
            "bucket admits any origin (*), not just {} (set allow_any_origin = true if it is public on purpose)",
            check.origin
        )),
        Some("*") => None,
        Some(other) if other != check.origin => Some(format!(
            "bucket admits {other}, not {}: browsers refuse uploads from the app",
            check.origin
        )),
        Some(_) if check.credentials && !credentials_allowed => Some(format!(
            "requests with credentials need Access-Control-Allow-Credentials: true (got {})",
            report.allow_credentials.map_or("none", |_| "another value")
        )),
        Some(_) => None,
    };
    if let Some(message) = problem {
        out.push(Failure {
            assertion: Assertion::CorsOrigin,
            expected: format!("Access-Control-Allow-Origin: {}", check.origin),
            observed: report
                .allow_origin
                .as_deref()
                .map_or("none".to_string(), |o| {
                    format!("Access-Control-Allow-Origin: {o}")
                }),
            message,
        });
    }
}

/// Fetch compares methods byte for byte: `put` does not allow `PUT`.
fn methods(check: &CorsCheck, report: &CorsReport, out: &mut Vec<Failure>) {
    let method = check.method.as_str();
    let listed = report.allow_methods.iter().any(|m| m == method);
    let wildcard = !check.credentials && report.allow_methods.iter().any(|m| m == "*");
    if SAFELISTED_METHODS.contains(&method) || listed || wildcard {
        return;
    }
    let observed = shown(&report.allow_methods);
    out.push(Failure {
        assertion: Assertion::CorsMethods,
        expected: format!("Access-Control-Allow-Methods including {method}"),
        message: format!("preflight does not allow {method} (allowed: {observed})"),
        observed,
    });
}

/// Header names compare case-insensitively; `*` covers every name except
/// `authorization`, and nothing when credentials are sent.
fn headers(check: &CorsCheck, report: &CorsReport, out: &mut Vec<Failure>) {
    let wildcard = !check.credentials && report.allow_headers.iter().any(|h| h == "*");
    let missing: Vec<&str> = check
        .request_headers
        .iter()
        .map(String::as_str)
        .filter(|name| {
            let listed = report
                .allow_headers
                .iter()
                .any(|h| h.eq_ignore_ascii_case(name));
            !(listed || (wildcard && *name != "authorization"))
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let observed = shown(&report.allow_headers);
    out.push(Failure {
        assertion: Assertion::CorsHeaders,
        expected: format!(
            "Access-Control-Allow-Headers covering {}",
            check.request_headers.join(", ")
        ),
        message: format!(
            "preflight does not allow request header {} (allowed: {observed})",
            missing.join(", ")
        ),
        observed,
    });
}

fn max_age(check: &CorsCheck, report: &CorsReport, out: &mut Vec<Failure>) {
    let Some(min) = check.min_max_age else {
        return;
    };
    let min_secs = min.as_secs();
    if report.max_age.is_some_and(|age| age >= min_secs) {
        return;
    }
    let observed = report
        .max_age
        .map_or("no Access-Control-Max-Age".to_string(), |age| {
            format!("{age} s")
        });
    out.push(Failure {
        assertion: Assertion::CorsMaxAge,
        expected: format!(">= {min_secs} s"),
        message: format!(
            "preflight may be cached for {observed}, less than {}: browsers repeat it before uploads",
            crate::when::std_span(min)
        ),
        observed,
    });
}

fn expose_headers(check: &CorsCheck, report: &CorsReport, out: &mut Vec<Failure>) {
    let wildcard = !check.credentials && report.expose_headers.iter().any(|h| h == "*");
    let missing: Vec<&str> = check
        .expose_headers
        .iter()
        .map(String::as_str)
        .filter(|name| {
            !wildcard
                && !report
                    .expose_headers
                    .iter()
                    .any(|h| h.eq_ignore_ascii_case(name))
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let observed = shown(&report.expose_headers);
    out.push(Failure {
        assertion: Assertion::CorsExposeHeaders,
        expected: format!(
            "Access-Control-Expose-Headers including {}",
            check.expose_headers.join(", ")
        ),
        message: format!(
            "the page cannot read response header {} (exposed: {observed})",
            missing.join(", ")
        ),
        observed,
    });
}

fn denied_origins(report: &CorsReport, out: &mut Vec<Failure>) {
    for denied in report.denied.iter().filter(|d| d.admitted) {
        let allow = denied.allow_origin.as_deref().unwrap_or_default();
        out.push(Failure {
            assertion: Assertion::CorsDeniedOrigin,
            expected: format!("no Access-Control-Allow-Origin admitting {}", denied.origin),
            observed: format!("Access-Control-Allow-Origin: {allow}"),
            message: format!(
                "bucket admits the foreign origin {} (Access-Control-Allow-Origin: {allow})",
                denied.origin
            ),
        });
    }
}

fn shown(values: &[String]) -> String {
    match values.is_empty() {
        true => "none".to_string(),
        false => values.join(", "),
    }
}
