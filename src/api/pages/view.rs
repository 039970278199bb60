//! What the pages show, as plain data: built from the store, the latest
//! outcomes, the alert states and the health verdict (`build.rs`), drawn
//! by `render.rs` and `chart.rs`. Words and tones are decided here, once,
//! so the HTML and its tests agree.

use time::{Date, OffsetDateTime};

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
}

/// The served leaf, in brief.
#[derive(Debug, Clone)]
pub struct CertSummary {
    pub days_left: i64,
    pub issuer: String,
    pub staging: bool,
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

    /// The CSS class: `none` without results, else by uptime.
    pub fn tone(&self) -> &'static str {
        match self.uptime() {
            None => "none",
            Some(u) if u >= 0.999 => "good",
            Some(u) if u >= 0.99 => "fair",
            Some(_) => "bad",
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
            "{}\nissued by {}{}\nvalid {} to {}\nserved from {} to {}\nsha256 {}",
            self.subject,
            self.issuer,
            if self.staging {
                " (a staging CA: browsers do not trust it)"
            } else {
                ""
            },
            day(self.not_before),
            day(self.not_after),
            crate::when::minute(self.first_seen),
            crate::when::minute(self.last_seen),
            self.sha256
        )
    }
}

/// An incident: a stretch of failing results.
#[derive(Debug, Clone)]
pub struct Incident {
    pub check: String,
    pub start: OffsetDateTime,
    /// `None`: still open.
    pub end: Option<OffsetDateTime>,
    /// The first failure's words.
    pub cause: String,
    /// The channels told about the alerter's incident that began with
    /// this streak, in the order of its events; empty when none paged
    /// (a blip under the threshold, a silence) or without the alerter.
    pub told: Vec<crate::store::Told>,
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
}
