//! The in-memory backend: the [`Store`] contract without a disk, for tests
//! and for `vigie check` (which probes once and keeps nothing).
//!
//! It keeps outcomes as [`as_stored`] gives them, so what comes back is what
//! the sled backend gives back; it does not encode records, so it checks the
//! contract's semantics, not the on-disk format. Its rollups and timeline
//! follow the same rules as sled's (`rollup.rs`), kept beside each check's
//! results.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use time::OffsetDateTime;

use super::backend::{as_stored, Store};
use super::error::StoreError;
use super::format::keys::{bound_millis, key_millis};
use super::rollup::{bucket_swept, Granularity, Rollup, Sample, ServedLeaf, Timeline};
use crate::outcome::Outcome;

/// Everything kept of one check.
#[derive(Debug, Default)]
struct Check {
    /// Outcomes by key millis.
    results: BTreeMap<u64, Outcome>,
    /// Rollups by granularity, then bucket start millis.
    rollups: BTreeMap<(Granularity, u64), Rollup>,
    /// The timeline by fingerprint.
    leaves: Timeline,
}

/// Checks by name.
#[derive(Debug, Default)]
pub struct MemoryStore {
    checks: Mutex<BTreeMap<String, Check>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn checks(&self) -> MutexGuard<'_, BTreeMap<String, Check>> {
        // A panic while holding the lock cannot leave a map half-updated
        // (every mutation is one insert or retain), so the data is usable.
        self.checks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Store for MemoryStore {
    fn append(&self, outcome: &Outcome) -> Result<(), StoreError> {
        let millis = key_millis(outcome)?;
        let stored = as_stored(outcome);
        let sample = Sample::of(&stored);
        let mut checks = self.checks();
        let check = checks.entry(outcome.name.clone()).or_default();
        check.leaves.observe(&stored);
        let replaced = check.results.insert(millis, stored);
        for granularity in Granularity::ALL {
            let start = granularity.start_of(millis);
            let bucket = check
                .rollups
                .entry((granularity, start))
                .or_insert_with(|| Rollup::empty(granularity, start));
            if let Some(replaced) = &replaced {
                bucket.retract(&Sample::of(replaced));
            }
            bucket.add(&sample);
        }
        Ok(())
    }

    fn history(&self, name: &str, since: OffsetDateTime) -> Result<Vec<Outcome>, StoreError> {
        let checks = self.checks();
        let Some(check) = checks.get(name) else {
            return Ok(Vec::new());
        };
        Ok(check
            .results
            .range(bound_millis(since)..)
            .map(|(_, outcome)| outcome.clone())
            .collect())
    }

    fn history_page(
        &self,
        name: &str,
        since: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Outcome>, StoreError> {
        let checks = self.checks();
        let Some(check) = checks.get(name) else {
            return Ok(Vec::new());
        };
        Ok(check
            .results
            .range(bound_millis(since)..)
            .take(limit)
            .map(|(_, outcome)| outcome.clone())
            .collect())
    }

    fn latest(&self, name: &str) -> Result<Option<Outcome>, StoreError> {
        let checks = self.checks();
        Ok(checks
            .get(name)
            .and_then(|check| check.results.last_key_value())
            .map(|(_, outcome)| outcome.clone()))
    }

    fn latest_all(&self) -> Result<Vec<Outcome>, StoreError> {
        let checks = self.checks();
        Ok(checks
            .values()
            .filter_map(|check| check.results.last_key_value())
            .map(|(_, outcome)| outcome.clone())
            .collect())
    }

    fn sweep(&self, before: OffsetDateTime) -> Result<u64, StoreError> {
        let cutoff = bound_millis(before);
        let mut removed = 0;
        for check in self.checks().values_mut() {
            let kept = check.results.split_off(&cutoff);
            removed += check.results.len() as u64;
            check.results = kept;
        }
        Ok(removed)
    }

    fn rollups(
        &self,
        name: &str,
        granularity: Granularity,
        since: OffsetDateTime,
    ) -> Result<Vec<Rollup>, StoreError> {
        let checks = self.checks();
        let Some(check) = checks.get(name) else {
            return Ok(Vec::new());
        };
        let from = granularity.start_of(bound_millis(since));
        Ok(check
            .rollups
            .range((granularity, from)..=(granularity, u64::MAX))
            .map(|(_, rollup)| rollup.clone())
            .collect())
    }

    fn certificates(&self, name: &str) -> Result<Vec<ServedLeaf>, StoreError> {
        let checks = self.checks();
        Ok(checks
            .get(name)
            .map(|check| check.leaves.sorted())
            .unwrap_or_default())
    }

    fn sweep_rollups(
        &self,
        hours_before: OffsetDateTime,
        days_before: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let (hours, days) = (bound_millis(hours_before), bound_millis(days_before));
        let mut removed = 0;
        for check in self.checks().values_mut() {
            let before = check.rollups.len() + check.leaves.len();
            check.rollups.retain(|&(granularity, start), _| {
                let cutoff = match granularity {
                    Granularity::Hour => hours,
                    Granularity::Day => days,
                };
                !bucket_swept(granularity, start, cutoff)
            });
            check.leaves.retain(|leaf| leaf.last_seen_millis() >= days);
            removed += (before - check.rollups.len() - check.leaves.len()) as u64;
        }
        Ok(removed)
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn len(&self) -> Result<u64, StoreError> {
        Ok(self
            .checks()
            .values()
            .map(|check| check.results.len() as u64)
            .sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::store::contract::contract_tests!((MemoryStore::new(), ()));
}
