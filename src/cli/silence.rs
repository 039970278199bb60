//! `vigie silence` and `vigie unsilence`: through the daemon when it runs,
//! else in the store.

use std::time::Duration;

use super::{ask_daemon, local_store, CommandError};
use crate::alert::Silence;
use crate::clock::Clock;
use crate::config::Config;

/// `vigie silence`: through the daemon when it runs, else in the store.
pub async fn silence_command(
    config: &Config,
    pattern: &str,
    duration: Duration,
    reason: &str,
    clock: &dyn Clock,
) -> Result<Silence, CommandError> {
    let body = serde_json::json!({
        "pattern": pattern,
        "for": humantime::format_duration(duration).to_string(),
        "reason": reason,
    });
    let path = ["api", "v1", "silences"];
    if let Some(value) = ask_daemon(config, reqwest::Method::POST, &path, &[], Some(body)).await? {
        return serde_json::from_value(value).map_err(|e| CommandError::Local(e.to_string()));
    }
    let silence = Silence::new(pattern, duration, reason, clock.now())
        .map_err(|e| CommandError::Local(e.to_string()))?;
    let (_store, alerts) = local_store(config)?;
    alerts
        .add_silence(&silence)
        .map_err(|e| CommandError::Local(e.to_string()))?;
    Ok(silence)
}

/// `vigie unsilence`: `false` when no silence had that pattern.
pub async fn unsilence_command(config: &Config, pattern: &str) -> Result<bool, CommandError> {
    let path = ["api", "v1", "silences", pattern];
    match ask_daemon(config, reqwest::Method::DELETE, &path, &[], None).await {
        Ok(Some(_)) => return Ok(true),
        Err(err) if err.is_not_found() => return Ok(false),
        Err(err) => return Err(err.into()),
        Ok(None) => {}
    }
    let (_store, alerts) = local_store(config)?;
    alerts
        .remove_silence(pattern)
        .map_err(|e| CommandError::Local(e.to_string()))
}
