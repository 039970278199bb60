//! The client side of the commands that read or change what the daemon
//! keeps (`history`, `report`, `silence`, `unsilence`, `restore`), a
//! vantage's key (`vantage keygen`), and the
//! terminal output of `vigie check` ([`render`]).
//!
//! sled allows one process per database: while the daemon runs, these
//! commands go through its local API ([`ask_daemon`]); when no daemon
//! answers, they open the store themselves.

pub mod history;
pub mod keygen;
pub mod render;
pub mod report;
pub mod restore;
pub mod silence;

use crate::config::Config;
use crate::store::{AlertStore, SledStore};

/// Why a command could not get its answer from the running daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("the daemon at {addr} answered {status}: {message}")]
    Api {
        addr: std::net::SocketAddr,
        status: reqwest::StatusCode,
        message: String,
    },
    #[error("cannot reach the daemon at {addr}: {source}")]
    Unreachable {
        addr: std::net::SocketAddr,
        source: reqwest::Error,
    },
    #[error("cannot trust the daemon's TLS certificate ([api] ca_file, or tls_cert_file without it): {0}")]
    Trust(#[from] crate::net::CaFileError),
}

impl DaemonError {
    /// The daemon answered 404 Not Found (an unknown check, no such
    /// silence).
    pub fn is_not_found(&self) -> bool {
        matches!(self, DaemonError::Api { status, .. } if *status == reqwest::StatusCode::NOT_FOUND)
    }
}

/// Where the CLI finds the daemon: `listen` itself, or loopback when the
/// daemon listens on every address (`0.0.0.0`, `::`); `https` when `[api]`
/// serves TLS. The certificate must then name that address (an IP SAN).
pub fn daemon_url(config: &Config) -> url::Url {
    let mut addr = config.api.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let scheme = match config.api.tls {
        Some(_) => "https",
        None => "http",
    };
    url::Url::parse(&format!("{scheme}://{addr}/"))
        .expect("a socket address makes a URL (invariant: SocketAddr displays as host:port)")
}

/// The client the CLI asks the daemon with: for a TLS API it trusts the
/// Mozilla roots plus `[api] ca_file`, or, without one, the certificates of
/// `tls_cert_file` (a self-signed or private-CA certificate on the same
/// machine).
fn daemon_client(config: &Config) -> Result<reqwest::Client, DaemonError> {
    let addr = config.api.listen;
    let unreachable = |source| DaemonError::Unreachable { addr, source };
    let Some(tls) = &config.api.tls else {
        return crate::net::api_client().map_err(unreachable);
    };
    let trust = config.api.ca_file.as_deref().unwrap_or(&tls.cert_file);
    let roots = crate::net::roots(Some(trust))?;
    crate::net::api_client_with(roots).map_err(unreachable)
}

/// Asks the running daemon's API (`path` as segments, each encoded; the
/// configured token sent): `Ok(None)` when no daemon listens, so that the
/// command opens the store itself.
pub async fn ask_daemon(
    config: &Config,
    method: reqwest::Method,
    path: &[&str],
    query: &[(&str, &str)],
    body: Option<serde_json::Value>,
) -> Result<Option<serde_json::Value>, DaemonError> {
    let addr = config.api.listen;
    let unreachable = |source| DaemonError::Unreachable { addr, source };
    let client = daemon_client(config)?;
    let mut url = daemon_url(config);
    url.path_segments_mut()
        .expect("http URLs have a path")
        .pop_if_empty()
        .extend(path);
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    let url_addr = url.socket_addrs(|| None).unwrap_or_default();
    let mut request = client.request(method, url);
    if let Ok(Some(token)) = crate::api::read_token(config) {
        request = request.bearer_auth(&*token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = match request.send().await {
        Ok(response) => response,
        // Nobody listens: no daemon runs. But a connection that failed
        // after TCP (a TLS certificate the CLI does not trust) is a daemon
        // that was not asked, and the operator must hear why, not that
        // its store is in use.
        Err(err) if err.is_connect() && !listening(&url_addr).await => return Ok(None),
        Err(err) => return Err(unreachable(err)),
    };
    let status = response.status();
    if !status.is_success() {
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        let message = body["error"]
            .as_str()
            .unwrap_or(status.as_str())
            .to_string();
        return Err(DaemonError::Api {
            addr,
            status,
            message,
        });
    }
    response.json().await.map(Some).map_err(unreachable)
}

/// Whether something accepts TCP connections at one of `addrs`.
async fn listening(addrs: &[std::net::SocketAddr]) -> bool {
    let connect = tokio::net::TcpStream::connect(addrs);
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(2), connect).await,
        Ok(Ok(_))
    )
}

/// Why a command that talks to the daemon (or its store) failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error("{0}")]
    Local(String),
}

/// The store and alert trees under `state_dir`, opened by a command while
/// no daemon runs.
fn local_store(config: &Config) -> Result<(SledStore, AlertStore), CommandError> {
    crate::store::create_state_dir(&config.state_dir).map_err(|e| {
        CommandError::Local(format!(
            "cannot create state_dir {}: {e}",
            config.state_dir.display()
        ))
    })?;
    let path = crate::store::history_path(&config.state_dir);
    let store = SledStore::open(&path, crate::store::FLUSH_EVERY)
        .map_err(|e| CommandError::Local(e.to_string()))?;
    let alerts = store
        .alerts()
        .map_err(|e| CommandError::Local(e.to_string()))?;
    Ok((store, alerts))
}
