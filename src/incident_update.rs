//! What the on-call person says about an incident while it runs: an
//! update with a state (`investigating`, `identified`, `monitoring`,
//! `resolved`) and Markdown text, for the people who read the status page,
//! the feed and the incident pages. Nothing in vigie decides anything from
//! it: an update never opens, closes or silences an incident.
//!
//! The text is Markdown, rendered by pulldown-cmark with raw HTML shown as
//! text: an update is written by someone holding the token, but it is read
//! on a public page, so it must never carry markup of its own.

use std::fmt;
use std::str::FromStr;

use pulldown_cmark::{html, CowStr, Event, Options, Parser, Tag};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::alert::IncidentId;

/// Where the people working on an incident are, in the words status
/// pages use (Statuspage, Uptime Kuma, Gatus).
///
/// An update that names no state is `investigating`: the state an
/// incident is in until someone knows more.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum UpdateState {
    #[default]
    Investigating,
    Identified,
    Monitoring,
    Resolved,
}

impl UpdateState {
    pub const ALL: [UpdateState; 4] = [
        UpdateState::Investigating,
        UpdateState::Identified,
        UpdateState::Monitoring,
        UpdateState::Resolved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UpdateState::Investigating => "investigating",
            UpdateState::Identified => "identified",
            UpdateState::Monitoring => "monitoring",
            UpdateState::Resolved => "resolved",
        }
    }
}

impl fmt::Display for UpdateState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for UpdateState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UpdateState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown incident state {s:?}: use investigating, identified, monitoring or resolved"
                )
            })
    }
}

/// The longest text an update may carry, in bytes: a few paragraphs. The
/// status page is public, so what one update can put on it is bounded.
pub const MAX_TEXT: usize = 8 * 1024;

/// How many updates one incident keeps; an update past it is refused.
pub const MAX_PER_INCIDENT: usize = 50;

/// One update of one incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentUpdate {
    pub check: String,
    pub incident: IncidentId,
    /// The incident's first failed probe: the start the pages show, and
    /// where the update is kept beside the incident's other records.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// When the update was written.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub state: UpdateState,
    /// Markdown, as written.
    pub text: String,
}

impl IncidentUpdate {
    /// Why `text` cannot be an update's text, if it cannot.
    pub fn refuse_text(text: &str) -> Option<String> {
        if text.trim().is_empty() {
            return Some("an incident update needs text: say what is known".to_string());
        }
        if text.len() > MAX_TEXT {
            return Some(format!(
                "an incident update's text is {} bytes, more than the {MAX_TEXT} allowed: \
                 link to a longer write-up instead",
                text.len()
            ));
        }
        None
    }

    /// The text as HTML, safe to put in any page: raw HTML in the
    /// Markdown comes out escaped, as the characters that were typed.
    pub fn html(&self) -> String {
        markdown_html(&self.text)
    }
}

/// Markdown to HTML with raw HTML disabled: an HTML block or inline tag
/// becomes text, so `<script>` reads as `&lt;script&gt;`. A link keeps its
/// address only when it is http(s), mailto or on the same site: a
/// `javascript:` link would run on the reader's page.
pub fn markdown_html(text: &str) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let events = Parser::new_ext(text, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: safe_address(dest_url),
            title,
            id,
        }),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Image {
            link_type,
            dest_url: safe_address(dest_url),
            title,
            id,
        }),
        other => other,
    });
    let mut out = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

fn safe_address(address: CowStr<'_>) -> CowStr<'_> {
    let lower = address.trim_start().to_ascii_lowercase();
    let safe = ["http://", "https://", "mailto:", "/", "#"]
        .iter()
        .any(|prefix| lower.starts_with(prefix))
        || !lower.contains(':');
    match safe {
        true => address,
        false => CowStr::Borrowed("#"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_and_raw_html_is_text() {
        let out = markdown_html("**DNS** is broken, see [the ticket](https://example.com/1).\n\n<script>alert(1)</script>\n\nand <b>bold</b>");
        assert!(out.contains("<strong>DNS</strong>"), "{out}");
        assert!(
            out.contains(r#"<a href="https://example.com/1">the ticket</a>"#),
            "{out}"
        );
        assert!(
            out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{out}"
        );
        assert!(out.contains("&lt;b&gt;bold&lt;/b&gt;"), "{out}");
        assert!(!out.contains("<script>") && !out.contains("<b>"), "{out}");
    }

    #[test]
    fn only_web_and_mail_links_keep_their_address() {
        let out = markdown_html("[a](javascript:alert(1)) [b](JavaScript:x) [c](data:text/html,x) [d](mailto:ops@example.com) [e](/status)");
        assert!(!out.to_ascii_lowercase().contains("javascript"), "{out}");
        assert!(!out.contains("data:"), "{out}");
        assert!(out.contains(r#"href="mailto:ops@example.com""#), "{out}");
        assert!(out.contains(r#"href="/status""#), "{out}");
    }

    #[test]
    fn states_read_and_write_the_same_words() {
        for state in UpdateState::ALL {
            assert_eq!(state.as_str().parse::<UpdateState>(), Ok(state));
        }
        let err = "fixed".parse::<UpdateState>().unwrap_err();
        assert!(err.contains("investigating, identified"), "{err}");
    }

    #[test]
    fn empty_and_oversized_texts_are_refused() {
        assert!(IncidentUpdate::refuse_text("DNS fixed").is_none());
        assert!(IncidentUpdate::refuse_text(" \n")
            .unwrap()
            .contains("needs text"));
        let long = "x".repeat(MAX_TEXT + 1);
        assert!(IncidentUpdate::refuse_text(&long)
            .unwrap()
            .contains("more than the 8192 allowed"));
    }
}
