//! A Slack incoming webhook (api.slack.com, "Sending messages using
//! incoming webhooks" and its "Handling errors" table):
//! `POST /services/T…/B…/X…` with a JSON message (`text`, `blocks`,
//! `thread_ts`, ...), or a form with the JSON in its `payload` field.
//! Mattermost and Discord (`/slack` suffix) accept the same payloads.
//!
//! A message with `text` or a non-empty `blocks` array is answered 200
//! `ok` and kept ([`SlackWebhook::messages`]). Errors are Slack's words as
//! text bodies: 400 `invalid_payload` (not JSON, not an object, `blocks`
//! not an array), 400 `no_text` (neither text nor blocks), 403
//! `invalid_token` (the right team and channel, the wrong secret), 404
//! `no_service` (any other path or method); scripted, also 410
//! `channel_is_archived`, 429 `rate_limited` (with the `Retry-After` the
//! plan adds), 500 `rollup_error`.
//!
//! Not implemented: checking blocks against Block Kit (`invalid_blocks`),
//! `user_not_found`/`channel_not_found`/`action_prohibited` (only by plan,
//! with [`super::Plan::body`]), posting as another user or channel.

use std::sync::Mutex;

use serde_json::Value;

use super::{random_alphanumeric, Answer, Protocol, PushPeer, Received};

/// A Slack incoming webhook; see the module doc.
pub type SlackWebhook = PushPeer<Slack>;

/// The workspace and channel ids of the webhook's path.
const TEAM: &str = "T0VIGIE00";
const CHANNEL: &str = "B0VIGIE00";

/// A message the webhook accepted.
#[derive(Clone, Debug)]
pub struct SlackMessage {
    pub text: Option<String>,
    pub blocks: Option<Value>,
    /// The parent message's `ts`, for a reply in a thread.
    pub thread_ts: Option<String>,
    /// The whole payload.
    pub payload: Value,
}

/// The webhook's state.
pub struct Slack {
    secret: String,
    messages: Mutex<Vec<SlackMessage>>,
}

impl PushPeer<Slack> {
    /// A webhook with a fresh secret in its URL.
    pub fn start() -> SlackWebhook {
        PushPeer::serve(Slack {
            secret: random_alphanumeric(24),
            messages: Mutex::new(Vec::new()),
        })
    }

    /// Every accepted message, in order.
    pub fn messages(&self) -> Vec<SlackMessage> {
        self.protocol().messages.lock().unwrap().clone()
    }

    /// The URL with another secret: what a revoked webhook looks like.
    pub fn url_with_wrong_secret(&self) -> String {
        format!(
            "http://{}/services/{TEAM}/{CHANNEL}/not{}",
            self.addr(),
            self.protocol().secret
        )
    }
}

/// The message JSON of a request: the body, or the form's `payload`.
fn payload(request: &Received) -> Option<Value> {
    let form = request
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return serde_json::from_slice(&request.body).ok();
    }
    let (_, json) = url::form_urlencoded::parse(&request.body).find(|(key, _)| key == "payload")?;
    serde_json::from_str(&json).ok()
}

fn text(status: u16, word: &str) -> Answer {
    Answer::new(status, "text/html", word.to_owned())
}

impl Protocol for Slack {
    const NAME: &'static str = "Slack webhook";

    fn endpoint(&self) -> String {
        format!("/services/{TEAM}/{CHANNEL}/{}", self.secret)
    }

    fn answer(&self, request: &Received) -> Answer {
        let segments: Vec<&str> = request.path().trim_start_matches('/').split('/').collect();
        match (request.method.as_str(), segments.as_slice()) {
            ("POST", ["services", TEAM, CHANNEL, secret]) if *secret == self.secret => {}
            ("POST", ["services", TEAM, CHANNEL, _]) => return text(403, "invalid_token"),
            _ => return text(404, "no_service"),
        }
        let Some(payload) = payload(request).filter(Value::is_object) else {
            return text(400, "invalid_payload");
        };
        let blocks = payload.get("blocks").cloned();
        if blocks.as_ref().is_some_and(|b| !b.is_array()) {
            return text(400, "invalid_payload");
        }
        let message = SlackMessage {
            text: payload
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            thread_ts: payload
                .get("thread_ts")
                .and_then(Value::as_str)
                .map(str::to_owned),
            blocks,
            payload,
        };
        let has_blocks = message
            .blocks
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|b| !b.is_empty());
        if message.text.is_none() && !has_blocks {
            return text(400, "no_text");
        }
        self.messages.lock().unwrap().push(message);
        text(200, "ok")
    }

    fn scripted(&self, status: u16) -> Answer {
        let word = match status {
            400 => "invalid_payload",
            403 => "invalid_token",
            404 => "no_service",
            410 => "channel_is_archived",
            429 => "rate_limited",
            500 => "rollup_error",
            _ => "error",
        };
        text(status, word)
    }
}
