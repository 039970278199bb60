//! `vigie run`: the composition root. [`Daemon::start`] builds every task
//! from a [`Config`] (each by a function of `tasks.rs` named after it),
//! runs each under the [`Supervisor`](crate::supervise::Supervisor),
//! reloads on [`Control::Reload`] (SIGHUP) and stops them in order on
//! [`Control::Shutdown`] (SIGTERM); the [`DaemonHandle`] it returns says
//! where the API listens and waits for the end. Tests start it in process
//! on a clock of their own.
//!
//! The tasks, each a supervised stage named in `/healthz` and in
//! `vigie_task_restarts_total{task}`:
//!
//! | task | what it does | progress it owes |
//! |---|---|---|
//! | `scheduler` | runs the config's generation of checks (`scheduling.rs`) | checks on time (`late`) |
//! | `recorder` | stores each outcome, keeps the latest, logs what is news ([`recorder`]) | takes what probes hand it within 30 s |
//! | `alerter` | incidents, grouping, holds, the daily report, the outbox ([`alerter`]) | takes what the recorder hands it within 30 s |
//! | `sender` | drains the outbox over SMTP or into the maildir | only death counts |
//! | `push` | drains the push outbox, a loop per `[[notify]]` channel (`push::PushSender`) | only death counts; a broken channel is a degradation |
//! | `canaries` | the blind-monitor gate's probes ([`canary`]) | a round every few minutes |
//! | `replicator` | ships history off-region | only death counts; its lag is a degradation |
//! | `heartbeat` | the dead-man's switch | a beat every few intervals |
//! | `vantage` | with `[vantage]`: publishes this node's state, reads the peers' (`vantage_task.rs`) | a round every few publications |
//! | `sweep` | both retentions (raw, rollups), hourly (`retention.rs`) | only death counts |
//! | `api`, `api-socket` | the HTTP API, on TCP and on the local socket (`api_server.rs`) | only death counts |
//! | `watch` | health, degradations, the systemd watchdog (`health_watch.rs`) | its own tick: when it stops, health says `stuck` |
//!
//! Shutdown order: the scheduler stops starting probes and waits for those
//! in flight; the recorder drains, then the alerter (the last results are
//! judged and mailed); then mail, replication and the rest stop. A
//! shutdown after any task died says so and fails.

pub mod alerter;
mod api_server;
pub mod canary;
mod controls;
mod error;
pub mod health_watch;
mod opening;
pub mod recorder;
mod reload;
pub mod retention;
mod scheduling;
mod start_line;
mod tasks;
pub mod vantage_task;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;

use self::alerter::HeldStates;
use self::api_server::ApiInputs;
use self::controls::{Reloadable, Until};
use self::tasks::{AlertingInputs, Shared};
use crate::clock::Clock;
use crate::config::Config;
use crate::scheduler::Slots;
use crate::store::Store;
use crate::supervise::{StageState, Stages};

pub use self::controls::Control;
pub use self::error::RunError;

/// A daemon not started yet: its config, its clock, and the channel it
/// will be told things on (so that signal handlers can be installed
/// before it starts).
pub struct Daemon {
    config_path: PathBuf,
    config: Config,
    clock: Arc<dyn Clock>,
    control: mpsc::Sender<Control>,
    commands: mpsc::Receiver<Control>,
}

/// A running daemon: where its API listens, and how to tell it things and
/// wait for its end.
pub struct DaemonHandle {
    control: mpsc::Sender<Control>,
    api: watch::Receiver<SocketAddr>,
    task: JoinHandle<Result<(), RunError>>,
}

impl Daemon {
    /// `config_path` is read again at each reload; `clock` gives every
    /// wall-clock reading (timers run on tokio's time).
    pub fn new(config_path: PathBuf, config: Config, clock: Arc<dyn Clock>) -> Daemon {
        let (control, commands) = mpsc::channel(8);
        Daemon {
            config_path,
            config,
            clock,
            control,
            commands,
        }
    }

    /// Where to tell the daemon things, before and after it starts.
    pub fn control(&self) -> mpsc::Sender<Control> {
        self.control.clone()
    }

    /// Creates `state_dir`, opens the store, starts every task and returns
    /// once the API listens; what keeps it from starting is the error.
    pub async fn start(self) -> Result<DaemonHandle, RunError> {
        let config = Arc::new(self.config);
        crate::store::create_state_dir(&config.state_dir).map_err(|source| RunError::StateDir {
            path: config.state_dir.clone(),
            source,
        })?;
        if crate::fault::ENABLED && std::env::var_os("VIGIE_FAULT_DIR").is_some() {
            tracing::warn!("fault injection armed (a test build): tasks panic on demand");
        }
        let (api_tx, mut api) = watch::channel(config.api.listen);
        let launch = Launch {
            config_path: self.config_path,
            clock: self.clock,
            api: api_tx,
        };
        let mut task = tokio::spawn(run(launch, config, self.commands));
        let served = tokio::select! {
            biased;
            ended = &mut task => Err(ended),
            changed = api.changed() => Ok(changed.is_ok()),
        };
        // Ended before it served: its error, if any, is why it could not
        // start; a handle on a daemon already ended otherwise.
        match served {
            Ok(true) => {}
            Ok(false) => {
                joined(task.await)?;
                task = tokio::spawn(async { Ok(()) });
            }
            Err(ended) => {
                joined(ended)?;
                task = tokio::spawn(async { Ok(()) });
            }
        }
        Ok(DaemonHandle {
            control: self.control,
            api,
            task,
        })
    }
}

impl DaemonHandle {
    /// The address the API listens on now (a reopening of the store binds
    /// `[api] listen` again).
    pub fn api_addr(&self) -> SocketAddr {
        *self.api.borrow()
    }

    /// Where to tell the daemon things (signals forward here).
    pub fn control(&self) -> mpsc::Sender<Control> {
        self.control.clone()
    }

    /// As SIGHUP does.
    pub async fn reload(&self) {
        let _ = self.control.send(Control::Reload).await;
    }

    /// As SIGTERM does, then waits for the end.
    pub async fn stop(self) -> Result<(), RunError> {
        let _ = self.control.send(Control::Shutdown).await;
        self.wait().await
    }

    /// Until the daemon is told to stop (or every sender of controls is
    /// gone) and has stopped.
    pub async fn wait(self) -> Result<(), RunError> {
        drop(self.control);
        joined(self.task.await)
    }
}

/// A panic of the daemon's own task goes on as the caller's.
fn joined(ended: Result<Result<(), RunError>, tokio::task::JoinError>) -> Result<(), RunError> {
    match ended {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => Err(RunError::Cancelled(err.to_string())),
    }
}

/// What every opening of the store is started with.
struct Launch {
    config_path: PathBuf,
    clock: Arc<dyn Clock>,
    /// Told the API's address at each opening.
    api: watch::Sender<SocketAddr>,
}

/// The daemon, until told to shut down.
///
/// sled refuses every write after its first I/O error until it is opened
/// again, so when the state disk takes writes again after failing (the
/// watch finds out, [`health_watch::run`]), every task is stopped in order
/// as for a shutdown, the store is reopened and the tasks start again, in
/// the same process: probing pauses for about a second, the API for as
/// long, and the alert states held in memory are carried over and written
/// back.
async fn run(
    launch: Launch,
    // One copy, shared with the alerter (10,000 checks are megabytes).
    mut config: Arc<Config>,
    mut control: mpsc::Receiver<Control>,
) -> Result<(), RunError> {
    let mut carried = Carried::default();
    let mut died: Vec<(&'static str, u64)> = Vec::new();
    loop {
        let ended = run_once(&launch, config.clone(), &mut control, &carried).await?;
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
    held: HeldStates,
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

/// The daemon on one opening of the store; see [`run`]. The order of the
/// tasks is the order of their inputs: the replicator exists before
/// anything is appended, the alerter before the recorder feeds it, the
/// recorder before the scheduler's probes.
async fn run_once(
    launch: &Launch,
    config: Arc<Config>,
    control: &mut mpsc::Receiver<Control>,
    carried: &Carried,
) -> Result<Ended, RunError> {
    let clock = &launch.clock;
    let opened = opening::open(&config, clock.now()).await?;
    let store: Arc<dyn Store> = opened.sled.clone();
    let shared = Shared::new(config.clone(), clock.clone());
    if let Some((why, brief)) = &opened.temporary {
        shared.health.on_temporary_store(why, brief);
    }
    let replicator = tasks::replicator(&shared, &opened)?;
    let replication = replicator.as_ref().map(|r| r.status());
    let heartbeat = tasks::heartbeat(&shared)?;
    let slots = Slots::default();
    let latest = opening::latest(store.as_ref())?;
    let inputs = AlertingInputs {
        opened: &opened,
        latest: &latest,
        replication: replication.clone(),
        held: carried.held.clone(),
        started: clock.now(),
    };
    let (alerting, to_alerter) = tasks::alerting(&shared, inputs).await?;
    let api = api_server::start(
        &shared,
        ApiInputs {
            store: &store,
            latest: &latest,
            slots: &slots,
            replication: replication.clone(),
            heartbeat: heartbeat.as_ref().map(|h| h.stats()),
            alerting: &alerting,
        },
    )
    .await?;
    let sink = tasks::recorder(&shared, &store, &latest, to_alerter);
    tasks::replication(&shared, replicator);
    tasks::beats(&shared, heartbeat);
    let store_back = Arc::new(Notify::new());
    let plans = tasks::scheduler(&shared, sink, &slots)?;
    let watched = tasks::Watched {
        opened: &opened,
        alerting: &alerting,
        replication,
        slots: &slots,
        store_back: &store_back,
        reopenings: carried.reopenings,
    };
    tasks::watch(&shared, watched);
    let retention = tasks::sweep(&shared, &store);
    crate::notify::ready();
    tracing::info!(
        checks = config.checks.len(),
        listen = %config.api.listen,
        "{}",
        start_line::words(&config, api.socket.as_deref())
    );
    launch.api.send_replace(api.addr);

    let reloadable = Reloadable {
        config_path: &launch.config_path,
        clock,
        token: &api.token,
        server_tls: &api.server_tls,
        sender: &alerting.sender_handle,
        alert_config: &alerting.config,
        plans: &plans,
        retention: &retention,
        latest: &latest,
        health: &shared.health,
    };
    let (config, until) = controls::serve(control, &store_back, config, &reloadable).await;
    let reopen = matches!(until, Until::StoreBack);
    let stages = stop(&shared, reopen).await;
    if let Some(socket) = &api.socket {
        crate::api::local::unbind(&config, socket);
    }
    if opened.temporary.is_some() {
        opening::drop_temporary_outbox(alerting.sender, reopen).await;
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

/// Stops every task in order: the scheduler, its probes, the recorder
/// (once the probes' sink is gone) and everything on `shutdown`; then,
/// once the alerter has drained, mail and replication.
async fn stop(shared: &Shared, reopen: bool) -> Arc<Stages> {
    match reopen {
        true => tracing::info!("stopping every task to reopen the store"),
        false => {
            crate::notify::stopping();
            tracing::info!("stopping: finishing in-flight probes");
        }
    }
    shared.shutdown.cancel();
    let stages = shared.supervisor.stages();
    wait_stopped(&stages, &["scheduler", "recorder", "alerter"]).await;
    shared.late_stop.cancel();
    shared.supervisor.wait().await;
    stages
}

/// Waits until each named stage (if registered) has stopped.
async fn wait_stopped(stages: &Stages, names: &[&str]) {
    for name in names {
        let Some(stage) = stages.get(name) else {
            continue;
        };
        while stage.state() != StageState::Stopped {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
