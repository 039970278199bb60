//! Alerting through the real daemon: `vigie run` against a loopback HTTPS
//! target whose answer the test switches, mailing a real SMTP server
//! (aiosmtpd, `common/smtp.rs`). One grouped DOWN for two checks failing
//! together, one grouped RESOLVED threaded to it, silences through the CLI
//! (and its API), the report over the API, `kill -9` with a page due.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::daemon::{api_section, free_addr, poll, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::servers::{switchable_target, TlsServer};
use crate::common::smtp::{Received, SmtpOpts, SmtpServer};

const START: Duration = Duration::from_secs(20);
const MAIL: Duration = Duration::from_secs(30);
const STOP: Duration = Duration::from_secs(30);

/// A daemon config mailing `smtp`, with `checks` on `target`, a token.
fn env(smtp: &SmtpServer, target: &TlsServer, checks: &[&str]) -> (Env, std::net::SocketAddr) {
    let api = free_addr();
    let env = Env::with_config("");
    let token = env.path().join("api-token");
    std::fs::write(&token, "s3cr3t-token\n").unwrap();
    env.append_config(&api_section(api, Some(&token)));
    env.append_config(&smtp.alerting_sections(
        "failure_threshold = 2\nrecovery_threshold = 2\ngroup_window = \"2s\"\n",
    ));
    let mut toml = String::new();
    for name in checks {
        toml += &check_toml(
            name,
            &target.url(&format!("/{name}")),
            "every = \"1s\"\ntimeout = \"5s\"\n[check.expect]\nstatus = [200]",
        );
    }
    env.write_checks("checks.toml", &toml);
    (env, api)
}

fn subjects(mails: &[Received]) -> Vec<String> {
    mails
        .iter()
        .map(|m| m.header("Subject").unwrap_or_default())
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outage_pages_once_grouped_and_its_recovery_threads_to_it() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let (env, api) = env(&smtp, &target, &["site", "app"]);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some("s3cr3t-token".to_string());
    daemon.wait_healthy(START).await;

    // Healthy: nothing is mailed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        smtp.count(),
        0,
        "mail while all is well: {:?}",
        subjects(&smtp.received())
    );

    // The platform fails: both checks, one mail.
    status.store(503, Ordering::SeqCst);
    let mails = smtp.wait_for(1, MAIL);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mails_after = smtp.received();
    assert_eq!(
        mails_after.len(),
        1,
        "one grouped DOWN: {:?}",
        subjects(&mails_after)
    );
    let down = &mails[0];
    let subject = down.header("Subject").unwrap();
    assert!(subject.contains("DOWN"), "{subject}");
    assert!(
        subject.contains("site") && subject.contains("app"),
        "{subject}"
    );
    assert_eq!(
        down.header("Auto-Submitted").as_deref(),
        Some("auto-generated")
    );
    assert_eq!(down.rcpt_tos, ["oncall@example.com"]);
    assert!(down.data.contains("503"), "the body names the status seen");

    // The report over the API lists both as problems.
    let report = daemon.get_json("/api/v1/report").await.unwrap();
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(|p| p["check"].as_str())
        .collect();
    assert!(
        problems.contains(&"site") && problems.contains(&"app"),
        "{report}"
    );

    // Recovery: one RESOLVED, threaded to the DOWN.
    status.store(200, Ordering::SeqCst);
    let mails = smtp.wait_for(2, MAIL);
    let resolved = &mails[1];
    let subject = resolved.header("Subject").unwrap();
    assert!(subject.contains("RESOLVED"), "{subject}");
    assert_eq!(
        resolved.header("In-Reply-To"),
        Some(down.message_id()),
        "threading"
    );

    // A silence through the CLI (the daemon runs: it goes through the API
    // with the token) holds the page of `app` only.
    let out = vigie_cli_async(
        &env.config_path(),
        &["silence", "app", "--for", "1h", "--reason", "deploy"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "silence: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("silenced \"app\""),
        "{}",
        text(&out.stdout)
    );
    // A silence longer than MAX_SILENCE is refused with the reason; it
    // used to panic the handler and reset the connection.
    let (code, body) = daemon
        .post(
            "/api/v1/silences",
            &serde_json::json!({ "pattern": "site", "for": "20000y" }),
        )
        .await
        .unwrap();
    assert_eq!(code, 400, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["error"],
        "for: a silence of 20000years is longer than the maximum of 1year"
    );
    status.store(503, Ordering::SeqCst);
    let mails = smtp.wait_for(3, MAIL);
    let subject = mails[2].header("Subject").unwrap();
    assert!(subject.contains("DOWN site"), "only site pages: {subject}");
    assert!(!subject.contains("app"), "app is silenced: {subject}");

    // The server has the third mail a moment before the sender, on its
    // 250, takes it out of the outbox.
    poll(MAIL, "the outbox empty", async || {
        let health = daemon.get_json("/healthz").await?;
        match health["outbox"]["backlog"] == 0 {
            true => Ok(()),
            false => Err(health.to_string()),
        }
    })
    .await;
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert!(
        metrics.contains("vigie_mail_delivered_total 3"),
        "{metrics}"
    );
    assert!(metrics.contains("vigie_alerts_firing 2"), "{metrics}");
    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_neither_loses_nor_repeats_a_known_incident() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let (env, api) = env(&smtp, &target, &["site"]);
    status.store(503, Ordering::SeqCst);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some("s3cr3t-token".to_string());
    daemon.wait_healthy(START).await;
    let mails = smtp.wait_for(1, MAIL);
    assert!(mails[0].header("Subject").unwrap().contains("DOWN site"));
    // The server has the mail a moment before vigie records it delivered; a
    // kill in that moment redelivers it (SMTP is at-least-once, the copy has
    // the same Message-ID). This test is about the incident, so it waits.
    poll(MAIL, "the delivery recorded", async || {
        let health = daemon.get_json("/healthz").await?;
        match health["outbox"]["backlog"].as_u64() {
            Some(0) => Ok(()),
            _ => Err(health.to_string()),
        }
    })
    .await;

    // Killed while the incident is open; restarted, still failing: no new
    // DOWN (the state survived), and the recovery is still mailed.
    daemon.kill9();
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some("s3cr3t-token".to_string());
    daemon.wait_healthy(START).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        smtp.count(),
        1,
        "re-paged after restart: {:?}",
        smtp.received()
            .iter()
            .map(|m| (m.header("Subject"), m.message_id()))
            .collect::<Vec<_>>()
    );
    status.store(200, Ordering::SeqCst);
    let mails = smtp.wait_for(2, MAIL);
    assert!(mails[1]
        .header("Subject")
        .unwrap()
        .contains("RESOLVED site"));
    assert_eq!(mails[1].header("In-Reply-To"), Some(mails[0].message_id()));
    daemon.stop(STOP).await;

    // With the daemon stopped the CLI writes the store itself.
    let out = vigie_cli_async(&env.config_path(), &["silence", "*", "--for", "2h"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = vigie_cli_async(&env.config_path(), &["unsilence", "*"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = vigie_cli_async(&env.config_path(), &["unsilence", "*"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let out = vigie_cli_async(&env.config_path(), &["report", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["certificates"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{report}"
    );
    let out = vigie_cli_async(&env.config_path(), &["test-email"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(smtp.wait_for(3, MAIL).len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn when_every_canary_fails_vigie_pages_its_own_blindness_not_the_checks() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, _status) = switchable_target();
    let (env, api) = env(&smtp, &target, &[]);
    // Both the canary and the check get no answer at all: connection
    // refused. A canary round every second.
    let nowhere = crate::common::servers::refused_addr();
    env.append_config(&format!(
        "[connectivity]\ncanaries = [\"https://{nowhere}/\"]\nevery = \"1s\"\n"
    ));
    env.write_checks(
        "checks.toml",
        &check_toml(
            "site",
            &format!("https://{nowhere}/"),
            "every = \"1s\"\ntimeout = \"2s\"",
        ),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some("s3cr3t-token".to_string());
    daemon.wait_healthy(START).await;

    // Two blind canary rounds fire vigie's own alert; the check is never
    // paged.
    let mails = smtp.wait_for(1, MAIL);
    let subject = mails[0].header("Subject").unwrap();
    assert!(subject.contains("cannot reach the network"), "{subject}");
    assert!(!subject.contains("site"), "{subject}");
    let health = daemon.get_json("/healthz").await.unwrap();
    assert!(health["degraded"].to_string().contains("blind"), "{health}");
    let history = daemon.history("site").await.unwrap();
    assert!(
        !history.is_empty(),
        "probes go on and are stored while blind"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(smtp.count(), 1, "{:?}", subjects(&smtp.received()));
    daemon.stop(STOP).await;
}

async fn wait_backlog(daemon: &Daemon, n: f64) {
    daemon
        .wait_metric("vigie_mail_outbox_backlog", n, MAIL)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mail_pending_at_a_kill_9_is_delivered_once_after_restart() {
    let mut smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let (env, api) = env(&smtp, &target, &["site"]);
    // The relay is down: the DOWN and then the RESOLVED wait in the outbox.
    smtp.stop();
    status.store(503, Ordering::SeqCst);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some("s3cr3t-token".to_string());
    daemon.wait_healthy(START).await;
    wait_backlog(&daemon, 1.0).await;
    let health = daemon.get_json("/healthz").await.unwrap();
    assert!(
        health["degraded"]
            .to_string()
            .contains("mail delivery failing"),
        "{health}"
    );
    status.store(200, Ordering::SeqCst);
    wait_backlog(&daemon, 2.0).await;

    daemon.kill9();
    smtp.restart();
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some("s3cr3t-token".to_string());
    daemon.wait_healthy(START).await;
    let mails = smtp.wait_for(2, Duration::from_secs(90));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mails_after = smtp.received();
    assert_eq!(
        mails_after.len(),
        2,
        "each exactly once: {:?}",
        subjects(&mails_after)
    );
    let subjects = subjects(&mails);
    assert!(subjects[0].contains("DOWN site"), "{subjects:?}");
    assert!(subjects[1].contains("RESOLVED site"), "{subjects:?}");
    assert_eq!(mails[1].header("In-Reply-To"), Some(mails[0].message_id()));
    daemon.stop(STOP).await;
}
