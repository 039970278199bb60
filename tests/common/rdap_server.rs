//! A registry's RDAP server on loopback (axum, plain HTTP on 127.0.0.1):
//! the bootstrap document at `/bootstrap/dns.json` (the copy in
//! `tests/fixtures/rdap/dns.json`, its `BASE` replaced by this server's
//! address) and RFC 9083 domain answers at `/rdap/domain/{name}`, each set
//! by the test from the recorded documents in `tests/fixtures/rdap/`. A
//! name without an answer gets the RFC 9083 error object of a 404. Every
//! request is counted by path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::task::JoinHandle;

/// One canned answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    pub retry_after: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    answers: Mutex<HashMap<String, Answer>>,
    hits: Mutex<HashMap<String, usize>>,
}

/// The server; stops when dropped.
pub struct RdapServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

/// A recorded document of `tests/fixtures/rdap/`.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/rdap")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl RdapServer {
    /// Starts on 127.0.0.1 (call inside a Tokio runtime), serving the test
    /// bootstrap.
    pub async fn start() -> RdapServer {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/bootstrap/dns.json", get(bootstrap))
            .route("/rdap/domain/{name}", get(domain))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let server = RdapServer { addr, shared, task };
        server.set_bootstrap(200, &fixture("dns.json"));
        server
    }

    /// `http://127.0.0.1:PORT/bootstrap/dns.json`.
    pub fn bootstrap_url(&self) -> String {
        format!("http://{}/bootstrap/dns.json", self.addr)
    }

    /// `http://127.0.0.1:PORT/rdap/`, the base URL the bootstrap names.
    pub fn base_url(&self) -> String {
        format!("http://{}/rdap/", self.addr)
    }

    /// Serves `text` (its `BASE` replaced by this server's address) as the
    /// bootstrap, with `status`.
    pub fn set_bootstrap(&self, status: u16, text: &str) {
        let body = text.replace("BASE", &format!("http://{}", self.addr));
        self.set("bootstrap", status, body.into(), None);
    }

    /// Answers `/rdap/domain/{name}` with the fixture `file`.
    pub fn serve(&self, name: &str, file: &str) {
        self.set(&format!("domain/{name}"), 200, fixture(file).into(), None);
    }

    /// Answers `/rdap/domain/{name}` with `status`, an RFC 9083 error
    /// object, and `Retry-After` when given.
    pub fn refuse(&self, name: &str, status: u16, retry_after: Option<&str>) {
        let body = serde_json::json!({
            "errorCode": status,
            "title": "Too Many Requests",
            "description": ["Query rate exceeded"],
        });
        self.set(
            &format!("domain/{name}"),
            status,
            body.to_string().into(),
            retry_after.map(str::to_string),
        );
    }

    /// Answers `/rdap/domain/{name}` with `body` as is.
    pub fn serve_bytes(&self, name: &str, body: impl Into<Bytes>) {
        self.set(&format!("domain/{name}"), 200, body.into(), None);
    }

    /// Requests seen for `what`: `"bootstrap"`, `"domain/NAME"`, or
    /// `"rdap"` for every domain query.
    pub fn hits(&self, what: &str) -> usize {
        self.shared
            .hits
            .lock()
            .unwrap()
            .get(what)
            .copied()
            .unwrap_or(0)
    }

    fn set(&self, what: &str, status: u16, body: Bytes, retry_after: Option<String>) {
        self.shared.answers.lock().unwrap().insert(
            what.to_string(),
            Answer {
                status,
                body,
                retry_after,
            },
        );
    }
}

impl Drop for RdapServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn count(shared: &Shared, what: &str) {
    *shared
        .hits
        .lock()
        .unwrap()
        .entry(what.to_string())
        .or_default() += 1;
}

fn answer(shared: &Shared, what: &str, content_type: &'static str) -> Response {
    let Some(answer) = shared.answers.lock().unwrap().get(what).cloned() else {
        let body = serde_json::json!({
            "errorCode": 404,
            "title": "Not Found",
            "description": ["The domain name is not registered."],
        });
        return (
            StatusCode::NOT_FOUND,
            [("content-type", "application/rdap+json")],
            body.to_string(),
        )
            .into_response();
    };
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static(content_type));
    if let Some(retry) = &answer.retry_after {
        headers.insert("retry-after", HeaderValue::from_str(retry).unwrap());
    }
    let status = StatusCode::from_u16(answer.status).unwrap();
    (status, headers, answer.body).into_response()
}

async fn bootstrap(State(shared): State<Arc<Shared>>) -> Response {
    count(&shared, "bootstrap");
    answer(&shared, "bootstrap", "application/json")
}

async fn domain(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    count(&shared, "rdap");
    count(&shared, &format!("domain/{name}"));
    answer(&shared, &format!("domain/{name}"), "application/rdap+json")
}
