//! Mail delivery against a real SMTP server (aiosmtpd on loopback, see
//! `common/smtp.rs`): STARTTLS + AUTH, implicit TLS, a server that is down
//! and comes back, 451 retried, 550 to the dead letters, backoff that
//! survives a restart, a sender killed with SIGKILL mid-drain, the Maildir
//! fallback, and `vigie test-email` saying what went wrong.
//!
//! Messages are checked with Python's `email` and `mailbox` packages: a
//! real MIME parser and a real Maildir reader decide whether what vigie
//! wrote is well-formed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::common::pki::{self, LeafSpec};
use crate::common::smtp::{parse_maildir, parse_messages, Received, SmtpOpts, SmtpServer};
use vigie::alert::{AlertState, Email};
use vigie::clock::SystemClock;
use vigie::config::{Config, SmtpConfig, SmtpTls};
use vigie::mail::{
    send_test, Backoff, Delivery, MailError, MailStats, Outbox, Sender, SenderHandle, SmtpTransport,
};
use vigie::store::SledStore;

const USER: &str = "vigie";
/// Spaces inside are part of it; the file's trailing newline is not.
const PASSWORD: &str = "correct horse battery";
const ONCALL: &str = "oncall@example.test";

/// Retries in tenths of seconds, so the tests take seconds.
const FAST: Backoff = Backoff {
    initial: Duration::from_millis(100),
    max: Duration::from_millis(400),
    give_up_after: Duration::from_secs(3600),
};

// ---------------------------------------------------------------- harness

/// A config directory with a server certificate for 127.0.0.1, the test
/// root to trust it, and the password file.
struct Site {
    dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    root: PathBuf,
    password_file: PathBuf,
}

#[derive(Clone, Copy, PartialEq)]
enum Trust {
    TestRoot,
    MozillaOnly,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().expect("tempdir");
        let leaf = pki::issue(&LeafSpec::new(["localhost", "127.0.0.1"]));
        let cert = dir.path().join("smtp-chain.pem");
        let key = dir.path().join("smtp-key.pem");
        let chain = format!("{}{}", leaf.cert_pem, pki::test_ca().intermediate.pem);
        std::fs::write(&cert, chain).expect("write chain");
        std::fs::write(&key, &leaf.key_pem).expect("write key");
        let root = pki::write_root_pem(dir.path());
        let password_file = dir.path().join("smtp-password");
        std::fs::write(&password_file, format!("{PASSWORD}\n")).expect("write password");
        std::fs::create_dir_all(dir.path().join("checks")).expect("checks dir");
        // A config must check something; this one is never probed here.
        std::fs::write(
            dir.path().join("checks/idle.toml"),
            "[[check]]\nname = \"idle\"\nkind = \"http\"\nurl = \"https://localhost:1/\"\n",
        )
        .expect("write a check");
        Site {
            dir,
            cert,
            key,
            root,
            password_file,
        }
    }

    /// `[smtp]` to 127.0.0.1:`port`.
    fn smtp(&self, port: u16, tls: &str, auth: bool, trust: Trust) -> String {
        let mut s = format!("[smtp]\nhost = \"127.0.0.1\"\nport = {port}\ntls = \"{tls}\"\n");
        if auth {
            s += &format!(
                "username = \"{USER}\"\npassword_file = {:?}\n",
                self.password_file.display().to_string()
            );
        }
        if trust == Trust::TestRoot {
            s += &format!("ca_file = {:?}\n", self.root.display().to_string());
        }
        s
    }

    /// The config with `[alerting]` to the on-call address, plus `extra`.
    fn config(&self, extra: &str) -> Config {
        let text = format!(
            "state_dir = \"state\"\n\
             [alerting]\nto = [\"On Call <{ONCALL}>\"]\nfrom = \"vigie <vigie@example.test>\"\n\
             {extra}"
        );
        match vigie::config::load_str(&self.dir.path().join("config.toml"), &text) {
            Ok(config) => config,
            Err(errors) => panic!("test config does not load:\n{errors}"),
        }
    }
}

/// An outbox in its own sled database under `dir`.
fn open_outbox(dir: &Path) -> (SledStore, Arc<Outbox>) {
    let store =
        SledStore::open_when_unlocked(&dir.join("db"), Duration::from_secs(1)).expect("open store");
    let alerts = store.alerts().expect("open the outbox");
    (store, Arc::new(Outbox::new(alerts.outbox())))
}

struct Running {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    handle: SenderHandle,
    stats: Arc<MailStats>,
}

impl Running {
    fn start(outbox: &Arc<Outbox>, delivery: Delivery, backoff: Backoff) -> Running {
        let (sender, handle) =
            Sender::new(outbox.clone(), delivery, Arc::new(SystemClock), backoff);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(sender.run(shutdown.clone()));
        Running {
            shutdown,
            task,
            handle,
            stats: outbox.stats(),
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the sender stops when told")
            .expect("the sender does not panic");
    }
}

/// A DOWN alert in a thread, numbered `n`, to `to`.
fn alert(n: usize, to: &str) -> Email {
    Email {
        subject: format!("[vigie] DOWN check-{n}: connection refused"),
        text: format!("check-{n} is down since 07:00 UTC.\n"),
        html: format!("<p><b>check-{n}</b> is down since 07:00 UTC.</p>"),
        message_id: format!("<down.{n}@vigie.test>"),
        in_reply_to: Some(format!("<first.{n}@vigie.test>")),
        references: vec![
            format!("<root.{n}@vigie.test>"),
            format!("<first.{n}@vigie.test>"),
        ],
        to: vec![to.to_owned()],
    }
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Polls without blocking the runtime the sender runs on.
async fn until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the outbox is empty and the counters caught up (the sender
/// counts a delivery just after removing the message).
async fn drained(outbox: &Outbox, stats: &MailStats, delivered: u64) {
    until(
        &format!("an empty outbox and {delivered} deliveries counted"),
        Duration::from_secs(5),
        || {
            let snap = stats.snapshot();
            outbox.pending().unwrap().is_empty()
                && snap.delivered_total >= delivered
                && snap.backlog == 0
        },
    )
    .await;
}

async fn received(server: &SmtpServer, n: usize) -> Vec<Received> {
    until(
        &format!("{n} messages at the server"),
        Duration::from_secs(20),
        || server.count() >= n,
    )
    .await;
    server.received()
}

fn message_ids(got: &[Received]) -> BTreeMap<String, usize> {
    let mut ids = BTreeMap::new();
    for r in got {
        *ids.entry(r.message_id()).or_insert(0) += 1;
    }
    ids
}

async fn test_email_error(config: &Config) -> String {
    match send_test(config, &SystemClock).await {
        Ok(report) => panic!("test-email should have failed, but:\n{report}"),
        Err(e) => e.to_string(),
    }
}

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starttls_and_auth_deliver_a_threaded_multipart_message() {
    let site = Site::new();
    let server = SmtpServer::start(SmtpOpts::starttls(&site.cert, &site.key).auth(USER, PASSWORD));
    let config = site.config(&site.smtp(server.port, "starttls", true, Trust::TestRoot));
    let (_db, outbox) = open_outbox(site.dir.path());
    let running = Running::start(&outbox, Delivery::from_config(&config).unwrap(), FAST);

    outbox.enqueue(&alert(1, ONCALL), now()).await.unwrap();
    let got = received(&server, 1).await;
    assert!(got[0].tls, "sent after STARTTLS");
    assert_eq!(got[0].auth_user.as_deref(), Some(USER));
    assert_eq!(got[0].mail_from, "vigie@example.test");
    assert_eq!(got[0].rcpt_tos, [ONCALL]);

    let parsed = &parse_messages(&[got[0].data.clone()])[0];
    assert_eq!(parsed.subject, "[vigie] DOWN check-1: connection refused");
    assert_eq!(parsed.from, "vigie <vigie@example.test>");
    assert_eq!(parsed.to, [ONCALL]);
    assert_eq!(parsed.message_id.as_deref(), Some("<down.1@vigie.test>"));
    assert_eq!(parsed.in_reply_to.as_deref(), Some("<first.1@vigie.test>"));
    assert_eq!(
        parsed.references.as_deref(),
        Some("<root.1@vigie.test> <first.1@vigie.test>")
    );
    assert_eq!(parsed.auto_submitted.as_deref(), Some("auto-generated"));
    assert!(parsed.date.is_some());
    assert_eq!(parsed.content_type, "multipart/alternative");
    let types: Vec<&str> = parsed.parts.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["text/plain", "text/html"]);
    // Decoded as it came over the wire: CRLF.
    assert_eq!(parsed.parts[0].1, "check-1 is down since 07:00 UTC.\r\n");
    assert!(parsed.parts[1].1.contains("<b>check-1</b>"));

    drained(&outbox, &running.stats, 1).await;
    let stats = running.stats.snapshot();
    assert_eq!((stats.delivered_total, stats.backlog), (1, 0));
    assert!(stats.via.contains("starttls"), "{}", stats.via);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implicit_tls_test_email_says_how_it_went() {
    let site = Site::new();
    let server = SmtpServer::start(SmtpOpts::tls(&site.cert, &site.key).auth(USER, PASSWORD));
    let config = site.config(&site.smtp(server.port, "tls", true, Trust::TestRoot));

    let report = send_test(&config, &SystemClock).await.unwrap();
    let text = report.to_string();
    assert!(
        report
            .via
            .ends_with("(implicit TLS, TLS 1.3, authenticated as vigie)"),
        "{text}"
    );
    assert!(
        report.outcome.starts_with("250 2.0.0 OK queued as"),
        "{text}"
    );
    assert_eq!(report.to, [format!("On Call <{ONCALL}>")]);

    let got = received(&server, 1).await;
    assert!(got[0].tls);
    assert_eq!(got[0].auth_user.as_deref(), Some(USER));
    assert_eq!(got[0].message_id(), report.message_id);
    let parsed = &parse_messages(&[got[0].data.clone()])[0];
    assert!(
        parsed.subject.starts_with("[vigie] test message from "),
        "{}",
        parsed.subject
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_email_names_the_failing_step_and_the_fix() {
    let site = Site::new();
    let starttls =
        SmtpServer::start(SmtpOpts::starttls(&site.cert, &site.key).auth(USER, PASSWORD));
    let plain = SmtpServer::start(SmtpOpts::plain().auth(USER, PASSWORD));

    // The relay's CA is not trusted.
    let err = test_email_error(&site.config(&site.smtp(
        starttls.port,
        "starttls",
        true,
        Trust::MozillaOnly,
    )))
    .await;
    assert_eq!(
        err,
        format!(
            "smtp 127.0.0.1:{}: TLS handshake: the server's certificate is not signed by a trusted CA \
             (if the relay uses a private CA, set ca_file in [smtp] to its root certificate (PEM))",
            starttls.port
        )
    );

    // A wrong password.
    std::fs::write(&site.password_file, "wrong\n").unwrap();
    let err = test_email_error(&site.config(&site.smtp(
        starttls.port,
        "starttls",
        true,
        Trust::TestRoot,
    )))
    .await;
    assert!(
        err.starts_with(&format!("smtp 127.0.0.1:{}: AUTH: 535 ", starttls.port)),
        "{err}"
    );
    assert!(
        err.ends_with(&format!(
            "(check username \"vigie\" and the password in {})",
            site.password_file.display()
        )),
        "{err}"
    );
    std::fs::write(&site.password_file, format!("{PASSWORD}\n")).unwrap();

    // Implicit TLS against a STARTTLS port.
    let err =
        test_email_error(&site.config(&site.smtp(starttls.port, "tls", true, Trust::TestRoot)))
            .await;
    assert!(err.contains(": TLS handshake: "), "{err}");
    assert!(
        err.contains("expects STARTTLS (usually 587), set tls = \"starttls\""),
        "{err}"
    );

    // STARTTLS required, but the server does not offer it.
    let err =
        test_email_error(&site.config(&site.smtp(plain.port, "starttls", true, Trust::TestRoot)))
            .await;
    assert!(
        err.starts_with(&format!(
            "smtp 127.0.0.1:{}: STARTTLS: the server does not offer STARTTLS (vigie never sends in clear text",
            plain.port
        )),
        "{err}"
    );

    // The server wants AUTH that is not configured.
    let err =
        test_email_error(&site.config(&site.smtp(plain.port, "none", false, Trust::TestRoot)))
            .await;
    assert!(err.contains(": sending: 530 "), "{err}");
    assert!(
        err.contains("set username and password_file in [smtp]"),
        "{err}"
    );

    // Nobody listening.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let err =
        test_email_error(&site.config(&site.smtp(closed, "none", false, Trust::TestRoot))).await;
    assert!(
        err.starts_with(&format!("smtp 127.0.0.1:{closed}: connecting: ")),
        "{err}"
    );
    assert!(
        err.ends_with(&format!(
            "(is the relay running and listening on port {closed}?)"
        )),
        "{err}"
    );

    assert_eq!(starttls.count() + plain.count(), 0, "nothing was accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_email_without_recipients_says_where_to_set_them() {
    let site = Site::new();
    // A config with nobody to page must say so outright.
    let text = "state_dir = \"state\"\n[alerting]\nenabled = false\n";
    let config = vigie::config::load_str(&site.dir.path().join("config.toml"), text).unwrap();
    let err = send_test(&config, &SystemClock).await.unwrap_err();
    assert!(matches!(err, MailError::NoRecipients { .. }));
    assert!(
        err.to_string()
            .starts_with("no recipients: set `to` in [alerting] of "),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_down_then_back_every_message_arrives_exactly_once() {
    let site = Site::new();
    let mut server = SmtpServer::start(SmtpOpts::plain());
    server.stop();
    let config = site.config(&site.smtp(server.port, "none", false, Trust::TestRoot));
    let (_db, outbox) = open_outbox(site.dir.path());
    let running = Running::start(&outbox, Delivery::from_config(&config).unwrap(), FAST);

    for n in 0..20 {
        outbox.enqueue(&alert(n, ONCALL), now()).await.unwrap();
    }
    until("three failed connections", Duration::from_secs(10), || {
        running.stats.snapshot().transport_failures_total >= 3
    })
    .await;
    let stats = running.stats.snapshot();
    assert!(stats.failing);
    assert_eq!(
        (stats.backlog, stats.delivered_total, stats.dead_letters),
        (20, 0, 0)
    );
    let error = stats.last_error.unwrap();
    assert!(error.contains(": connecting: "), "{error}");
    assert_eq!(
        outbox.pending().unwrap()[0].attempts,
        0,
        "a dead server costs the message nothing"
    );

    server.restart();
    let got = received(&server, 20).await;
    // Anything still in flight would show up now.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got = if server.count() > got.len() {
        server.received()
    } else {
        got
    };
    let ids = message_ids(&got);
    let expected: BTreeMap<String, usize> = (0..20)
        .map(|n| (format!("<down.{n}@vigie.test>"), 1))
        .collect();
    assert_eq!(ids, expected, "each message exactly once");
    let order: Vec<String> = got.iter().map(Received::message_id).collect();
    let queued: Vec<String> = (0..20).map(|n| format!("<down.{n}@vigie.test>")).collect();
    assert_eq!(order, queued, "in the order they were queued");

    drained(&outbox, &running.stats, 20).await;
    let stats = running.stats.snapshot();
    assert!(!stats.failing);
    assert_eq!((stats.backlog, stats.delivered_total), (0, 20));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_failure_is_retried_until_accepted_without_holding_up_others() {
    let site = Site::new();
    let server = SmtpServer::start(SmtpOpts::plain());
    let config = site.config(&site.smtp(server.port, "none", false, Trust::TestRoot));
    let (_db, outbox) = open_outbox(site.dir.path());

    let greylisted = "tempfail2-greylisted@example.test";
    outbox.enqueue(&alert(1, greylisted), now()).await.unwrap();
    outbox.enqueue(&alert(2, ONCALL), now()).await.unwrap();
    let running = Running::start(&outbox, Delivery::from_config(&config).unwrap(), FAST);

    let got = received(&server, 2).await;
    assert_eq!(
        got[0].rcpt_tos,
        [ONCALL],
        "the deferred message does not block the next"
    );
    assert_eq!(got[1].rcpt_tos, [greylisted], "accepted at the third try");
    drained(&outbox, &running.stats, 2).await;
    let stats = running.stats.snapshot();
    assert_eq!(stats.deferred_total, 2);
    assert_eq!((stats.delivered_total, stats.dead_letters), (2, 0));
    assert!(
        !stats.failing,
        "a deferral blames the message, not the server"
    );
    assert!(stats.last_error.unwrap().contains("451 4.3.0"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_rejection_goes_to_the_dead_letters() {
    let site = Site::new();
    let server = SmtpServer::start(SmtpOpts::plain());
    let config = site.config(&site.smtp(server.port, "none", false, Trust::TestRoot));
    let (_db, outbox) = open_outbox(site.dir.path());
    let running = Running::start(&outbox, Delivery::from_config(&config).unwrap(), FAST);

    outbox
        .enqueue(&alert(1, "reject@example.test"), now())
        .await
        .unwrap();
    outbox.enqueue(&alert(2, ONCALL), now()).await.unwrap();
    let got = received(&server, 1).await;
    assert_eq!(got[0].message_id(), "<down.2@vigie.test>");
    until("a dead letter, counted", Duration::from_secs(5), || {
        let snap = running.stats.snapshot();
        snap.dead_letters == 1 && snap.dead_lettered_total == 1
    })
    .await;

    let dead = outbox.dead_letters().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].message, alert(1, "reject@example.test"));
    assert_eq!(dead[0].attempts, 1, "a 5xx is not retried");
    assert!(
        dead[0].reason.starts_with(&format!(
            "smtp 127.0.0.1:{}: sending: 550 5.1.1 <reject@example.test>: recipient rejected",
            server.port
        )),
        "{}",
        dead[0].reason
    );
    assert!(dead[0]
        .reason
        .ends_with("(the server refused this message for good; it is kept in the dead letters)"));
    drained(&outbox, &running.stats, 1).await;
    let stats = running.stats.snapshot();
    assert_eq!(
        (stats.backlog, stats.dead_letters, stats.dead_lettered_total),
        (0, 1, 1)
    );
    assert_eq!(stats.delivered_total, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.count(), 1, "the rejected message is never accepted");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferrals_and_server_backoff_survive_a_restart() {
    let site = Site::new();
    let mut server = SmtpServer::start(SmtpOpts::plain());
    let config = site.config(&site.smtp(server.port, "none", false, Trust::TestRoot));

    // A message the server keeps deferring: its attempts are persisted.
    {
        let (_db, outbox) = open_outbox(site.dir.path());
        outbox
            .enqueue(&alert(1, "tempfail@example.test"), now())
            .await
            .unwrap();
        let running = Running::start(&outbox, Delivery::from_config(&config).unwrap(), FAST);
        until("two deferrals", Duration::from_secs(10), || {
            running.stats.snapshot().deferred_total >= 2
        })
        .await;
        running.stop().await;
    }
    let slow = Backoff {
        initial: Duration::from_secs(60),
        max: Duration::from_secs(60),
        ..FAST
    };
    {
        let (_db, outbox) = open_outbox(site.dir.path());
        let pending = outbox.pending().unwrap();
        assert_eq!(pending.len(), 1);
        assert!(pending[0].attempts >= 2, "{:?}", pending[0]);
        assert!(pending[0].next_attempt > pending[0].enqueued_at);
        assert!(pending[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("451 4.3.0"));

        // Now the server goes away: one failed connection, then a minute's
        // backoff, written down.
        server.stop();
        outbox.enqueue(&alert(2, ONCALL), now()).await.unwrap();
        let running = Running::start(&outbox, Delivery::from_config(&config).unwrap(), slow);
        until("a failed connection", Duration::from_secs(10), || {
            running.stats.snapshot().failing
        })
        .await;
        running.stop().await;
    }
    server.restart();
    let (_db, outbox) = open_outbox(site.dir.path());
    let running = Running::start(&outbox, Delivery::from_config(&config).unwrap(), slow);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stats = running.stats.snapshot();
    assert!(stats.failing, "the backoff was read back");
    assert_eq!(stats.consecutive_failures, 1);
    assert_eq!(
        server.count(),
        0,
        "the restarted sender waits out the backoff"
    );

    // A reload with (possibly) fixed settings tries at once.
    running
        .handle
        .reconfigure(Delivery::from_config(&config).unwrap());
    let got = received(&server, 1).await;
    assert_eq!(got[0].message_id(), "<down.2@vigie.test>");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_smtp_messages_become_maildir_files() {
    let site = Site::new();
    let config = site.config("");
    let maildir = config.state_dir.join("maildir");
    let (_db, outbox) = open_outbox(site.dir.path());
    let delivery = Delivery::from_config(&config).unwrap();
    assert_eq!(
        delivery.describe(),
        format!("maildir {}", maildir.display())
    );
    let running = Running::start(&outbox, delivery, FAST);

    let mut accented = alert(3, ONCALL);
    accented.subject = "[vigie] DOWN café: échec TLS".into();
    accented.text = "réponse : certificat expiré\n".into();
    for msg in [alert(1, ONCALL), alert(2, ONCALL), accented.clone()] {
        outbox.enqueue(&msg, now()).await.unwrap();
    }
    until("an empty outbox", Duration::from_secs(10), || {
        outbox.pending().unwrap().is_empty()
    })
    .await;

    let mut parsed = parse_maildir(&maildir);
    parsed.sort_by(|a, b| a.message_id.cmp(&b.message_id));
    assert_eq!(parsed.len(), 3);
    let subjects: Vec<&str> = parsed.iter().map(|p| p.subject.as_str()).collect();
    assert_eq!(
        subjects,
        [
            "[vigie] DOWN check-1: connection refused",
            "[vigie] DOWN check-2: connection refused",
            "[vigie] DOWN café: échec TLS",
        ]
    );
    assert_eq!(
        parsed[2].parts[0],
        ("text/plain".to_owned(), accented.text.clone())
    );
    for p in &parsed {
        assert_eq!(p.content_type, "multipart/alternative");
        assert_eq!(p.auto_submitted.as_deref(), Some("auto-generated"));
        let file = maildir.join("new").join(p.file.as_deref().unwrap());
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !bytes.windows(2).any(|w| w == b"\r\n"),
            "Unix line endings in {file:?}"
        );
    }
    assert_eq!(
        std::fs::read_dir(maildir.join("tmp")).unwrap().count(),
        0,
        "nothing left in tmp/"
    );
    assert!(maildir.join("cur").is_dir());

    let report = send_test(&config, &SystemClock).await.unwrap();
    assert_eq!(report.via, format!("maildir {}", maildir.display()));
    let written = report.outcome.strip_prefix("written to ").unwrap();
    assert!(
        Path::new(written).starts_with(maildir.join("new")),
        "{written}"
    );
    assert_eq!(parse_maildir(&maildir).len(), 4);
    running.stop().await;
}

// ---------------------------------------------------------- kill -9 test

/// Set in the environment of the re-executed test binary: `DB|PORT|COUNT`.
const CHILD_ENV: &str = "VIGIE_MAIL_KILL9_CHILD";
const KILL9_MESSAGES: usize = 120;

/// Not a test on its own: the body of the child process that
/// [`a_sender_killed_with_sigkill_mid_drain_loses_nothing`] starts and
/// kills. It opens the store as the daemon does, queues COUNT messages
/// (half alone, half inside a transaction with alert state), says
/// `ENQUEUED`, and drains until killed.
#[test]
fn kill9_child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut fields = spec.split('|');
    let (Some(db), Some(port), Some(count)) = (fields.next(), fields.next(), fields.next()) else {
        panic!("bad {CHILD_ENV}: {spec}");
    };
    let (db, port, count) = (
        PathBuf::from(db),
        port.parse().unwrap(),
        count.parse::<usize>().unwrap(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = SledStore::open_when_unlocked(&db, Duration::from_millis(200)).unwrap();
        let alerts = store.alerts().unwrap();
        let outbox = Arc::new(Outbox::new(alerts.outbox()));
        for n in 0..count {
            let msg = kill9_message(n);
            if n % 2 == 0 {
                outbox.enqueue(&msg, now()).await.unwrap();
            } else {
                let state = AlertState::new(&format!("check-{n}"));
                alerts.commit(&[state], &msg, now()).unwrap();
                outbox.flush_and_wake().await.unwrap();
            }
        }
        println!("ENQUEUED");
        let smtp = SmtpConfig {
            host: "127.0.0.1".into(),
            port,
            tls: SmtpTls::None,
            username: None,
            password_file: None,
            ca_file: None,
            watch: false,
        };
        let delivery = Delivery::smtp(
            SmtpTransport::new(&smtp, None).unwrap(),
            "vigie@example.test".parse().unwrap(),
            vec![],
        );
        let (sender, _handle) = Sender::new(outbox, delivery, Arc::new(SystemClock), FAST);
        sender.run(CancellationToken::new()).await;
    });
}

fn kill9_message(n: usize) -> Email {
    Email {
        message_id: format!("<k9.{n}@vigie.test>"),
        ..alert(n, ONCALL)
    }
}

/// A child process draining the outbox; SIGKILLed when dropped, so a
/// failing assertion leaves nothing running.
struct Drainer(Child);

impl Drainer {
    fn kill9(&mut self) {
        // SAFETY: kill(2) on our own child, not yet waited for.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.kill9();
        }
    }
}

fn spawn_child(db: &Path, port: u16, count: usize) -> Drainer {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "mail::kill9_child_process",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, format!("{}|{port}|{count}", db.display()))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    // Should this test binary die, the child goes with it.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = Drainer(cmd.spawn().expect("re-run the test binary"));
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test NAME ... " on the same line first.
            if line.ends_with("ENQUEUED") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the child queues its messages");
    child
}

fn wait_count(server: &SmtpServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.count() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} messages arrived",
            server.count()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_sender_killed_with_sigkill_mid_drain_loses_nothing() {
    // Slow enough that the kills land mid-drain.
    let server = SmtpServer::start(SmtpOpts::plain().delay(Duration::from_millis(15)));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history");

    let mut first = spawn_child(&db, server.port, KILL9_MESSAGES);
    wait_count(&server, 25);
    first.kill9();
    let after_first = server.count();
    assert!(after_first < KILL9_MESSAGES, "killed mid-drain");

    let mut second = spawn_child(&db, server.port, 0);
    wait_count(&server, after_first + 30);
    second.kill9();
    let kills = 2;

    let mut third = spawn_child(&db, server.port, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let distinct = message_ids(&server.received()).len();
        if distinct == KILL9_MESSAGES {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{distinct} of {KILL9_MESSAGES} arrived"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    third.kill9();

    let got = server.received();
    let ids = message_ids(&got);
    let expected: Vec<String> = (0..KILL9_MESSAGES)
        .map(|n| format!("<k9.{n}@vigie.test>"))
        .collect();
    assert_eq!(ids.keys().cloned().collect::<Vec<_>>(), {
        let mut e = expected.clone();
        e.sort();
        e
    });
    // A kill between the server's 250 and the removal reaching the disk
    // sends that one message again (same Message-ID): at most one per kill.
    let duplicates: Vec<(&String, &usize)> = ids.iter().filter(|(_, &n)| n > 1).collect();
    let extra: usize = duplicates.iter().map(|(_, &n)| n - 1).sum();
    assert!(extra <= kills, "more duplicates than kills: {duplicates:?}");
    eprintln!(
        "kill -9 x{kills}: {} messages, {} received, duplicates: {duplicates:?}",
        KILL9_MESSAGES,
        got.len()
    );
}
