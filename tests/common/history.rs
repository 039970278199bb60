//! Made-up but realistic stored history for replication tests and
//! benchmarks: judged outcomes of `http` and `cors` checks with TLS chains,
//! failures, probe errors and awkward floats, so that a round trip through
//! a segment and a restore has something to get wrong.

use time::macros::datetime;
use time::{Duration, OffsetDateTime};
use vigie::cert::CertInfo;
use vigie::check::KindName;
use vigie::outcome::{
    Assertion, CorsReport, DeniedOrigin, Failure, Outcome, ProbeError, Status, VerifyError,
};
use vigie::testing::LeafFacts;

/// A fixed start for made-up history (results are keyed by time).
pub const T0: OffsetDateTime = datetime!(2026-11-28 00:00:00 UTC);

/// The `n`th result of check `name` at `at`. Every seventh is down with a
/// TLS failure and a probe error, every fifth is a warn; `cors-*` checks
/// carry a CORS report.
pub fn outcome(name: &str, at: OffsetDateTime, n: u64) -> Outcome {
    let status = match n {
        n if n % 7 == 3 => Status::Down,
        n if n % 5 == 1 => Status::Warn,
        _ => Status::Up,
    };
    let cors = name.starts_with("cors");
    let mut outcome = vigie::testing::up(name, at);
    outcome.kind = if cors { KindName::Cors } else { KindName::Http };
    outcome.target = format!("https://{name}.example.com/health");
    outcome.status = status;
    // Floats that do not round-trip through a naive float parser.
    outcome.duration_ms = 40.0 + (n % 97) as f64 / 3.0 + 1e-9;
    if let Some(http) = outcome.http.as_mut() {
        http.status = if status == Status::Down { 503 } else { 200 };
        http.redirects = (n % 3) as u32;
        http.final_url = (n % 3 != 0).then(|| format!("https://{name}.example.com/landing"));
        http.response_ms = 0.1 * (n % 1000) as f64;
        http.body_bytes = 5120 + n % 13;
    }
    if let Some(tls) = outcome.tls.as_mut() {
        tls.cipher_suite = Some("TLS13_AES_128_GCM_SHA256".to_string());
        tls.trusted = status != Status::Down;
        tls.verify_error = (status == Status::Down).then(|| VerifyError::HostnameMismatch {
            expected: format!("{name}.example.com"),
            covered: vec!["*.example.org".to_string()],
        });
        tls.hostname_matches = status != Status::Down;
        tls.chain = chain(name, at).into();
    }
    outcome.cors = cors.then(|| {
        Box::new(CorsReport {
            preflight_status: 200,
            allow_origin: Some("https://app.example.com".to_string()),
            allow_methods: vec!["PUT".to_string()],
            allow_headers: vec!["content-type".to_string()],
            allow_credentials: None,
            expose_headers: vec!["etag".to_string()],
            max_age: Some(3000),
            vary: Some("Origin".to_string()),
            refusal: None,
            location: None,
            denied: vec![DeniedOrigin {
                origin: "https://evil.example".to_string(),
                admitted: false,
                allow_origin: None,
            }],
        })
    });
    if status == Status::Down {
        outcome.failures.push(Failure {
            assertion: Assertion::TlsHostname,
            expected: format!("a certificate for {name}.example.com"),
            observed: "*.example.org".to_string(),
            message: format!("certificate does not cover {name}.example.com"),
        });
        outcome.probe_error = Some(ProbeError {
            kind: Assertion::TlsHostname,
            message: "invalid peer certificate: NotValidForName".to_string(),
        });
    }
    if status == Status::Warn {
        outcome.failures.push(Failure {
            assertion: Assertion::TlsRenewalOverdue,
            expected: ">= 22 days".to_string(),
            observed: "19 days".to_string(),
            message: "renewal is overdue".to_string(),
        });
    }
    outcome
}

fn chain(name: &str, at: OffsetDateTime) -> Vec<CertInfo> {
    let names = [format!("{name}.example.com")];
    vigie::testing::chain(&LeafFacts::new(&names, format!("{:0>64}", name.len())), at)
}

/// `checks` checks probed every `every` from `from`, `rounds` times, in
/// the order a scheduler appends them (round by round).
pub fn rounds(
    checks: usize,
    every: Duration,
    from: OffsetDateTime,
    rounds: u64,
) -> impl Iterator<Item = Outcome> {
    (0..rounds).flat_map(move |round| {
        (0..checks).map(move |c| {
            let name = if c % 10 == 9 {
                format!("cors-{c}")
            } else {
                format!("site-{c}")
            };
            // A few milliseconds apart within a round, like real probes.
            let at = from + every * round as i32 + Duration::milliseconds(c as i64 * 7 % 1000);
            outcome(&name, at, round * checks as u64 + c as u64)
        })
    })
}

/// Seconds in a week: a 1 s check's results over the pages' streak window.
pub const WEEK_SECONDS: i64 = 7 * 24 * 3600;

/// Whether second `s` of [`busy_week`] is down: three outages (ten
/// minutes, an hour and a half across an hour boundary, the last minute
/// still failing) and twenty minutes of flapping every other second (600
/// streaks, more than a page lists).
pub fn busy_week_down(s: i64) -> bool {
    let flapping = (5 * 86_400..5 * 86_400 + 1200).contains(&s) && s % 2 == 0;
    (86_400 + 600..86_400 + 1200).contains(&s)
        || (3 * 86_400 + 1800..3 * 86_400 + 7200).contains(&s)
        || flapping
        || s >= WEEK_SECONDS - 60
}

/// A 1 s check `name`'s week of results ending just before `end`, oldest
/// first (604,800 of them), down as [`busy_week_down`] says.
pub fn busy_week(name: &str, end: OffsetDateTime) -> impl Iterator<Item = Outcome> + '_ {
    let from = end - Duration::seconds(WEEK_SECONDS);
    (0..WEEK_SECONDS).map(move |s| {
        let mut result = outcome(name, from + Duration::seconds(s), 0);
        if busy_week_down(s) {
            result.status = Status::Down;
            result.failures.push(Failure {
                assertion: Assertion::HttpStatus,
                expected: "200".to_string(),
                observed: "503".to_string(),
                message: "status 503, expected 200".to_string(),
            });
        }
        result
    })
}
