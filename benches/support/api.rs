//! The daemon's API router over a given store, as the page benches drive
//! it: no alerter, mail, replication or token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use http_body_util::BodyExt;
use tower::ServiceExt;

use vigie::api::{ApiState, ServerStats, Token};
use vigie::clock::Clock;
use vigie::config::Config;
use vigie::health::Health;
use vigie::scheduler::Slots;
use vigie::store::{Latest, Store};

/// The config the page benches load: `checks` as `dir/checks/all.toml`,
/// the state under `dir/state`, someone to page (vigie refuses a config
/// that pages nobody).
pub fn config_with(dir: &std::path::Path, checks: &str) -> Config {
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    std::fs::write(dir.join("checks/all.toml"), checks).unwrap();
    let config_path = dir.join("config.toml");
    std::fs::write(
        &config_path,
        "state_dir = \"state\"\n[alerting]\nto = [\"oncall@example.com\"]\n",
    )
    .unwrap();
    vigie::config::load(&config_path).expect("the bench config loads")
}

pub fn router(
    store: Arc<dyn Store>,
    latest: Latest,
    config: Config,
    clock: Arc<dyn Clock>,
    status: Arc<vigie::api::StatusCache>,
) -> axum::Router {
    let now = clock.now();
    // The sender is dropped: the config never changes.
    let (_config_tx, config_rx) = tokio::sync::watch::channel(Arc::new(config));
    vigie::api::router(ApiState {
        store,
        latest,
        slots: Slots::default(),
        health: Arc::new(Health::new(now, Arc::default())),
        clock,
        token: Token::default(),
        replication: None,
        heartbeat: None,
        mail: None,
        alerts: None,
        server: Arc::new(ServerStats::default()),
        config: config_rx,
        vantage: None,
        push: None,
        told: None,
        updates: None,
        status,
    })
}

/// One GET through `router`: the body, and the time until it was read
/// whole. Panics unless the answer is a success.
pub async fn get(router: &axum::Router, path: &str) -> (Duration, Bytes) {
    let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
    let started = Instant::now();
    let response = router.clone().oneshot(request).await.expect("an answer");
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (started.elapsed(), body)
}
