//! What the daemon is told while it runs ([`Control`]: signals, or a test
//! through its handle) and what it does about it: a reload swaps in every
//! part the new config rebuilt, or keeps the old config whole; a shutdown,
//! or the store's disk taking writes again, ends the run.

use std::sync::Arc;

use tokio::sync::{mpsc, watch, Notify};

use super::reload::{reload, Reloaded};
use super::scheduling::Plan;
use crate::api::{ServerTls, Token};
use crate::clock::Clock;
use crate::config::{Config, HistoryConfig};
use crate::health::Health;
use crate::mail::SenderHandle;
use crate::store::Latest;

/// What the daemon is told from outside (signals, tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: reload config and checks; keep the old ones if invalid.
    Reload,
    /// SIGTERM/SIGINT: finish in-flight probes, flush, exit.
    Shutdown,
}

/// Where each part a reload rebuilds goes.
pub struct Reloadable<'a> {
    pub config_path: &'a std::path::Path,
    pub clock: &'a Arc<dyn Clock>,
    pub token: &'a Token,
    pub server_tls: &'a ServerTls,
    pub sender: &'a SenderHandle,
    pub alert_config: &'a watch::Sender<Arc<Config>>,
    pub plans: &'a watch::Sender<Plan>,
    pub retention: &'a watch::Sender<HistoryConfig>,
    pub latest: &'a Latest,
    pub health: &'a Health,
}

/// How the run ended.
pub enum Until {
    /// Told to stop, or nobody can tell us anything any more.
    Shutdown,
    /// The state disk takes writes again: reopen the store.
    StoreBack,
}

/// Serves `control` until a shutdown or `store_back`; returns the config
/// running then, reloads included.
pub async fn serve(
    control: &mut mpsc::Receiver<Control>,
    store_back: &Notify,
    mut config: Arc<Config>,
    parts: &Reloadable<'_>,
) -> (Arc<Config>, Until) {
    loop {
        let command = tokio::select! {
            command = control.recv() => command,
            () = store_back.notified() => return (config, Until::StoreBack),
        };
        match command {
            None | Some(Control::Shutdown) => return (config, Until::Shutdown),
            Some(Control::Reload) => {
                crate::notify::reloading();
                config = apply_reload(config, parts);
                crate::notify::ready();
            }
        }
    }
}

/// Loads the config again; the new one if all of it could be built, else
/// the old one (the errors in the log).
fn apply_reload(config: Arc<Config>, parts: &Reloadable<'_>) -> Arc<Config> {
    let clock = parts.clock;
    match reload(parts.config_path, &config, clock.clone()) {
        Ok(Reloaded {
            config: fresh,
            plan,
            token: fresh_token,
            tls: fresh_tls,
            delivery,
        }) => {
            let fresh = Arc::new(fresh);
            parts.token.set(fresh_token);
            parts.server_tls.set(fresh_tls);
            parts.sender.reconfigure(delivery);
            parts.alert_config.send_replace(fresh.clone());
            parts.plans.send_replace(plan);
            let _ = parts.retention.send(fresh.history.clone());
            let names: std::collections::HashSet<&str> =
                fresh.checks.iter().map(|c| c.name.as_str()).collect();
            parts.latest.retain(|name| names.contains(name));
            parts.health.reloaded(true, clock.now());
            if fresh.vantage != config.vantage {
                // The coordinator and its task are built once.
                tracing::warn!(
                    "[vantage] changed: the change takes effect at the next restart of vigie"
                );
            }
            tracing::info!(checks = fresh.checks.len(), "config reloaded");
            fresh
        }
        Err(errors) => {
            parts.health.reloaded(false, clock.now());
            for line in errors.lines() {
                tracing::error!("{line}");
            }
            tracing::error!("config reload rejected; the previous config keeps running");
            config
        }
    }
}
