//! Alerting, pure: who is paged, when, about what, and with which words.
//!
//! This module decides; it never reads the clock, the store or the network.
//! The daemon hands it judged outcomes and `now`, persists the states it
//! returns, and puts the mails it renders in the outbox, in one transaction
//! (DESIGN.md: "state transition and message are one transaction").
//!
//! - `policy`: [`Policy`], the alerting settings of one check (`[alerting]`
//!   merged with the check's overrides).
//! - `event`: what the state machine says happened ([`Event`]) and the
//!   [`Snapshot`] of a probe it keeps for the mail.
//! - `state`: [`AlertState`], one check's persisted incident state machine:
//!   thresholds, reminders, holds, warn episodes, and the bookkeeping that
//!   makes a restart neither re-page nor forget.
//! - `group`: [`Grouper`], events that fire together share one mail.
//! - `silence`: [`Silence`]s and `[[maintenance]]` windows, as a [`Hold`]
//!   on a check's pages.
//! - `blind`: the blind-monitor gate (canaries) and vigie's own
//!   "cannot reach the network" alert.
//! - `engine`: [`Engine`], the above wired together the way the daemon uses
//!   them, still in memory and without I/O; the timeline tests drive it.
//! - `layout`: the mail layout engine: a mail laid out once, written as
//!   text and as escaped HTML.
//! - `render`: [`Email`] and what alert mails say.
//! - `requests`, `status`: the line to the API: what it asks of the
//!   alerter ([`AlertRequest`]) and what the alerter publishes
//!   ([`AlertStatus`]); plain data and channels, no I/O.
//! - `known`: [`KnownIncident`], the incidents an update can name by key
//!   (open ones and recently told ones, merged).
//! - `report`: the daily certificate report: its data and JSON (`mod.rs`),
//!   certificate change detection (`changes.rs`), text/HTML/mail
//!   (`render.rs`).
//!
//! Probes, history and the outbox are not here: holds and blindness change
//! what is mailed, never what is probed or recorded.

mod blind;
mod engine;
mod event;
mod group;
pub mod known;
mod layout;
mod policy;
pub mod render;
pub mod report;
mod requests;
pub mod routes;
mod silence;
mod state;
mod status;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod timeline;

pub use blind::{canary_failed, connectivity, gate, network_observation, Connectivity};
pub use engine::{Engine, Outbound};
pub use event::{Event, EventKind, Held, IncidentId, Snapshot, NETWORK_CHECK};
pub use group::{Grouper, Notification};
pub use known::KnownIncident;
pub(crate) use layout::escape as escape_html;
pub use policy::{Overrides, Policy};
pub use render::Email;
pub use requests::{AlertRequest, Alerts};
pub use silence::{
    hold, maintenance_end, Hold, HoldCause, Silence, SilenceError, MAX_PATTERN_BYTES,
    MAX_REASON_BYTES, MAX_SILENCE,
};
pub use state::{
    mark_sent, pending, tick, transition, AlertState, EndedWarn, Incident, Last, Observation, Page,
    Step, WarnEpisode, WarnStreak,
};
pub use status::AlertStatus;
