//! Who was told about each incident, and when: for every event an alert
//! queued (DOWN, reminder, RESOLVED), one entry per channel it was routed
//! to (`mail` or a `[[notify]]` channel), with the time it was queued and
//! the time the channel accepted it. The incident pages read it; nothing
//! decides anything from it.
//!
//! The entries are written in the transaction that queues the mail and
//! the pushes ([`super::AlertStore::commit_routed`]), so an entry exists
//! exactly when its delivery is queued. The senders then mark it told
//! ([`ToldLedger::told`]) once the server or endpoint accepted it, or given
//! up ([`ToldLedger::gave_up`]) when it went to the dead letters. Marking
//! is best effort: a mark lost to a crash leaves the entry "queued", it
//! never changes what is sent.
//!
//! # Key layout (sled)
//!
//! | tree              | key | value |
//! |-------------------|-----|-------|
//! | `told`            | check (UTF-8) ++ `0x00` ++ incident's first failure, unix ms (u64 BE) ++ event time, unix ms (u64 BE) ++ channel (UTF-8) | JSON [`Told`] |
//! | `told_deliveries` | channel (UTF-8) ++ `0x00` ++ outbox id (u64 BE) | JSON list of `told` keys |
//!
//! An incident's entries sit together under its check and first failure
//! (the page's "start"), so the page reads them with one prefix scan.
//! Entries older than [`KEPT`] go: the pages list a week of incidents.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionalTree};
use sled::{Db, Tree};
use time::OffsetDateTime;

use super::error::StoreError;
use super::millis::{bound_millis, serde_millis, serde_opt_millis, to_millisecond};
use crate::alert::{EventKind, IncidentId, KnownIncident};
use crate::clock::saturating_sub;

pub(super) const ENTRIES_TREE: &str = "told";
pub(super) const DELIVERIES_TREE: &str = "told_deliveries";

/// How long entries are kept after their incident began: a day more than
/// the week of incidents the pages list.
pub const KEPT: Duration = Duration::from_secs(8 * 86_400);

/// One event of an incident, as a delivery carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToldEvent {
    pub check: String,
    pub incident: String,
    pub kind: EventKind,
    /// The incident's first failed probe.
    pub since: OffsetDateTime,
    /// When the alerter produced the event.
    pub at: OffsetDateTime,
}

/// One channel's part in one event of an incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Told {
    pub incident: String,
    pub kind: EventKind,
    /// `mail`, or the `[[notify]]` channel's name.
    pub channel: String,
    #[serde(with = "serde_millis")]
    pub queued_at: OffsetDateTime,
    /// When the server or endpoint accepted it.
    #[serde(with = "serde_opt_millis")]
    pub told_at: Option<OffsetDateTime>,
    /// Why it went to the dead letters instead.
    pub gave_up: Option<String>,
}

/// The told entries, on disk (the history's database) or in memory. A
/// clone is a handle on the same entries.
#[derive(Debug, Clone)]
pub struct ToldLedger {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    Sled {
        path: PathBuf,
        entries: Tree,
        deliveries: Tree,
    },
    Memory(Arc<Mutex<MemoryTold>>),
}

/// The memory backend's entries, shared with the memory
/// [`super::AlertStore`] so that its commit writes them.
#[derive(Debug, Default)]
pub(super) struct MemoryTold {
    entries: BTreeMap<Vec<u8>, Told>,
    deliveries: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
}

impl MemoryTold {
    /// The memory twin of [`queue_in`].
    pub(super) fn queue(
        &mut self,
        channel: &str,
        id: u64,
        events: &[ToldEvent],
        now: OffsetDateTime,
    ) {
        let mut keys = Vec::with_capacity(events.len());
        for event in events {
            let key = entry_key(event, channel);
            self.entries
                .insert(key.clone(), new_entry(event, channel, now));
            keys.push(key);
        }
        if !keys.is_empty() {
            self.deliveries.insert(delivery_key(channel, id), keys);
        }
    }
}

/// Records, inside the transaction that queues delivery `id` of
/// `channel`, that it tells `events`.
pub(super) fn queue_in<E>(
    entries: &TransactionalTree,
    deliveries: &TransactionalTree,
    channel: &str,
    id: u64,
    events: &[ToldEvent],
    now: OffsetDateTime,
) -> Result<(), ConflictableTransactionError<E>> {
    if events.is_empty() {
        return Ok(());
    }
    let mut keys = Vec::with_capacity(events.len());
    for event in events {
        let key = entry_key(event, channel);
        entries.insert(key.as_slice(), encode(&new_entry(event, channel, now)))?;
        keys.push(key);
    }
    deliveries.insert(delivery_key(channel, id), encode(&keys))?;
    Ok(())
}

fn new_entry(event: &ToldEvent, channel: &str, now: OffsetDateTime) -> Told {
    Told {
        incident: event.incident.clone(),
        kind: event.kind,
        channel: channel.to_string(),
        queued_at: to_millisecond(now),
        told_at: None,
        gave_up: None,
    }
}

impl ToldLedger {
    pub(super) fn open_sled(db: &Db, path: PathBuf) -> Result<ToldLedger, StoreError> {
        let open = |name: &str| {
            db.open_tree(name)
                .map_err(StoreError::io_at(&path, "open the told entries"))
        };
        Ok(ToldLedger {
            backend: Backend::Sled {
                entries: open(ENTRIES_TREE)?,
                deliveries: open(DELIVERIES_TREE)?,
                path,
            },
        })
    }

    pub(super) fn memory(entries: Arc<Mutex<MemoryTold>>) -> ToldLedger {
        ToldLedger {
            backend: Backend::Memory(entries),
        }
    }

    /// Delivery `id` of `channel` was accepted at `at`: every event it
    /// carried is told.
    pub fn told(&self, channel: &str, id: u64, at: OffsetDateTime) -> Result<(), StoreError> {
        self.settle(channel, id, |entry| {
            entry.told_at = Some(to_millisecond(at))
        })
    }

    /// Delivery `id` of `channel` went to the dead letters for `why`.
    pub fn gave_up(&self, channel: &str, id: u64, why: &str) -> Result<(), StoreError> {
        self.settle(channel, id, |entry| entry.gave_up = Some(why.to_string()))
    }

    /// [`Self::told`] for the outboxes, best effort: the pages show it,
    /// nothing depends on it, so a failure is logged and not returned.
    pub(super) fn note_told(&self, channel: &str, id: u64, at: OffsetDateTime) {
        if let Err(err) = self.told(channel, id, at) {
            tracing::warn!(channel, error = %err, "cannot record that a delivery was accepted; the incident page will show it as queued");
        }
    }

    /// [`Self::gave_up`] for the outboxes, best effort as
    /// [`Self::note_told`] is.
    pub(super) fn note_gave_up(&self, channel: &str, id: u64, why: &str) {
        if let Err(err) = self.gave_up(channel, id, why) {
            tracing::warn!(channel, error = %err, "cannot record that a delivery was given up; the incident page will show it as queued");
        }
    }

    fn settle(&self, channel: &str, id: u64, mark: impl Fn(&mut Told)) -> Result<(), StoreError> {
        let delivery = delivery_key(channel, id);
        match &self.backend {
            Backend::Sled {
                path,
                entries,
                deliveries,
            } => {
                let Some(keys) = deliveries
                    .remove(&delivery)
                    .map_err(StoreError::io_at(path, "read a delivery's told entries"))?
                else {
                    return Ok(());
                };
                let keys: Vec<Vec<u8>> = serde_json::from_slice(&keys).unwrap_or_default();
                for key in keys {
                    let Some(value) = entries
                        .get(&key)
                        .map_err(StoreError::io_at(path, "read a told entry"))?
                    else {
                        continue;
                    };
                    let Ok(mut entry) = serde_json::from_slice::<Told>(&value) else {
                        continue;
                    };
                    mark(&mut entry);
                    entries
                        .insert(key, encode(&entry))
                        .map_err(StoreError::io_at(path, "mark a told entry"))?;
                }
                Ok(())
            }
            Backend::Memory(m) => {
                let mut m = lock(m);
                let keys = m.deliveries.remove(&delivery).unwrap_or_default();
                for key in keys {
                    if let Some(entry) = m.entries.get_mut(&key) {
                        mark(entry);
                    }
                }
                Ok(())
            }
        }
    }

    /// Every channel told about the incident of `check` whose first failed
    /// probe was at `since`, in the order the events happened.
    pub fn of_incident(&self, check: &str, since: OffsetDateTime) -> Result<Vec<Told>, StoreError> {
        let prefix = incident_prefix(check, since);
        match &self.backend {
            Backend::Sled { path, entries, .. } => {
                let mut out = Vec::new();
                for entry in entries.scan_prefix(&prefix) {
                    let (_, value) = entry.map_err(StoreError::io_at(path, "read told entries"))?;
                    match serde_json::from_slice(&value) {
                        Ok(told) => out.push(told),
                        Err(err) => tracing::warn!(error = %err, "skipping a damaged told entry"),
                    }
                }
                Ok(out)
            }
            Backend::Memory(m) => Ok(lock(m)
                .entries
                .range(prefix.clone()..)
                .take_while(|(key, _)| key.starts_with(&prefix))
                .map(|(_, told)| told.clone())
                .collect()),
        }
    }

    /// Every incident the ledger holds (a week of them), each once, as
    /// closed: whether one is still open is the alert state's to say.
    pub fn incidents(&self) -> Result<Vec<KnownIncident>, StoreError> {
        let mut found: BTreeMap<Vec<u8>, KnownIncident> = BTreeMap::new();
        let mut note = |key: &[u8], told: &Told| {
            let Some(zero) = key.iter().position(|b| *b == 0) else {
                return;
            };
            let prefix = &key[..(zero + 9).min(key.len())];
            if found.contains_key(prefix) {
                return;
            }
            let since = since_of(key)
                .and_then(|ms| i64::try_from(ms).ok())
                .and_then(crate::clock::from_unix_millis);
            let (Ok(check), Some(since)) = (std::str::from_utf8(&key[..zero]), since) else {
                return;
            };
            found.insert(
                prefix.to_vec(),
                KnownIncident {
                    key: IncidentId::from_key(&told.incident),
                    check: check.to_string(),
                    since,
                    open: false,
                },
            );
        };
        match &self.backend {
            Backend::Sled { path, entries, .. } => {
                for entry in entries.iter() {
                    let (key, value) =
                        entry.map_err(StoreError::io_at(path, "read told entries"))?;
                    if let Ok(told) = serde_json::from_slice::<Told>(&value) {
                        note(&key, &told);
                    }
                }
            }
            Backend::Memory(m) => {
                for (key, told) in &lock(m).entries {
                    note(key, told);
                }
            }
        }
        Ok(found.into_values().collect())
    }

    /// Deletes the entries of incidents that began more than [`KEPT`]
    /// before `now`, and the deliveries that name only deleted entries.
    /// Returns how many entries went.
    pub fn sweep(&self, now: OffsetDateTime) -> Result<u64, StoreError> {
        let before = bound_millis(saturating_sub(now, KEPT));
        let old = |key: &[u8]| since_of(key).is_some_and(|since| since < before);
        match &self.backend {
            Backend::Sled {
                path,
                entries,
                deliveries,
            } => {
                let mut removed = 0;
                for entry in entries.iter() {
                    let (key, _) = entry.map_err(StoreError::io_at(path, "read told entries"))?;
                    if old(&key) {
                        entries
                            .remove(key)
                            .map_err(StoreError::io_at(path, "remove a told entry"))?;
                        removed += 1;
                    }
                }
                for delivery in deliveries.iter() {
                    let (key, value) =
                        delivery.map_err(StoreError::io_at(path, "read told deliveries"))?;
                    let keys: Vec<Vec<u8>> = serde_json::from_slice(&value).unwrap_or_default();
                    if keys.iter().all(|k| old(k)) {
                        deliveries
                            .remove(key)
                            .map_err(StoreError::io_at(path, "remove a told delivery"))?;
                    }
                }
                Ok(removed)
            }
            Backend::Memory(m) => {
                let mut m = lock(m);
                let before_len = m.entries.len();
                m.entries.retain(|key, _| !old(key));
                m.deliveries.retain(|_, keys| !keys.iter().all(|k| old(k)));
                Ok((before_len - m.entries.len()) as u64)
            }
        }
    }
}

/// The start of every key of one incident: check, `0x00`, first failure.
pub(super) fn incident_prefix(check: &str, since: OffsetDateTime) -> Vec<u8> {
    let mut key = Vec::with_capacity(check.len() + 9);
    key.extend_from_slice(check.as_bytes());
    key.push(0);
    key.extend_from_slice(&bound_millis(since).to_be_bytes());
    key
}

fn entry_key(event: &ToldEvent, channel: &str) -> Vec<u8> {
    let mut key = incident_prefix(&event.check, event.since);
    key.extend_from_slice(&bound_millis(event.at).to_be_bytes());
    key.extend_from_slice(channel.as_bytes());
    key
}

/// The incident's first failure in an entry key.
fn since_of(key: &[u8]) -> Option<u64> {
    let zero = key.iter().position(|b| *b == 0)?;
    let since: [u8; 8] = key.get(zero + 1..zero + 9)?.try_into().ok()?;
    Some(u64::from_be_bytes(since))
}

fn delivery_key(channel: &str, id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(channel.len() + 9);
    key.extend_from_slice(channel.as_bytes());
    key.push(0);
    key.extend_from_slice(&id.to_be_bytes());
    key
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Invariant: strings, numbers and byte lists only.
    serde_json::to_vec(value).expect("told entries serialise to JSON")
}

/// A lock whose holder panicked still guards whole maps.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
