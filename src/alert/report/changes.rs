//! Certificate changes: a check serving a new leaf (a new SHA-256
//! fingerprint), told apart as a renewal, a change of names, or a change of
//! CA, for the daily report's "changes in the last 24 h".
//!
//! Pure functions of stored outcomes; the daemon reads the history.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::cert::CertInfo;

use crate::outcome::Outcome;

/// A new leaf certificate served by a check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertChange {
    pub check: String,
    /// The first probe that saw the new leaf.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub kind: ChangeKind,
    pub before: Leaf,
    pub after: Leaf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Same CA organisation, same names: a renewal.
    Renewed,
    /// Same CA, different names (SANs).
    NamesChanged,
    /// Another CA organisation, or a switch to or from staging.
    IssuerChanged,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Renewed => "renewed",
            ChangeKind::NamesChanged => "names changed",
            ChangeKind::IssuerChanged => "issuer changed",
        }
    }
}

/// The facts of a leaf that a change report shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leaf {
    pub subject: String,
    pub issuer: String,
    pub sans: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    pub sha256: String,
}

impl Leaf {
    fn of(c: &CertInfo) -> Self {
        Self {
            subject: c.subject.clone(),
            issuer: c.issuer.clone(),
            sans: c.sans.clone(),
            not_after: c.not_after,
            sha256: c.sha256.clone(),
        }
    }
}

/// The change between two probes of one check, if the leaf changed (a new
/// SHA-256 fingerprint). Probes without a chain (unreachable) are not
/// comparisons: pass the last probe that had one.
pub fn leaf_change(before: &Outcome, after: &Outcome) -> Option<CertChange> {
    let (old, new) = (before.leaf()?, after.leaf()?);
    if old.sha256 == new.sha256 {
        return None;
    }
    // Let's Encrypt rotates intermediates (R10, R11...) between renewals,
    // so the issuer's organisation, not its full name, tells a renewal
    // from a change of CA; staging CAs carry "(STAGING)" in it.
    let kind = if organization(&old.issuer) != organization(&new.issuer) {
        ChangeKind::IssuerChanged
    } else if sorted(&old.sans) != sorted(&new.sans) {
        ChangeKind::NamesChanged
    } else {
        ChangeKind::Renewed
    };
    Some(CertChange {
        check: after.name.clone(),
        at: after.started_at,
        kind,
        before: Leaf::of(old),
        after: Leaf::of(new),
    })
}

/// Leaf changes in one check's history (oldest first) that happened at or
/// after `since`. Pass history from somewhat before `since`, so that the
/// first change has a predecessor. A leaf already served earlier in the
/// history is not new: a load balancer alternating between two
/// certificates would otherwise report a change at every probe.
pub fn changes(history: &[Outcome], since: OffsetDateTime) -> Vec<CertChange> {
    let with_leaf: Vec<&Outcome> = history.iter().filter(|o| o.leaf().is_some()).collect();
    let mut seen: Vec<&str> = Vec::new();
    let mut found = Vec::new();
    for pair in with_leaf.windows(2) {
        if let Some(leaf) = pair[0].leaf() {
            seen.push(leaf.sha256.as_str());
        }
        let Some(change) = leaf_change(pair[0], pair[1]) else {
            continue;
        };
        if change.at >= since && !seen.contains(&change.after.sha256.as_str()) {
            found.push(change);
        }
    }
    found
}

fn organization(dn: &str) -> &str {
    dn.split(", ")
        .find_map(|part| part.strip_prefix("O="))
        .unwrap_or(dn)
}

fn sorted(names: &[String]) -> Vec<&str> {
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    names.sort_unstable();
    names
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::alert::testing::{down, renewed, staging, up, with_leaf, T0};
    use crate::outcome::Assertion;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_new_fingerprint_is_a_renewal_or_an_issuer_change() {
        let before = up("site", T0);
        assert_eq!(leaf_change(&before, &up("site", T0 + HOUR)), None);
        let change = leaf_change(&before, &with_leaf("site", T0, renewed)).unwrap();
        assert_eq!(
            change.kind,
            ChangeKind::Renewed,
            "R11 -> R10 is still Let's Encrypt"
        );
        let change = leaf_change(&before, &with_leaf("site", T0, staging)).unwrap();
        assert_eq!(change.kind, ChangeKind::IssuerChanged);
        let names = with_leaf("site", T0, |leaf| {
            leaf.sha256 = "ef".repeat(32);
            leaf.sans.push("www.site.example.com".to_string());
        });
        assert_eq!(
            leaf_change(&before, &names).unwrap().kind,
            ChangeKind::NamesChanged
        );
        let unreachable = down("site", T0, Assertion::Connect);
        assert_eq!(leaf_change(&before, &unreachable), None);
    }

    #[test]
    fn changes_skip_unreachable_probes_and_alternating_leaves() {
        let t = |h: u32| T0 + HOUR * h;
        let history = vec![
            up("site", t(0)),
            down("site", t(1), Assertion::Connect),
            with_leaf("site", t(2), renewed),
            up("site", t(3)),
            with_leaf("site", t(4), renewed),
        ];
        let found = changes(&history, t(1));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].at, found[0].kind), (t(2), ChangeKind::Renewed));
        assert!(
            changes(&history, t(3)).is_empty(),
            "too old, and a leaf seen before"
        );
    }
}
