//! The task that drains the push outbox: one loop per channel, all in one
//! supervised task, so that a slow or dead endpoint delays only its own
//! channel (never mail, never another channel).
//!
//! Each pass of a channel takes its due pushes in the order they were
//! queued, within its rate limit and while its breaker is closed:
//!
//! - accepted (2xx): removed, and the removal flushed before the next one;
//! - worth retrying (network, 5xx, 408, 425, 429): tried again after a
//!   capped exponential backoff with jitter (the channel's
//!   [`Backoff`](crate::config::channels::Backoff)),
//!   and never before the endpoint's `Retry-After`, which also pauses the
//!   whole channel. Five failures in a row open the breaker; still failing
//!   after its `give_up_after`, the push is given up;
//! - refused for good (another 4xx): given up at once.
//!
//! A push given up becomes a dead push, and one mail to `[alerting] to`
//! says which channel is broken and why; the channel is listed in
//! `/healthz`'s `degraded` until one of its pushes is accepted again.
//!
//! The rate limit (`limit.rs`) counts requests, not pushes. When an ntfy
//! topic's backlog would outrun it, the last request the limit allows is
//! one digest naming every check of every push pending for the topic, the
//! pushes of the other channels naming that topic included; once it is
//! accepted, they are all delivered.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::answer::Answer;
use super::breaker::Breaker;
use super::channel::LiveChannel;
use super::document::PushEvent;
use super::limit::{self, Limits, RateLimit, SharedLimit};
use super::request::Request;
use super::stats::PushStats;
use crate::alert::Email;
use crate::clock::{saturating_add, Clock};
use crate::config::channels::{Channel, ChannelKind};
use crate::config::Config;
use crate::mail::Outbox;
use crate::store::{PushRecord, PushStore};

/// How long an idle channel sleeps before looking again on its own (it is
/// woken at once by new pushes).
const IDLE: Duration = Duration::from_secs(60);

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
    limits: Limits,
}

impl PushSender {
    pub fn new(
        store: PushStore,
        outbox: Arc<Outbox>,
        config: watch::Receiver<Arc<Config>>,
        clock: Arc<dyn Clock>,
        host: String,
    ) -> PushSender {
        PushSender {
            store,
            stats: Arc::default(),
            clock,
            outbox,
            config,
            wake: PushWaker::default(),
            host,
            limits: Limits::default(),
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
            self.limits.configure(&config.notify.channels).await;
            let loops = futures_util::future::join_all(channels.into_iter().map(|channel| {
                let siblings = siblings(&config, &channel.config);
                ChannelLoop::new(self.clone(), channel, siblings).run(shutdown.clone())
            }));
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
    /// Its rate limit, shared with the channels naming the same ntfy topic.
    limit: SharedLimit,
    /// Those channels: their pushes are folded into this one's digest.
    siblings: Vec<String>,
    /// Nothing is sent before this (a `Retry-After`).
    paused_until: Option<OffsetDateTime>,
    /// The mail about this channel being broken went out; reset once a
    /// push is accepted.
    told: bool,
}

impl ChannelLoop {
    fn new(shared: PushSender, channel: LiveChannel, siblings: Vec<String>) -> ChannelLoop {
        let limit = shared.limits.of(&channel.config);
        ChannelLoop {
            shared,
            channel,
            breaker: Breaker::default(),
            limit,
            siblings,
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
        if let Some(until) = blocked {
            self.gauges();
            return until_from(now, until);
        }
        // One channel of a topic sends at a time: the limit is counted,
        // and a backlog folded, with nobody else sending to the topic.
        // What is pending is read under the lock, so that a push a
        // sibling's digest delivered is not sent again.
        let limit = self.limit.clone();
        let mut rate = limit.lock().await;
        let Some(records) = self.gauges() else {
            return IDLE;
        };
        let now = self.shared.clock.now();
        let (due, mut later): (Vec<PushRecord>, Vec<PushRecord>) =
            records.into_iter().partition(|r| r.next_attempt <= now);
        let mut next = later.iter().map(|r| r.next_attempt).min();
        let due = self.events_of(due);
        let folds = matches!(self.channel.config.kind, ChannelKind::Ntfy { .. });
        // Requests, not pushes: an ntfy push is one message per check.
        let needs: Vec<u32> = due
            .iter()
            .map(|(_, e)| self.channel.requests(e, now).len() as u32)
            .collect();
        // What the channels sharing the topic have pending counts against
        // the same limit, and goes into the same digest.
        let mut siblings = match folds {
            true => self.sibling_pushes(),
            false => Vec::new(),
        };
        let sibling_needs: u32 = siblings
            .iter()
            .map(|(_, e)| self.channel.requests(e, now).len() as u32)
            .sum();
        for (i, (record, event)) in due.iter().enumerate() {
            let now = self.shared.clock.now();
            let needed = needs[i];
            let available = rate.available(now);
            let backlog: u32 = needs[i..].iter().sum::<u32>() + sibling_needs;
            // Send one by one while the rest fits in the limit, or while
            // this one leaves a request for the digest of the rest.
            let step = if folds && backlog > available && needed >= available {
                if let Err(wait) = rate.take(now, 1) {
                    next = earliest(next, saturating_add(now, wait));
                    break;
                }
                let mut rest = due[i..].to_vec();
                rest.extend(self.events_of(std::mem::take(&mut later)));
                rest.append(&mut siblings);
                self.send_digest(rest, &rate).await
            } else {
                if let Err(wait) = rate.take(now, needed) {
                    next = earliest(next, saturating_add(now, wait));
                    break;
                }
                self.send_one(record, event).await
            };
            match step {
                Step::Next => {}
                Step::Folded => break,
                Step::Stop(until) => {
                    next = earliest(next, until);
                    break;
                }
            }
        }
        drop(rate);
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
    async fn send_one(&mut self, record: &PushRecord, event: &PushEvent) -> Step {
        let requests = self.channel.requests(event, self.shared.clock.now());
        self.deliver(std::slice::from_ref(record), &requests, event)
            .await
    }

    /// The pushes pending for the channels naming this one's topic,
    /// whether due or waiting for a retry.
    fn sibling_pushes(&mut self) -> Vec<(PushRecord, PushEvent)> {
        let mut records = Vec::new();
        for sibling in &self.siblings {
            match self.shared.store.pending(sibling) {
                Ok(pending) => records.extend(pending),
                Err(err) => {
                    tracing::error!(channel = %sibling, error = %err, "cannot read the push outbox")
                }
            }
        }
        self.events_of(records)
    }

    /// Each readable record with its document.
    fn events_of(&mut self, records: Vec<PushRecord>) -> Vec<(PushRecord, PushEvent)> {
        records
            .into_iter()
            .filter_map(|r| self.event_of(&r).map(|e| (r, e)))
            .collect()
    }

    /// Sends one digest of `pushes` (this channel's pending ones, those
    /// waiting for a retry included, and its siblings'), and delivers
    /// them all once it is accepted.
    async fn send_digest(
        &mut self,
        pushes: Vec<(PushRecord, PushEvent)>,
        rate: &RateLimit,
    ) -> Step {
        let (records, events): (Vec<PushRecord>, Vec<PushEvent>) = pushes.into_iter().unzip();
        let Some(request) = self.channel.ntfy_digest(&events, rate.per_minute()) else {
            return Step::Next;
        };
        let name = self.channel.name().to_string();
        tracing::info!(channel = %name, pushes = records.len(), per_minute = rate.per_minute(), "the rate limit holds: the pending pushes go out as one digest");
        match self.deliver(&records, &[request], &events[0]).await {
            Step::Next => {
                // The siblings' loops set their own gauges again.
                if !self.siblings.is_empty() {
                    self.shared.wake.wake();
                }
                Step::Folded
            }
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
                    self.shared.store.mark_told(record, now);
                }
                if let Err(err) = self.shared.store.flush().await {
                    tracing::error!(channel = %name, error = %err, "cannot flush the push outbox; a delivered push may be sent again");
                }
                tracing::info!(channel = %name, kind, id = %event.id, pushes = records.len(), "push accepted");
                self.breaker.succeeded();
                self.told = false;
                for record in records {
                    self.shared.stats.sent(&record.channel, kind, now);
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
                let backoff = self.channel.config.backoff;
                let opened = self.breaker.failed(now, &backoff);
                if opened {
                    tracing::warn!(channel = %name, kind, error = %why, "push channel keeps failing: paused");
                    self.shared.stats.set_broken(&name, kind, Some(why.clone()));
                }
                let mut until = now;
                for record in records {
                    if now - record.enqueued_at > backoff.give_up_after {
                        let reason = format!(
                            "still failing after {}: {why}",
                            crate::when::std_span(backoff.give_up_after)
                        );
                        self.give_up(record, &reason, now).await;
                        continue;
                    }
                    let wait = backoff
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

/// The channels other than `channel` naming the same ntfy topic.
fn siblings(config: &Config, channel: &Channel) -> Vec<String> {
    let key = limit::key(channel);
    config
        .notify
        .channels
        .iter()
        .filter(|c| c.name != channel.name && limit::key(c) == key)
        .map(|c| c.name.clone())
        .collect()
}

fn earliest(next: Option<OffsetDateTime>, at: OffsetDateTime) -> Option<OffsetDateTime> {
    Some(next.map_or(at, |n| n.min(at)))
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
