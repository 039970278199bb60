//! The contract every history backend honours: the [`Store`] trait, and
//! what an outcome looks like once stored ([`as_stored`]). The rules it
//! states are in `store/mod.rs`; sled's layout is in `format/`.

use time::{OffsetDateTime, UtcOffset};

use super::error::StoreError;
use super::rollup::{Granularity, Rollup, ServedLeaf};
use crate::outcome::{Outcome, VerifyError};

/// Where judged outcomes are kept. Every method may block on disk I/O.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Stores one judged outcome. Key = check id (u32 BE) ++ started_at unix
    /// millis (u64 BE).
    fn append(&self, outcome: &Outcome) -> Result<(), StoreError>;
    /// Outcomes of check `name` with started_at >= since (both truncated to
    /// the millisecond), oldest first; empty if the check is unknown.
    fn history(&self, name: &str, since: OffsetDateTime) -> Result<Vec<Outcome>, StoreError>;
    /// The first `limit` outcomes of [`Store::history`]: what a streamed
    /// answer reads at a time, so that a long window is never decoded
    /// whole. The next page starts a millisecond after the last one.
    fn history_page(
        &self,
        name: &str,
        since: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Outcome>, StoreError>;
    /// The most recent outcome of `name`.
    fn latest(&self, name: &str) -> Result<Option<Outcome>, StoreError>;
    /// The most recent outcome of every check ever stored, ordered by name.
    fn latest_all(&self) -> Result<Vec<Outcome>, StoreError>;
    /// Deletes results that started before `before`; returns how many.
    /// Rollups and the timeline stay (see [`Store::sweep_rollups`]).
    fn sweep(&self, before: OffsetDateTime) -> Result<u64, StoreError>;
    /// The `granularity` rollups of `name` from the bucket holding `since`
    /// on, oldest first; buckets without results are absent. Empty if the
    /// check is unknown.
    fn rollups(
        &self,
        name: &str,
        granularity: Granularity,
        since: OffsetDateTime,
    ) -> Result<Vec<Rollup>, StoreError>;
    /// Every leaf certificate `name` has served (as long as the rollups
    /// keep it), first seen first.
    fn certificates(&self, name: &str) -> Result<Vec<ServedLeaf>, StoreError>;
    /// Deletes the hour rollups that end at or before `hours_before`, the
    /// day rollups that end at or before `days_before`, and the timeline's
    /// leaves last seen before `days_before`; returns how many entries.
    fn sweep_rollups(
        &self,
        hours_before: OffsetDateTime,
        days_before: OffsetDateTime,
    ) -> Result<u64, StoreError>;
    /// Makes everything appended so far durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// Number of stored results (for metrics and benchmarks). The first call
    /// on a sled store counts them (a full scan); later calls are free.
    fn len(&self) -> Result<u64, StoreError>;
    fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }
}

/// An outcome as every backend gives it back (see the module docs): what
/// the contract tests compare with and what [`MemoryStore`](super::MemoryStore) keeps.
pub fn as_stored(outcome: &Outcome) -> Outcome {
    let mut stored = outcome.clone();
    stored.started_at = truncate_to_millis(outcome.started_at);
    if let Some(http) = stored.http.as_mut() {
        http.headers = Vec::new();
        http.body = Vec::new();
    }
    if let Some(tls) = stored.tls.as_mut() {
        let mut chain = tls.chain.to_vec();
        for cert in &mut chain {
            cert.not_before = cert.not_before.to_offset(UtcOffset::UTC);
            cert.not_after = cert.not_after.to_offset(UtcOffset::UTC);
        }
        tls.chain = chain.into();
        match tls.verify_error.as_mut() {
            Some(VerifyError::Expired { not_after: at })
            | Some(VerifyError::NotYetValid { not_before: at }) => {
                *at = at.to_offset(UtcOffset::UTC);
            }
            _ => {}
        }
    }
    stored
}

fn truncate_to_millis(at: OffsetDateTime) -> OffsetDateTime {
    let millis = at.unix_timestamp_nanos().div_euclid(1_000_000);
    OffsetDateTime::from_unix_timestamp_nanos(millis * 1_000_000)
        .unwrap_or(at)
        .to_offset(UtcOffset::UTC)
}
