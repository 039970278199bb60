//! The history of the sled store: the results (blocks in `results`, the
//! unpacked singles in memory and the journal file), the check ids and
//! their dictionaries (`checks`) and the certificate chains (`chains`,
//! `chain_uses`), behind the [`Store`] contract. Their keys and values are `format/`'s; the rollups and the
//! replication queue that every append also feeds are `sled/rollups.rs`
//! and `sled/queue.rs`.
//!
//! Packing. A check's newest results are singles, held in memory
//! (`sled/singles.rs`) and written to the journal file
//! (`sled/journal.rs`); once [`Packing::size`](super::Packing::size) of
//! them and [`Packing::keep`](super::Packing::keep) more follow its last
//! block, and the oldest `size` of them are in the journal on disk (their
//! epoch is durable), the append that makes them so packs them into one
//! block (`format/columns.rs`) in `results`, under the first one's key,
//! then drops them from memory (their frames stay in the file until the
//! next checkpoint, and a replay skips them: a `results` entry covers
//! them). A check whose singles are not on disk yet packs at its next
//! append after the journal's flush, or at [`Store::flush`]. Packing only
//! what the journal holds is what keeps an unclean stop's survivors the
//! results appended up to some point (`sled/mod.rs`): a block sled wrote
//! never holds a result appended after one the journal lost. The newest
//! few stay single so that `latest` reads one record. Once the
//! small blocks at the end of a check's `results` hold [`MERGED`] results
//! (an hour of a 30 s check), the pack that gets there rewrites them as
//! one full block in the batch that removes them. Blocks are what keeps
//! the disk and reads small: sled spends a log fragment, a slot in a
//! small leaf and a share of page rewrites per key, several times the
//! size of a 70-byte record, and a day of one check is 24 blocks to read
//! //! instead of 2880 keys. Entries of a check never overlap in time: a result that falls
//! inside a block's span (the clock stepped back, a restore) is merged into
//! that block, and a sweep rewrites the block its cutoff falls into.

use std::collections::{HashMap, HashSet};

use ::sled::{Batch, IVec};
use time::OffsetDateTime;

use super::journal::Flush;
use super::state::{intern, State, Tail};
use super::SledStore;
use crate::outcome::Outcome;
use crate::store::backend::Store;
use crate::store::error::{rfc3339, StoreError};
use crate::store::format::codec::{self, Decoded};
use crate::store::format::keys::{
    be_u32, be_u64, bound_millis, chain_key, hex, key_millis, key_millis_of, prefixed, result_key,
    string_key, string_position, time_of_millis, use_key, ChainKey, ID_PREFIX, NAME_PREFIX,
    STRING_PREFIX,
};
use crate::store::format::{entries, journal};
use crate::store::rollup::{Granularity, Rollup, ServedLeaf, Timeline};

/// How stale a `chain_uses` entry may be (see the key layout).
const USE_GRANULARITY_MS: u64 = 60 * 60 * 1000;

/// Results a full block holds: an hour of a check probed every 30 s. The
/// blocks packed from the singles (a few dozen results) are merged into one
/// of these once they add up to it, so that sled keeps one value per hour
/// of a check instead of six, and a block's shapes and column headers
/// are shared by more results (`format/columns.rs`).
pub(super) const MERGED: usize = 120;

/// The most singles one pack takes: 50 full blocks. Bounds what a pack
/// decodes at once (a decoded result is ten times its record) when a
/// backlog of durable singles is packed.
const PACK_MOST: usize = 50 * MERGED;

impl SledStore {
    /// The last result millis that check `id`'s `results` entries cover.
    pub(super) fn packed_until(&self, id: u32) -> Result<Option<u64>, StoreError> {
        let Some(last) = self.check_range(id, 0).next_back() else {
            return Ok(None);
        };
        let (key, value) = last.map_err(self.io("read a check's latest results"))?;
        let key_ms = key_millis_of(&key);
        let span = codec::span(key_ms, &value).map_err(|e| self.corrupt_entry(id, key_ms, e))?;
        Ok(Some(span.last))
    }

    /// Reads the check names, dictionaries, chain keys and chain uses.
    pub(super) fn load_state(&self) -> Result<State, StoreError> {
        let mut state = State {
            next_id: 1,
            // Epoch 0 is what the journal held at open, on disk already.
            epoch: 1,
            ..State::default()
        };
        for entry in self.checks.iter() {
            let (key, value) = entry.map_err(self.io("read the checks"))?;
            match key.split_first() {
                Some((&NAME_PREFIX, name)) => {
                    let name = utf8(name).map_err(|e| self.corrupt("a check name", e))?;
                    let id = be_u32(&value)
                        .ok_or_else(|| self.corrupt("the id of check", name.clone()))?;
                    state.next_id = state.next_id.max(id.saturating_add(1));
                    state.ids.insert(name, id);
                }
                Some((&STRING_PREFIX, rest)) => {
                    let (id, index) = string_position(rest).ok_or_else(|| {
                        self.corrupt("the checks tree", format!("bad key {key:?}"))
                    })?;
                    let text = utf8(&value).map_err(|e| self.corrupt("a dictionary string", e))?;
                    state
                        .dicts
                        .entry(id)
                        .or_default()
                        .push_loaded(index, text)
                        .map_err(|detail| {
                            self.corrupt(&format!("the dictionary of check id {id}"), detail)
                        })?;
                }
                Some((&ID_PREFIX, _)) => {}
                _ => return Err(self.corrupt("the checks tree", format!("unexpected key {key:?}"))),
            }
        }
        for key in self.chains.iter().keys() {
            let key = key.map_err(self.io("read the chains"))?;
            state.chains.insert(
                chain_key(&key).ok_or_else(|| self.corrupt("a chain key", format!("{key:?}")))?,
            );
        }
        for entry in self.chain_uses.iter() {
            let (key, value) = entry.map_err(self.io("read the chain uses"))?;
            let parsed = (key.len() == 20)
                .then(|| Some((chain_key(&key[..16])?, be_u32(&key[16..])?, be_u64(&value)?)))
                .flatten();
            let (chain, id, last) =
                parsed.ok_or_else(|| self.corrupt("a chain use", format!("{key:?}")))?;
            state.uses.insert((chain, id), last);
        }
        self.load_leaves(&mut state)?;
        Ok(state)
    }

    /// The id of `name`, allocating one (and writing both directions of the
    /// mapping, in one batch) the first time.
    pub(super) fn id_for(&self, state: &mut State, name: &str) -> Result<u32, StoreError> {
        if let Some(&id) = state.ids.get(name) {
            return Ok(id);
        }
        let id = state.next_id;
        let next = id.checked_add(1).ok_or_else(|| StoreError::IdsExhausted {
            path: self.path.clone(),
        })?;
        let mut batch = Batch::default();
        batch.insert(
            prefixed(NAME_PREFIX, name.as_bytes()),
            &id.to_be_bytes()[..],
        );
        batch.insert(prefixed(ID_PREFIX, &id.to_be_bytes()), name.as_bytes());
        self.checks
            .apply_batch(batch)
            .map_err(self.io("record a new check"))?;
        state.ids.insert(name.to_string(), id);
        state.next_id = next;
        Ok(id)
    }

    /// Writes what a result refers to and is not on disk yet: new
    /// dictionary strings, the chain, a fresh chain use.
    pub(super) fn write_references(
        &self,
        state: &mut State,
        id: u32,
        millis: u64,
        fresh: Vec<String>,
        chain: Option<codec::EncodedChain>,
    ) -> Result<(), StoreError> {
        if !fresh.is_empty() {
            let dict = state.dicts.entry(id).or_default();
            let mut batch = Batch::default();
            let first = dict.strings.len() as u32;
            for (offset, text) in fresh.iter().enumerate() {
                batch.insert(
                    string_key(id, first + offset as u32).to_vec(),
                    text.as_bytes(),
                );
            }
            self.checks
                .apply_batch(batch)
                .map_err(self.io("extend a check's dictionary"))?;
            for text in fresh {
                dict.push(text);
            }
        }
        let Some(chain) = chain else {
            return Ok(());
        };
        if !state.chains.contains(&chain.key) {
            self.chains
                .insert(chain.key, chain.bytes)
                .map_err(self.io("store a certificate chain"))?;
            state.chains.insert(chain.key);
        }
        let last = state.uses.get(&(chain.key, id)).copied();
        if last.is_none_or(|last| millis >= last.saturating_add(USE_GRANULARITY_MS)) {
            self.chain_uses
                .insert(use_key(&chain.key, id), &millis.to_be_bytes()[..])
                .map_err(self.io("record a chain use"))?;
            state.uses.insert((chain.key, id), millis);
        }
        Ok(())
    }

    /// Decodes the results in `entries` (of check `id`) from `since` on,
    /// fetching each distinct chain once.
    pub(super) fn decode(
        &self,
        id: u32,
        name: &str,
        entries: Vec<(IVec, IVec)>,
        since: u64,
    ) -> Result<Vec<Outcome>, StoreError> {
        // Cloned after the entries were read: an append commits strings to
        // the in-memory dictionary before writing the result that uses them.
        let strings = self
            .lock()
            .dicts
            .get(&id)
            .map(|d| d.strings.clone())
            .unwrap_or_default();
        let mut chains: HashMap<ChainKey, Option<codec::SharedChain>> = HashMap::new();
        // Sized once from the headers: growing a Vec of thousands of
        // outcomes copies it several times over (a fifth of the time perf
        // saw in a day's history).
        let capacity: u64 = entries
            .iter()
            .filter_map(|(key, value)| codec::span(key_millis_of(key), value).ok())
            .map(|span| span.count)
            .sum();
        let mut outcomes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
        let mut reader = entries::Reader::default();
        for (key, value) in entries {
            let key_ms = key_millis_of(&key);
            let what = |millis| {
                format!(
                    "the result of {name} at {}",
                    rfc3339(&time_of_millis(millis))
                )
            };
            let results = reader
                .read(key_ms, &value)
                .map_err(|e| self.corrupt(&what(key_ms), e))?;
            for (millis, decoded) in results.drain(..).filter(|(millis, _)| *millis >= since) {
                let chain = match decoded.chain_key() {
                    None => None,
                    Some(chain_key) => {
                        if let std::collections::hash_map::Entry::Vacant(slot) =
                            chains.entry(chain_key)
                        {
                            slot.insert(self.chain(&chain_key)?);
                        }
                        match chains.get_mut(&chain_key).and_then(Option::as_mut) {
                            Some(chain) => Some(chain),
                            // A sweep running alongside removed this entry
                            // and then its chain: it is gone, not damaged.
                            None if !self.still_stored(&key)? => {
                                break;
                            }
                            None => {
                                return Err(
                                    self.corrupt(&what(millis), "its certificate chain is missing")
                                )
                            }
                        }
                    }
                };
                let outcome = decoded
                    .into_outcome(name, time_of_millis(millis), &strings, chain)
                    .map_err(|e| self.corrupt(&what(millis), e))?;
                outcomes.push(outcome);
            }
        }
        Ok(outcomes)
    }

    /// Stores one encoded result of check `id`: as a single key after the
    /// check's last block (packing when enough have gathered), or merged
    /// into the block whose span it falls in. Returns what it replaced:
    /// the record of the same key, if there was one.
    fn put_result(
        &self,
        state: &mut State,
        id: u32,
        millis: u64,
        value: Vec<u8>,
    ) -> Result<Option<Decoded>, StoreError> {
        let mut tail = self.tail(state, id)?;
        let replaced = match tail.packed_until {
            Some(until) if millis <= until => self.merge(id, millis, value)?,
            _ => {
                let epoch = state.epoch;
                let previous = state.singles.insert(id, millis, &value, epoch);
                journal::encode(&mut state.unwritten, id, millis, &value);
                tail.singles += usize::from(previous.is_none());
                previous
                    .map(|p| self.replaced_record(id, millis, &p))
                    .transpose()?
            }
        };
        if let (None, Some(count)) = (&replaced, state.count.as_mut()) {
            *count += 1;
        }
        tail = self.pack_durable(state, id, tail)?;
        state.tails.insert(id, tail);
        Ok(replaced)
    }

    /// Packs check `id`'s oldest singles, a multiple of
    /// [`Packing::size`](super::Packing::size) at a time, while there are
    /// enough and they are in the journal on disk; remembers the check for
    /// [`SledStore::pack_deferred`] when they are not yet. Appended one at
    /// a time, as the daemon does, that is one block of `size` each time;
    /// appended faster than the journal flushes (a bench, a test seeding
    /// a week, a store opened without a background flush), the durable
    /// singles go into full blocks in a few passes of at most
    /// [`PACK_MOST`] rather than one pass per `size`, each of which would
    /// copy every single behind it.
    fn pack_durable(&self, state: &mut State, id: u32, mut tail: Tail) -> Result<Tail, StoreError> {
        let size = self.packing.size;
        while tail.singles >= size + self.packing.keep {
            let packable = (tail.singles - self.packing.keep).min(PACK_MOST.max(size));
            let durable = state
                .singles
                .durable_prefix(id, state.durable_epoch, packable);
            let n = durable / size * size;
            if n == 0 {
                state.deferred_packs.insert(id);
                break;
            }
            tail = self.pack_tail(state, id, tail, n)?;
        }
        Ok(tail)
    }

    /// The packs appends left for the journal's flush (after one); whether
    /// any was done.
    pub(super) fn pack_deferred(&self) -> Result<bool, StoreError> {
        let mut state = self.lock();
        let mut packed = false;
        for id in std::mem::take(&mut state.deferred_packs) {
            let before = self.tail(&state, id)?;
            let tail = self.pack_durable(&mut state, id, before)?;
            packed |= tail.singles < before.singles;
            state.tails.insert(id, tail);
        }
        Ok(packed)
    }

    /// A single record an insert replaced.
    fn replaced_record(
        &self,
        id: u32,
        millis: u64,
        previous: &[u8],
    ) -> Result<Decoded, StoreError> {
        Decoded::parse(previous).map_err(|e| self.corrupt_entry(id, millis, e))
    }

    /// What follows check `id`'s last `results` entry, read the first time
    /// it is needed.
    pub(super) fn tail(&self, state: &State, id: u32) -> Result<Tail, StoreError> {
        if let Some(tail) = state.tails.get(&id) {
            return Ok(*tail);
        }
        let packed_until = self.packed_until(id)?;
        // Every single in memory follows the check's last block: a replay
        // skips what a block covers, a pack drops what it packed, and a
        // result at or before the last block goes into the block.
        let singles = state.singles.count_of(id);
        let unmerged = self
            .trailing_small(id)?
            .iter()
            .map(|(_, span)| span.count as usize)
            .sum();
        Ok(Tail {
            packed_until,
            singles,
            unmerged,
        })
    }

    /// The entries at the end of check `id`'s `results` that hold fewer
    /// than [`MERGED`] results each, newest first, with their spans.
    fn trailing_small(&self, id: u32) -> Result<Vec<(IVec, codec::Span)>, StoreError> {
        let mut small = Vec::new();
        for entry in self.check_range(id, 0).rev() {
            let (key, value) = entry.map_err(self.io("read a check's latest results"))?;
            let key_ms = key_millis_of(&key);
            let span =
                codec::span(key_ms, &value).map_err(|e| self.corrupt_entry(id, key_ms, e))?;
            if span.count >= MERGED as u64 {
                break;
            }
            small.push((key, span));
        }
        Ok(small)
    }

    /// Writes `results` of check `id` (in time order, all after its last
    /// `results` entry) as blocks after that entry, in one batch. Below
    /// [`MERGED`] results in all, with what the last small blocks hold,
    /// they are one more small block; from there, those small blocks and
    /// `results` are rewritten as full blocks (and the rest, one small
    /// block), so that each result is re-encoded once on its way into a
    /// full block, not at every pack.
    pub(super) fn append_blocks(
        &self,
        id: u32,
        tail: Tail,
        mut results: Vec<(u64, Decoded)>,
    ) -> Result<Tail, StoreError> {
        let Some(&(last, _)) = results.last() else {
            return Ok(tail);
        };
        let mut batch = Batch::default();
        if tail.unmerged + results.len() >= MERGED && tail.unmerged > 0 {
            let mut merged = Vec::with_capacity(tail.unmerged + results.len());
            for (key, _) in self.trailing_small(id)?.into_iter().rev() {
                let key_ms = key_millis_of(&key);
                let value = self
                    .results
                    .get(&key)
                    .map_err(self.io("read blocks to merge"))?;
                // Gone since `trailing_small` read it: a sweep removed it.
                let Some(value) = value else { continue };
                let parsed = entries::parse_entry(key_ms, &value)
                    .map_err(|e| self.corrupt_entry(id, key_ms, e))?;
                merged.extend(parsed);
                batch.remove(key);
            }
            merged.append(&mut results);
            results = merged;
        }
        let mut unmerged = tail.unmerged + results.len();
        if unmerged >= MERGED {
            unmerged = results.len() % MERGED;
        }
        for block in results.chunks(MERGED) {
            // A key removed above and written again here: a batch keeps
            // the last operation on each key.
            batch.insert(
                &result_key(id, block[0].0)[..],
                entries::encode_block(block),
            );
        }
        self.results
            .apply_batch(batch)
            .map_err(self.io("pack results into a block"))?;
        Ok(Tail {
            packed_until: Some(last),
            singles: tail.singles,
            unmerged,
        })
    }

    /// Moves check `id`'s oldest `n` singles into blocks in `results`,
    /// then drops them from memory (their journal frames are skipped by a
    /// replay from then on, and dropped by the next checkpoint, which
    /// flushes sled first).
    fn pack_tail(
        &self,
        state: &mut State,
        id: u32,
        tail: Tail,
        n: usize,
    ) -> Result<Tail, StoreError> {
        let mut results = Vec::with_capacity(n);
        let mut last = None;
        for (millis, record) in state.singles.oldest(id, n) {
            let parsed = entries::parse_entry(millis, record)
                .map_err(|e| self.corrupt_entry(id, millis, e))?;
            results.extend(parsed);
            last = Some(millis);
        }
        let packed = results.len();
        let tail = self.append_blocks(id, tail, results)?;
        if let Some(last) = last {
            state.singles.remove_before(id, last.saturating_add(1));
        }
        Ok(Tail {
            singles: tail.singles.saturating_sub(packed),
            ..tail
        })
    }

    /// The block of check `id` that `from` falls into when it starts
    /// before `from` (a block starting at or after `from` is in the range
    /// scan that follows).
    fn block_holding(&self, id: u32, from: u64) -> Result<Option<(IVec, IVec)>, StoreError> {
        Ok(self
            .results
            .get_lt(result_key(id, from))
            .map_err(self.io("read history"))?
            .filter(|(key, value)| {
                key.starts_with(&id.to_be_bytes())
                    && codec::span(key_millis_of(key), value).is_ok_and(|span| span.last >= from)
            }))
    }

    /// Entries of check `id` holding its results from `from` to `to` millis,
    /// oldest first: the `results` entry `from` falls into, the later ones,
    /// then the singles after them. The singles are read first: a pack
    /// running alongside writes its block before dropping them, so this
    /// order may see a result twice (the copy is skipped) but never misses
    /// one.
    pub(super) fn entries(
        &self,
        id: u32,
        from: u64,
        to: u64,
    ) -> Result<Vec<(IVec, IVec)>, StoreError> {
        let newest = self.lock().singles.entries(id, from, to);
        let mut entries: Vec<(IVec, IVec)> = self.block_holding(id, from)?.into_iter().collect();
        for entry in self
            .results
            .range(result_key(id, from)..=result_key(id, to))
        {
            entries.push(entry.map_err(self.io("read history"))?);
        }
        append_newest(&mut entries, newest);
        Ok(entries)
    }

    /// [`SledStore::entries`] from `from` on, stopping once the entries
    /// after the one `from` falls into hold at least `limit` results (a
    /// block's header counts them, and all of them are at or after
    /// `from`), so a page reads about `limit` results whatever the window.
    /// The singles, a few per check, are read first, as there,
    /// and kept only when every `results` entry was read: they come after
    /// all of them.
    fn page_entries(
        &self,
        id: u32,
        from: u64,
        limit: usize,
    ) -> Result<Vec<(IVec, IVec)>, StoreError> {
        let newest = self.lock().singles.entries(id, from, u64::MAX);
        let mut entries: Vec<(IVec, IVec)> = self.block_holding(id, from)?.into_iter().collect();
        let wanted = u64::try_from(limit).unwrap_or(u64::MAX);
        let mut held = 0u64;
        for entry in self.check_range(id, from) {
            if held >= wanted {
                return Ok(entries);
            }
            let (key, value) = entry.map_err(self.io("read history"))?;
            held += codec::span(key_millis_of(&key), &value).map_or(1, |span| span.count);
            entries.push((key, value));
        }
        append_newest(&mut entries, newest);
        Ok(entries)
    }

    /// Whether a result key is still a single or in `results` (a sweep
    /// running alongside a read may have removed it).
    fn still_stored(&self, key: &[u8]) -> Result<bool, StoreError> {
        let id = be_u32(&key[..4.min(key.len())]).unwrap_or_default();
        Ok(self.lock().singles.contains(id, key_millis_of(key))
            || self
                .results
                .contains_key(key)
                .map_err(self.io("read history"))?)
    }

    /// Puts result `millis` into the entry whose span holds it (a block),
    /// replacing a result with the same millis; returns the record it
    /// replaced, if any. A time between entries becomes a single key there.
    fn merge(&self, id: u32, millis: u64, value: Vec<u8>) -> Result<Option<Decoded>, StoreError> {
        let holder = self
            .results
            .get_lt(result_key(id, millis.saturating_add(1)))
            .map_err(self.io("find the block of a late result"))?
            .filter(|(key, _)| key.starts_with(&id.to_be_bytes()));
        let Some((key, block)) = holder.filter(|(_, v)| codec::is_block(v)) else {
            let previous = self
                .results
                .insert(result_key(id, millis), value)
                .map_err(self.io("store a result"))?;
            return previous
                .map(|p| self.replaced_record(id, millis, &p))
                .transpose();
        };
        let key_ms = key_millis_of(&key);
        let mut results =
            entries::parse_entry(key_ms, &block).map_err(|e| self.corrupt_entry(id, key_ms, e))?;
        let last = results.last().map_or(key_ms, |(last, _)| *last);
        if millis > last {
            let previous = self
                .results
                .insert(result_key(id, millis), value)
                .map_err(self.io("store a result"))?;
            return previous
                .map(|p| self.replaced_record(id, millis, &p))
                .transpose();
        }
        let decoded = Decoded::parse(&value).map_err(|e| self.corrupt_entry(id, millis, e))?;
        let replaced = match results.binary_search_by_key(&millis, |(at, _)| *at) {
            Ok(index) => Some(std::mem::replace(&mut results[index].1, decoded)),
            Err(index) => {
                results.insert(index, (millis, decoded));
                None
            }
        };
        self.results
            .insert(key, entries::encode_block(&results))
            .map_err(self.io("merge a late result into its block"))?;
        Ok(replaced)
    }

    /// `results` entries of check `id` from `from` millis on.
    pub(super) fn check_range(&self, id: u32, from: u64) -> ::sled::Iter {
        self.results
            .range(result_key(id, from)..=result_key(id, u64::MAX))
    }

    pub(super) fn chain(&self, key: &ChainKey) -> Result<Option<codec::SharedChain>, StoreError> {
        let Some(bytes) = self
            .chains
            .get(key)
            .map_err(self.io("read a certificate chain"))?
        else {
            return Ok(None);
        };
        codec::chain_infos(&bytes)
            .map(Some)
            .map_err(|e| self.corrupt(&format!("certificate chain {}", hex(key)), e))
    }

    /// Removes the results of check `id` before `cutoff`, in one batch; the
    /// block the cutoff falls into is rewritten with what it keeps.
    fn sweep_check(&self, id: u32, cutoff: u64) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let mut batch = Batch::default();
        let mut removed = 0;
        for entry in self
            .results
            .range(result_key(id, 0)..result_key(id, cutoff))
        {
            let (key, value) = entry.map_err(self.io("read results to sweep"))?;
            let key_ms = key_millis_of(&key);
            let span =
                codec::span(key_ms, &value).map_err(|e| self.corrupt_entry(id, key_ms, e))?;
            if span.last >= cutoff {
                let mut results = entries::parse_entry(key_ms, &value)
                    .map_err(|e| self.corrupt_entry(id, key_ms, e))?;
                results.retain(|(millis, _)| *millis >= cutoff);
                if let Some(&(first, _)) = results.first() {
                    batch.insert(&result_key(id, first)[..], entries::encode_block(&results));
                }
                removed += span.count - results.len() as u64;
            } else {
                removed += span.count;
            }
            batch.remove(key);
        }
        self.results
            .apply_batch(batch)
            .map_err(self.io("remove old results"))?;
        removed += state.singles.remove_before(id, cutoff) as u64;
        if let Some(count) = state.count.as_mut() {
            *count = count.saturating_sub(removed);
        }
        // The tail may have lost singles; read it again when next needed.
        state.tails.remove(&id);
        Ok(removed)
    }

    /// Drops chain uses that no kept result can need, then chains without
    /// uses. A use last written an hour or more before `cutoff` covers no
    /// result at or after it; a check that still has results before the
    /// cutoff (appended while this sweep ran) keeps its uses this time.
    fn collect_chains(&self, cutoff: u64) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let mut has_old_results: HashMap<u32, bool> = HashMap::new();
        let mut stale = Vec::new();
        for (&(chain, id), &last) in &state.uses {
            if last.saturating_add(USE_GRANULARITY_MS) > cutoff {
                continue;
            }
            let old = match has_old_results.get(&id) {
                Some(&old) => old,
                None => {
                    let range = result_key(id, 0)..result_key(id, cutoff);
                    let old = self.results.range(range).next().is_some()
                        || state
                            .singles
                            .bounds(id)
                            .is_some_and(|(first, _)| first < cutoff);
                    has_old_results.insert(id, old);
                    old
                }
            };
            if !old {
                stale.push((chain, id));
            }
        }
        for (chain, id) in stale {
            self.chain_uses
                .remove(use_key(&chain, id))
                .map_err(self.io("remove a chain use"))?;
            state.uses.remove(&(chain, id));
        }
        let used: HashSet<ChainKey> = state.uses.keys().map(|(chain, _)| *chain).collect();
        let unused: Vec<ChainKey> = state.chains.difference(&used).copied().collect();
        for chain in &unused {
            self.chains
                .remove(chain)
                .map_err(self.io("remove an unused chain"))?;
            state.chains.remove(chain);
        }
        Ok(unused.len() as u64)
    }

    /// Chains stored (for tests and metrics).
    pub fn chain_count(&self) -> usize {
        self.lock().chains.len()
    }
}

impl SledStore {
    /// [`Store::append`]; a restore's results (`rollups` false) leave the
    /// rollups to [`SledStore::finish_restore`].
    pub(super) fn append_with(&self, outcome: &Outcome, rollups: bool) -> Result<(), StoreError> {
        // A background flush of the journal failed: this append says so,
        // as a failed write of its own would.
        self.journal.take_failure()?;
        let millis = key_millis(outcome)?;
        let mut state = self.lock();
        let id = self.id_for(&mut state, &outcome.name)?;
        let mut fresh = Vec::new();
        let encoded = {
            let dict = state.dicts.get(&id);
            codec::encode(outcome, &mut |text| intern(dict, &mut fresh, text))
        };
        self.write_references(&mut state, id, millis, fresh, encoded.chain)?;
        let replaced = self.put_result(&mut state, id, millis, encoded.value)?;
        // After the result: sled's prefix recovery never keeps a queue
        // entry without the result it names.
        self.replication
            .enqueue(&mut state, id, millis)
            .map_err(self.io("queue a result for replication"))?;
        if !self.keep_rollups {
            return Ok(());
        }
        self.record_leaf(&mut state, id, outcome)?;
        if !rollups {
            return Ok(());
        }
        let replaced = replaced
            .map(|record| self.replaced_sample(&state, id, &outcome.name, millis, record))
            .transpose()?;
        self.record_rollups(&mut state, id, millis, outcome, replaced.as_ref())
    }
}

impl Store for SledStore {
    fn append(&self, outcome: &Outcome) -> Result<(), StoreError> {
        self.append_with(outcome, true)
    }

    fn history(&self, name: &str, since: OffsetDateTime) -> Result<Vec<Outcome>, StoreError> {
        let Some(id) = self.lock().ids.get(name).copied() else {
            return Ok(Vec::new());
        };
        let since = bound_millis(since);
        let entries = self.entries(id, since, u64::MAX)?;
        self.decode(id, name, entries, since)
    }

    fn history_page(
        &self,
        name: &str,
        since: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Outcome>, StoreError> {
        let Some(id) = self.lock().ids.get(name).copied() else {
            return Ok(Vec::new());
        };
        let since = bound_millis(since);
        let entries = self.page_entries(id, since, limit)?;
        let mut outcomes = self.decode(id, name, entries, since)?;
        outcomes.truncate(limit);
        Ok(outcomes)
    }

    fn latest(&self, name: &str) -> Result<Option<Outcome>, StoreError> {
        let Some(id) = self.lock().ids.get(name).copied() else {
            return Ok(None);
        };
        // The singles first, as in `entries`.
        let single = self.lock().singles.last(id);
        let last = match single {
            Some(single) => Some(single),
            None => self
                .check_range(id, 0)
                .next_back()
                .transpose()
                .map_err(self.io("read the latest result"))?,
        };
        let Some((key, value)) = last else {
            return Ok(None);
        };
        let span = codec::span(key_millis_of(&key), &value)
            .map_err(|e| self.corrupt_entry(id, key_millis_of(&key), e))?;
        Ok(self.decode(id, name, vec![(key, value)], span.last)?.pop())
    }

    fn latest_all(&self) -> Result<Vec<Outcome>, StoreError> {
        let mut names: Vec<String> = self.lock().ids.keys().cloned().collect();
        names.sort();
        let mut latest = Vec::with_capacity(names.len());
        for name in names {
            latest.extend(self.latest(&name)?);
        }
        Ok(latest)
    }

    fn sweep(&self, before: OffsetDateTime) -> Result<u64, StoreError> {
        // Results still queued for replication are never swept.
        let mut cutoff = bound_millis(before);
        if let Some(oldest_queued) = self.replication_sweep_bound()? {
            cutoff = cutoff.min(oldest_queued);
        }
        let mut ids: Vec<u32> = self.lock().ids.values().copied().collect();
        ids.sort_unstable();
        let mut removed = 0;
        for id in ids {
            removed += self.sweep_check(id, cutoff)?;
        }
        // Before any chain goes: a replay must not bring back a single (or
        // the frame of a packed one whose block was swept) that refers to
        // a chain removed below.
        if removed > 0 {
            self.flush_journal(Flush::Checkpoint)?;
        }
        let chains = self.collect_chains(cutoff)?;
        tracing::debug!(removed, chains, "swept history");
        Ok(removed)
    }

    fn rollups(
        &self,
        name: &str,
        granularity: Granularity,
        since: OffsetDateTime,
    ) -> Result<Vec<Rollup>, StoreError> {
        let Some(id) = self.lock().ids.get(name).copied() else {
            return Ok(Vec::new());
        };
        self.read_rollups(id, granularity, bound_millis(since))
    }

    fn certificates(&self, name: &str) -> Result<Vec<ServedLeaf>, StoreError> {
        let state = self.lock();
        let Some(id) = state.ids.get(name) else {
            return Ok(Vec::new());
        };
        Ok(state
            .rollups
            .leaves
            .get(id)
            .map(Timeline::sorted)
            .unwrap_or_default())
    }

    fn sweep_rollups(
        &self,
        hours_before: OffsetDateTime,
        days_before: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let removed =
            self.sweep_rollup_trees(bound_millis(hours_before), bound_millis(days_before))?;
        tracing::debug!(removed, "swept rollups");
        Ok(removed)
    }

    fn flush(&self) -> Result<(), StoreError> {
        // A background flush that failed is reported here even when this
        // one, which writes what it could not, succeeds.
        let earlier = self.journal.take_failure();
        self.write_hot(&mut self.lock())?;
        self.flush_journal(Flush::Everything)?;
        // The packs that waited for that flush, then sled's flush of them,
        // which also rewrites the journal if they left it mostly stale.
        if self.pack_deferred()? {
            self.flush_journal(Flush::Background)?;
        }
        earlier
    }

    fn len(&self) -> Result<u64, StoreError> {
        let mut state = self.lock();
        if let Some(count) = state.count {
            return Ok(count);
        }
        // A walk over every entry's header; done once, under the lock so
        // that no append slips between the count and the bookkeeping.
        let mut count = 0;
        for entry in self.results.iter() {
            let (key, value) = entry.map_err(self.io("count results"))?;
            let key_ms = key_millis_of(&key);
            let id = be_u32(&key[..4]).unwrap_or_default();
            count += codec::span(key_ms, &value)
                .map_err(|e| self.corrupt_entry(id, key_ms, e))?
                .count;
        }
        count += state.singles.count() as u64;
        state.count = Some(count);
        Ok(count)
    }
}

/// The first millis after `until`, or 0 for nothing.
pub(super) fn after(until: Option<u64>) -> u64 {
    until.map_or(0, |until| until.saturating_add(1))
}

/// Appends the singles that come after the last of `entries`
/// (a single already packed into that block is not repeated).
fn append_newest(entries: &mut Vec<(IVec, IVec)>, newest: Vec<(IVec, IVec)>) {
    let covered = entries
        .last()
        .and_then(|(key, value)| codec::span(key_millis_of(key), value).ok())
        .map(|span| span.last);
    entries.extend(
        newest
            .into_iter()
            .filter(|(key, _)| covered.is_none_or(|until| key_millis_of(key) > until)),
    );
}

fn utf8(bytes: &[u8]) -> Result<String, std::string::FromUtf8Error> {
    String::from_utf8(bytes.to_vec())
}

#[cfg(test)]
mod tests {
    use time::Duration as TimeDuration;

    use super::*;
    use crate::store::contract::{chain, up, T0};
    use crate::store::sled::state::DICT_LIMIT;
    use crate::store::sled::tests::{
        entries, ids, minute, minutes, open, open_packed, open_small_blocks, singles, when_unlocked,
    };
    use crate::store::sled::{Packing, SledStore};

    #[test]
    fn results_are_packed_and_read_back_through_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let packing = Packing { size: 4, keep: 2 };
        let store = open_packed(dir.path(), packing);
        // As in the daemon, each result after the journal's flush of the
        // one before: packs wait for the singles to be on disk.
        for outcome in minutes(0..20) {
            store.append(&outcome).unwrap();
            store.flush().unwrap();
        }
        let layout = entries(&store);
        let blocks: Vec<u64> = layout.iter().filter(|e| e.2).map(|e| e.1.count).collect();
        assert_eq!(blocks, [4, 4, 4, 4], "{layout:?}");
        assert_eq!(layout.len(), 4, "only blocks in results");
        assert_eq!(singles(&store), 4, "four singles after the blocks");
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..20));
        assert_eq!(store.history("site", minute(5)).unwrap(), minutes(5..20));
        assert_eq!(store.latest("site").unwrap(), Some(up("site", minute(19))));
        drop(store);

        let store = open_packed(dir.path(), packing);
        assert_eq!(store.len().unwrap(), 20);
        for outcome in minutes(20..23) {
            store.append(&outcome).unwrap();
        }
        assert_eq!(entries(&store).iter().filter(|e| e.2).count(), 5);
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..23));
        assert_eq!(store.len().unwrap(), 23);
    }

    #[test]
    fn a_backlog_appended_faster_than_the_journal_flushes_is_packed_into_full_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let packing = Packing { size: 4, keep: 2 };
        let store = when_unlocked(|| {
            SledStore::open_packing(dir.path(), std::time::Duration::ZERO, packing)
        })
        .unwrap();
        for outcome in minutes(0..300) {
            store.append(&outcome).unwrap();
        }
        assert_eq!(
            singles(&store),
            300,
            "nothing packed before the journal's flush"
        );
        store.flush().unwrap();
        // 296 of them (a multiple of 4, leaving 4 >= 2 single): two full
        // blocks and the rest in one, not 74 blocks of 4.
        let layout = entries(&store);
        let blocks: Vec<u64> = layout.iter().map(|e| e.1.count).collect();
        assert_eq!(blocks, [MERGED as u64, MERGED as u64, 56], "{layout:?}");
        assert_eq!(singles(&store), 4);
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..300));
        drop(store);
        let store = open_packed(dir.path(), packing);
        assert_eq!(store.len().unwrap(), 300);
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..300));
    }

    #[test]
    fn late_results_go_into_the_block_whose_span_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_small_blocks(dir.path());
        for outcome in minutes(0..9) {
            store.append(&outcome).unwrap();
        }
        let late = up("site", minute(2) + TimeDuration::seconds(30));
        let mut replaced = up("site", minute(4));
        replaced.status = crate::outcome::Status::Warn;
        let before_all = up("site", minute(-1));
        for outcome in [&late, &replaced, &before_all] {
            store.append(outcome).unwrap();
        }
        entries(&store);
        let mut expected = minutes(0..9);
        expected[4] = replaced;
        expected.insert(3, late);
        expected.insert(0, before_all);
        assert_eq!(store.history("site", minute(-5)).unwrap(), expected);
        assert_eq!(store.len().unwrap(), 11);
        drop(store);
        assert_eq!(open_small_blocks(dir.path()).len().unwrap(), 11);
    }

    #[test]
    fn a_sweep_rewrites_the_block_its_cutoff_falls_into() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_small_blocks(dir.path());
        for outcome in minutes(0..9) {
            store.append(&outcome).unwrap();
            store.flush().unwrap();
        }
        assert!(entries(&store).iter().any(|(key, span, _)| *key
            == 2 * 60_000 + key_millis(&up("site", T0)).unwrap()
            && span.count == 2));
        assert_eq!(store.sweep(minute(3)).unwrap(), 3);
        entries(&store);
        assert_eq!(store.len().unwrap(), 6);
        assert_eq!(store.history("site", T0).unwrap(), minutes(3..9));
        store.append(&up("site", minute(9))).unwrap();
        assert_eq!(store.history("site", T0).unwrap(), minutes(3..10));
    }

    #[test]
    fn ids_and_history_survive_reopen_and_are_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for name in ["c", "a", "b"] {
            store.append(&up(name, T0)).unwrap();
        }
        let before = ids(&store);
        assert_eq!(before.len(), 3);
        drop(store);

        let store = open(dir.path());
        assert_eq!(ids(&store), before);
        assert_eq!(store.history("a", T0).unwrap(), vec![up("a", T0)]);
        store.sweep(T0 + TimeDuration::days(1)).unwrap();
        store.append(&up("d", T0)).unwrap();
        let d = ids(&store)["d"];
        assert!(before.values().all(|&id| id < d), "{d} reuses an id");
        drop(store);

        let store = open(dir.path());
        assert_eq!(ids(&store)["d"], d);
        assert_eq!(store.len().unwrap(), 1);
        store.append(&up("a", T0 + TimeDuration::hours(1))).unwrap();
        assert_eq!(ids(&store)["a"], before["a"]);
    }

    #[test]
    fn a_damaged_record_names_the_check_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.append(&up("site", T0)).unwrap();
        let id = ids(&store)["site"];
        let millis = key_millis(&up("site", T0)).unwrap();
        store
            .results
            .insert(result_key(id, millis), &[1, 0xff, 0xff][..])
            .unwrap();
        let err = store.history("site", T0).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "the store at {} is damaged: the result of site at 2026-11-29T07:00:00Z: \
                 result record does not decode",
                dir.path().display()
            )),
            "{message}"
        );
        assert!(message
            .ends_with("(restore it with `vigie restore`, or move it aside to start afresh)"));
    }

    #[test]
    fn sweep_removes_chains_no_result_refers_to() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let day = |d: i64| T0 + TimeDuration::days(d);
        let with_chain = |name: &str, domain: &str, at| {
            let mut outcome = up(name, at);
            outcome.tls.as_mut().unwrap().chain = chain(domain, at).into();
            outcome
        };
        // "site" renews onto a new chain on day -4; "api" keeps the old one
        // until day -6, "www" uses one chain throughout.
        for d in -10..=0 {
            let site_domain = if d < -4 { "old.example" } else { "new.example" };
            store
                .append(&with_chain("site", site_domain, day(d)))
                .unwrap();
            if d <= -6 {
                store
                    .append(&with_chain("api", "old.example", day(d)))
                    .unwrap();
            }
            store
                .append(&with_chain("www", "www.example", day(d)))
                .unwrap();
        }
        assert_eq!(store.chain_count(), 3);
        store.sweep(day(-5)).unwrap();
        assert_eq!(
            store.chain_count(),
            3,
            "site's results of day -5 use the old chain"
        );
        store.sweep(day(-3)).unwrap();
        assert_eq!(store.chain_count(), 2);
        assert_eq!(store.history("api", day(-20)).unwrap(), vec![]);
        let site = store.history("site", day(-20)).unwrap();
        assert_eq!(site.len(), 4);
        assert_eq!(site[0], with_chain("site", "new.example", day(-3)));
        drop(store);

        let store = open(dir.path());
        assert_eq!(store.chain_count(), 2);
        assert_eq!(store.lock().uses.len(), 2);
        // A chain swept away is stored again when it comes back.
        store
            .append(&with_chain("api", "old.example", day(1)))
            .unwrap();
        assert_eq!(store.chain_count(), 3);
        assert_eq!(
            store.latest("api").unwrap(),
            Some(with_chain("api", "old.example", day(1)))
        );
    }

    #[test]
    fn a_chain_in_use_within_the_hour_before_the_cutoff_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let at = |minutes: i64| T0 + TimeDuration::minutes(minutes);
        // One use is written at minute 0 and covers the next 59 minutes.
        for minute in 0..60 {
            store.append(&up("site", at(minute))).unwrap();
        }
        assert_eq!(
            store.lock().uses.values().collect::<Vec<_>>(),
            [&key_millis(&up("site", at(0))).unwrap()]
        );
        assert_eq!(store.sweep(at(59)).unwrap(), 59);
        assert_eq!(store.chain_count(), 1);
        assert_eq!(store.latest("site").unwrap(), Some(up("site", at(59))));
        assert_eq!(store.sweep(at(60)).unwrap(), 1);
        assert_eq!(store.chain_count(), 0);
    }

    #[test]
    fn changed_targets_keep_their_own_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut moved = up("site", T0 + TimeDuration::minutes(1));
        moved.target = "https://moved.example.com/".to_string();
        store.append(&up("site", T0)).unwrap();
        store.append(&moved).unwrap();
        drop(store);
        let store = open(dir.path());
        let history = store.history("site", T0).unwrap();
        assert_eq!(history, vec![up("site", T0), moved]);
    }

    #[test]
    fn a_full_dictionary_stores_strings_inline() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let outcomes: Vec<Outcome> = (0..DICT_LIMIT as i64 + 20)
            .map(|n| {
                let mut outcome = up("site", T0 + TimeDuration::seconds(n));
                outcome.target = format!("https://example.com/{n}");
                outcome
            })
            .collect();
        for outcome in &outcomes {
            store.append(outcome).unwrap();
        }
        assert_eq!(store.lock().dicts[&1].strings.len(), DICT_LIMIT);
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.history("site", T0).unwrap(), outcomes);
    }

    #[test]
    fn len_is_counted_once_then_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for n in 0..5 {
            store
                .append(&up("site", T0 + TimeDuration::minutes(n)))
                .unwrap();
        }
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.len().unwrap(), 5);
        store
            .append(&up("site", T0 + TimeDuration::minutes(9)))
            .unwrap();
        store
            .append(&up("site", T0 + TimeDuration::minutes(9)))
            .unwrap();
        assert_eq!(store.len().unwrap(), 6);
        assert_eq!(store.sweep(T0 + TimeDuration::minutes(2)).unwrap(), 2);
        assert_eq!(store.len().unwrap(), 4);
        assert_eq!(store.results.len() + singles(&store), 4);
    }
}
