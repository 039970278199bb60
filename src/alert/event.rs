//! What the state machine reports ([`Event`]) and what it remembers of a
//! probe ([`Snapshot`]).
//!
//! An event carries everything its mail needs (the check's labels, the
//! first and latest failures, the thread of earlier mails), so rendering
//! never reads state or config. Deciding when an event happens is
//! `state.rs`'s job; grouping events into mails is `group.rs`'s.
//!
//! Everything here is persisted inside [`super::AlertState`], so the serde
//! shapes avoid what a non-self-describing format (postcard, as the store
//! uses) cannot read back: no skipped fields, no internally tagged enums.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::cert::CertInfo;

use crate::outcome::{Failure, Outcome, Status};

/// The pseudo-check of vigie's own network alert (fed by `blind`). The
/// colon keeps it apart from every real check name (`[a-z0-9._-]+`); a
/// silence of `*` covers it.
pub const NETWORK_CHECK: &str = "vigie:network";

/// One incident of one check, stable from the probe that fired it to its
/// RESOLVED mail, across restarts: `<check>@<time the threshold was
/// crossed>`, e.g. `site@2026-11-29T07:00:30.000Z`. Mails derive their
/// Message-IDs from it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IncidentId(String);

impl IncidentId {
    pub fn new(check: &str, fired_at: OffsetDateTime) -> Self {
        let t = fired_at.to_offset(time::UtcOffset::UTC);
        Self(format!(
            "{check}@{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        ))
    }

    /// An id as a stored record or a request spells it; not checked
    /// against any incident.
    pub fn from_key(key: &str) -> Self {
        Self(key.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The check it is about: everything before the first `@` (check
    /// names never hold one).
    pub fn check(&self) -> &str {
        self.0
            .split_once('@')
            .map_or(self.0.as_str(), |(check, _)| check)
    }
}

impl fmt::Display for IncidentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a mail (or a push) is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    /// The incident fired (or its hold ended while it was still firing).
    Down,
    /// Still firing, `repeat` after the last mail about it.
    Reminder,
    /// It recovered.
    Resolved,
    /// A warn episode began (see `state.rs`): never mailed, pushed only to
    /// the channels whose route asks for `warn`. Last, so that the
    /// variants before it keep their index in a compact encoding.
    Warn,
    /// A warn episode whose WARN was sent ended: the channels that were
    /// told the WARN are told it is over (a PagerDuty resolve, the ntfy
    /// notification replaced, a webhook `resolved` with the warn's key).
    /// Never mailed, like the WARN it closes.
    WarnResolved,
}

impl EventKind {
    /// The word a subject line or a page shows for it.
    pub fn word(self) -> &'static str {
        match self {
            EventKind::Down => "DOWN",
            EventKind::Reminder => "STILL DOWN",
            EventKind::Resolved => "RESOLVED",
            EventKind::Warn => "WARN",
            EventKind::WarnResolved => "WARN RESOLVED",
        }
    }

    /// About a warn episode (its WARN or its end), not an incident: never
    /// mailed, routed as `warn`.
    pub fn is_warn(self) -> bool {
        matches!(self, EventKind::Warn | EventKind::WarnResolved)
    }
}

/// The part of a probe's outcome an alert mail shows, kept in the state so
/// that a restart can still say what the first failure was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The probed URL, already redacted by the probe.
    pub target: String,
    pub status: Status,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    pub failures: Vec<Failure>,
    /// The chain as served, leaf first; empty without TLS.
    pub chain: Vec<CertInfo>,
}

impl Snapshot {
    pub fn of(outcome: &Outcome) -> Self {
        Self {
            target: outcome.target.clone(),
            status: outcome.status,
            started_at: outcome.started_at,
            failures: outcome.failures.clone(),
            chain: outcome
                .tls
                .as_ref()
                .map(|tls| tls.chain.to_vec())
                .unwrap_or_default(),
        }
    }

    /// The sentence an operator reads first: the most severe failure's
    /// message, as [`Outcome::first_failure`] picks it.
    pub fn headline(&self) -> Option<&str> {
        self.failures
            .iter()
            .find(|f| f.assertion.severity() == Status::Down)
            .or_else(|| self.failures.first())
            .map(|f| f.message.as_str())
    }
}

/// A page that was held by a silence, a maintenance window or `page =
/// false`, shown in the mail that finally goes out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// What held it, in words ("maintenance window staging-*").
    pub by: String,
}

/// Something to tell the on-call person about one check's incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub check: String,
    pub incident: IncidentId,
    /// When the state machine produced it.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// 1 for the first reminder, 2 for the second...; 0 otherwise.
    pub reminder: u32,
    pub to: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// The first failed probe of the incident.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// Failed probes in a row at `at` (0 once resolved).
    pub consecutive_failures: u32,
    /// Failed probes since the incident began, in a row or not.
    pub failed_probes: u32,
    #[serde(with = "opt_rfc3339")]
    pub last_success: Option<OffsetDateTime>,
    pub first_failure: Snapshot,
    /// The latest probe (for RESOLVED: the one that completed recovery).
    pub latest: Snapshot,
    /// The latest probe could not be judged because vigie was blind.
    pub latest_unknown: bool,
    #[serde(with = "opt_rfc3339")]
    pub resolved_at: Option<OffsetDateTime>,
    /// Set when this DOWN went out late because a hold ended.
    pub held: Option<Held>,
    /// Message-IDs already sent about this incident, oldest first.
    pub thread: Vec<String>,
    /// What the other vantages say ("confirmed down from 2 of 3 vantages
    /// (eu-par, eu-ams); fra: up", "not confirmed: coordination
    /// unavailable"), set by the daemon just before the mail is rendered;
    /// `None` without `[vantage]`.
    pub vantage: Option<String>,
    /// With `[vantage]`: the fleet's key of the incident (`check@<key>`,
    /// the key of the claim this node won to send it), which the pushes
    /// carry instead of `incident`. Every node that sends an event of the
    /// incident (its DOWN, a reminder, its RESOLVED) claims it under that
    /// one key, so a RESOLVED from another node than the DOWN's still
    /// closes what the DOWN opened: the same PagerDuty `dedup_key`, the
    /// same ntfy sequence id. `None` without coordination.
    #[serde(default)]
    pub fleet_key: Option<String>,
}

impl Event {
    /// The incident's key as pushes carry it: the fleet's, when a claim
    /// set one, else this node's id.
    pub fn push_key(&self) -> String {
        self.fleet_key
            .clone()
            .unwrap_or_else(|| self.incident.to_string())
    }

    /// vigie's own "cannot reach the network" alert, not a check's.
    pub fn is_network(&self) -> bool {
        self.check == NETWORK_CHECK
    }
}

/// `Option<OffsetDateTime>` as an optional RFC 3339 string.
/// `time::serde::rfc3339::option` reads back through `deserialize_any`,
/// which postcard refuses; this reads an `Option<String>` instead.
pub(super) mod opt_rfc3339 {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use time::format_description::well_known::Rfc3339;
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &Option<OffsetDateTime>, s: S) -> Result<S::Ok, S::Error> {
        let text = t
            .map(|t| t.format(&Rfc3339))
            .transpose()
            .map_err(serde::ser::Error::custom)?;
        text.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<OffsetDateTime>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| OffsetDateTime::parse(&text, &Rfc3339))
            .transpose()
            .map_err(serde::de::Error::custom)
    }
}
