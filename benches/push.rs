//! Push channels: how long a push takes, and how fast a backlog drains.
//!
//! 1. Latency, through the real daemon (`vigie run`, release build): a
//!    loopback HTTPS target switched between 200 and 503, one check every
//!    second, `failure_threshold = 2`, `recovery_threshold = 2`,
//!    `group_window = 1s`, a webhook channel and an ntfy channel on the
//!    loopback peers of `tests/common/push/`. From the end of the probe
//!    that crosses the threshold (read back from the history API) to the
//!    webhook receiver's acceptance of the DOWN, and of the RESOLVED.
//!    Target: under 1 s plus `group_window`.
//! 2. Drain, in process: 1,000 pushes queued for one webhook channel with
//!    `rate_limit = 600` (a burst of 600, then 10 a second), drained by the
//!    push sender into the receiver. Target: beyond the burst, no faster
//!    than the limit (10/s over the whole drain), and no slower than 10%
//!    under it.
//!
//! Run: `cargo bench --bench push [-- INCIDENTS]` (default 5). Needs
//! aiosmtpd (`python3 -m pip install aiosmtpd`).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/crossing.rs"]
mod crossing;

use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use common::daemon::Daemon;
use common::env::Env;
use common::push::ntfy::{NtfyConfig, NtfyServer};
use common::push::webhook::{whsec_for_test, WebhookReceiver};
use common::servers::switchable_target;
use common::smtp::{SmtpOpts, SmtpServer};
use vigie::clock::SystemClock;

const GROUP_WINDOW: Duration = Duration::from_secs(1);
const THRESHOLD: usize = 2;
const BACKLOG: usize = 1000;
const RATE: u32 = 600;

fn main() {
    let incidents: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(latency(incidents));
    runtime.block_on(drain());
}

/// The wall-clock time of a peer's `at` (tokio's clock, unpaused here).
struct Clocks {
    instant: tokio::time::Instant,
    wall: OffsetDateTime,
}

impl Clocks {
    fn now() -> Clocks {
        Clocks {
            instant: tokio::time::Instant::now(),
            wall: OffsetDateTime::now_utc(),
        }
    }

    fn wall(&self, at: tokio::time::Instant) -> OffsetDateTime {
        self.wall + (at - self.instant)
    }
}

async fn latency(incidents: usize) {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let (env, api) = crossing::site_env(&smtp, &target, THRESHOLD, GROUP_WINDOW);
    let hook_secret = env.write_secret("hook.secret", &whsec);
    env.append_config(&format!(
        "[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"{}\"\nallow_private = true\nsecret_file = {hook_secret:?}\n\
         [[notify]]\nname = \"phone\"\nkind = \"ntfy\"\nurl = \"{}\"\nallow_private = true\n",
        hook.url(),
        ntfy.topic_url("vigie")
    ));
    let clocks = Clocks::now();
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    println!(
        "push latency: crossing probe -> webhook receiver's acceptance, {incidents} incidents, \
         threshold {THRESHOLD}, group_window {}s, checks every 1 s",
        GROUP_WINDOW.as_secs()
    );
    let (down, resolved) = crossing::measure(incidents, &status, &daemon, THRESHOLD, async |n| {
        hook.wait_for_answers(n, Duration::from_secs(60)).await;
        let delivered = hook.deliveries();
        let delivery = delivered.get(n - 1).unwrap_or_else(|| {
            panic!(
                "{} deliveries, refused: {:?}",
                delivered.len(),
                hook.refused()
            )
        });
        clocks.wall(delivery.request.at)
    })
    .await;
    crossing::report(down, resolved, GROUP_WINDOW);
    let notifications = ntfy.notifications("vigie").len();
    println!("ntfy: {notifications} notifications for {incidents} incidents (one each, updated in place)");
    daemon.stop(Duration::from_secs(30)).await;
}

async fn drain() {
    let whsec = whsec_for_test();
    let hook = WebhookReceiver::start(&whsec);
    let env = Env::with_config("");
    env.write_idle_check();
    let hook_secret = env.write_secret("hook.secret", &whsec);
    env.append_config(&format!(
        "[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"{}\"\nallow_private = true\nsecret_file = {hook_secret:?}\nrate_limit = {RATE}\n",
        hook.url()
    ));
    let config = Arc::new(env.load());
    let alerts = vigie::store::AlertStore::in_memory();
    let pushes = alerts.pushes();
    let now = OffsetDateTime::now_utc();
    for i in 0..BACKLOG {
        let mut event = vigie::push::test_event("bench.example.com", now);
        event.id = format!("bench-{i}");
        pushes
            .enqueue(
                &vigie::store::NewPush {
                    channel: "hooks".to_string(),
                    event_id: event.id.clone(),
                    document: serde_json::to_string(&event).expect("json"),
                },
                now,
            )
            .expect("enqueue");
    }
    let outbox = Arc::new(vigie::mail::Outbox::new(alerts.outbox()));
    let (_config_tx, config_rx) = watch::channel(config);
    let sender = vigie::push::PushSender::new(
        pushes,
        outbox,
        config_rx,
        Arc::new(SystemClock),
        "bench.example.com".to_string(),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn(sender.run(stop.clone()));
    let started = Instant::now();
    hook.wait_for_answers(BACKLOG, Duration::from_secs(600))
        .await;
    let took = started.elapsed();
    stop.cancel();
    let _ = task.await;
    let at: Vec<tokio::time::Instant> = hook.received().iter().map(|r| r.at).collect();
    let burst = RATE as usize;
    // The bucket refills during the burst too: what a limit of `limit`
    // a second allows after `t` seconds is the burst plus `limit * t`.
    let whole = (at[BACKLOG - 1] - at[0]).as_secs_f64();
    let rate = (BACKLOG - burst) as f64 / whole;
    let limit = f64::from(RATE) / 60.0;
    println!(
        "backlog of {BACKLOG} pushes, rate_limit {RATE}/min: drained in {:.1} s; \
         the first {burst} in {:.2} s (the burst), the rest at {rate:.2}/s beyond it \
         (limit {limit:.1}/s: {})",
        took.as_secs_f64(),
        (at[burst - 1] - at[0]).as_secs_f64(),
        match rate <= limit * 1.02 && rate >= limit * 0.9 {
            true => "met",
            false => "MISSED",
        }
    );
    println!(
        "distinct ids delivered: {} of {BACKLOG}",
        hook.distinct_ids().len()
    );
}
