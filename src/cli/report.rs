//! `vigie report`: the certificate report from the running daemon, or,
//! when none runs, from the store (probing now when nothing is stored).

use std::sync::Arc;
use std::time::Duration;

use super::{ask_daemon, local_store, CommandError};
use crate::alert::report::{self, Report};
use crate::clock::Clock;
use crate::config::Config;
use crate::mail::Outbox;

/// `vigie report`: from the daemon when it runs, else from the store (or
/// probes now when nothing is stored).
pub async fn report_command(
    config: &Config,
    clock: Arc<dyn Clock>,
) -> Result<Report, CommandError> {
    let path = ["api", "v1", "report"];
    if let Some(value) = ask_daemon(config, reqwest::Method::GET, &path, &[], None).await? {
        return serde_json::from_value(value).map_err(|e| CommandError::Local(e.to_string()));
    }
    report_offline(config, clock).await
}

/// `vigie report` with no daemon running: the stored latest results (or
/// probes now when there are none), the stored states, silences and
/// certificate changes.
pub async fn report_offline(
    config: &Config,
    clock: Arc<dyn Clock>,
) -> Result<Report, CommandError> {
    let local = |e: &dyn std::fmt::Display| CommandError::Local(e.to_string());
    let now = clock.now();
    let path = crate::store::history_path(&config.state_dir);
    let names: std::collections::HashSet<&str> =
        config.checks.iter().map(|c| c.name.as_str()).collect();
    let (mut latest, states, silences, changes, health) = match path.exists() {
        true => {
            let (store, alerts) = local_store(config)?;
            let outbox = Outbox::new(alerts.outbox());
            let latest = crate::store::Store::latest_all(&store).map_err(|e| local(&e))?;
            let health = report::Health {
                uptime: None,
                outbox_backlog: Some(outbox.stats().snapshot().backlog),
                dead_letters: Some(outbox.dead_letters_for_report()),
                replication_lag: None,
            };
            (
                latest,
                alerts.states().map_err(|e| local(&e))?,
                alerts.silences().map_err(|e| local(&e))?,
                alerts
                    .changes_since(crate::clock::saturating_sub(
                        now,
                        Duration::from_secs(86_400),
                    ))
                    .map_err(|e| local(&e))?,
                health,
            )
        }
        false => Default::default(),
    };
    latest.retain(|o| names.contains(o.name.as_str()));
    if latest.is_empty() {
        let prober = crate::runner::prober(config, clock.clone()).map_err(|e| local(&e))?;
        let checks = config.all_checks();
        latest =
            crate::runner::check_now(&prober, clock.as_ref(), &checks, config.concurrency).await;
    }
    Ok(report::build(&report::ReportInput {
        now,
        host: &crate::mail::hostname(),
        latest: &latest,
        states: &states,
        changes: &changes,
        silences: &silences,
        health,
        escape_hatches: &[],
        envs: &report::envs(&config.checks),
        zone: config.report.zone,
    }))
}
