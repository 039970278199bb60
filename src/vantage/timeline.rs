//! Timeline tests of the quorum rule: this node's alert engine driven as
//! the daemon drives it (a probe every 30 s, a tick every 5 s), its holds
//! taken from a [`Fleet`] whose peers follow a script, as the vantage task
//! would read them from the bucket.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::published::{CheckView, NodeHealth, NodeState, ViewStatus};
use super::quorum::{Coordination, Fleet, Peer};
use crate::alert::testing::{down, policy, up, T0};
use crate::alert::{Engine, EventKind, Notification};
use crate::outcome::{Assertion, Status};

const STEP: Duration = Duration::from_secs(5);
const PROBE_EVERY: i64 = 30;

/// A peer's view of `site` at each moment.
type Script = fn(OffsetDateTime) -> ViewStatus;

struct World {
    now: OffsetDateTime,
    engine: Engine,
    fleet: Fleet,
    scripts: Vec<Script>,
    sent: Vec<Notification>,
}

impl World {
    fn new(peers: &[(&str, Script)]) -> Self {
        Self {
            now: T0,
            engine: Engine::new("eu-par", Duration::ZERO, Vec::new(), T0, |_| policy()),
            fleet: Fleet {
                node: "eu-par".into(),
                quorum: None,
                stale_after: Duration::from_secs(60),
                fresh_for: Duration::from_secs(20),
                coordination: Coordination::Up,
                up_since: Some(T0),
                peers: peers.iter().map(|(name, _)| Peer::new(name)).collect(),
            },
            scripts: peers.iter().map(|(_, s)| *s).collect(),
            sent: Vec::new(),
        }
    }

    /// Every peer publishes and is read at `now` (what the vantage task
    /// does every second while a page waits).
    fn read_peers(&mut self) {
        for (peer, script) in self.fleet.peers.iter_mut().zip(&self.scripts) {
            let status = script(self.now);
            let view = CheckView {
                status,
                since: self.now,
                last_probe: self.now,
                failure: None,
                firing: false,
                warning: false,
                closed: None,
            };
            peer.modified = Some(self.now);
            peer.fetched_at = Some(self.now);
            peer.state = Some(Arc::new(NodeState {
                node: peer.node.clone(),
                version: "test".into(),
                published_at: self.now,
                health: NodeHealth {
                    status: "ok".into(),
                    degraded: Vec::new(),
                },
                checks: BTreeMap::from([("site".to_string(), view)]),
                claims: Vec::new(),
            }));
        }
    }

    /// Runs for `duration`, this node probing `site` with `here`.
    fn run(&mut self, duration: Duration, here: fn(OffsetDateTime) -> bool) {
        let end = self.now + duration;
        while self.now < end {
            self.read_peers();
            if (self.now - T0).whole_seconds() % PROBE_EVERY == 0 {
                let outcome = match here(self.now) {
                    true => down("site", self.now, Assertion::HttpStatus),
                    false => up("site", self.now),
                };
                let hold = self
                    .fleet
                    .hold("site", outcome.status == Status::Down, self.now);
                self.engine
                    .observe(&outcome, self.now, &policy(), hold.as_ref());
            }
            let self_down = self
                .engine
                .state("site")
                .and_then(|s| s.last.as_ref())
                .is_some_and(|l| l.snapshot.status == Status::Down);
            let hold = self.fleet.hold("site", self_down, self.now);
            let p = policy();
            self.engine.tick(self.now, |_| &p, |_| hold.clone());
            for n in self.engine.poll_notifications(self.now) {
                self.engine.outbound(&n, self.now);
                self.sent.push(n);
            }
            self.now += STEP;
        }
    }

    fn kinds(&self) -> Vec<EventKind> {
        self.sent.iter().map(|n| n.kind).collect()
    }
}

fn always_up(_: OffsetDateTime) -> ViewStatus {
    ViewStatus::Up
}

const MIN: Duration = Duration::from_secs(60);

#[test]
fn an_outage_seen_from_this_node_only_never_pages_and_says_so() {
    let mut w = World::new(&[("eu-ams", always_up), ("fra", always_up)]);
    w.run(10 * MIN, |_| true);
    assert!(w.sent.is_empty(), "{:?}", w.kinds());
    let state = w.engine.state("site").unwrap();
    assert!(state.is_firing(), "recorded as an incident here");
    let held = format!("{:?}", state.incident.as_ref().unwrap().page);
    assert!(held.contains("down from eu-par only"), "{held}");
    // It recovers here: nothing was announced, nothing is resolved.
    w.run(5 * MIN, |_| false);
    assert!(w.sent.is_empty(), "{:?}", w.kinds());
}

#[test]
fn an_outage_everywhere_pages_once_confirmed_and_resolves_once_a_quorum_is_up() {
    // eu-ams sees the outage from 07:01 to 07:10; fra never sees it.
    fn ams(t: OffsetDateTime) -> ViewStatus {
        match t >= T0 + MIN && t < T0 + 10 * MIN {
            true => ViewStatus::Down,
            false => ViewStatus::Up,
        }
    }
    let mut w = World::new(&[("eu-ams", ams), ("fra", always_up)]);
    // Here: down from 07:00 to 07:05.
    w.run(15 * MIN, |t| t < T0 + 5 * MIN);
    assert_eq!(w.kinds(), vec![EventKind::Down, EventKind::Resolved]);
    let down = &w.sent[0].events[0];
    // Crossed here at 07:00:30, eu-ams down from 07:01: paged then.
    assert_eq!(down.at, T0 + MIN);
    assert!(
        down.held.is_none(),
        "a wait for confirmation is no hold to tell"
    );
    // Recovered here at 07:05:30 (2 probes); eu-ams still down and fra
    // up: 2 of 3 up, so the RESOLVED goes at once.
    let resolved = &w.sent[1].events[0];
    assert_eq!(resolved.at, T0 + 5 * MIN + Duration::from_secs(30));
}

#[test]
fn a_recovery_here_waits_while_a_quorum_still_sees_it_down() {
    fn late(t: OffsetDateTime) -> ViewStatus {
        match t < T0 + 20 * MIN {
            true => ViewStatus::Down,
            false => ViewStatus::Up,
        }
    }
    let mut w = World::new(&[("eu-ams", late), ("fra", late)]);
    w.run(30 * MIN, |t| t < T0 + 5 * MIN);
    assert_eq!(w.kinds(), vec![EventKind::Down, EventKind::Resolved]);
    // Up here from 07:05, the peers from 07:20: RESOLVED at 07:20.
    assert_eq!(w.sent[1].events[0].at, T0 + 20 * MIN);
}

#[test]
fn when_the_peers_go_silent_this_node_pages_alone() {
    let mut w = World::new(&[("eu-ams", always_up), ("fra", always_up)]);
    w.run(2 * MIN, |_| false);
    // The peers' states stop changing: the vantage task sees no new
    // Last-Modified after 07:02.
    w.scripts = vec![always_up, always_up];
    let frozen = w.fleet.peers.clone();
    let end = w.now + 5 * MIN;
    while w.now < end {
        let now = w.now;
        let outcome = down("site", now, Assertion::HttpStatus);
        w.fleet.peers = frozen.clone();
        let hold = w.fleet.hold("site", true, now);
        w.engine.observe(&outcome, now, &policy(), hold.as_ref());
        let p = policy();
        w.engine
            .tick(now, |_| &p, |_| w.fleet.hold("site", true, now));
        for n in w.engine.poll_notifications(now) {
            w.engine.outbound(&n, now);
            w.sent.push(n);
        }
        w.now += Duration::from_secs(30);
    }
    assert_eq!(w.kinds(), vec![EventKind::Down]);
    // Held until the peers were past stale_after (07:03), then alone.
    assert!(
        w.sent[0].events[0].at >= T0 + 3 * MIN,
        "{:?}",
        w.sent[0].events[0].at
    );
}
