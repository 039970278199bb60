//! The rollups and the certificate timeline on disk (trees `rollups` and
//! `leaves`, laid out as `store/mod.rs` describes), kept up to date by
//! `append`, rebuilt from raw results by a restore and, once, by the
//! upgrade from schema 2.
//!
//! Appends. Each append rewrites its hour's and its day's rollup (one
//! batch of two keys); the newest bucket of each check and granularity is
//! kept in memory, so the common append reads nothing. The timeline is
//! held in memory whole (a few leaves per check) and a leaf's entry is
//! written only when it is new or its `first_seen`/`last_seen` moved, i.e.
//! at most once an hour per leaf. Both are written after the result and
//! its replication queue entry: sled keeps a prefix of the writes, so an
//! unclean stop can at worst leave the rollups without the last result
//! appended before it (never with a result the history lacks).
//!
//! Encodings: a rollup is format byte `1` ++ postcard of [`StoredRollup`];
//! a leaf is format byte `1` ++ postcard of [`StoredLeaf`]. Fingerprints
//! are 32 bytes when they are 64 hex digits (always, from `cert.rs`), else
//! their text.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ::sled::{Batch, Db, Tree};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{be_u32, record, SledStore, State};
use crate::outcome::Outcome;
use crate::store::rollup::{self, Granularity, Histogram, LeafCount, Rollup, Sample, ServedLeaf};
use crate::store::{bucket_swept, time_of_millis, StoreError};

const ROLLUP_FORMAT: u8 = 1;
const LEAF_FORMAT: u8 = 1;
/// Leaf key tags: a binary fingerprint, or one kept as text.
const SHA_BYTES: u8 = b'x';
const SHA_TEXT: u8 = b't';

/// The two trees.
pub(super) struct Trees {
    pub rollups: Tree,
    pub leaves: Tree,
}

/// What appends keep in memory (inside the store's [`State`]).
#[derive(Default)]
pub(super) struct Cache {
    /// The bucket each (check, granularity) last wrote.
    newest: HashMap<(u32, Granularity), Rollup>,
    /// Every check's timeline, by fingerprint.
    pub leaves: HashMap<u32, BTreeMap<String, ServedLeaf>>,
    /// (check, day) a restore put results into, until `finish_restore`.
    restored: BTreeSet<(u32, u64)>,
}

#[derive(Serialize, Deserialize)]
struct StoredRollup {
    up: u64,
    warn: u64,
    down: u64,
    max_ms: f64,
    min_days_left: Option<i64>,
    histogram: Vec<(u8, u64)>,
    leaves: Vec<(Sha, u64)>,
}

/// Variant order is format: append only.
#[derive(Serialize, Deserialize)]
enum Sha {
    Bytes([u8; 32]),
    Text(String),
}

#[derive(Serialize, Deserialize)]
struct StoredLeaf {
    subject: String,
    issuer: String,
    /// Unix seconds and nanoseconds.
    not_before: (i64, u32),
    not_after: (i64, u32),
    first_seen: u64,
    last_seen: u64,
}

impl Trees {
    pub fn open(db: &Db) -> Result<Trees, ::sled::Error> {
        Ok(Trees {
            rollups: db.open_tree("rollups")?,
            leaves: db.open_tree("leaves")?,
        })
    }
}

impl SledStore {
    /// Reads every check's timeline (at open).
    pub(super) fn load_leaves(&self, state: &mut State) -> Result<(), StoreError> {
        for entry in self.rollup_trees.leaves.iter() {
            let (key, value) = entry.map_err(self.io("read the certificate timeline"))?;
            let parsed = leaf_key_parts(&key).and_then(|(id, sha)| {
                let leaf = decode_leaf(sha.clone(), &value)?;
                Some((id, sha, leaf))
            });
            let (id, sha, leaf) = parsed
                .ok_or_else(|| self.corrupt("a certificate timeline entry", format!("{key:?}")))?;
            state
                .rollups
                .leaves
                .entry(id)
                .or_default()
                .insert(sha, leaf);
        }
        Ok(())
    }

    /// Adds `outcome` (check `id`, key `millis`) to its hour and day, after
    /// taking out `replaced` (the result it replaced, same key).
    pub(super) fn record_rollups(
        &self,
        state: &mut State,
        id: u32,
        millis: u64,
        outcome: &Outcome,
        replaced: Option<&Sample>,
    ) -> Result<(), StoreError> {
        let sample = Sample::of(outcome);
        let mut batch = Batch::default();
        let mut written = Vec::with_capacity(2);
        for granularity in Granularity::ALL {
            let start = granularity.start_of(millis);
            let cached = state
                .rollups
                .newest
                .remove(&(id, granularity))
                .filter(|rollup| rollup.start_millis() == start);
            let mut bucket = match cached {
                Some(bucket) => bucket,
                None => self
                    .read_rollup(id, granularity, start)?
                    .unwrap_or_else(|| Rollup::empty(granularity, start)),
            };
            if let Some(replaced) = replaced {
                bucket.retract(replaced);
            }
            bucket.add(&sample);
            batch.insert(
                &rollup_key(id, granularity, start)[..],
                encode_rollup(&bucket),
            );
            written.push(bucket);
        }
        self.rollup_trees
            .rollups
            .apply_batch(batch)
            .map_err(self.io("update the rollups"))?;
        for bucket in written {
            state
                .rollups
                .newest
                .insert((id, bucket.granularity), bucket);
        }
        Ok(())
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
        if let Some(leaf) = rollup::observe_outcome(leaves, outcome) {
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
            .map(Some)
            .ok_or_else(|| self.corrupt_rollup(id, granularity, start))
    }

    /// The `granularity` rollups of check `id` from the bucket holding
    /// `since` on.
    pub(super) fn read_rollups(
        &self,
        id: u32,
        granularity: Granularity,
        since: u64,
    ) -> Result<Vec<Rollup>, StoreError> {
        let from = rollup_key(id, granularity, granularity.start_of(since));
        let to = rollup_key(id, granularity, u64::MAX);
        let mut rollups = Vec::new();
        for entry in self.rollup_trees.rollups.range(from..=to) {
            let (key, value) = entry.map_err(self.io("read rollups"))?;
            let start = rollup_key_start(&key);
            rollups.push(
                decode_rollup(granularity, start, &value)
                    .ok_or_else(|| self.corrupt_rollup(id, granularity, start))?,
            );
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
        state.rollups.newest.retain(|_, bucket| {
            let cutoff = match bucket.granularity {
                Granularity::Hour => hours,
                Granularity::Day => days,
            };
            !bucket_swept(bucket.granularity, bucket.start_millis(), cutoff)
        });
        let mut batch = Batch::default();
        for (&id, leaves) in state.rollups.leaves.iter_mut() {
            leaves.retain(|sha, leaf| {
                let keep = leaf.last_seen_millis() >= days;
                if !keep {
                    batch.remove(leaf_key(id, sha));
                    removed += 1;
                }
                keep
            });
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
        let restored = std::mem::take(&mut self.lock().rollups.restored);
        let mut rewritten = 0;
        for (id, day) in restored {
            let name = self.lock_free_name(id);
            let end = day + Granularity::Day.millis() - 1;
            let outcomes = self.read_range(id, &name, day, end)?;
            let mut batch = Batch::default();
            for granularity in Granularity::ALL {
                for rollup in Rollup::from_outcomes(granularity, &outcomes) {
                    let start = rollup.start_millis();
                    if self.read_rollup(id, granularity, start)?.as_ref() == Some(&rollup) {
                        continue;
                    }
                    batch.insert(
                        &rollup_key(id, granularity, start)[..],
                        encode_rollup(&rollup),
                    );
                    rewritten += 1;
                }
            }
            self.rollup_trees
                .rollups
                .apply_batch(batch)
                .map_err(self.io("rebuild the rollups"))?;
            // The next append reads its buckets again.
            let mut state = self.lock();
            for granularity in Granularity::ALL {
                state.rollups.newest.remove(&(id, granularity));
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
            let Some((first, last)) = self.result_bounds(id)? else {
                continue;
            };
            let mut leaves: BTreeMap<String, ServedLeaf> = BTreeMap::new();
            let mut day = Granularity::Day.start_of(first);
            while day <= last {
                let end = day + Granularity::Day.millis() - 1;
                let outcomes = self.read_range(id, &name, day, end)?;
                let mut batch = Batch::default();
                for granularity in Granularity::ALL {
                    for rollup in Rollup::from_outcomes(granularity, &outcomes) {
                        batch.insert(
                            &rollup_key(id, granularity, rollup.start_millis())[..],
                            encode_rollup(&rollup),
                        );
                    }
                }
                self.rollup_trees
                    .rollups
                    .apply_batch(batch)
                    .map_err(self.io("build the rollups (upgrade)"))?;
                for outcome in &outcomes {
                    rollup::observe_outcome(&mut leaves, outcome);
                }
                day += Granularity::Day.millis();
            }
            let mut batch = Batch::default();
            for (sha, leaf) in &leaves {
                batch.insert(leaf_key(id, sha), encode_leaf(leaf));
            }
            self.rollup_trees
                .leaves
                .apply_batch(batch)
                .map_err(self.io("build the certificate timeline (upgrade)"))?;
            self.lock().rollups.leaves.insert(id, leaves);
        }
        Ok(())
    }

    /// The key millis of check `id`'s first and last results.
    fn result_bounds(&self, id: u32) -> Result<Option<(u64, u64)>, StoreError> {
        let io = self.io("read a check's results");
        let first_of = |entry: Option<::sled::Result<(::sled::IVec, ::sled::IVec)>>| {
            entry
                .transpose()
                .map(|entry| entry.map(|(key, _)| super::key_millis_of(&key)))
        };
        let low = [
            first_of(self.check_range(id, 0).next()).map_err(&io)?,
            first_of(self.newest_range(id, 0).next()).map_err(&io)?,
        ]
        .into_iter()
        .flatten()
        .min();
        let high = [
            self.packed_until(id)?,
            first_of(self.newest_range(id, 0).next_back()).map_err(&io)?,
        ]
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
        replaced: record::Decoded,
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
                crate::store::rfc3339(&time_of_millis(start))
            ),
            "does not decode",
        )
    }
}

/// check id (u32 BE) ++ granularity (`h` or `d`) ++ bucket start millis
/// (u64 BE).
fn rollup_key(id: u32, granularity: Granularity, start: u64) -> [u8; 13] {
    let mut key = [0; 13];
    key[..4].copy_from_slice(&id.to_be_bytes());
    key[4] = match granularity {
        Granularity::Hour => b'h',
        Granularity::Day => b'd',
    };
    key[5..].copy_from_slice(&start.to_be_bytes());
    key
}

fn rollup_key_start(key: &[u8]) -> u64 {
    key.get(5..)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map_or(0, u64::from_be_bytes)
}

/// check id (u32 BE) ++ `x` ++ 32 fingerprint bytes, or ++ `t` ++ text.
fn leaf_key(id: u32, sha256: &str) -> Vec<u8> {
    let mut key = id.to_be_bytes().to_vec();
    match sha_bytes(sha256) {
        Some(bytes) => {
            key.push(SHA_BYTES);
            key.extend_from_slice(&bytes);
        }
        None => {
            key.push(SHA_TEXT);
            key.extend_from_slice(sha256.as_bytes());
        }
    }
    key
}

fn leaf_key_parts(key: &[u8]) -> Option<(u32, String)> {
    let id = be_u32(key.get(..4)?)?;
    let sha = match (key.get(4)?, key.get(5..)?) {
        (&SHA_BYTES, bytes) if bytes.len() == 32 => hex(bytes),
        (&SHA_TEXT, text) => String::from_utf8(text.to_vec()).ok()?,
        _ => return None,
    };
    Some((id, sha))
}

/// 64 hex digits as 32 bytes (lowercase only: the text must come back the
/// same).
fn sha_bytes(sha256: &str) -> Option<[u8; 32]> {
    let text = sha256.as_bytes();
    if text.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut bytes = [0; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        bytes[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn encode_rollup(rollup: &Rollup) -> Vec<u8> {
    let stored = StoredRollup {
        up: rollup.up,
        warn: rollup.warn,
        down: rollup.down,
        max_ms: rollup.max_ms,
        min_days_left: rollup.min_days_left,
        histogram: rollup.histogram.buckets().to_vec(),
        leaves: rollup
            .leaves
            .iter()
            .map(|leaf| {
                let sha = match sha_bytes(&leaf.sha256) {
                    Some(bytes) => Sha::Bytes(bytes),
                    None => Sha::Text(leaf.sha256.clone()),
                };
                (sha, leaf.results)
            })
            .collect(),
    };
    with_format(ROLLUP_FORMAT, &stored)
}

fn decode_rollup(granularity: Granularity, start: u64, bytes: &[u8]) -> Option<Rollup> {
    let (&format, body) = bytes.split_first()?;
    if format != ROLLUP_FORMAT {
        return None;
    }
    let stored: StoredRollup = postcard::from_bytes(body).ok()?;
    let mut leaves: Vec<LeafCount> = stored
        .leaves
        .into_iter()
        .map(|(sha, results)| LeafCount {
            sha256: match sha {
                Sha::Bytes(bytes) => hex(&bytes),
                Sha::Text(text) => text,
            },
            results,
        })
        .collect();
    leaves.sort_by(|a, b| a.sha256.cmp(&b.sha256));
    Some(Rollup {
        histogram: Histogram::from_buckets(stored.histogram)?,
        up: stored.up,
        warn: stored.warn,
        down: stored.down,
        max_ms: stored.max_ms,
        min_days_left: stored.min_days_left,
        leaves,
        ..Rollup::empty(granularity, start)
    })
}

fn encode_leaf(leaf: &ServedLeaf) -> Vec<u8> {
    let at = |t: OffsetDateTime| (t.unix_timestamp(), t.nanosecond());
    let stored = StoredLeaf {
        subject: leaf.subject.clone(),
        issuer: leaf.issuer.clone(),
        not_before: at(leaf.not_before),
        not_after: at(leaf.not_after),
        first_seen: leaf.first_seen_millis(),
        last_seen: leaf.last_seen_millis(),
    };
    with_format(LEAF_FORMAT, &stored)
}

fn decode_leaf(sha256: String, bytes: &[u8]) -> Option<ServedLeaf> {
    let (&format, body) = bytes.split_first()?;
    if format != LEAF_FORMAT {
        return None;
    }
    let stored: StoredLeaf = postcard::from_bytes(body).ok()?;
    let at = |(secs, nanos): (i64, u32)| {
        OffsetDateTime::from_unix_timestamp_nanos(
            i128::from(secs) * 1_000_000_000 + i128::from(nanos),
        )
        .ok()
    };
    Some(ServedLeaf {
        sha256,
        staging: crate::cert::is_staging(&stored.issuer),
        subject: stored.subject,
        issuer: stored.issuer,
        not_before: at(stored.not_before)?,
        not_after: at(stored.not_after)?,
        first_seen: time_of_millis(stored.first_seen),
        last_seen: time_of_millis(stored.last_seen),
    })
}

fn with_format<T: Serialize>(format: u8, value: &T) -> Vec<u8> {
    postcard::to_extend(value, vec![format]).expect("postcard into a Vec cannot fail")
}
