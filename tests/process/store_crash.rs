//! kill -9 a process that is writing history, several times, and check
//! what the sled store gives back each time: it opens, nothing is damaged
//! (every record decodes), and what survived is exactly the results
//! 0..=n of the sequence written, with n at least the last one flushed.
//!
//! The writer is this test binary re-executed with [`CHILD_DIR`] set: the
//! same test function then writes forever instead of supervising. It
//! spreads results over three checks, changes certificate chain every 150
//! results and target every 400, so that new checks, dictionary strings,
//! chains and chain uses are written mid-stream, before the results that
//! refer to them; with the default packing (blocks of 20, the newest 4
//! kept single), each check packs a block every 20 results, so kills also
//! land around packs.
//! No network is involved.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use time::macros::datetime;
use time::OffsetDateTime;

use vigie::cert::CertInfo;
use vigie::check::KindName;
use vigie::outcome::{HttpReport, Outcome, Status, TlsReport};
use vigie::store::{SledStore, Store, StoreError};

/// Set in the writer process: the test's directory (store in `db/`).
const CHILD_DIR: &str = "VIGIE_STORE_CRASH_WRITER_DIR";
/// The test's name as the test binary lists it (its module path without
/// the binary's name), which the writer is started with.
const TEST_NAME: &str = "store_crash::kill_9_loses_only_the_unflushed_tail";
const CHECKS: u64 = 3;
const FLUSH_EVERY: Duration = Duration::from_millis(40);
const ROUNDS: usize = 5;
/// Results between explicit flushes; in between, only the background flush
/// (every `FLUSH_EVERY`) writes, so kills land on partly written tails.
const EXPLICIT_FLUSH: u64 = 500;
const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);

#[test]
fn kill_9_loses_only_the_unflushed_tail() {
    let _alone = crate::alone();
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        write_forever(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut flushed_before = None;
    for round in 0..ROUNDS {
        let mut writer = spawn_writer(dir.path());
        let flushed = wait_for_flushes(dir.path(), flushed_before, &mut writer);
        assert_locked_while_writer_runs(&db_dir(dir.path()));
        std::thread::sleep(Duration::from_millis(100 + pseudo_random(400)));
        writer.kill().unwrap(); // SIGKILL
        writer.wait().unwrap();
        let last_flushed = read_flushed(dir.path()).unwrap_or(flushed);

        let store = SledStore::open(&db_dir(dir.path()), FLUSH_EVERY).unwrap();
        let survived = survivors(&store);
        let n = survived.len() as u64;
        assert_eq!(
            survived,
            (0..n).collect::<Vec<_>>(),
            "round {round}: results are not a gap-free prefix"
        );
        assert!(
            n > last_flushed,
            "round {round}: result {last_flushed} was flushed but only {n} survived"
        );
        assert!(
            Some(n) > flushed_before.map(|f| f + 1),
            "round {round}: nothing was added"
        );
        eprintln!("round {round}: {n} results survived, {last_flushed} was the last flushed");
        flushed_before = Some(n - 1);
    }
}

/// The writer: resumes after what is stored, appends forever, flushes
/// every [`EXPLICIT_FLUSH`] results and then records the last flushed
/// sequence number.
fn write_forever(dir: &Path) -> ! {
    let store = SledStore::open(&db_dir(dir), FLUSH_EVERY).unwrap();
    let mut seq = survivors(&store).len() as u64;
    loop {
        store.append(&outcome(seq)).unwrap();
        if seq % EXPLICIT_FLUSH == EXPLICIT_FLUSH - 1 {
            store.flush().unwrap();
            let tmp = dir.join("flushed.tmp");
            std::fs::write(&tmp, seq.to_string()).unwrap();
            std::fs::rename(&tmp, flushed_file(dir)).unwrap();
        }
        seq += 1;
    }
}

/// Result `seq`: check `seq % 3`, started `seq` ms after T0 (so key order
/// is sequence order), the sequence number in `duration_ms`.
fn outcome(seq: u64) -> Outcome {
    let started_at = T0 + Duration::from_millis(seq);
    let era = seq / 150;
    Outcome {
        name: format!("check-{}", seq % CHECKS),
        kind: KindName::Http,
        target: format!("https://site.example/v{}", seq / 400),
        status: Status::Up,
        started_at,
        duration_ms: seq as f64,
        failures: Vec::new(),
        probe_error: None,
        http: Some(HttpReport {
            status: 200,
            version: "HTTP/1.1".to_string(),
            redirects: 0,
            final_url: None,
            response_ms: 12.5,
            body_bytes: 1024,
            body_truncated: false,
            headers: Vec::new(),
            body: Vec::new(),
        }),
        tls: Some(TlsReport {
            server_name: "site.example".to_string(),
            version: Some("TLSv1.3".to_string()),
            cipher_suite: Some("TLS13_AES_128_GCM_SHA256".to_string()),
            key_exchange: None,
            trusted: true,
            verify_error: None,
            hostname_matches: true,
            ari: None,
            revocation: Vec::new(),
            verified_path: None,
            chain: (0..2).map(|i| cert(era, i, started_at)).collect(),
        }),
        cors: None,
        dns: None,
        upload: None,
        smtp: None,
        domain: None,
    }
}

fn cert(era: u64, position: u64, at: OffsetDateTime) -> CertInfo {
    let not_after = T0 + time::Duration::days(60 + era as i64);
    CertInfo {
        subject: format!("CN=cert {era}.{position}"),
        issuer: format!("CN=issuer {position}"),
        not_before: T0 - time::Duration::days(30),
        not_after,
        days_left: (not_after - at).whole_days(),
        hours_left: (not_after - at).whole_hours(),
        lifetime_hours: (not_after - (T0 - time::Duration::days(30))).whole_hours(),
        sans: vec!["site.example".to_string()],
        serial: format!("{era:04x}{position:02x}"),
        sha256: format!("{era:062x}{position:02x}"),
        key: "ECDSA P-256".to_string(),
        signature: "ecdsa-with-SHA256".to_string(),
    }
}

/// The sequence numbers stored, in key order per check and merged; each
/// result must decode to exactly what was appended.
fn survivors(store: &SledStore) -> Vec<u64> {
    let mut seqs = Vec::new();
    for check in 0..CHECKS {
        let history = store.history(&format!("check-{check}"), T0).unwrap();
        let mut previous = None;
        for stored in history {
            let seq = stored.duration_ms as u64;
            assert_eq!(
                seq % CHECKS,
                check,
                "result {seq} filed under check-{check}"
            );
            assert!(
                previous < Some(seq),
                "check-{check}: {seq} after {previous:?}"
            );
            assert_eq!(
                stored,
                outcome(seq),
                "result {seq} does not read back as written"
            );
            previous = Some(seq);
            seqs.push(seq);
        }
    }
    seqs.sort_unstable();
    seqs
}

fn spawn_writer(dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits until the writer has flushed something new (at most 30 s).
fn wait_for_flushes(dir: &Path, before: Option<u64>, writer: &mut Child) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(flushed) = read_flushed(dir).filter(|&f| Some(f) > before) {
            return flushed;
        }
        if let Some(status) = writer.try_wait().unwrap() {
            panic!("the writer exited on its own: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the writer flushed nothing in 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The lock is per process: a second process gets the operator's message.
fn assert_locked_while_writer_runs(dir: &Path) {
    let err = SledStore::open(dir, FLUSH_EVERY).unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(
        err.to_string().contains("is in use by another process"),
        "{err}"
    );
}

fn db_dir(dir: &Path) -> PathBuf {
    dir.join("db")
}

fn flushed_file(dir: &Path) -> PathBuf {
    dir.join("flushed")
}

fn read_flushed(dir: &Path) -> Option<u64> {
    std::fs::read_to_string(flushed_file(dir))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// 0..bound from the clock's nanoseconds: enough to vary where the kill
/// lands, without a dependency.
fn pseudo_random(bound: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    u64::from(nanos) % bound
}
