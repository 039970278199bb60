//! The local HTTP API: `/healthz`, `/metrics`, `/api/v1/checks`,
//! `/api/v1/history/{name}`, `/api/v1/report`, `/api/v1/silences` and
//! `/api/v1/incidents`. It reads the store, the scheduler's slots and the
//! health verdict; it never probes. Silences and the report are asked of
//! the alerter ([`AlertRequest`]), which owns them; the one thing it
//! writes itself is an incident update, which nothing else owns.
//!
//! - `router`: which path goes where, behind the host check and the token.
//! - `auth`, `session`, `throttle`, `host`: who may ask (token, browser
//!   sessions, login throttle, known host names); `local`: the local
//!   socket's peer credentials.
//! - `health`, `checks`, `history`, `alerts` (report, silences),
//!   `incidents` (incident keys and updates), `metrics` (the registry of
//!   `/metrics` sources), `pages`, `status` (the public page): one file
//!   per endpoint group.
//! - `serve`, `connections`, `peer`, `deadline`, `body`, `tls`: the
//!   listener: connections and their counters, who sent a request, the
//!   request deadline, bounded bodies, TLS.
//! - `reply`: how a JSON endpoint says no.
//!
//! It listens on loopback by default. When `[api] listen` is another
//! address, every endpoint but `/healthz` requires the bearer token from
//! `token_file`, and `/healthz` names no check or target, so a peer vigie in
//! another region can watch it without learning anything.

mod alerts;
mod auth;
mod body;
mod checks;
mod connections;
mod deadline;
mod health;
mod history;
mod host;
mod incidents;
pub mod local;
mod metrics;
mod pages;
mod peer;
mod reply;
mod router;
mod serve;
mod session;
mod status;
mod throttle;
mod tls;

pub use crate::alert::{AlertRequest, AlertStatus, Alerts};
pub use alerts::SilenceRequest;
pub use auth::{read_token, Token, TokenFileError};
pub use connections::{ServerSnapshot, ServerStats};
pub use history::{HistoryView, DEFAULT_HISTORY_WINDOW, MAX_PAGE, MAX_UNPAGED_WINDOW};
pub use incidents::{IncidentWithUpdates, UpdateRequest};
pub use router::router;
pub use serve::{serve, serve_local, Limits};
pub use status::StatusCache;
pub use tls::{acceptor, server_config, ApiTlsError, ServerTls};

use std::sync::Arc;

use crate::clock::Clock;
use crate::health::Health;
use crate::heartbeat::HeartbeatStats;
use crate::mail::MailStats;
use crate::replicate::ReplicationStatus;
use crate::scheduler::Slots;
use crate::store::{Latest, Store};

/// Everything the API reads.
#[derive(Clone)]
pub struct ApiState {
    pub store: Arc<dyn Store>,
    pub latest: Latest,
    pub slots: Slots,
    pub health: Arc<Health>,
    pub clock: Arc<dyn Clock>,
    /// Required as `Authorization: Bearer ...` on every endpoint but
    /// `/healthz` when set; replaced on reload.
    pub token: Token,
    /// With `[replication]`: lag and counters.
    pub replication: Option<Arc<ReplicationStatus>>,
    /// With `[heartbeat]`: ping counters.
    pub heartbeat: Option<Arc<HeartbeatStats>>,
    /// The outbox and its sender.
    pub mail: Option<Arc<MailStats>>,
    /// The alerter: its status, and where report and silence requests go.
    pub alerts: Option<Alerts>,
    /// The listener's connection counters.
    pub server: Arc<ServerStats>,
    /// The config in force (checks, labels, maintenance windows), for the
    /// pages; replaced on reload.
    pub config: tokio::sync::watch::Receiver<Arc<crate::config::Config>>,
    /// With `[vantage]`: the fleet's counters.
    pub vantage: Option<Arc<crate::vantage::VantageStats>>,
    /// The push channels' counters.
    pub push: Option<Arc<crate::push::PushStats>>,
    /// Who was told about each incident, for the incident pages.
    pub told: Option<crate::store::ToldLedger>,
    /// What the on-call person wrote about incidents.
    pub updates: Option<crate::store::IncidentUpdates>,
    /// The public status page's snapshot and its render count.
    pub status: Arc<StatusCache>,
}
