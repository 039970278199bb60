//! [`Engine`]: the alerting pieces wired together the way the daemon uses
//! them, in memory and without I/O.
//!
//! It owns the states of every check (and of vigie's network alert), the
//! grouper and the blind gate's latest verdict. The daemon feeds it
//! outcomes and canary rounds, ticks it on a timer, polls it for mails, and
//! persists exactly what each call returns: states after `observe`,
//! `canaries` and `tick`; each mail *together with* its states after `poll`
//! (one transaction, DESIGN.md). Built from the stored states at startup,
//! it re-queues whatever was due and never sent.
//!
//! If a write fails, the engine's memory is ahead of the store: rebuild it
//! with [`Engine::new`] from the store, which re-queues what is still due.
//!
//! Config, silences and maintenance windows stay outside: every call is
//! given the check's [`Policy`] and [`Hold`] (or a lookup for them), so a
//! reload or a new silence takes effect at the next call.

use std::collections::BTreeMap;
use std::time::Duration;

use time::OffsetDateTime;

use super::blind::{self, Connectivity};
use super::event::{Event, NETWORK_CHECK};
use super::group::{Grouper, Notification};
use super::policy::Policy;
use super::render::{self, Email};
use super::silence::Hold;
use super::state::{self, AlertState, Page};
use crate::outcome::Outcome;

/// The alert engine of one daemon.
#[derive(Debug, Clone)]
pub struct Engine {
    host: String,
    states: BTreeMap<String, AlertState>,
    grouper: Grouper,
    connectivity: Connectivity,
}

/// A mail and the states that record it as sent: to be written in one
/// transaction (outbox entry + `alert_state` entries).
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    pub email: Email,
    pub states: Vec<AlertState>,
}

impl Engine {
    /// An engine resuming from `states` (as stored; empty on a first run).
    /// Events that were due but not in the outbox when vigie stopped are
    /// queued again, in a group opening at `now`.
    pub fn new(
        host: &str,
        group_window: Duration,
        states: Vec<AlertState>,
        now: OffsetDateTime,
        policy_of: impl Fn(&str) -> Policy,
    ) -> Self {
        let mut grouper = Grouper::new(group_window);
        for s in &states {
            for event in state::pending(s, now, &policy_of(&s.check)) {
                grouper.push(event, now);
            }
        }
        Self {
            host: host.to_string(),
            states: states.into_iter().map(|s| (s.check.clone(), s)).collect(),
            grouper,
            // Until canaries are probed, nothing says vigie is blind.
            connectivity: Connectivity::Ungated,
        }
    }

    pub fn state(&self, check: &str) -> Option<&AlertState> {
        self.states.get(check)
    }

    /// Every state, by check name.
    pub fn states(&self) -> impl Iterator<Item = &AlertState> {
        self.states.values()
    }

    /// The blind gate's latest verdict (for `/healthz` and the heartbeat).
    pub fn connectivity(&self) -> Connectivity {
        self.connectivity
    }

    /// A round of canary outcomes: sets the gate for the checks judged
    /// after it and feeds vigie's own network alert. Returns that alert's
    /// state to persist; `None` without canaries.
    pub fn canaries(
        &mut self,
        outcomes: &[Outcome],
        now: OffsetDateTime,
        policy: &Policy,
        hold: Option<&Hold>,
    ) -> Option<AlertState> {
        self.connectivity = blind::connectivity(outcomes);
        let observation = blind::network_observation(outcomes, now)?;
        self.observe_snapshot(NETWORK_CHECK, observation, now, policy, hold)
    }

    /// One judged check outcome, through the blind gate. Returns the
    /// check's state to persist, unless it is a quiet check's routine
    /// progress (see [`QUIET_PERSIST_EVERY`]).
    pub fn observe(
        &mut self,
        outcome: &Outcome,
        now: OffsetDateTime,
        policy: &Policy,
        hold: Option<&Hold>,
    ) -> Option<AlertState> {
        let observation = blind::gate(self.connectivity, outcome);
        self.observe_snapshot(&outcome.name, observation, now, policy, hold)
    }

    /// Releases held pages whose hold ended and queues reminders that are
    /// due; call it every few seconds. Returns the states that changed.
    /// The lookups are asked about every firing check, [`NETWORK_CHECK`]
    /// included (give it `Policy::global`), and every check whose WARN is
    /// held.
    pub fn tick<'p>(
        &mut self,
        now: OffsetDateTime,
        policy_of: impl Fn(&str) -> &'p Policy,
        hold_of: impl Fn(&str) -> Option<Hold>,
    ) -> Vec<AlertState> {
        let mut changed = Vec::new();
        for (name, s) in self.states.iter_mut() {
            if !s.is_firing() && !s.warn_held() {
                continue;
            }
            let events = state::tick_in_place(s, now, policy_of(name), hold_of(name).as_ref());
            if events.is_empty() {
                continue;
            }
            changed.push(s.clone());
            for event in events {
                self.grouper.push(event, now);
            }
        }
        changed
    }

    /// The mails whose grouping window has closed, each with the states
    /// that record it as sent.
    pub fn poll(&mut self, now: OffsetDateTime) -> Vec<Outbound> {
        self.poll_notifications(now)
            .iter()
            .map(|n| self.outbound(n, now))
            .collect()
    }

    /// The notifications whose grouping window has closed, not yet
    /// rendered: the daemon may drop events another vantage sends, and
    /// annotate the rest, before [`Engine::outbound`] renders each. An
    /// event taken here and never handed back stays due in its state (it
    /// is queued again at the next start).
    pub fn poll_notifications(&mut self, now: OffsetDateTime) -> Vec<Notification> {
        self.grouper.poll(now)
    }

    /// `notification`'s mail, and its events' states marked sent as it.
    pub fn outbound(&mut self, notification: &Notification, now: OffsetDateTime) -> Outbound {
        let email = render::notification(notification, &self.host, now);
        let mut states: Vec<AlertState> = Vec::new();
        for event in &notification.events {
            let Some(s) = self.mark_sent(event, &email.message_id, now) else {
                continue;
            };
            // One check appears once per mail, but stay safe if not.
            states.retain(|kept| kept.check != s.check);
            states.push(s);
        }
        Outbound { email, states }
    }

    /// The Message-ID this node's mail about `event` alone would have.
    pub fn message_id(&self, event: &Event) -> String {
        let alone = Notification {
            kind: event.kind,
            to: event.to.clone(),
            events: vec![event.clone()],
            opened: event.at,
        };
        render::message_id(&alone, &self.host)
    }

    /// Records `event` as sent by another vantage as `message_id` (empty:
    /// unknown), so that it is not sent here and later mails thread under
    /// it. Returns the state to persist.
    pub fn mark_sent(
        &mut self,
        event: &Event,
        message_id: &str,
        now: OffsetDateTime,
    ) -> Option<AlertState> {
        let s = self.states.get_mut(&event.check)?;
        *s = state::mark_sent(s.clone(), event, message_id, now);
        Some(s.clone())
    }

    /// When the next mail's window closes: the latest time to poll.
    pub fn next_due(&self) -> Option<OffsetDateTime> {
        self.grouper.next_due()
    }

    /// One observation of `check` through its state machine: what
    /// [`Engine::observe`] and [`Engine::canaries`] do after the gate, and
    /// what the daemon calls for the pseudo-checks it judges itself (a
    /// peer vantage's liveness). Returns the state to persist, unless it is
    /// a quiet check's routine progress.
    pub fn observe_snapshot(
        &mut self,
        check: &str,
        observation: state::Observation,
        now: OffsetDateTime,
        policy: &Policy,
        hold: Option<&Hold>,
    ) -> Option<AlertState> {
        let (name, current) = self
            .states
            .remove_entry(check)
            .unwrap_or_else(|| (check.to_string(), AlertState::new(check)));
        let before = Quiet::of(&current);
        let mut step = state::transition(current, observation, now, policy, hold);
        for event in step.events {
            self.grouper.push(event, now);
        }
        // The latest probe's chain is only ever shown in a mail about an
        // incident; a quiet check does not keep (or persist) a copy of it.
        if !step.state.is_firing() && step.state.resolving.is_empty() {
            if let Some(last) = step.state.last.as_mut() {
                last.snapshot.chain = Vec::new();
            }
        }
        let persist = before.is_none() || before != Quiet::of(&step.state);
        let persisted = persist.then(|| step.state.clone());
        self.states.insert(name, step.state);
        persisted
    }
}

/// How often a quiet check's state is persisted while nothing but its
/// latest probe moves.
///
/// Writing every probe of every quiet check (10,000 checks: 170 writes a
/// second) bought nothing: after a crash, a quiet state up to this old
/// only shows an older "last probe" until the next one, and every change
/// that matters (a failure, an incident, a status or blindness change) is
/// still written at once.
pub const QUIET_PERSIST_EVERY: Duration = Duration::from_secs(600);

/// What a quiet check's persisted state must keep current; `None` for a
/// check that is failing, firing or resolving (an incident or a warn).
#[derive(Debug, PartialEq)]
struct Quiet {
    last: Option<(crate::outcome::Status, bool)>,
    /// Which [`QUIET_PERSIST_EVERY`] period the last success falls in.
    success_period: Option<i64>,
    /// The warn episode's stage and its `up` probes, or, without one, the
    /// warn streak (which opens an episode at `failure_threshold`, so this
    /// moves a bounded number of times).
    warn: (Option<u8>, u32),
}

impl Quiet {
    fn of(state: &AlertState) -> Option<Quiet> {
        let quiet = state.consecutive_failures == 0
            && state.streak_first.is_none()
            && state.incident.is_none()
            && state.resolving.is_empty()
            && state.warn.resolving.is_empty();
        quiet.then(|| Quiet {
            last: state
                .last
                .as_ref()
                .map(|last| (last.snapshot.status, last.unknown)),
            success_period: state.last_success.map(|at| {
                at.unix_timestamp()
                    .div_euclid(QUIET_PERSIST_EVERY.as_secs() as i64)
            }),
            warn: match &state.warn.episode {
                Some(episode) => (
                    Some(match episode.page {
                        Page::Held { .. } => 0,
                        Page::Due { .. } => 1,
                        Page::Sent { .. } => 2,
                    }),
                    state.warn.ups,
                ),
                None => (None, state.warn.consecutive),
            },
        })
    }
}
