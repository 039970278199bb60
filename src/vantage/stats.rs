//! What the vantage task and the alerter count, for `/metrics`, `/healthz`
//! and the benchmark.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

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
        }
    }
}

impl VantageSnapshot {
    /// The Prometheus text of every vantage metric.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let lines: [(&str, &str, &str, u64); 9] = [
            ("vigie_vantage_peers_alive", "gauge", "Peer vantages whose state in the bucket is newer than stale_after.", self.peers_alive),
            ("vigie_vantage_coordination_up", "gauge", "1 while the vantages coordinate through the bucket; 0: each pages on its own judgment.", u64::from(self.unavailable.is_none())),
            ("vigie_vantage_publications_total", "counter", "States published to the bucket.", self.publications),
            ("vigie_vantage_publish_failures_total", "counter", "States that could not be published.", self.publish_failures),
            ("vigie_vantage_bucket_requests_total", "counter", "Requests sent to the coordination bucket.", self.requests),
            ("vigie_vantage_confirmations_total", "counter", "Pages sent once a quorum of vantages confirmed them.", self.confirmations),
            ("vigie_vantage_vetoes_total", "counter", "Incidents the other vantages did not confirm within one publication (held, not paged).", self.vetoes),
            ("vigie_vantage_sent_elsewhere_total", "counter", "Mail events another vantage claimed and sent.", self.sent_elsewhere),
            ("vigie_vantage_uncoordinated_pages_total", "counter", "Mail events sent without coordination (bucket unavailable).", self.uncoordinated_pages),
        ];
        for (name, kind, help, value) in lines {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
    }
}
