//! Off-region replication of the history to S3-compatible storage, and the
//! restore that rebuilds a store from it.
//!
//! # What it owns
//!
//! - [`Replicator`]: the daemon task. Every `interval` it takes the results
//!   appended since the last shipment from the store's replication queue
//!   (see `store/sled/replication.rs`), in bounded batches of
//!   [`BATCH_RESULTS`], writes each batch as one compressed, checksummed
//!   segment ([`segment`]) under a deterministic name, and only then tells
//!   the store to advance its cursor. A crash between upload and cursor
//!   update makes the next start upload the same object again (same name,
//!   same bytes). While the bucket is unreachable the queue grows; the next
//!   successful cycle drains it batch after batch.
//! - [`ReplicationStatus`]: lag (seconds and results behind), counters and
//!   the last error, for `/metrics`, `/healthz` and the heartbeat.
//! - [`restore()`]: lists a node's segments, downloads and verifies each,
//!   reports corrupt and missing ones by name and carries on, and puts the
//!   results into a store, idempotently.
//! - [`updates`]: the incident updates, copied in the same cycle (before
//!   the segments) under `updates/<node>/`, and restored with the history.
//! - [`bucket`]: reaching the bucket (addressing, TLS, credentials, errors).
//!
//! # What it does not
//!
//! It never deletes objects: expiring old segments is the bucket's
//! lifecycle rule (docs/replication.md). It does not decide what the store
//! keeps: the store's sweep refuses to drop unshipped results by itself.
//! And it writes only to `history/<node>/` and `updates/<node>/`, so
//! several vigie instances can share one bucket.

pub mod bucket;
mod listing;
mod restore;
pub mod segment;
pub mod updates;

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::clock::{from_unix_millis, unix_millis, Clock};
use crate::metrics::{flag, Exposition, Family};
use crate::net::CaFileError;
use crate::store::{IncidentUpdates, SledStore, StoreError};

pub use self::bucket::{Addressing, Bucket, BucketSettings};
pub use self::restore::{
    restore, restore_telling, CorruptSegment, Gap, RestoreProgress, RestoreReport,
};
pub use self::segment::SegmentError;
pub use self::updates::UpdatesRestored;

/// Results per segment at most. A day of 1,000 checks every 30 s is 144
/// segments of this size; each is a few hundred kilobytes compressed and
/// takes well under a second to build.
pub const BATCH_RESULTS: usize = 20_000;

/// How long the last shipment at shutdown may take: results of the last
/// interval are worth one more try, a stuck bucket is not worth holding
/// the stop for.
pub const FINAL_SHIP: Duration = Duration::from_secs(10);

/// Consecutive failed cycles before replication counts as failing (one
/// failure is a blip: the next interval retries).
const FAILING_AFTER: u64 = 2;

/// Why replication or restore could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ReplicateError {
    #[error(
        "cannot read [replication] {key} {}: {source} (check that the file exists and that vigie may read it, e.g. through systemd LoadCredential)",
        path.display()
    )]
    KeyFile {
        key: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("[replication] {key} {} is empty: write the key into it", path.display())]
    EmptyKeyFile { key: &'static str, path: PathBuf },
    #[error(
        "no credentials for the replication bucket: set {missing}, or write [replication] credentials = \"instance\" to use the cloud's instance metadata service"
    )]
    NoCredentials { missing: &'static str },
    #[error("{url} is not an s3:// URL with a bucket and a node: write s3://BUCKET/NODE")]
    BadUrl { url: String },
    #[error(
        "the replication URL {url} names no node: write s3://BUCKET/NODE, where NODE names this vigie in the bucket (its segments go under history/NODE/)"
    )]
    NoNode { url: String },
    #[error(
        "refusing plain http to {endpoint}: credentials and history would cross the network in clear; use https (plain http is allowed only to a loopback address)"
    )]
    PlainHttp { endpoint: String },
    #[error("cannot set up TLS for the replication bucket: {0}")]
    Tls(#[from] CaFileError),
    #[error("cannot set up the S3 client for bucket {bucket}: {detail}")]
    Setup { bucket: String, detail: String },
    #[error(
        "{bucket} at {endpoint} refused vigie's credentials when {action}: {detail}; check [replication] access_key_id_file and secret_access_key_file, and that this key may list, read and write {bucket}/"
    )]
    Denied {
        bucket: String,
        endpoint: String,
        action: String,
        detail: String,
    },
    #[error(
        "the bucket {bucket} does not exist at {endpoint}: create it (docs/replication.md), or correct [replication] url, endpoint and region"
    )]
    NoBucket { bucket: String, endpoint: String },
    #[error(
        "cannot reach {endpoint} when {action}: {detail}; results stay queued and are shipped once it answers"
    )]
    Unreachable {
        endpoint: String,
        action: String,
        detail: String,
    },
    #[error("{bucket} failed when {action}: {detail}")]
    Failed {
        bucket: String,
        action: String,
        detail: String,
    },
    #[error(
        "{bucket} already holds history for this node ({example}), but this store has never replicated: \
         run `vigie restore` to continue that history here, or give this vigie another node in [replication] url"
    )]
    NodeHasHistory { bucket: String, example: String },
    #[error("cannot build segment {name}: {source}")]
    Segment { name: String, source: SegmentError },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "`vigie restore` needs [replication] in {} for the endpoint, region and credentials (--from changes only the bucket and node)",
        config.display()
    )]
    NotConfigured { config: PathBuf },
    #[error("cannot create state_dir {}: {source}", path.display())]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("replication task failed: {0}")]
    Task(String),
}

/// The daemon's replication task. Build with [`Replicator::new`], read its
/// [`ReplicationStatus`], then spawn [`Replicator::run`].
pub struct Replicator {
    store: Arc<SledStore>,
    /// The incident updates of the same database, shipped in each cycle.
    updates: IncidentUpdates,
    bucket: Bucket,
    interval: Duration,
    batch: usize,
    clock: Arc<dyn Clock>,
    status: Arc<ReplicationStatus>,
}

/// What one [`Replicator::ship_all`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShipReport {
    pub segments: u64,
    pub results: u64,
    pub bytes: u64,
    /// Incident updates copied.
    pub updates: u64,
}

impl Replicator {
    /// Reaches nothing yet: reads the key files, builds the client, and
    /// turns on queuing in the store (the first time ever, the whole
    /// existing history is queued). Call before the scheduler appends, so
    /// that no result escapes the queue.
    pub fn new(
        settings: &BucketSettings,
        interval: Duration,
        store: Arc<SledStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Replicator, ReplicateError> {
        let bucket = Bucket::open(settings)?;
        let seeded = store.enable_replication()?;
        if seeded > 0 {
            tracing::info!(seeded, bucket = %bucket.shown(), "first replication: existing history queued");
        }
        let status = Arc::new(ReplicationStatus::new(store.clone(), interval));
        let updates = store.alerts()?.incident_updates();
        Ok(Replicator {
            store,
            updates,
            bucket,
            interval,
            batch: BATCH_RESULTS,
            clock,
            status,
        })
    }

    /// Results per segment at most (tests, benchmarks).
    pub fn with_batch_size(mut self, batch: usize) -> Replicator {
        self.batch = batch.max(1);
        self
    }

    /// Shared with `/metrics`, `/healthz` and the heartbeat.
    pub fn status(&self) -> Arc<ReplicationStatus> {
        self.status.clone()
    }

    /// Ships every `interval` (the first cycle at once, which catches up
    /// after a restart) until `shutdown`, then makes one last bounded
    /// attempt so the final minutes leave with the daemon.
    pub async fn run(&self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            let _ = self.cycle(Some(&shutdown)).await;
        }
        match tokio::time::timeout(FINAL_SHIP, self.cycle(None)).await {
            Ok(_) => {}
            Err(_) => tracing::warn!(
                "replication: last shipment at shutdown did not finish within {}s; the queue is kept and shipped at the next start",
                FINAL_SHIP.as_secs()
            ),
        }
    }

    /// One cycle with its bookkeeping: ship, record success or failure,
    /// log.
    pub async fn cycle(
        &self,
        shutdown: Option<&CancellationToken>,
    ) -> Result<ShipReport, ReplicateError> {
        self.status.attempted(self.clock.now());
        match self.ship_all(shutdown).await {
            Ok(report) => {
                let failures = self.status.consecutive_failures.load(Ordering::Relaxed);
                if failures > 0 {
                    tracing::info!(
                        failures,
                        results = report.results,
                        "replication works again; backlog shipped"
                    );
                }
                self.status.succeeded(self.clock.now(), &report);
                if report.segments > 0 {
                    tracing::debug!(
                        segments = report.segments,
                        results = report.results,
                        bytes = report.bytes,
                        "replicated"
                    );
                }
                Ok(report)
            }
            Err(err) => {
                let failures = self.status.failed(&err);
                // Every failure is counted; the log says it once per
                // streak and then every tenth time, not every interval.
                if failures == 1 || failures % 10 == 0 {
                    tracing::error!(error = %err, failures, "replication failed");
                }
                Err(err)
            }
        }
    }

    /// Ships batches until the queue is empty (or `shutdown`). Each batch:
    /// read and encode off the async threads, upload, then advance the
    /// cursor. The first batch ever from this store checks that the bucket
    /// holds no history for this node (a fresh VM that forgot to restore
    /// would otherwise interleave its segments with the old ones).
    pub async fn ship_all(
        &self,
        shutdown: Option<&CancellationToken>,
    ) -> Result<ShipReport, ReplicateError> {
        let mut report = ShipReport::default();
        let backlog = blocking({
            let store = self.store.clone();
            move || store.replication_backlog()
        })
        .await??;
        if backlog.cursor == 0 && !backlog.pending && backlog.results > 0 {
            let prefix = segment::node_prefix(self.bucket.node());
            if let Some(example) = self.bucket.first(&prefix).await? {
                return Err(ReplicateError::NodeHasHistory {
                    bucket: self.bucket.shown(),
                    example,
                });
            }
        }
        // First: a few small objects, which the people reading the status
        // page are waiting for.
        report.updates = updates::ship(&self.bucket, &self.updates).await?;
        loop {
            if shutdown.is_some_and(CancellationToken::is_cancelled) {
                return Ok(report);
            }
            let store = self.store.clone();
            let (batch, now, node) = (self.batch, self.clock.now(), self.bucket.node().to_string());
            let built = blocking(move || -> Result<_, ReplicateError> {
                let Some(range) = store.next_shipment_range(batch, now)? else {
                    return Ok(None);
                };
                let name = segment::object_name(&node, range.formed_at, range.first, range.last);
                let segment_err = |source| ReplicateError::Segment {
                    name: name.clone(),
                    source,
                };
                // Each result is encoded as soon as it is read: the batch
                // never sits in memory decoded.
                let mut builder = segment::Builder::new(
                    &node,
                    range.after,
                    range.first,
                    range.last,
                    range.formed_at,
                )
                .map_err(segment_err)?;
                let mut encoded = Ok(());
                let read = store.read_shipment(&range, &mut |shipped| {
                    if encoded.is_ok() {
                        encoded = builder.add(&shipped);
                    }
                })?;
                encoded.map_err(segment_err)?;
                let (name, bytes) = builder.finish().map_err(segment_err)?;
                Ok(Some((range, read, name, bytes)))
            })
            .await??;
            let Some((range, read, name, bytes)) = built else {
                return Ok(report);
            };
            let size = bytes.len() as u64;
            self.bucket.put(&name, bytes).await?;
            let store = self.store.clone();
            blocking(move || store.shipped_through(range.last)).await??;
            let results = read.results;
            report.segments += 1;
            report.results += results;
            report.bytes += size;
            self.status.shipped_segment(results, size);
        }
    }
}

/// Runs blocking store and CPU work off the async worker threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ReplicateError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ReplicateError::Task(e.to_string()))
}

/// Replication's state for the rest of the daemon. Lock-free except the
/// last error text; the backlog is read from the store on demand (a
/// counter and one key).
#[derive(Debug)]
pub struct ReplicationStatus {
    store: Arc<SledStore>,
    interval: Duration,
    last_attempt_ms: AtomicI64,
    last_success_ms: AtomicI64,
    consecutive_failures: AtomicU64,
    failures_total: AtomicU64,
    segments_total: AtomicU64,
    results_total: AtomicU64,
    bytes_total: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// Where replication stands, as `/healthz` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicationState {
    Ok,
    /// The oldest unshipped result is older than 3 intervals.
    Behind,
    /// 2 or more cycles in a row failed, or the queue cannot be read.
    Failing,
}

/// A reading of [`ReplicationStatus`]. Serialises to the `replication`
/// object of `/healthz`, which names no bucket, endpoint or target; the
/// error text (which names the bucket) is only in the log and [`Self::reason`].
#[derive(Debug, Clone, Serialize)]
pub struct ReplicationSnapshot {
    pub status: ReplicationState,
    /// Age of the oldest result not yet shipped; 0 when none waits.
    pub lag_seconds: f64,
    /// Results not yet shipped.
    pub lag_results: u64,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_success: Option<OffsetDateTime>,
    pub consecutive_failures: u64,
    #[serde(skip)]
    pub failures_total: u64,
    #[serde(skip)]
    pub segments_total: u64,
    #[serde(skip)]
    pub results_total: u64,
    #[serde(skip)]
    pub bytes_total: u64,
    #[serde(skip)]
    pub last_error: Option<String>,
}

impl ReplicationStatus {
    pub fn new(store: Arc<SledStore>, interval: Duration) -> ReplicationStatus {
        ReplicationStatus {
            store,
            interval,
            last_attempt_ms: AtomicI64::new(0),
            last_success_ms: AtomicI64::new(0),
            consecutive_failures: AtomicU64::new(0),
            failures_total: AtomicU64::new(0),
            segments_total: AtomicU64::new(0),
            results_total: AtomicU64::new(0),
            bytes_total: AtomicU64::new(0),
            last_error: Mutex::new(None),
        }
    }

    fn attempted(&self, now: OffsetDateTime) {
        self.last_attempt_ms
            .store(unix_millis(now), Ordering::Relaxed);
    }

    fn succeeded(&self, now: OffsetDateTime, _report: &ShipReport) {
        self.last_success_ms
            .store(unix_millis(now), Ordering::Relaxed);
        self.consecutive_failures.store(0, Ordering::Relaxed);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Records a failure; returns the length of the current streak.
    fn failed(&self, err: &ReplicateError) -> u64 {
        self.failures_total.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.to_string());
        self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn shipped_segment(&self, results: u64, bytes: u64) {
        self.segments_total.fetch_add(1, Ordering::Relaxed);
        self.results_total.fetch_add(results, Ordering::Relaxed);
        self.bytes_total.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The state now. A store that cannot be read counts as failing.
    pub fn snapshot(&self, now: OffsetDateTime) -> ReplicationSnapshot {
        let backlog = self.store.replication_backlog();
        let consecutive_failures = self.consecutive_failures.load(Ordering::Relaxed);
        let mut last_error = self
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (lag_results, lag_seconds) = match &backlog {
            Ok(backlog) => (
                backlog.results,
                backlog
                    .oldest
                    .map_or(0.0, |oldest| (now - oldest).as_seconds_f64().max(0.0)),
            ),
            Err(err) => {
                last_error = Some(err.to_string());
                (0, 0.0)
            }
        };
        let status = if consecutive_failures >= FAILING_AFTER || backlog.is_err() {
            ReplicationState::Failing
        } else if lag_seconds > 3.0 * self.interval.as_secs_f64() {
            ReplicationState::Behind
        } else {
            ReplicationState::Ok
        };
        ReplicationSnapshot {
            status,
            lag_seconds,
            lag_results,
            last_success: from_unix_millis(self.last_success_ms.load(Ordering::Relaxed))
                .filter(|_| self.last_success_ms.load(Ordering::Relaxed) != 0),
            consecutive_failures,
            failures_total: self.failures_total.load(Ordering::Relaxed),
            segments_total: self.segments_total.load(Ordering::Relaxed),
            results_total: self.results_total.load(Ordering::Relaxed),
            bytes_total: self.bytes_total.load(Ordering::Relaxed),
            last_error,
        }
    }
}

impl ReplicationSnapshot {
    /// Why replication degrades the daemon, if it does (for the heartbeat's
    /// `/fail` body and the log); `None` when it is `ok`.
    pub fn reason(&self) -> Option<String> {
        match self.status {
            ReplicationState::Failing => Some(format!(
                "replication failing ({} cycles in a row, {} results waiting): {}",
                self.consecutive_failures,
                self.lag_results,
                self.last_error.as_deref().unwrap_or("unknown error")
            )),
            ReplicationState::Behind => Some(format!(
                "replication is {:.0} s behind ({} results waiting)",
                self.lag_seconds, self.lag_results
            )),
            ReplicationState::Ok => None,
        }
    }

    /// Replication's `/metrics` families.
    pub fn write_metrics(&self, out: &mut String) {
        let mut m = Exposition::new(out);
        let last_success = self
            .last_success
            .map_or(0.0, |t| t.unix_timestamp_nanos() as f64 / 1e9);
        let families = [
            (
                Family::gauge(
                    "vigie_replication_lag_seconds",
                    "Age of the oldest result not yet replicated (0 when none waits).",
                ),
                self.lag_seconds,
            ),
            (
                Family::gauge(
                    "vigie_replication_lag_results",
                    "Results stored and not yet replicated.",
                ),
                self.lag_results as f64,
            ),
            (
                Family::gauge(
                    "vigie_replication_up",
                    "1 unless replication is failing (2 or more cycles in a row failed).",
                ),
                flag(self.status != ReplicationState::Failing),
            ),
            (
                Family::gauge(
                    "vigie_replication_last_success_timestamp_seconds",
                    "When a replication cycle last succeeded (0: never since start).",
                ),
                last_success,
            ),
            (
                Family::gauge(
                    "vigie_replication_consecutive_failures",
                    "Replication cycles failed in a row.",
                ),
                self.consecutive_failures as f64,
            ),
            (
                Family::counter(
                    "vigie_replication_failures_total",
                    "Replication cycles that failed.",
                ),
                self.failures_total as f64,
            ),
            (
                Family::counter("vigie_replication_segments_total", "Segments uploaded."),
                self.segments_total as f64,
            ),
            (
                Family::counter("vigie_replication_results_total", "Results uploaded."),
                self.results_total as f64,
            ),
            (
                Family::counter(
                    "vigie_replication_bytes_total",
                    "Compressed segment bytes uploaded.",
                ),
                self.bytes_total as f64,
            ),
        ];
        for (family, value) in families {
            m.single(&family, value);
        }
    }
}
