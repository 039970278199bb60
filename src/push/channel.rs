//! A configured channel made ready to send: its secrets read, its HTTP
//! client built, and the requests of an event written for its kind.

use time::OffsetDateTime;

use super::answer::Answer;
use super::document::PushEvent;
use super::ntfy::{Auth, Ntfy};
use super::request::Request;
use super::{deliver, pagerduty, slack, webhook};
use crate::config::channels::{read_secret, webhook_secret, Channel, ChannelKind, NtfyAuth};

/// A channel with what sending needs.
pub struct LiveChannel {
    pub config: Channel,
    client: reqwest::Client,
    secret: Secret,
}

enum Secret {
    None,
    WebhookKey(Vec<u8>),
    Ntfy(Auth),
    RoutingKey(String),
}

impl LiveChannel {
    /// Reads the channel's secrets and builds its client; the problem in
    /// words otherwise (a secret file gone since the config loaded).
    pub fn new(
        config: &Channel,
        extra_ca_file: Option<&std::path::Path>,
    ) -> Result<LiveChannel, String> {
        let read = |path: &std::path::Path| {
            read_secret(path).map_err(|e| format!("channel {}: {e}", config.name))
        };
        let secret = match &config.kind {
            ChannelKind::Webhook { secret_file, .. } => {
                Secret::WebhookKey(webhook_secret(&read(secret_file)?).map_err(|e| {
                    format!("channel {}: {}: {e}", config.name, secret_file.display())
                })?)
            }
            ChannelKind::Ntfy { auth, .. } => Secret::Ntfy(match auth {
                NtfyAuth::None => Auth::None,
                NtfyAuth::Token(file) => Auth::Token(read(file)?),
                NtfyAuth::Basic {
                    user,
                    password_file,
                } => Auth::Basic {
                    user: user.clone(),
                    password: read(password_file)?,
                },
            }),
            ChannelKind::PagerDuty { routing_key_file } => {
                Secret::RoutingKey(read(routing_key_file)?)
            }
            ChannelKind::Slack => Secret::None,
        };
        let client = deliver::client(config, extra_ca_file)
            .map_err(|e| format!("channel {}: {e}", config.name))?;
        Ok(LiveChannel {
            config: config.clone(),
            client,
            secret,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// What telling `event` takes, written at `now`.
    pub fn requests(&self, event: &PushEvent, now: OffsetDateTime) -> Vec<Request> {
        let url = &self.config.url;
        match (&self.config.kind, &self.secret) {
            (ChannelKind::Webhook { headers, .. }, Secret::WebhookKey(key)) => {
                vec![webhook::request(url, key, headers, event, now)]
            }
            (ChannelKind::Ntfy { priority, tags, .. }, Secret::Ntfy(auth)) => Ntfy {
                url,
                auth,
                priority,
                tags,
            }
            .requests(event),
            (ChannelKind::PagerDuty { .. }, Secret::RoutingKey(key)) => {
                pagerduty::requests(url, key, event)
            }
            (ChannelKind::Slack, _) => vec![slack::request(url, event)],
            // `new` pairs each kind with its secret.
            _ => Vec::new(),
        }
    }

    /// Sends one request of this channel.
    pub async fn send(&self, request: &Request, now: OffsetDateTime) -> Answer {
        deliver::send(&self.client, &self.config, request, now).await
    }

    /// The one ntfy message for every check of `events`, when this is an
    /// ntfy channel (its rate limit folds what it cannot send one by one).
    pub fn ntfy_digest(&self, events: &[PushEvent], per_minute: u32) -> Option<Request> {
        match (&self.config.kind, &self.secret) {
            (ChannelKind::Ntfy { priority, tags, .. }, Secret::Ntfy(auth)) => Ntfy {
                url: &self.config.url,
                auth,
                priority,
                tags,
            }
            .digest(events, per_minute),
            _ => None,
        }
    }
}
