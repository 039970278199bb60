//! The failure streaks of a 1 s check: `/checks/{name}` and `/incidents`
//! over a week of its history (604,800 results: three outages, twenty
//! minutes of flapping, and the last minute still failing, as in
//! `tests/common/history.rs`), through the daemon's own router.
//!
//! Three figures per page, each the median and max of ROUNDS requests:
//! the first view (nothing cached: every hour's rollup read, the hours
//! mixing down with up read whole), a view after a new result (the store
//! changed: only the hour filling is read again), and a view with no new
//! result (nothing read). The peak resident memory is reset
//! (`/proc/self/clear_refs`) once the week is stored, so the figure is what
//! the pages added.
//!
//! Run: `cargo bench --bench streaks [-- ROUNDS]` (default 30). Aims: each
//! page under 100 ms, the peak under 16 MiB above the resident set before
//! the first view.

#[path = "support/api.rs"]
mod api;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/fleet.rs"]
mod fleet;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::history;
use vigie::clock::{Clock, SystemClock};
use vigie::store::{Latest, SledStore, Store};

const NAME: &str = "busy";

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(30);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench(rounds));
}

async fn bench(rounds: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = api::config_with(
        dir.path(),
        &format!("[[check]]\nname = \"{NAME}\"\nkind = \"http\"\nurl = \"https://www.example.com/\"\nevery = \"1s\"\n"),
    );

    let store = Arc::new(
        SledStore::open(&dir.path().join("history"), Duration::from_secs(1)).expect("open"),
    );
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = clock.now();
    let latest = Latest::default();
    let started = Instant::now();
    let mut newest = None;
    for result in history::busy_week(NAME, now) {
        store.append(&result).expect("append");
        newest = Some(result);
    }
    store.flush().expect("flush");
    let mut newest = newest.expect("a week of results");
    latest.record(Arc::new(newest.clone()));
    println!(
        "filled: {} results of a 1 s check in {:.1} s",
        history::WEEK_SECONDS,
        started.elapsed().as_secs_f64()
    );

    // "5" resets the peak resident set to the current one.
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    let rss_before = fleet::status_kib("VmRSS");

    for path in [format!("/checks/{NAME}"), "/incidents".to_string()] {
        // A router each, so that each page's first view finds its own
        // cache empty.
        let router = api::router(
            store.clone(),
            latest.clone(),
            config.clone(),
            clock.clone(),
            Default::default(),
        );
        let first = get(&router, &path).await;
        let mut changed = Vec::new();
        let mut unchanged = Vec::new();
        for _ in 0..rounds {
            // A new result in the hour filling, as the 1 s check stores.
            newest.started_at += time::Duration::seconds(1);
            store.append(&newest).expect("append");
            latest.record(Arc::new(newest.clone()));
            changed.push(get(&router, &path).await);
            unchanged.push(get(&router, &path).await);
        }
        println!(
            "{path}: first view {:.1} ms; after a new result {}; no new result {}",
            first.as_secs_f64() * 1000.0,
            summary(&mut changed),
            summary(&mut unchanged)
        );
    }
    let peak = fleet::status_kib("VmHWM");
    println!(
        "resident before the first view {:.1} MiB, peak after {:.1} MiB: +{:.1} MiB",
        rss_before as f64 / 1024.0,
        peak as f64 / 1024.0,
        peak.saturating_sub(rss_before) as f64 / 1024.0
    );
}

/// One GET through the router; the time until the whole body is read.
async fn get(router: &axum::Router, path: &str) -> Duration {
    let (elapsed, body) = api::get(router, path).await;
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("First 500 failures shown"), "{path}: {text}");
    elapsed
}

fn summary(times: &mut [Duration]) -> String {
    times.sort();
    format!(
        "median {:.2} ms, max {:.2} ms",
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0
    )
}
