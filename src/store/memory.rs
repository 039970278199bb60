//! The in-memory backend: the [`Store`] contract without a disk, for tests
//! and for `vigie check` (which probes once and keeps nothing).
//!
//! It keeps outcomes as [`as_stored`] gives them, so what comes back is what
//! the sled backend gives back; it does not encode records, so it checks the
//! contract's semantics, not the on-disk format.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use time::OffsetDateTime;

use super::{as_stored, bound_millis, key_millis, Store, StoreError};
use crate::outcome::Outcome;

/// Outcomes by check name, then by key millis.
#[derive(Debug, Default)]
pub struct MemoryStore {
    checks: Mutex<BTreeMap<String, BTreeMap<u64, Outcome>>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn checks(&self) -> MutexGuard<'_, BTreeMap<String, BTreeMap<u64, Outcome>>> {
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
        self.checks()
            .entry(outcome.name.clone())
            .or_default()
            .insert(millis, as_stored(outcome));
        Ok(())
    }

    fn history(&self, name: &str, since: OffsetDateTime) -> Result<Vec<Outcome>, StoreError> {
        let checks = self.checks();
        let Some(results) = checks.get(name) else {
            return Ok(Vec::new());
        };
        Ok(results
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
        let Some(results) = checks.get(name) else {
            return Ok(Vec::new());
        };
        Ok(results
            .range(bound_millis(since)..)
            .take(limit)
            .map(|(_, outcome)| outcome.clone())
            .collect())
    }

    fn latest(&self, name: &str) -> Result<Option<Outcome>, StoreError> {
        let checks = self.checks();
        Ok(checks
            .get(name)
            .and_then(|results| results.last_key_value())
            .map(|(_, outcome)| outcome.clone()))
    }

    fn latest_all(&self) -> Result<Vec<Outcome>, StoreError> {
        let checks = self.checks();
        Ok(checks
            .values()
            .filter_map(|results| results.last_key_value())
            .map(|(_, outcome)| outcome.clone())
            .collect())
    }

    fn sweep(&self, before: OffsetDateTime) -> Result<u64, StoreError> {
        let cutoff = bound_millis(before);
        let mut removed = 0;
        for results in self.checks().values_mut() {
            let kept = results.split_off(&cutoff);
            removed += results.len() as u64;
            *results = kept;
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
            .map(|results| results.len() as u64)
            .sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::store::contract::contract_tests!((MemoryStore::new(), ()));
}
