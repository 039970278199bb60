//! Per channel: a circuit breaker, so that an endpoint that keeps failing
//! is left alone for a while instead of being asked once per push. The
//! rate limit is `limit.rs`.

use time::OffsetDateTime;

use crate::clock::saturating_add;
use crate::config::channels::Backoff;

/// Failed attempts in a row that open the breaker. How long it stays open
/// is the channel's [`Backoff::pause`].
const TRIP_AFTER: u32 = 5;

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
    pub fn failed(&mut self, now: OffsetDateTime, backoff: &Backoff) -> bool {
        self.failures += 1;
        let half_open = self.open_until.is_some();
        if self.failures < TRIP_AFTER && !half_open {
            return false;
        }
        self.opens += 1;
        self.open_until = Some(saturating_add(now, backoff.pause(self.opens)));
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

    const BACKOFF: Backoff = Backoff::DEFAULT;

    #[test]
    fn five_failures_open_it_then_one_attempt_decides() {
        let first = BACKOFF.breaker_pause;
        let mut breaker = Breaker::default();
        for i in 0..4 {
            assert!(!breaker.failed(T0, &BACKOFF), "failure {i}");
            assert_eq!(breaker.closed_at(T0), None);
        }
        assert!(breaker.failed(T0, &BACKOFF));
        assert_eq!(breaker.closed_at(T0), Some(T0 + first));
        // Half-open after the wait: one more failure opens it for twice as
        // long at once.
        let later = T0 + first;
        assert_eq!(breaker.closed_at(later), None);
        assert!(breaker.failed(later, &BACKOFF));
        assert_eq!(breaker.closed_at(later), Some(later + 2 * first));
        breaker.succeeded();
        assert_eq!(breaker.closed_at(later), None);
        assert!(
            !breaker.failed(later, &BACKOFF),
            "closed again: five failures to open"
        );
    }

    #[test]
    fn the_pause_doubles_up_to_the_longest_backoff() {
        let pauses: Vec<u64> = (1..=7).map(|n| BACKOFF.pause(n).as_secs()).collect();
        assert_eq!(pauses, [30, 60, 120, 240, 480, 600, 600]);
        assert_eq!(BACKOFF.pause(u32::MAX).as_secs(), 600);
    }
}
