//! `GET /metrics`: the registry of every metrics source, each written
//! through the one exposition writer ([`crate::metrics`]).
//!
//! The registry is [`write_sources`]: which module is asked, in which
//! order. Each source declares its own families next to the counters it
//! reads (`probes.rs` and `daemon.rs` here; replication, heartbeat,
//! vantages, mail, alerts and the listener in their own modules), so a
//! metric is named, typed and explained in exactly one place.

mod daemon;
mod probes;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use time::OffsetDateTime;

use super::ApiState;
use crate::outcome::Outcome;
use crate::scheduler::Slot;
use probes::ProbeFamily;

/// Checks per chunk of the streamed `/metrics` body.
const METRICS_CHUNK: usize = 256;

pub(super) async fn metrics(State(state): State<ApiState>) -> Response {
    let slots = state.slots.snapshot();
    let latest: Arc<[Arc<Outcome>]> = slots
        .keys()
        .filter_map(|name| state.latest.get(name))
        .collect();
    let now = state.clock.now();
    // Streamed a few hundred checks at a time: at 10,000 checks the whole
    // body is ~15 MiB, which would otherwise be held (and grown) in memory
    // on every scrape.
    let probe_chunks = ProbeFamily::ALL.into_iter().flat_map(move |family| {
        let latest = latest.clone();
        let chunks = latest.len().div_ceil(METRICS_CHUNK).max(1);
        (0..chunks).map(move |chunk| {
            let from = (chunk * METRICS_CHUNK).min(latest.len());
            let to = (from + METRICS_CHUNK).min(latest.len());
            let mut text = String::with_capacity(256 + (to - from) * 256);
            family.write(&mut text, &latest[from..to], chunk == 0);
            text
        })
    });
    let daemon_chunk = std::iter::once_with(move || {
        let mut text = String::new();
        write_sources(&mut text, &state, &slots, now);
        text
    });
    let chunks = probe_chunks
        .chain(daemon_chunk)
        .map(Ok::<_, std::convert::Infallible>);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        axum::body::Body::from_stream(futures_util::stream::iter(chunks)),
    )
        .into_response()
}

/// Every source after the per-check families, in the order they are
/// written.
fn write_sources(
    m: &mut String,
    state: &ApiState,
    slots: &BTreeMap<String, Arc<Slot>>,
    now: OffsetDateTime,
) {
    daemon::write_scheduler(m, &state.health, slots, now);
    daemon::write_health(m, &state.health, now);
    if let Some(replication) = &state.replication {
        replication.snapshot(now).write_metrics(m);
    }
    if let Some(heartbeat) = &state.heartbeat {
        heartbeat.write_metrics(m);
    }
    if let Some(vantage) = &state.vantage {
        vantage.snapshot().write_metrics(m);
    }
    if let Some(mail) = &state.mail {
        mail.snapshot().write_metrics(m, now);
    }
    if let Some(push) = &state.push {
        push.write_metrics(m);
    }
    if let Some(alerts) = &state.alerts {
        alerts.status.write_metrics(m);
    }
    state.server.snapshot().write_metrics(m);
    if state.config.borrow().status_page.public {
        state.status.write_metrics(m);
    }
    daemon::write_build(m);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::testing::{down, golden, up, with_leaf, T0};
    use crate::alert::{AlertStatus, Alerts};
    use crate::api::{ServerStats, Token};
    use crate::clock::Clock;
    use crate::health::Health;
    use crate::heartbeat::HeartbeatStats;
    use crate::mail::MailStats;
    use crate::outcome::Assertion;
    use crate::replicate::ReplicationSnapshot;
    use crate::scheduler::Slots;
    use crate::store::Latest;

    #[test]
    fn the_exposition_is_written_as_it_always_was() {
        let outcomes = [
            up("site", T0),
            with_leaf("api", T0, |leaf| leaf.subject = "CN=\"api\"".into()),
            down("bucket", T0, Assertion::HttpStatus),
        ];
        let outcomes = outcomes.map(Arc::new);
        let mut m = String::new();
        for family in ProbeFamily::ALL {
            family.write(&mut m, &outcomes, true);
        }
        let stages = Arc::new(crate::supervise::Stages::default());
        stages.register(
            "recorder",
            crate::supervise::Progress::Every(std::time::Duration::from_secs(60)),
        );
        stages.register(
            "alerter",
            crate::supervise::Progress::Every(std::time::Duration::from_secs(60)),
        );
        let clock: Arc<dyn Clock> = Arc::new(crate::clock::FakeClock::new(T0));
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("config.toml");
        std::fs::create_dir_all(dir.path().join("checks")).unwrap();
        std::fs::write(
            dir.path().join("checks/site.toml"),
            "[[check]]\nname = \"site\"\nkind = \"http\"\nurl = \"https://example.com/\"\n",
        )
        .unwrap();
        std::fs::write(
            &config_path,
            "state_dir = \"state\"\n[alerting]\nto = [\"oncall@example.com\"]\n",
        )
        .unwrap();
        let loaded = crate::config::load(&config_path).unwrap();
        let (_config_tx, config) = tokio::sync::watch::channel(Arc::new(loaded));
        let mail = Arc::new(MailStats::default());
        mail.add_backlog(3);
        let (requests, _alerter) = tokio::sync::mpsc::channel(1);
        let status = Arc::new(AlertStatus::default());
        status.set_firing(2);
        status.set_blind(true);
        let push = Arc::new(crate::push::PushStats::default());
        push.configured([("phone", "ntfy")]);
        push.sent("phone", "ntfy", T0);
        push.set_backlog("phone", "ntfy", 2);
        push.given_up("phone", "ntfy", "ntfy phone answered 401 Unauthorized");
        push.set_dead("phone", "ntfy", 1);
        let state = ApiState {
            store: Arc::new(crate::store::MemoryStore::default()),
            latest: Latest::default(),
            slots: Slots::default(),
            health: Arc::new(Health::new(T0, stages)),
            clock,
            token: Token::default(),
            replication: None,
            heartbeat: Some(Arc::new(HeartbeatStats::default())),
            mail: Some(mail),
            alerts: Some(Alerts { status, requests }),
            server: Arc::new(ServerStats::default()),
            config,
            vantage: Some(Arc::new(crate::vantage::VantageStats::default())),
            push: Some(push),
            told: None,
            updates: None,
            status: Default::default(),
        };
        write_sources(&mut m, &state, &state.slots.snapshot(), T0);
        let replication = ReplicationSnapshot {
            status: crate::replicate::ReplicationState::Behind,
            lag_seconds: 12.5,
            lag_results: 4,
            last_success: Some(T0),
            consecutive_failures: 1,
            failures_total: 2,
            segments_total: 3,
            results_total: 40,
            bytes_total: 4096,
            last_error: None,
        };
        replication.write_metrics(&mut m);
        golden("metrics/exposition.txt", &m);
    }
}
