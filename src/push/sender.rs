//! The task that drains the push outbox: one loop per channel, all in one
//! supervised task, so that a slow or dead endpoint delays only its own
//! channel (never mail, never another channel).
//!
//! Each pass of a channel takes its due pushes in the order they were
//! queued, within its rate limit and while its breaker is closed:
//!
//! - accepted (2xx): removed, and the removal flushed before the next one;
//! - worth retrying (network, 5xx, 408, 425, 429): tried again after a
//!   capped exponential backoff with jitter, and never before the
//!   endpoint's `Retry-After`, which also pauses the whole channel. Five
//!   failures in a row open the breaker; still failing after
//!   [`Retry::give_up_after`], the push is given up;
//! - refused for good (another 4xx): given up at once.
//!
//! A push given up becomes a dead push, and one mail to `[alerting] to`
//! says which channel is broken and why; the channel is listed in
//! `/healthz`'s `degraded` until one of its pushes is accepted again.
//!
//! ntfy's rate limit (6 a minute by default) folds a backlog that would
//! outrun it into one message, the last one the limit allows.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::answer::Answer;
use super::breaker::{Breaker, RateLimit};
use super::channel::LiveChannel;
use super::document::PushEvent;
use super::request::Request;
use super::stats::PushStats;
use crate::alert::Email;
use crate::clock::{saturating_add, Clock};
use crate::config::Config;
use crate::mail::Outbox;
use crate::store::{PushRecord, PushStore};

/// How long an idle channel sleeps before looking again on its own (it is
/// woken at once by new pushes).
const IDLE: Duration = Duration::from_secs(60);

/// Retry timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub initial: Duration,
    pub max: Duration,
    /// A push still failing this long after it was queued is given up.
    pub give_up_after: Duration,
}

impl Retry {
    /// 5 s, 10 s, 20 s ... 10 min, for up to a day: a page a day late is
    /// history, not a page, and the mail told the on-call person anyway.
    pub const DEFAULT: Retry = Retry {
        initial: Duration::from_secs(5),
        max: Duration::from_secs(600),
        give_up_after: Duration::from_secs(86_400),
    };

    /// The wait after the `attempts`-th failure (1-based), jittered by up
    /// to a quarter either way with `jitter` in 0..1, so that channels
    /// that failed together do not retry together.
    pub fn after(&self, attempts: u32, jitter: f64) -> Duration {
        let doublings = attempts.saturating_sub(1).min(20);
        let base = self.initial.saturating_mul(1 << doublings).min(self.max);
        base.mul_f64(0.75 + jitter.clamp(0.0, 1.0) / 2.0)
    }
}

/// Wakes every channel loop: pushes were queued. Each loop notices a
/// wake that came while it was busy sending at its next wait.
#[derive(Debug, Clone)]
pub struct PushWaker(Arc<watch::Sender<u64>>);

impl Default for PushWaker {
    fn default() -> Self {
        PushWaker(Arc::new(watch::channel(0).0))
    }
}

impl PushWaker {
    pub fn wake(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// What every channel loop shares.
#[derive(Clone)]
pub struct PushSender {
    store: PushStore,
    stats: Arc<PushStats>,
    clock: Arc<dyn Clock>,
    /// Where the mail about a broken channel goes.
    outbox: Arc<Outbox>,
    config: watch::Receiver<Arc<Config>>,
    wake: PushWaker,
    host: String,
    retry: Retry,
}

impl PushSender {
    pub fn new(
        store: PushStore,
        outbox: Arc<Outbox>,
        config: watch::Receiver<Arc<Config>>,
        clock: Arc<dyn Clock>,
        host: String,
        retry: Retry,
    ) -> PushSender {
        PushSender {
            store,
            stats: Arc::default(),
            clock,
            outbox,
            config,
            wake: PushWaker::default(),
            host,
            retry,
        }
    }

    pub fn stats(&self) -> Arc<PushStats> {
        self.stats.clone()
    }

    /// What wakes every channel at once (new pushes were queued).
    pub fn waker(&self) -> PushWaker {
        self.wake.clone()
    }

    /// Runs every configured channel until `shutdown`; a reload that
    /// changes `[[notify]]` starts them again with the new settings.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let config = self.config.borrow_and_update().clone();
            let channels: Vec<LiveChannel> = config
                .notify
                .channels
                .iter()
                .filter_map(|c| match LiveChannel::new(c, config.extra_ca_file.as_deref()) {
                    Ok(live) => Some(live),
                    Err(why) => {
                        tracing::error!(channel = %c.name, error = %why, "push channel not started");
                        self.stats.set_broken(&c.name, c.kind.as_str(), Some(why));
                        None
                    }
                })
                .collect();
            self.stats.configured(
                config
                    .notify
                    .channels
                    .iter()
                    .map(|c| (c.name.as_str(), c.kind.as_str())),
            );
            let loops = futures_util::future::join_all(
                channels
                    .into_iter()
                    .map(|channel| ChannelLoop::new(self.clone(), channel).run(shutdown.clone())),
            );
            // No channel (or every loop ended, which only shutdown does):
            // wait for a reload rather than end the task.
            let loops = async {
                loops.await;
                std::future::pending::<()>().await
            };
            tokio::select! {
                _ = loops => return,
                _ = shutdown.cancelled() => return,
                changed = self.config.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// One channel's loop and what it remembers between passes.
struct ChannelLoop {
    shared: PushSender,
    channel: LiveChannel,
    breaker: Breaker,
    rate: RateLimit,
    /// Nothing is sent before this (a `Retry-After`).
    paused_until: Option<OffsetDateTime>,
    /// The mail about this channel being broken went out; reset once a
    /// push is accepted.
    told: bool,
}

impl ChannelLoop {
    fn new(shared: PushSender, channel: LiveChannel) -> ChannelLoop {
        let rate = RateLimit::new(channel.config.rate_limit);
        ChannelLoop {
            shared,
            channel,
            breaker: Breaker::default(),
            rate,
            paused_until: None,
            told: false,
        }
    }

    fn kind(&self) -> &'static str {
        self.channel.config.kind.as_str()
    }

    async fn run(mut self, shutdown: CancellationToken) {
        let mut woken = self.shared.wake.subscribe();
        loop {
            woken.mark_unchanged();
            let wait = self.pass().await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = woken.changed() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Sends what is due; returns how long until something may be due.
    async fn pass(&mut self) -> Duration {
        let now = self.shared.clock.now();
        let blocked = [self.paused_until, self.breaker.closed_at(now)]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .max();
        // The gauges stay current while nothing may be sent: pushes
        // queued while the breaker is open, or while a spent quota pauses
        // the channel, are the backlog the operator should see grow.
        let records = self.gauges();
        if let Some(until) = blocked {
            return until_from(now, until);
        }
        let Some(records) = records else {
            return IDLE;
        };
        let (due, later): (Vec<PushRecord>, Vec<PushRecord>) =
            records.into_iter().partition(|r| r.next_attempt <= now);
        let mut next = later.iter().map(|r| r.next_attempt).min();
        let folds = self.kind() == "ntfy" && due.len() as u32 > self.rate.available(now);
        for (i, record) in due.iter().enumerate() {
            if let Err(wait) = self.rate.take(self.shared.clock.now()) {
                return wait.min(IDLE);
            }
            let rest = &due[i..];
            let outcome = match folds
                && self.rate.available(self.shared.clock.now()) == 0
                && rest.len() > 1
            {
                true => self.send_folded(rest).await,
                false => self.send_one(record).await,
            };
            match outcome {
                Step::Next => {}
                Step::Folded => break,
                Step::Stop(until) => {
                    next = Some(next.map_or(until, |n| n.min(until)));
                    break;
                }
            }
        }
        let now = self.shared.clock.now();
        self.gauges();
        next.map_or(IDLE, |at| until_from(now, at)).min(IDLE)
    }

    /// Reads this channel's pending pushes and sets its backlog and dead
    /// push gauges; `None` when the outbox cannot be read (logged).
    fn gauges(&self) -> Option<Vec<PushRecord>> {
        let name = self.channel.name();
        let store = &self.shared.store;
        match store.dead_count(name) {
            Ok(dead) => self.shared.stats.set_dead(name, self.kind(), dead),
            Err(err) => {
                tracing::error!(channel = %name, error = %err, "cannot count the dead pushes")
            }
        }
        match store.pending(name) {
            Ok(records) => {
                let backlog = records.len() as u64;
                self.shared.stats.set_backlog(name, self.kind(), backlog);
                Some(records)
            }
            Err(err) => {
                tracing::error!(channel = %name, error = %err, "cannot read the push outbox");
                None
            }
        }
    }

    /// Sends one push: every request it takes, in order.
    async fn send_one(&mut self, record: &PushRecord) -> Step {
        let Some(event) = self.event_of(record) else {
            return Step::Next;
        };
        let requests = self.channel.requests(&event, self.shared.clock.now());
        self.deliver(std::slice::from_ref(record), &requests, &event)
            .await
    }

    /// Sends the first of `records` with the others listed in it (ntfy, a
    /// backlog beyond the rate limit), and removes them all once it is
    /// accepted.
    async fn send_folded(&mut self, records: &[PushRecord]) -> Step {
        let events: Vec<PushEvent> = records.iter().filter_map(|r| self.event_of(r)).collect();
        let Some(first) = events.first() else {
            return Step::Next;
        };
        let listed: Vec<String> = events[1..].iter().map(|e| e.summary.clone()).collect();
        let rest = format!(
            "and {} more while the rate limit of {} a minute holds:\n{}",
            listed.len(),
            self.channel.config.rate_limit,
            listed.join("\n")
        );
        let Some(request) = self.channel.ntfy_digest(first, &rest) else {
            return Step::Next;
        };
        match self.deliver(records, &[request], first).await {
            Step::Next => Step::Folded,
            other => other,
        }
    }

    /// The document of `record`; one that cannot be read is given up (it
    /// would fail the same way forever).
    fn event_of(&mut self, record: &PushRecord) -> Option<PushEvent> {
        match serde_json::from_str(&record.document) {
            Ok(event) => Some(event),
            Err(err) => {
                let why = format!("the stored push cannot be read: {err}");
                if let Err(e) = self
                    .shared
                    .store
                    .bury(record, &why, self.shared.clock.now())
                {
                    tracing::error!(channel = %record.channel, error = %e, "cannot move a push to the dead pushes");
                }
                None
            }
        }
    }

    /// Sends `requests` for `records` and records the answer on each.
    async fn deliver(
        &mut self,
        records: &[PushRecord],
        requests: &[Request],
        event: &PushEvent,
    ) -> Step {
        let mut answer = Answer::Accepted;
        for request in requests {
            answer = self.channel.send(request, self.shared.clock.now()).await;
            if answer != Answer::Accepted {
                break;
            }
        }
        let now = self.shared.clock.now();
        let name = self.channel.name().to_string();
        let kind = self.kind();
        match answer {
            Answer::Accepted => {
                for record in records {
                    if let Err(err) = self.shared.store.remove(record) {
                        tracing::error!(channel = %name, error = %err, "cannot remove a delivered push; it may be sent again");
                    }
                }
                if let Err(err) = self.shared.store.flush().await {
                    tracing::error!(channel = %name, error = %err, "cannot flush the push outbox; a delivered push may be sent again");
                }
                tracing::info!(channel = %name, kind, id = %event.id, pushes = records.len(), "push accepted");
                self.breaker.succeeded();
                self.told = false;
                for _ in records {
                    self.shared.stats.sent(&name, kind, now);
                }
                Step::Next
            }
            Answer::Retry { why, after } => {
                self.shared.stats.retried(&name, kind);
                if let Some(after) = after {
                    self.paused_until = Some(saturating_add(now, after));
                }
                // A spent quota stops the channel for the day: said by
                // mail, as a refusal is.
                if why.contains(super::deliver::QUOTA_SPENT) {
                    self.shared.stats.set_broken(&name, kind, Some(why.clone()));
                    self.tell(&why, now).await;
                }
                let opened = self.breaker.failed(now);
                if opened {
                    tracing::warn!(channel = %name, kind, error = %why, "push channel keeps failing: paused");
                    self.shared.stats.set_broken(&name, kind, Some(why.clone()));
                }
                let mut until = now;
                for record in records {
                    if now - record.enqueued_at > self.shared.retry.give_up_after {
                        let reason = format!(
                            "still failing after {}: {why}",
                            crate::when::std_span(self.shared.retry.give_up_after)
                        );
                        self.give_up(record, &reason, now).await;
                        continue;
                    }
                    let wait = self
                        .shared
                        .retry
                        .after(record.attempts + 1, jitter())
                        .max(after.unwrap_or_default());
                    let next = saturating_add(now, wait);
                    until = until.max(next);
                    tracing::warn!(channel = %name, kind, id = %record.event_id, error = %why, retry_in = %crate::when::std_span(wait), "push not delivered; retried later");
                    if let Err(err) = self.shared.store.defer(record, &why, next) {
                        tracing::error!(channel = %name, error = %err, "cannot record a failed push; it is retried sooner");
                    }
                }
                Step::Stop(until)
            }
            Answer::Permanent { why } => {
                for record in records {
                    self.give_up(record, &why, now).await;
                }
                Step::Next
            }
        }
    }

    /// Moves `record` to the dead pushes and, the first time since the
    /// channel last worked, mails `[alerting] to` about it.
    async fn give_up(&mut self, record: &PushRecord, why: &str, now: OffsetDateTime) {
        let name = self.channel.name().to_string();
        tracing::error!(channel = %name, id = %record.event_id, error = %why, "push given up: the channel is broken");
        if let Err(err) = self.shared.store.bury(record, why, now) {
            tracing::error!(channel = %name, error = %err, "cannot move a push to the dead pushes");
        }
        self.shared.stats.given_up(&name, self.kind(), why);
        self.tell(why, now).await;
    }

    /// Mails `[alerting] to` that this channel is broken, once until one
    /// of its pushes is accepted again.
    async fn tell(&mut self, why: &str, now: OffsetDateTime) {
        if self.told {
            return;
        }
        self.told = true;
        let name = self.channel.name().to_string();
        let to: Vec<String> = self
            .shared
            .config
            .borrow()
            .alerting
            .to
            .iter()
            .map(ToString::to_string)
            .collect();
        let mail = broken_channel_mail(&name, self.kind(), why, &self.shared.host, &to, now);
        if let Err(err) = self.shared.outbox.enqueue(&mail, now).await {
            tracing::error!(channel = %name, error = %err, "cannot queue the mail about a broken push channel");
        }
    }
}

/// What a send did to the pass.
enum Step {
    /// Go on with the next push.
    Next,
    /// The rest of the due pushes went out folded into one.
    Folded,
    /// Stop this pass; nothing of this channel is due before this.
    Stop(OffsetDateTime),
}

fn until_from(now: OffsetDateTime, at: OffsetDateTime) -> Duration {
    Duration::try_from(at - now).unwrap_or_default()
}

/// A number in 0..1 from the system's randomness (jitter needs no more).
fn jitter() -> f64 {
    use aws_lc_rs::rand::SecureRandom;
    let mut bytes = [0u8; 2];
    match aws_lc_rs::rand::SystemRandom::new().fill(&mut bytes) {
        Ok(()) => f64::from(u16::from_be_bytes(bytes)) / f64::from(u16::MAX),
        Err(_) => 0.5,
    }
}

/// The mail that says a channel is broken: which, why, and what happens
/// to its pushes.
pub fn broken_channel_mail(
    channel: &str,
    kind: &str,
    why: &str,
    host: &str,
    to: &[String],
    now: OffsetDateTime,
) -> Email {
    let subject = format!("[vigie] push channel {channel} is broken: {why}");
    let text = format!(
        "vigie on {host} cannot deliver to the {kind} channel {channel}:\n\n  {why}\n\n\
         Pages still go out by mail. A push the channel refused for good is kept as a dead push; \
         later ones are tried as they come, and this mail is not sent again until one of them is accepted.\n\
         Fix the channel's settings in config.toml, then `systemctl reload vigie` (or send SIGHUP), \
         and `vigie test-notify {channel}` to check it.\n"
    );
    Email {
        subject: subject
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect(),
        text,
        html: String::new(),
        message_id: format!(
            "<vigie.push-broken.{}.{}@{}>",
            channel,
            now.unix_timestamp(),
            crate::alert::render::domain(host)
        ),
        in_reply_to: None,
        references: Vec::new(),
        to: to.to_vec(),
    }
}
