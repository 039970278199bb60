//! `GET /healthz`: the health verdict (its code and what degrades vigie),
//! with replication and the outbox beside it. Names no target, bucket or
//! endpoint, so it is the one endpoint open without the token.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use time::OffsetDateTime;

use super::ApiState;
use crate::health::Verdict;
use crate::replicate::ReplicationSnapshot;

/// What `/healthz` answers: the health verdict decides the code and lists
/// what degrades vigie; replication and the outbox are detailed beside
/// it. Names no target, bucket or endpoint.
#[derive(Serialize)]
struct Healthz {
    #[serde(flatten)]
    verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    replication: Option<ReplicationSnapshot>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outbox: Option<OutboxHealth>,
}

/// The outbox in `/healthz`: counts only, never a subject or an address.
#[derive(Serialize)]
struct OutboxHealth {
    backlog: u64,
    #[serde(with = "time::serde::rfc3339::option")]
    oldest_pending: Option<OffsetDateTime>,
    dead_letters: u64,
    failing: bool,
}

pub(super) async fn healthz(State(state): State<ApiState>) -> Response {
    let now = state.clock.now();
    let verdict = state.health.verdict(now);
    let code = match verdict.is_healthy() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    let replication = state.replication.as_ref().map(|r| r.snapshot(now));
    let mail = state.mail.as_ref().map(|m| m.snapshot());
    let body = Healthz {
        verdict,
        replication,
        outbox: mail.map(|m| OutboxHealth {
            backlog: m.backlog,
            oldest_pending: m.oldest_pending,
            dead_letters: m.dead_letters,
            failing: m.failing,
        }),
    };
    (code, Json(body)).into_response()
}
