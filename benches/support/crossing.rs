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

/// The config both latency benches run: the API on a free port, mail to
/// `smtp` with `threshold` both ways and `group_window`, and one check,
/// `site`, on `target` every second.
pub fn site_env(
    smtp: &crate::common::smtp::SmtpServer,
    target: &crate::common::servers::TlsServer,
    threshold: usize,
    group_window: Duration,
) -> (crate::common::env::Env, std::net::SocketAddr) {
    use crate::common::daemon::{api_section, free_addr};
    use crate::common::env::{check_toml, Env};
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.append_config(&smtp.alerting_sections(&format!(
        "failure_threshold = {threshold}\nrecovery_threshold = {threshold}\ngroup_window = \"{}s\"\n",
        group_window.as_secs(),
    )));
    env.write_checks(
        "site.toml",
        &check_toml(
            "site",
            &target.url("/"),
            "every = \"1s\"\ntimeout = \"5s\"\n[check.expect]\nstatus = [200]",
        ),
    );
    (env, api)
}

/// Switches the target's `status` between 503 and 200 `incidents` times;
/// for each DOWN and RESOLVED, the seconds from the crossing probe to
/// `accepted(n)`, when the n-th message since the start was accepted.
/// Prints each, and returns (DOWN, RESOLVED).
pub async fn measure(
    incidents: usize,
    status: &std::sync::atomic::AtomicU16,
    daemon: &crate::common::daemon::Daemon,
    threshold: usize,
    mut accepted: impl AsyncFnMut(usize) -> OffsetDateTime,
) -> (Vec<f64>, Vec<f64>) {
    let mut down = Vec::new();
    let mut resolved = Vec::new();
    for i in 0..incidents {
        for (code, want_down) in [(503, true), (200, false)] {
            status.store(code, std::sync::atomic::Ordering::SeqCst);
            let n = 2 * i + usize::from(!want_down) + 1;
            let at = accepted(n).await;
            let history = daemon.history("site").await.expect("history");
            let latency = (at - crossing_probe(&history, want_down, threshold)).as_seconds_f64();
            let kind = if want_down { "DOWN" } else { "RESOLVED" };
            println!("  incident {}: {kind:<8} {latency:.3} s", i + 1);
            match want_down {
                true => down.push(latency),
                false => resolved.push(latency),
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    (down, resolved)
}

/// The median and the maximum of each, against `1 s + group_window`.
pub fn report(mut down: Vec<f64>, mut resolved: Vec<f64>, group_window: Duration) {
    for (kind, values) in [("DOWN", &mut down), ("RESOLVED", &mut resolved)] {
        values.sort_by(f64::total_cmp);
        println!(
            "{kind:<8} median {:.3} s, max {:.3} s (target < {:.1} s)",
            values[values.len() / 2],
            values[values.len() - 1],
            1.0 + group_window.as_secs_f64()
        );
    }
}
