//! The replication queue of the sled store: which results have not been
//! copied off-region yet, in the order they were appended, and the cursor
//! that says how far the copy has got. This file keeps the books (the
//! tree, the cursor, the batch in flight); `sled/replication.rs` is what
//! the replicator (`replicate/`) calls. It uploads nothing and knows no
//! bucket.
//!
//! # Why a queue, not a cursor over `results`
//!
//! `results` is ordered by check id, then time: a result appended now for
//! check 1 sorts before yesterday's results of check 2, and a probe that
//! started at 10:00:00 is appended after one that started at 10:00:05 and
//! finished first. No position in `results` separates "replicated" from
//! "not yet". So each append (while replication is enabled) also writes
//! `replication` / seq -> results key, under the store's lock, so sequence
//! numbers follow append order exactly. The cursor in `meta` is the last
//! sequence number shipped; entries at or below it are removed once it
//! has advanced.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ::sled::{Db, Tree};

use super::state::State;
use crate::store::error::StoreError;
use crate::store::format::keys::{be_u64, result_key, seq_key, CURSOR_KEY, PENDING_KEY};

/// The queue tree: seq (u64 BE) -> results key (check id u32 BE ++ millis
/// u64 BE).
const QUEUE_TREE: &str = "replication";

/// Queue bookkeeping held by the [`SledStore`](super::SledStore); see the
/// module docs.
pub(super) struct Queue {
    pub(super) tree: Tree,
    pub(super) meta: Tree,
    /// Appends queue their result only while this is set (the daemon with
    /// `[replication]`); `vigie check`, `history` and `restore` never do.
    pub(super) enabled: AtomicBool,
    /// The next sequence number. Allocated and written under the store's
    /// lock (the `&mut State` parameters prove it), so an entry below it is
    /// always on disk.
    pub(super) next_seq: AtomicU64,
    /// Mirror of `meta` / `replication_cursor` (0 when absent).
    pub(super) cursor: AtomicU64,
    /// Entries above the cursor.
    pub(super) backlog: AtomicU64,
}

/// The batch in flight (`meta` / `replication_pending`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) after: u64,
    pub(super) last: u64,
    pub(super) formed_ms: u64,
}

impl Queue {
    /// Opens the queue tree and reads the cursor, the batch in flight and
    /// the backlog (one walk over the unshipped entries).
    pub(super) fn open(db: &Db, meta: &Tree, dir: &Path) -> Result<Queue, StoreError> {
        let io = |action: &str| StoreError::io_at(dir, action);
        let corrupt = |what: &str| StoreError::Corrupt {
            path: dir.to_path_buf(),
            what: what.to_string(),
            detail: "not the expected length".to_string(),
        };
        let tree = db.open_tree(QUEUE_TREE).map_err(|cause| StoreError::Open {
            path: dir.to_path_buf(),
            cause,
        })?;
        let cursor = match meta
            .get(CURSOR_KEY)
            .map_err(io("read the replication cursor"))?
        {
            Some(bytes) => be_u64(&bytes).ok_or_else(|| corrupt("the replication cursor"))?,
            None => 0,
        };
        let pending = match meta
            .get(PENDING_KEY)
            .map_err(io("read the replication batch in flight"))?
        {
            Some(bytes) => Some(
                parse_pending(&bytes).ok_or_else(|| corrupt("the replication batch in flight"))?,
            ),
            None => None,
        };
        let last_key = match tree.last().map_err(io("read the replication queue"))? {
            Some((key, _)) => be_u64(&key).ok_or_else(|| corrupt("a replication queue key"))?,
            None => 0,
        };
        let mut backlog = 0;
        for key in tree.range(seq_key(cursor.saturating_add(1))..).keys() {
            key.map_err(io("count the replication backlog"))?;
            backlog += 1;
        }
        let highest = cursor.max(last_key).max(pending.map_or(0, |p| p.last));
        Ok(Queue {
            tree,
            meta: meta.clone(),
            enabled: AtomicBool::new(false),
            next_seq: AtomicU64::new(highest.saturating_add(1)),
            cursor: AtomicU64::new(cursor),
            backlog: AtomicU64::new(backlog),
        })
    }

    /// Queues result (`id`, `millis`) if replication is enabled. Called by
    /// `append` under the store's lock, after the result is written.
    pub(super) fn enqueue(
        &self,
        _locked: &mut State,
        id: u32,
        millis: u64,
    ) -> Result<(), ::sled::Error> {
        if !self.enabled.load(Ordering::Acquire) {
            return Ok(());
        }
        let seq = self.next_seq.fetch_add(1, Ordering::AcqRel);
        self.tree
            .insert(seq_key(seq), &result_key(id, millis)[..])?;
        self.backlog.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    pub(super) fn pending(&self) -> Result<Option<Pending>, ::sled::Error> {
        Ok(self
            .meta
            .get(PENDING_KEY)?
            .and_then(|bytes| parse_pending(&bytes)))
    }

    pub(super) fn started(&self) -> Result<bool, ::sled::Error> {
        self.meta.contains_key(CURSOR_KEY)
    }
}

pub(super) fn pending_bytes(pending: &Pending) -> [u8; 24] {
    let mut bytes = [0; 24];
    bytes[..8].copy_from_slice(&pending.after.to_be_bytes());
    bytes[8..16].copy_from_slice(&pending.last.to_be_bytes());
    bytes[16..].copy_from_slice(&pending.formed_ms.to_be_bytes());
    bytes
}

pub(super) fn parse_pending(bytes: &[u8]) -> Option<Pending> {
    if bytes.len() != 24 {
        return None;
    }
    Some(Pending {
        after: be_u64(&bytes[..8])?,
        last: be_u64(&bytes[8..16])?,
        formed_ms: be_u64(&bytes[16..])?,
    })
}
