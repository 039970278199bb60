//! The `rate_limit` of the channels: at most that many requests in any
//! minute, counted in requests sent (a grouped notification of ten checks
//! is ten ntfy messages, not one), and shared by what it protects.
//!
//! An ntfy limit belongs to the topic (the server and the topic, i.e. the
//! channel's URL): two channels naming one topic share one limit, the
//! smaller of theirs, since it is the phone subscribed to the topic that
//! the limit keeps readable. Any other channel has a limit of its own.
//!
//! The window slides: a request is allowed when fewer than `per_minute`
//! were sent in the minute before it. A token bucket refilling at
//! `per_minute` would let a full burst through and then refill, so up to
//! twice the limit within one minute.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;

use crate::config::channels::{Channel, ChannelKind};

const MINUTE: Duration = Duration::from_secs(60);

/// The requests sent in the last minute, against `per_minute`.
#[derive(Debug, Clone)]
pub struct RateLimit {
    per_minute: u32,
    sent: VecDeque<OffsetDateTime>,
}

impl RateLimit {
    pub fn new(per_minute: u32) -> RateLimit {
        RateLimit {
            per_minute: per_minute.max(1),
            sent: VecDeque::new(),
        }
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Forgets what left the window. A send dated after `now` (the clock
    /// was set back) is forgotten too, or it would hold the limit for as
    /// long as the clock jumped.
    fn forget(&mut self, now: OffsetDateTime) {
        self.sent
            .retain(|&at| at <= now && Duration::try_from(now - at).is_ok_and(|d| d < MINUTE));
    }

    /// Requests that may be sent now.
    pub fn available(&mut self, now: OffsetDateTime) -> u32 {
        self.forget(now);
        self.per_minute.saturating_sub(self.sent.len() as u32)
    }

    /// Counts `n` requests sent now, or says how long until they may be.
    /// More than the limit itself is counted as the whole limit: such a
    /// notification (a webhook, a PagerDuty event per check) goes out
    /// when the window is empty rather than never.
    pub fn take(&mut self, now: OffsetDateTime, n: u32) -> Result<(), Duration> {
        let n = n.clamp(1, self.per_minute);
        self.forget(now);
        let used = self.sent.len() as u32;
        if used + n <= self.per_minute {
            self.sent.extend(std::iter::repeat_n(now, n as usize));
            return Ok(());
        }
        // The oldest sends that must leave the window first.
        let leaving = (used + n - self.per_minute) as usize;
        let free_at = self.sent[leaving - 1] + MINUTE;
        Err(Duration::try_from(free_at - now).unwrap_or_default())
    }
}

/// One limit, shared by the channel loops it applies to; holding its lock
/// is what lets a loop count and fold a backlog without another loop of
/// the same topic sending meanwhile.
pub type SharedLimit = Arc<tokio::sync::Mutex<RateLimit>>;

/// The limits of the configured channels, by what they limit; kept across
/// reloads, so a reload does not reset what was sent in the last minute.
#[derive(Debug, Clone, Default)]
pub struct Limits(Arc<Mutex<HashMap<String, SharedLimit>>>);

impl Limits {
    /// Makes the limits those of `channels`: one per key at the smallest
    /// `rate_limit` naming it; the limits of keys gone are dropped.
    pub async fn configure(&self, channels: &[Channel]) {
        let mut wanted: HashMap<String, u32> = HashMap::new();
        for channel in channels {
            let rate = wanted.entry(key(channel)).or_insert(channel.rate_limit);
            *rate = (*rate).min(channel.rate_limit);
        }
        let kept: Vec<(SharedLimit, u32)> = {
            let mut limits = self.0.lock().unwrap_or_else(|p| p.into_inner());
            limits.retain(|key, _| wanted.contains_key(key));
            wanted
                .into_iter()
                .map(|(key, rate)| {
                    let limit = limits
                        .entry(key)
                        .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(RateLimit::new(rate))));
                    (limit.clone(), rate)
                })
                .collect()
        };
        for (limit, rate) in kept {
            limit.lock().await.per_minute = rate.max(1);
        }
    }

    /// The limit of `channel` (made by [`Self::configure`], or a new one).
    pub fn of(&self, channel: &Channel) -> SharedLimit {
        let mut limits = self.0.lock().unwrap_or_else(|p| p.into_inner());
        limits
            .entry(key(channel))
            .or_insert_with(|| {
                Arc::new(tokio::sync::Mutex::new(RateLimit::new(channel.rate_limit)))
            })
            .clone()
    }
}

/// What `channel`'s limit protects: its ntfy topic, or the channel.
pub fn key(channel: &Channel) -> String {
    match channel.kind {
        ChannelKind::Ntfy { .. } => format!("ntfy topic {}", channel.url),
        _ => format!("channel {}", channel.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: OffsetDateTime = time::macros::datetime!(2026-12-01 10:00:00 UTC);

    fn at(seconds: u64) -> OffsetDateTime {
        T0 + Duration::from_secs(seconds)
    }

    #[test]
    fn no_more_than_the_limit_in_any_minute() {
        let mut rate = RateLimit::new(6);
        assert_eq!(rate.take(at(0), 4), Ok(()));
        assert_eq!(rate.take(at(10), 2), Ok(()));
        assert_eq!(rate.available(at(59)), 0);
        // The four of 0 s leave the window at 60 s, the two of 10 s at 70 s.
        assert_eq!(rate.take(at(30), 1), Err(Duration::from_secs(30)));
        assert_eq!(rate.take(at(30), 5), Err(Duration::from_secs(40)));
        assert_eq!(rate.available(at(60)), 4);
        assert_eq!(rate.take(at(60), 5), Err(Duration::from_secs(10)));
        assert_eq!(rate.take(at(60), 4), Ok(()));
    }

    #[test]
    fn a_notification_larger_than_the_limit_waits_for_an_empty_window() {
        let mut rate = RateLimit::new(3);
        assert_eq!(rate.take(at(0), 1), Ok(()));
        assert_eq!(rate.take(at(1), 10), Err(Duration::from_secs(59)));
        assert_eq!(rate.take(at(60), 10), Ok(()));
        assert_eq!(rate.available(at(61)), 0);
    }

    #[test]
    fn a_clock_set_back_does_not_hold_the_limit() {
        let mut rate = RateLimit::new(2);
        assert_eq!(rate.take(at(3600), 2), Ok(()));
        assert_eq!(rate.available(at(0)), 2);
    }
}
