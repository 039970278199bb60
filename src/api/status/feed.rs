//! `/status/feed.atom`: the public incidents as an Atom feed (RFC 4287),
//! one entry per incident with its updates, built with `atom_syndication`.
//! Entry ids are stable (`urn:vigie:incident:<check>:<start>`), so a feed
//! reader shows an incident once and marks it changed as updates come.

use atom_syndication::{Content, Entry, Feed, Link, Person, Text};
use time::OffsetDateTime;

use super::view::{PublicIncident, PublicStatus};
use crate::clock::to_chrono;
use crate::when::minute;

/// The feed; `base` is `[api] public_url` when set, for absolute links.
pub fn feed(status: &PublicStatus, base: Option<&str>) -> String {
    let base = base.map(|b| b.trim_end_matches('/')).unwrap_or("");
    let mut feed = Feed::default();
    feed.set_title(Text::plain(format!("{}: incidents", status.title)));
    feed.set_id(format!("{base}/status/feed.atom"));
    feed.set_updated(at(status
        .incidents
        .iter()
        .map(PublicIncident::updated)
        .max()
        .unwrap_or(status.now)));
    let mut author = Person::default();
    author.set_name(status.title.clone());
    feed.set_authors(vec![author]);
    feed.set_links(vec![
        link(&format!("{base}/status"), "alternate", "text/html"),
        link(
            &format!("{base}/status/feed.atom"),
            "self",
            "application/atom+xml",
        ),
    ]);
    feed.set_entries(
        status
            .incidents
            .iter()
            .map(|i| entry(i, base))
            .collect::<Vec<_>>(),
    );
    feed.to_string()
}

fn entry(incident: &PublicIncident, base: &str) -> Entry {
    let mut entry = Entry::default();
    entry.set_id(format!(
        "urn:vigie:incident:{}:{}",
        incident.check,
        incident.start.unix_timestamp()
    ));
    let state = match incident.end {
        None => "ongoing".to_string(),
        Some(end) => format!("resolved {}", minute(end)),
    };
    entry.set_title(Text::plain(format!(
        "{}: incident since {} ({state})",
        incident.check,
        minute(incident.start)
    )));
    entry.set_published(Some(at(incident.start)));
    entry.set_updated(at(incident.updated()));
    entry.set_links(vec![link(
        &format!("{base}/status"),
        "alternate",
        "text/html",
    )]);
    let mut content = Content::default();
    content.set_content_type(Some("html".to_string()));
    content.set_value(Some(content_html(incident)));
    entry.set_content(Some(content));
    entry
}

/// The updates, newest first, as HTML (already escaped Markdown output).
fn content_html(incident: &PublicIncident) -> String {
    if incident.updates.is_empty() {
        return "<p>No update written yet.</p>".to_string();
    }
    incident
        .updates
        .iter()
        .rev()
        .map(|u| {
            format!(
                "<p><strong>{}</strong> · {}</p>{}",
                u.state.as_str(),
                minute(u.at),
                u.html
            )
        })
        .collect()
}

fn link(href: &str, rel: &str, mime: &str) -> Link {
    let mut link = Link::default();
    link.set_href(href);
    link.set_rel(rel);
    link.set_mime_type(Some(mime.to_string()));
    link
}

fn at(t: OffsetDateTime) -> atom_syndication::FixedDateTime {
    to_chrono(t).fixed_offset()
}
