//! The on-disk backend: sled 0.34 (the stable line), one database in the
//! daemon's `state_dir`, laid out as `store/mod.rs` describes.
//!
//! Durability. sled keeps writes in memory and writes them out every
//! `flush_every` (and on [`Store::flush`], and when the store is dropped).
//! An unclean stop (kill -9, OOM, power loss) loses at most what was
//! appended during the last `flush_every`, and never more than that: on
//! reopening, sled recovers its log up to the first torn or missing write,
//! so what survives is a prefix of what was written, across all trees
//! (tests/process/store_crash.rs kills a writer repeatedly and checks exactly
//! this). That prefix property is what lets an append write the check's
//! id, dictionary strings, chain and chain use *before* the result that
//! refers to them, instead of in a transaction: a result can never survive
//! without them.
//!
//! Packing. A check's newest results are one key each in `newest`; once
//! [`Packing::size`] of them and [`Packing::keep`] more follow its last
//! block, the append that makes them so packs the older ones into one block
//! (record.rs) in `results`, under the first one's key, then removes them
//! from `newest` in one batch (two trees, so two writes: the block first,
//! so that a stop in between leaves a copy, never a gap). The newest few
//! stay single so that `latest` reads one record. Blocks are what keeps the disk
//! and reads small: sled spends a log fragment, a slot in a small leaf and
//! a share of page rewrites per key, several times the size of a 70-byte
//! record, and a day of one check is 24 blocks to read instead of 2880
//! keys. Entries of a check never overlap in time: a result that falls
//! inside a block's span (the clock stepped back, a restore) is merged into
//! that block, and a sweep rewrites the block its cutoff falls into.
//!
//! Concurrency. sled allows one process per database (a file lock); a
//! second process gets [`StoreError::Locked`]. Inside the process, appends
//! and the chain collection of a sweep are serialised by one mutex over the
//! in-memory indexes (names, dictionaries, known chains and uses); reads
//! take it only to look up a check.
//!
//! Memory. The page cache is capped at [`CACHE_BYTES`], not sled's 1 GiB
//! default: the daemon runs on a small VM, and reads are mostly "the last
//! day of one check".

mod replication;
mod rollups;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use ::sled::{Batch, Db, IVec, Tree};
use time::OffsetDateTime;

use super::record::{self, ChainKey, Decoded, Str};
use super::rollup::{sort_timeline, Granularity, Rollup, ServedLeaf};
use super::{bound_millis, key_millis, rfc3339, time_of_millis, AlertStore, Store, StoreError};
use crate::outcome::Outcome;

pub use self::replication::{
    Backlog, RefusedSegment, Restored, Shipment, ShipmentRange, ShipmentRead, Shipped,
};

/// A file of vigie's own beside sled's, written once the schema version is
/// stored: sled opens a garbled or truncated file as an empty database,
/// and this file is how an empty database is told from a new one.
pub const SENTINEL: &str = "vigie-store";

/// The layout this code reads and writes (`meta` / `schema_version`).
pub const SCHEMA_VERSION: u32 = 3;

/// The first layout with the `newest` tree (what `upgrade_from_1`
/// leaves); version 3 added `rollups` and `leaves`.
const SCHEMA_NEWEST: u32 = 2;

/// sled's page cache budget. sled counts pages at their size on disk and
/// holds them in memory at several times that, so this is what the
/// daemon's memory grows by as history accumulates. Measured with the
/// daemon bench at 1,000 checks probed every 3 s (about an hour of a
/// 30 s fleet's history every 6 minutes): 16 MiB grew to 48.7 MiB RSS in
/// 8.5 minutes and kept growing; 4 MiB was at 42.4 MiB then and levelled
/// off. `history` reads a check's blocks once per answer and did not slow
/// down (`benches/store.rs`: median 3.8 ms against 4.9 ms for a day);
/// appends did, from about 22,000 to 19,700 results/s.
pub const CACHE_BYTES: u64 = 4 * 1024 * 1024;

/// How results are grouped into blocks.
#[derive(Debug, Clone, Copy)]
pub struct Packing {
    /// Results per block.
    pub size: usize,
    /// The newest results a check keeps as single keys.
    pub keep: usize,
}

impl Packing {
    /// Ten minutes of a check probed every 30 s per block, two minutes
    /// single. What a check has not packed yet sits in `newest`, whose
    /// leaves every append touches, so sled keeps them in memory whatever
    /// its cache budget: with blocks of 60, a process appending 1000 checks'
    /// results grew to 61 MiB RSS within six hours' worth and stayed there;
    /// with blocks of 20, 33 MiB (`benches/store.rs` at 1000 x 720, RSS
    /// sampled, 16 MiB cache; blocks of 12: 36 MiB; in that bench a cache
    /// of 1 or 4 MiB with blocks of 60 changed nothing, in the daemon the
    /// cache mattered too: see [`CACHE_BYTES`]). Smaller blocks also answer `history` faster
    /// (fewer singles to decode one by one: 1.2 ms against 3.1 ms for 720
    /// results) at about 1 byte more of key and value per result.
    pub const DEFAULT: Packing = Packing { size: 20, keep: 4 };
}

/// How stale a `chain_uses` entry may be (see the key layout).
const USE_GRANULARITY_MS: u64 = 60 * 60 * 1000;

/// Dictionary entries per check; strings beyond are stored inline, so a
/// field that turns out to vary (a redirect target with a session in its
/// path) cannot grow a dictionary without bound.
const DICT_LIMIT: usize = 1024;

const SCHEMA_KEY: &[u8] = b"schema_version";
const NAME_PREFIX: u8 = b'n';
const ID_PREFIX: u8 = b'i';
const STRING_PREFIX: u8 = b's';

/// History in a sled database.
pub struct SledStore {
    path: PathBuf,
    db: Db,
    results: Tree,
    /// Each check's single results after its last `results` entry.
    newest: Tree,
    checks: Tree,
    chains: Tree,
    chain_uses: Tree,
    packing: Packing,
    /// The replication queue and cursor (`sled/replication.rs`).
    replication: replication::Queue,
    /// Rollups and the certificate timeline (`sled/rollups.rs`).
    rollup_trees: rollups::Trees,
    /// False only in benchmarks ([`SledStore::without_rollups`]).
    keep_rollups: bool,
    state: Mutex<State>,
}

/// What appends need to know without reading the disk; rebuilt at open.
#[derive(Default)]
struct State {
    ids: HashMap<String, u32>,
    dicts: HashMap<u32, Dict>,
    next_id: u32,
    chains: HashSet<ChainKey>,
    /// (chain, check id) -> last use written to `chain_uses`.
    uses: HashMap<(ChainKey, u32), u64>,
    /// Number of results, once counted (see [`Store::len`]).
    count: Option<u64>,
    /// Per check, what follows its last block; read at its first append.
    tails: HashMap<u32, Tail>,
    /// The newest rollups and every timeline (`sled/rollups.rs`).
    rollups: rollups::Cache,
}

/// The unpacked end of a check's results (its `newest` singles).
#[derive(Debug, Clone, Copy, Default)]
struct Tail {
    /// The last result its `results` entries cover, if any.
    packed_until: Option<u64>,
    /// Singles in `newest` after it.
    singles: usize,
}

/// A check's append-only dictionary of recurring strings.
#[derive(Default)]
struct Dict {
    strings: Vec<String>,
    /// Built once the dictionary outgrows [`DICT_SCAN`]: a typical check has
    /// under ten strings, and 10,000 checks' hash maps (with a second copy
    /// of every string) were megabytes of the daemon's memory.
    index: Option<HashMap<String, u32>>,
}

/// Dictionaries up to this size are searched in order.
const DICT_SCAN: usize = 16;

impl SledStore {
    /// Opens (or creates) the database in `dir`. `flush_every` bounds what
    /// an unclean stop loses; zero turns the background flush off (only
    /// [`Store::flush`] and a clean close write).
    pub fn open(dir: &Path, flush_every: Duration) -> Result<SledStore, StoreError> {
        Self::open_packing(dir, flush_every, Packing::DEFAULT)
    }

    /// A store in a temporary directory, deleted when the store is dropped:
    /// what the daemon runs on while `state_dir` refuses writes at start, so
    /// that alerting keeps its transactions and mail its outbox.
    pub fn open_temporary(flush_every: Duration) -> Result<SledStore, StoreError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dir =
            std::env::temp_dir().join(format!("vigie-history-{}-{nanos}", std::process::id()));
        Self::open_with(&dir, flush_every, Packing::DEFAULT, true)
    }

    /// [`SledStore::open`] with other block sizes (tests, benchmarks). The
    /// sizes are not part of the format: any store reads every block.
    pub fn open_packing(
        dir: &Path,
        flush_every: Duration,
        packing: Packing,
    ) -> Result<SledStore, StoreError> {
        Self::open_with(dir, flush_every, packing, false)
    }

    fn open_with(
        dir: &Path,
        flush_every: Duration,
        packing: Packing,
        temporary: bool,
    ) -> Result<SledStore, StoreError> {
        let flush_ms = match u64::try_from(flush_every.as_millis()).unwrap_or(u64::MAX) {
            0 if flush_every.is_zero() => None,
            ms => Some(ms.max(1)),
        };
        let db = ::sled::Config::new()
            .path(dir)
            .cache_capacity(CACHE_BYTES)
            .flush_every_ms(flush_ms)
            .temporary(temporary)
            .open()
            .map_err(|cause| open_error(dir, cause))?;
        let tree = |name: &str| {
            db.open_tree(name).map_err(|cause| StoreError::Open {
                path: dir.to_path_buf(),
                cause,
            })
        };
        let meta = tree("meta")?;
        let replication = replication::Queue::open(&db, &meta, dir)?;
        let rollup_trees = rollups::Trees::open(&db).map_err(|cause| StoreError::Open {
            path: dir.to_path_buf(),
            cause,
        })?;
        let store = SledStore {
            path: dir.to_path_buf(),
            results: tree("results")?,
            newest: tree("newest")?,
            checks: tree("checks")?,
            chains: tree("chains")?,
            chain_uses: tree("chain_uses")?,
            packing: Packing {
                size: packing.size.max(1),
                keep: packing.keep,
            },
            replication,
            rollup_trees,
            keep_rollups: true,
            state: Mutex::new(State::default()),
            db,
        };
        let found = store.check_schema(&meta)?;
        if found < SCHEMA_NEWEST {
            store.upgrade_from_1(&meta)?;
        }
        store.drop_packed_newest()?;
        let state = store.load_state()?;
        *store.lock() = state;
        if found < SCHEMA_VERSION {
            store.upgrade_from_2(&meta)?;
        }
        let repaired = store.repair_rollups()?;
        if repaired > 0 {
            tracing::info!(
                repaired,
                "rollups caught up with results stored before an unclean stop"
            );
        }
        Ok(store)
    }

    /// This store with appends that keep no rollups and no timeline, as
    /// before schema 3: for `benches/rollups.rs` to measure what they cost.
    /// Its rollups are then wrong; use it only on a throwaway store.
    #[doc(hidden)]
    pub fn without_rollups(mut self) -> SledStore {
        self.keep_rollups = false;
        self
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The alert and outbox trees beside the history, in the same
    /// database so that their writes share transactions and flushes.
    pub fn alerts(&self) -> Result<AlertStore, StoreError> {
        AlertStore::open_sled(&self.db, self.path.clone())
    }

    /// The stored schema version: a fresh store gets the current one; an
    /// older one is returned for the caller to upgrade; a newer one is
    /// refused before anything is written.
    fn check_schema(&self, meta: &Tree) -> Result<u32, StoreError> {
        let stored = meta
            .get(SCHEMA_KEY)
            .map_err(self.io("read the schema version"))?;
        let sentinel = self.path.join(SENTINEL);
        let Some(bytes) = stored else {
            // sled opens a damaged file without a word and hands back what
            // it could read, often nothing: an empty database in a
            // directory vigie has written to before is that damage.
            if sentinel.exists() {
                return Err(self.corrupt(
                    "the database",
                    "sled opened it empty although vigie had written to it (the file is damaged or truncated)".to_string(),
                ));
            }
            meta.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes()[..])
                .map_err(self.io("write the schema version"))?;
            meta.flush().map_err(self.io("write the schema version"))?;
            self.write_sentinel(&sentinel)?;
            return Ok(SCHEMA_VERSION);
        };
        if !sentinel.exists() {
            self.write_sentinel(&sentinel)?;
        }
        let found = <[u8; 4]>::try_from(bytes.as_ref())
            .map(u32::from_be_bytes)
            .map_err(|_| {
                self.corrupt(
                    "the schema version",
                    format!("{} bytes, not 4", bytes.len()),
                )
            })?;
        match found {
            1 | SCHEMA_NEWEST | SCHEMA_VERSION => Ok(found),
            newer if newer > SCHEMA_VERSION => Err(StoreError::SchemaTooNew {
                path: self.path.clone(),
                found: newer,
                supported: SCHEMA_VERSION,
            }),
            older => Err(self.corrupt("the schema version", format!("unknown version {older}"))),
        }
    }

    /// Marks the directory as one vigie has written to (see
    /// [`SENTINEL`]).
    fn write_sentinel(&self, sentinel: &Path) -> Result<(), StoreError> {
        std::fs::write(
            sentinel,
            "vigie keeps its history here; a database found empty beside this file is damaged\n",
        )
        .map_err(|cause| StoreError::Io {
            path: self.path.clone(),
            action: "mark the store as written".to_string(),
            cause: ::sled::Error::Io(cause),
        })
    }

    /// Schema 1 kept a check's newest results as single keys in `results`,
    /// after its last block; version 2 keeps them in `newest`. Each check's
    /// trailing singles are copied to `newest`, then removed from
    /// `results`, then the version is bumped. An interrupted upgrade leaves
    /// copies in both trees, which every reader skips (a `newest` entry at
    /// or before the check's last `results` entry) and the next open
    /// finishes.
    fn upgrade_from_1(&self, meta: &Tree) -> Result<(), StoreError> {
        let mut ids: Vec<u32> = Vec::new();
        for key in self.checks.iter().keys() {
            let key = key.map_err(self.io("read the checks"))?;
            if let Some((&ID_PREFIX, id)) = key.split_first() {
                ids.extend(be_u32(id));
            }
        }
        for id in ids {
            let mut singles = Vec::new();
            for entry in self.check_range(id, 0).rev() {
                let (key, value) = entry.map_err(self.io("read a check's latest results"))?;
                if !record::is_single(&value) {
                    break;
                }
                singles.push((key, value));
            }
            if singles.is_empty() {
                continue;
            }
            let mut copies = Batch::default();
            let mut removals = Batch::default();
            for (key, value) in singles {
                copies.insert(key.clone(), value);
                removals.remove(key);
            }
            self.newest
                .apply_batch(copies)
                .map_err(self.io("move the newest results (upgrade)"))?;
            self.results
                .apply_batch(removals)
                .map_err(self.io("move the newest results (upgrade)"))?;
        }
        meta.insert(SCHEMA_KEY, &SCHEMA_NEWEST.to_be_bytes()[..])
            .map_err(self.io("write the schema version"))?;
        self.db.flush().map_err(self.io("flush the upgrade"))?;
        Ok(())
    }

    /// Schema 2 had no rollups and no certificate timeline: they are built
    /// once from the stored results (`sled/rollups.rs`), then the version
    /// is bumped. An interrupted build is started again by the next open.
    fn upgrade_from_2(&self, meta: &Tree) -> Result<(), StoreError> {
        tracing::info!(path = %self.path.display(), "building rollups from the stored history (once, for schema 3)");
        self.build_rollups()?;
        self.db.flush().map_err(self.io("flush the rollups"))?;
        meta.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes()[..])
            .map_err(self.io("write the schema version"))?;
        self.db.flush().map_err(self.io("flush the upgrade"))?;
        Ok(())
    }

    /// Removes `newest` entries that a `results` entry already covers: what
    /// a stop between packing a block and removing its singles (or during
    /// the upgrade) left behind.
    fn drop_packed_newest(&self) -> Result<(), StoreError> {
        let mut stale = Batch::default();
        let mut covered: Option<(u32, Option<u64>)> = None;
        for key in self.newest.iter().keys() {
            let key = key.map_err(self.io("read the newest results"))?;
            let id = be_u32(&key[..4.min(key.len())]).unwrap_or_default();
            let until = match covered {
                Some((covered_id, until)) if covered_id == id => until,
                _ => {
                    let until = self.packed_until(id)?;
                    covered = Some((id, until));
                    until
                }
            };
            if until.is_some_and(|until| key_millis_of(&key) <= until) {
                stale.remove(key);
            }
        }
        self.newest
            .apply_batch(stale)
            .map_err(self.io("remove packed copies of the newest results"))
    }

    /// The last result millis that check `id`'s `results` entries cover.
    fn packed_until(&self, id: u32) -> Result<Option<u64>, StoreError> {
        let Some(last) = self.check_range(id, 0).next_back() else {
            return Ok(None);
        };
        let (key, value) = last.map_err(self.io("read a check's latest results"))?;
        let key_ms = key_millis_of(&key);
        let span = record::span(key_ms, &value).map_err(|e| self.corrupt_entry(id, key_ms, e))?;
        Ok(Some(span.last))
    }

    /// Reads the check names, dictionaries, chain keys and chain uses.
    fn load_state(&self) -> Result<State, StoreError> {
        let mut state = State {
            next_id: 1,
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

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation of State happens after the disk write it mirrors
        // succeeded, so a panic cannot leave it describing unwritten data.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The id of `name`, allocating one (and writing both directions of the
    /// mapping, in one batch) the first time.
    fn id_for(&self, state: &mut State, name: &str) -> Result<u32, StoreError> {
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
    fn write_references(
        &self,
        state: &mut State,
        id: u32,
        millis: u64,
        fresh: Vec<String>,
        chain: Option<record::EncodedChain>,
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
    fn decode(
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
        let mut chains: HashMap<ChainKey, Option<record::SharedChain>> = HashMap::new();
        // Sized once from the headers: growing a Vec of thousands of
        // outcomes copies it several times over (a fifth of the time perf
        // saw in a day's history).
        let capacity: u64 = entries
            .iter()
            .filter_map(|(key, value)| record::span(key_millis_of(key), value).ok())
            .map(|span| span.count)
            .sum();
        let mut outcomes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
        let mut reader = record::Reader::default();
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
                let previous = self
                    .newest
                    .insert(result_key(id, millis), value)
                    .map_err(self.io("store a result"))?;
                tail.singles += usize::from(previous.is_none());
                previous
                    .map(|p| self.replaced_record(id, millis, &p))
                    .transpose()?
            }
        };
        if let (None, Some(count)) = (&replaced, state.count.as_mut()) {
            *count += 1;
        }
        if tail.singles >= self.packing.size + self.packing.keep {
            tail = self.pack_tail(id, tail)?;
        }
        state.tails.insert(id, tail);
        Ok(replaced)
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
    fn tail(&self, state: &State, id: u32) -> Result<Tail, StoreError> {
        if let Some(tail) = state.tails.get(&id) {
            return Ok(*tail);
        }
        let packed_until = self.packed_until(id)?;
        let mut singles = 0;
        for key in self.newest_range(id, after(packed_until)).keys() {
            key.map_err(self.io("read a check's latest results"))?;
            singles += 1;
        }
        Ok(Tail {
            packed_until,
            singles,
        })
    }

    /// Moves the oldest of check `id`'s `newest` singles into a block in
    /// `results`. The block is written first: sled's prefix recovery then
    /// never loses a result between the two writes, and a copy left in
    /// `newest` is skipped by readers and removed at the next open.
    fn pack_tail(&self, id: u32, tail: Tail) -> Result<Tail, StoreError> {
        let mut removals = Batch::default();
        let mut results = Vec::new();
        for entry in self
            .newest_range(id, after(tail.packed_until))
            .take(self.packing.size)
        {
            let (key, value) = entry.map_err(self.io("read results to pack"))?;
            let key_ms = key_millis_of(&key);
            let parsed = record::parse_entry(key_ms, &value)
                .map_err(|e| self.corrupt_entry(id, key_ms, e))?;
            results.extend(parsed);
            removals.remove(key);
        }
        let Some(&(first, _)) = results.first() else {
            return Ok(tail);
        };
        let last = results.last().map_or(first, |(millis, _)| *millis);
        self.results
            .insert(&result_key(id, first)[..], record::encode_block(&results))
            .map_err(self.io("pack results into a block"))?;
        self.newest
            .apply_batch(removals)
            .map_err(self.io("pack results into a block"))?;
        Ok(Tail {
            packed_until: Some(last),
            singles: tail.singles.saturating_sub(results.len()),
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
                    && record::span(key_millis_of(key), value).is_ok_and(|span| span.last >= from)
            }))
    }

    /// Entries of check `id` holding its results from `from` to `to` millis,
    /// oldest first: the `results` entry `from` falls into, the later ones,
    /// then the `newest` singles after them. `newest` is read first: a pack
    /// running alongside writes its block before removing the singles, so
    /// this order may see a result twice (the copy is skipped) but never
    /// misses one.
    fn entries(&self, id: u32, from: u64, to: u64) -> Result<Vec<(IVec, IVec)>, StoreError> {
        let mut newest = Vec::new();
        for entry in self.newest.range(result_key(id, from)..=result_key(id, to)) {
            newest.push(entry.map_err(self.io("read history"))?);
        }
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
    /// The `newest` singles, a few per check, are read first, as there,
    /// and kept only when every `results` entry was read: they come after
    /// all of them.
    fn page_entries(
        &self,
        id: u32,
        from: u64,
        limit: usize,
    ) -> Result<Vec<(IVec, IVec)>, StoreError> {
        let mut newest = Vec::new();
        for entry in self.newest_range(id, from) {
            newest.push(entry.map_err(self.io("read history"))?);
        }
        let mut entries: Vec<(IVec, IVec)> = self.block_holding(id, from)?.into_iter().collect();
        let wanted = u64::try_from(limit).unwrap_or(u64::MAX);
        let mut held = 0u64;
        for entry in self.check_range(id, from) {
            if held >= wanted {
                return Ok(entries);
            }
            let (key, value) = entry.map_err(self.io("read history"))?;
            held += record::span(key_millis_of(&key), &value).map_or(1, |span| span.count);
            entries.push((key, value));
        }
        append_newest(&mut entries, newest);
        Ok(entries)
    }

    /// Whether a result key is still in either tree (a sweep running
    /// alongside a read may have removed it).
    fn still_stored(&self, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self
            .newest
            .contains_key(key)
            .map_err(self.io("read history"))?
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
        let Some((key, block)) = holder.filter(|(_, v)| record::is_block(v)) else {
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
            record::parse_entry(key_ms, &block).map_err(|e| self.corrupt_entry(id, key_ms, e))?;
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
            .insert(key, record::encode_block(&results))
            .map_err(self.io("merge a late result into its block"))?;
        Ok(replaced)
    }

    /// `results` entries of check `id` from `from` millis on.
    fn check_range(&self, id: u32, from: u64) -> ::sled::Iter {
        self.results
            .range(result_key(id, from)..=result_key(id, u64::MAX))
    }

    /// `newest` singles of check `id` from `from` millis on.
    fn newest_range(&self, id: u32, from: u64) -> ::sled::Iter {
        self.newest
            .range(result_key(id, from)..=result_key(id, u64::MAX))
    }

    fn chain(&self, key: &ChainKey) -> Result<Option<record::SharedChain>, StoreError> {
        let Some(bytes) = self
            .chains
            .get(key)
            .map_err(self.io("read a certificate chain"))?
        else {
            return Ok(None);
        };
        record::chain_infos(&bytes)
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
                record::span(key_ms, &value).map_err(|e| self.corrupt_entry(id, key_ms, e))?;
            if span.last >= cutoff {
                let mut results = record::parse_entry(key_ms, &value)
                    .map_err(|e| self.corrupt_entry(id, key_ms, e))?;
                results.retain(|(millis, _)| *millis >= cutoff);
                if let Some(&(first, _)) = results.first() {
                    batch.insert(&result_key(id, first)[..], record::encode_block(&results));
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
        let mut batch = Batch::default();
        for key in self
            .newest
            .range(result_key(id, 0)..result_key(id, cutoff))
            .keys()
        {
            batch.remove(key.map_err(self.io("read results to sweep"))?);
            removed += 1;
        }
        self.newest
            .apply_batch(batch)
            .map_err(self.io("remove old results"))?;
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
                    let old = self.results.range(range.clone()).next().is_some()
                        || self.newest.range(range).next().is_some();
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

    fn io(&self, action: &str) -> impl Fn(::sled::Error) -> StoreError + '_ {
        let action = action.to_string();
        move |cause| StoreError::Io {
            path: self.path.clone(),
            action: action.clone(),
            cause,
        }
    }

    fn corrupt_entry(&self, id: u32, millis: u64, detail: impl ToString) -> StoreError {
        let name = self.lock_free_name(id);
        self.corrupt(
            &format!(
                "the result of {name} at {}",
                rfc3339(&time_of_millis(millis))
            ),
            detail,
        )
    }

    /// The name of check `id` from the disk (callers may hold the lock).
    fn lock_free_name(&self, id: u32) -> String {
        let stored = self
            .checks
            .get(prefixed(ID_PREFIX, &id.to_be_bytes()))
            .ok()
            .flatten();
        stored.map_or_else(
            || format!("check id {id}"),
            |name| String::from_utf8_lossy(&name).into_owned(),
        )
    }

    fn corrupt(&self, what: &str, detail: impl ToString) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what: what.to_string(),
            detail: detail.to_string(),
        }
    }

    /// Chains stored (for tests and metrics).
    pub fn chain_count(&self) -> usize {
        self.lock().chains.len()
    }
}

impl SledStore {
    /// [`Store::append`]; a restore's results (`rollups` false) leave the
    /// rollups to [`SledStore::finish_restore`].
    fn append_with(&self, outcome: &Outcome, rollups: bool) -> Result<(), StoreError> {
        let millis = key_millis(outcome)?;
        let mut state = self.lock();
        let id = self.id_for(&mut state, &outcome.name)?;
        let mut fresh = Vec::new();
        let encoded = {
            let dict = state.dicts.get(&id);
            record::encode(outcome, &mut |text| intern(dict, &mut fresh, text))
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
        // `newest` first, as in `entries`.
        let last = match self.newest_range(id, 0).next_back() {
            Some(single) => Some(single),
            None => self.check_range(id, 0).next_back(),
        };
        let Some(last) = last else {
            return Ok(None);
        };
        let (key, value) = last.map_err(self.io("read the latest result"))?;
        let span = record::span(key_millis_of(&key), &value)
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
        let mut leaves: Vec<ServedLeaf> = state
            .rollups
            .leaves
            .get(id)
            .map(|leaves| leaves.values().cloned().collect())
            .unwrap_or_default();
        drop(state);
        sort_timeline(&mut leaves);
        Ok(leaves)
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
        self.write_hot(&mut self.lock())?;
        self.db.flush().map_err(self.io("flush to disk"))?;
        Ok(())
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
            count += record::span(key_ms, &value)
                .map_err(|e| self.corrupt_entry(id, key_ms, e))?
                .count;
        }
        for key in self.newest.iter().keys() {
            key.map_err(self.io("count results"))?;
            count += 1;
        }
        state.count = Some(count);
        Ok(count)
    }
}

/// The newest rollups are written before sled closes the database (see
/// `sled/rollups.rs`); an unclean stop leaves them to the next open.
impl Drop for SledStore {
    fn drop(&mut self) {
        let mut state = self.lock();
        if let Err(err) = self.write_hot(&mut state) {
            tracing::error!(error = %err, "could not write the newest rollups at close; the next open catches them up from the results");
        }
    }
}

impl std::fmt::Debug for SledStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Dict {
    fn push(&mut self, text: String) {
        let position = self.strings.len() as u32;
        self.strings.push(text);
        match &mut self.index {
            Some(index) => {
                index.insert(self.strings[position as usize].clone(), position);
            }
            None if self.strings.len() > DICT_SCAN => {
                let index = self.strings.iter().cloned().zip(0..).collect();
                self.index = Some(index);
            }
            None => {}
        }
    }

    fn find(&self, text: &str) -> Option<u32> {
        match &self.index {
            Some(index) => index.get(text).copied(),
            None => self
                .strings
                .iter()
                .position(|known| known == text)
                .map(|i| i as u32),
        }
    }

    /// Strings are read in key order, so indexes must come 0, 1, 2...
    fn push_loaded(&mut self, index: u32, text: String) -> Result<(), String> {
        if index as usize != self.strings.len() {
            return Err(format!(
                "entry {index} follows entry {}",
                self.strings.len() as i64 - 1
            ));
        }
        self.push(text);
        Ok(())
    }
}

/// The dictionary reference for `text`: an existing entry, a new one (to be
/// written before the result), or inline once the dictionary is full.
fn intern(dict: Option<&Dict>, fresh: &mut Vec<String>, text: &str) -> Str {
    let known = dict.map_or(0, |d| d.strings.len());
    if let Some(index) = dict.and_then(|d| d.find(text)) {
        return Str::Dict(index);
    }
    if let Some(offset) = fresh.iter().position(|f| f == text) {
        return Str::Dict((known + offset) as u32);
    }
    if known + fresh.len() >= DICT_LIMIT {
        return Str::Inline(text.to_string());
    }
    fresh.push(text.to_string());
    Str::Dict((known + fresh.len() - 1) as u32)
}

/// sled reports a held lock as an untyped I/O error whose message is all
/// there is to recognise it by (sled 0.34.7 `Config::try_lock`: "could not
/// acquire lock on ..."); string matching is the last resort here.
fn open_error(dir: &Path, cause: ::sled::Error) -> StoreError {
    let locked = matches!(&cause, ::sled::Error::Io(err)
        if err.to_string().starts_with("could not acquire lock"));
    if locked {
        StoreError::Locked {
            path: dir.to_path_buf(),
        }
    } else {
        StoreError::Open {
            path: dir.to_path_buf(),
            cause,
        }
    }
}

/// The first millis after `until`, or 0 for nothing.
fn after(until: Option<u64>) -> u64 {
    until.map_or(0, |until| until.saturating_add(1))
}

/// Appends the `newest` singles that come after the last of `entries`
/// (a single already packed into that block is not repeated).
fn append_newest(entries: &mut Vec<(IVec, IVec)>, newest: Vec<(IVec, IVec)>) {
    let covered = entries
        .last()
        .and_then(|(key, value)| record::span(key_millis_of(key), value).ok())
        .map(|span| span.last);
    entries.extend(
        newest
            .into_iter()
            .filter(|(key, _)| covered.is_none_or(|until| key_millis_of(key) > until)),
    );
}

/// The millis of a `results` key (12 bytes by construction).
fn key_millis_of(key: &[u8]) -> u64 {
    key.get(4..).and_then(be_u64).unwrap_or_default()
}

fn result_key(id: u32, millis: u64) -> [u8; 12] {
    let mut key = [0; 12];
    key[..4].copy_from_slice(&id.to_be_bytes());
    key[4..].copy_from_slice(&millis.to_be_bytes());
    key
}

fn string_key(id: u32, index: u32) -> [u8; 9] {
    let mut key = [STRING_PREFIX; 9];
    key[1..5].copy_from_slice(&id.to_be_bytes());
    key[5..].copy_from_slice(&index.to_be_bytes());
    key
}

fn use_key(chain: &ChainKey, id: u32) -> [u8; 20] {
    let mut key = [0; 20];
    key[..16].copy_from_slice(chain);
    key[16..].copy_from_slice(&id.to_be_bytes());
    key
}

fn prefixed(prefix: u8, rest: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + rest.len());
    key.push(prefix);
    key.extend_from_slice(rest);
    key
}

/// (check id, index) of a dictionary key, after its prefix.
fn string_position(rest: &[u8]) -> Option<(u32, u32)> {
    if rest.len() != 8 {
        return None;
    }
    Some((be_u32(&rest[..4])?, be_u32(&rest[4..])?))
}

fn chain_key(bytes: &[u8]) -> Option<ChainKey> {
    ChainKey::try_from(bytes).ok()
}

fn be_u32(bytes: &[u8]) -> Option<u32> {
    <[u8; 4]>::try_from(bytes).ok().map(u32::from_be_bytes)
}

fn be_u64(bytes: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(bytes).ok().map(u64::from_be_bytes)
}

fn utf8(bytes: &[u8]) -> Result<String, std::string::FromUtf8Error> {
    String::from_utf8(bytes.to_vec())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use time::Duration as TimeDuration;

    use super::*;
    use crate::store::contract::{chain, up, T0};

    /// Runs `open` again while it finds the database locked, for up to 5 s:
    /// sled's flusher thread lets go of the file lock a moment after the
    /// last handle of this process is dropped (a race a loaded machine
    /// shows). Any other result is returned as it is.
    fn when_unlocked<T>(mut open: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match open() {
                Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    /// Also the replication queue's and the outbox's tests' way to open a
    /// store.
    pub(crate) fn open(dir: &Path) -> SledStore {
        when_unlocked(|| SledStore::open(dir, Duration::from_millis(100))).unwrap()
    }

    fn open_packed(dir: &Path, packing: Packing) -> SledStore {
        when_unlocked(|| SledStore::open_packing(dir, Duration::from_millis(100), packing)).unwrap()
    }

    /// The database itself, for tests that write what this code would not.
    fn raw_db(dir: &Path) -> ::sled::Db {
        when_unlocked(|| ::sled::open(dir).map_err(|cause| open_error(dir, cause))).unwrap()
    }

    crate::store::contract::contract_tests!({
        let dir = tempfile::tempdir().unwrap();
        (open(dir.path()), dir)
    });

    /// The whole contract again with blocks of two and one single kept, so
    /// that every scenario reads, sweeps and replaces through blocks.
    mod packed {
        use super::*;

        crate::store::contract::contract_tests!({
            let dir = tempfile::tempdir().unwrap();
            (open_small_blocks(dir.path()), dir)
        });
    }

    fn open_small_blocks(dir: &Path) -> SledStore {
        let packing = Packing { size: 2, keep: 1 };
        open_packed(dir, packing)
    }

    /// (key millis, span, is a block) of every entry, checking that the
    /// spans of one check never overlap.
    fn entries(store: &SledStore) -> Vec<(u64, record::Span, bool)> {
        let mut entries: Vec<(u64, record::Span, bool)> = Vec::new();
        for entry in store.results.iter() {
            let (key, value) = entry.unwrap();
            let key_ms = key_millis_of(&key);
            let span = record::span(key_ms, &value).unwrap();
            if let Some((_, previous, _)) = entries.last() {
                assert!(
                    previous.last < key_ms,
                    "{previous:?} overlaps entry at {key_ms}"
                );
            }
            entries.push((key_ms, span, record::is_block(&value)));
        }
        entries
    }

    fn minute(n: i64) -> OffsetDateTime {
        T0 + TimeDuration::minutes(n)
    }

    fn minutes(range: std::ops::Range<i64>) -> Vec<Outcome> {
        range.map(|n| up("site", minute(n))).collect()
    }

    #[test]
    fn results_are_packed_and_read_back_through_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let packing = Packing { size: 4, keep: 2 };
        let store = open_packed(dir.path(), packing);
        for outcome in minutes(0..20) {
            store.append(&outcome).unwrap();
        }
        let layout = entries(&store);
        let blocks: Vec<u64> = layout.iter().filter(|e| e.2).map(|e| e.1.count).collect();
        assert_eq!(blocks, [4, 4, 4, 4], "{layout:?}");
        assert_eq!(layout.len(), 4, "only blocks in results");
        assert_eq!(store.newest.len(), 4, "four singles after the blocks");
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

    /// Rewrites a store of this version into the schema 1 layout: the
    /// newest singles back in `results`, after the blocks.
    fn downgrade_to_schema_1(dir: &Path) {
        let db = raw_db(dir);
        let results = db.open_tree("results").unwrap();
        let newest = db.open_tree("newest").unwrap();
        for entry in newest.iter() {
            let (key, value) = entry.unwrap();
            results.insert(key, value).unwrap();
        }
        drop(newest);
        db.drop_tree("newest").unwrap();
        let meta = db.open_tree("meta").unwrap();
        meta.insert(SCHEMA_KEY, &1u32.to_be_bytes()[..]).unwrap();
        db.flush().unwrap();
    }

    #[test]
    fn a_schema_1_store_is_upgraded_without_losing_history() {
        let dir = tempfile::tempdir().unwrap();
        let packing = Packing { size: 4, keep: 2 };
        let open = || open_packed(dir.path(), packing);
        let store = open();
        for outcome in minutes(0..11) {
            store.append(&outcome).unwrap();
            store.append(&up("api", outcome.started_at)).unwrap();
        }
        drop(store);
        downgrade_to_schema_1(dir.path());
        {
            let db = raw_db(dir.path());
            let results = db.open_tree("results").unwrap();
            assert_eq!(
                results.len(),
                2 * (2 + 3),
                "two blocks and three singles each"
            );
        }

        let store = open();
        assert_eq!(store.results.len(), 2 * 2, "only blocks left in results");
        assert_eq!(store.newest.len(), 2 * 3);
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..11));
        assert_eq!(store.len().unwrap(), 22);
        for outcome in minutes(11..16) {
            store.append(&outcome).unwrap();
        }
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..16));
        assert_eq!(store.latest("site").unwrap(), Some(up("site", minute(15))));
        assert_rollups_recompute(&store, "site");
        assert_rollups_recompute(&store, "api");
        drop(store);
        let db = raw_db(dir.path());
        let meta = db.open_tree("meta").unwrap();
        assert_eq!(
            meta.get(SCHEMA_KEY).unwrap().unwrap(),
            SCHEMA_VERSION.to_be_bytes()
        );
    }

    /// Both granularities and the timeline of `name`, against a
    /// recomputation from its raw results.
    fn assert_rollups_recompute(store: &SledStore, name: &str) {
        let raw = store.history(name, OffsetDateTime::UNIX_EPOCH).unwrap();
        for granularity in Granularity::ALL {
            assert_eq!(
                store
                    .rollups(name, granularity, OffsetDateTime::UNIX_EPOCH)
                    .unwrap(),
                Rollup::from_outcomes(granularity, &raw),
                "{granularity:?}"
            );
        }
        assert_eq!(
            store.certificates(name).unwrap(),
            ServedLeaf::from_outcomes(&raw)
        );
    }

    /// Rewrites a store of this version into the schema 2 layout: no
    /// rollups, no timeline.
    fn downgrade_to_schema_2(dir: &Path) {
        let db = raw_db(dir);
        db.drop_tree("rollups").unwrap();
        db.drop_tree("leaves").unwrap();
        let meta = db.open_tree("meta").unwrap();
        meta.insert(SCHEMA_KEY, &2u32.to_be_bytes()[..]).unwrap();
        db.flush().unwrap();
    }

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
    fn a_schema_2_store_gets_its_rollups_built_once_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_small_blocks(dir.path());
        let day = |d: i64| T0 + TimeDuration::days(d);
        for d in -3..=0 {
            for h in 0..3 {
                let at = day(d) + TimeDuration::hours(h);
                let mut outcome = up("site", at);
                outcome.tls.as_mut().unwrap().chain =
                    chain(if d < -1 { "old.example" } else { "new.example" }, at).into();
                store.append(&outcome).unwrap();
                store.append(&up("api", at)).unwrap();
            }
        }
        drop(store);
        downgrade_to_schema_2(dir.path());

        let store = open_small_blocks(dir.path());
        assert_rollups_recompute(&store, "site");
        assert_rollups_recompute(&store, "api");
        assert_eq!(store.certificates("site").unwrap().len(), 2);
        assert_eq!(
            store
                .rollups("site", Granularity::Day, OffsetDateTime::UNIX_EPOCH)
                .unwrap()
                .len(),
            4
        );
        store.append(&up("api", day(1))).unwrap();
        assert_rollups_recompute(&store, "api");
        drop(store);
        {
            let db = raw_db(dir.path());
            let meta = db.open_tree("meta").unwrap();
            assert_eq!(
                meta.get(SCHEMA_KEY).unwrap().unwrap(),
                SCHEMA_VERSION.to_be_bytes()
            );
        }
        // Built once: rollups lost behind the store's back are not built
        // again from every result; only the day before the newest result
        // is caught up (what an unclean stop may have left unwritten).
        {
            let db = raw_db(dir.path());
            db.drop_tree("rollups").unwrap();
            db.flush().unwrap();
        }
        let store = open_small_blocks(dir.path());
        let days = store
            .rollups("api", Granularity::Day, OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        assert_eq!(
            days.iter()
                .map(|d| (d.start, d.known()))
                .collect::<Vec<_>>(),
            [
                (day(0) - TimeDuration::hours(7), 3),
                (day(1) - TimeDuration::hours(7), 1)
            ]
        );
    }

    #[test]
    fn a_single_left_behind_by_a_pack_is_read_once_and_dropped_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_small_blocks(dir.path());
        for outcome in minutes(0..5) {
            store.append(&outcome).unwrap();
        }
        let id = ids(&store)["site"];
        // A stop between writing a block and removing its singles.
        let packed = key_millis(&up("site", minute(1))).unwrap();
        let mut fresh = Vec::new();
        let copy = {
            let state = store.lock();
            record::encode(&up("site", minute(1)), &mut |text| {
                intern(state.dicts.get(&id), &mut fresh, text)
            })
        };
        assert!(fresh.is_empty());
        store
            .newest
            .insert(result_key(id, packed), copy.value)
            .unwrap();
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..5));
        drop(store);

        let store = open_small_blocks(dir.path());
        assert!(!store.newest.contains_key(result_key(id, packed)).unwrap());
        assert_eq!(store.len().unwrap(), 5);
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..5));
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

    fn ids(store: &SledStore) -> HashMap<String, u32> {
        store.lock().ids.clone()
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
    fn a_second_open_is_told_the_store_is_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let _first = open(dir.path());
        let err = SledStore::open(dir.path(), Duration::from_secs(1)).unwrap_err();
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "the store at {} is in use by another process \
                 (is `vigie run` running? use its API, or stop it)",
                dir.path().display()
            )
        );
    }

    #[test]
    fn a_newer_schema_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path()));
        {
            let db = raw_db(dir.path());
            let meta = db.open_tree("meta").unwrap();
            meta.insert(SCHEMA_KEY, &4u32.to_be_bytes()[..]).unwrap();
            db.flush().unwrap();
        }
        let err =
            when_unlocked(|| SledStore::open(dir.path(), Duration::from_secs(1))).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooNew { found: 4, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the store at {} has schema version 4, but this vigie reads only version 3: \
                 a newer vigie wrote it; run that version, or point state_dir at another directory",
                dir.path().display()
            )
        );
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
        assert_eq!(store.results.len() + store.newest.len(), 4);
    }
}
