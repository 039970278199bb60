//! Several vigies, one verdict: the vantages' coordination through the
//! bucket, with no server and no consensus code of vigie's own.
//!
//! Each vigie (a *vantage*) probes every check itself. Every
//! `publish_every` it overwrites its state in the bucket
//! ([`published::NodeState`]); before it pages, it reads its peers' states
//! and pages only when a quorum of live vantages judges the check down
//! ([`quorum`]); and it claims each mail with a conditional create, so that
//! exactly one node sends it ([`claim`]). When the bucket cannot be
//! reached, or does not honour conditional writes, each node pages on its
//! own judgment and says so: coordination failing never silences a page.
//!
//! - `published`: the state one node publishes, its JSON shape.
//! - `quorum`: the rule, pure (timeline tests in the file).
//! - `bucket`: [`Coordinator`], every request to the bucket.
//! - `claim`: the incident key and the claims.
//! - `signed`: the signed envelope of every object, and why one is refused.
//! - `stats`: the counters `/metrics` and `/healthz` read.
//! - `wanted`: what the alerter asks of the vantage task (publish now, read
//!   the peers now).
//! - `page_claims`: [`PageClaims`], the alerter's questions to the fleet
//!   (holds, claims, what a mail says of the others), and [`SingleNode`].
//! - `bucket_claims`: [`BucketClaims`], the answers through the bucket.
//! - `released`: what a released page says of the vantages (the words of
//!   the judgment that released it).
//!
//! The task that publishes and reads is `daemon/vantage_task.rs`; the
//! alerter (`daemon/alerter.rs`) asks through [`PageClaims`] only.

pub mod bucket;
pub mod bucket_claims;
pub mod claim;
pub mod page_claims;
pub mod published;
pub mod quorum;
pub mod released;
pub mod signed;
pub mod stats;
#[cfg(test)]
mod timeline;
pub mod wanted;

pub use bucket::{Conditional, Coordinator, Signed};
pub use bucket_claims::{BucketClaims, VantageLink};
pub use claim::{claim, ClaimRequest, Claimed, MessageIdFor};
pub use page_claims::{NewClaims, PageClaims, SingleNode};
pub use published::{CheckView, LocalView, NodeHealth, NodeState, ViewStatus};
pub use quorum::{
    silent_check, silent_words, unbacked_claim_words, BackedClaim, Coordination, Fleet, Judgment,
    Peer,
};
pub use signed::{Reason, Rejection};
pub use stats::{VantageSnapshot, VantageStats};
pub use wanted::Wanted;
