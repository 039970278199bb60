//! Storage faults through the real daemon: the state directory on a small
//! tmpfs of its own, filled up (ENOSPC) while vigie runs, then a target
//! goes down. The page still reaches the real SMTP server,
//! `/healthz` answers 503 `store` with the OS error, and probing goes on.
//!
//! Mounting needs root: CI runs as root. Elsewhere, run these tests with
//! `sudo -E cargo test --features fault-injection --test store_faults`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use crate::common::daemon::{api_section, free_addr, poll, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::servers::{switchable_target, TlsServer};
use crate::common::smtp::{SmtpOpts, SmtpServer};

const START: Duration = Duration::from_secs(20);
const MAIL: Duration = Duration::from_secs(40);

/// A tmpfs mounted on a directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "mounting a small tmpfs needs root (CI runs as root); run: \
             sudo -E cargo test --features fault-injection --test store_faults"
        );
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mount -t tmpfs on {}: {status}",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Tmpfs {
    fn remount(&self, options: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.0)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {options}: {status}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// `state` on a tmpfs of its own, mounted read-only: vigie starts on a
/// temporary store.
fn read_only_state(state: &Path) -> Tmpfs {
    let tmpfs = Tmpfs::mount(state, "48m");
    tmpfs.remount("ro");
    tmpfs
}

/// Writes `dir/filler` until the file system refuses: ENOSPC.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![0xA5u8; 64 * 1024];
    loop {
        if let Err(err) = file.write_all(&chunk).and_then(|()| file.sync_all()) {
            assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
            return;
        }
    }
}

fn env(smtp: &SmtpServer, target: &TlsServer) -> (Env, std::net::SocketAddr) {
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.append_config(&smtp.alerting_sections(
        "failure_threshold = 2\nrecovery_threshold = 2\ngroup_window = \"1s\"\n",
    ));
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

/// Waits for `/healthz` to answer 200 `ok` again (`what` says why).
async fn healthy_again(daemon: &Daemon, what: &str) {
    poll(Duration::from_secs(60), what, async || {
        match daemon.get("/healthz").await? {
            (200, body) if body.contains("\"status\":\"ok\"") => Ok(()),
            (code, body) => Err(format!("{code} {body}")),
        }
    })
    .await;
}

/// Waits for the history of `site` to hold at least `n` results.
async fn stored_at_least(daemon: &Daemon, n: usize) {
    poll(
        Duration::from_secs(20),
        &format!("{n} results stored"),
        async || match daemon.history("site").await?.len() {
            got if got >= n => Ok(()),
            got => Err(format!("{got} results")),
        },
    )
    .await;
}

/// Waits for `/healthz` to answer 503 `store`, naming `os_error`.
async fn store_unhealthy(daemon: &Daemon, os_error: &str) -> Value {
    poll(
        Duration::from_secs(30),
        "/healthz 503 store",
        async || match daemon.get("/healthz").await? {
            (503, body) => {
                let json: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
                let reason = json["reason"].as_str().unwrap_or_default();
                match json["status"] == "store" && reason.contains(os_error) {
                    true => Ok(json),
                    false => Err(body),
                }
            }
            (code, body) => Err(format!("{code} {body}")),
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_state_disk_still_pages_and_says_store_in_healthz() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let (env, api) = env(&smtp, &target);
    let state = env.path().join("state");
    let _tmpfs = Tmpfs::mount(&state, "48m");
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    fill(&state);
    status.store(503, Ordering::SeqCst);
    smtp.wait_for_down("site", MAIL);
    let health = store_unhealthy(&daemon, "No space left on device").await;
    assert!(
        health["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("pages still go out"),
        "{health}"
    );
    // Probing goes on: the latest result keeps moving.
    let before =
        daemon.get_json("/api/v1/checks").await.unwrap()["checks"][0]["last_started"].clone();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after =
        daemon.get_json("/api/v1/checks").await.unwrap()["checks"][0]["last_started"].clone();
    assert_ne!(before, after, "probes stopped while the disk is full");
    assert!(
        daemon.log().contains("cannot store results"),
        "{}",
        daemon.log()
    );

    // Space comes back: vigie reopens the store by itself, history resumes,
    // and the page is not sent again and again meanwhile.
    let stored_before = daemon.history("site").await.unwrap().len();
    std::fs::remove_file(state.join("filler")).unwrap();
    healthy_again(&daemon, "/healthz ok again").await;
    stored_at_least(&daemon, stored_before + 2).await;
    let log = daemon.log();
    assert!(
        log.contains("the state disk takes writes again: the store is reopened"),
        "{log}"
    );
    assert!(
        smtp.count() <= 2,
        "one DOWN (at most once more after the reopening): {}",
        smtp.count()
    );
    daemon.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_state_directory_at_start_still_pages_and_the_store_comes_when_it_can() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let (env, api) = env(&smtp, &target);
    let state = env.path().join("state");
    let tmpfs = read_only_state(&state);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    let health = store_unhealthy(&daemon, "Read-only file system").await;
    assert!(
        health["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("temporary store"),
        "{health}"
    );
    status.store(503, Ordering::SeqCst);
    smtp.wait_for_down("site", MAIL);

    tmpfs.remount("rw");
    status.store(200, Ordering::SeqCst);
    healthy_again(&daemon, "/healthz ok on the real store").await;
    assert!(
        state.join("history").join("db").exists(),
        "the real store is in state_dir now"
    );
    stored_at_least(&daemon, 2).await;
    assert!(daemon.exited().is_none(), "{}", daemon.log());
    daemon.stop(Duration::from_secs(30)).await;
}

/// Damages the stopped daemon's database: garbage over all of its file,
/// the file cut down to its first hundred bytes, or its `conf` garbled. (A cut that only loses the last
/// writes, sled recovers from as from a power loss, and says nothing.)
fn damage(state: &Path, how: &str) {
    let db = state.join("history").join("db");
    let size = std::fs::metadata(&db).unwrap().len();
    match how {
        "garbage" => {
            let garbage: Vec<u8> = (0..size).map(|i| (i * 7919 % 251) as u8).collect();
            std::fs::write(&db, garbage).unwrap();
        }
        "truncated" => {
            let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
            file.set_len(100).unwrap();
        }
        // sled's settings file, read before the data: sled refuses the
        // store as "unsupported", which is damage, not a full disk.
        "conf" => std::fs::write(
            state.join("history").join("conf"),
            "segment_size: lots\nversion: ?\n\0\0\0\0",
        )
        .unwrap(),
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_store_is_moved_aside_paged_once_and_listed_until_acknowledged() {
    for how in ["garbage", "truncated", "conf"] {
        let smtp = SmtpServer::start(SmtpOpts::plain());
        let (target, _status) = switchable_target();
        let (env, api) = env(&smtp, &target);
        let state = env.path().join("state");
        let mut daemon = Daemon::spawn(&env.config_path(), api);
        daemon.wait_healthy(START).await;
        stored_at_least(&daemon, 3).await;
        daemon.stop(Duration::from_secs(30)).await;
        damage(&state, how);

        let mut daemon = Daemon::spawn(&env.config_path(), api);
        let health = daemon.wait_healthy(START).await;
        let degraded = health["degraded"].to_string();
        assert!(
            degraded.contains("history store was corrupt; moved aside to history.corrupt-")
                && degraded.contains("vigie restore"),
            "{how}: {health}"
        );
        let log = daemon.log();
        assert!(
            log.contains("history store was corrupt (") && log.contains("moved aside to"),
            "{how}:\n{log}"
        );
        let aside: Vec<String> = std::fs::read_dir(&state)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with("history.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "{how}: {aside:?}");
        assert!(
            state.join(&aside[0]).join("db").exists(),
            "{how}: the damaged store is kept"
        );
        let mails = smtp.wait_for(1, MAIL);
        let subject = mails[0].header("Subject").unwrap_or_default();
        assert!(
            subject.contains("history store was corrupt"),
            "{how}: {subject}"
        );
        assert!(mails[0].data.contains("vigie restore"), "{how}");
        let kept = daemon.history("site").await.unwrap().len();
        assert!(
            kept < 3,
            "{how}: started on an empty store ({kept} results)"
        );

        let out =
            crate::common::daemon::vigie_cli_async(&env.config_path(), &["store", "ack-corrupt"])
                .await;
        assert_eq!(out.status.code(), Some(0), "{how}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&aside[0]),
            "{how}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let health = daemon.get_json("/healthz").await.unwrap();
        assert!(
            !health["degraded"].to_string().contains("corrupt"),
            "{how}: cleared: {health}"
        );
        // Restarted, vigie neither sets aside its new store nor pages again.
        daemon.stop(Duration::from_secs(30)).await;
        let mut daemon = Daemon::spawn(&env.config_path(), api);
        daemon.wait_healthy(START).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(smtp.count(), 1, "{how}: paged once");
        daemon.stop(Duration::from_secs(30)).await;
    }
}

/// Waits until the outbox holds at least one message.
async fn backlog(daemon: &Daemon) {
    poll(MAIL, "a page waiting in the outbox", async || {
        // 503 while on the temporary store: the body still says.
        let (_, body) = daemon.get("/healthz").await?;
        let health: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        match health["outbox"]["backlog"].as_u64() {
            Some(n) if n > 0 => Ok(()),
            _ => Err(health.to_string()),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_on_a_temporary_store_tries_its_pages_once_more_and_says_what_it_drops() {
    // The mail server is down when vigie stops: the page is said dropped.
    let mut smtp = SmtpServer::start(SmtpOpts::plain());
    smtp.stop();
    let (target, status) = switchable_target();
    let (env, api) = env(&smtp, &target);
    let state = env.path().join("state");
    let _tmpfs = read_only_state(&state);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    store_unhealthy(&daemon, "Read-only file system").await;
    status.store(503, Ordering::SeqCst);
    backlog(&daemon).await;
    daemon.stop(Duration::from_secs(60)).await;
    let log = daemon.log();
    assert!(
        log.contains("ERROR")
            && log.contains(
                "vigie stops on a temporary store: 1 undelivered message(s) are dropped after one last try"
            )
            && log.contains("site"),
        "{log}"
    );

    // The mail server is back when vigie stops: the last try delivers it,
    // and nothing is said dropped.
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    store_unhealthy(&daemon, "Read-only file system").await;
    backlog(&daemon).await;
    smtp.restart();
    daemon.stop(Duration::from_secs(60)).await;
    let log = daemon.log();
    assert!(!log.contains("are dropped"), "{log}");
    smtp.wait_for_down("site", MAIL);
}
