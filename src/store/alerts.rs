//! Alert states, silences and certificate changes, kept beside the history
//! so that a state change and the mail it causes commit together with the
//! outbox ([`AlertStore::commit`]).
//!
//! # Key layout (sled)
//!
//! | tree           | key                                  | value |
//! |----------------|--------------------------------------|-------|
//! | `alert_state`  | check name (UTF-8)                   | JSON [`AlertState`] |
//! | `silences`     | pattern (UTF-8)                      | JSON [`Silence`] |
//! | `cert_changes` | seen at, unix millis (u64 BE) ++ check name | JSON [`CertChange`] |
//!
//! JSON because these records are few and small, and an entry a later
//! version cannot read is skipped with an ERROR line rather than stopping
//! the daemon.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sled::transaction::{ConflictableTransactionResult, TransactionError};
use sled::{Db, Transactional, Tree};
use time::OffsetDateTime;

use super::error::StoreError;
use super::outbox::{self, lock, MemoryOutbox, MessageId, OutboxStore, MAIL};
use super::pushes::{self, MemoryPushes, NewPush, PushStore};
use super::told::{self, MemoryTold, ToldEvent, ToldLedger};
use super::updates::IncidentUpdates;
use crate::alert::report::CertChange;
use crate::alert::{AlertState, Email, Silence};
use crate::clock::{saturating_sub, unix_millis};

const STATES_TREE: &str = "alert_state";
const SILENCES_TREE: &str = "silences";
const CHANGES_TREE: &str = "cert_changes";

/// Certificate changes are kept this long (the report shows one day).
const CHANGES_KEPT: Duration = Duration::from_secs(7 * 86_400);

/// What a notification's deliveries tell, for the told ledger: the events
/// of its mail, and of each push in the order of the pushes.
#[derive(Debug, Default)]
pub struct Telling {
    pub mail: Vec<ToldEvent>,
    pub pushes: Vec<Vec<ToldEvent>>,
}

/// Alert states, silences and certificate changes, on disk (the history's
/// sled database) or in memory (tests); [`AlertStore::outbox`] is the
/// outbox of the same backend. A clone is a handle on the same records.
#[derive(Debug, Clone)]
pub struct AlertStore {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    // Boxed: a handle is cloned around, and the sled variant holds eight
    // trees.
    Sled(Box<SledAlerts>),
    Memory {
        alerts: Arc<Mutex<MemoryAlerts>>,
        outbox: Arc<Mutex<MemoryOutbox>>,
        pushes: Arc<Mutex<MemoryPushes>>,
        told: Arc<Mutex<MemoryTold>>,
        updates: IncidentUpdates,
    },
}

#[derive(Debug, Clone)]
struct SledAlerts {
    path: PathBuf,
    states: Tree,
    silences: Tree,
    changes: Tree,
    outbox: OutboxStore,
    /// The outbox's queue, for the transaction of [`AlertStore::commit`].
    queue: Tree,
    pushes: PushStore,
    /// The push outbox's queue, for the same transaction.
    push_queue: Tree,
    told: ToldLedger,
    /// The told ledger's trees, for the same transaction.
    told_entries: Tree,
    told_deliveries: Tree,
    updates: IncidentUpdates,
}

#[derive(Debug, Default)]
struct MemoryAlerts {
    states: BTreeMap<String, AlertState>,
    silences: BTreeMap<String, Silence>,
    changes: BTreeMap<(i64, String), CertChange>,
}

impl AlertStore {
    /// The alert and outbox trees of the history's database at `path`.
    pub(super) fn open_sled(db: &Db, path: PathBuf) -> Result<AlertStore, StoreError> {
        let open = |name: &str| {
            db.open_tree(name).map_err(|cause| StoreError::Io {
                path: path.clone(),
                action: "open the alert trees".to_string(),
                cause,
            })
        };
        let told = ToldLedger::open_sled(db, path.clone())?;
        let sled = SledAlerts {
            states: open(STATES_TREE)?,
            silences: open(SILENCES_TREE)?,
            changes: open(CHANGES_TREE)?,
            queue: open(outbox::QUEUE_TREE)?,
            outbox: OutboxStore::open_sled(db, path.clone())?.telling(told.clone()),
            push_queue: open(pushes::QUEUE_TREE)?,
            pushes: PushStore::open_sled(db, path.clone())?.telling(told.clone()),
            told_entries: open(told::ENTRIES_TREE)?,
            told_deliveries: open(told::DELIVERIES_TREE)?,
            told,
            updates: IncidentUpdates::open_sled(db, path.clone())?,
            path,
        };
        Ok(AlertStore {
            backend: Backend::Sled(Box::new(sled)),
        })
    }

    /// An empty store in memory, with its own outbox.
    pub fn in_memory() -> AlertStore {
        AlertStore {
            backend: Backend::Memory {
                alerts: Arc::default(),
                outbox: Arc::default(),
                pushes: Arc::default(),
                told: Arc::default(),
                updates: IncidentUpdates::in_memory(),
            },
        }
    }

    /// The updates the on-call person wrote about incidents.
    pub fn incident_updates(&self) -> IncidentUpdates {
        match &self.backend {
            Backend::Sled(s) => s.updates.clone(),
            Backend::Memory { updates, .. } => updates.clone(),
        }
    }

    /// Who was told about each incident, which [`Self::commit_routed`]
    /// writes and the senders mark.
    pub fn told(&self) -> ToldLedger {
        match &self.backend {
            Backend::Sled(s) => s.told.clone(),
            Backend::Memory { told, .. } => ToldLedger::memory(told.clone()),
        }
    }

    /// The push outbox that [`Self::commit_routed`] writes to.
    pub fn pushes(&self) -> PushStore {
        match &self.backend {
            Backend::Sled(s) => s.pushes.clone(),
            Backend::Memory { pushes, .. } => {
                PushStore::memory(pushes.clone()).telling(self.told())
            }
        }
    }

    /// The outbox that [`Self::commit`] writes to.
    pub fn outbox(&self) -> OutboxStore {
        match &self.backend {
            Backend::Sled(s) => s.outbox.clone(),
            Backend::Memory { outbox, .. } => {
                OutboxStore::memory(outbox.clone()).telling(self.told())
            }
        }
    }

    /// Every stored state. A damaged entry is logged and skipped: one
    /// check's forgotten incident is better than a daemon that cannot
    /// start.
    pub fn states(&self) -> Result<Vec<AlertState>, StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                decode_all(&s.states, "alert state").map_err(s.io("read alert states"))
            }
            Backend::Memory { alerts, .. } => Ok(lock(alerts).states.values().cloned().collect()),
        }
    }

    pub fn save(&self, states: &[AlertState]) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                for state in states {
                    s.states
                        .insert(state.check.as_bytes(), encode(state))
                        .map_err(s.io("write an alert state"))?;
                }
            }
            Backend::Memory { alerts, .. } => {
                let mut alerts = lock(alerts);
                for state in states {
                    alerts.states.insert(state.check.clone(), state.clone());
                }
            }
        }
        Ok(())
    }

    /// Queues `message` in the outbox and writes the `states` that record
    /// it as sent, in one transaction: either both are stored or neither.
    /// Not durable until the outbox is flushed.
    pub fn commit(
        &self,
        states: &[AlertState],
        message: &Email,
        now: OffsetDateTime,
    ) -> Result<MessageId, StoreError> {
        self.commit_routed(states, Some(message), &[], &Telling::default(), now)
            .map(|id| id.unwrap_or_default())
    }

    /// [`Self::commit`] with the notification's pushes, and a mail only
    /// when its routes send one: the states, the mail, every push and the
    /// told entries of each ([`ToldLedger`]) in one transaction. Returns
    /// the mail's id, if one was queued. Not durable until the outbox is
    /// flushed.
    pub fn commit_routed(
        &self,
        states: &[AlertState],
        message: Option<&Email>,
        new_pushes: &[NewPush],
        telling: &Telling,
        now: OffsetDateTime,
    ) -> Result<Option<MessageId>, StoreError> {
        let push_told = |i: usize| telling.pushes.get(i).map_or(&[][..], Vec::as_slice);
        match &self.backend {
            Backend::Sled(s) => {
                let trees = (
                    &s.states,
                    &s.queue,
                    &s.push_queue,
                    &s.told_entries,
                    &s.told_deliveries,
                );
                let result = trees.transaction(
                    |(tx_states, queue, push_queue, entries, deliveries)| -> ConflictableTransactionResult<Option<MessageId>, sled::Error> {
                        for state in states {
                            tx_states.insert(state.check.as_bytes(), encode(state))?;
                        }
                        for (i, push) in new_pushes.iter().enumerate() {
                            let id = pushes::enqueue_in(push_queue, push, now)?;
                            told::queue_in(entries, deliveries, &push.channel, id, push_told(i), now)?;
                        }
                        let Some(message) = message else {
                            return Ok(None);
                        };
                        let id = outbox::enqueue_in(queue, message, now)?;
                        told::queue_in(entries, deliveries, MAIL, id, &telling.mail, now)?;
                        Ok(Some(id))
                    },
                );
                result.map_err(|e| match e {
                    TransactionError::Abort(cause) | TransactionError::Storage(cause) => {
                        s.io("queue a mail with its alert state")(cause)
                    }
                })
            }
            Backend::Memory {
                alerts,
                outbox,
                pushes,
                told,
                ..
            } => {
                // Every lock, always in this order, for the whole change.
                let mut alerts = lock(alerts);
                let mut outbox = lock(outbox);
                let mut pushes = lock(pushes);
                let mut told = lock(told);
                for state in states {
                    alerts.states.insert(state.check.clone(), state.clone());
                }
                for (i, push) in new_pushes.iter().enumerate() {
                    let id = pushes.enqueue(push, now);
                    told.queue(&push.channel, id, push_told(i), now);
                }
                let id = message.map(|m| outbox.enqueue(m, now));
                if let Some(id) = id {
                    told.queue(MAIL, id, &telling.mail, now);
                }
                Ok(id)
            }
        }
    }

    /// Silences, expired ones included (they are inert).
    pub fn silences(&self) -> Result<Vec<Silence>, StoreError> {
        match &self.backend {
            Backend::Sled(s) => decode_all(&s.silences, "silence").map_err(s.io("read silences")),
            Backend::Memory { alerts, .. } => Ok(lock(alerts).silences.values().cloned().collect()),
        }
    }

    /// Adds or replaces the silence of its pattern, durably.
    pub fn add_silence(&self, silence: &Silence) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                s.silences
                    .insert(silence.pattern.as_bytes(), encode(silence))
                    .map_err(s.io("write a silence"))?;
                s.silences.flush().map_err(s.io("flush a silence"))?;
            }
            Backend::Memory { alerts, .. } => {
                lock(alerts)
                    .silences
                    .insert(silence.pattern.clone(), silence.clone());
            }
        }
        Ok(())
    }

    /// Removes the silence of `pattern`, durably; `false` if there was
    /// none.
    pub fn remove_silence(&self, pattern: &str) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sled(s) => {
                let removed = s
                    .silences
                    .remove(pattern.as_bytes())
                    .map_err(s.io("remove a silence"))?;
                s.silences.flush().map_err(s.io("flush a silence"))?;
                Ok(removed.is_some())
            }
            Backend::Memory { alerts, .. } => Ok(lock(alerts).silences.remove(pattern).is_some()),
        }
    }

    /// Deletes silences that ended at or before `now`.
    pub fn sweep_silences(&self, now: OffsetDateTime) -> Result<(), StoreError> {
        for silence in self.silences()? {
            if silence.until > now {
                continue;
            }
            match &self.backend {
                Backend::Sled(s) => {
                    s.silences
                        .remove(silence.pattern.as_bytes())
                        .map_err(s.io("remove an expired silence"))?;
                }
                Backend::Memory { alerts, .. } => {
                    lock(alerts).silences.remove(&silence.pattern);
                }
            }
        }
        Ok(())
    }

    pub fn record_change(&self, change: &CertChange) -> Result<(), StoreError> {
        let millis = unix_millis(change.at).max(0);
        match &self.backend {
            Backend::Sled(s) => {
                let mut key = (millis as u64).to_be_bytes().to_vec();
                key.extend_from_slice(change.check.as_bytes());
                s.changes
                    .insert(key, encode(change))
                    .map_err(s.io("record a certificate change"))?;
            }
            Backend::Memory { alerts, .. } => {
                lock(alerts)
                    .changes
                    .insert((millis, change.check.clone()), change.clone());
            }
        }
        Ok(())
    }

    /// Certificate changes seen at or after `since`, oldest first; those
    /// older than [`CHANGES_KEPT`] before `since` are deleted on the way.
    pub fn changes_since(&self, since: OffsetDateTime) -> Result<Vec<CertChange>, StoreError> {
        let from = unix_millis(since).max(0);
        let expired = unix_millis(saturating_sub(since, CHANGES_KEPT)).max(0);
        match &self.backend {
            Backend::Sled(s) => {
                let mut changes = Vec::new();
                for entry in s.changes.range((from as u64).to_be_bytes()..) {
                    let (_, value) = entry.map_err(s.io("read certificate changes"))?;
                    match serde_json::from_slice(&value) {
                        Ok(change) => changes.push(change),
                        Err(err) => {
                            tracing::warn!(error = %err, "skipping a damaged certificate change")
                        }
                    }
                }
                for entry in s.changes.range(..(expired as u64).to_be_bytes()) {
                    let (key, _) = entry.map_err(s.io("read certificate changes"))?;
                    s.changes
                        .remove(key)
                        .map_err(s.io("delete an old certificate change"))?;
                }
                Ok(changes)
            }
            Backend::Memory { alerts, .. } => {
                let mut alerts = lock(alerts);
                alerts.changes = alerts.changes.split_off(&(expired, String::new()));
                Ok(alerts
                    .changes
                    .range((from, String::new())..)
                    .map(|(_, change)| change.clone())
                    .collect())
            }
        }
    }
}

impl SledAlerts {
    fn io(&self, action: &'static str) -> impl Fn(sled::Error) -> StoreError + '_ {
        move |cause| StoreError::Io {
            path: self.path.clone(),
            action: action.to_string(),
            cause,
        }
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Invariant: these types serialise to JSON without fallible parts
    // (strings, numbers, RFC 3339 times).
    serde_json::to_vec(value).expect("alert records serialise to JSON")
}

fn decode_all<T: serde::de::DeserializeOwned>(
    tree: &Tree,
    what: &str,
) -> Result<Vec<T>, sled::Error> {
    let mut out = Vec::new();
    for entry in tree.iter() {
        let (key, value) = entry?;
        match serde_json::from_slice(&value) {
            Ok(v) => out.push(v),
            Err(err) => tracing::error!(
                key = %String::from_utf8_lossy(&key),
                error = %err,
                "skipping a damaged {what} in the store"
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SledStore;

    #[test]
    fn a_damaged_state_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let sled = SledStore::open(dir.path(), Duration::from_secs(1)).unwrap();
        let store = sled.alerts().unwrap();
        store.save(&[AlertState::new("site")]).unwrap();
        let Backend::Sled(trees) = &store.backend else {
            unreachable!("opened on sled")
        };
        trees
            .states
            .insert("broken", b"{not json".to_vec())
            .unwrap();
        assert_eq!(store.states().unwrap(), [AlertState::new("site")]);
    }
}
