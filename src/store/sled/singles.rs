//! Each check's unpacked results in memory: the record bytes of the
//! singles after its last block, by time, exactly as the journal file
//! (`sled/journal.rs`) and, before schema 5, the `newest` tree held them.
//! This is what every reader of the newest results reads; the file is
//! only there to bring it back after a stop.
//!
//! Compact on purpose: at 10,000 checks with up to 24 singles each
//! (`Packing::DEFAULT`), a boxed record per single would add about 40
//! bytes of pointer and allocator overhead to each ~70-byte record. A
//! check's records share one buffer instead, with a (millis, end, epoch)
//! index beside it: 16 bytes a single, one pair of allocations a check.
//! They are kept encoded, never as decoded outcomes (a decoded one is ten
//! times the size).
//!
//! Each single remembers the journal *epoch* its frame was buffered in
//! (`sled/journal.rs`): a pack takes only singles whose frame is on disk
//! already, see `sled/history.rs`.

use std::collections::HashMap;

use ::sled::IVec;

use crate::store::format::journal;
use crate::store::format::keys::result_key;

/// Every check's singles; see the module docs.
#[derive(Default)]
pub(super) struct Singles {
    checks: HashMap<u32, CheckSingles>,
    /// Singles held, all checks.
    count: usize,
    /// What they take as journal frames: what a checkpoint writes.
    frame_bytes: usize,
}

/// One check's singles: records in `bytes`, one after the other in the
/// order of `index`, which is by millis.
#[derive(Default)]
struct CheckSingles {
    /// (millis, end of the record in `bytes`, epoch of its frame),
    /// ascending millis.
    index: Vec<(u64, u32, u32)>,
    bytes: Vec<u8>,
}

impl CheckSingles {
    fn start(&self, position: usize) -> usize {
        position
            .checked_sub(1)
            .map_or(0, |before| self.index[before].1 as usize)
    }

    fn record(&self, position: usize) -> &[u8] {
        &self.bytes[self.start(position)..self.index[position].1 as usize]
    }

    /// Positions of the singles with `from <= millis <= to`.
    fn positions(&self, from: u64, to: u64) -> std::ops::Range<usize> {
        let first = self.index.partition_point(|&(at, _, _)| at < from);
        let end = self.index.partition_point(|&(at, _, _)| at <= to);
        first..end.max(first)
    }

    /// Moves the ends from `position` on by `delta` bytes.
    fn shift(&mut self, position: usize, delta: isize) {
        for (_, end, _) in &mut self.index[position..] {
            *end = (*end as isize + delta) as u32;
        }
    }
}

impl Singles {
    /// Puts check `id`'s record at `millis`, its frame buffered in
    /// `epoch`, replacing one with the same millis; returns the replaced
    /// record.
    pub(super) fn insert(
        &mut self,
        id: u32,
        millis: u64,
        record: &[u8],
        epoch: u32,
    ) -> Option<Vec<u8>> {
        let check = self.checks.entry(id).or_default();
        match check.index.binary_search_by_key(&millis, |&(at, _, _)| at) {
            Ok(position) => {
                let (start, end) = (check.start(position), check.index[position].1 as usize);
                let previous: Vec<u8> = check
                    .bytes
                    .splice(start..end, record.iter().copied())
                    .collect();
                check.shift(position, record.len() as isize - previous.len() as isize);
                check.index[position].2 = epoch;
                self.frame_bytes = self.frame_bytes + record.len() - previous.len();
                Some(previous)
            }
            Err(position) => {
                let start = check.start(position);
                check.bytes.splice(start..start, record.iter().copied());
                check.shift(position, record.len() as isize);
                check
                    .index
                    .insert(position, (millis, (start + record.len()) as u32, epoch));
                self.count += 1;
                self.frame_bytes += journal::frame_len(record.len());
                None
            }
        }
    }

    /// Check `id`'s singles with `from <= millis <= to`, as `results`
    /// entries (key, record), oldest first.
    pub(super) fn entries(&self, id: u32, from: u64, to: u64) -> Vec<(IVec, IVec)> {
        let Some(check) = self.checks.get(&id) else {
            return Vec::new();
        };
        check
            .positions(from, to)
            .map(|p| {
                let key = IVec::from(&result_key(id, check.index[p].0)[..]);
                (key, IVec::from(check.record(p)))
            })
            .collect()
    }

    /// Check `id`'s newest single, as a `results` entry.
    pub(super) fn last(&self, id: u32) -> Option<(IVec, IVec)> {
        let check = self.checks.get(&id)?;
        let position = check.index.len().checked_sub(1)?;
        let key = IVec::from(&result_key(id, check.index[position].0)[..]);
        Some((key, IVec::from(check.record(position))))
    }

    /// The millis of check `id`'s oldest and newest singles.
    pub(super) fn bounds(&self, id: u32) -> Option<(u64, u64)> {
        let index = &self.checks.get(&id)?.index;
        Some((index.first()?.0, index.last()?.0))
    }

    /// Whether check `id` has a single at `millis`.
    pub(super) fn contains(&self, id: u32, millis: u64) -> bool {
        self.checks.get(&id).is_some_and(|check| {
            check
                .index
                .binary_search_by_key(&millis, |&(at, _, _)| at)
                .is_ok()
        })
    }

    /// Check `id`'s singles with `from <= millis <= to`, borrowed.
    pub(super) fn records(&self, id: u32, from: u64, to: u64) -> Vec<(u64, &[u8])> {
        let Some(check) = self.checks.get(&id) else {
            return Vec::new();
        };
        check
            .positions(from, to)
            .map(|p| (check.index[p].0, check.record(p)))
            .collect()
    }

    /// How many of check `id`'s oldest singles, up to `most`, had their
    /// frame buffered in `durable` or before: the prefix a pack may take.
    pub(super) fn durable_prefix(&self, id: u32, durable: u32, most: usize) -> usize {
        self.checks.get(&id).map_or(0, |check| {
            check
                .index
                .iter()
                .take(most)
                .take_while(|&&(_, _, e)| e <= durable)
                .count()
        })
    }

    /// Check `id`'s oldest `n` singles, borrowed.
    pub(super) fn oldest(&self, id: u32, n: usize) -> Vec<(u64, &[u8])> {
        let Some(check) = self.checks.get(&id) else {
            return Vec::new();
        };
        (0..n.min(check.index.len()))
            .map(|p| (check.index[p].0, check.record(p)))
            .collect()
    }

    /// (check id, millis) of every single, by check id then time.
    pub(super) fn keys(&self) -> Vec<(u32, u64)> {
        let mut keys: Vec<(u32, u64)> = self
            .checks
            .iter()
            .flat_map(|(&id, check)| check.index.iter().map(move |&(at, _, _)| (id, at)))
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Singles of check `id`.
    pub(super) fn count_of(&self, id: u32) -> usize {
        self.checks.get(&id).map_or(0, |check| check.index.len())
    }

    /// Singles of every check.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// Bytes the singles take as journal frames.
    pub(super) fn frame_bytes(&self) -> usize {
        self.frame_bytes
    }

    /// Removes check `id`'s singles with `millis < before`; returns how
    /// many.
    pub(super) fn remove_before(&mut self, id: u32, before: u64) -> usize {
        let Some(check) = self.checks.get_mut(&id) else {
            return 0;
        };
        let gone = check.index.partition_point(|&(at, _, _)| at < before);
        if gone == 0 {
            return 0;
        }
        let cut = check.index[gone - 1].1 as usize;
        let frames: usize = (0..gone)
            .map(|p| journal::frame_len(check.record(p).len()))
            .sum();
        check.bytes.drain(..cut);
        check.index.drain(..gone);
        check.shift(0, -(cut as isize));
        if check.index.is_empty() {
            self.checks.remove(&id);
        }
        self.count -= gone;
        self.frame_bytes -= frames;
        gone
    }

    /// Every single as journal frames (what a checkpoint writes), by
    /// check id then time.
    pub(super) fn frames(&self, out: &mut Vec<u8>) {
        out.reserve(self.frame_bytes);
        let mut ids: Vec<u32> = self.checks.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let check = &self.checks[&id];
            for position in 0..check.index.len() {
                journal::encode(out, id, check.index[position].0, check.record(position));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(singles: &Singles, id: u32) -> Vec<(u64, Vec<u8>)> {
        singles
            .records(id, 0, u64::MAX)
            .into_iter()
            .map(|(at, record)| (at, record.to_vec()))
            .collect()
    }

    #[test]
    fn inserts_keep_time_order_and_replace_the_same_millis() {
        let mut singles = Singles::default();
        assert_eq!(singles.insert(1, 30, b"ccc", 1), None);
        assert_eq!(singles.insert(1, 10, b"a", 1), None);
        assert_eq!(singles.insert(1, 20, b"bb", 1), None);
        assert_eq!(singles.insert(2, 5, b"x", 1), None);
        assert_eq!(singles.insert(1, 20, b"BBBB", 2), Some(b"bb".to_vec()));
        assert_eq!(singles.durable_prefix(1, 1, 9), 1);
        assert_eq!(singles.durable_prefix(1, 2, 9), 3);
        assert_eq!(singles.durable_prefix(1, 2, 2), 2);
        let oldest: Vec<(u64, &[u8])> = vec![(10, b"a"), (20, b"BBBB")];
        assert_eq!(singles.oldest(1, 2), oldest);
        assert_eq!(singles.oldest(1, 9).len(), 3);
        assert_eq!(singles.keys(), [(1, 10), (1, 20), (1, 30), (2, 5)]);
        assert_eq!(
            millis(&singles, 1),
            [
                (10, b"a".to_vec()),
                (20, b"BBBB".to_vec()),
                (30, b"ccc".to_vec())
            ]
        );
        assert_eq!(singles.count(), 4);
        assert_eq!(singles.bounds(1), Some((10, 30)));
        assert!(singles.contains(1, 20) && !singles.contains(1, 25));
        assert_eq!(singles.entries(1, 11, 30).len(), 2);
        assert_eq!(&singles.last(1).unwrap().1[..], b"ccc");
        let frames = journal::frame_len(1) + journal::frame_len(4) + journal::frame_len(3);
        assert_eq!(singles.frame_bytes(), frames + journal::frame_len(1));

        assert_eq!(singles.remove_before(1, 30), 2);
        assert_eq!(millis(&singles, 1), [(30, b"ccc".to_vec())]);
        assert_eq!(singles.remove_before(2, 6), 1);
        assert_eq!(singles.count_of(2), 0);
        assert_eq!(singles.count(), 1);
        assert_eq!(singles.frame_bytes(), journal::frame_len(3));
        let mut out = Vec::new();
        singles.frames(&mut out);
        assert_eq!(out.len(), journal::frame_len(3));
    }
}
