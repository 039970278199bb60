//! The durable outbox: pending mail in the `outbox` sled tree, given-up
//! mail in `dead_letters`, both in the history's database so that an alert
//! state change and the message it causes commit together.
//!
//! This module owns the trees and their records; it does not send, and it
//! does not decide when to retry (the sender does, and writes its decisions
//! back here so they survive a restart).
//!
//! # Key layout
//!
//! | tree           | key                  | value |
//! |----------------|----------------------|-------|
//! | `outbox`       | message id (u64 BE)  | `1` ++ next attempt (unix ms, i64 BE) ++ attempts (u32 BE) ++ enqueued (unix ms, i64 BE) ++ postcard body (last error, message) |
//! | `dead_letters` | message id (u64 BE)  | `1` ++ postcard (enqueued, given up, attempts, reason, message) |
//! | `meta`         | `outbox.transport`   | `1` ++ consecutive failures (u32 BE) ++ next attempt (unix ms, i64 BE) ++ last error (UTF-8) |
//!
//! Ids come from sled's `generate_id`: monotonic across restarts and
//! crashes (sled persists a high-water mark and skips ahead on recovery),
//! so the key order is the order messages were queued and an id is never
//! reused. The schedule sits at a fixed offset before the body, so the
//! sender can walk a large backlog reading 21 bytes per message and decode
//! only those that are due.
//!
//! Durability: [`Outbox::enqueue`] and [`Outbox::flush_and_wake`] flush
//! before the sender is woken, and a delivered message's removal is flushed
//! before the next message is sent, so a crash re-sends at most the one
//! message whose acceptance had not reached the disk. A deferral is not
//! flushed on its own: losing one only means an early retry.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sled::transaction::{
    ConflictableTransactionError, ConflictableTransactionResult, TransactionalTree,
};
use sled::{Db, Transactional, Tree};
use time::OffsetDateTime;
use tokio::sync::Notify;

use super::stats::MailStats;
use super::{MailError, OutgoingMessage};
use crate::clock::{from_unix_millis, unix_millis};

/// The key of a message in `outbox` and `dead_letters`.
pub type MessageId = u64;

const FORMAT: u8 = 1;
const TRANSPORT_KEY: &[u8] = b"outbox.transport";
/// Format byte, next attempt, attempts, enqueued.
const HEADER_LEN: usize = 1 + 8 + 4 + 8;

/// A message waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: MessageId,
    pub enqueued_at: OffsetDateTime,
    /// Attempts the server deferred (4xx); transport failures do not count.
    pub attempts: u32,
    pub next_attempt: OffsetDateTime,
    pub last_error: Option<String>,
    pub message: OutgoingMessage,
}

/// A message given up: refused for good, or deferred for too long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub id: MessageId,
    pub enqueued_at: OffsetDateTime,
    pub given_up_at: OffsetDateTime,
    pub attempts: u32,
    /// The server's reply, or why it could not be sent.
    pub reason: String,
    pub message: OutgoingMessage,
}

/// When the next attempt is due, read without decoding the message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    pub next_attempt_ms: i64,
    pub attempts: u32,
    pub enqueued_ms: i64,
}

/// The server-wide backoff after failures to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TransportState {
    pub failures: u32,
    pub next_attempt: OffsetDateTime,
    pub last_error: String,
}

/// The stored form of [`OutgoingMessage`]: a copy, so that adding a field
/// to the public type is a compile error here rather than a silent change
/// of the on-disk format (postcard is not self-describing).
#[derive(Serialize, Deserialize)]
struct StoredMessage {
    subject: String,
    text: String,
    html: String,
    message_id: String,
    in_reply_to: Option<String>,
    references: Vec<String>,
    to: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct PendingBody {
    last_error: Option<String>,
    message: StoredMessage,
}

#[derive(Serialize, Deserialize)]
struct DeadBody {
    enqueued_ms: i64,
    given_up_ms: i64,
    attempts: u32,
    reason: String,
    message: StoredMessage,
}

/// Pending and given-up mail, and the signal that wakes the sender.
pub struct Outbox {
    path: PathBuf,
    db: Db,
    queue: Tree,
    dead: Tree,
    meta: Tree,
    wake: Notify,
    stats: Arc<MailStats>,
    /// Ids below this are in the backlog gauge (see `count_new`).
    counted_below: AtomicU64,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Outbox {
    /// Opens the trees in `db` (the store's database; `path` is its
    /// directory, for messages) and counts what they hold.
    pub fn open(db: &Db, path: &Path) -> Result<Outbox, MailError> {
        let open = |name: &str| {
            db.open_tree(name).map_err(|cause| MailError::Store {
                path: path.to_path_buf(),
                action: "open its trees",
                cause,
            })
        };
        let outbox = Outbox {
            path: path.to_path_buf(),
            db: db.clone(),
            queue: open("outbox")?,
            dead: open("dead_letters")?,
            meta: open("meta")?,
            wake: Notify::new(),
            stats: Arc::new(MailStats::default()),
            counted_below: AtomicU64::new(0),
        };
        let last = outbox.queue.last().map_err(|cause| MailError::Store {
            path: path.to_path_buf(),
            action: "read the outbox",
            cause,
        })?;
        if let Some(id) = last.and_then(|(key, _)| key_id(&key)) {
            outbox
                .counted_below
                .store(id.saturating_add(1), Ordering::Relaxed);
        }
        outbox.stats.set_backlog(outbox.queue.len() as u64, None);
        outbox.stats.set_dead_letters(outbox.dead.len() as u64);
        Ok(outbox)
    }

    /// The `outbox` tree, for a transaction that also writes the caller's
    /// own state: `(&alert_state, outbox.tree()).transaction(|(a, o)| ...)`
    /// with [`Outbox::enqueue_in`] inside.
    pub fn tree(&self) -> &Tree {
        &self.queue
    }

    /// Counters for `/metrics` and `/healthz`.
    pub fn stats(&self) -> Arc<MailStats> {
        self.stats.clone()
    }

    /// Queues `message` inside the caller's sled transaction; it is sent
    /// only if the transaction commits. After the commit, call
    /// [`Outbox::flush_and_wake`].
    pub fn enqueue_in<E>(
        tx: &TransactionalTree,
        message: &OutgoingMessage,
        now: OffsetDateTime,
    ) -> ConflictableTransactionResult<MessageId, E> {
        let id = tx.generate_id()?;
        let value = encode_new(message, now).map_err(|e| {
            // Serializing strings into a Vec cannot fail in postcard; kept
            // as a storage error rather than a panic all the same.
            ConflictableTransactionError::Storage(sled::Error::Unsupported(format!(
                "cannot encode message {}: {e}",
                message.message_id
            )))
        })?;
        tx.insert(&id.to_be_bytes(), value)?;
        Ok(id)
    }

    /// Queues `message` on its own, durably, and wakes the sender.
    pub async fn enqueue(
        &self,
        message: &OutgoingMessage,
        now: OffsetDateTime,
    ) -> Result<MessageId, MailError> {
        let id = self
            .db
            .generate_id()
            .map_err(self.io("allocate a message id"))?;
        let value = encode_new(message, now).map_err(|e| self.corrupt(id, e.to_string()))?;
        self.queue
            .insert(id.to_be_bytes(), value)
            .map_err(self.io("queue a message"))?;
        self.stats.add_backlog(1);
        self.counted_below
            .fetch_max(id.saturating_add(1), Ordering::Relaxed);
        self.flush().await?;
        self.wake.notify_one();
        Ok(id)
    }

    /// After a transaction that used [`Outbox::enqueue_in`]: makes it
    /// durable, counts what it added, and wakes the sender.
    pub async fn flush_and_wake(&self) -> Result<(), MailError> {
        self.flush().await?;
        self.count_new();
        self.wake.notify_one();
        Ok(())
    }

    /// Adds the messages queued in transactions since the last count to
    /// the backlog gauge. Ids only grow, so only keys above the highest one
    /// counted are read, not the whole backlog (which an outage can make
    /// large). Two transactions committing out of id order can leave one
    /// message uncounted until the sender's next pass recounts everything.
    fn count_new(&self) {
        let from = self.counted_below.load(Ordering::Relaxed);
        let mut added = 0;
        let mut highest = None;
        for key in self.queue.range(from.to_be_bytes()..).keys() {
            let Some(id) = key.ok().as_deref().and_then(key_id) else {
                continue;
            };
            added += 1;
            highest = Some(id);
        }
        if let Some(id) = highest {
            self.counted_below
                .fetch_max(id.saturating_add(1), Ordering::Relaxed);
            self.stats.add_backlog(added);
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
        let mut out = Vec::new();
        for entry in self.queue.iter() {
            let (key, value) = entry.map_err(self.io("read the outbox"))?;
            let id =
                key_id(&key).ok_or_else(|| self.corrupt(0, "a key of the wrong size".into()))?;
            out.push(decode_pending(id, &value).map_err(|e| self.corrupt(id, e))?);
        }
        Ok(out)
    }

    /// Every dead letter, oldest first (for the daily report).
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>, MailError> {
        let mut out = Vec::new();
        for entry in self.dead.iter() {
            let (key, value) = entry.map_err(self.io("read the dead letters"))?;
            let id =
                key_id(&key).ok_or_else(|| self.corrupt(0, "a key of the wrong size".into()))?;
            out.push(decode_dead(id, &value).map_err(|e| self.corrupt(id, e))?);
        }
        Ok(out)
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
        let mut swept = 0;
        for letter in self.dead_letters()? {
            if letter.given_up_at < before {
                self.dead
                    .remove(letter.id.to_be_bytes())
                    .map_err(self.io("sweep dead letters"))?;
                swept += 1;
            }
        }
        self.stats.set_dead_letters(self.dead.len() as u64);
        Ok(swept)
    }

    /// Every message's schedule, in id order, without decoding bodies.
    pub(crate) fn schedules(
        &self,
    ) -> impl Iterator<Item = Result<(MessageId, Schedule), MailError>> + '_ {
        self.queue.iter().map(move |entry| {
            let (key, value) = entry.map_err(self.io("read the outbox"))?;
            let id =
                key_id(&key).ok_or_else(|| self.corrupt(0, "a key of the wrong size".into()))?;
            let schedule = decode_schedule(&value)
                .ok_or_else(|| self.corrupt(id, "header too short or unknown format".into()))?;
            Ok((id, schedule))
        })
    }

    /// One message, if it is still queued.
    pub(crate) fn load(&self, id: MessageId) -> Result<Option<Pending>, MailError> {
        let value = self
            .queue
            .get(id.to_be_bytes())
            .map_err(self.io("read the outbox"))?;
        value
            .map(|v| decode_pending(id, &v).map_err(|e| self.corrupt(id, e)))
            .transpose()
    }

    /// The server accepted it: removes it, durably, before anything else
    /// is sent.
    pub(crate) async fn delivered(&self, id: MessageId) -> Result<(), MailError> {
        self.queue
            .remove(id.to_be_bytes())
            .map_err(self.io("remove a delivered message"))?;
        self.stats.add_backlog(-1);
        self.flush().await
    }

    /// The server deferred it: one more attempt, next one at `next`.
    pub(crate) fn defer(
        &self,
        pending: &Pending,
        error: &str,
        next: OffsetDateTime,
    ) -> Result<(), MailError> {
        let schedule = Schedule {
            next_attempt_ms: unix_millis(next),
            attempts: pending.attempts.saturating_add(1),
            enqueued_ms: unix_millis(pending.enqueued_at),
        };
        let body = PendingBody {
            last_error: Some(error.to_owned()),
            message: stored(&pending.message),
        };
        let value =
            encode_pending(schedule, &body).map_err(|e| self.corrupt(pending.id, e.to_string()))?;
        self.queue
            .insert(pending.id.to_be_bytes(), value)
            .map_err(self.io("record a deferral"))?;
        Ok(())
    }

    /// Gives it up: moves it to `dead_letters` in one transaction.
    pub(crate) async fn bury(
        &self,
        pending: &Pending,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<(), MailError> {
        let dead = DeadBody {
            enqueued_ms: unix_millis(pending.enqueued_at),
            given_up_ms: unix_millis(now),
            attempts: pending.attempts.saturating_add(1),
            reason: reason.to_owned(),
            message: stored(&pending.message),
        };
        let mut value = vec![FORMAT];
        value.extend(
            postcard::to_allocvec(&dead).map_err(|e| self.corrupt(pending.id, e.to_string()))?,
        );
        let key = pending.id.to_be_bytes();
        (&self.queue, &self.dead)
            .transaction(|(queue, dead)| {
                queue.remove(&key)?;
                dead.insert(&key, value.as_slice())?;
                Ok::<_, ConflictableTransactionError<()>>(())
            })
            .map_err(|e| match e {
                sled::transaction::TransactionError::Storage(cause) => MailError::Store {
                    path: self.path.clone(),
                    action: "move a message to the dead letters",
                    cause,
                },
                sled::transaction::TransactionError::Abort(()) => {
                    self.corrupt(pending.id, "transaction aborted".into())
                }
            })?;
        self.stats.add_backlog(-1);
        self.stats.set_dead_letters(self.dead.len() as u64);
        self.flush().await
    }

    /// The persisted server backoff, if any.
    pub(crate) fn transport(&self) -> Result<Option<TransportState>, MailError> {
        let Some(value) = self
            .meta
            .get(TRANSPORT_KEY)
            .map_err(self.io("read the delivery backoff"))?
        else {
            return Ok(None);
        };
        let state = (|| {
            if value.len() < 13 || value[0] != FORMAT {
                return None;
            }
            Some(TransportState {
                failures: u32::from_be_bytes(value[1..5].try_into().ok()?),
                next_attempt: from_unix_millis(i64::from_be_bytes(value[5..13].try_into().ok()?))?,
                last_error: String::from_utf8_lossy(&value[13..]).into_owned(),
            })
        })();
        // A record this version cannot read only costs an early retry.
        Ok(state)
    }

    pub(crate) fn set_transport(&self, state: Option<&TransportState>) -> Result<(), MailError> {
        let result = match state {
            None => self.meta.remove(TRANSPORT_KEY).map(|_| ()),
            Some(state) => {
                let mut value = vec![FORMAT];
                value.extend(state.failures.to_be_bytes());
                value.extend(unix_millis(state.next_attempt).to_be_bytes());
                value.extend(state.last_error.as_bytes());
                self.meta.insert(TRANSPORT_KEY, value).map(|_| ())
            }
        };
        result.map_err(self.io("record the delivery backoff"))
    }

    async fn flush(&self) -> Result<(), MailError> {
        self.db
            .flush_async()
            .await
            .map(|_| ())
            .map_err(self.io("flush to disk"))
    }

    fn io(&self, action: &'static str) -> impl Fn(sled::Error) -> MailError + '_ {
        move |cause| MailError::Store {
            path: self.path.clone(),
            action,
            cause,
        }
    }

    fn corrupt(&self, id: MessageId, detail: String) -> MailError {
        MailError::Corrupt {
            path: self.path.clone(),
            what: format!("outbox message {id}"),
            detail,
        }
    }
}

fn key_id(key: &[u8]) -> Option<MessageId> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}

fn stored(m: &OutgoingMessage) -> StoredMessage {
    StoredMessage {
        subject: m.subject.clone(),
        text: m.text.clone(),
        html: m.html.clone(),
        message_id: m.message_id.clone(),
        in_reply_to: m.in_reply_to.clone(),
        references: m.references.clone(),
        to: m.to.clone(),
    }
}

fn outgoing(m: StoredMessage) -> OutgoingMessage {
    OutgoingMessage {
        subject: m.subject,
        text: m.text,
        html: m.html,
        message_id: m.message_id,
        in_reply_to: m.in_reply_to,
        references: m.references,
        to: m.to,
    }
}

/// A new message is due at once.
fn encode_new(message: &OutgoingMessage, now: OffsetDateTime) -> Result<Vec<u8>, postcard::Error> {
    let now_ms = unix_millis(now);
    let schedule = Schedule {
        next_attempt_ms: now_ms,
        attempts: 0,
        enqueued_ms: now_ms,
    };
    let body = PendingBody {
        last_error: None,
        message: stored(message),
    };
    encode_pending(schedule, &body)
}

fn encode_pending(schedule: Schedule, body: &PendingBody) -> Result<Vec<u8>, postcard::Error> {
    let mut value = Vec::with_capacity(HEADER_LEN + 256);
    value.push(FORMAT);
    value.extend(schedule.next_attempt_ms.to_be_bytes());
    value.extend(schedule.attempts.to_be_bytes());
    value.extend(schedule.enqueued_ms.to_be_bytes());
    postcard::to_extend(body, value)
}

fn decode_schedule(value: &[u8]) -> Option<Schedule> {
    if value.len() < HEADER_LEN || value[0] != FORMAT {
        return None;
    }
    Some(Schedule {
        next_attempt_ms: i64::from_be_bytes(value[1..9].try_into().ok()?),
        attempts: u32::from_be_bytes(value[9..13].try_into().ok()?),
        enqueued_ms: i64::from_be_bytes(value[13..21].try_into().ok()?),
    })
}

fn decode_pending(id: MessageId, value: &[u8]) -> Result<Pending, String> {
    let schedule = decode_schedule(value).ok_or("header too short or unknown format")?;
    let body: PendingBody =
        postcard::from_bytes(&value[HEADER_LEN..]).map_err(|e| e.to_string())?;
    Ok(Pending {
        id,
        enqueued_at: time_of(schedule.enqueued_ms)?,
        attempts: schedule.attempts,
        next_attempt: time_of(schedule.next_attempt_ms)?,
        last_error: body.last_error,
        message: outgoing(body.message),
    })
}

fn decode_dead(id: MessageId, value: &[u8]) -> Result<DeadLetter, String> {
    if value.first() != Some(&FORMAT) {
        return Err("unknown format".into());
    }
    let body: DeadBody = postcard::from_bytes(&value[1..]).map_err(|e| e.to_string())?;
    Ok(DeadLetter {
        id,
        enqueued_at: time_of(body.enqueued_ms)?,
        given_up_at: time_of(body.given_up_ms)?,
        attempts: body.attempts,
        reason: body.reason,
        message: outgoing(body.message),
    })
}

fn time_of(ms: i64) -> Result<OffsetDateTime, String> {
    from_unix_millis(ms).ok_or_else(|| format!("time {ms} ms out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);

    fn message(n: u32) -> OutgoingMessage {
        OutgoingMessage {
            subject: format!("[vigie] DOWN check-{n}"),
            text: "down\n".into(),
            html: "<p>down</p>".into(),
            message_id: format!("<down.{n}@vigie.test>"),
            in_reply_to: None,
            references: vec![],
            to: vec!["oncall@example.com".into()],
        }
    }

    fn open(dir: &Path) -> Outbox {
        let db = sled::Config::new().path(dir).open().unwrap();
        Outbox::open(&db, dir).unwrap()
    }

    #[tokio::test]
    async fn enqueue_keeps_order_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let ids = {
            let outbox = open(dir.path());
            let a = outbox.enqueue(&message(1), T0).await.unwrap();
            let b = outbox.enqueue(&message(2), T0).await.unwrap();
            assert!(a < b);
            assert_eq!(outbox.stats().snapshot().backlog, 2);
            vec![a, b]
        };
        let outbox = open(dir.path());
        let pending = outbox.pending().unwrap();
        assert_eq!(pending.iter().map(|p| p.id).collect::<Vec<_>>(), ids);
        assert_eq!(pending[0].message, message(1));
        assert_eq!(
            (
                pending[0].attempts,
                pending[0].next_attempt,
                pending[0].enqueued_at
            ),
            (0, T0, T0)
        );
        assert_eq!(outbox.stats().snapshot().backlog, 2, "counted at open");
        let later = outbox.enqueue(&message(3), T0).await.unwrap();
        assert!(later > ids[1], "ids keep increasing after a reopen");
    }

    #[tokio::test]
    async fn enqueue_in_commits_with_the_callers_state_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = open(dir.path());
        let state = outbox.db.open_tree("alert_state").unwrap();
        let committed = (&state, outbox.tree())
            .transaction(|(state, queue)| {
                state.insert("site", "firing")?;
                Outbox::enqueue_in::<()>(queue, &message(1), T0)
            })
            .unwrap();
        let aborted = (&state, outbox.tree()).transaction(|(state, queue)| {
            state.insert("app", "firing")?;
            Outbox::enqueue_in::<&str>(queue, &message(2), T0)?;
            Err(ConflictableTransactionError::Abort("changed my mind"))?;
            Ok(())
        });
        assert!(aborted.is_err());
        outbox.flush_and_wake().await.unwrap();
        let pending = outbox.pending().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].id, committed);
        assert!(state.get("app").unwrap().is_none());
        assert_eq!(outbox.stats().snapshot().backlog, 1);
    }

    #[tokio::test]
    async fn defer_bury_and_deliver() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = open(dir.path());
        let a = outbox.enqueue(&message(1), T0).await.unwrap();
        let b = outbox.enqueue(&message(2), T0).await.unwrap();
        let pa = outbox.load(a).unwrap().unwrap();
        let next = T0 + time::Duration::seconds(10);
        outbox.defer(&pa, "451 try later", next).unwrap();
        let pa = outbox.load(a).unwrap().unwrap();
        assert_eq!((pa.attempts, pa.next_attempt), (1, next));
        assert_eq!(pa.last_error.as_deref(), Some("451 try later"));
        let schedules: Vec<_> = outbox.schedules().map(Result::unwrap).collect();
        assert_eq!(schedules[0].1.next_attempt_ms, unix_millis(next));

        outbox.bury(&pa, "550 no such user", next).await.unwrap();
        let dead = outbox.dead_letters().unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].id, dead[0].attempts), (a, 2));
        assert_eq!(dead[0].reason, "550 no such user");
        assert_eq!(dead[0].message, message(1));

        outbox.delivered(b).await.unwrap();
        assert!(outbox.pending().unwrap().is_empty());
        let snap = outbox.stats().snapshot();
        assert_eq!((snap.backlog, snap.dead_letters), (0, 1));
        assert_eq!(outbox.sweep_dead_letters(next).unwrap(), 0);
        assert_eq!(
            outbox
                .sweep_dead_letters(next + time::Duration::SECOND)
                .unwrap(),
            1
        );
    }

    #[test]
    fn transport_backoff_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = open(dir.path());
        assert_eq!(outbox.transport().unwrap(), None);
        let state = TransportState {
            failures: 3,
            next_attempt: T0,
            last_error: "smtp 127.0.0.1:25: connecting: refused".into(),
        };
        outbox.set_transport(Some(&state)).unwrap();
        assert_eq!(outbox.transport().unwrap(), Some(state));
        outbox.set_transport(None).unwrap();
        assert_eq!(outbox.transport().unwrap(), None);
    }
}
