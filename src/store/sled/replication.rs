//! What the replicator (`replicate/`) calls on the sled store: turn
//! replication on, hand out the next batch and read it, confirm what was
//! shipped, continue after a restore, and put restored results back. The
//! queue's books, and why replication is a queue rather than a cursor over
//! `results`, are `sled/queue.rs`.
//!
//! # Crash between upload and cursor update
//!
//! Before a batch is handed out, its range is recorded in `meta`
//! (`replication_pending`: after, last, formed at) and flushed. A process
//! that dies after uploading but before [`SledStore::shipped`] finds the
//! range again at the next start and hands out exactly the same entries
//! with the same formation time, so the upload is repeated under the same
//! name with the same content. The queue entry is written after the result
//! it names, so sled's prefix recovery (see `sled/mod.rs`) never
//! leaves an entry without its result.
//!
//! # What it does not do
//!
//! It never decides *when* to ship (the replicator's interval does), and it
//! does not compress or name segments. Results that disappear before they
//! are shipped (only possible while replication is disabled, since the
//! sweep is bounded by the oldest queued result) are counted as `gone`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use ::sled::Batch;
use time::OffsetDateTime;

use super::queue::{pending_bytes, Pending};
use super::state::State;
use super::SledStore;
use crate::outcome::Outcome;
use crate::store::backend::{as_stored, Store};
use crate::store::error::StoreError;
use crate::store::format::entries;
use crate::store::format::keys::{
    be_u32, be_u64, bound_millis, key_millis, key_millis_of, refused_key, result_key, seq_key,
    time_of_millis, CURSOR_KEY, PENDING_KEY,
};

/// Queue entries written per sled batch when seeding or renumbering.
const WRITE_CHUNK: usize = 10_000;

/// Shipped queue entries removed per sled batch.
const REMOVE_CHUNK: usize = 1_000;

/// Results to copy off-region, in the order they were appended.
#[derive(Debug, Clone)]
pub struct Shipment {
    /// The last seq shipped before this batch (0: none): the previous
    /// segment ends there, so a reader can tell whether one is missing.
    pub after: u64,
    /// First and last seq of the batch (inclusive).
    pub first: u64,
    pub last: u64,
    /// When the batch was first formed; the same on a retry after a crash.
    pub formed_at: OffsetDateTime,
    /// The results, in the order the store reads them (by check id, then
    /// time; see [`SledStore::read_shipment`]); a result queued twice (same
    /// check, same millisecond) appears once, under its last seq, with its
    /// current value.
    pub results: Vec<Shipped>,
    /// Queue entries whose result no longer exists.
    pub gone: u64,
}

/// A batch handed out by [`SledStore::next_shipment_range`], to be read
/// with [`SledStore::read_shipment`]: a [`Shipment`] without its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShipmentRange {
    pub after: u64,
    pub first: u64,
    pub last: u64,
    pub formed_at: OffsetDateTime,
}

/// What [`SledStore::read_shipment`] handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShipmentRead {
    /// Results handed to the caller.
    pub results: u64,
    /// Queue entries whose result no longer exists (or was handed under a
    /// later seq of the same batch).
    pub gone: u64,
}

/// One result of a [`Shipment`].
#[derive(Debug, Clone)]
pub struct Shipped {
    pub seq: u64,
    /// The `results` key: check id (u32 BE) ++ started_at millis (u64 BE).
    pub key: [u8; 12],
    pub outcome: Outcome,
}

/// How far replication is behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backlog {
    /// Results appended and not shipped yet.
    pub results: u64,
    /// started_at of the oldest of them (by append order).
    pub oldest: Option<OffsetDateTime>,
    /// The last seq shipped (0: nothing ever shipped from this store).
    pub cursor: u64,
    /// A batch was handed out and not confirmed: it is retried first.
    pub pending: bool,
}

/// What [`SledStore::restore_results`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Restored {
    /// Keys the store did not have.
    pub added: u64,
    /// Keys it had with another value (now the restored one).
    pub replaced: u64,
    /// Keys it had with exactly this value: nothing written.
    pub unchanged: u64,
}

impl SledStore {
    /// Turns replication on for this process: from now on every append is
    /// queued. The first time ever on this store (no cursor in `meta`),
    /// every result already stored is queued too, oldest check id first, so
    /// the first shipments carry the whole existing history; returns how
    /// many were queued that way.
    pub fn enable_replication(&self) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let queue = &self.replication;
        let started = queue
            .started()
            .map_err(self.io("read the replication cursor"))?;
        let mut seeded = 0;
        if !started {
            seeded = self.seed_queue(&mut state)?;
            queue
                .meta
                .insert(CURSOR_KEY, &0u64.to_be_bytes()[..])
                .map_err(self.io("start the replication cursor"))?;
        }
        queue.enabled.store(true, Ordering::Release);
        Ok(seeded)
    }

    /// Queues every stored result (under the lock: no append interleaves).
    fn seed_queue(&self, locked: &mut State) -> Result<u64, StoreError> {
        let queue = &self.replication;
        let mut batch = Batch::default();
        let mut in_batch = 0;
        let mut seeded = 0;
        let mut queue_one = |id: u32, millis: u64| -> Result<(), StoreError> {
            let seq = queue.next_seq.fetch_add(1, Ordering::AcqRel);
            batch.insert(&seq_key(seq)[..], &result_key(id, millis)[..]);
            in_batch += 1;
            seeded += 1;
            if in_batch == WRITE_CHUNK {
                queue
                    .tree
                    .apply_batch(std::mem::take(&mut batch))
                    .map_err(self.io("queue stored results for replication"))?;
                in_batch = 0;
            }
            Ok(())
        };
        for entry in self.results.iter() {
            let (key, value) = entry.map_err(self.io("read results to queue for replication"))?;
            let key_ms = key_millis_of(&key);
            let id = be_u32(&key[..4.min(key.len())]).unwrap_or_default();
            let results = entries::parse_entry(key_ms, &value)
                .map_err(|e| self.corrupt_entry(id, key_ms, e))?;
            for (millis, _) in results {
                queue_one(id, millis)?;
            }
        }
        // Then the singles, which follow every check's blocks.
        for (id, millis) in locked.singles.keys() {
            queue_one(id, millis)?;
        }
        queue
            .tree
            .apply_batch(batch)
            .map_err(self.io("queue stored results for replication"))?;
        queue.backlog.fetch_add(seeded, Ordering::AcqRel);
        Ok(seeded)
    }

    /// Whether appends are being queued in this process.
    pub fn replication_enabled(&self) -> bool {
        self.replication.enabled.load(Ordering::Acquire)
    }

    /// How far replication is behind. Cheap: a counter and one key read.
    pub fn replication_backlog(&self) -> Result<Backlog, StoreError> {
        let queue = &self.replication;
        let cursor = queue.cursor.load(Ordering::Acquire);
        let oldest = queue
            .tree
            .range(seq_key(cursor.saturating_add(1))..)
            .values()
            .next()
            .transpose()
            .map_err(self.io("read the replication queue"))?
            .map(|key| time_of_millis(key_millis_of(&key)));
        let pending = queue
            .meta
            .contains_key(PENDING_KEY)
            .map_err(self.io("read the replication batch in flight"))?;
        Ok(Backlog {
            results: queue.backlog.load(Ordering::Acquire),
            oldest,
            cursor,
            pending,
        })
    }

    /// The next batch to ship: the batch in flight if the last one was not
    /// confirmed (same entries, same formation time), else up to `max`
    /// entries after the cursor, recorded as in flight and flushed before
    /// it is returned. `None` when nothing waits.
    pub fn next_shipment(
        &self,
        max: usize,
        now: OffsetDateTime,
    ) -> Result<Option<Shipment>, StoreError> {
        let Some(range) = self.next_shipment_range(max, now)? else {
            return Ok(None);
        };
        let mut results = Vec::new();
        let read = self.read_shipment(&range, &mut |shipped| results.push(shipped))?;
        Ok(Some(Shipment {
            after: range.after,
            first: range.first,
            last: range.last,
            formed_at: range.formed_at,
            results,
            gone: read.gone,
        }))
    }

    /// [`Self::next_shipment`] without reading the results: the range, to
    /// be read with [`Self::read_shipment`] (as often as needed).
    pub fn next_shipment_range(
        &self,
        max: usize,
        now: OffsetDateTime,
    ) -> Result<Option<ShipmentRange>, StoreError> {
        let queue = &self.replication;
        let pending = queue
            .pending()
            .map_err(self.io("read the replication batch in flight"))?;
        let pending = match pending {
            Some(pending) => pending,
            None => {
                let cursor = queue.cursor.load(Ordering::Acquire);
                // Every seq below this bound has been written: appends
                // allocate and write under the lock taken here.
                let bound = {
                    let _state = self.lock();
                    queue.next_seq.load(Ordering::Acquire)
                };
                let range = seq_key(cursor.saturating_add(1))..seq_key(bound);
                let entries = self.queue_entries(queue.tree.range(range), max.max(1))?;
                let Some(&(last, _)) = entries.last() else {
                    return Ok(None);
                };
                let pending = Pending {
                    after: cursor,
                    last,
                    formed_ms: bound_millis(now),
                };
                queue
                    .meta
                    .insert(PENDING_KEY, &pending_bytes(&pending)[..])
                    .map_err(self.io("record the replication batch in flight"))?;
                // Durable before anything leaves the machine: what is
                // uploaded is on disk here, and a retry finds the same batch.
                self.flush()?;
                pending
            }
        };
        let range = seq_key(pending.after.saturating_add(1))..=seq_key(pending.last);
        let first = self.queue_entries(queue.tree.range(range), 1)?;
        Ok(Some(ShipmentRange {
            after: pending.after,
            first: first.first().map_or(pending.last, |&(seq, _)| seq),
            last: pending.last,
            formed_at: time_of_millis(pending.formed_ms),
        }))
    }

    /// Hands each result of `range` to `each` as soon as it is read (one
    /// check at a time, by check id then time, not in seq order), so that a
    /// caller encoding them at once never holds a batch of decoded
    /// outcomes. The same range gives the same results in the same order.
    pub fn read_shipment(
        &self,
        range: &ShipmentRange,
        each: &mut dyn FnMut(Shipped),
    ) -> Result<ShipmentRead, StoreError> {
        let queue = &self.replication;
        let keys = seq_key(range.after.saturating_add(1))..=seq_key(range.last);
        let entries = self.queue_entries(queue.tree.range(keys), usize::MAX)?;
        let (results, gone) = self.resolve(&entries, each)?;
        Ok(ShipmentRead { results, gone })
    }

    /// (seq, results key) of up to `max` queue entries.
    fn queue_entries(
        &self,
        range: ::sled::Iter,
        max: usize,
    ) -> Result<Vec<(u64, [u8; 12])>, StoreError> {
        let mut entries = Vec::new();
        for entry in range.take(max) {
            let (key, value) = entry.map_err(self.io("read the replication queue"))?;
            let seq = be_u64(&key)
                .ok_or_else(|| self.corrupt("a replication queue key", format!("{key:?}")))?;
            let target = <[u8; 12]>::try_from(value.as_ref()).map_err(|_| {
                self.corrupt("a replication queue entry", format!("seq {seq}: {value:?}"))
            })?;
            entries.push((seq, target));
        }
        Ok(entries)
    }

    /// Reads the results the entries name, one range read per check, and
    /// hands them to `each`; returns (handed, gone).
    fn resolve(
        &self,
        entries: &[(u64, [u8; 12])],
        each: &mut dyn FnMut(Shipped),
    ) -> Result<(u64, u64), StoreError> {
        // A key queued twice is shipped once, under its last seq.
        let mut last_seq: BTreeMap<[u8; 12], u64> = BTreeMap::new();
        for &(seq, key) in entries {
            last_seq.insert(key, seq);
        }
        let mut per_check: BTreeMap<u32, Vec<(u64, u64, [u8; 12])>> = BTreeMap::new();
        for (&key, &seq) in &last_seq {
            let id = be_u32(&key[..4]).unwrap_or_default();
            per_check
                .entry(id)
                .or_default()
                .push((key_millis_of(&key), seq, key));
        }
        let names: HashMap<u32, String> = self
            .lock()
            .ids
            .iter()
            .map(|(name, &id)| (id, name.clone()))
            .collect();
        let mut handed = 0;
        let mut gone = (entries.len() - last_seq.len()) as u64;
        for (id, wanted) in per_check {
            let Some(name) = names.get(&id) else {
                gone += wanted.len() as u64;
                continue;
            };
            // `wanted` is in key order, so by time.
            let from = wanted.first().map_or(0, |w| w.0);
            let to = wanted.last().map_or(0, |w| w.0);
            let mut found: HashMap<u64, Outcome> = self
                .read_range(id, name, from, to)?
                .into_iter()
                .filter_map(|o| Some((key_millis(&o).ok()?, o)))
                .collect();
            for (millis, seq, key) in wanted {
                match found.remove(&millis) {
                    Some(outcome) => {
                        each(Shipped { seq, key, outcome });
                        handed += 1;
                    }
                    None => gone += 1,
                }
            }
        }
        Ok((handed, gone))
    }

    /// Outcomes of check `id` with `from <= started_at millis <= to`.
    pub(super) fn read_range(
        &self,
        id: u32,
        name: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<Outcome>, StoreError> {
        let entries = self.entries(id, from, to)?;
        let mut outcomes = self.decode(id, name, entries, from)?;
        outcomes.retain(|o| key_millis(o).is_ok_and(|millis| millis <= to));
        Ok(outcomes)
    }

    /// Confirms that `shipment` is stored off-region: the cursor moves to
    /// its last seq (one atomic write with clearing the batch in flight),
    /// then its queue entries are removed.
    pub fn shipped(&self, shipment: &Shipment) -> Result<(), StoreError> {
        self.shipped_through(shipment.last)
    }

    /// [`Self::shipped`] by the batch's last seq.
    pub fn shipped_through(&self, last: u64) -> Result<(), StoreError> {
        let queue = &self.replication;
        let mut meta = Batch::default();
        meta.insert(CURSOR_KEY, &last.to_be_bytes()[..]);
        meta.remove(PENDING_KEY);
        queue
            .meta
            .apply_batch(meta)
            .map_err(self.io("advance the replication cursor"))?;
        let before = queue.cursor.swap(last, Ordering::AcqRel);
        self.drop_queue_through(last, before)
    }

    /// Removes the queue entries at or below `last`; those above `before`
    /// were counted in the backlog.
    fn drop_queue_through(&self, last: u64, before: u64) -> Result<(), StoreError> {
        let queue = &self.replication;
        let mut counted = 0;
        // In chunks: entries at or below the cursor are ignored everywhere,
        // so removing them need not be atomic, and a batch of 20,000
        // removals costs sled far more memory than twenty of 1,000.
        loop {
            let mut batch = Batch::default();
            let mut in_batch = 0;
            for key in queue.tree.range(..=seq_key(last)).keys().take(REMOVE_CHUNK) {
                let key = key.map_err(self.io("read the replication queue"))?;
                if be_u64(&key).is_some_and(|seq| seq > before) {
                    counted += 1;
                }
                batch.remove(key);
                in_batch += 1;
            }
            if in_batch == 0 {
                break;
            }
            queue
                .tree
                .apply_batch(batch)
                .map_err(self.io("remove shipped entries from the replication queue"))?;
        }
        let _ = queue
            .backlog
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(counted))
            });
        Ok(())
    }

    /// The last seq shipped (0: none, or replication never enabled).
    pub fn replication_cursor(&self) -> u64 {
        self.replication.cursor.load(Ordering::Acquire)
    }

    /// After a restore from a replica whose segments end at seq `last`:
    /// the cursor moves there, so this store's next segment follows the
    /// restored ones (same node, no name reused). Results this store had
    /// queued and not shipped keep their place in line, renumbered after
    /// `last`. Never moves the cursor back.
    pub fn continue_replication_after(&self, last: u64) -> Result<(), StoreError> {
        let mut state = self.lock();
        let queue = &self.replication;
        let cursor = queue.cursor.load(Ordering::Acquire);
        if last <= cursor
            && queue
                .started()
                .map_err(self.io("read the replication cursor"))?
        {
            return Ok(());
        }
        // A batch formed from the old numbering is abandoned: its entries
        // are renumbered below and shipped again under new names.
        let waiting = self.queue_entries(
            queue.tree.range(seq_key(cursor.saturating_add(1))..),
            usize::MAX,
        )?;
        let mut meta = Batch::default();
        meta.insert(CURSOR_KEY, &last.max(cursor).to_be_bytes()[..]);
        meta.remove(PENDING_KEY);
        queue
            .meta
            .apply_batch(meta)
            .map_err(self.io("move the replication cursor"))?;
        queue.cursor.store(last.max(cursor), Ordering::Release);
        queue
            .next_seq
            .fetch_max(last.saturating_add(1), Ordering::AcqRel);
        self.renumber(&mut state, &waiting)?;
        Ok(())
    }

    /// Moves `entries` to fresh seqs at the end of the queue, in order.
    fn renumber(&self, _locked: &mut State, entries: &[(u64, [u8; 12])]) -> Result<(), StoreError> {
        let queue = &self.replication;
        for chunk in entries.chunks(WRITE_CHUNK) {
            let mut batch = Batch::default();
            for &(old, key) in chunk {
                let seq = queue.next_seq.fetch_add(1, Ordering::AcqRel);
                // Insert before removing: a crash between leaves a result
                // queued twice (shipped twice, de-duplicated on restore),
                // never not at all. One batch makes it moot anyway.
                batch.insert(&seq_key(seq)[..], &key[..]);
                batch.remove(&seq_key(old)[..]);
            }
            queue
                .tree
                .apply_batch(batch)
                .map_err(self.io("renumber the replication queue"))?;
        }
        Ok(())
    }

    /// The oldest result the sweep must keep for replication (millis), if
    /// replication is enabled and anything waits. Walks the waiting
    /// entries: a few thousand normally, once an hour.
    pub(super) fn replication_sweep_bound(&self) -> Result<Option<u64>, StoreError> {
        let queue = &self.replication;
        if !queue.enabled.load(Ordering::Acquire) {
            return Ok(None);
        }
        let cursor = queue.cursor.load(Ordering::Acquire);
        let mut oldest: Option<u64> = None;
        for value in queue
            .tree
            .range(seq_key(cursor.saturating_add(1))..)
            .values()
        {
            let value = value.map_err(self.io("read the replication queue"))?;
            let millis = key_millis_of(&value);
            oldest = Some(oldest.map_or(millis, |o| o.min(millis)));
        }
        Ok(oldest)
    }

    /// Puts results read back from a replica into the store, without
    /// queuing them for replication (this is never called by the daemon,
    /// whose appends alone are queued). A result whose key (check, started
    /// at millisecond) holds exactly this value already is not written
    /// again, so restoring twice writes nothing the second time. The
    /// rollups of the days these results fall in are recomputed by
    /// [`SledStore::finish_restore`], which the restore calls once every
    /// segment is in; the certificate timeline takes them in as appends do
    /// (first seen moves back, last seen on).
    pub fn restore_results(&self, outcomes: Vec<Outcome>) -> Result<Restored, StoreError> {
        let mut restoring = self.restoring();
        for outcome in outcomes {
            restoring.put(outcome)?;
        }
        restoring.finish()
    }

    /// [`SledStore::restore_results`] for results that may be stored
    /// already ([`Restoring`](super::Restoring) gathers the others): each
    /// is compared with what the store holds under its key and appended
    /// unless it is the same.
    pub(super) fn restore_compared(&self, outcomes: Vec<Outcome>) -> Result<Restored, StoreError> {
        let mut by_check: BTreeMap<String, Vec<Outcome>> = BTreeMap::new();
        for outcome in outcomes {
            by_check
                .entry(outcome.name.clone())
                .or_default()
                .push(outcome);
        }
        let mut restored = Restored::default();
        for (name, mut outcomes) in by_check {
            // In time order, results land after the check's last block
            // (cheap) rather than being merged into it.
            outcomes.sort_by_key(|o| o.started_at);
            let id = self.lock().ids.get(&name).copied();
            let mut existing: HashMap<u64, Outcome> = HashMap::new();
            if let (Some(id), Some(first), Some(last)) = (id, outcomes.first(), outcomes.last()) {
                let (from, to) = (key_millis(first)?, key_millis(last)?);
                for outcome in self.read_range(id, &name, from, to)? {
                    existing.insert(key_millis(&outcome)?, outcome);
                }
            }
            let mut read = Vec::with_capacity(outcomes.len());
            for outcome in outcomes {
                let millis = key_millis(&outcome)?;
                read.push(millis);
                match existing.get(&millis) {
                    Some(stored) if *stored == as_stored(&outcome) => {
                        restored.unchanged += 1;
                        continue;
                    }
                    Some(_) => restored.replaced += 1,
                    None => restored.added += 1,
                }
                self.append_with(&outcome, false)?;
            }
            // Bound first: the lock must be let go before `restored_days`.
            let id = self.lock().ids.get(&name).copied();
            if let Some(id) = id {
                self.restored_days(id, read.into_iter());
            }
        }
        Ok(restored)
    }
}

/// A segment an earlier restore could not use, as it was then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedSegment {
    pub etag: String,
    pub reason: String,
}

impl SledStore {
    /// What an earlier restore remembered of segment `name`, if it refused
    /// it: a restore asks for it only if its ETag changed since.
    pub fn refused_segment(&self, name: &str) -> Result<Option<RefusedSegment>, StoreError> {
        let value = self
            .replication
            .meta
            .get(refused_key(name))
            .map_err(self.io("read a refused segment's ETag"))?;
        // ETags cannot hold a newline (they are header values).
        Ok(value.and_then(|v| {
            let text = String::from_utf8_lossy(&v);
            let (etag, reason) = text.split_once('\n')?;
            Some(RefusedSegment {
                etag: etag.to_string(),
                reason: reason.to_string(),
            })
        }))
    }

    /// Remembers that segment `name` at `refused.etag` is unusable.
    pub fn remember_refused_segment(
        &self,
        name: &str,
        refused: &RefusedSegment,
    ) -> Result<(), StoreError> {
        let value = format!("{}\n{}", refused.etag, refused.reason);
        self.replication
            .meta
            .insert(refused_key(name), value.as_bytes())
            .map_err(self.io("remember a refused segment's ETag"))?;
        Ok(())
    }

    /// Forgets segment `name` once a restore could use it.
    pub fn forget_refused_segment(&self, name: &str) -> Result<(), StoreError> {
        self.replication
            .meta
            .remove(refused_key(name))
            .map_err(self.io("forget a refused segment's ETag"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::Duration as TimeDuration;

    use super::*;
    use crate::store::contract::{up, T0};
    use crate::store::sled::tests::{open, open_unflushed, unclean_copy};

    fn minute(n: i64) -> OffsetDateTime {
        T0 + TimeDuration::minutes(n)
    }

    fn names_and_times(shipment: &Shipment) -> Vec<(String, OffsetDateTime)> {
        shipment
            .results
            .iter()
            .map(|s| (s.outcome.name.clone(), s.outcome.started_at))
            .collect()
    }

    #[test]
    fn a_queued_result_an_unclean_stop_lost_is_counted_gone() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unflushed(dir.path());
        store.enable_replication().unwrap();
        for n in 0..3 {
            store.append(&up("a", minute(n))).unwrap();
        }
        store.flush().unwrap();
        // Queued in sled, and then lost with the journal's buffer.
        for n in 3..5 {
            store.append(&up("a", minute(n))).unwrap();
        }
        let copy = tempfile::tempdir().unwrap();
        unclean_copy(&store, copy.path());
        drop(store);

        let store = open(copy.path());
        assert_eq!(store.history("a", T0).unwrap().len(), 3);
        assert_eq!(store.replication_backlog().unwrap().results, 5);
        let shipment = store.next_shipment(10, minute(9)).unwrap().unwrap();
        assert_eq!(
            names_and_times(&shipment),
            (0..3).map(|n| ("a".into(), minute(n))).collect::<Vec<_>>()
        );
        assert_eq!(shipment.gone, 2);
        store.shipped(&shipment).unwrap();
        assert_eq!(store.replication_backlog().unwrap().results, 0);
    }

    #[test]
    fn appends_are_queued_only_while_enabled_and_in_append_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.append(&up("b", minute(0))).unwrap();
        assert_eq!(store.replication_backlog().unwrap().results, 0);
        assert_eq!(
            store.enable_replication().unwrap(),
            1,
            "existing history is seeded"
        );
        store.append(&up("b", minute(2))).unwrap();
        store.append(&up("a", minute(1))).unwrap();
        let backlog = store.replication_backlog().unwrap();
        assert_eq!(backlog.results, 3);
        assert_eq!(backlog.oldest, Some(minute(0)));
        let shipment = store.next_shipment(10, minute(3)).unwrap().unwrap();
        assert_eq!((shipment.after, shipment.first, shipment.last), (0, 1, 3));
        assert_eq!(
            names_and_times(&shipment),
            [
                ("b".into(), minute(0)),
                ("b".into(), minute(2)),
                ("a".into(), minute(1))
            ]
        );
        assert_eq!(shipment.results[2].outcome, up("a", minute(1)));
        store.shipped(&shipment).unwrap();
        assert_eq!(
            store.replication_backlog().unwrap(),
            Backlog {
                cursor: 3,
                ..Backlog::default()
            }
        );
        assert!(store.next_shipment(10, minute(3)).unwrap().is_none());
    }

    #[test]
    fn an_unconfirmed_batch_comes_back_identical_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.enable_replication().unwrap();
        for n in 0..5 {
            store.append(&up("site", minute(n))).unwrap();
        }
        let first = store.next_shipment(3, minute(5)).unwrap().unwrap();
        assert_eq!((first.after, first.first, first.last), (0, 1, 3));
        drop(store);

        let store = open(dir.path());
        store.enable_replication().unwrap();
        store.append(&up("site", minute(6))).unwrap();
        let again = store.next_shipment(100, minute(9)).unwrap().unwrap();
        assert_eq!((again.after, again.first, again.last), (0, 1, 3));
        assert_eq!(again.formed_at, minute(5));
        assert_eq!(names_and_times(&again), names_and_times(&first));
        assert!(store.replication_backlog().unwrap().pending);
        store.shipped(&again).unwrap();
        let next = store.next_shipment(100, minute(9)).unwrap().unwrap();
        assert_eq!((next.after, next.first, next.last), (3, 4, 6));
        assert_eq!(next.results.len(), 3);
    }

    #[test]
    fn the_sweep_keeps_results_not_yet_shipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.enable_replication().unwrap();
        for n in 0..10 {
            store.append(&up("site", minute(n))).unwrap();
        }
        let shipment = store.next_shipment(4, minute(10)).unwrap().unwrap();
        store.shipped(&shipment).unwrap();
        assert_eq!(
            store.sweep(minute(8)).unwrap(),
            4,
            "only the four shipped go"
        );
        assert_eq!(store.history("site", T0).unwrap().len(), 6);
        let rest = store.next_shipment(100, minute(10)).unwrap().unwrap();
        assert_eq!(rest.results.len(), 6);
        assert_eq!(rest.gone, 0);
        store.shipped(&rest).unwrap();
        assert_eq!(store.sweep(minute(8)).unwrap(), 4);
    }

    #[test]
    fn a_key_queued_twice_is_shipped_once_with_its_last_value() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.enable_replication().unwrap();
        store.append(&up("site", minute(0))).unwrap();
        let mut replaced = up("site", minute(0));
        replaced.status = crate::outcome::Status::Warn;
        store.append(&replaced).unwrap();
        let shipment = store.next_shipment(10, minute(1)).unwrap().unwrap();
        assert_eq!(shipment.results.len(), 1);
        assert_eq!(shipment.results[0].seq, 2);
        assert_eq!(shipment.results[0].outcome, replaced);
        assert_eq!(shipment.gone, 1);
    }

    /// Two days of two checks, every 10 minutes, "site" renewing its
    /// certificate halfway and failing now and then.
    fn two_days() -> Vec<Outcome> {
        use crate::outcome::Status;
        use crate::store::contract::varied;
        (0..288)
            .flat_map(|n| {
                let at = minute(10 * n);
                let domain = if n < 150 {
                    "old.example"
                } else {
                    "new.example"
                };
                let status = if n % 17 == 0 {
                    Status::Down
                } else {
                    Status::Up
                };
                [
                    varied("site", at, status, 20.0 + (n % 13) as f64 * 7.0, domain),
                    varied("api", at, Status::Up, 5.0 + (n % 5) as f64, "api.example"),
                ]
            })
            .collect()
    }

    fn rollups_of(store: &SledStore, name: &str) -> Vec<Vec<crate::store::Rollup>> {
        crate::store::Granularity::ALL
            .into_iter()
            .map(|g| store.rollups(name, g, OffsetDateTime::UNIX_EPOCH).unwrap())
            .collect()
    }

    #[test]
    fn a_restore_into_a_fresh_store_rebuilds_the_rollups_and_the_timeline() {
        let (original_dir, fresh_dir) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let original = open(original_dir.path());
        for outcome in two_days() {
            original.append(&outcome).unwrap();
        }
        let fresh = open(fresh_dir.path());
        // What a replica hands back: every result, in segments.
        let replica: Vec<Outcome> = ["site", "api"]
            .into_iter()
            .flat_map(|name| original.history(name, OffsetDateTime::UNIX_EPOCH).unwrap())
            .collect();
        for segment in replica.chunks(100) {
            fresh.restore_results(segment.to_vec()).unwrap();
        }
        assert!(fresh.finish_restore().unwrap() > 0);
        for name in ["site", "api"] {
            assert_eq!(
                rollups_of(&fresh, name),
                rollups_of(&original, name),
                "{name}"
            );
            assert_eq!(
                fresh.certificates(name).unwrap(),
                original.certificates(name).unwrap()
            );
        }
        assert_eq!(fresh.certificates("site").unwrap().len(), 2);
        // Restoring again writes nothing, rollups included.
        for segment in replica.chunks(100) {
            fresh.restore_results(segment.to_vec()).unwrap();
        }
        assert_eq!(fresh.finish_restore().unwrap(), 0);
    }

    #[test]
    fn a_restore_over_swept_results_does_not_count_them_twice() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let outcomes = two_days();
        for outcome in &outcomes {
            store.append(outcome).unwrap();
        }
        let before = rollups_of(&store, "site");
        let timeline = store.certificates("site").unwrap();
        // Raw results of the first day go; their rollups stay.
        store.sweep(minute(24 * 60)).unwrap();
        assert_eq!(rollups_of(&store, "site"), before);
        let restored = store.restore_results(outcomes).unwrap();
        assert_eq!((restored.added, restored.unchanged), (288, 288));
        store.finish_restore().unwrap();
        assert_eq!(rollups_of(&store, "site"), before);
        assert_eq!(store.certificates("site").unwrap(), timeline);
        // Appends go on from the recomputed buckets.
        let next = up("site", minute(10 * 288));
        store.append(&next).unwrap();
        let raw = store.history("site", OffsetDateTime::UNIX_EPOCH).unwrap();
        let days = store
            .rollups(
                "site",
                crate::store::Granularity::Day,
                OffsetDateTime::UNIX_EPOCH,
            )
            .unwrap();
        assert_eq!(
            days,
            crate::store::Rollup::from_outcomes(crate::store::Granularity::Day, &raw)
        );
    }

    #[test]
    fn restoring_twice_writes_nothing_the_second_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let outcomes: Vec<Outcome> = (0..300)
            .map(|n| up(if n % 2 == 0 { "a" } else { "b" }, minute(n)))
            .collect();
        let first = store.restore_results(outcomes.clone()).unwrap();
        assert_eq!(
            first,
            Restored {
                added: 300,
                ..Restored::default()
            }
        );
        let second = store.restore_results(outcomes.clone()).unwrap();
        assert_eq!(
            second,
            Restored {
                unchanged: 300,
                ..Restored::default()
            }
        );
        assert_eq!(store.history("a", T0).unwrap().len(), 150);
        assert_eq!(store.replication_backlog().unwrap().results, 0);
    }

    #[test]
    fn continuing_after_a_restore_renumbers_what_waits() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.enable_replication().unwrap();
        store.append(&up("site", minute(0))).unwrap();
        store.continue_replication_after(500).unwrap();
        store.append(&up("site", minute(1))).unwrap();
        let shipment = store.next_shipment(10, minute(2)).unwrap().unwrap();
        assert_eq!(
            (shipment.after, shipment.first, shipment.last),
            (500, 501, 502)
        );
        assert_eq!(shipment.results.len(), 2);
        store.continue_replication_after(100).unwrap();
        assert_eq!(store.replication_cursor(), 500, "never moves back");
    }
}
