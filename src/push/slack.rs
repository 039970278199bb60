//! `kind = "slack"`: a Slack incoming webhook, or the Slack-compatible one
//! of Mattermost or Discord (`.../slack`). A short message: a `text`
//! fallback (what notifications show) and one `section` block per check.
//! Incoming webhooks cannot thread, so a RESOLVED is a follow-up message
//! that names the DOWN it closes by its time. A WARN reads like a DOWN
//! (its summary starts with WARN): one line per check, the reason; its end
//! is a follow-up in the same way ("no longer warns").

use serde_json::json;
use url::Url;

use super::document::{PushEvent, PushKind};
use super::request::Request;
use crate::when;

/// At most this many checks get a block of their own; Slack refuses a
/// message of more than 50 blocks.
const MAX_BLOCKS: usize = 20;

pub fn request(url: &Url, event: &PushEvent) -> Request {
    let mut blocks = vec![json!({
        "type": "section",
        "text": { "type": "mrkdwn", "text": format!("*{}*", escape(&event.summary)) },
    })];
    for check in event.checks.iter().take(MAX_BLOCKS) {
        let name = match &check.page {
            Some(page) => format!("<{}|{}>", escape(page), escape(&check.name)),
            None => format!("`{}`", escape(&check.name)),
        };
        let line = match (event.event, &check.reason) {
            (PushKind::Resolved, _) if event.warn => format!(
                "{name} no longer warns (warn since {}; now {})",
                when::second(check.since),
                check.status
            ),
            (PushKind::Resolved, _) => format!(
                "{name} is up again (down since {})",
                when::second(check.since)
            ),
            (_, Some(reason)) => format!("{name}: {}", escape(reason)),
            (_, None) => format!("{name} is {}", check.status),
        };
        blocks.push(json!({
            "type": "section",
            "text": { "type": "mrkdwn", "text": line },
        }));
    }
    if event.checks.len() > MAX_BLOCKS {
        blocks.push(json!({
            "type": "context",
            "elements": [{ "type": "mrkdwn", "text": format!("and {} more", event.checks.len() - MAX_BLOCKS) }],
        }));
    }
    Request::json(url, &json!({ "text": event.summary, "blocks": blocks }))
}

/// Slack's mrkdwn reserves `&`, `<` and `>`.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
