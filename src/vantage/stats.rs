//! What the vantage task and the alerter count, for `/metrics`, `/healthz`
//! and the benchmark.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use time::OffsetDateTime;

use super::signed::{Reason, Rejection};
use crate::clock::saturating_sub;
use crate::metrics::{Exposition, Family};

/// How long a refused object, or a page sent over a claim its claimant's
/// state did not confirm, stays listed under `/healthz`'s `degraded`.
const SHOWN_FOR: Duration = Duration::from_secs(3600);

/// Shared by the vantage task (bucket side) and the alerter (pages side).
#[derive(Debug, Default)]
pub struct VantageStats {
    peers_alive: AtomicU64,
    publish_failures: AtomicU64,
    publications: AtomicU64,
    /// Every request sent to the bucket (HEAD, GET, PUT, conditional PUT).
    requests: AtomicU64,
    confirmations: AtomicU64,
    vetoes: AtomicU64,
    sent_elsewhere: AtomicU64,
    uncoordinated_pages: AtomicU64,
    /// Why the vantages cannot coordinate, while they cannot.
    unavailable: Mutex<Option<String>>,
    /// Objects refused, by (peer, reason): how many, the latest in words.
    rejected: Mutex<BTreeMap<(String, Reason), Refused>>,
    /// Pages this node sent over another's claim, by check: the words and
    /// when.
    unconfirmed_claims: Mutex<BTreeMap<String, (String, OffsetDateTime)>>,
}

/// Refused objects of one peer for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub count: u64,
    pub latest: String,
    pub at: OffsetDateTime,
}

/// One reading of [`VantageStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VantageSnapshot {
    pub peers_alive: u64,
    pub publish_failures: u64,
    pub publications: u64,
    pub requests: u64,
    pub confirmations: u64,
    pub vetoes: u64,
    pub sent_elsewhere: u64,
    pub uncoordinated_pages: u64,
    pub unavailable: Option<String>,
    pub rejected: BTreeMap<(String, Reason), Refused>,
    pub unconfirmed_claims: BTreeMap<String, (String, OffsetDateTime)>,
}

macro_rules! counter {
    ($add:ident, $field:ident) => {
        pub fn $add(&self, n: u64) {
            self.$field.fetch_add(n, Ordering::Relaxed);
        }
    };
}

impl VantageStats {
    counter!(add_requests, requests);
    counter!(add_confirmations, confirmations);
    counter!(add_vetoes, vetoes);
    counter!(add_sent_elsewhere, sent_elsewhere);
    counter!(add_uncoordinated, uncoordinated_pages);

    pub fn published(&self, ok: bool) {
        match ok {
            true => self.publications.fetch_add(1, Ordering::Relaxed),
            false => self.publish_failures.fetch_add(1, Ordering::Relaxed),
        };
    }

    pub fn set_peers_alive(&self, n: u64) {
        self.peers_alive.store(n, Ordering::Relaxed);
    }

    pub fn set_unavailable(&self, why: Option<String>) {
        *self.unavailable.lock().unwrap_or_else(|p| p.into_inner()) = why;
    }

    /// An object of `peer`'s refused: counted, logged, and listed under
    /// `degraded` for a while.
    pub fn rejected(&self, peer: &str, why: &Rejection, now: OffsetDateTime) {
        tracing::warn!(peer = %peer, reason = why.reason.as_str(), detail = %why.detail, "vantage object refused");
        let mut rejected = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
        let entry = rejected
            .entry((peer.to_string(), why.reason))
            .or_insert(Refused {
                count: 0,
                latest: String::new(),
                at: now,
            });
        entry.count += 1;
        entry.latest = why.detail.clone();
        entry.at = now;
    }

    /// This node sent `check`'s page over another node's claim.
    pub fn sent_over_claim(&self, check: &str, words: &str, now: OffsetDateTime) {
        self.unconfirmed_claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(check.to_string(), (words.to_string(), now));
    }

    pub fn snapshot(&self) -> VantageSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        VantageSnapshot {
            peers_alive: load(&self.peers_alive),
            publish_failures: load(&self.publish_failures),
            publications: load(&self.publications),
            requests: load(&self.requests),
            confirmations: load(&self.confirmations),
            vetoes: load(&self.vetoes),
            sent_elsewhere: load(&self.sent_elsewhere),
            uncoordinated_pages: load(&self.uncoordinated_pages),
            unavailable: self
                .unavailable
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            rejected: self
                .rejected
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            unconfirmed_claims: self
                .unconfirmed_claims
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }
}

const REJECTED: Family = Family::counter(
    "vigie_vantage_rejected_total",
    "Objects in the bucket refused (signature, signer, clock_skew, oversized, malformed), by the peer they claim to be from.",
);

impl VantageSnapshot {
    /// Every vantage family for `/metrics`.
    pub fn write_metrics(&self, out: &mut String) {
        let mut m = Exposition::new(out);
        let families: [(Family, u64); 9] = [
            (Family::gauge("vigie_vantage_peers_alive", "Peer vantages whose state in the bucket is newer than stale_after."), self.peers_alive),
            (Family::gauge("vigie_vantage_coordination_up", "1 while the vantages coordinate through the bucket; 0: each pages on its own judgment."), u64::from(self.unavailable.is_none())),
            (Family::counter("vigie_vantage_publications_total", "States published to the bucket."), self.publications),
            (Family::counter("vigie_vantage_publish_failures_total", "States that could not be published."), self.publish_failures),
            (Family::counter("vigie_vantage_bucket_requests_total", "Requests sent to the coordination bucket."), self.requests),
            (Family::counter("vigie_vantage_confirmations_total", "Pages sent once a quorum of vantages confirmed them."), self.confirmations),
            (Family::counter("vigie_vantage_vetoes_total", "Incidents the other vantages did not confirm within one publication (held, not paged)."), self.vetoes),
            (Family::counter("vigie_vantage_sent_elsewhere_total", "Mail events another vantage claimed and sent."), self.sent_elsewhere),
            (Family::counter("vigie_vantage_uncoordinated_pages_total", "Mail events sent without coordination (bucket unavailable)."), self.uncoordinated_pages),
        ];
        for (family, value) in families {
            m.single(&family, value as f64);
        }
        m.family(&REJECTED);
        for ((peer, reason), refused) in &self.rejected {
            let peer = label(peer);
            let labels = [("peer", peer.as_str()), ("reason", reason.as_str())];
            m.sample(&REJECTED, &labels, refused.count as f64);
        }
    }

    /// The `degraded` lines: objects refused and pages sent over an
    /// unconfirmed claim within the last hour. Each names the peer and the
    /// cause, not the bucket.
    pub fn degradations(&self, now: OffsetDateTime) -> Vec<String> {
        let since = saturating_sub(now, SHOWN_FOR);
        let mut out = Vec::new();
        for ((peer, reason), refused) in &self.rejected {
            if refused.at >= since {
                out.push(format!(
                    "vantage: {} object(s) claiming to be from {peer} refused ({}), the latest at {}: {}",
                    refused.count,
                    reason.as_str(),
                    crate::when::minute(refused.at),
                    refused.latest
                ));
            }
        }
        for (check, (words, at)) in &self.unconfirmed_claims {
            if *at >= since {
                out.push(format!(
                    "vantage: {check}: {words} (at {})",
                    crate::when::minute(*at)
                ));
            }
        }
        out
    }
}

/// A label value: peer names come from config or from a refused object,
/// which may hold anything.
fn label(value: &str) -> String {
    value
        .chars()
        .take(64)
        .map(|c| match c {
            '"' | '\\' | '\n' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect()
}
