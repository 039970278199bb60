//! Is the daemon doing its job? The daemon's supervisor loop writes what
//! it sees each second; `/healthz`, the metrics, the systemd watchdog and
//! the heartbeat read one [`Verdict`].
//!
//! Unhealthy (503) means vigie may not page: the supervisor loop stopped
//! ticking (`stuck`), a task dies in a loop (`failing`) or makes no
//! progress (`stalled`), the store refuses writes (`store`), or a check
//! waits past its due time by more than its own interval (`late`: probes
//! queuing behind the concurrency bound, or an overloaded machine).
//! Degraded means vigie monitors and pages but something beside it is
//! wrong (replication, mail delivery, blindness, a store moved aside):
//! `/healthz` stays 200 and lists it, the heartbeat sends `/fail`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;

use crate::clock::{from_unix_millis, unix_millis};
use crate::supervise::{StageState, Stages, Trouble as TaskTrouble};

/// How often the supervisor ticks; `/healthz` calls the loop stuck after
/// two missed ticks.
pub const TICK: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct Health {
    last_tick_ms: AtomicI64,
    late: Mutex<Option<Late>>,
    late_checks: AtomicU64,
    reload_ok: AtomicBool,
    last_reload_ok_ms: AtomicI64,
    store_errors: AtomicU64,
    /// The store's last write error while writes fail; `None` once one
    /// succeeds again.
    store_failing: Mutex<Option<Trouble>>,
    /// Why the daemon runs on a temporary store, `state_dir` having
    /// refused it at start.
    temporary_store: Mutex<Option<Trouble>>,
    recorded: AtomicU64,
    degradations: Degradations,
    stages: Arc<Stages>,
}

/// What degrades vigie, read at each verdict (the daemon sets it once).
type DegradationSource = Box<dyn Fn(OffsetDateTime) -> Vec<String> + Send + Sync>;

#[derive(Default)]
struct Degradations(std::sync::OnceLock<DegradationSource>);

impl std::fmt::Debug for Degradations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Degradations")
    }
}

/// A store problem in two forms: whole, for the log and `/healthz` (the
/// operator's own machine), and brief, without a path, for the heartbeat.
#[derive(Debug, Clone)]
struct Trouble {
    detail: String,
    brief: String,
}

#[derive(Debug, Clone)]
pub struct Late {
    pub check: String,
    pub by: Duration,
}

/// The verdict's headline, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The supervisor loop has not ticked for two ticks.
    Stuck,
    /// A task died [`crate::supervise::GIVE_UP_AFTER`] times in a row.
    Failing,
    /// A task has work waiting, or a period it keeps, and made no progress.
    Stalled,
    /// The store refuses writes: pages go out, history is not kept.
    Store,
    /// Checks wait past their due time.
    Late,
    Ok,
}

/// One supervised task, as `/healthz` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskHealth {
    pub task: &'static str,
    pub state: StageState,
    pub restarts: u64,
    /// For tasks that owe progress (a round, an item taken); none for those
    /// that may rightly wait on outside events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_progress_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_death: Option<String>,
}

/// What `/healthz` answers. Never names targets: the endpoint may be
/// reachable from another region without a token.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The task the status is about (`failing`, `stalled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<&'static str>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_tick: Option<OffsetDateTime>,
    pub late_checks: u64,
    pub store_errors: u64,
    pub config_reload_ok: bool,
    /// Reasons vigie works but is degraded; the heartbeat sends them as its
    /// `/fail` body.
    pub degraded: Vec<String>,
    /// The reason in words fit for a third party (the heartbeat's `/fail`
    /// body): no path, no panic message, nothing a target sent.
    #[serde(skip)]
    pub brief: Option<String>,
    pub tasks: Vec<TaskHealth>,
}

impl Verdict {
    pub fn is_healthy(&self) -> bool {
        self.status == Status::Ok
    }

    /// Whether systemd should hear from us: not when a task cannot be
    /// brought back (failing) or hangs (stalled), nor when the loop itself
    /// is stuck; a restart of the whole service is the remedy then.
    pub fn feeds_watchdog(&self) -> bool {
        !matches!(
            self.status,
            Status::Stuck | Status::Failing | Status::Stalled
        )
    }
}

impl Health {
    pub fn new(now: OffsetDateTime, stages: Arc<Stages>) -> Self {
        let health = Self {
            stages,
            ..Self::default()
        };
        health.reload_ok.store(true, Ordering::Relaxed);
        health
            .last_reload_ok_ms
            .store(unix_millis(now), Ordering::Relaxed);
        health.tick(now, None, 0);
        health
    }

    /// The supervisor's heartbeat, with the worst late check.
    pub fn tick(&self, now: OffsetDateTime, worst: Option<Late>, late_checks: u64) {
        self.last_tick_ms.store(unix_millis(now), Ordering::Relaxed);
        self.late_checks.store(late_checks, Ordering::Relaxed);
        *self.late.lock().unwrap_or_else(|p| p.into_inner()) = worst;
    }

    /// Where each verdict reads what degrades vigie (each reason a line
    /// fit for a third party: no target, bucket or address). Set once; a
    /// later call is ignored.
    pub fn degraded_by(
        &self,
        source: impl Fn(OffsetDateTime) -> Vec<String> + Send + Sync + 'static,
    ) {
        let _ = self.degradations.0.set(Box::new(source));
    }

    pub fn reloaded(&self, ok: bool, now: OffsetDateTime) {
        self.reload_ok.store(ok, Ordering::Relaxed);
        if ok {
            self.last_reload_ok_ms
                .store(unix_millis(now), Ordering::Relaxed);
        }
    }

    /// One outcome stored: the scheduler is making progress, and the store
    /// takes writes.
    pub fn recorded(&self) {
        self.recorded.fetch_add(1, Ordering::Relaxed);
    }

    pub fn recorded_count(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// A write to the store failed with `error` (`brief`: the same without
    /// the store's path, see `StoreError::brief`).
    pub fn store_failed(&self, error: &str, brief: &str) {
        self.store_errors.fetch_add(1, Ordering::Relaxed);
        *self.store_failing.lock().unwrap_or_else(|p| p.into_inner()) = Some(Trouble {
            detail: error.to_string(),
            brief: brief.to_string(),
        });
    }

    /// A write to the store succeeded; `true` when it had been failing.
    pub fn store_ok(&self) -> bool {
        self.store_failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
    }

    /// The store's last write error while writes fail, or why the daemon
    /// runs on a temporary store.
    pub fn store_failing(&self) -> Option<String> {
        self.store_trouble().map(|t| t.detail)
    }

    fn store_trouble(&self) -> Option<Trouble> {
        let failing = self
            .store_failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        failing.or_else(|| {
            self.temporary_store
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        })
    }

    /// The daemon runs on a temporary store because `state_dir` refused
    /// the real one (`why`; `brief`: the same without a path):
    /// unhealthy until the store is reopened.
    pub fn on_temporary_store(&self, why: &str, brief: &str) {
        *self
            .temporary_store
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Trouble {
            detail: why.to_string(),
            brief: brief.to_string(),
        });
    }

    pub fn reload_ok(&self) -> bool {
        self.reload_ok.load(Ordering::Relaxed)
    }

    pub fn last_reload_ok(&self) -> Option<OffsetDateTime> {
        nonzero_millis(self.last_reload_ok_ms.load(Ordering::Relaxed))
    }

    pub fn store_errors(&self) -> u64 {
        self.store_errors.load(Ordering::Relaxed)
    }

    pub fn last_tick(&self) -> Option<OffsetDateTime> {
        nonzero_millis(self.last_tick_ms.load(Ordering::Relaxed))
    }

    pub fn worst_late(&self) -> Option<Late> {
        self.late.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn stages(&self) -> &Stages {
        &self.stages
    }

    pub fn verdict(&self, now: OffsetDateTime) -> Verdict {
        let last_tick = self.last_tick();
        let since_tick =
            last_tick.map_or(Duration::MAX, |t| (now - t).try_into().unwrap_or_default());
        let late_checks = self.late_checks.load(Ordering::Relaxed);
        let stages = self.stages.all();
        let troubled = |failing: bool| {
            stages.iter().find_map(|stage| match stage.trouble() {
                Some(TaskTrouble::Failing { deaths, last }) if failing => Some((
                    stage.name(),
                    format!(
                        "task {} died {deaths} times in a row and keeps being restarted (last: {last})",
                        stage.name()
                    ),
                )),
                Some(TaskTrouble::Stalled { for_, waiting }) if !failing => Some((
                    stage.name(),
                    match waiting {
                        0 => format!(
                            "task {} has made no progress for {}",
                            stage.name(),
                            crate::when::std_span(round(for_))
                        ),
                        n => format!(
                            "task {} has not taken its work for {} ({n} waiting)",
                            stage.name(),
                            crate::when::std_span(round(for_))
                        ),
                    },
                )),
                _ => None,
            })
        };
        let (status, stage, reason) = if since_tick > 2 * TICK {
            (
                Status::Stuck,
                None,
                Some(format!(
                    "the scheduler has not ticked for {}",
                    crate::when::std_span(round(since_tick))
                )),
            )
        } else if let Some((stage, reason)) = troubled(true) {
            (Status::Failing, Some(stage), Some(reason))
        } else if let Some((stage, reason)) = troubled(false) {
            (Status::Stalled, Some(stage), Some(reason))
        } else if let Some(trouble) = self.store_trouble() {
            (
                Status::Store,
                None,
                Some(format!(
                    "the store refuses writes: {}; pages still go out, held in memory",
                    trouble.detail
                )),
            )
        } else if let Some(late) = self.worst_late() {
            (
                Status::Late,
                None,
                Some(format!(
                    "{late_checks} check(s) waiting past their due time, the worst by {}: probes are queuing behind the concurrency limit or the machine is overloaded",
                    crate::when::std_span(round(late.by))
                )),
            )
        } else {
            (Status::Ok, None, None)
        };
        let brief = self.brief(status, stage, reason.as_deref());
        Verdict {
            status,
            brief,
            reason,
            stage,
            last_tick,
            late_checks,
            store_errors: self.store_errors(),
            config_reload_ok: self.reload_ok(),
            degraded: self
                .degradations
                .0
                .get()
                .map(|source| source(now))
                .unwrap_or_default(),
            tasks: stages
                .iter()
                .map(|s| TaskHealth {
                    task: s.name(),
                    state: s.state(),
                    restarts: s.restarts(),
                    since_progress_seconds: s.watched().then(|| s.since_progress().as_secs()),
                    last_death: s.last_death(),
                })
                .collect(),
        }
    }
}

impl Health {
    /// The verdict's reason for a third party. A failing task's reason
    /// quotes its last panic and the store's its path, so those two are
    /// said again from their parts; the others are made of task names,
    /// counts and durations only.
    fn brief(
        &self,
        status: Status,
        stage: Option<&'static str>,
        reason: Option<&str>,
    ) -> Option<String> {
        match status {
            Status::Failing => Some(format!(
                "task {} keeps dying and being restarted",
                stage.unwrap_or("?")
            )),
            Status::Store => self
                .store_trouble()
                .map(|t| format!("the store refuses writes ({}); pages still go out", t.brief)),
            Status::Ok => None,
            Status::Stuck | Status::Stalled | Status::Late => reason.map(str::to_string),
        }
    }
}

fn round(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// Zero means "never" in the atomics above.
fn nonzero_millis(ms: i64) -> Option<OffsetDateTime> {
    (ms != 0).then(|| from_unix_millis(ms)).flatten()
}
