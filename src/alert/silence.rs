//! Holds on pages: silences (`vigie silence PATTERN --for 8h`) and
//! recurring `[[maintenance]]` windows, answering one question: is a page
//! about this check held at `now`, and until when?
//!
//! A hold only delays mail. Probes run and history records as usual, and
//! the state machine keeps counting; a check still firing when its hold
//! ends pages then (`state.rs` models that). Persisting silences and
//! expiring them from the store is the daemon's job; this module only reads
//! them.
//!
//! A silence lasts from more than zero to [`MAX_SILENCE`]; [`Silence::new`]
//! refuses anything else, so neither the CLI nor the API can store one that
//! ends never (or in the year 22026, which `time` cannot even represent).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::clock::{cron_before, saturating_add};
use crate::config::limits::MAX_HOLD;
use crate::config::{glob_match, MaintenanceWindow};
use crate::when::minute;

/// The longest silence: a year, the same bound as a `[[maintenance]]`
/// duration. Holding a check's pages for longer is `page = false` in its
/// `[check.alert]`, which the daily report shows.
pub const MAX_SILENCE: Duration = MAX_HOLD;

/// The longest reason, in bytes: a sentence or a ticket link. The reason
/// is stored, logged, shown in the daily report and in held pages; a 2 MB
/// one was once accepted and logged whole.
pub const MAX_REASON_BYTES: usize = 1024;

/// The longest pattern, in bytes: check names are short, and the pattern
/// is logged and mailed like the reason.
pub const MAX_PATTERN_BYTES: usize = 256;

/// Why a silence cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SilenceError {
    #[error("a silence must be longer than 0s")]
    Zero,
    #[error(
        "a silence of {} is longer than the maximum of {}",
        humantime::format_duration(*.0),
        humantime::format_duration(MAX_SILENCE)
    )]
    TooLong(Duration),
    #[error(
        "a reason of {0} bytes is longer than the maximum of {MAX_REASON_BYTES}: say it in a sentence, or link a ticket"
    )]
    ReasonTooLong(usize),
    #[error("a pattern of {0} bytes is longer than the maximum of {MAX_PATTERN_BYTES}")]
    PatternTooLong(usize),
}

/// A silence, as `vigie silence` creates it and the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Silence {
    /// Check-name glob (`*` any run, `?` one character), as in
    /// `[[maintenance]] checks`.
    pub pattern: String,
    /// The silence ends by itself at this time.
    #[serde(with = "time::serde::rfc3339")]
    pub until: OffsetDateTime,
    pub reason: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created: OffsetDateTime,
}

impl Silence {
    /// A silence of `pattern` for `duration` from `now`; `duration` is more
    /// than zero and at most [`MAX_SILENCE`], the reason and the pattern at
    /// most [`MAX_REASON_BYTES`] and [`MAX_PATTERN_BYTES`].
    pub fn new(
        pattern: &str,
        duration: Duration,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<Self, SilenceError> {
        if reason.len() > MAX_REASON_BYTES {
            return Err(SilenceError::ReasonTooLong(reason.len()));
        }
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(SilenceError::PatternTooLong(pattern.len()));
        }
        if duration.is_zero() {
            return Err(SilenceError::Zero);
        }
        if duration > MAX_SILENCE {
            return Err(SilenceError::TooLong(duration));
        }
        Ok(Self {
            pattern: pattern.to_string(),
            until: saturating_add(now, duration),
            reason: reason.to_string(),
            created: now,
        })
    }

    pub fn covers(&self, check: &str) -> bool {
        glob_match(&self.pattern, check)
    }

    /// Still in force at `now` (an expired silence is inert even before the
    /// daemon deletes it).
    pub fn is_active(&self, now: OffsetDateTime) -> bool {
        self.created <= now && now < self.until
    }
}

/// Why a check's pages are held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldCause {
    Silence {
        pattern: String,
        reason: String,
    },
    /// An open `[[maintenance]]` window, named by its check globs.
    Maintenance {
        checks: Vec<String>,
    },
    /// The check says `page = false`: tracked, never paged.
    NoPage,
    /// Down here, not (yet) confirmed by a quorum of the other vantages
    /// ("down from fra only"): recorded and shown, paged once confirmed.
    Unconfirmed {
        words: String,
    },
    /// Up here, still down for a quorum of the other vantages: the
    /// incident is not resolved yet, here either.
    FleetStillDown {
        words: String,
    },
}

/// How a [`HoldCause::Unconfirmed`] hold reads in the state
/// (`Page::Held::by`), which is how its release is told from a silence's:
/// a page that waited for its confirmation was not held back by anyone,
/// and its mail says it was confirmed rather than "held".
pub const UNCONFIRMED: &str = "not confirmed by the other vantages: ";

/// A check's pages are held, by `cause`, until `until` (`None`: for as
/// long as the config says so).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub cause: HoldCause,
    #[serde(with = "super::event::opt_rfc3339")]
    pub until: Option<OffsetDateTime>,
}

impl Hold {
    pub fn no_page() -> Self {
        Self {
            cause: HoldCause::NoPage,
            until: None,
        }
    }

    /// The hold in words, for mails and logs.
    pub fn describe(&self) -> String {
        let until = match self.until {
            Some(t) => format!(" until {}", minute(t)),
            None => String::new(),
        };
        match &self.cause {
            HoldCause::Silence { pattern, reason } if reason.is_empty() => {
                format!("silence {pattern}{until}")
            }
            HoldCause::Silence { pattern, reason } => {
                format!("silence {pattern}{until} ({reason})")
            }
            HoldCause::Maintenance { checks } => {
                format!("maintenance window {}{until}", checks.join(", "))
            }
            HoldCause::NoPage => "page = false".to_string(),
            HoldCause::Unconfirmed { words } => format!("{UNCONFIRMED}{words}"),
            HoldCause::FleetStillDown { words } => format!("the other vantages: {words}"),
        }
    }

    /// Holds the RESOLVED too, not only the DOWN and reminders.
    pub fn holds_recovery(&self) -> bool {
        matches!(self.cause, HoldCause::FleetStillDown { .. })
    }
}

/// The hold on `check`'s pages at `now`, if any: of every silence and
/// window in force, the one that ends last, since that is when the page
/// would go out.
pub fn hold(
    check: &str,
    now: OffsetDateTime,
    silences: &[Silence],
    maintenance: &[MaintenanceWindow],
) -> Option<Hold> {
    let silenced = silences
        .iter()
        .filter(|s| s.is_active(now) && s.covers(check))
        .map(|s| Hold {
            cause: HoldCause::Silence {
                pattern: s.pattern.clone(),
                reason: s.reason.clone(),
            },
            until: Some(s.until),
        });
    let in_maintenance = maintenance
        .iter()
        .filter(|w| w.covers(check))
        .filter_map(|w| {
            maintenance_end(w, now).map(|end| Hold {
                cause: HoldCause::Maintenance {
                    checks: w.checks.clone(),
                },
                until: Some(end),
            })
        });
    silenced.chain(in_maintenance).max_by_key(|h| h.until)
}

/// When the window open at `now` closes, or `None` when it is closed.
///
/// The window is open when the schedule fired within the last `duration`
/// (start included, end excluded). Of overlapping openings (an hourly
/// schedule with a 2 h duration) the latest decides the end. Schedules are
/// read in UTC, like checks' cron expressions.
pub fn maintenance_end(window: &MaintenanceWindow, now: OffsetDateTime) -> Option<OffsetDateTime> {
    let opened = latest_at_or_before(&window.schedule, now)?;
    let end = saturating_add(opened, window.duration);
    (now < end).then_some(end)
}

/// The schedule's latest time at or before `now`.
fn latest_at_or_before(schedule: &cron::Schedule, now: OffsetDateTime) -> Option<OffsetDateTime> {
    // The cron crate walks backwards from a start it excludes, at whole
    // seconds; starting one second late and skipping anything after `now`
    // makes `now` itself count without caring how it rounds.
    let start = saturating_add(now, Duration::from_secs(1));
    cron_before(schedule, start).take(3).find(|t| *t <= now)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use time::macros::datetime;

    use super::*;

    #[test]
    fn reasons_and_patterns_are_capped() {
        let now = time::macros::datetime!(2026-11-29 07:00 UTC);
        let hour = Duration::from_secs(3600);
        let most = "r".repeat(MAX_REASON_BYTES);
        assert!(Silence::new("site", hour, &most, now).is_ok());
        let err = Silence::new("site", hour, &format!("{most}!"), now).unwrap_err();
        assert_eq!(err, SilenceError::ReasonTooLong(MAX_REASON_BYTES + 1));
        assert!(err.to_string().contains("maximum of 1024"), "{err}");
        let err = Silence::new(&"p".repeat(MAX_PATTERN_BYTES + 1), hour, "", now).unwrap_err();
        assert_eq!(err, SilenceError::PatternTooLong(MAX_PATTERN_BYTES + 1));
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn window(checks: &[&str], cron: &str, duration: Duration) -> MaintenanceWindow {
        MaintenanceWindow {
            checks: checks.iter().map(|c| c.to_string()).collect(),
            schedule: cron::Schedule::from_str(cron).unwrap(),
            duration,
            public: false,
        }
    }

    #[test]
    fn a_weeknight_window_opens_at_its_time_and_closes_after_its_duration() {
        // 2026-11-30 is a Monday.
        let w = window(&["staging-*"], "0 0 20 * * Mon-Fri", 11 * HOUR);
        assert_eq!(
            maintenance_end(&w, datetime!(2026-11-30 19:59:59 UTC)),
            None
        );
        let end = Some(datetime!(2026-12-01 07:00 UTC));
        assert_eq!(maintenance_end(&w, datetime!(2026-11-30 20:00 UTC)), end);
        assert_eq!(maintenance_end(&w, datetime!(2026-12-01 03:00 UTC)), end);
        assert_eq!(
            maintenance_end(&w, datetime!(2026-12-01 06:59:59.9 UTC)),
            end
        );
        assert_eq!(maintenance_end(&w, datetime!(2026-12-01 07:00 UTC)), None);
        // Saturday evening: no window.
        assert_eq!(maintenance_end(&w, datetime!(2026-12-05 21:00 UTC)), None);
    }

    #[test]
    fn a_window_too_long_for_the_calendar_ends_at_its_end() {
        // The cron crate's last year is 2100: a year-long window opened
        // then, the longest config allows, ends in 2101.
        let w = window(
            &["*"],
            "0 0 0 31 12 * 2100",
            crate::config::limits::MAX_HOLD,
        );
        assert_eq!(
            maintenance_end(&w, datetime!(2101-06-01 0:00 UTC)),
            Some(datetime!(2101-12-31 06:00 UTC))
        );
        // No duration overflows: `opened + Duration::MAX` used to panic.
        let w = window(&["*"], "0 0 20 * * *", Duration::MAX);
        let now = datetime!(2026-11-30 21:00 UTC);
        assert_eq!(maintenance_end(&w, now), Some(crate::clock::FAR_FUTURE));
        let h = hold("site", now, &[], &[w]).unwrap();
        assert_eq!(
            h.describe(),
            "maintenance window * until 9999-12-31 23:59 UTC"
        );
        // At the very end of the calendar, `now + 1s` does not overflow.
        let end = crate::clock::FAR_FUTURE;
        let daily = window(&["*"], "0 0 20 * * *", HOUR);
        assert_eq!(maintenance_end(&daily, end), None);
    }

    #[test]
    fn overlapping_openings_end_with_the_latest() {
        let w = window(&["*"], "0 0 * * * *", 2 * HOUR);
        assert_eq!(
            maintenance_end(&w, datetime!(2026-11-30 10:30 UTC)),
            Some(datetime!(2026-11-30 12:00 UTC))
        );
    }

    #[test]
    fn the_hold_that_ends_last_wins_and_only_covered_checks_are_held() {
        let now = datetime!(2026-11-30 21:00 UTC);
        let silences = vec![
            Silence::new("staging-api", 8 * HOUR, "migration", now - HOUR).unwrap(),
            Silence::new("prod-*", HOUR, "", now - 2 * HOUR).unwrap(),
        ];
        let windows = vec![window(&["staging-*"], "0 0 20 * * Mon-Fri", 11 * HOUR)];
        let h = hold("staging-api", now, &silences, &windows).unwrap();
        assert_eq!(h.until, Some(datetime!(2026-12-01 07:00 UTC)));
        assert!(matches!(h.cause, HoldCause::Maintenance { .. }));
        assert_eq!(
            h.describe(),
            "maintenance window staging-* until 2026-12-01 07:00 UTC"
        );
        let h = hold("staging-api", now, &silences, &[]).unwrap();
        assert_eq!(
            h.describe(),
            "silence staging-api until 2026-12-01 04:00 UTC (migration)"
        );
        assert_eq!(hold("prod-api", now, &silences, &windows), None, "expired");
        assert_eq!(hold("site", now, &silences, &windows), None);
    }

    #[test]
    fn a_silence_is_active_from_creation_to_until() {
        let now = datetime!(2026-11-30 21:00 UTC);
        let s = Silence::new("site", HOUR, "", now).unwrap();
        assert!(!s.is_active(now - Duration::from_secs(1)));
        assert!(s.is_active(now));
        assert!(s.is_active(now + HOUR - Duration::from_millis(1)));
        assert!(!s.is_active(now + HOUR));
        assert!(s.covers("site") && !s.covers("site2"));
    }

    #[test]
    fn a_silence_lasts_more_than_zero_and_at_most_a_year() {
        let now = datetime!(2026-11-30 21:00 UTC);
        let year = Silence::new("site", MAX_SILENCE, "", now).unwrap();
        assert_eq!(year.until, datetime!(2027-12-01 03:00 UTC), "365.25 days");
        assert_eq!(
            Silence::new("site", Duration::ZERO, "", now),
            Err(SilenceError::Zero)
        );
        // "20000y" used to panic here (`now + duration` past the year 9999).
        let long = humantime::parse_duration("20000y").unwrap();
        let err = Silence::new("site", long, "", now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a silence of 20000years is longer than the maximum of 1year"
        );
        let just_over = MAX_SILENCE + Duration::from_secs(1);
        assert_eq!(
            Silence::new("site", just_over, "", now),
            Err(SilenceError::TooLong(just_over))
        );
    }

    #[test]
    fn globs() {
        assert!(glob_match("staging-*", "staging-api"));
        assert!(!glob_match("staging-*", "prod-api"));
        assert!(glob_match("s?te", "site"));
        assert!(glob_match("*a*b*", "xxaxxbxx"));
        assert!(!glob_match("*a*b", "xxaxxbxx"));
        assert!(glob_match("*", "vigie:network"));
    }
}
