//! History store cost: append throughput, bytes on disk per result, and the
//! time to answer `history` for one check, with 1000 checks stored.
//!
//! The load is one day of a realistic fleet: every check probed every 30 s
//! (2880 results per check), a 2-certificate chain per target (50 distinct
//! wildcard chains shared by the checks), one result in 200 a timeout
//! without TLS or HTTP. Results are appended in time order, all checks
//! interleaved, as the scheduler does, with the store's default packing
//! (blocks of 20). Then the oldest quarter is swept and the store flushed
//! before measuring the disk: sled's file size (log garbage included) and
//! the key + value bytes of the `results` and `newest` trees. sled never
//! gives back space inside its file (it only truncates a free tail), so the
//! file size is the high-water mark of the append phase. Dropping what
//! `history` returned is left out of its time (the caller's cost).
//!
//! The full size takes about 3 minutes on 2 idle cores; pass a smaller
//! RESULTS_PER_CHECK to go faster (disk figures then come out higher: the
//! log garbage is a larger share of less data).
//!
//! Run: `cargo bench --bench store` (or `-- CHECKS RESULTS_PER_CHECK`).

use std::path::Path;
use std::time::{Duration, Instant};

use time::macros::datetime;
use time::OffsetDateTime;

use vigie::cert::CertInfo;
use vigie::check::KindName;
use vigie::outcome::{Assertion, Failure, HttpReport, Outcome, ProbeError, Status, TlsReport};
use vigie::store::{SledStore, Store};

const T0: OffsetDateTime = datetime!(2026-11-29 00:00:00 UTC);
const INTERVAL: Duration = Duration::from_secs(30);
const CHAINS: usize = 50;
/// Answers timed: the first is cold (sled reads the check's pages from
/// its file); the daemon's answers are mostly warm ones.
const HISTORY_RUNS: usize = 100;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let checks = args.first().copied().unwrap_or(1000);
    let per_check = args.get(1).copied().unwrap_or(2880);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let store = SledStore::open(&db, Duration::from_millis(500)).expect("open store");

    let appended = (checks * per_check) as u64;
    let started = Instant::now();
    for round in 0..per_check {
        for check in 0..checks {
            store.append(&outcome(check, round)).expect("append");
        }
    }
    store.flush().expect("flush");
    let append_secs = started.elapsed().as_secs_f64();
    // What a daemon holding this store would carry: sled's memory after a
    // day of appends, before the reads and the sweep below add their own.
    let appended_rss = status_kib("VmRSS");
    let appended_peak = status_kib("VmHWM");

    let probed = check_name(checks / 2);
    let mut times = Vec::with_capacity(HISTORY_RUNS);
    let mut answered = 0;
    for _ in 0..HISTORY_RUNS {
        let started = Instant::now();
        let history = store.history(&probed, T0).expect("history");
        times.push(started.elapsed());
        // Dropping 2880 outcomes is the caller's cost, not the store's.
        answered = history.len();
        drop(history);
    }
    let history_first = times[0];
    times.sort();
    let history_median = times[HISTORY_RUNS / 2];
    let history_p90 = times[HISTORY_RUNS * 9 / 10];
    let started = Instant::now();
    let latest_all = store.latest_all().expect("latest_all").len();
    let latest_all_time = started.elapsed();

    let cutoff = T0 + INTERVAL * (per_check / 4) as u32;
    let started = Instant::now();
    let swept = store.sweep(cutoff).expect("sweep");
    let sweep_time = started.elapsed();
    store.flush().expect("flush");
    let kept = store.len().expect("len");
    let chains = store.chain_count();
    drop(store);
    let (apparent, allocated) = dir_size(&db);
    let logical = logical_bytes(&db);

    println!("store bench: {checks} checks x {per_check} results (one every 30 s), sled 0.34.7");
    println!(
        "  append:        {appended} results in {append_secs:.1} s = {:.0} results/s (flush included)",
        appended as f64 / append_secs
    );
    println!(
        "  history:       {answered} results of one check: first (cold) {:.2} ms, \
         median {:.2} ms, p90 {:.2} ms of {HISTORY_RUNS}",
        ms(history_first),
        ms(history_median),
        ms(history_p90)
    );
    println!(
        "  latest_all:    {latest_all} checks in {:.1} ms",
        ms(latest_all_time)
    );
    println!(
        "  sweep:         {swept} results in {:.1} s, {chains} chains kept",
        sweep_time.as_secs_f64()
    );
    println!(
        "  on disk:       {kept} results, {:.0} bytes/result allocated ({:.0} apparent); \
         key+value {:.0} bytes/result",
        allocated as f64 / kept as f64,
        apparent as f64 / kept as f64,
        logical as f64 / kept as f64
    );
    println!(
        "  RSS:           {} MiB after the appends (peak {} MiB until then); peak {} MiB with the reads and the sweep",
        appended_rss / 1024,
        appended_peak / 1024,
        status_kib("VmHWM") / 1024
    );
}

fn check_name(check: usize) -> String {
    format!("check-{check:04}")
}

/// Result `round` of `check`: up over TLS 1.3, except one in 200 timeouts.
fn outcome(check: usize, round: usize) -> Outcome {
    let started_at = T0 + INTERVAL * round as u32 + Duration::from_millis(check as u64 * 29);
    let name = check_name(check);
    let host = format!("{name}.site-{}.example", check % CHAINS);
    let mut outcome = Outcome {
        name,
        kind: KindName::Http,
        target: format!("https://{host}/"),
        status: Status::Up,
        started_at,
        duration_ms: 40.0 + ((check * 7 + round * 13) % 97) as f64 / 3.0,
        failures: Vec::new(),
        probe_error: None,
        http: Some(HttpReport {
            status: 200,
            version: "HTTP/1.1".to_string(),
            redirects: 0,
            final_url: None,
            response_ms: 30.0 + ((check * 11 + round * 5) % 89) as f64 / 7.0,
            body_bytes: 4096 + (check as u64 % 2000),
            body_truncated: false,
            headers: Vec::new(),
            body: Vec::new(),
        }),
        tls: Some(TlsReport {
            server_name: host,
            version: Some("TLSv1.3".to_string()),
            cipher_suite: Some("TLS13_AES_256_GCM_SHA384".to_string()),
            trusted: true,
            verify_error: None,
            hostname_matches: true,
            chain: chain(check % CHAINS, started_at).into(),
        }),
        cors: None,
        dns: None,
    };
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

fn chain(site: usize, at: OffsetDateTime) -> Vec<CertInfo> {
    let leaf_after = datetime!(2027-01-28 06:12:09 UTC);
    let int_after = datetime!(2027-03-12 23:59:59 UTC);
    vec![
        CertInfo {
            subject: format!("CN=*.site-{site}.example"),
            issuer: "C=US, O=Let's Encrypt, CN=R11".to_string(),
            not_before: datetime!(2026-10-30 06:12:10 UTC),
            not_after: leaf_after,
            days_left: (leaf_after - at).whole_days(),
            sans: vec![
                format!("*.site-{site}.example"),
                format!("site-{site}.example"),
            ],
            serial: format!("04f1c2d9a3b0e6f7d8c9b0a1e2f3d4c5{site:04x}"),
            sha256: format!("{site:064x}"),
            key: "ECDSA P-256".to_string(),
            signature: "sha256WithRSAEncryption".to_string(),
        },
        CertInfo {
            subject: "C=US, O=Let's Encrypt, CN=R11".to_string(),
            issuer: "C=US, O=Internet Security Research Group, CN=ISRG Root X1".to_string(),
            not_before: datetime!(2024-03-13 00:00:00 UTC),
            not_after: int_after,
            days_left: (int_after - at).whole_days(),
            sans: Vec::new(),
            serial: "8a7d3e13d62f30ef2386bd29076b34f8".to_string(),
            sha256: "591e9ce6c863d3a079e9fabe1478c7339a26b21269dde795211361024ae31a44".to_string(),
            key: "RSA 2048".to_string(),
            signature: "sha256WithRSAEncryption".to_string(),
        },
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// (apparent, allocated) bytes of every file under `dir`.
fn dir_size(dir: &Path) -> (u64, u64) {
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

/// Key + value bytes of the trees holding results (blocks in `results`,
/// the newest singles in `newest`), read with sled directly.
fn logical_bytes(db: &Path) -> u64 {
    let db = sled::open(db).expect("reopen with sled");
    ["results", "newest"]
        .into_iter()
        .map(|name| {
            let tree = db.open_tree(name).expect("results tree");
            tree.iter()
                .map(|entry| {
                    let (key, value) = entry.expect("read result");
                    (key.len() + value.len()) as u64
                })
                .sum::<u64>()
        })
        .sum()
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> u64 {
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
