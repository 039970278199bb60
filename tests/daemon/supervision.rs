//! Supervision through the real daemon, with the fault hook of a test build
//! (`--features fault-injection`, which `scripts/test.sh` passes): every
//! supervised task is made to panic while vigie runs. Each panic is logged
//! with the task's name and counted, the task comes back, and a DOWN page
//! still reaches the real SMTP server. A task that panics at every start
//! turns `/healthz` 503 naming it, stops the systemd watchdog
//! notifications, and makes the daemon's exit fail.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::common::daemon::{api_section, free_addr, poll, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::pki::{issue, LeafSpec};
use crate::common::s3_auth::AuthS3;
use crate::common::servers::{switchable_target, TlsOpts, TlsServer};
use crate::common::smtp::{SmtpOpts, SmtpServer};

const START: Duration = Duration::from_secs(20);
const COME_BACK: Duration = Duration::from_secs(20);
const MAIL: Duration = Duration::from_secs(30);

/// Every task `vigie run` supervises when canaries, replication and the
/// heartbeat are configured.
const TASKS: [&str; 11] = [
    "scheduler",
    "recorder",
    "alerter",
    "sender",
    "push",
    "canaries",
    "replicator",
    "heartbeat",
    "sweep",
    "api",
    "watch",
];

/// A daemon with every optional task: canaries and heartbeat on `aux`,
/// replication to the shared S3 server, mail to `smtp`, one check `site`.
fn env(smtp: &SmtpServer, target: &TlsServer, aux: &TlsServer) -> (Env, std::net::SocketAddr) {
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    let s3 = AuthS3::shared();
    let (id, secret) = s3.write_keys(env.path());
    env.append_config(&smtp.alerting_sections(
        "failure_threshold = 2\nrecovery_threshold = 2\ngroup_window = \"1s\"\n",
    ));
    env.append_config(&format!(
        "[connectivity]\ncanaries = [\"https://localhost:{aux}/canary\"]\n\
         [heartbeat]\nurl = \"https://localhost:{aux}/ping/abc\"\ninterval = \"1s\"\n\
         [replication]\nurl = \"s3://{}/supervised\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\ninterval = \"1s\"\n",
        s3.bucket(),
        s3.endpoint(),
        id.display().to_string(),
        secret.display().to_string(),
        aux = aux.port(),
    ));
    env.write_checks(
        "site.toml",
        &check_toml(
            "site",
            &target.url("/site"),
            "every = \"1s\"\ntimeout = \"5s\"\n[check.expect]\nstatus = [200]",
        ),
    );
    (env, api)
}

fn task<'a>(health: &'a Value, name: &str) -> Option<&'a Value> {
    health["tasks"]
        .as_array()?
        .iter()
        .find(|t| t["task"] == name)
}

/// The value of `name{task="..."}` in a `/metrics` text.
fn task_metric(text: &str, name: &str, task: &str) -> Option<f64> {
    let prefix = format!("{name}{{task=\"{task}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// Makes `task` panic once (or at every start with `always`).
fn inject(faults: &Path, task: &str, how: &str) {
    std::fs::write(faults.join(task), how).unwrap();
}

fn assert_hook_armed(daemon: &Daemon) {
    assert!(
        daemon.log().contains("fault injection armed"),
        "this vigie has no fault hook: build the tests with `cargo test --features fault-injection` \
         (scripts/test.sh does):\n{}",
        daemon.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_task_that_panics_comes_back_and_the_page_still_goes_out() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let aux = TlsServer::start_with(
        &issue(&LeafSpec::new(["localhost"])),
        TlsOpts::default(),
        Arc::new(|_| (200, vec![], "OK".to_string())),
    );
    let (env, api) = env(&smtp, &target, &aux);
    let faults = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::spawn_with_env(
        &env.config_path(),
        api,
        &[("VIGIE_FAULT_DIR", faults.path())],
    );
    daemon.wait_healthy(START).await;
    assert_hook_armed(&daemon);

    for name in TASKS {
        inject(faults.path(), name, "once");
        poll(
            COME_BACK,
            &format!("{name} restarted and running"),
            async || {
                let (_, metrics) = daemon.get("/metrics").await?;
                let restarts = task_metric(&metrics, "vigie_task_restarts_total", name);
                let up = task_metric(&metrics, "vigie_task_up", name);
                match (restarts, up) {
                    (Some(r), Some(u)) if r >= 1.0 && u == 1.0 => Ok(()),
                    other => Err(format!("restarts, up: {other:?}")),
                }
            },
        )
        .await;
        let log = daemon.log();
        assert!(
            log.contains(&format!("task {name} panicked: injected fault in {name}")),
            "the panic of {name} is logged with its name and message:\n{log}"
        );
    }
    let health = daemon.wait_healthy(COME_BACK).await;
    for name in TASKS {
        let entry = task(&health, name).unwrap_or_else(|| panic!("{name} in /healthz: {health}"));
        assert_eq!(entry["state"], "running", "{name}: {health}");
        assert_eq!(entry["restarts"], 1, "{name}: {health}");
    }

    // After all that, an outage still pages.
    status.store(503, Ordering::SeqCst);
    smtp.wait_for_down("site", MAIL);

    // A shutdown after panics says so and fails.
    daemon.signal(libc::SIGTERM);
    let exit = daemon.wait_exit(Duration::from_secs(30)).await;
    assert_ne!(exit.code(), Some(0), "exit after panics:\n{}", daemon.log());
    assert!(
        daemon.log().contains("tasks died while it ran"),
        "{}",
        daemon.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_panics_at_every_start_fails_health_and_starves_the_watchdog() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, _status) = switchable_target();
    let ping = TlsServer::start_with(
        &issue(&LeafSpec::new(["localhost"])),
        TlsOpts::default(),
        Arc::new(|_| (200, vec![], "OK".to_string())),
    );
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.append_config(&smtp.alerting_sections(""));
    env.append_config(&format!(
        "[heartbeat]\nurl = \"https://localhost:{}/ping/x\"\ninterval = \"1s\"\n",
        ping.port()
    ));
    env.write_checks(
        "site.toml",
        &check_toml("site", &target.url("/"), "every = \"1s\"\ntimeout = \"5s\""),
    );
    let faults = tempfile::tempdir().unwrap();
    let notify_path = faults.path().join("notify.sock");
    // Read at once, always: a datagram socket holds only a few unread
    // messages (net.unix.max_dgram_qlen), then the sender blocks.
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let watchdogs = Arc::new(AtomicUsize::new(0));
    let counted = watchdogs.clone();
    let reading = Arc::new(AtomicBool::new(true));
    let read_on = reading.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while read_on.load(Ordering::SeqCst) {
            if let Ok(n) = notify.recv(&mut buf) {
                if String::from_utf8_lossy(&buf[..n]).contains("WATCHDOG=1") {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    });
    let mut daemon = Daemon::spawn_with_env(
        &env.config_path(),
        api,
        &[
            ("VIGIE_FAULT_DIR", faults.path()),
            ("NOTIFY_SOCKET", notify_path.as_path()),
        ],
    );
    daemon.wait_healthy(START).await;
    assert_hook_armed(&daemon);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        watchdogs.load(Ordering::SeqCst) >= 1,
        "a healthy vigie feeds the watchdog"
    );

    // Five deaths in a row: backoffs of 1 + 2 + 4 + 8 s.
    inject(faults.path(), "alerter", "always");
    let health = poll(
        Duration::from_secs(40),
        "/healthz 503 failing alerter",
        async || match daemon.get("/healthz").await? {
            (503, body) => {
                let json: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
                match (json["status"].as_str(), json["stage"].as_str()) {
                    (Some("failing"), Some("alerter")) => Ok(json),
                    _ => Err(body),
                }
            }
            (code, body) => Err(format!("{code} {body}")),
        },
    )
    .await;
    let reason = health["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("alerter") && reason.contains("injected fault in alerter"),
        "{health}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let fed = watchdogs.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        watchdogs.load(Ordering::SeqCst) - fed,
        0,
        "no WATCHDOG=1 while the alerter cannot be brought back:\n{}",
        daemon.log()
    );
    assert!(
        daemon
            .log()
            .contains("the systemd watchdog is no longer fed"),
        "{}",
        daemon.log()
    );
    // The heartbeat says so at the outside service.
    let before = ping.recorded_requests().len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let beats: Vec<(String, String)> = ping.recorded_requests()[before..]
        .iter()
        .map(|r| (r.method.clone(), r.uri.clone()))
        .collect();
    assert!(
        !beats.is_empty()
            && beats
                .iter()
                .all(|b| *b == ("POST".into(), "/ping/x/fail".into())),
        "the beats while failing: {beats:?}"
    );

    daemon.signal(libc::SIGTERM);
    let exit = daemon.wait_exit(Duration::from_secs(30)).await;
    assert_ne!(exit.code(), Some(0), "{}", daemon.log());
    reading.store(false, Ordering::SeqCst);
    reader.join().unwrap();
}
