//! The schema at open: the version a store holds is read (a fresh store
//! gets the current one, a newer one is refused before anything is
//! written, a database found empty beside the sentinel is damage), and an
//! older layout is brought up to this one. What each version changed is
//! in `format/mod.rs`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use ::sled::{Batch, Tree};

use super::history::MERGED;
use super::journal::Flush;
use super::SledStore;
use crate::store::error::StoreError;
use crate::store::format::codec;
use crate::store::format::entries;
use crate::store::format::keys::{be_u32, key_millis_of, result_key, ID_PREFIX};
use crate::store::format::schema::{
    SCHEMA_COLUMNS, SCHEMA_JOURNAL, SCHEMA_KEY, SCHEMA_NEWEST, SCHEMA_ROLLUPS, SCHEMA_VERSION,
    SENTINEL,
};

/// The tree of the singles in schemas 2 to 4.
const NEWEST_TREE: &str = "newest";

impl SledStore {
    /// The stored schema version of the store in `dir`: a fresh store
    /// gets the current one; an older one is returned for the caller to
    /// upgrade; a newer one is refused before anything is written.
    pub(super) fn check_schema(dir: &Path, meta: &Tree) -> Result<u32, StoreError> {
        let io = |action: &str| StoreError::io_at(dir, action);
        let corrupt = |what: &str, detail: String| StoreError::Corrupt {
            path: dir.to_path_buf(),
            what: what.to_string(),
            detail,
        };
        let stored = meta
            .get(SCHEMA_KEY)
            .map_err(io("read the schema version"))?;
        let sentinel = dir.join(SENTINEL);
        let Some(bytes) = stored else {
            // sled opens a damaged file without a word and hands back what
            // it could read, often nothing: an empty database in a
            // directory vigie has written to before is that damage.
            if sentinel.exists() {
                return Err(corrupt(
                    "the database",
                    "sled opened it empty although vigie had written to it (the file is damaged or truncated)".to_string(),
                ));
            }
            meta.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes()[..])
                .map_err(io("write the schema version"))?;
            meta.flush().map_err(io("write the schema version"))?;
            write_sentinel(dir, &sentinel)?;
            return Ok(SCHEMA_VERSION);
        };
        if !sentinel.exists() {
            write_sentinel(dir, &sentinel)?;
        }
        let found = <[u8; 4]>::try_from(bytes.as_ref())
            .map(u32::from_be_bytes)
            .map_err(|_| {
                corrupt(
                    "the schema version",
                    format!("{} bytes, not 4", bytes.len()),
                )
            })?;
        match found {
            1 | SCHEMA_NEWEST | SCHEMA_ROLLUPS | SCHEMA_COLUMNS | SCHEMA_JOURNAL => Ok(found),
            newer if newer > SCHEMA_VERSION => Err(StoreError::SchemaTooNew {
                path: dir.to_path_buf(),
                found: newer,
                supported: SCHEMA_VERSION,
            }),
            older => Err(corrupt(
                "the schema version",
                format!("unknown version {older}"),
            )),
        }
    }

    /// Schema 1 kept a check's newest results as single keys in `results`,
    /// after its last block; version 2 keeps them in `newest` (which
    /// [`SledStore::move_newest_to_journal`] then moves on). Each check's
    /// trailing singles are copied to `newest`, then removed from
    /// `results`, then the version is bumped. An interrupted upgrade leaves
    /// copies in both trees; the move skips those a `results` entry
    /// covers, and the next open finishes the upgrade.
    pub(super) fn upgrade_from_1(&self, meta: &Tree) -> Result<(), StoreError> {
        let newest = self
            .db
            .open_tree(NEWEST_TREE)
            .map_err(self.io("open the newest results (upgrade)"))?;
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
                if !codec::is_single(&value) {
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
            newest
                .apply_batch(copies)
                .map_err(self.io("move the newest results (upgrade)"))?;
            self.results
                .apply_batch(removals)
                .map_err(self.io("move the newest results (upgrade)"))?;
        }
        self.upgraded_to(meta, SCHEMA_NEWEST)
    }

    /// Schema 2 had no rollups and no certificate timeline: they are built
    /// once from the stored results (`sled/rollups.rs`), then the version
    /// is bumped. An interrupted build is started again by the next open.
    pub(super) fn upgrade_from_2(&self, meta: &Tree) -> Result<(), StoreError> {
        tracing::info!(path = %self.path.display(), "building rollups from the stored history (once, for schema 3)");
        self.build_rollups()?;
        self.db.flush().map_err(self.io("flush the rollups"))?;
        self.upgraded_to(meta, SCHEMA_ROLLUPS)
    }

    /// Schema 3 wrote blocks of 20 records one after the other (LZ4);
    /// version 4 writes them column-wise, [`MERGED`] results to a block
    /// (the singles are not in `results`: in memory, by then).
    /// Each check's entries are rewritten in order: as soon as the results
    /// read add up to a full block, they are written as blocks (the rest
    /// as one smaller block) in the batch that removes the entries they
    /// came from, so a stop never loses or doubles a result. Then the
    /// version is bumped; an interrupted upgrade is done again, whole, by
    /// the next open (rewriting a column-wise block gives the same block).
    pub(super) fn upgrade_from_3(&self, meta: &Tree) -> Result<(), StoreError> {
        tracing::info!(path = %self.path.display(), "rewriting the stored history column-wise (once, for schema 4)");
        let mut ids: Vec<u32> = self.lock().ids.values().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let mut batch = Batch::default();
            let mut results = Vec::new();
            for entry in self.check_range(id, 0) {
                let (key, value) = entry.map_err(self.io("read the history (upgrade)"))?;
                let key_ms = key_millis_of(&key);
                results.extend(
                    entries::parse_entry(key_ms, &value)
                        .map_err(|e| self.corrupt_entry(id, key_ms, e))?,
                );
                batch.remove(key);
                if results.len() >= MERGED {
                    self.rewrite_blocks(id, &mut batch, &mut results)?;
                }
            }
            self.rewrite_blocks(id, &mut batch, &mut results)?;
        }
        self.db
            .flush()
            .map_err(self.io("flush the rewritten history"))?;
        self.upgraded_to(meta, SCHEMA_COLUMNS)
    }

    /// Schema 4 kept the singles in the `newest` tree; version 5 keeps
    /// them in memory and in the journal file (`sled/journal.rs`). Those a
    /// `results` entry does not cover (copies a pack or an upgrade left
    /// behind are dropped) join what the journal replayed, the journal is
    /// checkpointed (written whole and `fsync`ed), and only then is the
    /// tree emptied and dropped. The caller bumps the version once the
    /// other upgrades are done; a stop before that finds the tree gone
    /// (or still full: the same singles again) and the journal holding
    /// them.
    pub(super) fn move_newest_to_journal(&self) -> Result<(), StoreError> {
        let exists = self
            .db
            .tree_names()
            .iter()
            .any(|name| name.as_ref() == NEWEST_TREE.as_bytes());
        if !exists {
            return Ok(());
        }
        let newest = self
            .db
            .open_tree(NEWEST_TREE)
            .map_err(self.io("open the newest results (upgrade)"))?;
        let mut moved = 0;
        {
            let mut state = self.lock();
            let known: HashSet<u32> = state.ids.values().copied().collect();
            let mut covered: HashMap<u32, Option<u64>> = HashMap::new();
            for entry in newest.iter() {
                let (key, value) = entry.map_err(self.io("read the newest results (upgrade)"))?;
                let Some(id) = be_u32(&key[..4.min(key.len())]) else {
                    continue;
                };
                let millis = key_millis_of(&key);
                if !known.contains(&id) {
                    continue;
                }
                let until = match covered.get(&id) {
                    Some(until) => *until,
                    None => *covered.entry(id).or_insert(self.packed_until(id)?),
                };
                if until.is_some_and(|until| millis <= until) {
                    continue;
                }
                state.singles.insert(id, millis, &value, 0);
                moved += 1;
            }
            state.tails.clear();
            state.count = None;
        }
        self.flush_journal(Flush::Checkpoint)?;
        newest
            .clear()
            .map_err(self.io("empty the newest results tree (upgrade)"))?;
        drop(newest);
        self.db
            .drop_tree(NEWEST_TREE)
            .map_err(self.io("drop the newest results tree (upgrade)"))?;
        self.db.flush().map_err(self.io("flush the upgrade"))?;
        tracing::info!(path = %self.path.display(), moved, "moved the newest results from sled into the journal file (once, for schema 5)");
        Ok(())
    }

    /// An upgrade step is done: the store now holds `version`, on disk.
    pub(super) fn upgraded_to(&self, meta: &Tree, version: u32) -> Result<(), StoreError> {
        meta.insert(SCHEMA_KEY, &version.to_be_bytes()[..])
            .map_err(self.io("write the schema version"))?;
        self.db.flush().map_err(self.io("flush the upgrade"))?;
        Ok(())
    }

    /// Writes `results` of check `id` as column-wise blocks in `batch`
    /// (which removes the entries they were read from), and empties both.
    fn rewrite_blocks(
        &self,
        id: u32,
        batch: &mut Batch,
        results: &mut Vec<(u64, codec::Decoded)>,
    ) -> Result<(), StoreError> {
        for block in results.chunks(MERGED) {
            batch.insert(
                &result_key(id, block[0].0)[..],
                entries::encode_block(block),
            );
        }
        self.results
            .apply_batch(std::mem::take(batch))
            .map_err(self.io("rewrite the history (upgrade)"))?;
        results.clear();
        Ok(())
    }
}

/// Marks the directory as one vigie has written to (see [`SENTINEL`]).
fn write_sentinel(dir: &Path, sentinel: &Path) -> Result<(), StoreError> {
    std::fs::write(
        sentinel,
        "vigie keeps its history here; a database found empty beside this file is damaged\n",
    )
    .map_err(|cause| StoreError::Io {
        path: dir.to_path_buf(),
        action: "mark the store as written".to_string(),
        cause: ::sled::Error::Io(cause),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::{Duration as TimeDuration, OffsetDateTime};

    use super::*;
    use crate::store::contract::{chain, up, T0};
    use crate::store::format::keys::{key_millis, result_key};
    use crate::store::sled::journal;
    use crate::store::sled::state::intern;
    use crate::store::sled::tests::{
        assert_rollups_recompute, close, ids, journal_frames, journal_into_tree, minute, minutes,
        open, open_packed, open_small_blocks, raw_db, singles, when_unlocked,
    };
    use crate::store::sled::Packing;
    use crate::store::{Granularity, Store};

    /// Rewrites a store of this version into the schema 1 layout: the
    /// newest singles back in `results`, after the blocks.
    fn downgrade_to_schema_1(dir: &Path) {
        let db = raw_db(dir);
        journal_into_tree(dir, &db, "results");
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
            store.flush().unwrap();
        }
        close(store);
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
        assert_eq!(
            store.results.len(),
            2,
            "only blocks left in results, one a check since schema 4"
        );
        assert_eq!(singles(&store), 2 * 3);
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
        assert_schema_is_current(dir.path());
    }

    /// The store in `dir` (closed) records the current schema version.
    fn assert_schema_is_current(dir: &Path) {
        let db = raw_db(dir);
        let meta = db.open_tree("meta").unwrap();
        assert_eq!(
            meta.get(SCHEMA_KEY).unwrap().unwrap(),
            SCHEMA_VERSION.to_be_bytes()
        );
    }

    /// Rewrites a store of this version into the schema 2 layout: no
    /// rollups, no timeline, the singles in `newest`.
    fn downgrade_to_schema_2(dir: &Path) {
        let db = raw_db(dir);
        journal_into_tree(dir, &db, "newest");
        db.drop_tree("rollups").unwrap();
        db.drop_tree("leaves").unwrap();
        let meta = db.open_tree("meta").unwrap();
        meta.insert(SCHEMA_KEY, &2u32.to_be_bytes()[..]).unwrap();
        db.flush().unwrap();
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
        close(store);
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
        assert_schema_is_current(dir.path());
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

    /// Rewrites a store of this version into the schema 3 layout: every
    /// block back into row blocks of `size` (formats 2 and 4), the singles
    /// in `newest`.
    fn downgrade_to_schema_3(dir: &Path, size: usize) {
        let db = raw_db(dir);
        journal_into_tree(dir, &db, "newest");
        let results = db.open_tree("results").unwrap();
        let mut by_check: std::collections::BTreeMap<[u8; 4], Vec<(u64, codec::Decoded)>> =
            Default::default();
        for entry in results.iter() {
            let (key, value) = entry.unwrap();
            let id: [u8; 4] = key[..4].try_into().unwrap();
            let parsed = entries::parse_entry(key_millis_of(&key), &value).unwrap();
            by_check.entry(id).or_default().extend(parsed);
            results.remove(key).unwrap();
        }
        for (id, all) in by_check {
            for block in all.chunks(size) {
                let mut key = id.to_vec();
                key.extend_from_slice(&block[0].0.to_be_bytes());
                results.insert(key, codec::encode_row_block(block)).unwrap();
            }
        }
        let meta = db.open_tree("meta").unwrap();
        meta.insert(SCHEMA_KEY, &3u32.to_be_bytes()[..]).unwrap();
        db.flush().unwrap();
    }

    #[test]
    fn a_schema_3_store_is_rewritten_column_wise_with_the_same_history() {
        let dir = tempfile::tempdir().unwrap();
        let open = || open_packed(dir.path(), Packing { size: 4, keep: 2 });
        let store = open();
        let at = |n: i64| T0 + TimeDuration::seconds(30 * n);
        let mut site = Vec::new();
        for n in 0..300 {
            let mut outcome = up("site", at(n));
            outcome.duration_ms = 40.0 + n as f64 / 7.0;
            if n % 50 == 49 {
                outcome.status = crate::outcome::Status::Down;
                outcome.tls = None;
            }
            store.append(&outcome).unwrap();
            store.append(&up("api", at(n))).unwrap();
            site.push(outcome);
        }
        let expected = store.history("site", T0).unwrap();
        assert_eq!(expected.len(), 300);
        let api = store.history("api", T0).unwrap();
        let rollups_of = |store: &SledStore| {
            Granularity::ALL.map(|g| {
                store
                    .rollups("site", g, OffsetDateTime::UNIX_EPOCH)
                    .unwrap()
            })
        };
        let rollups = rollups_of(&store);
        close(store);
        downgrade_to_schema_3(dir.path(), 20);
        {
            let db = raw_db(dir.path());
            let results = db.open_tree("results").unwrap();
            assert!(results.iter().values().all(|v| v.unwrap()[0] == 2));
        }

        let store = open();
        let blocks: Vec<u64> = store
            .results
            .iter()
            .map(|entry| {
                let (key, value) = entry.unwrap();
                codec::span(key_millis_of(&key), &value).unwrap().count
            })
            .collect();
        // 296 packed results of each check (four in `newest`): two full
        // blocks and the rest.
        assert_eq!(blocks, [120, 120, 56].repeat(2));
        assert!(store
            .results
            .iter()
            .values()
            .all(|v| v.unwrap()[0] == crate::store::format::columns::BLOCK_FORMAT_COLUMNS));
        assert_eq!(store.history("site", T0).unwrap(), expected);
        assert_eq!(store.history("api", T0).unwrap(), api);
        assert_eq!(rollups_of(&store), rollups);
        for n in 300..400 {
            store.append(&up("site", at(n))).unwrap();
        }
        assert_eq!(store.history("site", at(300)).unwrap().len(), 100);
        assert_eq!(store.len().unwrap(), 700);
        assert_rollups_recompute(&store, "site");
        drop(store);
        assert_schema_is_current(dir.path());
    }

    /// Rewrites a store of this version into the schema 4 layout: the
    /// singles in `newest`, no journal.
    fn downgrade_to_schema_4(dir: &Path) {
        let db = raw_db(dir);
        journal_into_tree(dir, &db, "newest");
        let meta = db.open_tree("meta").unwrap();
        meta.insert(SCHEMA_KEY, &4u32.to_be_bytes()[..]).unwrap();
        db.flush().unwrap();
    }

    #[test]
    fn a_schema_4_store_has_its_newest_tree_moved_into_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let open = || open_packed(dir.path(), Packing { size: 4, keep: 2 });
        let store = open();
        for outcome in minutes(0..11) {
            store.append(&outcome).unwrap();
            store.append(&up("api", outcome.started_at)).unwrap();
        }
        // A copy of a packed result, as a stop between a pack and its
        // removals from `newest` left behind.
        let id = ids(&store)["site"];
        let packed = key_millis(&up("site", minute(1))).unwrap();
        let copy = {
            let state = store.lock();
            let mut fresh = Vec::new();
            let copy = codec::encode(&up("site", minute(1)), &mut |text| {
                intern(state.dicts.get(&id), &mut fresh, text)
            });
            assert!(fresh.is_empty());
            copy.value
        };
        close(store);
        downgrade_to_schema_4(dir.path());
        {
            let db = raw_db(dir.path());
            let newest = db.open_tree("newest").unwrap();
            assert_eq!(newest.len(), 2 * 3, "three singles a check");
            newest.insert(result_key(id, packed), copy).unwrap();
            db.flush().unwrap();
        }
        assert!(!dir.path().join(journal::FILE).exists());

        let store = open();
        assert_eq!(singles(&store), 2 * 3);
        assert!(!store
            .db
            .tree_names()
            .iter()
            .any(|name| name.as_ref() == b"newest"));
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..11));
        assert_eq!(store.len().unwrap(), 22);
        drop(store);
        assert_schema_is_current(dir.path());
        // The journal alone brings them back from now on.
        assert_eq!(journal_frames(dir.path()).len(), 2 * 3);
        let store = open();
        assert_eq!(singles(&store), 2 * 3);
        for outcome in minutes(11..16) {
            store.append(&outcome).unwrap();
        }
        assert_eq!(store.history("site", T0).unwrap(), minutes(0..16));
        assert_eq!(store.latest("site").unwrap(), Some(up("site", minute(15))));
        assert_rollups_recompute(&store, "site");
    }

    #[test]
    fn a_newer_schema_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path()));
        {
            let db = raw_db(dir.path());
            let meta = db.open_tree("meta").unwrap();
            meta.insert(SCHEMA_KEY, &6u32.to_be_bytes()[..]).unwrap();
            db.flush().unwrap();
        }
        let err =
            when_unlocked(|| SledStore::open(dir.path(), Duration::from_secs(1))).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooNew { found: 6, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the store at {} has schema version 6, but this vigie reads only version 5: \
                 a newer vigie wrote it; run that version, or point state_dir at another directory",
                dir.path().display()
            )
        );
    }
}
