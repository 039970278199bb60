//! A CA's publication point on loopback: an ACME directory with
//! `renewalInfo`, RFC 9773 renewal information per CertID, and CRLs, over
//! plain HTTP on 127.0.0.1 (axum). Each answer is set by the test and can
//! change between probes; every request is counted by path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::task::JoinHandle;

/// One canned answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// Shared, not copied, by every answer (a CRL may be megabytes).
    pub body: Bytes,
    pub retry_after: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    answers: Mutex<HashMap<String, Answer>>,
    hits: Mutex<HashMap<String, usize>>,
    base: Mutex<String>,
}

/// The server; stops when dropped.
pub struct CaServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl CaServer {
    /// Starts on 127.0.0.1 (call inside a Tokio runtime).
    pub async fn start() -> CaServer {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/directory", get(directory))
            .route("/ari/{cert_id}", get(ari))
            .route("/crl/{name}", get(crl))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        *shared.base.lock().unwrap() = format!("http://{addr}");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        CaServer { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT/directory`.
    pub fn directory_url(&self) -> String {
        format!("http://{}/directory", self.addr)
    }

    /// `http://127.0.0.1:PORT/crl/{name}`.
    pub fn crl_url(&self, name: &str) -> String {
        format!("http://{}/crl/{name}", self.addr)
    }

    /// Answers `/ari/{cert_id}` for any CertID with this window.
    pub fn set_window(
        &self,
        start: OffsetDateTime,
        end: OffsetDateTime,
        explanation: Option<&str>,
        retry_after: Option<u64>,
    ) {
        let mut json = serde_json::json!({
            "suggestedWindow": {
                "start": start.format(&Rfc3339).unwrap(),
                "end": end.format(&Rfc3339).unwrap(),
            }
        });
        if let Some(url) = explanation {
            json["explanationURL"] = url.into();
        }
        self.set(
            "ari",
            Answer {
                status: 200,
                body: json.to_string().into(),
                retry_after: retry_after.map(|s| s.to_string()),
            },
        );
    }

    /// Answers `/ari/...` with `status` and no body.
    pub fn set_ari_status(&self, status: u16) {
        self.set(
            "ari",
            Answer {
                status,
                body: Bytes::new(),
                retry_after: None,
            },
        );
    }

    /// Serves `der` at `/crl/{name}`.
    pub fn set_crl(&self, name: &str, der: impl Into<Bytes>) {
        self.set(
            &format!("crl/{name}"),
            Answer {
                status: 200,
                body: der.into(),
                retry_after: None,
            },
        );
    }

    /// Requests seen for `what` (`"directory"`, `"ari"`, `"crl/NAME"`).
    pub fn hits(&self, what: &str) -> usize {
        self.shared
            .hits
            .lock()
            .unwrap()
            .get(what)
            .copied()
            .unwrap_or(0)
    }

    fn set(&self, what: &str, answer: Answer) {
        self.shared
            .answers
            .lock()
            .unwrap()
            .insert(what.to_string(), answer);
    }
}

impl Drop for CaServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(shared: &Shared, what: &str) -> Response {
    *shared
        .hits
        .lock()
        .unwrap()
        .entry(what.to_string())
        .or_default() += 1;
    let Some(answer) = shared.answers.lock().unwrap().get(what).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut headers = HeaderMap::new();
    if let Some(retry) = &answer.retry_after {
        headers.insert("retry-after", HeaderValue::from_str(retry).unwrap());
    }
    let status = StatusCode::from_u16(answer.status).unwrap();
    (status, headers, answer.body).into_response()
}

async fn directory(State(shared): State<Arc<Shared>>) -> Response {
    *shared
        .hits
        .lock()
        .unwrap()
        .entry("directory".into())
        .or_default() += 1;
    let base = shared.base.lock().unwrap().clone();
    let json = serde_json::json!({
        "newNonce": format!("{base}/nonce"),
        "renewalInfo": format!("{base}/ari"),
    });
    ([("content-type", "application/json")], json.to_string()).into_response()
}

async fn ari(State(shared): State<Arc<Shared>>, Path(_cert_id): Path<String>) -> Response {
    answer(&shared, "ari")
}

async fn crl(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    answer(&shared, &format!("crl/{name}"))
}
