//! What the push senders count, for `/metrics` and `/healthz`: per
//! channel, pushes accepted, failures by class, the backlog, and why the
//! channel is broken while it is.

use std::collections::BTreeMap;
use std::sync::Mutex;

use time::OffsetDateTime;

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
