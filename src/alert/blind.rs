//! The blind-monitor gate: is vigie itself cut off from the network?
//!
//! vigie cannot tell "the site is down" from "my own uplink is down" by
//! looking at its checks: a whole-platform outage fails every check at
//! once, and that is exactly the incident that must page. So blindness is
//! decided only by canaries, targets outside the watched platform
//! (`[connectivity] canaries`), and only when *every* canary failed to get
//! an answer at all (DNS, connect, timeout). Then, and only then, a check
//! failure of the same network kind says nothing about the target: it is
//! judged `unknown (vigie blind)` ([`Observation::Unknown`]) and does not
//! advance the check's failure count. A check that did get an answer (a
//! certificate, an HTTP status) is judged as usual, blind or not.
//!
//! vigie's own alert, "vigie cannot reach the network from HOST", is an
//! ordinary incident of a pseudo-check named
//! [`NETWORK_CHECK`](super::NETWORK_CHECK), fed by [`network_observation`]
//! through the same state machine: it fires after
//! `failure_threshold` blind rounds, resolves when canaries answer again,
//! survives restarts, and is never grouped with check alerts.
//!
//! Without canaries there is no gate. Probing the canaries is the daemon's
//! job; this module only reads their outcomes.

use time::OffsetDateTime;

use super::event::Snapshot;
use super::state::Observation;
use crate::outcome::{Assertion, Failure, Outcome, Status};

/// What the canaries say about vigie's own connectivity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connectivity {
    /// No canaries configured: no gate.
    Ungated,
    /// At least one canary answered.
    Sighted,
    /// Every canary failed to get an answer.
    Blind,
}

impl Connectivity {
    pub fn is_blind(self) -> bool {
        self == Connectivity::Blind
    }
}

/// The gate's verdict from the latest outcome of every canary.
pub fn connectivity(canaries: &[Outcome]) -> Connectivity {
    if canaries.is_empty() {
        return Connectivity::Ungated;
    }
    match canaries.iter().all(canary_failed) {
        true => Connectivity::Blind,
        false => Connectivity::Sighted,
    }
}

/// A canary fails when it got no answer at all. A canary answering 503, or
/// with a certificate vigie dislikes, still proves packets go out and come
/// back.
pub fn canary_failed(outcome: &Outcome) -> bool {
    outcome.status == Status::Down
        && outcome
            .failures
            .iter()
            .any(|f| is_network_failure(f.assertion))
}

/// A check's outcome through the gate.
pub fn gate(connectivity: Connectivity, outcome: &Outcome) -> Observation {
    let snapshot = Snapshot::of(outcome);
    if connectivity.is_blind() && unreachable_only(outcome) {
        return Observation::Unknown(snapshot);
    }
    Observation::Judged(snapshot)
}

/// The observation of [`NETWORK_CHECK`](super::NETWORK_CHECK) for this
/// round of canaries, `None` without canaries. It is `down` when vigie is blind, with one failure per
/// canary saying what it met, and `up` otherwise.
pub fn network_observation(canaries: &[Outcome], now: OffsetDateTime) -> Option<Observation> {
    if canaries.is_empty() {
        return None;
    }
    let blind = connectivity(canaries).is_blind();
    let failures = match blind {
        true => canaries.iter().filter_map(canary_failure).collect(),
        false => Vec::new(),
    };
    let targets: Vec<&str> = canaries.iter().map(|c| c.target.as_str()).collect();
    Some(Observation::Judged(Snapshot {
        target: targets.join(", "),
        status: if blind { Status::Down } else { Status::Up },
        started_at: now,
        failures,
        chain: Vec::new(),
    }))
}

/// Failed, and only for lack of an answer: nothing about the target itself
/// was learnt.
fn unreachable_only(outcome: &Outcome) -> bool {
    let mut severe = outcome
        .failures
        .iter()
        .filter(|f| f.assertion.severity() == Status::Down)
        .peekable();
    outcome.status == Status::Down
        && severe.peek().is_some()
        && severe.all(|f| is_network_failure(f.assertion))
}

fn is_network_failure(assertion: Assertion) -> bool {
    matches!(
        assertion,
        Assertion::Dns | Assertion::Connect | Assertion::Timeout
    )
}

fn canary_failure(canary: &Outcome) -> Option<Failure> {
    let failure = canary
        .failures
        .iter()
        .find(|f| is_network_failure(f.assertion))?;
    Some(Failure {
        assertion: failure.assertion,
        expected: format!("an answer from canary {}", canary.target),
        observed: failure.observed.clone(),
        message: format!("canary {}: {}", canary.target, failure.message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::testing::{down, outcome_with, up, T0};

    #[test]
    fn blind_only_when_every_canary_got_no_answer() {
        let refused = down("wikipedia", T0, Assertion::Connect);
        let dns = down("one", T0, Assertion::Dns);
        let answered_503 = down("one", T0, Assertion::HttpStatus);
        assert_eq!(connectivity(&[]), Connectivity::Ungated);
        assert_eq!(
            connectivity(&[refused.clone(), dns.clone()]),
            Connectivity::Blind
        );
        assert_eq!(
            connectivity(&[refused.clone(), up("one", T0)]),
            Connectivity::Sighted
        );
        assert_eq!(
            connectivity(&[refused, answered_503]),
            Connectivity::Sighted,
            "a 503 is an answer"
        );
    }

    #[test]
    fn only_network_failures_are_unknown_when_blind() {
        let timeout = down("site", T0, Assertion::Timeout);
        let expired = down("site", T0, Assertion::TlsExpiry);
        let both = outcome_with("site", T0, &[Assertion::Connect, Assertion::TlsTrusted]);
        assert!(matches!(
            gate(Connectivity::Blind, &timeout),
            Observation::Unknown(_)
        ));
        assert!(matches!(
            gate(Connectivity::Blind, &expired),
            Observation::Judged(_)
        ));
        assert!(matches!(
            gate(Connectivity::Blind, &both),
            Observation::Judged(_)
        ));
        assert!(matches!(
            gate(Connectivity::Sighted, &timeout),
            Observation::Judged(_)
        ));
        assert!(matches!(
            gate(Connectivity::Ungated, &timeout),
            Observation::Judged(_)
        ));
    }

    #[test]
    fn the_network_observation_names_every_canary() {
        assert_eq!(network_observation(&[], T0), None);
        let canaries = [
            down("wikipedia", T0, Assertion::Connect),
            down("one", T0, Assertion::Dns),
        ];
        let Some(Observation::Judged(s)) = network_observation(&canaries, T0) else {
            panic!("judged");
        };
        assert_eq!(s.status, Status::Down);
        assert_eq!(s.failures.len(), 2);
        assert_eq!(
            s.failures[0].message,
            "canary https://wikipedia.example.com/: connection refused"
        );
        let Some(Observation::Judged(s)) =
            network_observation(&[up("wikipedia", T0), canaries[1].clone()], T0)
        else {
            panic!("judged");
        };
        assert_eq!((s.status, s.failures.len()), (Status::Up, 0));
    }
}
