//! Push channels through the real daemon: `vigie run` against a loopback
//! HTTPS target the test switches, pushing to the loopback webhook, ntfy,
//! PagerDuty and Slack peers of `common/push/` and mailing aiosmtpd. Each
//! push is signed, sent once, retried when the endpoint fails, never before
//! its `Retry-After`, survives `kill -9`, waits out an outage behind its
//! breaker, and a channel that refuses vigie for good is a dead push, one
//! mail and a degradation.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::daemon::{api_section, free_addr, metric, poll, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::push::ntfy::{NtfyConfig, NtfyServer};
use crate::common::push::pagerduty::{IncidentState, PagerDutyEvents};
use crate::common::push::slack::SlackWebhook;
use crate::common::push::webhook::{whsec_for_test, WebhookReceiver};
use crate::common::push::Plan;
use crate::common::servers::{switchable_target, TlsServer};
use crate::common::smtp::{SmtpOpts, SmtpServer};

const START: Duration = Duration::from_secs(20);
const PUSH: Duration = Duration::from_secs(30);
const STOP: Duration = Duration::from_secs(30);
const TOPIC: &str = "vigie-oncall";

/// A daemon config mailing `smtp`, its checks on `target`, given
/// `[[notify]]` and `[[route]]` tables; each check is `(name, env)`.
fn env(
    smtp: &SmtpServer,
    target: &TlsServer,
    checks: &[(&str, &str)],
    notify: &str,
) -> (Env, std::net::SocketAddr) {
    let api = free_addr();
    let env = Env::with_config("");
    env.append_config(&api_section(api, None));
    env.append_config(&smtp.alerting_sections(
        "failure_threshold = 2\nrecovery_threshold = 2\ngroup_window = \"1s\"\n",
    ));
    env.append_config(notify);
    let mut toml = String::new();
    for (name, label) in checks {
        toml += &check_toml(
            name,
            &target.url(&format!("/{name}")),
            &format!("every = \"1s\"\ntimeout = \"5s\"\nlabels = {{ env = \"{label}\" }}\n[check.expect]\nstatus = [200]"),
        );
    }
    env.write_checks("checks.toml", &toml);
    (env, api)
}

fn webhook_channel(name: &str, hook: &WebhookReceiver, secret_file: &str, extra: &str) -> String {
    format!(
        "[[notify]]\nname = \"{name}\"\nkind = \"webhook\"\nurl = \"{}\"\nallow_private = true\nsecret_file = {secret_file:?}\n{extra}",
        hook.url()
    )
}

fn ntfy_channel(name: &str, ntfy: &NtfyServer, extra: &str) -> String {
    format!(
        "[[notify]]\nname = \"{name}\"\nkind = \"ntfy\"\nurl = \"{}\"\nallow_private = true\n{extra}",
        ntfy.topic_url(TOPIC)
    )
}

fn subjects(smtp: &SmtpServer) -> Vec<String> {
    smtp.received()
        .iter()
        .map(|m| m.header("Subject").unwrap_or_default())
        .collect()
}

fn events(hook: &WebhookReceiver) -> Vec<(String, String)> {
    hook.deliveries()
        .iter()
        .map(|d| {
            (
                d.body["event"].as_str().unwrap_or("?").to_string(),
                d.id.clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outage_is_pushed_once_to_every_kind_and_its_recovery_closes_each() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    let ntfy = NtfyServer::start(NtfyConfig {
        tokens: vec!["tk_vigietesttoken0123456789abcde".to_string()],
        ..NtfyConfig::default()
    });
    let pagerduty = PagerDutyEvents::start();
    let slack = SlackWebhook::start();
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    let hook_secret = env.write_secret("hook.secret", &whsec);
    let token = env.write_secret("ntfy.token", "tk_vigietesttoken0123456789abcde");
    let key = env.write_secret("pd.key", "0123456789abcdef0123456789abcdef");
    env.append_config(&webhook_channel("hooks", &hook, &hook_secret, ""));
    env.append_config(&ntfy_channel(
        "phone",
        &ntfy,
        &format!("token_file = {token:?}\n"),
    ));
    env.append_config(&format!(
        "[[notify]]\nname = \"pager\"\nkind = \"pagerduty\"\nurl = \"{}\"\nallow_private = true\nrouting_key_file = {key:?}\n\
         [[notify]]\nname = \"chat\"\nkind = \"slack\"\nurl = \"{}\"\nallow_private = true\n",
        pagerduty.url(),
        slack.url()
    ));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    status.store(503, Ordering::SeqCst);
    smtp.wait_for_down("site", PUSH);
    hook.wait_for_answers(1, PUSH).await;
    let down = &hook.deliveries()[0];
    assert_eq!(down.body["version"], 1, "{}", down.body);
    assert_eq!(down.body["event"], "down", "{}", down.body);
    assert_eq!(down.body["checks"][0]["name"], "site", "{}", down.body);
    assert_eq!(
        down.body["checks"][0]["labels"]["env"], "prod",
        "{}",
        down.body
    );
    assert!(
        down.body["checks"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("503")),
        "{}",
        down.body
    );
    assert_eq!(
        down.body["id"].as_str(),
        Some(down.id.as_str()),
        "webhook-id is the event's id"
    );
    poll(PUSH, "a DOWN on every channel", async || {
        let (n, p, s) = (
            ntfy.notifications(TOPIC).len(),
            pagerduty.incidents().len(),
            slack.messages().len(),
        );
        match (n, p, s) {
            (1, 1, 1) => Ok(()),
            other => Err(format!("ntfy, pagerduty, slack: {other:?}")),
        }
    })
    .await;
    let pushed = &ntfy.notifications(TOPIC)[0];
    assert!(pushed.title.contains("DOWN site"), "{pushed:?}");
    assert_eq!(pushed.priority, 5, "a prod DOWN is urgent: {pushed:?}");

    status.store(200, Ordering::SeqCst);
    smtp.wait_for(2, PUSH);
    hook.wait_for_answers(2, PUSH).await;
    poll(PUSH, "the recovery on every channel", async || {
        let incident = pagerduty.incidents();
        let resolved = incident
            .first()
            .is_some_and(|i| i.state == IncidentState::Resolved);
        match (resolved, slack.messages().len(), ntfy.messages(TOPIC).len()) {
            (true, 2, 2) => Ok(()),
            other => Err(format!(
                "pagerduty resolved, slack, ntfy messages: {other:?}"
            )),
        }
    })
    .await;
    // Let any duplicate arrive before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = events(&hook);
    assert_eq!(
        seen.iter().map(|(e, _)| e.as_str()).collect::<Vec<_>>(),
        ["down", "resolved"],
        "{seen:?}"
    );
    assert_ne!(seen[0].1, seen[1].1, "each event its own id");
    assert!(
        hook.refused().is_empty(),
        "every delivery signed: {:?}",
        hook.refused()
    );
    let notifications = ntfy.notifications(TOPIC);
    assert_eq!(
        notifications.len(),
        1,
        "the phone shows one notification for the incident: {notifications:?}"
    );
    assert!(
        notifications[0].title.contains("RESOLVED site"),
        "{notifications:?}"
    );
    let incidents = pagerduty.incidents();
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert_eq!(subjects(&smtp).len(), 2, "{:?}", subjects(&smtp));
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert!(
        metrics.contains("vigie_notify_sent_total{channel=\"hooks\",kind=\"webhook\"} 2"),
        "{metrics}"
    );
    // The incident page says who was told of each event, and when.
    let (_, page) = daemon.get("/incidents").await.unwrap();
    let told = told_lines(&page);
    assert_eq!(told.len(), 2, "a DOWN line and a RESOLVED line: {told:?}");
    for (line, word) in told.iter().zip(["DOWN", "RESOLVED"]) {
        assert!(line.starts_with(word), "{told:?}");
        for channel in ["mail", "hooks", "phone", "pager", "chat"] {
            assert!(
                line.contains(&format!("{channel} 20")),
                "{channel} told at a time, not queued: {line}"
            );
        }
    }
    daemon.stop(STOP).await;
}

/// The lines of the incident table's "told" cells, tags stripped.
fn told_lines(page: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for cell in page.split("<td class=\"told\">").skip(1) {
        let cell = cell.split("</td>").next().unwrap_or_default();
        for line in cell.split("<div>").skip(1) {
            let line = line.split("</div>").next().unwrap_or_default();
            lines.push(line.replace("<strong>", "").replace("</strong>", ""));
        }
    }
    lines
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_endpoint_is_retried_never_before_retry_after_and_delivered_once() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    let ntfy = NtfyServer::start(NtfyConfig::default());
    for _ in 0..3 {
        hook.plan(Plan::status(503));
    }
    ntfy.plan(Plan::status(429).header("retry-after", "5"));
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    let hook_secret = env.write_secret("hook.secret", &whsec);
    // Backoffs from 1 s: the wait of 5 s below is the Retry-After's.
    let fast = "min_backoff = \"1s\"\n";
    env.append_config(&webhook_channel("hooks", &hook, &hook_secret, fast));
    env.append_config(&ntfy_channel("phone", &ntfy, fast));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    status.store(503, Ordering::SeqCst);
    smtp.wait_for_down("site", PUSH);
    let tries = ntfy.wait_for_requests(2, PUSH).await;
    let waited = tries[1].at - tries[0].at;
    assert!(
        waited >= Duration::from_secs(5),
        "resent {waited:?} after a 429 with Retry-After: 5"
    );
    // 503, 503, 503, then accepted: 1 s, 2 s, 4 s of backoff at most,
    // jittered.
    hook.wait_for_answers(4, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(hook.deliveries().len(), 1, "{:?}", events(&hook));
    assert_eq!(ntfy.notifications(TOPIC).len(), 1);
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert_eq!(
        metric(
            &metrics,
            "vigie_notify_failures_total{channel=\"hooks\",kind=\"webhook\",class=\"retry\"}"
        ),
        Some(3.0),
        "{metrics}"
    );
    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ntfy_token_refused_with_401_is_a_dead_push_one_mail_that_says_what_to_check_and_degraded(
) {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let ntfy = NtfyServer::start(NtfyConfig {
        tokens: vec!["tk_vigietesttoken0123456789abcde".to_string()],
        ..NtfyConfig::default()
    });
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    let token = env.write_secret("ntfy.token", "tk_revokedtoken0123456789abcdef");
    env.append_config(&format!(
        "[[notify]]\nname = \"oncall\"\nkind = \"ntfy\"\nurl = \"{}\"\nallow_private = true\ntoken_file = {token:?}\n",
        ntfy.topic_url(TOPIC)
    ));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    status.store(503, Ordering::SeqCst);
    let mails = smtp.wait_for(2, PUSH);
    let broken: Vec<_> = mails
        .iter()
        .filter(|m| {
            m.header("Subject")
                .unwrap_or_default()
                .contains("push channel oncall is broken")
        })
        .collect();
    assert_eq!(broken.len(), 1, "{:?}", subjects(&smtp));
    assert_eq!(
        broken[0].header("To").as_deref(),
        Some("oncall@example.com")
    );
    let body = broken[0].data.replace("=\r\n", "");
    for said in [
        "ntfy oncall answered 401 Unauthorized",
        "check token_file (or user and password_file)",
        "vigie test-notify oncall",
    ] {
        assert!(body.contains(said), "{said:?} in {body}");
    }
    let health = daemon.get_json("/healthz").await.unwrap();
    assert!(
        health["degraded"]
            .to_string()
            .contains("push channel oncall (ntfy) is failing"),
        "{health}"
    );
    let dead = "vigie_notify_dead_letters{channel=\"oncall\",kind=\"ntfy\"}";
    poll(PUSH, "the dead push counted", async || {
        let (_, metrics) = daemon.get("/metrics").await?;
        match metric(&metrics, dead) {
            Some(1.0) => Ok(()),
            other => Err(format!("{dead}: {other:?}")),
        }
    })
    .await;
    // The recovery's push is refused too: still one mail about the channel.
    status.store(200, Ordering::SeqCst);
    smtp.wait_for(3, PUSH);
    poll(PUSH, "the second dead push counted", async || {
        let (_, metrics) = daemon.get("/metrics").await?;
        match metric(&metrics, dead) {
            Some(2.0) => Ok(()),
            other => Err(format!("{dead}: {other:?}")),
        }
    })
    .await;
    let all = subjects(&smtp);
    assert_eq!(
        all.iter().filter(|s| s.contains("broken")).count(),
        1,
        "{all:?}"
    );
    assert!(ntfy.messages(TOPIC).is_empty(), "nothing published");
    daemon.stop(STOP).await;

    // The store keeps both, with why.
    let history = vigie::store::history_path(&env.path().join("state"));
    let store = vigie::store::SledStore::open(&history, Duration::from_secs(1)).unwrap();
    let dead = store.alerts().unwrap().pushes().dead("oncall").unwrap();
    let events: Vec<String> = dead
        .iter()
        .map(|d| {
            let doc: serde_json::Value = serde_json::from_str(&d.record.document).unwrap();
            doc["event"].as_str().unwrap_or("?").to_string()
        })
        .collect();
    assert_eq!(events, ["down", "resolved"], "{dead:?}");
    assert!(
        dead.iter()
            .all(|d| d.reason.contains("ntfy oncall answered 401 Unauthorized")),
        "{dead:?}"
    );
    assert!(store
        .alerts()
        .unwrap()
        .pushes()
        .pending("oncall")
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_down_for_a_while_opens_the_breaker_then_gets_each_push_once() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let (other, other_status) = switchable_target();
    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    // A second target, so that its DOWN is a push of its own.
    env.write_checks(
        "app.toml",
        &check_toml(
            "app",
            &other.url("/app"),
            "every = \"1s\"\ntimeout = \"5s\"\n[check.expect]\nstatus = [200]",
        ),
    );
    let hook_secret = env.write_secret("hook.secret", &whsec);
    // Retries from 1 s to 4 s, and a breaker open 2 s then 4 s: an outage
    // of 30 s opens it several times, and leaves time for the mails of
    // two outages and a recovery.
    let backoff = "min_backoff = \"1s\"\nmax_backoff = \"4s\"\nbreaker_pause = \"2s\"\n";
    env.append_config(&webhook_channel("hooks", &hook, &hook_secret, backoff));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    let outage = Duration::from_secs(30);
    let recovered = hook.fail_for(503, outage);
    status.store(503, Ordering::SeqCst);
    smtp.wait_for_down("site", PUSH);
    other_status.store(503, Ordering::SeqCst);
    smtp.wait_for(2, PUSH);
    let gauge = |name: &str| format!("vigie_notify_{name}{{channel=\"hooks\",kind=\"webhook\"}}");
    poll(outage, "the breaker open during the outage", async || {
        let (_, metrics) = daemon.get("/metrics").await?;
        match metric(&metrics, &gauge("failing")) {
            Some(1.0) => Ok(()),
            other => Err(format!("failing: {other:?}")),
        }
    })
    .await;
    assert!(
        daemon.log().contains("push channel keeps failing: paused"),
        "the log says the breaker opened"
    );
    // A push queued while the breaker holds the channel shows in its
    // backlog at once.
    status.store(200, Ordering::SeqCst);
    smtp.wait_for(3, PUSH);
    poll(
        PUSH,
        "the backlog of three while the breaker is open",
        async || {
            let (_, metrics) = daemon.get("/metrics").await?;
            let (backlog, failing) = (
                metric(&metrics, &gauge("backlog")),
                metric(&metrics, &gauge("failing")),
            );
            match (backlog, failing) {
                (Some(3.0), Some(1.0)) => Ok(()),
                other => Err(format!("backlog, failing: {other:?}")),
            }
        },
    )
    .await;
    assert!(
        hook.deliveries().is_empty(),
        "nothing accepted in the outage"
    );

    // After the outage: the breaker's wait, then each push once. The
    // breaker reopens for at most its longest wait after an attempt that
    // fell inside the outage.
    tokio::time::sleep_until(recovered).await;
    poll(
        3 * outage,
        "the three pushes delivered",
        async || match hook.deliveries().len() {
            3 => Ok(()),
            n => Err(format!("{n} delivered: {:?}", events(&hook))),
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = events(&hook);
    let mut kinds: Vec<&str> = seen.iter().map(|(e, _)| e.as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["down", "down", "resolved"], "{seen:?}");
    assert_eq!(hook.distinct_ids().len(), 3, "each event once: {seen:?}");
    assert!(
        hook.deliveries().iter().all(|d| d.request.at >= recovered),
        "accepted only after the outage"
    );
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert_eq!(metric(&metrics, &gauge("backlog")), Some(0.0), "{metrics}");
    assert_eq!(metric(&metrics, &gauge("failing")), Some(0.0), "{metrics}");
    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_pending_at_kill_9_is_delivered_once_after_the_restart() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    hook.plan(Plan::status(503));
    hook.plan(Plan::status(503));
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    let hook_secret = env.write_secret("hook.secret", &whsec);
    env.append_config(&webhook_channel("hooks", &hook, &hook_secret, ""));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    status.store(503, Ordering::SeqCst);
    hook.wait_for_requests(1, PUSH).await;
    daemon.kill9();
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    // The second 503 after the restart, then accepted. The kill may land
    // before the peer answered the first request (its connection closes
    // unanswered), so what is waited for is the acceptance, not a count
    // of answers.
    poll(
        Duration::from_secs(60),
        "the DOWN accepted after the restart",
        async || match hook.deliveries().len() {
            0 => Err(format!("{} requests received", hook.received().len())),
            _ => Ok(()),
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = events(&hook);
    assert_eq!(seen.len(), 1, "exactly one DOWN delivered: {seen:?}");
    assert_eq!(seen[0].0, "down");
    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_endpoint_delays_neither_the_mail_nor_the_other_channels() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let whsec = whsec_for_test();
    let slow = WebhookReceiver::start(&whsec);
    slow.plan(Plan::normal().after(Duration::from_secs(30)));
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    let hook_secret = env.write_secret("hook.secret", &whsec);
    env.append_config(&webhook_channel(
        "slow",
        &slow,
        &hook_secret,
        "timeout = \"20s\"\n",
    ));
    env.append_config(&ntfy_channel("phone", &ntfy, ""));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    status.store(503, Ordering::SeqCst);
    slow.wait_for_requests(1, PUSH).await;
    smtp.wait_for_down("site", PUSH);
    ntfy.wait_for_requests(1, PUSH).await;
    // Both went out while the slow endpoint still holds its request (its
    // answer comes 30 s after it arrived).
    poll(PUSH, "the ntfy push counted as sent", async || {
        let (_, metrics) = daemon.get("/metrics").await?;
        let sent = |channel: &str, kind: &str| {
            let name = format!("vigie_notify_sent_total{{channel=\"{channel}\",kind=\"{kind}\"}}");
            metric(&metrics, &name)
        };
        match (sent("phone", "ntfy"), sent("slow", "webhook")) {
            (Some(1.0), Some(0.0)) => Ok(()),
            other => Err(format!("phone, slow: {other:?}")),
        }
    })
    .await;
    assert!(
        slow.received()[0].at.elapsed() < Duration::from_secs(30),
        "the slow endpoint had not answered yet"
    );
    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn routes_send_prod_to_the_phone_and_staging_to_the_mail_and_a_silence_pushes_nothing() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let (env, api) = env(
        &smtp,
        &target,
        &[("site", "prod"), ("beta", "staging"), ("quiet", "prod")],
        "",
    );
    env.append_config(&ntfy_channel("phone", &ntfy, ""));
    env.append_config(
        "[[route]]\nmatch = { env = \"prod\" }\nnotify = [\"phone\", \"mail\"]\n\
         [[route]]\nmatch = { env = \"staging\" }\nnotify = [\"mail\"]\n",
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    let silenced = vigie_cli_async(
        &env.config_path(),
        &["silence", "quiet", "--for", "1h", "--reason", "test"],
    )
    .await;
    assert!(
        silenced.status.success(),
        "{}",
        String::from_utf8_lossy(&silenced.stderr)
    );

    status.store(503, Ordering::SeqCst);
    let mails = smtp.wait_for(1, PUSH);
    ntfy.wait_for_requests(1, PUSH).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let pushed: Vec<String> = ntfy
        .messages(TOPIC)
        .iter()
        .map(|m| m.title.clone())
        .collect();
    assert_eq!(
        pushed,
        ["DOWN site"],
        "prod only, the silenced check not at all"
    );
    let subject = mails[0].header("Subject").unwrap_or_default();
    assert!(
        subject.contains("site") && subject.contains("beta"),
        "{subject}"
    );
    assert!(!subject.contains("quiet"), "{subject}");
    assert_eq!(smtp.count(), 1, "{:?}", subjects(&smtp));
    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spent_ntfy_quota_pauses_the_channel_for_the_day_and_the_mail_says_so() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let ntfy = NtfyServer::start(NtfyConfig {
        daily_messages: Some(1),
        ..NtfyConfig::default()
    });
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    env.append_config(&ntfy_channel("phone", &ntfy, ""));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    status.store(503, Ordering::SeqCst);
    smtp.wait_for_down("site", PUSH);
    ntfy.wait_for_requests(1, PUSH).await;
    status.store(200, Ordering::SeqCst);
    // The RESOLVED mail, and the one saying the quota is spent.
    smtp.wait_for(3, PUSH);
    let quota: Vec<String> = subjects(&smtp)
        .into_iter()
        .filter(|s| s.contains("push channel phone is broken"))
        .collect();
    assert_eq!(quota.len(), 1, "{:?}", subjects(&smtp));
    assert!(quota[0].contains("daily message quota"), "{quota:?}");
    // A push queued while the spent quota pauses the channel shows in its
    // backlog, next to the RESOLVED that waits.
    status.store(503, Ordering::SeqCst);
    smtp.wait_for(4, PUSH);
    poll(PUSH, "a backlog of two while paused", async || {
        let (_, metrics) = daemon.get("/metrics").await?;
        let backlog = "vigie_notify_backlog{channel=\"phone\",kind=\"ntfy\"}";
        match metric(&metrics, backlog) {
            Some(2.0) => Ok(()),
            other => Err(format!("{backlog}: {other:?}")),
        }
    })
    .await;
    assert_eq!(
        ntfy.received().len(),
        2,
        "not retried before the quota renews"
    );
    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_overdue_warns_once_where_a_route_asks_for_warn_and_never_by_mail() {
    use crate::common::gate::Gate;
    use crate::common::pki::{issue, LeafSpec, HOST};
    use crate::common::servers::TlsOpts;

    let smtp = SmtpServer::start(SmtpOpts::plain());
    let ok = || -> crate::common::servers::Handler {
        std::sync::Arc::new(|_| (200, vec![], "ok".to_string()))
    };
    // 10 days left of 90: under a quarter, above the 7 critical days.
    let target = TlsServer::start_with(
        &issue(&LeafSpec::new([HOST]).days_left(10)),
        TlsOpts::default(),
        ok(),
    );
    // The renewal, served once the gate points to it.
    let renewed = TlsServer::start_with(
        &issue(&LeafSpec::new([HOST]).days_left(80)),
        TlsOpts::default(),
        ok(),
    );
    let gate = Gate::start(target.addr).await;
    let whsec = whsec_for_test();
    let asks = WebhookReceiver::start(&whsec);
    let other = WebhookReceiver::start(&whsec);
    let pagerduty = PagerDutyEvents::start();
    let (env, api) = env(&smtp, &target, &[("site", "prod")], "");
    env.write_checks(
        "checks.toml",
        &check_toml(
            "site",
            &format!("https://{HOST}:{}/site", gate.addr.port()),
            "every = \"1s\"\ntimeout = \"5s\"\nlabels = { env = \"prod\" }\n[check.expect]\nstatus = [200]",
        ),
    );
    let secret = env.write_secret("hook.secret", &whsec);
    let key = env.write_secret("pd.key", "0123456789abcdef0123456789abcdef");
    env.append_config(&webhook_channel("asks", &asks, &secret, ""));
    env.append_config(&webhook_channel("other", &other, &secret, ""));
    env.append_config(&format!(
        "[[notify]]\nname = \"pager\"\nkind = \"pagerduty\"\nurl = \"{}\"\nallow_private = true\nrouting_key_file = {key:?}\n",
        pagerduty.url()
    ));
    // `other` and the mail get every event but warn; `asks` and the pager
    // name it (the mail named with them is still left out).
    env.append_config(
        "[[route]]\nmatch = { env = \"prod\" }\nnotify = [\"other\", \"mail\"]\ncontinue = true\n\
         [[route]]\nevents = [\"warn\"]\nnotify = [\"asks\", \"pager\", \"mail\"]\n",
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    asks.wait_for_answers(1, PUSH).await;
    // Probes every second: long enough for a second WARN, were there one.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let delivered = asks.deliveries();
    assert_eq!(delivered.len(), 1, "{:?}", events(&asks));
    let warn = &delivered[0].body;
    assert_eq!(warn["event"], "warn", "{warn}");
    assert_eq!(warn["checks"][0]["name"], "site", "{warn}");
    assert_eq!(warn["checks"][0]["status"], "warn", "{warn}");
    assert!(
        warn["checks"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("renewal looks stuck")),
        "{warn}"
    );
    assert_eq!(warn["id"].as_str(), Some(delivered[0].id.as_str()));
    assert!(
        delivered[0].id.starts_with("vigie.warn.site_"),
        "a stable id of the warn episode: {}",
        delivered[0].id
    );
    let incidents = pagerduty.incidents();
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert_eq!(incidents[0].severity, "warning");
    assert_eq!(incidents[0].state, IncidentState::Triggered);
    assert_eq!(
        Some(incidents[0].dedup_key.as_str()),
        warn["checks"][0]["incident"].as_str(),
        "the warn episode's id"
    );
    assert!(other.deliveries().is_empty(), "{:?}", events(&other));
    assert_eq!(smtp.count(), 0, "{:?}", subjects(&smtp));

    // The certificate is renewed: the episode ends after
    // `recovery_threshold` good probes, and what its WARN opened is closed
    // where it was opened, once.
    gate.point_to(renewed.addr);
    asks.wait_for_answers(2, PUSH).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let delivered = asks.deliveries();
    assert_eq!(delivered.len(), 2, "{:?}", events(&asks));
    let end = &delivered[1].body;
    assert_eq!(end["event"], "resolved", "{end}");
    assert_eq!(end["warn"], true, "the end of a warn, not of a DOWN: {end}");
    assert_eq!(
        end["incident"], warn["incident"],
        "paired by the key: {end}"
    );
    assert_eq!(end["checks"][0]["status"], "up", "{end}");
    assert!(end["checks"][0]["resolved_at"].is_string(), "{end}");
    assert!(
        delivered[1].id.starts_with("vigie.warn-resolved.site_"),
        "{}",
        delivered[1].id
    );
    poll(PUSH, "the PagerDuty incident resolved", async || {
        let incidents = pagerduty.incidents();
        match incidents.as_slice() {
            [one] if one.state == IncidentState::Resolved => Ok(()),
            _ => Err(format!("{incidents:?}")),
        }
    })
    .await;
    assert!(other.deliveries().is_empty(), "{:?}", events(&other));
    assert_eq!(smtp.count(), 0, "never a mail: {:?}", subjects(&smtp));
    daemon.stop(STOP).await;
}
