//! `vigie restore`: rebuild a store from a node's segments.
//!
//! Lists `history/<node>/`, downloads the segments in sequence order (a few
//! at a time), verifies each (zstd checksum, the segment's own sha256, the
//! header against the name) and puts its results into the store. A segment
//! that fails verification or download is reported by name and skipped;
//! the rest is restored. Each segment's header names the last seq of the
//! segment before it, so a segment missing from the bucket is reported as
//! a gap between two named segments. The store skips results it already
//! holds with the same value, so running restore twice writes nothing the
//! second time. Then the rollups of every day restored into are recomputed
//! from the raw results the store holds for it
//! ([`SledStore::finish_restore`]); the certificate timeline took the
//! results in as they came. Afterwards the store's replication cursor
//! stands at the highest seq found, so the restored vigie continues the
//! same sequence.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::bucket::Bucket;
use super::{blocking, segment, ReplicateError};
use crate::store::{Restored, SledStore};

/// Segments downloaded ahead of the one being restored.
const DOWNLOADS_AHEAD: usize = 4;

/// What a restore found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// `s3://bucket/node` restored from.
    pub source: String,
    /// Segments listed (with a segment name).
    pub segments: usize,
    /// Segments verified and restored.
    pub restored_segments: usize,
    /// Results read from verified segments.
    pub results: u64,
    /// What the store did with them.
    pub store: Restored,
    /// Segments that could not be downloaded or verified, by name.
    pub corrupt: Vec<CorruptSegment>,
    /// Stretches of the sequence no listed segment covers.
    pub gaps: Vec<Gap>,
    /// The oldest segment does not start the sequence: older segments are
    /// absent (expired by a lifecycle rule, or lost). Its name.
    pub starts_at: Option<String>,
    /// Objects under the node's prefix that are not segments.
    pub foreign: Vec<String>,
    /// The replication cursor the store was left at.
    pub cursor: u64,
}

/// A segment that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptSegment {
    pub name: String,
    pub reason: String,
}

/// Seqs `after + 1 ..= before_first - 1` are in no segment: the segment
/// that ends at `after` is missing, and `next` is the one that follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub after: u64,
    pub next: String,
}

impl RestoreReport {
    /// Nothing corrupt, nothing missing.
    pub fn is_complete(&self) -> bool {
        self.corrupt.is_empty() && self.gaps.is_empty()
    }
}

impl fmt::Display for RestoreReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "restored from {}: {} of {} segments, {} results ({} added, {} replaced, {} already present)",
            self.source,
            self.restored_segments,
            self.segments,
            self.results,
            self.store.added,
            self.store.replaced,
            self.store.unchanged
        )?;
        for corrupt in &self.corrupt {
            writeln!(f, "corrupt segment {}: {}", corrupt.name, corrupt.reason)?;
        }
        for gap in &self.gaps {
            writeln!(
                f,
                "missing segment(s): nothing holds the results queued after seq {} and before {}",
                gap.after, gap.next
            )?;
        }
        if let Some(first) = &self.starts_at {
            writeln!(
                f,
                "note: history starts at {first}; older segments are absent (expired by the bucket's lifecycle rule, or lost)"
            )?;
        }
        for name in &self.foreign {
            writeln!(f, "ignored {name}: not a segment name")?;
        }
        write!(f, "replication cursor: {}", self.cursor)
    }
}

/// Restores every segment of `bucket`'s node into `store`; see the module
/// docs. Errors only when the bucket cannot be listed or the store fails;
/// bad segments are in the report.
pub async fn restore(
    bucket: &Bucket,
    store: Arc<SledStore>,
) -> Result<RestoreReport, ReplicateError> {
    let node = bucket.node().to_string();
    let prefix = segment::node_prefix(&node);
    let mut report = RestoreReport {
        source: bucket.shown(),
        ..RestoreReport::default()
    };
    let mut segments: Vec<(u64, u64, String)> = Vec::new();
    for name in bucket.list(&prefix).await? {
        match segment::parse_name(&node, &name) {
            Some((first, last)) => segments.push((first, last, name)),
            None => report.foreign.push(name),
        }
    }
    // Sequence order: a key restored twice ends with its later value.
    segments.sort();
    report.segments = segments.len();
    let ends: BTreeSet<u64> = segments.iter().map(|(_, last, _)| *last).collect();
    let lowest = segments.first().map(|(first, _, _)| *first);

    let mut downloads = stream::iter(segments.iter().cloned())
        .map(|(first, last, name)| async move {
            let bytes = bucket.get(&name).await;
            (first, last, name, bytes)
        })
        .buffered(DOWNLOADS_AHEAD);
    while let Some((first, _last, name, bytes)) = downloads.next().await {
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(err @ (ReplicateError::Denied { .. } | ReplicateError::Unreachable { .. })) => {
                return Err(err)
            }
            Err(err) => {
                report.corrupt.push(CorruptSegment {
                    name,
                    reason: err.to_string(),
                });
                continue;
            }
        };
        let (node, decoded_name) = (node.clone(), name.clone());
        let decoded = blocking(move || segment::decode(&node, &decoded_name, &bytes)).await?;
        let segment = match decoded {
            Ok(segment) => segment,
            Err(err) => {
                report.corrupt.push(CorruptSegment {
                    name,
                    reason: err.to_string(),
                });
                continue;
            }
        };
        let after = segment.header.after;
        if Some(first) == lowest {
            if after != 0 {
                report.starts_at = Some(name.clone());
            }
        } else if after != 0 && !ends.contains(&after) {
            report.gaps.push(Gap {
                after,
                next: name.clone(),
            });
        }
        report.results += segment.results.len() as u64;
        let outcomes = segment
            .results
            .into_iter()
            .map(|(_, outcome)| outcome)
            .collect();
        let target = store.clone();
        let restored = blocking(move || target.restore_results(outcomes)).await??;
        report.store.added += restored.added;
        report.store.replaced += restored.replaced;
        report.store.unchanged += restored.unchanged;
        report.restored_segments += 1;
    }

    // The rollups of every restored day, from its raw results, once.
    let target = store.clone();
    blocking(move || target.finish_restore()).await??;

    // Past every name seen, even corrupt ones: the next segment this node
    // writes must not reuse a name.
    if let Some(&highest) = ends.last() {
        let target = store.clone();
        blocking(move || target.continue_replication_after(highest)).await??;
    }
    report.cursor = store.replication_cursor();
    Ok(report)
}
