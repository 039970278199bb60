//! Judging: `(check, outcome, now) -> status + failures`, pure.
//!
//! Every failure says what was expected and what was observed, in words an
//! operator can act on at 3 a.m. The certificate is judged from the chain as
//! served, independently of whether WebPKI accepted it, so one probe can
//! report "expired *and* wrong host" instead of whichever error WebPKI met
//! first.

mod ca;
pub mod caa;
mod caa_value;
mod cors;
mod dns;
mod dnssec;
mod domain;
mod key_exchange;
mod lifetime;
pub mod upload;

use std::time::Duration;

use time::OffsetDateTime;

use crate::cert;
use crate::cert::CertInfo;
use crate::check::{Check, CheckKind, HttpExpect, TlsExpect};
use crate::outcome::{
    Assertion, Failure, HttpReport, Outcome, ProbeError, Status, TlsReport, VerifyError,
};

/// Fills `outcome.failures` and `outcome.status`.
pub fn evaluate(check: &Check, outcome: &mut Outcome, now: OffsetDateTime) {
    let mut failures = Vec::new();
    let mut floor = Status::Up;
    if let Some(tls) = &outcome.tls {
        judge_tls(&check.tls, tls, now, &mut failures);
        key_exchange::judge(&check.tls, tls, &mut failures);
        floor = ca::judge(&check.tls, tls, now, &mut failures);
    }
    if let Some(err) = &outcome.probe_error {
        if !failures.iter().any(|f| f.assertion == err.kind) {
            failures.push(probe_failure(check, err));
        }
    }
    match &check.kind {
        CheckKind::Http(http) => {
            if let Some(report) = &outcome.http {
                judge_http(&http.expect, report, &mut failures);
            }
        }
        CheckKind::Cors(cors) => {
            if let Some(report) = &outcome.cors {
                cors::judge(cors, report, &mut failures);
            }
        }
        CheckKind::Dns(dns) => {
            if let Some(report) = &outcome.dns {
                dns::judge(dns, report, &mut failures);
            }
        }
        CheckKind::Upload(upload) => {
            if let Some(report) = &outcome.upload {
                upload::judge(upload, report, &mut failures);
            }
        }
        CheckKind::Domain(check) => {
            if let Some(report) = &outcome.domain {
                domain::judge(&check.rules, report, now, &mut failures);
            }
        }
        // Their verdict is the chain's, judged above, and the probe's
        // error: a tls check speaks no protocol, and an smtp check's
        // conversation fails as a probe error (`smtp.*`).
        CheckKind::Tls(_) | CheckKind::Smtp(_) => {}
    }
    outcome.status = failures
        .iter()
        .map(|f| f.assertion.severity())
        .fold(floor, Status::max);
    outcome.failures = failures;
}

fn probe_failure(check: &Check, err: &ProbeError) -> Failure {
    let expected = match err.kind {
        Assertion::Dns => match &check.kind {
            CheckKind::Dns(_) => "an answer from the resolvers".to_string(),
            _ => "the host name resolves".to_string(),
        },
        Assertion::Connect => "a TCP connection".to_string(),
        Assertion::Timeout => format!("an answer within {}", crate::when::std_span(check.timeout)),
        Assertion::TlsHandshake => "a TLS handshake".to_string(),
        Assertion::HttpProtocol => "a valid HTTP response".to_string(),
        Assertion::SmtpBanner => "a 220 greeting from an SMTP server".to_string(),
        Assertion::SmtpEhlo => "a 250 answer to EHLO".to_string(),
        Assertion::SmtpStarttls => "STARTTLS offered and accepted".to_string(),
        Assertion::HttpRedirect => format!(
            "at most {} redirects, without a loop",
            crate::check::MAX_REDIRECTS
        ),
        other => format!("{other} holds"),
    };
    Failure {
        assertion: err.kind,
        expected,
        observed: err.message.clone(),
        message: err.message.clone(),
    }
}

fn judge_tls(expect: &TlsExpect, tls: &TlsReport, now: OffsetDateTime, out: &mut Vec<Failure>) {
    let Some(leaf) = tls.chain.first() else {
        return;
    };
    judge_trust(tls, out);
    if !tls.hostname_matches {
        out.push(Failure {
            assertion: Assertion::TlsHostname,
            expected: format!("a certificate covering {}", tls.server_name),
            observed: names(&leaf.sans),
            message: format!(
                "certificate does not cover {} (it covers {})",
                tls.server_name,
                names(&leaf.sans)
            ),
        });
    }
    // Expiry on the verified path: a cross-sign served for older clients
    // and not on the path does not break this one.
    match &tls.verified_path {
        Some(path) => {
            let on_path: Vec<CertInfo> = path
                .iter()
                .filter_map(|&i| tls.chain.get(i).cloned())
                .collect();
            judge_validity(expect, &on_path, now, out);
        }
        None => judge_validity(expect, &tls.chain, now, out),
    }
    if let Some(pattern) = &expect.issuer {
        if !pattern.is_match(&leaf.issuer) {
            out.push(Failure {
                assertion: Assertion::TlsIssuer,
                expected: format!("issuer matching /{pattern}/"),
                observed: leaf.issuer.clone(),
                message: format!(
                    "certificate issued by {}, not by the expected CA",
                    cert::common_name(&leaf.issuer)
                ),
            });
        }
    }
    // A refusal the judgments above did not explain (clock skew, a bad
    // signature, an unusual WebPKI error) must still be reported.
    if let Some(err) = &tls.verify_error {
        if !out.iter().any(|f| f.assertion == err.assertion()) {
            out.push(trust_failure(err));
        }
    }
}

/// Trust problems that dates and names do not already explain.
fn judge_trust(tls: &TlsReport, out: &mut Vec<Failure>) {
    let Some(err) = &tls.verify_error else {
        return;
    };
    match err {
        VerifyError::Expired { .. }
        | VerifyError::NotYetValid { .. }
        | VerifyError::HostnameMismatch { .. } => {}
        _ => out.push(trust_failure(err)),
    }
}

fn trust_failure(err: &VerifyError) -> Failure {
    let (expected, observed) = match err {
        VerifyError::StagingIssuer { issuer } => (
            "a chain to a browser-trusted root".to_string(),
            format!("staging issuer {issuer}"),
        ),
        VerifyError::SelfSigned { subject } => (
            "a chain to a trusted root".to_string(),
            format!("self-signed {subject}"),
        ),
        VerifyError::ChainIncomplete { missing_issuer } => (
            "the intermediate certificates served with the leaf".to_string(),
            format!("{missing_issuer} not served"),
        ),
        VerifyError::UnknownIssuer { issuer } => (
            "a chain to a trusted root".to_string(),
            format!("unknown CA {issuer}"),
        ),
        other => ("a trusted chain".to_string(), other.to_string()),
    };
    let message = match err {
        VerifyError::StagingIssuer { issuer } => format!(
            "certificate comes from the Let's Encrypt staging CA ({}), which browsers do not trust: \
             the ACME issuer points at the staging endpoint",
            cert::common_name(issuer)
        ),
        other => other.to_string(),
    };
    Failure {
        assertion: err.assertion(),
        expected,
        observed,
        message,
    }
}

/// Expiry, renewal and not-yet-valid, judged on the earliest-expiring
/// certificate served (an expired intermediate breaks the site as surely as
/// an expired leaf).
fn judge_validity(
    expect: &TlsExpect,
    chain: &[CertInfo],
    now: OffsetDateTime,
    out: &mut Vec<Failure>,
) {
    if let Some(future) = chain
        .iter()
        .filter(|c| c.not_before > now)
        .max_by_key(|c| c.not_before)
    {
        out.push(Failure {
            assertion: Assertion::TlsNotYetValid,
            expected: format!("valid now ({})", crate::when::minute(now)),
            observed: format!("valid from {}", crate::when::minute(future.not_before)),
            message: format!(
                "{} is not valid until {} (in {}): check the issuer's or the server's clock",
                which(chain, future),
                crate::when::minute(future.not_before),
                days_phrase((future.not_before - now).whole_days())
            ),
        });
    }
    let Some(first) = cert::earliest_expiry(chain) else {
        return;
    };
    let left = first.not_after - now;
    let lifetime = first.not_after - first.not_before;
    let limits = lifetime::thresholds(expect.critical_days, lifetime);
    let hours = limits.short_lived;
    let (expected, observed) = match hours {
        true => (
            format!(
                ">= {} hours (a tenth of the {}-hour lifetime)",
                limits.critical.whole_hours(),
                lifetime.whole_hours()
            ),
            format!("{} hours", left.whole_hours()),
        ),
        false => (
            format!(">= {} days", expect.critical_days),
            format!("{} days", left.whole_days()),
        ),
    };
    if first.not_after <= now {
        let ago = match (-left < unit(hours), hours) {
            (true, false) => "today".to_string(),
            (true, true) => "less than an hour ago".to_string(),
            (false, _) => format!("{} ago", lifetime::phrase(-left, hours)),
        };
        out.push(Failure {
            assertion: Assertion::TlsExpiry,
            expected,
            observed,
            message: format!(
                "{} expired {ago} (on {})",
                which(chain, first),
                crate::when::minute(first.not_after)
            ),
        });
    } else if left < limits.critical {
        out.push(Failure {
            assertion: Assertion::TlsExpiry,
            expected,
            observed,
            message: format!(
                "{} expires in {} (on {})",
                which(chain, first),
                lifetime::phrase(left, hours),
                crate::when::minute(first.not_after)
            ),
        });
    } else if let Some(failure) = renewal_overdue(expect, chain, first, hours, now) {
        out.push(failure);
    }
}

/// The unit spans are said in: an hour for short-lived certificates.
fn unit(hours: bool) -> time::Duration {
    match hours {
        true => time::Duration::HOUR,
        false => time::Duration::DAY,
    }
}

fn renewal_overdue(
    expect: &TlsExpect,
    chain: &[CertInfo],
    first: &CertInfo,
    hours: bool,
    now: OffsetDateTime,
) -> Option<Failure> {
    let left = first.not_after - now;
    let lifetime = first.not_after - first.not_before;
    let (span, of) = match hours {
        true => (
            format!("{} hours", left.whole_hours()),
            format!("{}-hour", lifetime.whole_hours()),
        ),
        false => (
            format!("{} days", left.whole_days()),
            format!("{}-day", lifetime.whole_days()),
        ),
    };
    let (overdue, expected) = match expect.warn_days {
        Some(warn) => (
            left.whole_days() < i64::from(warn),
            format!(">= {warn} days"),
        ),
        None => (
            lifetime::under_a_quarter(left, lifetime),
            format!(">= a quarter of the {of} lifetime"),
        ),
    };
    let total = match hours {
        true => lifetime.whole_hours(),
        false => lifetime.whole_days(),
    };
    overdue.then(|| Failure {
        assertion: Assertion::TlsRenewalOverdue,
        expected,
        observed: format!("{span} of {total} left"),
        message: format!(
            "{} expires in {} (on {}): renewal looks stuck",
            which(chain, first),
            lifetime::phrase(left, hours),
            crate::when::minute(first.not_after)
        ),
    })
}

/// "certificate" for the leaf, "intermediate CN=..." otherwise.
fn which(chain: &[CertInfo], cert: &CertInfo) -> String {
    match chain.first() {
        Some(leaf) if std::ptr::eq(leaf, cert) => "certificate".to_string(),
        _ => format!(
            "intermediate certificate {}",
            cert::common_name(&cert.subject)
        ),
    }
}

fn days_phrase(days: i64) -> String {
    match days {
        1 => "1 day".to_string(),
        n => format!("{n} days"),
    }
}

fn names(sans: &[String]) -> String {
    match sans.is_empty() {
        true => "no DNS names".to_string(),
        false => sans.join(", "),
    }
}

fn judge_http(expect: &HttpExpect, report: &HttpReport, out: &mut Vec<Failure>) {
    judge_status(expect, report, out);
    let body = String::from_utf8_lossy(&report.body);
    let scope = match report.body_truncated {
        true => format!("in the first {} bytes", report.body_bytes),
        false => format!("in the {}-byte body", report.body_bytes),
    };
    if let Some(marker) = &expect.body_contains {
        if !body.contains(marker.as_str()) {
            out.push(Failure {
                assertion: Assertion::HttpBody,
                expected: format!("body containing {marker:?}"),
                observed: format!("not found {scope}"),
                message: format!("page does not contain {marker:?} ({scope})"),
            });
        }
    }
    if let Some(pattern) = &expect.body_regex {
        if !pattern.is_match(&body) {
            out.push(Failure {
                assertion: Assertion::HttpBody,
                expected: format!("body matching /{pattern}/"),
                observed: format!("no match {scope}"),
                message: format!("page does not match /{pattern}/ ({scope})"),
            });
        }
    }
    for (name, pattern) in &expect.headers {
        // Matched against the value as received; quoted only as shown
        // (escaped, capped, redacted at capture): a failure message is
        // stored, mailed and logged.
        let header = report.headers.iter().find(|h| h.name == name.as_str());
        let observed = match header {
            Some(h) if pattern.is_match(&h.value) => continue,
            Some(h) => format!("{name}: {}", h.shown),
            None => format!("no {name} header"),
        };
        out.push(Failure {
            assertion: Assertion::HttpHeader,
            expected: format!("{name} matching /{pattern}/"),
            message: format!("header {name} does not match /{pattern}/ ({observed})"),
            observed,
        });
    }
    if let Some(max) = expect.max_response_time {
        // Saturating: from_secs_f64 panics on a negative, NaN or huge value.
        let seconds = report.response_ms / 1000.0;
        let took = Duration::try_from_secs_f64(seconds).unwrap_or(match seconds > 0.0 {
            true => Duration::MAX,
            false => Duration::ZERO,
        });
        if took > max {
            out.push(Failure {
                assertion: Assertion::HttpResponseTime,
                expected: format!("<= {}", crate::when::std_span(max)),
                observed: format!("{:.0} ms", report.response_ms),
                message: format!(
                    "answered in {:.0} ms, slower than {}",
                    report.response_ms,
                    crate::when::std_span(max)
                ),
            });
        }
    }
}

fn judge_status(expect: &HttpExpect, report: &HttpReport, out: &mut Vec<Failure>) {
    let ok = match expect.status.is_empty() {
        true => (200..300).contains(&report.status),
        false => expect.status.contains(&report.status),
    };
    if ok {
        return;
    }
    let expected = match expect.status.is_empty() {
        true => "2xx".to_string(),
        false => expect
            .status
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" or "),
    };
    let reason = http::StatusCode::from_u16(report.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| format!(" {r}"))
        .unwrap_or_default();
    out.push(Failure {
        assertion: Assertion::HttpStatus,
        expected: expected.clone(),
        observed: report.status.to_string(),
        message: format!("HTTP {}{reason} (expected {expected})", report.status),
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cert::CertInfo;
    use crate::check::{Cadence, HttpCheck};
    use crate::outcome::ProbeError;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn check() -> Check {
        Check {
            name: "site".into(),
            url: "https://www.example.test/".parse().unwrap(),
            resolve: None,
            every: Cadence::Every(Duration::from_secs(30)),
            timeout: Duration::from_secs(10),
            labels: BTreeMap::new(),
            tls: TlsExpect::default(),
            alert: Default::default(),
            kind: CheckKind::Http(HttpCheck {
                follow_redirects: true,
                redirect_to_private: false,
                redact_headers: Vec::new(),
                expect: HttpExpect::default(),
            }),
        }
    }

    fn cert(subject: &str, days_left: i64, lifetime: i64) -> CertInfo {
        CertInfo {
            subject: format!("CN={subject}"),
            issuer: "CN=Test CA".into(),
            not_before: now() + time::Duration::days(days_left - lifetime),
            not_after: now() + time::Duration::days(days_left) + time::Duration::hours(1),
            days_left,
            hours_left: days_left * 24,
            lifetime_hours: lifetime * 24,
            sans: vec![subject.to_string()],
            serial: "01".into(),
            sha256: "00".into(),
            key: "ECDSA P-256".into(),
            signature: "ecdsa-with-SHA256".into(),
        }
    }

    fn outcome(chain: Vec<CertInfo>, hostname_matches: bool) -> Outcome {
        Outcome {
            name: "site".into(),
            kind: crate::check::KindName::Http,
            target: "https://www.example.test/".into(),
            status: Status::Up,
            started_at: now(),
            duration_ms: 1.0,
            failures: vec![],
            probe_error: None,
            http: None,
            tls: Some(TlsReport {
                server_name: "www.example.test".into(),
                version: Some("TLSv1.3".into()),
                cipher_suite: None,
                key_exchange: None,
                trusted: true,
                verify_error: None,
                hostname_matches,
                ari: None,
                revocation: Vec::new(),
                verified_path: None,
                chain: chain.into(),
            }),
            cors: None,
            dns: None,
            upload: None,
            smtp: None,
            domain: None,
        }
    }

    fn judged(mut o: Outcome) -> Outcome {
        evaluate(&check(), &mut o, now());
        o
    }

    #[test]
    fn an_expiring_intermediate_is_named() {
        let o = judged(outcome(
            vec![
                cert("www.example.test", 60, 90),
                cert("Old Intermediate", 3, 1000),
            ],
            true,
        ));
        assert_eq!(o.status, Status::Down);
        assert_eq!(
            o.failures[0].message,
            "intermediate certificate Old Intermediate expires in 3 days (on 2027-01-18 09:00 UTC)"
        );
    }

    #[test]
    fn expired_and_wrong_host_are_both_reported() {
        let mut o = outcome(vec![cert("other.test", -2, 90)], false);
        o.tls.as_mut().unwrap().trusted = false;
        o.tls.as_mut().unwrap().verify_error = Some(VerifyError::Expired {
            not_after: now() - time::Duration::days(2),
        });
        let o = judged(o);
        let names: Vec<_> = o.failures.iter().map(|f| f.assertion.as_str()).collect();
        assert_eq!(names, ["tls.hostname", "tls.expiry"]);
    }

    #[test]
    fn renewal_overdue_only_warns() {
        let o = judged(outcome(vec![cert("www.example.test", 20, 90)], true));
        assert_eq!(o.status, Status::Warn);
        assert_eq!(o.failures[0].assertion, Assertion::TlsRenewalOverdue);
    }

    fn short(hours_left: i64, lifetime_hours: i64) -> CertInfo {
        let not_after = now() + time::Duration::hours(hours_left) + time::Duration::minutes(30);
        CertInfo {
            not_before: not_after - time::Duration::hours(lifetime_hours),
            not_after,
            ..cert("www.example.test", 0, 0)
        }
    }

    #[test]
    fn a_160_hour_certificate_is_judged_in_hours() {
        let fresh = judged(outcome(vec![short(159, 160)], true));
        assert_eq!(fresh.status, Status::Up, "{:?}", fresh.failures);
        let aging = judged(outcome(vec![short(30, 160)], true));
        assert_eq!(aging.status, Status::Warn);
        assert_eq!(aging.failures[0].assertion, Assertion::TlsRenewalOverdue);
        assert_eq!(aging.failures[0].observed, "30 hours of 160 left");
        assert_eq!(
            aging.failures[0].expected,
            ">= a quarter of the 160-hour lifetime"
        );
        let late = judged(outcome(vec![short(10, 160)], true));
        assert_eq!(late.status, Status::Down);
        assert_eq!(late.failures[0].assertion, Assertion::TlsExpiry);
        assert_eq!(
            late.failures[0].expected,
            ">= 16 hours (a tenth of the 160-hour lifetime)"
        );
        assert!(
            late.failures[0]
                .message
                .starts_with("certificate expires in 10 hours"),
            "{}",
            late.failures[0].message
        );
    }

    #[test]
    fn six_day_certificates_are_no_longer_down_from_birth() {
        // Before issue 17 a 6-day certificate with 5 days left was down
        // (5 < 7 critical days); it is now judged on its lifetime.
        let fresh = judged(outcome(vec![cert("www.example.test", 5, 6)], true));
        assert_eq!(fresh.status, Status::Up, "{:?}", fresh.failures);
        let mut lenient = check();
        lenient.tls.critical_days = 1;
        let mut o = outcome(vec![cert("www.example.test", 2, 6)], true);
        evaluate(&lenient, &mut o, now());
        assert_eq!(o.status, Status::Up, "{:?}", o.failures);
    }

    #[test]
    fn probe_errors_become_failures() {
        let mut o = outcome(vec![], true);
        o.tls = None;
        o.probe_error = Some(ProbeError {
            kind: Assertion::Connect,
            message: "connection refused by 127.0.0.1:1".into(),
        });
        let o = judged(o);
        assert_eq!(o.status, Status::Down);
        assert_eq!(o.failures[0].expected, "a TCP connection");
        assert_eq!(o.failures[0].observed, "connection refused by 127.0.0.1:1");
    }
}
