//! Is the daemon doing its job? The supervisor writes, `/healthz`, the
//! metrics and the systemd watchdog read.
//!
//! "Healthy" means the supervisor loop keeps ticking and no check waits past
//! its due time by more than its own interval (a missed run): probes
//! queuing behind the concurrency bound, or a runtime that stopped making
//! progress, both show here before anyone notices missing data.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;

use crate::clock::{from_unix_millis, unix_millis};

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
    recorded: AtomicU64,
}

#[derive(Debug, Clone)]
pub struct Late {
    pub check: String,
    pub by: Duration,
}

/// What `/healthz` answers. Never names targets: the endpoint may be
/// reachable from another region without a token.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_tick: Option<OffsetDateTime>,
    pub late_checks: u64,
    pub store_errors: u64,
    pub config_reload_ok: bool,
}

impl Verdict {
    pub fn is_healthy(&self) -> bool {
        self.status == "ok"
    }
}

impl Health {
    pub fn new(now: OffsetDateTime) -> Self {
        let health = Self::default();
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

    pub fn reloaded(&self, ok: bool, now: OffsetDateTime) {
        self.reload_ok.store(ok, Ordering::Relaxed);
        if ok {
            self.last_reload_ok_ms
                .store(unix_millis(now), Ordering::Relaxed);
        }
    }

    /// One outcome stored: the scheduler is making progress.
    pub fn recorded(&self) {
        self.recorded.fetch_add(1, Ordering::Relaxed);
    }

    pub fn recorded_count(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    pub fn store_error(&self) {
        self.store_errors.fetch_add(1, Ordering::Relaxed);
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

    pub fn verdict(&self, now: OffsetDateTime) -> Verdict {
        let last_tick = self.last_tick();
        let since_tick =
            last_tick.map_or(Duration::MAX, |t| (now - t).try_into().unwrap_or_default());
        let late_checks = self.late_checks.load(Ordering::Relaxed);
        let (status, reason) = if since_tick > 2 * TICK {
            (
                "stuck",
                Some(format!(
                    "the scheduler has not ticked for {}",
                    humantime::format_duration(round(since_tick))
                )),
            )
        } else if let Some(late) = self.worst_late() {
            (
                "late",
                Some(format!(
                    "{late_checks} check(s) waiting past their due time, the worst by {}: probes are queuing behind the concurrency limit or the machine is overloaded",
                    humantime::format_duration(round(late.by))
                )),
            )
        } else {
            ("ok", None)
        };
        Verdict {
            status,
            reason,
            last_tick,
            late_checks,
            store_errors: self.store_errors(),
            config_reload_ok: self.reload_ok(),
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
