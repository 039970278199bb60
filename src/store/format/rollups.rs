//! The stored form of a rollup (tree `rollups`) and of a leaf of the
//! certificate timeline (tree `leaves`): their keys and their values.
//!
//! Encodings: a rollup is format byte `1` ++ postcard of [`StoredRollup`];
//! a leaf is format byte `1` ++ postcard of [`StoredLeaf`]. Fingerprints
//! are 32 bytes when they are 64 hex digits (always, from `cert.rs`), else
//! their text. Field order and variant order are part of the format: add
//! only at the end, under a new format byte.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::keys::{be_u32, hex, time_of_millis};
use crate::store::rollup::{Granularity, Histogram, LeafCount, Rollup, ServedLeaf};

const ROLLUP_FORMAT: u8 = 1;

const LEAF_FORMAT: u8 = 1;

/// Leaf key tags: a binary fingerprint, or one kept as text.
const SHA_BYTES: u8 = b'x';

const SHA_TEXT: u8 = b't';

#[derive(Serialize, Deserialize)]
struct StoredRollup {
    /// Key millis of the newest result counted.
    through: u64,
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

/// check id (u32 BE) ++ granularity (`h` or `d`) ++ bucket start millis
/// (u64 BE).
pub(in crate::store) fn rollup_key(id: u32, granularity: Granularity, start: u64) -> [u8; 13] {
    let mut key = [0; 13];
    key[..4].copy_from_slice(&id.to_be_bytes());
    key[4] = match granularity {
        Granularity::Hour => b'h',
        Granularity::Day => b'd',
    };
    key[5..].copy_from_slice(&start.to_be_bytes());
    key
}

pub(in crate::store) fn rollup_key_start(key: &[u8]) -> u64 {
    key.get(5..)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map_or(0, u64::from_be_bytes)
}

/// check id (u32 BE) ++ `x` ++ 32 fingerprint bytes, or ++ `t` ++ text.
pub(in crate::store) fn leaf_key(id: u32, sha256: &str) -> Vec<u8> {
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

pub(in crate::store) fn leaf_key_parts(key: &[u8]) -> Option<(u32, String)> {
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

pub(in crate::store) fn encode_rollup(rollup: &Rollup, through: u64) -> Vec<u8> {
    let stored = StoredRollup {
        through,
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

pub(in crate::store) fn decode_rollup(
    granularity: Granularity,
    start: u64,
    bytes: &[u8],
) -> Option<(Rollup, u64)> {
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
    let rollup = Rollup {
        histogram: Histogram::from_buckets(stored.histogram)?,
        up: stored.up,
        warn: stored.warn,
        down: stored.down,
        max_ms: stored.max_ms,
        min_days_left: stored.min_days_left,
        leaves,
        ..Rollup::empty(granularity, start)
    };
    Some((rollup, stored.through))
}

pub(in crate::store) fn encode_leaf(leaf: &ServedLeaf) -> Vec<u8> {
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

pub(in crate::store) fn decode_leaf(sha256: String, bytes: &[u8]) -> Option<ServedLeaf> {
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
