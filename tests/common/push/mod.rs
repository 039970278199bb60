//! Loopback stand-ins for the receivers of vigie's push channels, written
//! from their published documents: a Standard Webhooks receiver
//! ([`webhook`]), an ntfy server ([`ntfy`]), PagerDuty's Events API v2
//! ([`pagerduty`]) and a Slack incoming webhook ([`slack`]). No packaged
//! server exists for these, and a mock of the client under test would prove
//! nothing: each peer here checks what the real one checks and answers what
//! it answers.
//!
//! Every peer is a [`PushPeer`] over its [`Protocol`]: plain HTTP/1.1 on
//! 127.0.0.1 (any port), served by tasks of the caller's tokio runtime (the
//! constructors need one, as in [`super::servers`]) and stopped when the
//! handle is dropped. What they share lives here, once:
//!
//! - every request is recorded ([`Received`]: method, path, headers, body,
//!   arrival time), whatever it was answered;
//! - a test scripts answers with [`Plan`]s, consumed one per request in
//!   order; without one, the peer gives its protocol's normal answer;
//! - [`PushPeer::fail_for`] is an outage by the clock rather than by
//!   count: every request not planned is answered one status until then;
//! - [`PushPeer::wait_for_requests`] waits (async, with a deadline) until a
//!   number of requests arrived, and fails naming those that did.
//!
//! Not implemented: TLS (a client's TLS is proved against
//! [`super::servers::TlsServer`]; these peers prove the protocols), HTTP/2.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub mod ntfy;
pub mod pagerduty;
pub mod slack;
pub mod webhook;

#[allow(unused_imports)]
pub use ntfy::{NtfyConfig, NtfyMessage, NtfyServer, RateLimit};
#[allow(unused_imports)]
pub use pagerduty::{EventAction, Incident, IncidentState, PagerDutyEvent, PagerDutyEvents};
#[allow(unused_imports)]
pub use slack::{SlackMessage, SlackWebhook};
#[allow(unused_imports)]
pub use webhook::{sign, whsec_for_test, Delivery, Refusal, Refused, WebhookReceiver};

/// The largest request body a peer reads; a longer one is answered 413
/// (and recorded with an empty body). Push payloads are a few KiB.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// One request as a peer received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    /// Path and query, e.g. `/alerts?priority=high`.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When its body had been read, on tokio's clock (so a test on paused
    /// time sees its own time).
    pub at: tokio::time::Instant,
}

impl Received {
    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.uri.split_once('?').map_or(&self.uri, |(path, _)| path)
    }

    /// The query parameter `name`, percent-decoded (the first if repeated).
    pub fn query(&self, name: &str) -> Option<String> {
        let (_, query) = self.uri.split_once('?')?;
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    }

    /// The header `name` as text, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as UTF-8 text (lossy: for failure messages and checks).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// An answer a peer sends: status, headers in order, body.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl Answer {
    /// `status` with `body` of `content_type`.
    pub fn new(status: u16, content_type: &str, body: impl Into<Bytes>) -> Answer {
        Answer {
            status,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body: body.into(),
        }
    }

    /// `status` with `value` as its JSON body.
    pub fn json(status: u16, value: &serde_json::Value) -> Answer {
        Answer::new(status, "application/json", value.to_string())
    }

    /// `status` with a plain-text body.
    pub fn text(status: u16, body: &str) -> Answer {
        Answer::new(status, "text/plain; charset=utf-8", body.to_owned())
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(self.body));
        *response.status_mut() =
            StatusCode::from_u16(self.status).expect("peer statuses are 100..=999");
        for (name, value) in self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .unwrap_or_else(|e| panic!("answer header name {name:?}: {e}"));
            let value = HeaderValue::from_str(&value)
                .unwrap_or_else(|e| panic!("answer header value {value:?}: {e}"));
            response.headers_mut().append(name, value);
        }
        response
    }
}

/// How a peer answers one request, planned by the test: see
/// [`PushPeer::plan`]. Plans are consumed in order, one per request.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// None: the peer's normal answer, and the request takes effect.
    status: Option<u16>,
    headers: Vec<(String, String)>,
    body: Option<Bytes>,
    delay: Duration,
}

impl Plan {
    /// Answer `status` with the body the peer's protocol sends with it
    /// (ntfy's JSON error, Slack's error word, ...); the request has no
    /// other effect (nothing is delivered, no incident changes).
    pub fn status(status: u16) -> Plan {
        Plan {
            status: Some(status),
            ..Plan::default()
        }
    }

    /// The peer's normal answer; with [`Plan::after`], a slow one.
    pub fn normal() -> Plan {
        Plan::default()
    }

    /// Also send this header (e.g. `retry-after`), after the peer's own.
    pub fn header(mut self, name: &str, value: &str) -> Plan {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Send `body` instead of the one the peer would send.
    pub fn body(mut self, body: &str) -> Plan {
        self.body = Some(Bytes::from(body.to_owned()));
        self
    }

    /// Wait `delay` (tokio time) before answering: a slow endpoint. The
    /// request takes effect, if at all, only once the delay is over.
    pub fn after(mut self, delay: Duration) -> Plan {
        self.delay = delay;
        self
    }

    fn answer<P: Protocol>(self, protocol: &P, request: &Received) -> Answer {
        let mut answer = match self.status {
            None => protocol.answer(request),
            Some(status) => protocol.scripted(status),
        };
        if let Some(body) = self.body {
            answer.body = body;
        }
        answer.headers.extend(self.headers);
        answer
    }
}

/// The protocol a [`PushPeer`] speaks: its state and its answers.
pub trait Protocol: Send + Sync + 'static {
    /// What failure messages call the peer, e.g. "ntfy server".
    const NAME: &'static str;

    /// The path a client is configured with (empty for a base URL).
    fn endpoint(&self) -> String;

    /// The normal answer to `request`, which takes effect (a message is
    /// delivered, an incident changes) when the protocol accepts it.
    fn answer(&self, request: &Received) -> Answer;

    /// The answer this protocol gives with `status` when a [`Plan`] asks
    /// for it: the body and headers the real service sends with it.
    fn scripted(&self, status: u16) -> Answer;
}

/// A loopback peer speaking `P`; stops when dropped.
pub struct PushPeer<P: Protocol> {
    addr: SocketAddr,
    shared: Arc<Shared<P>>,
    task: JoinHandle<()>,
}

/// What the handle and the connection tasks share.
struct Shared<P> {
    protocol: P,
    plans: Mutex<VecDeque<Plan>>,
    received: Mutex<Vec<Received>>,
    /// How many requests were received, for waiters.
    count: watch::Sender<usize>,
    /// Requests answered, the protocol's state updated (a delivery
    /// recorded, an incident opened) before the count moves.
    answered: watch::Sender<usize>,
    /// An outage: this status for every request not planned, until then.
    outage: Mutex<Option<(u16, tokio::time::Instant)>>,
}

impl<P: Protocol> PushPeer<P> {
    /// Listen on 127.0.0.1 (any port) and serve `protocol`. Needs a tokio
    /// runtime.
    fn serve(protocol: P) -> PushPeer<P> {
        let listener = super::servers::bind_loopback();
        let addr = listener.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            protocol,
            plans: Mutex::new(VecDeque::new()),
            received: Mutex::new(Vec::new()),
            count: watch::channel(0).0,
            answered: watch::channel(0).0,
            outage: Mutex::new(None),
        });
        let serving = shared.clone();
        let connections = Arc::new(AtomicUsize::new(0));
        let task = super::servers::spawn_accept_loop(listener, connections, move |tcp| {
            serve_connection(tcp, serving.clone())
        });
        PushPeer { addr, shared, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL a client is configured with, e.g.
    /// `http://127.0.0.1:41234/v2/enqueue`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.shared.protocol.endpoint())
    }

    /// Answer a coming request as `plan` says. Plans queue up and are
    /// consumed in order, one per request received; once they are used up
    /// the peer answers normally again.
    pub fn plan(&self, plan: Plan) {
        self.shared.plans.lock().unwrap().push_back(plan);
    }

    /// Answer `status` (the protocol's body for it) to every request not
    /// planned from now for `duration` (tokio time), whatever their
    /// number; returns when the outage ends.
    pub fn fail_for(&self, status: u16, duration: Duration) -> tokio::time::Instant {
        let until = tokio::time::Instant::now() + duration;
        *self.shared.outage.lock().unwrap() = Some((status, until));
        until
    }

    /// Plans not consumed yet.
    pub fn plans_left(&self) -> usize {
        self.shared.plans.lock().unwrap().len()
    }

    /// Every request received so far, in order of arrival.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Wait until at least `n` requests were received, at most `within`
    /// (tokio time), and return them all; past the deadline, fail naming
    /// the peer and the requests that did arrive.
    pub async fn wait_for_requests(&self, n: usize, within: Duration) -> Vec<Received> {
        let mut count = self.shared.count.subscribe();
        // `is_ok` drops the borrow `wait_for` returns at once: held, it
        // would block the next request's `record` on the watch's lock.
        let reached = tokio::time::timeout(within, count.wait_for(|count| *count >= n))
            .await
            .is_ok();
        if !reached {
            let received = self.received();
            let seen: Vec<String> = received
                .iter()
                .map(|r| format!("{} {}", r.method, r.uri))
                .collect();
            panic!(
                "{} at {}: {} of {n} requests received within {within:?}: [{}]",
                P::NAME,
                self.addr,
                received.len(),
                seen.join(", ")
            );
        }
        self.received()
    }

    /// Waits until at least `n` requests were answered, so that what they
    /// did (a delivery, a notification, an incident) shows in the peer's
    /// accessors; fails past `within` saying how many were.
    pub async fn wait_for_answers(&self, n: usize, within: Duration) {
        let mut answered = self.shared.answered.subscribe();
        let reached = tokio::time::timeout(within, answered.wait_for(|a| *a >= n))
            .await
            .is_ok();
        if !reached {
            panic!(
                "{} at {}: {} of {n} requests answered within {within:?} ({} received)",
                P::NAME,
                self.addr,
                *self.shared.answered.borrow(),
                self.received().len()
            );
        }
    }

    /// The protocol's state, for the peer's own accessors.
    fn protocol(&self) -> &P {
        &self.shared.protocol
    }
}

impl<P: Protocol> Drop for PushPeer<P> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<P: Protocol> Shared<P> {
    /// Record `request` and take the plan for it, under one lock, so the
    /// n-th request received gets the n-th plan.
    fn record(&self, request: Received) -> Option<Plan> {
        let mut received = self.received.lock().unwrap();
        received.push(request);
        let plan = self.plans.lock().unwrap().pop_front();
        self.count.send_replace(received.len());
        plan
    }
}

impl<P> Shared<P> {
    /// The plan of a request not planned that arrived `at`: the outage's
    /// status while it lasts, else the normal answer.
    fn outage(&self, at: tokio::time::Instant) -> Plan {
        match *self.outage.lock().unwrap() {
            Some((status, until)) if at < until => Plan::status(status),
            _ => Plan::normal(),
        }
    }
}

async fn serve_connection<P: Protocol>(tcp: TcpStream, shared: Arc<Shared<P>>) {
    let service = service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(respond(request, &shared).await) }
    });
    // A client gone mid-request is part of what tests do; nothing to report.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tcp), service)
        .await;
}

async fn respond<P: Protocol>(
    request: Request<Incoming>,
    shared: &Shared<P>,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let (body, whole) = match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(collected) => (collected.to_bytes(), true),
        Err(_) => (Bytes::new(), false),
    };
    let received = Received {
        method: parts.method.to_string(),
        uri: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned()),
        headers: parts.headers,
        body,
        at: tokio::time::Instant::now(),
    };
    let plan = shared.record(received.clone());
    if !whole {
        return Answer::text(413, "request body over 1 MiB, or cut short\n").into_response();
    }
    let plan = plan.unwrap_or_else(|| shared.outage(received.at));
    tokio::time::sleep(plan.delay).await;
    let answer = plan.answer(&shared.protocol, &received);
    shared.answered.send_modify(|n| *n += 1);
    answer.into_response()
}

/// `len` random letters and digits (message ids, tokens).
pub fn random_alphanumeric(len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    random_bytes(len)
        .into_iter()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

/// `len` random bytes from the system's generator.
pub fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system random generator");
    bytes
}

/// The standard reason phrase of `status`, e.g. "Too Many Requests".
pub fn reason(status: u16) -> &'static str {
    StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Unknown Status")
}
