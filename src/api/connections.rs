//! The listener's connection counters ([`ServerStats`]), kept by
//! `serve.rs` and the request deadline, and the `/metrics` families that
//! show them.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics::{Exposition, Family};

/// Connection counters for `/metrics`.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub(super) open: AtomicU64,
    pub(super) accepted: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) evicted: AtomicU64,
    pub(super) timed_out: AtomicU64,
    pub(super) shed: AtomicU64,
}

/// A copy of [`ServerStats`] at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSnapshot {
    /// Connections open now.
    pub open: u64,
    pub accepted_total: u64,
    /// Closed at once: every connection was busy answering.
    pub refused_total: u64,
    /// Closed to make room for a newcomer (no request in flight).
    pub evicted_total: u64,
    /// Closed by the request deadline or the idle timeout.
    pub timed_out_total: u64,
    /// Requests answered 503 at once: every place not held back for
    /// `/healthz` and bearer-token requests was answering.
    pub shed_total: u64,
}

impl ServerStats {
    pub fn snapshot(&self) -> ServerSnapshot {
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        ServerSnapshot {
            open: load(&self.open),
            accepted_total: load(&self.accepted),
            refused_total: load(&self.refused),
            evicted_total: load(&self.evicted),
            timed_out_total: load(&self.timed_out),
            shed_total: load(&self.shed),
        }
    }

    pub(super) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_timed_out(&self) {
        Self::count(&self.timed_out);
    }
}

impl ServerSnapshot {
    /// The listener's `/metrics` families.
    pub fn write_metrics(&self, out: &mut String) {
        let mut m = Exposition::new(out);
        let families = [
            (
                Family::gauge("vigie_api_connections", "connections to the API open now"),
                self.open,
            ),
            (
                Family::counter(
                    "vigie_api_connections_accepted_total",
                    "connections accepted",
                ),
                self.accepted_total,
            ),
            (
                Family::counter(
                    "vigie_api_connections_refused_total",
                    "connections closed at once: every connection was answering a request",
                ),
                self.refused_total,
            ),
            (
                Family::counter(
                    "vigie_api_connections_evicted_total",
                    "connections without a request in flight closed to make room for a newcomer",
                ),
                self.evicted_total,
            ),
            (
                Family::counter(
                    "vigie_api_connections_timed_out_total",
                    "connections closed by the request deadline (head and body) or the idle timeout",
                ),
                self.timed_out_total,
            ),
            (
                Family::counter(
                    "vigie_api_requests_shed_total",
                    "requests answered 503 at once: every place not held back for /healthz and the token was answering",
                ),
                self.shed_total,
            ),
        ];
        for (family, value) in families {
            m.single(&family, value as f64);
        }
    }
}
