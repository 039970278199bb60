//! Replication, restore and the heartbeat through the real daemon and CLI:
//! `vigie run` ships its history to a real S3-compatible server with SigV4
//! enforced (moto, `common/s3_auth.rs`) and pings a recording HTTPS server;
//! `vigie restore` on a "fresh VM" (an empty state directory) rebuilds the
//! same history, twice without change, and the restored vigie carries on
//! replicating where the old one stopped.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::common::daemon::{api_section, free_addr, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::pki::{issue, valid_leaf, LeafSpec};
use crate::common::s3_auth::AuthS3;
use crate::common::servers::{TlsOpts, TlsServer};

const START: Duration = Duration::from_secs(20);
const WAIT: Duration = Duration::from_secs(30);
const STOP: Duration = Duration::from_secs(30);

/// A VM: its own directory, API port and key files, replicating as `node`.
fn vm(
    s3: &AuthS3,
    bucket: &str,
    node: &str,
    target: &TlsServer,
    heartbeat: &str,
) -> (Env, std::net::SocketAddr) {
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    let (id, secret) = s3.write_keys(env.path());
    env.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket}/{node}\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\ninterval = \"1s\"\n{heartbeat}",
        s3.endpoint(),
        id.display().to_string(),
        secret.display().to_string(),
    ));
    env.write_checks(
        "site.toml",
        &check_toml("site", &target.url("/"), "every = \"1s\"\ntimeout = \"5s\""),
    );
    (env, api)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn history(env: &Env) -> Vec<Value> {
    let out = vigie_cli_async(
        &env.config_path(),
        &["history", "site", "--since", "1h", "--json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "history: {}", text(&out.stderr));
    let view: Value = serde_json::from_slice(&out.stdout).expect("history --json is JSON");
    view["outcomes"].as_array().expect("outcomes").clone()
}

async fn restore(env: &Env, args: &[&str]) -> String {
    let mut all = vec!["restore"];
    all.extend_from_slice(args);
    let out = vigie_cli_async(&env.config_path(), &all).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "vigie restore: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // Under a pipe, progress is a line on stderr; the last one says all
    // segments are done.
    let progress = text(&out.stderr);
    let last = progress
        .lines()
        .rfind(|l| l.starts_with("restoring: "))
        .unwrap_or_else(|| panic!("no progress line: {progress}"));
    let counts: Vec<&str> = last
        .trim_start_matches("restoring: ")
        .split(' ')
        .take(3)
        .collect();
    assert_eq!(
        counts[0], counts[2],
        "the last line says all are done: {last}"
    );
    text(&out.stdout)
}

/// Waits until `daemon` has shipped at least `results` results.
async fn replicated(daemon: &Daemon, results: f64) {
    daemon
        .wait_metric("vigie_replication_results_total", results, WAIT)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_daemon_replicates_and_pings_and_a_fresh_vm_restores_the_same_history() {
    let s3 = AuthS3::shared();
    let bucket = s3.bucket();
    let target = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let ping = TlsServer::start_with(
        &issue(&LeafSpec::new(["localhost"])),
        TlsOpts::default(),
        Arc::new(|_| (200, vec![], "OK".to_string())),
    );
    let heartbeat = format!(
        "[heartbeat]\nurl = \"https://localhost:{}/ping/5bf6e9b2\"\ninterval = \"1s\"\n",
        ping.port()
    );

    // The old VM runs, ships and pings.
    let (old, api) = vm(s3, &bucket, "vm-1", &target, &heartbeat);
    let mut daemon = Daemon::spawn(&old.config_path(), api);
    daemon.wait_healthy(START).await;
    replicated(&daemon, 5.0).await;
    let health = daemon.get_json("/healthz").await.unwrap();
    assert_eq!(health["replication"]["status"], "ok", "{health}");
    assert!(
        health["replication"]["lag_results"].is_u64(),
        "lag in /healthz: {health}"
    );
    assert!(
        !health.to_string().contains(&bucket),
        "/healthz names the bucket: {health}"
    );
    let pings = ping.recorded_requests();
    assert!(
        pings
            .iter()
            .any(|r| r.method == "GET" && r.uri == "/ping/5bf6e9b2"),
        "no heartbeat ping recorded: {:?}",
        pings
            .iter()
            .map(|r| (&r.method, &r.uri))
            .collect::<Vec<_>>()
    );
    daemon.stop(STOP).await;
    let pinged = ping.recorded_requests().len();
    let original = history(&old).await;
    assert!(original.len() >= 5, "{} results", original.len());

    // The heartbeat stops with vigie: that is what the outside service
    // alerts on.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(ping.recorded_requests().len(), pinged, "pings after stop");

    // A fresh VM (empty state_dir) restores from the old node's prefix.
    let (fresh, fresh_api) = vm(s3, &bucket, "vm-1", &target, "");
    let report = restore(&fresh, &[]).await;
    assert!(
        report.contains(&format!("restored from s3://{bucket}/vm-1")),
        "{report}"
    );
    assert_eq!(history(&fresh).await, original, "restored history differs");
    let again = restore(&fresh, &[]).await;
    assert!(
        again.contains("(0 added, 0 replaced"),
        "second restore: {again}"
    );
    assert_eq!(
        history(&fresh).await,
        original,
        "history after restore twice"
    );

    // It carries on where the old one stopped: what it ships next lands in
    // the same node's sequence, and a third restore sees both.
    let mut restored_daemon = Daemon::spawn(&fresh.config_path(), fresh_api);
    restored_daemon.wait_healthy(START).await;
    replicated(&restored_daemon, 2.0).await;
    restored_daemon.stop(STOP).await;
    let continued = history(&fresh).await;
    let third = Env::with_config("");
    let (id, secret) = s3.write_keys(third.path());
    third.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket}/elsewhere\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\n",
        s3.endpoint(),
        id.display().to_string(),
        secret.display().to_string(),
    ));
    third.write_checks(
        "site.toml",
        &check_toml("site", &target.url("/"), "every = \"1s\""),
    );
    let report = restore(&third, &["--from", &format!("s3://{bucket}/vm-1")]).await;
    assert!(!report.contains("missing"), "{report}");
    assert_eq!(history(&third).await, continued, "old + continued history");
}

#[tokio::test(flavor = "multi_thread")]
async fn restore_without_replication_or_with_wrong_keys_says_what_to_fix() {
    let env = Env::with_config("");
    env.write_idle_check();
    let out = vigie_cli_async(&env.config_path(), &["restore"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("[replication]"),
        "{}",
        text(&out.stderr)
    );

    let s3 = AuthS3::shared();
    let bucket = s3.bucket();
    let (id, secret) = crate::common::s3_auth::write_keys(env.path(), "AKIAWRONG", "wrong-secret");
    env.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket}/vm-1\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\n",
        s3.endpoint(),
        id.display().to_string(),
        secret.display().to_string(),
    ));
    let out = vigie_cli_async(&env.config_path(), &["restore"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("InvalidAccessKeyId") || stderr.contains("credentials"),
        "{stderr}"
    );
}

/// Writes `secret` to `dir/name`, mode 0600, as an operator would.
fn write_secret(dir: &std::path::Path, name: &str, secret: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The runbook "stop the service, run `vigie restore`" with keys given by
/// name: the daemon reads them from `$CREDENTIALS_DIRECTORY` (laid out as
/// the packaged unit's `LoadCredential=vigie:DIR` makes it, `vigie_NAME`),
/// and once it is stopped, with that directory gone as systemd removes it,
/// `restore` reads the same names from `credentials_dir`.
#[tokio::test(flavor = "multi_thread")]
async fn with_keys_by_name_restore_works_with_the_service_stopped() {
    let s3 = AuthS3::shared();
    let bucket = s3.bucket();
    let target = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.prepend_config("credentials_dir = \"credentials\"\n");
    env.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket}/vm-1\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
         access_key_id_credential = \"s3-key-id\"\nsecret_access_key_credential = \"s3-secret\"\n\
         interval = \"1s\"\n",
        s3.endpoint(),
    ));
    env.write_checks(
        "site.toml",
        &check_toml("site", &target.url("/"), "every = \"1s\"\ntimeout = \"5s\""),
    );
    let (id, secret) = s3.write_keys(env.path());
    let (id, secret) = (
        std::fs::read_to_string(id).unwrap(),
        std::fs::read_to_string(secret).unwrap(),
    );
    // While the service runs, only systemd's copies exist: credentials_dir
    // is still empty, so the daemon can only have used the former.
    let run = env.path().join("run-credentials");
    write_secret(&run, "vigie_s3-key-id", id.trim());
    write_secret(&run, "vigie_s3-secret", secret.trim());

    let mut daemon =
        Daemon::spawn_with_env(&env.config_path(), api, &[("CREDENTIALS_DIRECTORY", &run)]);
    daemon.wait_healthy(START).await;
    replicated(&daemon, 3.0).await;
    daemon.stop(STOP).await;

    // Stopped: systemd removes the service's credentials; the operator's
    // files in credentials_dir are what the CLI reads.
    std::fs::remove_dir_all(&run).unwrap();
    let credentials = env.path().join("credentials");
    write_secret(&credentials, "s3-key-id", id.trim());
    write_secret(&credentials, "s3-secret", secret.trim());
    let original = history(&env).await;
    // The history is lost (a new disk).
    std::fs::remove_dir_all(env.path().join("state")).unwrap();

    let validate = vigie_cli_async(&env.config_path(), &["validate"]).await;
    assert_eq!(
        validate.status.code(),
        Some(0),
        "validate: {}",
        text(&validate.stderr)
    );
    let report = restore(&env, &[]).await;
    assert!(
        report.contains(&format!("restored from s3://{bucket}/vm-1")),
        "{report}"
    );
    assert_eq!(history(&env).await, original, "restored history differs");
}
