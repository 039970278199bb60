//! `[[notify]]` and `[[route]]` as resolved: the push channels and which
//! events of which checks each one is told.
//!
//! The mail of `[alerting]` is the channel named [`MAIL`]; it needs no
//! `[[notify]]` entry. Sending is `push/`'s job, choosing channels
//! `alert/routes.rs`'s; this file only holds what the config says.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use regex::Regex;
use url::Url;

use crate::address::{classify, AddressClass};

/// Where PagerDuty's Events API v2 takes events: a pagerduty channel's
/// `url` unless it sets one.
pub const PAGERDUTY_EVENTS_URL: &str = "https://events.pagerduty.com/v2/enqueue";

/// The channel name of the mail `[alerting]` sends.
pub const MAIL: &str = "mail";

/// One `[[notify]]` entry.
#[derive(Debug, Clone)]
pub struct Channel {
    /// Unique, `[a-z0-9._-]+`, never [`MAIL`].
    pub name: String,
    pub url: Url,
    /// The channel may be on a private, loopback or link-local address
    /// (a self-hosted ntfy on the LAN); a metadata address never is.
    pub allow_private: bool,
    /// One request, connect to last byte.
    pub timeout: Duration,
    /// Requests a minute at most.
    pub rate_limit: u32,
    /// When a failed push is tried again, and how long a channel that
    /// keeps failing is left alone.
    pub backoff: Backoff,
    pub kind: ChannelKind,
}

/// A channel's retry timing: `min_backoff`, `max_backoff`, `give_up_after`
/// and `breaker_pause`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after a push's first failure, doubled at each failure
    /// after it.
    pub min: Duration,
    /// The longest wait between two tries of a push, and the longest the
    /// breaker stays open.
    pub max: Duration,
    /// A push still failing this long after it was queued is given up.
    pub give_up_after: Duration,
    /// How long the breaker stays open the first time; doubled at each
    /// reopening, up to `max`.
    pub breaker_pause: Duration,
}

impl Backoff {
    /// 5 s, 10 s, 20 s ... 10 min, for up to a day: a page a day late is
    /// history, not a page, and the mail told the on-call person anyway.
    /// The breaker: 30 s, then 1 min, 2 min ... 10 min.
    pub const DEFAULT: Backoff = Backoff {
        min: Duration::from_secs(5),
        max: Duration::from_secs(600),
        give_up_after: Duration::from_secs(86_400),
        breaker_pause: Duration::from_secs(30),
    };

    /// The wait after the `attempts`-th failure (1-based), jittered by up
    /// to a quarter either way with `jitter` in 0..1, so that channels
    /// that failed together do not retry together.
    pub fn after(&self, attempts: u32, jitter: f64) -> Duration {
        self.doubled(self.min, attempts)
            .mul_f64(0.75 + jitter.clamp(0.0, 1.0) / 2.0)
    }

    /// How long the breaker stays open at its `opens`-th opening in a row
    /// (1-based).
    pub fn pause(&self, opens: u32) -> Duration {
        self.doubled(self.breaker_pause, opens)
    }

    /// `first` doubled for each time after the first of `nth` (1-based),
    /// up to `max`.
    fn doubled(&self, first: Duration, nth: u32) -> Duration {
        let doublings = nth.saturating_sub(1).min(20);
        first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// What a channel is, with the keys of its kind.
#[derive(Debug, Clone)]
pub enum ChannelKind {
    /// A JSON document signed as Standard Webhooks v1 says.
    Webhook {
        /// Holds `whsec_` + base64 (checked when the config loads).
        secret_file: PathBuf,
        /// Sent with every request, after vigie's own headers.
        headers: BTreeMap<String, String>,
    },
    Ntfy {
        auth: NtfyAuth,
        priority: NtfyPriorities,
        tags: Vec<String>,
    },
    /// PagerDuty Events API v2.
    PagerDuty {
        /// Holds the 32-character integration key (checked when the config
        /// loads).
        routing_key_file: PathBuf,
    },
    /// A Slack incoming webhook, or a Mattermost or Discord compatible one.
    Slack,
}

impl ChannelKind {
    /// As `kind =` writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            ChannelKind::Webhook { .. } => "webhook",
            ChannelKind::Ntfy { .. } => "ntfy",
            ChannelKind::PagerDuty { .. } => "pagerduty",
            ChannelKind::Slack => "slack",
        }
    }
}

/// How vigie signs in to an ntfy server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NtfyAuth {
    None,
    /// An access token (`tk_...`), sent as `Authorization: Bearer`.
    Token(PathBuf),
    Basic {
        user: String,
        password_file: PathBuf,
    },
}

/// The events a channel or a route is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotifyEvent {
    Down,
    /// A warn episode began. Never mailed, and pushed only where a route
    /// names it (see [`Notify::channels_for`]).
    Warn,
    Reminder,
    Resolved,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 4] = [
        NotifyEvent::Down,
        NotifyEvent::Warn,
        NotifyEvent::Reminder,
        NotifyEvent::Resolved,
    ];

    /// As configs and documents write it.
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Down => "down",
            NotifyEvent::Warn => "warn",
            NotifyEvent::Reminder => "reminder",
            NotifyEvent::Resolved => "resolved",
        }
    }

    pub fn parse(text: &str) -> Option<NotifyEvent> {
        NotifyEvent::ALL.into_iter().find(|e| e.as_str() == text)
    }

    /// `"down", "warn", "reminder", "resolved"`, for a message that lists
    /// the events.
    pub fn listed() -> String {
        let names: Vec<String> = NotifyEvent::ALL
            .iter()
            .map(|e| format!("{:?}", e.as_str()))
            .collect();
        names.join(", ")
    }
}

/// ntfy priorities (1 min to 5 max) by event, and by the check's `env`
/// label over that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NtfyPriorities {
    pub by_event: BTreeMap<NotifyEvent, u8>,
    /// `env` label value -> event -> priority.
    pub by_env: BTreeMap<String, BTreeMap<NotifyEvent, u8>>,
}

impl NtfyPriorities {
    /// Down 4 and reminders 4 (high), warn 3 (default), resolved 2 (low);
    /// a `prod` DOWN 5 (urgent: it overrides do-not-disturb on most
    /// phones), a `staging` one 3. A warn is 3 in every env: it never
    /// needs to wake anyone.
    pub fn defaults() -> NtfyPriorities {
        let by_event = BTreeMap::from([
            (NotifyEvent::Down, 4),
            (NotifyEvent::Warn, 3),
            (NotifyEvent::Reminder, 4),
            (NotifyEvent::Resolved, 2),
        ]);
        let by_env = BTreeMap::from([
            (
                "prod".to_string(),
                BTreeMap::from([(NotifyEvent::Down, 5), (NotifyEvent::Reminder, 5)]),
            ),
            (
                "staging".to_string(),
                BTreeMap::from([(NotifyEvent::Down, 3), (NotifyEvent::Reminder, 3)]),
            ),
        ]);
        NtfyPriorities { by_event, by_env }
    }

    /// The priority of `event` for a check whose `env` label is `env`.
    pub fn of(&self, event: NotifyEvent, env: Option<&str>) -> u8 {
        env.and_then(|env| self.by_env.get(env))
            .and_then(|by_event| by_event.get(&event))
            .or_else(|| self.by_event.get(&event))
            .copied()
            .unwrap_or(3)
    }
}

/// One `[[route]]`: the events of the checks it matches go to `notify`.
#[derive(Debug, Clone)]
pub struct Route {
    /// Label name -> value the check's label must equal.
    pub equal: BTreeMap<String, String>,
    /// Label name -> regex the whole value must match.
    pub regex: BTreeMap<String, Regex>,
    /// Empty: every event but `warn`, which a route only carries when it
    /// names it.
    pub events: Vec<NotifyEvent>,
    /// Channel names, [`MAIL`] among them or not; each one is configured.
    pub notify: Vec<String>,
    /// Later routes are tried too after this one matched.
    pub and_continue: bool,
}

impl Route {
    /// Whether an event of `kind` about a check with `labels` is this
    /// route's. A label the check does not have matches nothing.
    pub fn matches(&self, kind: NotifyEvent, labels: &BTreeMap<String, String>) -> bool {
        let every = self.events.is_empty() && kind != NotifyEvent::Warn;
        (every || self.events.contains(&kind))
            && self
                .equal
                .iter()
                .all(|(name, value)| labels.get(name) == Some(value))
            && self
                .regex
                .iter()
                .all(|(name, re)| labels.get(name).is_some_and(|v| re.is_match(v)))
    }
}

/// `[[notify]]` and `[[route]]` together.
#[derive(Debug, Clone, Default)]
pub struct Notify {
    pub channels: Vec<Channel>,
    /// In file order; empty: every channel, mail included, gets every event.
    pub routes: Vec<Route>,
}

impl Notify {
    /// The channels an event of `kind` about a check with `labels` goes
    /// to, [`MAIL`] included when it does, in the order first named.
    /// Routes are tried in order; the first that matches decides unless it
    /// says `continue`. An event no route matches goes to the mail, so
    /// that no page is lost to a gap in the routes.
    ///
    /// A warn is the exception throughout: it never pages, so it goes
    /// only where a route asks for it by name (`events = ["warn"]`), never
    /// to the mail (the daily report lists it), and nowhere without
    /// routes.
    pub fn channels_for(&self, kind: NotifyEvent, labels: &BTreeMap<String, String>) -> Vec<&str> {
        if kind == NotifyEvent::Warn {
            return self.warn_channels(labels);
        }
        if self.routes.is_empty() {
            let mut all = vec![MAIL];
            all.extend(self.channels.iter().map(|c| c.name.as_str()));
            return all;
        }
        let mut chosen: Vec<&str> = Vec::new();
        let mut matched = false;
        for route in &self.routes {
            if !route.matches(kind, labels) {
                continue;
            }
            matched = true;
            for name in &route.notify {
                if !chosen.contains(&name.as_str()) {
                    chosen.push(name);
                }
            }
            if !route.and_continue {
                break;
            }
        }
        if !matched {
            chosen.push(MAIL);
        }
        chosen
    }

    /// Where a warn about a check with `labels` goes: the channels of the
    /// routes that name `warn` and match, tried as [`Self::channels_for`]
    /// tries them, the mail left out.
    fn warn_channels(&self, labels: &BTreeMap<String, String>) -> Vec<&str> {
        let mut chosen: Vec<&str> = Vec::new();
        for route in &self.routes {
            if !route.matches(NotifyEvent::Warn, labels) {
                continue;
            }
            for name in &route.notify {
                if name != MAIL && !chosen.contains(&name.as_str()) {
                    chosen.push(name);
                }
            }
            if !route.and_continue {
                break;
            }
        }
        chosen
    }

    pub fn channel(&self, name: &str) -> Option<&Channel> {
        self.channels.iter().find(|c| c.name == name)
    }
}

/// The key bytes of a Standard Webhooks secret (`whsec_` + base64 of 24 to
/// 64 bytes).
pub fn webhook_secret(text: &str) -> Result<Vec<u8>, String> {
    let Some(encoded) = text.strip_prefix("whsec_") else {
        return Err(
            "the secret must start with `whsec_` (a Standard Webhooks secret: `whsec_` + base64)"
                .to_string(),
        );
    };
    let key = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("the secret after `whsec_` is not base64: {e}"))?;
    if !(24..=64).contains(&key.len()) {
        return Err(format!(
            "the secret holds {} bytes; Standard Webhooks asks for 24 to 64",
            key.len()
        ));
    }
    Ok(key)
}

/// Why a channel may not be sent to `ip`, if it may not.
pub fn address_refusal(ip: IpAddr, allow_private: bool) -> Option<String> {
    match classify(ip) {
        AddressClass::Global => None,
        AddressClass::Metadata => Some(format!(
            "{ip} is a cloud instance metadata address: a channel is never sent there"
        )),
        AddressClass::NonGlobal(_) if allow_private => None,
        AddressClass::NonGlobal(range) => Some(format!(
            "{ip} is a {range} address; set allow_private = true on the channel to send there (a self-hosted ntfy on the LAN)"
        )),
    }
}

/// A channel's secret file: one line, without surrounding whitespace; a
/// problem naming the file otherwise. Read when the config loads, and
/// again when the channel starts.
pub fn read_secret(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let secret = text.trim();
    if secret.is_empty() || secret.contains('\n') {
        return Err(format!("{} must hold one line, the secret", path.display()));
    }
    Ok(secret.to_string())
}
