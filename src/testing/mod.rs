//! Made-up but realistic results for tests and benchmarks: an `up` result
//! of an `http` check over TLS 1.3, and Let's Encrypt-like chains (a leaf
//! under R11). Each caller edits them into its scenario: the alert
//! module's failures and renewals, the store's contract scenarios, the
//! replication tests' history, the benchmarks' fleet.
//!
//! Compiled for the unit tests and, behind the `testing` feature (which
//! the crate's own dev-dependency on itself turns on), for `tests/` and
//! `benches/`; a release build never carries it.

mod chain;

use time::macros::datetime;
use time::OffsetDateTime;

use crate::check::KindName;
use crate::outcome::{HttpReport, Outcome, Status, TlsReport};

pub use self::chain::{chain, leaf, r11, wildcard_chain, LeafFacts};

/// The fixed "now" of the unit tests' timelines.
pub const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);

/// A typical up result of an `http` check `name`: 200 over TLS 1.3 at
/// `https://<name>.example.com/`, with the `*.example.com` chain.
pub fn up(name: &str, at: OffsetDateTime) -> Outcome {
    Outcome {
        name: name.to_string(),
        kind: KindName::Http,
        target: format!("https://{name}.example.com/"),
        status: Status::Up,
        started_at: at,
        duration_ms: 41.7,
        failures: Vec::new(),
        probe_error: None,
        http: Some(HttpReport {
            status: 200,
            version: "HTTP/1.1".to_string(),
            redirects: 0,
            final_url: None,
            response_ms: 38.25,
            body_bytes: 5120,
            body_truncated: false,
            headers: Vec::new(),
            body: Vec::new(),
        }),
        tls: Some(TlsReport {
            server_name: format!("{name}.example.com"),
            version: Some("TLSv1.3".to_string()),
            cipher_suite: Some("TLS13_AES_256_GCM_SHA384".to_string()),
            key_exchange: None,
            trusted: true,
            verify_error: None,
            hostname_matches: true,
            ari: None,
            revocation: Vec::new(),
            verified_path: None,
            chain: wildcard_chain("example.com", at).into(),
        }),
        cors: None,
        dns: None,
        upload: None,
        smtp: None,
        domain: None,
    }
}
