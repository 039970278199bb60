//! `kind = "ntfy"`: one notification per check, published as JSON to the
//! server's root with the topic in the body (ntfy's JSON publishing), so
//! that titles and messages in any language need no header encoding.
//!
//! Each incident has its own sequence id (`sequence_id`, ntfy 2.16 and
//! later): the RESOLVED of an incident, and its reminders, are published
//! under the DOWN's sequence id, and ntfy replaces that notification on the
//! phone, which so shows one notification per incident, in its latest
//! state. An older server shows them as separate notifications.

use serde::Serialize;
use sha2::{Digest, Sha256};
use url::Url;

use super::document::{PushCheck, PushEvent, PushKind};
use super::request::Request;
use crate::config::channels::NtfyPriorities;

/// What authenticates the requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    /// `Authorization: Bearer <token>`.
    Token(String),
    /// `Authorization: Basic`.
    Basic {
        user: String,
        password: String,
    },
}

/// ntfy's JSON publishing body.
#[derive(Debug, Serialize)]
struct Publish<'a> {
    topic: &'a str,
    message: String,
    title: String,
    priority: u8,
    tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    click: Option<&'a str>,
    sequence_id: String,
}

/// The channel's settings as a request needs them.
pub struct Ntfy<'a> {
    pub url: &'a Url,
    pub auth: &'a Auth,
    pub priority: &'a NtfyPriorities,
    pub tags: &'a [String],
}

impl Ntfy<'_> {
    /// The server's root and the topic of `url`
    /// (`https://ntfy.example.net/vigie` -> `https://ntfy.example.net/`,
    /// `vigie`).
    fn root_and_topic(&self) -> (Url, String) {
        let mut root = self.url.clone();
        let topic = root
            .path_segments()
            .and_then(|mut s| s.next_back().map(str::to_string))
            .unwrap_or_default();
        if let Ok(mut segments) = root.path_segments_mut() {
            segments.pop().push("");
        }
        (root, topic)
    }

    /// One request per check of `event`.
    pub fn requests(&self, event: &PushEvent) -> Vec<Request> {
        event
            .checks
            .iter()
            .map(|check| self.request(event, check))
            .collect()
    }

    /// The request about `check`.
    pub fn request(&self, event: &PushEvent, check: &PushCheck) -> Request {
        let (root, topic) = self.root_and_topic();
        let env = check.labels.get("env").map(String::as_str);
        let mut tags: Vec<String> = vec![match event.event {
            PushKind::Down | PushKind::Reminder => "rotating_light".to_string(),
            PushKind::Resolved => "white_check_mark".to_string(),
            PushKind::Warn => "warning".to_string(),
        }];
        tags.extend(env.map(str::to_string));
        tags.extend(self.tags.iter().cloned());
        let message = match (&check.reason, event.event) {
            (_, PushKind::Resolved) if event.warn => warn_ended(check),
            (_, PushKind::Resolved) => format!("{} is up again", check.name),
            (Some(reason), _) => reason.clone(),
            (None, _) => format!("{} is {}", check.name, check.status),
        };
        let publish = Publish {
            topic: &topic,
            message,
            title: format!("{} {}", event.word(), check.name),
            priority: self.priority.of(event.event.event(), env),
            tags,
            click: check.page.as_deref(),
            sequence_id: sequence_id(&check.incident),
        };
        self.publish(&root, &publish)
    }

    /// The one message sent for `events` when the rate limit of
    /// `per_minute` would not let their notifications out one by one: a
    /// line for every check of every event, so that nothing pending goes
    /// unsaid, at the highest priority among them. Its sequence id is its
    /// own (from the events' ids), so it replaces no incident's
    /// notification and no incident's later update replaces it.
    pub fn digest(&self, events: &[PushEvent], per_minute: u32) -> Option<Request> {
        let (root, topic) = self.root_and_topic();
        let lines: Vec<(String, u8, bool)> = events
            .iter()
            .flat_map(|event| {
                event.checks.iter().map(move |check| {
                    let env = check.labels.get("env").map(String::as_str);
                    let priority = self.priority.of(event.event.event(), env);
                    let resolved = event.event == PushKind::Resolved;
                    (digest_line(event, check), priority, resolved)
                })
            })
            .collect();
        let first = events
            .iter()
            .find_map(|e| e.checks.first().map(|c| format!("{} {}", e.word(), c.name)))?;
        let title = match lines.len() {
            1 => first,
            n => format!("{first} and {} more", n - 1),
        };
        let mut message = String::new();
        for (i, (line, _, _)) in lines.iter().enumerate() {
            if message.len() + line.len() > DIGEST_BUDGET {
                let left = lines.len() - i;
                message.push_str(&format!("and {left} more: the mail lists every one\n"));
                break;
            }
            message.push_str(line);
            message.push('\n');
        }
        message.push_str(&format!(
            "\n{} notifications in one message: the rate limit of {per_minute} a minute holds",
            lines.len()
        ));
        let mut tags = vec![match lines.iter().all(|(_, _, resolved)| *resolved) {
            true => "white_check_mark".to_string(),
            false => "rotating_light".to_string(),
        }];
        tags.extend(self.tags.iter().cloned());
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        let publish = Publish {
            topic: &topic,
            message,
            title,
            priority: lines.iter().map(|(_, p, _)| *p).max().unwrap_or(3),
            tags,
            click: None,
            sequence_id: sequence_id(&format!("digest {}", ids.join(" "))),
        };
        Some(self.publish(&root, &publish))
    }

    fn publish(&self, root: &Url, publish: &Publish<'_>) -> Request {
        let mut request = Request::json(root, publish);
        if let Some(auth) = authorization(self.auth) {
            request.headers.push(("authorization".to_string(), auth));
        }
        request
    }
}

/// The most of a digest's message, in bytes: ntfy keeps a message over
/// 4096 bytes as an attachment, which a phone does not show as text.
const DIGEST_BUDGET: usize = 3500;
/// The most of a failure quoted on a digest's line.
const DIGEST_REASON: usize = 120;

/// `DOWN site: HTTP 503`, `RESOLVED site: up again`.
fn digest_line(event: &PushEvent, check: &PushCheck) -> String {
    let what = match (&check.reason, event.event == PushKind::Resolved) {
        (_, true) if event.warn => warn_ended(check),
        (_, true) => "up again".to_string(),
        (Some(reason), false) => reason.chars().take(DIGEST_REASON).collect(),
        (None, false) => check.status.clone(),
    };
    format!("{} {}: {what}", event.word(), check.name)
}

/// The end of a warn in words: it is up again, or an incident superseded
/// it (the DOWN has its own notification).
fn warn_ended(check: &PushCheck) -> String {
    match check.status.as_str() {
        "down" => format!("{} no longer warns: superseded by DOWN", check.name),
        _ => format!("{} no longer warns", check.name),
    }
}

/// The `Authorization` header of `auth`.
pub fn authorization(auth: &Auth) -> Option<String> {
    use base64::Engine;
    match auth {
        Auth::None => None,
        Auth::Token(token) => Some(format!("Bearer {token}")),
        Auth::Basic { user, password } => Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )),
    }
}

/// The incident's sequence id: `vigie-` and 24 hex digits of its SHA-256,
/// within ntfy's `[-_A-Za-z0-9]{1,64}`, the same on every vantage.
pub fn sequence_id(incident: &str) -> String {
    let digest = Sha256::digest(incident.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("vigie-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_id_is_stable_and_within_ntfys_alphabet() {
        let id = sequence_id("site@2026-11-29T07:00:30.000Z");
        assert_eq!(id, sequence_id("site@2026-11-29T07:00:30.000Z"));
        assert_ne!(id, sequence_id("site@2026-11-29T07:00:31.000Z"));
        assert_eq!(id.len(), 30);
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }

    fn event(id: &str, event: PushKind, checks: &[(&str, &str)]) -> PushEvent {
        let at = time::macros::datetime!(2026-12-01 10:00:00 UTC);
        PushEvent {
            version: 1,
            id: id.to_string(),
            event,
            incident: String::new(),
            at,
            node: "vigie-1".to_string(),
            summary: String::new(),
            status_page: None,
            test: false,
            warn: false,
            checks: checks
                .iter()
                .map(|(name, env)| PushCheck {
                    name: name.to_string(),
                    incident: format!("{name}@{id}"),
                    status: "down".to_string(),
                    labels: [("env".to_string(), env.to_string())].into(),
                    reason: Some(format!("{name}: HTTP 503")),
                    since: at,
                    resolved_at: None,
                    target: format!("https://{name}.example.net/"),
                    consecutive_failures: 2,
                    page: None,
                })
                .collect(),
        }
    }

    #[test]
    fn a_digest_names_every_check_of_every_event_at_the_highest_priority() {
        let url = Url::parse("https://ntfy.example.net/vigie").unwrap();
        let priority = NtfyPriorities::defaults();
        let ntfy = Ntfy {
            url: &url,
            auth: &Auth::Token("tk_x".to_string()),
            priority: &priority,
            tags: &[],
        };
        let events = [
            event(
                "a",
                PushKind::Down,
                &[("api", "staging"), ("db", "staging")],
            ),
            event("b", PushKind::Resolved, &[("web", "prod")]),
            event("c", PushKind::Down, &[("site", "prod")]),
        ];
        let request = ntfy.digest(&events, 6).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["title"], "DOWN api and 3 more", "{body}");
        let message = body["message"].as_str().unwrap();
        for line in [
            "DOWN api: api: HTTP 503",
            "DOWN db: db: HTTP 503",
            "RESOLVED web: up again",
            "DOWN site: site: HTTP 503",
            "4 notifications in one message: the rate limit of 6 a minute holds",
        ] {
            assert!(message.contains(line), "{line:?} in {message}");
        }
        assert_eq!(body["priority"], 5, "a prod DOWN is among them");
        assert_eq!(body["topic"], "vigie");
        assert_ne!(
            body["sequence_id"],
            sequence_id(&events[0].checks[0].incident)
        );
        assert!(request
            .headers
            .contains(&("authorization".to_string(), "Bearer tk_x".to_string())));
        assert!(ntfy.digest(&[], 6).is_none());
    }

    #[test]
    fn a_digest_too_long_for_a_phone_says_how_many_it_leaves_to_the_mail() {
        let url = Url::parse("https://ntfy.example.net/vigie").unwrap();
        let priority = NtfyPriorities::defaults();
        let ntfy = Ntfy {
            url: &url,
            auth: &Auth::None,
            priority: &priority,
            tags: &[],
        };
        let names: Vec<String> = (0..200).map(|i| format!("check-{i:03}")).collect();
        let checks: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "prod")).collect();
        let request = ntfy
            .digest(&[event("a", PushKind::Down, &checks)], 6)
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let message = body["message"].as_str().unwrap();
        assert!(message.len() < 4096, "{}", message.len());
        assert!(
            message.contains("more: the mail lists every one"),
            "{message}"
        );
    }

    #[test]
    fn the_topic_is_the_last_segment_and_the_root_keeps_a_path_prefix() {
        for (url, root, topic) in [
            (
                "https://ntfy.example.net/vigie",
                "https://ntfy.example.net/",
                "vigie",
            ),
            (
                "https://example.net/ntfy/oncall",
                "https://example.net/ntfy/",
                "oncall",
            ),
        ] {
            let url = Url::parse(url).unwrap();
            let priority = NtfyPriorities::defaults();
            let ntfy = Ntfy {
                url: &url,
                auth: &Auth::None,
                priority: &priority,
                tags: &[],
            };
            let (r, t) = ntfy.root_and_topic();
            assert_eq!((r.as_str(), t.as_str()), (root, topic));
        }
    }
}
