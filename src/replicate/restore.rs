//! `vigie restore`: rebuild a store from a node's segments.
//!
//! Lists `history/<node>/`, downloads the segments in sequence order (a few
//! at a time, each refused unread if the bucket says it is over
//! [`segment::MAX_SEGMENT_BYTES`], and counted as it arrives), verifies each
//! (zstd checksum, the segment's own sha256, the header against the name)
//! a line at a time as soon as it is in, then reads it again to put its
//! results into the store through a [`Restoring`](crate::store::Restoring),
//! which writes a check's new results as full blocks (20,000 results
//! gathered at most, encoded as the store keeps them): memory holds a few
//! compressed segments, a line and a zstd window per segment being read,
//! and that, whatever a segment inflates to. The first pass of the next
//! segments runs while a segment is put in, so the two passes take a core
//! each. A segment that fails verification or
//! download is reported by name and skipped; the rest is restored. The
//! ETag of a segment refused is kept in the store, so a later restore
//! does not download it again until it changes. Names that are not
//! segments' are listed with their control characters escaped: the
//! bucket's writers choose them. Each segment's header names the last seq of the
//! segment before it, so a segment missing from the bucket is reported as
//! a gap between two named segments. The store skips results it already
//! holds with the same value, so running restore twice writes nothing the
//! second time. Then the rollups of every day restored into are recomputed
//! from the raw results the store holds for it
//! ([`SledStore::finish_restore`]); the certificate timeline took the
//! results in as they came. Afterwards the store's replication cursor
//! stands at the highest seq found, so the restored vigie continues the
//! same sequence. Last, the node's incident updates are put back
//! (`updates.rs`).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use bytes::Bytes;

use super::bucket::{Bucket, Capped, ObjectVersion};
use super::updates::UpdatesRestored;
use super::{blocking, segment, ReplicateError, SegmentError};
use crate::sanitize::escape_controls;
use crate::store::{RefusedSegment, Restored, SledStore, StoreError};

/// Segments downloaded (and verified) ahead of the one being restored:
/// with the one being put in, at most three segment caps in memory, and
/// three segments being read (a line and a zstd window each).
const DOWNLOADS_AHEAD: usize = 2;

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
    /// Objects under the node's prefix that are not segments: the first
    /// [`FOREIGN_NAMED`] by name, and how many more there are.
    pub foreign: Vec<String>,
    pub foreign_more: usize,
    /// The replication cursor the store was left at.
    pub cursor: u64,
    /// The node's incident updates.
    pub updates: UpdatesRestored,
}

/// Objects that are not segments named in a report: whoever can write the
/// bucket can add millions, and the operator needs a few to find them.
pub const FOREIGN_NAMED: usize = 20;

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
        self.corrupt.is_empty() && self.gaps.is_empty() && self.updates.refused.is_empty()
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
        // Names come from the bucket: whoever can write there chooses them.
        for corrupt in &self.corrupt {
            let name = escape_controls(&corrupt.name);
            writeln!(f, "corrupt segment {name}: {}", corrupt.reason)?;
        }
        for gap in &self.gaps {
            writeln!(
                f,
                "missing segment(s): nothing holds the results queued after seq {} and before {}",
                gap.after,
                escape_controls(&gap.next)
            )?;
        }
        if let Some(first) = &self.starts_at {
            writeln!(
                f,
                "note: history starts at {}; older segments are absent (expired by the bucket's lifecycle rule, or lost)",
                escape_controls(first)
            )?;
        }
        for name in &self.foreign {
            writeln!(f, "ignored {}: not a segment name", escape_controls(name))?;
        }
        if self.foreign_more > 0 {
            writeln!(
                f,
                "ignored {} more objects whose names are not segment names",
                self.foreign_more
            )?;
        }
        writeln!(f, "{}", self.updates)?;
        write!(f, "replication cursor: {}", self.cursor)
    }
}

/// How far a restore is, told after each segment (restored or refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreProgress {
    pub segments_done: usize,
    pub segments: usize,
    pub results: u64,
}

/// Restores every segment of `bucket`'s node into `store`; see the module
/// docs. Errors only when the bucket cannot be listed or the store fails;
/// bad segments are in the report.
pub async fn restore(
    bucket: &Bucket,
    store: Arc<SledStore>,
) -> Result<RestoreReport, ReplicateError> {
    restore_telling(bucket, store, &|_| {}).await
}

/// [`restore`], telling `progress` after each segment.
pub async fn restore_telling(
    bucket: &Bucket,
    store: Arc<SledStore>,
    progress: &(dyn Fn(RestoreProgress) + Sync),
) -> Result<RestoreReport, ReplicateError> {
    let node = bucket.node().to_string();
    let prefix = segment::node_prefix(&node);
    let mut report = RestoreReport {
        source: bucket.shown(),
        ..RestoreReport::default()
    };
    let mut segments: Vec<(u64, u64, String)> = Vec::new();
    let (mut foreign, mut foreign_more) = (Vec::new(), 0);
    bucket
        .list(
            &prefix,
            &mut |name| match segment::parse_name(&node, &name) {
                Some((first, last)) => segments.push((first, last, name)),
                None if foreign.len() < FOREIGN_NAMED => foreign.push(name),
                None => foreign_more += 1,
            },
        )
        .await?;
    (report.foreign, report.foreign_more) = (foreign, foreign_more);
    // Sequence order: a key restored twice ends with its later value.
    segments.sort();
    report.segments = segments.len();
    let ends: BTreeSet<u64> = segments.iter().map(|(_, last, _)| *last).collect();
    let lowest = segments.first().map(|(first, _, _)| *first);

    // Each segment is downloaded and verified (the first pass) by a task
    // of its own, [`DOWNLOADS_AHEAD`] at a time, while the one before it is
    // put into the store (the second pass, below): on two cores the two
    // passes of consecutive segments overlap.
    let mut downloads = stream::iter(segments.iter().cloned())
        .map(|(first, _last, name)| {
            let (store, bucket, node) = (store.clone(), bucket.clone(), node.clone());
            tokio::spawn(async move {
                let refused = store.refused_segment(&name);
                let fetched = match &refused {
                    Ok(refused) => {
                        let etag = refused.as_ref().map(|r| r.etag.as_str());
                        fetch(&bucket, &node, &name, etag).await
                    }
                    // The store's error is returned below, unread `fetched`.
                    Err(_) => Ok(Fetched::Missing),
                };
                (first, name, refused, fetched)
            })
        })
        .buffered(DOWNLOADS_AHEAD);
    let mut done = 0;
    while let Some(joined) = downloads.next().await {
        let (first, name, refused, fetched) =
            joined.map_err(|e| ReplicateError::Task(e.to_string()))?;
        progress(RestoreProgress {
            segments_done: done,
            segments: report.segments,
            results: report.results,
        });
        done += 1;
        let refused = refused?;
        let (header, bytes, version) = match fetched {
            Ok(Fetched::Verified {
                header,
                bytes,
                version,
            }) => (header, bytes, version),
            // A damaged segment puts nothing in the store.
            Ok(Fetched::Damaged { reason, version }) => {
                refuse(&store, &mut report, name, &version, reason).await?;
                continue;
            }
            Ok(Fetched::Unchanged) => {
                let reason = refused.map_or_else(String::new, |r| r.reason);
                report.corrupt.push(CorruptSegment {
                    name,
                    reason: format!(
                        "{reason} (unchanged since a restore refused it: not downloaded again)"
                    ),
                });
                continue;
            }
            Ok(Fetched::Missing) => {
                report.corrupt.push(CorruptSegment {
                    name,
                    reason: "it was listed but is gone: deleted while restoring?".to_string(),
                });
                continue;
            }
            Ok(Fetched::Oversized { size, version }) => {
                let reason = format!(
                    "it is {size} bytes, over the {} a segment may have: not downloaded",
                    segment::MAX_SEGMENT_BYTES
                );
                refuse(&store, &mut report, name, &version, reason).await?;
                continue;
            }
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
        // Second pass: into the store, a check's new results as blocks.
        let (target, put_node, put_name) = (store.clone(), node.clone(), name.clone());
        let put = blocking(move || put_in(&target, &put_node, &put_name, &bytes)).await?;
        let (results, restored) = match put {
            Ok(put) => put?,
            Err(err) => {
                // The bytes verified a moment ago: only a bug gets here.
                refuse(&store, &mut report, name, &version, err.to_string()).await?;
                continue;
            }
        };
        if refused.is_some() {
            let (target, known) = (store.clone(), name.clone());
            blocking(move || target.forget_refused_segment(&known)).await??;
        }
        let after = header.after;
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
        report.results += results;
        report.store.added += restored.added;
        report.store.replaced += restored.replaced;
        report.store.unchanged += restored.unchanged;
        report.restored_segments += 1;
    }

    progress(RestoreProgress {
        segments_done: done,
        segments: report.segments,
        results: report.results,
    });
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
    let updates = store.alerts()?.incident_updates();
    report.updates = super::updates::restore(bucket, &updates).await?;
    Ok(report)
}

/// A segment as its download and first pass left it.
enum Fetched {
    /// Downloaded and verified whole: ready to be put into the store.
    Verified {
        header: segment::Header,
        bytes: Bytes,
        version: ObjectVersion,
    },
    /// Downloaded, and refused by the verification (why).
    Damaged {
        reason: String,
        version: ObjectVersion,
    },
    /// Listed, but gone when downloaded.
    Missing,
    /// Still at the ETag of a segment refused before: not downloaded.
    Unchanged,
    /// Over [`segment::MAX_SEGMENT_BYTES`]: not read.
    Oversized { size: u64, version: ObjectVersion },
}

/// Downloads segment `name` (unless it is still at `etag`) and verifies
/// it whole, a line at a time, keeping nothing of what it reads (the
/// first pass; `segment::read` bounds its memory).
async fn fetch(
    bucket: &Bucket,
    node: &str,
    name: &str,
    etag: Option<&str>,
) -> Result<Fetched, ReplicateError> {
    let (bytes, version) = match bucket
        .get_capped(name, segment::MAX_SEGMENT_BYTES, etag)
        .await?
    {
        Capped::Found { bytes, version } => (bytes, version),
        Capped::Missing => return Ok(Fetched::Missing),
        Capped::Unchanged => return Ok(Fetched::Unchanged),
        Capped::Oversized { size, version } => return Ok(Fetched::Oversized { size, version }),
    };
    let (node, name, read) = (node.to_string(), name.to_string(), bytes.clone());
    let verified = blocking(move || {
        segment::read(&node, &name, &read, |_, _| {
            Ok::<(), std::convert::Infallible>(())
        })
    })
    .await?;
    Ok(match verified {
        Ok(Ok(header)) => Fetched::Verified {
            header,
            bytes,
            version,
        },
        Err(err) => Fetched::Damaged {
            reason: err.to_string(),
            version,
        },
    })
}

/// Reports segment `name` as unusable and remembers its ETag, so that the
/// next restore does not download it again unless it changed.
async fn refuse(
    store: &Arc<SledStore>,
    report: &mut RestoreReport,
    name: String,
    version: &ObjectVersion,
    reason: String,
) -> Result<(), ReplicateError> {
    if let Some(etag) = version.etag() {
        let refused = RefusedSegment {
            etag: etag.to_string(),
            reason: reason.clone(),
        };
        let (target, known) = (store.clone(), name.clone());
        blocking(move || target.remember_refused_segment(&known, &refused)).await??;
    }
    report.corrupt.push(CorruptSegment { name, reason });
    Ok(())
}

/// Reads a verified segment again (without hashing it again) and puts its
/// results into `store` through one [`Restoring`](crate::store::Restoring),
/// which gathers a check's new results into full blocks: how many, and
/// what the store did.
fn put_in(
    store: &SledStore,
    node: &str,
    name: &str,
    bytes: &Bytes,
) -> Result<Result<(u64, Restored), StoreError>, SegmentError> {
    let mut results = 0u64;
    let mut restoring = store.restoring();
    let read = segment::read_verified(node, name, bytes, |_, outcome| {
        results += 1;
        restoring.put(outcome)
    })?;
    if let Err(err) = read {
        return Ok(Err(err));
    }
    Ok(restoring.finish().map(|restored| (results, restored)))
}
