//! `<prefix>/<node>/state.json`: what one vantage tells the others, one
//! object per node rewritten every `publish_every` (never one per check).
//!
//! The shape is a public contract (`docs/vantages.md`): operators read it
//! with `aws s3 cp`, and vigies of neighbouring versions read each other's.
//! Unknown fields are ignored on reading, so a newer vigie may add some.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::clock::saturating_add;
use crate::outcome::Status;

/// This node's checks as its alerter last judged them, which the vantage
/// task publishes.
pub type LocalView = Arc<Mutex<BTreeMap<String, CheckView>>>;

/// Takes one judged probe into `view`: the status, since when, and the
/// first failure in words.
pub fn record(
    view: &mut BTreeMap<String, CheckView>,
    check: &str,
    status: ViewStatus,
    probed: OffsetDateTime,
    failing_since: Option<OffsetDateTime>,
    failure: Option<&str>,
    firing: bool,
) {
    let since = match (status, failing_since, view.get(check)) {
        (ViewStatus::Down, Some(since), _) => since,
        (_, _, Some(before)) if before.status == status => before.since,
        _ => probed,
    };
    let closed = view.get(check).and_then(|before| before.closed.clone());
    view.insert(
        check.to_string(),
        CheckView {
            status,
            since,
            last_probe: probed,
            failure: failure.map(str::to_string),
            firing,
            warning: false,
            closed,
        },
    );
}

/// Makes `view` list exactly the checks configured (`names`), leaving
/// vigie's own pseudo-checks (`vigie:...`) as they are: a check not probed
/// here yet is listed as unknown since `now`, so that a peer counts this
/// node as a vantage that has no verdict yet rather than one that does not
/// probe the check (which would let a lone node confirm its own outage
/// while the fleet starts); a check no longer configured is dropped.
pub fn configured<'a>(
    view: &mut BTreeMap<String, CheckView>,
    names: impl IntoIterator<Item = &'a str>,
    now: OffsetDateTime,
) {
    let names: std::collections::BTreeSet<&str> = names.into_iter().collect();
    view.retain(|check, _| check.starts_with("vigie:") || names.contains(check.as_str()));
    for name in names {
        view.entry(name.to_string()).or_insert_with(|| CheckView {
            status: ViewStatus::Unknown,
            since: now,
            last_probe: now,
            failure: None,
            firing: false,
            warning: false,
            closed: None,
        });
    }
}

/// One vantage's published state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeState {
    pub node: String,
    /// The vigie version that wrote it.
    pub version: String,
    /// The node's own clock when it wrote this (the bucket's Last-Modified
    /// is what liveness is judged by; the two apart show clock skew).
    #[serde(with = "time::serde::rfc3339")]
    pub published_at: OffsetDateTime,
    pub health: NodeHealth,
    /// Every check this node probes, by name.
    pub checks: BTreeMap<String, CheckView>,
    /// The claims this node won lately (their names under the prefix,
    /// newest last): what another node checks a claim it lost against.
    #[serde(default)]
    pub claims: Vec<String>,
}

/// The node's own health, as its `/healthz` says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeHealth {
    /// `ok`, `late`, `store`...: `/healthz`'s `status`.
    pub status: String,
    #[serde(default)]
    pub degraded: Vec<String>,
}

/// One check as this node judges it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckView {
    /// The latest probe's status; `unknown` when vigie was blind.
    pub status: ViewStatus,
    /// Since when the check has had this status (for `down`: the first
    /// failed probe of the streak).
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub last_probe: OffsetDateTime,
    /// The latest probe's first failure, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Its failure threshold is crossed on this node.
    #[serde(default)]
    pub firing: bool,
    /// A warn episode is open on this node (what backs its claim of a
    /// `warn`, as `firing` backs a `down`). Absent from states written
    /// before it: read as none.
    #[serde(default)]
    pub warning: bool,
    /// The fleet key of the latest incident whose RESOLVED this node
    /// claimed: it backs that claim once the node fires again in a later
    /// incident and the claim has left [`NodeState::claims`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<String>,
}

/// A check's status as a vantage reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewStatus {
    Up,
    Warn,
    Down,
    /// Not judged: the node was blind (every canary failed).
    Unknown,
}

impl ViewStatus {
    pub fn of(status: Status, unknown: bool) -> Self {
        match (status, unknown) {
            (_, true) => ViewStatus::Unknown,
            (Status::Up, _) => ViewStatus::Up,
            (Status::Warn, _) => ViewStatus::Warn,
            (Status::Down, _) => ViewStatus::Down,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ViewStatus::Up => "up",
            ViewStatus::Warn => "warn",
            ViewStatus::Down => "down",
            ViewStatus::Unknown => "unknown",
        }
    }
}

impl NodeState {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A peer's state as read from the bucket (its signature already
    /// checked); `Err` says why it cannot be used.
    pub fn from_json(bytes: &[u8]) -> Result<NodeState, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("not a vantage state: {e}"))
    }

    /// A state whose probes (or publication) are more than `skew` ahead of
    /// `now` is refused: a peer with a clock far ahead would otherwise
    /// look current long after it stopped, and its votes with it.
    pub fn ahead_of(&self, now: OffsetDateTime, skew: Duration) -> Option<String> {
        let limit = saturating_add(now, skew);
        let latest = self
            .checks
            .values()
            .map(|c| c.last_probe)
            .chain([self.published_at])
            .max()?;
        (latest > limit).then(|| {
            format!(
                "{}'s state has a probe at {}, more than {} ahead of this node's clock",
                self.node,
                crate::when::minute(latest),
                crate::when::std_span(skew)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_reads_back_and_ignores_what_it_does_not_know() {
        let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let state = NodeState {
            node: "eu-par".into(),
            version: "0.1.0".into(),
            published_at: at,
            health: NodeHealth {
                status: "ok".into(),
                degraded: vec![],
            },
            checks: BTreeMap::from([(
                "site".to_string(),
                CheckView {
                    status: ViewStatus::Down,
                    since: at,
                    last_probe: at,
                    failure: Some("HTTP 503".into()),
                    firing: true,
                    warning: false,
                    closed: None,
                },
            )]),
            claims: vec!["incidents/site/20261201T071230Z/down".into()],
        };
        let json = state.to_json();
        assert_eq!(NodeState::from_json(&json).unwrap(), state);
        let text = String::from_utf8(json).unwrap();
        assert!(text.contains(r#""status":"down""#), "{text}");
        let newer = text.replacen("{", r#"{"added":1,"#, 1);
        assert_eq!(NodeState::from_json(newer.as_bytes()).unwrap(), state);
        assert!(NodeState::from_json(b"<html>").is_err());
        let skew = Duration::from_secs(30);
        assert_eq!(state.ahead_of(at, skew), None);
        assert_eq!(state.ahead_of(at - Duration::from_secs(29), skew), None);
        let ahead = state.ahead_of(at - Duration::from_secs(31), skew).unwrap();
        assert!(ahead.contains("more than 30 s ahead"), "{ahead}");
    }

    #[test]
    fn a_check_not_probed_yet_is_listed_unknown_and_one_no_longer_configured_is_dropped() {
        let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let mut view = BTreeMap::new();
        record(
            &mut view,
            "site",
            ViewStatus::Down,
            at,
            Some(at),
            Some("HTTP 500"),
            true,
        );
        record(&mut view, "gone", ViewStatus::Up, at, None, None, false);
        record(
            &mut view,
            "vigie:vantage:fra",
            ViewStatus::Up,
            at,
            None,
            None,
            false,
        );
        let later = at + Duration::from_secs(60);
        configured(&mut view, ["site", "app"], later);
        let names: Vec<&str> = view.keys().map(String::as_str).collect();
        assert_eq!(names, ["app", "site", "vigie:vantage:fra"]);
        assert_eq!(view["app"].status, ViewStatus::Unknown);
        assert_eq!(view["app"].last_probe, later);
        assert_eq!(
            view["site"].status,
            ViewStatus::Down,
            "a probed check is kept as it is"
        );
    }
}
