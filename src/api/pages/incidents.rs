//! The alerter's incidents among the failure streaks: which streaks are
//! incidents and which are blips (by each check's alerting policy, the
//! one the alerter applies), and, for an incident, the channels told, the
//! operator's updates and the key that addresses its page.
//!
//! The key is the alerter's own id of the incident, `<check>@<start of the
//! probe that crossed the failure threshold>` ([`IncidentId`]): the same
//! rule, applied to the stored results, names the incident the alerter
//! named while it ran. It reads as the incident in mails and pushes, and
//! it finds the incident again from an address alone.

use std::collections::HashMap;

use time::OffsetDateTime;

use super::streaks::StreakCache;
use super::view::{incidents_and_blips, Incident};
use crate::alert::{IncidentId, Policy};
use crate::store::{IncidentUpdates, Store, StoreError, ToldLedger};

/// What sorting streaks reads besides the streaks: the results (for the
/// crossing probe), the told ledger and the updates (each absent without
/// the alerter), and every configured check's policy.
pub struct Records<'a> {
    pub store: &'a dyn Store,
    pub told: Option<&'a ToldLedger>,
    pub updates: Option<&'a IncidentUpdates>,
    pub policies: &'a HashMap<String, Policy>,
}

impl Records<'_> {
    /// `streaks` sorted into incidents (with their told channels, key and
    /// updates) and blips, each newest first.
    pub fn sort(
        &self,
        mut streaks: Vec<Incident>,
    ) -> Result<(Vec<Incident>, Vec<Incident>), StoreError> {
        if let Some(told) = self.told {
            for streak in &mut streaks {
                streak.told = told.of_incident(&streak.check, streak.start)?;
            }
        }
        let (mut incidents, blips) = incidents_and_blips(streaks, |check| self.policies.get(check));
        for incident in &mut incidents {
            incident.key = Some(self.key(incident)?);
            if let Some(updates) = self.updates {
                let mut written = updates.of_incident(&incident.check, incident.start)?;
                written.reverse();
                incident.updates = written;
            }
        }
        Ok((incidents, blips))
    }

    /// The alerter's id of `incident`: named after the probe that crossed
    /// the check's failure threshold (the streak's last, for one that
    /// paged under a higher threshold than today's).
    fn key(&self, incident: &Incident) -> Result<IncidentId, StoreError> {
        let threshold = self
            .policies
            .get(&incident.check)
            .map_or(1, |p| p.failure_threshold);
        let nth = u64::from(threshold).min(incident.downs).max(1);
        let read = usize::try_from(nth).unwrap_or(usize::MAX);
        let crossing = self
            .store
            .history_page(&incident.check, incident.start, read)?
            .last()
            .map_or(incident.start, |o| o.started_at);
        Ok(IncidentId::new(&incident.check, crossing))
    }

    /// The incident `key` names, among its check's streaks of the kept
    /// window; `None` when no incident has that key (a mistyped address,
    /// a blip, or an incident older than the window).
    pub fn find(
        &self,
        cache: &StreakCache,
        key: &str,
        newest: Option<OffsetDateTime>,
        now: OffsetDateTime,
    ) -> Result<Option<Incident>, StoreError> {
        let id = IncidentId::from_key(key);
        let check = id.check();
        if !self.policies.contains_key(check) {
            return Ok(None);
        }
        let streaks = cache.streaks(self.store, check, newest, now)?;
        let (incidents, _) = self.sort(streaks.list.clone())?;
        Ok(incidents
            .into_iter()
            .find(|i| i.key.as_ref().map(IncidentId::as_str) == Some(key)))
    }
}

#[cfg(test)]
mod tests {

    use super::super::streaks::tests::{at, result};
    use super::*;
    use crate::store::MemoryStore;

    fn policy(threshold: u32) -> Policy {
        let alerting = crate::config::AlertingConfig {
            enabled: true,
            to: Vec::new(),
            from: None,
            failure_threshold: threshold,
            recovery_threshold: 1,
            repeat: std::time::Duration::ZERO,
            group_window: std::time::Duration::from_secs(30),
        };
        Policy::global(&alerting)
    }

    #[test]
    fn a_streak_under_the_threshold_is_a_blip_and_one_at_it_an_incident_named_as_the_alerter_names_it(
    ) {
        let store = MemoryStore::new();
        // One failed probe, then three in a row.
        let downs = [false, true, false, false, true, true, true, false];
        for (i, down) in downs.into_iter().enumerate() {
            store.append(&result(i as i64 * 10, down)).unwrap();
        }
        let policies = HashMap::from([("web".to_string(), policy(2))]);
        let records = Records {
            store: &store,
            told: None,
            updates: None,
            policies: &policies,
        };
        let now = at(300);
        let streaks = StreakCache::default()
            .streaks(&store, "web", None, now)
            .unwrap();
        let (incidents, blips) = records.sort(streaks.list.clone()).unwrap();
        assert_eq!(blips.len(), 1, "{blips:?}");
        assert_eq!(blips[0].start, at(10));
        assert_eq!(blips[0].key, None);
        assert_eq!(incidents.len(), 1, "{incidents:?}");
        assert_eq!(incidents[0].downs, 3);
        // The second failed probe of the streak crossed a threshold of 2.
        let key = "web@2026-03-02T00:00:50.000Z";
        assert_eq!(incidents[0].key.as_ref().map(IncidentId::as_str), Some(key));
        let found = records
            .find(&StreakCache::default(), key, None, now)
            .unwrap();
        assert_eq!(found.map(|i| i.start), Some(at(40)));
        let blip_key = IncidentId::new("web", at(10)).to_string();
        let none = records
            .find(&StreakCache::default(), &blip_key, None, now)
            .unwrap();
        assert!(none.is_none(), "a blip has no page");
    }
}
