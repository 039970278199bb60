//! The `sweep` task: both retentions (raw results, then rollups), hourly.
//! It deletes through the [`Store`] contract only; what each retention
//! keeps is `[history]`'s to say.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::HistoryConfig;
use crate::store::Store;
use crate::supervise::Stage;

/// How often retention is enforced.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Every [`SWEEP_EVERY`], the first time at once, until `shutdown`:
/// deletes raw results older than `retention`, hour rollups older than
/// [`HistoryConfig::hour_rollup_retention`], and day rollups and the
/// certificate timeline's leaves older than `rollup_retention`.
pub async fn sweep(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    history: tokio::sync::watch::Receiver<HistoryConfig>,
    stage: Arc<Stage>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let history = history.borrow().clone();
        let now = clock.now();
        let before = crate::clock::since(now, history.retention);
        let hours_before = crate::clock::since(now, history.hour_rollup_retention());
        let days_before = crate::clock::since(now, history.rollup_retention);
        let store = store.clone();
        let swept = tokio::task::spawn_blocking(move || {
            Ok::<_, crate::store::StoreError>((
                store.sweep(before)?,
                store.sweep_rollups(hours_before, days_before)?,
            ))
        })
        .await;
        match swept {
            Ok(Ok((0, 0))) => {}
            Ok(Ok((removed, rollups))) => tracing::info!(removed, rollups, "retention sweep"),
            Ok(Err(err)) => tracing::error!(error = %err, "retention sweep failed"),
            Err(err) => tracing::error!(error = %err, "retention sweep panicked"),
        }
        stage.progressed();
    }
}
