//! The rollups and the certificate timeline on disk (trees `rollups` and
//! `leaves`, laid out as `format/mod.rs` describes; their encoding is
//! `format/rollups.rs`), kept up to date by
//! `append`, rebuilt from raw results by a restore and, once, by the
//! upgrade from schema 2.
//!
//! Appends. A check's newest hour and day (its *hot* buckets) live in
//! memory and are written every [`WRITE_EVERY`] appends of the check, when
//! a bucket is left for the next, on [`Store::flush`](crate::store::Store::flush) and when the store
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

use std::collections::BTreeMap;

use ::sled::Batch;

use super::state::{Hot, State};
use super::SledStore;
use crate::outcome::Outcome;
use crate::store::error::{rfc3339, StoreError};
use crate::store::format::codec;
use crate::store::format::keys::{key_millis, key_millis_of, time_of_millis};
use crate::store::format::rollups::{
    decode_leaf, decode_rollup, encode_leaf, encode_rollup, leaf_key, leaf_key_parts, rollup_key,
    rollup_key_start,
};
use crate::store::rollup::{bucket_swept, Granularity, Rollup, Sample, Timeline};

/// Appends of a check between two writes of its hot buckets: an hour of a
/// check probed every 30 s, as a full block of results holds. Reads take
/// the hot buckets from memory and the next open after an unclean stop
/// catches them up from the results, so this bounds only that catch-up
/// (a block of each check to read). Every 10 appends, the rollups' leaf
/// pages were two thirds of what sled's file grew by in
/// `benches/store.rs` at 1000 x 720 (170 bytes/result allocated with
/// rollups, 103 without) and most of its memory (85 MiB RSS, 31 without).
pub(super) const WRITE_EVERY: u32 = 120;

impl SledStore {
    /// Reads every check's timeline (at open).
    pub(super) fn load_leaves(&self, state: &mut State) -> Result<(), StoreError> {
        for entry in self.rollup_trees.leaves.iter() {
            let (key, value) = entry.map_err(self.io("read the certificate timeline"))?;
            let parsed = leaf_key_parts(&key).and_then(|(id, sha)| {
                let leaf = decode_leaf(sha.clone(), &value)?;
                Some((id, sha, leaf))
            });
            let (id, _, leaf) = parsed
                .ok_or_else(|| self.corrupt("a certificate timeline entry", format!("{key:?}")))?;
            state.rollups.leaves.entry(id).or_default().insert(leaf);
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
            let bounds = self.result_bounds(&self.lock(), id)?;
            let Some((_, newest)) = bounds else {
                continue;
            };
            let floor = newest.saturating_sub(Granularity::Day.millis());
            // Per granularity, the first result its rollups may lack.
            let mut lacking = Vec::with_capacity(2);
            for granularity in Granularity::ALL {
                added += self.recount_lost(id, &name, granularity, newest)?;
                let through = self.last_through(id, granularity)?;
                lacking.push((granularity, through.map_or(floor, |t| t.saturating_add(1))));
            }
            let from = lacking.iter().map(|(_, from)| *from).min().unwrap_or(floor);
            let missing = self.read_range(id, &name, from, u64::MAX)?;
            let mut buckets: BTreeMap<(Granularity, u64), (Rollup, u64)> = BTreeMap::new();
            for outcome in &missing {
                let Ok(millis) = key_millis(outcome) else {
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

    /// After an unclean stop, sled may have kept rollups that count
    /// results the journal lost (`sled/journal.rs`: sled's own flusher
    /// writes ahead of it): each of check `id`'s last `granularity`
    /// rollups that counts a result newer than `newest`, its newest
    /// result, is counted again from the results it holds (or removed
    /// when it holds none). Returns the results counted again.
    fn recount_lost(
        &self,
        id: u32,
        name: &str,
        granularity: Granularity,
        newest: u64,
    ) -> Result<u64, StoreError> {
        let range = rollup_key(id, granularity, 0)..=rollup_key(id, granularity, u64::MAX);
        let mut counted = 0;
        let mut batch = Batch::default();
        for entry in self.rollup_trees.rollups.range(range).rev() {
            let (key, value) = entry.map_err(self.io("read the newest rollups"))?;
            let start = rollup_key_start(&key);
            let (_, through) = decode_rollup(granularity, start, &value)
                .ok_or_else(|| self.corrupt_rollup(id, granularity, start))?;
            if through <= newest {
                break;
            }
            let outcomes = self.read_range(id, name, start, start + granularity.millis() - 1)?;
            let mut rollup = Rollup::empty(granularity, start);
            for outcome in &outcomes {
                rollup.add(&Sample::of(outcome));
            }
            counted += outcomes.len() as u64;
            match outcomes.is_empty() {
                true => batch.remove(key),
                false => batch.insert(
                    key,
                    encode_rollup(&rollup, through_of(&outcomes, granularity, start)),
                ),
            }
        }
        self.rollup_trees
            .rollups
            .apply_batch(batch)
            .map_err(self.io("repair the newest rollups"))?;
        Ok(counted)
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
        if let Some(leaf) = leaves.observe(outcome) {
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
            for leaf in leaves.retain(|leaf| leaf.last_seen_millis() >= days) {
                batch.remove(leaf_key(id, &leaf.sha256));
                removed += 1;
            }
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
                    let Ok(millis) = key_millis(outcome) else {
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
            let bounds = self.result_bounds(&self.lock(), id)?;
            let Some((first, last)) = bounds else {
                continue;
            };
            let mut leaves = Timeline::default();
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
                    leaves.observe(outcome);
                }
                day += Granularity::Day.millis();
            }
            let mut batch = Batch::default();
            for leaf in leaves.iter() {
                batch.insert(leaf_key(id, &leaf.sha256), encode_leaf(leaf));
            }
            self.rollup_trees
                .leaves
                .apply_batch(batch)
                .map_err(self.io("build the certificate timeline (upgrade)"))?;
            self.lock().rollups.leaves.insert(id, leaves);
        }
        Ok(())
    }

    /// The key millis of check `id`'s first and last results (`state`:
    /// the store's, locked by the caller).
    pub(super) fn result_bounds(
        &self,
        state: &State,
        id: u32,
    ) -> Result<Option<(u64, u64)>, StoreError> {
        let first = self
            .check_range(id, 0)
            .next()
            .transpose()
            .map_err(self.io("read a check's results"))?
            .map(|(key, _)| key_millis_of(&key));
        let singles = state.singles.bounds(id);
        let low = [first, singles.map(|(low, _)| low)]
            .into_iter()
            .flatten()
            .min();
        let high = [self.packed_until(id)?, singles.map(|(_, high)| high)]
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
        replaced: codec::Decoded,
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
                rfc3339(&time_of_millis(start))
            ),
            "does not decode",
        )
    }
}

/// The newest result of `outcomes` in the bucket starting at `start`.
fn through_of(outcomes: &[Outcome], granularity: Granularity, start: u64) -> u64 {
    outcomes
        .iter()
        .filter_map(|outcome| key_millis(outcome).ok())
        .filter(|&millis| granularity.start_of(millis) == start)
        .max()
        .unwrap_or(start)
}

#[cfg(test)]
mod tests {
    use time::{Duration as TimeDuration, OffsetDateTime};

    use super::*;
    use crate::store::contract::up;
    use crate::store::sled::tests::{
        assert_rollups_recompute, minute, minutes, open, open_small_blocks, open_unflushed,
        unclean_copy,
    };
    use crate::store::Store;

    #[test]
    fn rollups_and_the_timeline_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_small_blocks(dir.path());
        for outcome in minutes(0..90) {
            store.append(&outcome).unwrap();
        }
        drop(store);
        let store = open_small_blocks(dir.path());
        assert_rollups_recompute(&store, "site");
        // The first append after the reopen reads its buckets from disk.
        for outcome in minutes(90..150) {
            store.append(&outcome).unwrap();
        }
        assert_rollups_recompute(&store, "site");
    }

    #[test]
    fn rollups_catch_up_at_open_after_an_unclean_stop() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_small_blocks(dir.path());
        for outcome in minutes(0..95) {
            store.append(&outcome).unwrap();
        }
        // A late result is written at once, hot buckets with it.
        store
            .append(&up("site", minute(3) + TimeDuration::seconds(7)))
            .unwrap();
        for outcome in minutes(95..98) {
            store.append(&outcome).unwrap();
        }
        store.append(&up("new", minute(97))).unwrap();
        // What a kill -9 loses: the appends since the hot buckets' last
        // write (the results themselves are flushed).
        store.forget_hot();
        let lost = store
            .rollups("site", Granularity::Hour, OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        assert!(lost.iter().map(Rollup::known).sum::<u64>() < 99);
        assert!(store
            .rollups("new", Granularity::Hour, OffsetDateTime::UNIX_EPOCH)
            .unwrap()
            .is_empty());
        drop(store);
        let store = open_small_blocks(dir.path());
        assert_rollups_recompute(&store, "site");
        assert_rollups_recompute(&store, "new");
    }

    #[test]
    fn rollups_counting_results_an_unclean_stop_lost_are_counted_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        for outcome in minutes(0..3) {
            store.append(&outcome).unwrap();
        }
        store.flush().unwrap();
        // Counted in rollups sled wrote, and then lost with the journal's
        // buffer; the last one starts a new day, which holds nothing then.
        for outcome in minutes(3..5) {
            store.append(&outcome).unwrap();
        }
        store
            .append(&crate::store::contract::up(
                "site",
                minute(0) + TimeDuration::days(1),
            ))
            .unwrap();
        store.write_hot(&mut store.lock()).unwrap();
        let copy = tempfile::tempdir().unwrap();
        unclean_copy(&store, copy.path());
        drop(store);

        let store = open(copy.path());
        let raw = store.history("site", OffsetDateTime::UNIX_EPOCH).unwrap();
        assert_eq!(raw, minutes(0..3));
        // The timeline may keep the lost results' leaf sightings: the
        // probe did see that certificate then.
        let rollups_recompute = |raw: &[Outcome]| {
            for granularity in Granularity::ALL {
                assert_eq!(
                    store
                        .rollups("site", granularity, OffsetDateTime::UNIX_EPOCH)
                        .unwrap(),
                    Rollup::from_outcomes(granularity, raw),
                    "{granularity:?}"
                );
            }
        };
        rollups_recompute(&raw);
        store
            .append(&crate::store::contract::up("site", minute(6)))
            .unwrap();
        let raw = store.history("site", OffsetDateTime::UNIX_EPOCH).unwrap();
        assert_eq!(raw.len(), 4);
        rollups_recompute(&raw);
    }
}
