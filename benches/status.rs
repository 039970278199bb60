//! The public status page at scale: 1,000 checks with 90 days of history
//! (one result an hour: the page reads the day and hour rollups, which
//! have the same shape whatever the interval), through the daemon's own
//! router.
//!
//! Run: `cargo bench --bench status [-- CHECKS SECONDS]` (default 1,000
//! checks, 30 s of load). Prints:
//! - the time to build `/status` (store reads, redaction, HTML, feed),
//!   median and max of 20 builds back to back, and the page's size; aim:
//!   under 50 ms;
//! - then 500 requests a second for SECONDS: how many times the page was
//!   built (aim: at most one per 10 s) and the process's CPU time over
//!   the wall time (aim: under 5 % of a core). The CPU counted includes
//!   the load's own requests, made in process, so it is an upper bound.

#[path = "support/api.rs"]
mod api;
#[path = "support/history.rs"]
mod history;

use std::sync::Arc;
use std::time::{Duration, Instant};

use vigie::api::StatusCache;
use vigie::clock::{Clock, SystemClock};
use vigie::store::{Latest, SledStore, Store};

const EVERY_HOURS: i64 = 1;
const DAYS: i64 = 90;
const RATE: u64 = 500;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let checks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    let runtime = history::runtime();
    runtime.block_on(bench(checks, seconds));
}

async fn bench(checks: usize, seconds: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = history::checks_toml(checks, |n| format!("check-{n:04}"), 7);
    let mut config = api::config_with(dir.path(), &toml);
    config.status_page.public = true;
    config.status_page.public_labels = vec!["env".to_string()];
    let store = SledStore::open(&dir.path().join("history"), Duration::from_secs(1)).expect("open");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = clock.now();
    let latest = Latest::default();
    let per_check = DAYS * 24 / EVERY_HOURS;
    history::fill(
        &store,
        &latest,
        checks,
        per_check,
        time::Duration::hours(EVERY_HOURS),
        |n| format!("check-{n:04}"),
        now,
    );

    let store: Arc<dyn Store> = Arc::new(store);
    let status = Arc::new(StatusCache::default());
    let router = api::router(
        store.clone(),
        latest.clone(),
        config,
        clock.clone(),
        status.clone(),
    );
    // The first build reads every hour of the streaks' window. Before each
    // later one, a sixth of the checks get a new result, as checks run
    // every 60 s would in the 10 s between two builds: the buckets their
    // new result changed are read again, the others' rows and streaks
    // come from what the cache kept.
    let (first, _) = api::get(&router, "/status").await;
    let mut times = Vec::new();
    let mut size = 0;
    let fresh_per_build = checks.div_ceil(6);
    for round in 0..20 {
        for k in 0..fresh_per_build {
            let n = (round * fresh_per_build + k) % checks;
            let at = clock.now();
            let outcome = history::outcome(&format!("check-{n:04}"), n, at, per_check + 1);
            store.append(&outcome).expect("append");
            latest.record(Arc::new(outcome));
        }
        status.expire().await;
        let (elapsed, body) = api::get(&router, "/status").await;
        times.push(elapsed);
        size = body.len();
    }
    times.sort();
    println!(
        "/status build at {checks} checks ({fresh_per_build} with a new result before each): first {:.1} ms, then median {:.1} ms, max {:.1} ms, {} KB",
        first.as_secs_f64() * 1000.0,
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0,
        size / 1024
    );

    status.expire().await;
    let renders_before = status.renders();
    let cpu_before = cpu_seconds();
    let wall = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut requests = tokio::task::JoinSet::new();
    let total = RATE * seconds;
    for _ in 0..total {
        tick.tick().await;
        let router = router.clone();
        requests.spawn(async move { api::get(&router, "/status").await.1.len() });
        while requests.try_join_next().is_some() {}
    }
    while requests.join_next().await.is_some() {}
    let wall = wall.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let renders = status.renders() - renders_before;
    println!(
        "load: {total} requests in {wall:.1} s ({:.0}/s): {renders} builds (at most {} allowed), CPU {:.2} s = {:.1} % of a core",
        total as f64 / wall,
        (wall / 10.0).ceil() as u64,
        cpu,
        cpu / wall * 100.0
    );
}

/// This process's user and system CPU time so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / per_second
}
