//! An outgoing message and its RFC 5322 form.
//!
//! Owns the headers every vigie message carries (`Date`, `From`, `To`,
//! `Message-ID`, `In-Reply-To`, `References`, `Auto-Submitted`) and the
//! multipart/alternative layout (text first, HTML second, as RFC 2046
//! orders "plainest first"). It does not decide the words: the alert
//! renderer fills [`Email`].

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use lettre::address::Envelope;
use lettre::message::header::{Header, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::extension::ClientId;
use lettre::Message;
use time::OffsetDateTime;

use crate::alert::Email;

/// A message ready for the wire.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub envelope: Envelope,
    /// CRLF line endings, 7-bit (lettre encodes non-ASCII text as
    /// quoted-printable or base64, headers as RFC 2047 words).
    pub bytes: Vec<u8>,
}

/// RFC 3834: tells vacation responders and ticket systems not to answer,
/// so an alert never starts a mail loop with an auto-reply.
#[derive(Debug, Clone, Copy)]
struct AutoSubmitted;

impl Header for AutoSubmitted {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("Auto-Submitted")
    }

    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(AutoSubmitted)
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), "auto-generated".to_owned())
    }
}

/// Builds the wire form. `date` is when the message was enqueued (when the
/// alert happened), not when a retry finally got it out. An error means the
/// message can never be sent as it is (a malformed recipient): the caller
/// gives it up rather than retrying.
pub(crate) fn render(
    msg: &Email,
    from: &Mailbox,
    default_to: &[Mailbox],
    date: OffsetDateTime,
) -> Result<Rendered, String> {
    let to = recipients(msg, default_to)?;
    let mut builder = Message::builder()
        .from(from.clone())
        .subject(msg.subject.clone())
        .date(SystemTime::from(date))
        .message_id(Some(angle(&msg.message_id)))
        .header(AutoSubmitted);
    for mailbox in to {
        builder = builder.to(mailbox);
    }
    if let Some(parent) = &msg.in_reply_to {
        builder = builder.in_reply_to(angle(parent));
    }
    if !msg.references.is_empty() {
        let refs: Vec<String> = msg.references.iter().map(|r| angle(r)).collect();
        builder = builder.references(refs.join(" "));
    }
    let built = if msg.html.is_empty() {
        builder.singlepart(SinglePart::plain(msg.text.clone()))
    } else {
        builder.multipart(MultiPart::alternative_plain_html(
            msg.text.clone(),
            msg.html.clone(),
        ))
    };
    let message = built.map_err(|e| format!("cannot build message {}: {e}", msg.message_id))?;
    Ok(Rendered {
        envelope: message.envelope().clone(),
        bytes: message.formatted(),
    })
}

/// The message's own recipients, else the configured ones.
fn recipients(msg: &Email, default_to: &[Mailbox]) -> Result<Vec<Mailbox>, String> {
    if msg.to.is_empty() {
        if default_to.is_empty() {
            return Err("no recipients: the message names none and [alerting] to is empty".into());
        }
        return Ok(default_to.to_vec());
    }
    msg.to
        .iter()
        .map(|to| {
            to.parse::<Mailbox>()
                .map_err(|e| format!("recipient {to:?} is not a mailbox: {e}"))
        })
        .collect()
}

/// `<id>`: Message-ID and friends are written with angle brackets; the
/// renderer may give them bare.
fn angle(id: &str) -> String {
    let id = id.trim();
    if id.starts_with('<') && id.ends_with('>') {
        id.to_owned()
    } else {
        format!("<{}>", id.trim_matches(['<', '>']))
    }
}

/// This machine's name, as lettre sends it in EHLO.
/// This machine's name, as mails and Message-IDs show it.
pub fn hostname() -> String {
    match ClientId::default() {
        ClientId::Domain(name) => name,
        other => other.to_string(),
    }
}

/// `<kind.millis.random@host>`: unique without a random-number crate: the
/// std hasher is seeded randomly per `RandomState`, and a counter separates
/// ids made in the same millisecond.
pub(crate) fn new_message_id(kind: &str, now: OffsetDateTime) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(SEQ.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let millis = now.unix_timestamp_nanos() / 1_000_000;
    format!(
        "<vigie.{kind}.{millis}.{:016x}@{}>",
        hasher.finish(),
        hostname()
    )
}

/// `vigie <vigie@HOST>`: where mail comes from when `[alerting] from` is
/// not set, like cron's `user@host`.
pub(crate) fn default_from() -> Result<Mailbox, String> {
    let host = hostname();
    lettre::Address::new("vigie", &host)
        .or_else(|_| lettre::Address::new("vigie", "localhost"))
        .map(|address| Mailbox::new(Some("vigie".to_owned()), address))
        .map_err(|e| format!("cannot make a From address from this host's name {host:?}: {e}; set [alerting] from"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn message() -> Email {
        Email {
            subject: "[vigie] DOWN site: certificate expired 2 days ago".into(),
            text: "site is down\n".into(),
            html: "<p>site is down</p>".into(),
            message_id: "down.1@vigie.test".into(),
            in_reply_to: Some("<down.0@vigie.test>".into()),
            references: vec!["root@vigie.test".into(), "<down.0@vigie.test>".into()],
            to: vec!["On Call <oncall@example.com>".into()],
        }
    }

    fn text(rendered: &Rendered) -> String {
        String::from_utf8(rendered.bytes.clone()).unwrap()
    }

    #[test]
    fn headers_thread_and_suppress_auto_replies() {
        let from: Mailbox = "vigie <vigie@example.com>".parse().unwrap();
        let rendered = render(&message(), &from, &[], datetime!(2026-11-29 07:00:00 UTC)).unwrap();
        let text = text(&rendered);
        for header in [
            "From: vigie <vigie@example.com>\r\n",
            "To: \"On Call\" <oncall@example.com>\r\n",
            "Message-ID: <down.1@vigie.test>\r\n",
            "In-Reply-To: <down.0@vigie.test>\r\n",
            "References: <root@vigie.test> <down.0@vigie.test>\r\n",
            "Auto-Submitted: auto-generated\r\n",
            "Date: Sun, 29 Nov 2026 07:00:00 +0000\r\n",
            "Content-Type: multipart/alternative;",
        ] {
            assert!(text.contains(header), "{header:?} missing from:\n{text}");
        }
        let plain = text.find("Content-Type: text/plain").unwrap();
        let html = text.find("Content-Type: text/html").unwrap();
        assert!(plain < html, "text part first");
        assert_eq!(
            rendered
                .envelope
                .to()
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>(),
            ["oncall@example.com"]
        );
        assert!(rendered.bytes.is_ascii(), "7-bit on the wire");
    }

    #[test]
    fn configured_recipients_when_the_message_names_none() {
        let from: Mailbox = "vigie@example.com".parse().unwrap();
        let team: Mailbox = "team@example.com".parse().unwrap();
        let msg = Email {
            to: vec![],
            html: String::new(),
            ..message()
        };
        let rendered = render(&msg, &from, &[team], OffsetDateTime::UNIX_EPOCH).unwrap();
        assert!(text(&rendered).contains("To: team@example.com\r\n"));
        assert!(text(&rendered).contains("Content-Type: text/plain"));
        let err = render(&msg, &from, &[], OffsetDateTime::UNIX_EPOCH).unwrap_err();
        assert!(err.contains("no recipients"), "{err}");
    }

    #[test]
    fn malformed_recipient_is_named() {
        let from: Mailbox = "vigie@example.com".parse().unwrap();
        let msg = Email {
            to: vec!["not an address".into()],
            ..message()
        };
        let err = render(&msg, &from, &[], OffsetDateTime::UNIX_EPOCH).unwrap_err();
        assert!(err.contains("\"not an address\""), "{err}");
    }

    #[test]
    fn unicode_subjects_are_encoded() {
        let from: Mailbox = "vigie@example.com".parse().unwrap();
        let msg = Email {
            subject: "[vigie] DOWN café: échec".into(),
            text: "réponse 503\n".into(),
            ..message()
        };
        let rendered = render(&msg, &from, &[], OffsetDateTime::UNIX_EPOCH).unwrap();
        assert!(rendered.bytes.is_ascii());
        assert!(
            text(&rendered).contains("Subject: [vigie] DOWN =?utf-8?b?"),
            "{}",
            text(&rendered)
        );
    }

    #[test]
    fn message_ids_are_unique_and_bracketed() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let (a, b) = (new_message_id("test", now), new_message_id("test", now));
        assert_ne!(a, b);
        assert!(a.starts_with("<vigie.test.0.") && a.ends_with('>'), "{a}");
        assert_eq!(angle("x@y"), "<x@y>");
        assert_eq!(angle("<x@y>"), "<x@y>");
        assert_eq!(angle(" <x@y "), "<x@y>");
    }
}
