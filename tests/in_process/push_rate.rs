//! The push sender's ntfy rate limit against the loopback ntfy server:
//! the limit counts messages published (a grouped notification of three
//! checks is three), belongs to the topic (two channels naming it share
//! it), and a backlog past it goes out as one digest naming every check
//! of every pending push, after which nothing is left in the outbox.
//!
//! The sender runs alone on a store in memory, with the pushes queued
//! before it starts: the burst is all there at its first pass.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::common::daemon::poll;
use crate::common::env::Env;
use crate::common::push::ntfy::{NtfyConfig, NtfyMessage, NtfyServer};
use vigie::clock::{Clock, SystemClock};
use vigie::mail::Outbox;
use vigie::push::{PushCheck, PushEvent, PushKind, PushSender};
use vigie::store::{AlertStore, NewPush, PushStore};

const TOPIC: &str = "oncall";
/// Far longer than a burst takes on loopback; far shorter than the
/// minute after which the limit would let more through.
const BURST: Duration = Duration::from_secs(20);

/// A DOWN notification of `checks`, as the alerter writes one.
fn down(id: &str, checks: &[&str]) -> PushEvent {
    let at = OffsetDateTime::now_utc();
    PushEvent {
        version: 1,
        id: id.to_string(),
        event: PushKind::Down,
        incident: format!("{}@{id}", checks[0]),
        at,
        node: "vigie-test".to_string(),
        summary: format!("DOWN {}", checks.join(", ")),
        status_page: None,
        test: false,
        warn: false,
        checks: checks
            .iter()
            .map(|name| PushCheck {
                name: name.to_string(),
                incident: format!("{name}@{id}"),
                status: "down".to_string(),
                labels: Default::default(),
                reason: Some(format!("HTTP 503 from {name}")),
                since: at,
                resolved_at: None,
                target: format!("https://{name}.example.net/"),
                consecutive_failures: 2,
                page: None,
            })
            .collect(),
    }
}

fn queue(pushes: &PushStore, channel: &str, event: &PushEvent) {
    let push = NewPush {
        channel: channel.to_string(),
        event_id: event.id.clone(),
        document: serde_json::to_string(event).unwrap(),
    };
    pushes.enqueue(&push, OffsetDateTime::now_utc()).unwrap();
}

/// `channels` (name, rate_limit), all on `ntfy`'s [`TOPIC`].
fn env(ntfy: &NtfyServer, channels: &[(&str, u32)]) -> Env {
    let env = Env::new();
    for (name, rate) in channels {
        env.append_config(&format!(
            "[[notify]]\nname = \"{name}\"\nkind = \"ntfy\"\nurl = \"{}\"\nallow_private = true\nrate_limit = {rate}\n",
            ntfy.topic_url(TOPIC)
        ));
    }
    env
}

/// Runs a sender over `store` until dropped.
struct Running {
    stop: CancellationToken,
    _config: tokio::sync::watch::Sender<Arc<vigie::config::Config>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn start(env: &Env, store: &AlertStore) -> Running {
    let (config, watched) = tokio::sync::watch::channel(Arc::new(env.load()));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let sender = PushSender::new(
        store.pushes(),
        Arc::new(Outbox::new(store.outbox())),
        watched,
        clock,
        "vigie-test".to_string(),
    );
    let stop = CancellationToken::new();
    tokio::spawn(sender.run(stop.clone()));
    Running {
        stop,
        _config: config,
    }
}

/// Waits until no push is left for `channels`.
async fn drained(pushes: &PushStore, channels: &[&str]) {
    poll(BURST, "every push delivered", async || {
        let left: usize = channels
            .iter()
            .map(|c| pushes.pending(c).unwrap().len())
            .sum();
        match left {
            0 => Ok(()),
            n => Err(format!("{n} pushes still pending")),
        }
    })
    .await;
}

/// Every check named by a title or a message's line start.
fn named(messages: &[NtfyMessage], check: &str) -> bool {
    let down = format!("DOWN {check}");
    messages.iter().any(|m| {
        m.title == down
            || m.message
                .lines()
                .any(|l| l.starts_with(&format!("{down}:")))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_past_the_ntfy_rate_limit_is_the_limit_in_messages_the_last_one_a_digest_of_the_rest(
) {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let env = env(&ntfy, &[("phone", 4)]);
    let store = AlertStore::in_memory();
    let pushes = store.pushes();
    // Seven messages' worth: one grouped notification of three checks,
    // then four of one.
    queue(&pushes, "phone", &down("e1", &["api", "db", "queue"]));
    for (id, check) in [("e2", "web"), ("e3", "cdn"), ("e4", "dns"), ("e5", "smtp")] {
        queue(&pushes, "phone", &down(id, &[check]));
    }
    let _running = start(&env, &store);

    drained(&pushes, &["phone"]).await;
    // Let anything sent twice arrive before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let messages = ntfy.messages(TOPIC);
    let titles: Vec<&str> = messages.iter().map(|m| m.title.as_str()).collect();
    assert_eq!(
        titles,
        ["DOWN api", "DOWN db", "DOWN queue", "DOWN web and 3 more"],
        "the grouped notification's three messages count against the limit of 4; the last one the limit allows is the digest"
    );
    let digest = &messages[3].message;
    for check in ["web", "cdn", "dns", "smtp"] {
        assert!(
            digest.contains(&format!("DOWN {check}: HTTP 503 from {check}")),
            "{check} in {digest}"
        );
    }
    assert!(
        digest.contains("the rate limit of 4 a minute holds"),
        "{digest}"
    );
    for check in ["api", "db", "queue", "web", "cdn", "dns", "smtp"] {
        assert!(named(&messages, check), "{check} is told: {titles:?}");
    }
    assert!(pushes.dead("phone").unwrap().is_empty(), "nothing given up");
    assert_eq!(ntfy.received().len(), 4, "nothing refused and resent");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_channels_on_one_ntfy_topic_share_its_limit_and_its_digest() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    // The smaller limit holds for the topic.
    let env = env(&ntfy, &[("phone", 3), ("phone-staging", 6)]);
    let store = AlertStore::in_memory();
    let pushes = store.pushes();
    for (id, check) in [("p1", "api"), ("p2", "db"), ("p3", "web")] {
        queue(&pushes, "phone", &down(id, &[check]));
    }
    for (id, check) in [("s1", "beta-api"), ("s2", "beta-db"), ("s3", "beta-web")] {
        queue(&pushes, "phone-staging", &down(id, &[check]));
    }
    let _running = start(&env, &store);

    drained(&pushes, &["phone", "phone-staging"]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let messages = ntfy.messages(TOPIC);
    let titles: Vec<&str> = messages.iter().map(|m| m.title.as_str()).collect();
    assert_eq!(
        messages.len(),
        3,
        "six pushes, three messages: the topic's limit, shared: {titles:?}"
    );
    assert!(
        titles[2].ends_with("and 3 more"),
        "the channel that sent first folded its last push and the other's three: {titles:?}"
    );
    for check in ["api", "db", "web", "beta-api", "beta-db", "beta-web"] {
        assert!(named(&messages, check), "{check} is told: {messages:?}");
    }
}
