//! The canaries: outside URLs whose answer, whatever it is, proves that
//! vigie's own network works. Probed every `[connectivity] every` and whenever the
//! alerter asks (a network failure waits for a fresh round, so that a
//! dead uplink is told from a dead target). Never stored.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use crate::check::{Cadence, Check, CheckKind, HttpCheck, HttpExpect, TlsExpect};
use crate::clock::Clock;
use crate::config::Config;
use crate::outcome::Outcome;
use crate::probe::Prober;
use crate::supervise::Stage;

/// One round of canary probes.
#[derive(Debug)]
pub struct Round {
    pub started: OffsetDateTime,
    pub outcomes: Vec<Outcome>,
}

/// The canaries as checks: a GET whose answer, whatever it is, proves the
/// network works. Never stored.
pub fn canary_checks(config: &Config) -> Vec<Check> {
    config
        .connectivity
        .canaries
        .iter()
        .enumerate()
        .map(|(i, url)| Check {
            name: format!("canary-{i}"),
            url: url.clone(),
            resolve: None,
            every: Cadence::Every(config.connectivity.every),
            timeout: config.default_timeout,
            labels: Default::default(),
            tls: TlsExpect::default(),
            alert: Default::default(),
            kind: CheckKind::Http(HttpCheck {
                follow_redirects: false,
                redirect_to_private: false,
                redact_headers: Vec::new(),
                expect: HttpExpect::default(),
            }),
        })
        .collect()
}

/// Probes every canary every `every`, and at once when `now` is notified,
/// until `shutdown`; each round is progress of `stage`.
#[allow(clippy::too_many_arguments)]
pub async fn canary_rounds(
    prober: Arc<Prober>,
    checks: Arc<[Check]>,
    every: Duration,
    clock: Arc<dyn Clock>,
    now: Arc<Notify>,
    rounds: mpsc::Sender<Round>,
    stage: Arc<Stage>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
            _ = now.notified() => {}
        }
        let started = clock.now();
        let outcomes = tokio::select! {
            _ = shutdown.cancelled() => return,
            o = futures_util::future::join_all(
                checks.iter().map(|c| crate::runner::run_check(&prober, clock.as_ref(), c)),
            ) => o,
        };
        if rounds.send(Round { started, outcomes }).await.is_err() {
            return;
        }
        stage.progressed();
        tick.reset();
    }
}
