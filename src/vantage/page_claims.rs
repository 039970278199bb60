//! Who sends a page when several vantages watch the same checks: the
//! alerter's questions to the other vantages, as one trait. The alerter
//! judges, groups and mails; [`PageClaims`] says what the fleet holds back,
//! which node sends each mail, and what the mail says of the others.
//!
//! Two implementations: [`SingleNode`] for a vigie without `[vantage]`
//! (nothing is held, every page is this node's), and `BucketClaims`
//! (`bucket_claims.rs`), the claims in the coordination bucket. Tests of the alerter bring their own where the bucket is not
//! the thing under test.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use time::OffsetDateTime;

use crate::alert::{AlertState, Event, Hold, Notification, Observation};
use crate::config::Config;
use crate::outcome::Outcome;

/// A claim's future: the bucket is asked over the network.
pub type ClaimFuture<'a> = Pin<Box<dyn Future<Output = Vec<(Event, String)>> + Send + 'a>>;

/// The Message-ID this node's mail about an event alone would have.
pub type MessageIdOf<'a> = &'a (dyn Fn(&Event) -> String + Sync);

/// Builds the claims of one start of the alerter: what waits and what was
/// claimed elsewhere is not carried over a restart of the task.
pub type NewClaims = Arc<dyn Fn() -> Box<dyn PageClaims> + Send + Sync>;

/// What the alerter asks of the other vantages; see the module docs.
pub trait PageClaims: Send {
    /// Reads the fleet as the vantage task last published it; the holds
    /// and the peers' liveness are judged by this view until the next look,
    /// so that one tick judges every check by the same fleet.
    fn look(&mut self);

    /// The checks configured now (at start and after a reload): the state
    /// this node publishes lists each, those not probed yet as unknown.
    fn configured(&mut self, config: &Config, now: OffsetDateTime);

    /// The fleet's hold on `check`'s pages at `now` (a DOWN or a recovery
    /// the others do not confirm); `None` when the fleet does not hold it.
    /// `self_down`: this node's latest probe of it failed.
    fn hold(&self, check: &str, self_down: bool, now: OffsetDateTime) -> Option<Hold>;

    /// This node's judgment of `outcome`, now that the engine has its
    /// `state`, for the state this node publishes.
    fn judged(&mut self, outcome: &Outcome, state: &AlertState);

    /// Each peer's liveness as an observation of its pseudo-check
    /// (`vigie:vantage:<peer>`); none for a single node.
    fn peers(&self, now: OffsetDateTime) -> Vec<(String, Observation)>;

    /// A peer's pseudo-check after the engine observed it.
    fn peer_judged(&mut self, check: &str, state: &AlertState, now: OffsetDateTime);

    /// Every firing check's hold at this tick: which pages wait for the
    /// fleet, and since when. Returns what the vantages say of each
    /// waiting check, for `/metrics` and the pages (`None`: nothing is
    /// ever held, leave the notes alone).
    fn track_waiting(
        &mut self,
        holds: &HashMap<String, Option<Hold>>,
        now: OffsetDateTime,
    ) -> Option<BTreeMap<String, String>>;

    /// What the vantages say of `check` while its page waits, for the
    /// report.
    fn waiting_words(&self, check: &str) -> Option<String>;

    /// Why the fleet cannot be asked this round (`None`: it can). Passed to
    /// each [`PageClaims::claim`] of the round, which sets it when a claim
    /// fails, so that a bucket that hangs costs one timeout per round.
    fn unavailable(&self) -> Option<String>;

    /// Events claimed by another vantage whose state has not backed the
    /// claim within `stale_after`: mails of their own, sent from here.
    fn settle(&mut self, now: OffsetDateTime) -> Vec<Notification>;

    /// Claims each event of `notification`: those another vantage has are
    /// taken out and returned with that node's Message-ID (the alerter
    /// records them as sent by it); the others stay, with what the
    /// vantages say of them.
    fn claim<'a>(
        &'a mut self,
        notification: &'a mut Notification,
        message_id: MessageIdOf<'a>,
        unavailable: &'a mut Option<String>,
        now: OffsetDateTime,
    ) -> ClaimFuture<'a>;
}

/// A vigie without `[vantage]`: nothing waits for anyone, every page is
/// sent from here and says nothing of other vantages.
#[derive(Debug, Default, Clone, Copy)]
pub struct SingleNode;

impl SingleNode {
    pub fn new_claims() -> NewClaims {
        Arc::new(|| Box::new(SingleNode))
    }
}

impl PageClaims for SingleNode {
    fn look(&mut self) {}

    fn configured(&mut self, _config: &Config, _now: OffsetDateTime) {}

    fn hold(&self, _check: &str, _self_down: bool, _now: OffsetDateTime) -> Option<Hold> {
        None
    }

    fn judged(&mut self, _outcome: &Outcome, _state: &AlertState) {}

    fn peers(&self, _now: OffsetDateTime) -> Vec<(String, Observation)> {
        Vec::new()
    }

    fn peer_judged(&mut self, _check: &str, _state: &AlertState, _now: OffsetDateTime) {}

    fn track_waiting(
        &mut self,
        _holds: &HashMap<String, Option<Hold>>,
        _now: OffsetDateTime,
    ) -> Option<BTreeMap<String, String>> {
        None
    }

    fn waiting_words(&self, _check: &str) -> Option<String> {
        None
    }

    fn unavailable(&self) -> Option<String> {
        None
    }

    fn settle(&mut self, _now: OffsetDateTime) -> Vec<Notification> {
        Vec::new()
    }

    fn claim<'a>(
        &'a mut self,
        _notification: &'a mut Notification,
        _message_id: MessageIdOf<'a>,
        _unavailable: &'a mut Option<String>,
        _now: OffsetDateTime,
    ) -> ClaimFuture<'a> {
        Box::pin(std::future::ready(Vec::new()))
    }
}
