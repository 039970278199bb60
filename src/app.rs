//! Builds the running parts from a [`Config`] and runs them.
//!
//! For now that is `vigie check`: build the client once (trust stores, CA
//! files), probe the selected checks concurrently under the `concurrency`
//! bound, judge each outcome, return them in config order.

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use crate::check::Check;
use crate::clock::Clock;
use crate::config::Config;
use crate::evaluate::evaluate;
use crate::outcome::Outcome;
use crate::probe::client::{Client, ClientError};
use crate::probe::Prober;

/// Builds the prober for a config: reads the CA files once.
pub fn prober(config: &Config, clock: Arc<dyn Clock>) -> Result<Prober, ClientError> {
    let client = Client::new(config.extra_ca_file.as_deref(), &config.checks, clock)?;
    Ok(Prober::new(client))
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
    stream::iter(checks)
        .map(|check| run_check(prober, clock, check))
        .buffered(concurrency.max(1))
        .collect()
        .await
}
