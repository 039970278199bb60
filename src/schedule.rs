//! When each check runs: pure functions of (cadence, name, now).
//!
//! `every` checks run on a grid anchored at the Unix epoch and shifted by a
//! per-check jitter, so a check keeps its rhythm across restarts and
//! reloads, and a hundred checks with the same `every` spread over the
//! period instead of firing on the same second. Cron checks run at the
//! expression's times (UTC) plus a smaller jitter, so `0 */5 * * * *` still
//! means "around the fifth minute". The jitter is a hash of the check's
//! name: stable from one run to the next, different between checks.
//!
//! Jitter comes in whole slots of [`JITTER_STEP`], so the checks that share
//! a slot start together: one wake-up of the scheduler serves all of them,
//! and their handshakes run back to back on a warm CPU instead of one cold
//! wake-up each.

use std::time::Duration;

use time::OffsetDateTime;

use crate::check::Cadence;
use crate::clock::{from_chrono, saturating_add, saturating_sub, to_chrono};

/// Cron checks are spread over at most this much after their due second.
pub const MAX_CRON_JITTER: Duration = Duration::from_secs(30);

/// The granularity of jitter. A quarter second still spreads a hundred
/// checks with the same period over four slots per second of it, and
/// checks whose periods are whole quarter seconds (and cron checks, whose
/// times are whole seconds) fall due at most four times a second. Measured
/// with `cargo bench --bench daemon` (1,000 checks every 30 s): millisecond
/// jitter cost 5.7% of one core, quarter-second slots 3.2 to 3.5%.
pub const JITTER_STEP: Duration = Duration::from_millis(250);

/// The check's offset into its period: a whole number of
/// [`JITTER_STEP`]s, less than the span it may move in.
pub fn jitter(name: &str, cadence: &Cadence, now: OffsetDateTime) -> Duration {
    let span = match cadence {
        Cadence::Every(period) => *period,
        // A tenth of the gap between two runs, so jitter never reorders
        // runs, and never more than MAX_CRON_JITTER.
        Cadence::Cron(schedule) => {
            let mut upcoming = schedule.after(&to_chrono(now));
            match (upcoming.next(), upcoming.next()) {
                (Some(a), Some(b)) => {
                    ((b - a).to_std().unwrap_or_default() / 10).min(MAX_CRON_JITTER)
                }
                _ => Duration::ZERO,
            }
        }
    };
    // A span not a whole number of steps keeps its last partial step
    // unused, so the jitter stays inside the span.
    let slots = (span.as_millis() / JITTER_STEP.as_millis()) as u64;
    match slots {
        0 => Duration::ZERO,
        _ => JITTER_STEP * (fnv1a(name.as_bytes()) % slots) as u32,
    }
}

/// The first due time strictly after `after`, or `None` for a cron
/// expression with no future time (e.g. a past year).
pub fn next_due(
    cadence: &Cadence,
    jitter: Duration,
    after: OffsetDateTime,
) -> Option<OffsetDateTime> {
    match cadence {
        Cadence::Every(period) => {
            let period_ns = period.as_nanos().max(1) as i128;
            let offset_ns = jitter.as_nanos() as i128 % period_ns;
            let after_ns = after.unix_timestamp_nanos();
            let k = (after_ns - offset_ns).div_euclid(period_ns) + 1;
            OffsetDateTime::from_unix_timestamp_nanos(k * period_ns + offset_ns).ok()
        }
        Cadence::Cron(schedule) => {
            // Shift back by the jitter so a time just before `after + jitter`
            // is not skipped, then forward again.
            let base = saturating_sub(after, jitter);
            let next = schedule.after(&to_chrono(base)).next()?;
            Some(saturating_add(from_chrono(next), jitter))
        }
    }
}

/// The nominal interval of a cadence, for lateness judgments: the period,
/// or the gap between the next two cron times.
pub fn interval(cadence: &Cadence, now: OffsetDateTime) -> Duration {
    match cadence {
        Cadence::Every(period) => *period,
        Cadence::Cron(schedule) => {
            let mut upcoming = schedule.after(&to_chrono(now));
            match (upcoming.next(), upcoming.next()) {
                (Some(a), Some(b)) => (b - a).to_std().unwrap_or_default(),
                _ => Duration::ZERO,
            }
        }
    }
}

/// The first time of `schedule` after `now` (the daily report's).
pub fn next_after(schedule: &cron::Schedule, now: OffsetDateTime) -> Option<OffsetDateTime> {
    schedule.after(&to_chrono(now)).next().map(from_chrono)
}

/// [`next_after`] with the schedule's fields read in `zone`'s local time
/// (`[report] timezone`): "0 0 7 * * *" is 07:00 in Paris in winter and in
/// summer alike; a local time that a DST change skips is skipped, one it
/// repeats fires once.
pub fn next_after_in(
    schedule: &cron::Schedule,
    now: OffsetDateTime,
    zone: crate::when::Zone,
) -> Option<OffsetDateTime> {
    let Some(tz) = zone.tz() else {
        return next_after(schedule, now);
    };
    let local = to_chrono(now).with_timezone(&tz);
    schedule
        .after(&local)
        .next()
        .map(|t| from_chrono(t.with_timezone(&chrono::Utc)))
}

/// FNV-1a: tiny, and stable across Rust versions (std's hasher is not
/// promised to be), so jitter never moves with a toolchain upgrade.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(secs).unwrap()
    }

    fn every(secs: u64) -> Cadence {
        Cadence::Every(Duration::from_secs(secs))
    }

    fn cron(expr: &str) -> Cadence {
        Cadence::Cron(Box::new(cron::Schedule::from_str(expr).unwrap()))
    }

    #[test]
    fn every_runs_on_a_jittered_grid() {
        let c = every(30);
        let j = Duration::from_secs(7);
        // The grid is 7, 37, 67, ... seconds after the epoch.
        assert_eq!(next_due(&c, j, at(1000)), Some(at(1027)));
        assert_eq!(next_due(&c, j, at(1027)), Some(at(1057)), "strictly after");
        assert_eq!(next_due(&c, j, at(1026)), Some(at(1027)));
    }

    #[test]
    fn jitter_is_stable_bounded_and_spread() {
        let c = every(30);
        let now = at(0);
        assert_eq!(jitter("site", &c, now), jitter("site", &c, now));
        let offsets: std::collections::BTreeSet<u64> = (0..100)
            .map(|i| jitter(&format!("check-{i}"), &c, now).as_secs())
            .collect();
        assert!(offsets.iter().all(|s| *s < 30));
        assert!(
            offsets.len() >= 20,
            "100 checks spread over the period: {offsets:?}"
        );
    }

    #[test]
    fn checks_share_quarter_second_slots() {
        let c = every(30);
        let now = at(0);
        let slots: std::collections::BTreeSet<Duration> = (0..1000)
            .map(|i| jitter(&format!("check-{i}"), &c, now))
            .collect();
        assert!(
            slots
                .iter()
                .all(|j| j.as_millis() % JITTER_STEP.as_millis() == 0),
            "every jitter is a whole number of steps: {slots:?}"
        );
        assert!(
            slots.len() > 100 && slots.len() <= 120,
            "1,000 checks use most of the 120 slots of 30 s, and no others: {}",
            slots.len()
        );
        // A span shorter than one step leaves no room to move.
        assert_eq!(
            jitter("x", &Cadence::Every(Duration::from_millis(200)), now),
            Duration::ZERO
        );
    }

    #[test]
    fn cron_with_jitter() {
        let c = cron("0 */5 * * * *");
        let now = at(1_800_000_000); // 2027-01-15 08:00:00 UTC
        let j = jitter("uploads", &c, now);
        assert!(j < MAX_CRON_JITTER);
        let first = next_due(&c, j, now).unwrap();
        assert_eq!(first, at(1_800_000_000) + j, "this minute's run, jittered");
        let second = next_due(&c, j, first).unwrap();
        assert_eq!(second - first, time::Duration::minutes(5));
        assert_eq!(interval(&c, now), Duration::from_secs(300));
    }

    #[test]
    fn cron_jitter_is_a_tenth_of_a_short_gap() {
        let c = cron("*/10 * * * * *");
        let j = jitter("x", &c, at(0));
        assert!(j < Duration::from_secs(1));
    }

    #[test]
    fn the_report_schedule_is_read_in_utc() {
        use time::macros::datetime;
        const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);
        let schedule: cron::Schedule = "0 0 7 * * *".parse().unwrap();
        assert_eq!(
            next_after(&schedule, T0),
            Some(T0 + Duration::from_secs(86_400))
        );
        assert_eq!(next_after(&schedule, T0 - Duration::from_secs(1)), Some(T0));
    }

    #[test]
    fn cron_at_the_ends_of_the_calendar() {
        let c = cron("0 0 7 * * *");
        // After 2262 chrono's nanoseconds used to wrap to the 1700s, and the
        // check fell due in 1970 forever; past the cron crate's last year
        // (2100) there is no next run.
        let late =
            crate::clock::from_chrono(chrono::DateTime::from_timestamp(10_000_000_000, 0).unwrap());
        assert_eq!(late.year(), 2286);
        assert_eq!(next_due(&c, Duration::from_secs(3), late), None);
        assert_eq!(jitter("site", &c, late), Duration::ZERO);
        assert_eq!(interval(&c, late), Duration::ZERO);
        // At the start of the calendar `after - jitter` saturates instead of
        // panicking (the cron crate reads a negative year as a huge one, so
        // it finds nothing there either).
        assert_eq!(next_due(&c, MAX_CRON_JITTER, crate::clock::FAR_PAST), None);
        assert_eq!(
            next_due(&c, MAX_CRON_JITTER, at(-3600)),
            Some(at(7 * 3600) + MAX_CRON_JITTER)
        );
        assert_eq!(
            next_due(&c, MAX_CRON_JITTER, crate::clock::FAR_FUTURE),
            None
        );
    }

    #[test]
    fn a_report_at_seven_in_paris_stays_at_seven_across_summer_time() {
        let schedule = cron::Schedule::from_str("0 0 7 * * *").unwrap();
        let paris = crate::when::Zone::named(chrono_tz::Europe::Paris);
        // Winter (UTC+1), the day summer time starts (2027-03-28), summer
        // (UTC+2).
        let at = |t| next_after_in(&schedule, t, paris).unwrap();
        assert_eq!(
            at(time::macros::datetime!(2027-03-27 07:00 UTC)),
            time::macros::datetime!(2027-03-28 05:00 UTC)
        );
        assert_eq!(
            at(time::macros::datetime!(2027-03-01 00:00 UTC)),
            time::macros::datetime!(2027-03-01 06:00 UTC)
        );
        assert_eq!(
            at(time::macros::datetime!(2027-07-01 00:00 UTC)),
            time::macros::datetime!(2027-07-01 05:00 UTC)
        );
        let utc = crate::when::Zone::default();
        assert_eq!(
            next_after_in(
                &schedule,
                time::macros::datetime!(2027-07-01 00:00 UTC),
                utc
            ),
            Some(time::macros::datetime!(2027-07-01 07:00 UTC))
        );
    }
}
