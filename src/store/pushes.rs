//! The push outbox: each push waiting for its channel, and the pushes
//! given up (dead letters), beside the mail outbox so that an alert state
//! change, its mail and its pushes commit together
//! ([`super::AlertStore::commit_routed`]).
//!
//! This module owns the records; it does not send, and does not decide
//! when to retry (`push/` does, and writes its decisions back here so
//! they survive a restart).
//!
//! # Key layout (sled)
//!
//! | tree          | key                                   | value |
//! |---------------|---------------------------------------|-------|
//! | `push_outbox` | channel (UTF-8) ++ `0x00` ++ id (u64 BE) | JSON [`PushRecord`] |
//! | `push_dead`   | channel (UTF-8) ++ `0x00` ++ id (u64 BE) | JSON [`DeadPush`] |
//!
//! Ids come from sled's `generate_id`, so within a channel the key order
//! is the order pushes were queued. JSON because pushes are few and
//! small; the document inside is the push's JSON as first written, so a
//! retry sends what the first attempt sent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use sled::{Db, Transactional, Tree};
use time::OffsetDateTime;

use super::error::StoreError;
use super::millis::{serde_millis, to_millisecond};
use super::outbox::lock;
use super::told::ToldLedger;

pub(super) const QUEUE_TREE: &str = "push_outbox";
const DEAD_TREE: &str = "push_dead";

/// A push to queue: for `channel`, the event `event_id`, as `document`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPush {
    pub channel: String,
    pub event_id: String,
    pub document: String,
}

/// A push waiting for its channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushRecord {
    #[serde(skip)]
    pub id: u64,
    pub channel: String,
    pub event_id: String,
    /// The push document's JSON.
    pub document: String,
    #[serde(with = "serde_millis")]
    pub enqueued_at: OffsetDateTime,
    /// Attempts that failed so far.
    pub attempts: u32,
    #[serde(with = "serde_millis")]
    pub next_attempt: OffsetDateTime,
    pub last_error: Option<String>,
}

/// A push given up: its endpoint refused it for good, or kept failing for
/// too long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadPush {
    pub record: PushRecord,
    #[serde(with = "serde_millis")]
    pub given_up_at: OffsetDateTime,
    pub reason: String,
}

/// The push outbox, on disk or in memory. A clone is a handle on the same
/// records.
#[derive(Debug, Clone)]
pub struct PushStore {
    backend: Backend,
    /// Where a delivered or given-up push is marked (the alert store's
    /// ledger); `None` for a push outbox opened on its own.
    told: Option<ToldLedger>,
}

#[derive(Debug, Clone)]
enum Backend {
    Sled {
        path: PathBuf,
        db: Db,
        queue: Tree,
        dead: Tree,
    },
    Memory(Arc<Mutex<MemoryPushes>>),
}

/// The memory backend's records, shared with the memory
/// [`super::AlertStore`] so that its commit is one critical section.
#[derive(Debug, Default)]
pub(super) struct MemoryPushes {
    next_id: u64,
    queue: BTreeMap<(String, u64), PushRecord>,
    dead: BTreeMap<(String, u64), DeadPush>,
}

impl MemoryPushes {
    pub(super) fn enqueue(&mut self, push: &NewPush, now: OffsetDateTime) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let record = new_record(id, push, now);
        self.queue.insert((push.channel.clone(), id), record);
        id
    }
}

fn new_record(id: u64, push: &NewPush, now: OffsetDateTime) -> PushRecord {
    let now = to_millisecond(now);
    PushRecord {
        id,
        channel: push.channel.clone(),
        event_id: push.event_id.clone(),
        document: push.document.clone(),
        enqueued_at: now,
        attempts: 0,
        next_attempt: now,
        last_error: None,
    }
}

fn key(channel: &str, id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(channel.len() + 9);
    key.extend_from_slice(channel.as_bytes());
    key.push(0);
    key.extend_from_slice(&id.to_be_bytes());
    key
}

fn prefix(channel: &str) -> Vec<u8> {
    let mut prefix = channel.as_bytes().to_vec();
    prefix.push(0);
    prefix
}

/// The id at the end of a key.
fn key_id(key: &[u8]) -> Option<u64> {
    let tail: [u8; 8] = key.get(key.len().checked_sub(8)?..)?.try_into().ok()?;
    Some(u64::from_be_bytes(tail))
}

/// Queues `push` inside a sled transaction on `push_outbox`; returns its
/// id.
pub(super) fn enqueue_in<E>(
    tx: &TransactionalTree,
    push: &NewPush,
    now: OffsetDateTime,
) -> Result<u64, ConflictableTransactionError<E>> {
    let id = tx.generate_id()?;
    let record = new_record(id, push, now);
    let value = serde_json::to_vec(&record).expect("a push record serializes");
    tx.insert(key(&push.channel, id), value)?;
    Ok(id)
}

impl PushStore {
    pub(super) fn open_sled(db: &Db, path: PathBuf) -> Result<PushStore, StoreError> {
        let open = |name: &str| {
            db.open_tree(name)
                .map_err(StoreError::io_at(&path, "open the push outbox"))
        };
        Ok(PushStore {
            backend: Backend::Sled {
                queue: open(QUEUE_TREE)?,
                dead: open(DEAD_TREE)?,
                db: db.clone(),
                path,
            },
            told: None,
        })
    }

    pub(super) fn memory(records: Arc<Mutex<MemoryPushes>>) -> PushStore {
        PushStore {
            backend: Backend::Memory(records),
            told: None,
        }
    }

    /// This push outbox, marking what it delivers or gives up in `told`.
    pub(super) fn telling(self, told: ToldLedger) -> PushStore {
        PushStore {
            told: Some(told),
            ..self
        }
    }

    /// Marks the events `record` carried as told at `at` (its endpoint
    /// accepted it), best effort ([`ToldLedger::note_told`]).
    pub fn mark_told(&self, record: &PushRecord, at: OffsetDateTime) {
        if let Some(told) = &self.told {
            told.note_told(&record.channel, record.id, at);
        }
    }

    /// Queues `push` on its own (a test event), due now. Not durable until
    /// [`Self::flush`].
    pub fn enqueue(&self, push: &NewPush, now: OffsetDateTime) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled {
                db, queue, path, ..
            } => {
                let io = StoreError::io_at(path, "queue a push");
                let id = db.generate_id().map_err(&io)?;
                let value = serde_json::to_vec(&new_record(id, push, now)).expect("serializes");
                queue.insert(key(&push.channel, id), value).map_err(io)?;
                Ok(())
            }
            Backend::Memory(m) => {
                lock(m).enqueue(push, now);
                Ok(())
            }
        }
    }

    /// Makes every write so far durable.
    pub async fn flush(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled { db, path, .. } => db
                .flush_async()
                .await
                .map(|_| ())
                .map_err(StoreError::io_at(path, "flush the push outbox")),
            Backend::Memory(_) => Ok(()),
        }
    }

    /// The pushes waiting for `channel`, oldest first. One that cannot be
    /// read is logged and skipped.
    pub fn pending(&self, channel: &str) -> Result<Vec<PushRecord>, StoreError> {
        match &self.backend {
            Backend::Sled { queue, path, .. } => {
                decode_prefix(queue, path, channel, |id, mut r: PushRecord| {
                    r.id = id;
                    r
                })
            }
            Backend::Memory(m) => Ok(lock(m)
                .queue
                .range((channel.to_string(), 0)..=(channel.to_string(), u64::MAX))
                .map(|(_, r)| r.clone())
                .collect()),
        }
    }

    /// Every dead push of `channel`, oldest first.
    pub fn dead(&self, channel: &str) -> Result<Vec<DeadPush>, StoreError> {
        match &self.backend {
            Backend::Sled { dead, path, .. } => {
                decode_prefix(dead, path, channel, |id, mut d: DeadPush| {
                    d.record.id = id;
                    d
                })
            }
            Backend::Memory(m) => Ok(lock(m)
                .dead
                .range((channel.to_string(), 0)..=(channel.to_string(), u64::MAX))
                .map(|(_, d)| d.clone())
                .collect()),
        }
    }

    /// How many dead pushes `channel` has, for `/metrics`: keys only, no
    /// record read.
    pub fn dead_count(&self, channel: &str) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sled { dead, path, .. } => {
                let mut count = 0;
                for key in dead.scan_prefix(prefix(channel)).keys() {
                    key.map_err(StoreError::io_at(path, "read the dead pushes"))?;
                    count += 1;
                }
                Ok(count)
            }
            Backend::Memory(m) => Ok(lock(m)
                .dead
                .range((channel.to_string(), 0)..=(channel.to_string(), u64::MAX))
                .count() as u64),
        }
    }

    /// Removes a delivered push.
    pub fn remove(&self, record: &PushRecord) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled { queue, path, .. } => queue
                .remove(key(&record.channel, record.id))
                .map(|_| ())
                .map_err(StoreError::io_at(path, "remove a delivered push")),
            Backend::Memory(m) => {
                lock(m).queue.remove(&(record.channel.clone(), record.id));
                Ok(())
            }
        }
    }

    /// One more failed attempt; the next one at `next`.
    pub fn defer(
        &self,
        record: &PushRecord,
        error: &str,
        next: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let deferred = PushRecord {
            attempts: record.attempts.saturating_add(1),
            next_attempt: to_millisecond(next),
            last_error: Some(error.to_string()),
            ..record.clone()
        };
        match &self.backend {
            Backend::Sled { queue, path, .. } => queue
                .insert(
                    key(&record.channel, record.id),
                    serde_json::to_vec(&deferred).expect("serializes"),
                )
                .map(|_| ())
                .map_err(StoreError::io_at(path, "record a failed push")),
            Backend::Memory(m) => {
                lock(m)
                    .queue
                    .insert((record.channel.clone(), record.id), deferred);
                Ok(())
            }
        }
    }

    /// Gives it up: moves it to the dead pushes, both changes or neither.
    pub fn bury(
        &self,
        record: &PushRecord,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let dead = DeadPush {
            record: PushRecord {
                attempts: record.attempts.saturating_add(1),
                ..record.clone()
            },
            given_up_at: to_millisecond(now),
            reason: reason.to_string(),
        };
        let buried = match &self.backend {
            Backend::Sled {
                queue,
                dead: dead_tree,
                path,
                ..
            } => {
                let k = key(&record.channel, record.id);
                let value = serde_json::to_vec(&dead).expect("serializes");
                (queue, dead_tree)
                    .transaction(|(queue, dead_tree)| {
                        queue.remove(k.as_slice())?;
                        dead_tree.insert(k.as_slice(), value.as_slice())?;
                        Ok::<_, ConflictableTransactionError<()>>(())
                    })
                    .map_err(|e| match e {
                        TransactionError::Storage(cause) => {
                            StoreError::io_at(path, "move a push to the dead pushes")(cause)
                        }
                        TransactionError::Abort(()) => StoreError::Corrupt {
                            path: path.clone(),
                            what: format!("push {} of {}", record.id, record.channel),
                            detail: "transaction aborted".to_string(),
                        },
                    })
            }
            Backend::Memory(m) => {
                let mut records = lock(m);
                records.queue.remove(&(record.channel.clone(), record.id));
                records
                    .dead
                    .insert((record.channel.clone(), record.id), dead);
                Ok(())
            }
        };
        if let (Ok(()), Some(told)) = (&buried, &self.told) {
            told.note_gave_up(&record.channel, record.id, reason);
        }
        buried
    }
}

fn decode_prefix<T: serde::de::DeserializeOwned, R>(
    tree: &Tree,
    path: &std::path::Path,
    channel: &str,
    with_id: impl Fn(u64, T) -> R,
) -> Result<Vec<R>, StoreError> {
    let mut out = Vec::new();
    for entry in tree.scan_prefix(prefix(channel)) {
        let (key, value) = entry.map_err(StoreError::io_at(path, "read the push outbox"))?;
        let Some(id) = key_id(&key) else { continue };
        match serde_json::from_slice::<T>(&value) {
            Ok(record) => out.push(with_id(id, record)),
            Err(err) => {
                tracing::error!(channel, id, error = %err, "a stored push cannot be read; skipped")
            }
        }
    }
    Ok(out)
}
