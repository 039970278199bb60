//! `vigie test-notify [NAME]`: one test event through each channel (or
//! the one named), sent at once rather than through the outbox, and what
//! each endpoint answered.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use super::answer::Answer;
use super::channel::LiveChannel;
use super::document::{PushCheck, PushEvent, PushKind, VERSION};
use crate::config::Config;

/// The check name the test event is about; not a valid check name, so it
/// can never be mistaken for one.
const TEST_CHECK: &str = "vigie:test";

/// A test event, as `node` would send it at `now`.
pub fn test_event(node: &str, now: OffsetDateTime) -> PushEvent {
    let incident = format!("{TEST_CHECK}@{}", now.unix_timestamp());
    PushEvent {
        version: VERSION,
        id: format!("vigie.test.{}@{node}", now.unix_timestamp()),
        event: PushKind::Down,
        incident: incident.clone(),
        at: now,
        node: node.to_string(),
        summary: format!("TEST from vigie on {node}: nothing is down"),
        status_page: None,
        test: true,
        warn: false,
        checks: vec![PushCheck {
            name: TEST_CHECK.to_string(),
            incident,
            status: "down".to_string(),
            labels: BTreeMap::new(),
            reason: Some("a test event sent by `vigie test-notify`; nothing is down".to_string()),
            since: now,
            resolved_at: None,
            target: String::new(),
            consecutive_failures: 0,
            page: None,
        }],
    }
}

/// One channel's result: its name, kind, and the answer in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tried {
    pub channel: String,
    pub kind: &'static str,
    pub accepted: bool,
    pub words: String,
}

/// Sends the test event through every channel, or `only`. An unknown name
/// is an error naming the channels there are.
pub async fn send_test(
    config: &Config,
    only: Option<&str>,
    node: &str,
    now: OffsetDateTime,
) -> Result<Vec<Tried>, String> {
    let channels: Vec<_> = config
        .notify
        .channels
        .iter()
        .filter(|c| only.is_none_or(|name| c.name == name))
        .collect();
    if channels.is_empty() {
        let known: Vec<&str> = config
            .notify
            .channels
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        return Err(match (only, known.is_empty()) {
            (_, true) => format!(
                "no [[notify]] channel in {}; the mail is tested with `vigie test-email`",
                config.path.display()
            ),
            (Some(name), false) => format!(
                "no channel named {name:?}; the channels are {}",
                known.join(", ")
            ),
            (None, false) => unreachable!("channels exist when none is filtered out"),
        });
    }
    let event = test_event(node, now);
    let mut tried = Vec::new();
    for channel in channels {
        let kind = channel.kind.as_str();
        let live = match LiveChannel::new(channel, config.extra_ca_file.as_deref()) {
            Ok(live) => live,
            Err(why) => {
                tried.push(Tried {
                    channel: channel.name.clone(),
                    kind,
                    accepted: false,
                    words: why,
                });
                continue;
            }
        };
        let mut answer = Answer::Accepted;
        for request in live.requests(&event, now) {
            answer = live.send(&request, now).await;
            if answer != Answer::Accepted {
                break;
            }
        }
        let (accepted, words) = match answer {
            Answer::Accepted => (true, "accepted".to_string()),
            Answer::Retry { why, .. } => (false, format!("{why} (vigie would retry it)")),
            Answer::Permanent { why } => (false, why),
        };
        tried.push(Tried {
            channel: channel.name.clone(),
            kind,
            accepted,
            words,
        });
    }
    Ok(tried)
}
