//! The sled backend's test harness: opening a store in a test (and
//! waiting out sled's file lock), reading its raw layout, and the store
//! contract run against it; also the other store tests' way to open one.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use time::{Duration as TimeDuration, OffsetDateTime};

pub(crate) use super::unlocked::when_unlocked;
use super::{open_error, Packing, SledStore};
use crate::outcome::Outcome;
use crate::store::backend::Store;
use crate::store::contract::{up, T0};
use crate::store::error::StoreError;
use crate::store::format::codec;
use crate::store::format::keys::key_millis_of;
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
