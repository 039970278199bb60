//! Timeline tests: the engine driven the way the daemon drives it, with a
//! fake clock, a probe round every 30 s, a tick and a poll every 5 s, and
//! the "store" and "outbox" kept as the daemon would keep them. Mails that
//! matter are compared with the files in `tests/fixtures/mail/`.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use time::macros::datetime;
use time::OffsetDateTime;

use super::engine::Engine;
use super::event::{Event, EventKind, IncidentId};
use super::policy::Policy;
use super::render::Email;
use super::silence::{self, Hold, Silence};
use super::state::{AlertState, Page};
use super::testing::{down, golden_mail, policy, up, T0};
use crate::clock::{Clock, FakeClock};
use crate::config::MaintenanceWindow;
use crate::outcome::{Assertion, Outcome};

const HOST: &str = "probe-1.example.net";
const WINDOW: Duration = Duration::from_secs(30);
const PROBE_EVERY: Duration = Duration::from_secs(30);
const STEP: Duration = Duration::from_secs(5);
const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// What the daemon around the engine would hold.
struct World {
    clock: FakeClock,
    engine: Engine,
    /// Per-check policy changes from [`policy`].
    policies: BTreeMap<String, Policy>,
    silences: Vec<Silence>,
    windows: Vec<MaintenanceWindow>,
    /// The `alert_state` tree.
    store: BTreeMap<String, AlertState>,
    /// Writes to it.
    writes: usize,
    outbox: Vec<Email>,
    /// The WARN events handed on: the daemon routes them to the push
    /// channels that ask for them, never to the outbox.
    warns: Vec<Event>,
    /// The WARN RESOLVED events handed on, routed as the WARNs are.
    warn_ends: Vec<Event>,
}

impl World {
    fn new(start: OffsetDateTime) -> Self {
        Self {
            clock: FakeClock::new(start),
            engine: Engine::new(HOST, WINDOW, Vec::new(), start, |_| policy()),
            policies: BTreeMap::new(),
            silences: Vec::new(),
            windows: Vec::new(),
            store: BTreeMap::new(),
            writes: 0,
            outbox: Vec::new(),
            warns: Vec::new(),
            warn_ends: Vec::new(),
        }
    }

    fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    fn policy_of(&self, check: &str) -> Policy {
        self.policies.get(check).cloned().unwrap_or_else(policy)
    }

    fn hold_of(&self, check: &str) -> Option<Hold> {
        silence::hold(check, self.now(), &self.silences, &self.windows)
    }

    /// Runs for `duration`: canaries then checks every 30 s, tick and poll
    /// every 5 s.
    fn run(
        &mut self,
        duration: Duration,
        canaries: impl Fn(OffsetDateTime) -> Vec<Outcome>,
        checks: impl Fn(OffsetDateTime) -> Vec<Outcome>,
    ) {
        let end = self.now() + duration;
        while self.now() < end {
            let now = self.now();
            if (now - T0).whole_seconds() % PROBE_EVERY.as_secs() as i64 == 0 {
                let round = canaries(now);
                let hold = self.hold_of(super::NETWORK_CHECK);
                let network = policy();
                if let Some(s) = self.engine.canaries(&round, now, &network, hold.as_ref()) {
                    self.persist(s);
                }
                for outcome in checks(now) {
                    let (p, hold) = (self.policy_of(&outcome.name), self.hold_of(&outcome.name));
                    if let Some(s) = self.engine.observe(&outcome, now, &p, hold.as_ref()) {
                        self.persist(s);
                    }
                }
            }
            let (policies, silences, windows) = (
                self.policies.clone(),
                self.silences.clone(),
                self.windows.clone(),
            );
            let fallback = policy();
            let changed = self.engine.tick(
                now,
                |c| policies.get(c).unwrap_or(&fallback),
                |c| silence::hold(c, now, &silences, &windows),
            );
            changed.into_iter().for_each(|s| self.persist(s));
            for n in self.engine.poll_notifications(now) {
                let out = self.engine.outbound(&n, now);
                match n.kind {
                    EventKind::Warn => self.warns.extend(n.events),
                    EventKind::WarnResolved => self.warn_ends.extend(n.events),
                    _ => self.outbox.push(out.email),
                }
                out.states.into_iter().for_each(|s| self.persist(s));
            }
            self.clock.advance(STEP);
        }
    }

    /// Runs with no canaries configured.
    fn checks(&mut self, duration: Duration, checks: impl Fn(OffsetDateTime) -> Vec<Outcome>) {
        self.run(duration, |_| Vec::new(), checks);
    }

    fn persist(&mut self, state: AlertState) {
        self.writes += 1;
        self.store.insert(state.check.clone(), state);
    }

    /// vigie killed and started again: what is not in the store is lost
    /// (the grouper's memory, the gate's verdict). The states go through
    /// both JSON and postcard, as the store may keep either.
    fn restart(&mut self) {
        let states: Vec<AlertState> = self
            .store
            .values()
            .map(|s| {
                let json: AlertState =
                    serde_json::from_str(&serde_json::to_string(s).unwrap()).unwrap();
                let bytes = postcard::to_allocvec(&json).unwrap();
                let back: AlertState = postcard::from_bytes(&bytes).unwrap();
                assert_eq!(&back, s, "a state survives serialization");
                back
            })
            .collect();
        let policies = self.policies.clone();
        self.engine = Engine::new(HOST, WINDOW, states, self.now(), |c| {
            policies.get(c).cloned().unwrap_or_else(policy)
        });
    }

    fn subjects(&self) -> Vec<&str> {
        self.outbox.iter().map(|e| e.subject.as_str()).collect()
    }

    /// The WARN events handed on, as (check, warn id).
    fn warned(&self) -> Vec<(&str, &str)> {
        self.warns
            .iter()
            .map(|e| (e.check.as_str(), e.incident.as_str()))
            .collect()
    }

    /// The WARN RESOLVED events handed on, as (check, warn id).
    fn warn_ended(&self) -> Vec<(&str, &str)> {
        self.warn_ends
            .iter()
            .map(|e| (e.check.as_str(), e.incident.as_str()))
            .collect()
    }
}

fn all(
    names: &[&str],
    at: OffsetDateTime,
    make: fn(&str, OffsetDateTime) -> Outcome,
) -> Vec<Outcome> {
    names.iter().map(|n| make(n, at)).collect()
}

fn expired(name: &str, at: OffsetDateTime) -> Outcome {
    down(name, at, Assertion::TlsExpiry)
}

fn refused(name: &str, at: OffsetDateTime) -> Outcome {
    down(name, at, Assertion::Connect)
}

fn timed_out(name: &str, at: OffsetDateTime) -> Outcome {
    down(name, at, Assertion::Timeout)
}

/// `warn`: the renewal is overdue.
fn overdue(name: &str, at: OffsetDateTime) -> Outcome {
    down(name, at, Assertion::TlsRenewalOverdue)
}

#[test]
fn one_failed_probe_does_not_page() {
    let mut w = World::new(T0);
    w.checks(10 * MIN, |t| match t == T0 + MIN {
        true => vec![expired("site", t)],
        false => vec![up("site", t)],
    });
    assert!(w.outbox.is_empty(), "{:?}", w.subjects());
}

#[test]
fn a_flapping_target_never_pages() {
    let mut w = World::new(T0);
    // Down, up, down, up...: never two failures in a row.
    w.checks(2 * HOUR, |t| match (t - T0).whole_seconds() / 30 % 2 {
        0 => vec![refused("site", t)],
        _ => vec![up("site", t)],
    });
    assert!(w.outbox.is_empty(), "{:?}", w.subjects());
    let state = w.engine.state("site").unwrap();
    assert!(!state.is_firing());
}

#[test]
fn threshold_reminders_and_resolution_thread_together() {
    let mut w = World::new(T0);
    let broken_until = T0 + 5 * HOUR;
    w.checks(5 * HOUR + 10 * MIN, |t| match t {
        t if t < T0 + MIN => vec![up("site", t)],
        t if t < broken_until => vec![expired("site", t)],
        t => vec![up("site", t)],
    });
    assert_eq!(
        w.subjects(),
        [
            "[vigie] DOWN site: certificate expired 2 days ago",
            "[vigie] STILL DOWN site for 4 h 1 min: certificate expired 2 days ago",
            "[vigie] RESOLVED site after 4 h 59 min",
        ]
    );
    let (down, reminder, resolved) = (&w.outbox[0], &w.outbox[1], &w.outbox[2]);
    assert_eq!(down.in_reply_to, None);
    assert_eq!(reminder.in_reply_to.as_ref(), Some(&down.message_id));
    assert_eq!(reminder.references, vec![down.message_id.clone()]);
    assert_eq!(resolved.in_reply_to.as_ref(), Some(&reminder.message_id));
    assert_eq!(
        resolved.references,
        [down.message_id.clone(), reminder.message_id.clone()]
    );
    golden_mail("down-site", down);
    golden_mail("reminder-site", reminder);
    golden_mail("resolved-site", resolved);
    let state = w.engine.state("site").unwrap();
    assert!(!state.is_firing() && state.resolving.is_empty());
}

#[test]
fn the_down_mail_goes_out_within_the_group_window_of_the_crossing_probe() {
    let mut w = World::new(T0);
    w.checks(3 * MIN, |t| vec![expired("site", t)]);
    // Failures at T0 and T0+30s: the second crosses the threshold, the
    // group closes 30 s later.
    assert_eq!(w.outbox.len(), 1);
    let sent = w.store["site"]
        .incident
        .as_ref()
        .unwrap()
        .last_sent
        .unwrap();
    assert_eq!(sent, T0 + PROBE_EVERY + WINDOW);
}

#[test]
fn five_simultaneous_failures_make_one_mail_and_one_resolution() {
    let names = ["site", "app", "api", "uploads-cors", "admin"];
    let mut w = World::new(T0);
    w.checks(20 * MIN, |t| match t {
        t if t < T0 + MIN => all(&names, t, up),
        t if t < T0 + 10 * MIN => all(&names, t, refused),
        t => all(&names, t, up),
    });
    assert_eq!(
        w.subjects(),
        [
            "[vigie] 5 checks DOWN: site, app, api, uploads-cors, admin",
            "[vigie] 5 checks RESOLVED: site, app, api, uploads-cors, admin",
        ]
    );
    let (down, resolved) = (&w.outbox[0], &w.outbox[1]);
    assert_eq!(resolved.references, vec![down.message_id.clone()]);
    golden_mail("down-grouped", down);
    golden_mail("resolved-grouped", resolved);
}

#[test]
fn a_maintenance_window_holds_the_page_and_releases_it_when_still_down() {
    // Sunday 2026-11-29, 19:59; the window opens at 20:00 for 11 h.
    let start = datetime!(2026-11-29 19:59 UTC);
    let mut w = World::new(start);
    w.windows.push(MaintenanceWindow {
        checks: vec!["staging-*".to_string()],
        schedule: cron::Schedule::from_str("0 0 20 * * *").unwrap(),
        duration: 11 * HOUR,
        public: false,
    });
    w.checks(12 * HOUR, |t| {
        let asleep = t >= datetime!(2026-11-29 20:05 UTC);
        // staging-web comes back before the window closes; staging-api
        // does not.
        let web_back = t >= datetime!(2026-11-30 06:00 UTC);
        vec![
            match asleep {
                true => refused("staging-api", t),
                false => up("staging-api", t),
            },
            match asleep && !web_back {
                true => refused("staging-web", t),
                false => up("staging-web", t),
            },
        ]
    });
    assert_eq!(
        w.subjects(),
        ["[vigie] DOWN staging-api: connection refused"],
        "nothing during the window; staging-web recovered in time"
    );
    let sent = w.store["staging-api"]
        .incident
        .as_ref()
        .unwrap()
        .last_sent
        .unwrap();
    assert_eq!(
        sent,
        datetime!(2026-11-30 07:00:30 UTC),
        "window end + group window"
    );
    golden_mail("down-after-maintenance", &w.outbox[0]);
}

#[test]
fn a_silence_holds_the_page_and_releases_it_when_still_down() {
    let mut w = World::new(T0);
    w.silences
        .push(Silence::new("si*", HOUR, "replacing the load balancer", T0).unwrap());
    w.checks(HOUR + 5 * MIN, |t| vec![refused("site", t), up("app", t)]);
    assert_eq!(w.subjects(), ["[vigie] DOWN site: connection refused"]);
    let sent = w.store["site"]
        .incident
        .as_ref()
        .unwrap()
        .last_sent
        .unwrap();
    assert_eq!(sent, T0 + HOUR + WINDOW);
    assert!(w.outbox[0].text.contains("by silence si* until"));
}

#[test]
fn an_incident_that_ends_during_its_silence_is_never_mailed() {
    let mut w = World::new(T0);
    w.silences.push(Silence::new("site", HOUR, "", T0).unwrap());
    w.checks(2 * HOUR, |t| match t < T0 + 30 * MIN {
        true => vec![refused("site", t)],
        false => vec![up("site", t)],
    });
    assert!(w.outbox.is_empty(), "{:?}", w.subjects());
    assert!(w.store["site"].resolving.is_empty());
}

#[test]
fn a_silence_after_the_page_holds_reminders_but_not_the_resolution() {
    let mut w = World::new(T0);
    w.checks(10 * MIN, |t| vec![refused("site", t)]);
    w.silences
        .push(Silence::new("site", 8 * HOUR, "", w.now()).unwrap());
    w.checks(6 * HOUR, |t| vec![refused("site", t)]);
    w.checks(5 * MIN, |t| vec![up("site", t)]);
    assert_eq!(
        w.subjects(),
        [
            "[vigie] DOWN site: connection refused",
            "[vigie] RESOLVED site after 6 h 10 min",
        ]
    );
}

#[test]
fn page_false_tracks_but_never_mails() {
    let mut w = World::new(T0);
    w.policies.insert(
        "batch".to_string(),
        Policy {
            page: false,
            ..policy()
        },
    );
    w.checks(5 * HOUR, |t| vec![refused("batch", t)]);
    assert!(w.outbox.is_empty());
    assert!(
        w.store["batch"].is_firing(),
        "still an incident, for the report"
    );
}

#[test]
fn a_warning_never_pages_and_resolves_a_down() {
    let mut w = World::new(T0);
    w.checks(HOUR, |t| {
        vec![down("site", t, Assertion::TlsRenewalOverdue)]
    });
    assert!(w.outbox.is_empty());
    w.checks(5 * MIN, |t| vec![refused("site", t)]);
    w.checks(5 * MIN, |t| {
        vec![down("site", t, Assertion::TlsRenewalOverdue)]
    });
    assert_eq!(
        w.subjects(),
        [
            "[vigie] DOWN site: connection refused",
            "[vigie] RESOLVED site after 5 min 30 s",
        ]
    );
    assert!(w.outbox[1].text.contains("warn: renewal looks stuck"));
    let first = IncidentId::new("site", T0 + PROBE_EVERY);
    // The probe that resolved the DOWN was `warn`, and opened a new episode.
    let second = IncidentId::new("site", T0 + HOUR + 5 * MIN + PROBE_EVERY);
    assert_eq!(
        w.warned(),
        [("site", first.as_str()), ("site", second.as_str())],
        "a WARN for the hour of warn, another once the DOWN is over"
    );
    assert_eq!(
        w.warn_ended(),
        [("site", first.as_str())],
        "the DOWN superseded the first warn: one open thing per problem"
    );
    assert_eq!(w.warn_ends[0].latest.status, crate::outcome::Status::Down);
    assert!(w.store["site"].warn.resolving.is_empty());
}

#[test]
fn a_down_probe_that_opens_no_incident_keeps_the_warn_open() {
    let mut w = World::new(T0);
    w.checks(10 * MIN, |t| match t == T0 + 5 * MIN {
        true => vec![refused("site", t)],
        false => vec![overdue("site", t)],
    });
    assert!(w.outbox.is_empty());
    assert_eq!(w.warns.len(), 1);
    assert!(w.warn_ends.is_empty(), "one down probe supersedes nothing");
}

#[test]
fn a_warn_is_handed_on_once_per_episode_and_never_mailed() {
    let mut w = World::new(T0);
    w.checks(HOUR, |t| vec![overdue("site", t)]);
    assert!(w.outbox.is_empty(), "a warn is never mailed");
    let first = IncidentId::new("site", T0 + PROBE_EVERY);
    assert_eq!(
        w.warned(),
        [("site", first.as_str())],
        "once, when the threshold is crossed, and no reminder"
    );
    assert!(matches!(
        w.store["site"].warn.episode.as_ref().unwrap().page,
        Page::Sent { .. }
    ));
    // One good probe is not a recovery: warning again is the same episode.
    w.checks(PROBE_EVERY, |t| vec![up("site", t)]);
    w.checks(5 * MIN, |t| vec![overdue("site", t)]);
    assert_eq!(w.warns.len(), 1);
    // `recovery_threshold` good probes end it, and its end is handed on
    // once (past the grouping window), never mailed.
    w.checks(2 * MIN, |t| vec![up("site", t)]);
    assert!(w.store["site"].warn.episode.is_none());
    assert_eq!(w.warns.len(), 1);
    assert_eq!(w.warn_ended(), [("site", first.as_str())]);
    assert!(w.store["site"].warn.resolving.is_empty(), "nothing owed");
    let end = &w.warn_ends[0];
    assert_eq!(end.since, T0, "the warn's first probe");
    assert!(end.resolved_at.is_some());
    w.checks(HOUR, |t| vec![up("site", t)]);
    assert_eq!(w.warn_ends.len(), 1, "resolved once");
    // The next warn streak is a new episode, with an id of its own.
    let crossing = w.now() + PROBE_EVERY;
    w.checks(5 * MIN, |t| vec![overdue("site", t)]);
    let second = IncidentId::new("site", crossing);
    assert_eq!(
        w.warned(),
        [("site", first.as_str()), ("site", second.as_str())]
    );
    assert!(w.outbox.is_empty());
}

#[test]
fn no_warn_while_a_down_fires_and_one_once_it_resolves_into_warn() {
    let mut w = World::new(T0);
    w.policies.insert(
        "site".to_string(),
        Policy {
            recovery_threshold: 3,
            ..policy()
        },
    );
    w.checks(5 * MIN, |t| vec![refused("site", t)]);
    // Two warn probes: a streak long enough, but the DOWN still fires.
    w.checks(2 * PROBE_EVERY, |t| vec![overdue("site", t)]);
    assert!(w.store["site"].is_firing());
    assert!(w.store["site"].warn.episode.is_none());
    w.checks(5 * MIN, |t| vec![overdue("site", t)]);
    assert_eq!(
        w.subjects(),
        [
            "[vigie] DOWN site: connection refused",
            "[vigie] RESOLVED site after 6 min",
        ]
    );
    // The probe that resolved the DOWN opened the warn episode.
    let resolving_probe = T0 + 5 * MIN + 2 * PROBE_EVERY;
    assert_eq!(
        w.warned(),
        [("site", IncidentId::new("site", resolving_probe).as_str())]
    );
    assert!(w.warns[0].latest.headline().unwrap().contains("renewal"));
}

#[test]
fn a_silence_holds_the_warn_and_releases_it_while_still_warn() {
    let mut w = World::new(T0);
    w.silences.push(Silence::new("site", HOUR, "", T0).unwrap());
    w.silences.push(Silence::new("app", HOUR, "", T0).unwrap());
    w.checks(2 * HOUR, |t| {
        let app = match t < T0 + 30 * MIN {
            true => overdue("app", t),
            false => up("app", t),
        };
        vec![overdue("site", t), app]
    });
    assert_eq!(
        w.warned(),
        [("site", IncidentId::new("site", T0 + PROBE_EVERY).as_str())],
        "site once its silence ended; app stopped warning before its own did"
    );
    assert!(w.warns[0].at >= T0 + HOUR);
    assert!(w.store["app"].warn.episode.is_none());
    assert!(w.outbox.is_empty());
    assert!(
        w.warn_ends.is_empty(),
        "app's held WARN was never sent, so its end is not either"
    );
    // site's, sent once the silence ended, is closed when it recovers.
    w.checks(5 * MIN, |t| vec![up("site", t), up("app", t)]);
    assert_eq!(w.warn_ended(), [("site", w.warned()[0].1)]);
}

#[test]
fn a_held_warn_that_recovers_is_never_resolved() {
    let mut w = World::new(T0);
    w.silences.push(Silence::new("site", HOUR, "", T0).unwrap());
    w.checks(10 * MIN, |t| vec![overdue("site", t)]);
    assert!(w.store["site"].warn_held());
    w.checks(10 * MIN, |t| vec![up("site", t)]);
    assert!(w.store["site"].warn.episode.is_none());
    assert!(w.warns.is_empty() && w.warn_ends.is_empty() && w.outbox.is_empty());
    assert!(w.store["site"].warn.resolving.is_empty());
}

#[test]
fn a_warn_resolution_due_when_vigie_stopped_goes_out_once_after_the_restart() {
    let mut w = World::new(T0);
    w.checks(10 * MIN, |t| vec![overdue("site", t)]);
    assert_eq!(w.warns.len(), 1);
    // Two up probes end the episode at T0+10m30s; stop before the group
    // window closes, with the WARN RESOLVED owed in the store.
    w.checks(Duration::from_secs(40), |t| vec![up("site", t)]);
    assert!(w.warn_ends.is_empty());
    assert_eq!(w.store["site"].warn.resolving.len(), 1, "persisted as owed");
    w.restart();
    w.checks(5 * MIN, |t| vec![up("site", t)]);
    assert_eq!(w.warn_ended(), [("site", w.warned()[0].1)]);
    w.restart();
    w.checks(HOUR, |t| vec![up("site", t)]);
    assert_eq!(
        w.warn_ends.len(),
        1,
        "a sent WARN RESOLVED is not sent again"
    );
    assert_eq!(w.warns.len(), 1);
}

#[test]
fn page_false_never_warns() {
    let mut w = World::new(T0);
    w.policies.insert(
        "batch".to_string(),
        Policy {
            page: false,
            ..policy()
        },
    );
    w.checks(5 * HOUR, |t| vec![overdue("batch", t)]);
    assert!(w.warns.is_empty() && w.outbox.is_empty());
    assert!(w.store["batch"].warn_held(), "held for good");
}

#[test]
fn a_warn_due_when_vigie_stopped_goes_out_once_after_the_restart() {
    let mut w = World::new(T0);
    // Crossed at T0+30s; stop before the group window closes.
    w.checks(40 * Duration::from_secs(1), |t| vec![overdue("site", t)]);
    assert!(w.warns.is_empty());
    w.restart();
    w.checks(5 * MIN, |t| vec![overdue("site", t)]);
    assert_eq!(w.warns.len(), 1);
    w.restart();
    w.checks(HOUR, |t| vec![overdue("site", t)]);
    assert_eq!(w.warns.len(), 1, "a sent WARN is not sent again");
}

#[test]
fn when_blind_checks_do_not_page_and_vigie_sends_one_self_alert() {
    let names = ["site", "app", "api"];
    let mut w = World::new(T0);
    let blind_until = T0 + 20 * MIN;
    w.run(
        30 * MIN,
        |t| match t < blind_until {
            true => vec![refused("wikipedia", t), timed_out("one", t)],
            false => vec![up("wikipedia", t), up("one", t)],
        },
        |t| match t < blind_until {
            true => all(&names, t, timed_out),
            false => all(&names, t, up),
        },
    );
    assert_eq!(
        w.subjects(),
        [
            "[vigie] DOWN vigie cannot reach the network from probe-1.example.net",
            "[vigie] RESOLVED vigie can reach the network again from probe-1.example.net",
        ]
    );
    for name in names {
        let s = &w.store[name];
        assert_eq!(
            s.consecutive_failures, 0,
            "{name}: unknown is not a failure"
        );
        assert!(!s.is_firing());
    }
    let last = w.store["site"].last.as_ref().unwrap();
    assert!(!last.unknown, "judged again once canaries answer");
    golden_mail("network-down", &w.outbox[0]);
    golden_mail("network-resolved", &w.outbox[1]);
}

#[test]
fn with_canaries_up_every_check_down_is_one_grouped_page() {
    let names = ["site", "app", "api"];
    let mut w = World::new(T0);
    w.run(
        5 * MIN,
        |t| vec![up("wikipedia", t), up("one", t)],
        |t| all(&names, t, refused),
    );
    assert_eq!(w.subjects(), ["[vigie] 3 checks DOWN: site, app, api"]);
}

#[test]
fn without_canaries_every_check_down_is_one_grouped_page() {
    let names = ["site", "app", "api"];
    let mut w = World::new(T0);
    w.checks(5 * MIN, |t| all(&names, t, timed_out));
    assert_eq!(w.subjects(), ["[vigie] 3 checks DOWN: site, app, api"]);
}

#[test]
fn a_quiet_check_is_written_every_ten_minutes_and_a_change_at_once() {
    let mut w = World::new(T0);
    w.checks(HOUR, |t| vec![up("site", t)]);
    assert_eq!(
        w.writes, 6,
        "120 probes: the first, then one per 10-minute period"
    );
    let quiet = w.writes;
    w.checks(PROBE_EVERY, |t| vec![refused("site", t)]);
    assert_eq!(w.writes, quiet + 1, "a failure is written at once");
    assert_eq!(w.store["site"].consecutive_failures, 1);
    w.checks(PROBE_EVERY, |t| vec![up("site", t)]);
    assert_eq!(w.writes, quiet + 2, "so is the recovery");
    assert_eq!(w.store["site"].consecutive_failures, 0);
    w.checks(5 * MIN, |t| vec![up("site", t)]);
    w.restart();
    w.checks(5 * MIN, |t| vec![expired("site", t)]);
    assert_eq!(
        w.subjects(),
        ["[vigie] DOWN site: certificate expired 2 days ago"],
        "a stale quiet state pages like a fresh one"
    );
}

#[test]
fn a_restart_mid_incident_neither_repages_nor_forgets() {
    let mut w = World::new(T0);
    w.checks(10 * MIN, |t| vec![expired("site", t)]);
    assert_eq!(w.outbox.len(), 1);
    w.restart();
    w.checks(HOUR, |t| vec![expired("site", t)]);
    assert_eq!(w.outbox.len(), 1, "no second DOWN after the restart");
    w.restart();
    w.checks(3 * HOUR, |t| vec![expired("site", t)]);
    w.restart();
    w.checks(5 * MIN, |t| vec![up("site", t)]);
    let subjects = w.subjects();
    assert_eq!(
        subjects,
        [
            "[vigie] DOWN site: certificate expired 2 days ago",
            "[vigie] STILL DOWN site for 4 h 1 min: certificate expired 2 days ago",
            "[vigie] RESOLVED site after 4 h 10 min",
        ]
    );
    assert_eq!(w.outbox[2].references[0], w.outbox[0].message_id);
}

#[test]
fn a_page_due_when_vigie_stopped_goes_out_once_after_the_restart() {
    let mut w = World::new(T0);
    // The threshold is crossed at T0+30s; stop 10 s later, before the
    // group window closes.
    w.checks(40 * Duration::from_secs(1), |t| vec![refused("site", t)]);
    assert!(w.outbox.is_empty());
    w.restart();
    w.checks(5 * MIN, |t| vec![refused("site", t)]);
    assert_eq!(w.subjects(), ["[vigie] DOWN site: connection refused"]);
}

#[test]
fn a_resolution_due_when_vigie_stopped_goes_out_once_after_the_restart() {
    let mut w = World::new(T0);
    w.checks(5 * MIN, |t| vec![refused("site", t)]);
    // Two good probes resolve it at +5m30s; stop before the group closes.
    w.checks(35 * Duration::from_secs(1), |t| vec![up("site", t)]);
    assert_eq!(w.outbox.len(), 1);
    assert_eq!(w.store["site"].resolving.len(), 1);
    w.restart();
    w.checks(5 * MIN, |t| vec![up("site", t)]);
    assert_eq!(
        w.subjects(),
        [
            "[vigie] DOWN site: connection refused",
            "[vigie] RESOLVED site after 5 min 30 s",
        ]
    );
    assert!(w.store["site"].resolving.is_empty());
}
