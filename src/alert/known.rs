//! The incidents an operator can name by key, for incident updates: the
//! ones open now (from the alert states) and the recent ones somebody was
//! told about (from the told ledger, which the store reads). Pure: the
//! callers gather both lists; this file merges them and picks one.
//!
//! It does not decide anything about alerting: an incident's key only
//! says which incident an update is about.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::event::IncidentId;
use super::state::AlertState;

/// An incident an update can be about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownIncident {
    /// `<check>@<time the failure threshold was crossed>`: what
    /// `POST /api/v1/incidents/{key}/updates` takes.
    pub key: IncidentId,
    pub check: String,
    /// The incident's first failed probe.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// Still firing.
    pub open: bool,
}

/// The open incident of each of `states`.
pub fn open_incidents<'a>(states: impl Iterator<Item = &'a AlertState>) -> Vec<KnownIncident> {
    states
        .filter_map(|state| state.incident.as_deref())
        .map(|incident| KnownIncident {
            key: incident.id.clone(),
            check: incident.id.check().to_string(),
            since: incident.since,
            open: true,
        })
        .collect()
}

/// `open` and `told` as one list, newest first, each incident once (an
/// open incident that was told about is listed as open).
pub fn merge(open: Vec<KnownIncident>, told: Vec<KnownIncident>) -> Vec<KnownIncident> {
    let mut all = open;
    for incident in told {
        if !all.iter().any(|known| known.key == incident.key) {
            all.push(incident);
        }
    }
    all.sort_by(|a, b| b.since.cmp(&a.since).then_with(|| a.key.cmp(&b.key)));
    all
}

/// The incident whose key is `key`.
pub fn find<'a>(known: &'a [KnownIncident], key: &str) -> Option<&'a KnownIncident> {
    known.iter().find(|incident| incident.key.as_str() == key)
}

/// The incident an update about `check` is for when none is named: its
/// open incident, else its latest.
pub fn latest_of<'a>(known: &'a [KnownIncident], check: &str) -> Option<&'a KnownIncident> {
    let of_check = || known.iter().filter(|incident| incident.check == check);
    of_check()
        .find(|incident| incident.open)
        .or_else(|| of_check().max_by_key(|incident| incident.since))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn known(check: &str, since: OffsetDateTime, open: bool) -> KnownIncident {
        KnownIncident {
            key: IncidentId::new(check, since + time::Duration::minutes(1)),
            check: check.to_string(),
            since,
            open,
        }
    }

    #[test]
    fn an_open_incident_is_chosen_before_a_later_closed_one_and_listed_once() {
        let monday = datetime!(2026-12-07 10:00 UTC);
        let open = known("site", monday, true);
        let later = known("site", monday + time::Duration::hours(2), false);
        let told_open = KnownIncident {
            open: false,
            ..open.clone()
        };
        let all = merge(
            vec![open.clone()],
            vec![told_open, later.clone(), known("api", monday, false)],
        );
        assert_eq!(all.len(), 3);
        assert_eq!(all[0], later, "newest first");
        assert_eq!(latest_of(&all, "site"), Some(&open));
        assert_eq!(find(&all, later.key.as_str()), Some(&later));
        assert_eq!(find(&all, "site"), None);
    }

    #[test]
    fn without_an_open_incident_the_latest_is_chosen() {
        let monday = datetime!(2026-12-07 10:00 UTC);
        let old = known("site", monday, false);
        let new = known("site", monday + time::Duration::days(1), false);
        let all = merge(Vec::new(), vec![old, new.clone()]);
        assert_eq!(latest_of(&all, "site"), Some(&new));
        assert_eq!(latest_of(&all, "other"), None);
    }
}
