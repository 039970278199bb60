//! The `scheduler` task: a config's checks as the scheduler runs them (a
//! [`Plan`]), one generation at a time, swapped when a reload brings a new
//! plan. The dispatching itself is `crate::scheduler`'s.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::Config;
use crate::net::CaFileError;
use crate::outcome::Outcome;
use crate::scheduler::{self, ProbeRunner, Slots};
use crate::supervise::{Feed, Supervisor};

pub type Plan = scheduler::Plan<ProbeRunner>;

pub fn plan(config: &Config, clock: Arc<dyn Clock>) -> Result<Plan, CaFileError> {
    Ok(scheduler::Plan {
        // Shared with the config, not copied: 10,000 checks are megabytes.
        checks: config.checks.clone(),
        runner: Arc::new(ProbeRunner {
            prober: crate::runner::prober(config, clock.clone())?,
            clock,
        }),
        concurrency: config.concurrency,
    })
}

/// The scheduler task: runs the newest plan's generation, swaps it when a
/// reload sends another, and at `shutdown` stops it (in-flight probes
/// finish and hand over their outcomes). A dispatcher that dies takes this
/// task with it, so that the supervisor restarts both from the newest plan.
pub async fn schedule(
    mut plans: watch::Receiver<Plan>,
    clock: Arc<dyn Clock>,
    sink: Feed<Outcome>,
    slots: Slots,
    shutdown: CancellationToken,
    supervisor: Supervisor,
) {
    let start = |plan: Plan| scheduler::spawn(plan, clock.clone(), sink.clone(), &slots, &shutdown);
    let mut generation = start(plans.borrow_and_update().clone());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = plans.changed() => {
                if changed.is_err() {
                    break;
                }
                let fresh = start(plans.borrow_and_update().clone());
                supervisor.track(std::mem::replace(&mut generation, fresh).stop());
            }
            () = generation.dispatcher_died() => {
                // Returned without a panic: only a stop does that.
                if shutdown.is_cancelled() {
                    break;
                }
            }
        }
    }
    generation.stop().await;
}
