//! The `watch` task, the daemon's watch over itself once a second: which
//! checks are late, whether systemd should hear from us, and whether a
//! failing state disk takes writes again. It writes [`Health`];
//! `/healthz`, the metrics and the heartbeat read it, with what degrades
//! vigie ([`degradations`]: replication, mail, blindness). The retention
//! sweep is in `retention.rs`.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::alert::AlertStatus;
use crate::clock::Clock;
use crate::health::{Health, Late, TICK};
use crate::mail::MailStats;
use crate::redact::reason_kind;
use crate::replicate::ReplicationStatus;
use crate::scheduler::Slots;
use crate::supervise::Stage;

/// A check waiting past its due time by less than this is not "late",
/// whatever its interval: a busy second is not an incident.
const LATE_FLOOR: Duration = Duration::from_secs(5);

/// What the watch reads.
#[derive(Clone)]
pub struct WatchParts {
    pub health: Arc<Health>,
    pub slots: Slots,
    pub clock: Arc<dyn Clock>,
    /// Where the store lives: written to, to learn when the disk takes
    /// writes again.
    pub state_dir: std::path::PathBuf,
    /// Told once the disk takes writes again while the store fails.
    pub store_back: Arc<tokio::sync::Notify>,
    /// Reopenings of the store so far in this process.
    pub reopenings: u32,
    /// Where the real store lives, while the daemon runs on a temporary
    /// one: the watch tries to open it there before the daemon stops its
    /// tasks to switch.
    pub real_store: Option<std::path::PathBuf>,
}

/// A failing store's disk is first tried this long after the first error;
/// each try that fails, and each reopening of the store, doubles it, up to
/// [`DISK_RETRY_MAX`], so a disk that fails again at once is neither
/// probed nor reopened in a loop.
const DISK_RETRY: Duration = Duration::from_secs(10);
const DISK_RETRY_MAX: Duration = Duration::from_secs(600);

/// What degrades vigie without stopping it.
#[derive(Clone)]
pub struct Degraders {
    /// Where a store set aside is marked until the operator clears it.
    pub state_dir: std::path::PathBuf,
    pub replication: Option<Arc<ReplicationStatus>>,
    pub mail: Arc<MailStats>,
    pub alerts: Arc<AlertStatus>,
    /// With `[vantage]`.
    pub vantage: Option<Arc<crate::vantage::VantageStats>>,
    pub push: Arc<crate::push::PushStats>,
}

/// Ticks every [`TICK`] until `shutdown`.
pub async fn run(parts: WatchParts, stage: Arc<Stage>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(TICK);
    let mut recorded_before = parts.health.recorded_count();
    let mut watchdog_fed = true;
    let mut disk_retry = DISK_RETRY
        .saturating_mul(1 << parts.reopenings.min(16))
        .min(DISK_RETRY_MAX);
    let mut try_disk_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = parts.clock.now();
        let late = parts.slots.late(now, LATE_FLOOR);
        let worst = late
            .iter()
            .max_by_key(|(_, by)| *by)
            .map(|(check, by)| Late {
                check: check.clone(),
                by: *by,
            });
        let recorded = parts.health.recorded_count();
        let progressing = late.is_empty() || recorded > recorded_before;
        recorded_before = recorded;
        parts.health.tick(now, worst, late.len() as u64);
        let verdict = parts.health.verdict(now);
        let feed = progressing && verdict.feeds_watchdog();
        if feed {
            crate::notify::watchdog();
        }
        if feed != watchdog_fed {
            match feed {
                true => tracing::info!("the systemd watchdog is fed again"),
                false => tracing::error!(
                    reason = verdict
                        .reason
                        .as_deref()
                        .unwrap_or("checks late and nothing recorded"),
                    "the systemd watchdog is no longer fed: systemd will restart vigie"
                ),
            }
            watchdog_fed = feed;
        }
        match parts.health.store_failing() {
            None => try_disk_at = None,
            Some(_) => {
                let at =
                    *try_disk_at.get_or_insert_with(|| tokio::time::Instant::now() + disk_retry);
                if tokio::time::Instant::now() >= at {
                    let back = match &parts.real_store {
                        Some(path) => real_store_opens(path).await,
                        None => disk_takes_writes(&parts.state_dir).await,
                    };
                    if back {
                        parts.store_back.notify_one();
                    } else {
                        disk_retry = disk_retry.saturating_mul(2).min(DISK_RETRY_MAX);
                        tracing::warn!(
                            "the store still cannot be written; next try in {}",
                            crate::when::std_span(disk_retry)
                        );
                    }
                    try_disk_at = Some(tokio::time::Instant::now() + disk_retry);
                }
            }
        }
        stage.progressed();
    }
}

/// Whether the state disk takes a write again: a file written, synced and
/// removed (a full disk refuses the write or the sync; a read-only one the
/// creation).
async fn disk_takes_writes(state_dir: &std::path::Path) -> bool {
    let probe = state_dir.join(".vigie-write-probe");
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let written = std::fs::File::create(&probe).and_then(|mut file| {
            file.write_all(&[0u8; 256 * 1024])?;
            file.sync_all()
        });
        let _ = std::fs::remove_file(&probe);
        written.is_ok()
    })
    .await
    .unwrap_or(false)
}

/// Whether the real store would open now, tried while the daemon runs on a
/// temporary one: a disk that takes writes again is not enough when the
/// store's own directory still refuses them. Damage found by this try also
/// ends the wait: the reopening sets the store aside.
async fn real_store_opens(path: &std::path::Path) -> bool {
    let path = path.to_path_buf();
    let opened = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(|| crate::store::SledStore::open(&path, crate::store::FLUSH_EVERY))
    })
    .await;
    match opened {
        Ok(Ok(Ok(_store))) => true,
        Ok(Ok(Err(err))) if err.is_disk_refusal() => {
            tracing::warn!(error = %err, "the real store still cannot be opened");
            false
        }
        Ok(Ok(Err(crate::store::StoreError::Locked { .. }))) => false,
        _ => true,
    }
}

/// What leaves vigie monitoring but may keep a page from its reader, in
/// words fit for `/healthz` and the heartbeat's `/fail` body (no server
/// name, bucket, subject or address). Health reads it at each verdict.
pub fn degradations(parts: &Degraders, now: OffsetDateTime) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(aside) = crate::store::set_aside_earlier(&parts.state_dir) {
        let name = aside
            .moved_to
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push(format!(
            "history store was corrupt; moved aside to {name}; `vigie restore` brings the replicated history back, `vigie store ack-corrupt` clears this"
        ));
    }
    if let Some(reason) = parts
        .replication
        .as_ref()
        .and_then(|r| r.snapshot(now).reason())
    {
        out.push(reason_kind(&reason));
    }
    let mail = parts.mail.snapshot();
    if mail.failing {
        out.push(format!(
            "mail delivery failing ({} failures in a row, {} messages waiting in the outbox)",
            mail.consecutive_failures, mail.backlog
        ));
    }
    if mail.dead_letters > 0 {
        out.push(format!(
            "{} message(s) refused for good by the mail server (dead letters; see the daily report and the log)",
            mail.dead_letters
        ));
    }
    if parts
        .vantage
        .as_ref()
        .is_some_and(|v| v.snapshot().unavailable.is_some())
    {
        out.push(
            "vantage: coordination unavailable; each vantage pages on its own judgment (see the log and vigie_vantage_* metrics)"
                .to_string(),
        );
    }
    if let Some(v) = &parts.vantage {
        out.extend(v.snapshot().degradations(now));
    }
    out.extend(parts.push.degraded());
    if parts.alerts.blind() {
        out.push("vigie is blind: every canary fails, network failures are not judged".to_string());
    }
    out
}
