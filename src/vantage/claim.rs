//! Exactly one mail per incident across the fleet, by conditional writes:
//!
//! - `<prefix>/incidents/<check>/current.json` names the fleet's current
//!   incident of the check (its key, who opened it, whether it is closed).
//!   It is only ever rewritten with `If-Match` (or created with
//!   `If-None-Match: *`), so two nodes opening an incident at once end up
//!   with the same key: the loser reads the winner's.
//! - `<prefix>/incidents/<check>/<key>/<event>` (`down`, `reminder-N`,
//!   `resolved`) is created with `If-None-Match: *` before that mail is
//!   sent. The node whose create succeeds sends; the others record the
//!   winner and its Message-ID (their later mails thread under it).
//! - A warn episode is claimed the same way, beside the incidents but apart
//!   from them: its own pointer, `<prefix>/incidents/<check>/warn.json`,
//!   names the fleet's current warn episode, and its events are `warn` and
//!   `warn-resolved` (the end of a warn whose WARN was sent). So one node
//!   pushes each WARN and each end of one, and a DOWN never adopts a warn's
//!   key nor a warn a DOWN's.
//!
//! The key is the first failed probe of the incident as the opening node
//! saw it (`20261201T071230Z`): the same on every node because only one
//! node writes it, not because their clocks agree. A node that is late to
//! an incident adopts the open key; an incident is open until a RESOLVED is
//! claimed for it (the pointer is then closed, and a later DOWN opens a new
//! key even if closing the pointer failed). Pushes carry that key, so
//! every event of one incident is pushed under one key whichever node
//! sends it (`bucket_claims.rs`).
//!
//! Claims and pointers are signed by the node that wrote them. One that
//! does not verify (anyone with write access to the prefix could have put
//! it there) is not believed: it is replaced with `If-Match` by this
//! node's own, so a forged claim neither silences the page nor lets two
//! honest nodes both send it. A claim lost to a genuine peer is checked
//! later against that peer's own state (`daemon/alerter.rs`).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::bucket::{Coordinator, Signed};
use crate::alert::EventKind;
use crate::replicate::ReplicateError;

/// One mail's event, about to be claimed.
#[derive(Clone)]
pub struct ClaimRequest<'a> {
    pub check: &'a str,
    pub kind: EventKind,
    /// The reminder's number; 0 for DOWN and RESOLVED.
    pub reminder: u32,
    /// The incident's first failed probe on this node.
    pub since: OffsetDateTime,
    /// The Message-ID the mail will have if this node sends it, given the
    /// fleet's key of the incident: the key is known only once the pointer
    /// is read, and a node that saw two outages as one claims under a key
    /// other than its own incident start.
    pub message_id: MessageIdFor<'a>,
    pub now: OffsetDateTime,
}

/// The Message-ID of a mail sent under the fleet's key given.
pub type MessageIdFor<'a> = &'a (dyn Fn(&str) -> String + Sync);

/// Who sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// This node: send the mail.
    Won { key: String },
    /// Another node sent it (or is sending it) as `message_id`.
    Lost {
        key: String,
        by: String,
        message_id: String,
        /// The claim's name in the bucket, which `by`'s state lists if it
        /// really sent it.
        name: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pointer {
    key: String,
    opened_by: String,
    /// The node that last wrote it (and signed it): the opener, or the
    /// node that closed it.
    written_by: String,
    #[serde(with = "time::serde::rfc3339")]
    opened_at: OffsetDateTime,
    open: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ClaimBody {
    node: String,
    message_id: String,
    #[serde(with = "time::serde::rfc3339")]
    at: OffsetDateTime,
}

/// Compare-and-swap rounds before giving up on a pointer others keep
/// rewriting (each round is one read and one conditional write).
const CAS_ROUNDS: usize = 8;

/// Claims `request`'s event for this node, or learns who has it.
pub async fn claim(c: &Coordinator, request: &ClaimRequest<'_>) -> Result<Claimed, ReplicateError> {
    let key = fleet_key(c, request).await?;
    let name = format!(
        "{}/{key}/{}",
        c.incident_dir(request.check),
        event_name(request.kind, request.reminder)
    );
    let body = ClaimBody {
        node: c.node().to_string(),
        message_id: (request.message_id)(&key),
        at: request.now,
    };
    let mut claimed = Claimed::Won { key: key.clone() };
    if !c.create(&name, &body).await? {
        // A forged claim is replaced once; if another node replaced it
        // first, its claim is read in the second round.
        for round in 0..2 {
            match c
                .read_claim(&name, request.now, |b: &ClaimBody| &b.node)
                .await?
            {
                // Our own create, retried after its answer was lost.
                Signed::Valid { value, .. } if value.node == c.node() => {}
                Signed::Valid { value, .. } => {
                    claimed = Claimed::Lost {
                        key: key.clone(),
                        by: value.node,
                        message_id: value.message_id,
                        name: name.clone(),
                    };
                }
                Signed::Refused { version, .. } if round == 0 => {
                    if !c.update(&name, &body, &version).await? {
                        continue;
                    }
                }
                // Refused again, or gone: this node sends.
                Signed::Refused { .. } | Signed::Missing => {}
            }
            break;
        }
    }
    if let Claimed::Won { .. } = claimed {
        c.won(&name);
    }
    if matches!(request.kind, EventKind::Resolved | EventKind::WarnResolved) {
        close(c, request, &key).await?;
    }
    Ok(claimed)
}

/// `20261201T071230Z`
pub fn incident_key(since: OffsetDateTime) -> String {
    crate::clock::compact_utc(since)
}

fn event_name(kind: EventKind, reminder: u32) -> String {
    match kind {
        EventKind::Down => "down".to_string(),
        EventKind::Reminder => format!("reminder-{reminder}"),
        EventKind::Resolved => "resolved".to_string(),
        EventKind::Warn => "warn".to_string(),
        EventKind::WarnResolved => "warn-resolved".to_string(),
    }
}

/// The pointer `kind` is about: the check's incident, or its warn episode.
fn pointer_name(c: &Coordinator, check: &str, kind: EventKind) -> String {
    match kind.is_warn() {
        true => format!("{}/warn.json", c.incident_dir(check)),
        false => format!("{}/current.json", c.incident_dir(check)),
    }
}

/// The claim that closes what `kind` is about.
fn closing_name(kind: EventKind) -> &'static str {
    match kind.is_warn() {
        true => "warn-resolved",
        false => "resolved",
    }
}

/// The fleet's key for the incident `request` is about: the open one, or
/// a new one this node opens.
async fn fleet_key(c: &Coordinator, request: &ClaimRequest<'_>) -> Result<String, ReplicateError> {
    let name = pointer_name(c, request.check, request.kind);
    for _ in 0..CAS_ROUNDS {
        // A refused pointer is as good as none, but is replaced with
        // If-Match (its version), like a real one.
        let (current, version) = match c
            .read_claim(&name, request.now, |p: &Pointer| &p.written_by)
            .await?
        {
            Signed::Missing => (None, None),
            Signed::Valid { value, version, .. } => (Some(value), Some(version)),
            Signed::Refused { version, .. } => (None, Some(version)),
        };
        if let Some(pointer) = &current {
            let adopt = match request.kind {
                // A reminder or RESOLVED is about the incident the fleet
                // announced, closed or not.
                EventKind::Reminder | EventKind::Resolved | EventKind::WarnResolved => true,
                EventKind::Down | EventKind::Warn => {
                    pointer.open && !resolved(c, request, &pointer.key).await?
                }
            };
            if adopt {
                return Ok(pointer.key.clone());
            }
        }
        let mut key = incident_key(request.since);
        if current.as_ref().is_some_and(|p| p.key == key) {
            key = format!("{key}-{}", c.node());
        }
        let pointer = Pointer {
            key: key.clone(),
            opened_by: c.node().to_string(),
            written_by: c.node().to_string(),
            opened_at: request.now,
            open: true,
        };
        let written = match &version {
            None => c.create(&name, &pointer).await?,
            Some(version) => c.update(&name, &pointer, version).await?,
        };
        if written {
            return Ok(key);
        }
    }
    Err(ReplicateError::Failed {
        bucket: c.shown(),
        action: format!("opening the fleet incident of {}", request.check),
        detail: format!(
            "{name} changed {CAS_ROUNDS} times in a row while this node tried to write it"
        ),
    })
}

/// A RESOLVED (of a warn: a `warn-resolved`) claimed (and signed) for
/// `key`: a forged one does not close an incident.
async fn resolved(
    c: &Coordinator,
    request: &ClaimRequest<'_>,
    key: &str,
) -> Result<bool, ReplicateError> {
    let name = format!(
        "{}/{key}/{}",
        c.incident_dir(request.check),
        closing_name(request.kind)
    );
    let read = c
        .read_claim(&name, request.now, |b: &ClaimBody| &b.node)
        .await?;
    Ok(matches!(read, Signed::Valid { .. }))
}

/// Marks the pointer closed if it still names `key`.
async fn close(
    c: &Coordinator,
    request: &ClaimRequest<'_>,
    key: &str,
) -> Result<(), ReplicateError> {
    let name = pointer_name(c, request.check, request.kind);
    for _ in 0..CAS_ROUNDS {
        let read = c
            .read_claim(&name, request.now, |p: &Pointer| &p.written_by)
            .await?;
        let Signed::Valid {
            value: mut pointer,
            version,
            ..
        } = read
        else {
            return Ok(());
        };
        if pointer.key != key || !pointer.open {
            return Ok(());
        }
        pointer.open = false;
        pointer.written_by = c.node().to_string();
        if c.update(&name, &pointer, &version).await? {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_event_names_are_stable_words() {
        let at = OffsetDateTime::from_unix_timestamp(1_796_109_150).unwrap();
        assert_eq!(incident_key(at), "20261201T071230Z");
        assert_eq!(event_name(EventKind::Down, 0), "down");
        assert_eq!(event_name(EventKind::Reminder, 2), "reminder-2");
        assert_eq!(event_name(EventKind::Resolved, 0), "resolved");
        assert_eq!(event_name(EventKind::Warn, 0), "warn");
        assert_eq!(event_name(EventKind::WarnResolved, 0), "warn-resolved");
    }
}
