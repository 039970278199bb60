//! The alerter task: between the recorder and the outbox, the daemon's
//! side of `alert`. It feeds every judged outcome to the [`Engine`]
//! (through the canary gate when `[connectivity] canaries` are set),
//! records certificate changes, ticks the engine for reminders and
//! released holds, writes each mail with its states in one transaction,
//! queues the daily report on its schedule, and serves the API's requests
//! (report, silences), so that the engine has one owner.
//!
//! Holds and blindness change what is mailed, never what is probed or
//! stored: the recorder has stored every outcome before it arrives here.
//! Under supervision a restart builds a new alerter from the stored alert
//! states, with the same input channels.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{mpsc, watch, Notify};

use super::canary::Round;
use crate::alert::report::{self, Report};
use crate::alert::{
    self, AlertState, Engine, EventKind, Hold, HoldCause, Notification, Outbound, Policy, Silence,
    NETWORK_CHECK,
};
use crate::alert::{AlertRequest, AlertStatus};
use crate::clock::{saturating_add, saturating_sub, Clock};
use crate::config::Config;
use crate::mail::Outbox;
use crate::outcome::{Outcome, Status};
use crate::push::{PushEvent, PushWaker};
use crate::store::{AlertStore, Latest, NewPush, Telling, ToldEvent};
use crate::supervise::Stage;
use crate::vantage::page_claims::Claiming;
use crate::vantage::{NewClaims, PageClaims};

/// How often the engine is ticked (reminders, released holds, grouping
/// windows closing, the report's schedule, expired silences).
const TICK: Duration = Duration::from_secs(1);

/// A canary round this much older than a network failure does not judge
/// it: a fresh round is asked for first.
const ROUND_FRESH: Duration = Duration::from_secs(30);

/// What the alerter reads; shared across its restarts.
pub struct AlerterInputs {
    pub outcomes: mpsc::Receiver<Arc<Outcome>>,
    pub rounds: mpsc::Receiver<Round>,
    pub requests: mpsc::Receiver<AlertRequest>,
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

/// What the report shows of vigie itself, read when it is built.
pub type HealthSource = Arc<dyn Fn(OffsetDateTime) -> report::Health + Send + Sync>;

/// What every start of the alerter is built from.
#[derive(Clone)]
pub struct AlerterParts {
    pub store: AlertStore,
    pub outbox: Arc<Outbox>,
    pub config: watch::Receiver<Arc<Config>>,
    pub clock: Arc<dyn Clock>,
    pub host: String,
    pub latest: Latest,
    pub health: HealthSource,
    /// Asks the canary task for a round now; `None` without canaries.
    pub canary_now: Option<Arc<Notify>>,
    /// Firing incidents and blindness, for `/metrics` and `/healthz`.
    pub status: Arc<AlertStatus>,
    /// Alert states the store refused, kept across restarts of the task
    /// and reopenings of the store.
    pub held: HeldStates,
    /// Who sends each page when several vantages watch the same checks
    /// (`vantage::SingleNode` without `[vantage]`).
    pub claims: NewClaims,
    /// Wakes the push sender once pushes are queued; `None`: no channel.
    pub push_wake: Option<PushWaker>,
}

/// Alert states the store refused (a full or failing disk), by check: the
/// engine goes on in memory, and they are written back once the store
/// takes writes again.
pub type HeldStates = Arc<std::sync::Mutex<HashMap<String, AlertState>>>;

/// The alerting task; see the module docs.
pub struct Alerter {
    engine: Engine,
    store: AlertStore,
    outbox: Arc<Outbox>,
    config: watch::Receiver<Arc<Config>>,
    clock: Arc<dyn Clock>,
    host: String,
    latest: Latest,
    health: HealthSource,
    canary_now: Option<Arc<Notify>>,
    status: Arc<AlertStatus>,
    policies: Policies,
    unsaved: HeldStates,
    claims: Box<dyn PageClaims>,
    push_wake: Option<PushWaker>,
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
    /// When the told ledger's old entries were last deleted.
    told_swept: Option<OffsetDateTime>,
}

/// Every check's policy, built once per config rather than looked up (a
/// scan of every check) for each outcome and, at each tick, for each
/// firing check.
pub struct Policies {
    of: Arc<Config>,
    by_check: HashMap<String, Policy>,
    global: Policy,
}

impl Policies {
    pub fn new(config: &Arc<Config>) -> Self {
        Policies {
            of: config.clone(),
            by_check: Policy::of_every_check(config),
            global: Policy::global(&config.alerting),
        }
    }

    /// Rebuilds the cache when `config` is not the one it was built
    /// from; true when it did.
    pub fn refresh(&mut self, config: &Arc<Config>) -> bool {
        let stale = !Arc::ptr_eq(&self.of, config);
        if stale {
            *self = Policies::new(config);
        }
        stale
    }

    /// The policy of `check`; `[alerting]` itself for vigie's network
    /// alert and for checks no longer configured (their last probe ending
    /// after a reload).
    pub fn get(&self, check: &str) -> &Policy {
        self.by_check.get(check).unwrap_or(&self.global)
    }
}

impl Alerter {
    /// An alerter whose engine holds the stored alert states, and over
    /// them the states held in memory that the store refused: what is due
    /// is queued again, what fires keeps firing. A store that cannot be
    /// read gives an engine without history (logged): paging goes on.
    pub fn start(parts: &AlerterParts) -> Alerter {
        let config = parts.config.borrow().clone();
        let policies = Policies::new(&config);
        let mut states = parts.store.states().unwrap_or_else(|err| {
            tracing::error!(error = %err, "cannot read the stored alert states; alerting starts without them");
            Vec::new()
        });
        {
            let held = parts.held.lock().unwrap_or_else(|p| p.into_inner());
            states.retain(|s| !held.contains_key(&s.check));
            states.extend(held.values().cloned());
        }
        let engine = Engine::new(
            &parts.host,
            config.alerting.group_window,
            states,
            parts.clock.now(),
            |check| policies.get(check).clone(),
        );
        let mut alerter = Alerter {
            engine,
            store: parts.store.clone(),
            outbox: parts.outbox.clone(),
            config: parts.config.clone(),
            clock: parts.clock.clone(),
            host: parts.host.clone(),
            latest: parts.latest.clone(),
            health: parts.health.clone(),
            canary_now: parts.canary_now.clone(),
            status: parts.status.clone(),
            policies,
            unsaved: parts.held.clone(),
            claims: (parts.claims)(),
            push_wake: parts.push_wake.clone(),
        };
        alerter.claims.configured(&config, alerter.clock.now());
        alerter
    }

    /// Runs until `outcomes` closes (the recorder stopped); each outcome
    /// taken is progress of `stage`.
    pub async fn run(mut self, inputs: &mut AlerterInputs, stage: Arc<Stage>) {
        let now = self.clock.now();
        let mut run = Run {
            silences: self.store.silences().unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read silences; starting without");
                Vec::new()
            }),
            last_leaf: HashMap::new(),
            gated: Vec::new(),
            last_round: None,
            told_swept: None,
            next_report: {
                let report = &self.config.borrow().report;
                crate::schedule::next_after_in(&report.schedule, now, report.zone)
            },
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
                outcome = inputs.outcomes.recv() => match outcome {
                    Some(outcome) => {
                        self.outcome(&mut run, outcome);
                        stage.took();
                    }
                    None => break,
                },
                Some(round) = inputs.rounds.recv() => self.round(&mut run, round),
                Some(request) = inputs.requests.recv() => self.request(&mut run, request),
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
                .is_none_or(|at| saturating_add(at, ROUND_FRESH) < outcome.started_at)
    }

    fn observe(&mut self, run: &mut Run, outcome: &Outcome) {
        let now = self.clock.now();
        let config = self.config.borrow().clone();
        self.refresh(&config);
        self.claims.look();
        let self_down = outcome.status == Status::Down;
        let hold = self.hold(run, &config, &outcome.name, self_down, now);
        let policy = self.policies.get(&outcome.name);
        if let Some(state) = self.engine.observe(outcome, now, policy, hold.as_ref()) {
            self.save(&[state]);
        }
        self.record_view(outcome);
    }

    /// Follows a reload: the policies, and the checks this node's
    /// published state lists.
    fn refresh(&mut self, config: &Arc<Config>) {
        if self.policies.refresh(config) {
            self.claims.configured(config, self.clock.now());
        }
    }

    /// The hold on `check`'s pages at `now`: the other vantages' (a DOWN
    /// not confirmed, a recovery not confirmed), else a silence's or a
    /// maintenance window's. `self_down`: this node's latest probe of it
    /// failed. Without coordination only silences and windows hold.
    fn hold(
        &self,
        run: &Run,
        config: &Config,
        check: &str,
        self_down: bool,
        now: OffsetDateTime,
    ) -> Option<Hold> {
        let silenced = hold_of(config, &run.silences, check, now);
        let Some(fleet_hold) = self.claims.hold(check, self_down, now) else {
            return silenced;
        };
        match (&fleet_hold.cause, silenced) {
            // A silence decides when a DOWN may go out; the recovery waits
            // for the fleet whatever the silence.
            (HoldCause::Unconfirmed { .. }, Some(silence)) => Some(silence),
            _ => Some(fleet_hold),
        }
    }

    /// This node's view of the check, for the state it publishes.
    fn record_view(&mut self, outcome: &Outcome) {
        if let Some(state) = self.engine.state(&outcome.name) {
            self.claims.judged(outcome, state);
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
        self.status.set_blind(blind);
        run.last_round = Some(round.started);
        for outcome in std::mem::take(&mut run.gated) {
            self.observe(run, &outcome);
        }
    }

    fn tick(&mut self, run: &mut Run) {
        self.write_back();
        let now = self.clock.now();
        let config = self.config.borrow().clone();
        run.silences.retain(|s| s.until > now);
        if let Err(err) = self.store.sweep_silences(now) {
            tracing::error!(error = %err, "cannot delete expired silences");
        }
        if run
            .told_swept
            .is_none_or(|at| now - at >= time::Duration::HOUR)
        {
            run.told_swept = Some(now);
            if let Err(err) = self.store.told().sweep(now) {
                tracing::error!(error = %err, "cannot delete old told entries");
            }
            // Updates go with the day bars that show their incident.
            let cutoff = crate::clock::since(now, config.history.rollup_retention);
            if let Err(err) = self.store.incident_updates().forget_before(cutoff) {
                tracing::error!(error = %err, "cannot delete old incident updates");
            }
        }
        // A canary round that never came (the task died or hangs) must not
        // keep failures from being judged.
        let stale = saturating_sub(
            now,
            config
                .default_timeout
                .saturating_add(ROUND_FRESH)
                .saturating_mul(2),
        );
        if run.gated.first().is_some_and(|o| o.started_at < stale) {
            tracing::warn!("no canary round arrived; judging network failures without the gate");
            for outcome in std::mem::take(&mut run.gated) {
                self.observe(run, &outcome);
            }
        }
        self.refresh(&config);
        self.claims.look();
        self.judge_peers(run, &config, now);
        // Every firing check's hold, judged before the engine borrows it.
        let holds: HashMap<String, Option<Hold>> = self
            .engine
            .states()
            .filter(|s| s.is_firing())
            .map(|s| {
                let self_down = s
                    .last
                    .as_ref()
                    .is_some_and(|l| !l.unknown && l.snapshot.status == Status::Down);
                let hold = self.hold(run, &config, &s.check, self_down, now);
                (s.check.clone(), hold)
            })
            .collect();
        if let Some(notes) = self.claims.track_waiting(&holds, now) {
            self.status.set_fleet_notes(notes);
        }
        let policies = &self.policies;
        let changed = self.engine.tick(
            now,
            |check| policies.get(check),
            |check| holds.get(check).cloned().flatten(),
        );
        self.save(&changed);
        let firing = self.engine.states().filter(|s| s.is_firing()).count();
        self.status.set_firing(firing as u64);
        if run.next_report.is_some_and(|at| at <= now) {
            run.next_report =
                crate::schedule::next_after_in(&config.report.schedule, now, config.report.zone);
            self.queue_report(run, &config, now);
        }
    }

    fn request(&mut self, run: &mut Run, request: AlertRequest) {
        let now = self.clock.now();
        match request {
            AlertRequest::Report(reply) => {
                let config = self.config.borrow().clone();
                let _ = reply.send(self.report(run, &config, now));
            }
            AlertRequest::AddSilence(silence, reply) => {
                let result = self.store.add_silence(&silence).map_err(|e| e.to_string());
                if result.is_ok() {
                    tracing::info!(pattern = %silence.pattern, until = %crate::when::second(silence.until), reason = %silence.reason, "silence added");
                    run.silences.retain(|s| s.pattern != silence.pattern);
                    run.silences.push(silence);
                }
                let _ = reply.send(result);
            }
            AlertRequest::RemoveSilence(pattern, reply) => {
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
            AlertRequest::Silences(reply) => {
                let _ = reply.send(
                    run.silences
                        .iter()
                        .filter(|s| s.is_active(now))
                        .cloned()
                        .collect(),
                );
            }
            AlertRequest::OpenIncidents(reply) => {
                let _ = reply.send(crate::alert::known::open_incidents(self.engine.states()));
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
            .changes_since(saturating_sub(now, Duration::from_secs(86_400)))
            .unwrap_or_else(|err| {
                tracing::error!(error = %err, "cannot read certificate changes for the report");
                Vec::new()
            });
        let mut report = report::build(&report::ReportInput {
            now,
            host: &self.host,
            latest: &latest,
            states: &states,
            changes: &changes,
            silences: &run.silences,
            health: (self.health)(now),
            escape_hatches: &[],
            envs: &report::envs(&config.checks),
            zone: config.report.zone,
        });
        // What holds a page for the fleet changes with every publication:
        // the report says it as it is now.
        for problem in &mut report.problems {
            if let Some(words) = self.claims.waiting_words(&problem.check) {
                problem.held = Some(words);
            }
        }
        report
    }

    fn queue_report(&mut self, run: &Run, config: &Config, now: OffsetDateTime) {
        if config.report.to.is_empty() {
            tracing::warn!("daily report not sent: no recipients ([report] to or [alerting] to)");
            return;
        }
        let report = self.report(run, config, now);
        let to: Vec<String> = config.report.to.iter().map(ToString::to_string).collect();
        let message = report::email(&report, &to);
        let outbox = self.outbox.clone();
        let status = self.status.clone();
        tokio::spawn(async move {
            match outbox.enqueue(&message, now).await {
                Ok(_) => {
                    status.set_last_report(now);
                    tracing::info!("daily report queued")
                }
                Err(err) => tracing::error!(error = %err, "cannot queue the daily report"),
            }
        });
    }

    /// Stores changed states; what the store refuses stays in memory (see
    /// [`Alerter::write_back`]) and alerting goes on as if it were stored.
    fn save(&mut self, states: &[AlertState]) {
        if states.is_empty() {
            return;
        }
        if let Err(err) = self.store.save(states) {
            if self.held().is_empty() {
                tracing::error!(error = %err, "cannot store alert state; alerting goes on from memory and writes it back once the store takes writes");
            }
            self.hold_unsaved(states);
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, AlertState>> {
        self.unsaved.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hold_unsaved(&mut self, states: &[AlertState]) {
        let mut held = self.held();
        for state in states {
            held.insert(state.check.clone(), state.clone());
        }
    }

    /// Writes back the states the store refused, once it takes them.
    fn write_back(&mut self) {
        let mut held = self.held();
        if held.is_empty() {
            return;
        }
        let states: Vec<AlertState> = held.values().cloned().collect();
        if self.store.save(&states).is_ok() {
            tracing::info!(
                checks = states.len(),
                "the store takes writes again: alert state held in memory written back"
            );
            held.clear();
        }
    }

    /// Feeds the engine each peer's liveness, as the pseudo-check
    /// `vigie:vantage:<peer>` ([`PageClaims::peers`]).
    fn judge_peers(&mut self, run: &Run, config: &Config, now: OffsetDateTime) {
        let mut policy = Policy::global(&config.alerting);
        // `stale_after` already is the threshold.
        policy.failure_threshold = 1;
        policy.recovery_threshold = 1;
        for (check, observation) in self.claims.peers(now) {
            let hold = hold_of(config, &run.silences, &check, now);
            if let Some(state) =
                self.engine
                    .observe_snapshot(&check, observation, now, &policy, hold.as_ref())
            {
                self.save(&[state]);
            }
            if let Some(state) = self.engine.state(&check) {
                self.claims.peer_judged(&check, state, now);
            }
        }
    }

    /// Writes every mail whose grouping window closed, each with its states
    /// in one transaction, then makes them durable and wakes the sender. A
    /// mail the store refuses is still delivered, from memory: see
    /// [`send_not_durable`]. Each mail's events are claimed first
    /// ([`PageClaims::claim`]).
    async fn send_due(&mut self) {
        let now = self.clock.now();
        let notifications = self.engine.poll_notifications(now);
        // Already claimed (by another node, whose state did not back it).
        let settled = self.claims.settle(now);
        if notifications.is_empty() && settled.is_empty() {
            return;
        }
        // Each notification, and whether it pages (a DOWN or a reminder in
        // it): logged at WARN then, so that `journalctl -p warning` shows it.
        let mut due: Vec<(Notification, bool)> = Vec::new();
        let mut unavailable = self.claims.unavailable();
        for notification in settled {
            let pages = pages(&notification);
            due.push((notification, pages));
        }
        for mut notification in notifications {
            let engine = &self.engine;
            let message_id = |event: &alert::Event| engine.message_id(event);
            let mail = Claiming {
                notification: &mut notification,
                message_id: &message_id,
                unavailable: &mut unavailable,
                now,
            };
            let lost = self.claims.claim(mail).await;
            for lost in lost {
                if let Some(state) = self.engine.mark_sent(&lost.event, &lost.message_id, now) {
                    self.save(&[state]);
                }
            }
            if notification.events.is_empty() {
                continue;
            }
            let pages = pages(&notification);
            due.push((notification, pages));
        }
        let config = self.config.borrow().clone();
        let mut queued = 0;
        for (notification, pages) in &due {
            let outbound = self.engine.outbound(notification, now);
            let routed = Routed::of(&config, notification, &outbound.email, &self.host, now);
            let subject = &outbound.email.subject;
            match self.store.commit_routed(
                &outbound.states,
                routed.mail.as_ref(),
                &routed.pushes,
                &routed.telling,
                now,
            ) {
                Ok(_) => {
                    queued += 1;
                    let channels = routed.channel_names();
                    match pages {
                        true => tracing::warn!(subject = %subject, to = %channels, "page queued"),
                        // A warn no route asks for: its episode is
                        // recorded, and the daily report lists it.
                        false if channels.is_empty() => {
                            tracing::debug!(subject = %subject, "no channel asks for this warn")
                        }
                        false => tracing::info!(subject = %subject, to = %channels, "mail queued"),
                    }
                }
                // A warn is never mailed, not even from memory. Its state
                // is not held as sent either: the store still says it is
                // due, so a restart queues it again.
                Err(err) if notification.kind.is_warn() => {
                    tracing::error!(error = %err, subject = %subject, "cannot write the warn's pushes to the outbox; they are not sent now");
                }
                Err(err) => {
                    tracing::error!(error = %err, subject = %subject, "cannot write the alert to the outbox; sending the mail from memory (not durable), without its pushes");
                    self.hold_unsaved(&outbound.states);
                    send_not_durable(
                        config.clone(),
                        &outbound,
                        &err.to_string(),
                        self.clock.clone(),
                    );
                }
            }
        }
        if queued > 0 {
            if let Err(err) = self.outbox.flush_and_wake().await {
                // Written, not on disk: the sender still has them to send.
                tracing::error!(error = %err, queued, "cannot flush the outbox: the alerts just queued are sent, but are not durable");
                self.outbox.wake();
            }
            if let Some(wake) = &self.push_wake {
                wake.wake();
            }
        }
    }
}

/// One notification as its routes send it: the mail, if the mail is told,
/// and a push per channel that is, with the events each tells.
struct Routed {
    mail: Option<alert::Email>,
    pushes: Vec<NewPush>,
    telling: Telling,
}

impl Routed {
    /// `email` is the mail of the whole notification; the mail's part is
    /// written again only when routes take events out of it.
    fn of(
        config: &Config,
        notification: &Notification,
        email: &alert::Email,
        host: &str,
        now: OffsetDateTime,
    ) -> Routed {
        let parts = alert::routes::route(&config.notify, notification);
        let telling = Telling {
            mail: parts.mail.as_ref().map(told_events).unwrap_or_default(),
            pushes: parts.channels.iter().map(|(_, p)| told_events(p)).collect(),
        };
        let mail = parts.mail.map(
            |part| match part.events.len() == notification.events.len() {
                true => email.clone(),
                false => alert::render::notification(&part, host, now),
            },
        );
        let pushes = parts
            .channels
            .iter()
            .map(|(channel, part)| {
                let document = PushEvent::of(
                    part,
                    &alert::render::message_id(part, host),
                    &alert::render::subject_line(part, host),
                    host,
                    config.api.public_url.as_ref(),
                    now,
                );
                NewPush {
                    channel: channel.clone(),
                    event_id: document.id.clone(),
                    document: serde_json::to_string(&document)
                        .expect("a push document always serializes"),
                }
            })
            .collect();
        Routed {
            mail,
            pushes,
            telling,
        }
    }

    /// "mail, phone" for the log.
    fn channel_names(&self) -> String {
        let mut names: Vec<&str> = Vec::new();
        if self.mail.is_some() {
            names.push(crate::config::channels::MAIL);
        }
        names.extend(self.pushes.iter().map(|p| p.channel.as_str()));
        names.join(", ")
    }
}

/// The events of one delivery, as the told ledger keys them.
fn told_events(part: &Notification) -> Vec<ToldEvent> {
    part.events
        .iter()
        .map(|e| ToldEvent {
            check: e.check.clone(),
            incident: e.incident.to_string(),
            kind: e.kind,
            since: e.since,
            at: e.at,
        })
        .collect()
}

/// A mail that wakes someone: it holds a DOWN or a reminder.
fn pages(notification: &Notification) -> bool {
    notification
        .events
        .iter()
        .any(|e| matches!(e.kind, EventKind::Down | EventKind::Reminder))
}

/// Delivers a page the outbox could not take, from memory: straight
/// through the configured delivery, retried with backoff until it is
/// accepted (or vigie stops: it is not durable, and the mail says so).
fn send_not_durable(config: Arc<Config>, outbound: &Outbound, why: &str, clock: Arc<dyn Clock>) {
    let mut message = outbound.email.clone();
    message.mark_not_durable(why);
    tokio::spawn(async move {
        let mut wait = Duration::from_secs(2);
        loop {
            match crate::mail::send_direct(&config, &message, clock.as_ref()).await {
                Ok(how) => {
                    tracing::warn!(subject = %message.subject, via = %how, "alert sent from memory (not durable)");
                    return;
                }
                Err(err) => {
                    tracing::error!(subject = %message.subject, error = %err, retry_in = %crate::when::std_span(wait), "cannot send the alert held in memory (not durable)");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(300));
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    //! The alerter on the in-memory alert store, on tokio's paused time
    //! (a [`TokioClock`] over it), with a fleet of its own ([`Witness`]):
    //! the bucket is not what these tests are about.

    use std::sync::Mutex;

    use tokio::sync::oneshot;

    use super::*;
    use crate::alert::testing::{down, up, T0};
    use crate::clock::TokioClock;
    use crate::outcome::Assertion;
    use crate::supervise::{Progress, Supervisor};
    use crate::vantage::page_claims::{ClaimFuture, Lost};

    /// Thresholds 2/1, a reminder every 10 minutes, no grouping wait, one
    /// check.
    const CONFIG: &str = "state_dir = \"state\"\nchecks_dir = \"checks\"\n\
        [alerting]\nto = [\"oncall@example.com\"]\nfailure_threshold = 2\n\
        recovery_threshold = 1\nrepeat = \"10m\"\ngroup_window = \"0s\"\n";
    const CHECKS: &str = "[[check]]\nname = \"site\"\nkind = \"http\"\n\
        url = \"https://site.example.com/\"\nevery = \"1m\"\n";

    /// A fleet that holds nothing and records every claim; with
    /// `peer_sends`, another vantage wins each one.
    #[derive(Clone, Default)]
    struct Witness {
        claimed: Arc<Mutex<Vec<(String, EventKind)>>>,
        peer_sends: bool,
    }

    impl Witness {
        fn claimed(&self) -> Vec<(String, EventKind)> {
            self.claimed.lock().unwrap().clone()
        }
    }

    impl PageClaims for Witness {
        fn claim<'a>(&'a mut self, mail: Claiming<'a>) -> ClaimFuture<'a> {
            let events = &mut mail.notification.events;
            let mut claimed = self.claimed.lock().unwrap();
            claimed.extend(events.iter().map(|e| (e.check.clone(), e.kind)));
            let lost: Vec<Lost> = match self.peer_sends {
                false => Vec::new(),
                true => std::mem::take(events)
                    .into_iter()
                    .map(|event| Lost {
                        event,
                        message_id: "<vigie.down.elsewhere@fra.example.com>".to_string(),
                    })
                    .collect(),
            };
            Box::pin(std::future::ready(lost))
        }
    }

    /// A running alerter and what the daemon would hand it.
    struct Harness {
        outcomes: mpsc::Sender<Arc<Outcome>>,
        requests: mpsc::Sender<AlertRequest>,
        outbox: Arc<Outbox>,
        store: AlertStore,
        clock: TokioClock,
        _rounds: mpsc::Sender<Round>,
        _dir: tempfile::TempDir,
    }

    impl Harness {
        fn start(fleet: &Witness) -> Harness {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("checks")).unwrap();
            std::fs::write(dir.path().join("checks/site.toml"), CHECKS).unwrap();
            let path = dir.path().join("config.toml");
            let config = crate::config::load_str(&path, CONFIG).unwrap();
            let store = AlertStore::in_memory();
            let outbox = Arc::new(Outbox::new(store.outbox()));
            let clock = TokioClock::starting_at(T0);
            let fleet = fleet.clone();
            let parts = AlerterParts {
                store: store.clone(),
                outbox: outbox.clone(),
                config: watch::channel(Arc::new(config)).1,
                clock: Arc::new(clock.clone()),
                host: "vigie.example.com".to_string(),
                latest: Latest::default(),
                health: Arc::new(|_| report::Health::default()),
                canary_now: None,
                status: Arc::new(AlertStatus::default()),
                held: HeldStates::default(),
                claims: Arc::new(move || Box::new(fleet.clone())),
                push_wake: None,
            };
            let (outcomes, outcomes_rx) = mpsc::channel(16);
            let (requests, requests_rx) = mpsc::channel(16);
            let (rounds, rounds_rx) = mpsc::channel(4);
            let mut inputs = AlerterInputs {
                outcomes: outcomes_rx,
                rounds: rounds_rx,
                requests: requests_rx,
            };
            let stage = Supervisor::new()
                .stages()
                .register("alerter", Progress::Unwatched);
            tokio::spawn(async move { Alerter::start(&parts).run(&mut inputs, stage).await });
            Harness {
                outcomes,
                requests,
                outbox,
                store,
                clock,
                _rounds: rounds,
                _dir: dir,
            }
        }

        /// Hands the alerter `site`'s result a minute after the last one,
        /// and lets it act (a tick of virtual time, past the grouping
        /// window of 0 s).
        async fn result(&self, up_now: bool) {
            tokio::time::advance(Duration::from_secs(60)).await;
            let now = self.clock.now();
            let outcome = match up_now {
                true => up("site", now),
                false => down("site", now, Assertion::HttpStatus),
            };
            self.outcomes.send(Arc::new(outcome)).await.unwrap();
            tokio::time::sleep(2 * TICK).await;
        }

        /// The Message-IDs of the mails queued so far, oldest first.
        fn mails(&self) -> Vec<String> {
            let pending = self.outbox.pending().unwrap();
            pending.into_iter().map(|p| p.message.message_id).collect()
        }

        async fn silence(&self, pattern: &str) {
            let now = self.clock.now();
            let silence = Silence {
                pattern: pattern.to_string(),
                until: now + Duration::from_secs(3600),
                reason: "deploy".to_string(),
                created: now,
            };
            let (reply, answer) = oneshot::channel();
            let request = AlertRequest::AddSilence(silence, reply);
            self.requests.send(request).await.unwrap();
            answer.await.unwrap().unwrap();
        }
    }

    fn is_down(message_id: &str) -> bool {
        message_id.starts_with("<vigie.down.")
    }

    #[tokio::test(start_paused = true)]
    async fn a_down_pages_once_after_its_threshold_and_not_again_while_it_stays_down() {
        let fleet = Witness::default();
        let alerter = Harness::start(&fleet);
        alerter.result(false).await;
        assert_eq!(
            alerter.mails(),
            Vec::<String>::new(),
            "one failure is below the threshold"
        );
        alerter.result(false).await;
        let mails = alerter.mails();
        assert_eq!(mails.len(), 1, "{mails:?}");
        assert!(is_down(&mails[0]), "{mails:?}");
        for _ in 0..3 {
            alerter.result(false).await;
        }
        assert_eq!(alerter.mails(), mails, "still down: no second page");
        assert_eq!(fleet.claimed(), [("site".to_string(), EventKind::Down)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reminder_goes_out_once_per_repeat_while_down() {
        let fleet = Witness::default();
        let alerter = Harness::start(&fleet);
        alerter.result(false).await;
        alerter.result(false).await;
        tokio::time::sleep(Duration::from_secs(600)).await;
        alerter.result(false).await;
        alerter.result(false).await;
        let mails = alerter.mails();
        assert_eq!(mails.len(), 2, "{mails:?}");
        assert!(mails[1].starts_with("<vigie.reminder1."), "{mails:?}");
        let kinds: Vec<EventKind> = fleet.claimed().into_iter().map(|(_, k)| k).collect();
        assert_eq!(kinds, [EventKind::Down, EventKind::Reminder]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_recovery_sends_one_notice_threaded_under_the_page() {
        let fleet = Witness::default();
        let alerter = Harness::start(&fleet);
        alerter.result(false).await;
        alerter.result(false).await;
        alerter.result(true).await;
        alerter.result(true).await;
        let mails = alerter.mails();
        assert_eq!(mails.len(), 2, "{mails:?}");
        assert!(is_down(&mails[0]), "{mails:?}");
        assert!(mails[1].starts_with("<vigie.resolved."), "{mails:?}");
        let notice = &alerter.outbox.pending().unwrap()[1].message;
        assert_eq!(notice.in_reply_to.as_deref(), Some(mails[0].as_str()));
        let states = alerter.store.states().unwrap();
        assert!(states.iter().all(|s| !s.is_firing()), "{states:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silence_mutes_the_page_and_the_incident_is_still_tracked() {
        let fleet = Witness::default();
        let alerter = Harness::start(&fleet);
        alerter.silence("si*").await;
        for _ in 0..3 {
            alerter.result(false).await;
        }
        assert_eq!(alerter.mails(), Vec::<String>::new(), "silenced: no page");
        assert_eq!(fleet.claimed(), [], "nothing to claim");
        let states = alerter.store.states().unwrap();
        assert!(
            states.iter().any(|s| s.check == "site" && s.is_firing()),
            "the incident is open behind the silence: {states:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_page_another_vantage_sent_is_not_sent_here_nor_claimed_again() {
        let fleet = Witness {
            peer_sends: true,
            ..Witness::default()
        };
        let alerter = Harness::start(&fleet);
        for _ in 0..4 {
            alerter.result(false).await;
        }
        assert_eq!(
            alerter.mails(),
            Vec::<String>::new(),
            "the other vantage sent it"
        );
        assert_eq!(
            fleet.claimed(),
            [("site".to_string(), EventKind::Down)],
            "claimed once: recorded as sent by the other vantage"
        );
    }

    /// The API learns the open incident's key from the alerter, and the
    /// hourly sweep forgets the updates of incidents older than the day
    /// bars while keeping recent ones.
    #[tokio::test(start_paused = true)]
    async fn the_open_incident_is_told_to_the_api_and_old_updates_are_swept_hourly() {
        use crate::alert::IncidentId;
        use crate::incident_update::{IncidentUpdate, UpdateState};
        let alerter = Harness::start(&Witness::default());
        alerter.result(false).await;
        alerter.result(false).await;
        let (reply, answer) = oneshot::channel();
        alerter
            .requests
            .send(AlertRequest::OpenIncidents(reply))
            .await
            .unwrap();
        let open = answer.await.unwrap();
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!((open[0].check.as_str(), open[0].open), ("site", true));
        assert!(open[0].key.as_str().starts_with("site@"), "{open:?}");

        let updates = alerter.store.incident_updates();
        let now = alerter.clock.now();
        let written = |since: OffsetDateTime, text: &str| IncidentUpdate {
            check: "site".to_string(),
            incident: IncidentId::new("site", since),
            since,
            at: since,
            state: UpdateState::Resolved,
            text: text.to_string(),
        };
        let day = time::Duration::days(1);
        updates.add(&written(now - 401 * day, "old")).unwrap();
        updates.add(&written(now - day, "recent")).unwrap();
        tokio::time::advance(Duration::from_secs(3600)).await;
        tokio::time::sleep(2 * TICK).await;
        let kept: Vec<String> = updates
            .of_check("site")
            .unwrap()
            .into_iter()
            .map(|u| u.text)
            .collect();
        assert_eq!(kept, ["recent"], "400 days of day bars by default");
    }
}
