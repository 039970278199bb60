//! The updates the on-call person writes about incidents
//! ([`IncidentUpdate`]), kept beside the incident they are about.
//!
//! # Key layout (sled)
//!
//! | tree               | key | value |
//! |--------------------|-----|-------|
//! | `incident_updates` | check (UTF-8) ++ `0x00` ++ incident's first failure, unix ms (u64 BE) ++ update's time, unix ms (u64 BE) | JSON [`IncidentUpdate`] |
//! | `incident_updates_unshipped` | the same key | empty |
//!
//! The first part is the told ledger's incident prefix, so an incident's
//! updates and its told entries are read the same way. Two updates of one
//! incident in the same millisecond would share a key; the later one is
//! moved on by a millisecond instead of replacing the first.
//!
//! Updates are few and written by hand, so they are kept as long as the
//! history ([`IncidentUpdates::forget_before`] follows its retention).
//!
//! # Replication
//!
//! An update is written with a mark in `incident_updates_unshipped`, in
//! one transaction: the replicator ([`IncidentUpdates::unshipped`]) copies
//! each marked update to the bucket in its cycle, beside the history's
//! segments, and clears the mark only once the bucket has it
//! ([`IncidentUpdates::shipped`]); a cycle that fails leaves the marks for
//! the next one, as it leaves the history's queue. A restore puts updates
//! back unmarked ([`IncidentUpdates::restore`]): they are in the bucket.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};
use sled::{Db, Tree};
use time::OffsetDateTime;

use super::error::StoreError;
use super::millis::bound_millis;
use super::told::incident_prefix;
use crate::incident_update::{IncidentUpdate, MAX_PER_INCIDENT};

pub(super) const TREE: &str = "incident_updates";
const UNSHIPPED_TREE: &str = "incident_updates_unshipped";

/// The incident updates, on disk (the history's database) or in memory.
/// A clone is a handle on the same updates.
#[derive(Debug, Clone)]
pub struct IncidentUpdates {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    Sled {
        path: PathBuf,
        tree: Tree,
        unshipped: Tree,
    },
    Memory(Arc<Mutex<Memory>>),
}

#[derive(Debug, Default)]
struct Memory {
    updates: BTreeMap<Vec<u8>, IncidentUpdate>,
    unshipped: BTreeSet<Vec<u8>>,
}

/// Why an update was not kept.
#[derive(Debug, thiserror::Error)]
pub enum UpdateRefused {
    #[error("{0}")]
    Text(String),
    #[error(
        "this incident already has {MAX_PER_INCIDENT} updates, the most it keeps: \
         edit the status page's announcement instead"
    )]
    TooMany,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IncidentUpdates {
    pub(super) fn open_sled(db: &Db, path: PathBuf) -> Result<IncidentUpdates, StoreError> {
        let open = |name: &str| {
            db.open_tree(name)
                .map_err(StoreError::io_at(&path, "open the incident updates"))
        };
        Ok(IncidentUpdates {
            backend: Backend::Sled {
                tree: open(TREE)?,
                unshipped: open(UNSHIPPED_TREE)?,
                path,
            },
        })
    }

    /// An empty set of updates in memory.
    pub fn in_memory() -> IncidentUpdates {
        IncidentUpdates {
            backend: Backend::Memory(Arc::default()),
        }
    }

    /// Keeps `update`, after its incident's earlier ones. The update's
    /// time is kept to the millisecond.
    pub fn add(&self, update: &IncidentUpdate) -> Result<IncidentUpdate, UpdateRefused> {
        if let Some(why) = IncidentUpdate::refuse_text(&update.text) {
            return Err(UpdateRefused::Text(why));
        }
        let earlier = self.of_incident(&update.check, update.since)?;
        if earlier.len() >= MAX_PER_INCIDENT {
            return Err(UpdateRefused::TooMany);
        }
        // Never before the incident's last update, so the order they were
        // written in is the order they are read in, whatever the clock did.
        let last = earlier.last().map(|u| bound_millis(u.at) + 1);
        let at = bound_millis(update.at).max(last.unwrap_or(0));
        let mut kept = update.clone();
        kept.at = crate::clock::from_unix_millis(i64::try_from(at).unwrap_or(i64::MAX))
            .unwrap_or(update.at);
        self.put(&kept, true)?;
        Ok(kept)
    }

    /// Puts back an update read from the bucket, at the key it was kept
    /// under, unmarked (the bucket has it). `false` when the store already
    /// held it as it is: restoring twice changes nothing.
    pub fn restore(&self, update: &IncidentUpdate) -> Result<bool, StoreError> {
        let key = key_of(update);
        let held = match &self.backend {
            Backend::Sled { path, tree, .. } => tree
                .get(&key)
                .map_err(StoreError::io_at(path, "read an incident update"))?
                .and_then(|value| serde_json::from_slice::<IncidentUpdate>(&value).ok()),
            Backend::Memory(m) => lock(m).updates.get(&key).cloned(),
        };
        if held.as_ref() == Some(update) {
            return Ok(false);
        }
        self.put(update, false)?;
        Ok(true)
    }

    /// The updates not yet copied to the bucket, oldest incident first.
    pub fn unshipped(&self) -> Result<Vec<IncidentUpdate>, StoreError> {
        let keys: Vec<Vec<u8>> = match &self.backend {
            Backend::Sled {
                path, unshipped, ..
            } => unshipped
                .iter()
                .keys()
                .map(|key| key.map(|k| k.to_vec()))
                .collect::<Result<_, _>>()
                .map_err(StoreError::io_at(
                    path,
                    "read the unshipped incident updates",
                ))?,
            Backend::Memory(m) => lock(m).unshipped.iter().cloned().collect(),
        };
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            match self.at(&key)? {
                Some(update) => out.push(update),
                // Its update went (retention) or is damaged: nothing to ship.
                None => self.unmark(&key)?,
            }
        }
        Ok(out)
    }

    /// `update` is in the bucket: it leaves [`Self::unshipped`].
    pub fn shipped(&self, update: &IncidentUpdate) -> Result<(), StoreError> {
        self.unmark(&key_of(update))
    }

    fn put(&self, update: &IncidentUpdate, mark: bool) -> Result<(), StoreError> {
        let key = key_of(update);
        match &self.backend {
            Backend::Sled {
                path,
                tree,
                unshipped,
            } => {
                // Invariant: strings and times only.
                let value = serde_json::to_vec(update).expect("updates serialise to JSON");
                (tree, unshipped)
                    .transaction(|(tree, unshipped)| {
                        tree.insert(key.as_slice(), value.as_slice())?;
                        if mark {
                            unshipped.insert(key.as_slice(), &[] as &[u8])?;
                        }
                        Ok::<_, ConflictableTransactionError<sled::Error>>(())
                    })
                    .map_err(|e| match e {
                        TransactionError::Abort(cause) | TransactionError::Storage(cause) => {
                            StoreError::io_at(path, "keep an incident update")(cause)
                        }
                    })?;
                tree.flush()
                    .map_err(StoreError::io_at(path, "flush an incident update"))?;
            }
            Backend::Memory(m) => {
                let mut m = lock(m);
                m.updates.insert(key.clone(), update.clone());
                if mark {
                    m.unshipped.insert(key);
                }
            }
        }
        Ok(())
    }

    fn at(&self, key: &[u8]) -> Result<Option<IncidentUpdate>, StoreError> {
        match &self.backend {
            Backend::Sled { path, tree, .. } => Ok(tree
                .get(key)
                .map_err(StoreError::io_at(path, "read an incident update"))?
                .and_then(|value| serde_json::from_slice(&value).ok())),
            Backend::Memory(m) => Ok(lock(m).updates.get(key).cloned()),
        }
    }

    fn unmark(&self, key: &[u8]) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sled {
                path, unshipped, ..
            } => {
                unshipped
                    .remove(key)
                    .map_err(StoreError::io_at(path, "mark an incident update shipped"))?;
            }
            Backend::Memory(m) => {
                lock(m).unshipped.remove(key);
            }
        }
        Ok(())
    }

    /// The updates of the incident of `check` whose first failed probe was
    /// at `since`, oldest first.
    pub fn of_incident(
        &self,
        check: &str,
        since: OffsetDateTime,
    ) -> Result<Vec<IncidentUpdate>, StoreError> {
        self.scan(&incident_prefix(check, since))
    }

    /// Every update of `check`'s incidents, oldest incident first.
    pub fn of_check(&self, check: &str) -> Result<Vec<IncidentUpdate>, StoreError> {
        let mut prefix = check.as_bytes().to_vec();
        prefix.push(0);
        self.scan(&prefix)
    }

    /// Every update written at or after `from`, of every check, oldest
    /// first.
    pub fn since(&self, from: OffsetDateTime) -> Result<Vec<IncidentUpdate>, StoreError> {
        let mut all = self.scan(&[])?;
        all.retain(|u| u.at >= from);
        all.sort_by_key(|u| u.at);
        Ok(all)
    }

    /// Deletes the updates of incidents that began before `cutoff`, as the
    /// history's retention deletes their results. Returns how many went.
    pub fn forget_before(&self, cutoff: OffsetDateTime) -> Result<u64, StoreError> {
        let old = |u: &IncidentUpdate| u.since < cutoff;
        match &self.backend {
            Backend::Sled {
                path,
                tree,
                unshipped,
            } => {
                let mut removed = 0;
                for entry in tree.iter() {
                    let (key, value) =
                        entry.map_err(StoreError::io_at(path, "read incident updates"))?;
                    let damaged_or_old =
                        serde_json::from_slice::<IncidentUpdate>(&value).map_or(true, |u| old(&u));
                    if damaged_or_old {
                        tree.remove(&key)
                            .map_err(StoreError::io_at(path, "remove an incident update"))?;
                        unshipped
                            .remove(key)
                            .map_err(StoreError::io_at(path, "remove an incident update"))?;
                        removed += 1;
                    }
                }
                Ok(removed)
            }
            Backend::Memory(m) => {
                let mut m = lock(m);
                let before = m.updates.len();
                m.updates.retain(|_, u| !old(u));
                let Memory { updates, unshipped } = &mut *m;
                unshipped.retain(|key| updates.contains_key(key));
                Ok((before - updates.len()) as u64)
            }
        }
    }

    fn scan(&self, prefix: &[u8]) -> Result<Vec<IncidentUpdate>, StoreError> {
        match &self.backend {
            Backend::Sled { path, tree, .. } => {
                let mut out = Vec::new();
                for entry in tree.scan_prefix(prefix) {
                    let (_, value) =
                        entry.map_err(StoreError::io_at(path, "read incident updates"))?;
                    match serde_json::from_slice(&value) {
                        Ok(update) => out.push(update),
                        Err(err) => {
                            tracing::warn!(error = %err, "skipping a damaged incident update")
                        }
                    }
                }
                Ok(out)
            }
            Backend::Memory(m) => Ok(lock(m)
                .updates
                .range(prefix.to_vec()..)
                .take_while(|(key, _)| key.starts_with(prefix))
                .map(|(_, update)| update.clone())
                .collect()),
        }
    }
}

/// Where `update` is kept: its time is already to the millisecond.
fn key_of(update: &IncidentUpdate) -> Vec<u8> {
    let mut key = incident_prefix(&update.check, update.since);
    key.extend_from_slice(&bound_millis(update.at).to_be_bytes());
    key
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::IncidentId;
    use crate::incident_update::UpdateState;
    use crate::store::open_sled_when_unlocked;
    use time::macros::datetime;

    fn update(
        check: &str,
        since: OffsetDateTime,
        at: OffsetDateTime,
        text: &str,
    ) -> IncidentUpdate {
        IncidentUpdate {
            check: check.to_string(),
            incident: IncidentId::new(check, since),
            since,
            at,
            state: UpdateState::Identified,
            text: text.to_string(),
        }
    }

    fn both() -> Vec<(IncidentUpdates, Option<tempfile::TempDir>)> {
        let dir = tempfile::tempdir().unwrap();
        let sled = open_sled_when_unlocked(dir.path());
        let on_disk = sled.alerts().unwrap().incident_updates();
        vec![(IncidentUpdates::in_memory(), None), (on_disk, Some(dir))]
    }

    #[test]
    fn updates_are_read_per_incident_per_check_and_since_a_time() {
        let one = datetime!(2026-12-01 10:00 UTC);
        let two = datetime!(2026-12-02 10:00 UTC);
        for (updates, _dir) in both() {
            updates
                .add(&update("site", one, one + time::Duration::minutes(5), "a"))
                .unwrap();
            updates
                .add(&update("site", two, two + time::Duration::minutes(5), "b"))
                .unwrap();
            updates
                .add(&update("site", two, two + time::Duration::minutes(9), "c"))
                .unwrap();
            updates
                .add(&update("site-2", two, two, "other check"))
                .unwrap();

            let texts =
                |list: Vec<IncidentUpdate>| list.into_iter().map(|u| u.text).collect::<Vec<_>>();
            assert_eq!(texts(updates.of_incident("site", two).unwrap()), ["b", "c"]);
            assert_eq!(texts(updates.of_check("site").unwrap()), ["a", "b", "c"]);
            assert_eq!(
                texts(updates.since(two).unwrap()),
                ["other check", "b", "c"]
            );
            assert_eq!(updates.forget_before(two).unwrap(), 1);
            assert_eq!(texts(updates.of_check("site").unwrap()), ["b", "c"]);
        }
    }

    #[test]
    fn a_second_update_in_the_same_millisecond_or_an_earlier_clock_comes_after() {
        let since = datetime!(2026-12-01 10:00 UTC);
        for (updates, _dir) in both() {
            updates.add(&update("site", since, since, "first")).unwrap();
            let second = updates
                .add(&update("site", since, since, "second"))
                .unwrap();
            let third = updates
                .add(&update(
                    "site",
                    since,
                    since - time::Duration::hours(1),
                    "third",
                ))
                .unwrap();
            assert!(second.at > since && third.at > second.at);
            let list = updates.of_incident("site", since).unwrap();
            let texts: Vec<_> = list.iter().map(|u| u.text.as_str()).collect();
            assert_eq!(texts, ["first", "second", "third"]);
        }
    }

    #[test]
    fn an_update_is_unshipped_until_shipped_and_a_restored_one_never_is() {
        let since = datetime!(2026-12-01 10:00 UTC);
        for (updates, _dir) in both() {
            let kept = updates.add(&update("site", since, since, "a")).unwrap();
            assert_eq!(updates.unshipped().unwrap(), vec![kept.clone()]);
            updates.shipped(&kept).unwrap();
            assert!(updates.unshipped().unwrap().is_empty());

            let from_bucket = update("site", since, since + time::Duration::minutes(1), "b");
            assert!(updates.restore(&from_bucket).unwrap());
            assert!(!updates.restore(&from_bucket).unwrap(), "twice: nothing");
            assert!(updates.unshipped().unwrap().is_empty());
            assert_eq!(updates.of_incident("site", since).unwrap().len(), 2);

            let old = updates.add(&update("site", since, since, "c")).unwrap();
            assert_eq!(
                updates
                    .forget_before(since + time::Duration::hours(1))
                    .unwrap(),
                3
            );
            assert!(updates.unshipped().unwrap().is_empty(), "{old:?} went");
        }
    }

    #[test]
    fn empty_text_and_too_many_updates_are_refused() {
        let since = datetime!(2026-12-01 10:00 UTC);
        let updates = IncidentUpdates::in_memory();
        let err = updates
            .add(&update("site", since, since, "  "))
            .unwrap_err();
        assert!(err.to_string().contains("needs text"), "{err}");
        for _ in 0..MAX_PER_INCIDENT {
            updates.add(&update("site", since, since, "more")).unwrap();
        }
        let err = updates
            .add(&update("site", since, since, "one too many"))
            .unwrap_err();
        assert!(matches!(err, UpdateRefused::TooMany), "{err}");
    }
}
