//! SIGHUP: load the new config, build what it needs (the plan, the API's
//! token and TLS files, the mail delivery), and hand it over only if all
//! of it works; what cannot change without a restart is said in the log.

use std::sync::Arc;

use super::scheduling::{plan, Plan};
use crate::clock::Clock;
use crate::config::Config;

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
