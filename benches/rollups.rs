//! Rollups' cost (issue 15): what they add to an append, how fast a
//! check's 90 daily rollups come back, and what a year of a 1,000-check
//! fleet takes on disk with 35 days of raw results and 400 days of
//! rollups, against today's layout (400 days of raw results, no rollups).
//!
//! 1. Appends: one day of 1,000 checks every 30 s (`support/fleet.rs`, the
//!    store bench's load) into two stores, one keeping rollups and one not
//!    (`SledStore::without_rollups`, the schema 2 append), in time order,
//!    flush included. Their files after the flush give the bytes per raw
//!    result, and the difference the rollups' share after a day of churn
//!    (every append rewrites its hour's and its day's key).
//! 2. Reads and the size of a rollup: 100 checks with one result an hour
//!    for a year (365 day rollups and 8,760 hour rollups each, every hour
//!    key written once), again into a store with rollups and one without,
//!    each flushed once a simulated day; the difference of their files
//!    over the rollups written is what a rollup costs on disk once
//!    written. Then the raw results are swept to
//!    35 days and the rollups to the defaults (hours 92 days, days 400),
//!    and one check's last 90 daily rollups are read 100 times (the first
//!    cold).
//! 3. The year's size is extrapolated from those two measures.
//!
//! Run: `cargo bench --bench rollups` (or `-- CHECKS RESULTS_PER_CHECK
//! READ_CHECKS`; the defaults 1000 2880 100 take 5 to 10 minutes on 2
//! cores).

use std::path::Path;
use std::time::{Duration, Instant};

use vigie::store::{Granularity, SledStore, Store};

#[path = "support/fleet.rs"]
mod fleet;
use fleet::{check_name, dir_size, outcome, T0};

const READ_RUNS: usize = 100;
const DAY_MS: u64 = 86_400_000;
/// The defaults under study.
const RAW_DAYS: u64 = 35;
const HOUR_ROLLUP_DAYS: u64 = 92;
const ROLLUP_DAYS: u64 = 400;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let checks = args.first().copied().unwrap_or(1000);
    let per_check = args.get(1).copied().unwrap_or(2880);
    let read_checks = args.get(2).copied().unwrap_or(100);

    println!("rollups bench, sled 0.34.7");
    let without = fill_fleet(checks, per_check, false);
    let with = fill_fleet(checks, per_check, true);
    let results = (checks * per_check) as f64;
    println!(
        "  append, {checks} checks x {per_check} results: {:.0} results/s without rollups, \
         {:.0} with ({:+.0}%)",
        results / without.secs,
        results / with.secs,
        (without.secs / with.secs - 1.0) * 100.0
    );
    let raw_bytes = without.allocated as f64 / results;
    println!(
        "  on disk after the appends: {:.1} MiB without rollups ({raw_bytes:.1} bytes/result), \
         {:.1} MiB with ({} rollup keys: {:.0} bytes each of the difference)",
        mib(without.allocated),
        mib(with.allocated),
        with.rollup_keys,
        (with.allocated as f64 - without.allocated as f64) / with.rollup_keys as f64
    );

    let year = read_year(read_checks);
    let rollup_bytes = year.rollup_bytes();
    println!(
        "  a year of {read_checks} checks hourly: {} rollups written, {:.1} MiB with rollups, \
         {:.1} MiB without: {rollup_bytes:.0} bytes per rollup on disk ({:.0} of key and value)",
        year.rollups_written,
        mib(year.with_allocated),
        mib(year.without_allocated),
        year.logical_per_rollup
    );
    println!(
        "  90 daily rollups of one check: first (cold) {:.3} ms, median {:.3} ms, p90 {:.3} ms \
         of {READ_RUNS} (aim < 5 ms)",
        ms(year.read_first),
        ms(year.read_median),
        ms(year.read_p90)
    );

    // A year of 1,000 checks every 30 s.
    let fleet = 1000.0;
    let per_day = 2880.0;
    let raw_new = raw_bytes * fleet * per_day * RAW_DAYS as f64;
    let rollups_kept = fleet * (24.0 * HOUR_ROLLUP_DAYS as f64 + ROLLUP_DAYS as f64);
    let rollups_new = rollup_bytes * rollups_kept;
    let churn = (with.allocated as f64 - without.allocated as f64).max(0.0)
        - rollup_bytes * with.rollup_keys as f64;
    let raw_today = raw_bytes * fleet * per_day * ROLLUP_DAYS as f64;
    println!("  a year of 1,000 checks every 30 s, extrapolated:");
    println!(
        "    new defaults: raw {RAW_DAYS} d {:.2} GB + rollups ({rollups_kept:.0}: hours \
         {HOUR_ROLLUP_DAYS} d, days {ROLLUP_DAYS} d) {:.2} GB + the churn of a day's rollups \
         {:.2} GB = {:.2} GB (aim < 10 GB)",
        gb(raw_new),
        gb(rollups_new),
        gb(churn.max(0.0)),
        gb(raw_new + rollups_new + churn.max(0.0))
    );
    println!(
        "    today's layout (raw {ROLLUP_DAYS} d, no rollups): {:.1} GB",
        gb(raw_today)
    );
}

struct Filled {
    secs: f64,
    allocated: u64,
    rollup_keys: u64,
}

/// One day of the fleet into a fresh store; its append time and its size.
fn fill_fleet(checks: usize, per_check: usize, rollups: bool) -> Filled {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let store = open(&db, rollups);
    let started = Instant::now();
    for round in 0..per_check {
        for check in 0..checks {
            store.append(&outcome(check, round)).expect("append");
        }
    }
    store.flush().expect("flush");
    let secs = started.elapsed().as_secs_f64();
    drop(store);
    let (_, allocated) = dir_size(&db);
    let rollup_keys = tree_stats(&db, "rollups").0;
    Filled {
        secs,
        allocated,
        rollup_keys,
    }
}

struct Year {
    rollups_written: u64,
    with_allocated: u64,
    without_allocated: u64,
    logical_per_rollup: f64,
    read_first: Duration,
    read_median: Duration,
    read_p90: Duration,
}

impl Year {
    /// Disk per rollup: the two stores' difference over the rollups
    /// written.
    fn rollup_bytes(&self) -> f64 {
        (self.with_allocated as f64 - self.without_allocated as f64) / self.rollups_written as f64
    }
}

/// `checks` checks with one result an hour for a year, with and without
/// rollups; then the read of 90 daily rollups in the store with them.
fn read_year(checks: usize) -> Year {
    let hours = 365 * 24;
    let year_start = T0 - time::Duration::days(365);
    let at = |hour: usize, check: usize| {
        let mut result = outcome(check, hour);
        result.started_at = year_start
            + time::Duration::hours(hour as i64)
            + time::Duration::milliseconds(check as i64 * 29);
        result
    };
    let mut sizes = Vec::new();
    let mut kept = None;
    for rollups in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let store = open(&db, rollups);
        for hour in 0..hours {
            for check in 0..checks {
                store.append(&at(hour, check)).expect("append");
            }
            // A flush a simulated day: the daemon flushes every second, a
            // year of hourly results takes it a year. Without one, sled
            // reuses none of the segments the rewritten day rollups free
            // (reuse waits for a flush), and the file is every byte ever
            // written.
            if hour % 24 == 23 {
                store.flush().expect("flush");
            }
        }
        store.flush().expect("flush");
        drop(store);
        sizes.push(dir_size(&db).1);
        if rollups {
            kept = Some((dir, db));
        }
    }
    let (dir, db) = kept.expect("the store with rollups");
    let (keys, logical) = tree_stats(&db, "rollups");
    let store = open(&db, true);
    let now = year_start + time::Duration::hours(hours as i64);
    let days_ago = |days: u64| now - time::Duration::milliseconds((days * DAY_MS) as i64);
    store.sweep(days_ago(RAW_DAYS)).expect("sweep raw");
    store
        .sweep_rollups(days_ago(HOUR_ROLLUP_DAYS), days_ago(ROLLUP_DAYS))
        .expect("sweep rollups");
    let name = check_name(checks / 2);
    let since = days_ago(90);
    let mut times = Vec::with_capacity(READ_RUNS);
    for _ in 0..READ_RUNS {
        let started = Instant::now();
        let days = store
            .rollups(&name, Granularity::Day, since)
            .expect("rollups");
        times.push(started.elapsed());
        assert!(days.len() >= 90, "{} daily rollups", days.len());
    }
    drop(store);
    drop(dir);
    let first = times[0];
    times.sort();
    Year {
        rollups_written: keys,
        without_allocated: sizes[0],
        with_allocated: sizes[1],
        logical_per_rollup: logical as f64 / keys as f64,
        read_first: first,
        read_median: times[READ_RUNS / 2],
        read_p90: times[READ_RUNS * 9 / 10],
    }
}

fn open(db: &Path, rollups: bool) -> SledStore {
    let store = SledStore::open(db, Duration::from_millis(500)).expect("open store");
    match rollups {
        true => store,
        false => store.without_rollups(),
    }
}

/// (keys, key + value bytes) of one tree, read with sled directly.
fn tree_stats(db: &Path, name: &str) -> (u64, u64) {
    let db = sled::open(db).expect("reopen with sled");
    let tree = db.open_tree(name).expect("tree");
    tree.iter().fold((0, 0), |(keys, bytes), entry| {
        let (key, value) = entry.expect("read");
        (keys + 1, bytes + (key.len() + value.len()) as u64)
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn gb(bytes: f64) -> f64 {
    bytes / 1e9
}
