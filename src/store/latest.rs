//! The newest outcome of each check, in memory beside the history: the
//! recorder writes it after each append, the API, the metrics and the
//! alerter read it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::outcome::Outcome;

/// The latest outcome of each check, kept in memory by the recorder so the
/// API and metrics never read the store on a scrape (10,000 checks scraped
/// every 15 s would otherwise decode 10,000 records each time).
#[derive(Debug, Default, Clone)]
pub struct Latest(Arc<RwLock<BTreeMap<String, Arc<Outcome>>>>);

impl Latest {
    /// Shared, not copied: the alerter keeps the same `Arc` as the last
    /// certificate it saw (10,000 checks' chains are tens of MiB).
    pub fn record(&self, outcome: Arc<Outcome>) {
        let mut map = self.0.write().unwrap_or_else(|p| p.into_inner());
        map.insert(outcome.name.clone(), outcome);
    }

    pub fn get(&self, name: &str) -> Option<Arc<Outcome>> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// Every check's latest outcome, by name.
    pub fn all(&self) -> Vec<Arc<Outcome>> {
        let map = self.0.read().unwrap_or_else(|p| p.into_inner());
        map.values().cloned().collect()
    }

    /// Drops checks that are no longer configured.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut map = self.0.write().unwrap_or_else(|p| p.into_inner());
        map.retain(|name, _| keep(name));
    }
}
