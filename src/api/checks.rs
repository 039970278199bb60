//! `GET /api/v1/checks`: every configured check with its schedule and its
//! latest stored outcome.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use time::OffsetDateTime;

use super::ApiState;
use crate::outcome::Outcome;

/// One configured check: its schedule and its latest stored outcome.
#[derive(Serialize)]
struct CheckView {
    name: String,
    interval_seconds: f64,
    #[serde(with = "time::serde::rfc3339::option")]
    next_due: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    last_started: Option<OffsetDateTime>,
    latest: Option<Outcome>,
}

pub(super) async fn checks(State(state): State<ApiState>) -> Response {
    let views: Vec<CheckView> = state
        .slots
        .snapshot()
        .into_iter()
        .map(|(name, slot)| CheckView {
            latest: state.latest.get(&name).map(|o| (*o).clone()),
            name,
            interval_seconds: slot.interval().as_secs_f64(),
            next_due: slot.next_due(),
            last_started: slot.last_started(),
        })
        .collect();
    Json(serde_json::json!({ "checks": views })).into_response()
}
