//! Probe and judge: the one step `vigie check`, the scheduler and the
//! canaries share. Builds the prober from a config (the CA files are read
//! once; domain checks keep their registries' answers in the state
//! directory), probes a check and evaluates its outcome.

use std::sync::Arc;

use futures_util::stream::{self, Stream, StreamExt};

use crate::check::Check;
use crate::clock::Clock;
use crate::config::Config;
use crate::evaluate::evaluate;
use crate::net::CaFileError;
use crate::outcome::Outcome;
use crate::probe::client::Client;
use crate::probe::domain::Rdap;
use crate::probe::Prober;

/// Builds the prober for a config: reads the CA files once.
pub fn prober(config: &Config, clock: Arc<dyn Clock>) -> Result<Prober, CaFileError> {
    let client = Client::new(config.extra_ca_file.as_deref(), &config.checks, clock)?;
    let rdap = Rdap::new(config.rdap_bootstrap.clone(), Some(&config.state_dir));
    Ok(Prober::new(client, config.ca_cache_size).with_rdap(rdap))
}

/// Probes and judges one check.
pub async fn run_check(prober: &Prober, clock: &dyn Clock, check: &Check) -> Outcome {
    let mut outcome = prober.probe(check).await;
    evaluate(check, &mut outcome, clock.now());
    outcome
}

/// Probes `checks` now, at most `concurrency` at a time; outcomes come back
/// in the order of `checks`.
pub async fn check_now(
    prober: &Prober,
    clock: &dyn Clock,
    checks: &[&Check],
    concurrency: usize,
) -> Vec<Outcome> {
    outcomes(prober, clock, checks, concurrency).collect().await
}

/// [`check_now`] one outcome at a time: each comes as soon as it and every
/// check before it are done, so a caller that writes them out (`vigie
/// check --json`) holds only the probes in flight, not every outcome.
pub fn outcomes<'a>(
    prober: &'a Prober,
    clock: &'a dyn Clock,
    checks: &'a [&'a Check],
    concurrency: usize,
) -> impl Stream<Item = Outcome> + 'a {
    stream::iter(checks)
        .map(move |check| run_check(prober, clock, check))
        .buffered(concurrency.max(1))
}
