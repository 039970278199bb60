//! The push document: what every channel is told about one notification,
//! built with serde (never by pasting strings, so a quote in a failure
//! message cannot break it). A webhook receives it as it is; the other
//! kinds are written from it (`ntfy.rs`, `pagerduty.rs`, `slack.rs`).
//!
//! It is stored in the push outbox as JSON, so what is retried after a
//! restart is exactly what was first tried. The schema is versioned
//! (`version`) and documented in `docs/api.md`; a field is only ever
//! added, and a change of meaning is a new version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use url::Url;

use crate::alert::{Event, EventKind, Notification};
use crate::config::channels::NotifyEvent;

/// The schema version this code writes.
pub const VERSION: u32 = 1;

/// One notification as the channels are told it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushEvent {
    pub version: u32,
    /// Stable for this event, across retries and restarts: the mail's
    /// Message-ID without its angle brackets. A receiver that sees it
    /// twice has been told twice about one thing.
    pub id: String,
    pub event: PushKind,
    /// The incident of the first check; each check carries its own.
    pub incident: String,
    /// When the notification was written.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The vigie node that sent it.
    pub node: String,
    /// One line, as the mail's subject says it ("DOWN site: HTTP 500").
    pub summary: String,
    /// `[api] public_url`, when set.
    pub status_page: Option<String>,
    /// Sent by `vigie test-notify`: nothing is down.
    pub test: bool,
    /// About a warn episode rather than a DOWN incident: its WARN, or the
    /// `resolved` that ends it (with the warn's `incident`). Absent in
    /// documents stored before it existed, which were not.
    #[serde(default)]
    pub warn: bool,
    /// At least one, in the order they happened.
    pub checks: Vec<PushCheck>,
}

/// What happened, as routes and documents write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PushKind {
    Down,
    /// A warn episode began: sent only to channels whose route asks for it.
    Warn,
    Reminder,
    Resolved,
}

impl PushKind {
    pub fn of(kind: EventKind) -> PushKind {
        match kind {
            EventKind::Down => PushKind::Down,
            EventKind::Reminder => PushKind::Reminder,
            // The end of a warn closes it as a RESOLVED closes a DOWN (a
            // receiver pairs them by `incident`); `PushEvent::warn` tells
            // the two apart.
            EventKind::Resolved | EventKind::WarnResolved => PushKind::Resolved,
            EventKind::Warn => PushKind::Warn,
        }
    }

    /// The config's name of this event (priorities, routes).
    pub fn event(self) -> NotifyEvent {
        match self {
            PushKind::Down => NotifyEvent::Down,
            PushKind::Reminder => NotifyEvent::Reminder,
            PushKind::Resolved => NotifyEvent::Resolved,
            PushKind::Warn => NotifyEvent::Warn,
        }
    }

    /// The word a title starts with.
    pub fn word(self) -> &'static str {
        match self {
            PushKind::Down => "DOWN",
            PushKind::Reminder => "STILL DOWN",
            PushKind::Resolved => "RESOLVED",
            PushKind::Warn => "WARN",
        }
    }
}

impl PushEvent {
    /// The word a title starts with: the kind's, except that the end of
    /// a warn reads `WARN RESOLVED` (it is not the end of a DOWN).
    pub fn word(&self) -> &'static str {
        match (self.event, self.warn) {
            (PushKind::Resolved, true) => "WARN RESOLVED",
            (kind, _) => kind.word(),
        }
    }
}

/// One check of the notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushCheck {
    pub name: String,
    pub incident: String,
    /// `down`, `warn` or `up`: the latest probe's verdict.
    pub status: String,
    pub labels: BTreeMap<String, String>,
    /// The latest probe's most severe failure; `None` once it is up.
    pub reason: Option<String>,
    /// The first failed probe of the incident (of a warn: its first
    /// `warn` probe).
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// Set once resolved.
    #[serde(with = "time::serde::rfc3339::option")]
    pub resolved_at: Option<OffsetDateTime>,
    /// The probed URL, redacted as every shown URL is.
    pub target: String,
    /// Failed probes in a row (0 once resolved); for a warn, its `warn`
    /// probes in a row.
    pub consecutive_failures: u32,
    /// The check's page under `[api] public_url`, when set.
    pub page: Option<String>,
}

impl PushEvent {
    /// The document of `n`, written at `at` by `node`; `message_id` and
    /// `subject` are the mail's for the same notification.
    pub fn of(
        n: &Notification,
        message_id: &str,
        subject: &str,
        node: &str,
        public_url: Option<&Url>,
        at: OffsetDateTime,
    ) -> PushEvent {
        let kind = PushKind::of(n.kind);
        PushEvent {
            version: VERSION,
            id: message_id.trim_matches(['<', '>']).to_string(),
            event: kind,
            incident: n.events.first().map(Event::push_key).unwrap_or_default(),
            at,
            node: node.to_string(),
            summary: subject.trim_start_matches("[vigie] ").to_string(),
            status_page: public_url.map(Url::to_string),
            test: false,
            warn: n.kind.is_warn(),
            checks: n.events.iter().map(|e| check(e, public_url)).collect(),
        }
    }
}

fn check(e: &Event, public_url: Option<&Url>) -> PushCheck {
    let resolved = matches!(e.kind, EventKind::Resolved | EventKind::WarnResolved);
    PushCheck {
        name: e.check.clone(),
        incident: e.push_key(),
        status: match (e.kind, e.latest_unknown) {
            (EventKind::Resolved, _) => "up".to_string(),
            // Up again, or down: an incident superseded it.
            (EventKind::WarnResolved, _) => e.latest.status.to_string(),
            (_, true) => "unknown".to_string(),
            (_, false) => e.latest.status.to_string(),
        },
        labels: e.labels.clone(),
        reason: match resolved {
            true => None,
            false => e
                .latest
                .headline()
                .or(e.first_failure.headline())
                .map(str::to_string),
        },
        since: e.since,
        resolved_at: e.resolved_at,
        target: e.latest.target.clone(),
        consecutive_failures: e.consecutive_failures,
        page: public_url.and_then(|base| check_page(base, &e.check)),
    }
}

/// `<public_url>/checks/<name>` (names are URL-safe: `[a-z0-9._-]`).
fn check_page(base: &Url, check: &str) -> Option<String> {
    let mut base = base.clone();
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    base.join(&format!("checks/{check}")).ok().map(String::from)
}
