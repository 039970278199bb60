//! The client side of the commands that read or change what the daemon
//! keeps (`history`, `report`, `silence`, `unsilence`, `restore`,
//! `incident`), a
//! vantage's key (`vantage keygen`), and the
//! terminal output of `vigie check` ([`render`], written as the probes
//! finish by [`check`]).
//!
//! sled allows one process per database: while the daemon runs, these
//! commands go through it ([`ask_daemon`]): its local socket first, which
//! needs no token (`api/local.rs`), else its TCP API with the token; when
//! no daemon answers, they open the store themselves.

pub mod check;
pub mod history;
pub mod incident;
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
    /// `at`: the TCP address or the local socket's path.
    #[error("the daemon at {at} answered {status}: {message}")]
    Api {
        at: String,
        status: reqwest::StatusCode,
        message: String,
    },
    #[error("cannot reach the daemon at {at}: {source}")]
    Unreachable { at: String, source: reqwest::Error },
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
    let at = config.api.listen.to_string();
    let unreachable = |source| DaemonError::Unreachable { at, source };
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
    let ask = Ask {
        method,
        path,
        query,
        body,
    };
    // `exists` follows the state dir's symlink: a dangling one (the
    // daemon is gone) is no socket.
    let socket = crate::api::local::socket_path(config);
    if socket.exists() {
        let at = socket.display().to_string();
        let unreachable = |source| DaemonError::Unreachable {
            at: at.clone(),
            source,
        };
        let client = crate::net::local_api_client(&socket).map_err(unreachable)?;
        let base = url::Url::parse("http://localhost/").expect("a literal URL");
        match ask.send(&client, base, None).await {
            // A socket file a dead daemon left: ask over TCP as if absent.
            Err(err) if err.is_connect() => {}
            sent => return ask.answer(sent, &at).await.map(Some),
        }
    }
    let at = config.api.listen.to_string();
    let client = daemon_client(config)?;
    let url = daemon_url(config);
    let url_addr = url.socket_addrs(|| None).unwrap_or_default();
    let token = crate::api::read_token(config).ok().flatten();
    match ask.send(&client, url, token.as_deref()).await {
        // Nobody listens: no daemon runs. But a connection that failed
        // after TCP (a TLS certificate the CLI does not trust) is a daemon
        // that was not asked, and the operator must hear why, not that
        // its store is in use.
        Err(err) if err.is_connect() && !listening(&url_addr).await => Ok(None),
        sent => ask.answer(sent, &at).await.map(Some),
    }
}

/// One request of [`ask_daemon`], sent over the socket or TCP.
struct Ask<'a> {
    method: reqwest::Method,
    path: &'a [&'a str],
    query: &'a [(&'a str, &'a str)],
    body: Option<serde_json::Value>,
}

impl Ask<'_> {
    async fn send(
        &self,
        client: &reqwest::Client,
        mut url: url::Url,
        token: Option<&str>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        url.path_segments_mut()
            .expect("http URLs have a path")
            .pop_if_empty()
            .extend(self.path);
        if !self.query.is_empty() {
            url.query_pairs_mut().extend_pairs(self.query);
        }
        let mut request = client.request(self.method.clone(), url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = &self.body {
            request = request.json(body);
        }
        request.send().await
    }

    /// The JSON of a successful answer, else the daemon's `error` in words.
    async fn answer(
        &self,
        sent: Result<reqwest::Response, reqwest::Error>,
        at: &str,
    ) -> Result<serde_json::Value, DaemonError> {
        let unreachable = |source| DaemonError::Unreachable {
            at: at.to_string(),
            source,
        };
        let response = sent.map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            let body: serde_json::Value = response.json().await.unwrap_or_default();
            let message = body["error"]
                .as_str()
                .unwrap_or(status.as_str())
                .to_string();
            return Err(DaemonError::Api {
                at: at.to_string(),
                status,
                message,
            });
        }
        response.json().await.map_err(unreachable)
    }
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
