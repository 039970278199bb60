//! The vantage task: this node's side of the bucket. It tests once that
//! the bucket honours conditional writes, publishes this node's state
//! every `publish_every` (at once when the alerter asks: a check just
//! changed between down and not), looks up each peer's state (HEAD) for
//! liveness, and reads (GET) each state that changed since it was last
//! read: a peer is alive only while its state verifies, so liveness needs
//! the state itself, not only its date. While the alerter waits for a
//! confirmation it does so every second for one publication after a check
//! first waits, then once a publication. What it learns goes out as one
//! [`Fleet`] on a watch channel, which the alerter judges by.
//!
//! Requests per hour at the defaults, with two peers and nothing waiting:
//! 360 PUTs, and every 30 s a HEAD and a GET per peer (480): about 840,
//! whatever the number of checks (the state grows by about 150 bytes a
//! check). A refused state is not downloaded again until it changes.
//!
//! A round that fails makes coordination unavailable until one succeeds:
//! the alerter then pages on this node's judgment alone, and says so.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::VantageConfig;
use crate::supervise::Stage;
use crate::vantage::{
    Conditional, Coordination, Coordinator, Fleet, LocalView, NodeHealth, NodeState, Peer, Signed,
    VantageStats, Wanted,
};

/// How often the peers are read while a check waits for its first
/// confirmation.
const URGENT_EVERY: Duration = Duration::from_secs(1);

/// A bucket that ignored conditional writes is tested again this often (a
/// configuration fixed on the server side).
const RETEST_EVERY: Duration = Duration::from_secs(300);

/// What every start of the task is built from.
#[derive(Clone)]
pub struct VantageParts {
    pub coordinator: Coordinator,
    pub config: VantageConfig,
    pub fleet: Arc<watch::Sender<Arc<Fleet>>>,
    pub local: LocalView,
    pub stats: Arc<VantageStats>,
    pub wanted: Arc<Wanted>,
    pub health: Arc<dyn Fn(OffsetDateTime) -> NodeHealth + Send + Sync>,
    pub clock: Arc<dyn Clock>,
}

/// The fleet before anything was read: every peer unknown, nothing held.
pub fn initial_fleet(config: &VantageConfig) -> Fleet {
    Fleet {
        node: config.node.clone(),
        quorum: config.quorum,
        stale_after: config.stale_after,
        fresh_for: config.publish_every.saturating_mul(2),
        coordination: Coordination::Starting,
        up_since: None,
        peers: config.peers.iter().map(|p| Peer::new(&p.name)).collect(),
    }
}

/// Runs until `shutdown`; each round is progress of `stage`.
pub async fn run(parts: VantageParts, stage: Arc<Stage>, shutdown: CancellationToken) {
    let config = &parts.config;
    let mut fleet = (**parts.fleet.borrow()).clone();
    let liveness_every = (config.stale_after / 2).max(config.publish_every);
    let mut conditional: Option<(Conditional, Instant)> = None;
    let mut next_publish = Instant::now();
    let mut next_liveness = Instant::now();
    let mut next_read = Instant::now();
    loop {
        stage.progressed();
        let now = parts.clock.now();
        let mut trouble: Option<String> = None;

        let retest = match &conditional {
            None => true,
            Some((Conditional::Ignored, at)) => at.elapsed() >= RETEST_EVERY,
            Some((Conditional::Honoured, _)) => false,
        };
        if retest {
            match parts.coordinator.test_conditional(now).await {
                Ok(found) => {
                    if found == Conditional::Ignored {
                        tracing::error!(bucket = %parts.coordinator.shown(), "the coordination bucket does not honour If-None-Match: each vantage pages on its own; use a bucket with conditional writes (AWS S3, Scaleway, MinIO, R2)");
                    }
                    conditional = Some((found, Instant::now()));
                }
                Err(err) => trouble = Some(format!("cannot test conditional writes: {err}")),
            }
        }
        if conditional
            .as_ref()
            .is_some_and(|(c, _)| *c == Conditional::Ignored)
        {
            trouble.get_or_insert_with(|| {
                format!(
                    "{} does not honour conditional writes (If-None-Match)",
                    parts.coordinator.shown()
                )
            });
        }

        // One failed request ends the round: a bucket that hangs costs one
        // timeout a round, not one per request.
        if trouble.is_none() && Instant::now() >= next_publish {
            next_publish = Instant::now() + config.publish_every;
            let state = NodeState {
                node: config.node.clone(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                published_at: now,
                health: (parts.health)(now),
                checks: parts
                    .local
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
                claims: parts.coordinator.won_claims(),
            };
            match parts.coordinator.publish(&state).await {
                Ok(()) => parts.stats.published(true),
                Err(err) => {
                    parts.stats.published(false);
                    tracing::warn!(error = %err, "cannot publish this vantage's state");
                    trouble.get_or_insert(format!("cannot publish: {err}"));
                }
            }
        }

        let urgent = parts.wanted.is_urgent(now);
        let pending = parts.wanted.is_pending();
        let read = (urgent || pending) && Instant::now() >= next_read;
        if trouble.is_none() && (read || Instant::now() >= next_liveness) {
            next_liveness = Instant::now() + liveness_every;
            if let Err(err) = look_up_peers(&parts, &mut fleet).await {
                trouble.get_or_insert(err);
            }
            if read {
                next_read = Instant::now()
                    + match urgent {
                        true => URGENT_EVERY,
                        false => config.publish_every,
                    };
            }
        }

        fleet.coordination = match &trouble {
            None if conditional.is_some() => Coordination::Up,
            None => Coordination::Starting,
            Some(why) => Coordination::Unavailable { why: why.clone() },
        };
        fleet.up_since = match fleet.coordination {
            Coordination::Up => fleet.up_since.or(Some(now)),
            _ => None,
        };
        let was_unavailable = parts.stats.snapshot().unavailable;
        match (&trouble, &was_unavailable) {
            (Some(why), None) => {
                tracing::warn!(reason = %why, "vantages cannot coordinate: each pages on its own judgment")
            }
            (None, Some(_)) => tracing::info!("vantages coordinate through the bucket again"),
            _ => {}
        }
        parts.stats.set_unavailable(trouble);
        parts.stats.set_peers_alive(fleet.alive(now) as u64);
        parts.fleet.send_replace(Arc::new(fleet.clone()));

        let mut wake = next_publish.min(next_liveness);
        if parts.wanted.is_urgent(parts.clock.now()) || parts.wanted.is_pending() {
            wake = wake.min(next_read);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(wake) => {}
            _ = parts.wanted.publish_asked() => next_publish = Instant::now(),
            _ = parts.wanted.read_asked() => next_read = Instant::now(),
        }
    }
}

/// HEADs every peer's state, and GETs those that changed since they were
/// last read (refused ones included: a refused state is not read again
/// until its ETag changes).
async fn look_up_peers(parts: &VantageParts, fleet: &mut Fleet) -> Result<(), String> {
    for peer in &mut fleet.peers {
        let (modified, etag) = match parts.coordinator.state_modified(&peer.node).await {
            Ok(Some((at, etag))) => (Some(at), etag),
            Ok(None) => (None, None),
            Err(err) => return Err(format!("cannot look up {}: {err}", peer.node)),
        };
        peer.modified = modified;
        peer.etag = etag;
        let now = parts.clock.now();
        if modified.is_none() {
            peer.state = None;
            peer.refused = None;
            continue;
        }
        if peer.etag.is_some() && peer.etag == peer.read_etag {
            // Unchanged since it was read: still this peer's current view
            // (or still refused).
            if peer.state.is_some() {
                peer.fetched_at = Some(now);
            }
            continue;
        }
        match parts.coordinator.fetch_state(&peer.node, now).await {
            Ok(Signed::Valid { value, version, .. }) => {
                peer.state = Some(Arc::new(value));
                peer.fetched_at = Some(now);
                peer.read_etag = version.etag().map(str::to_string).or(peer.etag.clone());
                peer.refused = None;
            }
            Ok(Signed::Refused { why, version }) => {
                peer.state = None;
                peer.read_etag = version.etag().map(str::to_string).or(peer.etag.clone());
                peer.refused = Some(why.to_string());
            }
            Ok(Signed::Missing) => {
                peer.state = None;
                peer.refused = None;
            }
            Err(err) => return Err(format!("cannot read {}'s state: {err}", peer.node)),
        }
    }
    Ok(())
}
