//! The daemon's side of alerting: what `alert` decides, made durable and
//! sent.
//!
//! - [`AlertStore`]: the sled trees `alert_state`, `silences` and
//!   `cert_changes`, in the history's database, so that a state change and
//!   the mail it causes commit in one transaction with the `outbox` tree.
//! - [`Alerter`]: the task between the recorder and the outbox. It feeds
//!   every judged outcome to the [`Engine`] (through the canary gate when
//!   `[connectivity] canaries` are set), records certificate changes, ticks
//!   the engine for reminders and released holds, writes each mail with
//!   its states, queues the daily report, and serves the API's requests
//!   (report, silences), so that the engine has one owner.
//! - [`canary_rounds`]: probes the canaries on a timer and on demand.
//! - [`report_offline`]: the report when no daemon runs (`vigie report`).
//!
//! Holds and blindness change what is mailed, never what is probed or
//! stored: the recorder has stored every outcome before it arrives here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sled::transaction::{ConflictableTransactionResult, TransactionError};
use sled::{Db, Transactional, Tree};
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::alert::report::{self, CertChange, Report};
use crate::alert::{self, AlertState, Engine, Hold, Outbound, Policy, Silence, NETWORK_CHECK};
use crate::app::{ask_daemon, DaemonError};
use crate::check::{Cadence, Check, CheckKind, HttpCheck, HttpExpect, TlsExpect};
use crate::clock::{unix_millis, Clock};
use crate::config::Config;
use crate::mail::{MailError, Outbox, OutgoingMessage};
use crate::outcome::Outcome;
use crate::probe::Prober;

const STATES_TREE: &str = "alert_state";
const SILENCES_TREE: &str = "silences";
const CHANGES_TREE: &str = "cert_changes";

/// How often the engine is ticked (reminders, released holds, grouping
/// windows closing, the report's schedule, expired silences).
const TICK: Duration = Duration::from_secs(1);

/// A canary round this much older than a network failure does not judge
/// it: a fresh round is asked for first.
const ROUND_FRESH: Duration = Duration::from_secs(30);

/// Canaries are probed this often when nothing asks sooner.
pub const CANARY_EVERY: Duration = Duration::from_secs(60);

/// Certificate changes are kept this long (the report shows one day).
const CHANGES_KEPT: Duration = Duration::from_secs(7 * 86_400);

/// Why alerting could not read or write its state.
#[derive(Debug, thiserror::Error)]
pub enum AlertingError {
    #[error(
        "the alert state in the store at {} could not {action}: {cause} (is the disk full, read-only or failing?)",
        path.display()
    )]
    Store {
        path: PathBuf,
        action: &'static str,
        cause: sled::Error,
    },
    #[error(transparent)]
    Mail(#[from] MailError),
}

/// Alert states, silences and certificate changes in the store.
#[derive(Debug, Clone)]
pub struct AlertStore {
    path: PathBuf,
    states: Tree,
    silences: Tree,
    changes: Tree,
}

impl AlertStore {
    /// Opens the trees in the history's database (`path` is its directory,
    /// for messages).
    pub fn open(db: &Db, path: &Path) -> Result<AlertStore, AlertingError> {
        let open = |name: &str| {
            db.open_tree(name).map_err(|cause| AlertingError::Store {
                path: path.to_path_buf(),
                action: "open its trees",
                cause,
            })
        };
        Ok(AlertStore {
            path: path.to_path_buf(),
            states: open(STATES_TREE)?,
            silences: open(SILENCES_TREE)?,
            changes: open(CHANGES_TREE)?,
        })
    }

    fn io(&self, action: &'static str) -> impl Fn(sled::Error) -> AlertingError + '_ {
        move |cause| AlertingError::Store {
            path: self.path.clone(),
            action,
            cause,
        }
    }

    /// Every stored state. A damaged entry is logged and skipped: one
    /// check's forgotten incident is better than a daemon that cannot
    /// start.
    pub fn states(&self) -> Result<Vec<AlertState>, AlertingError> {
        decode_all(&self.states, "alert state").map_err(self.io("read alert states"))
    }

    pub fn save(&self, states: &[AlertState]) -> Result<(), AlertingError> {
        for state in states {
            self.states
                .insert(state.check.as_bytes(), encode(state))
                .map_err(self.io("write an alert state"))?;
        }
        Ok(())
    }

    /// Writes a mail and the states that record it as sent, in one
    /// transaction: either both are stored or neither.
    pub fn commit(
        &self,
        outbox: &Outbox,
        outbound: &Outbound,
        now: OffsetDateTime,
    ) -> Result<(), AlertingError> {
        let message = OutgoingMessage::from(outbound.email.clone());
        let result = (&self.states, outbox.tree()).transaction(
            |(states, queue)| -> ConflictableTransactionResult<(), sled::Error> {
                for state in &outbound.states {
                    states.insert(state.check.as_bytes(), encode(state))?;
                }
                Outbox::enqueue_in(queue, &message, now)?;
                Ok(())
            },
        );
        result.map_err(|e| match e {
            TransactionError::Abort(cause) | TransactionError::Storage(cause) => {
                AlertingError::Store {
                    path: self.path.clone(),
                    action: "queue a mail with its alert state",
                    cause,
                }
            }
        })
    }

    /// Silences, expired ones included (they are inert).
    pub fn silences(&self) -> Result<Vec<Silence>, AlertingError> {
        decode_all(&self.silences, "silence").map_err(self.io("read silences"))
    }

    /// Adds or replaces the silence of its pattern, durably.
    pub fn add_silence(&self, silence: &Silence) -> Result<(), AlertingError> {
        self.silences
            .insert(silence.pattern.as_bytes(), encode(silence))
            .map_err(self.io("write a silence"))?;
        self.silences.flush().map_err(self.io("flush a silence"))?;
        Ok(())
    }

    /// Removes the silence of `pattern`; `false` if there was none.
    pub fn remove_silence(&self, pattern: &str) -> Result<bool, AlertingError> {
        let removed = self
            .silences
            .remove(pattern.as_bytes())
            .map_err(self.io("remove a silence"))?;
        self.silences.flush().map_err(self.io("flush a silence"))?;
        Ok(removed.is_some())
    }

    /// Deletes silences that ended before `now`.
    pub fn sweep_silences(&self, now: OffsetDateTime) -> Result<(), AlertingError> {
        for silence in self.silences()? {
            if silence.until <= now {
                self.silences
                    .remove(silence.pattern.as_bytes())
                    .map_err(self.io("remove an expired silence"))?;
            }
        }
        Ok(())
    }

    pub fn record_change(&self, change: &CertChange) -> Result<(), AlertingError> {
        let mut key = (unix_millis(change.at) as u64).to_be_bytes().to_vec();
        key.extend_from_slice(change.check.as_bytes());
        self.changes
            .insert(key, encode(change))
            .map_err(self.io("record a certificate change"))?;
        Ok(())
    }

    /// Certificate changes seen at or after `since`, oldest first; older
    /// ones than [`CHANGES_KEPT`] are deleted on the way.
    pub fn changes_since(&self, since: OffsetDateTime) -> Result<Vec<CertChange>, AlertingError> {
        let from = (unix_millis(since).max(0) as u64).to_be_bytes();
        let mut changes = Vec::new();
        for entry in self.changes.range(from..) {
            let (_, value) = entry.map_err(self.io("read certificate changes"))?;
            match serde_json::from_slice(&value) {
                Ok(change) => changes.push(change),
                Err(err) => tracing::warn!(error = %err, "skipping a damaged certificate change"),
            }
        }
        let expired = (unix_millis(since - CHANGES_KEPT).max(0) as u64).to_be_bytes();
        for entry in self.changes.range(..expired) {
            let (key, _) = entry.map_err(self.io("read certificate changes"))?;
            self.changes
                .remove(key)
                .map_err(self.io("delete an old certificate change"))?;
        }
        Ok(changes)
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Invariant: these types serialise to JSON without fallible parts
    // (strings, numbers, RFC 3339 times).
    serde_json::to_vec(value).expect("alert records serialise to JSON")
}

fn decode_all<T: serde::de::DeserializeOwned>(
    tree: &Tree,
    what: &str,
) -> Result<Vec<T>, sled::Error> {
    let mut out = Vec::new();
    for entry in tree.iter() {
        let (key, value) = entry?;
        match serde_json::from_slice(&value) {
            Ok(v) => out.push(v),
            Err(err) => tracing::error!(
                key = %String::from_utf8_lossy(&key),
                error = %err,
                "skipping a damaged {what} in the store"
            ),
        }
    }
    Ok(out)
}

/// The policy of `check` under `config`; `[alerting]` itself for vigie's
/// network alert and for checks no longer configured.
pub fn policy_of(config: &Config, check: &str) -> Policy {
    match config.checks.iter().find(|c| c.name == check) {
        Some(c) => Policy::new(&config.alerting, &c.alert, &c.labels),
        None => Policy::global(&config.alerting),
    }
}

/// The hold on `check` at `now`.
pub fn hold_of(
    config: &Config,
    silences: &[Silence],
    check: &str,
    now: OffsetDateTime,
) -> Option<Hold> {
    alert::hold(check, now, silences, &config.maintenance)
}

/// One round of canary probes.
#[derive(Debug)]
pub struct Round {
    pub started: OffsetDateTime,
    pub outcomes: Vec<Outcome>,
}

/// The canaries as checks: a GET whose answer, whatever it is, proves the
/// network works. Never stored.
pub fn canary_checks(config: &Config) -> Vec<Check> {
    config
        .connectivity
        .canaries
        .iter()
        .enumerate()
        .map(|(i, url)| Check {
            name: format!("canary-{i}"),
            url: url.clone(),
            resolve: None,
            every: Cadence::Every(CANARY_EVERY),
            timeout: config.default_timeout,
            labels: Default::default(),
            tls: TlsExpect::default(),
            alert: Default::default(),
            kind: CheckKind::Http(HttpCheck {
                follow_redirects: false,
                expect: HttpExpect::default(),
            }),
        })
        .collect()
}

/// Probes every canary every [`CANARY_EVERY`], and at once when `now` is
/// notified, until `shutdown`.
pub async fn canary_rounds(
    prober: Prober,
    checks: Vec<Check>,
    clock: Arc<dyn Clock>,
    now: Arc<Notify>,
    rounds: mpsc::Sender<Round>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(CANARY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
            _ = now.notified() => {}
        }
        let started = clock.now();
        let outcomes = tokio::select! {
            _ = shutdown.cancelled() => return,
            o = futures_util::future::join_all(
                checks.iter().map(|c| crate::app::run_check(&prober, clock.as_ref(), c)),
            ) => o,
        };
        if rounds.send(Round { started, outcomes }).await.is_err() {
            return;
        }
        tick.reset();
    }
}

/// What the API asks of the alerter.
#[derive(Debug)]
pub enum Request {
    Report(oneshot::Sender<Report>),
    AddSilence(Silence, oneshot::Sender<Result<(), String>>),
    RemoveSilence(String, oneshot::Sender<Result<bool, String>>),
    Silences(oneshot::Sender<Vec<Silence>>),
}

/// What the report shows of vigie itself, read when it is built.
pub type HealthSource = Arc<dyn Fn(OffsetDateTime) -> report::Health + Send + Sync>;

/// The alerting task; see the module docs.
pub struct Alerter {
    pub engine: Engine,
    pub store: AlertStore,
    pub outbox: Arc<Outbox>,
    pub config: watch::Receiver<Arc<Config>>,
    pub clock: Arc<dyn Clock>,
    pub host: String,
    pub latest: crate::scheduler::Latest,
    pub health: HealthSource,
    /// Asks the canary task for a round now; `None` without canaries.
    pub canary_now: Option<Arc<Notify>>,
    /// Firing incidents and blindness, for `/metrics` and `/healthz`.
    pub status: Arc<AlertStatus>,
}

/// What the alerter shows the rest of the daemon.
#[derive(Debug, Default)]
pub struct AlertStatus {
    firing: std::sync::atomic::AtomicU64,
    blind: std::sync::atomic::AtomicBool,
}

impl AlertStatus {
    pub fn firing(&self) -> u64 {
        self.firing.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn blind(&self) -> bool {
        self.blind.load(std::sync::atomic::Ordering::Relaxed)
    }
}

struct Run {
    silences: Vec<Silence>,
    /// The last leaf-bearing outcome of each check, for certificate changes
    /// (the `Arc` the recorder also keeps as the latest).
    last_leaf: HashMap<String, Arc<Outcome>>,
    /// Network failures waiting for a fresh canary round.
    gated: Vec<Arc<Outcome>>,
    last_round: Option<OffsetDateTime>,
    next_report: Option<OffsetDateTime>,
    policies: Policies,
}

/// Every check's policy, built once per config rather than looked up (a
/// scan of every check) for each outcome.
#[derive(Default)]
struct Policies {
    of: Option<Arc<Config>>,
    by_check: HashMap<String, Policy>,
}

impl Policies {
    fn get(&mut self, config: &Arc<Config>, check: &str) -> Policy {
        if !self.of.as_ref().is_some_and(|of| Arc::ptr_eq(of, config)) {
            self.by_check = config
                .checks
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        Policy::new(&config.alerting, &c.alert, &c.labels),
                    )
                })
                .collect();
            self.of = Some(config.clone());
        }
        // A check no longer configured (its last probe ending after a
        // reload) gets the global policy.
        self.by_check
            .get(check)
            .cloned()
            .unwrap_or_else(|| Policy::global(&config.alerting))
    }
}

impl Alerter {
    /// Runs until `outcomes` closes (the recorder stopped).
    pub async fn run(
        mut self,
        mut outcomes: mpsc::Receiver<Arc<Outcome>>,
        mut rounds: mpsc::Receiver<Round>,
        mut requests: mpsc::Receiver<Request>,
    ) {
        let now = self.clock.now();
        let mut run = Run {
            silences: self.store.silences().unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read silences; starting without");
                Vec::new()
            }),
            last_leaf: HashMap::new(),
            gated: Vec::new(),
            last_round: None,
            next_report: next_after(&self.config.borrow().report.schedule, now),
            policies: Policies::default(),
        };
        for outcome in self.latest.all() {
            if outcome.leaf().is_some() {
                run.last_leaf.insert(outcome.name.clone(), outcome);
            }
        }
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // A grouping window closing is a page leaving: wake for it
            // exactly rather than at the next tick.
            let window_closes = self.until_next_due();
            tokio::select! {
                outcome = outcomes.recv() => match outcome {
                    Some(outcome) => self.outcome(&mut run, outcome),
                    None => break,
                },
                Some(round) = rounds.recv() => self.round(&mut run, round),
                Some(request) = requests.recv() => self.request(&mut run, request),
                _ = tick.tick() => self.tick(&mut run),
                _ = tokio::time::sleep(window_closes) => {}
            }
            self.send_due().await;
        }
        // Whatever is still grouping stays `due` in the stored states and
        // is queued again at the next start (`Engine::new`).
        self.send_due().await;
    }

    /// How long until the engine's next mail is due (at most a tick).
    fn until_next_due(&self) -> Duration {
        match self.engine.next_due() {
            Some(at) => (at - self.clock.now()).try_into().unwrap_or_default(),
            None => TICK,
        }
        .min(TICK)
    }

    fn outcome(&mut self, run: &mut Run, outcome: Arc<Outcome>) {
        self.record_change(run, &outcome);
        if self.needs_fresh_round(run, &outcome) {
            run.gated.push(outcome);
            if let Some(now) = &self.canary_now {
                now.notify_one();
            }
            return;
        }
        self.observe(run, &outcome);
    }

    /// A network failure is judged only after a canary round at most
    /// [`ROUND_FRESH`] older than it: was it the target, or vigie's own
    /// uplink?
    fn needs_fresh_round(&self, run: &Run, outcome: &Outcome) -> bool {
        self.canary_now.is_some()
            && alert::canary_failed(outcome)
            && run
                .last_round
                .is_none_or(|at| at + ROUND_FRESH < outcome.started_at)
    }

    fn observe(&mut self, run: &mut Run, outcome: &Outcome) {
        let now = self.clock.now();
        let config = self.config.borrow().clone();
        let policy = run.policies.get(&config, &outcome.name);
        let hold = hold_of(&config, &run.silences, &outcome.name, now);
        if let Some(state) = self.engine.observe(outcome, now, &policy, hold.as_ref()) {
            self.save(&[state]);
        }
    }

    fn round(&mut self, run: &mut Run, round: Round) {
        let now = self.clock.now();
        let config = self.config.borrow().clone();
        let policy = Policy::global(&config.alerting);
        let hold = hold_of(&config, &run.silences, NETWORK_CHECK, now);
        if let Some(state) = self
            .engine
            .canaries(&round.outcomes, now, &policy, hold.as_ref())
        {
            self.save(&[state]);
        }
        let blind = self.engine.connectivity().is_blind();
        if blind != self.status.blind() {
            match blind {
                true => tracing::warn!("every canary failed: vigie cannot reach the network; network failures are recorded as unknown (vigie blind)"),
                false => tracing::info!("a canary answers again: failures are judged again"),
            }
        }
        self.status
            .blind
            .store(blind, std::sync::atomic::Ordering::Relaxed);
        run.last_round = Some(round.started);
        for outcome in std::mem::take(&mut run.gated) {
            self.observe(run, &outcome);
        }
    }

    fn tick(&mut self, run: &mut Run) {
        let now = self.clock.now();
        let config = self.config.borrow().clone();
        run.silences.retain(|s| s.until > now);
        if let Err(err) = self.store.sweep_silences(now) {
            tracing::error!(error = %err, "cannot delete expired silences");
        }
        // A canary round that never came (the task died or hangs) must not
        // keep failures from being judged.
        let stale = now - 2 * (config.default_timeout + ROUND_FRESH);
        if run.gated.first().is_some_and(|o| o.started_at < stale) {
            tracing::warn!("no canary round arrived; judging network failures without the gate");
            for outcome in std::mem::take(&mut run.gated) {
                self.observe(run, &outcome);
            }
        }
        let silences = run.silences.clone();
        let changed = self.engine.tick(
            now,
            |check| policy_of(&config, check),
            |check| hold_of(&config, &silences, check, now),
        );
        self.save(&changed);
        let firing = self.engine.states().filter(|s| s.is_firing()).count();
        self.status
            .firing
            .store(firing as u64, std::sync::atomic::Ordering::Relaxed);
        if run.next_report.is_some_and(|at| at <= now) {
            run.next_report = next_after(&config.report.schedule, now);
            self.queue_report(run, &config, now);
        }
    }

    fn request(&mut self, run: &mut Run, request: Request) {
        let now = self.clock.now();
        match request {
            Request::Report(reply) => {
                let config = self.config.borrow().clone();
                let _ = reply.send(self.report(run, &config, now));
            }
            Request::AddSilence(silence, reply) => {
                let result = self.store.add_silence(&silence).map_err(|e| e.to_string());
                if result.is_ok() {
                    tracing::info!(pattern = %silence.pattern, until = %silence.until, reason = %silence.reason, "silence added");
                    run.silences.retain(|s| s.pattern != silence.pattern);
                    run.silences.push(silence);
                }
                let _ = reply.send(result);
            }
            Request::RemoveSilence(pattern, reply) => {
                let result = self
                    .store
                    .remove_silence(&pattern)
                    .map_err(|e| e.to_string());
                if let Ok(true) = result {
                    tracing::info!(pattern = %pattern, "silence removed");
                    run.silences.retain(|s| s.pattern != pattern);
                }
                let _ = reply.send(result);
            }
            Request::Silences(reply) => {
                let _ = reply.send(
                    run.silences
                        .iter()
                        .filter(|s| s.is_active(now))
                        .cloned()
                        .collect(),
                );
            }
        }
    }

    fn record_change(&mut self, run: &mut Run, outcome: &Arc<Outcome>) {
        if outcome.leaf().is_none() {
            return;
        }
        if let Some(before) = run.last_leaf.get(&outcome.name) {
            if let Some(change) = report::leaf_change(before, outcome) {
                tracing::info!(check = %change.check, kind = change.kind.as_str(), sha256 = %change.after.sha256, "the served certificate changed");
                if let Err(err) = self.store.record_change(&change) {
                    tracing::error!(error = %err, "cannot record a certificate change");
                }
            }
        }
        run.last_leaf.insert(outcome.name.clone(), outcome.clone());
    }

    fn report(&self, run: &Run, config: &Config, now: OffsetDateTime) -> Report {
        let names: std::collections::HashSet<&str> =
            config.checks.iter().map(|c| c.name.as_str()).collect();
        let latest: Vec<Outcome> = self
            .latest
            .all()
            .into_iter()
            .filter(|o| names.contains(o.name.as_str()))
            .map(|o| (*o).clone())
            .collect();
        let states: Vec<AlertState> = self.engine.states().cloned().collect();
        let changes = self
            .store
            .changes_since(now - Duration::from_secs(86_400))
            .unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read certificate changes for the report");
                Vec::new()
            });
        report::build(&report::ReportInput {
            now,
            host: &self.host,
            latest: &latest,
            states: &states,
            changes: &changes,
            silences: &run.silences,
            health: (self.health)(now),
            escape_hatches: &[],
        })
    }

    fn queue_report(&mut self, run: &Run, config: &Config, now: OffsetDateTime) {
        if config.report.to.is_empty() {
            tracing::warn!("daily report not sent: no recipients ([report] to or [alerting] to)");
            return;
        }
        let report = self.report(run, config, now);
        let to: Vec<String> = config.report.to.iter().map(ToString::to_string).collect();
        let message = OutgoingMessage::from(report::email(&report, &to));
        let outbox = self.outbox.clone();
        tokio::spawn(async move {
            match outbox.enqueue(&message, now).await {
                Ok(_) => tracing::info!("daily report queued"),
                Err(err) => tracing::error!(error = %err, "cannot queue the daily report"),
            }
        });
    }

    fn save(&mut self, states: &[AlertState]) {
        if states.is_empty() {
            return;
        }
        if let Err(err) = self.store.save(states) {
            tracing::error!(error = %err, "cannot store alert state; reloading it from the store");
            self.rebuild();
        }
    }

    /// The engine from the store again, after a failed write: it re-queues
    /// what is still due.
    fn rebuild(&mut self) {
        let config = self.config.borrow().clone();
        match self.store.states() {
            Ok(states) => {
                self.engine = Engine::new(
                    &self.host,
                    config.alerting.group_window,
                    states,
                    self.clock.now(),
                    |check| policy_of(&config, check),
                );
            }
            Err(err) => tracing::error!(error = %err, "cannot read alert state back"),
        }
    }

    /// Writes every mail whose grouping window closed, each with its states
    /// in one transaction, then makes them durable and wakes the sender.
    async fn send_due(&mut self) {
        let now = self.clock.now();
        let due: Vec<Outbound> = self.engine.poll(now);
        if due.is_empty() {
            return;
        }
        let mut queued = 0;
        for outbound in &due {
            match self.store.commit(&self.outbox, outbound, now) {
                Ok(()) => {
                    queued += 1;
                    tracing::info!(subject = %outbound.email.subject, "alert queued");
                }
                Err(err) => {
                    tracing::error!(error = %err, subject = %outbound.email.subject, "cannot queue an alert; it stays due");
                    self.rebuild();
                    break;
                }
            }
        }
        if queued > 0 {
            if let Err(err) = self.outbox.flush_and_wake().await {
                tracing::error!(error = %err, "cannot flush the outbox");
            }
        }
    }
}

/// The first time of `schedule` after `now`.
pub fn next_after(schedule: &cron::Schedule, now: OffsetDateTime) -> Option<OffsetDateTime> {
    let start = chrono::DateTime::<chrono::Utc>::from_timestamp(now.unix_timestamp(), 0)?;
    let next = schedule.after(&start).next()?;
    OffsetDateTime::from_unix_timestamp(next.timestamp()).ok()
}

/// `vigie report` with no daemon running: the stored latest results (or
/// probes now when there are none), the stored states, silences and
/// certificate changes.
pub async fn report_offline(
    config: &Config,
    clock: Arc<dyn Clock>,
) -> Result<Report, CommandError> {
    let local = |e: &dyn std::fmt::Display| CommandError::Local(e.to_string());
    let now = clock.now();
    let path = crate::app::history_path(config);
    let names: std::collections::HashSet<&str> =
        config.checks.iter().map(|c| c.name.as_str()).collect();
    let (mut latest, states, silences, changes, health) = match path.exists() {
        true => {
            let (store, alerts) = local_store(config)?;
            let outbox = Outbox::open(store.db(), &path).map_err(|e| local(&e))?;
            let latest = crate::store::Store::latest_all(&store).map_err(|e| local(&e))?;
            let health = report::Health {
                uptime: None,
                outbox_backlog: Some(outbox.stats().snapshot().backlog),
                dead_letters: Some(dead_letters(&outbox)),
                replication_lag: None,
            };
            (
                latest,
                alerts.states().map_err(|e| local(&e))?,
                alerts.silences().map_err(|e| local(&e))?,
                alerts
                    .changes_since(now - Duration::from_secs(86_400))
                    .map_err(|e| local(&e))?,
                health,
            )
        }
        false => Default::default(),
    };
    latest.retain(|o| names.contains(o.name.as_str()));
    if latest.is_empty() {
        let prober = crate::app::prober(config, clock.clone()).map_err(|e| local(&e))?;
        let checks = config.all_checks();
        latest = crate::app::check_now(&prober, clock.as_ref(), &checks, config.concurrency).await;
    }
    Ok(report::build(&report::ReportInput {
        now,
        host: &crate::mail::hostname(),
        latest: &latest,
        states: &states,
        changes: &changes,
        silences: &silences,
        health,
        escape_hatches: &[],
    }))
}

/// The dead letters as the report lists them.
pub fn dead_letters(outbox: &Outbox) -> Vec<report::DeadLetter> {
    match outbox.dead_letters() {
        Ok(letters) => letters
            .into_iter()
            .map(|d| report::DeadLetter {
                at: d.given_up_at,
                subject: d.message.subject,
                to: d.message.to,
                error: d.reason,
            })
            .collect(),
        Err(err) => {
            tracing::error!(error = %err, "cannot read dead letters");
            Vec::new()
        }
    }
}

/// Why a command that talks to the daemon (or its store) failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error("{0}")]
    Local(String),
}

fn local_store(config: &Config) -> Result<(crate::store::SledStore, AlertStore), CommandError> {
    std::fs::create_dir_all(&config.state_dir).map_err(|e| {
        CommandError::Local(format!(
            "cannot create state_dir {}: {e}",
            config.state_dir.display()
        ))
    })?;
    let path = crate::app::history_path(config);
    let store = crate::store::SledStore::open(&path, crate::app::STORE_FLUSH_EVERY)
        .map_err(|e| CommandError::Local(e.to_string()))?;
    let alerts =
        AlertStore::open(store.db(), &path).map_err(|e| CommandError::Local(e.to_string()))?;
    Ok((store, alerts))
}

/// `vigie silence`: through the daemon when it runs, else in the store.
pub async fn silence_command(
    config: &Config,
    pattern: &str,
    duration: Duration,
    reason: &str,
    clock: &dyn Clock,
) -> Result<Silence, CommandError> {
    let body = serde_json::json!({
        "pattern": pattern,
        "for": humantime::format_duration(duration).to_string(),
        "reason": reason,
    });
    let path = ["api", "v1", "silences"];
    if let Some(value) = ask_daemon(config, reqwest::Method::POST, &path, &[], Some(body)).await? {
        return serde_json::from_value(value).map_err(|e| CommandError::Local(e.to_string()));
    }
    let silence = Silence::new(pattern, duration, reason, clock.now())
        .map_err(|e| CommandError::Local(e.to_string()))?;
    let (_store, alerts) = local_store(config)?;
    alerts
        .add_silence(&silence)
        .map_err(|e| CommandError::Local(e.to_string()))?;
    Ok(silence)
}

/// `vigie unsilence`: `false` when no silence had that pattern.
pub async fn unsilence_command(config: &Config, pattern: &str) -> Result<bool, CommandError> {
    let path = ["api", "v1", "silences", pattern];
    match ask_daemon(config, reqwest::Method::DELETE, &path, &[], None).await {
        Ok(Some(_)) => return Ok(true),
        Err(DaemonError::Api { message, .. }) if message.starts_with("no silence") => {
            return Ok(false)
        }
        Err(err) => return Err(err.into()),
        Ok(None) => {}
    }
    let (_store, alerts) = local_store(config)?;
    alerts
        .remove_silence(pattern)
        .map_err(|e| CommandError::Local(e.to_string()))
}

/// `vigie report`: from the daemon when it runs, else from the store (or
/// probes now when nothing is stored).
pub async fn report_command(
    config: &Config,
    clock: Arc<dyn Clock>,
) -> Result<Report, CommandError> {
    let path = ["api", "v1", "report"];
    if let Some(value) = ask_daemon(config, reqwest::Method::GET, &path, &[], None).await? {
        return serde_json::from_value(value).map_err(|e| CommandError::Local(e.to_string()));
    }
    report_offline(config, clock).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::macros::datetime;

    use super::*;
    use crate::alert::report::{ChangeKind, Leaf};

    const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);

    fn store() -> (AlertStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        (AlertStore::open(&db, dir.path()).unwrap(), dir)
    }

    fn leaf(sha: &str) -> Leaf {
        Leaf {
            subject: "CN=www.example.com".into(),
            issuer: "C=US, O=Let's Encrypt, CN=R11".into(),
            sans: vec!["www.example.com".into()],
            not_after: T0 + Duration::from_secs(90 * 86_400),
            sha256: sha.into(),
        }
    }

    fn change(check: &str, at: OffsetDateTime) -> CertChange {
        CertChange {
            check: check.into(),
            at,
            kind: ChangeKind::Renewed,
            before: leaf("aa"),
            after: leaf("bb"),
        }
    }

    #[test]
    fn states_round_trip_and_a_damaged_one_is_skipped() {
        let (store, _dir) = store();
        let mut site = AlertState::new("site");
        site.consecutive_failures = 1;
        store.save(&[site.clone(), AlertState::new("app")]).unwrap();
        store
            .states
            .insert("broken", b"{not json".to_vec())
            .unwrap();
        let mut states = store.states().unwrap();
        states.sort_by(|a, b| a.check.cmp(&b.check));
        assert_eq!(states, [AlertState::new("app"), site]);
    }

    #[test]
    fn silences_are_added_replaced_removed_and_swept() {
        let (store, _dir) = store();
        let hour = Duration::from_secs(3600);
        store
            .add_silence(&Silence::new("staging-*", hour, "deploy", T0).unwrap())
            .unwrap();
        store
            .add_silence(&Silence::new("staging-*", 2 * hour, "longer", T0).unwrap())
            .unwrap();
        store
            .add_silence(&Silence::new("app", hour / 2, "", T0).unwrap())
            .unwrap();
        let silences = store.silences().unwrap();
        assert_eq!(silences.len(), 2, "one per pattern: {silences:?}");
        assert!(silences.iter().any(|s| s.reason == "longer"));
        store.sweep_silences(T0 + hour).unwrap();
        let left: Vec<String> = store
            .silences()
            .unwrap()
            .into_iter()
            .map(|s| s.pattern)
            .collect();
        assert_eq!(left, ["staging-*"]);
        assert!(store.remove_silence("staging-*").unwrap());
        assert!(!store.remove_silence("staging-*").unwrap());
    }

    #[test]
    fn certificate_changes_of_the_last_day_are_listed_and_old_ones_dropped() {
        let (store, _dir) = store();
        let day = Duration::from_secs(86_400);
        store.record_change(&change("old", T0 - 10 * day)).unwrap();
        store.record_change(&change("app", T0 - day / 2)).unwrap();
        store.record_change(&change("site", T0 - day / 4)).unwrap();
        let listed: Vec<String> = store
            .changes_since(T0 - day)
            .unwrap()
            .into_iter()
            .map(|c| c.check)
            .collect();
        assert_eq!(listed, ["app", "site"], "oldest first, last day only");
        assert_eq!(store.changes.len(), 2, "older than a week is deleted");
    }

    #[test]
    fn the_report_schedule_is_read_in_utc() {
        let schedule: cron::Schedule = "0 0 7 * * *".parse().unwrap();
        assert_eq!(
            next_after(&schedule, T0),
            Some(T0 + Duration::from_secs(86_400))
        );
        assert_eq!(next_after(&schedule, T0 - Duration::from_secs(1)), Some(T0));
    }
}
