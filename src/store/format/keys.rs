//! What the keys of the history look like: the builders and parsers of
//! every key `format/mod.rs` lays out (the key time of an outcome is in
//! `store/millis.rs`, re-exported here).
//! Every integer in a key is big-endian, so that sled's byte order is the
//! order of check ids, then of times or sequence numbers.
//!
//! It knows nothing of sled: a key is bytes here, and the trees they go in
//! are opened by `sled/mod.rs`.

/// `checks`: before a name (the value is its id).
pub(in crate::store) const NAME_PREFIX: u8 = b'n';
/// `checks`: before an id (the value is its name).
pub(in crate::store) const ID_PREFIX: u8 = b'i';
/// `checks`: before an id and an index (the value is a dictionary string).
pub(in crate::store) const STRING_PREFIX: u8 = b's';

/// `meta`: the last shipped seq (u64 BE). Present once replication has
/// been enabled on this store (or a restore set it).
pub(in crate::store) const CURSOR_KEY: &[u8] = b"replication_cursor";

/// `meta`: the batch in flight: after, last, formed-at millis (u64 BE each).
pub(in crate::store) const PENDING_KEY: &[u8] = b"replication_pending";

/// Before a segment's name: a segment `vigie restore` refused, with the
/// ETag it had and why.
pub(in crate::store) const REFUSED_PREFIX: &[u8] = b"refused_segment/";

/// The first 16 bytes of the SHA-256 of a chain's encoding.
pub(in crate::store) type ChainKey = [u8; 16];

pub(in crate::store) use crate::store::millis::{bound_millis, key_millis, time_of_millis};

/// The millis of a `results` key (12 bytes by construction).
pub(in crate::store) fn key_millis_of(key: &[u8]) -> u64 {
    key.get(4..).and_then(be_u64).unwrap_or_default()
}

/// A `results` key (and a single's, in memory and in `newest` before
/// schema 5): check id ++ started_at millis.
pub(in crate::store) fn result_key(id: u32, millis: u64) -> [u8; 12] {
    let mut key = [0; 12];
    key[..4].copy_from_slice(&id.to_be_bytes());
    key[4..].copy_from_slice(&millis.to_be_bytes());
    key
}

/// A dictionary string's key in `checks`.
pub(in crate::store) fn string_key(id: u32, index: u32) -> [u8; 9] {
    let mut key = [STRING_PREFIX; 9];
    key[1..5].copy_from_slice(&id.to_be_bytes());
    key[5..].copy_from_slice(&index.to_be_bytes());
    key
}

/// A `chain_uses` key: chain key ++ check id.
pub(in crate::store) fn use_key(chain: &ChainKey, id: u32) -> [u8; 20] {
    let mut key = [0; 20];
    key[..16].copy_from_slice(chain);
    key[16..].copy_from_slice(&id.to_be_bytes());
    key
}

/// A `checks` key: `prefix` ++ `rest`.
pub(in crate::store) fn prefixed(prefix: u8, rest: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + rest.len());
    key.push(prefix);
    key.extend_from_slice(rest);
    key
}

/// (check id, index) of a dictionary key, after its prefix.
pub(in crate::store) fn string_position(rest: &[u8]) -> Option<(u32, u32)> {
    if rest.len() != 8 {
        return None;
    }
    Some((be_u32(&rest[..4])?, be_u32(&rest[4..])?))
}

/// A `chains` key read back (16 bytes, or not one).
pub(in crate::store) fn chain_key(bytes: &[u8]) -> Option<ChainKey> {
    ChainKey::try_from(bytes).ok()
}

/// A refused segment's key in `meta`.
pub(in crate::store) fn refused_key(name: &str) -> Vec<u8> {
    [REFUSED_PREFIX, name.as_bytes()].concat()
}

/// A `replication` key: the sequence number.
pub(in crate::store) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// A big-endian integer of a key or value, or `None` if the length is wrong.
pub(in crate::store) fn be_u32(bytes: &[u8]) -> Option<u32> {
    <[u8; 4]>::try_from(bytes).ok().map(u32::from_be_bytes)
}

pub(in crate::store) fn be_u64(bytes: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(bytes).ok().map(u64::from_be_bytes)
}

/// Key bytes as lowercase hex, for messages and fingerprints.
pub(in crate::store) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
