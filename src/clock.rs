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

/// Wall time that advances with tokio's clock, from a fixed start. With
/// tokio's time paused, tests see `every` and cron schedules move exactly as
/// far as they advance time.
#[derive(Debug, Clone)]
pub struct TokioClock {
    base: OffsetDateTime,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Must be called inside a tokio runtime.
    pub fn starting_at(base: OffsetDateTime) -> Self {
        Self {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> OffsetDateTime {
        self.base + self.start.elapsed()
    }
}

/// Milliseconds since the Unix epoch: the resolution vigie stores and
/// shares times at (store keys, atomics read by the API).
pub fn unix_millis(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

pub fn from_unix_millis(ms: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
}

/// `now - window`, clamped at the Unix epoch: nothing vigie stores is
/// older, and a window like "20000y" must not overflow the calendar.
pub fn since(now: OffsetDateTime, window: std::time::Duration) -> OffsetDateTime {
    time::Duration::try_from(window)
        .ok()
        .and_then(|w| now.checked_sub(w))
        .filter(|t| *t > OffsetDateTime::UNIX_EPOCH)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_clamps_at_the_epoch() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let day = std::time::Duration::from_secs(86_400);
        assert_eq!(since(now, day), now - day);
        assert_eq!(since(now, day * 365 * 20_000), OffsetDateTime::UNIX_EPOCH);
        assert_eq!(
            since(now, std::time::Duration::MAX),
            OffsetDateTime::UNIX_EPOCH
        );
    }
}
