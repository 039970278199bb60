//! `/api/v1/incidents`: the incidents an update can be about, with their
//! keys and updates, and `POST /api/v1/incidents/{key}/updates`, which
//! adds one. [`add_update`] is the one way an update is written: this
//! endpoint and the incident page's form both call it.
//!
//! An incident is named by its key, `<check>@<time the failure threshold
//! was crossed>` ([`IncidentId`]). The key is looked up among the
//! incidents open now (asked of the alerter, which owns alert states), the
//! ones the told ledger holds (a week of them) and the ones that already
//! have updates; the update is kept under the incident's check and first
//! failure, beside its told entries.
//!
//! Adding an update changes what the public status page says, so it needs
//! the token (or the local socket), as silences do. Reading the list
//! follows the other JSON endpoints' rule.

use std::collections::HashMap;

use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::reply::{error, json_body};
use super::{alerts, auth, body, ApiState};
use crate::alert::{known, AlertRequest, IncidentId, KnownIncident};
use crate::incident_update::{IncidentUpdate, UpdateState};
use crate::store::{IncidentUpdates, StoreError, ToldLedger, UpdateRefused};

/// Why an update was not added or an incident not found, as the answer to
/// give (a JSON endpoint says it as `{"error"}`, the page as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub status: StatusCode,
    pub message: String,
}

impl Refused {
    fn new(status: StatusCode, message: impl Into<String>) -> Refused {
        Refused {
            status,
            message: message.into(),
        }
    }

    fn into_response(self) -> Response {
        error(self.status, &self.message)
    }
}

/// Adds an update (`state`, Markdown `text`, written now) to the incident
/// whose key is `key`, and returns it as kept. Refused: 400 for a text
/// that cannot be an update's, 404 for a key no incident has, 409 when
/// the incident has all the updates it keeps, 503 when the store or the
/// alerter cannot answer. Whoever calls it has settled who is asking.
pub(crate) async fn add_update(
    state: &ApiState,
    key: &str,
    update_state: UpdateState,
    text: &str,
) -> Result<IncidentUpdate, Refused> {
    refuse_text(text)?;
    let all = incidents(state).await?;
    let Some(incident) = known::find(&all, key) else {
        return Err(unknown(key));
    };
    add_to(state, incident.clone(), update_state, text).await
}

/// Adds an update to `incident`, which the caller found: the API by its
/// key among [`incidents`], the incident's page among the incidents it
/// shows (which include one that paged nobody, a silenced one, that no
/// record here names).
pub(crate) async fn add_to(
    state: &ApiState,
    incident: KnownIncident,
    update_state: UpdateState,
    text: &str,
) -> Result<IncidentUpdate, Refused> {
    refuse_text(text)?;
    let updates = kept_updates(state)?;
    let update = IncidentUpdate {
        check: incident.check,
        incident: incident.key,
        since: incident.since,
        at: state.clock.now(),
        state: update_state,
        text: text.to_string(),
    };
    let added = tokio::task::spawn_blocking(move || updates.add(&update))
        .await
        .map_err(|_| Refused::new(StatusCode::INTERNAL_SERVER_ERROR, PANICKED))?;
    match added {
        Ok(kept) => {
            tracing::info!(incident = %kept.incident, state = %kept.state, "incident update added");
            Ok(kept)
        }
        Err(UpdateRefused::Text(why)) => Err(Refused::new(
            StatusCode::BAD_REQUEST,
            format!("text: {why}"),
        )),
        Err(refused @ UpdateRefused::TooMany) => {
            Err(Refused::new(StatusCode::CONFLICT, refused.to_string()))
        }
        Err(UpdateRefused::Store(err)) => Err(store_failed(err)),
    }
}

/// Refuses an empty or oversized text before any lookup.
fn refuse_text(text: &str) -> Result<(), Refused> {
    match IncidentUpdate::refuse_text(text) {
        Some(why) => Err(Refused::new(
            StatusCode::BAD_REQUEST,
            format!("text: {why}"),
        )),
        None => Ok(()),
    }
}

/// Every incident an update can name now, newest first: open ones, the
/// told ledger's, and those that already have updates.
pub(crate) async fn incidents(state: &ApiState) -> Result<Vec<KnownIncident>, Refused> {
    let open = match state.alerts {
        Some(_) => alerts::ask(state, AlertRequest::OpenIncidents)
            .await
            .map_err(|_| Refused::new(StatusCode::SERVICE_UNAVAILABLE, alerts::ALERTING_GONE))?,
        None => Vec::new(),
    };
    let (told, updates) = (state.told.clone(), state.updates.clone());
    let recorded = tokio::task::spawn_blocking(move || recorded(told.as_ref(), updates.as_ref()))
        .await
        .map_err(|_| Refused::new(StatusCode::INTERNAL_SERVER_ERROR, PANICKED))?
        .map_err(store_failed)?;
    Ok(known::merge(open, recorded))
}

/// The incidents the store knows of: the told ledger's, then those with
/// updates.
fn recorded(
    told: Option<&ToldLedger>,
    updates: Option<&IncidentUpdates>,
) -> Result<Vec<KnownIncident>, StoreError> {
    let mut all = match told {
        Some(told) => told.incidents()?,
        None => Vec::new(),
    };
    let written = match updates {
        Some(updates) => updates.since(time::OffsetDateTime::UNIX_EPOCH)?,
        None => Vec::new(),
    };
    for update in written {
        if !all.iter().any(|known| known.key == update.incident) {
            all.push(KnownIncident {
                key: update.incident,
                check: update.check,
                since: update.since,
                open: false,
            });
        }
    }
    Ok(all)
}

/// One incident and its updates, oldest update first: an entry of
/// `GET /api/v1/incidents` and the answer of
/// `GET /api/v1/incidents/{key}/updates`.
#[derive(Debug, Serialize, Deserialize)]
pub struct IncidentWithUpdates {
    #[serde(flatten)]
    pub incident: KnownIncident,
    pub updates: Vec<IncidentUpdate>,
}

/// `GET /api/v1/incidents[?check=NAME]`: the incidents an update can name,
/// newest first, each with its updates.
pub(super) async fn list(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let mut all = match incidents(&state).await {
        Ok(all) => all,
        Err(refused) => return refused.into_response(),
    };
    if let Some(check) = query.get("check") {
        all.retain(|incident| &incident.check == check);
    }
    match with_updates(&state, all).await {
        Ok(listed) => Json(serde_json::json!({ "incidents": listed })).into_response(),
        Err(refused) => refused.into_response(),
    }
}

/// `GET /api/v1/incidents/{key}/updates`: the incident and its updates.
pub(super) async fn updates(State(state): State<ApiState>, Path(key): Path<String>) -> Response {
    let all = match incidents(&state).await {
        Ok(all) => all,
        Err(refused) => return refused.into_response(),
    };
    let Some(incident) = known::find(&all, &key) else {
        return unknown(&key).into_response();
    };
    match with_updates(&state, vec![incident.clone()]).await {
        Ok(mut one) => Json(one.remove(0)).into_response(),
        Err(refused) => refused.into_response(),
    }
}

async fn with_updates(
    state: &ApiState,
    incidents: Vec<KnownIncident>,
) -> Result<Vec<IncidentWithUpdates>, Refused> {
    let updates = kept_updates(state)?;
    tokio::task::spawn_blocking(move || {
        incidents
            .into_iter()
            .map(|incident| {
                let updates = updates.of_incident(&incident.check, incident.since)?;
                Ok(IncidentWithUpdates { incident, updates })
            })
            .collect::<Result<Vec<_>, StoreError>>()
    })
    .await
    .map_err(|_| Refused::new(StatusCode::INTERNAL_SERVER_ERROR, PANICKED))?
    .map_err(store_failed)
}

/// `POST /api/v1/incidents/{key}/updates` body.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    /// `investigating` (the default), `identified`, `monitoring` or
    /// `resolved`.
    #[serde(default)]
    pub state: Option<String>,
    /// Markdown.
    pub text: String,
}

/// `POST /api/v1/incidents/{key}/updates`: 201 with the update as kept.
pub(super) async fn add(
    State(state): State<ApiState>,
    Path(key): Path<String>,
    request: Request,
) -> Response {
    // Who asks is settled before the body is read.
    if let Some(refused) = auth::refuse_change(&state, &request, "incident updates") {
        return refused;
    }
    let what = "POST /api/v1/incidents/{key}/updates";
    let shape = r#"an incident update ({"state": "identified", "text": "Markdown"})"#;
    let body: UpdateRequest = match json_body(request, body::UPDATE_LIMIT, what, shape).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let update_state = match body.state.as_deref().map(str::parse).transpose() {
        Ok(parsed) => parsed.unwrap_or_default(),
        Err(why) => return error(StatusCode::BAD_REQUEST, &format!("state: {why}")),
    };
    match add_update(&state, &key, update_state, &body.text).await {
        Ok(kept) => (StatusCode::CREATED, Json(kept)).into_response(),
        Err(refused) => refused.into_response(),
    }
}

fn kept_updates(state: &ApiState) -> Result<IncidentUpdates, Refused> {
    state.updates.clone().ok_or_else(|| {
        Refused::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this daemon keeps no incident updates (it was started without its alert store)",
        )
    })
}

/// The 404 of a key no incident has, saying where keys are listed.
fn unknown(key: &str) -> Refused {
    let example = IncidentId::new("site", time::macros::datetime!(2026-11-29 07:00:30 UTC));
    Refused::new(
        StatusCode::NOT_FOUND,
        format!(
            "no open or recent incident has the key {key:?}: keys look like {example}; \
             `vigie incident list` or GET /api/v1/incidents lists them (incidents of the last week, \
             and older ones that have updates)"
        ),
    )
}

fn store_failed(err: StoreError) -> Refused {
    tracing::error!(error = %err, "incident updates: the store failed");
    Refused::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the store cannot be read or written: {err}; see vigie's log"),
    )
}

const PANICKED: &str = "reading the store panicked; see vigie's log";
