//! Several vigies, one verdict, through the real daemon: three (or two)
//! `vigie run` processes, each with its own state directory and API port,
//! coordinate through a real S3-compatible server with SigV4 enforced and
//! conditional writes honoured (moto, `common/s3_auth.rs`), and page one
//! real SMTP server. Each node reaches the target through its own TCP gate
//! (`common/gate.rs`), so the test decides which vantages see the outage;
//! the bucket sits behind a gate too, so it can be stopped without losing
//! what it holds.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::daemon::{api_section, free_addr, poll, Daemon};
use common::env::{check_toml, Env};
use common::gate::Gate;
use common::pki::{issue, LeafSpec};
use common::s3_auth::AuthS3;
use common::servers::{TlsOpts, TlsServer};
use common::smtp::{Received, SmtpOpts, SmtpServer};

const START: Duration = Duration::from_secs(30);
const MAIL: Duration = Duration::from_secs(40);
const STOP: Duration = Duration::from_secs(30);

/// One vantage: its directory, API, the gate in front of the target, and
/// the running daemon.
struct Node {
    name: String,
    env: Env,
    api: SocketAddr,
    gate: Gate,
    daemon: Option<Daemon>,
}

/// A fleet of vantages on one bucket (behind `bucket_gate`).
struct Fleet {
    nodes: Vec<Node>,
    smtp: SmtpServer,
    bucket_gate: Gate,
    _target: TlsServer,
}

impl Fleet {
    async fn start(names: &[&str], alerting: &str) -> Fleet {
        let s3 = AuthS3::shared();
        let bucket = s3.bucket();
        let bucket_gate = Gate::start(s3.server.addr).await;
        let smtp = SmtpServer::start(SmtpOpts::plain());
        let target =
            TlsServer::start_leaf(&issue(&LeafSpec::new(["localhost"])), TlsOpts::default());
        let mut nodes = Vec::new();
        for name in names {
            let peers: Vec<String> = names
                .iter()
                .filter(|n| *n != name)
                .map(|n| format!("{n:?}"))
                .collect();
            let gate = Gate::start(target.addr).await;
            let api = free_addr();
            let env = Env::with_config(&api_section(api, None));
            let (id, secret) = s3.write_keys(env.path());
            env.append_config(&smtp.alerting_sections(alerting));
            env.append_config(&format!(
                "[replication]\nurl = \"s3://{bucket}/{name}\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
                 access_key_id_file = {:?}\nsecret_access_key_file = {:?}\ninterval = \"1h\"\n\
                 [vantage]\npeers = [{}]\npublish_every = \"1s\"\nstale_after = \"5s\"\n",
                bucket_gate.endpoint(),
                id.display().to_string(),
                secret.display().to_string(),
                peers.join(", "),
            ));
            let url = format!("https://localhost:{}/", gate.addr.port());
            env.write_checks(
                "site.toml",
                &check_toml("site", &url, "every = \"1s\"\ntimeout = \"2s\""),
            );
            nodes.push(Node {
                name: name.to_string(),
                env,
                api,
                gate,
                daemon: None,
            });
        }
        for node in &mut nodes {
            node.daemon = Some(Daemon::spawn(&node.env.config_path(), node.api));
        }
        for node in &mut nodes {
            node.daemon.as_mut().unwrap().wait_healthy(START).await;
        }
        let fleet = Fleet {
            nodes,
            smtp,
            bucket_gate,
            _target: target,
        };
        fleet.wait_coordinating().await;
        fleet
    }

    fn node(&self, name: &str) -> &Node {
        self.nodes.iter().find(|n| n.name == name).unwrap()
    }

    fn daemon(&self, name: &str) -> &Daemon {
        self.node(name).daemon.as_ref().unwrap()
    }

    /// Every running node sees every other running node alive.
    async fn wait_coordinating(&self) {
        let running = self.nodes.iter().filter(|n| n.daemon.is_some()).count();
        for node in self.nodes.iter().filter(|n| n.daemon.is_some()) {
            let daemon = node.daemon.as_ref().unwrap();
            poll(START, &format!("{} coordinating", node.name), async || {
                let (_, body) = daemon.get("/metrics").await?;
                let alive = metric(&body, "vigie_vantage_peers_alive");
                let up = metric(&body, "vigie_vantage_coordination_up");
                match (alive, up) {
                    (Some(a), Some(u)) if a as usize == running - 1 && u == 1.0 => Ok(()),
                    _ => Err(format!("peers_alive {alive:?}, coordination_up {up:?}")),
                }
            })
            .await;
        }
    }

    fn close_all(&self) {
        for node in &self.nodes {
            node.gate.close();
        }
    }

    fn open_all(&self) {
        for node in &self.nodes {
            node.gate.open();
        }
    }

    async fn stop(mut self) {
        for node in &mut self.nodes {
            if let Some(daemon) = node.daemon.as_mut() {
                daemon.stop(STOP).await;
            }
        }
    }
}

/// The value of an unlabelled sample in a `/metrics` text.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

fn subject(mail: &Received) -> String {
    mail.header("Subject").unwrap_or_default()
}

/// The message with quoted-printable soft breaks undone, so that a
/// sentence can be searched whole.
fn body(mail: &Received) -> String {
    mail.data.replace("=\r\n", "").replace("=3D", "=")
}

fn subjects(mails: &[Received]) -> Vec<String> {
    mails.iter().map(subject).collect()
}

/// The mails received so far whose subject contains `word`.
fn with_subject(smtp: &SmtpServer, word: &str) -> Vec<Received> {
    smtp.received()
        .into_iter()
        .filter(|m| subject(m).contains(word))
        .collect()
}

async fn wait_mails(smtp: &SmtpServer, word: &str, n: usize) -> Vec<Received> {
    poll(MAIL, &format!("{n} mail(s) with {word:?}"), async || {
        let found = with_subject(smtp, word);
        match found.len() >= n {
            true => Ok(found),
            false => Err(format!("{:?}", subjects(&smtp.received()))),
        }
    })
    .await
}

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
        "paged for fra alone: {:?} (report {report})",
        subjects(&fleet.smtp.received())
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
    assert_eq!(downs.len(), 1, "{:?}", subjects(&fleet.smtp.received()));
    let text = body(&down[0]);
    assert!(
        text.contains("confirmed down from 3 of 3 vantages")
            || text.contains("confirmed down from 2 of 3 vantages"),
        "{text}"
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

#[tokio::test(flavor = "multi_thread")]
async fn two_vantages_racing_on_the_same_incident_twenty_times_never_send_two_mails() {
    let alerting = "failure_threshold = 1\nrecovery_threshold = 1\ngroup_window = \"0s\"\n";
    let fleet = Fleet::start(&["eu-par", "fra"], alerting).await;
    for round in 1..=20 {
        fleet.close_all();
        wait_mails(&fleet.smtp, "DOWN site", round).await;
        fleet.open_all();
        wait_mails(&fleet.smtp, "RESOLVED site", round).await;
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
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vantage_killed_is_paged_once_as_silent() {
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
    wait_mails(&fleet.smtp, "RESOLVED site", 1).await;
    fleet.stop().await;
}
