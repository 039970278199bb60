//! Replication cost: compressed segment bytes per result, catch-up
//! throughput, and restore time, for a one-day backlog of a realistic fleet.
//!
//! The load: CHECKS checks (default 1000) probed every 30 s for ROUNDS
//! rounds (default 2880: one day), appended round by round as the
//! scheduler does, into a sled store with replication enabled (so every
//! result is queued), while the bucket is "away". Then one catch-up ships
//! the whole queue in segments of 20,000 results to a real S3 server on
//! loopback (moto with SigV4 enforced, as in the tests), and the day is
//! restored from the bucket into an empty store. Results are the ones of
//! `tests/common/history.rs`: TLS chains, every seventh down with failures
//! and a probe error, CORS reports on every tenth check.
//!
//! Throughput is end to end on the same two cores as moto (a Python
//! server, which takes a good share of them): store reads, JSON, zstd and
//! the upload, or download, verification and store writes for restore.
//! vigie's own CPU time is printed next to it.
//!
//! Run: `cargo bench --bench replicate` (or `-- CHECKS ROUNDS [BATCH]`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::history::{self, T0};
use common::s3_auth::AuthS3;
use url::Url;
use vigie::clock::SystemClock;
use vigie::replicate::{restore, Addressing, Bucket, BucketSettings, Replicator, BATCH_RESULTS};
use vigie::store::{SledStore, Store};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let checks = args.first().copied().unwrap_or(1000);
    let rounds = args.get(1).copied().unwrap_or(2880) as u64;
    let batch = args.get(2).copied().unwrap_or(BATCH_RESULTS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let s3 = AuthS3::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (id, secret) = s3.write_keys(dir.path());
    let settings = BucketSettings {
        url: Url::parse(&format!("s3://{}/bench-node", s3.bucket())).expect("url"),
        endpoint: Some(Url::parse(&s3.endpoint()).expect("endpoint")),
        region: None,
        access_key_id_file: Some(id),
        secret_access_key_file: Some(secret),
        credentials: vigie::config::Credentials::Files,
        addressing: Addressing::Path,
        extra_ca_file: None,
        request_timeout: Duration::from_secs(120),
        max_retries: 3,
        retry_timeout: Duration::from_secs(60),
    };

    println!(
        "replication bench: {checks} checks every 30 s, {rounds} rounds ({} results), segments of {batch}",
        checks as u64 * rounds
    );
    let store = Arc::new(
        SledStore::open(&dir.path().join("original"), Duration::from_millis(500))
            .expect("open store"),
    );
    store.enable_replication().expect("enable replication");
    let started = Instant::now();
    let mut appended = 0u64;
    for outcome in history::rounds(checks, time::Duration::seconds(30), T0, rounds) {
        store.append(&outcome).expect("append");
        appended += 1;
    }
    store.flush().expect("flush");
    println!(
        " backlog built: {appended} results appended and queued in {:.1} s (peak RSS so far {:.1} MiB)",
        started.elapsed().as_secs_f64(),
        peak_rss_mib()
    );

    let replicator = Replicator::new(
        &settings,
        Duration::from_secs(3600),
        store.clone(),
        Arc::new(SystemClock),
    )
    .expect("replicator")
    .with_batch_size(batch);
    let cpu = cpu_time();
    let started = Instant::now();
    let report = runtime
        .block_on(replicator.ship_all(None))
        .expect("catch-up");
    let secs = started.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu).as_secs_f64();
    assert_eq!(report.results, appended, "every result shipped");
    println!(
        " catch-up:  {:>9.0} results/s  {:.1} s wall, {:.1} s vigie CPU, {} segments, {:.1} MiB",
        report.results as f64 / secs,
        secs,
        cpu,
        report.segments,
        report.bytes as f64 / (1024.0 * 1024.0)
    );
    println!(
        " segments:  {:>9.1} bytes/result compressed (zstd level 3, NDJSON of the Outcome contract); peak RSS so far {:.1} MiB",
        report.bytes as f64 / report.results as f64,
        peak_rss_mib()
    );

    let restored = Arc::new(
        SledStore::open(&dir.path().join("restored"), Duration::from_millis(500))
            .expect("open store"),
    );
    let bucket = Bucket::open(&settings).expect("bucket");
    let cpu = cpu_time();
    let started = Instant::now();
    let outcome = runtime
        .block_on(restore(&bucket, restored.clone()))
        .expect("restore");
    restored.flush().expect("flush");
    let secs = started.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu).as_secs_f64();
    assert!(outcome.is_complete(), "{outcome}");
    assert_eq!(outcome.store.added, appended);
    assert_eq!(restored.len().expect("len"), store.len().expect("len"));
    println!(
        " restore:   {:>9.0} results/s  {:.1} s wall, {:.1} s vigie CPU ({} segments into an empty store)",
        appended as f64 / secs,
        secs,
        cpu,
        outcome.restored_segments
    );
    println!(" peak RSS (VmHWM): {:.1} MiB", peak_rss_mib());
}

/// CPU time (user + system) of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .unwrap_or_default()
        / 1024.0
}
