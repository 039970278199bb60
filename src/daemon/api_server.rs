//! The `api` and `api-socket` tasks: one router, served on `[api] listen`
//! (TCP, optionally TLS) and on the local control socket. What the router
//! answers is `crate::api`'s; this file binds, serves and rebinds after a
//! restart of either task.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::error::RunError;
use super::tasks::{Alerting, Shared};
use crate::api::{ApiState, Limits, ServerStats, ServerTls, Token};
use crate::config::Config;
use crate::heartbeat::HeartbeatStats;
use crate::replicate::ReplicationStatus;
use crate::scheduler::Slots;
use crate::store::{Latest, Store};
use crate::supervise::{Progress, Supervisor};

/// What the router reads that the other tasks own.
pub struct ApiInputs<'a> {
    pub store: &'a Arc<dyn Store>,
    pub latest: &'a Latest,
    pub slots: &'a Slots,
    pub replication: Option<Arc<ReplicationStatus>>,
    pub heartbeat: Option<Arc<HeartbeatStats>>,
    pub alerting: &'a Alerting,
}

/// The API as served: what a reload replaces, and where it listens.
pub struct Api {
    pub token: Token,
    pub server_tls: ServerTls,
    /// The local control socket, when it could be bound.
    pub socket: Option<PathBuf>,
    /// The address the TCP listener is bound to (`[api] listen`, its port
    /// chosen by the system when it says 0).
    pub addr: SocketAddr,
}

/// Reads the token and TLS files, binds `[api] listen`, and spawns both
/// listeners' tasks.
pub async fn start(shared: &Shared, inputs: ApiInputs<'_>) -> Result<Api, RunError> {
    let config = &shared.config;
    let token = Token::default();
    token.set(crate::api::read_token(config)?);
    let server_tls = ServerTls::default();
    server_tls.set(crate::api::acceptor(config.api.tls.as_ref())?);
    let server_stats = Arc::new(ServerStats::default());
    let listener = tokio::net::TcpListener::bind(config.api.listen)
        .await
        .map_err(|source| RunError::ApiListen {
            addr: config.api.listen,
            source,
        })?;
    let addr = listener.local_addr().unwrap_or(config.api.listen);
    let alerting = inputs.alerting;
    let api = crate::api::router(ApiState {
        store: inputs.store.clone(),
        latest: inputs.latest.clone(),
        slots: inputs.slots.clone(),
        health: shared.health.clone(),
        clock: shared.clock.clone(),
        token: token.clone(),
        replication: inputs.replication,
        heartbeat: inputs.heartbeat,
        mail: Some(alerting.outbox.stats()),
        alerts: Some(crate::alert::Alerts {
            status: alerting.status.clone(),
            requests: alerting.requests.clone(),
        }),
        server: server_stats.clone(),
        config: alerting.config.subscribe(),
        vantage: config
            .vantage
            .as_ref()
            .map(|_| alerting.vantage_stats.clone()),
        push: Some(alerting.push_stats.clone()),
        told: Some(alerting.told.clone()),
        updates: Some(alerting.updates.clone()),
        status: Default::default(),
    });
    let limits = Limits {
        request_timeout: config.api.request_timeout,
        ..Limits::DEFAULT
    };
    let socket = start_local_socket(config, &api, limits, &shared.supervisor, &shared.shutdown);
    let bound = Arc::new(std::sync::Mutex::new(Some(listener)));
    shared
        .supervisor
        .spawn("api", Progress::Unwatched, shared.shutdown.clone(), {
            let shutdown = shared.shutdown.clone();
            let server_tls = server_tls.clone();
            move |_stage| {
                let (api, bound, shutdown) = (api.clone(), bound.clone(), shutdown.clone());
                let (server_tls, stats) = (server_tls.clone(), server_stats.clone());
                async move {
                    // The first start serves the socket bound above; a
                    // restart binds the same address again (the dead
                    // server's socket closed with it).
                    let first = bound.lock().unwrap_or_else(|p| p.into_inner()).take();
                    let listener = match first {
                        Some(listener) => listener,
                        None => match tokio::net::TcpListener::bind(addr).await {
                            Ok(listener) => listener,
                            Err(err) => panic!("cannot listen on {addr} again: {err}"),
                        },
                    };
                    crate::api::serve(listener, api, server_tls, limits, stats, shutdown).await;
                }
            }
        });
    Ok(Api {
        token,
        server_tls,
        socket,
        addr,
    })
}

/// The local control socket (`api/local.rs`), served with the same
/// router as the TCP listener to the local users allowed to control vigie;
/// its path, when it could be bound. One that cannot be costs local control
/// only (the CLI then uses the token, as for a remote daemon): an ERROR in
/// the journal, not a refusal to start, so that a read-only state dir still
/// leaves vigie paging.
fn start_local_socket(
    config: &Config,
    api: &axum::Router,
    limits: Limits,
    supervisor: &Supervisor,
    shutdown: &CancellationToken,
) -> Option<PathBuf> {
    let path = crate::api::local::socket_path(config);
    let listener = match crate::api::local::bind(config, &path) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(socket = %path.display(), error = %err, "cannot listen on the local control socket; the CLI on this machine needs [api] token_file to reach this daemon");
            return None;
        }
    };
    let bound = Arc::new(std::sync::Mutex::new(Some(listener)));
    let access = crate::api::local::LocalAccess::for_this_process();
    let stats = Arc::new(ServerStats::default());
    let limits = Limits {
        max_connections: 16,
        reserved: 0,
        ..limits
    };
    let config = config.clone();
    supervisor.spawn("api-socket", Progress::Unwatched, shutdown.clone(), {
        let (api, path, shutdown) = (api.clone(), path.clone(), shutdown.clone());
        move |_stage| {
            let (api, bound, stats) = (api.clone(), bound.clone(), stats.clone());
            let (config, path, shutdown) = (config.clone(), path.clone(), shutdown.clone());
            async move {
                let first = bound.lock().unwrap_or_else(|p| p.into_inner()).take();
                let listener = match first {
                    Some(listener) => listener,
                    None => match crate::api::local::bind(&config, &path) {
                        Ok(listener) => listener,
                        Err(err) => panic!("cannot listen on {} again: {err}", path.display()),
                    },
                };
                crate::api::serve_local(listener, api, access, limits, stats, shutdown).await;
            }
        }
    });
    Some(path)
}
