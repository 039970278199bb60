//! The sled backend's test harness: opening a store in a test (and
//! waiting out sled's file lock), reading its raw layout, and the store
//! contract run against it; also the other store tests' way to open one.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use time::{Duration as TimeDuration, OffsetDateTime};

use super::journal::{self, Flush};
pub(crate) use super::unlocked::when_unlocked;
use super::{open_error, Packing, SledStore};
use crate::outcome::Outcome;
use crate::store::backend::Store;
use crate::store::contract::{up, T0};
use crate::store::error::StoreError;
use crate::store::format;
use crate::store::format::codec;
use crate::store::format::journal::MAGIC;
use crate::store::format::keys::{key_millis_of, result_key};
use crate::store::rollup::{Granularity, Rollup, ServedLeaf};

/// Also the replication queue's and the outbox's tests' way to open a
/// store.
pub(crate) fn open(dir: &Path) -> SledStore {
    when_unlocked(|| SledStore::open(dir, Duration::from_millis(100))).unwrap()
}

pub(crate) fn open_packed(dir: &Path, packing: Packing) -> SledStore {
    when_unlocked(|| SledStore::open_packing(dir, Duration::from_millis(100), packing)).unwrap()
}

/// The database itself, for tests that write what this code would not.
pub(crate) fn raw_db(dir: &Path) -> ::sled::Db {
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

pub(crate) fn open_small_blocks(dir: &Path) -> SledStore {
    let packing = Packing { size: 2, keep: 1 };
    open_packed(dir, packing)
}

/// Singles held in memory (and the journal), all checks.
pub(crate) fn singles(store: &SledStore) -> usize {
    store.lock().singles.count()
}

/// Rewrites the journal with exactly the singles in memory, as a
/// checkpoint does (tests that then read the file, or write it into an
/// older layout).
pub(crate) fn checkpoint(store: &SledStore) {
    store.flush_journal(Flush::Checkpoint).unwrap();
}

/// Closes `store` with its packs done and its journal holding exactly
/// its singles.
pub(crate) fn close(store: SledStore) {
    store.flush().unwrap();
    checkpoint(&store);
    drop(store);
}

/// A store whose only flushes are the test's and the close: sled's and
/// the journal's.
pub(crate) fn open_unflushed(dir: &Path) -> SledStore {
    when_unlocked(|| SledStore::open(dir, Duration::ZERO)).unwrap()
}

/// What an unclean stop would leave of `store` now, copied to `to`:
/// sled's writes on disk (sled's own flusher may always be ahead of the
/// journal's), the journal's buffered frames not.
pub(crate) fn unclean_copy(store: &SledStore, to: &Path) {
    store.db.flush().unwrap();
    copy_dir(store.path(), to);
}

/// Copies a store's directory, sled's files and the journal alike.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        match entry.file_type().unwrap().is_dir() {
            true => copy_dir(&entry.path(), &target),
            false => {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
}

/// The frames of the journal in `dir` ((check id, millis), record), in
/// file order.
pub(crate) fn journal_frames(dir: &Path) -> Vec<((u32, u64), Vec<u8>)> {
    let bytes = std::fs::read(dir.join(journal::FILE)).unwrap();
    let mut rest = &bytes[MAGIC.len()..];
    let mut frames = Vec::new();
    while let Some((frame, used)) = format::journal::read(rest).unwrap() {
        frames.push(((frame.id, frame.millis), frame.record.to_vec()));
        rest = &rest[used..];
    }
    frames
}

/// Moves the journal's singles into sled tree `tree` of `db` (one key
/// each, as schemas before 5 kept them) and removes the file. Take a
/// [`checkpoint`] before closing the store: the file then holds exactly
/// the singles.
pub(crate) fn journal_into_tree(dir: &Path, db: &::sled::Db, tree: &str) {
    let tree = db.open_tree(tree).unwrap();
    for ((id, millis), record) in journal_frames(dir) {
        tree.insert(result_key(id, millis), record).unwrap();
    }
    std::fs::remove_file(dir.join(journal::FILE)).unwrap();
    db.flush().unwrap();
}

/// (key millis, span, is a block) of every entry, checking that the
/// spans of one check never overlap.
pub(crate) fn entries(store: &SledStore) -> Vec<(u64, codec::Span, bool)> {
    let mut entries: Vec<(u64, codec::Span, bool)> = Vec::new();
    for entry in store.results.iter() {
        let (key, value) = entry.unwrap();
        let key_ms = key_millis_of(&key);
        let span = codec::span(key_ms, &value).unwrap();
        if let Some((_, previous, _)) = entries.last() {
            assert!(
                previous.last < key_ms,
                "{previous:?} overlaps entry at {key_ms}"
            );
        }
        entries.push((key_ms, span, codec::is_block(&value)));
    }
    entries
}

pub(crate) fn minute(n: i64) -> OffsetDateTime {
    T0 + TimeDuration::minutes(n)
}

pub(crate) fn minutes(range: std::ops::Range<i64>) -> Vec<Outcome> {
    range.map(|n| up("site", minute(n))).collect()
}

/// Both granularities and the timeline of `name`, against a
/// recomputation from its raw results.
pub(crate) fn assert_rollups_recompute(store: &SledStore, name: &str) {
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

pub(crate) fn ids(store: &SledStore) -> HashMap<String, u32> {
    store.lock().ids.clone()
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
