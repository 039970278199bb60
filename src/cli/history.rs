//! `vigie history NAME`: the stored results of one check, from the running
//! daemon, or from the store when none runs.

use super::{ask_daemon, DaemonError};
use crate::api::{HistoryView, MAX_PAGE, MAX_UNPAGED_WINDOW};
use crate::clock::Clock;
use crate::config::Config;

/// Why `vigie history` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error("the daemon's answer is not a history: {0}")]
    Answer(serde_json::Error),
    #[error("no history yet: {path} does not exist (has `vigie run` run with this config?)")]
    NoStore { path: std::path::PathBuf },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("unknown check {0:?}")]
    UnknownCheck(String),
}

/// `vigie history`: asks the running daemon (sled allows one process per
/// database); opens the store itself only when no daemon answers.
pub async fn history(
    config: &Config,
    name: &str,
    window: std::time::Duration,
    clock: &dyn Clock,
) -> Result<HistoryView, HistoryError> {
    if let Some(view) = from_daemon(config, name, window).await? {
        return Ok(view);
    }
    let path = crate::store::history_path(&config.state_dir);
    if !path.exists() {
        return Err(HistoryError::NoStore { path });
    }
    let store = crate::store::SledStore::open(&path, crate::store::FLUSH_EVERY)?;
    let since = crate::clock::since(clock.now(), window);
    let outcomes = crate::store::Store::history(&store, name, since)?;
    if outcomes.is_empty() && !config.checks.iter().any(|c| c.name == name) {
        return Err(HistoryError::UnknownCheck(name.to_string()));
    }
    Ok(HistoryView {
        name: name.to_string(),
        since,
        outcomes,
        next_after: None,
    })
}

/// The daemon's answer, `None` when no daemon runs. A window the API
/// answers whole is one request; a longer one is asked in pages of
/// [`MAX_PAGE`] results, each `after` the last.
async fn from_daemon(
    config: &Config,
    name: &str,
    window: std::time::Duration,
) -> Result<Option<HistoryView>, HistoryError> {
    let since = humantime::format_duration(window).to_string();
    let path = ["api", "v1", "history", name];
    let paged = window > MAX_UNPAGED_WINDOW;
    let limit = MAX_PAGE.to_string();
    let mut after: Option<String> = None;
    let mut whole: Option<HistoryView> = None;
    loop {
        let mut query = vec![("since", since.as_str())];
        if paged {
            query.push(("limit", limit.as_str()));
        }
        if let Some(after) = &after {
            query.push(("after", after.as_str()));
        }
        let Some(answer) = ask_daemon(config, reqwest::Method::GET, &path, &query, None).await?
        else {
            return Ok(None);
        };
        let page: HistoryView = serde_json::from_value(answer).map_err(HistoryError::Answer)?;
        after = page.next_after.map(|n| n.to_string());
        match whole.as_mut() {
            None => whole = Some(page),
            Some(view) => view.outcomes.extend(page.outcomes),
        }
        if after.is_none() {
            break;
        }
    }
    Ok(whole.map(|view| HistoryView {
        next_after: None,
        ..view
    }))
}
