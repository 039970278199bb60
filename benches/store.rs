//! History store cost: append throughput, bytes on disk per result, and the
//! time to answer `history` for one check, with 1000 checks stored.
//!
//! The load is one day of a realistic fleet: every check probed every 30 s
//! (2880 results per check), a 2-certificate chain per target (50 distinct
//! wildcard chains shared by the checks), one result in 200 a timeout
//! without TLS or HTTP. Results are appended in time order, all checks
//! interleaved, as the scheduler does, with the store's default packing
//! (blocks of 20). Then the oldest quarter is swept and the store flushed
//! before measuring the disk: the store directory's size (sled's file,
//! log garbage included, and the journal of the unpacked results) and
//! the key + value bytes of the `results` tree. sled never
//! gives back space inside its file (it only truncates a free tail), so the
//! file size is the high-water mark of the append phase; the bench also
//! prints what the appends wrote to the file (log garbage included) and
//! the file's size right after them. Dropping what
//! `history` returned is left out of its time (the caller's cost).
//!
//! The full size takes about 3 minutes on 2 idle cores; pass a smaller
//! RESULTS_PER_CHECK to go faster (disk figures then come out higher: the
//! log garbage is a larger share of less data).
//!
//! Run: `cargo bench --bench store` (or `-- CHECKS RESULTS_PER_CHECK`).

use std::path::Path;
use std::time::{Duration, Instant};

use vigie::store::{SledStore, Store};

#[path = "support/fleet.rs"]
mod fleet;
use fleet::{check_name, dir_size, outcome, status_kib, written_bytes, INTERVAL, T0};
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
    let written_before = written_bytes();
    let started = Instant::now();
    for round in 0..per_check {
        for check in 0..checks {
            store.append(&outcome(check, round)).expect("append");
        }
    }
    store.flush().expect("flush");
    let append_secs = started.elapsed().as_secs_f64();
    let written = written_bytes() - written_before;
    let (_, appended_allocated) = dir_size(&db);
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
    let trees = tree_bytes(&db);
    let logical: u64 = trees
        .iter()
        .filter(|t| t.name == "results")
        .map(|t| t.keys + t.values)
        .sum();
    let journal = std::fs::metadata(db.join("newest.journal")).map_or(0, |m| m.len());

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
        "  the appends:   wrote {:.0} bytes/result appended to sled's file; the file was then {:.1} MiB allocated ({:.0} bytes/result appended)",
        written as f64 / appended as f64,
        appended_allocated as f64 / (1024.0 * 1024.0),
        appended_allocated as f64 / appended as f64
    );
    println!(
        "  the journal:   {:.1} KiB ({:.2} bytes/result kept) of unpacked results",
        journal as f64 / 1024.0,
        journal as f64 / kept as f64
    );
    println!("  by tree (per kept result): entries, key bytes, value bytes");
    for tree in &trees {
        let per = |bytes: u64| bytes as f64 / kept as f64;
        println!(
            "    {:<12} {:>9} entries  key {:6.2}  value {:6.2}{}",
            tree.name,
            tree.entries,
            per(tree.keys),
            per(tree.values),
            match tree.block_headers {
                0 => String::new(),
                headers => format!(
                    "  (block headers {:.2}, records {:.2})",
                    per(headers),
                    per(tree.values - headers)
                ),
            }
        );
    }
    println!(
        "  RSS:           {} MiB after the appends (peak {} MiB until then); peak {} MiB with the reads and the sweep",
        appended_rss / 1024,
        appended_peak / 1024,
        status_kib("VmHWM") / 1024
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Entries, key bytes and value bytes of one tree; for `results`, the
/// part of the values that is block headers (format byte, count, last
/// millis, raw length: 17 bytes per block) rather than records.
struct TreeBytes {
    name: &'static str,
    entries: u64,
    keys: u64,
    values: u64,
    block_headers: u64,
}

/// What every tree of the store holds, read with sled directly: where a
/// result's bytes go before sled's own overhead (the file size less these).
fn tree_bytes(db: &Path) -> Vec<TreeBytes> {
    const TREES: [&str; 8] = [
        "results",
        "checks",
        "chains",
        "chain_uses",
        "rollups",
        "leaves",
        "replication",
        "meta",
    ];
    let db = sled::open(db).expect("reopen with sled");
    TREES
        .into_iter()
        .map(|name| {
            let tree = db.open_tree(name).expect("open tree");
            let mut bytes = TreeBytes {
                name,
                entries: 0,
                keys: 0,
                values: 0,
                block_headers: 0,
            };
            for entry in tree.iter() {
                let (key, value) = entry.expect("read entry");
                bytes.entries += 1;
                bytes.keys += key.len() as u64;
                bytes.values += value.len() as u64;
                if name == "results" && matches!(value.first(), Some(2 | 4)) {
                    bytes.block_headers += 17;
                }
            }
            bytes
        })
        .collect()
}
