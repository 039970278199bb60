//! The vantages' place in the bucket, and every request they make there:
//!
//! - `<prefix>/<node>/state.json`: each node's [`NodeState`], overwritten
//!   by it, looked up (HEAD) by the others for liveness and read (GET) when
//!   a check waits for confirmation;
//! - `<prefix>/<node>/conditional-probe`: the start-up test that the
//!   bucket honours `If-None-Match: *` (one object per node, rewritten);
//! - `<prefix>/incidents/<check>/...`: the claims (`claim.rs`).
//!
//! The client is `replicate::bucket::Bucket` with `[replication]`'s
//! endpoint, region and keys, and a short request budget: coordination
//! that cannot answer within seconds is unavailable, and vigie pages
//! without it rather than wait.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::published::NodeState;
use super::stats::VantageStats;
use crate::config::{ReplicationConfig, VantageConfig};
use crate::replicate::bucket::{Bucket, BucketSettings, ObjectVersion};
use crate::replicate::ReplicateError;

/// One request, connect to last byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The coordination bucket as one node uses it.
#[derive(Debug, Clone)]
pub struct Coordinator {
    bucket: Bucket,
    prefix: String,
    node: String,
    stats: Arc<VantageStats>,
}

/// What the conditional-write test found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional {
    Honoured,
    /// The bucket accepted a create over an existing object.
    Ignored,
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
        settings.request_timeout = REQUEST_TIMEOUT;
        settings.max_retries = 1;
        settings.retry_timeout = REQUEST_TIMEOUT;
        Ok(Coordinator {
            bucket: Bucket::open(&settings)?,
            prefix: vantage.prefix.clone(),
            node: vantage.node.clone(),
            stats,
        })
    }

    pub fn stats(&self) -> &Arc<VantageStats> {
        &self.stats
    }

    pub fn node(&self) -> &str {
        &self.node
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
        let name = format!("{}/{}/conditional-probe", self.prefix, self.node);
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
        self.bucket
            .put(&self.state_name(&self.node), state.to_json())
            .await
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

    /// A peer's state; `Ok(Err(why))` when what is there is not one.
    pub async fn fetch_state(
        &self,
        node: &str,
    ) -> Result<Result<NodeState, String>, ReplicateError> {
        self.stats.add_requests(1);
        match self.bucket.get_versioned(&self.state_name(node)).await? {
            Some((bytes, _)) => Ok(NodeState::from_json(&bytes)),
            None => Ok(Err("no state in the bucket".to_string())),
        }
    }

    pub(super) async fn create(&self, name: &str, body: Vec<u8>) -> Result<bool, ReplicateError> {
        self.stats.add_requests(1);
        self.bucket.create(name, body).await
    }

    pub(super) async fn read(
        &self,
        name: &str,
    ) -> Result<Option<(bytes::Bytes, ObjectVersion)>, ReplicateError> {
        self.stats.add_requests(1);
        self.bucket.get_versioned(name).await
    }

    pub(super) async fn update(
        &self,
        name: &str,
        body: Vec<u8>,
        version: &ObjectVersion,
    ) -> Result<bool, ReplicateError> {
        self.stats.add_requests(1);
        self.bucket.update(name, body, version).await
    }
}
