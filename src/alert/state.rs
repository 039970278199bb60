//! One check's alert state machine, persisted between probes and restarts.
//!
//! A check is *quiet* until `failure_threshold` consecutive `down` probes
//! open an [`Incident`] (*firing*); `recovery_threshold` consecutive probes
//! that are not `down` resolve it. `warn` counts as not down, both ways: it
//! never pages (it goes to the daily report) and it does resolve a DOWN,
//! because the thing that paged (the site failing) is over. A probe vigie
//! could not judge because it was blind ([`Observation::Unknown`]) moves
//! neither counter.
//!
//! Every mail an incident causes goes through three stages, recorded in the
//! state so that a crash at any point neither loses nor repeats a page:
//! *due* (the event was handed to the grouper), *sent* (its mail is in the
//! outbox: [`mark_sent`], written in the same transaction as the outbox
//! entry), and, for RESOLVED, the incident is kept in `resolving` until its
//! mail is in the outbox. After a restart, [`pending`] gives back every
//! event that was due but not sent.
//!
//! A DOWN that fires during a hold (silence, maintenance window, `page =
//! false`) is *held*, not dropped: [`tick`] (or the next probe) releases it
//! once the hold is gone and the check is still firing. An incident that
//! resolves while still held was never announced, so nothing is sent about
//! it. A RESOLVED for an incident that was announced is always sent, hold
//! or not: it closes a thread the on-call person has seen, and wakes nobody
//! that a silence was meant to spare.
//!
//! A *warn episode* is the one event `warn` causes: once a check has been
//! `warn` for `failure_threshold` probes in a row while no incident is
//! firing, a WARN event is handed on (held, like a DOWN, by a silence, a
//! maintenance window or `page = false`, and released by [`tick`] while
//! the check is still `warn`). It is never mailed and never reminded: the
//! routes push it only to the channels that ask for `warn`, and the daily
//! report covers the rest. The episode ends after `recovery_threshold`
//! `up` probes in a row; the next warn streak is a new episode. A `down`
//! probe does not end it, so a check that goes warn, down once, then warn
//! again warns once; but a DOWN incident that opens does: the incident is
//! the problem now, and the on-call person should have one open thing per
//! problem, not a warning and a page side by side. A DOWN that resolves
//! into `warn` opens a new episode.
//!
//! An episode whose WARN was sent ends with a WARN RESOLVED to the same
//! channels, which closes what the WARN opened (a PagerDuty incident, an
//! ntfy notification). Like a RESOLVED it is kept (`warn.resolving`)
//! until its pushes are in the outbox, so a restart in between still
//! sends it, once. One whose WARN is still in the grouper withdraws it
//! there; one whose WARN was held and never handed on ends silently.
//!
//! Not here: grouping (`group.rs`), what holds a page (`silence.rs`),
//! deciding blindness (`blind.rs`), and reading config (`policy.rs`).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::event::{Event, EventKind, Held, IncidentId, Snapshot};
use super::policy::Policy;
use super::silence::{Hold, UNCONFIRMED};
use crate::clock::saturating_add;
use crate::outcome::{Outcome, Status};

/// A probe as the state machine receives it, after the blind gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// An outcome that counts: `down` advances the failure streak, `up` and
    /// `warn` the recovery streak.
    Judged(Snapshot),
    /// `unknown (vigie blind)`: failed for lack of network while every
    /// canary failed too. Recorded, counted neither way.
    Unknown(Snapshot),
}

impl Observation {
    /// An outcome taken as it is (no blind gate).
    pub fn judged(outcome: &Outcome) -> Self {
        Observation::Judged(Snapshot::of(outcome))
    }

    fn snapshot(&self) -> &Snapshot {
        match self {
            Observation::Judged(s) | Observation::Unknown(s) => s,
        }
    }
}

/// The latest probe, and whether it could be judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Last {
    pub snapshot: Snapshot,
    /// `unknown (vigie blind)`.
    pub unknown: bool,
}

/// Where an incident's DOWN page stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Page {
    /// Not announced: a hold was in force when it fired (or since).
    Held {
        #[serde(with = "time::serde::rfc3339")]
        since: OffsetDateTime,
        by: String,
    },
    /// Handed to the grouper, not yet in the outbox.
    Due {
        #[serde(with = "time::serde::rfc3339")]
        at: OffsetDateTime,
    },
    /// In the outbox as `message_id`.
    Sent {
        #[serde(with = "time::serde::rfc3339")]
        at: OffsetDateTime,
        message_id: String,
    },
}

/// One firing (or resolving) incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    pub id: IncidentId,
    /// The first failed probe.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// The probe that crossed `failure_threshold`.
    #[serde(with = "time::serde::rfc3339")]
    pub fired_at: OffsetDateTime,
    pub first_failure: Snapshot,
    /// The last `up` or `warn` probe before it began.
    #[serde(with = "super::event::opt_rfc3339")]
    pub last_success: Option<OffsetDateTime>,
    /// `down` probes since `since`, in a row or not.
    pub failed_probes: u32,
    pub page: Page,
    /// What held the DOWN, once released: the DOWN mail says so.
    pub held: Option<Held>,
    pub reminders_sent: u32,
    /// A reminder was handed to the grouper and is not in the outbox yet.
    pub reminder_due: bool,
    /// When the latest mail about it entered the outbox.
    #[serde(with = "super::event::opt_rfc3339")]
    pub last_sent: Option<OffsetDateTime>,
    /// Message-IDs sent about it, oldest first (mail threading).
    pub thread: Vec<String>,
    #[serde(with = "super::event::opt_rfc3339")]
    pub resolved_at: Option<OffsetDateTime>,
    /// The probe that completed recovery.
    pub resolution: Option<Snapshot>,
}

/// One check's persisted alert state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertState {
    pub check: String,
    pub consecutive_failures: u32,
    /// Consecutive probes that were not `down`.
    pub consecutive_successes: u32,
    /// The first `down` probe of the current failure streak.
    pub streak_first: Option<Box<Snapshot>>,
    /// The latest `up` or `warn` probe.
    #[serde(with = "super::event::opt_rfc3339")]
    pub last_success: Option<OffsetDateTime>,
    pub last: Option<Last>,
    // Boxed, as is `streak_first`: most checks are quiet most of the
    // time, and 10,000 states kept inline would each carry room for both.
    pub incident: Option<Box<Incident>>,
    /// Resolved incidents whose RESOLVED is not in the outbox yet.
    pub resolving: Vec<Incident>,
    /// Incidents that ended in the last [`ENDED_KEPT`], newest last, for
    /// the daily report's "incidents in the last 24 h".
    // Always written (postcard, which the timeline tests also use, cannot
    // skip a field); absent in states written before it, hence the default.
    #[serde(default)]
    pub ended: Vec<EndedIncident>,
    /// The warn streak and its episode. Absent in states written before
    /// warn was pushed (the store keeps states as JSON), which read back
    /// as no streak and no episode: at worst one WARN after an upgrade.
    #[serde(default)]
    pub warn: WarnStreak,
}

/// A check's `warn` probes in a row, and the episode they opened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WarnStreak {
    /// `warn` probes in a row.
    pub consecutive: u32,
    /// The first `warn` probe of the streak.
    pub first: Option<Box<Snapshot>>,
    /// `up` probes in a row since the episode began; it ends at
    /// `recovery_threshold`.
    pub ups: u32,
    pub episode: Option<Box<WarnEpisode>>,
    /// Ended episodes whose WARN RESOLVED is not in the outbox yet, each
    /// with the probe that ended it. Absent in states written before warns
    /// were resolved: read back as none owed.
    #[serde(default)]
    pub resolving: Vec<EndedWarn>,
}

/// A warn episode that ended after its WARN was handed on, until its
/// WARN RESOLVED is in the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndedWarn {
    pub episode: WarnEpisode,
    /// The probe that ended it: the `up` that completed the recovery, or
    /// the `down` that opened an incident.
    pub ending: Snapshot,
}

/// One warn episode: announced (or held) once, never reminded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarnEpisode {
    /// `<check>@<start of the probe that crossed the threshold>`, as an
    /// incident's: the push's idempotency key derives from it.
    pub id: IncidentId,
    /// The first `warn` probe.
    pub first: Snapshot,
    /// Where its WARN stands; `Sent` once its pushes are in the outbox.
    pub page: Page,
}

/// How long an ended incident is kept in its check's state: a day for the
/// report, and a margin for a report sent late.
pub const ENDED_KEPT: time::Duration = time::Duration::hours(48);

/// At most this many ended incidents per check: a check that flaps all day
/// is one line of the report per incident, not an unbounded state.
pub const ENDED_MAX: usize = 50;

/// An incident that ended: what the daily report says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedIncident {
    /// The first failed probe.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// The probe that completed recovery.
    #[serde(with = "time::serde::rfc3339")]
    pub resolved_at: OffsetDateTime,
    /// The first failure, in words.
    pub first_failure: String,
    /// What held its page, if nobody was told.
    pub held: Option<String>,
}

impl AlertState {
    /// A check never seen before.
    pub fn new(check: &str) -> Self {
        Self {
            check: check.to_string(),
            consecutive_failures: 0,
            consecutive_successes: 0,
            streak_first: None,
            last_success: None,
            last: None,
            incident: None,
            resolving: Vec::new(),
            ended: Vec::new(),
            warn: WarnStreak::default(),
        }
    }

    pub fn is_firing(&self) -> bool {
        self.incident.is_some()
    }

    /// A WARN waits for its hold to end: [`tick`] must see this state.
    pub fn warn_held(&self) -> bool {
        self.warn
            .episode
            .as_ref()
            .is_some_and(|e| matches!(e.page, Page::Held { .. }))
    }

    /// Since when the check has been failing: its incident's start, or the
    /// current streak's below the threshold.
    pub fn failing_since(&self) -> Option<OffsetDateTime> {
        match &self.incident {
            Some(incident) => Some(incident.since),
            None => self.streak_first.as_ref().map(|s| s.started_at),
        }
    }
}

/// A new state and what it asks to be mailed.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub state: AlertState,
    pub events: Vec<Event>,
}

/// Takes one probe into account. `hold` is the check's hold at `now`
/// (see `silence::hold`); `policy.page = false` holds as well.
pub fn transition(
    state: AlertState,
    observation: Observation,
    now: OffsetDateTime,
    policy: &Policy,
    hold: Option<&Hold>,
) -> Step {
    let mut state = state;
    let mut events = Vec::new();
    state.last = Some(Last {
        snapshot: observation.snapshot().clone(),
        unknown: matches!(observation, Observation::Unknown(_)),
    });
    match &observation {
        // Blind: nothing learnt about the target, so no counter moves; the
        // probe is still the latest one shown.
        Observation::Unknown(_) => {}
        Observation::Judged(s) if s.status == Status::Down => {
            count_failure(&mut state, s);
            if state.incident.is_none()
                && policy.opens_incident(u64::from(state.consecutive_failures))
            {
                open(&mut state, s, now, policy, hold, &mut events);
            }
        }
        Observation::Judged(s) => {
            count_success(&mut state, s);
            let recovery_held = hold.is_some_and(Hold::holds_recovery);
            if state.is_firing()
                && state.consecutive_successes >= policy.recovery_threshold
                && !recovery_held
            {
                resolve(&mut state, s, now, policy, &mut events);
            }
        }
    }
    if let Observation::Judged(s) = &observation {
        count_warn(&mut state, s, now, policy, hold, &mut events);
    }
    let timed = tick(state, now, policy, hold);
    events.extend(timed.events);
    Step {
        state: timed.state,
        events,
    }
}

/// What time alone changes: a held DOWN released when its hold is gone, a
/// reminder once `repeat` has passed since the last mail. Call it on a
/// timer for every firing check; the state is unchanged when no event is
/// returned.
pub fn tick(state: AlertState, now: OffsetDateTime, policy: &Policy, hold: Option<&Hold>) -> Step {
    let mut state = state;
    let events = tick_in_place(&mut state, now, policy, hold);
    Step { state, events }
}

/// [`tick`] on a state in place: what the engine runs for every firing
/// check each second, so that the common case (nothing due) copies
/// nothing.
pub fn tick_in_place(
    state: &mut AlertState,
    now: OffsetDateTime,
    policy: &Policy,
    hold: Option<&Hold>,
) -> Vec<Event> {
    let mut events = Vec::new();
    let held = effective_hold(policy, hold).is_some();
    if !held {
        release_warn(state, now, policy, &mut events);
    }
    // A recovery the other vantages held back, released once they agree.
    let recovered = state.is_firing()
        && state.consecutive_successes >= policy.recovery_threshold
        && !hold.is_some_and(Hold::holds_recovery);
    if let (true, Some(last)) = (recovered, state.last.clone()) {
        if !last.unknown {
            resolve(state, &last.snapshot, now, policy, &mut events);
            return events;
        }
    }
    // A held DOWN is released only while the check still fails: one that
    // is recovering when its hold ends was never announced, and its
    // recovery needs no page.
    let failing = state.consecutive_successes == 0;
    let Some(incident) = state.incident.as_mut() else {
        return events;
    };
    match &incident.page {
        Page::Held { since, by } if !held && failing => {
            // A page that only waited for its confirmation was not held
            // back by anyone: its mail says who confirmed it instead.
            incident.held = (!by.starts_with(UNCONFIRMED)).then(|| Held {
                since: *since,
                by: by.clone(),
            });
            incident.page = Page::Due { at: now };
            let incident = incident.clone();
            events.push(event(EventKind::Down, state, &incident, now, policy));
        }
        Page::Sent { .. }
            if !held && !incident.reminder_due && reminder_is_due(incident, now, policy) =>
        {
            incident.reminder_due = true;
            let incident = incident.clone();
            events.push(event(EventKind::Reminder, state, &incident, now, policy));
        }
        _ => {}
    }
    events
}

/// Records that `event`'s mail entered the outbox as `message_id`; to be
/// written in the same transaction as the outbox entry. Events of other
/// incidents, and repeats, change nothing.
pub fn mark_sent(
    state: AlertState,
    event: &Event,
    message_id: &str,
    now: OffsetDateTime,
) -> AlertState {
    let mut state = state;
    match event.kind {
        EventKind::Down | EventKind::Reminder => {
            let Some(incident) = state.incident.as_mut().filter(|i| i.id == event.incident) else {
                return state;
            };
            match event.kind {
                EventKind::Down if matches!(incident.page, Page::Due { .. }) => {
                    incident.page = Page::Sent {
                        at: now,
                        message_id: message_id.to_string(),
                    };
                }
                EventKind::Reminder if incident.reminder_due => {
                    incident.reminder_due = false;
                    incident.reminders_sent = incident.reminders_sent.max(event.reminder);
                }
                _ => return state,
            }
            incident.last_sent = Some(now);
            // Another vantage's mail whose Message-ID is unknown: nothing
            // to thread under.
            if !message_id.is_empty() {
                incident.thread.push(message_id.to_string());
            }
        }
        // Once its RESOLVED is in the outbox, nothing more is owed about
        // the incident.
        EventKind::Resolved => state.resolving.retain(|i| i.id != event.incident),
        EventKind::WarnResolved => state
            .warn
            .resolving
            .retain(|w| w.episode.id != event.incident),
        EventKind::Warn => {
            let Some(episode) = state
                .warn
                .episode
                .as_mut()
                .filter(|e| e.id == event.incident)
            else {
                return state;
            };
            if matches!(episode.page, Page::Due { .. }) {
                episode.page = Page::Sent {
                    at: now,
                    message_id: message_id.to_string(),
                };
            }
        }
    }
    state
}

/// The events that were due but never reached the outbox (vigie stopped
/// in between): hand them to a fresh grouper at startup.
pub fn pending(state: &AlertState, now: OffsetDateTime, policy: &Policy) -> Vec<Event> {
    let mut events = Vec::new();
    if let Some(incident) = &state.incident {
        if matches!(incident.page, Page::Due { .. }) {
            events.push(event(EventKind::Down, state, incident, now, policy));
        }
        if incident.reminder_due {
            events.push(event(EventKind::Reminder, state, incident, now, policy));
        }
    }
    for incident in &state.resolving {
        events.push(event(EventKind::Resolved, state, incident, now, policy));
    }
    if let Some(episode) = &state.warn.episode {
        if matches!(episode.page, Page::Due { .. }) {
            events.push(warn_event(state, episode, now, policy));
        }
    }
    for ended in &state.warn.resolving {
        events.push(warn_resolved_event(state, ended, now, policy));
    }
    events
}

/// Moves the warn streak for a judged probe, and opens or ends its
/// episode (see the module doc).
fn count_warn(
    state: &mut AlertState,
    snapshot: &Snapshot,
    now: OffsetDateTime,
    policy: &Policy,
    hold: Option<&Hold>,
    events: &mut Vec<Event>,
) {
    let warn = &mut state.warn;
    match snapshot.status {
        Status::Warn => {
            warn.consecutive = warn.consecutive.saturating_add(1);
            warn.ups = 0;
            if warn.first.is_none() {
                warn.first = Some(Box::new(snapshot.clone()));
            }
        }
        Status::Down => {
            warn.consecutive = 0;
            warn.first = None;
            warn.ups = 0;
        }
        Status::Up => {
            warn.consecutive = 0;
            warn.first = None;
            if warn.episode.is_none() {
                return;
            }
            warn.ups = warn.ups.saturating_add(1);
            if warn.ups >= policy.recovery_threshold {
                end_warn(state, snapshot, now, policy, events);
            }
            return;
        }
    }
    let opens = snapshot.status == Status::Warn
        && warn.episode.is_none()
        && warn.consecutive >= policy.failure_threshold
        && state.incident.is_none();
    if !opens {
        return;
    }
    let first = warn.first.as_deref().unwrap_or(snapshot).clone();
    let page = match effective_hold(policy, hold) {
        Some(hold) => Page::Held {
            since: now,
            by: hold.describe(),
        },
        None => Page::Due { at: now },
    };
    let episode = WarnEpisode {
        id: IncidentId::new(&state.check, snapshot.started_at),
        first,
        page,
    };
    if matches!(episode.page, Page::Due { .. }) {
        events.push(warn_event(state, &episode, now, policy));
    }
    state.warn.episode = Some(Box::new(episode));
}

/// Ends the warn episode, if there is one, at `ending` (the probe that
/// completed its recovery, or the one that opened an incident): a WARN
/// that was handed on is closed by a WARN RESOLVED, owed until its pushes
/// are in the outbox; a held one was never told, so nothing is owed.
fn end_warn(
    state: &mut AlertState,
    ending: &Snapshot,
    now: OffsetDateTime,
    policy: &Policy,
    events: &mut Vec<Event>,
) {
    state.warn.ups = 0;
    let Some(episode) = state.warn.episode.take() else {
        return;
    };
    let sent = match episode.page {
        Page::Held { .. } => return,
        Page::Due { .. } => false,
        Page::Sent { .. } => true,
    };
    let ended = EndedWarn {
        episode: *episode,
        ending: ending.clone(),
    };
    events.push(warn_resolved_event(state, &ended, now, policy));
    // A WARN still in the grouper is withdrawn there by its WARN RESOLVED
    // (`Grouper::push`), as a DOWN is by its RESOLVED: nothing stays owed.
    if sent {
        state.warn.resolving.push(ended);
    }
}

/// A held WARN whose hold is gone, handed on while the check is still
/// `warn` and no incident fires; one that stopped warning in between was
/// never announced and needs no push.
fn release_warn(
    state: &mut AlertState,
    now: OffsetDateTime,
    policy: &Policy,
    events: &mut Vec<Event>,
) {
    let warning = state.warn.consecutive > 0 && !state.is_firing();
    let Some(episode) = state.warn.episode.as_mut() else {
        return;
    };
    if !warning || !matches!(episode.page, Page::Held { .. }) {
        return;
    }
    episode.page = Page::Due { at: now };
    let episode = episode.clone();
    events.push(warn_event(state, &episode, now, policy));
}

fn count_failure(state: &mut AlertState, snapshot: &Snapshot) {
    state.consecutive_failures = state.consecutive_failures.saturating_add(1);
    state.consecutive_successes = 0;
    if state.streak_first.is_none() {
        state.streak_first = Some(Box::new(snapshot.clone()));
    }
    if let Some(incident) = state.incident.as_mut() {
        incident.failed_probes = incident.failed_probes.saturating_add(1);
    }
}

fn count_success(state: &mut AlertState, snapshot: &Snapshot) {
    state.consecutive_successes = state.consecutive_successes.saturating_add(1);
    state.consecutive_failures = 0;
    state.streak_first = None;
    state.last_success = Some(snapshot.started_at);
}

fn open(
    state: &mut AlertState,
    crossing: &Snapshot,
    now: OffsetDateTime,
    policy: &Policy,
    hold: Option<&Hold>,
    events: &mut Vec<Event>,
) {
    let first = state.streak_first.as_deref().unwrap_or(crossing).clone();
    // The crossing probe's start names the incident: unique per check
    // (the store keeps one result per check and millisecond) and the same
    // if the transition is replayed.
    let page = match effective_hold(policy, hold) {
        Some(hold) => Page::Held {
            since: now,
            by: hold.describe(),
        },
        None => Page::Due { at: now },
    };
    let incident = Incident {
        id: IncidentId::new(&state.check, crossing.started_at),
        since: first.started_at,
        fired_at: crossing.started_at,
        first_failure: first,
        last_success: state.last_success,
        failed_probes: state.consecutive_failures,
        page,
        held: None,
        reminders_sent: 0,
        reminder_due: false,
        last_sent: None,
        thread: Vec::new(),
        resolved_at: None,
        resolution: None,
    };
    if matches!(incident.page, Page::Due { .. }) {
        events.push(event(EventKind::Down, state, &incident, now, policy));
    }
    state.incident = Some(Box::new(incident));
    // The incident supersedes the warn (see the module doc).
    end_warn(state, crossing, now, policy, events);
}

fn resolve(
    state: &mut AlertState,
    recovery: &Snapshot,
    now: OffsetDateTime,
    policy: &Policy,
    events: &mut Vec<Event>,
) {
    let Some(mut incident) = state.incident.take() else {
        return;
    };
    incident.resolved_at = Some(recovery.started_at);
    incident.resolution = Some(recovery.clone());
    incident.reminder_due = false;
    remember_ended(state, &incident, recovery.started_at);
    match incident.page {
        // Nobody was told: nothing to take back.
        Page::Held { .. } => {}
        // Its DOWN is still in the grouper: the RESOLVED withdraws it there
        // (`Grouper::push`), and nothing stays owed.
        Page::Due { .. } => {
            events.push(event(EventKind::Resolved, state, &incident, now, policy));
        }
        Page::Sent { .. } => {
            events.push(event(EventKind::Resolved, state, &incident, now, policy));
            state.resolving.push(*incident);
        }
    }
}

impl Incident {
    /// What holds its page while nobody has been told ("silence site until
    /// ..."), if anything does.
    pub fn held_by(&self) -> Option<&str> {
        match &self.page {
            Page::Held { by, .. } => Some(by),
            _ => None,
        }
    }
}

/// Keeps `incident`, just resolved at `at`, among the check's ended ones,
/// and forgets those older than [`ENDED_KEPT`] or beyond [`ENDED_MAX`].
fn remember_ended(state: &mut AlertState, incident: &Incident, at: OffsetDateTime) {
    let held = incident.held_by().map(str::to_string);
    state.ended.push(EndedIncident {
        since: incident.since,
        resolved_at: at,
        first_failure: incident
            .first_failure
            .headline()
            .unwrap_or("down")
            .to_string(),
        held,
    });
    state.ended.retain(|e| at - e.resolved_at <= ENDED_KEPT);
    let extra = state.ended.len().saturating_sub(ENDED_MAX);
    state.ended.drain(..extra);
}

/// `page = false` is a hold that never ends.
fn effective_hold(policy: &Policy, hold: Option<&Hold>) -> Option<Hold> {
    match policy.page {
        false => Some(Hold::no_page()),
        true => hold.cloned(),
    }
}

fn reminder_is_due(incident: &Incident, now: OffsetDateTime, policy: &Policy) -> bool {
    if policy.repeat.is_zero() {
        return false;
    }
    match incident.last_sent {
        Some(last) => now >= saturating_add(last, policy.repeat),
        None => false,
    }
}

/// The event of `kind` about `incident`, with what the mail shows.
fn event(
    kind: EventKind,
    state: &AlertState,
    incident: &Incident,
    now: OffsetDateTime,
    policy: &Policy,
) -> Event {
    let (latest, latest_unknown) = match (kind, &incident.resolution, &state.last) {
        (EventKind::Resolved, Some(resolution), _) => (resolution.clone(), false),
        (_, _, Some(last)) => (last.snapshot.clone(), last.unknown),
        _ => (incident.first_failure.clone(), false),
    };
    Event {
        kind,
        check: state.check.clone(),
        incident: incident.id.clone(),
        at: now,
        reminder: match kind {
            EventKind::Reminder => incident.reminders_sent.saturating_add(1),
            _ => 0,
        },
        to: policy.to.clone(),
        labels: policy.labels.clone(),
        since: incident.since,
        consecutive_failures: match kind {
            EventKind::Resolved => 0,
            _ => state.consecutive_failures,
        },
        failed_probes: incident.failed_probes,
        last_success: match kind {
            // The recovery is the latest success by then; the RESOLVED
            // mail shows the one before the incident instead.
            EventKind::Resolved => incident.last_success,
            _ => state.last_success,
        },
        first_failure: incident.first_failure.clone(),
        latest,
        latest_unknown,
        resolved_at: incident.resolved_at,
        held: incident.held.clone(),
        thread: incident.thread.clone(),
        vantage: None,
        fleet_key: None,
    }
}

/// The WARN of `episode`: the first and latest `warn` probes, the
/// streak's length as its probes in a row.
fn warn_event(
    state: &AlertState,
    episode: &WarnEpisode,
    now: OffsetDateTime,
    policy: &Policy,
) -> Event {
    let (latest, latest_unknown) = match &state.last {
        Some(last) => (last.snapshot.clone(), last.unknown),
        None => (episode.first.clone(), false),
    };
    Event {
        kind: EventKind::Warn,
        check: state.check.clone(),
        incident: episode.id.clone(),
        at: now,
        reminder: 0,
        to: policy.to.clone(),
        labels: policy.labels.clone(),
        since: episode.first.started_at,
        consecutive_failures: state.warn.consecutive,
        failed_probes: state.warn.consecutive,
        last_success: state.last_success,
        first_failure: episode.first.clone(),
        latest,
        latest_unknown,
        resolved_at: None,
        held: None,
        thread: Vec::new(),
        vantage: None,
        fleet_key: None,
    }
}

/// The WARN RESOLVED of `ended`: the warn's id, since and first probe,
/// and the probe that ended it as the latest.
fn warn_resolved_event(
    state: &AlertState,
    ended: &EndedWarn,
    now: OffsetDateTime,
    policy: &Policy,
) -> Event {
    let episode = &ended.episode;
    Event {
        kind: EventKind::WarnResolved,
        check: state.check.clone(),
        incident: episode.id.clone(),
        at: now,
        reminder: 0,
        to: policy.to.clone(),
        labels: policy.labels.clone(),
        since: episode.first.started_at,
        consecutive_failures: 0,
        failed_probes: 0,
        last_success: state.last_success,
        first_failure: episode.first.clone(),
        latest: ended.ending.clone(),
        latest_unknown: false,
        resolved_at: Some(ended.ending.started_at),
        held: None,
        thread: Vec::new(),
        vantage: None,
        fleet_key: None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::alert::testing::{down, policy, up, T0};
    use crate::outcome::Assertion;

    const PROBE: Duration = Duration::from_secs(30);

    fn feed(state: AlertState, outcomes: &[Outcome]) -> (AlertState, Vec<Event>) {
        let mut state = state;
        let mut events = Vec::new();
        for o in outcomes {
            let step = transition(state, Observation::judged(o), o.started_at, &policy(), None);
            state = step.state;
            events.extend(step.events);
        }
        (state, events)
    }

    #[test]
    fn an_ended_incident_is_kept_for_the_report_then_forgotten() {
        let (state, _) = feed(
            AlertState::new("site"),
            &[
                down("site", T0, Assertion::Connect),
                down("site", T0 + PROBE, Assertion::Connect),
                up("site", T0 + PROBE * 2),
                up("site", T0 + PROBE * 3),
            ],
        );
        assert!(!state.is_firing());
        assert_eq!(state.ended.len(), 1);
        let ended = &state.ended[0];
        assert_eq!(ended.since, T0);
        assert_eq!(ended.resolved_at, T0 + PROBE * 3);
        assert!(!ended.first_failure.is_empty());
        assert_eq!(ended.held, None);
        // Two days later, the next incident's end forgets the first.
        let later = T0 + Duration::from_secs(49 * 3600);
        let (state, _) = feed(
            state,
            &[
                down("site", later, Assertion::Connect),
                down("site", later + PROBE, Assertion::Connect),
                up("site", later + PROBE * 2),
                up("site", later + PROBE * 3),
            ],
        );
        assert_eq!(state.ended.len(), 1);
        assert_eq!(state.ended[0].since, later);
    }

    #[test]
    fn a_state_stored_before_warn_episodes_reads_back_as_none() {
        // What the store (JSON, `store/alerts.rs`) holds for a check that
        // was last written before the `warn` field existed.
        let old = r#"{"check":"site","consecutive_failures":0,"consecutive_successes":3,"streak_first":null,"last_success":"2026-11-29T07:00:00Z","last":null,"incident":null,"resolving":[],"ended":[]}"#;
        let state: AlertState = serde_json::from_str(old).unwrap();
        assert_eq!(state.warn, WarnStreak::default());
        assert!(!state.warn_held());
        // It warns like a fresh one.
        let (state, events) = feed(
            state,
            &[
                down("site", T0, Assertion::TlsRenewalOverdue),
                down("site", T0 + PROBE, Assertion::TlsRenewalOverdue),
            ],
        );
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, EventKind::Warn);
        assert_eq!(events[0].incident, IncidentId::new("site", T0 + PROBE));
        assert_eq!(
            state.warn.episode.as_ref().map(|e| &e.id),
            Some(&events[0].incident)
        );
    }

    #[test]
    fn an_unknown_probe_moves_no_warn_counter_and_a_down_breaks_the_streak() {
        let (state, _) = feed(
            AlertState::new("site"),
            &[down("site", T0, Assertion::TlsRenewalOverdue)],
        );
        let blind = Observation::Unknown(Snapshot::of(&down(
            "site",
            T0 + PROBE,
            Assertion::TlsRenewalOverdue,
        )));
        let step = transition(state, blind, T0 + PROBE, &policy(), None);
        assert_eq!(step.state.warn.consecutive, 1);
        assert!(step.events.is_empty());
        let (state, events) = feed(
            step.state,
            &[
                down("site", T0 + PROBE * 2, Assertion::Connect),
                down("site", T0 + PROBE * 3, Assertion::TlsRenewalOverdue),
            ],
        );
        assert_eq!(state.warn.consecutive, 1, "the down probe broke the streak");
        assert!(events.is_empty());
    }

    #[test]
    fn a_warn_is_marked_sent_once_and_pending_until_then() {
        let (state, events) = feed(
            AlertState::new("site"),
            &[
                down("site", T0, Assertion::TlsRenewalOverdue),
                down("site", T0 + PROBE, Assertion::TlsRenewalOverdue),
            ],
        );
        let again = pending(&state, T0 + PROBE * 3, &policy());
        assert_eq!(again.len(), 1);
        assert_eq!(
            (again[0].kind, &again[0].incident),
            (EventKind::Warn, &events[0].incident)
        );
        let sent = mark_sent(state, &events[0], "<warn@h>", T0 + PROBE);
        assert!(pending(&sent, T0 + PROBE * 3, &policy()).is_empty());
        let repeat = mark_sent(sent.clone(), &events[0], "<again@h>", T0 + PROBE * 2);
        assert_eq!(repeat, sent);
    }

    #[test]
    fn an_unknown_probe_moves_no_counter() {
        let (state, _) = feed(
            AlertState::new("site"),
            &[down("site", T0, Assertion::Connect)],
        );
        let blind =
            Observation::Unknown(Snapshot::of(&down("site", T0 + PROBE, Assertion::Timeout)));
        let step = transition(state, blind, T0 + PROBE, &policy(), None);
        assert_eq!(step.state.consecutive_failures, 1);
        assert!(step.events.is_empty());
        assert!(step.state.last.as_ref().is_some_and(|l| l.unknown));
    }

    #[test]
    fn the_crossing_probe_names_the_incident_and_the_first_failure_is_kept() {
        let first = down("site", T0 + PROBE, Assertion::Connect);
        let crossing = down("site", T0 + PROBE * 2, Assertion::Timeout);
        let (state, events) = feed(
            AlertState::new("site"),
            &[up("site", T0), first.clone(), crossing.clone()],
        );
        let incident = state.incident.as_ref().unwrap();
        assert_eq!(incident.id, IncidentId::new("site", crossing.started_at));
        assert_eq!(incident.since, first.started_at);
        assert_eq!(incident.last_success, Some(T0));
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].first_failure, Snapshot::of(&first));
        assert_eq!(events[0].latest, Snapshot::of(&crossing));
    }

    #[test]
    fn mark_sent_ignores_other_incidents_and_repeats() {
        let (state, events) = feed(
            AlertState::new("site"),
            &[
                down("site", T0, Assertion::Connect),
                down("site", T0 + PROBE, Assertion::Connect),
            ],
        );
        let mut other = events[0].clone();
        other.incident = IncidentId::new("site", T0 - PROBE);
        assert_eq!(mark_sent(state.clone(), &other, "<x@h>", T0), state);
        let sent = mark_sent(state, &events[0], "<down@h>", T0 + PROBE);
        let again = mark_sent(sent.clone(), &events[0], "<again@h>", T0 + PROBE * 2);
        assert_eq!(again, sent, "a DOWN is sent once");
        assert_eq!(sent.incident.as_ref().unwrap().thread, ["<down@h>"]);
        assert!(pending(&sent, T0, &policy()).is_empty());
    }

    #[test]
    fn pending_gives_back_what_is_due_and_not_sent() {
        let (state, events) = feed(
            AlertState::new("site"),
            &[
                down("site", T0, Assertion::Connect),
                down("site", T0 + PROBE, Assertion::Connect),
            ],
        );
        let again = pending(&state, T0 + PROBE * 3, &policy());
        assert_eq!(again.len(), 1);
        assert_eq!(
            (again[0].kind, &again[0].incident),
            (EventKind::Down, &events[0].incident)
        );
    }

    #[test]
    fn a_yearly_reminder_near_the_end_of_the_calendar_saturates() {
        let year = crate::config::limits::MAX_REPEAT;
        let policy = Policy {
            repeat: year,
            ..policy()
        };
        let end = crate::clock::FAR_FUTURE;
        let hour = Duration::from_secs(3600);
        let (first, second) = (end - 2 * hour, end - hour);
        let mut state = AlertState::new("site");
        let mut events = Vec::new();
        for o in [
            down("site", first, Assertion::Connect),
            down("site", second, Assertion::Connect),
        ] {
            let step = transition(state, Observation::judged(&o), o.started_at, &policy, None);
            state = step.state;
            events.extend(step.events);
        }
        assert_eq!(events.len(), 1, "the DOWN");
        let state = mark_sent(state, &events[0], "<down@h>", second);
        // `last_sent + 1 year` is past the year 9999: it used to panic
        // here; now the reminder is simply not due before the calendar ends.
        let step = tick(state, end - Duration::from_secs(1), &policy, None);
        assert!(step.events.is_empty(), "{:?}", step.events);
        assert!(step.state.is_firing());
        // Where a year fits, it is due after exactly a year.
        let (state, events) = feed(
            AlertState::new("site"),
            &[
                down("site", T0, Assertion::Connect),
                down("site", T0 + PROBE, Assertion::Connect),
            ],
        );
        let state = mark_sent(state, &events[0], "<down@h>", T0 + PROBE);
        let early = tick(state.clone(), T0 + PROBE + year - PROBE, &policy, None);
        assert!(early.events.is_empty());
        let due = tick(state, T0 + PROBE + year, &policy, None);
        assert_eq!(due.events.len(), 1);
        assert_eq!(due.events[0].kind, EventKind::Reminder);
    }

    #[test]
    fn a_held_incident_that_recovers_leaves_nothing_owed() {
        let hold = Hold::no_page();
        let mut state = AlertState::new("site");
        let mut events = Vec::new();
        let outcomes = [
            down("site", T0, Assertion::Connect),
            down("site", T0 + PROBE, Assertion::Connect),
            up("site", T0 + PROBE * 2),
            up("site", T0 + PROBE * 3),
        ];
        for o in &outcomes {
            let step = transition(
                state,
                Observation::judged(o),
                o.started_at,
                &policy(),
                Some(&hold),
            );
            state = step.state;
            events.extend(step.events);
        }
        assert!(events.is_empty());
        assert!(!state.is_firing() && state.resolving.is_empty());
    }
}
