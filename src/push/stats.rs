//! What the push senders count, for `/metrics` and `/healthz`: per
//! channel, pushes accepted, failures by class, the backlog, the dead
//! pushes kept, and why the channel is broken while it is.

use std::collections::BTreeMap;
use std::sync::Mutex;

use time::OffsetDateTime;

use crate::metrics::{flag, Exposition, Family};

/// One channel's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelSnapshot {
    pub kind: &'static str,
    /// Pushes the endpoint accepted.
    pub sent: u64,
    /// Attempts that will be retried (network, 5xx, 408, 425, 429).
    pub retried: u64,
    /// Pushes given up (another 4xx, or failing for too long).
    pub permanent: u64,
    pub backlog: u64,
    /// Dead pushes kept in the store (given up, never to be sent).
    pub dead: u64,
    /// Set from a push given up until one is accepted again; also set
    /// while the breaker is open.
    pub broken: Option<String>,
    pub last_sent: Option<OffsetDateTime>,
}

/// Every channel's counters; shared by the senders and the API.
#[derive(Debug, Default)]
pub struct PushStats {
    channels: Mutex<BTreeMap<String, ChannelSnapshot>>,
}

impl PushStats {
    fn with<T>(
        &self,
        channel: &str,
        kind: &'static str,
        f: impl FnOnce(&mut ChannelSnapshot) -> T,
    ) -> T {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let entry = channels.entry(channel.to_string()).or_default();
        entry.kind = kind;
        f(entry)
    }

    /// The channels configured now; counters of the others are dropped.
    pub fn configured<'a>(&self, channels: impl IntoIterator<Item = (&'a str, &'static str)>) {
        let mut kept = BTreeMap::new();
        let mut current = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        for (name, kind) in channels {
            let mut entry = current.remove(name).unwrap_or_default();
            entry.kind = kind;
            kept.insert(name.to_string(), entry);
        }
        *current = kept;
    }

    pub fn sent(&self, channel: &str, kind: &'static str, at: OffsetDateTime) {
        self.with(channel, kind, |c| {
            c.sent += 1;
            c.last_sent = Some(at);
            c.broken = None;
        });
    }

    pub fn retried(&self, channel: &str, kind: &'static str) {
        self.with(channel, kind, |c| c.retried += 1);
    }

    pub fn given_up(&self, channel: &str, kind: &'static str, why: &str) {
        self.with(channel, kind, |c| {
            c.permanent += 1;
            c.broken = Some(why.to_string());
        });
    }

    /// The breaker opened (`Some`) or the channel works again (`None`).
    pub fn set_broken(&self, channel: &str, kind: &'static str, why: Option<String>) {
        self.with(channel, kind, |c| c.broken = why);
    }

    pub fn set_backlog(&self, channel: &str, kind: &'static str, backlog: u64) {
        self.with(channel, kind, |c| c.backlog = backlog);
    }

    pub fn set_dead(&self, channel: &str, kind: &'static str, dead: u64) {
        self.with(channel, kind, |c| c.dead = dead);
    }

    pub fn snapshot(&self) -> BTreeMap<String, ChannelSnapshot> {
        self.channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `/healthz`'s `degraded` lines: each broken channel, by name and kind
    /// only (the reason can quote the endpoint).
    pub fn degraded(&self) -> Vec<String> {
        self.snapshot()
            .into_iter()
            .filter(|(_, c)| c.broken.is_some())
            .map(|(name, c)| {
                format!(
                    "push channel {name} ({}) is failing; see /metrics and the log",
                    c.kind
                )
            })
            .collect()
    }
}

const SENT: Family = Family::counter(
    "vigie_notify_sent_total",
    "pushes the channel's endpoint accepted",
);
const FAILURES: Family = Family::counter(
    "vigie_notify_failures_total",
    "failed push attempts: class=\"retry\" is tried again, class=\"permanent\" was given up",
);
const BACKLOG: Family = Family::gauge(
    "vigie_notify_backlog",
    "pushes waiting in the channel's outbox",
);
const DEAD: Family = Family::gauge(
    "vigie_notify_dead_letters",
    "pushes the channel gave up, kept in the store as dead pushes",
);
const BROKEN: Family = Family::gauge(
    "vigie_notify_failing",
    "1 while the channel's pushes are given up or its breaker is open",
);

impl PushStats {
    /// The `vigie_notify_*` families, a sample per channel.
    pub fn write_metrics(&self, out: &mut String) {
        let channels = self.snapshot();
        let mut m = Exposition::new(out);
        m.family(&SENT);
        for (name, c) in &channels {
            m.sample(&SENT, &[("channel", name), ("kind", c.kind)], c.sent as f64);
        }
        m.family(&FAILURES);
        for (name, c) in &channels {
            for (class, value) in [("retry", c.retried), ("permanent", c.permanent)] {
                let labels = [
                    ("channel", name.as_str()),
                    ("kind", c.kind),
                    ("class", class),
                ];
                m.sample(&FAILURES, &labels, value as f64);
            }
        }
        m.family(&BACKLOG);
        for (name, c) in &channels {
            m.sample(
                &BACKLOG,
                &[("channel", name), ("kind", c.kind)],
                c.backlog as f64,
            );
        }
        m.family(&DEAD);
        for (name, c) in &channels {
            m.sample(&DEAD, &[("channel", name), ("kind", c.kind)], c.dead as f64);
        }
        m.family(&BROKEN);
        for (name, c) in &channels {
            let labels = [("channel", name.as_str()), ("kind", c.kind)];
            m.sample(&BROKEN, &labels, flag(c.broken.is_some()));
        }
    }
}
