//! `kind = "pagerduty"`: PagerDuty Events API v2
//! (<https://developer.pagerduty.com/docs/events-api-v2/trigger-events/>).
//! One event per check, `dedup_key` its incident key: a DOWN and its
//! reminders `trigger` (PagerDuty folds a repeated trigger into the open
//! alert), the RESOLVED `resolve`s it. The same key from any vantage, so a
//! retry or a second sender can never open a second incident.
//!
//! A WARN (sent only where a route asks for `warn`) is a `trigger` of
//! severity `warning` (not `critical`), its `dedup_key` the warn
//! episode's id, so that PagerDuty's urgency rules can keep it from
//! waking anyone; the end of the episode `resolve`s that key.

use std::collections::BTreeMap;

use serde::Serialize;
use url::Url;

use super::document::{PushCheck, PushEvent, PushKind};
use super::request::Request;

/// The longest `payload.summary` PagerDuty accepts.
const MAX_SUMMARY: usize = 1024;

#[derive(Debug, Serialize)]
struct Enqueue<'a> {
    routing_key: &'a str,
    event_action: &'static str,
    dedup_key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<Payload<'a>>,
    client: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_url: Option<&'a str>,
    links: Vec<Link<'a>>,
}

#[derive(Debug, Serialize)]
struct Payload<'a> {
    summary: String,
    source: &'a str,
    severity: &'static str,
    #[serde(with = "time::serde::rfc3339")]
    timestamp: time::OffsetDateTime,
    component: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    class: &'static str,
    custom_details: BTreeMap<&'static str, serde_json::Value>,
}

#[derive(Debug, Serialize)]
struct Link<'a> {
    href: &'a str,
    text: &'static str,
}

/// One request per check of `event`.
pub fn requests(url: &Url, routing_key: &str, event: &PushEvent) -> Vec<Request> {
    event
        .checks
        .iter()
        .map(|check| request(url, routing_key, event, check))
        .collect()
}

fn request(url: &Url, routing_key: &str, event: &PushEvent, check: &PushCheck) -> Request {
    let action = match event.event {
        PushKind::Down | PushKind::Reminder | PushKind::Warn => "trigger",
        PushKind::Resolved => "resolve",
    };
    let severity = match event.event {
        PushKind::Warn => "warning",
        _ => "critical",
    };
    // A resolve needs no payload; a trigger's says what is down.
    let payload = (action == "trigger").then(|| {
        let summary = match &check.reason {
            Some(reason) => format!("{} {}: {reason}", event.word(), check.name),
            None => format!("{} {}", event.word(), check.name),
        };
        let mut custom_details = BTreeMap::from([
            ("target", serde_json::json!(check.target)),
            ("status", serde_json::json!(check.status)),
            ("labels", serde_json::json!(check.labels)),
            (
                "consecutive_failures",
                serde_json::json!(check.consecutive_failures),
            ),
        ]);
        if let Some(reason) = &check.reason {
            custom_details.insert("reason", serde_json::json!(reason));
        }
        Payload {
            summary: truncate(&summary, MAX_SUMMARY),
            source: &event.node,
            severity,
            timestamp: check.since,
            component: &check.name,
            group: check.labels.get("env").map(String::as_str),
            class: "vigie check",
            custom_details,
        }
    });
    Request::json(
        url,
        &Enqueue {
            routing_key,
            event_action: action,
            dedup_key: &check.incident,
            payload,
            client: "vigie",
            client_url: event.status_page.as_deref(),
            links: check
                .page
                .as_deref()
                .map(|href| Link {
                    href,
                    text: "the check in vigie",
                })
                .into_iter()
                .collect(),
        },
    )
}

/// `text` cut to at most `max` bytes at a character boundary.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::alert::testing::event;
    use crate::alert::{EventKind, Notification};

    fn document(kind: EventKind) -> PushEvent {
        let mut e = event(kind, "site");
        e.resolved_at = (kind == EventKind::WarnResolved).then_some(e.at);
        let n = Notification {
            kind,
            to: e.to.clone(),
            opened: e.at,
            events: vec![e],
        };
        let at = datetime!(2026-12-01 07:00 UTC);
        PushEvent::of(&n, "<id@h>", "[vigie] x", "node", None, at)
    }

    #[test]
    fn the_end_of_a_warn_resolves_the_warns_dedup_key() {
        let url = Url::parse("https://events.pagerduty.com/v2/enqueue").unwrap();
        let body = |kind| {
            let request = requests(&url, "key", &document(kind)).remove(0);
            serde_json::from_slice::<serde_json::Value>(&request.body).unwrap()
        };
        let (warn, end) = (body(EventKind::Warn), body(EventKind::WarnResolved));
        assert_eq!(warn["event_action"], "trigger");
        assert_eq!(warn["payload"]["severity"], "warning");
        assert_eq!(end["event_action"], "resolve");
        assert_eq!(end["dedup_key"], warn["dedup_key"]);
        let doc = document(EventKind::WarnResolved);
        assert_eq!((doc.event, doc.warn), (PushKind::Resolved, true));
        assert_eq!(doc.word(), "WARN RESOLVED");
        assert!(!document(EventKind::Resolved).warn);
    }
}
