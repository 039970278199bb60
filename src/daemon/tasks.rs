//! Each supervised task of one opening of the store, built by a function
//! named after it: what it reads, which signal stops it, and the progress
//! it owes (the table in the module docs of `daemon`). The API's two
//! listeners are in `api_server.rs`; the order in which these are called
//! is `daemon::run_once`'s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{mpsc, watch, Mutex, Notify, OwnedMutexGuard};
use tokio_util::sync::CancellationToken;

use super::alerter::{Alerter, AlerterInputs, AlerterParts, HealthSource, HeldStates};
use super::canary;
use super::error::RunError;
use super::health_watch::{self, Degraders, WatchParts};
use super::opening::Opened;
use super::recorder::{self, RecorderParts};
use super::retention;
use super::scheduling::{self, plan, Plan};
use super::vantage_task::{self, VantageParts};
use crate::alert::{AlertRequest, AlertStatus};
use crate::clock::Clock;
use crate::config::{Config, HistoryConfig};
use crate::health::Health;
use crate::heartbeat::Heartbeat;
use crate::mail::{Outbox, Sender, SenderHandle};
use crate::outcome::Outcome;
use crate::push::{PushSender, PushStats};
use crate::replicate::{ReplicationStatus, Replicator};
use crate::scheduler::Slots;
use crate::store::{IncidentUpdates, Latest, Store, ToldLedger};
use crate::supervise::{Feed, Progress, Stage, Supervisor};
use crate::vantage::{SingleNode, VantageLink, VantageStats, Wanted};

/// The recorder and the alerter owe progress this soon after work reaches
/// them.
const TAKE_WITHIN: Duration = Duration::from_secs(30);

/// What every task of one opening shares.
pub struct Shared {
    pub config: Arc<Config>,
    pub clock: Arc<dyn Clock>,
    pub supervisor: Supervisor,
    pub health: Arc<Health>,
    /// Stopped first: no new probes.
    pub shutdown: CancellationToken,
    /// Stopped once the recorder and the alerter have drained: mail and
    /// replication carry the last results out.
    pub late_stop: CancellationToken,
}

impl Shared {
    pub fn new(config: Arc<Config>, clock: Arc<dyn Clock>) -> Shared {
        let supervisor = Supervisor::new();
        let health = Arc::new(Health::new(clock.now(), supervisor.stages()));
        Shared {
            config,
            clock,
            supervisor,
            health,
            shutdown: CancellationToken::new(),
            late_stop: CancellationToken::new(),
        }
    }
}

/// The replicator, built before the scheduler appends anything so that no
/// result escapes its queue; none without `[replication]`, nor on a
/// temporary store (its history is not this node's: shipped, it would
/// overwrite the node's segments in the bucket).
pub fn replicator(shared: &Shared, opened: &Opened) -> Result<Option<Arc<Replicator>>, RunError> {
    let config = &shared.config;
    Ok(match &config.replication {
        Some(_) if opened.temporary.is_some() => {
            tracing::warn!("replication waits for the real store");
            None
        }
        Some(r) => Some(Arc::new(Replicator::new(
            &crate::replicate::BucketSettings::from_config(r, config.extra_ca_file.as_deref()),
            r.interval,
            opened.sled.clone(),
            shared.clock.clone(),
        )?)),
        None => None,
    })
}

/// The heartbeat's client, with `[heartbeat]`.
pub fn heartbeat(shared: &Shared) -> Result<Option<Arc<Heartbeat>>, RunError> {
    Ok(match &shared.config.heartbeat {
        Some(h) => Some(Arc::new(Heartbeat::new(
            h,
            shared.config.extra_ca_file.as_deref(),
            shared.clock.clone(),
        )?)),
        None => None,
    })
}

/// What the alerting tasks hand the others: where outcomes and API
/// requests go, and what reload replaces.
pub struct Alerting {
    pub outbox: Arc<Outbox>,
    /// The sender, for the temporary store's last try at the end.
    pub sender: Sender,
    pub sender_handle: SenderHandle,
    pub config: watch::Sender<Arc<Config>>,
    pub status: Arc<AlertStatus>,
    pub requests: mpsc::Sender<AlertRequest>,
    pub vantage_stats: Arc<VantageStats>,
    pub push_stats: Arc<PushStats>,
    /// Who was told about each incident, for the pages.
    pub told: ToldLedger,
    /// What the on-call person wrote about incidents, for the pages and
    /// the API.
    pub updates: IncidentUpdates,
}

/// The alerter's input, for the recorder alone: once the recorder drops
/// it, the alerter drains and stops.
pub struct ToAlerter {
    feed: Feed<Arc<Outcome>>,
    /// Where each failing check's streak began (`opening::down_since`).
    down_since: HashMap<String, OffsetDateTime>,
}

/// What the alerting tasks read.
pub struct AlertingInputs<'a> {
    pub opened: &'a Opened,
    pub latest: &'a Latest,
    pub replication: Option<Arc<ReplicationStatus>>,
    pub held: HeldStates,
    /// When this opening started, for the report's uptime.
    pub started: OffsetDateTime,
}

/// The outbox and its `sender`, the `canaries`, the `vantage` task and the
/// `alerter` (in that order: the alerter's inputs exist before it).
pub async fn alerting(
    shared: &Shared,
    inputs: AlertingInputs<'_>,
) -> Result<(Alerting, ToAlerter), RunError> {
    let (config, clock) = (&shared.config, &shared.clock);
    let alert_store = inputs.opened.sled.alerts()?;
    let down_since = super::opening::down_since(&alert_store);
    let outbox = Arc::new(Outbox::new(alert_store.outbox()));
    if let Some(aside) = &inputs.opened.set_aside {
        super::opening::page_set_aside(&outbox, aside, clock.now()).await;
    }
    let (sender, sender_handle) = sender(shared, &outbox)?;
    let (config_tx, config_rx) = watch::channel(config.clone());
    let pushes = pushes(shared, &alert_store, &outbox, &config_rx);
    let status = Arc::new(AlertStatus::default());
    let (round_tx, rounds) = mpsc::channel(4);
    let canary_now = canaries(shared, round_tx)?;
    let (requests_tx, requests) = mpsc::channel(16);
    let (alert_tx, alert_rx) = mpsc::channel::<Arc<Outcome>>(1024);
    let health = report_health(&outbox, inputs.replication, inputs.started);
    let vantage_stats = Arc::new(VantageStats::default());
    let claims = match (&config.vantage, &config.replication) {
        (Some(v), Some(r)) => vantage(shared, v, r, &vantage_stats)?.new_claims(),
        _ => SingleNode::new_claims(),
    };
    let told = alert_store.told();
    let updates = alert_store.incident_updates();
    let parts = AlerterParts {
        store: alert_store,
        outbox: outbox.clone(),
        config: config_rx,
        clock: clock.clone(),
        host: crate::mail::hostname(),
        latest: inputs.latest.clone(),
        health,
        canary_now,
        status: status.clone(),
        held: inputs.held,
        claims,
        push_wake: Some(pushes.waker()),
    };
    let alerter_inputs = AlerterInputs {
        outcomes: alert_rx,
        rounds,
        requests,
    };
    let stage = alerter(shared, parts, alerter_inputs);
    let alerting = Alerting {
        outbox,
        sender,
        sender_handle,
        config: config_tx,
        status,
        requests: requests_tx,
        vantage_stats,
        push_stats: pushes.stats(),
        told,
        updates,
    };
    let to_alerter = ToAlerter {
        feed: Feed::new(alert_tx, stage),
        down_since,
    };
    Ok((alerting, to_alerter))
}

/// The `sender` task, draining the outbox until `late_stop`.
fn sender(shared: &Shared, outbox: &Arc<Outbox>) -> Result<(Sender, SenderHandle), RunError> {
    let (sender, handle) = Sender::new(
        outbox.clone(),
        crate::mail::Delivery::from_config(&shared.config)?,
        shared.clock.clone(),
        crate::mail::Backoff::DEFAULT,
    );
    let last = sender.clone();
    shared
        .supervisor
        .spawn("sender", Progress::Unwatched, shared.late_stop.clone(), {
            let stop = shared.late_stop.clone();
            move |_stage| sender.clone().run(stop.clone())
        });
    Ok((last, handle))
}

/// The `push` task, draining the push outbox of every `[[notify]]`
/// channel until `late_stop`, following reloads.
fn pushes(
    shared: &Shared,
    alert_store: &crate::store::AlertStore,
    outbox: &Arc<Outbox>,
    config: &watch::Receiver<Arc<Config>>,
) -> PushSender {
    let pushes = PushSender::new(
        alert_store.pushes(),
        outbox.clone(),
        config.clone(),
        shared.clock.clone(),
        crate::mail::hostname(),
    );
    shared
        .supervisor
        .spawn("push", Progress::Unwatched, shared.late_stop.clone(), {
            let (stop, pushes) = (shared.late_stop.clone(), pushes.clone());
            move |_stage| pushes.clone().run(stop.clone())
        });
    pushes
}

/// The `canaries` task, with `[connectivity] canaries`; what asks it for a
/// round now.
fn canaries(
    shared: &Shared,
    rounds: mpsc::Sender<canary::Round>,
) -> Result<Option<Arc<Notify>>, RunError> {
    let config = &shared.config;
    if config.connectivity.canaries.is_empty() {
        return Ok(None);
    }
    let now = Arc::new(Notify::new());
    let prober = Arc::new(crate::runner::prober(config, shared.clock.clone())?);
    let checks: Arc<[crate::check::Check]> = canary::canary_checks(config).into();
    let period = config.connectivity.every;
    let every = Progress::Every(period * 3 + 2 * config.default_timeout);
    shared
        .supervisor
        .spawn("canaries", every, shared.shutdown.clone(), {
            let (clock, now, shutdown) =
                (shared.clock.clone(), now.clone(), shared.shutdown.clone());
            move |stage| {
                canary::canary_rounds(
                    prober.clone(),
                    checks.clone(),
                    period,
                    clock.clone(),
                    now.clone(),
                    rounds.clone(),
                    stage,
                    shutdown.clone(),
                )
            }
        });
    Ok(Some(now))
}

/// What the report shows of vigie itself.
fn report_health(
    outbox: &Arc<Outbox>,
    replication: Option<Arc<ReplicationStatus>>,
    started: OffsetDateTime,
) -> HealthSource {
    let outbox = outbox.clone();
    Arc::new(move |now| crate::alert::report::Health {
        uptime: (now - started).try_into().ok(),
        outbox_backlog: Some(outbox.stats().snapshot().backlog),
        dead_letters: Some(outbox.dead_letters_for_report()),
        replication_lag: replication
            .as_ref()
            .and_then(|r| Duration::try_from_secs_f64(r.snapshot(now).lag_seconds).ok()),
    })
}

/// Opens the coordination bucket and spawns the `vantage` task; the
/// alerter's side of it.
fn vantage(
    shared: &Shared,
    v: &crate::config::VantageConfig,
    r: &crate::config::ReplicationConfig,
    stats: &Arc<VantageStats>,
) -> Result<VantageLink, RunError> {
    let (config, clock) = (&shared.config, &shared.clock);
    let coordinator =
        crate::vantage::Coordinator::open(v, r, config.extra_ca_file.as_deref(), stats.clone())?;
    let (fleet_tx, fleet_rx) = watch::channel(Arc::new(vantage_task::initial_fleet(v)));
    let local = crate::vantage::LocalView::default();
    let wanted = Arc::new(Wanted::default());
    let node_health: Arc<dyn Fn(OffsetDateTime) -> crate::vantage::NodeHealth + Send + Sync> = {
        let health = shared.health.clone();
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
    let parts = VantageParts {
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
    shared
        .supervisor
        .spawn("vantage", every, shared.shutdown.clone(), {
            let shutdown = shared.shutdown.clone();
            move |stage| vantage_task::run(parts.clone(), stage, shutdown.clone())
        });
    let peers: Vec<&str> = v.peers.iter().map(|p| p.name.as_str()).collect();
    tracing::info!(node = %v.node, peers = ?peers, bucket = %coordinator.shown(), "vantage: coordinating through the bucket");
    Ok(VantageLink {
        coordinator,
        fleet: fleet_rx,
        local,
        wanted,
        stats: stats.clone(),
        publish_every: v.publish_every,
        started: clock.now(),
    })
}

/// The `alerter` task. It drains until the recorder's side closes;
/// `shutdown` only tells that end from a death.
fn alerter(shared: &Shared, parts: AlerterParts, inputs: AlerterInputs) -> Arc<Stage> {
    spawn_fed(
        shared,
        "alerter",
        parts,
        inputs,
        |parts, mut inputs, stage| async move {
            Alerter::start(&parts).run(&mut inputs, stage).await;
        },
    )
}

/// A task fed through channels that outlive its restarts: each start
/// takes `inputs` behind a lock (the dead start's guard went with it), and
/// owes progress [`TAKE_WITHIN`] after work reaches it.
fn spawn_fed<P, I, F, Fut>(
    shared: &Shared,
    name: &'static str,
    parts: P,
    inputs: I,
    run: F,
) -> Arc<Stage>
where
    P: Clone + Send + Sync + 'static,
    I: Send + 'static,
    F: Fn(P, OwnedMutexGuard<I>, Arc<Stage>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let inputs = Arc::new(Mutex::new(inputs));
    let run = Arc::new(run);
    shared.supervisor.spawn(
        name,
        Progress::Fed(TAKE_WITHIN),
        shared.shutdown.clone(),
        move |stage| {
            let (parts, inputs, run) = (parts.clone(), inputs.clone(), run.clone());
            async move { run(parts, inputs.lock_owned().await, stage).await }
        },
    )
}

/// The `recorder` task; the feed the probes hand their outcomes to.
pub fn recorder(
    shared: &Shared,
    store: &Arc<dyn Store>,
    latest: &Latest,
    to_alerter: ToAlerter,
) -> Feed<Outcome> {
    let (sink, outcomes) = mpsc::channel::<Outcome>(1024);
    let parts = RecorderParts {
        store: store.clone(),
        health: shared.health.clone(),
        latest: latest.clone(),
        alerter: to_alerter.feed,
        down_since: Arc::new(to_alerter.down_since),
    };
    let stage = spawn_fed(
        shared,
        "recorder",
        parts,
        outcomes,
        |parts, mut outcomes, stage| async move {
            recorder::run(parts, &mut outcomes, stage).await;
        },
    );
    Feed::new(sink, stage)
}

/// The `replicator` task, until `late_stop`.
pub fn replication(shared: &Shared, replicator: Option<Arc<Replicator>>) {
    let Some(replicator) = replicator else { return };
    shared.supervisor.spawn(
        "replicator",
        Progress::Unwatched,
        shared.late_stop.clone(),
        {
            let stop = shared.late_stop.clone();
            move |_stage| {
                let (replicator, stop) = (replicator.clone(), stop.clone());
                async move { replicator.run(stop).await }
            }
        },
    );
}

/// The `heartbeat` task: each beat says the health verdict.
pub fn beats(shared: &Shared, heartbeat: Option<Arc<Heartbeat>>) {
    let Some(heartbeat) = heartbeat else { return };
    let every = Progress::Every(heartbeat.interval() * 3 + Duration::from_secs(30));
    shared
        .supervisor
        .spawn("heartbeat", every, shared.shutdown.clone(), {
            let (health, clock, shutdown) = (
                shared.health.clone(),
                shared.clock.clone(),
                shared.shutdown.clone(),
            );
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

/// The `scheduler` task; where a reload sends the next plan.
pub fn scheduler(
    shared: &Shared,
    sink: Feed<Outcome>,
    slots: &Slots,
) -> Result<watch::Sender<Plan>, RunError> {
    let (plans, plan_rx) = watch::channel(plan(&shared.config, shared.clock.clone())?);
    shared
        .supervisor
        .spawn("scheduler", Progress::Unwatched, shared.shutdown.clone(), {
            let (clock, slots, shutdown, supervisor) = (
                shared.clock.clone(),
                slots.clone(),
                shared.shutdown.clone(),
                shared.supervisor.clone(),
            );
            move |_stage| {
                scheduling::schedule(
                    plan_rx.clone(),
                    clock.clone(),
                    sink.clone(),
                    slots.clone(),
                    shutdown.clone(),
                    supervisor.clone(),
                )
            }
        });
    Ok(plans)
}

/// What the `watch` task reads that the others own.
pub struct Watched<'a> {
    pub opened: &'a Opened,
    pub alerting: &'a Alerting,
    pub replication: Option<Arc<ReplicationStatus>>,
    pub slots: &'a Slots,
    /// Told once the disk takes writes again while the store fails.
    pub store_back: &'a Arc<Notify>,
    pub reopenings: u32,
}

/// What degrades vigie, for health; then the `watch` task.
pub fn watch(shared: &Shared, watched: Watched<'_>) {
    let config = &shared.config;
    let degraders = Degraders {
        state_dir: config.state_dir.clone(),
        replication: watched.replication,
        mail: watched.alerting.outbox.stats(),
        alerts: watched.alerting.status.clone(),
        vantage: (config.vantage.as_ref()).map(|_| watched.alerting.vantage_stats.clone()),
        push: watched.alerting.push_stats.clone(),
    };
    let parts = WatchParts {
        health: shared.health.clone(),
        slots: watched.slots.clone(),
        clock: shared.clock.clone(),
        state_dir: config.state_dir.clone(),
        store_back: watched.store_back.clone(),
        reopenings: watched.reopenings,
        real_store: (watched.opened.temporary.as_ref())
            .map(|_| crate::store::history_path(&config.state_dir)),
    };
    shared
        .health
        .degraded_by(move |now| health_watch::degradations(&degraders, now));
    shared
        .supervisor
        .spawn("watch", Progress::Unwatched, shared.shutdown.clone(), {
            let shutdown = shared.shutdown.clone();
            move |stage| health_watch::run(parts.clone(), stage, shutdown.clone())
        });
}

/// The `sweep` task; where a reload sends `[history]`.
pub fn sweep(shared: &Shared, store: &Arc<dyn Store>) -> watch::Sender<HistoryConfig> {
    let (retention_tx, retention_rx) = watch::channel(shared.config.history.clone());
    shared
        .supervisor
        .spawn("sweep", Progress::Unwatched, shared.shutdown.clone(), {
            let (store, clock, shutdown) =
                (store.clone(), shared.clock.clone(), shared.shutdown.clone());
            move |stage| {
                retention::sweep(
                    store.clone(),
                    clock.clone(),
                    retention_rx.clone(),
                    stage,
                    shutdown.clone(),
                )
            }
        });
    retention_tx
}
