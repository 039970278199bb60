//! Builds the running parts from a [`Config`] and runs them.
//!
//! For now that is `vigie check`: build the client once (trust stores, CA
//! files), probe the selected checks concurrently under the `concurrency`
//! bound, judge each outcome, return them in config order.

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use crate::check::Check;
use crate::clock::Clock;
use crate::config::Config;
use crate::evaluate::evaluate;
use crate::outcome::Outcome;
use crate::probe::client::{Client, ClientError};
use crate::probe::Prober;

/// Builds the prober for a config: reads the CA files once.
pub fn prober(config: &Config, clock: Arc<dyn Clock>) -> Result<Prober, ClientError> {
    let client = Client::new(config.extra_ca_file.as_deref(), &config.checks, clock)?;
    Ok(Prober::new(client))
}

/// Probes and judges one check.
pub async fn run_check(prober: &Prober, clock: &dyn Clock, check: &Check) -> Outcome {
    let mut outcome = prober.probe(check).await;
    evaluate(check, &mut outcome, clock.now());
    outcome
}

/// Probes `checks` now, at most `concurrency` at a time; outcomes come back
/// in the order of `checks`.
pub async fn check_now(
    prober: &Prober,
    clock: &dyn Clock,
    checks: &[&Check],
    concurrency: usize,
) -> Vec<Outcome> {
    stream::iter(checks)
        .map(|check| run_check(prober, clock, check))
        .buffered(concurrency.max(1))
        .collect()
        .await
}

/// What the daemon is told from outside (signals, tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: reload config and checks; keep the old ones if invalid.
    Reload,
    /// SIGTERM/SIGINT: finish in-flight probes, flush, exit.
    Shutdown,
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot create state_dir {path}: {source}")]
    StateDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr} ([api] listen): {source}")]
    ApiListen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read [api] token_file {path}: {source}")]
    TokenFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("[replication]: {0}")]
    Replication(#[from] crate::replicate::ReplicateError),
    #[error(transparent)]
    Heartbeat(#[from] crate::heartbeat::HeartbeatError),
    #[error(transparent)]
    Mail(#[from] crate::mail::MailError),
    #[error(transparent)]
    Alerting(#[from] crate::alerting::AlertingError),
}

/// sled flushes this often in the background: the most an unclean stop
/// (kill -9, power loss) can lose.
pub const STORE_FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(1000);

/// How often retention is enforced.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// The store under `state_dir`.
pub fn history_path(config: &Config) -> std::path::PathBuf {
    config.state_dir.join("history")
}

/// `vigie run`: the daemon, until told to shut down.
pub async fn run(
    config_path: &std::path::Path,
    config: Config,
    clock: Arc<dyn Clock>,
    mut control: tokio::sync::mpsc::Receiver<Control>,
) -> Result<(), RunError> {
    use crate::health::{Health, Late, TICK};
    use crate::scheduler::{self, Slots};
    use crate::store::{SledStore, Store};

    // One copy, shared with the alerter (10,000 checks are megabytes).
    let config = Arc::new(config);
    std::fs::create_dir_all(&config.state_dir).map_err(|source| RunError::StateDir {
        path: config.state_dir.clone(),
        source,
    })?;
    let sled = Arc::new(SledStore::open(&history_path(&config), STORE_FLUSH_EVERY)?);
    let store: Arc<dyn Store> = sled.clone();
    let health = Arc::new(Health::new(clock.now()));
    // Before the scheduler appends anything, so that no result escapes the
    // replication queue.
    let replicator = match &config.replication {
        Some(r) => Some(crate::replicate::Replicator::new(
            &crate::replicate::BucketSettings::from_config(r, config.extra_ca_file.as_deref()),
            r.interval,
            sled.clone(),
            clock.clone(),
        )?),
        None => None,
    };
    let replication = replicator.as_ref().map(|r| r.status());
    let heartbeat = match &config.heartbeat {
        Some(h) => Some(crate::heartbeat::Heartbeat::new(
            h,
            config.extra_ca_file.as_deref(),
            clock.clone(),
        )?),
        None => None,
    };
    let slots = Slots::default();
    let latest = crate::scheduler::Latest::default();
    for outcome in store.latest_all()? {
        latest.record(Arc::new(outcome));
    }
    let shutdown = tokio_util::sync::CancellationToken::new();
    let tasks = tokio_util::task::TaskTracker::new();
    // Mail, the alerter and replication outlive the other tasks: the last
    // results the recorder stores must still be judged, mailed and shipped.
    let late_stop = tokio_util::sync::CancellationToken::new();
    let started = clock.now();

    let outbox = Arc::new(crate::mail::Outbox::open(sled.db(), sled.path())?);
    let alert_store = crate::alerting::AlertStore::open(sled.db(), sled.path())?;
    let (sender, sender_handle) = crate::mail::Sender::new(
        outbox.clone(),
        crate::mail::Delivery::from_config(&config)?,
        clock.clone(),
        crate::mail::Backoff::DEFAULT,
    );
    let sender_task = tokio::spawn(sender.run(late_stop.clone()));
    let (alert_config, alert_config_rx) = tokio::sync::watch::channel(config.clone());
    let host = crate::mail::hostname();
    let engine = crate::alert::Engine::new(
        &host,
        config.alerting.group_window,
        alert_store.states()?,
        clock.now(),
        |check| crate::alerting::policy_of(&config, check),
    );
    let (round_tx, rounds) = tokio::sync::mpsc::channel(4);
    let canary_now = match config.connectivity.canaries.is_empty() {
        true => None,
        false => {
            let now = Arc::new(tokio::sync::Notify::new());
            tasks.spawn(crate::alerting::canary_rounds(
                prober(&config, clock.clone())?,
                crate::alerting::canary_checks(&config),
                clock.clone(),
                now.clone(),
                round_tx,
                shutdown.clone(),
            ));
            Some(now)
        }
    };
    let alert_status = Arc::new(crate::alerting::AlertStatus::default());
    let (alert_requests, requests) = tokio::sync::mpsc::channel(16);
    let (alert_tx, alert_rx) = tokio::sync::mpsc::channel::<Arc<Outcome>>(1024);
    let report_health: crate::alerting::HealthSource = {
        let outbox = outbox.clone();
        let replication = replication.clone();
        Arc::new(move |now| crate::alert::report::Health {
            uptime: (now - started).try_into().ok(),
            outbox_backlog: Some(outbox.stats().snapshot().backlog),
            dead_letters: Some(crate::alerting::dead_letters(&outbox)),
            replication_lag: replication
                .as_ref()
                .map(|r| std::time::Duration::from_secs_f64(r.snapshot(now).lag_seconds)),
        })
    };
    let alerter = crate::alerting::Alerter {
        engine,
        store: alert_store,
        outbox: outbox.clone(),
        config: alert_config_rx,
        clock: clock.clone(),
        host,
        latest: latest.clone(),
        health: report_health,
        canary_now,
        status: alert_status.clone(),
    };
    let alerter_task = tokio::spawn(alerter.run(alert_rx, rounds, requests));

    let token = crate::api::Token::default();
    token.set(api_token(&config)?);
    let listener = tokio::net::TcpListener::bind(config.api.listen)
        .await
        .map_err(|source| RunError::ApiListen {
            addr: config.api.listen,
            source,
        })?;
    let api = crate::api::router(crate::api::ApiState {
        store: store.clone(),
        latest: latest.clone(),
        slots: slots.clone(),
        health: health.clone(),
        clock: clock.clone(),
        token: token.clone(),
        replication: replication.clone(),
        heartbeat: heartbeat.as_ref().map(|h| h.stats()),
        mail: Some(outbox.stats()),
        alerts: Some(crate::api::Alerts {
            status: alert_status.clone(),
            requests: alert_requests,
        }),
    });
    let api_shutdown = shutdown.clone();
    tasks.spawn(async move {
        let served = axum::serve(listener, api)
            .with_graceful_shutdown(api_shutdown.cancelled_owned())
            .await;
        if let Err(err) = served {
            tracing::error!(error = %err, "API server failed");
        }
    });

    let (sink, mut outcomes) = tokio::sync::mpsc::channel::<Outcome>(1024);
    let recorder_store = store.clone();
    let recorder_health = health.clone();
    let recorder_latest = latest.clone();
    let recorder = tokio::spawn(async move {
        while let Some(mut outcome) = outcomes.recv().await {
            // Headers and body served evaluation only; what is kept from
            // here on (stored, cached for the API, alerted on) never shows
            // them, and 10,000 checks' worth is megabytes.
            if let Some(http) = outcome.http.as_mut() {
                http.headers = Vec::new();
                http.body = Vec::new();
            }
            match recorder_store.append(&outcome) {
                Ok(()) => recorder_health.recorded(),
                Err(err) => {
                    recorder_health.store_error();
                    tracing::error!(check = %outcome.name, error = %err, "cannot store result");
                }
            }
            let outcome = Arc::new(outcome);
            recorder_latest.record(outcome.clone());
            if alert_tx.send(outcome).await.is_err() {
                tracing::error!("the alerter stopped; outcomes are stored but not alerted on");
            }
        }
    });

    let replication_task = replicator.map(|r| tokio::spawn(r.run(late_stop.clone())));
    if let Some(heartbeat) = heartbeat {
        let health = health.clone();
        let replication = replication.clone();
        let mail = outbox.stats();
        let alerts = alert_status.clone();
        let clock = clock.clone();
        let signal = move || {
            let now = clock.now();
            let replication = replication.as_ref().map(|r| r.snapshot(now));
            match crate::heartbeat::signal(&health.verdict(now), replication.as_ref()) {
                crate::heartbeat::Signal::Alive => {
                    match crate::api::mail_and_alert_degradations(&mail.snapshot(), &alerts).first()
                    {
                        Some(reason) => crate::heartbeat::Signal::Degraded(reason.clone()),
                        None => crate::heartbeat::Signal::Alive,
                    }
                }
                other => other,
            }
        };
        tasks.spawn(heartbeat.run(signal, shutdown.clone()));
    }

    let mut config = config;
    let mut generation = scheduler::spawn(
        plan(&config, clock.clone())?,
        clock.clone(),
        sink.clone(),
        &slots,
        &shutdown,
    );
    crate::notify::ready();
    tracing::info!(checks = config.checks.len(), listen = %config.api.listen, "vigie running");

    let supervisor_health = health.clone();
    let supervisor_slots = slots.clone();
    let supervisor_clock = clock.clone();
    let supervisor_store = store.clone();
    let supervisor_shutdown = shutdown.clone();
    let mut retention = config.history.retention;
    let (retention_tx, mut retention_rx) = tokio::sync::watch::channel(retention);
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        let mut last_sweep: Option<tokio::time::Instant> = None;
        let mut recorded_before = supervisor_health.recorded_count();
        loop {
            tokio::select! {
                _ = supervisor_shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if retention_rx.has_changed().unwrap_or(false) {
                retention = *retention_rx.borrow_and_update();
            }
            let now = supervisor_clock.now();
            let late = supervisor_slots.late(now, LATE_FLOOR);
            let worst = late
                .iter()
                .max_by_key(|(_, by)| *by)
                .map(|(check, by)| Late {
                    check: check.clone(),
                    by: *by,
                });
            let recorded = supervisor_health.recorded_count();
            let progressing = late.is_empty() || recorded > recorded_before;
            recorded_before = recorded;
            supervisor_health.tick(now, worst, late.len() as u64);
            if progressing {
                crate::notify::watchdog();
            }
            if last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
                last_sweep = Some(tokio::time::Instant::now());
                sweep(&supervisor_store, now, retention).await;
            }
        }
    });

    while let Some(command) = control.recv().await {
        match command {
            Control::Shutdown => break,
            Control::Reload => {
                crate::notify::reloading();
                match reload(config_path, &config, clock.clone()) {
                    Ok(Reloaded {
                        config: fresh,
                        plan,
                        token: fresh_token,
                        delivery,
                    }) => {
                        let fresh = Arc::new(fresh);
                        token.set(fresh_token);
                        sender_handle.reconfigure(delivery);
                        alert_config.send_replace(fresh.clone());
                        let old = std::mem::replace(
                            &mut generation,
                            scheduler::spawn(plan, clock.clone(), sink.clone(), &slots, &shutdown),
                        );
                        tasks.spawn(old.stop());
                        let _ = retention_tx.send(fresh.history.retention);
                        let names: std::collections::HashSet<&str> =
                            fresh.checks.iter().map(|c| c.name.as_str()).collect();
                        latest.retain(|name| names.contains(name));
                        health.reloaded(true, clock.now());
                        tracing::info!(checks = fresh.checks.len(), "config reloaded");
                        config = fresh;
                    }
                    Err(errors) => {
                        health.reloaded(false, clock.now());
                        for line in errors.lines() {
                            tracing::error!("{line}");
                        }
                        tracing::error!(
                            "config reload rejected; the previous config keeps running"
                        );
                    }
                }
                crate::notify::ready();
            }
        }
    }

    crate::notify::stopping();
    tracing::info!("stopping: finishing in-flight probes");
    generation.stop().await;
    shutdown.cancel();
    tasks.close();
    tasks.wait().await;
    drop(sink);
    let _ = recorder.await;
    let _ = alerter_task.await;
    late_stop.cancel();
    let _ = sender_task.await;
    if let Some(task) = replication_task {
        let _ = task.await;
    }
    store.flush()?;
    tracing::info!("stopped; store flushed");
    Ok(())
}

/// A check waiting past its due time by less than this is not "late",
/// whatever its interval: a busy second is not an incident.
const LATE_FLOOR: std::time::Duration = std::time::Duration::from_secs(5);

type Plan = crate::scheduler::Plan<crate::scheduler::ProbeRunner>;

fn plan(config: &Config, clock: Arc<dyn Clock>) -> Result<Plan, ClientError> {
    Ok(crate::scheduler::Plan {
        // Shared with the config, not copied: 10,000 checks are megabytes.
        checks: config.checks.clone(),
        runner: crate::scheduler::ProbeRunner {
            prober: prober(config, clock.clone())?,
            clock,
        },
        concurrency: config.concurrency,
    })
}

/// A new config and what was built from it, ready to swap in.
struct Reloaded {
    config: Config,
    plan: Plan,
    token: Option<Arc<str>>,
    delivery: crate::mail::Delivery,
}

/// Loads and prepares a new config; any problem is reported as text lines
/// and the caller keeps the old one.
fn reload(path: &std::path::Path, old: &Config, clock: Arc<dyn Clock>) -> Result<Reloaded, String> {
    let fresh = crate::config::load(path).map_err(|errors| errors.to_string())?;
    let plan = plan(&fresh, clock).map_err(|err| err.to_string())?;
    let token = api_token(&fresh).map_err(|err| err.to_string())?;
    let delivery = crate::mail::Delivery::from_config(&fresh).map_err(|err| err.to_string())?;
    if fresh.api.listen != old.api.listen || fresh.state_dir != old.state_dir {
        tracing::warn!("[api] listen and state_dir changes take effect at the next restart");
    }
    if fresh.replication != old.replication
        || fresh.heartbeat != old.heartbeat
        || fresh.connectivity != old.connectivity
    {
        tracing::warn!(
            "[replication], [heartbeat] and [connectivity] changes take effect at the next restart"
        );
    }
    Ok(Reloaded {
        config: fresh,
        plan,
        token,
        delivery,
    })
}

pub(crate) fn api_token(config: &Config) -> Result<Option<Arc<str>>, RunError> {
    let Some(path) = &config.api.token_file else {
        return Ok(None);
    };
    let token = std::fs::read_to_string(path).map_err(|source| RunError::TokenFile {
        path: path.clone(),
        source,
    })?;
    let token = token.trim();
    if token.is_empty() {
        return Err(RunError::TokenFile {
            path: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "the file is empty"),
        });
    }
    Ok(Some(Arc::from(token)))
}

async fn sweep(
    store: &Arc<dyn crate::store::Store>,
    now: time::OffsetDateTime,
    retention: std::time::Duration,
) {
    let store = store.clone();
    let before = now - retention;
    match tokio::task::spawn_blocking(move || store.sweep(before)).await {
        Ok(Ok(0)) => {}
        Ok(Ok(removed)) => tracing::info!(removed, "retention sweep"),
        Ok(Err(err)) => tracing::error!(error = %err, "retention sweep failed"),
        Err(err) => tracing::error!(error = %err, "retention sweep panicked"),
    }
}

/// Why a command could not get its answer from the running daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("the daemon at {addr} answered: {message}")]
    Api {
        addr: std::net::SocketAddr,
        message: String,
    },
    #[error("cannot reach the daemon at {addr}: {source}")]
    Unreachable {
        addr: std::net::SocketAddr,
        source: reqwest::Error,
    },
}

/// Asks the running daemon's API (`path` as segments, each encoded; the
/// configured token sent): `Ok(None)` when no daemon listens, so that the
/// command opens the store itself (sled allows one process per database).
pub async fn ask_daemon(
    config: &Config,
    method: reqwest::Method,
    path: &[&str],
    query: &[(&str, &str)],
    body: Option<serde_json::Value>,
) -> Result<Option<serde_json::Value>, DaemonError> {
    let addr = config.api.listen;
    let unreachable = |source| DaemonError::Unreachable { addr, source };
    let client = crate::probe::client::api_client().map_err(unreachable)?;
    let mut url =
        url::Url::parse(&format!("http://{addr}/")).expect("a socket address makes a URL");
    url.path_segments_mut()
        .expect("http URLs have a path")
        .pop_if_empty()
        .extend(path);
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    let mut request = client.request(method, url);
    if let Ok(Some(token)) = api_token(config) {
        request = request.bearer_auth(&*token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) if err.is_connect() => return Ok(None),
        Err(err) => return Err(unreachable(err)),
    };
    let status = response.status();
    if !status.is_success() {
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        let message = body["error"]
            .as_str()
            .unwrap_or(status.as_str())
            .to_string();
        return Err(DaemonError::Api { addr, message });
    }
    response.json().await.map(Some).map_err(unreachable)
}

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
) -> Result<crate::api::HistoryView, HistoryError> {
    let since = humantime::format_duration(window).to_string();
    let path = ["api", "v1", "history", name];
    let query = [("since", since.as_str())];
    if let Some(view) = ask_daemon(config, reqwest::Method::GET, &path, &query, None).await? {
        return serde_json::from_value(view).map_err(HistoryError::Answer);
    }
    let path = history_path(config);
    if !path.exists() {
        return Err(HistoryError::NoStore { path });
    }
    let store = crate::store::SledStore::open(&path, STORE_FLUSH_EVERY)?;
    let since = crate::clock::since(clock.now(), window);
    let outcomes = crate::store::Store::history(&store, name, since)?;
    if outcomes.is_empty() && !config.checks.iter().any(|c| c.name == name) {
        return Err(HistoryError::UnknownCheck(name.to_string()));
    }
    Ok(crate::api::HistoryView {
        name: name.to_string(),
        since,
        outcomes,
    })
}
