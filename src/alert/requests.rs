//! The line between the API and the alerter: what the API may ask
//! ([`AlertRequest`]) and the handle it holds ([`Alerts`]). The alerter
//! (in the daemon) owns alert states and silences and answers each request
//! on its oneshot; the API only asks and waits.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::known::KnownIncident;
use super::report::Report;
use super::silence::Silence;
use super::status::AlertStatus;

/// What the API asks of the alerter, which owns alert states and
/// silences.
#[derive(Debug)]
pub enum AlertRequest {
    Report(oneshot::Sender<Report>),
    AddSilence(Silence, oneshot::Sender<Result<(), String>>),
    RemoveSilence(String, oneshot::Sender<Result<bool, String>>),
    Silences(oneshot::Sender<Vec<Silence>>),
    /// The incidents open now, for an update that names one by key.
    OpenIncidents(oneshot::Sender<Vec<KnownIncident>>),
}

/// The API's line to the alerter.
#[derive(Clone)]
pub struct Alerts {
    pub status: Arc<AlertStatus>,
    pub requests: mpsc::Sender<AlertRequest>,
}
