//! [`PageClaims`] through the coordination bucket: the fleet's holds as the
//! vantage task last read them, each mail claimed with a conditional
//! create ([`super::claim`]), and the claims of others checked against the
//! claimant's own published state.
//!
//! A claim another vantage won is recorded as sent by it at once (so the
//! engine goes on with the incident), and sent from here after all if that
//! node's state does not show it within `stale_after`: a claim alone may be
//! forged, or left by a node that died before sending. A bucket that cannot
//! be used never holds a page back: it goes out on this node's judgment,
//! and says so.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::watch;

use super::bucket::Coordinator;
use super::claim::{claim, ClaimRequest, Claimed, MessageIdFor};
use super::page_claims::{ClaimFuture, Claiming, Lost, NewClaims, PageClaims};
use super::published::{self, LocalView, ViewStatus};
use super::quorum::{
    silent_check, silent_words, unbacked_claim_words, BackedClaim, Coordination, Fleet,
};
use super::released::Released;
use super::stats::VantageStats;
use super::wanted::Wanted;
use crate::alert::{
    self, AlertState, EventKind, Hold, HoldCause, Notification, Observation, Snapshot,
    NETWORK_CHECK,
};
use crate::clock::saturating_add;
use crate::config::Config;
use crate::outcome::{Assertion, Failure, Outcome, Status};

/// The longest a mail waits for its claims: past it, it is sent as not
/// coordinated (a slow bucket must not hold pages back).
const CLAIM_WITHIN: Duration = Duration::from_secs(15);

/// The alerter's line to the vantage task and the bucket.
#[derive(Clone)]
pub struct VantageLink {
    pub coordinator: Coordinator,
    pub fleet: watch::Receiver<Arc<Fleet>>,
    pub local: LocalView,
    pub wanted: Arc<Wanted>,
    pub stats: Arc<VantageStats>,
    pub publish_every: Duration,
    /// When this daemon started: peers are not judged silent before it
    /// has run `stale_after`.
    pub started: OffsetDateTime,
}

impl VantageLink {
    /// A fresh [`BucketClaims`] for each start of the alerter.
    pub fn new_claims(self) -> NewClaims {
        Arc::new(move || Box::new(BucketClaims::new(self.clone())))
    }
}

/// A check whose page waits for the other vantages.
#[derive(Debug, Clone)]
struct Waiting {
    since: OffsetDateTime,
    /// The hold's words now ("down from fra only; eu-par: up").
    words: String,
    /// Counted as a veto (not confirmed within one publication).
    vetoed: bool,
}

/// An event another vantage claimed, not yet backed by its own state.
#[derive(Debug, Clone)]
struct Unbacked {
    event: alert::Event,
    by: String,
    /// The claim's name in the bucket, and the incident's fleet key.
    name: String,
    key: String,
    claimed_at: OffsetDateTime,
}

/// The claims of one start of the alerter; see the module docs.
pub struct BucketClaims {
    link: VantageLink,
    /// The fleet at the last [`PageClaims::look`].
    fleet: Arc<Fleet>,
    waiting: HashMap<String, Waiting>,
    unbacked: Vec<Unbacked>,
    /// What each released page says of the vantages; `hold` takes
    /// `&self`, hence the lock.
    released: Mutex<Released>,
}

impl BucketClaims {
    pub fn new(link: VantageLink) -> BucketClaims {
        let fleet = link.fleet.borrow().clone();
        BucketClaims {
            link,
            fleet,
            waiting: HashMap::new(),
            unbacked: Vec::new(),
            released: Mutex::new(Released::default()),
        }
    }

    /// The words of the judgment that released `event`, if the last one
    /// judged for its check released a page of its kind.
    fn released_words(&self, event: &alert::Event) -> Option<String> {
        let down = match event.kind {
            EventKind::Down | EventKind::Reminder => true,
            EventKind::Resolved => false,
            EventKind::Warn | EventKind::WarnResolved => return None,
        };
        let released = self.released.lock().unwrap_or_else(|p| p.into_inner());
        released.words(&event.check, down)
    }

    /// Asks the bucket for `event`'s claim, for at most [`CLAIM_WITHIN`].
    async fn ask(
        &self,
        event: &alert::Event,
        message_id: MessageIdFor<'_>,
        now: OffsetDateTime,
    ) -> Result<Claimed, String> {
        let request = ClaimRequest {
            check: &event.check,
            kind: event.kind,
            reminder: event.reminder,
            since: event.since,
            message_id,
            now,
        };
        match tokio::time::timeout(CLAIM_WITHIN, claim(&self.link.coordinator, &request)).await {
            Ok(Ok(claimed)) => Ok(claimed),
            Ok(Err(err)) => Err(err.to_string()),
            Err(_) => Err(format!(
                "the bucket did not answer within {}",
                crate::when::std_span(CLAIM_WITHIN)
            )),
        }
    }

    /// After one claim fails, the others of this round are not tried (a
    /// bucket that hangs would otherwise hold the alerter for a timeout
    /// per event).
    async fn claim_events(&mut self, mail: Claiming<'_>) -> Vec<Lost> {
        let Claiming {
            notification,
            message_id: message_id_of,
            unavailable,
            now,
        } = mail;
        let v = self.link.clone();
        let fleet = v.fleet.borrow().clone();
        let mut kept = Vec::new();
        let mut lost = Vec::new();
        // The mail's Message-ID is its first kept event's.
        let mut group_id: Option<String> = None;
        for mut event in std::mem::take(&mut notification.events) {
            // vigie's own network is this node's alone. A warn and its end
            // are claimed like a DOWN and its RESOLVED, under a pointer of
            // their own (`claim.rs`), so that one vantage pushes each.
            if event.check == NETWORK_CHECK {
                kept.push(event);
                continue;
            }
            // The mail's Message-ID, were it this event's alone, under the
            // fleet's key: so two incidents the fleet keeps apart never
            // share one, even where this node saw them as one.
            let message_id = |key: &str| {
                group_id.clone().unwrap_or_else(|| {
                    let mut keyed = event.clone();
                    keyed.fleet_key = Some(push_key(&event, key));
                    message_id_of(&keyed)
                })
            };
            let claimed = match &unavailable {
                Some(why) => Err(why.clone()),
                None => self.ask(&event, &message_id, now).await,
            };
            match claimed {
                Ok(Claimed::Won { key }) => {
                    let sent_as = message_id(&key);
                    tracing::info!(check = %event.check, incident = %key, "this vantage sends the mail");
                    if event.kind == EventKind::Resolved {
                        let mut view = v.local.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(check) = view.get_mut(&event.check) {
                            check.closed = Some(key.clone());
                        }
                    }
                    // The state listing the claim backs it for the others.
                    v.wanted.publish_now();
                    event.vantage = self
                        .released_words(&event)
                        .or_else(|| fleet_words(&fleet, &event, now));
                    if event.kind == EventKind::Down && !event.check.starts_with("vigie:") {
                        v.stats.add_confirmations(1);
                    }
                    event.fleet_key = Some(push_key(&event, &key));
                    group_id.get_or_insert(sent_as);
                    kept.push(event);
                }
                Ok(Claimed::Lost {
                    key,
                    by,
                    message_id,
                    name,
                }) => {
                    tracing::info!(check = %event.check, incident = %key, sent_by = %by, "claimed by another vantage");
                    // Should the winner never back its claim, this node
                    // sends the event itself, under the same key.
                    event.fleet_key = Some(push_key(&event, &key));
                    lost.push(Lost {
                        event: event.clone(),
                        message_id,
                    });
                    self.unbacked.push(Unbacked {
                        event,
                        by,
                        name,
                        key,
                        claimed_at: now,
                    });
                    v.wanted.set_pending(true);
                }
                Err(why) => {
                    tracing::warn!(check = %event.check, reason = %why, "vantages cannot coordinate: this page goes out on this node's judgment alone");
                    unavailable.get_or_insert_with(|| why.clone());
                    v.stats.add_uncoordinated(1);
                    event.vantage =
                        Some(format!("not confirmed: coordination unavailable ({why})"));
                    kept.push(event);
                }
            }
        }
        notification.events = kept;
        lost
    }
}

impl PageClaims for BucketClaims {
    fn look(&mut self) {
        self.fleet = self.link.fleet.borrow().clone();
    }

    fn configured(&mut self, config: &Config, now: OffsetDateTime) {
        let mut view = self.link.local.lock().unwrap_or_else(|p| p.into_inner());
        published::configured(
            &mut view,
            config.checks.iter().map(|c| c.name.as_str()),
            now,
        );
    }

    fn hold(&self, check: &str, self_down: bool, now: OffsetDateTime) -> Option<Hold> {
        let mut released = self.released.lock().unwrap_or_else(|p| p.into_inner());
        if !coordinates(&self.fleet) || check.starts_with("vigie:") {
            released.forget(check);
            return None;
        }
        let judgment = self.fleet.judge(check, self_down, now);
        let hold = judgment.hold(self_down);
        if hold.is_none() {
            released.released(check, &judgment, self_down);
        }
        hold
    }

    /// At once when the check changed between down and not.
    fn judged(&mut self, outcome: &Outcome, state: &AlertState) {
        let unknown = state.last.as_ref().is_some_and(|l| l.unknown);
        let status = ViewStatus::of(outcome.status, unknown);
        let changed = {
            let mut view = self.link.local.lock().unwrap_or_else(|p| p.into_inner());
            let before = view.get(&outcome.name).map(|c| c.status);
            let before_warning = view.get(&outcome.name).is_some_and(|c| c.warning);
            published::record(
                &mut view,
                &outcome.name,
                status,
                outcome.started_at,
                state.failing_since(),
                outcome.first_failure().map(|f| f.message.as_str()),
                state.is_firing(),
            );
            let warning = state.warn.episode.is_some();
            if let Some(check) = view.get_mut(&outcome.name) {
                check.warning = warning;
            }
            // A change of warn episode is published at once too: the
            // others check a claim of its WARN against it.
            before.is_none_or(|b| (b == ViewStatus::Down) != (status == ViewStatus::Down))
                || warning != before_warning
        };
        if changed {
            self.link.wanted.publish_now();
        }
    }

    /// A peer silent past `stale_after` is paged (once across the fleet:
    /// its mail is claimed like any other), its return resolves it.
    fn peers(&self, now: OffsetDateTime) -> Vec<(String, Observation)> {
        let fleet = &self.fleet;
        fleet
            .silent(now, self.link.started)
            .into_iter()
            .map(|(peer, silent)| {
                let failures = match silent {
                    false => Vec::new(),
                    true => vec![Failure {
                        assertion: Assertion::VantageSilent,
                        expected: format!(
                            "a state in the bucket newer than {}",
                            crate::when::std_span(fleet.stale_after)
                        ),
                        observed: match peer.modified {
                            Some(at) => {
                                format!("last state written {}", crate::when::minute(at))
                            }
                            None => "no state in the bucket".to_string(),
                        },
                        message: silent_words(peer),
                    }],
                };
                let snapshot = Snapshot {
                    target: format!("{}/{}/state.json", self.link.coordinator.shown(), peer.node),
                    status: if silent { Status::Down } else { Status::Up },
                    started_at: now,
                    failures,
                    chain: Vec::new(),
                };
                (silent_check(&peer.node), Observation::Judged(snapshot))
            })
            .collect()
    }

    /// Like a check's: the others check a claim on its "silent" page
    /// against it.
    fn peer_judged(&mut self, check: &str, state: &AlertState, now: OffsetDateTime) {
        let firing = state.is_firing();
        let status = match firing {
            true => ViewStatus::Down,
            false => ViewStatus::Up,
        };
        let mut view = self.link.local.lock().unwrap_or_else(|p| p.into_inner());
        published::record(
            &mut view,
            check,
            status,
            now,
            state.failing_since(),
            None,
            firing,
        );
    }

    /// The peers are read every second for one publication from when a
    /// check first waits, and a DOWN still not confirmed after it counts
    /// as a veto.
    fn track_waiting(
        &mut self,
        holds: &HashMap<String, Option<Hold>>,
        now: OffsetDateTime,
    ) -> Option<BTreeMap<String, String>> {
        let v = &self.link;
        let window = v.publish_every + Duration::from_secs(1);
        let words_of = |hold: &Option<Hold>| match hold.as_ref().map(|h| &h.cause) {
            Some(HoldCause::Unconfirmed { words }) => Some((words.clone(), true)),
            Some(HoldCause::FleetStillDown { words }) => Some((words.clone(), false)),
            _ => None,
        };
        self.waiting
            .retain(|check, _| holds.get(check).and_then(words_of).is_some());
        for (check, hold) in holds {
            let Some((words, down)) = words_of(hold) else {
                continue;
            };
            let waiting = self.waiting.entry(check.clone()).or_insert(Waiting {
                since: now,
                words: words.clone(),
                vetoed: false,
            });
            waiting.words = words;
            let until = saturating_add(waiting.since, window);
            if now < until {
                v.wanted.urgent_until(until);
            } else if down && !waiting.vetoed {
                waiting.vetoed = true;
                v.stats.add_vetoes(1);
                tracing::warn!(check = %check, vantages = %waiting.words, "not paged: the other vantages do not confirm it");
            }
        }
        v.wanted
            .set_pending(!self.waiting.is_empty() || !self.unbacked.is_empty());
        Some(
            self.waiting
                .iter()
                .map(|(check, w)| (check.clone(), w.words.clone()))
                .collect(),
        )
    }

    fn waiting_words(&self, check: &str) -> Option<String> {
        self.waiting.get(check).map(|w| w.words.clone())
    }

    fn unavailable(&self) -> Option<String> {
        match &self.link.fleet.borrow().coordination {
            Coordination::Up => None,
            Coordination::Starting => {
                Some("the first round with the bucket is not done".to_string())
            }
            Coordination::Unavailable { why } => Some(why.clone()),
        }
    }

    /// Those their claimant's state now backs are done with; those it has
    /// not backed within `stale_after` come back as mails of their own,
    /// marked as sent over an unconfirmed claim.
    fn settle(&mut self, now: OffsetDateTime) -> Vec<Notification> {
        let v = self.link.clone();
        let fleet = v.fleet.borrow().clone();
        let mut out = Vec::new();
        for claim in std::mem::take(&mut self.unbacked) {
            let backed = BackedClaim {
                check: &claim.event.check,
                name: &claim.name,
                key: &claim.key,
                resolved: matches!(
                    claim.event.kind,
                    EventKind::Resolved | EventKind::WarnResolved
                ),
                warn: claim.event.kind.is_warn(),
                claimed_at: claim.claimed_at,
            };
            if fleet.backs_claim(&claim.by, &backed, now) {
                tracing::info!(check = %claim.event.check, sent_by = %claim.by, "sent by another vantage (its state shows it)");
                v.stats.add_sent_elsewhere(1);
                continue;
            }
            let Unbacked {
                mut event,
                by,
                name,
                key,
                claimed_at,
            } = claim;
            if now >= saturating_add(claimed_at, fleet.stale_after) {
                let words = unbacked_claim_words(&by, v.coordinator.node());
                tracing::warn!(check = %event.check, claimed_by = %by, "{words}");
                v.stats.sent_over_claim(&event.check, &words, now);
                event.vantage = Some(words);
                out.push(Notification {
                    kind: event.kind,
                    to: event.to.clone(),
                    opened: now,
                    events: vec![event],
                });
            } else {
                self.unbacked.push(Unbacked {
                    event,
                    by,
                    name,
                    key,
                    claimed_at,
                });
            }
        }
        out
    }

    fn claim<'a>(&'a mut self, mail: Claiming<'a>) -> ClaimFuture<'a> {
        Box::pin(self.claim_events(mail))
    }
}

/// Whether holds wait for the fleet: not when the bucket cannot be used.
fn coordinates(fleet: &Fleet) -> bool {
    matches!(
        fleet.coordination,
        Coordination::Up | Coordination::Starting
    )
}

/// What the vantages say about `event` for its mail; `None` for vigie's
/// own pseudo-checks.
fn fleet_words(fleet: &Fleet, event: &alert::Event, now: OffsetDateTime) -> Option<String> {
    // A warn never waits for the fleet, and its pushes carry no words.
    if event.check.starts_with("vigie:") || event.kind.is_warn() {
        return None;
    }
    let self_down = event.kind != EventKind::Resolved;
    Some(fleet.judge(&event.check, self_down, now).words(self_down))
}

/// The key `event`'s pushes carry: the fleet's key of its incident or
/// warn episode, which every node claims the DOWN, the reminders and the
/// RESOLVED (or the WARN and its end) under, so that a RESOLVED from
/// another node than the DOWN's still closes what the DOWN opened (the
/// PagerDuty `dedup_key`, the ntfy sequence id). A warn's pointer is apart
/// from the incidents', so its key is marked apart too.
fn push_key(event: &alert::Event, key: &str) -> String {
    match event.kind.is_warn() {
        true => format!("{}@warn-{key}", event.check),
        false => format!("{}@{key}", event.check),
    }
}
