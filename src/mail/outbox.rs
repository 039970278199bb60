//! The outbox as the mail side sees it: the store's [`OutboxStore`] (pending
//! mail, dead letters, the delivery backoff, in the history's database),
//! plus what only a running sender needs: the signal that wakes it and the
//! counters `/metrics` and `/healthz` read.
//!
//! Durability: [`Outbox::enqueue`] and [`Outbox::flush_and_wake`] flush
//! before the sender is woken, and a delivered message's removal is flushed
//! before the next message is sent, so a crash re-sends at most the one
//! message whose acceptance had not reached the disk. A deferral is not
//! flushed on its own: losing one only means an early retry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use time::OffsetDateTime;
use tokio::sync::Notify;

use super::stats::MailStats;
use super::MailError;
use crate::alert::Email;
use crate::store::{DeadLetter, MessageId, OutboxStore, Pending, Schedule, TransportState};

/// Pending and given-up mail, and the signal that wakes the sender.
#[derive(Debug)]
pub struct Outbox {
    store: OutboxStore,
    wake: Notify,
    stats: Arc<MailStats>,
    /// Ids below this are in the backlog gauge (see `count_new`).
    counted_below: AtomicU64,
}

impl Outbox {
    /// The outbox over `store`, with what it holds counted.
    pub fn new(store: OutboxStore) -> Outbox {
        let stats = Arc::new(MailStats::default());
        let (backlog, highest) = store.count_from(0);
        stats.set_backlog(backlog, None);
        stats.set_dead_letters(store.dead_len() as u64);
        Outbox {
            store,
            wake: Notify::new(),
            stats,
            counted_below: AtomicU64::new(highest.map_or(0, |id| id.saturating_add(1))),
        }
    }

    /// Counters for `/metrics` and `/healthz`.
    pub fn stats(&self) -> Arc<MailStats> {
        self.stats.clone()
    }

    /// Queues `message` on its own, durably, and wakes the sender.
    pub async fn enqueue(
        &self,
        message: &Email,
        now: OffsetDateTime,
    ) -> Result<MessageId, MailError> {
        let id = self.store.enqueue(message, now)?;
        self.stats.add_backlog(1);
        self.counted_below
            .fetch_max(id.saturating_add(1), Ordering::Relaxed);
        self.store.flush().await?;
        self.wake.notify_one();
        Ok(id)
    }

    /// After messages were queued through the store
    /// ([`crate::store::AlertStore::commit`]): makes them durable, counts
    /// them, and wakes the sender.
    pub async fn flush_and_wake(&self) -> Result<(), MailError> {
        self.store.flush().await?;
        self.count_new();
        self.wake.notify_one();
        Ok(())
    }

    /// Adds the messages queued through the store since the last count to
    /// the backlog gauge. Ids only grow, so only keys above the highest one
    /// counted are read, not the whole backlog (which an outage can make
    /// large). Two commits out of id order can leave one message uncounted
    /// until the sender's next pass recounts everything.
    fn count_new(&self) {
        let (added, highest) = self
            .store
            .count_from(self.counted_below.load(Ordering::Relaxed));
        if let Some(id) = highest {
            self.counted_below
                .fetch_max(id.saturating_add(1), Ordering::Relaxed);
            self.stats.add_backlog(added as i64);
        }
    }

    /// Wakes the sender without writing (after a config change, say).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Resolves once someone queued mail since the last call.
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Messages waiting, oldest first (for the API and the report).
    pub fn pending(&self) -> Result<Vec<Pending>, MailError> {
        Ok(self.store.pending()?)
    }

    /// Every dead letter, oldest first (for the daily report).
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>, MailError> {
        Ok(self.store.dead_letters()?)
    }

    /// The dead letters as the daily report lists them; a tree that
    /// cannot be read is logged and lists none.
    pub fn dead_letters_for_report(&self) -> Vec<crate::alert::report::DeadLetter> {
        match self.dead_letters() {
            Ok(letters) => letters
                .into_iter()
                .map(|d| crate::alert::report::DeadLetter {
                    at: d.given_up_at,
                    subject: d.message.subject,
                    to: d.message.to,
                    error: d.reason,
                })
                .collect(),
            Err(err) => {
                tracing::error!(error = %err, "cannot read dead letters");
                Vec::new()
            }
        }
    }

    /// Deletes dead letters given up before `before`; returns how many.
    pub fn sweep_dead_letters(&self, before: OffsetDateTime) -> Result<u64, MailError> {
        let swept = self.store.sweep_dead_letters(before)?;
        self.stats.set_dead_letters(self.store.dead_len() as u64);
        Ok(swept)
    }

    /// Every message's schedule, in id order, without decoding bodies.
    pub(crate) fn schedules(
        &self,
    ) -> impl Iterator<Item = Result<(MessageId, Schedule), MailError>> + '_ {
        self.store
            .schedules()
            .map(|entry| entry.map_err(MailError::from))
    }

    /// One message, if it is still queued.
    pub(crate) fn load(&self, id: MessageId) -> Result<Option<Pending>, MailError> {
        Ok(self.store.load(id)?)
    }

    /// The server accepted it: removes it, durably, before anything else
    /// is sent. The backlog gauge drops once the removal is on disk, so a
    /// backlog of 0 means nothing would be sent again after a crash.
    pub(crate) async fn delivered(
        &self,
        id: MessageId,
        at: OffsetDateTime,
    ) -> Result<(), MailError> {
        let removed = self.store.remove(id)?;
        if removed {
            self.store.mark_told(id, at);
        }
        let flushed = self.store.flush().await;
        if removed {
            self.stats.add_backlog(-1);
        }
        Ok(flushed?)
    }

    /// The server deferred it: one more attempt, the next one at `next`.
    pub(crate) fn defer(
        &self,
        pending: &Pending,
        error: &str,
        next: OffsetDateTime,
    ) -> Result<(), MailError> {
        Ok(self.store.defer(pending, error, next)?)
    }

    /// Gives it up: moves it to the dead letters, durably.
    pub(crate) async fn bury(
        &self,
        pending: &Pending,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<(), MailError> {
        self.store.bury(pending, reason, now)?;
        self.stats.add_backlog(-1);
        self.stats.set_dead_letters(self.store.dead_len() as u64);
        Ok(self.store.flush().await?)
    }

    /// The persisted server backoff, if any.
    pub(crate) fn transport(&self) -> Result<Option<TransportState>, MailError> {
        Ok(self.store.transport()?)
    }

    pub(crate) fn set_transport(&self, state: Option<&TransportState>) -> Result<(), MailError> {
        Ok(self.store.set_transport(state)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::alerting_contract::message;
    use crate::store::{open_sled_when_unlocked, AlertStore, SledStore};
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);

    fn open(dir: &std::path::Path) -> (Outbox, AlertStore, SledStore) {
        let sled = open_sled_when_unlocked(dir);
        let alerts = sled.alerts().unwrap();
        (Outbox::new(alerts.outbox()), alerts, sled)
    }

    #[tokio::test]
    async fn queued_mail_survives_a_reopen_and_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let ids = {
            let (outbox, alerts, _sled) = open(dir.path());
            let a = outbox.enqueue(&message(1), T0).await.unwrap();
            let b = alerts.commit(&[], &message(2), T0).unwrap();
            outbox.flush_and_wake().await.unwrap();
            assert_eq!(outbox.stats().snapshot().backlog, 2);
            vec![a, b]
        };
        let (outbox, _alerts, _sled) = open(dir.path());
        let pending = outbox.pending().unwrap();
        assert_eq!(pending.iter().map(|p| p.id).collect::<Vec<_>>(), ids);
        assert_eq!(pending[0].message, message(1));
        assert_eq!(outbox.stats().snapshot().backlog, 2, "counted at open");
        let later = outbox.enqueue(&message(3), T0).await.unwrap();
        assert!(later > ids[1], "ids keep increasing after a reopen");
    }

    #[tokio::test]
    async fn the_gauges_follow_delivery_and_burial() {
        let outbox = Outbox::new(AlertStore::in_memory().outbox());
        let a = outbox.enqueue(&message(1), T0).await.unwrap();
        let b = outbox.enqueue(&message(2), T0).await.unwrap();
        let pa = outbox.load(a).unwrap().unwrap();
        outbox.bury(&pa, "550 no such user", T0).await.unwrap();
        outbox.delivered(b, T0).await.unwrap();
        outbox.delivered(b, T0).await.unwrap();
        let snap = outbox.stats().snapshot();
        assert_eq!((snap.backlog, snap.dead_letters), (0, 1));
        outbox
            .sweep_dead_letters(T0 + time::Duration::SECOND)
            .unwrap();
        assert_eq!(outbox.stats().snapshot().dead_letters, 0);
    }
}
