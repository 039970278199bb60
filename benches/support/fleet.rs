//! Shared by the store benchmarks: one day of a realistic fleet's results
//! (every check every 30 s, 50 wildcard chains shared by the checks, one
//! result in 200 a timeout without TLS or HTTP) and disk and memory
//! readings.
// Each bench uses only some of these helpers.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use time::macros::datetime;
use time::OffsetDateTime;

use vigie::cert::CertInfo;
use vigie::outcome::{Assertion, Failure, Outcome, ProbeError, Status};
use vigie::testing::LeafFacts;

pub const T0: OffsetDateTime = datetime!(2026-11-29 00:00:00 UTC);
pub const INTERVAL: Duration = Duration::from_secs(30);
pub const CHAINS: usize = 50;

pub fn check_name(check: usize) -> String {
    format!("check-{check:04}")
}

/// Result `round` of `check`: up over TLS 1.3, except one in 200 timeouts.
pub fn outcome(check: usize, round: usize) -> Outcome {
    let started_at = T0 + INTERVAL * round as u32 + Duration::from_millis(check as u64 * 29);
    let name = check_name(check);
    let host = format!("{name}.site-{}.example", check % CHAINS);
    let mut outcome = vigie::testing::up(&name, started_at);
    outcome.target = format!("https://{host}/");
    outcome.duration_ms = 40.0 + ((check * 7 + round * 13) % 97) as f64 / 3.0;
    if let Some(http) = outcome.http.as_mut() {
        http.response_ms = 30.0 + ((check * 11 + round * 5) % 89) as f64 / 7.0;
        http.body_bytes = 4096 + (check as u64 % 2000);
    }
    if let Some(tls) = outcome.tls.as_mut() {
        tls.server_name = host;
        tls.chain = chain(check % CHAINS, started_at).into();
    }
    if (check + round) % 200 == 199 {
        outcome.status = Status::Down;
        outcome.duration_ms = 10_000.0;
        outcome.http = None;
        outcome.tls = None;
        let message = "no answer within 10s (connecting to 203.0.113.7:443)".to_string();
        outcome.failures = vec![Failure {
            assertion: Assertion::Timeout,
            expected: "an answer within 10s".to_string(),
            observed: "none".to_string(),
            message: message.clone(),
        }];
        outcome.probe_error = Some(ProbeError {
            kind: Assertion::Timeout,
            message,
        });
    }
    outcome
}

/// The wildcard chain of `site-<site>.example`, a serial and fingerprint
/// of its own.
pub fn chain(site: usize, at: OffsetDateTime) -> Vec<CertInfo> {
    let names = [
        format!("*.site-{site}.example"),
        format!("site-{site}.example"),
    ];
    let facts = LeafFacts {
        serial: format!("04f1c2d9a3b0e6f7d8c9b0a1e2f3d4c5{site:04x}"),
        ..LeafFacts::new(&names, format!("{site:064x}"))
    };
    vigie::testing::chain(&facts, at)
}

/// (apparent, allocated) bytes of every file under `dir`.
pub fn dir_size(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut sizes = (0, 0);
    for entry in std::fs::read_dir(dir).expect("read store dir") {
        let entry = entry.expect("dir entry");
        let meta = entry.metadata().expect("metadata");
        if meta.is_dir() {
            let (apparent, allocated) = dir_size(&entry.path());
            sizes.0 += apparent;
            sizes.1 += allocated;
        } else {
            sizes.0 += meta.len();
            sizes.1 += meta.blocks() * 512;
        }
    }
    sizes
}

/// Bytes this process has handed to write(2) and its kin so far
/// (`/proc/self/io` `wchar`): what sled wrote to its file, log garbage
/// included, when nothing else writes.
pub fn written_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|line| line.strip_prefix("wchar:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
