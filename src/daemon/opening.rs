//! Opening the store for one run of the daemon: the history under
//! `state_dir` (a damaged one set aside and paged), or a temporary store
//! when the directory refuses it, and what the tasks read from it before
//! they start (the latest outcomes, where each failing streak began).
//! Also the temporary store's end: its undelivered mail is said at ERROR.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::error::RunError;
use crate::config::Config;
use crate::store::{AlertStore, Latest, SetAside, SledStore, Store, StoreError};

/// The store of one opening, and how it was opened.
pub struct Opened {
    pub sled: Arc<SledStore>,
    /// The damaged history set aside at this start, paged once.
    pub set_aside: Option<SetAside>,
    /// Running on a temporary store: why, at length and in brief.
    pub temporary: Option<(String, String)>,
}

/// Opens the history under `state_dir`. A state directory that refuses the
/// store (read-only, full, unwritable) must not keep vigie from paging: it
/// runs on a temporary store, unhealthy, until the directory takes writes
/// and the store is reopened.
pub async fn open(config: &Config, now: OffsetDateTime) -> Result<Opened, RunError> {
    let (sled, set_aside, temporary) = match open_store(config, now).await {
        Ok((sled, set_aside)) => (sled, set_aside, None),
        Err(RunError::Store(err @ (StoreError::Open { .. } | StoreError::Io { .. }))) => {
            let why = format!(
                "{err}; vigie runs on a temporary store until state_dir takes writes (history is not kept)"
            );
            tracing::error!("{why}");
            let brief = format!("{}; vigie runs on a temporary store", err.brief());
            let sled = SledStore::open_temporary(crate::store::FLUSH_EVERY)?;
            (sled, None, Some((why, brief)))
        }
        Err(err) => return Err(err),
    };
    if let Some(aside) = &set_aside {
        tracing::error!("{}", aside.message());
    }
    Ok(Opened {
        sled: Arc::new(sled),
        set_aside,
        temporary,
    })
}

/// Every check's latest outcome as stored, for the API and the alerter.
pub fn latest(store: &dyn Store) -> Result<Latest, StoreError> {
    let latest = Latest::default();
    for outcome in store.latest_all()? {
        latest.record(Arc::new(outcome));
    }
    Ok(latest)
}

/// Where each failing check's streak began, for the journal's first line
/// about it after this start (`recorder.rs`).
pub fn down_since(alerts: &AlertStore) -> HashMap<String, OffsetDateTime> {
    alerts
        .states()
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s.failing_since().map(|since| (s.check.clone(), since)))
        .collect()
}

/// Opens the history under `state_dir`, setting a damaged one aside. A
/// store given up a moment ago may still be locked by sled's flusher: the
/// open is retried for a few seconds.
async fn open_store(
    config: &Config,
    now: OffsetDateTime,
) -> Result<(SledStore, Option<SetAside>), RunError> {
    let path = crate::store::history_path(&config.state_dir);
    let mut tries = 0;
    loop {
        let attempt = path.clone();
        let opened = tokio::task::spawn_blocking(move || {
            crate::store::open_or_set_aside(&attempt, crate::store::FLUSH_EVERY, now)
        })
        .await
        .map_err(|err| RunError::StoreTask(err.to_string()))?;
        match opened {
            Err(StoreError::Locked { .. }) if tries < 100 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return Ok(other?),
        }
    }
}

/// The one page about a store set aside at this start (the daemon's own
/// incident: no check, no threading).
pub async fn page_set_aside(outbox: &crate::mail::Outbox, aside: &SetAside, now: OffsetDateTime) {
    let host = crate::mail::hostname();
    let message = crate::alert::Email {
        subject: format!("[vigie {host}] history store was corrupt; moved aside"),
        text: format!("{}\n", aside.message()),
        html: String::new(),
        message_id: format!("<store-set-aside-{}@{host}>", now.unix_timestamp()),
        in_reply_to: None,
        references: Vec::new(),
        to: Vec::new(),
    };
    match outbox.enqueue(&message, now).await {
        Ok(_) => tracing::info!("the set-aside store is paged"),
        Err(err) => {
            tracing::error!(error = %err, "cannot queue the page about the set-aside store")
        }
    }
}

/// A temporary store's outbox dies with it: its pages get one last try,
/// and what is still undelivered is said at ERROR, since no later start
/// will send it.
pub async fn drop_temporary_outbox(sender: crate::mail::Sender, reopen: bool) {
    let undelivered = sender.last_attempt(Duration::from_secs(30)).await;
    if undelivered.is_empty() {
        return;
    }
    let subjects: Vec<&str> = undelivered
        .iter()
        .map(|p| p.message.subject.as_str())
        .collect();
    let when = match reopen {
        true => "the store is reopened",
        false => "vigie stops",
    };
    tracing::error!(
        dropped = undelivered.len(),
        subjects = %subjects.join(" | "),
        "{when} on a temporary store: {} undelivered message(s) are dropped after one last try (the mail server did not take them)",
        undelivered.len()
    );
}
