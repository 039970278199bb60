//! Wall-clock time as a dependency.
//!
//! Everything that judges time (certificate expiry, cron "next", history
//! windows) asks a [`Clock`] instead of calling `now_utc()` itself, so tests
//! can pin "now". Monotonic timers (timeouts, sleeps) use tokio time instead,
//! which tests pause and advance.

use std::sync::{Arc, Mutex};

use time::OffsetDateTime;

/// A source of wall-clock time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> OffsetDateTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Clone)]
pub struct FakeClock(Arc<Mutex<OffsetDateTime>>);

impl FakeClock {
    pub fn new(at: OffsetDateTime) -> Self {
        Self(Arc::new(Mutex::new(at)))
    }

    pub fn advance(&self, by: std::time::Duration) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now += by;
    }

    pub fn set(&self, at: OffsetDateTime) {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = at;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> OffsetDateTime {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
