//! The task that drains the outbox, and the counters it keeps.
//!
//! One pass walks the outbox in id order and sends every message that is
//! due over one SMTP session (or into the Maildir). What happens next
//! depends on whom the failure blames ([`Failure`]):
//!
//! - the server or the way to it (refused, timed out, TLS, AUTH, 421):
//!   the pass stops, nothing is charged to the message, and the whole
//!   queue waits out a server-wide backoff, persisted in `meta` so that a
//!   restart neither hammers a dead relay nor forgets it was failing;
//! - a 4xx for this message: it alone is retried later, its attempt count
//!   and next attempt persisted in its record; still deferred after
//!   `give_up_after` it becomes a dead letter (a message deferred for days
//!   is no longer a page, and keeping it would keep the backlog alarm on);
//!   five deferrals in a row end the pass as a server failure, so a relay
//!   that defers everything is not reconnected to once per message;
//! - a 5xx for this message, or a message that cannot be built: dead
//!   letter at once, logged as an error, counted.
//!
//! Backoff is exponential from [`Backoff::initial`], doubling, capped at
//! [`Backoff::max`]. No jitter: there is one sender and one relay.
//!
//! This module does not render alerts, and never drops a message: every
//! message leaves the outbox delivered or as a dead letter.

use std::sync::Arc;
use std::time::Duration;

use lettre::message::Mailbox;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::maildir::Maildir;
use super::message::{self, render};
use super::outbox::Outbox;
use super::smtp::{DeliveryError, Failure, Session, SmtpTransport, Stage};
use super::MailError;
use crate::alert::Email;
use crate::clock::{from_unix_millis, saturating_add, Clock};
use crate::config::Config;
use crate::store::{Pending, TransportState};

/// How long an idle sender sleeps before looking again on its own (it is
/// woken at once by new mail; this only refreshes the counters).
const IDLE: Duration = Duration::from_secs(60);
/// Deferrals in a row after which the server, not the messages, is blamed.
const DEFERRALS_MEAN_SERVER: u32 = 5;

/// Retry timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    /// A message the server keeps deferring is given up after this long
    /// in the outbox.
    pub give_up_after: Duration,
}

impl Backoff {
    /// 5 s, 10 s, 20 s ... 2 min: a relay back from an outage gets the
    /// pages within two minutes; a dead one sees one connection a minute
    /// or two. Deferred messages are given up after 3 days (Postfix's
    /// default is 5; an alert that old is history, not a page).
    pub const DEFAULT: Backoff = Backoff {
        initial: Duration::from_secs(5),
        max: Duration::from_secs(120),
        give_up_after: Duration::from_secs(3 * 86_400),
    };

    /// The wait after the `failures`-th failure in a row (1-based).
    pub fn after(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.initial.saturating_mul(1u32 << doublings).min(self.max)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::DEFAULT
    }
}

/// Where messages go and as whom.
#[derive(Debug, Clone)]
pub struct Delivery {
    route: Route,
    from: Mailbox,
    to: Vec<Mailbox>,
}

#[derive(Debug, Clone)]
enum Route {
    Smtp(SmtpTransport),
    Maildir(Maildir),
}

/// What a successful delivery reports.
#[derive(Debug, Clone)]
pub(crate) struct Accepted {
    pub via: String,
    pub outcome: String,
}

enum Attempt {
    Accepted(Accepted),
    Failed(DeliveryError),
    Cancelled,
}

impl Delivery {
    /// `[smtp]` if present, else `<state_dir>/maildir`; From is
    /// `[alerting] from` or `vigie@HOST`; the default recipients are
    /// `[alerting] to`. Reads the CA files now.
    pub fn from_config(config: &Config) -> Result<Delivery, MailError> {
        let route = match &config.smtp {
            Some(smtp) => Route::Smtp(SmtpTransport::new(smtp, config.extra_ca_file.as_deref())?),
            None => Route::Maildir(Maildir::new(config.state_dir.join("maildir"))),
        };
        let from = match &config.alerting.from {
            Some(from) => from.clone(),
            None => message::default_from().map_err(MailError::Message)?,
        };
        Ok(Delivery {
            route,
            from,
            to: config.alerting.to.clone(),
        })
    }

    /// Through `transport`, as `from`, to `to` unless a message names its
    /// own recipients.
    pub fn smtp(transport: SmtpTransport, from: Mailbox, to: Vec<Mailbox>) -> Delivery {
        Delivery {
            route: Route::Smtp(transport),
            from,
            to,
        }
    }

    /// Into `maildir`.
    pub fn maildir(maildir: Maildir, from: Mailbox, to: Vec<Mailbox>) -> Delivery {
        Delivery {
            route: Route::Maildir(maildir),
            from,
            to,
        }
    }

    /// `smtp HOST:PORT (starttls)` or `maildir PATH`.
    pub fn describe(&self) -> String {
        match &self.route {
            Route::Smtp(t) => t.describe(),
            Route::Maildir(m) => format!("maildir {}", m.root().display()),
        }
    }

    pub fn from(&self) -> &Mailbox {
        &self.from
    }

    pub fn default_to(&self) -> &[Mailbox] {
        &self.to
    }

    /// One message, now, on its own session (`vigie test-email`).
    pub(crate) async fn send_now(
        &self,
        message: &Email,
        date: OffsetDateTime,
    ) -> Result<Accepted, MailError> {
        let mut session = None;
        let attempt = self
            .attempt(&mut session, message, date, &CancellationToken::new())
            .await;
        if let Some(session) = session {
            session.quit().await;
        }
        match attempt {
            Attempt::Accepted(accepted) => Ok(accepted),
            Attempt::Failed(e) => Err(MailError::Delivery(e)),
            Attempt::Cancelled => Err(MailError::Message("cancelled".into())),
        }
    }

    /// Sends one message, opening `session` if there is none or the last
    /// one broke. Only the connection is given up on shutdown: a message
    /// under way is finished, since abandoning it after DATA would leave
    /// the server with a copy the outbox still holds.
    async fn attempt(
        &self,
        session: &mut Option<Session>,
        message: &Email,
        date: OffsetDateTime,
        shutdown: &CancellationToken,
    ) -> Attempt {
        let rendered = match render(message, &self.from, &self.to, date) {
            Ok(rendered) => rendered,
            Err(detail) => {
                return Attempt::Failed(DeliveryError {
                    server: self.server(),
                    stage: Stage::Send,
                    failure: Failure::Rejected,
                    code: None,
                    detail,
                    advice: Some("the message cannot be sent as it is".into()),
                })
            }
        };
        match &self.route {
            Route::Smtp(transport) => {
                if session.as_ref().is_some_and(|s| !s.is_usable()) {
                    *session = None;
                }
                if session.is_none() {
                    tokio::select! {
                        _ = shutdown.cancelled() => return Attempt::Cancelled,
                        connected = transport.connect() => match connected {
                            Ok(s) => *session = Some(s),
                            Err(e) => return Attempt::Failed(e),
                        },
                    }
                }
                let Some(open) = session.as_mut() else {
                    return Attempt::Cancelled;
                };
                match open.send(&rendered.envelope, &rendered.bytes).await {
                    Ok(reply) => Attempt::Accepted(Accepted {
                        via: format!("{} ({})", transport.server(), open.describe()),
                        outcome: reply,
                    }),
                    Err(e) => Attempt::Failed(e),
                }
            }
            Route::Maildir(maildir) => {
                let (maildir, bytes) = (maildir.clone(), rendered.bytes);
                let server = self.server();
                let written = tokio::task::spawn_blocking(move || maildir.deliver(&bytes)).await;
                let failed = |detail: String| {
                    Attempt::Failed(DeliveryError {
                        server: server.clone(),
                        stage: Stage::Maildir,
                        failure: Failure::Transport,
                        code: None,
                        detail,
                        advice: Some(
                            "is the disk full, or state_dir not writable by vigie?".into(),
                        ),
                    })
                };
                match written {
                    Ok(Ok(path)) => Attempt::Accepted(Accepted {
                        via: self.describe(),
                        outcome: format!("written to {}", path.display()),
                    }),
                    Ok(Err(e)) => failed(e.to_string()),
                    Err(e) => failed(format!("the writer thread failed: {e}")),
                }
            }
        }
    }

    fn server(&self) -> String {
        match &self.route {
            Route::Smtp(t) => t.server(),
            Route::Maildir(m) => format!("maildir {}", m.root().display()),
        }
    }
}

/// Drains the outbox until shut down. Build with [`Sender::new`], run
/// with [`Sender::run`]; a clone is a fresh start of the same sender
/// (under supervision, each restart runs one).
#[derive(Clone)]
pub struct Sender {
    outbox: Arc<Outbox>,
    delivery: watch::Receiver<Arc<Delivery>>,
    clock: Arc<dyn Clock>,
    backoff: Backoff,
    transport: Option<TransportState>,
    /// Messages the server accepted whose removal from the outbox failed
    /// (a full or failing disk): never sent again while this sender runs,
    /// and their removal retried at each pass.
    unremoved: std::collections::HashSet<crate::store::MessageId>,
}

/// Kept by the daemon: swaps the delivery on a config reload.
#[derive(Debug, Clone)]
pub struct SenderHandle {
    delivery: Arc<watch::Sender<Arc<Delivery>>>,
}

impl SenderHandle {
    /// New settings (a reload): the server backoff is forgotten and the
    /// queue tried at once, since the fix may be in the new settings.
    pub fn reconfigure(&self, delivery: Delivery) {
        self.delivery.send_replace(Arc::new(delivery));
    }
}

impl Sender {
    pub fn new(
        outbox: Arc<Outbox>,
        delivery: Delivery,
        clock: Arc<dyn Clock>,
        backoff: Backoff,
    ) -> (Sender, SenderHandle) {
        outbox.stats().set_via(delivery.describe());
        let (tx, rx) = watch::channel(Arc::new(delivery));
        let sender = Sender {
            outbox,
            delivery: rx,
            clock,
            backoff,
            transport: None,
            unremoved: Default::default(),
        };
        (
            sender,
            SenderHandle {
                delivery: Arc::new(tx),
            },
        )
    }

    /// Runs until `shutdown`; the message under way, if any, is finished
    /// first (bounded by the SMTP timeout).
    pub async fn run(mut self, shutdown: CancellationToken) {
        self.transport = match self.outbox.transport() {
            Ok(state) => state,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the delivery backoff; trying at once");
                None
            }
        };
        if let Some(t) = &self.transport {
            self.outbox
                .stats()
                .transport_failed(t.failures, &t.last_error, None);
        }
        let mut reconfigurable = true;
        loop {
            let next = match self.pass(&shutdown).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::error!(error = %e, "the mail sender cannot use the outbox");
                    self.outbox
                        .stats()
                        .record_error(self.clock.now(), &e.to_string());
                    Some(saturating_add(self.clock.now(), self.backoff.initial))
                }
            };
            if shutdown.is_cancelled() {
                break;
            }
            let sleep = match next {
                Some(at) => Duration::try_from(at - self.clock.now())
                    .unwrap_or(Duration::ZERO)
                    .min(IDLE),
                None => IDLE,
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.outbox.woken() => {}
                _ = tokio::time::sleep(sleep) => {}
                changed = self.delivery.changed(), if reconfigurable => match changed {
                    Ok(()) => self.reconfigured(),
                    // The handle is gone: keep the delivery we have.
                    Err(_) => reconfigurable = false,
                },
            }
        }
        tracing::debug!("mail sender stopped");
    }

    /// One last try of every message still in the outbox, due or not and
    /// whatever the backoff says, for a stop that would lose them (the
    /// daemon on a temporary store); bounded by `within`. Returns what is
    /// still undelivered. It runs on a copy of the sender taken before it
    /// started, which knows nothing of the running one's accepted but
    /// unremoved messages: such a message may go out twice (at least once,
    /// never not at all).
    pub async fn last_attempt(self, within: Duration) -> Vec<Pending> {
        let delivery = self.delivery.borrow().clone();
        let cancel = CancellationToken::new();
        let attempts = async {
            let mut session: Option<Session> = None;
            for pending in self.outbox.pending().unwrap_or_default() {
                let attempt = delivery
                    .attempt(&mut session, &pending.message, pending.enqueued_at, &cancel)
                    .await;
                if let Attempt::Accepted(accepted) = attempt {
                    tracing::info!(
                        message_id = %pending.message.message_id,
                        via = %accepted.via,
                        "mail delivered on the last try before stopping"
                    );
                    let _ = self.outbox.delivered(pending.id, self.clock.now()).await;
                }
            }
        };
        let _ = tokio::time::timeout(within, attempts).await;
        self.outbox.pending().unwrap_or_default()
    }

    /// Sends what is due; returns when to look again (`None`: nothing is
    /// scheduled).
    async fn pass(
        &mut self,
        shutdown: &CancellationToken,
    ) -> Result<Option<OffsetDateTime>, MailError> {
        if let Some(t) = &self.transport {
            if t.next_attempt > self.clock.now() {
                return Ok(Some(t.next_attempt));
            }
        }
        let delivery = self.delivery.borrow_and_update().clone();
        let stats = self.outbox.stats();
        let mut session: Option<Session> = None;
        let mut earliest: Option<OffsetDateTime> = None;
        let mut backlog = 0u64;
        let mut oldest_ms: Option<i64> = None;
        let mut deferred_in_a_row = 0;
        // Once set, the rest of the walk only counts.
        let mut stopped: Option<Option<OffsetDateTime>> = None;
        let outbox = self.outbox.clone();
        for entry in outbox.schedules() {
            let (id, schedule) = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    // Left in place: a newer vigie's record, or damage to
                    // look at; never destroyed by the sender.
                    tracing::error!(error = %e, "skipping an unreadable outbox entry");
                    continue;
                }
            };
            backlog += 1;
            oldest_ms =
                Some(oldest_ms.map_or(schedule.enqueued_ms, |o| o.min(schedule.enqueued_ms)));
            if stopped.is_some() {
                continue;
            }
            let now = self.clock.now();
            let due = from_unix_millis(schedule.next_attempt_ms).unwrap_or(now);
            if due > now {
                earliest = Some(earliest.map_or(due, |e| e.min(due)));
                continue;
            }
            if self.unremoved.contains(&id) {
                if self.outbox.delivered(id, now).await.is_ok() {
                    self.unremoved.remove(&id);
                }
                backlog -= 1;
                continue;
            }
            if shutdown.is_cancelled() {
                stopped = Some(None);
                continue;
            }
            let Some(pending) = self.outbox.load(id)? else {
                backlog -= 1;
                continue;
            };
            let attempt = delivery
                .attempt(
                    &mut session,
                    &pending.message,
                    pending.enqueued_at,
                    shutdown,
                )
                .await;
            let now = self.clock.now();
            match attempt {
                Attempt::Accepted(accepted) => {
                    if let Err(err) = self.outbox.delivered(id, now).await {
                        // Sent again now, it would page again at every pass.
                        tracing::error!(error = %err, message_id = %pending.message.message_id, "delivered, but it cannot be removed from the outbox; it is not sent again while vigie runs");
                        self.unremoved.insert(id);
                    }
                    backlog -= 1;
                    deferred_in_a_row = 0;
                    stats.delivered(now);
                    tracing::info!(
                        message_id = %pending.message.message_id,
                        subject = %pending.message.subject,
                        via = %accepted.via,
                        reply = %accepted.outcome,
                        "mail delivered"
                    );
                    self.transport_works()?;
                }
                Attempt::Cancelled => stopped = Some(None),
                Attempt::Failed(e) => match e.failure {
                    Failure::Transport => stopped = Some(Some(self.transport_failed(&e)?)),
                    Failure::Rejected => {
                        self.bury(&pending, &e.to_string(), now).await?;
                        backlog -= 1;
                    }
                    Failure::Deferred => {
                        deferred_in_a_row += 1;
                        let age = Duration::try_from(now - pending.enqueued_at).unwrap_or_default();
                        if age >= self.backoff.give_up_after {
                            let reason = format!(
                                "still deferred after {}: {e}",
                                crate::when::std_span(self.backoff.give_up_after)
                            );
                            self.bury(&pending, &reason, now).await?;
                            backlog -= 1;
                        } else {
                            let next = saturating_add(
                                now,
                                self.backoff.after(pending.attempts.saturating_add(1)),
                            );
                            self.outbox.defer(&pending, &e.to_string(), next)?;
                            earliest = Some(earliest.map_or(next, |t| t.min(next)));
                            stats.deferred(now, &e.to_string());
                            tracing::warn!(
                                message_id = %pending.message.message_id,
                                attempts = pending.attempts.saturating_add(1),
                                retry_at = %crate::when::second(next),
                                error = %e,
                                "mail deferred by the server"
                            );
                        }
                        if deferred_in_a_row >= DEFERRALS_MEAN_SERVER {
                            stopped = Some(Some(self.transport_failed(&e)?));
                        }
                    }
                },
            }
        }
        if let Some(session) = session {
            session.quit().await;
        }
        stats.set_backlog(backlog, oldest_ms.and_then(from_unix_millis));
        Ok(match stopped {
            Some(Some(next)) => Some(next),
            _ => earliest,
        })
    }

    async fn bury(
        &self,
        pending: &Pending,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<(), MailError> {
        self.outbox.bury(pending, reason, now).await?;
        self.outbox.stats().dead_lettered(now, reason);
        tracing::error!(
            message_id = %pending.message.message_id,
            subject = %pending.message.subject,
            to = ?pending.message.to,
            reason,
            "mail given up: moved to the dead letters"
        );
        Ok(())
    }

    fn transport_failed(&mut self, e: &DeliveryError) -> Result<OffsetDateTime, MailError> {
        let now = self.clock.now();
        let failures = self
            .transport
            .as_ref()
            .map_or(0, |t| t.failures)
            .saturating_add(1);
        let next = saturating_add(now, self.backoff.after(failures));
        let state = TransportState {
            failures,
            next_attempt: next,
            last_error: e.to_string(),
        };
        self.outbox.set_transport(Some(&state))?;
        self.transport = Some(state);
        self.outbox
            .stats()
            .transport_failed(failures, &e.to_string(), Some(now));
        tracing::warn!(error = %e, failures, retry_at = %crate::when::second(next), "cannot deliver mail; the outbox waits");
        Ok(next)
    }

    fn transport_works(&mut self) -> Result<(), MailError> {
        if let Some(old) = self.transport.take() {
            self.outbox.set_transport(None)?;
            tracing::info!(after_failures = old.failures, "mail delivery works again");
        }
        self.outbox.stats().transport_ok();
        Ok(())
    }

    fn reconfigured(&mut self) {
        let delivery = self.delivery.borrow().clone();
        self.outbox.stats().set_via(delivery.describe());
        if self.transport.take().is_some() {
            if let Err(e) = self.outbox.set_transport(None) {
                tracing::error!(error = %e, "cannot clear the delivery backoff");
            }
        }
        tracing::info!(via = %delivery.describe(), "mail delivery reconfigured");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Backoff {
            initial: Duration::from_secs(5),
            max: Duration::from_secs(120),
            give_up_after: Duration::from_secs(1),
        };
        let waits: Vec<u64> = (1..=7).map(|n| b.after(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 120, 120]);
        assert_eq!(b.after(0), Duration::from_secs(5));
        assert_eq!(b.after(u32::MAX), Duration::from_secs(120));
    }
}
