//! Wall-clock time as a dependency.
//!
//! Everything that judges time (certificate expiry, cron "next", history
//! windows) asks a [`Clock`] instead of calling `now_utc()` itself, so tests
//! can pin "now". Monotonic timers (timeouts, sleeps) use tokio time instead,
//! which tests pause and advance.
//!
//! Also the one place wall-clock arithmetic goes when a duration may be
//! large: `time` panics when `OffsetDateTime + Duration` leaves its calendar
//! (years -9999 to 9999), so [`saturating_add`] and [`saturating_sub`] stop
//! at [`FAR_FUTURE`] and [`FAR_PAST`] instead.

use std::sync::{Arc, Mutex};

use time::macros::datetime;
use time::OffsetDateTime;

/// The latest time vigie computes with, the last instant `time` represents
/// (without its `large-dates` feature): a deadline that would pass it means
/// "never" and stops there.
pub const FAR_FUTURE: OffsetDateTime = datetime!(9999-12-31 23:59:59.999_999_999 UTC);

/// The earliest time vigie computes with, the first instant `time`
/// represents.
pub const FAR_PAST: OffsetDateTime = datetime!(-9999-01-01 0:00 UTC);

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
        *now = saturating_add(*now, by);
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
        saturating_add(self.base, self.start.elapsed())
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

/// `t` in UTC, to the second, in ISO 8601's basic format
/// (`20261201T030000Z`): for names and ids that must not hold `:`.
pub fn compact_utc(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// `at + by`, or [`FAR_FUTURE`] when that is later (a "20000y" deadline, a
/// `Duration::MAX`).
pub fn saturating_add(at: OffsetDateTime, by: std::time::Duration) -> OffsetDateTime {
    time::Duration::try_from(by)
        .ok()
        .and_then(|by| at.checked_add(by))
        .filter(|t| *t <= FAR_FUTURE)
        .unwrap_or(FAR_FUTURE)
}

/// `at - by`, or [`FAR_PAST`] when that is earlier.
pub fn saturating_sub(at: OffsetDateTime, by: std::time::Duration) -> OffsetDateTime {
    time::Duration::try_from(by)
        .ok()
        .and_then(|by| at.checked_sub(by))
        .filter(|t| *t >= FAR_PAST)
        .unwrap_or(FAR_PAST)
}

/// The same instant in chrono, the cron crate's time. chrono's calendar is
/// wider than `time`'s, so nothing is lost; the fallback is unreachable.
pub fn to_chrono(t: OffsetDateTime) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

/// A chrono instant in `time`, saturating at [`FAR_PAST`] and
/// [`FAR_FUTURE`] (chrono reaches further).
pub fn from_chrono(t: chrono::DateTime<chrono::Utc>) -> OffsetDateTime {
    let nanos = i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
    match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(t) => t.clamp(FAR_PAST, FAR_FUTURE),
        Err(_) if nanos < 0 => FAR_PAST,
        Err(_) => FAR_FUTURE,
    }
}

/// The times of `schedule` before `at`, latest first (cron's own walk
/// back: whole seconds, `at` itself excluded unless it has a fraction).
///
/// The cron crate (0.17) walks backwards wrongly from a year its
/// expression leaves out: it keeps the month, day and hour of the start as
/// bounds, so from 2026-12-01 09:00 "0 30 7 * * * 2020" ends on 2020-12-01
/// instead of 2020-12-31. Starting at the end of the last year the
/// expression names, when that is not `at`'s year, avoids it. The crate
/// knows the years 1970 to 2100 only, so every walk ends.
pub fn cron_before(
    schedule: &cron::Schedule,
    at: OffsetDateTime,
) -> impl Iterator<Item = OffsetDateTime> + '_ {
    use chrono::TimeZone;
    use cron::TimeUnitSpec;

    let this_year = u32::try_from(at.year()).unwrap_or(0);
    let last_year = schedule
        .years()
        .iter()
        .take_while(|y| *y <= this_year)
        .last();
    let from = last_year.and_then(|year| match year == this_year {
        true => Some(to_chrono(at)),
        false => chrono::Utc
            .with_ymd_and_hms(i32::try_from(year).ok()? + 1, 1, 1, 0, 0, 0)
            .single(),
    });
    from.into_iter()
        .flat_map(move |from| schedule.after(&from).rev())
        .map(from_chrono)
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

    const YEAR: std::time::Duration = std::time::Duration::from_secs(365 * 86_400);

    #[test]
    fn saturating_arithmetic_stops_at_the_ends_of_the_calendar() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        assert_eq!(saturating_add(now, YEAR), now + YEAR);
        assert_eq!(saturating_sub(now, YEAR), now - YEAR);
        // `now + 20000y` panics in `time`; here it is the far future.
        assert_eq!(saturating_add(now, 20_000 * YEAR), FAR_FUTURE);
        assert_eq!(saturating_add(now, std::time::Duration::MAX), FAR_FUTURE);
        assert_eq!(saturating_sub(now, 20_000 * YEAR), FAR_PAST);
        assert_eq!(saturating_sub(now, std::time::Duration::MAX), FAR_PAST);
        // At the ends themselves, any step stays there.
        let second = std::time::Duration::from_secs(1);
        assert_eq!(saturating_add(FAR_FUTURE, second), FAR_FUTURE);
        assert_eq!(saturating_sub(FAR_PAST, second), FAR_PAST);
        assert_eq!(saturating_add(FAR_FUTURE - YEAR, YEAR + second), FAR_FUTURE);
    }

    #[test]
    fn clocks_saturate_instead_of_panicking() {
        let fake = FakeClock::new(FAR_FUTURE - YEAR);
        fake.advance(2 * YEAR);
        assert_eq!(fake.now(), FAR_FUTURE);
    }

    #[test]
    fn chrono_round_trips_and_saturates() {
        for t in [
            FAR_PAST,
            OffsetDateTime::UNIX_EPOCH,
            datetime!(2026-11-30 20:00:00.123_456_789 UTC),
            // Past 2262, where chrono's i64 nanoseconds end.
            datetime!(2500-01-01 0:00 UTC),
            FAR_FUTURE,
        ] {
            assert_eq!(from_chrono(to_chrono(t)), t);
        }
        assert_eq!(
            from_chrono(chrono::DateTime::<chrono::Utc>::MAX_UTC),
            FAR_FUTURE
        );
        assert_eq!(
            from_chrono(chrono::DateTime::<chrono::Utc>::MIN_UTC),
            FAR_PAST
        );
    }

    #[test]
    fn cron_before_walks_back_across_years_the_expression_leaves_out() {
        use std::str::FromStr;
        let cron = |text: &str| cron::Schedule::from_str(text).unwrap();
        let at = datetime!(2026-12-01 09:00 UTC);
        let last = |text: &str| cron_before(&cron(text), at).next();
        assert_eq!(
            last("0 30 7 * * * 2020"),
            Some(datetime!(2020-12-31 07:30 UTC))
        );
        assert_eq!(last("0 0 7 * * *"), Some(datetime!(2026-12-01 07:00 UTC)));
        assert_eq!(last("0 0 20 * * *"), Some(datetime!(2026-11-30 20:00 UTC)));
        assert_eq!(last("0 0 0 * * * 2030"), None, "only later years");
        assert_eq!(last("0 0 0 30 2 *"), None, "no date at all");
        // Past the crate's last year, the walk starts at the end of 2100.
        let times: Vec<_> = cron_before(&cron("0 0 12 * * *"), FAR_FUTURE)
            .take(2)
            .collect();
        assert_eq!(
            times,
            [
                datetime!(2100-12-31 12:00 UTC),
                datetime!(2100-12-30 12:00 UTC)
            ]
        );
    }

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
