//! `vigie run`: the composition root. Builds every task from a [`Config`],
//! runs each under the [`Supervisor`], reloads on SIGHUP, and stops them
//! in order on SIGTERM.
//!
//! The tasks, each a supervised stage named in `/healthz` and in
//! `vigie_task_restarts_total{task}`:
//!
//! | task | what it does | progress it owes |
//! |---|---|---|
//! | `scheduler` | runs the config's generation of checks (`scheduler.rs`) | checks on time (`late`) |
//! | `recorder` | stores each outcome, keeps the latest, logs what is news ([`recorder`]) | takes what probes hand it within 30 s |
//! | `alerter` | incidents, grouping, holds, the daily report, the outbox ([`alerter`]) | takes what the recorder hands it within 30 s |
//! | `sender` | drains the outbox over SMTP or into the maildir | only death counts |
//! | `canaries` | the blind-monitor gate's probes ([`canary`]) | a round every few minutes |
//! | `replicator` | ships history off-region | only death counts; its lag is a degradation |
//! | `heartbeat` | the dead-man's switch | a beat every few intervals |
//! | `sweep` | both retentions (raw, rollups), hourly ([`watch::sweep`]) | only death counts |
//! | `api` | the local HTTP API | only death counts |
//! | `watch` | health, degradations, the systemd watchdog ([`watch`]) | its own tick: when it stops, health says `stuck` |
//!
//! Shutdown order: the scheduler stops starting probes and waits for those
//! in flight; the recorder drains, then the alerter (the last results are
//! judged and mailed); then mail, replication and the rest stop. A
//! shutdown after any task died says so and fails.

pub mod alerter;
pub mod canary;
pub mod recorder;
mod reload;
mod start_line;
pub mod vantage;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch as watch_channel, Mutex};
use tokio_util::sync::CancellationToken;

use self::alerter::{Alerter, AlerterInputs, AlerterParts};
use self::recorder::RecorderParts;
use self::reload::{plan, Reloaded};
use crate::api::{AlertStatus, TokenFileError};
use crate::clock::Clock;
use crate::config::Config;
use crate::health::Health;
use crate::net::CaFileError;
use crate::outcome::Outcome;
use crate::scheduler::Slots;
use crate::store::{Latest, Store, StoreError};
use crate::supervise::{Feed, Progress, Supervisor};

/// What the daemon is told from outside (signals, tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: reload config and checks; keep the old ones if invalid.
    Reload,
    /// SIGTERM/SIGINT: finish in-flight probes, flush, exit.
    Shutdown,
}

/// Why the daemon could not start, or ended badly.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Client(#[from] CaFileError),
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
    #[error(transparent)]
    TokenFile(#[from] TokenFileError),
    #[error(transparent)]
    ApiTls(#[from] crate::api::ApiTlsError),
    #[error("[replication]: {0}")]
    Replication(#[from] crate::replicate::ReplicateError),
    #[error(transparent)]
    Heartbeat(#[from] crate::heartbeat::HeartbeatError),
    #[error(transparent)]
    Mail(#[from] crate::mail::MailError),
    #[error(
        "vigie stopped, but tasks died while it ran: {}; see the log for each panic (\"task ... panicked\")",
        .0.iter().map(|(task, n)| format!("{task} {n} time(s)")).collect::<Vec<_>>().join(", ")
    )]
    TasksDied(Vec<(&'static str, u64)>),
    #[error("the task opening the store died: {0}")]
    StoreTask(String),
}

/// The recorder and the alerter owe progress this soon after work reaches
/// them.
const TAKE_WITHIN: Duration = Duration::from_secs(30);

/// `vigie run`: the daemon, until told to shut down.
///
/// sled refuses every write after its first I/O error until it is opened
/// again, so when the state disk takes writes again after failing (the
/// watch finds out, [`watch::run`]), every task is stopped in order as for
/// a shutdown, the store is reopened and the tasks start again, in the same
/// process: probing pauses for about a second, the API for as long, and the
/// alert states held in memory are carried over and written back.
pub async fn run(
    config_path: &std::path::Path,
    config: Config,
    clock: Arc<dyn Clock>,
    mut control: mpsc::Receiver<Control>,
) -> Result<(), RunError> {
    // One copy, shared with the alerter (10,000 checks are megabytes).
    let mut config = Arc::new(config);
    crate::store::create_state_dir(&config.state_dir).map_err(|source| RunError::StateDir {
        path: config.state_dir.clone(),
        source,
    })?;
    if crate::fault::ENABLED && std::env::var_os("VIGIE_FAULT_DIR").is_some() {
        tracing::warn!("fault injection armed (a test build): tasks panic on demand");
    }
    let mut carried = Carried::default();
    let mut died: Vec<(&'static str, u64)> = Vec::new();
    loop {
        let ended = run_once(
            config_path,
            config.clone(),
            clock.clone(),
            &mut control,
            &carried,
        )
        .await?;
        for (task, n) in ended.died {
            match died.iter_mut().find(|(t, _)| *t == task) {
                Some((_, total)) => *total += n,
                None => died.push((task, n)),
            }
        }
        match ended.store_back {
            false => break,
            true => {
                carried.reopenings += 1;
                config = ended.config;
                tracing::info!("the state disk takes writes again: the store is reopened and every task started again");
            }
        }
    }
    if !died.is_empty() {
        return Err(RunError::TasksDied(died));
    }
    Ok(())
}

/// What outlives one opening of the store.
#[derive(Default)]
struct Carried {
    /// Alert states the store refused, written back once it is reopened.
    held: alerter::HeldStates,
    /// Reopenings so far: each one waits longer before the next.
    reopenings: u32,
}

/// How one opening of the store ended.
struct Ended {
    /// The config running at the end (reloads included).
    config: Arc<Config>,
    /// The state disk takes writes again: open the store anew.
    store_back: bool,
    /// Tasks that died, and how often.
    died: Vec<(&'static str, u64)>,
}

/// The daemon on one opening of the store; see [`run`].
async fn run_once(
    config_path: &std::path::Path,
    config: Arc<Config>,
    clock: Arc<dyn Clock>,
    control: &mut mpsc::Receiver<Control>,
    carried: &Carried,
) -> Result<Ended, RunError> {
    let (sled, set_aside, temporary) = match open_store(&config, clock.now()).await {
        Ok((sled, set_aside)) => (sled, set_aside, None),
        // A state directory that refuses the store (read-only, full,
        // unwritable) must not keep vigie from paging: it runs on a
        // temporary store, unhealthy, until the directory takes writes and
        // the store is reopened (`run`).
        Err(RunError::Store(err @ (StoreError::Open { .. } | StoreError::Io { .. }))) => {
            let why = format!(
                "{err}; vigie runs on a temporary store until state_dir takes writes (history is not kept)"
            );
            tracing::error!("{why}");
            let brief = format!("{}; vigie runs on a temporary store", err.brief());
            let sled = crate::store::SledStore::open_temporary(crate::store::FLUSH_EVERY)?;
            (sled, None, Some((why, brief)))
        }
        Err(err) => return Err(err),
    };
    if let Some(aside) = &set_aside {
        tracing::error!("{}", aside.message());
    }
    let sled = Arc::new(sled);
    let store: Arc<dyn Store> = sled.clone();
    let supervisor = Supervisor::new();
    let health = Arc::new(Health::new(clock.now(), supervisor.stages()));
    if let Some((why, brief)) = &temporary {
        health.on_temporary_store(why, brief);
    }
    // Before the scheduler appends anything, so that no result escapes the
    // replication queue.
    let replicator = match &config.replication {
        // A temporary store's history is not this node's: shipped, it would
        // overwrite the node's segments in the bucket.
        Some(_) if temporary.is_some() => {
            tracing::warn!("replication waits for the real store");
            None
        }
        Some(r) => Some(Arc::new(crate::replicate::Replicator::new(
            &crate::replicate::BucketSettings::from_config(r, config.extra_ca_file.as_deref()),
            r.interval,
            sled.clone(),
            clock.clone(),
        )?)),
        None => None,
    };
    let replication = replicator.as_ref().map(|r| r.status());
    let heartbeat = match &config.heartbeat {
        Some(h) => Some(Arc::new(crate::heartbeat::Heartbeat::new(
            h,
            config.extra_ca_file.as_deref(),
            clock.clone(),
        )?)),
        None => None,
    };
    let slots = Slots::default();
    let latest = Latest::default();
    for outcome in store.latest_all()? {
        latest.record(Arc::new(outcome));
    }
    // Stopped first: no new probes.
    let shutdown = CancellationToken::new();
    // Stopped once the recorder and the alerter have drained: mail and
    // replication carry the last results out.
    let late_stop = CancellationToken::new();
    let started = clock.now();

    let alert_store = sled.alerts()?;
    // Where each failing check's streak began, for the journal's first
    // line about it after this start (`recorder.rs`).
    let down_since: std::collections::HashMap<String, time::OffsetDateTime> = alert_store
        .states()
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s.failing_since().map(|since| (s.check.clone(), since)))
        .collect();
    let outbox = Arc::new(crate::mail::Outbox::new(alert_store.outbox()));
    if let Some(aside) = &set_aside {
        page_set_aside(&outbox, aside, clock.now()).await;
    }
    let (sender, sender_handle) = crate::mail::Sender::new(
        outbox.clone(),
        crate::mail::Delivery::from_config(&config)?,
        clock.clone(),
        crate::mail::Backoff::DEFAULT,
    );
    let last_sender = sender.clone();
    supervisor.spawn("sender", Progress::Unwatched, late_stop.clone(), {
        let stop = late_stop.clone();
        move |_stage| sender.clone().run(stop.clone())
    });

    let (alert_config, alert_config_rx) = watch_channel::channel(config.clone());
    let alert_status = Arc::new(AlertStatus::default());
    let (round_tx, rounds) = mpsc::channel(4);
    let canary_now = match config.connectivity.canaries.is_empty() {
        true => None,
        false => {
            let now = Arc::new(tokio::sync::Notify::new());
            let prober = Arc::new(crate::runner::prober(&config, clock.clone())?);
            let checks: Arc<[crate::check::Check]> = canary::canary_checks(&config).into();
            let period = config.connectivity.every;
            let every = Progress::Every(period * 3 + 2 * config.default_timeout);
            supervisor.spawn("canaries", every, shutdown.clone(), {
                let (clock, now, shutdown) = (clock.clone(), now.clone(), shutdown.clone());
                move |stage| {
                    canary::canary_rounds(
                        prober.clone(),
                        checks.clone(),
                        period,
                        clock.clone(),
                        now.clone(),
                        round_tx.clone(),
                        stage,
                        shutdown.clone(),
                    )
                }
            });
            Some(now)
        }
    };
    let (alert_requests, requests) = mpsc::channel(16);
    let (alert_tx, alert_rx) = mpsc::channel::<Arc<Outcome>>(1024);
    let report_health: alerter::HealthSource = {
        let outbox = outbox.clone();
        let replication = replication.clone();
        Arc::new(move |now| crate::alert::report::Health {
            uptime: (now - started).try_into().ok(),
            outbox_backlog: Some(outbox.stats().snapshot().backlog),
            dead_letters: Some(outbox.dead_letters_for_report()),
            replication_lag: replication
                .as_ref()
                .and_then(|r| Duration::try_from_secs_f64(r.snapshot(now).lag_seconds).ok()),
        })
    };
    let vantage_stats = Arc::new(crate::vantage::VantageStats::default());
    let vantage = match (&config.vantage, &config.replication) {
        (Some(v), Some(r)) => Some(start_vantage(
            v,
            r,
            &config,
            &supervisor,
            &health,
            &clock,
            &vantage_stats,
            &shutdown,
        )?),
        _ => None,
    };
    let alerter_parts = AlerterParts {
        store: alert_store,
        outbox: outbox.clone(),
        config: alert_config_rx,
        clock: clock.clone(),
        host: crate::mail::hostname(),
        latest: latest.clone(),
        health: report_health,
        canary_now,
        status: alert_status.clone(),
        held: carried.held.clone(),
        vantage,
    };
    let alerter_inputs = Arc::new(Mutex::new(AlerterInputs {
        outcomes: alert_rx,
        rounds,
        requests,
    }));
    // The alerter drains until the recorder's side closes; `shutdown` only
    // tells that end from a death.
    let alerter_stage = supervisor.spawn(
        "alerter",
        Progress::Fed(TAKE_WITHIN),
        shutdown.clone(),
        move |stage| {
            let (parts, inputs) = (alerter_parts.clone(), alerter_inputs.clone());
            async move {
                let mut inputs = inputs.lock().await;
                Alerter::start(&parts).run(&mut inputs, stage).await;
            }
        },
    );

    let token = crate::api::Token::default();
    token.set(crate::api::read_token(&config)?);
    let server_tls = crate::api::ServerTls::default();
    server_tls.set(crate::api::acceptor(config.api.tls.as_ref())?);
    let server_stats = Arc::new(crate::api::ServerStats::default());
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
        server: server_stats.clone(),
        config: alert_config.subscribe(),
        vantage: config.vantage.as_ref().map(|_| vantage_stats.clone()),
    });
    let listen = config.api.listen;
    let limits = crate::api::Limits {
        request_timeout: config.api.request_timeout,
        ..crate::api::Limits::DEFAULT
    };
    let socket = start_local_socket(&config, &api, limits, &supervisor, &shutdown);
    let bound = Arc::new(std::sync::Mutex::new(Some(listener)));
    supervisor.spawn("api", Progress::Unwatched, shutdown.clone(), {
        let shutdown = shutdown.clone();
        let server_tls = server_tls.clone();
        move |_stage| {
            let (api, bound, shutdown) = (api.clone(), bound.clone(), shutdown.clone());
            let (server_tls, stats) = (server_tls.clone(), server_stats.clone());
            async move {
                // The first start serves the socket bound above; a restart
                // binds again (the dead server's socket closed with it).
                let first = bound.lock().unwrap_or_else(|p| p.into_inner()).take();
                let listener = match first {
                    Some(listener) => listener,
                    None => match tokio::net::TcpListener::bind(listen).await {
                        Ok(listener) => listener,
                        Err(err) => panic!("cannot listen on {listen} again: {err}"),
                    },
                };
                crate::api::serve(listener, api, server_tls, limits, stats, shutdown).await;
            }
        }
    });

    let (sink, outcomes) = mpsc::channel::<Outcome>(1024);
    let recorder_parts = RecorderParts {
        store: store.clone(),
        health: health.clone(),
        latest: latest.clone(),
        alerter: Feed::new(alert_tx, alerter_stage),
        down_since: Arc::new(down_since),
    };
    let outcomes = Arc::new(Mutex::new(outcomes));
    let recorder_stage = supervisor.spawn(
        "recorder",
        Progress::Fed(TAKE_WITHIN),
        shutdown.clone(),
        move |stage| {
            let (parts, outcomes) = (recorder_parts.clone(), outcomes.clone());
            async move {
                let mut outcomes = outcomes.lock().await;
                recorder::run(parts, &mut outcomes, stage).await;
            }
        },
    );
    let sink = Feed::new(sink, recorder_stage);

    if let Some(replicator) = replicator {
        supervisor.spawn("replicator", Progress::Unwatched, late_stop.clone(), {
            let stop = late_stop.clone();
            move |_stage| {
                let (replicator, stop) = (replicator.clone(), stop.clone());
                async move { replicator.run(stop).await }
            }
        });
    }
    if let Some(heartbeat) = heartbeat {
        let every = Progress::Every(heartbeat.interval() * 3 + Duration::from_secs(30));
        supervisor.spawn("heartbeat", every, shutdown.clone(), {
            let (health, clock, shutdown) = (health.clone(), clock.clone(), shutdown.clone());
            move |stage| {
                let (heartbeat, health, clock, shutdown) = (
                    heartbeat.clone(),
                    health.clone(),
                    clock.clone(),
                    shutdown.clone(),
                );
                async move {
                    let signal = move || {
                        stage.progressed();
                        crate::heartbeat::signal(&health.verdict(clock.now()))
                    };
                    heartbeat.run(signal, shutdown).await
                }
            }
        });
    }

    let store_back = Arc::new(tokio::sync::Notify::new());
    let (plans, plan_rx) = watch_channel::channel(plan(&config, clock.clone())?);
    supervisor.spawn("scheduler", Progress::Unwatched, shutdown.clone(), {
        let (clock, slots, shutdown, supervisor) = (
            clock.clone(),
            slots.clone(),
            shutdown.clone(),
            supervisor.clone(),
        );
        move |_stage| {
            reload::schedule(
                plan_rx.clone(),
                clock.clone(),
                sink.clone(),
                slots.clone(),
                shutdown.clone(),
                supervisor.clone(),
            )
        }
    });
    let degraders = watch::Degraders {
        state_dir: config.state_dir.clone(),
        replication: replication.clone(),
        mail: outbox.stats(),
        alerts: alert_status.clone(),
        vantage: config.vantage.as_ref().map(|_| vantage_stats.clone()),
    };
    health.degraded_by(move |now| watch::degradations(&degraders, now));
    supervisor.spawn("watch", Progress::Unwatched, shutdown.clone(), {
        let parts = watch::WatchParts {
            health: health.clone(),
            slots: slots.clone(),
            clock: clock.clone(),
            state_dir: config.state_dir.clone(),
            store_back: store_back.clone(),
            reopenings: carried.reopenings,
            real_store: temporary
                .as_ref()
                .map(|_| crate::store::history_path(&config.state_dir)),
        };
        let shutdown = shutdown.clone();
        move |stage| watch::run(parts.clone(), stage, shutdown.clone())
    });
    let (retention_tx, retention_rx) = watch_channel::channel(config.history.clone());
    supervisor.spawn("sweep", Progress::Unwatched, shutdown.clone(), {
        let (store, clock, shutdown) = (store.clone(), clock.clone(), shutdown.clone());
        move |stage| {
            watch::sweep(
                store.clone(),
                clock.clone(),
                retention_rx.clone(),
                stage,
                shutdown.clone(),
            )
        }
    });
    crate::notify::ready();
    tracing::info!(
        checks = config.checks.len(),
        listen = %config.api.listen,
        "{}",
        start_line::words(&config, socket.as_deref())
    );

    let mut config = config;
    let mut reopen = false;
    loop {
        let command = tokio::select! {
            command = control.recv() => command,
            () = store_back.notified() => {
                reopen = true;
                break;
            }
        };
        let Some(command) = command else { break };
        match command {
            Control::Shutdown => break,
            Control::Reload => {
                crate::notify::reloading();
                match reload::reload(config_path, &config, clock.clone()) {
                    Ok(Reloaded {
                        config: fresh,
                        plan,
                        token: fresh_token,
                        tls: fresh_tls,
                        delivery,
                    }) => {
                        let fresh = Arc::new(fresh);
                        token.set(fresh_token);
                        server_tls.set(fresh_tls);
                        sender_handle.reconfigure(delivery);
                        alert_config.send_replace(fresh.clone());
                        plans.send_replace(plan);
                        let _ = retention_tx.send(fresh.history.clone());
                        let names: std::collections::HashSet<&str> =
                            fresh.checks.iter().map(|c| c.name.as_str()).collect();
                        latest.retain(|name| names.contains(name));
                        health.reloaded(true, clock.now());
                        if fresh.vantage != config.vantage {
                            // The coordinator and its task are built once.
                            tracing::warn!("[vantage] changed: the change takes effect at the next restart of vigie");
                        }
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

    match reopen {
        true => tracing::info!("stopping every task to reopen the store"),
        false => {
            crate::notify::stopping();
            tracing::info!("stopping: finishing in-flight probes");
        }
    }
    // The scheduler, its probes, the recorder (once the probes' sink is
    // gone) and everything on `shutdown`; then the alerter has drained and
    // mail and replication may go.
    shutdown.cancel();
    let stages = supervisor.stages();
    wait_stopped(&stages, &["scheduler", "recorder", "alerter"]).await;
    late_stop.cancel();
    supervisor.wait().await;
    if let Some(socket) = &socket {
        crate::api::local::unbind(&config, socket);
    }
    if temporary.is_some() {
        drop_temporary_outbox(last_sender, reopen).await;
    }
    match (store.flush(), reopen) {
        (Ok(()), _) => tracing::info!("stopped; store flushed"),
        // The store being given up is the one that failed.
        (Err(err), true) => tracing::warn!(error = %err, "the failed store could not be flushed"),
        (Err(err), false) => return Err(err.into()),
    }
    Ok(Ended {
        config,
        store_back: reopen,
        died: stages.restarted(),
    })
}

/// Opens the history under `state_dir`, setting a damaged one aside. A
/// store given up a moment ago may still be locked by sled's flusher: the
/// open is retried for a few seconds.
/// Opens the coordination bucket and spawns the vantage task; the
/// alerter's side of it.
/// The local control socket (`api/local.rs`), served with the same
/// router as the TCP listener to the local users allowed to control vigie;
/// its path, when it could be bound. One that cannot be costs local control
/// only (the CLI then uses the token, as for a remote daemon): an ERROR in
/// the journal, not a refusal to start, so that a read-only state dir still
/// leaves vigie paging.
fn start_local_socket(
    config: &Config,
    api: &axum::Router,
    limits: crate::api::Limits,
    supervisor: &Supervisor,
    shutdown: &CancellationToken,
) -> Option<std::path::PathBuf> {
    let path = crate::api::local::socket_path(config);
    let listener = match crate::api::local::bind(config, &path) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(socket = %path.display(), error = %err, "cannot listen on the local control socket; the CLI on this machine needs [api] token_file to reach this daemon");
            return None;
        }
    };
    let bound = Arc::new(std::sync::Mutex::new(Some(listener)));
    let access = crate::api::local::LocalAccess::for_this_process();
    let stats = Arc::new(crate::api::ServerStats::default());
    let limits = crate::api::Limits {
        max_connections: 16,
        reserved: 0,
        ..limits
    };
    let config = config.clone();
    supervisor.spawn("api-socket", Progress::Unwatched, shutdown.clone(), {
        let (api, path, shutdown) = (api.clone(), path.clone(), shutdown.clone());
        move |_stage| {
            let (api, bound, stats) = (api.clone(), bound.clone(), stats.clone());
            let (config, path, shutdown) = (config.clone(), path.clone(), shutdown.clone());
            async move {
                let first = bound.lock().unwrap_or_else(|p| p.into_inner()).take();
                let listener = match first {
                    Some(listener) => listener,
                    None => match crate::api::local::bind(&config, &path) {
                        Ok(listener) => listener,
                        Err(err) => panic!("cannot listen on {} again: {err}", path.display()),
                    },
                };
                crate::api::serve_local(listener, api, access, limits, stats, shutdown).await;
            }
        }
    });
    Some(path)
}

#[allow(clippy::too_many_arguments)]
fn start_vantage(
    v: &crate::config::VantageConfig,
    r: &crate::config::ReplicationConfig,
    config: &Config,
    supervisor: &Supervisor,
    health: &Arc<Health>,
    clock: &Arc<dyn Clock>,
    stats: &Arc<crate::vantage::VantageStats>,
    shutdown: &CancellationToken,
) -> Result<alerter::VantageLink, RunError> {
    let coordinator =
        crate::vantage::Coordinator::open(v, r, config.extra_ca_file.as_deref(), stats.clone())?;
    let (fleet_tx, fleet_rx) = watch_channel::channel(Arc::new(vantage::initial_fleet(v)));
    let local = crate::vantage::LocalView::default();
    let wanted = Arc::new(vantage::Wanted::default());
    let node_health: Arc<dyn Fn(time::OffsetDateTime) -> crate::vantage::NodeHealth + Send + Sync> = {
        let health = health.clone();
        Arc::new(move |now| {
            let verdict = health.verdict(now);
            crate::vantage::NodeHealth {
                status: serde_json::to_value(verdict.status)
                    .ok()
                    .and_then(|s| s.as_str().map(str::to_string))
                    .unwrap_or_default(),
                degraded: verdict.degraded,
            }
        })
    };
    let parts = vantage::VantageParts {
        coordinator: coordinator.clone(),
        config: v.clone(),
        fleet: Arc::new(fleet_tx),
        local: local.clone(),
        stats: stats.clone(),
        wanted: wanted.clone(),
        health: node_health,
        clock: clock.clone(),
    };
    // A round ends at its first failed request, which with its one retry
    // costs at most two request timeouts: six of them (30 s at the
    // default) leave a hanging bucket's rounds well inside the limit.
    let every = Progress::Every(v.publish_every * 3 + v.request_timeout * 6);
    supervisor.spawn("vantage", every, shutdown.clone(), {
        let shutdown = shutdown.clone();
        move |stage| vantage::run(parts.clone(), stage, shutdown.clone())
    });
    let peers: Vec<&str> = v.peers.iter().map(|p| p.name.as_str()).collect();
    tracing::info!(node = %v.node, peers = ?peers, bucket = %coordinator.shown(), "vantage: coordinating through the bucket");
    Ok(alerter::VantageLink {
        coordinator,
        fleet: fleet_rx,
        local,
        wanted,
        stats: stats.clone(),
        publish_every: v.publish_every,
        started: clock.now(),
    })
}

async fn open_store(
    config: &Config,
    now: time::OffsetDateTime,
) -> Result<(crate::store::SledStore, Option<crate::store::SetAside>), RunError> {
    let path = crate::store::history_path(&config.state_dir);
    let mut tries = 0;
    loop {
        let attempt = path.clone();
        let opened = tokio::task::spawn_blocking(move || {
            crate::store::open_or_set_aside(&attempt, crate::store::FLUSH_EVERY, now)
        })
        .await
        .map_err(|err| RunError::StoreTask(err.to_string()))?;
        match opened {
            Err(crate::store::StoreError::Locked { .. }) if tries < 100 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return Ok(other?),
        }
    }
}

/// The one page about a store set aside at this start (the daemon's own
/// incident: no check, no threading).
async fn page_set_aside(
    outbox: &crate::mail::Outbox,
    aside: &crate::store::SetAside,
    now: time::OffsetDateTime,
) {
    let host = crate::mail::hostname();
    let message = crate::alert::Email {
        subject: format!("[vigie {host}] history store was corrupt; moved aside"),
        text: format!("{}\n", aside.message()),
        html: String::new(),
        message_id: format!("<store-set-aside-{}@{host}>", now.unix_timestamp()),
        in_reply_to: None,
        references: Vec::new(),
        to: Vec::new(),
    };
    match outbox.enqueue(&message, now).await {
        Ok(_) => tracing::info!("the set-aside store is paged"),
        Err(err) => {
            tracing::error!(error = %err, "cannot queue the page about the set-aside store")
        }
    }
}

/// A temporary store's outbox dies with it: its pages get one last try,
/// and what is still undelivered is said at ERROR, since no later start
/// will send it.
async fn drop_temporary_outbox(sender: crate::mail::Sender, reopen: bool) {
    let undelivered = sender.last_attempt(Duration::from_secs(30)).await;
    if undelivered.is_empty() {
        return;
    }
    let subjects: Vec<&str> = undelivered
        .iter()
        .map(|p| p.message.subject.as_str())
        .collect();
    let when = match reopen {
        true => "the store is reopened",
        false => "vigie stops",
    };
    tracing::error!(
        dropped = undelivered.len(),
        subjects = %subjects.join(" | "),
        "{when} on a temporary store: {} undelivered message(s) are dropped after one last try (the mail server did not take them)",
        undelivered.len()
    );
}

/// Waits until each named stage (if registered) has stopped.
async fn wait_stopped(stages: &crate::supervise::Stages, names: &[&str]) {
    for name in names {
        let Some(stage) = stages.get(name) else {
            continue;
        };
        while stage.state() != crate::supervise::StageState::Stopped {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
