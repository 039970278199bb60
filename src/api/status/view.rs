//! What the public page may show, as plain data. Redaction is structural:
//! these types have no field for a target, a URL, a failure's words, a
//! label outside `public_labels` or vigie's own health, and [`public`] is
//! the one function that builds them from the operator pages' data, so
//! nothing else can leak through the page, the feed or a badge.

use time::OffsetDateTime;

use super::super::pages::view::{CheckRow, DayCell, Incident};
use crate::config::StatusPageConfig;
use crate::incident_update::UpdateState;
use crate::outcome::Status;

/// A check's state in the public's words. A silence changes nothing here:
/// it holds the operators' pages, not the truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    Operational,
    Degraded,
    Down,
    NoData,
}

impl Word {
    pub fn of(status: Option<Status>) -> Word {
        match status {
            Some(Status::Up) => Word::Operational,
            Some(Status::Warn) => Word::Degraded,
            Some(Status::Down) => Word::Down,
            None => Word::NoData,
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Word::Operational => "Operational",
            Word::Degraded => "Degraded",
            Word::Down => "Down",
            Word::NoData => "No data",
        }
    }

    /// The CSS class, shared with the operator pages' status chips.
    pub fn class(self) -> &'static str {
        match self {
            Word::Operational => "up",
            Word::Degraded => "warn",
            Word::Down => "down",
            Word::NoData => "none",
        }
    }

    /// The badge colour (shields' palette: green, yellow, red, grey).
    pub fn colour(self) -> &'static str {
        match self {
            Word::Operational => "#4c1",
            Word::Degraded => "#dfb317",
            Word::Down => "#e05d44",
            Word::NoData => "#9f9f9f",
        }
    }
}

/// One check on the public page.
#[derive(Debug, Clone)]
pub struct PublicCheck {
    pub name: String,
    pub word: Word,
    /// A public maintenance window covers the check now.
    pub maintenance: bool,
    /// Only the keys of `public_labels`.
    pub labels: Vec<(String, String)>,
    /// Oldest first, one per day (their counts only are shown).
    pub days: Vec<DayCell>,
    pub uptime_24h: Option<f64>,
    pub uptime_30d: Option<f64>,
    pub uptime_90d: Option<f64>,
    /// The check's first result, when the windows above reach further
    /// back: their headings then say "since ...".
    pub history_from: Option<OffsetDateTime>,
    pub cert_days_left: Option<i64>,
}

/// Checks sharing the value of `[status_page] groups`.
#[derive(Debug, Clone)]
pub struct PublicGroup {
    /// The label's value, or "Other" for checks without it.
    pub title: String,
    pub checks: Vec<PublicCheck>,
}

/// An incident of a public check: when, and what the on-call person wrote;
/// never the failure that opened it.
#[derive(Debug, Clone)]
pub struct PublicIncident {
    pub check: String,
    pub start: OffsetDateTime,
    /// `None`: still open.
    pub end: Option<OffsetDateTime>,
    /// Oldest first.
    pub updates: Vec<PublicUpdate>,
}

impl PublicIncident {
    /// When anything last happened to it, for the feed.
    pub fn updated(&self) -> OffsetDateTime {
        let last_update = self.updates.last().map(|u| u.at);
        [Some(self.start), self.end, last_update]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(self.start)
    }
}

#[derive(Debug, Clone)]
pub struct PublicUpdate {
    pub at: OffsetDateTime,
    pub state: UpdateState,
    /// The Markdown as HTML, raw HTML escaped.
    pub html: String,
}

/// A notice at the top of the page: an announcement or an upcoming public
/// maintenance window.
#[derive(Debug, Clone)]
pub struct Notice {
    pub title: String,
    /// Announcement text as HTML (Markdown, raw HTML escaped); `None` for
    /// a maintenance window.
    pub html: Option<String>,
    pub from: OffsetDateTime,
    pub until: OffsetDateTime,
}

/// Everything the page, the feed and the badges are drawn from.
#[derive(Debug, Clone)]
pub struct PublicStatus {
    pub title: String,
    pub now: OffsetDateTime,
    pub notices: Vec<Notice>,
    pub groups: Vec<PublicGroup>,
    /// Newest first.
    pub incidents: Vec<PublicIncident>,
}

impl PublicStatus {
    /// The word over every check: the worst of them.
    pub fn overall(&self) -> Word {
        let words = self
            .groups
            .iter()
            .flat_map(|g| g.checks.iter().map(|c| c.word));
        let mut overall = None;
        for word in words {
            overall = Some(match (overall, word) {
                (_, Word::Down) | (Some(Word::Down), _) => Word::Down,
                (_, Word::Degraded) | (Some(Word::Degraded), _) => Word::Degraded,
                (Some(Word::Operational), _) | (_, Word::Operational) => Word::Operational,
                _ => Word::NoData,
            });
        }
        overall.unwrap_or(Word::NoData)
    }

    pub fn check(&self, name: &str) -> Option<&PublicCheck> {
        self.groups
            .iter()
            .flat_map(|g| g.checks.iter())
            .find(|c| c.name == name)
    }
}

/// The public view of one operator row: what [`PublicCheck`] has room for.
pub fn public(row: &CheckRow, config: &StatusPageConfig, maintenance: bool) -> PublicCheck {
    PublicCheck {
        name: row.name.clone(),
        word: Word::of(row.status),
        maintenance,
        labels: row
            .labels
            .iter()
            .filter(|(key, _)| config.public_labels.contains(key))
            .cloned()
            .collect(),
        days: row.days.clone(),
        uptime_24h: row.uptime_24h,
        uptime_30d: row.uptime_30d,
        uptime_90d: row.uptime_90d,
        history_from: row.history_from,
        cert_days_left: row.certificate.as_ref().map(|c| c.days_left),
    }
}

/// The public view of an incident and its updates (the streak's cause is
/// left behind).
pub fn public_incident(incident: &Incident) -> PublicIncident {
    PublicIncident {
        check: incident.check.clone(),
        start: incident.start,
        end: incident.end,
        // The pages' incidents list their updates newest first.
        updates: incident
            .updates
            .iter()
            .rev()
            .map(|u| PublicUpdate {
                at: u.at,
                state: u.state,
                html: u.html(),
            })
            .collect(),
    }
}

/// Checks grouped by the value of `label`, groups in name order, "Other"
/// (checks without the label) last.
pub fn group(checks: Vec<(PublicCheck, Option<String>)>) -> Vec<PublicGroup> {
    let mut groups: std::collections::BTreeMap<(bool, String), Vec<PublicCheck>> =
        std::collections::BTreeMap::new();
    for (check, value) in checks {
        let key = match value {
            Some(value) => (false, value),
            None => (true, "Other".to_string()),
        };
        groups.entry(key).or_default().push(check);
    }
    groups
        .into_iter()
        .map(|((_, title), checks)| PublicGroup { title, checks })
        .collect()
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::api::pages::view::CertSummary;

    const NOW: OffsetDateTime = datetime!(2026-12-07 20:00 UTC);

    fn row(status: Option<Status>) -> CheckRow {
        CheckRow {
            labels: vec![
                ("env".into(), "prod".into()),
                ("team".into(), "payments-secret".into()),
            ],
            response_ms: Some(12.0),
            uptime_24h: Some(0.5),
            uptime_30d: Some(0.9),
            certificate: Some(CertSummary {
                days_left: 12,
                issuer: "CN=Internal CA".into(),
                staging: false,
                key_exchange: Some("X25519MLKEM768".into()),
            }),
            vantage: Some("down from fra only".into()),
            reason: Some("HTTP 500 from https://10.0.0.7/internal".into()),
            ..CheckRow::bare("api", status)
        }
    }

    #[test]
    fn the_public_view_keeps_only_listed_labels_and_no_failure_words() {
        let config = StatusPageConfig {
            public_labels: vec!["env".into()],
            ..StatusPageConfig::default()
        };
        let check = public(&row(Some(Status::Down)), &config, false);
        assert_eq!(check.labels, [("env".to_string(), "prod".to_string())]);
        assert_eq!(check.word, Word::Down);
        assert_eq!(check.cert_days_left, Some(12));
        let shown = format!("{check:?}");
        for secret in [
            "payments-secret",
            "10.0.0.7",
            "HTTP 500",
            "Internal CA",
            "fra",
        ] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
    }

    #[test]
    fn a_silenced_down_check_still_reads_down() {
        let mut silenced = row(Some(Status::Down));
        silenced.hold = Some(crate::alert::Hold {
            cause: crate::alert::HoldCause::Silence {
                pattern: "api".into(),
                reason: "deploy".into(),
            },
            until: None,
        });
        let check = public(&silenced, &StatusPageConfig::default(), false);
        assert_eq!(check.word.text(), "Down");
    }

    #[test]
    fn the_overall_word_is_the_worst() {
        let config = StatusPageConfig::default();
        let status = |words: &[Option<Status>]| PublicStatus {
            title: "Status".into(),
            now: NOW,
            notices: Vec::new(),
            groups: vec![PublicGroup {
                title: "prod".into(),
                checks: words
                    .iter()
                    .map(|s| public(&row(*s), &config, false))
                    .collect(),
            }],
            incidents: Vec::new(),
        };
        assert_eq!(status(&[]).overall(), Word::NoData);
        assert_eq!(
            status(&[None, Some(Status::Up)]).overall(),
            Word::Operational
        );
        assert_eq!(
            status(&[Some(Status::Up), Some(Status::Warn)]).overall(),
            Word::Degraded
        );
        assert_eq!(
            status(&[Some(Status::Down), Some(Status::Warn), None]).overall(),
            Word::Down
        );
    }
}
