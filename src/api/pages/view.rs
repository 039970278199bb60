//! What the pages show, as plain data: built from the store, the latest
//! outcomes, the alert states and the health verdict (`build.rs`), drawn
//! by `render.rs` and `chart.rs`. Words and tones are decided here, once,
//! so the HTML and its tests agree.

use time::{Date, Duration, OffsetDateTime};

use crate::alert::{Hold, HoldCause, Policy};
use crate::incident_update::IncidentUpdate;
use crate::outcome::Status;

/// One check's current state as the overview lists it.
#[derive(Debug, Clone)]
pub struct CheckRow {
    pub name: String,
    /// `None`: no result yet.
    pub status: Option<Status>,
    pub labels: Vec<(String, String)>,
    pub response_ms: Option<f64>,
    /// Oldest first, one per day, 90 of them.
    pub days: Vec<DayCell>,
    pub uptime_24h: Option<f64>,
    pub uptime_30d: Option<f64>,
    pub uptime_90d: Option<f64>,
    pub certificate: Option<CertSummary>,
    /// With `[vantage]`, while the check's page waits for the other
    /// vantages: what they say ("down from fra only; eu-par: up").
    pub vantage: Option<String>,
    /// Why the check is not UP: the latest probe's first failure (for a
    /// WARN, its warning); `None` when UP or without a result.
    pub reason: Option<String>,
    /// Without a result yet: when the scheduler runs the first probe.
    pub first_probe: Option<OffsetDateTime>,
    /// The silence or maintenance window holding the check's pages now.
    pub hold: Option<Hold>,
    /// The check's first stored result, when it is younger than the
    /// 90-day bar (the uptime figures then say "since ...").
    pub history_from: Option<OffsetDateTime>,
}

impl CheckRow {
    /// A row with a name and a status and nothing else, for tests to
    /// fill in.
    #[cfg(test)]
    pub fn bare(name: &str, status: Option<Status>) -> CheckRow {
        CheckRow {
            name: name.into(),
            status,
            labels: Vec::new(),
            response_ms: None,
            days: Vec::new(),
            uptime_24h: None,
            uptime_30d: None,
            uptime_90d: None,
            certificate: None,
            vantage: None,
            reason: None,
            first_probe: None,
            hold: None,
            history_from: None,
        }
    }
}

/// The served leaf, in brief.
#[derive(Debug, Clone)]
pub struct CertSummary {
    pub days_left: i64,
    pub issuer: String,
    pub staging: bool,
    /// The negotiated key exchange group (`X25519MLKEM768`), when known.
    pub key_exchange: Option<String>,
}

/// A group of checks sharing a label value.
#[derive(Debug, Clone)]
pub struct Group {
    /// `env = prod`, or `no env` for checks without the label.
    pub title: String,
    pub checks: Vec<CheckRow>,
}

/// One day of one check.
#[derive(Debug, Clone, PartialEq)]
pub struct DayCell {
    pub date: Date,
    pub up: u64,
    pub warn: u64,
    pub down: u64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

impl DayCell {
    pub fn known(&self) -> u64 {
        self.up + self.warn + self.down
    }

    /// Up and warn over all known results.
    pub fn uptime(&self) -> Option<f64> {
        uptime(self.up + self.warn, self.known())
    }

    /// The CSS classes: `none` without results, `good` at 99.9 % and
    /// over, `warn` (amber) for a day with warnings and no failure, else
    /// `bad` with a shade that deepens with the downtime (`s1`: at least
    /// 99 %, `s2`: 90 %, `s3`: 50 %, `s4`: below), so that a 64 % day is
    /// not drawn as red as a 0 % day. Warn counts as up in the figures,
    /// so the tone, not the uptime, says a day had warnings.
    pub fn tone(&self) -> &'static str {
        let Some(u) = self.uptime() else {
            return "none";
        };
        if self.down == 0 {
            return if self.warn > 0 { "warn" } else { "good" };
        }
        match u {
            u if u >= 0.999 => "good",
            u if u >= 0.99 => "bad s1",
            u if u >= 0.9 => "bad s2",
            u if u >= 0.5 => "bad s3",
            _ => "bad s4",
        }
    }
}

/// One point of a response-time series.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub at: OffsetDateTime,
    pub ms: f64,
    /// No data between the previous point and this one: the line breaks.
    pub gap_before: bool,
}

/// One leaf certificate on the timeline.
#[derive(Debug, Clone)]
pub struct LeafBar {
    pub sha256: String,
    pub subject: String,
    pub issuer: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    pub first_seen: OffsetDateTime,
    pub last_seen: OffsetDateTime,
    pub staging: bool,
    /// The leaf the latest probe was served.
    pub current: bool,
}

impl LeafBar {
    /// Issuer CN (or the whole issuer) and the fingerprint's start.
    pub fn short_name(&self) -> String {
        let issuer = common_name(&self.issuer).unwrap_or(&self.issuer);
        let sha = self.sha256.get(..8).unwrap_or(&self.sha256);
        match self.staging {
            true => format!("{issuer} (STAGING) {sha}"),
            false => format!("{issuer} {sha}"),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{}\nissued by {}{}\nvalid {} to {}\n{}\nsha256 {}",
            self.subject,
            self.issuer,
            if self.staging {
                " (a staging CA: browsers do not trust it)"
            } else {
                ""
            },
            day(self.not_before),
            day(self.not_after),
            match self.current {
                true => format!(
                    "served since {} (now)",
                    crate::when::minute(self.first_seen)
                ),
                false => format!(
                    "served from {} to {}",
                    crate::when::minute(self.first_seen),
                    crate::when::minute(self.last_seen)
                ),
            },
            self.sha256
        )
    }
}

/// A failure streak: a stretch of `down` results, which the alerter
/// calls an incident or which stays a blip ([`Incident::is_incident`]).
#[derive(Debug, Clone)]
pub struct Incident {
    pub check: String,
    pub start: OffsetDateTime,
    /// `None`: still open.
    pub end: Option<OffsetDateTime>,
    /// The first failure's words.
    pub cause: String,
    /// Its `down` results, all in a row.
    pub downs: u64,
    /// The channels told about the alerter's incident that began with
    /// this streak, in the order of its events; empty when none paged
    /// (a blip under the threshold, a silence) or without the alerter.
    pub told: Vec<crate::store::Told>,
    /// The alerter's id of the incident ([`crate::alert::IncidentId`]),
    /// which addresses its page; `None` for a blip.
    pub key: Option<crate::alert::IncidentId>,
    /// What the operator wrote about it, newest first (an incident's
    /// only: a blip is not read for them).
    pub updates: Vec<IncidentUpdate>,
}

impl Incident {
    /// Whether the alerter calls this streak an incident: it reached the
    /// check's failure threshold, or a channel was told of it (an entry
    /// exists only for an incident the alerter opened, whatever the
    /// threshold has become since). Anything shorter is a blip, which
    /// never pages.
    pub fn is_incident(&self, policy: &Policy) -> bool {
        !self.told.is_empty() || policy.opens_incident(self.downs)
    }
}

/// Streaks sorted into the alerter's incidents and blips, each newest
/// first as they came; `policy` gives a check's policy (`None` for a
/// check no longer configured, whose streaks count as incidents: the
/// pages cannot tell).
pub fn incidents_and_blips<'a>(
    streaks: Vec<Incident>,
    policy: impl Fn(&str) -> Option<&'a Policy>,
) -> (Vec<Incident>, Vec<Incident>) {
    streaks
        .into_iter()
        .partition(|i| policy(&i.check).is_none_or(|p| i.is_incident(p)))
}

/// One failure of the latest probe.
#[derive(Debug, Clone)]
pub struct FailureRow {
    pub assertion: String,
    pub expected: String,
    pub observed: String,
    pub message: String,
}

/// vigie's own health, in the footer of every page.
#[derive(Debug, Clone, Default)]
pub struct Footer {
    /// `ok`, or the verdict's status and reason.
    pub health: String,
    pub healthy: bool,
    pub replication_lag: Option<String>,
    pub outbox_backlog: Option<u64>,
    pub dead_letters: Option<u64>,
    pub last_report: Option<String>,
    pub version: &'static str,
}

/// The word and symbol for a status: never colour alone.
pub fn status_word(status: Option<Status>) -> (&'static str, &'static str, &'static str) {
    match status {
        Some(Status::Up) => ("UP", "▲", "up"),
        Some(Status::Warn) => ("WARN", "◆", "warn"),
        Some(Status::Down) => ("DOWN", "▼", "down"),
        None => ("NO DATA", "○", "none"),
    }
}

/// Days left on a certificate in words: "12 days left", "expires
/// today", "expired 2 days ago" (never "-2 days left").
pub fn days_left(days: i64) -> String {
    match days {
        d if d < -1 => format!("expired {} days ago", -d),
        -1 => "expired 1 day ago".to_string(),
        0 => "expires today".to_string(),
        1 => "1 day left".to_string(),
        d => format!("{d} days left"),
    }
}

/// The heading of an uptime figure over `window` back from `start`
/// (`24 h`, `30 d`): the label itself, or "since 19:36" when the history
/// began after the window's start, so a young install does not read as
/// 90 days of record.
pub fn window_label(
    label: &str,
    start: OffsetDateTime,
    history_from: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> String {
    match history_from {
        Some(from) if from > start => format!("since {}", clock(from, now)),
        _ => label.to_string(),
    }
}

/// "19:36 UTC" within the 24 hours around `now`, else the date too.
pub fn clock(at: OffsetDateTime, now: OffsetDateTime) -> String {
    if (at - now).abs() < Duration::hours(24) {
        let at = at.to_offset(time::UtcOffset::UTC);
        format!("{:02}:{:02} UTC", at.hour(), at.minute())
    } else {
        crate::when::minute(at)
    }
}

/// A hold in brief for the badge ("SILENCED", "MAINTENANCE") and in
/// full for the text beside it: what holds it and until when.
pub fn hold_words(hold: &Hold, now: OffsetDateTime) -> (&'static str, String) {
    let until = match hold.until {
        Some(t) => format!(" until {}", clock(t, now)),
        None => String::new(),
    };
    match &hold.cause {
        HoldCause::Silence { pattern, reason } if reason.is_empty() => {
            ("SILENCED", format!("silence {pattern}{until}"))
        }
        HoldCause::Silence { pattern, reason } => {
            ("SILENCED", format!("silence {pattern}{until}: {reason}"))
        }
        HoldCause::Maintenance { checks } => (
            "MAINTENANCE",
            format!("maintenance window {}{until}", checks.join(", ")),
        ),
        _ => ("HELD", hold.describe()),
    }
}

pub fn uptime(good: u64, known: u64) -> Option<f64> {
    (known > 0).then(|| good as f64 / known as f64)
}

/// `99.95%`; never rounds a failure up to 100%.
pub fn percent(share: f64) -> String {
    let value = (share * 10_000.0).floor() / 100.0;
    format!("{value:.2}%")
}

pub fn day(at: OffsetDateTime) -> String {
    at.date().to_string()
}

fn common_name(name: &str) -> Option<&str> {
    name.split(", ").find_map(|part| part.strip_prefix("CN="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_never_rounds_up_to_a_clean_record() {
        assert_eq!(percent(0.99999), "99.99%");
        assert_eq!(percent(1.0), "100.00%");
        assert_eq!(percent(0.5), "50.00%");
    }

    #[test]
    fn an_expired_certificate_reads_expired_not_negative_days_left() {
        assert_eq!(days_left(-2), "expired 2 days ago");
        assert_eq!(days_left(-1), "expired 1 day ago");
        assert_eq!(days_left(0), "expires today");
        assert_eq!(days_left(1), "1 day left");
        assert_eq!(days_left(30), "30 days left");
    }

    fn day_of(up: u64, warn: u64, down: u64) -> DayCell {
        DayCell {
            date: time::macros::date!(2026 - 12 - 01),
            up,
            warn,
            down,
            p50_ms: None,
            p95_ms: None,
        }
    }

    #[test]
    fn day_tones_deepen_with_downtime_and_warn_days_are_amber() {
        assert_eq!(day_of(0, 0, 0).tone(), "none");
        assert_eq!(day_of(100, 0, 0).tone(), "good");
        assert_eq!(day_of(90, 10, 0).tone(), "warn", "a WARN day is not green");
        assert_eq!(day_of(995, 0, 5).tone(), "bad s1");
        assert_eq!(day_of(95, 0, 5).tone(), "bad s2");
        assert_eq!(day_of(64, 0, 36).tone(), "bad s3", "a 64 % day");
        assert_eq!(day_of(0, 0, 10).tone(), "bad s4", "a 0 % day");
    }

    #[test]
    fn a_window_longer_than_the_history_says_since_when() {
        let now = time::macros::datetime!(2026-12-07 20:00 UTC);
        let start = now - Duration::days(30);
        let young = Some(time::macros::datetime!(2026-12-07 19:36 UTC));
        assert_eq!(window_label("30 d", start, young, now), "since 19:36 UTC");
        let old = Some(now - Duration::days(40));
        assert_eq!(window_label("30 d", start, old, now), "30 d");
        assert_eq!(window_label("30 d", start, None, now), "30 d");
        let days_ago = Some(time::macros::datetime!(2026-12-01 08:00 UTC));
        assert_eq!(
            window_label("30 d", start, days_ago, now),
            "since 2026-12-01 08:00 UTC"
        );
    }

    #[test]
    fn a_hold_names_the_silence_its_reason_and_its_end() {
        let now = time::macros::datetime!(2026-12-07 19:00 UTC);
        let hold = Hold {
            cause: HoldCause::Silence {
                pattern: "web-*".into(),
                reason: "db migration".into(),
            },
            until: Some(time::macros::datetime!(2026-12-07 21:30 UTC)),
        };
        assert_eq!(
            hold_words(&hold, now),
            (
                "SILENCED",
                "silence web-* until 21:30 UTC: db migration".into()
            )
        );
        let window = Hold {
            cause: HoldCause::Maintenance {
                checks: vec!["db".into()],
            },
            until: Some(time::macros::datetime!(2026-12-07 20:00 UTC)),
        };
        assert_eq!(
            hold_words(&window, now),
            (
                "MAINTENANCE",
                "maintenance window db until 20:00 UTC".into()
            )
        );
    }
}
