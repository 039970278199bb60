//! The mail counters: shared by the outbox and the sender, read by
//! `/metrics` (whose families are declared here), health and the daily
//! report through [`MailStats::snapshot`].

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;
use time::OffsetDateTime;

use crate::clock::{from_unix_millis, unix_millis};
use crate::metrics::{Exposition, Family};

/// Counters shared by the outbox and the sender, read by `/metrics`,
/// `/healthz` and the daily report through [`MailStats::snapshot`].
#[derive(Debug, Default)]
pub struct MailStats {
    backlog: AtomicU64,
    /// Unix ms; 0: none.
    oldest_pending_ms: AtomicI64,
    dead_letters: AtomicU64,
    delivered: AtomicU64,
    deferred: AtomicU64,
    dead_lettered: AtomicU64,
    transport_failures: AtomicU64,
    consecutive_failures: AtomicU64,
    failing: AtomicBool,
    last_delivery_ms: AtomicI64,
    last_error: Mutex<Option<(i64, String)>>,
    via: Mutex<String>,
}

/// A consistent-enough copy of [`MailStats`] (each field is read once).
#[derive(Debug, Clone, Serialize)]
pub struct MailSnapshot {
    /// `smtp HOST:PORT (starttls)` or `maildir PATH`.
    pub via: String,
    /// Messages in the outbox.
    pub backlog: u64,
    /// When the oldest of them was queued.
    #[serde(with = "time::serde::rfc3339::option")]
    pub oldest_pending: Option<OffsetDateTime>,
    /// Messages in the dead-letter tree now.
    pub dead_letters: u64,
    /// Since start.
    pub delivered_total: u64,
    pub deferred_total: u64,
    pub dead_lettered_total: u64,
    pub transport_failures_total: u64,
    /// The relay cannot be reached (or refuses vigie) right now.
    pub failing: bool,
    pub consecutive_failures: u64,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_delivery: Option<OffsetDateTime>,
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_error_at: Option<OffsetDateTime>,
}

impl MailStats {
    pub fn snapshot(&self) -> MailSnapshot {
        let time = |ms: i64| (ms != 0).then(|| from_unix_millis(ms)).flatten();
        let last_error = self
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        MailSnapshot {
            via: self.via.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            backlog: self.backlog.load(Ordering::Relaxed),
            oldest_pending: time(self.oldest_pending_ms.load(Ordering::Relaxed)),
            dead_letters: self.dead_letters.load(Ordering::Relaxed),
            delivered_total: self.delivered.load(Ordering::Relaxed),
            deferred_total: self.deferred.load(Ordering::Relaxed),
            dead_lettered_total: self.dead_lettered.load(Ordering::Relaxed),
            transport_failures_total: self.transport_failures.load(Ordering::Relaxed),
            failing: self.failing.load(Ordering::Relaxed),
            consecutive_failures: self.consecutive_failures.load(Ordering::Relaxed),
            last_delivery: time(self.last_delivery_ms.load(Ordering::Relaxed)),
            last_error_at: last_error.as_ref().and_then(|(ms, _)| time(*ms)),
            last_error: last_error.map(|(_, e)| e),
        }
    }

    pub(crate) fn set_backlog(&self, n: u64, oldest: Option<OffsetDateTime>) {
        self.backlog.store(n, Ordering::Relaxed);
        if n == 0 {
            self.oldest_pending_ms.store(0, Ordering::Relaxed);
        } else if let Some(t) = oldest {
            self.oldest_pending_ms
                .store(unix_millis(t), Ordering::Relaxed);
        }
    }

    pub(crate) fn add_backlog(&self, delta: i64) {
        let _ = self
            .backlog
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add_signed(delta))
            });
    }

    pub(crate) fn set_dead_letters(&self, n: u64) {
        self.dead_letters.store(n, Ordering::Relaxed);
    }

    /// Where mail goes now, in words (`Delivery::describe`).
    pub(super) fn set_via(&self, via: String) {
        *self.via.lock().unwrap_or_else(|p| p.into_inner()) = via;
    }

    pub(super) fn delivered(&self, now: OffsetDateTime) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.last_delivery_ms
            .store(unix_millis(now), Ordering::Relaxed);
    }

    pub(super) fn deferred(&self, now: OffsetDateTime, error: &str) {
        self.deferred.fetch_add(1, Ordering::Relaxed);
        self.record_error(now, error);
    }

    pub(super) fn dead_lettered(&self, now: OffsetDateTime, reason: &str) {
        self.dead_lettered.fetch_add(1, Ordering::Relaxed);
        self.record_error(now, reason);
    }

    /// `now: None` when restoring the state persisted by a previous run.
    pub(super) fn transport_failed(
        &self,
        consecutive: u32,
        error: &str,
        now: Option<OffsetDateTime>,
    ) {
        self.failing.store(true, Ordering::Relaxed);
        self.consecutive_failures
            .store(u64::from(consecutive), Ordering::Relaxed);
        if let Some(now) = now {
            self.transport_failures.fetch_add(1, Ordering::Relaxed);
            self.record_error(now, error);
        } else {
            let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
            last.get_or_insert_with(|| (0, error.to_owned()));
        }
    }

    pub(super) fn transport_ok(&self) {
        self.failing.store(false, Ordering::Relaxed);
        self.consecutive_failures.store(0, Ordering::Relaxed);
    }

    pub(super) fn record_error(&self, now: OffsetDateTime, error: &str) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((unix_millis(now), error.to_owned()));
    }
}

impl MailSnapshot {
    /// The outbox's and the sender's `/metrics` families.
    pub fn write_metrics(&self, out: &mut String, now: OffsetDateTime) {
        let mut m = Exposition::new(out);
        let gauges = [
            (
                Family::gauge(
                    "vigie_mail_outbox_backlog",
                    "messages waiting in the outbox",
                ),
                self.backlog,
            ),
            (
                Family::gauge(
                    "vigie_mail_dead_letters",
                    "messages refused for good, kept in the dead-letter tree",
                ),
                self.dead_letters,
            ),
            (
                Family::gauge(
                    "vigie_mail_failing",
                    "1 while the mail server cannot be reached or refuses vigie",
                ),
                u64::from(self.failing),
            ),
            (
                Family::counter(
                    "vigie_mail_delivered_total",
                    "messages the mail server accepted (or written to the maildir)",
                ),
                self.delivered_total,
            ),
            (
                Family::counter(
                    "vigie_mail_deferred_total",
                    "temporary refusals, retried with backoff",
                ),
                self.deferred_total,
            ),
            (
                Family::counter(
                    "vigie_mail_dead_lettered_total",
                    "messages given up (permanent refusal, or deferred too long)",
                ),
                self.dead_lettered_total,
            ),
            (
                Family::counter(
                    "vigie_mail_transport_failures_total",
                    "failures to reach or talk to the mail server",
                ),
                self.transport_failures_total,
            ),
        ];
        for (family, value) in gauges {
            m.single(&family, value as f64);
        }
        let age = self
            .oldest_pending
            .map_or(0.0, |t| (now - t).as_seconds_f64().max(0.0));
        m.single(&OLDEST_PENDING_AGE, age);
    }
}

const OLDEST_PENDING_AGE: Family = Family::gauge(
    "vigie_mail_oldest_pending_age_seconds",
    "age of the oldest message in the outbox (0 when empty)",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_snapshot() {
        let stats = MailStats::default();
        let t = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        stats.set_backlog(3, Some(t));
        stats.add_backlog(-1);
        stats.delivered(t);
        stats.transport_failed(2, "refused", Some(t));
        let snap = stats.snapshot();
        assert_eq!((snap.backlog, snap.oldest_pending), (2, Some(t)));
        assert_eq!((snap.delivered_total, snap.last_delivery), (1, Some(t)));
        assert!(snap.failing);
        assert_eq!(snap.last_error.as_deref(), Some("refused"));
        stats.transport_ok();
        stats.add_backlog(-5);
        let snap = stats.snapshot();
        assert!(!snap.failing);
        assert_eq!(snap.backlog, 0, "never below zero");
    }
}
