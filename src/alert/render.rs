//! The words of alert mails: [`Email`] (the hand-off to `mail/`) and the
//! pure rendering of a [`Notification`] into subject, threading headers,
//! plain text and HTML.
//!
//! One check's event reads the same alone or inside a grouped mail; the
//! subject is what differs ("DOWN site: cause" vs "3 checks DOWN: site,
//! app, api"). Layout and escaping are `layout.rs`'s.
//!
//! Not here: the `From` and `Date` headers, `Auto-Submitted`, MIME
//! assembly and delivery (`mail/`).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::event::{Event, EventKind, Snapshot};
use super::group::Notification;
use super::layout::{days_left, escape, html, one_line, text, Block, Doc, Item, Tone};
use crate::cert::CertInfo;
use crate::outcome::Status;
use crate::when::minute;
use crate::when::span;

/// One mail, ready for delivery. `mail/` turns it into a multipart
/// (text + HTML) message with `From`, `Date` and `Auto-Submitted:
/// auto-generated` added; `message_id`, `in_reply_to` and each of
/// `references` are complete header values, angle brackets included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Email {
    pub subject: String,
    pub text: String,
    pub html: String,
    pub message_id: String,
    pub in_reply_to: Option<String>,
    /// Oldest first, as the `References` header lists them.
    pub references: Vec<String>,
    pub to: Vec<String>,
}

impl Email {
    /// Says at the top of the text and HTML parts that this message was
    /// sent from memory, the outbox having refused it for `why`: it is
    /// lost if vigie stops before the server accepts it.
    pub fn mark_not_durable(&mut self, why: &str) {
        let note = format!(
            "NOT DURABLE: vigie could not write this alert to its outbox ({why}); it was sent from memory and is lost if vigie stops before the mail server accepts it."
        );
        self.text = format!("{note}\n\n{}", self.text);
        if self.html.is_empty() {
            return;
        }
        let html_note = format!("<p><strong>{}</strong></p>", escape(&note));
        self.html = match self.html.find("<body>") {
            Some(at) => {
                let (head, body) = self.html.split_at(at + "<body>".len());
                format!("{head}{html_note}{body}")
            }
            None => format!("{html_note}{}", self.html),
        };
    }
}

/// At most this many check names in a subject; the rest are counted.
const SUBJECT_NAMES: usize = 5;

/// The mail for a closed group of events. `host` names the machine vigie
/// runs on (in the network alert, the signature and the Message-IDs).
/// `written`: the mail's `Date` (when it is queued), from which "ago" is
/// measured.
pub fn notification(n: &Notification, host: &str, written: OffsetDateTime) -> Email {
    let doc = notification_doc(n, host, written);
    let (in_reply_to, references) = threading(&n.events);
    Email {
        subject: one_line(&subject(n, host)),
        text: text(&doc),
        html: html(&doc),
        message_id: message_id(n, host),
        in_reply_to,
        references,
        to: n.to.clone(),
    }
}

/// `<vigie.down.site_2026-11-29T07_00_30_000Z@host>`: the kind and the
/// first event's incident (and reminder number) make it unique, since an
/// incident is announced once, reminded once per number and resolved once,
/// and each event is in exactly one mail. Being derived, it is the same if
/// the mail is rendered again. With vantages, the incident is the fleet's
/// key (`<vigie.resolved.site_20261129T070030Z@host>`): a node that saw
/// two of the fleet's incidents as one of its own still sends each
/// RESOLVED under a Message-ID of its own.
pub fn message_id(n: &Notification, host: &str) -> String {
    let kind = match n.kind {
        EventKind::Down => "down".to_string(),
        EventKind::Reminder => format!("reminder{}", n.events.first().map_or(0, |e| e.reminder)),
        EventKind::Resolved => "resolved".to_string(),
        EventKind::Warn => "warn".to_string(),
        EventKind::WarnResolved => "warn-resolved".to_string(),
    };
    let incident = n
        .events
        .first()
        .map(|e| atom(&e.push_key()))
        .unwrap_or_default();
    format!("<vigie.{kind}.{incident}@{}>", domain(host))
}

/// `In-Reply-To` is the latest mail about the first incident; `References`
/// every earlier mail about every incident in the group, so that a client
/// threads a grouped RESOLVED under each DOWN it closes.
fn threading(events: &[Event]) -> (Option<String>, Vec<String>) {
    let in_reply_to = events.first().and_then(|e| e.thread.last().cloned());
    let mut references: Vec<String> = Vec::new();
    for id in events.iter().flat_map(|e| &e.thread) {
        if !references.contains(id) {
            references.push(id.clone());
        }
    }
    (in_reply_to, references)
}

/// The subject line of `n`'s mail, as the mail carries it.
pub fn subject_line(n: &Notification, host: &str) -> String {
    one_line(&subject(n, host))
}

/// The subject says state, check and cause, so that the inbox list alone
/// tells whether to get up.
fn subject(n: &Notification, host: &str) -> String {
    if n.is_network() {
        return match n.kind {
            EventKind::Down => format!("[vigie] DOWN vigie cannot reach the network from {host}"),
            EventKind::Reminder => {
                format!("[vigie] STILL DOWN vigie cannot reach the network from {host}")
            }
            EventKind::Resolved => {
                format!("[vigie] RESOLVED vigie can reach the network again from {host}")
            }
            // The network alert is up or down; never a warn.
            EventKind::Warn | EventKind::WarnResolved => {
                format!("[vigie] {} vigie's network from {host}", n.kind.word())
            }
        };
    }
    match n.events.as_slice() {
        [one] => single_subject(one),
        events => format!(
            "[vigie] {} checks {}: {}",
            events.len(),
            n.kind.word(),
            names(events)
        ),
    }
}

fn single_subject(e: &Event) -> String {
    match e.kind {
        EventKind::Down => format!("[vigie] DOWN {}: {}", e.check, headline(e)),
        EventKind::Reminder => format!(
            "[vigie] STILL DOWN {} for {}: {}",
            e.check,
            span(e.at - e.since),
            headline(e)
        ),
        EventKind::Resolved => format!(
            "[vigie] RESOLVED {} after {}",
            e.check,
            span(resolved_at(e) - e.since)
        ),
        EventKind::Warn => format!("[vigie] WARN {}: {}", e.check, headline(e)),
        EventKind::WarnResolved => format!("[vigie] WARN RESOLVED {}: {}", e.check, warn_end(e)),
    }
}

/// How a warn episode ended: "up again after 2h 10m", or "superseded by
/// DOWN" when an incident opened.
fn warn_end(e: &Event) -> String {
    match e.latest.status {
        Status::Down => "superseded by DOWN".to_string(),
        _ => format!("up again after {}", span(resolved_at(e) - e.since)),
    }
}

/// "site, app, uploads-cors", or "a, b, c, d, e and 3 more".
fn names(events: &[Event]) -> String {
    let shown: Vec<&str> = events
        .iter()
        .take(SUBJECT_NAMES)
        .map(|e| e.check.as_str())
        .collect();
    match events.len().saturating_sub(SUBJECT_NAMES) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// What the latest probe says, in one sentence. A probe vigie could not
/// judge (blind) says so first: its message is about vigie's network, not
/// about the target.
fn headline(e: &Event) -> String {
    let said = e
        .latest
        .headline()
        .or_else(|| e.first_failure.headline())
        .unwrap_or("failing");
    match e.latest_unknown {
        true => format!("unknown (vigie blind): {said}"),
        false => said.to_string(),
    }
}

/// When the recovery completed; only RESOLVED events carry it, and the
/// event's own time is the next best answer.
fn resolved_at(e: &Event) -> OffsetDateTime {
    e.resolved_at.unwrap_or(e.at)
}

fn notification_doc(n: &Notification, host: &str, written: OffsetDateTime) -> Doc {
    let tone = match n.kind {
        EventKind::Down => Tone::Alarm,
        EventKind::Reminder => Tone::Reminder,
        EventKind::Resolved => Tone::Resolved,
        EventKind::Warn => Tone::Neutral,
        EventKind::WarnResolved => Tone::Resolved,
    };
    let mut doc = Doc {
        title: String::new(),
        tone,
        blocks: Vec::new(),
        footer: vec![format!("vigie on {host}")],
    };
    // vigie's own alert is about vigie, not a check: no target, no chain,
    // and a word on what blindness does to the checks' alerts.
    if n.is_network() {
        doc.title = network_title(n.kind, host);
        for e in &n.events {
            network_blocks(e, written, &mut doc.blocks);
        }
        return doc;
    }
    match n.events.as_slice() {
        [one] => {
            doc.title = event_title(one);
            event_blocks(one, written, &mut doc.blocks);
        }
        events => {
            doc.title = format!(
                "{} checks {}: {}",
                events.len(),
                n.kind.word(),
                events
                    .iter()
                    .map(|e| e.check.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for e in events {
                doc.blocks.push(Block::Section(event_title(e)));
                event_blocks(e, written, &mut doc.blocks);
            }
        }
    }
    doc
}

fn event_title(e: &Event) -> String {
    match e.kind {
        EventKind::Down => format!("{} is DOWN: {}", e.check, headline(e)),
        EventKind::Reminder => format!(
            "{} is STILL DOWN after {}: {}",
            e.check,
            span(e.at - e.since),
            headline(e)
        ),
        EventKind::Resolved => format!(
            "{} is up again (RESOLVED) after {}",
            e.check,
            span(resolved_at(e) - e.since)
        ),
        EventKind::Warn => format!("{} is WARN: {}", e.check, headline(e)),
        EventKind::WarnResolved => format!("{} WARN RESOLVED: {}", e.check, warn_end(e)),
    }
}

/// The body about one check's event.
fn event_blocks(e: &Event, written: OffsetDateTime, blocks: &mut Vec<Block>) {
    blocks.push(Block::Fields(summary_fields(e, written)));
    if let Some(words) = &e.vantage {
        blocks.push(Block::Para(format!("Vantages: {words}.")));
    }
    if let Some(held) = &e.held {
        blocks.push(Block::Para(format!(
            "Held since {} by {}; still down now that the hold is over.",
            minute(held.since),
            held.by
        )));
    }
    let shown = &e.latest;
    if !shown.failures.is_empty() {
        let heading = match (e.kind, e.latest_unknown) {
            // Not down any more, but a warning (which never pages) should
            // not hide behind the good news.
            (EventKind::Resolved, _) => format!(
                "Still warning, which does not page (probe of {})",
                minute(shown.started_at)
            ),
            (_, true) => format!(
                "Latest probe ({}): unknown, vigie could not reach the network",
                minute(shown.started_at)
            ),
            (_, false) => format!("What failed (probe of {})", minute(shown.started_at)),
        };
        blocks.push(Block::Heading(heading));
        blocks.push(Block::Items(failure_items(shown)));
    }
    if e.kind == EventKind::Resolved {
        blocks.push(Block::Heading("The incident began with".to_string()));
        blocks.push(Block::Items(failure_items(&e.first_failure)));
    }
    // After a recovery the chain matters only if the incident was about
    // it: then the new chain is the proof of the fix.
    let about_tls = e
        .first_failure
        .failures
        .iter()
        .any(|f| f.assertion.as_str().starts_with("tls."));
    if !shown.chain.is_empty() && (e.kind != EventKind::Resolved || about_tls) {
        blocks.push(Block::Heading("Certificate chain as served".to_string()));
        blocks.push(Block::Items(chain_items(&shown.chain, e.at)));
    }
}

fn summary_fields(e: &Event, written: OffsetDateTime) -> Vec<(String, String)> {
    let mut fields = vec![field("check", &e.check), field("target", &e.latest.target)];
    match e.kind {
        EventKind::Resolved => {
            let end = resolved_at(e);
            fields.push(field(
                "down",
                &format!(
                    "from {} to {} ({})",
                    minute(e.since),
                    minute(end),
                    span(end - e.since)
                ),
            ));
            fields.push(field("failed probes", &e.failed_probes.to_string()));
            fields.push(field("now", &now_status(&e.latest)));
        }
        EventKind::WarnResolved => {
            let end = resolved_at(e);
            fields.push(field(
                "warn",
                &format!(
                    "from {} to {} ({})",
                    minute(e.since),
                    minute(end),
                    span(end - e.since)
                ),
            ));
            fields.push(field("now", &now_status(&e.latest)));
        }
        EventKind::Warn => {
            fields.push(field(
                "warn since",
                &format!(
                    "{} ({})",
                    minute(e.since),
                    crate::when::ago(e.since, written)
                ),
            ));
            fields.push(field(
                "warn probes",
                &format!("{} in a row", e.consecutive_failures),
            ));
        }
        EventKind::Down | EventKind::Reminder => {
            fields.push(field(
                "down since",
                &format!(
                    "{} ({})",
                    minute(e.since),
                    crate::when::ago(e.since, written)
                ),
            ));
            let probes = match e.failed_probes == e.consecutive_failures {
                true => format!("{} in a row", e.consecutive_failures),
                false => format!(
                    "{} in a row, {} since it began",
                    e.consecutive_failures, e.failed_probes
                ),
            };
            fields.push(field("failed probes", &probes));
            // Only worth a line when the cause has changed since.
            let first = e.first_failure.headline();
            if first != e.latest.headline() {
                fields.push(field(
                    "first failure",
                    &format!(
                        "{}: {}",
                        minute(e.first_failure.started_at),
                        first.unwrap_or("failing")
                    ),
                ));
            }
        }
    }
    // The last success before a RESOLVED is the recovery itself; the
    // "down from ... to ..." line already says it.
    if e.kind != EventKind::Resolved {
        fields.push(field(
            "last success",
            &match e.last_success {
                Some(t) => minute(t),
                None => "never seen up".to_string(),
            },
        ));
    }
    if !e.labels.is_empty() {
        let labels: Vec<String> = e.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        fields.push(field("labels", &labels.join(", ")));
    }
    if e.kind == EventKind::Reminder {
        fields.push(field("reminder", &e.reminder.to_string()));
    }
    fields.push(field("incident", e.incident.as_str()));
    fields
}

/// "up", or "warn: renewal looks stuck..." (a warning does not page, but
/// the RESOLVED mail should not hide it).
fn now_status(s: &Snapshot) -> String {
    match (s.status, s.headline()) {
        (Status::Up, _) | (_, None) => s.status.to_string(),
        (status, Some(headline)) => format!("{status}: {headline}"),
    }
}

fn failure_items(s: &Snapshot) -> Vec<Item> {
    s.failures
        .iter()
        .map(|f| Item {
            title: format!("{}: {}", f.assertion, f.message),
            fields: vec![
                field("expected", &f.expected),
                field("observed", &f.observed),
            ],
        })
        .collect()
}

fn chain_items(chain: &[CertInfo], now: OffsetDateTime) -> Vec<Item> {
    chain
        .iter()
        .enumerate()
        .map(|(i, c)| Item {
            title: format!("{}. {}", i + 1, c.subject),
            fields: vec![
                field("issuer", &c.issuer),
                field(
                    "not after",
                    &format!("{} ({})", minute(c.not_after), days_left(c.not_after, now)),
                ),
            ],
        })
        .collect()
}

fn network_title(kind: EventKind, host: &str) -> String {
    match kind {
        EventKind::Down => format!("vigie cannot reach the network from {host}"),
        EventKind::Reminder => format!("vigie still cannot reach the network from {host}"),
        EventKind::Resolved => format!("vigie can reach the network again from {host}"),
        EventKind::Warn | EventKind::WarnResolved => format!("vigie's network from {host}"),
    }
}

fn network_blocks(e: &Event, written: OffsetDateTime, blocks: &mut Vec<Block>) {
    let mut fields = vec![field("canaries", &e.latest.target)];
    match e.kind {
        EventKind::Resolved => {
            let end = resolved_at(e);
            fields.push(field(
                "blind",
                &format!(
                    "from {} to {} ({})",
                    minute(e.since),
                    minute(end),
                    span(end - e.since)
                ),
            ));
        }
        EventKind::Down | EventKind::Reminder | EventKind::Warn | EventKind::WarnResolved => {
            fields.push(field(
                "blind since",
                &format!(
                    "{} ({})",
                    minute(e.since),
                    crate::when::ago(e.since, written)
                ),
            ));
        }
    }
    fields.push(field("incident", e.incident.as_str()));
    blocks.push(Block::Fields(fields));
    if e.kind == EventKind::Resolved {
        blocks.push(Block::Para(
            "Check failures are judged as usual again.".to_string(),
        ));
        return;
    }
    blocks.push(Block::Para(
        "Every canary failed to get an answer. While vigie is blind, check failures caused by \
         DNS, connection errors or timeouts are recorded as \"unknown (vigie blind)\" and do \
         not page; checks that still get an answer are judged as usual."
            .to_string(),
    ));
    blocks.push(Block::Heading("What the canaries met".to_string()));
    blocks.push(Block::Items(failure_items(&e.latest)));
}

fn field(key: &str, value: &str) -> (String, String) {
    (key.to_string(), value.to_string())
}

/// A Message-ID part: letters, digits, `-` and `_` only, so that no check
/// or host name can break the header's dot-atom syntax.
fn atom(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '-' | '_' => c,
            _ => '_',
        })
        .collect()
}

/// The right-hand side of a Message-ID: the host's name, dots allowed
/// between labels.
pub fn domain(host: &str) -> String {
    let labels: Vec<String> = host
        .split('.')
        .filter(|l| !l.is_empty())
        .map(atom)
        .collect();
    match labels.is_empty() {
        true => "vigie.invalid".to_string(),
        false => labels.join("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::testing::{event, T0};

    #[test]
    fn message_ids_keep_to_the_header_syntax() {
        let mut e = event(EventKind::Down, "a..b");
        e.incident = crate::alert::IncidentId::new("a..b", T0);
        let n = Notification {
            kind: EventKind::Down,
            to: e.to.clone(),
            events: vec![e],
            opened: T0,
        };
        assert_eq!(
            message_id(&n, "probe-1.example.net"),
            "<vigie.down.a__b_2026-11-29T07_00_00_000Z@probe-1.example.net>"
        );
        assert_eq!(domain("..bad host.."), "bad_host");
        assert_eq!(domain(""), "vigie.invalid");
    }

    #[test]
    fn with_vantages_the_message_id_is_the_fleets_incident_not_this_nodes() {
        // One incident on this node since :48, two in the fleet: the
        // RESOLVED of each is a mail of its own.
        let resolved_under = |key: &str| {
            let mut e = event(EventKind::Resolved, "site-1");
            e.fleet_key = Some(format!("site-1@{key}"));
            let n = Notification {
                kind: EventKind::Resolved,
                to: e.to.clone(),
                events: vec![e],
                opened: T0,
            };
            message_id(&n, "fra.example.net")
        };
        assert_eq!(
            resolved_under("20261129T070048Z"),
            "<vigie.resolved.site-1_20261129T070048Z@fra.example.net>"
        );
        assert_ne!(
            resolved_under("20261129T070048Z"),
            resolved_under("20261129T070112Z")
        );
    }

    #[test]
    fn a_subject_names_at_most_five_checks() {
        let events: Vec<Event> = ["a", "b", "c", "d", "e", "f", "g"]
            .iter()
            .map(|c| event(EventKind::Down, c))
            .collect();
        let n = Notification {
            kind: EventKind::Down,
            to: Vec::new(),
            events,
            opened: T0,
        };
        assert_eq!(
            subject(&n, "h"),
            "[vigie] 7 checks DOWN: a, b, c, d, e and 2 more"
        );
    }

    #[test]
    fn a_header_cannot_be_forged_through_a_failure_message() {
        let mut e = event(EventKind::Down, "site");
        e.latest.failures[0].message = "boom\r\nBcc: victim@example.com".to_string();
        let n = Notification {
            kind: EventKind::Down,
            to: e.to.clone(),
            events: vec![e],
            opened: T0,
        };
        let email = notification(&n, "h", n.opened);
        assert!(!email.subject.contains(['\r', '\n']));
        assert!(!email.text.contains("\nBcc:"));
    }

    fn page() -> Email {
        Email {
            subject: "[vigie] DOWN site".into(),
            text: "site is down\n".into(),
            html: "<p>site is down</p>".into(),
            message_id: "<down.1@vigie.test>".into(),
            in_reply_to: None,
            references: vec![],
            to: vec![],
        }
    }

    #[test]
    fn a_message_sent_from_memory_says_so_in_both_parts() {
        let mut m = page();
        m.mark_not_durable("No space left on device <disk>");
        assert!(m.text.starts_with("NOT DURABLE: vigie could not write this alert to its outbox (No space left on device <disk>)"), "{}", m.text);
        assert!(m.text.ends_with("site is down\n"));
        assert!(m.html.starts_with("<p><strong>NOT DURABLE:"), "{}", m.html);
        assert!(m.html.contains("&lt;disk&gt;"), "escaped: {}", m.html);
        let mut page = page();
        page.html = "<html><body><p>site is down</p></body></html>".into();
        page.mark_not_durable("EIO");
        assert!(
            page.html.starts_with("<html><body><p><strong>NOT DURABLE"),
            "{}",
            page.html
        );
    }
}
