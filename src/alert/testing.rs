//! Test fixtures for the alert module: outcomes, events and a policy at a
//! fixed "now", with realistic failure texts.

use std::collections::BTreeMap;
use std::time::Duration;

use time::macros::datetime;
use time::OffsetDateTime;

use super::event::{Event, EventKind, IncidentId, Snapshot};
use super::policy::Policy;
use crate::cert::CertInfo;
use crate::outcome::{Assertion, Failure, Outcome, Status};
use crate::testing::LeafFacts;
pub use crate::testing::T0;

/// Thresholds 2/2, reminders every 4 h, one recipient, labels env=prod.
pub fn policy() -> Policy {
    Policy {
        failure_threshold: 2,
        recovery_threshold: 2,
        repeat: Duration::from_secs(4 * 3600),
        to: vec!["oncall@example.com".to_string()],
        page: true,
        labels: BTreeMap::from([("env".to_string(), "prod".to_string())]),
    }
}

/// An `up` result over TLS with a Let's Encrypt-like chain.
pub fn up(name: &str, at: OffsetDateTime) -> Outcome {
    let mut outcome = crate::testing::up(name, at);
    if let Some(tls) = outcome.tls.as_mut() {
        tls.chain = chain(name, datetime!(2027-01-28 06:12:09 UTC), at).into();
    }
    outcome
}

/// A 90-day leaf for `<name>.example.com` expiring at `not_after`, and
/// its intermediate.
pub fn chain(name: &str, not_after: OffsetDateTime, at: OffsetDateTime) -> Vec<CertInfo> {
    let names = [format!("{name}.example.com")];
    let sha256 = format!("{:0>64}", format!("{:x}", not_after.unix_timestamp()));
    let facts = LeafFacts {
        not_before: not_after - time::Duration::days(90),
        not_after,
        serial: "04f1c2d9a3b0e6f7".to_string(),
        ..LeafFacts::new(&names, sha256)
    };
    crate::testing::chain(&facts, at)
}

/// A `down` result failing one assertion.
pub fn down(name: &str, at: OffsetDateTime, assertion: Assertion) -> Outcome {
    outcome_with(name, at, &[assertion])
}

/// A result failing every assertion given, with the texts `evaluate`
/// would write; network failures carry no HTTP or TLS facts.
pub fn outcome_with(name: &str, at: OffsetDateTime, assertions: &[Assertion]) -> Outcome {
    let mut outcome = up(name, at);
    if assertions.iter().any(|a| is_network(*a)) {
        outcome.http = None;
        outcome.tls = None;
    }
    if assertions.contains(&Assertion::TlsExpiry) {
        if let Some(tls) = outcome.tls.as_mut() {
            tls.trusted = false;
            tls.chain = chain(name, datetime!(2026-11-27 06:12:09 UTC), at).into();
        }
    }
    outcome.failures = assertions.iter().map(|a| failure(*a)).collect();
    outcome.status = outcome
        .failures
        .iter()
        .map(|f| f.assertion.severity())
        .max()
        .unwrap_or(Status::Up);
    outcome
}

fn is_network(assertion: Assertion) -> bool {
    matches!(
        assertion,
        Assertion::Dns | Assertion::Connect | Assertion::Timeout
    )
}

pub fn failure(assertion: Assertion) -> Failure {
    let (expected, observed, message) = match assertion {
        Assertion::Dns => (
            "the host name resolves",
            "no such host",
            "DNS lookup failed: no such host",
        ),
        Assertion::Connect => (
            "a TCP connection",
            "connection refused",
            "connection refused",
        ),
        Assertion::Timeout => (
            "an answer within 10s",
            "no answer after 10s",
            "no answer within 10s",
        ),
        Assertion::TlsExpiry => (
            ">= 7 days",
            "-2 days",
            "certificate expired 2 days ago",
        ),
        Assertion::TlsTrusted => (
            "a chain to a browser-trusted root",
            "staging issuer C=US, O=(STAGING) Let's Encrypt, CN=(STAGING) Tenuous Tomato R13",
            "certificate comes from the Let's Encrypt staging CA ((STAGING) Tenuous Tomato R13), which browsers do not trust: the ACME issuer points at the staging endpoint",
        ),
        Assertion::HttpStatus => ("2xx", "503", "HTTP 503 Service Unavailable"),
        Assertion::CorsOrigin => (
            "Access-Control-Allow-Origin: https://app.example.com",
            "no Access-Control-Allow-Origin",
            "the bucket refuses uploads from https://app.example.com",
        ),
        Assertion::TlsRenewalOverdue => (
            ">= 22 days left (a quarter of 90 days)",
            "19 days left",
            "renewal looks stuck: 19 days left of 90",
        ),
        other => ("it holds", "it does not", other.as_str()),
    };
    Failure {
        assertion,
        expected: expected.to_string(),
        observed: observed.to_string(),
        message: message.to_string(),
    }
}

/// An event about `check` with plausible content, for grouping tests.
pub fn event(kind: EventKind, check: &str) -> Event {
    let first = Snapshot::of(&down(check, T0, Assertion::HttpStatus));
    Event {
        kind,
        check: check.to_string(),
        incident: IncidentId::new(check, T0),
        at: T0,
        reminder: u32::from(kind == EventKind::Reminder),
        to: policy().to,
        labels: policy().labels,
        since: T0,
        consecutive_failures: 2,
        failed_probes: 2,
        last_success: Some(T0 - Duration::from_secs(30)),
        first_failure: first.clone(),
        latest: first,
        latest_unknown: false,
        resolved_at: None,
        held: None,
        thread: Vec::new(),
        vantage: None,
        fleet_key: None,
    }
}

/// Compares `actual` with `tests/fixtures/<path>`, or rewrites the file
/// when `VIGIE_BLESS=1` (then read the diff before committing it).
pub fn golden(path: &str, actual: &str) {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    if std::env::var_os("VIGIE_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (VIGIE_BLESS=1 cargo test --lib alert creates it)",
            file.display()
        )
    });
    assert!(
        actual == expected,
        "{} differs from what was rendered (VIGIE_BLESS=1 rewrites it):\n--- expected\n{expected}\n--- actual\n{actual}",
        file.display()
    );
}

/// A mail as two golden files: `mail/<name>.txt` (headers, then the text
/// part) and `mail/<name>.html`.
pub fn golden_mail(name: &str, email: &super::render::Email) {
    let mut head = format!(
        "To: {}\nSubject: {}\nMessage-ID: {}\n",
        email.to.join(", "),
        email.subject,
        email.message_id
    );
    if let Some(parent) = &email.in_reply_to {
        head.push_str(&format!("In-Reply-To: {parent}\n"));
    }
    if !email.references.is_empty() {
        head.push_str(&format!("References: {}\n", email.references.join(" ")));
    }
    golden(
        &format!("mail/{name}.txt"),
        &format!("{head}\n{}", email.text),
    );
    golden(&format!("mail/{name}.html"), &email.html);
}

/// `up` with its leaf edited.
pub fn with_leaf(name: &str, at: OffsetDateTime, edit: impl Fn(&mut CertInfo)) -> Outcome {
    let mut o = up(name, at);
    if let Some(tls) = o.tls.as_mut() {
        edit(&mut std::sync::Arc::make_mut(&mut tls.chain)[0]);
    }
    o
}

/// A renewal: new fingerprint, another Let's Encrypt intermediate.
pub fn renewed(leaf: &mut CertInfo) {
    leaf.sha256 = "ab".repeat(32);
    leaf.issuer = "C=US, O=Let's Encrypt, CN=R10".to_string();
}

/// The edge now serves a leaf from the Let's Encrypt staging CA.
pub fn staging(leaf: &mut CertInfo) {
    leaf.sha256 = "cd".repeat(32);
    leaf.issuer = "C=US, O=(STAGING) Let's Encrypt, CN=(STAGING) Tenuous Tomato R13".to_string();
}
