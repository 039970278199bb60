//! The status pages at scale: 100 checks with 90 days of history (one
//! result every 15 minutes: the rollups are the same shape whatever the
//! interval, one per hour and one per day, and the pages read nothing
//! else), each serving a leaf that is renewed every 30 days. The requests
//! go through the daemon's own router, as a browser's would.
//!
//! Run: `cargo bench --bench pages [-- CHECKS [DAYS]]` (default 100 checks,
//! 90 days). Prints the median and max time and the size of `/`,
//! `/checks/{name}` and `/api/v1/uptime/{name}?days=90`. Aims: `/` under
//! 50 ms and 300 KB, a check's page under 30 ms, the uptime JSON under
//! 5 ms.

#[path = "support/api.rs"]
mod api;
#[path = "support/history.rs"]
mod history;

use std::sync::Arc;
use std::time::Duration;

use vigie::clock::{Clock, SystemClock};
use vigie::store::{Latest, SledStore};

const EVERY_MINUTES: i64 = 15;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let checks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let days: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(90);
    let runtime = history::runtime();
    runtime.block_on(bench(checks, days));
}

async fn bench(checks: usize, days: i64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = history::checks_toml(checks, |n| format!("check-{n:03}"), 0);
    let config = api::config_with(dir.path(), &toml);

    let store = SledStore::open(&dir.path().join("history"), Duration::from_secs(1)).expect("open");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = clock.now();
    let latest = Latest::default();
    let per_check = days * 24 * 60 / EVERY_MINUTES;
    history::fill(
        &store,
        &latest,
        checks,
        per_check,
        time::Duration::minutes(EVERY_MINUTES),
        |n| format!("check-{n:03}"),
        now,
    );

    let router = api::router(Arc::new(store), latest, config, clock, Default::default());
    for path in ["/", "/checks/check-007", "/api/v1/uptime/check-007?days=90"] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..30 {
            let (elapsed, body) = api::get(&router, path).await;
            times.push(elapsed);
            size = body.len();
        }
        times.sort();
        println!(
            "{path}: median {:.2} ms, max {:.2} ms, {} KB",
            times[times.len() / 2].as_secs_f64() * 1000.0,
            times[times.len() - 1].as_secs_f64() * 1000.0,
            size / 1024
        );
    }
}
