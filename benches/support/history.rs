//! The made-up history of the page benches: results of an `http` check
//! serving a leaf renewed every 30 days.

use std::sync::Arc;
use std::time::Instant;

use vigie::outcome::Outcome;
use vigie::store::{Latest, SledStore, Store};

/// The page benches' runtime: two workers, as the daemon on a small VM.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// `count` http checks called by `name(n)`, labelled `env` prod, staging
/// and dev in turn, and with `team` when `teams` is more than zero.
pub fn checks_toml(count: usize, name: impl Fn(usize) -> String, teams: usize) -> String {
    let mut toml = String::new();
    for n in 0..count {
        let env = ["prod", "staging", "dev"][n % 3];
        let team = match teams {
            0 => String::new(),
            teams => format!(", team = \"t{}\"", n % teams),
        };
        toml.push_str(&format!(
            "[[check]]\nname = \"{}\"\nkind = \"http\"\nurl = \"https://www.example.com/{n}\"\nlabels = {{ env = \"{env}\"{team} }}\n",
            name(n)
        ));
    }
    toml
}

/// Appends `count` results a check, `step` apart and ending at `now`, for
/// `checks` checks called by `name(n)`; the newest of each goes to
/// `latest`. Says how long it took.
pub fn fill(
    store: &SledStore,
    latest: &Latest,
    checks: usize,
    count: i64,
    step: time::Duration,
    name: impl Fn(usize) -> String,
    now: time::OffsetDateTime,
) {
    let started = Instant::now();
    for n in 0..checks {
        let mut last = None;
        for i in 0..count {
            let outcome = outcome(&name(n), n, now - step * (count - i) as i32, i);
            store.append(&outcome).expect("append");
            last = Some(outcome);
        }
        if let Some(outcome) = last {
            latest.record(Arc::new(outcome));
        }
    }
    store.flush().expect("flush");
    println!(
        "filled: {checks} checks x {count} results in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Result `i` of check number `check`, called `name`: up but for one in
/// 200, a leaf renewed every 30 days.
pub fn outcome(name: &str, check: usize, at: time::OffsetDateTime, i: i64) -> Outcome {
    let renewal = at.unix_timestamp() / (30 * 86_400);
    let not_before = time::OffsetDateTime::from_unix_timestamp(renewal * 30 * 86_400).unwrap();
    let not_after = not_before + time::Duration::days(90);
    let status = if i % 200 == 7 { "down" } else { "up" };
    let json = serde_json::json!({
        "name": name,
        "kind": "http",
        "target": format!("https://www.example.com/{check}"),
        "status": status,
        "started_at": at.format(&time::format_description::well_known::Rfc3339).unwrap(),
        "duration_ms": 40.0 + (i % 17) as f64 * 7.5,
        "failures": [],
        "tls": {
            "server_name": "www.example.com",
            "trusted": true,
            "hostname_matches": true,
            "chain": [{
                "subject": "CN=www.example.com",
                "issuer": "C=US, O=Let's Encrypt, CN=R11",
                "not_before": not_before.format(&time::format_description::well_known::Rfc3339).unwrap(),
                "not_after": not_after.format(&time::format_description::well_known::Rfc3339).unwrap(),
                "days_left": (not_after - at).whole_days(),
                "sans": ["www.example.com"],
                "serial": format!("{renewal:x}"),
                "sha256": format!("{:064x}", renewal as u64 * 1_000 + check as u64),
                "key": "ECDSA P-256",
                "signature": "SHA256-RSA",
            }],
        },
    });
    serde_json::from_value(json).expect("a bench outcome")
}
