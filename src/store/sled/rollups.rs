//! The rollups and the certificate timeline on disk (trees `rollups` and
//! `leaves`, laid out as `store/mod.rs` describes), kept up to date by
//! `append`, rebuilt from raw results by a restore and, once, by the
//! upgrade from schema 2.
//!
//! Appends. A check's newest hour and day (its *hot* buckets) live in
//! memory and are written every [`WRITE_EVERY`] appends of the check, when
//! a bucket is left for the next, on [`Store::flush`] and when the store
//! is dropped: a rollup key rewritten at every append made sled rewrite
//! its leaf pages over and over (`benches/rollups.rs`: appends 7 times
//! slower, kilobytes of log per append). A result that is not newer than
//! everything its hot bucket counted (late, or replacing one) is written
//! at once, with the older bucket it may fall in. Each stored rollup
//! records the newest result it counts (`through`), so after an unclean
//! stop the next open adds to each check's newest buckets the results
//! stored after that ([`SledStore::repair_rollups`]: a read of the last
//! few minutes of each check). Since every late result is written at
//! once, right after the result itself, an unclean stop can at worst
//! leave one late result out of its rollups. The timeline is held in
//! memory whole (a few leaves per check) and a leaf's entry is written
//! only when it is new or its `first_seen`/`last_seen` moved, i.e. at
//! most once an hour per leaf.
//!
//! Encodings: a rollup is format byte `1` ++ postcard of [`StoredRollup`];
//! a leaf is format byte `1` ++ postcard of [`StoredLeaf`]. Fingerprints
//! are 32 bytes when they are 64 hex digits (always, from `cert.rs`), else
//! their text.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ::sled::{Batch, Db, Tree};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{be_u32, record, SledStore, State};
use crate::outcome::Outcome;
use crate::store::rollup::{self, Granularity, Histogram, LeafCount, Rollup, Sample, ServedLeaf};
use crate::store::{bucket_swept, time_of_millis, StoreError};

const ROLLUP_FORMAT: u8 = 1;
const LEAF_FORMAT: u8 = 1;
/// Leaf key tags: a binary fingerprint, or one kept as text.
const SHA_BYTES: u8 = b'x';
const SHA_TEXT: u8 = b't';

/// The two trees.
pub(super) struct Trees {
    pub rollups: Tree,
    pub leaves: Tree,
}

/// Appends of a check between two writes of its hot buckets.
pub(super) const WRITE_EVERY: u32 = 10;

/// What appends keep in memory (inside the store's [`State`]).
#[derive(Default)]
pub(super) struct Cache {
    /// Each check's newest bucket of each granularity.
    hot: HashMap<(u32, Granularity), Hot>,
    /// Appends of each check since its hot buckets were last written.
    unwritten: HashMap<u32, u32>,
    /// Every check's timeline, by fingerprint.
    pub leaves: HashMap<u32, BTreeMap<String, ServedLeaf>>,
    /// (check, day) a restore put results into, until `finish_restore`.
    restored: BTreeSet<(u32, u64)>,
}

/// A bucket and the newest result (key millis) it counts.
struct Hot {
    rollup: Rollup,
    through: u64,
}

#[derive(Serialize, Deserialize)]
struct StoredRollup {
    /// Key millis of the newest result counted.
    through: u64,
    up: u64,
    warn: u64,
    down: u64,
    max_ms: f64,
    min_days_left: Option<i64>,
    histogram: Vec<(u8, u64)>,
    leaves: Vec<(Sha, u64)>,
}

/// Variant order is format: append only.
#[derive(Serialize, Deserialize)]
enum Sha {
    Bytes([u8; 32]),
    Text(String),
}

#[derive(Serialize, Deserialize)]
struct StoredLeaf {
    subject: String,
    issuer: String,
    /// Unix seconds and nanoseconds.
    not_before: (i64, u32),
    not_after: (i64, u32),
    first_seen: u64,
    last_seen: u64,
}

impl Trees {
    pub fn open(db: &Db) -> Result<Trees, ::sled::Error> {
        Ok(Trees {
            rollups: db.open_tree("rollups")?,
            leaves: db.open_tree("leaves")?,
        })
    }
}

impl SledStore {
    /// Reads every check's timeline (at open).
    pub(super) fn load_leaves(&self, state: &mut State) -> Result<(), StoreError> {
        for entry in self.rollup_trees.leaves.iter() {
            let (key, value) = entry.map_err(self.io("read the certificate timeline"))?;
            let parsed = leaf_key_parts(&key).and_then(|(id, sha)| {
                let leaf = decode_leaf(sha.clone(), &value)?;
                Some((id, sha, leaf))
            });
            let (id, sha, leaf) = parsed
                .ok_or_else(|| self.corrupt("a certificate timeline entry", format!("{key:?}")))?;
            state
                .rollups
                .leaves
                .entry(id)
                .or_default()
                .insert(sha, leaf);
        }
        Ok(())
    }

    /// Adds `outcome` (check `id`, key `millis`) to its hour and day, after
    /// taking out `replaced` (the result it replaced, same key); writes
    /// as the module docs say.
    pub(super) fn record_rollups(
        &self,
        state: &mut State,
        id: u32,
        millis: u64,
        outcome: &Outcome,
        replaced: Option<&Sample>,
    ) -> Result<(), StoreError> {
        let sample = Sample::of(outcome);
        let apply = |rollup: &mut Rollup| {
            if let Some(replaced) = replaced {
                rollup.retract(replaced);
            }
            rollup.add(&sample);
        };
        let mut batch = Batch::default();
        let mut write_now = false;
        let mut writes = 0;
        for granularity in Granularity::ALL {
            let start = granularity.start_of(millis);
            let slot = (id, granularity);
            let hot_start = state
                .rollups
                .hot
                .get(&slot)
                .map(|h| h.rollup.start_millis());
            match (hot_start, state.rollups.hot.get_mut(&slot)) {
                (Some(hot_start), Some(hot)) if hot_start == start => {
                    write_now |= millis <= hot.through;
                    apply(&mut hot.rollup);
                    hot.through = hot.through.max(millis);
                }
                (Some(hot_start), _) if hot_start > start => {
                    // Late, into an older bucket: read, change, write.
                    let (mut rollup, through) = self.stored_rollup(id, granularity, start)?;
                    apply(&mut rollup);
                    batch.insert(
                        &rollup_key(id, granularity, start)[..],
                        encode_rollup(&rollup, through.max(millis)),
                    );
                    writes += 1;
                    write_now = true;
                }
                _ => {
                    // The check's first append since the open, or its
                    // first in a new bucket: the one it leaves is written.
                    if let Some(left) = state.rollups.hot.remove(&slot) {
                        batch.insert(
                            &rollup_key(id, granularity, left.rollup.start_millis())[..],
                            encode_rollup(&left.rollup, left.through),
                        );
                        writes += 1;
                    }
                    let (mut rollup, through) = self.stored_rollup(id, granularity, start)?;
                    write_now |= millis <= through;
                    apply(&mut rollup);
                    let through = through.max(millis);
                    state.rollups.hot.insert(slot, Hot { rollup, through });
                }
            }
        }
        let unwritten = state.rollups.unwritten.entry(id).or_default();
        *unwritten += 1;
        if write_now || *unwritten >= WRITE_EVERY {
            *unwritten = 0;
            writes += self.hot_into(state, id, &mut batch);
        }
        if writes > 0 {
            self.rollup_trees
                .rollups
                .apply_batch(batch)
                .map_err(self.io("update the rollups"))?;
        }
        Ok(())
    }

    /// Loses the hot buckets' unwritten appends, as an unclean stop does.
    #[cfg(test)]
    pub(super) fn forget_hot(&self) {
        let mut state = self.lock();
        state.rollups.hot.clear();
        state.rollups.unwritten.clear();
    }

    /// Puts check `id`'s hot buckets into `batch`; how many.
    fn hot_into(&self, state: &State, id: u32, batch: &mut Batch) -> usize {
        let mut writes = 0;
        for granularity in Granularity::ALL {
            if let Some(hot) = state.rollups.hot.get(&(id, granularity)) {
                batch.insert(
                    &rollup_key(id, granularity, hot.rollup.start_millis())[..],
                    encode_rollup(&hot.rollup, hot.through),
                );
                writes += 1;
            }
        }
        writes
    }

    /// Writes every check's hot buckets that have appends not yet written
    /// (flush, drop, before a restore's recomputation).
    pub(super) fn write_hot(&self, state: &mut State) -> Result<(), StoreError> {
        let dirty: Vec<u32> = state
            .rollups
            .unwritten
            .iter()
            .filter(|(_, unwritten)| **unwritten > 0)
            .map(|(id, _)| *id)
            .collect();
        let mut batch = Batch::default();
        let mut writes = 0;
        for id in dirty {
            writes += self.hot_into(state, id, &mut batch);
            state.rollups.unwritten.insert(id, 0);
        }
        if writes > 0 {
            self.rollup_trees
                .rollups
                .apply_batch(batch)
                .map_err(self.io("write the newest rollups"))?;
        }
        Ok(())
    }

    /// After an unclean stop, the newest buckets on disk may lack the last
    /// appends before it: each check's results newer than what its last
    /// stored rollup of each granularity counts are added to their buckets
    /// (at open; a read of each check's last few minutes).
    pub(super) fn repair_rollups(&self) -> Result<u64, StoreError> {
        let mut checks: Vec<(String, u32)> = self
            .lock()
            .ids
            .iter()
            .map(|(name, id)| (name.clone(), *id))
            .collect();
        checks.sort_unstable_by_key(|(_, id)| *id);
        let mut added = 0;
        for (name, id) in checks {
            // A check without any rollup (new, and stopped before its
            // first write) is caught up over its last day at most: this is
            // no rebuild of a store whose rollups are gone.
            let Some((_, newest)) = self.result_bounds(id)? else {
                continue;
            };
            let floor = newest.saturating_sub(Granularity::Day.millis());
            // Per granularity, the first result its rollups may lack.
            let mut lacking = Vec::with_capacity(2);
            for granularity in Granularity::ALL {
                let through = self.last_through(id, granularity)?;
                lacking.push((granularity, through.map_or(floor, |t| t.saturating_add(1))));
            }
            let from = lacking.iter().map(|(_, from)| *from).min().unwrap_or(floor);
            let missing = self.read_range(id, &name, from, u64::MAX)?;
            let mut buckets: BTreeMap<(Granularity, u64), (Rollup, u64)> = BTreeMap::new();
            for outcome in &missing {
                let Ok(millis) = crate::store::key_millis(outcome) else {
                    continue;
                };
                for &(granularity, first) in &lacking {
                    if millis < first {
                        continue;
                    }
                    let start = granularity.start_of(millis);
                    let bucket = match buckets.entry((granularity, start)) {
                        std::collections::btree_map::Entry::Occupied(slot) => slot.into_mut(),
                        std::collections::btree_map::Entry::Vacant(slot) => {
                            slot.insert(self.stored_rollup(id, granularity, start)?)
                        }
                    };
                    bucket.0.add(&Sample::of(outcome));
                    bucket.1 = bucket.1.max(millis);
                    added += 1;
                }
            }
            if buckets.is_empty() {
                continue;
            }
            let mut batch = Batch::default();
            for ((granularity, start), (rollup, through)) in &buckets {
                batch.insert(
                    &rollup_key(id, *granularity, *start)[..],
                    encode_rollup(rollup, *through),
                );
            }
            self.rollup_trees
                .rollups
                .apply_batch(batch)
                .map_err(self.io("repair the newest rollups"))?;
        }
        Ok(added)
    }

    /// The newest result counted by check `id`'s last `granularity` rollup.
    fn last_through(&self, id: u32, granularity: Granularity) -> Result<Option<u64>, StoreError> {
        let range = rollup_key(id, granularity, 0)..=rollup_key(id, granularity, u64::MAX);
        let Some(last) = self.rollup_trees.rollups.range(range).next_back() else {
            return Ok(None);
        };
        let (key, value) = last.map_err(self.io("read the newest rollups"))?;
        let start = rollup_key_start(&key);
        let (_, through) = decode_rollup(granularity, start, &value)
            .ok_or_else(|| self.corrupt_rollup(id, granularity, start))?;
        Ok(Some(through))
    }

    /// Notes `outcome`'s leaf in check `id`'s timeline, writing its entry
    /// when it is new or moved.
    pub(super) fn record_leaf(
        &self,
        state: &mut State,
        id: u32,
        outcome: &Outcome,
    ) -> Result<(), StoreError> {
        let leaves = state.rollups.leaves.entry(id).or_default();
        if let Some(leaf) = rollup::observe_outcome(leaves, outcome) {
            self.rollup_trees
                .leaves
                .insert(leaf_key(id, &leaf.sha256), encode_leaf(leaf))
                .map_err(self.io("update the certificate timeline"))?;
        }
        Ok(())
    }

    fn read_rollup(
        &self,
        id: u32,
        granularity: Granularity,
        start: u64,
    ) -> Result<Option<Rollup>, StoreError> {
        let Some(bytes) = self
            .rollup_trees
            .rollups
            .get(rollup_key(id, granularity, start))
            .map_err(self.io("read a rollup"))?
        else {
            return Ok(None);
        };
        decode_rollup(granularity, start, &bytes)
            .map(|(rollup, _)| Some(rollup))
            .ok_or_else(|| self.corrupt_rollup(id, granularity, start))
    }

    /// A bucket as stored (or empty), with the newest result it counts.
    fn stored_rollup(
        &self,
        id: u32,
        granularity: Granularity,
        start: u64,
    ) -> Result<(Rollup, u64), StoreError> {
        let stored = self
            .rollup_trees
            .rollups
            .get(rollup_key(id, granularity, start))
            .map_err(self.io("read a rollup"))?;
        match stored {
            None => Ok((Rollup::empty(granularity, start), 0)),
            Some(bytes) => decode_rollup(granularity, start, &bytes)
                .ok_or_else(|| self.corrupt_rollup(id, granularity, start)),
        }
    }

    /// The `granularity` rollups of check `id` from the bucket holding
    /// `since` on; the hot bucket from memory, where it may be ahead of
    /// the disk.
    pub(super) fn read_rollups(
        &self,
        id: u32,
        granularity: Granularity,
        since: u64,
    ) -> Result<Vec<Rollup>, StoreError> {
        let from = granularity.start_of(since);
        let range = rollup_key(id, granularity, from)..=rollup_key(id, granularity, u64::MAX);
        let mut rollups = Vec::new();
        for entry in self.rollup_trees.rollups.range(range) {
            let (key, value) = entry.map_err(self.io("read rollups"))?;
            let start = rollup_key_start(&key);
            let (rollup, _) = decode_rollup(granularity, start, &value)
                .ok_or_else(|| self.corrupt_rollup(id, granularity, start))?;
            rollups.push(rollup);
        }
        let state = self.lock();
        if let Some(hot) = state.rollups.hot.get(&(id, granularity)) {
            let start = hot.rollup.start_millis();
            if start >= from {
                match rollups.binary_search_by_key(&start, Rollup::start_millis) {
                    Ok(at) => rollups[at] = hot.rollup.clone(),
                    Err(at) => rollups.insert(at, hot.rollup.clone()),
                }
            }
        }
        Ok(rollups)
    }

    /// See [`crate::store::Store::sweep_rollups`].
    pub(super) fn sweep_rollup_trees(&self, hours: u64, days: u64) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let mut ids: Vec<u32> = state.ids.values().copied().collect();
        ids.sort_unstable();
        let mut removed = 0;
        let mut batch = Batch::default();
        for &id in &ids {
            for granularity in Granularity::ALL {
                let cutoff = match granularity {
                    Granularity::Hour => hours,
                    Granularity::Day => days,
                };
                // The first start that is kept: buckets ending after the cutoff.
                let kept_from = cutoff
                    .saturating_add(1)
                    .saturating_sub(granularity.millis());
                let range = rollup_key(id, granularity, 0)..rollup_key(id, granularity, kept_from);
                for key in self.rollup_trees.rollups.range(range).keys() {
                    let key = key.map_err(self.io("read rollups to sweep"))?;
                    debug_assert!(bucket_swept(granularity, rollup_key_start(&key), cutoff));
                    batch.remove(key);
                    removed += 1;
                }
            }
        }
        self.rollup_trees
            .rollups
            .apply_batch(batch)
            .map_err(self.io("remove old rollups"))?;
        state.rollups.hot.retain(|_, hot| {
            let bucket = &hot.rollup;
            let cutoff = match bucket.granularity {
                Granularity::Hour => hours,
                Granularity::Day => days,
            };
            !bucket_swept(bucket.granularity, bucket.start_millis(), cutoff)
        });
        let mut batch = Batch::default();
        for (&id, leaves) in state.rollups.leaves.iter_mut() {
            leaves.retain(|sha, leaf| {
                let keep = leaf.last_seen_millis() >= days;
                if !keep {
                    batch.remove(leaf_key(id, sha));
                    removed += 1;
                }
                keep
            });
        }
        self.rollup_trees
            .leaves
            .apply_batch(batch)
            .map_err(self.io("remove old certificate timeline entries"))?;
        Ok(removed)
    }

    /// Notes the days a restore put results into (every result it read,
    /// written or already there); [`SledStore::finish_restore`] recomputes
    /// them.
    pub(super) fn restored_days(&self, id: u32, millis: impl Iterator<Item = u64>) {
        let mut state = self.lock();
        for millis in millis {
            state
                .rollups
                .restored
                .insert((id, Granularity::Day.start_of(millis)));
        }
    }

    /// Recomputes the hour and day rollups of every day a restore put
    /// results into from the raw results the store now holds for that day
    /// ([`Rollup::from_outcomes`]), writing only those that differ, so a
    /// second restore writes nothing. Restored results do not update the
    /// rollups as they are put in: where the store still had rollups of
    /// results it had swept, that would count them twice. Hours of the day
    /// without raw results keep their rollups; a day the store holds only
    /// in part (a replica whose oldest segments expired) is recomputed
    /// from that part.
    pub fn finish_restore(&self) -> Result<u64, StoreError> {
        let restored = {
            let mut state = self.lock();
            self.write_hot(&mut state)?;
            std::mem::take(&mut state.rollups.restored)
        };
        let mut rewritten = 0;
        for (id, day) in restored {
            let name = self.lock_free_name(id);
            // An hour of raw results in memory at a time (a day of a 1 s
            // check is 86,400 of them); the day's rollup takes each hour's
            // results as they are read, as `from_outcomes` would in order.
            let mut built: Vec<(Rollup, u64)> = Vec::new();
            let mut whole_day: Option<(Rollup, u64)> = None;
            let hour = Granularity::Hour.millis();
            for from in (day..day + Granularity::Day.millis()).step_by(hour as usize) {
                let outcomes = self.read_range(id, &name, from, from + hour - 1)?;
                for rollup in Rollup::from_outcomes(Granularity::Hour, &outcomes) {
                    let start = rollup.start_millis();
                    built.push((rollup, through_of(&outcomes, Granularity::Hour, start)));
                }
                for outcome in &outcomes {
                    let Ok(millis) = crate::store::key_millis(outcome) else {
                        continue;
                    };
                    let (rollup, through) = whole_day
                        .get_or_insert_with(|| (Rollup::empty(Granularity::Day, day), day));
                    rollup.add(&Sample::of(outcome));
                    *through = (*through).max(millis);
                }
            }
            built.extend(whole_day);
            let mut batch = Batch::default();
            for (rollup, through) in built {
                let (granularity, start) = (rollup.granularity, rollup.start_millis());
                if self.read_rollup(id, granularity, start)?.as_ref() == Some(&rollup) {
                    continue;
                }
                batch.insert(
                    &rollup_key(id, granularity, start)[..],
                    encode_rollup(&rollup, through),
                );
                rewritten += 1;
            }
            self.rollup_trees
                .rollups
                .apply_batch(batch)
                .map_err(self.io("rebuild the rollups"))?;
            // The next append reads its buckets again.
            let mut state = self.lock();
            for granularity in Granularity::ALL {
                state.rollups.hot.remove(&(id, granularity));
            }
        }
        Ok(rewritten)
    }

    /// Schema 2 had no rollups and no timeline: builds both from every
    /// stored result, a day of one check at a time (the one scan of raw
    /// results this code does, once per store). What an interrupted build
    /// left is cleared first, so the next open starts it again cleanly.
    pub(super) fn build_rollups(&self) -> Result<(), StoreError> {
        self.rollup_trees
            .rollups
            .clear()
            .map_err(self.io("clear the rollups (upgrade)"))?;
        self.rollup_trees
            .leaves
            .clear()
            .map_err(self.io("clear the certificate timeline (upgrade)"))?;
        let mut checks: Vec<(String, u32)> = self
            .lock()
            .ids
            .iter()
            .map(|(name, id)| (name.clone(), *id))
            .collect();
        checks.sort_unstable_by_key(|(_, id)| *id);
        for (name, id) in checks {
            let Some((first, last)) = self.result_bounds(id)? else {
                continue;
            };
            let mut leaves: BTreeMap<String, ServedLeaf> = BTreeMap::new();
            let mut day = Granularity::Day.start_of(first);
            while day <= last {
                let end = day + Granularity::Day.millis() - 1;
                let outcomes = self.read_range(id, &name, day, end)?;
                let mut batch = Batch::default();
                for granularity in Granularity::ALL {
                    for rollup in Rollup::from_outcomes(granularity, &outcomes) {
                        let start = rollup.start_millis();
                        let through = through_of(&outcomes, granularity, start);
                        batch.insert(
                            &rollup_key(id, granularity, start)[..],
                            encode_rollup(&rollup, through),
                        );
                    }
                }
                self.rollup_trees
                    .rollups
                    .apply_batch(batch)
                    .map_err(self.io("build the rollups (upgrade)"))?;
                for outcome in &outcomes {
                    rollup::observe_outcome(&mut leaves, outcome);
                }
                day += Granularity::Day.millis();
            }
            let mut batch = Batch::default();
            for (sha, leaf) in &leaves {
                batch.insert(leaf_key(id, sha), encode_leaf(leaf));
            }
            self.rollup_trees
                .leaves
                .apply_batch(batch)
                .map_err(self.io("build the certificate timeline (upgrade)"))?;
            self.lock().rollups.leaves.insert(id, leaves);
        }
        Ok(())
    }

    /// The key millis of check `id`'s first and last results.
    fn result_bounds(&self, id: u32) -> Result<Option<(u64, u64)>, StoreError> {
        let io = self.io("read a check's results");
        let first_of = |entry: Option<::sled::Result<(::sled::IVec, ::sled::IVec)>>| {
            entry
                .transpose()
                .map(|entry| entry.map(|(key, _)| super::key_millis_of(&key)))
        };
        let low = [
            first_of(self.check_range(id, 0).next()).map_err(&io)?,
            first_of(self.newest_range(id, 0).next()).map_err(&io)?,
        ]
        .into_iter()
        .flatten()
        .min();
        let high = [
            self.packed_until(id)?,
            first_of(self.newest_range(id, 0).next_back()).map_err(&io)?,
        ]
        .into_iter()
        .flatten()
        .max();
        Ok(low.zip(high))
    }

    /// The sample of a result that an append replaced (same key).
    pub(super) fn replaced_sample(
        &self,
        state: &State,
        id: u32,
        name: &str,
        millis: u64,
        replaced: record::Decoded,
    ) -> Result<Sample, StoreError> {
        let mut chain = match replaced.chain_key() {
            Some(key) => self.chain(&key)?,
            None => None,
        };
        let strings = state
            .dicts
            .get(&id)
            .map(|d| d.strings.as_slice())
            .unwrap_or(&[]);
        let outcome = replaced
            .into_outcome(name, time_of_millis(millis), strings, chain.as_mut())
            .map_err(|e| self.corrupt_entry(id, millis, e))?;
        Ok(Sample::of(&outcome))
    }

    fn corrupt_rollup(&self, id: u32, granularity: Granularity, start: u64) -> StoreError {
        let name = self.lock_free_name(id);
        self.corrupt(
            &format!(
                "the {} rollup of {name} at {}",
                match granularity {
                    Granularity::Hour => "hour",
                    Granularity::Day => "day",
                },
                crate::store::rfc3339(&time_of_millis(start))
            ),
            "does not decode",
        )
    }
}

/// check id (u32 BE) ++ granularity (`h` or `d`) ++ bucket start millis
/// (u64 BE).
fn rollup_key(id: u32, granularity: Granularity, start: u64) -> [u8; 13] {
    let mut key = [0; 13];
    key[..4].copy_from_slice(&id.to_be_bytes());
    key[4] = match granularity {
        Granularity::Hour => b'h',
        Granularity::Day => b'd',
    };
    key[5..].copy_from_slice(&start.to_be_bytes());
    key
}

fn rollup_key_start(key: &[u8]) -> u64 {
    key.get(5..)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map_or(0, u64::from_be_bytes)
}

/// check id (u32 BE) ++ `x` ++ 32 fingerprint bytes, or ++ `t` ++ text.
fn leaf_key(id: u32, sha256: &str) -> Vec<u8> {
    let mut key = id.to_be_bytes().to_vec();
    match sha_bytes(sha256) {
        Some(bytes) => {
            key.push(SHA_BYTES);
            key.extend_from_slice(&bytes);
        }
        None => {
            key.push(SHA_TEXT);
            key.extend_from_slice(sha256.as_bytes());
        }
    }
    key
}

fn leaf_key_parts(key: &[u8]) -> Option<(u32, String)> {
    let id = be_u32(key.get(..4)?)?;
    let sha = match (key.get(4)?, key.get(5..)?) {
        (&SHA_BYTES, bytes) if bytes.len() == 32 => hex(bytes),
        (&SHA_TEXT, text) => String::from_utf8(text.to_vec()).ok()?,
        _ => return None,
    };
    Some((id, sha))
}

/// 64 hex digits as 32 bytes (lowercase only: the text must come back the
/// same).
fn sha_bytes(sha256: &str) -> Option<[u8; 32]> {
    let text = sha256.as_bytes();
    if text.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut bytes = [0; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        bytes[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The newest result of `outcomes` in the bucket starting at `start`.
fn through_of(outcomes: &[Outcome], granularity: Granularity, start: u64) -> u64 {
    outcomes
        .iter()
        .filter_map(|outcome| crate::store::key_millis(outcome).ok())
        .filter(|&millis| granularity.start_of(millis) == start)
        .max()
        .unwrap_or(start)
}

fn encode_rollup(rollup: &Rollup, through: u64) -> Vec<u8> {
    let stored = StoredRollup {
        through,
        up: rollup.up,
        warn: rollup.warn,
        down: rollup.down,
        max_ms: rollup.max_ms,
        min_days_left: rollup.min_days_left,
        histogram: rollup.histogram.buckets().to_vec(),
        leaves: rollup
            .leaves
            .iter()
            .map(|leaf| {
                let sha = match sha_bytes(&leaf.sha256) {
                    Some(bytes) => Sha::Bytes(bytes),
                    None => Sha::Text(leaf.sha256.clone()),
                };
                (sha, leaf.results)
            })
            .collect(),
    };
    with_format(ROLLUP_FORMAT, &stored)
}

fn decode_rollup(granularity: Granularity, start: u64, bytes: &[u8]) -> Option<(Rollup, u64)> {
    let (&format, body) = bytes.split_first()?;
    if format != ROLLUP_FORMAT {
        return None;
    }
    let stored: StoredRollup = postcard::from_bytes(body).ok()?;
    let mut leaves: Vec<LeafCount> = stored
        .leaves
        .into_iter()
        .map(|(sha, results)| LeafCount {
            sha256: match sha {
                Sha::Bytes(bytes) => hex(&bytes),
                Sha::Text(text) => text,
            },
            results,
        })
        .collect();
    leaves.sort_by(|a, b| a.sha256.cmp(&b.sha256));
    let rollup = Rollup {
        histogram: Histogram::from_buckets(stored.histogram)?,
        up: stored.up,
        warn: stored.warn,
        down: stored.down,
        max_ms: stored.max_ms,
        min_days_left: stored.min_days_left,
        leaves,
        ..Rollup::empty(granularity, start)
    };
    Some((rollup, stored.through))
}

fn encode_leaf(leaf: &ServedLeaf) -> Vec<u8> {
    let at = |t: OffsetDateTime| (t.unix_timestamp(), t.nanosecond());
    let stored = StoredLeaf {
        subject: leaf.subject.clone(),
        issuer: leaf.issuer.clone(),
        not_before: at(leaf.not_before),
        not_after: at(leaf.not_after),
        first_seen: leaf.first_seen_millis(),
        last_seen: leaf.last_seen_millis(),
    };
    with_format(LEAF_FORMAT, &stored)
}

fn decode_leaf(sha256: String, bytes: &[u8]) -> Option<ServedLeaf> {
    let (&format, body) = bytes.split_first()?;
    if format != LEAF_FORMAT {
        return None;
    }
    let stored: StoredLeaf = postcard::from_bytes(body).ok()?;
    let at = |(secs, nanos): (i64, u32)| {
        OffsetDateTime::from_unix_timestamp_nanos(
            i128::from(secs) * 1_000_000_000 + i128::from(nanos),
        )
        .ok()
    };
    Some(ServedLeaf {
        sha256,
        staging: crate::cert::is_staging(&stored.issuer),
        subject: stored.subject,
        issuer: stored.issuer,
        not_before: at(stored.not_before)?,
        not_after: at(stored.not_after)?,
        first_seen: time_of_millis(stored.first_seen),
        last_seen: time_of_millis(stored.last_seen),
    })
}

fn with_format<T: Serialize>(format: u8, value: &T) -> Vec<u8> {
    postcard::to_extend(value, vec![format]).expect("postcard into a Vec cannot fail")
}
