//! The whole daemon in this test's process ([`vigie::daemon::Daemon`]),
//! on tokio's paused time and a [`TokioClock`] over it: the wall clock the
//! daemon reads moves only as the test's virtual time does, so a check
//! runs exactly at its due time and its outcome carries that time, and a
//! minute's schedule costs no minute. Talked to over its API (bound to
//! port 0), reloaded and stopped through its handle, as SIGHUP and SIGTERM
//! do. The loopback target runs on the same runtime.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::OffsetDateTime;

use crate::common::daemon::poll;
use crate::common::env::{check_toml, Env};
use crate::common::PlainHttpServer;
use vigie::clock::{Clock, TokioClock};
use vigie::config::Config;
use vigie::daemon::{Daemon, DaemonHandle};

/// In virtual time: longer than a check's period (a minute), so that a
/// wait covers the next due time; idle virtual time costs nothing.
const WAIT: Duration = Duration::from_secs(300);

/// Where the fake clock starts: a whole minute, so that the checks' due
/// times are the schedule's alone.
const START: OffsetDateTime = datetime!(2031-03-04 05:06:00 UTC);

fn config_with_site(server: &PlainHttpServer) -> Env {
    let env = Env::with_config("[api]\nlisten = \"127.0.0.1:0\"\n");
    env.write_checks(
        "site.toml",
        &check_toml("site", &server.url("/"), "every = \"1m\""),
    );
    env
}

async fn start(env: &Env, clock: &TokioClock) -> DaemonHandle {
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    Daemon::new(env.config_path(), env.load(), clock)
        .start()
        .await
        .expect("the daemon starts")
}

/// When `check` is next due after `after`, as the scheduler computes it.
fn next_due(config: &Config, check: &str, after: OffsetDateTime) -> OffsetDateTime {
    let check = config
        .checks
        .iter()
        .find(|c| c.name == check)
        .expect("the check is configured");
    let jitter = vigie::schedule::jitter(&check.name, &check.every, after);
    vigie::schedule::next_due(&check.every, jitter, after).expect("an `every` check is always due")
}

async fn checks(daemon: &DaemonHandle) -> Result<Value, String> {
    let url = format!("http://{}/api/v1/checks", daemon.api_addr());
    let client = vigie::net::api_client().map_err(|e| e.to_string())?;
    let response = client.get(&url).send().await.map_err(|e| e.to_string())?;
    match response.status().as_u16() {
        200 => response.json().await.map_err(|e| e.to_string()),
        status => Err(format!("GET {url}: {status}")),
    }
}

/// Moves virtual time, and with it the daemon's clock, to `at`.
async fn advance_to(clock: &TokioClock, at: OffsetDateTime) {
    let by = (at - clock.now()).try_into().unwrap_or(Duration::ZERO);
    tokio::time::advance(by).await;
}

/// The latest outcome of `check` as the API lists it, once it started at
/// `at`.
async fn latest_at(daemon: &DaemonHandle, check: &str, at: OffsetDateTime) -> Value {
    poll(WAIT, &format!("{check}'s result of {at}"), async || {
        let checks = checks(daemon).await?;
        let latest = checks["checks"]
            .as_array()
            .and_then(|list| list.iter().find(|c| c["name"] == check))
            .map(|c| c["latest"].clone())
            .unwrap_or(Value::Null);
        let started = latest["started_at"]
            .as_str()
            .and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok());
        match started == Some(at) {
            true => Ok(latest),
            false => Err(latest.to_string()),
        }
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_check_runs_when_the_clock_reaches_its_due_time_and_a_stop_keeps_its_result() {
    let server = PlainHttpServer::start();
    let env = config_with_site(&server);
    let config = env.load();
    let clock = TokioClock::starting_at(START);
    let daemon = start(&env, &clock).await;
    assert_ne!(daemon.api_addr().port(), 0, "the API's bound port");

    // The first run is at the first due time, and says so.
    let first = next_due(&config, "site", START);
    advance_to(&clock, first).await;
    let latest = latest_at(&daemon, "site", first).await;
    assert_eq!(latest["status"], "up", "{latest}");
    assert_eq!(latest["http"]["status"], 200, "{latest}");

    let second = next_due(&config, "site", first);
    assert_eq!(second - first, time::Duration::minutes(1));
    advance_to(&clock, second).await;
    latest_at(&daemon, "site", second).await;
    assert_eq!(server.requests(), 2, "one request per due time");

    let api = daemon.api_addr();
    daemon.stop().await.expect("a clean stop");
    assert!(
        tokio::net::TcpStream::connect(api).await.is_err(),
        "the API stopped listening"
    );

    // Stopped cleanly: the store was flushed and released, and a new
    // daemon on the same state dir serves the result before probing again.
    let again = start(&env, &clock).await;
    let latest = latest_at(&again, "site", second).await;
    assert_eq!(latest["status"], "up", "{latest}");
    again.stop().await.expect("a clean stop");
    assert_eq!(server.requests(), 2, "the restart probed nothing yet");
}

#[tokio::test(start_paused = true)]
async fn a_reload_through_the_handle_adds_a_check_that_runs_at_its_due_time() {
    let server = PlainHttpServer::start();
    let env = config_with_site(&server);
    let clock = TokioClock::starting_at(START);
    let daemon = start(&env, &clock).await;

    env.write_checks(
        "more.toml",
        &check_toml("more", &server.url("/"), "every = \"1m\""),
    );
    daemon.reload().await;
    let listed = poll(WAIT, "the reloaded check listed", async || {
        let checks = checks(&daemon).await?;
        let names: Vec<String> = checks["checks"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|c| c["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        match names.iter().any(|n| n == "more") {
            true => Ok(names),
            false => Err(checks.to_string()),
        }
    })
    .await;
    assert_eq!(listed, ["more", "site"]);

    let due = next_due(&env.load(), "more", START);
    advance_to(&clock, due).await;
    let latest = latest_at(&daemon, "more", due).await;
    assert_eq!(latest["status"], "up", "{latest}");
    daemon.stop().await.expect("a clean stop");
}
