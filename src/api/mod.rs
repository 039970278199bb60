//! The local HTTP API: `/healthz`, `/metrics`, `/api/v1/checks`,
//! `/api/v1/history/{name}`, `/api/v1/report` and `/api/v1/silences`. It
//! reads the store, the scheduler's slots and the health verdict; it never
//! probes and writes nothing itself: silences and the report are asked of
//! the alerter ([`AlertRequest`]), which owns them.
//!
//! It listens on loopback by default. When `[api] listen` is another
//! address, every endpoint but `/healthz` requires the bearer token from
//! `token_file`, and `/healthz` names no check or target, so a peer vigie in
//! another region can watch it without learning anything.

mod auth;
mod body;
mod connections;
mod deadline;
mod history;
mod host;
pub mod local;
mod pages;
mod peer;
mod serve;
mod session;
mod throttle;
mod tls;

pub use auth::Token;
pub use connections::{ServerSnapshot, ServerStats};
pub use history::{HistoryView, DEFAULT_HISTORY_WINDOW, MAX_PAGE, MAX_UNPAGED_WINDOW};
pub use serve::{serve, serve_local, Limits};
pub use tls::{acceptor, server_config, ApiTlsError, ServerTls};

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::alert::report::Report;
use crate::alert::Silence;
use crate::clock::Clock;
use crate::health::{Health, Verdict};
use crate::heartbeat::HeartbeatStats;
use crate::mail::{MailSnapshot, MailStats};
use crate::outcome::{Outcome, Status};
use crate::replicate::{ReplicationSnapshot, ReplicationStatus};
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
}

/// What the API asks of the alerter, which owns alert states and
/// silences.
#[derive(Debug)]
pub enum AlertRequest {
    Report(tokio::sync::oneshot::Sender<Report>),
    AddSilence(Silence, tokio::sync::oneshot::Sender<Result<(), String>>),
    RemoveSilence(String, tokio::sync::oneshot::Sender<Result<bool, String>>),
    Silences(tokio::sync::oneshot::Sender<Vec<Silence>>),
}

/// What the alerter publishes for `/metrics` and health.
#[derive(Debug, Default)]
pub struct AlertStatus {
    firing: std::sync::atomic::AtomicU64,
    blind: std::sync::atomic::AtomicBool,
    /// When the last daily report was queued (the pages' footer).
    last_report: std::sync::Mutex<Option<OffsetDateTime>>,
    /// With `[vantage]`: the checks whose page waits for the other
    /// vantages, in words ("down from fra only; eu-par: up"), for the pages.
    fleet_notes: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

impl AlertStatus {
    pub fn last_report(&self) -> Option<OffsetDateTime> {
        *self.last_report.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_last_report(&self, at: OffsetDateTime) {
        *self.last_report.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
    }

    pub fn set_fleet_notes(&self, notes: std::collections::BTreeMap<String, String>) {
        *self.fleet_notes.lock().unwrap_or_else(|p| p.into_inner()) = notes;
    }

    /// What the other vantages say of `check`, while its page waits.
    pub fn fleet_note(&self, check: &str) -> Option<String> {
        self.fleet_notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(check)
            .cloned()
    }

    pub fn firing(&self) -> u64 {
        self.firing.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_firing(&self, firing: u64) {
        self.firing
            .store(firing, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn blind(&self) -> bool {
        self.blind.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_blind(&self, blind: bool) {
        self.blind
            .store(blind, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The API's line to the alerter.
#[derive(Clone)]
pub struct Alerts {
    pub status: Arc<AlertStatus>,
    pub requests: tokio::sync::mpsc::Sender<AlertRequest>,
}

pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/v1/checks", get(checks))
        .route("/api/v1/history/{name}", get(history::history))
        .route("/api/v1/report", get(report))
        .route("/api/v1/silences", get(silences).post(add_silence))
        .route("/api/v1/silences/{pattern}", delete(remove_silence))
        .route("/api/v1/uptime/{name}", get(pages::uptime_json))
        .route("/api/v1/certificates/{name}", get(pages::certificates_json))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .merge(pages::router(state.clone()))
        // Outermost: a request naming another host reaches nothing.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            host::require_known_host,
        ))
        .with_state(state)
}

/// Why the API token cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read [api] token_file {}: {source}", path.display())]
pub struct TokenFileError {
    pub path: std::path::PathBuf,
    pub source: std::io::Error,
}

/// The token of `[api] token_file`, if one is configured: the daemon
/// requires it, the CLI sends it.
pub fn read_token(config: &crate::config::Config) -> Result<Option<Arc<str>>, TokenFileError> {
    let Some(path) = &config.api.token_file else {
        return Ok(None);
    };
    let error = |source| TokenFileError {
        path: path.clone(),
        source,
    };
    let token = std::fs::read_to_string(path).map_err(error)?;
    let token = token.trim();
    if token.is_empty() {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is empty",
        )));
    }
    // `validate` says so too; checked again here because a reload reads
    // the file anew and its content may have changed since.
    let minimum = crate::config::limits::MIN_REMOTE_TOKEN_BYTES;
    if !config.api.listen.ip().is_loopback() && token.len() < minimum {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the token is {} bytes; a listen address that is not loopback needs at least {minimum} (e.g. `openssl rand -hex 32`)",
                token.len()
            ),
        )));
    }
    Ok(Some(Arc::from(token)))
}

/// What `/healthz` answers: the health verdict decides the code and lists
/// what degrades vigie; replication and the outbox are detailed beside
/// it. Names no target, bucket or endpoint.
#[derive(Serialize)]
struct Healthz {
    #[serde(flatten)]
    verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    replication: Option<ReplicationSnapshot>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outbox: Option<OutboxHealth>,
}

/// The outbox in `/healthz`: counts only, never a subject or an address.
#[derive(Serialize)]
struct OutboxHealth {
    backlog: u64,
    #[serde(with = "time::serde::rfc3339::option")]
    oldest_pending: Option<OffsetDateTime>,
    dead_letters: u64,
    failing: bool,
}

async fn healthz(State(state): State<ApiState>) -> Response {
    let now = state.clock.now();
    let verdict = state.health.verdict(now);
    let code = match verdict.is_healthy() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    let replication = state.replication.as_ref().map(|r| r.snapshot(now));
    let mail = state.mail.as_ref().map(|m| m.snapshot());
    let body = Healthz {
        verdict,
        replication,
        outbox: mail.map(|m| OutboxHealth {
            backlog: m.backlog,
            oldest_pending: m.oldest_pending,
            dead_letters: m.dead_letters,
            failing: m.failing,
        }),
    };
    (code, Json(body)).into_response()
}

/// One configured check: its schedule and its latest stored outcome.
#[derive(Serialize)]
struct CheckView {
    name: String,
    interval_seconds: f64,
    #[serde(with = "time::serde::rfc3339::option")]
    next_due: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    last_started: Option<OffsetDateTime>,
    latest: Option<Outcome>,
}

async fn checks(State(state): State<ApiState>) -> Response {
    let views: Vec<CheckView> = state
        .slots
        .snapshot()
        .into_iter()
        .map(|(name, slot)| CheckView {
            latest: state.latest.get(&name).map(|o| (*o).clone()),
            name,
            interval_seconds: slot.interval().as_secs_f64(),
            next_due: slot.next_due(),
            last_started: slot.last_started(),
        })
        .collect();
    Json(serde_json::json!({ "checks": views })).into_response()
}

/// Asks the alerter; `None` when it is gone (the daemon is stopping).
async fn ask<T>(
    state: &ApiState,
    request: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> AlertRequest,
) -> Result<T, Response> {
    let unavailable = || {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "alerting is not running (the daemon is stopping?)",
        )
    };
    let alerts = state.alerts.as_ref().ok_or_else(unavailable)?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    alerts
        .requests
        .send(request(reply))
        .await
        .map_err(|_| unavailable())?;
    answer.await.map_err(|_| unavailable())
}

/// `GET /api/v1/report`: the daily certificate report, built now.
async fn report(State(state): State<ApiState>) -> Response {
    match ask(&state, AlertRequest::Report).await {
        Ok(report) => Json(report).into_response(),
        Err(response) => response,
    }
}

async fn silences(State(state): State<ApiState>) -> Response {
    match ask(&state, AlertRequest::Silences).await {
        Ok(silences) => Json(serde_json::json!({ "silences": silences })).into_response(),
        Err(response) => response,
    }
}

/// `POST /api/v1/silences` body.
#[derive(Serialize, Deserialize)]
pub struct SilenceRequest {
    pub pattern: String,
    /// humantime, e.g. "8h".
    #[serde(rename = "for")]
    pub duration: String,
    #[serde(default)]
    pub reason: String,
}

/// Silencing changes who is woken up: over TCP it needs the token even on
/// loopback, where any local user could otherwise mute the pager; over the
/// local socket, the peer's credentials stand for it.
fn refuse_mutation(state: &ApiState, request: &Request) -> Option<Response> {
    if auth::is_local(request) || state.token.current().is_some() {
        return None;
    }
    Some(error(
        StatusCode::FORBIDDEN,
        "silences over TCP need the token: set [api] token_file (the CLI reads it from the same config), or run the command on this machine, where it uses the local socket (as root, the daemon's user, or a member of the group vigie)",
    ))
}

async fn add_silence(State(state): State<ApiState>, request: Request) -> Response {
    // Who asks is settled before the body is read: the token by
    // `require_token`, its presence here.
    if let Some(refused) = refuse_mutation(&state, &request) {
        return refused;
    }
    let what = "POST /api/v1/silences";
    let bytes = match body::read(request.into_body(), body::SILENCE_LIMIT, what).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused_body(refused),
    };
    let body: SilenceRequest = match serde_json::from_slice(&bytes) {
        Ok(body) => body,
        Err(err) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the body is not a silence ({{\"pattern\", \"for\", \"reason\"}}): {err}"),
            )
        }
    };
    let duration = match humantime::parse_duration(&body.duration) {
        Ok(d) => d,
        Err(err) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("for: {err} (a duration such as \"8h\")"),
            )
        }
    };
    if body.pattern.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "pattern: must not be empty");
    }
    // Zero and more than MAX_SILENCE are refused here.
    let silence = match Silence::new(&body.pattern, duration, &body.reason, state.clock.now()) {
        Ok(silence) => silence,
        Err(err) => {
            let key = match err {
                crate::alert::SilenceError::ReasonTooLong(_) => "reason",
                crate::alert::SilenceError::PatternTooLong(_) => "pattern",
                _ => "for",
            };
            return error(StatusCode::BAD_REQUEST, &format!("{key}: {err}"));
        }
    };
    let stored = silence.clone();
    match ask(&state, |reply| AlertRequest::AddSilence(silence, reply)).await {
        Ok(Ok(())) => (StatusCode::CREATED, Json(stored)).into_response(),
        Ok(Err(message)) => error(StatusCode::INTERNAL_SERVER_ERROR, &message),
        Err(response) => response,
    }
}

async fn remove_silence(
    State(state): State<ApiState>,
    Path(pattern): Path<String>,
    request: Request,
) -> Response {
    if let Some(refused) = refuse_mutation(&state, &request) {
        return refused;
    }
    match ask(&state, |reply| {
        AlertRequest::RemoveSilence(pattern.clone(), reply)
    })
    .await
    {
        Ok(Ok(true)) => Json(serde_json::json!({ "removed": pattern })).into_response(),
        Ok(Ok(false)) => error(
            StatusCode::NOT_FOUND,
            &format!("no silence with the pattern {pattern:?}"),
        ),
        Ok(Err(message)) => error(StatusCode::INTERNAL_SERVER_ERROR, &message),
        Err(response) => response,
    }
}

fn error(code: StatusCode, message: &str) -> Response {
    (code, Json(serde_json::json!({ "error": message }))).into_response()
}

/// A body that was not read, as JSON; a late one also ends the connection
/// (the rest of it may still be on its way).
fn refused_body(refused: body::Refused) -> Response {
    let mut response = error(refused.status, &refused.message);
    if refused.status == StatusCode::REQUEST_TIMEOUT {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}

async fn metrics(State(state): State<ApiState>) -> Response {
    let slots = state.slots.snapshot();
    let latest: Arc<[Arc<Outcome>]> = slots
        .keys()
        .filter_map(|name| state.latest.get(name))
        .collect();
    let now = state.clock.now();
    // Streamed a few hundred checks at a time: at 10,000 checks the whole
    // body is ~15 MiB, which would otherwise be held (and grown) in memory
    // on every scrape.
    let probe_chunks = ProbeFamily::ALL.into_iter().flat_map(move |family| {
        let latest = latest.clone();
        let chunks = latest.len().div_ceil(METRICS_CHUNK).max(1);
        (0..chunks).map(move |chunk| {
            let from = (chunk * METRICS_CHUNK).min(latest.len());
            let to = (from + METRICS_CHUNK).min(latest.len());
            let mut m = Metrics(String::with_capacity(256 + (to - from) * 256));
            if chunk == 0 {
                family.write_help(&mut m);
            }
            for outcome in &latest[from..to] {
                family.write_sample(&mut m, outcome);
            }
            m.0
        })
    });
    let daemon_chunk = std::iter::once_with(move || {
        let mut text = String::new();
        render_daemon_metrics(&mut text, &state, &slots, now);
        text
    });
    let chunks = probe_chunks
        .chain(daemon_chunk)
        .map(Ok::<_, std::convert::Infallible>);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        axum::body::Body::from_stream(futures_util::stream::iter(chunks)),
    )
        .into_response()
}

/// Checks per chunk of the streamed `/metrics` body.
const METRICS_CHUNK: usize = 256;

/// The per-check gauges, blackbox_exporter's names first, labelled by check
/// so one scrape covers every target. Written one family at a time, as the
/// text format wants every sample of a family together.
#[derive(Debug, Clone, Copy)]
enum ProbeFamily {
    Success,
    Duration,
    HttpStatus,
    EarliestExpiry,
    ChainInfo,
    TlsVersion,
    CheckStatus,
    LastRun,
}

impl ProbeFamily {
    const ALL: [ProbeFamily; 8] = [
        Self::Success,
        Self::Duration,
        Self::HttpStatus,
        Self::EarliestExpiry,
        Self::ChainInfo,
        Self::TlsVersion,
        Self::CheckStatus,
        Self::LastRun,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Success => "probe_success",
            Self::Duration => "probe_duration_seconds",
            Self::HttpStatus => "probe_http_status_code",
            Self::EarliestExpiry => "probe_ssl_earliest_cert_expiry",
            Self::ChainInfo => "probe_ssl_last_chain_info",
            Self::TlsVersion => "probe_tls_version_info",
            Self::CheckStatus => "vigie_check_status",
            Self::LastRun => "vigie_check_last_run_timestamp_seconds",
        }
    }

    fn write_help(self, m: &mut Metrics) {
        let help = match self {
            Self::Success => "1 when the last probe was up or warn, 0 when down",
            Self::Duration => "how long the last probe took",
            Self::HttpStatus => "HTTP status of the last answer (cors: of the preflight)",
            Self::EarliestExpiry => {
                "not_after of the earliest-expiring certificate served, unix seconds"
            }
            Self::ChainInfo => "the leaf certificate served, as labels",
            Self::TlsVersion => "TLS version negotiated, as a label",
            Self::CheckStatus => "1 for the status of the last probe (up, warn, down)",
            Self::LastRun => "when the last probe started",
        };
        m.help(self.name(), "gauge", help);
    }

    fn write_sample(self, m: &mut Metrics, o: &Outcome) {
        let name = self.name();
        let check = ("check", o.name.as_str());
        let kind = ("kind", o.kind.as_str());
        let target = ("target", o.target.as_str());
        match self {
            Self::Success => m.sample(
                name,
                &[check, kind, target],
                f64::from(u8::from(o.status != Status::Down)),
            ),
            Self::Duration => m.sample(name, &[check, kind, target], o.duration_ms / 1000.0),
            Self::HttpStatus => {
                let status = o
                    .http
                    .as_ref()
                    .map(|h| h.status)
                    .or(o.cors.as_ref().map(|c| c.preflight_status));
                if let Some(status) = status {
                    m.sample(name, &[check, kind, target], f64::from(status));
                }
            }
            Self::EarliestExpiry => {
                let chain = o.tls.as_ref().map(|t| &t.chain[..]).unwrap_or_default();
                if let Some(first) = crate::cert::earliest_expiry(chain) {
                    let expiry = first.not_after.unix_timestamp() as f64;
                    m.sample(name, &[check, kind, target], expiry);
                }
            }
            Self::ChainInfo => {
                if let Some(leaf) = o.leaf() {
                    let labels = [
                        check,
                        kind,
                        target,
                        ("fingerprint_sha256", leaf.sha256.as_str()),
                        ("issuer", leaf.issuer.as_str()),
                        ("serial_number", leaf.serial.as_str()),
                        ("subject", leaf.subject.as_str()),
                    ];
                    m.sample(name, &labels, 1.0);
                }
            }
            Self::TlsVersion => {
                if let Some(version) = o.tls.as_ref().and_then(|t| t.version.as_deref()) {
                    m.sample(name, &[check, kind, target, ("version", version)], 1.0);
                }
            }
            Self::CheckStatus => {
                for (status, label) in [
                    (Status::Up, "up"),
                    (Status::Warn, "warn"),
                    (Status::Down, "down"),
                ] {
                    let value = f64::from(u8::from(o.status == status));
                    m.sample(name, &[check, ("status", label)], value);
                }
            }
            Self::LastRun => m.sample(name, &[check], o.started_at.unix_timestamp() as f64),
        }
    }
}

fn render_daemon_metrics(
    text: &mut String,
    state: &ApiState,
    slots: &std::collections::BTreeMap<String, Arc<crate::scheduler::Slot>>,
    now: OffsetDateTime,
) {
    let mut m = Metrics::default();
    m.help(
        "vigie_checks_configured",
        "gauge",
        "checks in the running config",
    );
    m.sample("vigie_checks_configured", &[], slots.len() as f64);
    m.help(
        "vigie_check_start_delay_seconds",
        "gauge",
        "how late after its due time the last probe started",
    );
    for (name, slot) in slots {
        m.sample(
            "vigie_check_start_delay_seconds",
            &[("check", name.as_str())],
            slot.last_delay().as_secs_f64(),
        );
    }
    m.help(
        "vigie_scheduler_lateness_seconds",
        "gauge",
        "longest wait past a due time among checks not yet started",
    );
    let worst = slots
        .values()
        .map(|s| s.lateness(now))
        .max()
        .unwrap_or_default();
    m.sample("vigie_scheduler_lateness_seconds", &[], worst.as_secs_f64());
    m.help(
        "vigie_scheduler_last_tick_timestamp_seconds",
        "gauge",
        "last supervisor tick",
    );
    if let Some(tick) = state.health.last_tick() {
        m.sample(
            "vigie_scheduler_last_tick_timestamp_seconds",
            &[],
            tick.unix_timestamp() as f64,
        );
    }
    m.help("vigie_healthy", "gauge", "1 when /healthz answers 200");
    m.sample(
        "vigie_healthy",
        &[],
        f64::from(u8::from(state.health.verdict(now).is_healthy())),
    );
    m.help(
        "vigie_config_last_reload_successful",
        "gauge",
        "1 when the last config (re)load succeeded",
    );
    m.sample(
        "vigie_config_last_reload_successful",
        &[],
        f64::from(u8::from(state.health.reload_ok())),
    );
    m.help(
        "vigie_config_last_reload_success_timestamp_seconds",
        "gauge",
        "when the running config was loaded",
    );
    if let Some(at) = state.health.last_reload_ok() {
        m.sample(
            "vigie_config_last_reload_success_timestamp_seconds",
            &[],
            at.unix_timestamp() as f64,
        );
    }
    m.help(
        "vigie_store_errors_total",
        "counter",
        "results that could not be written to the store",
    );
    m.sample(
        "vigie_store_errors_total",
        &[],
        state.health.store_errors() as f64,
    );
    m.help(
        "vigie_task_restarts_total",
        "counter",
        "restarts of a supervised task after it panicked or returned early",
    );
    m.help(
        "vigie_task_up",
        "gauge",
        "1 while a supervised task runs, 0 while it waits to restart or is failing",
    );
    let stages = state.health.stages().all();
    for stage in &stages {
        let task = [("task", stage.name())];
        m.sample("vigie_task_restarts_total", &task, stage.restarts() as f64);
    }
    for stage in &stages {
        let task = [("task", stage.name())];
        let up = stage.state() == crate::supervise::StageState::Running;
        m.sample("vigie_task_up", &task, f64::from(u8::from(up)));
    }
    if let Some(replication) = &state.replication {
        replication.snapshot(now).write_metrics(&mut m.0);
    }
    if let Some(heartbeat) = &state.heartbeat {
        heartbeat.write_metrics(&mut m.0);
    }
    if let Some(vantage) = &state.vantage {
        vantage.snapshot().write_metrics(&mut m.0);
    }
    if let Some(mail) = &state.mail {
        mail_metrics(&mut m, &mail.snapshot(), now);
    }
    if let Some(alerts) = &state.alerts {
        m.help(
            "vigie_alerts_firing",
            "gauge",
            "checks with an open incident (DOWN sent, or held by a silence or window)",
        );
        m.sample("vigie_alerts_firing", &[], alerts.status.firing() as f64);
        m.help(
            "vigie_blind",
            "gauge",
            "1 when every canary fails and network failures are not judged",
        );
        m.sample(
            "vigie_blind",
            &[],
            f64::from(u8::from(alerts.status.blind())),
        );
    }
    server_metrics(&mut m, &state.server.snapshot());
    m.help("vigie_build_info", "gauge", "the running vigie version");
    m.sample(
        "vigie_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    text.push_str(&m.0);
}

fn server_metrics(m: &mut Metrics, server: &ServerSnapshot) {
    m.help(
        "vigie_api_connections",
        "gauge",
        "connections to the API open now",
    );
    m.sample("vigie_api_connections", &[], server.open as f64);
    let counters = [
        ("accepted", "connections accepted", server.accepted_total),
        (
            "refused",
            "connections closed at once: every connection was answering a request",
            server.refused_total,
        ),
        (
            "evicted",
            "connections without a request in flight closed to make room for a newcomer",
            server.evicted_total,
        ),
        (
            "timed_out",
            "connections closed by the request deadline (head and body) or the idle timeout",
            server.timed_out_total,
        ),
    ];
    for (what, help, value) in counters {
        let name = format!("vigie_api_connections_{what}_total");
        m.help(&name, "counter", help);
        m.sample(&name, &[], value as f64);
    }
    m.help(
        "vigie_api_requests_shed_total",
        "counter",
        "requests answered 503 at once: every place not held back for /healthz and the token was answering",
    );
    m.sample(
        "vigie_api_requests_shed_total",
        &[],
        server.shed_total as f64,
    );
}

fn mail_metrics(m: &mut Metrics, mail: &MailSnapshot, now: OffsetDateTime) {
    let gauges = [
        (
            "vigie_mail_outbox_backlog",
            "messages waiting in the outbox",
            mail.backlog,
        ),
        (
            "vigie_mail_dead_letters",
            "messages refused for good, kept in the dead-letter tree",
            mail.dead_letters,
        ),
        (
            "vigie_mail_failing",
            "1 while the mail server cannot be reached or refuses vigie",
            u64::from(mail.failing),
        ),
    ];
    for (name, help, value) in gauges {
        m.help(name, "gauge", help);
        m.sample(name, &[], value as f64);
    }
    let counters = [
        (
            "vigie_mail_delivered_total",
            "messages the mail server accepted (or written to the maildir)",
            mail.delivered_total,
        ),
        (
            "vigie_mail_deferred_total",
            "temporary refusals, retried with backoff",
            mail.deferred_total,
        ),
        (
            "vigie_mail_dead_lettered_total",
            "messages given up (permanent refusal, or deferred too long)",
            mail.dead_lettered_total,
        ),
        (
            "vigie_mail_transport_failures_total",
            "failures to reach or talk to the mail server",
            mail.transport_failures_total,
        ),
    ];
    for (name, help, value) in counters {
        m.help(name, "counter", help);
        m.sample(name, &[], value as f64);
    }
    m.help(
        "vigie_mail_oldest_pending_age_seconds",
        "gauge",
        "age of the oldest message in the outbox (0 when empty)",
    );
    let age = mail
        .oldest_pending
        .map_or(0.0, |t| (now - t).as_seconds_f64().max(0.0));
    m.sample("vigie_mail_oldest_pending_age_seconds", &[], age);
}

/// Prometheus text exposition format 0.0.4.
#[derive(Default)]
struct Metrics(String);

impl Metrics {
    fn help(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                self.0.push_str(key);
                self.0.push_str("=\"");
                escape_into(&mut self.0, value);
                self.0.push('"');
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// Label values escape backslash, double quote and newline, as the
/// exposition format says. Every label value goes through here; control
/// characters are first made visible escapes (`sanitize`), so that a
/// certificate name stored by an older vigie cannot carry them into a
/// scraper's logs or a dashboard.
fn escape_into(out: &mut String, value: &str) {
    for c in crate::sanitize::escape_controls(value).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::testing::{down, golden, up, with_leaf, T0};
    use crate::outcome::Assertion;

    #[test]
    fn label_values_are_escaped_for_the_exposition_format() {
        let mut m = Metrics::default();
        m.sample("x", &[("subject", "CN=\"a\\b\"\n\x1b[2J")], 1.0);
        assert_eq!(m.0, "x{subject=\"CN=\\\"a\\\\b\\\"\\\\n\\\\x1b[2J\"} 1\n");
    }

    #[test]
    fn the_exposition_is_written_as_it_always_was() {
        let outcomes = [
            up("site", T0),
            with_leaf("api", T0, |leaf| leaf.subject = "CN=\"api\"".into()),
            down("bucket", T0, Assertion::HttpStatus),
        ];
        let mut text = String::new();
        for family in ProbeFamily::ALL {
            let mut m = Metrics::default();
            family.write_help(&mut m);
            for outcome in &outcomes {
                family.write_sample(&mut m, outcome);
            }
            text.push_str(&m.0);
        }
        let stages = Arc::new(crate::supervise::Stages::default());
        stages.register(
            "recorder",
            crate::supervise::Progress::Every(std::time::Duration::from_secs(60)),
        );
        stages.register(
            "alerter",
            crate::supervise::Progress::Every(std::time::Duration::from_secs(60)),
        );
        let clock: Arc<dyn Clock> = Arc::new(crate::clock::FakeClock::new(T0));
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("config.toml");
        std::fs::create_dir_all(dir.path().join("checks")).unwrap();
        std::fs::write(
            dir.path().join("checks/site.toml"),
            "[[check]]\nname = \"site\"\nkind = \"http\"\nurl = \"https://example.com/\"\n",
        )
        .unwrap();
        std::fs::write(
            &config_path,
            "state_dir = \"state\"\n[alerting]\nto = [\"oncall@example.com\"]\n",
        )
        .unwrap();
        let loaded = crate::config::load(&config_path).unwrap();
        let (_config_tx, config) = tokio::sync::watch::channel(Arc::new(loaded));
        let mail = Arc::new(MailStats::default());
        mail.add_backlog(3);
        let (requests, _alerter) = tokio::sync::mpsc::channel(1);
        let status = Arc::new(AlertStatus::default());
        status.set_firing(2);
        status.set_blind(true);
        let state = ApiState {
            store: Arc::new(crate::store::MemoryStore::default()),
            latest: Latest::default(),
            slots: Slots::default(),
            health: Arc::new(Health::new(T0, stages)),
            clock,
            token: Token::default(),
            replication: None,
            heartbeat: Some(Arc::new(HeartbeatStats::default())),
            mail: Some(mail),
            alerts: Some(Alerts { status, requests }),
            server: Arc::new(ServerStats::default()),
            config,
            vantage: Some(Arc::new(crate::vantage::VantageStats::default())),
        };
        render_daemon_metrics(&mut text, &state, &state.slots.snapshot(), T0);
        let replication = ReplicationSnapshot {
            status: crate::replicate::ReplicationState::Behind,
            lag_seconds: 12.5,
            lag_results: 4,
            last_success: Some(T0),
            consecutive_failures: 1,
            failures_total: 2,
            segments_total: 3,
            results_total: 40,
            bytes_total: 4096,
            last_error: None,
        };
        replication.write_metrics(&mut text);
        golden("metrics/exposition.txt", &text);
    }
}
