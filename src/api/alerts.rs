//! The endpoints the alerter answers: `GET /api/v1/report` and
//! `/api/v1/silences` (list, add, remove). The API asks over the alerter's
//! request channel ([`AlertRequest`]) and waits; it keeps no alert state.
//! Adding or removing a silence changes who is woken up, so it needs the
//! token (or the local socket) even on loopback.

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::reply::{error, refused_body};
use super::{auth, body, ApiState};
use crate::alert::{AlertRequest, Silence};

/// What the API says when the alerter does not answer.
pub(super) const ALERTING_GONE: &str = "alerting is not running (the daemon is stopping?)";

/// Asks the alerter; `None` when it is gone (the daemon is stopping).
pub(super) async fn ask<T>(
    state: &ApiState,
    request: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> AlertRequest,
) -> Result<T, Response> {
    let unavailable = || error(StatusCode::SERVICE_UNAVAILABLE, ALERTING_GONE);
    let alerts = state.alerts.as_ref().ok_or_else(unavailable)?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    alerts
        .requests
        .send(request(reply))
        .await
        .map_err(|_| unavailable())?;
    answer.await.map_err(|_| unavailable())
}

/// `GET /api/v1/report`: the daily certificate report, built now.
pub(super) async fn report(State(state): State<ApiState>) -> Response {
    match ask(&state, AlertRequest::Report).await {
        Ok(report) => Json(report).into_response(),
        Err(response) => response,
    }
}

pub(super) async fn silences(State(state): State<ApiState>) -> Response {
    match ask(&state, AlertRequest::Silences).await {
        Ok(silences) => Json(serde_json::json!({ "silences": silences })).into_response(),
        Err(response) => response,
    }
}

/// `POST /api/v1/silences` body.
#[derive(Serialize, Deserialize)]
pub struct SilenceRequest {
    pub pattern: String,
    /// humantime, e.g. "8h".
    #[serde(rename = "for")]
    pub duration: String,
    #[serde(default)]
    pub reason: String,
}

/// Silencing changes who is woken up: over TCP it needs the token even on
/// loopback, where any local user could otherwise mute the pager.
fn refuse_mutation(state: &ApiState, request: &Request) -> Option<Response> {
    auth::refuse_change(state, request, "silences")
}

pub(super) async fn add_silence(State(state): State<ApiState>, request: Request) -> Response {
    // Who asks is settled before the body is read: the token by
    // `require_token`, its presence here.
    if let Some(refused) = refuse_mutation(&state, &request) {
        return refused;
    }
    let what = "POST /api/v1/silences";
    let bytes = match body::read(request.into_body(), body::SILENCE_LIMIT, what).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused_body(refused),
    };
    let body: SilenceRequest = match serde_json::from_slice(&bytes) {
        Ok(body) => body,
        Err(err) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the body is not a silence ({{\"pattern\", \"for\", \"reason\"}}): {err}"),
            )
        }
    };
    let duration = match humantime::parse_duration(&body.duration) {
        Ok(d) => d,
        Err(err) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("for: {err} (a duration such as \"8h\")"),
            )
        }
    };
    if body.pattern.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "pattern: must not be empty");
    }
    // Zero and more than MAX_SILENCE are refused here.
    let silence = match Silence::new(&body.pattern, duration, &body.reason, state.clock.now()) {
        Ok(silence) => silence,
        Err(err) => {
            let key = match err {
                crate::alert::SilenceError::ReasonTooLong(_) => "reason",
                crate::alert::SilenceError::PatternTooLong(_) => "pattern",
                _ => "for",
            };
            return error(StatusCode::BAD_REQUEST, &format!("{key}: {err}"));
        }
    };
    let stored = silence.clone();
    match ask(&state, |reply| AlertRequest::AddSilence(silence, reply)).await {
        Ok(Ok(())) => (StatusCode::CREATED, Json(stored)).into_response(),
        Ok(Err(message)) => error(StatusCode::INTERNAL_SERVER_ERROR, &message),
        Err(response) => response,
    }
}

pub(super) async fn remove_silence(
    State(state): State<ApiState>,
    Path(pattern): Path<String>,
    request: Request,
) -> Response {
    if let Some(refused) = refuse_mutation(&state, &request) {
        return refused;
    }
    match ask(&state, |reply| {
        AlertRequest::RemoveSilence(pattern.clone(), reply)
    })
    .await
    {
        Ok(Ok(true)) => Json(serde_json::json!({ "removed": pattern })).into_response(),
        Ok(Ok(false)) => error(
            StatusCode::NOT_FOUND,
            &format!("no silence with the pattern {pattern:?}"),
        ),
        Ok(Err(message)) => error(StatusCode::INTERNAL_SERVER_ERROR, &message),
        Err(response) => response,
    }
}
