//! Replication and restore against a real S3-compatible server with SigV4
//! enforced (moto, see `common/s3_auth.rs`), driving the library with a
//! sled store in a temporary directory. An outage is a TCP gate in front of
//! moto (`common/gate.rs`): moto keeps its objects in memory, so stopping
//! the process would empty the bucket.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::gate::Gate;
use crate::common::history::{self, T0};
use crate::common::s3_auth::{self, AuthS3};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use url::Url;
use vigie::clock::{Clock, FakeClock};
use vigie::outcome::Outcome;
use vigie::replicate::{
    restore, segment, Addressing, Bucket, BucketSettings, ReplicateError, ReplicationState,
    Replicator,
};
use vigie::store::{Granularity, SledStore, Store};

/// A test's bucket, key files and settings.
struct Setup {
    s3: &'static AuthS3,
    dir: tempfile::TempDir,
    bucket: String,
    settings: BucketSettings,
}

fn setup(node: &str) -> Setup {
    let s3 = AuthS3::shared();
    let dir = tempfile::tempdir().unwrap();
    let bucket = s3.bucket();
    let (id, secret) = s3.write_keys(dir.path());
    let settings = BucketSettings {
        url: Url::parse(&format!("s3://{bucket}/{node}")).unwrap(),
        endpoint: Some(Url::parse(&s3.endpoint()).unwrap()),
        region: Some("eu-west-3".to_string()),
        access_key_id_file: Some(id),
        secret_access_key_file: Some(secret),
        credentials: vigie::config::Credentials::Files,
        addressing: Addressing::Path,
        extra_ca_file: None,
        request_timeout: Duration::from_secs(20),
        max_retries: 1,
        retry_timeout: Duration::from_secs(3),
    };
    Setup {
        s3,
        dir,
        bucket,
        settings,
    }
}

impl Setup {
    fn store(&self, name: &str) -> Arc<SledStore> {
        Arc::new(
            SledStore::open_when_unlocked(&self.dir.path().join(name), Duration::from_millis(200))
                .unwrap(),
        )
    }

    fn replicator(&self, store: &Arc<SledStore>, clock: &FakeClock) -> Replicator {
        Replicator::new(
            &self.settings,
            Duration::from_secs(300),
            store.clone(),
            Arc::new(clock.clone()),
        )
        .unwrap()
    }

    fn bucket(&self) -> Bucket {
        Bucket::open(&self.settings).unwrap()
    }

    /// A plain S3 client with the same key, to look at and tamper with
    /// objects the way an operator (or bit rot) would.
    fn raw(&self) -> impl ObjectStore {
        AmazonS3Builder::new()
            .with_endpoint(self.s3.endpoint())
            .with_allow_http(true)
            .with_region("eu-west-3")
            .with_bucket_name(&self.bucket)
            .with_access_key_id(&self.s3.access_key_id)
            .with_secret_access_key(&self.s3.secret_access_key)
            .build()
            .unwrap()
    }

    async fn segment_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        self.bucket()
            .list("history/", &mut |name| names.push(name))
            .await
            .unwrap();
        names.sort();
        names
    }

    /// Every (seq, check, millis) in the bucket's segments, verified.
    async fn shipped(&self, node: &str) -> Vec<(u64, String, i128)> {
        let bucket = self.bucket();
        let mut all = Vec::new();
        for name in self.segment_names().await {
            let bytes = bucket.get(&name).await.unwrap();
            let segment = segment::decode(node, &name, &bytes).unwrap();
            for (seq, outcome) in segment.results {
                all.push((seq, outcome.name.clone(), millis(&outcome)));
            }
        }
        all
    }
}

fn millis(outcome: &Outcome) -> i128 {
    outcome.started_at.unix_timestamp_nanos() / 1_000_000
}

fn clock() -> FakeClock {
    FakeClock::new(T0 + time::Duration::days(1))
}

fn append_all(store: &SledStore, outcomes: impl IntoIterator<Item = Outcome>) -> usize {
    let mut n = 0;
    for outcome in outcomes {
        store.append(&outcome).unwrap();
        n += 1;
    }
    n
}

/// Each check's whole history, by name.
fn everything(store: &SledStore) -> BTreeMap<String, Vec<Outcome>> {
    store
        .latest_all()
        .unwrap()
        .into_iter()
        .map(|latest| {
            let name = latest.name.clone();
            (
                name.clone(),
                store.history(&name, OffsetDateTime::UNIX_EPOCH).unwrap(),
            )
        })
        .collect()
}

fn no_duplicates(shipped: &[(u64, String, i128)]) {
    let keys: BTreeSet<(&String, i128)> = shipped.iter().map(|(_, n, m)| (n, *m)).collect();
    assert_eq!(keys.len(), shipped.len(), "a result was shipped twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_store_is_replicated_as_it_grows() {
    let setup = setup("probe-a");
    let clock = clock();
    let store = setup.store("history");
    append_all(
        &store,
        history::rounds(5, time::Duration::seconds(30), T0, 4),
    );
    let replicator = Replicator::new(
        &setup.settings,
        Duration::from_millis(150),
        store.clone(),
        Arc::new(clock.clone()),
    )
    .unwrap()
    .with_batch_size(1000);
    let status = replicator.status();
    let shutdown = CancellationToken::new();
    let task = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { replicator.run(shutdown).await })
    };

    // Probes keep landing while the replicator ships every 150 ms.
    let mut appended = 20;
    for round in 4..40u64 {
        appended += append_all(
            &store,
            history::rounds(
                5,
                time::Duration::seconds(30),
                T0 + time::Duration::seconds(30 * round as i64),
                1,
            ),
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    shutdown.cancel();
    task.await.unwrap();

    let shipped = setup.shipped("probe-a").await;
    assert_eq!(
        shipped.len(),
        appended,
        "every result shipped, at the latest by the last shipment at shutdown"
    );
    no_duplicates(&shipped);
    let mut seqs: Vec<u64> = shipped.iter().map(|s| s.0).collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (1..=appended as u64).collect::<Vec<_>>(),
        "every seq once, no gap"
    );
    let names = setup.segment_names().await;
    assert!(
        names.len() >= 2,
        "several cycles, one segment each: {names:?}"
    );
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("history/probe-a/2026/11/29/")),
        "{names:?}"
    );
    let snapshot = status.snapshot(clock.now());
    assert_eq!(
        (snapshot.status, snapshot.lag_results, snapshot.lag_seconds),
        (ReplicationState::Ok, 0, 0.0)
    );
    assert_eq!(snapshot.results_total, appended as u64);
    assert_eq!(store.replication_backlog().unwrap().results, 0);

    // Consecutive segments chain: each names the last seq of the previous.
    let bucket = setup.bucket();
    let mut previous_last = 0;
    for name in &names {
        let segment = segment::decode("probe-a", name, &bucket.get(name).await.unwrap()).unwrap();
        assert_eq!(segment.header.after, previous_last, "{name}");
        previous_last = segment.header.last;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_the_backlog_is_shipped_in_bounded_batches_nothing_lost_nothing_twice() {
    let mut setup = setup("probe-b");
    let gate = Gate::start(setup.s3.server.addr).await;
    setup.settings.endpoint = Some(Url::parse(&gate.endpoint()).unwrap());
    let clock = clock();
    let store = setup.store("history");
    let replicator = setup.replicator(&store, &clock).with_batch_size(300);
    let status = replicator.status();
    let every = time::Duration::seconds(30);
    append_all(&store, history::rounds(10, every, T0, 3));
    assert_eq!(replicator.cycle(None).await.unwrap().segments, 1);

    gate.close();
    append_all(&store, history::rounds(10, every, T0 + every * 3, 100));
    clock.advance(Duration::from_secs(3000));
    for attempt in 1..=2 {
        let err = replicator.cycle(None).await.unwrap_err();
        assert!(
            matches!(err, ReplicateError::Unreachable { .. }),
            "attempt {attempt}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("cannot reach {} when ", gate.endpoint()))
                && message.ends_with("results stay queued and are shipped once it answers"),
            "{message}"
        );
    }
    assert!(gate.dropped() > 0);
    let snapshot = status.snapshot(clock.now());
    assert_eq!(snapshot.status, ReplicationState::Failing);
    assert_eq!(snapshot.lag_results, 1000);
    assert!(snapshot.lag_seconds > 2000.0, "{snapshot:?}");
    assert!(snapshot.reason().unwrap().starts_with(
        "replication failing (2 cycles in a row, 1000 results waiting): cannot reach"
    ));
    // Retention cannot take what has not left yet.
    assert_eq!(
        store.sweep(T0 + time::Duration::days(30)).unwrap(),
        30,
        "only the 30 shipped results go"
    );

    gate.open();
    let report = replicator.cycle(None).await.unwrap();
    assert_eq!(
        (report.segments, report.results),
        (4, 1000),
        "300 + 300 + 300 + 100"
    );
    assert_eq!(status.snapshot(clock.now()).status, ReplicationState::Ok);
    let shipped = setup.shipped("probe-b").await;
    assert_eq!(shipped.len(), 1030);
    no_duplicates(&shipped);
    assert_eq!(setup.segment_names().await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_upload_and_cursor_update_uploads_the_same_object_again() {
    let setup = setup("probe-c");
    let clock = clock();
    let every = time::Duration::seconds(30);
    let first_name;
    let first_bytes;
    {
        let store = setup.store("history");
        store.enable_replication().unwrap();
        append_all(&store, history::rounds(4, every, T0, 10));
        // What the replicator does, minus the last step: the process dies
        // after the upload and before the cursor moves.
        let shipment = store.next_shipment(25, clock.now()).unwrap().unwrap();
        let (name, bytes) = segment::encode("probe-c", &shipment).unwrap();
        setup.bucket().put(&name, bytes.clone()).await.unwrap();
        (first_name, first_bytes) = (name, bytes);
        store
            .append(&history::outcome("site-0", T0 + every * 10, 99))
            .unwrap();
    }
    // Later, another start.
    clock.advance(Duration::from_secs(7200));
    let store = setup.store("history");
    let replicator = setup.replicator(&store, &clock).with_batch_size(25);
    append_all(&store, history::rounds(4, every, T0 + every * 11, 2));
    let report = replicator.cycle(None).await.unwrap();
    assert_eq!(report.results, 25 + 15 + 1 + 8);

    let names = setup.segment_names().await;
    assert_eq!(names[0], first_name);
    let again = setup
        .raw()
        .get(&ObjectPath::from(first_name.as_str()))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        again.as_ref(),
        first_bytes.as_slice(),
        "same name, same bytes"
    );
    let shipped = setup.shipped("probe-c").await;
    assert_eq!(shipped.len(), 49);
    no_duplicates(&shipped);
}

/// A store with a varied history, replicated in several segments.
async fn replicated_original(setup: &Setup, node: &str, clock: &FakeClock) -> Arc<SledStore> {
    let store = setup.store("original");
    let replicator = setup.replicator(&store, clock).with_batch_size(100);
    let every = time::Duration::seconds(30);
    append_all(&store, history::rounds(12, every, T0, 40));
    // A late result (appended after newer ones) and a replaced one (same
    // check, same millisecond, new value).
    store
        .append(&history::outcome(
            "site-1",
            T0 + every * 3 + time::Duration::seconds(1),
            7,
        ))
        .unwrap();
    let mut replaced = history::outcome(
        "site-2",
        T0 + every * 5 + time::Duration::milliseconds(14),
        3,
    );
    replaced.duration_ms = 1.0 / 3.0;
    store.append(&replaced).unwrap();
    let report = replicator.cycle(None).await.unwrap();
    assert!(report.segments >= 3, "{report:?}");
    assert_eq!(setup.bucket().node(), node);
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_into_an_empty_directory_answers_history_like_the_original_and_twice_changes_nothing(
) {
    let setup = setup("probe-d");
    let clock = clock();
    let original = replicated_original(&setup, "probe-d", &clock).await;
    let expected = everything(&original);
    assert_eq!(expected.len(), 12);

    let restored = setup.store("restored");
    let report = restore(&setup.bucket(), restored.clone()).await.unwrap();
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.store.added, original.len().unwrap());
    assert_eq!(
        report.results,
        report.store.added + report.store.replaced + report.store.unchanged
    );
    assert_eq!(everything(&restored), expected);
    assert_eq!(restored.len().unwrap(), original.len().unwrap());
    for name in expected.keys() {
        let since = T0 + time::Duration::minutes(7);
        assert_eq!(
            restored.history(name, since).unwrap(),
            original.history(name, since).unwrap()
        );
        assert_eq!(
            restored.latest(name).unwrap(),
            original.latest(name).unwrap()
        );
    }
    assert_eq!(report.cursor, original.replication_cursor());
    // The rollups, recomputed from the restored results, are the
    // original's, and so is the certificate timeline. The one exception is
    // what the store documents for a replaced result: site-2's original
    // rollups keep the extremes (max, fewest days left) of the result its
    // replacement took out.
    for name in expected.keys() {
        for granularity in Granularity::ALL {
            let mut ours = restored
                .rollups(name, granularity, OffsetDateTime::UNIX_EPOCH)
                .unwrap();
            let theirs = original
                .rollups(name, granularity, OffsetDateTime::UNIX_EPOCH)
                .unwrap();
            assert!(!ours.is_empty());
            if name == "site-2" {
                for (ours, theirs) in ours.iter_mut().zip(&theirs) {
                    ours.max_ms = theirs.max_ms;
                    ours.min_days_left = theirs.min_days_left;
                }
            }
            assert_eq!(ours, theirs, "{name} {granularity:?}");
        }
        assert_eq!(
            restored.certificates(name).unwrap(),
            original.certificates(name).unwrap()
        );
    }

    let again = restore(&setup.bucket(), restored.clone()).await.unwrap();
    assert_eq!((again.store.added, again.store.replaced), (0, 0), "{again}");
    assert_eq!(again.store.unchanged, report.results);
    assert_eq!(again.cursor, report.cursor);
    assert_eq!(everything(&restored), expected);

    // The restored vigie carries on where the old one stopped: same node,
    // the next seq, no name reused.
    drop(original);
    let replicator = setup.replicator(&restored, &clock);
    restored
        .append(&history::outcome("site-0", T0 + time::Duration::days(1), 1))
        .unwrap();
    let before = setup.segment_names().await;
    assert_eq!(replicator.cycle(None).await.unwrap().results, 1);
    let after = setup.segment_names().await;
    assert_eq!(after.len(), before.len() + 1);
    let new = after.iter().find(|n| !before.contains(n)).unwrap();
    let segment = segment::decode("probe-d", new, &setup.bucket().get(new).await.unwrap()).unwrap();
    assert_eq!(
        (segment.header.after, segment.header.first),
        (report.cursor, report.cursor + 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_missing_segment_is_named_and_the_rest_restored() {
    let setup = setup("probe-e");
    let clock = clock();
    let original = replicated_original(&setup, "probe-e", &clock).await;
    let names = setup.segment_names().await;
    assert!(names.len() >= 4, "{names:?}");
    let raw = setup.raw();

    // Bit rot in one segment, another deleted, a stray object.
    let damaged = &names[1];
    let mut bytes = raw
        .get(&ObjectPath::from(damaged.as_str()))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    raw.put(&ObjectPath::from(damaged.as_str()), bytes.into())
        .await
        .unwrap();
    let deleted = &names[2];
    raw.delete(&ObjectPath::from(deleted.as_str()))
        .await
        .unwrap();
    raw.put(
        &ObjectPath::from("history/probe-e/notes.txt"),
        "hello".into(),
    )
    .await
    .unwrap();

    let restored = setup.store("restored");
    let report = restore(&setup.bucket(), restored.clone()).await.unwrap();
    assert!(!report.is_complete());
    assert_eq!(report.corrupt.len(), 1, "{report}");
    assert_eq!(&report.corrupt[0].name, damaged);
    assert!(
        report.corrupt[0].reason.starts_with("cannot decompress it"),
        "{report}"
    );
    assert_eq!(report.gaps.len(), 1, "{report}");
    assert_eq!(
        &report.gaps[0].next, &names[3],
        "the gap is reported before the segment after it"
    );
    assert_eq!(report.foreign, ["history/probe-e/notes.txt"]);
    assert_eq!(report.restored_segments, names.len() - 2);
    let text = report.to_string();
    assert!(
        text.contains(&format!("corrupt segment {damaged}: cannot decompress it")),
        "{text}"
    );
    assert!(text.contains(&format!("and before {}", names[3])), "{text}");

    // Everything else is there, exactly.
    // Everything else is there, exactly: every restored result equals the
    // original's, and only the two bad segments' results (at most two
    // batches of 100) are missing.
    let original_all: BTreeMap<(String, i128), Outcome> = everything(&original)
        .into_values()
        .flatten()
        .map(|o| ((o.name.clone(), millis(&o)), o))
        .collect();
    let restored_all: Vec<Outcome> = everything(&restored).into_values().flatten().collect();
    for outcome in &restored_all {
        assert_eq!(
            Some(outcome),
            original_all.get(&(outcome.name.clone(), millis(outcome)))
        );
    }
    let lost = original_all.len() - restored_all.len();
    assert!(lost > 0 && lost <= 200, "{lost} lost");
    assert!(
        report.cursor >= original.replication_cursor(),
        "past every name, even the bad ones"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_are_refused_with_a_clear_error() {
    let mut setup = setup("probe-f");
    let clock = clock();
    let (id, secret) =
        s3_auth::write_keys(setup.dir.path(), &setup.s3.access_key_id, "not-the-secret");
    setup.settings.access_key_id_file = Some(id);
    setup.settings.secret_access_key_file = Some(secret);
    let store = setup.store("history");
    let replicator = setup.replicator(&store, &clock);
    store.append(&history::outcome("site-0", T0, 0)).unwrap();
    let err = replicator.cycle(None).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, ReplicateError::Denied { .. }), "{message}");
    assert!(
        message.starts_with(&format!(
            "s3://{}/probe-f at {} refused vigie's credentials when listing history/probe-f/: SignatureDoesNotMatch",
            setup.bucket,
            setup.s3.endpoint()
        )),
        "{message}"
    );
    assert!(
        message.contains("; check [replication] access_key_id_file and secret_access_key_file"),
        "{message}"
    );
    assert_eq!(
        store.replication_backlog().unwrap().results,
        1,
        "nothing shipped, nothing lost"
    );

    let (id, secret) = s3_auth::write_keys(
        setup.dir.path(),
        "AKIAUNKNOWNKEY000000",
        &setup.s3.secret_access_key,
    );
    setup.settings.access_key_id_file = Some(id);
    setup.settings.secret_access_key_file = Some(secret);
    let err = restore(
        &Bucket::open(&setup.settings).unwrap(),
        setup.store("restored"),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "refused vigie's credentials when listing history/probe-f/: InvalidAccessKeyId"
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_and_a_missing_key_file_are_named() {
    let mut setup = setup("probe-g");
    setup.settings.url = Url::parse("s3://no-such-bucket-here/probe-g").unwrap();
    let clock = clock();
    let store = setup.store("history");
    let replicator = setup.replicator(&store, &clock);
    store.append(&history::outcome("site-0", T0, 0)).unwrap();
    let err = replicator.cycle(None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the bucket no-such-bucket-here does not exist at {}: create it (docs/replication.md), or correct [replication] url, endpoint and region",
            setup.s3.endpoint()
        )
    );

    let missing = setup.dir.path().join("nope");
    setup.settings.secret_access_key_file = Some(missing.clone());
    let err = Bucket::open(&setup.settings).unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "cannot read [replication] secret_access_key_file {}: ",
            missing.display()
        )),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_store_does_not_write_over_a_nodes_history() {
    let setup = setup("probe-h");
    let clock = clock();
    replicated_original(&setup, "probe-h", &clock).await;
    let fresh = setup.store("fresh");
    let replicator = setup.replicator(&fresh, &clock);
    fresh
        .append(&history::outcome("site-0", T0 + time::Duration::days(2), 0))
        .unwrap();
    let before = setup.segment_names().await;
    let err = replicator.cycle(None).await.unwrap_err();
    assert!(
        matches!(err, ReplicateError::NodeHasHistory { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("run `vigie restore` to continue that history here"),
        "{err}"
    );
    assert_eq!(setup.segment_names().await, before);
}

#[test]
fn moto_enforces_signatures() {
    let s3 = AuthS3::shared();
    let (status, body) = s3_auth::http(s3.server.addr, "GET", "/repl-0", &[], "");
    assert_ne!(status, 200, "{body}");
}

/// Set in the child process of the kill -9 test: its directory.
const CRASH_CHILD: &str = "VIGIE_REPLICATE_CRASH_CHILD_DIR";
const CRASH_ENDPOINT: &str = "VIGIE_REPLICATE_CRASH_ENDPOINT";
const CRASH_BUCKET: &str = "VIGIE_REPLICATE_CRASH_BUCKET";

/// The crash itself: this test binary re-executed with [`CRASH_CHILD`] set
/// stores results, uploads its first segment exactly as the replicator
/// does, says so, and waits to be killed before it can advance the cursor.
#[test]
fn kill_9_between_upload_and_cursor_update_uploads_the_same_object_again() {
    if let Some(dir) = std::env::var_os(CRASH_CHILD) {
        crash_child(Path::new(&dir));
    }
    let setup = setup("probe-i");
    let store_dir = setup.dir.path().join("history");
    let marker = setup.dir.path().join("uploaded");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "replicate::kill_9_between_upload_and_cursor_update_uploads_the_same_object_again",
            "--nocapture",
        ])
        .env(CRASH_CHILD, setup.dir.path())
        .env(CRASH_ENDPOINT, setup.s3.endpoint())
        .env(CRASH_BUCKET, &setup.bucket)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never uploaded"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child exited ({status}) before uploading");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let uploaded = std::fs::read_to_string(&marker).unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let first = setup
            .raw()
            .get(&ObjectPath::from(uploaded.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let store = Arc::new(
            SledStore::open_when_unlocked(&store_dir, Duration::from_millis(200)).unwrap(),
        );
        assert_eq!(
            store.len().unwrap(),
            40,
            "everything the child stored before uploading survived"
        );
        let clock = FakeClock::new(T0 + time::Duration::days(3));
        let replicator = setup.replicator(&store, &clock).with_batch_size(25);
        let report = replicator.cycle(None).await.unwrap();
        assert_eq!((report.segments, report.results), (2, 40));

        let names = setup.segment_names().await;
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[0], uploaded, "the interrupted batch keeps its name");
        let again = setup
            .raw()
            .get(&ObjectPath::from(uploaded.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(again, first, "and its bytes");
        let puts = setup
            .s3
            .server
            .log_text()
            .lines()
            .filter(|line| line.contains(&format!("\"PUT /{}/{uploaded} ", setup.bucket)))
            .count();
        assert_eq!(
            puts, 2,
            "uploaded by the child, then again after the restart"
        );
        let shipped = setup.shipped("probe-i").await;
        assert_eq!(shipped.len(), 40);
        no_duplicates(&shipped);
    });
}

fn crash_child(dir: &Path) -> ! {
    let endpoint = std::env::var(CRASH_ENDPOINT).unwrap();
    let bucket = std::env::var(CRASH_BUCKET).unwrap();
    let settings = BucketSettings {
        url: Url::parse(&format!("s3://{bucket}/probe-i")).unwrap(),
        endpoint: Some(Url::parse(&endpoint).unwrap()),
        region: Some("eu-west-3".to_string()),
        access_key_id_file: Some(dir.join("s3-access-key-id")),
        secret_access_key_file: Some(dir.join("s3-secret-access-key")),
        credentials: vigie::config::Credentials::Files,
        addressing: Addressing::Path,
        extra_ca_file: None,
        request_timeout: Duration::from_secs(20),
        max_retries: 1,
        retry_timeout: Duration::from_secs(3),
    };
    let store =
        SledStore::open_when_unlocked(&dir.join("history"), Duration::from_millis(200)).unwrap();
    store.enable_replication().unwrap();
    append_all(
        &store,
        history::rounds(4, time::Duration::seconds(30), T0, 10),
    );
    let shipment = store
        .next_shipment(25, T0 + time::Duration::days(1))
        .unwrap()
        .unwrap();
    let (name, bytes) = segment::encode("probe-i", &shipment).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(Bucket::open(&settings).unwrap().put(&name, bytes))
        .unwrap();
    let marker = dir.join("uploaded");
    std::fs::write(dir.join("uploaded.tmp"), &name).unwrap();
    std::fs::rename(dir.join("uploaded.tmp"), marker).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Incident updates ride the replication cycle: one written while the
/// bucket is unreachable stays marked and leaves with the next cycle that
/// works, nothing twice; a restore into a fresh directory brings every
/// update back under its incident, and a second restore adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incident_updates_reach_the_bucket_after_an_outage_and_a_restore_brings_them_back() {
    use vigie::alert::IncidentId;
    use vigie::incident_update::{IncidentUpdate, UpdateState};
    let mut setup = setup("probe-u");
    let gate = Gate::start(setup.s3.server.addr).await;
    setup.settings.endpoint = Some(Url::parse(&gate.endpoint()).unwrap());
    let clock = clock();
    let store = setup.store("original");
    let replicator = setup.replicator(&store, &clock);
    append_all(
        &store,
        history::rounds(2, time::Duration::seconds(30), T0, 3),
    );
    let updates = store.alerts().unwrap().incident_updates();
    let since = T0 + time::Duration::minutes(1);
    let update = |minutes: i64, state: UpdateState, text: &str| IncidentUpdate {
        check: "site-1".to_string(),
        incident: IncidentId::new("site-1", since + time::Duration::seconds(30)),
        since,
        at: since + time::Duration::minutes(minutes),
        state,
        text: text.to_string(),
    };
    updates
        .add(&update(5, UpdateState::Investigating, "Looking into it"))
        .unwrap();
    assert_eq!(replicator.cycle(None).await.unwrap().updates, 1);

    gate.close();
    updates
        .add(&update(
            9,
            UpdateState::Identified,
            "The **DNS** zone lost its records",
        ))
        .unwrap();
    let err = replicator.cycle(None).await.unwrap_err();
    assert!(matches!(err, ReplicateError::Unreachable { .. }), "{err}");
    gate.open();
    assert_eq!(replicator.cycle(None).await.unwrap().updates, 1);
    assert_eq!(replicator.cycle(None).await.unwrap().updates, 0);
    let mut names = Vec::new();
    setup
        .bucket()
        .list("updates/probe-u/", &mut |name| names.push(name))
        .await
        .unwrap();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("updates/probe-u/site-1/"), "{names:?}");

    let restored = setup.store("restored");
    let report = restore(&setup.bucket(), restored.clone()).await.unwrap();
    assert!(report.is_complete(), "{report}");
    assert_eq!((report.updates.listed, report.updates.added), (2, 2));
    assert!(
        report
            .to_string()
            .contains("incident updates: 2 listed, 2 added"),
        "{report}"
    );
    let back = restored.alerts().unwrap().incident_updates();
    assert_eq!(
        back.of_incident("site-1", since).unwrap(),
        updates.of_incident("site-1", since).unwrap()
    );
    assert!(
        back.unshipped().unwrap().is_empty(),
        "restored, not to ship"
    );
    let again = restore(&setup.bucket(), restored.clone()).await.unwrap();
    assert_eq!((again.updates.listed, again.updates.added), (2, 0));
}
