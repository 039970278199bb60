//! Alert states, silences and certificate changes: the sled trees
//! `alert_state`, `silences` and `cert_changes`, in the history's database,
//! so that a state change and the mail it causes commit in one transaction
//! with the outbox's tree.
//!
//! The outbox's trees are still opened by `mail::Outbox` on the same
//! database; [`AlertStore::commit`] writes into them through it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sled::transaction::{ConflictableTransactionResult, TransactionError};
use sled::{Db, Transactional, Tree};
use time::OffsetDateTime;

use crate::alert::report::CertChange;
use crate::alert::{AlertState, Outbound, Silence};
use crate::clock::{saturating_sub, unix_millis};
use crate::mail::{MailError, Outbox, OutgoingMessage};

const STATES_TREE: &str = "alert_state";
const SILENCES_TREE: &str = "silences";
const CHANGES_TREE: &str = "cert_changes";

/// Certificate changes are kept this long (the report shows one day).
const CHANGES_KEPT: Duration = Duration::from_secs(7 * 86_400);

/// Why alerting could not read or write its state.
#[derive(Debug, thiserror::Error)]
pub enum AlertStoreError {
    #[error(
        "the alert state in the store at {} could not {action}: {cause} (is the disk full, read-only or failing?)",
        path.display()
    )]
    Store {
        path: PathBuf,
        action: &'static str,
        cause: sled::Error,
    },
    #[error(transparent)]
    Mail(#[from] MailError),
}

/// Alert states, silences and certificate changes in the store.
#[derive(Debug, Clone)]
pub struct AlertStore {
    path: PathBuf,
    states: Tree,
    silences: Tree,
    changes: Tree,
}

impl AlertStore {
    /// Opens the trees in the history's database (`path` is its directory,
    /// for messages).
    pub fn open(db: &Db, path: &Path) -> Result<AlertStore, AlertStoreError> {
        let open = |name: &str| {
            db.open_tree(name).map_err(|cause| AlertStoreError::Store {
                path: path.to_path_buf(),
                action: "open its trees",
                cause,
            })
        };
        Ok(AlertStore {
            path: path.to_path_buf(),
            states: open(STATES_TREE)?,
            silences: open(SILENCES_TREE)?,
            changes: open(CHANGES_TREE)?,
        })
    }

    fn io(&self, action: &'static str) -> impl Fn(sled::Error) -> AlertStoreError + '_ {
        move |cause| AlertStoreError::Store {
            path: self.path.clone(),
            action,
            cause,
        }
    }

    /// Every stored state. A damaged entry is logged and skipped: one
    /// check's forgotten incident is better than a daemon that cannot
    /// start.
    pub fn states(&self) -> Result<Vec<AlertState>, AlertStoreError> {
        decode_all(&self.states, "alert state").map_err(self.io("read alert states"))
    }

    pub fn save(&self, states: &[AlertState]) -> Result<(), AlertStoreError> {
        for state in states {
            self.states
                .insert(state.check.as_bytes(), encode(state))
                .map_err(self.io("write an alert state"))?;
        }
        Ok(())
    }

    /// Writes a mail and the states that record it as sent, in one
    /// transaction: either both are stored or neither.
    pub fn commit(
        &self,
        outbox: &Outbox,
        outbound: &Outbound,
        now: OffsetDateTime,
    ) -> Result<(), AlertStoreError> {
        let message = OutgoingMessage::from(outbound.email.clone());
        let result = (&self.states, outbox.tree()).transaction(
            |(states, queue)| -> ConflictableTransactionResult<(), sled::Error> {
                for state in &outbound.states {
                    states.insert(state.check.as_bytes(), encode(state))?;
                }
                Outbox::enqueue_in(queue, &message, now)?;
                Ok(())
            },
        );
        result.map_err(|e| match e {
            TransactionError::Abort(cause) | TransactionError::Storage(cause) => {
                AlertStoreError::Store {
                    path: self.path.clone(),
                    action: "queue a mail with its alert state",
                    cause,
                }
            }
        })
    }

    /// Silences, expired ones included (they are inert).
    pub fn silences(&self) -> Result<Vec<Silence>, AlertStoreError> {
        decode_all(&self.silences, "silence").map_err(self.io("read silences"))
    }

    /// Adds or replaces the silence of its pattern, durably.
    pub fn add_silence(&self, silence: &Silence) -> Result<(), AlertStoreError> {
        self.silences
            .insert(silence.pattern.as_bytes(), encode(silence))
            .map_err(self.io("write a silence"))?;
        self.silences.flush().map_err(self.io("flush a silence"))?;
        Ok(())
    }

    /// Removes the silence of `pattern`; `false` if there was none.
    pub fn remove_silence(&self, pattern: &str) -> Result<bool, AlertStoreError> {
        let removed = self
            .silences
            .remove(pattern.as_bytes())
            .map_err(self.io("remove a silence"))?;
        self.silences.flush().map_err(self.io("flush a silence"))?;
        Ok(removed.is_some())
    }

    /// Deletes silences that ended before `now`.
    pub fn sweep_silences(&self, now: OffsetDateTime) -> Result<(), AlertStoreError> {
        for silence in self.silences()? {
            if silence.until <= now {
                self.silences
                    .remove(silence.pattern.as_bytes())
                    .map_err(self.io("remove an expired silence"))?;
            }
        }
        Ok(())
    }

    pub fn record_change(&self, change: &CertChange) -> Result<(), AlertStoreError> {
        let mut key = (unix_millis(change.at) as u64).to_be_bytes().to_vec();
        key.extend_from_slice(change.check.as_bytes());
        self.changes
            .insert(key, encode(change))
            .map_err(self.io("record a certificate change"))?;
        Ok(())
    }

    /// Certificate changes seen at or after `since`, oldest first; older
    /// ones than [`CHANGES_KEPT`] are deleted on the way.
    pub fn changes_since(&self, since: OffsetDateTime) -> Result<Vec<CertChange>, AlertStoreError> {
        let from = (unix_millis(since).max(0) as u64).to_be_bytes();
        let mut changes = Vec::new();
        for entry in self.changes.range(from..) {
            let (_, value) = entry.map_err(self.io("read certificate changes"))?;
            match serde_json::from_slice(&value) {
                Ok(change) => changes.push(change),
                Err(err) => tracing::warn!(error = %err, "skipping a damaged certificate change"),
            }
        }
        let expired =
            (unix_millis(saturating_sub(since, CHANGES_KEPT)).max(0) as u64).to_be_bytes();
        for entry in self.changes.range(..expired) {
            let (key, _) = entry.map_err(self.io("read certificate changes"))?;
            self.changes
                .remove(key)
                .map_err(self.io("delete an old certificate change"))?;
        }
        Ok(changes)
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
    use std::time::Duration;

    use time::macros::datetime;

    use super::*;
    use crate::alert::report::{ChangeKind, Leaf};

    const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);

    fn store() -> (AlertStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        (AlertStore::open(&db, dir.path()).unwrap(), dir)
    }

    fn leaf(sha: &str) -> Leaf {
        Leaf {
            subject: "CN=www.example.com".into(),
            issuer: "C=US, O=Let's Encrypt, CN=R11".into(),
            sans: vec!["www.example.com".into()],
            not_after: T0 + Duration::from_secs(90 * 86_400),
            sha256: sha.into(),
        }
    }

    fn change(check: &str, at: OffsetDateTime) -> CertChange {
        CertChange {
            check: check.into(),
            at,
            kind: ChangeKind::Renewed,
            before: leaf("aa"),
            after: leaf("bb"),
        }
    }

    #[test]
    fn states_round_trip_and_a_damaged_one_is_skipped() {
        let (store, _dir) = store();
        let mut site = AlertState::new("site");
        site.consecutive_failures = 1;
        store.save(&[site.clone(), AlertState::new("app")]).unwrap();
        store
            .states
            .insert("broken", b"{not json".to_vec())
            .unwrap();
        let mut states = store.states().unwrap();
        states.sort_by(|a, b| a.check.cmp(&b.check));
        assert_eq!(states, [AlertState::new("app"), site]);
    }

    #[test]
    fn silences_are_added_replaced_removed_and_swept() {
        let (store, _dir) = store();
        let hour = Duration::from_secs(3600);
        store
            .add_silence(&Silence::new("staging-*", hour, "deploy", T0).unwrap())
            .unwrap();
        store
            .add_silence(&Silence::new("staging-*", 2 * hour, "longer", T0).unwrap())
            .unwrap();
        store
            .add_silence(&Silence::new("app", hour / 2, "", T0).unwrap())
            .unwrap();
        let silences = store.silences().unwrap();
        assert_eq!(silences.len(), 2, "one per pattern: {silences:?}");
        assert!(silences.iter().any(|s| s.reason == "longer"));
        store.sweep_silences(T0 + hour).unwrap();
        let left: Vec<String> = store
            .silences()
            .unwrap()
            .into_iter()
            .map(|s| s.pattern)
            .collect();
        assert_eq!(left, ["staging-*"]);
        assert!(store.remove_silence("staging-*").unwrap());
        assert!(!store.remove_silence("staging-*").unwrap());
    }

    #[test]
    fn certificate_changes_of_the_last_day_are_listed_and_old_ones_dropped() {
        let (store, _dir) = store();
        let day = Duration::from_secs(86_400);
        store.record_change(&change("old", T0 - 10 * day)).unwrap();
        store.record_change(&change("app", T0 - day / 2)).unwrap();
        store.record_change(&change("site", T0 - day / 4)).unwrap();
        let listed: Vec<String> = store
            .changes_since(T0 - day)
            .unwrap()
            .into_iter()
            .map(|c| c.check)
            .collect();
        assert_eq!(listed, ["app", "site"], "oldest first, last day only");
        assert_eq!(store.changes.len(), 2, "older than a week is deleted");
    }
}
