//! What appends need to know without reading the disk, held in memory
//! under the store's one mutex and rebuilt at open (`sled/history.rs`
//! reads the checks, dictionaries and chains, `sled/rollups.rs` the
//! timeline, `sled/journal.rs` the unpacked results): the check ids,
//! each check's dictionary, the chains and their uses, where each check's
//! unpacked results start, the unpacked results themselves, and the
//! newest rollups.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::singles::Singles;
use crate::store::format::codec::Str;
use crate::store::format::keys::ChainKey;
use crate::store::rollup::{Granularity, Rollup, Timeline};

/// Dictionary entries per check; strings beyond are stored inline, so a
/// field that turns out to vary (a redirect target with a session in its
/// path) cannot grow a dictionary without bound.
pub(super) const DICT_LIMIT: usize = 1024;

/// What appends need to know without reading the disk; rebuilt at open.
#[derive(Default)]
pub(super) struct State {
    pub(super) ids: HashMap<String, u32>,
    pub(super) dicts: HashMap<u32, Dict>,
    pub(super) next_id: u32,
    pub(super) chains: HashSet<ChainKey>,
    /// (chain, check id) -> last use written to `chain_uses`.
    pub(super) uses: HashMap<(ChainKey, u32), u64>,
    /// Number of results, once counted (see [`Store::len`](crate::store::Store::len)).
    pub(super) count: Option<u64>,
    /// Per check, what follows its last block; read at its first append.
    pub(super) tails: HashMap<u32, Tail>,
    /// The newest rollups and every timeline (`sled/rollups.rs`).
    pub(super) rollups: Cache,
    /// Each check's unpacked results (`sled/singles.rs`).
    pub(super) singles: Singles,
    /// Journal frames buffered since the last journal flush
    /// (`sled/journal.rs`).
    pub(super) unwritten: Vec<u8>,
    /// The journal epoch frames buffered now belong to (the flushes
    /// taken so far, plus one).
    pub(super) epoch: u32,
    /// The last epoch whose frames are on disk (0: what the file held at
    /// open).
    pub(super) durable_epoch: u32,
    /// Checks with a pack waiting for their singles' epoch to be durable.
    pub(super) deferred_packs: BTreeSet<u32>,
}

/// The unpacked end of a check's results (its singles).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tail {
    /// The last result its `results` entries cover, if any.
    pub(super) packed_until: Option<u64>,
    /// Singles after it.
    pub(super) singles: usize,
    /// Results in the entries at the end of `results` that hold fewer than
    /// [`MERGED`](super::history::MERGED) each: what the next merge
    /// gathers into a full block.
    pub(super) unmerged: usize,
}

/// A check's append-only dictionary of recurring strings.
#[derive(Default)]
pub(super) struct Dict {
    pub(super) strings: Vec<String>,
    /// Built once the dictionary outgrows [`DICT_SCAN`]: a typical check has
    /// under ten strings, and 10,000 checks' hash maps (with a second copy
    /// of every string) were megabytes of the daemon's memory.
    pub(super) index: Option<HashMap<String, u32>>,
}

/// Dictionaries up to this size are searched in order.
const DICT_SCAN: usize = 16;

impl Dict {
    pub(super) fn push(&mut self, text: String) {
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

    pub(super) fn find(&self, text: &str) -> Option<u32> {
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
    pub(super) fn push_loaded(&mut self, index: u32, text: String) -> Result<(), String> {
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
pub(super) fn intern(dict: Option<&Dict>, fresh: &mut Vec<String>, text: &str) -> Str {
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

/// What appends keep in memory (inside the store's [`State`]).
#[derive(Default)]
pub(super) struct Cache {
    /// Each check's newest bucket of each granularity.
    pub(super) hot: HashMap<(u32, Granularity), Hot>,
    /// Appends of each check since its hot buckets were last written.
    pub(super) unwritten: HashMap<u32, u32>,
    /// Every check's timeline, by fingerprint.
    pub(super) leaves: HashMap<u32, Timeline>,
    /// (check, day) a restore put results into, until `finish_restore`.
    pub(super) restored: BTreeSet<(u32, u64)>,
}

/// A bucket and the newest result (key millis) it counts.
pub(super) struct Hot {
    pub(super) rollup: Rollup,
    pub(super) through: u64,
}
