//! A fleet of vantages for the vantage tests and benchmark: `vigie run`
//! processes, each with its own state directory, API port and TCP gate in
//! front of the target, on one bucket of the authenticated moto
//! ([`super::s3_auth`]) reached through a gate of its own (so the bucket
//! can be stopped without losing what it holds), paging one real SMTP
//! server.

use std::net::SocketAddr;
use std::time::Duration;

use super::daemon::{api_section, free_addr, poll, Daemon};
use super::env::{check_toml, Env};
use super::gate::Gate;
use super::pki::{issue, LeafSpec};
use super::s3_auth::AuthS3;
use super::servers::{TlsOpts, TlsServer};
use super::smtp::{Received, SmtpOpts, SmtpServer};

pub const START: Duration = Duration::from_secs(30);
pub const MAIL: Duration = Duration::from_secs(40);
pub const STOP: Duration = Duration::from_secs(30);

/// One vantage: its directory, API, the gate in front of the target, and
/// the running daemon.
pub struct Node {
    pub name: String,
    pub env: Env,
    pub api: SocketAddr,
    pub gate: Gate,
    pub daemon: Option<Daemon>,
}

/// Vantages on one bucket (behind `bucket_gate`).
pub struct Fleet {
    pub nodes: Vec<Node>,
    pub smtp: SmtpServer,
    pub bucket_gate: Gate,
    /// Every node's key, as `vigie vantage keygen` made them.
    pub keys: FleetKeys,
    _target: TlsServer,
}

/// How the fleet is configured.
pub struct Spec<'a> {
    /// `[alerting]` keys.
    pub alerting: &'a str,
    /// `[vantage]` keys besides `peers`; `None`: no `[vantage]` at all
    /// (a lone vigie, for comparison).
    pub vantage: Option<&'a str>,
    /// The checks file of a node, given the URL its gate serves the
    /// target at.
    pub checks: &'a dyn Fn(&str) -> String,
    /// More config for every node (`[[notify]]` channels, say).
    pub extra: &'a str,
}

/// The one check `site`, probed every second.
pub fn site(url: &str) -> String {
    check_toml("site", url, "every = \"1s\"\ntimeout = \"2s\"")
}

/// The `[vantage]` timings of [`Fleet::start`]: publishing every second,
/// dead after 5 s.
pub const QUICK_VANTAGE: &str = "publish_every = \"1s\"\nstale_after = \"5s\"\n";

impl Fleet {
    /// `names` as one fleet, with [`QUICK_VANTAGE`] and [`site`].
    pub async fn start(names: &[&str], alerting: &str) -> Fleet {
        let spec = Spec {
            alerting,
            vantage: Some(QUICK_VANTAGE),
            checks: &site,
            extra: "",
        };
        Fleet::start_with(names, &spec).await
    }

    pub async fn start_with(names: &[&str], spec: &Spec<'_>) -> Fleet {
        let s3 = AuthS3::shared();
        let bucket = s3.bucket();
        let bucket_gate = Gate::start(s3.server.addr).await;
        let smtp = SmtpServer::start(SmtpOpts::plain());
        let target =
            TlsServer::start_leaf(&issue(&LeafSpec::new(["localhost"])), TlsOpts::default());
        let mut nodes = Vec::new();
        let keys = FleetKeys::new(names);
        for name in names {
            let gate = Gate::start(target.addr).await;
            let api = free_addr();
            let env = Env::with_config(&api_section(api, None));
            let (id, secret) = s3.write_keys(env.path());
            env.append_config(&smtp.alerting_sections(spec.alerting));
            env.append_config(&format!(
                "[replication]\nurl = \"s3://{bucket}/{name}\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
                 access_key_id_file = {:?}\nsecret_access_key_file = {:?}\ninterval = \"1h\"\n",
                bucket_gate.endpoint(),
                id.display().to_string(),
                secret.display().to_string(),
            ));
            if let Some(extra) = spec.vantage {
                env.append_config(&format!("{}{extra}", keys.section(name)));
            }
            env.append_config(spec.extra);
            let url = format!("https://localhost:{}/", gate.addr.port());
            env.write_checks("checks.toml", &(spec.checks)(&url));
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
            keys,
            _target: target,
        };
        if spec.vantage.is_some() {
            fleet.wait_coordinating().await;
        }
        fleet
    }

    pub fn node(&self, name: &str) -> &Node {
        self.nodes.iter().find(|n| n.name == name).unwrap()
    }

    pub fn daemon(&self, name: &str) -> &Daemon {
        self.node(name).daemon.as_ref().unwrap()
    }

    /// Every running node sees every other running node alive.
    pub async fn wait_coordinating(&self) {
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

    pub fn close_all(&self) {
        for node in &self.nodes {
            node.gate.close();
        }
    }

    pub fn open_all(&self) {
        for node in &self.nodes {
            node.gate.open();
        }
    }

    /// Waits until every node's newest result of every check whose name
    /// starts with `prefix` is `status` (`up`, `down`): each node then
    /// saw this side of the outage, so the nodes agree on where each
    /// incident begins and ends.
    pub async fn wait_all_see(&self, prefix: &str, status: &str) {
        for node in &self.nodes {
            let daemon = node.daemon.as_ref().expect("a running node");
            poll(
                Duration::from_secs(30),
                &format!("every {prefix}* {status} on {}", node.name),
                async || {
                    let checks = daemon.get_json("/api/v1/checks").await?;
                    let all = checks["checks"]
                        .as_array()
                        .ok_or_else(|| checks.to_string())?;
                    let seen = all
                        .iter()
                        .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
                        .all(|c| c["latest"]["status"] == status);
                    seen.then_some(()).ok_or_else(|| checks.to_string())
                },
            )
            .await;
        }
    }

    /// Waits until no node has an incident open (`vigie_alerts_firing` 0):
    /// each has released its RESOLVED, which the fleet may have held
    /// while the other nodes' states still said down.
    pub async fn wait_none_firing(&self) {
        for node in &self.nodes {
            let daemon = node.daemon.as_ref().expect("a running node");
            poll(
                Duration::from_secs(30),
                &format!("no incident open on {}", node.name),
                async || {
                    let (_, body) = daemon.get("/metrics").await?;
                    match metric(&body, "vigie_alerts_firing") {
                        Some(0.0) => Ok(()),
                        other => Err(format!("vigie_alerts_firing {other:?}")),
                    }
                },
            )
            .await;
        }
    }

    /// Every running node's log, each headed by its name: what a failed
    /// assertion on the fleet's mail prints, so that a page that went out
    /// (or did not) can be traced to the node that decided it.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .filter_map(|n| n.daemon.as_ref().map(|d| (n, d)))
            .map(|(node, daemon)| format!("\n===== {} =====\n{}", node.name, daemon.log()))
            .collect()
    }

    pub async fn stop(mut self) {
        for node in &mut self.nodes {
            if let Some(daemon) = node.daemon.as_mut() {
                daemon.stop(STOP).await;
            }
        }
    }
}

/// One key per vantage, made as an operator makes them (`vigie vantage
/// keygen`'s library side), in a directory of their own.
pub struct FleetKeys {
    _dir: Option<Env>,
    /// (node, key file, its `peers` entry)
    pub nodes: Vec<(String, std::path::PathBuf, String)>,
}

impl FleetKeys {
    /// In a directory of their own, removed with them.
    pub fn new(names: &[&str]) -> FleetKeys {
        let dir = Env::new();
        let mut keys = FleetKeys::new_in(&dir.path().join("keys"), names);
        keys._dir = Some(dir);
        keys
    }

    /// In `dir` (a test's own directory).
    pub fn new_in(dir: &std::path::Path, names: &[&str]) -> FleetKeys {
        let nodes = names
            .iter()
            .map(|name| {
                let made = vigie::cli::keygen::keygen(name, dir).unwrap();
                (name.to_string(), made.key_file, made.peer_entry)
            })
            .collect();
        FleetKeys { _dir: None, nodes }
    }

    /// `[vantage]` for `node`: its key file and every other node as a peer
    /// (more keys follow the section's header, so this comes first).
    pub fn section(&self, node: &str) -> String {
        let peers: Vec<&str> = self
            .nodes
            .iter()
            .filter(|(n, _, _)| n != node)
            .map(|(_, _, entry)| entry.as_str())
            .collect();
        let key_file = &self.nodes.iter().find(|(n, _, _)| n == node).unwrap().1;
        format!(
            "[vantage]\nsigning_key_file = {:?}\npeers = [{}]\n",
            key_file.display().to_string(),
            peers.join(", ")
        )
    }

    /// `node`'s signing key, to write in its name what it would.
    pub fn key(&self, node: &str) -> vigie::signing::SigningKey {
        let key_file = &self.nodes.iter().find(|(n, _, _)| n == node).unwrap().1;
        vigie::signing::SigningKey::from_pem(&std::fs::read_to_string(key_file).unwrap()).unwrap()
    }
}

pub use super::daemon::metric;

pub fn subject(mail: &Received) -> String {
    mail.header("Subject").unwrap_or_default()
}

/// The message with quoted-printable soft breaks undone, so that a
/// sentence can be searched whole.
pub fn body(mail: &Received) -> String {
    mail.data.replace("=\r\n", "").replace("=3D", "=")
}

pub fn subjects(mails: &[Received]) -> Vec<String> {
    mails.iter().map(subject).collect()
}

/// The mails received so far whose subject contains `word`.
pub fn with_subject(smtp: &SmtpServer, word: &str) -> Vec<Received> {
    smtp.received()
        .into_iter()
        .filter(|m| subject(m).contains(word))
        .collect()
}

/// Waits until `n` mails have `word` in their subject.
pub async fn wait_mails(smtp: &SmtpServer, word: &str, n: usize) -> Vec<Received> {
    poll(MAIL, &format!("{n} mail(s) with {word:?}"), async || {
        let found = with_subject(smtp, word);
        match found.len() >= n {
            true => Ok(found),
            false => Err(format!("{:?}", subjects(&smtp.received()))),
        }
    })
    .await
}
