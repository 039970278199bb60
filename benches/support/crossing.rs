//! When vigie knew: the probe that crossed an alert threshold, read back
//! from the daemon's history API (shared by the latency benches).

use std::time::Duration;

use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The end of the probe that crossed `threshold` in the latest streak of
/// `down` (or not-down) outcomes.
pub fn crossing_probe(history: &[Value], down: bool, threshold: usize) -> OffsetDateTime {
    let is_down = |o: &Value| o["status"] == "down";
    let streak_start = history
        .iter()
        .rposition(|o| is_down(o) != down)
        .map_or(0, |i| i + 1);
    let crossing = history
        .get(streak_start + threshold - 1)
        .unwrap_or_else(|| {
            panic!(
                "no crossing probe in the last streak of {} outcomes",
                history.len()
            )
        });
    let started = OffsetDateTime::parse(
        crossing["started_at"].as_str().expect("started_at"),
        &Rfc3339,
    )
    .expect("RFC 3339");
    let took = crossing["duration_ms"].as_f64().unwrap_or(0.0);
    started + Duration::from_secs_f64(took / 1000.0)
}
