//! Mail delivery: the durable outbox, the sender task that drains it over
//! SMTP (lettre) or into a local Maildir, and `vigie test-email`.
//!
//! This module owns *getting a message to a mail server and knowing it got
//! there*. It does not decide what to send or to whom (the alert engine and
//! its renderer do: they hand over an [`Email`]), and it does not
//! parse configuration (`config` gives a validated [`SmtpConfig`]).
//!
//! - `outbox.rs`: the store's outbox records (`store::OutboxStore`, in the
//!   same database as the history, so an alert state change and the
//!   message it causes commit in one transaction:
//!   `store::AlertStore::commit`), with the sender's wake-up signal and
//!   the backlog counters on top.
//! - `sender.rs`: the task that drains the outbox: retries with capped
//!   exponential backoff (persisted), dead letters for permanent
//!   rejections, and the counters `/metrics` and `/healthz` read
//!   ([`MailStats`]).
//! - `smtp.rs`: one SMTP session: TCP, STARTTLS or implicit TLS with
//!   vigie's own rustls configuration, AUTH, timeouts, and the
//!   classification of every failure (retry the server later, retry this
//!   message later, or give this message up).
//! - `maildir.rs`: the fallback without `[smtp]`: real Maildir files.
//! - `message.rs`: [`Email`] -> RFC 5322 bytes (multipart
//!   text + HTML, threading headers, `Auto-Submitted`).
//!
//! The one guarantee: a message leaves the outbox only after the SMTP
//! server answered 250 to it (or its Maildir file was renamed into `new/`),
//! or after a permanent rejection moved it to `dead_letters`. Delivery is
//! at least once: a crash between the server's acceptance and the removal
//! reaching the disk sends that one message again at restart, with the same
//! `Message-ID` (mail clients show it once).
//!
//! [`SmtpConfig`]: crate::config::SmtpConfig

mod maildir;
mod message;
mod outbox;
mod sender;
mod smtp;
mod stats;

use std::path::PathBuf;

use lettre::message::Mailbox;

use crate::alert::Email;
use crate::clock::Clock;
use crate::config::Config;
use crate::store::StoreError;

pub use self::maildir::{Maildir, MaildirError};
pub use self::message::hostname;
pub use self::outbox::Outbox;
pub use self::sender::{Backoff, Delivery, Sender, SenderHandle};
pub use self::smtp::{DeliveryError, Failure, Session, SmtpTransport, Stage, DEFAULT_TIMEOUT};
pub use self::stats::{MailSnapshot, MailStats};

/// Problems of the mail machinery itself (not of one delivery attempt,
/// which is a [`DeliveryError`] inside [`MailError::Delivery`]).
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot read smtp.ca_file / extra_ca_file {}: {detail} (it must hold PEM certificates)", path.display())]
    CaFile { path: PathBuf, detail: String },
    #[error("cannot prepare the message: {0}")]
    Message(String),
    #[error(
        "no recipients: set `to` in [alerting] of {} (test-email sends there)",
        config.display()
    )]
    NoRecipients { config: PathBuf },
    #[error("{0}")]
    Delivery(#[from] DeliveryError),
}

/// What `vigie test-email` did, for printing.
#[derive(Debug, Clone)]
pub struct TestReport {
    /// How the message went: `smtp 127.0.0.1:587 (STARTTLS, TLSv1_3,
    /// authenticated as vigie)` or `maildir /var/lib/vigie/maildir`.
    pub via: String,
    pub from: String,
    pub to: Vec<String>,
    pub message_id: String,
    /// The server's final reply (`250 2.0.0 Ok: queued as ...`), or the
    /// Maildir file written.
    pub outcome: String,
}

impl std::fmt::Display for TestReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "sent a test message via {}", self.via)?;
        writeln!(f, "  from:       {}", self.from)?;
        writeln!(f, "  to:         {}", self.to.join(", "))?;
        writeln!(f, "  message-id: {}", self.message_id)?;
        write!(f, "  result:     {}", self.outcome)
    }
}

/// `vigie test-email`: builds the configured delivery, sends one message to
/// `[alerting] to` right now (not through the outbox: the daemon may hold
/// the store), and says exactly what happened, or at which step and why it
/// failed.
pub async fn send_test(config: &Config, clock: &dyn Clock) -> Result<TestReport, MailError> {
    let delivery = Delivery::from_config(config)?;
    if delivery.default_to().is_empty() {
        return Err(MailError::NoRecipients {
            config: config.path.clone(),
        });
    }
    let now = clock.now();
    let host = message::hostname();
    let message = Email {
        subject: format!("[vigie] test message from {host}"),
        text: test_text(&host, &delivery.describe()),
        html: test_html(&host, &delivery.describe()),
        message_id: message::new_message_id("test", now),
        in_reply_to: None,
        references: Vec::new(),
        to: Vec::new(),
    };
    let accepted = delivery.send_now(&message, now).await?;
    Ok(TestReport {
        via: accepted.via,
        from: delivery.from().to_string(),
        to: delivery
            .default_to()
            .iter()
            .map(Mailbox::to_string)
            .collect(),
        message_id: message.message_id,
        outcome: accepted.outcome,
    })
}

fn test_text(host: &str, via: &str) -> String {
    format!(
        "This is a test message from vigie on {host}.\n\n\
         It was sent by `vigie test-email` via {via}.\n\
         If you can read it, alerts will reach you the same way.\n"
    )
}

fn test_html(host: &str, via: &str) -> String {
    let (host, via) = (
        crate::alert::escape_html(host),
        crate::alert::escape_html(via),
    );
    format!(
        "<!DOCTYPE html><html><body>\
         <p>This is a test message from vigie on <b>{host}</b>.</p>\
         <p>It was sent by <code>vigie test-email</code> via {via}.<br>\
         If you can read it, alerts will reach you the same way.</p>\
         </body></html>"
    )
}

/// Sends `message` now through the configured delivery, not through the
/// outbox (the daemon may hold the store): `vigie report --send`. Returns
/// how it went, e.g. `smtp 127.0.0.1:587 (...): 250 2.0.0 Ok`.
pub async fn send_direct(
    config: &Config,
    message: &Email,
    clock: &dyn Clock,
) -> Result<String, MailError> {
    let delivery = Delivery::from_config(config)?;
    let accepted = delivery.send_now(message, clock.now()).await?;
    Ok(format!("{}: {}", accepted.via, accepted.outcome))
}
