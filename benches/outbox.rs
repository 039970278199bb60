//! Outbox cost: how fast alerts can be queued durably, how fast a backlog
//! drains to a real SMTP server, and how long one message waits between
//! being queued and the server's acceptance when nothing else is queued.
//!
//! The store is the daemon's (SledStore, its outbox trees), the server
//! aiosmtpd on loopback (plain SMTP: the point is the outbox and the
//! session, not TLS, whose handshake happens once per session anyway).
//!
//! 1. Enqueue: half the messages one by one with `Outbox::enqueue`, half as
//!    the alert engine does, each committed with an alert state
//!    (`AlertStore::commit`, one sled transaction) followed by
//!    `flush_and_wake`. Every message is
//!    flushed to disk before the next, as in the daemon.
//! 2. Drain: the sender starts on the whole backlog; time until the server
//!    has accepted every message (each removal flushed before the next
//!    message is sent).
//! 3. Latency: single messages queued into an empty outbox, time until the
//!    server accepted each.
//!
//! Run: `cargo bench --bench outbox` (or `-- MESSAGES`, default 10000).
//! Needs aiosmtpd (`python3 -m pip install aiosmtpd`; scripts/test.sh
//! installs it).

#[path = "../tests/common/smtp.rs"]
#[allow(dead_code)]
mod smtp;

use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use vigie::alert::{AlertState, Email};
use vigie::clock::SystemClock;
use vigie::config::{SmtpConfig, SmtpTls};
use vigie::mail::{Backoff, Delivery, Outbox, Sender, SmtpTransport};
use vigie::store::SledStore;

const LATENCY_SAMPLES: usize = 50;

fn main() {
    let messages = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench(messages));
}

async fn bench(messages: usize) {
    let server = smtp::SmtpServer::start(smtp::SmtpOpts::plain());
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(&dir.path().join("history"), Duration::from_millis(500))
        .expect("open store");
    let alerts = store.alerts().expect("open the outbox");
    let outbox = Arc::new(Outbox::new(alerts.outbox()));

    // 1. Enqueue.
    let alone = messages / 2;
    let started = Instant::now();
    for n in 0..alone {
        outbox.enqueue(&message(n), now()).await.expect("enqueue");
    }
    let alone_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    for n in alone..messages {
        let msg = message(n);
        let state = AlertState::new(&format!("check-{n}"));
        alerts.commit(&[state], &msg, now()).expect("commit");
        outbox.flush_and_wake().await.expect("flush");
    }
    let tx_secs = started.elapsed().as_secs_f64();
    assert_eq!(outbox.stats().snapshot().backlog, messages as u64);

    // 2. Drain.
    let smtp = SmtpConfig {
        host: "127.0.0.1".into(),
        port: server.port,
        tls: SmtpTls::None,
        username: None,
        password_file: None,
        ca_file: None,
        watch: false,
    };
    let delivery = Delivery::smtp(
        SmtpTransport::new(&smtp, None).expect("transport"),
        "vigie@example.test".parse().expect("from"),
        vec![],
    );
    let (sender, _handle) = Sender::new(
        outbox.clone(),
        delivery,
        Arc::new(SystemClock),
        Backoff::DEFAULT,
    );
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn(sender.run(shutdown.clone()));
    let stats = outbox.stats();
    while stats.snapshot().delivered_total < messages as u64 {
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "drain stalled at {:?}",
            stats.snapshot()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let drain_secs = started.elapsed().as_secs_f64();
    assert_eq!(server.count(), messages, "every message accepted once");

    // 3. Latency of one message into an idle outbox.
    let mut latencies = Vec::with_capacity(LATENCY_SAMPLES);
    for n in 0..LATENCY_SAMPLES {
        let before = stats.snapshot().delivered_total;
        let started = Instant::now();
        outbox
            .enqueue(&message(messages + n), now())
            .await
            .expect("enqueue");
        while stats.snapshot().delivered_total == before {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    shutdown.cancel();
    let _ = task.await;

    let rate = |n: usize, secs: f64| n as f64 / secs;
    println!(
        "outbox ({messages} messages, sled on {}):",
        dir.path().display()
    );
    println!(
        "  enqueue alone (insert + flush):              {:>8.0} msg/s ({alone} in {alone_secs:.2} s)",
        rate(alone, alone_secs)
    );
    println!(
        "  enqueue in a transaction with alert state:   {:>8.0} msg/s ({} in {tx_secs:.2} s)",
        rate(messages - alone, tx_secs),
        messages - alone
    );
    println!(
        "  drain to aiosmtpd on loopback, one session:  {:>8.0} msg/s ({messages} in {drain_secs:.2} s)",
        rate(messages, drain_secs)
    );
    println!(
        "  enqueue -> accepted, idle outbox:            median {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        ms(latencies[LATENCY_SAMPLES / 2]),
        ms(latencies[LATENCY_SAMPLES * 95 / 100]),
        ms(latencies[LATENCY_SAMPLES - 1])
    );
}

fn message(n: usize) -> Email {
    Email {
        subject: format!("[vigie] DOWN check-{n}: certificate expired 2 days ago"),
        text: format!(
            "check-{n} is down.\n\n{}",
            "tls.expiry: expected >= 7 days, observed -2 days\n".repeat(20)
        ),
        html: format!(
            "<p>check-{n} is down.</p>{}",
            "<p>tls.expiry: expected &gt;= 7 days, observed -2 days</p>".repeat(20)
        ),
        message_id: format!("<bench.{n}@vigie.test>"),
        in_reply_to: None,
        references: vec![],
        to: vec!["oncall@example.test".into()],
    }
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
