//! Per channel: a circuit breaker, so that an endpoint that keeps failing
//! is left alone for a while instead of being asked once per push, and a
//! rate limit, so that an outage of many checks never sends faster than
//! the channel's `rate_limit`.

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

/// A token bucket of `per_minute` requests, as full as that at first.
#[derive(Debug, Clone)]
pub struct RateLimit {
    per_minute: u32,
    tokens: f64,
    at: Option<OffsetDateTime>,
}

impl RateLimit {
    pub fn new(per_minute: u32) -> RateLimit {
        RateLimit {
            per_minute,
            tokens: f64::from(per_minute),
            at: None,
        }
    }

    fn refill(&mut self, now: OffsetDateTime) {
        if let Some(at) = self.at {
            let elapsed = (now - at).as_seconds_f64().max(0.0);
            self.tokens = (self.tokens + elapsed * f64::from(self.per_minute) / 60.0)
                .min(f64::from(self.per_minute));
        }
        self.at = Some(now);
    }

    /// Whole requests that may be sent now.
    pub fn available(&mut self, now: OffsetDateTime) -> u32 {
        self.refill(now);
        self.tokens.floor() as u32
    }

    /// Takes one request's token, or says how long until there is one.
    pub fn take(&mut self, now: OffsetDateTime) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let missing = 1.0 - self.tokens;
        Err(Duration::from_secs_f64(
            missing * 60.0 / f64::from(self.per_minute),
        ))
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

    #[test]
    fn the_rate_limit_lets_a_burst_through_then_paces() {
        let mut rate = RateLimit::new(6);
        for _ in 0..6 {
            assert_eq!(rate.take(T0), Ok(()));
        }
        assert_eq!(rate.take(T0), Err(Duration::from_secs(10)));
        assert_eq!(rate.take(T0 + Duration::from_secs(10)), Ok(()));
        assert_eq!(rate.available(T0 + Duration::from_secs(10)), 0);
    }
}
