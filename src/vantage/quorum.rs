//! The quorum rule, pure: given what this node sees of a check and the
//! peers' published states, is the check down for the fleet?
//!
//! - A peer is *alive* while its state in the bucket verifies (signed by
//!   it: `signed.rs`) and both the bucket's Last-Modified of it and the
//!   time it was published at are at most `stale_after` old (by this
//!   node's clock: keep the clocks in NTP sync). A dead peer is not counted
//!   at all, so a node whose peers are all dead pages alone; so is one
//!   whose state is forged, or an old one of its put back.
//! - A live peer *judges* a check by the state this node last read of it,
//!   if that read is recent ([`Fleet::fresh_for`]) and the check's latest
//!   probe in it is at most `stale_after` old: `down`, or `up`/`warn`.
//!   Otherwise its vote is unknown, which never confirms anything. A peer
//!   whose fresh state does not list the check does not probe it, and is
//!   left out of the count.
//! - The quorum is `[vantage] quorum`, at most the vantages counted, or
//!   else a majority of them.
//! - DOWN (and each reminder) goes out when this node is down and at least
//!   a quorum of vantages judge it down; RESOLVED, when this node is up and
//!   a quorum judge it up. An unknown vote confirms neither.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::published::{CheckView, NodeState, ViewStatus};
use crate::alert::{Hold, HoldCause};
use crate::clock::saturating_sub;
use crate::when::minute;

/// One peer as this node last saw it in the bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub node: String,
    /// The bucket's Last-Modified of its state at the latest listing;
    /// `None`: no state in the bucket.
    pub modified: Option<OffsetDateTime>,
    /// The ETag at the latest look-up, and of the state last read.
    pub etag: Option<String>,
    pub read_etag: Option<String>,
    /// Its state as last read, and when it was last known current.
    pub state: Option<Arc<NodeState>>,
    pub fetched_at: Option<OffsetDateTime>,
    /// Why what is in the bucket in its place is not its state (a
    /// signature that does not verify, a size over the cap...).
    pub refused: Option<String>,
}

impl Peer {
    pub fn new(node: &str) -> Self {
        Self {
            node: node.to_string(),
            modified: None,
            etag: None,
            read_etag: None,
            state: None,
            fetched_at: None,
            refused: None,
        }
    }
}

/// Can the vantages coordinate at all?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coordination {
    /// Not yet tried (the first round is under way): nothing is held.
    Starting,
    /// The bucket answers and honours conditional writes.
    Up,
    /// It does not: every node pages on its own judgment, and says so.
    Unavailable { why: String },
}

/// What this node knows of the fleet at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Fleet {
    pub node: String,
    pub quorum: Option<u32>,
    pub stale_after: Duration,
    /// How long a state read from the bucket counts as the peer's current
    /// view (two publications).
    pub fresh_for: Duration,
    pub coordination: Coordination,
    /// Since when `coordination` has been `Up` (this node's clock).
    pub up_since: Option<OffsetDateTime>,
    /// Every configured peer, in config order.
    pub peers: Vec<Peer>,
}

/// One check, judged across the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgment {
    /// Vantages judging it down, this node first if it does.
    pub down: Vec<String>,
    /// Vantages judging it up (or warn).
    pub up: Vec<String>,
    /// Live vantages whose view is not known (not read lately, blind).
    pub unknown: Vec<String>,
    /// Live vantages that probe the check, this node included.
    pub vantages: usize,
    pub quorum: usize,
}

impl Fleet {
    pub fn is_alive(&self, peer: &Peer, now: OffsetDateTime) -> bool {
        let oldest = saturating_sub(now, self.stale_after);
        peer.refused.is_none()
            && peer.modified.is_some_and(|at| at >= oldest)
            && peer
                .state
                .as_ref()
                .is_some_and(|s| s.published_at >= oldest)
    }

    pub fn alive(&self, now: OffsetDateTime) -> usize {
        self.peers.iter().filter(|p| self.is_alive(p, now)).count()
    }

    /// `check` across the fleet; `self_down`: this node's latest probe of
    /// it failed.
    pub fn judge(&self, check: &str, self_down: bool, now: OffsetDateTime) -> Judgment {
        let mut judgment = Judgment {
            down: Vec::new(),
            up: Vec::new(),
            unknown: Vec::new(),
            vantages: 1,
            quorum: 1,
        };
        match self_down {
            true => judgment.down.push(self.node.clone()),
            false => judgment.up.push(self.node.clone()),
        }
        let oldest_probe = saturating_sub(now, self.stale_after);
        let oldest_read = saturating_sub(now, self.fresh_for);
        for peer in self.peers.iter().filter(|p| self.is_alive(p, now)) {
            let fresh = peer
                .state
                .as_ref()
                .filter(|_| peer.fetched_at.is_some_and(|at| at >= oldest_read));
            let vote = match fresh {
                Some(state) => match state.checks.get(check) {
                    // It does not probe this check: no vote, not counted.
                    None => continue,
                    Some(view) if view.last_probe < oldest_probe => None,
                    Some(view) => Some(view.status),
                },
                None => None,
            };
            judgment.vantages += 1;
            match vote {
                Some(ViewStatus::Down) => judgment.down.push(peer.node.clone()),
                Some(ViewStatus::Up | ViewStatus::Warn) => judgment.up.push(peer.node.clone()),
                Some(ViewStatus::Unknown) | None => judgment.unknown.push(peer.node.clone()),
            }
        }
        judgment.quorum = match self.quorum {
            Some(q) => (q as usize).clamp(1, judgment.vantages),
            None => judgment.vantages / 2 + 1,
        };
        judgment
    }

    /// The fleet's hold on `check`'s pages: a DOWN (or reminder) while a
    /// quorum does not confirm it, a RESOLVED while a quorum does not
    /// confirm the recovery. `self_down`: this node's latest probe failed.
    pub fn hold(&self, check: &str, self_down: bool, now: OffsetDateTime) -> Option<Hold> {
        self.judge(check, self_down, now).hold(self_down)
    }

    /// Each peer, and whether it has been silent for longer than
    /// `stale_after`. Judged only once this node has coordinated (and run)
    /// for `stale_after` itself: neither a fleet coming up nor one coming
    /// back from a bucket outage (when no node could publish) is paged
    /// about.
    pub fn silent(&self, now: OffsetDateTime, started: OffsetDateTime) -> Vec<(&Peer, bool)> {
        let Some(up_since) = self
            .up_since
            .filter(|_| self.coordination == Coordination::Up)
        else {
            return Vec::new();
        };
        let settled = saturating_sub(now, self.stale_after) >= started.max(up_since);
        self.peers
            .iter()
            .map(|p| (p, settled && !self.is_alive(p, now)))
            .collect()
    }
}

impl Fleet {
    /// Does `by`'s own signed state, read since `claimed_at`, back its
    /// claim on `check`: the incident firing there (for a DOWN or a
    /// reminder), or over (for a RESOLVED)? A claim is only a name in the
    /// bucket; the claimant's state is what says it is really paging.
    ///
    /// The state also lists the claims its node won lately (`claim`, its
    /// name under the prefix): that backs it too, so that a check that
    /// flaps faster than the states are read is not paged twice.
    pub fn backs_claim(&self, by: &str, claim: &BackedClaim<'_>, now: OffsetDateTime) -> bool {
        let Some(peer) = self.peers.iter().find(|p| p.node == by) else {
            return false;
        };
        if !self.is_alive(peer, now) || peer.fetched_at.is_none_or(|at| at < claim.claimed_at) {
            return false;
        }
        let Some(state) = peer.state.as_ref() else {
            return false;
        };
        let listed = state
            .claims
            .iter()
            .any(|c| claim.name.ends_with(c.as_str()));
        let view = state.checks.get(claim.check);
        // A warn's claim is backed by the warn episode, as an incident's
        // is by its firing.
        let open = |v: &CheckView| match claim.warn {
            true => v.warning,
            false => v.firing,
        };
        // An incident's RESOLVED the claimant sent before it fired again
        // in a later incident: its claim may have left `claims` since.
        let closed = |v: &CheckView| {
            claim.resolved && !claim.warn && v.closed.as_deref().is_some_and(|c| c >= claim.key)
        };
        listed || view.is_some_and(|v| open(v) != claim.resolved || closed(v))
    }
}

/// A claim another node won, as [`Fleet::backs_claim`] checks it.
#[derive(Debug, Clone)]
pub struct BackedClaim<'a> {
    pub check: &'a str,
    /// The claim object's name in the bucket.
    pub name: &'a str,
    /// The incident's fleet key (its first failure, `20261201T071230Z`:
    /// later keys sort after earlier ones).
    pub key: &'a str,
    /// A RESOLVED (backed by the incident being over there).
    pub resolved: bool,
    /// About a warn episode (`warn`, `warn-resolved`): backed by the
    /// peer's `warning` rather than its `firing`.
    pub warn: bool,
    pub claimed_at: OffsetDateTime,
}

/// "claimed by fra, not confirmed by fra's state: sent from eu-par": the
/// words of a page this node sent over a claim it could not check.
pub fn unbacked_claim_words(by: &str, node: &str) -> String {
    format!("claimed by {by}, not confirmed by {by}'s state: sent from {node}")
}

impl Judgment {
    /// The hold this judgment puts on a page: a DOWN (or reminder) while a
    /// quorum does not confirm it, a RESOLVED while a quorum does not
    /// confirm the recovery. `self_down`: this node's latest probe failed.
    pub fn hold(&self, self_down: bool) -> Option<Hold> {
        let cause = match self_down {
            true if !self.confirms_down() => HoldCause::Unconfirmed {
                words: self.unconfirmed_down(),
            },
            false if !self.confirms_up() => HoldCause::FleetStillDown {
                words: self.unconfirmed_up(),
            },
            _ => return None,
        };
        Some(Hold { cause, until: None })
    }

    /// What a page of this judgment says of the vantages: confirmed or
    /// not, down (`self_down`) or up.
    pub fn words(&self, self_down: bool) -> String {
        match self_down {
            true if self.confirms_down() => self.confirmed_down(),
            true => self.unconfirmed_down(),
            false if self.confirms_up() => self.confirmed_up(),
            false => self.unconfirmed_up(),
        }
    }

    pub fn confirms_down(&self) -> bool {
        self.down.len() >= self.quorum
    }

    /// A quorum judges it up: a recovery may be announced. Unknown votes
    /// confirm nothing, either way.
    pub fn confirms_up(&self) -> bool {
        self.up.len() >= self.quorum
    }

    /// "confirmed down from 2 of 3 vantages (eu-par, eu-ams); fra: up"
    pub fn confirmed_down(&self) -> String {
        self.confirmed("down", &self.down, &[&self.up, &self.unknown])
    }

    /// "down from fra only", or "down from fra, ams (2 of 4 vantages,
    /// quorum 3); eu-par: up"
    pub fn unconfirmed_down(&self) -> String {
        self.unconfirmed("down", &self.down, &[&self.up, &self.unknown])
    }

    /// "confirmed up from 2 of 3 vantages (eu-par, fra); eu-ams: down"
    pub fn confirmed_up(&self) -> String {
        self.confirmed("up", &self.up, &[&self.down, &self.unknown])
    }

    /// "up from eu-par only; eu-ams: down, fra: down": a recovery not
    /// confirmed yet.
    pub fn unconfirmed_up(&self) -> String {
        self.unconfirmed("up", &self.up, &[&self.down, &self.unknown])
    }

    fn confirmed(&self, word: &str, from: &[String], rest: &[&Vec<String>]) -> String {
        format!(
            "confirmed {word} from {} of {} vantages ({}){}",
            from.len(),
            self.vantages,
            from.join(", "),
            self.others(rest)
        )
    }

    fn unconfirmed(&self, word: &str, from: &[String], rest: &[&Vec<String>]) -> String {
        let from = match from {
            [one] => format!("{word} from {one} only"),
            many => format!(
                "{word} from {} ({} of {} vantages, quorum {})",
                many.join(", "),
                many.len(),
                self.vantages,
                self.quorum
            ),
        };
        format!("{from}{}", self.others(rest))
    }

    /// "; fra: up, ams: unknown" for the vantages in `lists`.
    fn others(&self, lists: &[&Vec<String>]) -> String {
        let mut parts = Vec::new();
        for list in lists {
            for node in list.iter() {
                let word = if self.up.contains(node) {
                    "up"
                } else if self.down.contains(node) {
                    "down"
                } else {
                    "unknown"
                };
                parts.push(format!("{node}: {word}"));
            }
        }
        match parts.is_empty() {
            true => String::new(),
            false => format!("; {}", parts.join(", ")),
        }
    }
}

/// The alert engine's name for the pseudo-check "this peer is alive":
/// `vigie:vantage:fra`. Like vigie's own network alert, it cannot clash
/// with a check (check names have no `:`).
pub fn silent_check(peer: &str) -> String {
    format!("vigie:vantage:{peer}")
}

/// "vantage fra silent since 07:12 UTC", or "vantage fra silent: no state
/// in the bucket" for a peer that never published.
pub fn silent_words(peer: &Peer) -> String {
    if let Some(why) = &peer.refused {
        return format!(
            "vantage {} silent: its state in the bucket is refused: {why}",
            peer.node
        );
    }
    match peer.modified {
        Some(at) => format!("vantage {} silent since {}", peer.node, minute(at)),
        None => format!("vantage {} silent: no state in the bucket", peer.node),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::vantage::published::NodeHealth;

    const STALE: Duration = Duration::from_secs(60);

    fn t(s: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + s).unwrap()
    }

    fn state(node: &str, at: i64, checks: &[(&str, ViewStatus)]) -> Arc<NodeState> {
        Arc::new(NodeState {
            node: node.into(),
            version: "test".into(),
            published_at: t(at),
            health: NodeHealth {
                status: "ok".into(),
                degraded: vec![],
            },
            checks: checks
                .iter()
                .map(|(name, status)| {
                    let view = CheckView {
                        status: *status,
                        since: t(at - 5),
                        last_probe: t(at),
                        failure: None,
                        firing: false,
                        warning: false,
                        closed: None,
                    };
                    (name.to_string(), view)
                })
                .collect::<BTreeMap<_, _>>(),
            claims: Vec::new(),
        })
    }

    /// A peer that published at `at` and was read at `at`.
    fn peer(node: &str, at: i64, checks: &[(&str, ViewStatus)]) -> Peer {
        Peer {
            node: node.into(),
            modified: Some(t(at)),
            etag: None,
            read_etag: None,
            state: Some(state(node, at, checks)),
            fetched_at: Some(t(at)),
            refused: None,
        }
    }

    fn fleet(peers: Vec<Peer>) -> Fleet {
        Fleet {
            node: "eu-par".into(),
            quorum: None,
            stale_after: STALE,
            fresh_for: Duration::from_secs(20),
            coordination: Coordination::Up,
            up_since: Some(t(-3600)),
            peers,
        }
    }

    use ViewStatus::{Down, Unknown, Up, Warn};

    #[test]
    fn down_from_one_vantage_of_three_is_not_confirmed() {
        let f = fleet(vec![
            peer("eu-ams", 0, &[("site", Up)]),
            peer("fra", 0, &[("site", Up)]),
        ]);
        let j = f.judge("site", true, t(1));
        assert_eq!((j.vantages, j.quorum), (3, 2));
        assert!(!j.confirms_down());
        assert_eq!(
            j.unconfirmed_down(),
            "down from eu-par only; eu-ams: up, fra: up"
        );
    }

    #[test]
    fn a_second_vantage_confirms_and_the_words_name_them() {
        let f = fleet(vec![
            peer("eu-ams", 0, &[("site", Down)]),
            peer("fra", 0, &[("site", Up)]),
        ]);
        let j = f.judge("site", true, t(1));
        assert!(j.confirms_down());
        assert_eq!(
            j.confirmed_down(),
            "confirmed down from 2 of 3 vantages (eu-par, eu-ams); fra: up"
        );
    }

    #[test]
    fn the_timeline_of_an_outage_seen_first_here_then_everywhere() {
        // 0 s: only here. 8 s: the peers' next publications say down too.
        let mut f = fleet(vec![
            peer("eu-ams", 0, &[("site", Up)]),
            peer("fra", 0, &[("site", Up)]),
        ]);
        assert!(!f.judge("site", true, t(1)).confirms_down());
        f.peers[0] = peer("eu-ams", 8, &[("site", Down)]);
        assert!(f.judge("site", true, t(9)).confirms_down());
        // Recovery: here first; RESOLVED waits while a quorum says down.
        f.peers[1] = peer("fra", 9, &[("site", Down)]);
        let j = f.judge("site", false, t(20));
        assert!(!j.confirms_up(), "eu-ams and fra still down: {j:?}");
        assert_eq!(
            j.unconfirmed_up(),
            "up from eu-par only; eu-ams: down, fra: down"
        );
        f.peers[0] = peer("eu-ams", 21, &[("site", Up)]);
        let j = f.judge("site", false, t(22));
        assert!(j.confirms_up());
        assert_eq!(
            j.confirmed_up(),
            "confirmed up from 2 of 3 vantages (eu-par, eu-ams); fra: down"
        );
    }

    #[test]
    fn a_dead_peer_is_not_counted_and_a_node_alone_pages_alone() {
        let f = fleet(vec![
            peer("eu-ams", 0, &[("site", Up)]),
            peer("fra", 0, &[("site", Up)]),
        ]);
        // 61 s later both peers are past stale_after.
        let j = f.judge("site", true, t(61));
        assert_eq!((j.vantages, j.quorum), (1, 1));
        assert!(j.confirms_down());
        assert_eq!(
            j.confirmed_down(),
            "confirmed down from 1 of 1 vantages (eu-par)"
        );
    }

    #[test]
    fn with_one_of_three_dead_the_other_two_must_agree() {
        let mut f = fleet(vec![
            peer("eu-ams", 30, &[("site", Up)]),
            peer("fra", 0, &[]),
        ]);
        f.peers[1].modified = Some(t(-100));
        let j = f.judge("site", true, t(31));
        assert_eq!((j.vantages, j.quorum), (2, 2));
        assert!(!j.confirms_down());
    }

    #[test]
    fn a_state_not_read_lately_or_a_stale_probe_is_an_unknown_vote() {
        let mut f = fleet(vec![
            peer("eu-ams", 0, &[("site", Down)]),
            peer("fra", 0, &[("site", Down)]),
        ]);
        // Still alive (listed at 30 s), but last read at 0 s: too old.
        for p in &mut f.peers {
            p.modified = Some(t(30));
        }
        let j = f.judge("site", true, t(31));
        assert_eq!(j.unknown, vec!["eu-ams".to_string(), "fra".to_string()]);
        assert!(!j.confirms_down());
        // Blind peers count as unknown too.
        let f = fleet(vec![
            peer("eu-ams", 0, &[("site", Unknown)]),
            peer("fra", 0, &[("site", Down)]),
        ]);
        let j = f.judge("site", true, t(1));
        assert!(j.confirms_down());
        assert_eq!(j.unknown, vec!["eu-ams".to_string()]);
    }

    #[test]
    fn a_peer_that_does_not_probe_the_check_is_left_out() {
        let f = fleet(vec![
            peer("eu-ams", 0, &[("other", Up)]),
            peer("fra", 0, &[("site", Down)]),
        ]);
        let j = f.judge("site", true, t(1));
        assert_eq!((j.vantages, j.quorum), (2, 2));
        assert!(j.confirms_down());
    }

    #[test]
    fn a_configured_quorum_is_capped_by_the_vantages_alive() {
        let mut f = fleet(vec![
            peer("eu-ams", 0, &[("site", Down)]),
            peer("fra", 0, &[("site", Up)]),
        ]);
        f.quorum = Some(3);
        assert!(!f.judge("site", true, t(1)).confirms_down());
        f.quorum = Some(1);
        assert!(f.judge("site", true, t(1)).confirms_down());
        f.quorum = Some(3);
        let j = f.judge("site", true, t(100));
        assert_eq!((j.vantages, j.quorum), (1, 1), "alone: pages alone");
    }

    #[test]
    fn a_refused_or_replayed_state_is_not_a_live_peer() {
        let mut f = fleet(vec![
            peer("eu-ams", 0, &[("site", Up)]),
            peer("fra", 0, &[("site", Up)]),
        ]);
        f.peers[0].refused = Some("does not verify".into());
        // An old state of fra's put back: the bucket's date is new, the
        // state's own is not.
        f.peers[1].modified = Some(t(100));
        let j = f.judge("site", true, t(101));
        assert_eq!((j.vantages, j.quorum), (1, 1));
        assert!(j.confirms_down());
        assert!(silent_words(&f.peers[0]).contains("refused: does not verify"));
    }

    #[test]
    fn a_claim_is_backed_only_by_the_claimant_s_state_read_since() {
        let mut f = fleet(vec![peer("fra", 10, &[("site", Down)])]);
        Arc::make_mut(f.peers[0].state.as_mut().unwrap())
            .checks
            .get_mut("site")
            .unwrap()
            .firing = true;
        let claim = |check, resolved, at| BackedClaim {
            check,
            name: "v/incidents/site/K/down",
            key: "20261201T070000Z",
            resolved,
            warn: false,
            claimed_at: t(at),
        };
        assert!(f.backs_claim("fra", &claim("site", false, 5), t(11)));
        assert!(
            !f.backs_claim("fra", &claim("site", true, 5), t(11)),
            "not over"
        );
        assert!(
            !f.backs_claim("fra", &claim("site", false, 12), t(13)),
            "read before"
        );
        assert!(!f.backs_claim("fra", &claim("other", false, 5), t(11)));
        assert!(!f.backs_claim("ams", &claim("site", false, 5), t(11)));
        // Over again already, but its state lists the claim.
        Arc::make_mut(f.peers[0].state.as_mut().unwrap())
            .claims
            .push("v/incidents/site/K/down".into());
        assert!(f.backs_claim("fra", &claim("site", true, 5), t(11)));
        assert_eq!(
            unbacked_claim_words("fra", "eu-par"),
            "claimed by fra, not confirmed by fra's state: sent from eu-par"
        );
    }

    #[test]
    fn a_resolved_claim_is_backed_once_its_claimant_closed_that_incident_and_fired_again() {
        // fra sent the RESOLVED of the incident of 07:00, then fired again
        // at 07:30; the claim has left its list. eu-par, which saw both
        // outages as one, lost its RESOLVED claim of 07:00 to fra's.
        let mut f = fleet(vec![peer("fra", 10, &[("site", Down)])]);
        let set = |f: &mut Fleet, closed: Option<&str>| {
            let state = Arc::make_mut(f.peers[0].state.as_mut().unwrap());
            let site = state.checks.get_mut("site").unwrap();
            site.firing = true;
            site.closed = closed.map(str::to_string);
        };
        let claim = |key, warn| BackedClaim {
            check: "site",
            name: "v/incidents/site/20261201T070000Z/resolved",
            key,
            resolved: true,
            warn,
            claimed_at: t(5),
        };
        set(&mut f, None);
        assert!(
            !f.backs_claim("fra", &claim("20261201T070000Z", false), t(11)),
            "firing, and nothing says it closed the incident of 07:00"
        );
        set(&mut f, Some("20261201T070000Z"));
        assert!(f.backs_claim("fra", &claim("20261201T070000Z", false), t(11)));
        set(&mut f, Some("20261201T071500Z"));
        assert!(
            f.backs_claim("fra", &claim("20261201T070000Z", false), t(11)),
            "it closed a later incident, so that one too"
        );
        assert!(
            !f.backs_claim("fra", &claim("20261201T073000Z", false), t(11)),
            "not the incident it fires in now"
        );
        Arc::make_mut(f.peers[0].state.as_mut().unwrap())
            .checks
            .get_mut("site")
            .unwrap()
            .warning = true;
        assert!(
            !f.backs_claim("fra", &claim("20261201T070000Z", true), t(11)),
            "a warn's end is backed by the warn episode alone"
        );
    }

    #[test]
    fn a_warn_s_claim_is_backed_by_the_claimant_s_warn_episode_not_its_firing() {
        let mut f = fleet(vec![peer("fra", 10, &[("site", Warn)])]);
        let claim = |resolved| BackedClaim {
            check: "site",
            name: "v/incidents/site/K/warn",
            key: "20261201T070000Z",
            resolved,
            warn: true,
            claimed_at: t(5),
        };
        assert!(!f.backs_claim("fra", &claim(false), t(11)), "no episode");
        assert!(f.backs_claim("fra", &claim(true), t(11)), "over there");
        Arc::make_mut(f.peers[0].state.as_mut().unwrap())
            .checks
            .get_mut("site")
            .unwrap()
            .warning = true;
        assert!(f.backs_claim("fra", &claim(false), t(11)));
        assert!(!f.backs_claim("fra", &claim(true), t(11)), "still warning");
    }

    #[test]
    fn silence_is_judged_only_when_settled_and_coordinating() {
        let mut f = fleet(vec![peer("eu-ams", 0, &[]), Peer::new("fra")]);
        let started = t(0);
        let silent: Vec<bool> = f.silent(t(30), started).iter().map(|s| s.1).collect();
        assert_eq!(silent, vec![false, false], "not settled yet");
        let silent: Vec<bool> = f.silent(t(61), started).iter().map(|s| s.1).collect();
        assert_eq!(silent, vec![true, true]);
        assert_eq!(
            silent_words(&f.peers[1]),
            "vantage fra silent: no state in the bucket"
        );
        assert!(silent_words(&f.peers[0]).starts_with("vantage eu-ams silent since "));
        // Back from a bucket outage at 100 s: nobody could publish during
        // it, so silence is judged again only from 161 s.
        f.up_since = Some(t(100));
        let silent: Vec<bool> = f.silent(t(130), started).iter().map(|s| s.1).collect();
        assert_eq!(silent, vec![false, false], "just back");
        let silent: Vec<bool> = f.silent(t(161), started).iter().map(|s| s.1).collect();
        assert_eq!(silent, vec![true, true]);
        f.coordination = Coordination::Unavailable { why: "x".into() };
        assert!(f.silent(t(61), started).is_empty());
    }
}
