//! A config's checks as the scheduler runs them, and SIGHUP: load the new
//! config, build what it needs, and hand it over only if all of it works.

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

/// A new config and what was built from it, ready to swap in.
pub struct Reloaded {
    pub config: Config,
    pub plan: Plan,
    pub token: Option<Arc<str>>,
    /// `[api]`'s TLS files read again: a renewed certificate is served from
    /// the next connection on.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub delivery: crate::mail::Delivery,
}

/// Loads and prepares a new config; any problem is reported as text lines
/// and the caller keeps the old one.
pub fn reload(
    path: &std::path::Path,
    old: &Config,
    clock: Arc<dyn Clock>,
) -> Result<Reloaded, String> {
    let fresh = crate::config::load(path).map_err(|errors| errors.to_string())?;
    let plan = plan(&fresh, clock).map_err(|err| err.to_string())?;
    let token = crate::api::read_token(&fresh).map_err(|err| err.to_string())?;
    let tls = crate::api::acceptor(fresh.api.tls.as_ref()).map_err(|err| err.to_string())?;
    let delivery = crate::mail::Delivery::from_config(&fresh).map_err(|err| err.to_string())?;
    if fresh.api.listen != old.api.listen
        || fresh.api.request_timeout != old.api.request_timeout
        || fresh.state_dir != old.state_dir
    {
        tracing::warn!(
            "[api] listen, [api] request_timeout and state_dir changes take effect at the next restart"
        );
    }
    if fresh.replication != old.replication
        || fresh.heartbeat != old.heartbeat
        || fresh.connectivity != old.connectivity
    {
        tracing::warn!(
            "[replication], [heartbeat] and [connectivity] changes take effect at the next restart"
        );
    }
    Ok(Reloaded {
        config: fresh,
        plan,
        token,
        tls,
        delivery,
    })
}
