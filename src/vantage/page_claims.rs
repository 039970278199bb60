//! Who sends a page when several vantages watch the same checks: the
//! alerter's questions to the other vantages, as one trait. The alerter
//! judges, groups and mails; [`PageClaims`] says what the fleet holds back,
//! which node sends each mail, and what the mail says of the others.
//!
//! The trait's defaults are a single node's (nothing is held, every page
//! is this node's): [`SingleNode`], for a vigie without `[vantage]`, is
//! them alone. `BucketClaims` (`bucket_claims.rs`) answers through the
//! coordination bucket; tests of the alerter bring their own where the
//! bucket is not the thing under test.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use time::OffsetDateTime;

use crate::alert::{AlertState, Event, Hold, Notification, Observation};
use crate::config::Config;
use crate::outcome::Outcome;

/// A claim's future: the bucket is asked over the network.
pub type ClaimFuture<'a> = Pin<Box<dyn Future<Output = Vec<Lost>> + Send + 'a>>;

/// An event another vantage sends, as the alerter records it.
#[derive(Debug, Clone)]
pub struct Lost {
    pub event: Event,
    /// The winner's Message-ID for it.
    pub message_id: String,
}

/// The Message-ID this node's mail about an event alone would have.
pub type MessageIdOf<'a> = &'a (dyn Fn(&Event) -> String + Sync);

/// One mail to claim, in a round of sending.
pub struct Claiming<'a> {
    /// Its events; those another vantage has are taken out.
    pub notification: &'a mut Notification,
    pub message_id: MessageIdOf<'a>,
    /// Why the fleet cannot be asked this round, from
    /// [`PageClaims::unavailable`]; a claim that fails sets it.
    pub unavailable: &'a mut Option<String>,
    pub now: OffsetDateTime,
}

/// Builds the claims of one start of the alerter: what waits and what was
/// claimed elsewhere is not carried over a restart of the task.
pub type NewClaims = Arc<dyn Fn() -> Box<dyn PageClaims> + Send + Sync>;

/// What the alerter asks of the other vantages; see the module docs. Each
/// default is the answer of a node alone.
pub trait PageClaims: Send {
    /// Reads the fleet as the vantage task last published it; the holds
    /// and the peers' liveness are judged by this view until the next look,
    /// so that one tick judges every check by the same fleet.
    fn look(&mut self) {}

    /// The checks configured now (at start and after a reload): the state
    /// this node publishes lists each, those not probed yet as unknown.
    fn configured(&mut self, _config: &Config, _now: OffsetDateTime) {}

    /// The fleet's hold on `check`'s pages at `now` (a DOWN or a recovery
    /// the others do not confirm); `None` when the fleet does not hold it.
    /// `self_down`: this node's latest probe of it failed.
    fn hold(&self, _check: &str, _self_down: bool, _now: OffsetDateTime) -> Option<Hold> {
        None
    }

    /// This node's judgment of `outcome`, now that the engine has its
    /// `state`, for the state this node publishes.
    fn judged(&mut self, _outcome: &Outcome, _state: &AlertState) {}

    /// Each peer's liveness as an observation of its pseudo-check
    /// (`vigie:vantage:<peer>`).
    fn peers(&self, _now: OffsetDateTime) -> Vec<(String, Observation)> {
        Vec::new()
    }

    /// A peer's pseudo-check after the engine observed it.
    fn peer_judged(&mut self, _check: &str, _state: &AlertState, _now: OffsetDateTime) {}

    /// Every firing check's hold at this tick: which pages wait for the
    /// fleet, and since when. Returns what the vantages say of each
    /// waiting check, for `/metrics` and the pages (`None`: nothing is
    /// ever held, leave the notes alone).
    fn track_waiting(
        &mut self,
        _holds: &HashMap<String, Option<Hold>>,
        _now: OffsetDateTime,
    ) -> Option<BTreeMap<String, String>> {
        None
    }

    /// What the vantages say of `check` while its page waits, for the
    /// report.
    fn waiting_words(&self, _check: &str) -> Option<String> {
        None
    }

    /// Why the fleet cannot be asked this round (`None`: it can). Passed to
    /// each [`PageClaims::claim`] of the round, which sets it when a claim
    /// fails, so that a bucket that hangs costs one timeout per round.
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// Events claimed by another vantage whose state has not backed the
    /// claim within `stale_after`: mails of their own, sent from here.
    fn settle(&mut self, _now: OffsetDateTime) -> Vec<Notification> {
        Vec::new()
    }

    /// Claims each event of the mail: those another vantage has are taken
    /// out and returned with that node's Message-ID (the alerter records
    /// them as sent by it); the others stay, with what the vantages say of
    /// them.
    fn claim<'a>(&'a mut self, _mail: Claiming<'a>) -> ClaimFuture<'a> {
        Box::pin(std::future::ready(Vec::new()))
    }
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

impl PageClaims for SingleNode {}
