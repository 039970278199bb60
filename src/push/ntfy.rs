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
            .map(|check| self.request(event, check, None))
            .collect()
    }

    /// The request about `check`; `extra` adds lines (the digest of what a
    /// rate limit folded into it).
    pub fn request(&self, event: &PushEvent, check: &PushCheck, extra: Option<&str>) -> Request {
        let (root, topic) = self.root_and_topic();
        let env = check.labels.get("env").map(String::as_str);
        let mut tags: Vec<String> = vec![match event.event {
            PushKind::Down | PushKind::Reminder => "rotating_light".to_string(),
            PushKind::Resolved => "white_check_mark".to_string(),
            PushKind::Warn => "warning".to_string(),
        }];
        tags.extend(env.map(str::to_string));
        tags.extend(self.tags.iter().cloned());
        let mut message = match (&check.reason, event.event) {
            (_, PushKind::Resolved) => format!("{} is up again", check.name),
            (Some(reason), _) => reason.clone(),
            (None, _) => format!("{} is {}", check.name, check.status),
        };
        if let Some(extra) = extra {
            message.push_str("\n\n");
            message.push_str(extra);
        }
        let publish = Publish {
            topic: &topic,
            message,
            title: format!("{} {}", event.event.word(), check.name),
            priority: self.priority.of(event.event.event(), env),
            tags,
            click: check.page.as_deref(),
            sequence_id: sequence_id(&check.incident),
        };
        let mut request = Request::json(&root, &publish);
        if let Some(auth) = authorization(self.auth) {
            request.headers.push(("authorization".to_string(), auth));
        }
        request
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
