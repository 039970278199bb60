//! Several vigies, one verdict, through the real daemon: three (or two)
//! `vigie run` processes, each with its own state directory and API port,
//! coordinate through a real S3-compatible server with SigV4 enforced and
//! conditional writes honoured (moto, `common/s3_auth.rs`), and page one
//! real SMTP server. Each node reaches the target through its own TCP gate
//! (`common/gate.rs`), so the test decides which vantages see the outage;
//! the bucket sits behind a gate too, so it can be stopped without losing
//! what it holds.

use std::time::Duration;

use crate::common::daemon::{poll, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::push::webhook::{whsec_for_test, WebhookReceiver};
use crate::common::smtp::{SmtpOpts, SmtpServer};
use crate::common::vantage::{
    body, metric, subjects, wait_mails, with_subject, Fleet, FleetKeys, Spec, MAIL, QUICK_VANTAGE,
};

const ALERTING: &str = "failure_threshold = 2\nrecovery_threshold = 2\ngroup_window = \"1s\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn one_vantage_alone_does_not_page_and_all_three_page_exactly_once() {
    let fleet = Fleet::start(&["eu-par", "eu-ams", "fra"], ALERTING).await;

    // Only fra loses the target: recorded there, nobody is paged.
    fleet.node("fra").gate.close();
    let fra = fleet.daemon("fra");
    let report = poll(
        MAIL,
        "fra's report to show the unconfirmed outage",
        async || {
            let report = fra.get_json("/api/v1/report").await?;
            let held = report["problems"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["check"] == "site"))
                .and_then(|p| p["held"].as_str().map(str::to_string));
            match held {
                Some(words) if words.contains("down from fra only") => Ok(report),
                _ => Err(report.to_string()),
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        fleet.smtp.count(),
        0,
        "paged for fra alone: {:?} (report {report}); {}",
        subjects(&fleet.smtp.received()),
        fleet
            .smtp
            .received()
            .iter()
            .map(|m| format!("{}\n{}", body(m), fleet.daemon("fra").log()))
            .collect::<String>()
    );
    let (_, page) = fra.get("/").await.unwrap();
    assert!(
        page.contains("down from fra only"),
        "the status page says it: {page}"
    );
    let (_, metrics) = fra.get("/metrics").await.unwrap();
    assert!(
        metric(&metrics, "vigie_vantage_vetoes_total").is_some_and(|v| v >= 1.0),
        "{metrics}"
    );
    fleet.node("fra").gate.open();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        fleet.smtp.count(),
        0,
        "{:?}",
        subjects(&fleet.smtp.received())
    );

    // Everyone loses it: exactly one DOWN, saying who confirmed it.
    fleet.close_all();
    let down = wait_mails(&fleet.smtp, "DOWN site", 1).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let downs = with_subject(&fleet.smtp, "DOWN site");
    assert_eq!(
        downs.len(),
        1,
        "{:?}{}",
        subjects(&fleet.smtp.received()),
        fleet.logs()
    );
    let text = body(&down[0]);
    assert!(
        text.contains("confirmed down from 3 of 3 vantages")
            || text.contains("confirmed down from 2 of 3 vantages"),
        "{text}{}",
        fleet.logs()
    );

    // Back for everyone: exactly one RESOLVED, threaded under the DOWN.
    fleet.open_all();
    let resolved = wait_mails(&fleet.smtp, "RESOLVED site", 1).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        with_subject(&fleet.smtp, "RESOLVED site").len(),
        1,
        "{:?}",
        subjects(&fleet.smtp.received())
    );
    assert_eq!(
        fleet.smtp.count(),
        2,
        "{:?}",
        subjects(&fleet.smtp.received())
    );
    assert!(
        body(&resolved[0]).contains("confirmed up from"),
        "{}",
        body(&resolved[0])
    );
    assert_eq!(
        resolved[0].header("In-Reply-To"),
        Some(down[0].message_id()),
        "the RESOLVED threads under the DOWN, whoever sent each"
    );
    let mut sent_elsewhere = 0.0;
    for node in &fleet.nodes {
        let (_, metrics) = node.daemon.as_ref().unwrap().get("/metrics").await.unwrap();
        sent_elsewhere += metric(&metrics, "vigie_vantage_sent_elsewhere_total").unwrap_or(0.0);
    }
    assert!(sent_elsewhere >= 2.0, "the others recorded who sent it");
    fleet.stop().await;
}

/// Checks that race at once in [`two_vantages_racing_on_the_same_incident_twenty_times_never_send_two_mails`].
const RACING_CHECKS: usize = 4;

/// [`RACING_CHECKS`] checks `site-N` probed every second, each paging its
/// own recipient so that no two of their mails are grouped into one.
fn racing_sites(url: &str) -> String {
    (1..=RACING_CHECKS)
        .map(|n| {
            let extra = format!(
                "every = \"1s\"\ntimeout = \"2s\"\n[check.alert]\nto = [\"site-{n}@example.com\"]"
            );
            check_toml(&format!("site-{n}"), url, &extra)
        })
        .collect()
}

/// Twenty incidents, each raced by both vantages: five outages of four
/// checks at once.
#[tokio::test(flavor = "multi_thread")]
async fn two_vantages_racing_on_the_same_incident_twenty_times_never_send_two_mails() {
    let alerting = "failure_threshold = 1\nrecovery_threshold = 1\ngroup_window = \"0s\"\n";
    // Both nodes push every event to one webhook too: a push is claimed
    // with its mail, so it goes out once, from whichever node won.
    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    let secrets = tempfile::tempdir().unwrap();
    let secret = secrets.path().join("hook.secret");
    std::fs::write(&secret, &whsec).unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let channel = format!(
        "[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"{}\"\nallow_private = true\nsecret_file = {:?}\n",
        hook.url(),
        secret.display().to_string()
    );
    let spec = Spec {
        alerting,
        vantage: Some(QUICK_VANTAGE),
        checks: &racing_sites,
        extra: &channel,
    };
    let fleet = Fleet::start_with(&["eu-par", "fra"], &spec).await;
    // Each side of each outage lasts until both nodes saw it, and each
    // recovery until both closed the incident (a RESOLVED the fleet held
    // a moment on one node): a node that missed a recovery would see two
    // outages as one incident, a race this test is not about.
    for round in 1..=20 / RACING_CHECKS {
        fleet.close_all();
        fleet.wait_all_see("site-", "down").await;
        wait_mails(&fleet.smtp, "DOWN site", round * RACING_CHECKS).await;
        fleet.open_all();
        fleet.wait_all_see("site-", "up").await;
        wait_mails(&fleet.smtp, "RESOLVED site", round * RACING_CHECKS).await;
        fleet.wait_none_firing().await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mails = fleet.smtp.received();
    assert_eq!(
        (
            with_subject(&fleet.smtp, "DOWN site").len(),
            with_subject(&fleet.smtp, "RESOLVED site").len()
        ),
        (20, 20),
        "{:?}",
        subjects(&mails)
    );
    // A node that saw two of the fleet's incidents as one (its RESOLVED
    // held while the next outage began) still sends each RESOLVED under a
    // Message-ID of its own: a client that drops repeated ids hides none.
    let mut ids: Vec<String> = ["DOWN site", "RESOLVED site"]
        .iter()
        .flat_map(|subject| with_subject(&fleet.smtp, subject))
        .map(|mail| mail.message_id())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40, "one Message-ID per mail: {ids:?}");
    hook.wait_for_answers(40, Duration::from_secs(30)).await;
    let pushed = hook.deliveries();
    let downs = pushed.iter().filter(|d| d.body["event"] == "down").count();
    assert_eq!(
        (pushed.len(), hook.distinct_ids().len(), downs),
        (40, 40, 20),
        "one push per event, whichever node sent it: {:?}",
        pushed.iter().map(|d| &d.id).collect::<Vec<_>>()
    );
    // Each RESOLVED closes the key its DOWN was pushed under, whichever
    // node sent which (a PagerDuty dedup_key, an ntfy sequence id): both
    // carry the fleet's key of the incident.
    let keys = |event: &str| {
        let mut keys: Vec<String> = pushed
            .iter()
            .filter(|d| d.body["event"] == event)
            .map(|d| d.body["incident"].as_str().unwrap_or_default().to_string())
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(keys("resolved"), keys("down"));
    fleet.stop().await;
}

/// A warn and its end are claimed like a DOWN and its RESOLVED: both
/// vantages see the certificate's renewal overdue, then renewed, and the
/// webhook that asks for warns hears each once.
#[tokio::test(flavor = "multi_thread")]
async fn two_vantages_seeing_the_same_warn_push_it_and_its_end_once() {
    use crate::common::pki::{issue, LeafSpec};
    use crate::common::servers::{TlsOpts, TlsServer};

    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    let secrets = tempfile::tempdir().unwrap();
    let secret = secrets.path().join("hook.secret");
    std::fs::write(&secret, &whsec).unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let channel = format!(
        "[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"{}\"\nallow_private = true\nsecret_file = {:?}\n\
         [[route]]\nevents = [\"warn\"]\nnotify = [\"hooks\"]\n",
        hook.url(),
        secret.display().to_string()
    );
    let spec = Spec {
        alerting: ALERTING,
        vantage: Some(QUICK_VANTAGE),
        checks: &crate::common::vantage::site,
        extra: &channel,
    };
    let fleet = Fleet::start_with(&["eu-par", "fra"], &spec).await;
    // 10 days left of 90: the renewal is overdue, a warn.
    let overdue = TlsServer::start_leaf(
        &issue(&LeafSpec::new(["localhost"]).days_left(10)),
        TlsOpts::default(),
    );
    let renewed = TlsServer::start_leaf(
        &issue(&LeafSpec::new(["localhost"]).days_left(80)),
        TlsOpts::default(),
    );
    for node in &fleet.nodes {
        node.gate.point_to(overdue.addr);
    }
    hook.wait_for_answers(1, MAIL).await;
    // Past `stale_after`: a claim the loser could not back would have
    // gone out a second time by now.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let pushed = hook.deliveries();
    assert_eq!(
        pushed.len(),
        1,
        "one WARN for the fleet: {:?}",
        pushed.iter().map(|d| &d.id).collect::<Vec<_>>()
    );
    let warn = &pushed[0].body;
    assert_eq!(warn["event"], "warn", "{warn}");

    for node in &fleet.nodes {
        node.gate.point_to(renewed.addr);
    }
    hook.wait_for_answers(2, MAIL).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let pushed = hook.deliveries();
    assert_eq!(
        (pushed.len(), hook.distinct_ids().len()),
        (2, 2),
        "one WARN and one end of it: {:?}",
        pushed.iter().map(|d| &d.id).collect::<Vec<_>>()
    );
    let end = &pushed[1].body;
    assert_eq!(
        (&end["event"], &end["warn"]),
        (&serde_json::json!("resolved"), &serde_json::json!(true)),
        "{end}"
    );
    assert_eq!(end["incident"], warn["incident"], "{end}");
    assert_eq!(
        fleet.smtp.count(),
        0,
        "a warn is never mailed: {:?}",
        subjects(&fleet.smtp.received())
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vantage_killed_is_paged_once_as_silent_and_resolved_when_back() {
    let mut fleet = Fleet::start(&["eu-par", "eu-ams", "fra"], ALERTING).await;
    let fra = fleet.nodes.iter_mut().find(|n| n.name == "fra").unwrap();
    fra.daemon.take().unwrap().kill9();
    let silent = wait_mails(&fleet.smtp, "vantage", 1).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let all = with_subject(&fleet.smtp, "vantage");
    assert_eq!(all.len(), 1, "{:?}", subjects(&fleet.smtp.received()));
    assert!(
        body(&silent[0]).contains("vantage fra silent since"),
        "{}",
        body(&silent[0])
    );
    assert_eq!(
        fleet.smtp.count(),
        1,
        "{:?}",
        subjects(&fleet.smtp.received())
    );

    // fra comes back: one RESOLVED, threaded under the silence page.
    let fra = fleet.nodes.iter_mut().find(|n| n.name == "fra").unwrap();
    let mut daemon = crate::common::daemon::Daemon::spawn(&fra.env.config_path(), fra.api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    fra.daemon = Some(daemon);
    let back = wait_mails(&fleet.smtp, "RESOLVED vigie:vantage:fra", 1).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        fleet.smtp.count(),
        2,
        "{:?}",
        subjects(&fleet.smtp.received())
    );
    assert_eq!(back[0].header("In-Reply-To"), Some(silent[0].message_id()));
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_bucket_stopped_every_vantage_pages_on_its_own_and_says_so() {
    let fleet = Fleet::start(&["eu-par", "eu-ams", "fra"], ALERTING).await;
    fleet.bucket_gate.close();
    for node in &fleet.nodes {
        let daemon = node.daemon.as_ref().unwrap();
        poll(
            MAIL,
            &format!("{} degraded: vantage", node.name),
            async || {
                let health = daemon.get_json("/healthz").await?;
                let degraded = health["degraded"].to_string();
                match degraded.contains("vantage") {
                    true => Ok(()),
                    false => Err(health.to_string()),
                }
            },
        )
        .await;
    }
    fleet.close_all();
    let downs = wait_mails(&fleet.smtp, "DOWN site", 3).await;
    for mail in &downs {
        assert!(
            body(mail).contains("not confirmed: coordination unavailable"),
            "{}",
            body(mail)
        );
    }
    // The bucket is back: coordination resumes.
    fleet.bucket_gate.open();
    fleet.wait_coordinating().await;
    for node in &fleet.nodes {
        let health = node
            .daemon
            .as_ref()
            .unwrap()
            .get_json("/healthz")
            .await
            .unwrap();
        assert!(
            !health["degraded"].to_string().contains("vantage"),
            "{health}"
        );
    }
    fleet.open_all();
    wait_mails(&fleet.smtp, "RESOLVED", 1).await;
    // The bucket's outage is no vantage's silence: nobody could publish.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        with_subject(&fleet.smtp, "vantage").is_empty(),
        "{:?}",
        subjects(&fleet.smtp.received())
    );
    fleet.stop().await;
}

/// moto made to ignore `If-None-Match` and `If-Match` on PutObject, as an
/// S3-compatible server without conditional writes does.
const IGNORES_CONDITIONS: &str = r#"
from werkzeug.datastructures import Headers
import moto.s3.responses

_key_response_put = moto.s3.responses.S3Response._key_response_put

def key_response_put(self, *args, **kwargs):
    headers = Headers(list(self.headers.items()))
    headers.remove("If-None-Match")
    headers.remove("If-Match")
    self.headers = headers
    return _key_response_put(self, *args, **kwargs)

moto.s3.responses.S3Response._key_response_put = key_response_put

from moto.server import main
main()
"#;

/// One vantage `eu-par` (its peer `fra` never runs) coordinating through
/// the bucket at `endpoint`, with a check that fails from the start.
fn lone_vantage(endpoint: &str, bucket: &str, smtp: &SmtpServer) -> (Env, std::net::SocketAddr) {
    lone_vantage_with(endpoint, bucket, smtp, "")
}

/// [`lone_vantage`] with more `[vantage]` keys.
fn lone_vantage_with(
    endpoint: &str,
    bucket: &str,
    smtp: &SmtpServer,
    vantage: &str,
) -> (Env, std::net::SocketAddr) {
    let api = crate::common::daemon::free_addr();
    let env = Env::with_config(&crate::common::daemon::api_section(api, None));
    let (id, secret) = crate::common::s3_auth::write_keys(env.path(), "any", "thing");
    env.append_config(&smtp.alerting_sections(ALERTING));
    let keys = FleetKeys::new_in(&env.path().join("keys"), &["eu-par", "fra"]);
    env.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket}/eu-par\"\nendpoint = \"{endpoint}\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\ninterval = \"1h\"\n\
         {}publish_every = \"1s\"\nstale_after = \"5s\"\n{vantage}",
        id.display().to_string(),
        secret.display().to_string(),
        keys.section("eu-par"),
    ));
    // Nothing listens there: the check fails from the start.
    let nowhere = crate::common::servers::refused_addr();
    env.write_checks(
        "site.toml",
        &crate::common::env::check_toml(
            "site",
            &format!("https://{nowhere}/"),
            "every = \"1s\"\ntimeout = \"2s\"",
        ),
    );
    (env, api)
}

/// Waits until `/healthz` lists `vantage` under `degraded`.
async fn wait_degraded(daemon: &Daemon) {
    poll(MAIL, "degraded: vantage", async || {
        let health = daemon.get_json("/healthz").await?;
        match health["degraded"].to_string().contains("vantage") {
            true => Ok(()),
            false => Err(health.to_string()),
        }
    })
    .await;
}

/// Waits for the DOWN page and checks that it says it was not confirmed.
async fn wait_unconfirmed_down(smtp: &SmtpServer) {
    let down = wait_mails(smtp, "DOWN site", 1).await;
    assert!(
        body(&down[0]).contains("not confirmed: coordination unavailable"),
        "{}",
        body(&down[0])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bucket_without_conditional_writes_is_found_at_start_and_pages_go_out_alone() {
    let s3 = crate::common::s3::S3Server::start_python(IGNORES_CONDITIONS);
    s3.create_bucket("no-conditions").await;
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (env, api) = lone_vantage(&s3.endpoint(), "no-conditions", &smtp);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    wait_degraded(&daemon).await;
    assert!(
        daemon.log().contains("does not honour If-None-Match"),
        "{}",
        daemon.log()
    );
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert_eq!(
        metric(&metrics, "vigie_vantage_coordination_up"),
        Some(0.0),
        "{metrics}"
    );
    wait_unconfirmed_down(&smtp).await;
    daemon.stop(crate::common::vantage::STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bucket_that_never_answers_neither_stalls_vigie_nor_holds_the_page() {
    // Accepts connections and never answers: every request runs into its
    // timeout.
    let tarpit = crate::common::servers::Tarpit::start();
    let smtp = SmtpServer::start(SmtpOpts::plain());
    // Each request gives up after 1 s: the vantage task's stall limit is
    // 3 publications + 6 request timeouts, 9 s.
    let (env, api) = lone_vantage_with(
        &format!("http://{}", tarpit.addr),
        "hangs",
        &smtp,
        "request_timeout = \"1s\"\n",
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    wait_unconfirmed_down(&smtp).await;
    wait_degraded(&daemon).await;
    // Past that stall limit: still healthy, no task stalled.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (status, health) = daemon.get("/healthz").await.unwrap();
    assert_eq!(status, 200, "{health}");
    assert!(health.contains("\"status\":\"ok\""), "{health}");
    daemon.stop(crate::common::vantage::STOP).await;
}

/// Someone who can write the vantage prefix and holds no vantage's key
/// (the README's bucket policy before vantages signed gave every node
/// that): writes straight to the bucket, as `aws s3 cp` would.
struct Attacker {
    bucket: vigie::replicate::bucket::Bucket,
}

impl Attacker {
    fn of(env: &Env) -> Attacker {
        let config = env.load();
        let (r, v) = (config.replication.unwrap(), config.vantage.unwrap());
        let settings = vigie::replicate::bucket::BucketSettings::from_config(&r, None)
            .with_url(&format!("s3://{}/{}", v.bucket, v.prefix))
            .unwrap();
        Attacker {
            bucket: vigie::replicate::bucket::Bucket::open(&settings).unwrap(),
        }
    }

    async fn put(&self, name: &str, body: Vec<u8>) {
        self.bucket.put(name, body).await.unwrap();
    }

    /// `signed` in the envelope vigie writes, with a signature of no key.
    fn forged(signer: &str, signed: serde_json::Value) -> Vec<u8> {
        let signature = format!("ed25519:{}==", "A".repeat(86));
        serde_json::to_vec(&serde_json::json!({
            "signer": signer, "signature": signature, "signed": signed,
        }))
        .unwrap()
    }

    /// The incident keys of every second from `from` for `seconds`.
    fn keys_from(from: time::OffsetDateTime, seconds: i64) -> Vec<String> {
        (0..seconds)
            .map(|s| vigie::vantage::claim::incident_key(from + time::Duration::seconds(s)))
            .collect()
    }
}

/// A claim body as a vantage writes it.
fn claim_body(node: &str) -> serde_json::Value {
    serde_json::json!({
        "node": node,
        "message_id": format!("<forged@{node}>"),
        "at": time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap(),
    })
}

/// Waits until `/healthz`'s `degraded` has a line with every one of `words`.
async fn wait_degraded_with(daemon: &Daemon, words: &[&str]) -> String {
    poll(MAIL, &format!("degraded naming {words:?}"), async || {
        let health = daemon.get_json("/healthz").await?;
        let lines = health["degraded"].as_array().cloned().unwrap_or_default();
        let line = lines
            .iter()
            .filter_map(|l| l.as_str())
            .find(|l| words.iter().all(|w| l.contains(w)));
        match line {
            Some(line) => Ok(line.to_string()),
            None => Err(health["degraded"].to_string()),
        }
    })
    .await
}

/// The value of `vigie_vantage_rejected_total{peer,reason}`.
fn rejected(metrics: &str, peer: &str, reason: &str) -> Option<f64> {
    let name = format!("vigie_vantage_rejected_total{{peer=\"{peer}\",reason=\"{reason}\"}}");
    metric(metrics, &name)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_up_state_for_a_peer_that_never_ran_vetoes_nothing() {
    let s3 = crate::common::s3_auth::AuthS3::shared();
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (env, api) = lone_vantage(&s3.endpoint(), &s3.bucket(), &smtp);
    s3.write_keys(env.path());
    // fra never runs; its place holds an "up" kept fresh every second.
    let attacker = Attacker::of(&env);
    let forger = tokio::spawn(async move {
        loop {
            let now = time::OffsetDateTime::now_utc();
            let at = now
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap();
            let state = serde_json::json!({
                "node": "fra", "version": "0.1.0", "published_at": at,
                "health": {"status": "ok", "degraded": []},
                "checks": {"site": {"status": "up", "since": at, "last_probe": at, "firing": false}},
            });
            attacker
                .put("vantage/fra/state.json", Attacker::forged("fra", state))
                .await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    let down = wait_mails(&smtp, "DOWN site", 1).await;
    assert!(
        body(&down[0]).contains("confirmed down from 1 of 1 vantages (eu-par)"),
        "{}",
        body(&down[0])
    );
    let line = wait_degraded_with(&daemon, &["from fra refused", "signature"]).await;
    assert!(
        line.contains("does not verify with fra's public key"),
        "{line}"
    );
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert!(
        rejected(&metrics, "fra", "signature").is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    assert_eq!(metric(&metrics, "vigie_vantage_peers_alive"), Some(0.0));
    // And fra, whose place was taken, is paged as silent.
    let silent = wait_mails(&smtp, "vigie:vantage:fra", 1).await;
    assert!(
        body(&silent[0]).contains("vantage fra silent"),
        "{}",
        body(&silent[0])
    );
    forger.abort();
    daemon.stop(crate::common::vantage::STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn forged_claims_made_before_the_incident_silence_neither_the_page_nor_the_silent_peer() {
    let s3 = crate::common::s3_auth::AuthS3::shared();
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (env, api) = lone_vantage(&s3.endpoint(), &s3.bucket(), &smtp);
    s3.write_keys(env.path());
    // Every second the incident can start at, for the check and for the
    // page saying fra is silent: claimed "by fra".
    let attacker = Attacker::of(&env);
    let start = time::OffsetDateTime::now_utc() - time::Duration::seconds(2);
    for key in Attacker::keys_from(start, 40) {
        for dir in ["site", "VIGIE-vantage-fra"] {
            let name = format!("vantage/incidents/{dir}/{key}/down");
            attacker
                .put(&name, Attacker::forged("fra", claim_body("fra")))
                .await;
        }
    }
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    wait_mails(&smtp, "DOWN site", 1).await;
    wait_mails(&smtp, "vigie:vantage:fra", 1).await;
    let line = wait_degraded_with(&daemon, &["from fra refused", "signature"]).await;
    assert!(line.contains("/down does not verify"), "{line}");
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert!(
        rejected(&metrics, "fra", "signature").is_some_and(|n| n >= 2.0),
        "{metrics}"
    );
    daemon.stop(crate::common::vantage::STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_pointer_to_a_forged_incident_does_not_silence_the_page() {
    let s3 = crate::common::s3_auth::AuthS3::shared();
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (env, api) = lone_vantage(&s3.endpoint(), &s3.bucket(), &smtp);
    s3.write_keys(env.path());
    let attacker = Attacker::of(&env);
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let pointer = serde_json::json!({
        "key": "FORGED", "opened_by": "fra", "written_by": "fra", "opened_at": now, "open": true,
    });
    attacker
        .put(
            "vantage/incidents/site/current.json",
            Attacker::forged("fra", pointer),
        )
        .await;
    attacker
        .put(
            "vantage/incidents/site/FORGED/down",
            Attacker::forged("fra", claim_body("fra")),
        )
        .await;
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    wait_mails(&smtp, "DOWN site", 1).await;
    let line = wait_degraded_with(&daemon, &["from fra refused", "signature"]).await;
    assert!(line.contains("current.json does not verify"), "{line}");
    daemon.stop(crate::common::vantage::STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_genuine_claim_its_claimant_s_state_never_backs_is_sent_from_here_and_says_so() {
    let s3 = crate::common::s3_auth::AuthS3::shared();
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (env, api) = lone_vantage(&s3.endpoint(), &s3.bucket(), &smtp);
    s3.write_keys(env.path());
    // Claims fra really signed (a key leaked, or fra died right after
    // claiming), for an incident fra's state never shows: fra never runs.
    let fra = std::fs::read_to_string(env.path().join("keys/fra.key")).unwrap();
    let fra = vigie::signing::SigningKey::from_pem(&fra).unwrap();
    let attacker = Attacker::of(&env);
    let start = time::OffsetDateTime::now_utc() - time::Duration::seconds(2);
    for key in Attacker::keys_from(start, 40) {
        let name = format!("vantage/incidents/site/{key}/down");
        let sealed = vigie::vantage::signed::seal_as(&fra, "fra", &name, &claim_body("fra"));
        attacker.put(&name, sealed).await;
    }
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    let down = wait_mails(&smtp, "DOWN site", 1).await;
    let words = "claimed by fra, not confirmed by fra's state: sent from eu-par";
    assert!(body(&down[0]).contains(words), "{}", body(&down[0]));
    let line = wait_degraded_with(&daemon, &["site", words]).await;
    assert!(line.starts_with("vantage: "), "{line}");
    daemon.stop(crate::common::vantage::STOP).await;
}

/// The peak resident memory of process `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_state_is_refused_before_it_is_downloaded_and_not_fetched_again() {
    let s3 = crate::common::s3_auth::AuthS3::shared();
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (env, api) = lone_vantage(&s3.endpoint(), &s3.bucket(), &smtp);
    s3.write_keys(env.path());
    const STATE_MIB: usize = 160;
    Attacker::of(&env)
        .put("vantage/fra/state.json", vec![b' '; STATE_MIB << 20])
        .await;
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(crate::common::vantage::START).await;
    let line = wait_degraded_with(&daemon, &["from fra refused", "oversized"]).await;
    assert!(
        line.contains(&format!(
            "has {} bytes, more than the 8388608",
            STATE_MIB << 20
        )),
        "{line}"
    );
    // Several liveness rounds later (every 2.5 s here): still refused once,
    // not downloaded again.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    assert_eq!(
        rejected(&metrics, "fra", "oversized"),
        Some(1.0),
        "{metrics}"
    );
    wait_mails(&smtp, "DOWN site", 1).await;
    let peak = peak_rss_mib(daemon.pid());
    assert!(
        peak < (STATE_MIB / 2) as f64,
        "peak RSS {peak:.1} MiB with a {STATE_MIB} MiB state in the bucket"
    );
    daemon.stop(crate::common::vantage::STOP).await;
}
