//! Per channel: a circuit breaker, so that an endpoint that keeps failing
//! is left alone for a while instead of being asked once per push. The
//! rate limit is `limit.rs`.

use std::time::Duration;

use time::OffsetDateTime;

use crate::clock::saturating_add;

/// Failed attempts in a row that open the breaker.
const TRIP_AFTER: u32 = 5;
/// How long it stays open the first time; doubled at each reopening.
const FIRST_OPEN: Duration = Duration::from_secs(30);
const MAX_OPEN: Duration = Duration::from_secs(600);

/// Closed (sending), open (waiting until `open_until`), or half-open (the
/// wait is over: one attempt decides).
#[derive(Debug, Clone, Default)]
pub struct Breaker {
    failures: u32,
    opens: u32,
    open_until: Option<OffsetDateTime>,
}

impl Breaker {
    /// When the next attempt may be made, if not now.
    pub fn closed_at(&self, now: OffsetDateTime) -> Option<OffsetDateTime> {
        self.open_until.filter(|&until| until > now)
    }

    /// A failed attempt; true when this one opened the breaker.
    pub fn failed(&mut self, now: OffsetDateTime) -> bool {
        self.failures += 1;
        let half_open = self.open_until.is_some();
        if self.failures < TRIP_AFTER && !half_open {
            return false;
        }
        self.opens += 1;
        let wait = FIRST_OPEN
            .saturating_mul(1 << (self.opens - 1).min(10))
            .min(MAX_OPEN);
        self.open_until = Some(saturating_add(now, wait));
        true
    }

    /// An accepted attempt closes it.
    pub fn succeeded(&mut self) {
        *self = Breaker::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: OffsetDateTime = time::macros::datetime!(2026-12-01 10:00:00 UTC);

    #[test]
    fn five_failures_open_it_then_one_attempt_decides() {
        let mut breaker = Breaker::default();
        for i in 0..4 {
            assert!(!breaker.failed(T0), "failure {i}");
            assert_eq!(breaker.closed_at(T0), None);
        }
        assert!(breaker.failed(T0));
        assert_eq!(breaker.closed_at(T0), Some(T0 + FIRST_OPEN));
        // Half-open after the wait: one more failure opens it for twice as
        // long at once.
        let later = T0 + FIRST_OPEN;
        assert_eq!(breaker.closed_at(later), None);
        assert!(breaker.failed(later));
        assert_eq!(breaker.closed_at(later), Some(later + 2 * FIRST_OPEN));
        breaker.succeeded();
        assert_eq!(breaker.closed_at(later), None);
        assert!(
            !breaker.failed(later),
            "closed again: five failures to open"
        );
    }
}
