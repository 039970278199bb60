//! `vigie restore [--from URL]`: rebuilds the local history from the
//! off-region replica (the work is `replicate::restore`).

use std::sync::Arc;

use crate::config::Config;
use crate::replicate::{blocking, restore, Bucket, BucketSettings, ReplicateError, RestoreReport};
use crate::store::SledStore;

/// `vigie restore [--from URL]`: opens the store under `state_dir`
/// (creating it), restores into it from `[replication]` (or `from`, same
/// endpoint and credentials), flushes. Fails if the daemon holds the store.
pub async fn restore_command(
    config: &Config,
    from: Option<&str>,
) -> Result<RestoreReport, ReplicateError> {
    let replication = config
        .replication
        .as_ref()
        .ok_or_else(|| ReplicateError::NotConfigured {
            config: config.path.clone(),
        })?;
    let mut settings = BucketSettings::from_config(replication, config.extra_ca_file.as_deref());
    if let Some(url) = from {
        settings = settings.with_url(url)?;
    }
    let bucket = Bucket::open(&settings)?;
    crate::store::create_state_dir(&config.state_dir).map_err(|source| {
        ReplicateError::StateDir {
            path: config.state_dir.clone(),
            source,
        }
    })?;
    let path = crate::store::history_path(&config.state_dir);
    let store = Arc::new(SledStore::open(&path, crate::store::FLUSH_EVERY)?);
    let report = restore(&bucket, store.clone()).await?;
    blocking(move || crate::store::Store::flush(&*store)).await??;
    if report.is_complete() {
        if let Ok(Some(aside)) = crate::store::acknowledge(&config.state_dir) {
            tracing::warn!(moved_to = %aside.moved_to.display(), "restored: the notice of the store set aside is cleared (the directory stays; delete it when done)");
        }
    }
    Ok(report)
}
