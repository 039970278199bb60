//! `kind = "smtp"` against a real SMTP server (aiosmtpd) serving the lab's
//! certificates over STARTTLS and SMTPS, and against peers that are not
//! proper mail servers: one that never greets, one that does not offer
//! STARTTLS, one whose reply never ends. Each chain is judged as for
//! https; each refusal is a `down` with its reason, within the timeout.

use std::path::PathBuf;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::common::env::{assertions, failure, pretty, run_one, Env};
use crate::common::smtp::{SmtpOpts, SmtpServer};
use crate::common::*;
use vigie::outcome::{Assertion, Status};

/// The leaf and the intermediate of `ca` as PEM files for aiosmtpd.
struct Served {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

fn served(leaf: &Leaf, ca: &Ca) -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = dir.path().join("chain.pem");
    let key = dir.path().join("key.pem");
    let chain = format!("{}{}", leaf.cert_pem, ca.intermediate.pem);
    std::fs::write(&cert, chain).expect("write chain");
    std::fs::write(&key, &leaf.key_pem).expect("write key");
    Served {
        _dir: dir,
        cert,
        key,
    }
}

fn smtp_check(url: &str, extra: &str) -> String {
    format!(
        "[[check]]\nname = \"relay\"\nkind = \"smtp\"\nurl = {url:?}\nresolve = \"127.0.0.1\"\n{extra}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_starttls_relay_with_a_good_chain_is_up_with_its_facts() {
    let files = served(&valid_leaf(), test_ca());
    let server = SmtpServer::start(SmtpOpts::starttls(&files.cert, &files.key));
    let url = format!("smtp://{HOST}:{}", server.port);
    let outcome = run_one(&smtp_check(&url, "")).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(outcome.target, url);
    let smtp = outcome.smtp.as_ref().expect("smtp report");
    assert_eq!(smtp.tls, "starttls");
    assert_eq!(smtp.starttls_offered, Some(true));
    let banner = smtp.banner.as_deref().unwrap_or_default();
    assert!(banner.contains("smtp.vigie.test"), "{banner}");
    assert!(smtp.banner_ms.is_some() && smtp.ehlo_ms.is_some());
    let tls = outcome.tls.as_ref().expect("the chain after STARTTLS");
    assert!(tls.trusted && tls.hostname_matches);
    assert_eq!(tls.chain[0].subject, format!("CN={HOST}"));
    assert!(tls.key_exchange.is_some() && tls.version.is_some());
}

/// The lab's bad certificates, served after STARTTLS: each is judged as the
/// same certificate on an https port would be.
#[tokio::test(flavor = "multi_thread")]
async fn expired_misnamed_and_staging_relay_certificates_are_down() {
    let cases: [(Leaf, &Ca, &str, &str); 3] = [
        (expired_leaf(), test_ca(), "tls.expiry", "expired"),
        (wrong_host_leaf(), test_ca(), "tls.hostname", OTHER_HOST),
        (
            staging_leaf(),
            staging_ca(),
            "tls.trusted",
            "Let's Encrypt staging CA",
        ),
    ];
    for (leaf, ca, assertion, words) in cases {
        let files = served(&leaf, ca);
        let server = SmtpServer::start(SmtpOpts::starttls(&files.cert, &files.key));
        let url = format!("smtp://{HOST}:{}", server.port);
        let outcome = run_one(&smtp_check(&url, "")).await;
        assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
        let f = failure(&outcome, assertion);
        assert!(f.message.contains(words), "{assertion}: {}", f.message);
        assert_eq!(
            outcome.smtp.as_ref().and_then(|s| s.starttls_offered),
            Some(true)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn smtps_shakes_hands_first() {
    let files = served(&valid_leaf(), test_ca());
    let server = SmtpServer::start(SmtpOpts::tls(&files.cert, &files.key));
    let url = format!("smtps://{HOST}:{}", server.port);
    let outcome = run_one(&smtp_check(&url, "")).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let smtp = outcome.smtp.as_ref().expect("smtp report");
    assert_eq!(smtp.tls, "tls");
    assert_eq!(smtp.starttls_offered, None);
    assert!(smtp.banner.is_some(), "the greeting is read inside TLS");
    assert!(outcome.tls.as_ref().is_some_and(|t| t.trusted));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relay_without_starttls_is_down_unless_allowed() {
    let server = SmtpServer::start(SmtpOpts::plain());
    let url = format!("smtp://{HOST}:{}", server.port);
    let outcome = run_one(&smtp_check(&url, "")).await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    assert_eq!(assertions(&outcome), vec![Assertion::SmtpStarttls]);
    let f = failure(&outcome, "smtp.starttls");
    assert!(
        f.message.contains("does not offer STARTTLS"),
        "{}",
        f.message
    );
    assert_eq!(
        outcome.smtp.as_ref().and_then(|s| s.starttls_offered),
        Some(false)
    );

    let outcome = run_one(&smtp_check(&url, "require_starttls = false")).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert!(outcome.tls.is_none());
}

/// A peer that accepts and never greets holds the probe only until the
/// check's timeout, which then says what it was waiting for.
#[tokio::test(flavor = "multi_thread")]
async fn a_greeting_that_never_comes_times_out_saying_so() {
    let tarpit = Tarpit::start();
    let url = format!("smtp://{HOST}:{}", tarpit.addr.port());
    let outcome = run_one(&smtp_check(&url, "timeout = \"1s\"")).await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let f = failure(&outcome, "timeout");
    assert!(
        f.message.contains("waiting for the SMTP greeting"),
        "{}",
        f.message
    );
    assert_eq!(
        outcome.smtp.as_ref().map(|s| s.tls.as_str()),
        Some("starttls")
    );
}

/// Serves `bytes` from a loopback port to every connection, then holds it.
async fn hostile(
    bytes: impl Fn() -> Vec<u8> + Send + Sync + 'static,
) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let bytes = std::sync::Arc::new(bytes);
    let task = tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let bytes = bytes.clone();
            tokio::spawn(async move {
                // Written until the client goes away.
                while tcp.write_all(&bytes()).await.is_ok() {}
            });
        }
    });
    (port, task)
}

/// An SMTP peer that greets, offers STARTTLS in its EHLO answer, and
/// answers STARTTLS with `answer`, sent as one write.
async fn answering_starttls_with(answer: &'static [u8]) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (read, mut write) = tcp.into_split();
                let mut lines = tokio::io::BufReader::new(read).lines();
                if write.write_all(b"220 relay.test ESMTP\r\n").await.is_err() {
                    return;
                }
                while let Ok(Some(line)) = lines.next_line().await {
                    let command = line.to_ascii_uppercase();
                    let reply: &[u8] = if command.starts_with("EHLO") {
                        b"250-relay.test\r\n250 STARTTLS\r\n"
                    } else if command.starts_with("STARTTLS") {
                        answer
                    } else if command.starts_with("QUIT") {
                        b"221 bye\r\n"
                    } else {
                        b"502 5.5.1 not here\r\n"
                    };
                    if write.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, task)
}

/// A relay that offers STARTTLS and then refuses it (a 454, as a relay
/// whose certificate failed to load says), or agrees and sends more
/// before the handshake (what the STARTTLS injection flaw rides on): each
/// is `smtp.starttls`, with the answer in its words.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_or_overfull_starttls_answer_is_down_saying_which() {
    let (port, task) =
        answering_starttls_with(b"454 4.7.0 TLS not available due to temporary reason\r\n").await;
    let outcome = run_one(&smtp_check(&format!("smtp://{HOST}:{port}"), "")).await;
    task.abort();
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    assert_eq!(assertions(&outcome), vec![Assertion::SmtpStarttls]);
    let f = failure(&outcome, "smtp.starttls");
    assert!(
        f.message.contains("refused it with 454")
            && f.message
                .contains("TLS not available due to temporary reason"),
        "{}",
        f.message
    );
    assert!(outcome.tls.is_none(), "no handshake after a refusal");

    let (port, task) =
        answering_starttls_with(b"220 2.0.0 go ahead\r\nMAIL FROM:<injected@example.test>\r\n")
            .await;
    let outcome = run_one(&smtp_check(&format!("smtp://{HOST}:{port}"), "")).await;
    task.abort();
    assert_eq!(
        assertions(&outcome),
        vec![Assertion::SmtpStarttls],
        "{}",
        pretty(&outcome)
    );
    let f = failure(&outcome, "smtp.starttls");
    assert!(
        f.message
            .contains("after agreeing to STARTTLS, before the TLS handshake"),
        "{}",
        f.message
    );
}

/// Endless reply lines, or one endless line: the probe stops at its caps
/// with a reason, whatever the peer goes on sending.
#[tokio::test(flavor = "multi_thread")]
async fn an_endless_greeting_is_refused_at_its_caps() {
    let (port, task) = hostile(|| b"220-still greeting\r\n".to_vec()).await;
    let url = format!("smtp://{HOST}:{port}");
    let outcome = run_one(&smtp_check(&url, "")).await;
    task.abort();
    assert_eq!(
        assertions(&outcome),
        vec![Assertion::SmtpBanner],
        "{}",
        pretty(&outcome)
    );
    let f = failure(&outcome, "smtp.banner");
    assert!(f.message.contains("runs past 100 lines"), "{}", f.message);

    let (port, task) = hostile(|| vec![b'2'; 4096]).await;
    let url = format!("smtp://{HOST}:{port}");
    let outcome = run_one(&smtp_check(&url, "")).await;
    task.abort();
    let f = failure(&outcome, "smtp.banner");
    assert!(
        f.message.contains("longer than 1000 bytes"),
        "{}",
        f.message
    );
}

/// `[smtp] watch` (the default) adds the relay vigie mails through as a
/// check of its own; a clear-text relay or `watch = false` adds none.
#[tokio::test(flavor = "multi_thread")]
async fn the_relay_vigie_mails_through_is_watched() {
    let leaf = issue(&LeafSpec::new(["localhost", "127.0.0.1"]));
    let files = served(&leaf, test_ca());
    let server = SmtpServer::start(SmtpOpts::starttls(&files.cert, &files.key));
    let smtp = |extra: &str| {
        format!(
            "[smtp]\nhost = \"127.0.0.1\"\nport = {}\ntls = \"starttls\"\n{extra}",
            server.port
        )
    };
    let env = Env::with_config(&smtp(""));
    let outcomes = env.run_all().await;
    let relay = outcomes
        .iter()
        .find(|o| o.name == vigie::config::RELAY_CHECK)
        .unwrap_or_else(|| panic!("no relay check in {outcomes:#?}"));
    assert_eq!(relay.status, Status::Up, "{}", pretty(relay));
    assert_eq!(relay.target, format!("smtp://127.0.0.1:{}", server.port));
    assert!(relay.tls.as_ref().is_some_and(|t| t.trusted));

    let names =
        |env: &Env| -> Vec<String> { env.load().checks.iter().map(|c| c.name.clone()).collect() };
    let unwatched = Env::with_config(&smtp("watch = false\n"));
    assert!(!names(&unwatched).contains(&vigie::config::RELAY_CHECK.to_string()));
    let clear = Env::with_config(&format!(
        "[smtp]\nhost = \"127.0.0.1\"\nport = {}\ntls = \"none\"\n",
        server.port
    ));
    assert!(!names(&clear).contains(&vigie::config::RELAY_CHECK.to_string()));
}
