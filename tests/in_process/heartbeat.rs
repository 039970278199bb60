//! The heartbeat against a real HTTPS server on loopback that records every
//! request (a test-PKI certificate for `localhost`, trusted through
//! `extra_ca_file` like a private ping service would be), driven by the
//! daemon's real health verdict on a fake clock.

use std::sync::Arc;
use std::time::Duration;

use crate::common::pki::{issue, write_root_pem, LeafSpec};
use crate::common::servers::{refused_addr, RecordedRequest, TlsOpts, TlsServer};
use time::macros::datetime;
use tokio_util::sync::CancellationToken;
use url::Url;
use vigie::clock::{Clock, FakeClock};
use vigie::config::HeartbeatConfig;
use vigie::health::{Health, Late};
use vigie::heartbeat::{self, Beat, Heartbeat, Signal};
use vigie::redact::reason_kind;
use vigie::replicate::{ReplicationSnapshot, ReplicationState};

const INTERVAL: Duration = Duration::from_millis(100);

/// A ping service that answers `status` to everything.
fn ping_service(status: u16) -> TlsServer {
    let leaf = issue(&LeafSpec::new(["localhost"]));
    TlsServer::start_with(
        &leaf,
        TlsOpts::default(),
        Arc::new(move |_| (status, vec![], "OK".to_string())),
    )
}

fn config(url: &str) -> HeartbeatConfig {
    HeartbeatConfig {
        url: Url::parse(url).unwrap(),
        interval: INTERVAL,
    }
}

fn requests_since(server: &TlsServer, from: usize) -> Vec<(String, String)> {
    server.recorded_requests()[from..]
        .iter()
        .map(|r: &RecordedRequest| (r.method.clone(), r.uri.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_while_healthy_fails_when_late_falls_silent_when_stuck_and_stops_with_vigie() {
    let ca_dir = tempfile::tempdir().unwrap();
    let ca = write_root_pem(ca_dir.path());
    let server = ping_service(200);
    let url = format!("https://localhost:{}/ping/5bf6e9b2", server.port());
    let clock = FakeClock::new(datetime!(2026-11-29 07:00:00 UTC));
    let health = Arc::new(Health::new(clock.now(), Default::default()));
    let beat = Heartbeat::new(&config(&url), Some(&ca), Arc::new(clock.clone())).unwrap();
    let stats = beat.stats();
    let shutdown = CancellationToken::new();
    let task = {
        let (health, clock, shutdown) = (health.clone(), clock.clone(), shutdown.clone());
        tokio::spawn(async move {
            beat.run(
                move || heartbeat::signal(&health.verdict(clock.now())),
                shutdown,
            )
            .await
        })
    };

    // On time: a plain GET every interval, the first at once.
    tokio::time::sleep(INTERVAL * 3 + INTERVAL / 2).await;
    let healthy = requests_since(&server, 0);
    assert!(healthy.len() >= 3, "{healthy:?}");
    assert!(
        healthy
            .iter()
            .all(|r| *r == ("GET".into(), "/ping/5bf6e9b2".into())),
        "{healthy:?}"
    );
    assert!(stats.last_delivered().is_some());

    // Late: /fail, with the reason as the body.
    health.tick(
        clock.now(),
        Some(Late {
            check: "site".into(),
            by: Duration::from_secs(90),
        }),
        3,
    );
    let seen = server.recorded_requests().len();
    tokio::time::sleep(INTERVAL * 3).await;
    let late = requests_since(&server, seen);
    assert!(late.len() >= 2, "{late:?}");
    assert!(
        late[1..]
            .iter()
            .all(|r| *r == ("POST".into(), "/ping/5bf6e9b2/fail".into())),
        "{late:?}"
    );
    assert!(stats.fail_total() >= 2);

    // Stuck (the supervisor stopped ticking): nothing at all.
    clock.advance(Duration::from_secs(30));
    tokio::time::sleep(INTERVAL).await;
    let seen = server.recorded_requests().len();
    tokio::time::sleep(INTERVAL * 4).await;
    assert_eq!(
        requests_since(&server, seen),
        vec![],
        "silence while the scheduler stalls"
    );
    assert!(stats.withheld_total() >= 3);

    // On time again, then vigie stops: pings resume, then end.
    health.tick(clock.now(), None, 0);
    tokio::time::sleep(INTERVAL * 2).await;
    assert!(requests_since(&server, seen).contains(&("GET".into(), "/ping/5bf6e9b2".into())));
    shutdown.cancel();
    task.await.unwrap();
    let seen = server.recorded_requests().len();
    tokio::time::sleep(INTERVAL * 3).await;
    assert_eq!(
        server.recorded_requests().len(),
        seen,
        "no ping after vigie stops"
    );
    assert_eq!(stats.errors_total(), 0);

    let mut metrics = String::new();
    stats.write_metrics(&mut metrics);
    assert!(
        metrics.contains("vigie_heartbeat_pings_total{signal=\"alive\",result=\"delivered\"} "),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_counted_and_the_beat_goes_on() {
    let ca_dir = tempfile::tempdir().unwrap();
    let ca = write_root_pem(ca_dir.path());
    let clock = Arc::new(FakeClock::new(datetime!(2026-11-29 07:00:00 UTC)));

    let refused = format!("https://localhost:{}/ping/x", refused_addr().port());
    let beat = Heartbeat::new(&config(&refused), Some(&ca), clock.clone()).unwrap();
    let started = std::time::Instant::now();
    match beat.beat(&Signal::Alive).await {
        Beat::Failed(error) => assert!(error.starts_with("cannot connect"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a refused ping returns at once"
    );

    let broken = ping_service(500);
    let url = format!("https://localhost:{}/ping/x", broken.port());
    let beat = Heartbeat::new(&config(&url), Some(&ca), clock.clone()).unwrap();
    let stats = beat.stats();
    let shutdown = CancellationToken::new();
    let task = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { beat.run(|| Signal::Alive, shutdown).await })
    };
    tokio::time::sleep(INTERVAL * 3 + INTERVAL / 2).await;
    shutdown.cancel();
    task.await.unwrap();
    assert!(
        stats.errors_total() >= 3,
        "every failed ping counted, and the loop kept going"
    );
    assert_eq!(stats.alive_total(), 0);

    // Without the test CA, the service's certificate is not trusted.
    let beat = Heartbeat::new(&config(&url), None, clock).unwrap();
    match beat.beat(&Signal::Alive).await {
        Beat::Failed(error) => assert!(error.contains("certificate"), "{error}"),
        other => panic!("{other:?}"),
    }
}

/// What degrades vigie reaches the beat as the daemon's watch writes it
/// into health: replication's reason reduced to its kind, so the third
/// party never learns the bucket or endpoint.
#[test]
fn replication_failing_or_far_behind_degrades_the_beat() {
    let clock = FakeClock::new(datetime!(2026-11-29 07:00:00 UTC));
    let health = Health::new(clock.now(), Default::default());
    let snapshot = |status: ReplicationState| ReplicationSnapshot {
        status,
        lag_seconds: 1800.0,
        lag_results: 60_000,
        last_success: None,
        consecutive_failures: if status == ReplicationState::Failing {
            3
        } else {
            0
        },
        failures_total: 3,
        segments_total: 0,
        results_total: 0,
        bytes_total: 0,
        last_error: Some("cannot reach https://s3.example: timed out".into()),
    };
    let current = Arc::new(std::sync::Mutex::new(Vec::new()));
    let source = current.clone();
    health.degraded_by(move |_| source.lock().unwrap().clone());
    let beat_with = |snapshot: ReplicationSnapshot| {
        let degraded = snapshot
            .reason()
            .map(|r| reason_kind(&r))
            .into_iter()
            .collect();
        *current.lock().unwrap() = degraded;
        heartbeat::signal(&health.verdict(clock.now()))
    };
    assert_eq!(beat_with(snapshot(ReplicationState::Ok)), Signal::Alive);
    assert_eq!(
        beat_with(snapshot(ReplicationState::Failing)),
        Signal::Degraded("replication failing (3 cycles in a row, 60000 results waiting)".into())
    );
    assert_eq!(
        beat_with(snapshot(ReplicationState::Behind)),
        Signal::Degraded("replication is 1800 s behind (60000 results waiting)".into())
    );
}
