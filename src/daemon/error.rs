//! [`RunError`]: why the daemon could not start, or ended badly, in words
//! that name the config key or the file involved.

use crate::api::TokenFileError;
use crate::net::CaFileError;

/// Why the daemon could not start, or ended badly.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Client(#[from] CaFileError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot create state_dir {path}: {source}")]
    StateDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr} ([api] listen): {source}")]
    ApiListen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    TokenFile(#[from] TokenFileError),
    #[error(transparent)]
    ApiTls(#[from] crate::api::ApiTlsError),
    #[error("[replication]: {0}")]
    Replication(#[from] crate::replicate::ReplicateError),
    #[error(transparent)]
    Heartbeat(#[from] crate::heartbeat::HeartbeatError),
    #[error(transparent)]
    Mail(#[from] crate::mail::MailError),
    #[error(
        "vigie stopped, but tasks died while it ran: {}; see the log for each panic (\"task ... panicked\")",
        .0.iter().map(|(task, n)| format!("{task} {n} time(s)")).collect::<Vec<_>>().join(", ")
    )]
    TasksDied(Vec<(&'static str, u64)>),
    #[error("the task opening the store died: {0}")]
    StoreTask(String),
    #[error(
        "the daemon's task was cancelled before it stopped (the runtime is shutting down): {0}"
    )]
    Cancelled(String),
}
