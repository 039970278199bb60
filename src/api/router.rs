//! Which path goes where, and the two gates in front: the host check
//! (outermost: a request naming another host reaches nothing) and the
//! token, which every route but `/healthz`, the pages' own and the public
//! status page needs.

use axum::middleware;
use axum::routing::{delete, get};
use axum::Router;

use super::{
    alerts, auth, checks, health, history, host, incidents, metrics, pages, status, ApiState,
};

/// The API's router over `state`.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::metrics))
        .route("/api/v1/checks", get(checks::checks))
        .route("/api/v1/history/{name}", get(history::history))
        .route("/api/v1/report", get(alerts::report))
        .route(
            "/api/v1/silences",
            get(alerts::silences).post(alerts::add_silence),
        )
        .route("/api/v1/silences/{pattern}", delete(alerts::remove_silence))
        .route("/api/v1/incidents", get(incidents::list))
        .route(
            "/api/v1/incidents/{key}/updates",
            get(incidents::updates).post(incidents::add),
        )
        .route("/api/v1/uptime/{name}", get(pages::uptime_json))
        .route("/api/v1/certificates/{name}", get(pages::certificates_json))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .merge(pages::router(state.clone()))
        // Public when `[status_page] public = true`, 404 otherwise: no token.
        .merge(status::router())
        // Outermost: a request naming another host reaches nothing.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            host::require_known_host,
        ))
        .with_state(state)
}
