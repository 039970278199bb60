//! Putting a restore's results into the store ([`Restoring`]): the
//! replica's segments hold every result of a check from a stretch of
//! time, so those later than anything the store holds for the check are
//! gathered and written as full blocks, in one batch per check, instead
//! of one single each through the journal and the packing. What may be in the
//! store already is compared with what it holds and written one at a
//! time, as appends are ([`SledStore::restore_results`]).
//!
//! What it writes is what appending the same results would leave, read
//! back: the same history, `len`, dictionaries, chains, chain uses and
//! timeline; only where the blocks start differs. Like every restored
//! result, none is queued for replication (the queue is off while
//! restoring) or counted in the rollups here: the restore recomputes the
//! days it touched ([`SledStore::finish_restore`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::replication::Restored;
use super::SledStore;
use crate::cert::CertInfo;
use crate::outcome::Outcome;
use crate::store::error::StoreError;
use crate::store::format::codec::{self, Decoded};
use crate::store::format::entries;
use crate::store::format::keys::key_millis;
use crate::store::sled::state::intern;

/// Results gathered before they are written: a segment of the replica
/// (20,000 results) at about 300 bytes each in memory.
const GATHERED: usize = 20_000;

/// Results that may be stored already, compared and written together:
/// they are held as outcomes, chains and all.
const COMPARED: usize = 1000;

/// A restore's results on their way into `store`; see the module docs.
/// [`Restoring::finish`] writes what is still gathered.
pub struct Restoring<'a> {
    store: &'a SledStore,
    /// Per check, the newest result the store held when the check was
    /// first seen, or wrote since (`None`: nothing).
    newest: HashMap<u32, Option<u64>>,
    /// Per check, results later than that, by millis (a key read twice
    /// keeps its later value).
    gathered: BTreeMap<u32, BTreeMap<u64, Decoded>>,
    gathered_count: usize,
    compared: Vec<Outcome>,
    restored: Restored,
    /// Per check, the last chain seen and its encoding.
    chains: HashMap<u32, (Arc<[CertInfo]>, codec::EncodedChain)>,
}

impl SledStore {
    /// A writer for a restore's results (see `sled/restore.rs`).
    pub fn restoring(&self) -> Restoring<'_> {
        Restoring {
            store: self,
            newest: HashMap::new(),
            gathered: BTreeMap::new(),
            gathered_count: 0,
            compared: Vec::new(),
            restored: Restored::default(),
            chains: HashMap::new(),
        }
    }
}

impl Restoring<'_> {
    /// Takes one result read from the replica.
    pub fn put(&mut self, outcome: Outcome) -> Result<(), StoreError> {
        let store = self.store;
        let millis = key_millis(&outcome)?;
        let mut state = store.lock();
        let id = store.id_for(&mut state, &outcome.name)?;
        let newest = match self.newest.get(&id) {
            Some(newest) => *newest,
            None => {
                let newest = store.result_bounds(&state, id)?.map(|(_, newest)| newest);
                self.newest.insert(id, newest);
                newest
            }
        };
        if newest.is_some_and(|newest| millis <= newest) {
            drop(state);
            self.compared.push(outcome);
            if self.compared.len() >= COMPARED {
                self.write_compared()?;
            }
            return Ok(());
        }
        // What `append_with` does before the result is written: the
        // references first, then the timeline. The record goes straight
        // into the block it is gathered for, never through its bytes; the
        // check's chain is encoded (and hashed for its key) when it
        // changes, not for every result.
        let mut fresh = Vec::new();
        let (decoded, chain) = {
            let dict = state.dicts.get(&id);
            let last_chain = &mut self.chains;
            codec::decoded(
                &outcome,
                &mut |text| intern(dict, &mut fresh, text),
                &mut |chain| match last_chain.get(&id) {
                    Some((seen, encoded)) if seen[..] == *chain => encoded.clone(),
                    _ => {
                        let encoded = codec::encode_chain(chain);
                        last_chain.insert(id, (Arc::from(chain), encoded.clone()));
                        encoded
                    }
                },
            )
        };
        store.write_references(&mut state, id, millis, fresh, chain)?;
        if store.keep_rollups {
            store.record_leaf(&mut state, id, &outcome)?;
        }
        drop(state);
        self.gathered.entry(id).or_default().insert(millis, decoded);
        self.restored.added += 1;
        self.gathered_count += 1;
        if self.gathered_count >= GATHERED {
            self.write_gathered()?;
        }
        Ok(())
    }

    /// Writes what is left and tells what was done with every result.
    pub fn finish(mut self) -> Result<Restored, StoreError> {
        self.write_gathered()?;
        self.write_compared()?;
        Ok(self.restored)
    }

    /// Each check's gathered results, after its singles (which they all
    /// follow), as blocks in `results`; then the singles are dropped from
    /// memory (the blocks first, as a pack does). Unlike a pack's, these
    /// singles need not be in the journal on disk yet: a restore is the
    /// store's only writer, and what an unclean stop leaves of it is
    /// restored again.
    fn write_gathered(&mut self) -> Result<(), StoreError> {
        let store = self.store;
        for (id, gathered) in std::mem::take(&mut self.gathered) {
            let Some(&last) = gathered.keys().next_back() else {
                continue;
            };
            let mut state = store.lock();
            let tail = store.tail(&state, id)?;
            let mut results = Vec::with_capacity(tail.singles + gathered.len());
            let mut last_single = None;
            let from = super::history::after(tail.packed_until);
            for (millis, record) in state.singles.records(id, from, u64::MAX) {
                let parsed = entries::parse_entry(millis, record)
                    .map_err(|e| store.corrupt_entry(id, millis, e))?;
                results.extend(parsed);
                last_single = Some(millis);
            }
            let millis: Vec<u64> = gathered.keys().copied().collect();
            results.extend(gathered);
            let tail = store.append_blocks(id, tail, results)?;
            if let Some(last_single) = last_single {
                state
                    .singles
                    .remove_before(id, last_single.saturating_add(1));
            }
            state
                .tails
                .insert(id, super::state::Tail { singles: 0, ..tail });
            if let Some(count) = state.count.as_mut() {
                *count += millis.len() as u64;
            }
            for &at in &millis {
                store
                    .replication
                    .enqueue(&mut state, id, at)
                    .map_err(store.io("queue a result for replication"))?;
            }
            drop(state);
            store.restored_days(id, millis.into_iter());
            self.newest.insert(id, Some(last));
        }
        self.gathered_count = 0;
        Ok(())
    }

    fn write_compared(&mut self) -> Result<(), StoreError> {
        let compared = std::mem::take(&mut self.compared);
        if compared.is_empty() {
            return Ok(());
        }
        let restored = self.store.restore_compared(compared)?;
        self.restored.added += restored.added;
        self.restored.replaced += restored.replaced;
        self.restored.unchanged += restored.unchanged;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::Duration as TimeDuration;

    use super::*;
    use crate::store::as_stored;
    use crate::store::backend::Store;
    use crate::store::contract::{up, T0};
    use crate::store::format::keys::key_millis_of;
    use crate::store::sled::tests::{assert_rollups_recompute, open, singles};

    fn round(n: i64) -> Vec<Outcome> {
        let at = T0 + TimeDuration::seconds(30 * n);
        let mut api = up("api", at + TimeDuration::milliseconds(7));
        api.duration_ms = 40.0 + n as f64 / 3.0;
        vec![up("site", at), api]
    }

    fn counts(store: &SledStore) -> Vec<u64> {
        store
            .results
            .iter()
            .map(|entry| {
                let (key, value) = entry.unwrap();
                codec::span(key_millis_of(&key), &value).unwrap().count
            })
            .collect()
    }

    #[test]
    fn new_results_go_in_as_full_blocks_after_what_the_store_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        // Three singles of each check before the restore.
        for n in 0..3 {
            for outcome in round(n) {
                store.append(&outcome).unwrap();
            }
        }
        // Segments of 40 results (20 rounds), as the replica holds them.
        let all: Vec<Outcome> = (0..300).flat_map(round).collect();
        let mut restored = Restored::default();
        for segment in all[6..].chunks(40) {
            let mut restoring = store.restoring();
            for outcome in segment {
                restoring.put(outcome.clone()).unwrap();
            }
            let done = restoring.finish().unwrap();
            restored.added += done.added;
            restored.unchanged += done.unchanged;
        }
        assert_eq!((restored.added, restored.unchanged), (594, 0));
        assert_eq!(singles(&store), 0);
        // The singles with the first segment, then small blocks merged
        // into full ones as they add up to 120.
        assert_eq!(counts(&store), [120, 120, 3, 20, 20, 17].repeat(2));
        store.finish_restore().unwrap();
        for name in ["site", "api"] {
            let expected: Vec<Outcome> = all
                .iter()
                .filter(|o| o.name == name)
                .map(as_stored)
                .collect();
            assert_eq!(store.history(name, T0).unwrap(), expected);
            assert_rollups_recompute(&store, name);
        }
        assert_eq!(store.len().unwrap(), 600);

        // Again: everything is compared and found, nothing is written.
        let again = store.restore_results(all.clone()).unwrap();
        assert_eq!((again.added, again.unchanged), (0, 600));
        // Appends carry on after the restored blocks.
        for outcome in round(300) {
            store.append(&outcome).unwrap();
        }
        assert_eq!(store.history("site", T0).unwrap().len(), 301);
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.len().unwrap(), 602);
        assert_eq!(
            store.latest("api").unwrap(),
            Some(as_stored(&round(300)[1]))
        );
    }
}
