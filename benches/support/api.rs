//! The daemon's API router over a given store, as the page benches drive
//! it: no alerter, mail, replication or token.

use std::sync::Arc;

use vigie::api::{ApiState, ServerStats, Token};
use vigie::clock::Clock;
use vigie::config::Config;
use vigie::health::Health;
use vigie::scheduler::Slots;
use vigie::store::{Latest, Store};

pub fn router(
    store: Arc<dyn Store>,
    latest: Latest,
    config: Config,
    clock: Arc<dyn Clock>,
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
    })
}
