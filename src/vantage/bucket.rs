//! The vantages' place in the bucket, and every request they make there:
//!
//! - `<prefix>/<node>/state.json`: each node's [`NodeState`], overwritten
//!   by it, looked up (HEAD) by the others for liveness and read (GET) when
//!   a check waits for confirmation;
//! - `<prefix>/<node>/conditional-probe`: the start-up test that the
//!   bucket honours `If-None-Match: *` (one object per node, rewritten);
//! - `<prefix>/incidents/<check>/...`: the claims (`claim.rs`).
//!
//! Every object is signed by the node that wrote it (`signed.rs`) and read
//! under a size cap (8 MiB for a state, 4 KiB for a claim or pointer)
//! checked before its body is: what does not verify, or is too big, is
//! refused, counted in `vigie_vantage_rejected_total` and remembered by
//! its ETag, so that it is not downloaded again until it changes.
//!
//! The client is `replicate::bucket::Bucket` with `[replication]`'s
//! endpoint, region and keys, and a short request budget: coordination
//! that cannot answer within seconds is unavailable, and vigie pages
//! without it rather than wait.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use time::OffsetDateTime;

use super::published::NodeState;
use super::signed::{Keys, Reason, Rejection, MAX_CLAIM_BYTES, MAX_STATE_BYTES};
use super::stats::VantageStats;
use crate::config::{ReplicationConfig, VantageConfig};
use crate::replicate::bucket::{Bucket, BucketSettings, Capped, ObjectVersion};
use crate::replicate::ReplicateError;

/// Refused objects remembered by name (each with its ETag): a bound, so
/// that an attacker writing many names cannot grow it without end.
const MAX_REMEMBERED: usize = 1024;

/// Claims won that a state lists: enough for every mail of a few minutes,
/// a few kilobytes at most.
const MAX_WON_LISTED: usize = 64;

/// The coordination bucket as one node uses it.
#[derive(Debug, Clone)]
pub struct Coordinator {
    bucket: Bucket,
    prefix: String,
    keys: Keys,
    max_clock_skew: Duration,
    stats: Arc<VantageStats>,
    /// Refused objects by name: their version (with the ETag) and why.
    refused: Arc<Mutex<HashMap<String, (ObjectVersion, Rejection)>>>,
    /// The claims this node won lately, newest last, for its state.
    won: Arc<Mutex<VecDeque<String>>>,
}

/// What the conditional-write test found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional {
    Honoured,
    /// The bucket accepted a create over an existing object.
    Ignored,
}

/// A signed object as read from the bucket.
#[derive(Debug)]
pub enum Signed<T> {
    Missing,
    /// Verified: written by `signer`.
    Valid {
        value: T,
        signer: String,
        version: ObjectVersion,
    },
    /// There, but refused (already counted).
    Refused {
        why: Rejection,
        version: ObjectVersion,
    },
}

impl Coordinator {
    /// The client; sends nothing.
    pub fn open(
        vantage: &VantageConfig,
        replication: &ReplicationConfig,
        extra_ca_file: Option<&std::path::Path>,
        stats: Arc<VantageStats>,
    ) -> Result<Coordinator, ReplicateError> {
        let mut settings = BucketSettings::from_config(replication, extra_ca_file)
            .with_url(&format!("s3://{}/{}", vantage.bucket, vantage.prefix))?;
        settings.request_timeout = vantage.request_timeout;
        settings.max_retries = 1;
        settings.retry_timeout = vantage.request_timeout;
        Ok(Coordinator {
            bucket: Bucket::open(&settings)?,
            prefix: vantage.prefix.clone(),
            keys: Keys::of(vantage),
            max_clock_skew: vantage.max_clock_skew,
            stats,
            refused: Arc::default(),
            won: Arc::default(),
        })
    }

    pub fn stats(&self) -> &Arc<VantageStats> {
        &self.stats
    }

    pub fn node(&self) -> &str {
        self.keys.node()
    }

    /// `s3://bucket/prefix`, for messages.
    pub fn shown(&self) -> String {
        self.bucket.shown()
    }

    pub fn state_name(&self, node: &str) -> String {
        format!("{}/{node}/state.json", self.prefix)
    }

    /// `<prefix>/incidents/<check>`; vigie's own pseudo-checks
    /// (`vigie:vantage:fra`) as `VIGIE-vantage-fra`: a colon in a key is
    /// signed differently by different S3 implementations, and no check
    /// name has capitals.
    pub fn incident_dir(&self, check: &str) -> String {
        let segment = match check.strip_prefix("vigie:") {
            Some(rest) => format!("VIGIE-{}", rest.replace(':', "-")),
            None => check.to_string(),
        };
        format!("{}/incidents/{segment}", self.prefix)
    }

    /// Does the bucket refuse a create over an existing object? Writes the
    /// probe object, then tries to create it again.
    pub async fn test_conditional(
        &self,
        now: OffsetDateTime,
    ) -> Result<Conditional, ReplicateError> {
        let name = format!("{}/{}/conditional-probe", self.prefix, self.node());
        let body = format!(
            "vigie conditional-write probe {}\n",
            now.unix_timestamp_nanos()
        );
        self.stats.add_requests(2);
        self.bucket.put(&name, body.clone().into_bytes()).await?;
        match self.bucket.create(&name, body.into_bytes()).await? {
            false => Ok(Conditional::Honoured),
            true => Ok(Conditional::Ignored),
        }
    }

    pub async fn publish(&self, state: &NodeState) -> Result<(), ReplicateError> {
        self.stats.add_requests(1);
        let name = self.state_name(self.node());
        self.bucket.put(&name, self.keys.seal(&name, state)).await
    }

    /// When the bucket last wrote `node`'s state (one HEAD; not a
    /// listing, which would walk every claim ever made under the prefix).
    /// The ETag, not the time, tells a new state from the last one read:
    /// S3's Last-Modified has whole seconds.
    pub async fn state_modified(
        &self,
        node: &str,
    ) -> Result<Option<(OffsetDateTime, Option<String>)>, ReplicateError> {
        self.stats.add_requests(1);
        self.bucket.modified(&self.state_name(node)).await
    }

    /// `node`'s state, if it is `node`'s: signed by it, at most 8 MiB, with
    /// no probe further ahead of `now` than `max_clock_skew`.
    pub async fn fetch_state(
        &self,
        node: &str,
        now: OffsetDateTime,
    ) -> Result<Signed<NodeState>, ReplicateError> {
        let name = self.state_name(node);
        let read = self
            .read_signed(&name, MAX_STATE_BYTES, |s: &NodeState| &s.node)
            .await?;
        let read = match read {
            Signed::Valid { value, version, .. } if value.node != node => {
                let why = Rejection::new(
                    Reason::Signer,
                    format!("{name} holds the state of {}", value.node),
                );
                self.refuse(&name, version, why)
            }
            Signed::Valid { value, version, .. } => {
                match value.ahead_of(now, self.max_clock_skew) {
                    Some(ahead) => {
                        let why = Rejection::new(Reason::ClockSkew, ahead);
                        self.refuse(&name, version, why)
                    }
                    None => Signed::Valid {
                        value,
                        signer: node.to_string(),
                        version,
                    },
                }
            }
            other => other,
        };
        if let Signed::Refused { why, .. } = &read {
            // Counted against the node whose place it took.
            if !why.repeated {
                self.stats.rejected(node, why, now);
            }
        }
        Ok(read)
    }

    /// A claim or pointer named `name`; `author` is the node it says it is
    /// from, which must have signed it.
    pub(super) async fn read_claim<T: DeserializeOwned>(
        &self,
        name: &str,
        now: OffsetDateTime,
        author: impl Fn(&T) -> &str,
    ) -> Result<Signed<T>, ReplicateError> {
        let read = self.read_signed(name, MAX_CLAIM_BYTES, author).await?;
        if let Signed::Refused { why, .. } = &read {
            if !why.repeated {
                self.stats
                    .rejected(self.keys.fleet_name(&why.signer), why, now);
            }
        }
        Ok(read)
    }

    /// One capped, verified read. A refused object's ETag is sent as
    /// `If-None-Match`: while it is unchanged it is not downloaded again,
    /// and the earlier refusal stands (not counted twice).
    async fn read_signed<T: DeserializeOwned>(
        &self,
        name: &str,
        cap: u64,
        author: impl Fn(&T) -> &str,
    ) -> Result<Signed<T>, ReplicateError> {
        let known = self.remembered(name);
        let etag = known
            .as_ref()
            .and_then(|(v, _)| v.etag().map(str::to_string));
        self.stats.add_requests(1);
        let got = self.bucket.get_capped(name, cap, etag.as_deref()).await?;
        Ok(match got {
            Capped::Missing => Signed::Missing,
            Capped::Unchanged => match known {
                Some((version, why)) => {
                    // The caller counts refusals it is told about; this one
                    // was counted when first seen.
                    return Ok(Signed::Refused {
                        why: Rejection {
                            repeated: true,
                            ..why
                        },
                        version,
                    });
                }
                None => Signed::Missing,
            },
            Capped::Oversized { size, version } => {
                let why = Rejection::new(
                    Reason::Oversized,
                    format!("{name} has {size} bytes, more than the {cap} it may have"),
                );
                self.refuse(name, version, why)
            }
            Capped::Found { bytes, version } => match self.keys.open(name, &bytes, author) {
                Ok((signer, value)) => {
                    self.forget(name);
                    Signed::Valid {
                        value,
                        signer,
                        version,
                    }
                }
                Err(why) => self.refuse(name, version, why),
            },
        })
    }

    fn refuse<T>(&self, name: &str, version: ObjectVersion, why: Rejection) -> Signed<T> {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        if refused.len() >= MAX_REMEMBERED && !refused.contains_key(name) {
            refused.clear();
        }
        refused.insert(name.to_string(), (version.clone(), why.clone()));
        Signed::Refused { why, version }
    }

    fn remembered(&self, name: &str) -> Option<(ObjectVersion, Rejection)> {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        refused.get(name).cloned()
    }

    fn forget(&self, name: &str) {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        refused.remove(name);
    }

    /// This node won the claim `name`: its next states list it.
    pub(super) fn won(&self, name: &str) {
        let mut won = self.won.lock().unwrap_or_else(|p| p.into_inner());
        if won.len() >= MAX_WON_LISTED {
            won.pop_front();
        }
        won.push_back(name.to_string());
    }

    /// The claims this node won lately, oldest first.
    pub fn won_claims(&self) -> Vec<String> {
        let won = self.won.lock().unwrap_or_else(|p| p.into_inner());
        won.iter().cloned().collect()
    }

    /// Creates `name` with `value` signed, unless it exists
    /// (`If-None-Match: *`): `false` if it did.
    pub(super) async fn create<T: Serialize>(
        &self,
        name: &str,
        value: &T,
    ) -> Result<bool, ReplicateError> {
        self.stats.add_requests(1);
        self.bucket.create(name, self.keys.seal(name, value)).await
    }

    /// Rewrites `name` with `value` signed if it is still at `version`.
    pub(super) async fn update<T: Serialize>(
        &self,
        name: &str,
        value: &T,
        version: &ObjectVersion,
    ) -> Result<bool, ReplicateError> {
        self.stats.add_requests(1);
        self.bucket
            .update(name, self.keys.seal(name, value), version)
            .await
    }
}
