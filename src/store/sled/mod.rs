//! The on-disk backend: sled 0.34 (the stable line), one database in the
//! daemon's `state_dir`, laid out as `format/mod.rs` describes. This file
//! opens it and holds the registry of its trees; what is done with them is
//! in the files beside it, each the only writer of its trees:
//!
//! - `history.rs`: the results (`results`, and the unpacked singles), the
//!   check ids and dictionaries (`checks`), the chains (`chains`,
//!   `chain_uses`): the [`Store`](crate::store::Store) contract;
//! - `journal.rs` and `singles.rs`: the unpacked singles, in memory and in
//!   the store's own journal file beside sled's (`newest.journal`);
//! - `rollups.rs`: the rollups and the certificate timeline (`rollups`,
//!   `leaves`);
//! - `queue.rs` and `replication.rs`: the replication queue (`replication`,
//!   its cursor in `meta`) and what the replicator calls;
//! - `upgrade.rs`: the schema version and the upgrades at open;
//! - `state.rs`: what appends keep in memory.
//!
//! The alert trees and the outbox share the database
//! ([`SledStore::alerts`]; `store/alerts.rs`, `store/outbox.rs`).
//!
//! Durability. sled keeps writes in memory; the journal's flusher has
//! sled write them out every `flush_every` (and so do
//! [`Store::flush`](crate::store::Store::flush) and dropping the store),
//! whether or not there are results to journal: the alert trees and the
//! outbox count on it too. On reopening after an unclean stop (kill
//! -9, OOM, power loss), sled recovers its log up to the first torn or
//! missing write, so what survives of sled is a prefix of what was
//! written, across all trees. That prefix property is what lets an
//! append write the check's id, dictionary strings, chain and chain use
//! *before* the result that refers to them, instead of in a transaction.
//!
//! The unpacked results are not in sled but in the journal file
//! (`journal.rs`), flushed on the same occasions: a flush takes the
//! frames appends buffered, calls sled's flush, then writes and `fsync`s
//! them, so a result in the journal never survives without what it
//! refers to; and a pack moves into a block only results whose frame is
//! on disk, so a block never holds a result appended after one the
//! journal lost. An unclean stop thus loses at most what was appended
//! during the last `flush_every`, and what survives is the results
//! appended up to some point, every check alike
//! (tests/process/store_crash.rs kills a writer repeatedly and checks
//! exactly this). A late result (one that goes into an existing block)
//! is written to sled directly and may outlive results appended before it;
//! a queue entry or a rollup sled kept for a result the journal lost is
//! skipped by the replicator and repaired at open (`rollups.rs`).
//!
//! Locking. sled locks the directory: a second process gets
//! [`StoreError::Locked`], and the journal is opened only once sled's
//! open succeeded. Inside the process, appends and the chain collection
//! of a sweep are serialised by one mutex over the in-memory indexes
//! (names, dictionaries, known chains and uses, the singles); reads take
//! it only to look up a check and copy its few singles.
//!
//! Memory. The page cache is capped at [`CACHE_BYTES`], not sled's 1 GiB
//! default: the daemon runs on a small VM, and reads are mostly "the last
//! day of one check".

mod history;
mod journal;
mod queue;
pub(super) mod replication;
mod restore;
mod rollups;
mod singles;
mod state;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(any(test, feature = "testing"))]
mod unlocked;
mod upgrade;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ::sled::{Db, Tree};

use self::journal::{Flush, Flusher, Journal};
use self::queue::Queue;
pub use self::restore::Restoring;
use self::state::State;
use crate::store::alerts::AlertStore;
use crate::store::error::{rfc3339, StoreError};
use crate::store::format::keys::{prefixed, time_of_millis, ID_PREFIX};
use crate::store::format::schema::{SCHEMA_COLUMNS, SCHEMA_JOURNAL, SCHEMA_NEWEST, SCHEMA_ROLLUPS};

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

/// sled's own flusher runs this many times less often than `flush_every`:
/// the journal's flusher (`journal.rs`) flushes sled every `flush_every`
/// already, since it must before each write of the journal, and two
/// threads flushing sled each second made it roll and write twice as many
/// I/O buffers. sled's flusher is still what cleans its file (after each
/// of its flushes, for up to half its period), so it is slowed, not
/// stopped. `cargo bench --bench daemon -- 10000 60s 2m`: 117.8 MiB peak
/// and 13.4% of a core with both each second, 107.7 MiB and 10.9% with
/// sled's every 8 s.
const SLED_FLUSHER_SLOWER: u64 = 8;

/// How results are grouped into blocks.
#[derive(Debug, Clone, Copy)]
pub struct Packing {
    /// Results per block packed from the singles (these small blocks are
    /// then merged into full ones of 120, `sled/history.rs`).
    pub size: usize,
    /// The newest results a check keeps as single keys.
    pub keep: usize,
}

impl Packing {
    /// Ten minutes of a check probed every 30 s per block, two minutes
    /// single. What a check has not packed yet is held in memory (and in
    /// the journal file): when it was a sled tree, with blocks of 60, a
    /// process appending 1000 checks' results grew to 61 MiB RSS within
    /// six hours' worth and stayed there; with blocks of 20, 33 MiB
    /// (`benches/store.rs` at 1000 x 720, RSS sampled, 16 MiB cache;
    /// blocks of 12: 36 MiB). Smaller blocks also answer `history` faster
    /// (fewer singles to decode one by one: 1.2 ms against 3.1 ms for 720
    /// results) at about 1 byte more of key and value per result.
    pub const DEFAULT: Packing = Packing { size: 20, keep: 4 };
}

/// History in a sled database: the registry of its trees, each written
/// by one file beside this one.
pub struct SledStore {
    path: PathBuf,
    db: Db,
    /// Blocks of each check's results, and late singles (`history.rs`).
    results: Tree,
    /// Check names, ids and dictionaries (`history.rs`).
    checks: Tree,
    /// Certificate chains, and which check used each when (`history.rs`).
    chains: Tree,
    chain_uses: Tree,
    packing: Packing,
    /// The replication queue and cursor (`queue.rs`, `replication.rs`).
    replication: Queue,
    /// Rollups and the certificate timeline (`rollups.rs`).
    rollup_trees: RollupTrees,
    /// False only in benchmarks ([`SledStore::without_rollups`]).
    keep_rollups: bool,
    /// Shared with the journal's flusher, which takes the buffered frames.
    state: Arc<Mutex<State>>,
    /// The file of the unpacked singles (`journal.rs`).
    journal: Arc<Journal>,
    /// Flushes the journal every `flush_every`; `None` when that is zero
    /// (and until the open is done).
    flusher: Option<Flusher>,
}

/// The rollups' two trees (`sled/rollups.rs`).
struct RollupTrees {
    rollups: Tree,
    leaves: Tree,
}

impl SledStore {
    /// Opens (or creates) the database in `dir`. `flush_every` bounds what
    /// an unclean stop loses; zero turns the background flush off (only
    /// [`Store::flush`](crate::store::Store::flush) and a clean close write).
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
            .flush_every_ms(flush_ms.map(|ms| ms.saturating_mul(SLED_FLUSHER_SLOWER)))
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
        // Before anything of ours is written: a newer schema is refused
        // with its files untouched.
        let found = Self::check_schema(dir, &meta)?;
        let replication = Queue::open(&db, &meta, dir)?;
        let rollup_trees = RollupTrees {
            rollups: tree("rollups")?,
            leaves: tree("leaves")?,
        };
        let (journal, replay) = Journal::open(dir)?;
        let mut store = SledStore {
            path: dir.to_path_buf(),
            results: tree("results")?,
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
            state: Arc::new(Mutex::new(State::default())),
            journal: Arc::new(journal),
            flusher: None,
            db,
        };
        if found < SCHEMA_NEWEST {
            store.upgrade_from_1(&meta)?;
        }
        let mut state = store.load_state()?;
        store.replay(&mut state, &replay)?;
        drop(replay);
        *store.lock() = state;
        store.journal.set_live();
        if found < SCHEMA_JOURNAL {
            store.move_newest_to_journal()?;
        }
        if found < SCHEMA_ROLLUPS {
            store.upgrade_from_2(&meta)?;
        }
        if found < SCHEMA_COLUMNS {
            store.upgrade_from_3(&meta)?;
        }
        if found < SCHEMA_JOURNAL {
            store.upgraded_to(&meta, SCHEMA_JOURNAL)?;
        }
        let repaired = store.repair_rollups()?;
        if repaired > 0 {
            tracing::info!(
                repaired,
                "rollups caught up with results stored before an unclean stop"
            );
        }
        if let Some(ms) = flush_ms {
            store.flusher = Some(Flusher::spawn(
                Duration::from_millis(ms),
                Arc::clone(&store.journal),
                Arc::clone(&store.state),
                store.db.clone(),
            )?);
        }
        Ok(store)
    }

    /// Flushes sled, then the journal (`journal.rs`).
    fn flush_journal(&self, why: Flush) -> Result<(), StoreError> {
        self.journal.flush(&self.state, &self.db, why)
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

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation of State happens after the disk write it mirrors
        // succeeded, so a panic cannot leave it describing unwritten data.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn io(&self, action: &str) -> impl Fn(::sled::Error) -> StoreError {
        StoreError::io_at(&self.path, action)
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
}

/// The newest rollups are written before sled closes the database (see
/// `sled/rollups.rs`); an unclean stop leaves them to the next open. Then
/// the journal is flushed (after sled) and its flusher stopped.
impl Drop for SledStore {
    fn drop(&mut self) {
        drop(self.flusher.take());
        if let Err(err) = self.write_hot(&mut self.lock()) {
            tracing::error!(error = %err, "could not write the newest rollups at close; the next open catches them up from the results");
        }
        if let Err(err) = self.flush_journal(Flush::Everything) {
            tracing::error!(error = %err, "could not write the journal of the newest results at close; the results of the last flush interval are lost");
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
