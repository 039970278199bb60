//! `vigie incident note` and `vigie incident list`: the client side of
//! `/api/v1/incidents`. Updates are written through the running daemon
//! only: it owns the alert state that says which incident is open, and it
//! serves the pages the update is for.

use std::fmt::Write as _;

use super::{ask_daemon, DaemonError};
use crate::alert::{known, IncidentId, KnownIncident};
use crate::api::{IncidentWithUpdates, UpdateRequest};
use crate::config::Config;
use crate::incident_update::{IncidentUpdate, UpdateState};

/// Why `vigie incident` could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum IncidentError {
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error(
        "no daemon answers at {at} or on its local socket: incident updates are written through the running daemon; start it (`systemctl start vigie`) and try again"
    )]
    NoDaemon { at: String },
    #[error("the daemon's answer is not what `vigie incident` expects: {0}")]
    Answer(serde_json::Error),
    #[error("unknown check {0:?}: `vigie validate` lists the configured checks")]
    UnknownCheck(String),
    #[error(
        "{0} has no open incident and none in the last week: an update is about an incident; name an older one with --incident KEY (`vigie incident list` shows the keys)"
    )]
    NoIncident(String),
    #[error("the incident {key} is about the check {of}, not {check}: give its check, or the key of one of {check}'s incidents")]
    WrongCheck {
        key: String,
        of: String,
        check: String,
    },
}

/// What `vigie incident note` did.
#[derive(Debug)]
pub struct Noted {
    pub update: IncidentUpdate,
    /// The incident the command chose when none was named.
    pub chosen: Option<KnownIncident>,
}

/// `vigie incident note CHECK [--incident KEY] --state S TEXT`: adds the
/// update to the incident `key`, else to `check`'s open incident, else to
/// its latest one.
pub async fn note(
    config: &Config,
    check: &str,
    key: Option<&str>,
    state: UpdateState,
    text: &str,
) -> Result<Noted, IncidentError> {
    if !config.checks.iter().any(|c| c.name == check) {
        return Err(IncidentError::UnknownCheck(check.to_string()));
    }
    let (key, chosen) = match key {
        Some(key) => {
            let of = IncidentId::from_key(key).check().to_string();
            if of != check {
                return Err(IncidentError::WrongCheck {
                    key: key.to_string(),
                    of,
                    check: check.to_string(),
                });
            }
            (key.to_string(), None)
        }
        None => {
            let listed = list(config, Some(check)).await?;
            let all: Vec<KnownIncident> = listed.into_iter().map(|i| i.incident).collect();
            let chosen = known::latest_of(&all, check)
                .cloned()
                .ok_or_else(|| IncidentError::NoIncident(check.to_string()))?;
            (chosen.key.to_string(), Some(chosen))
        }
    };
    let body = UpdateRequest {
        state: Some(state.to_string()),
        text: text.to_string(),
    };
    let body = serde_json::to_value(body).map_err(IncidentError::Answer)?;
    let path = ["api", "v1", "incidents", key.as_str(), "updates"];
    let answer = ask_daemon(config, reqwest::Method::POST, &path, &[], Some(body))
        .await?
        .ok_or_else(|| no_daemon(config))?;
    let update = serde_json::from_value(answer).map_err(IncidentError::Answer)?;
    Ok(Noted { update, chosen })
}

/// `vigie incident list [CHECK]`: open and recent incidents, newest first,
/// with their keys and updates.
pub async fn list(
    config: &Config,
    check: Option<&str>,
) -> Result<Vec<IncidentWithUpdates>, IncidentError> {
    let query: Vec<(&str, &str)> = check.map(|c| ("check", c)).into_iter().collect();
    let path = ["api", "v1", "incidents"];
    let mut answer = ask_daemon(config, reqwest::Method::GET, &path, &query, None)
        .await?
        .ok_or_else(|| no_daemon(config))?;
    serde_json::from_value(answer["incidents"].take()).map_err(IncidentError::Answer)
}

fn no_daemon(config: &Config) -> IncidentError {
    IncidentError::NoDaemon {
        at: config.api.listen.to_string(),
    }
}

/// What `vigie incident note` says it did: which incident, and why that
/// one when the operator did not name it.
pub fn noted_text(noted: &Noted) -> String {
    let update = &noted.update;
    let mut text = format!(
        "added an update ({}) to the incident {}",
        update.state, update.incident
    );
    if let Some(chosen) = &noted.chosen {
        let since = crate::when::minute(chosen.since);
        match chosen.open {
            true => write!(text, ": {}'s open incident, failing since {since}", chosen.check),
            false => write!(
                text,
                ": {} has no open incident; this is its latest, which began at {since} (--incident KEY names another)",
                chosen.check
            ),
        }
        .unwrap_or_default();
    }
    text.push('\n');
    text
}

/// `vigie incident list` as text: an incident a line, its updates under it.
pub fn list_text(incidents: &[IncidentWithUpdates]) -> String {
    if incidents.is_empty() {
        return "no open incident, and none in the last week\n".to_string();
    }
    let mut text = String::new();
    for listed in incidents {
        let incident = &listed.incident;
        let open = match incident.open {
            true => "open, ",
            false => "",
        };
        let _ = writeln!(
            text,
            "{}  ({open}failing since {})",
            incident.key,
            crate::when::minute(incident.since)
        );
        for update in &listed.updates {
            let _ = writeln!(
                text,
                "    {} {}: {}",
                crate::when::minute(update.at),
                update.state,
                update.text.trim().replace('\n', "\n      ")
            );
        }
    }
    text
}
