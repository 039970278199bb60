//! The outbox's records: pending mail, given-up mail (dead letters) and the
//! server-wide delivery backoff, kept beside the history so that an alert
//! state change and the mail it causes commit together
//! ([`super::AlertStore::commit`]).
//!
//! This module owns the records and their encoding; it does not send, wake
//! the sender or count for `/metrics` (`mail::Outbox` does, on top of
//! [`OutboxStore`]), and it does not decide when to retry (the sender
//! does, and writes its decisions back here so they survive a restart).
//!
//! # Key layout (sled)
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
//! Writes are not flushed on their own: the caller flushes
//! ([`OutboxStore::flush`]) where durability matters (after queueing,
//! before the next send once one was delivered).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use sled::transaction::{
    ConflictableTransactionError, ConflictableTransactionResult, TransactionError,
    TransactionalTree,
};
use sled::{Db, Transactional, Tree};
use time::OffsetDateTime;

use super::error::StoreError;
use super::millis::to_millisecond;
use super::told::ToldLedger;
use crate::alert::Email;
use crate::clock::{from_unix_millis, unix_millis};

/// The mail's channel name in the told ledger, as routes name it.
pub(super) const MAIL: &str = crate::config::channels::MAIL;

/// The key of a message in `outbox` and `dead_letters`.
pub type MessageId = u64;

const FORMAT: u8 = 1;
pub(super) const QUEUE_TREE: &str = "outbox";
const DEAD_TREE: &str = "dead_letters";
const META_TREE: &str = "meta";
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
    pub message: Email,
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
    pub message: Email,
}

/// When a message's next attempt is due, read without decoding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub next_attempt_ms: i64,
    pub attempts: u32,
    pub enqueued_ms: i64,
}

/// The server-wide backoff after failures to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportState {
    pub failures: u32,
    pub next_attempt: OffsetDateTime,
    pub last_error: String,
}

/// Pending mail, dead letters and the delivery backoff, on disk (the
/// history's sled database) or in memory (tests). A clone is a handle on
/// the same records.
#[derive(Debug, Clone)]
pub struct OutboxStore {
    backend: Backend,
    /// Where a delivered or given-up message is marked (the alert store's
    /// ledger); `None` for an outbox opened on its own.
    told: Option<ToldLedger>,
}

#[derive(Debug, Clone)]
enum Backend {
    Sled(SledOutbox),
    Memory(Arc<Mutex<MemoryOutbox>>),
}

#[derive(Debug, Clone)]
struct SledOutbox {
    path: PathBuf,
    db: Db,
    queue: Tree,
    dead: Tree,
    meta: Tree,
}

/// The memory backend's records, typed; shared with the memory
/// [`super::AlertStore`] so that its commit is one critical section.
#[derive(Debug, Default)]
pub(super) struct MemoryOutbox {
    next_id: MessageId,
    queue: BTreeMap<MessageId, Pending>,
    dead: BTreeMap<MessageId, DeadLetter>,
    transport: Option<TransportState>,
}

impl MemoryOutbox {
    /// Queues `message`, due at once.
    pub(super) fn enqueue(&mut self, message: &Email, now: OffsetDateTime) -> MessageId {
        let id = self.next_id;
        self.next_id += 1;
        let now = to_millisecond(now);
        self.queue.insert(
            id,
            Pending {
                id,
                enqueued_at: now,
                attempts: 0,
                next_attempt: now,
                last_error: None,
                message: message.clone(),
            },
        );
        id
    }
}

/// A lock whose holder panicked still guards whole maps (every change is
/// one insert or remove), so the records are usable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl OutboxStore {
    /// The outbox trees of the history's database at `path`.
    pub(super) fn open_sled(db: &Db, path: PathBuf) -> Result<OutboxStore, StoreError> {
        let open = |name: &str| {
            db.open_tree(name).map_err(|cause| StoreError::Io {
                path: path.clone(),
                action: "open the outbox".to_string(),
                cause,
            })
        };
        let sled = SledOutbox {
            queue: open(QUEUE_TREE)?,
            dead: open(DEAD_TREE)?,
            meta: open(META_TREE)?,
            db: db.clone(),
            path,
        };
        Ok(OutboxStore {
            backend: Backend::Sled(sled),
            told: None,
        })
    }

    pub(super) fn memory(records: Arc<Mutex<MemoryOutbox>>) -> OutboxStore {
        OutboxStore {
            backend: Backend::Memory(records),
            told: None,
        }
    }

    /// This outbox, marking what it delivers or gives up in `told`.
    pub(super) fn telling(self, told: ToldLedger) -> OutboxStore {
        OutboxStore {
            told: Some(told),
            ..self
        }
    }

    /// Marks the events message `id` carried as told at `at` (the
    /// server accepted it), best effort ([`ToldLedger::note_told`]).
    pub fn mark_told(&self, id: MessageId, at: OffsetDateTime) {
        if let Some(told) = &self.told {
            told.note_told(MAIL, id, at);
        }
    }

    /// Queues `message`, due at once. Not durable until [`Self::flush`].
    pub fn enqueue(&self, message: &Email, now: OffsetDateTime) -> Result<MessageId, StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                let id = s.db.generate_id().map_err(s.io("allocate a message id"))?;
                s.queue
                    .insert(id.to_be_bytes(), encode_new(message, now))
                    .map_err(s.io("queue a message"))?;
                Ok(id)
            }
            Backend::Memory(m) => Ok(lock(m).enqueue(message, now)),
        }
    }

    /// Makes every write so far durable.
    pub async fn flush(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                s.db.flush_async()
                    .await
                    .map(|_| ())
                    .map_err(s.io("flush the outbox to disk"))
            }
            Backend::Memory(_) => Ok(()),
        }
    }

    /// Messages waiting, oldest first.
    pub fn pending(&self) -> Result<Vec<Pending>, StoreError> {
        match &self.backend {
            Backend::Sled(s) => s
                .queue
                .iter()
                .map(|entry| {
                    let (key, value) = entry.map_err(s.io("read the outbox"))?;
                    let id = s.key_id(&key)?;
                    decode_pending(id, &value).map_err(|e| s.corrupt(id, e))
                })
                .collect(),
            Backend::Memory(m) => Ok(lock(m).queue.values().cloned().collect()),
        }
    }

    /// Every dead letter, oldest first.
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        match &self.backend {
            Backend::Sled(s) => s
                .dead
                .iter()
                .map(|entry| {
                    let (key, value) = entry.map_err(s.io("read the dead letters"))?;
                    let id = s.key_id(&key)?;
                    decode_dead(id, &value).map_err(|e| s.corrupt(id, e))
                })
                .collect(),
            Backend::Memory(m) => Ok(lock(m).dead.values().cloned().collect()),
        }
    }

    /// How many messages wait.
    pub fn len(&self) -> usize {
        match &self.backend {
            Backend::Sled(s) => s.queue.len(),
            Backend::Memory(m) => lock(m).queue.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many dead letters are kept.
    pub fn dead_len(&self) -> usize {
        match &self.backend {
            Backend::Sled(s) => s.dead.len(),
            Backend::Memory(m) => lock(m).dead.len(),
        }
    }

    /// Deletes dead letters given up before `before`; returns how many.
    pub fn sweep_dead_letters(&self, before: OffsetDateTime) -> Result<u64, StoreError> {
        let old: Vec<MessageId> = self
            .dead_letters()?
            .into_iter()
            .filter(|letter| letter.given_up_at < before)
            .map(|letter| letter.id)
            .collect();
        for id in &old {
            match &self.backend {
                Backend::Sled(s) => {
                    s.dead
                        .remove(id.to_be_bytes())
                        .map_err(s.io("sweep dead letters"))?;
                }
                Backend::Memory(m) => {
                    lock(m).dead.remove(id);
                }
            }
        }
        Ok(old.len() as u64)
    }

    /// Messages with an id of `from` or more: how many, and the highest
    /// id. Ids only grow, so this reads only what was queued since a count
    /// that ended below `from`.
    pub fn count_from(&self, from: MessageId) -> (u64, Option<MessageId>) {
        match &self.backend {
            Backend::Sled(s) => {
                let mut count = 0;
                let mut highest = None;
                for key in s.queue.range(from.to_be_bytes()..).keys() {
                    if let Some(id) = key.ok().and_then(|k| key_id(&k)) {
                        count += 1;
                        highest = Some(id);
                    }
                }
                (count, highest)
            }
            Backend::Memory(m) => {
                let records = lock(m);
                let count = records.queue.range(from..).count() as u64;
                (
                    count,
                    records.queue.range(from..).next_back().map(|(id, _)| *id),
                )
            }
        }
    }

    /// Every message's schedule, in id order, without decoding bodies.
    pub fn schedules(
        &self,
    ) -> Box<dyn Iterator<Item = Result<(MessageId, Schedule), StoreError>> + Send + '_> {
        match &self.backend {
            Backend::Sled(s) => Box::new(s.queue.iter().map(move |entry| {
                let (key, value) = entry.map_err(s.io("read the outbox"))?;
                let id = s.key_id(&key)?;
                let schedule = decode_schedule(&value)
                    .ok_or_else(|| s.corrupt(id, "header too short or unknown format".into()))?;
                Ok((id, schedule))
            })),
            Backend::Memory(m) => {
                let schedules: Vec<_> = lock(m)
                    .queue
                    .values()
                    .map(|p| Ok((p.id, schedule_of(p))))
                    .collect();
                Box::new(schedules.into_iter())
            }
        }
    }

    /// One message, if it is still queued.
    pub fn load(&self, id: MessageId) -> Result<Option<Pending>, StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                let value = s
                    .queue
                    .get(id.to_be_bytes())
                    .map_err(s.io("read the outbox"))?;
                value
                    .map(|v| decode_pending(id, &v).map_err(|e| s.corrupt(id, e)))
                    .transpose()
            }
            Backend::Memory(m) => Ok(lock(m).queue.get(&id).cloned()),
        }
    }

    /// Removes a delivered message; `false` if it was not queued.
    pub fn remove(&self, id: MessageId) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sled(s) => Ok(s
                .queue
                .remove(id.to_be_bytes())
                .map_err(s.io("remove a delivered message"))?
                .is_some()),
            Backend::Memory(m) => Ok(lock(m).queue.remove(&id).is_some()),
        }
    }

    /// The server deferred it: one more attempt, the next one at `next`.
    pub fn defer(
        &self,
        pending: &Pending,
        error: &str,
        next: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let deferred = Pending {
            attempts: pending.attempts.saturating_add(1),
            next_attempt: to_millisecond(next),
            last_error: Some(error.to_owned()),
            ..pending.clone()
        };
        match &self.backend {
            Backend::Sled(s) => {
                let body = PendingBody {
                    last_error: deferred.last_error.clone(),
                    message: stored(&deferred.message),
                };
                s.queue
                    .insert(
                        pending.id.to_be_bytes(),
                        encode_pending(schedule_of(&deferred), &body),
                    )
                    .map_err(s.io("record a deferral"))?;
            }
            Backend::Memory(m) => {
                lock(m).queue.insert(pending.id, deferred);
            }
        }
        Ok(())
    }

    /// Gives it up: moves it to the dead letters, both changes or neither.
    pub fn bury(
        &self,
        pending: &Pending,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let letter = DeadLetter {
            id: pending.id,
            enqueued_at: pending.enqueued_at,
            given_up_at: to_millisecond(now),
            attempts: pending.attempts.saturating_add(1),
            reason: reason.to_owned(),
            message: pending.message.clone(),
        };
        let buried = match &self.backend {
            Backend::Sled(s) => {
                let value = encode_dead(&letter);
                let key = pending.id.to_be_bytes();
                (&s.queue, &s.dead)
                    .transaction(|(queue, dead)| {
                        queue.remove(&key)?;
                        dead.insert(&key, value.as_slice())?;
                        Ok::<_, ConflictableTransactionError<()>>(())
                    })
                    .map_err(|e| match e {
                        TransactionError::Storage(cause) => {
                            s.io("move a message to the dead letters")(cause)
                        }
                        TransactionError::Abort(()) => {
                            s.corrupt(pending.id, "transaction aborted".into())
                        }
                    })
            }
            Backend::Memory(m) => {
                let mut records = lock(m);
                records.queue.remove(&pending.id);
                records.dead.insert(pending.id, letter);
                Ok(())
            }
        };
        if let (Ok(()), Some(told)) = (&buried, &self.told) {
            told.note_gave_up(MAIL, pending.id, reason);
        }
        buried
    }

    /// The persisted server backoff, if any. A record this version cannot
    /// read is none: it only costs an early retry.
    pub fn transport(&self) -> Result<Option<TransportState>, StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                let value = s
                    .meta
                    .get(TRANSPORT_KEY)
                    .map_err(s.io("read the delivery backoff"))?;
                Ok(value.and_then(|v| decode_transport(&v)))
            }
            Backend::Memory(m) => Ok(lock(m).transport.clone()),
        }
    }

    pub fn set_transport(&self, state: Option<&TransportState>) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                let result = match state {
                    None => s.meta.remove(TRANSPORT_KEY).map(|_| ()),
                    Some(state) => s
                        .meta
                        .insert(TRANSPORT_KEY, encode_transport(state))
                        .map(|_| ()),
                };
                result.map_err(s.io("record the delivery backoff"))
            }
            Backend::Memory(m) => {
                lock(m).transport = state.map(|t| TransportState {
                    next_attempt: to_millisecond(t.next_attempt),
                    ..t.clone()
                });
                Ok(())
            }
        }
    }
}

impl SledOutbox {
    fn io(&self, action: &'static str) -> impl Fn(sled::Error) -> StoreError + '_ {
        move |cause| StoreError::Io {
            path: self.path.clone(),
            action: action.to_string(),
            cause,
        }
    }

    fn corrupt(&self, id: MessageId, detail: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what: format!("outbox message {id}"),
            detail,
        }
    }

    fn key_id(&self, key: &[u8]) -> Result<MessageId, StoreError> {
        key_id(key).ok_or_else(|| StoreError::Corrupt {
            path: self.path.clone(),
            what: "an outbox key".to_string(),
            detail: format!("{} bytes, not 8", key.len()),
        })
    }
}

/// Queues `message` inside a sled transaction on the `outbox` tree: it is
/// sent only if the transaction commits.
pub(super) fn enqueue_in<E>(
    tx: &TransactionalTree,
    message: &Email,
    now: OffsetDateTime,
) -> ConflictableTransactionResult<MessageId, E> {
    let id = tx.generate_id()?;
    tx.insert(&id.to_be_bytes(), encode_new(message, now))?;
    Ok(id)
}

/// The stored form of [`Email`]: a copy, so that adding a field to the
/// public type is a compile error here rather than a silent change of the
/// on-disk format (postcard is not self-describing).
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

fn key_id(key: &[u8]) -> Option<MessageId> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}

fn schedule_of(pending: &Pending) -> Schedule {
    Schedule {
        next_attempt_ms: unix_millis(pending.next_attempt),
        attempts: pending.attempts,
        enqueued_ms: unix_millis(pending.enqueued_at),
    }
}

fn stored(m: &Email) -> StoredMessage {
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

fn email(m: StoredMessage) -> Email {
    Email {
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
fn encode_new(message: &Email, now: OffsetDateTime) -> Vec<u8> {
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

fn encode_pending(schedule: Schedule, body: &PendingBody) -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_LEN + 256);
    value.push(FORMAT);
    value.extend(schedule.next_attempt_ms.to_be_bytes());
    value.extend(schedule.attempts.to_be_bytes());
    value.extend(schedule.enqueued_ms.to_be_bytes());
    // Invariant: postcard writes strings and integers into a Vec without
    // a fallible step.
    postcard::to_extend(body, value).expect("outbox records encode")
}

fn encode_dead(letter: &DeadLetter) -> Vec<u8> {
    let body = DeadBody {
        enqueued_ms: unix_millis(letter.enqueued_at),
        given_up_ms: unix_millis(letter.given_up_at),
        attempts: letter.attempts,
        reason: letter.reason.clone(),
        message: stored(&letter.message),
    };
    // Invariant: as in `encode_pending`.
    postcard::to_extend(&body, vec![FORMAT]).expect("dead letters encode")
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
        message: email(body.message),
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
        message: email(body.message),
    })
}

fn encode_transport(state: &TransportState) -> Vec<u8> {
    let mut value = vec![FORMAT];
    value.extend(state.failures.to_be_bytes());
    value.extend(unix_millis(state.next_attempt).to_be_bytes());
    value.extend(state.last_error.as_bytes());
    value
}

fn decode_transport(value: &[u8]) -> Option<TransportState> {
    if value.len() < 13 || value[0] != FORMAT {
        return None;
    }
    Some(TransportState {
        failures: u32::from_be_bytes(value[1..5].try_into().ok()?),
        next_attempt: from_unix_millis(i64::from_be_bytes(value[5..13].try_into().ok()?))?,
        last_error: String::from_utf8_lossy(&value[13..]).into_owned(),
    })
}

fn time_of(ms: i64) -> Result<OffsetDateTime, String> {
    from_unix_millis(ms).ok_or_else(|| format!("time {ms} ms out of range"))
}
