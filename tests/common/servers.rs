//! Real servers on loopback (127.0.0.1:0 only), shut down when their handle is dropped.
//!
//! Constructors are synchronous but must be called from inside a Tokio runtime
//! (e.g. in a `#[tokio::test(flavor = "multi_thread")]` body).
//!
//! HTTP routes served by both [`TlsServer`] and [`PlainHttpServer`]:
//!
//! | route | answer |
//! | --- | --- |
//! | `/` | 200, `text/html` body [`INDEX_BODY`], `strict-transport-security: max-age=31536000` |
//! | `/status/{code}` | that status (e.g. `/status/503`), small text body |
//! | `/slow/{ms}` | waits `ms` milliseconds, then 200 |
//! | `/redirect/{n}` | 302 to `/redirect/{n-1}`; `/redirect/0` is 200 |
//! | `/loop-a`, `/loop-b` | 302 to each other |
//! | `/big` | 200, 50 MiB ([`BIG_LEN`]) of `x`, chunked transfer encoding, no content-length |
//! | `/big-cl` | same with a `content-length` |
//! | `/bytes/{n}` | 200, `n` bytes of `x` with a `content-length` |
//! | `/headers` | 200 with `x-test: hello` |
//! | anything else | 404 |
//!
//! [`PlainHttpServer`] adds `/to-https` (optionally `?port=P&host=H`): 301 to
//! `https://{H or www.example.test}:{P or the constructor's port}/`.
//!
//! [`TlsServer::start_with`] replaces the routes by a [`Handler`] the test
//! writes (status, headers, body for each recorded request), for answers no
//! real server gives on demand (odd CORS headers, a redirected preflight).
//! [`TlsProxy`] terminates TLS and relays the bytes to a plain TCP upstream
//! (e.g. moto, see [`super::s3`]).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION};
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ProtocolVersion, ServerConfig, SupportedProtocolVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::pki::{Leaf, HOST};

/// Body of `/`.
pub const INDEX_BODY: &str = "<html><title>vigie test</title>ok</html>";
/// Size of `/big` and `/big-cl`: 50 MiB.
pub const BIG_LEN: u64 = 50 * 1024 * 1024;

type RespBody = BoxBody<Bytes, Infallible>;

/// Bind 127.0.0.1:0 and hand the listener to Tokio. Needs a runtime context.
pub(super) fn bind_loopback() -> TcpListener {
    bind_on(std::net::Ipv4Addr::LOCALHOST.into())
}

/// A listener on `ip` (a loopback address: 127.0.0.2, ::1), any port.
fn bind_on(ip: std::net::IpAddr) -> TcpListener {
    assert!(
        ip.is_loopback(),
        "test servers listen on loopback only, not {ip}"
    );
    let std_listener =
        std::net::TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}: {e}"));
    std_listener.set_nonblocking(true).expect("set_nonblocking");
    TcpListener::from_std(std_listener).expect("tokio listener (call from inside a Tokio runtime)")
}

/// Accept connections forever, handing each to `handle` in a task owned by the
/// accept task (so aborting the accept task also aborts every connection).
pub(super) fn spawn_accept_loop<F, Fut>(
    listener: TcpListener,
    connections: Arc<AtomicUsize>,
    handle: F,
) -> JoinHandle<()>
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _peer)) => stream,
                Err(_) => {
                    // e.g. EMFILE: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            while conns.try_join_next().is_some() {}
            connections.fetch_add(1, Ordering::SeqCst);
            conns.spawn(handle(stream));
        }
    })
}

/// [`spawn_accept_loop`] with a TLS handshake on each connection: a failed
/// one is counted in `state`, a completed one counted with its protocol
/// version and handed to `serve`.
fn spawn_tls_loop<F, Fut>(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: &Arc<State>,
    serve: F,
) -> JoinHandle<()>
where
    F: Fn(tokio_rustls::server::TlsStream<TcpStream>, Arc<State>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let st = state.clone();
    let serve = Arc::new(serve);
    spawn_accept_loop(listener, state.connections.clone(), move |tcp| {
        let acceptor = acceptor.clone();
        let state = st.clone();
        let serve = serve.clone();
        async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                state.handshake_failures.fetch_add(1, Ordering::SeqCst);
                return;
            };
            state.handshakes.fetch_add(1, Ordering::SeqCst);
            if let Some(v) = tls.get_ref().1.protocol_version() {
                state.versions.lock().unwrap().push(v);
            }
            serve(tls, state).await;
        }
    })
}

/// One HTTP request as the server saw it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, e.g. `/status/503`.
    pub uri: String,
    pub headers: HeaderMap,
}

impl RecordedRequest {
    /// The `Host` header, if any.
    pub fn host(&self) -> Option<&str> {
        self.headers.get("host").and_then(|v| v.to_str().ok())
    }
}

/// Counters and records shared by a server's tasks.
#[derive(Debug, Default)]
struct State {
    connections: Arc<AtomicUsize>,
    requests: AtomicUsize,
    handshakes: AtomicUsize,
    handshake_failures: AtomicUsize,
    sni: Mutex<Vec<Option<String>>>,
    versions: Mutex<Vec<ProtocolVersion>>,
    recorded: Mutex<Vec<RecordedRequest>>,
    https_port: Option<u16>,
    /// Set by [`TlsServer::start_with`]: answers every request instead of the routes.
    handler: Option<HandlerSlot>,
}

/// Methods common to the two HTTP servers.
macro_rules! http_stats_methods {
    () => {
        /// HTTP requests answered so far.
        pub fn requests(&self) -> usize {
            self.state.requests.load(Ordering::SeqCst)
        }
        /// TCP connections accepted so far.
        pub fn connections(&self) -> usize {
            self.state.connections.load(Ordering::SeqCst)
        }
        /// Every request received so far, in order.
        pub fn recorded_requests(&self) -> Vec<RecordedRequest> {
            self.state.recorded.lock().unwrap().clone()
        }
    };
}

/// Methods common to every server handle.
macro_rules! handle_methods {
    () => {
        /// The port the server listens on (on 127.0.0.1).
        pub fn port(&self) -> u16 {
            self.addr.port()
        }
    };
}

// ---------------------------------------------------------------- TLS server

/// Options of a [`TlsServer`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TlsOpts {
    /// Offer TLS 1.2 only.
    pub tls12_only: bool,
    /// Offer TLS 1.3 only (ignored if `tls12_only`).
    pub tls13_only: bool,
    /// Support no post-quantum key exchange (the provider's groups without
    /// X25519MLKEM768): a server not yet upgraded.
    pub classical_kx_only: bool,
}

/// Serves one chain whatever the SNI; records every SNI received.
#[derive(Debug)]
struct SingleCert {
    key: Arc<CertifiedKey>,
    state: Arc<State>,
}

impl ResolvesServerCert for SingleCert {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.state
            .sni
            .lock()
            .unwrap()
            .push(client_hello.server_name().map(str::to_owned));
        Some(self.key.clone())
    }
}

/// The rustls acceptor every TLS server here uses: aws-lc-rs provider, `chain`
/// whatever the SNI (recorded in `state`), no session resumption (no tickets,
/// no session cache), ALPN `http/1.1`.
fn tls_acceptor(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    opts: TlsOpts,
    state: &Arc<State>,
) -> tokio_rustls::TlsAcceptor {
    tokio_rustls::TlsAcceptor::from(Arc::new(tls_server_config(chain, key, opts, state)))
}

/// The [`tls_acceptor`]'s configuration.
fn tls_server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    opts: TlsOpts,
    state: &Arc<State>,
) -> ServerConfig {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if opts.classical_kx_only {
        provider
            .kx_groups
            .retain(|group| group.name() != rustls::NamedGroup::X25519MLKEM768);
    }
    let provider = Arc::new(provider);
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .expect("load private key");
    let resolver = SingleCert {
        key: Arc::new(CertifiedKey::new(chain, signing_key)),
        state: state.clone(),
    };
    let versions: &[&'static SupportedProtocolVersion] = if opts.tls12_only {
        &[&rustls::version::TLS12]
    } else if opts.tls13_only {
        &[&rustls::version::TLS13]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// Answers every request of a [`TlsServer::start_with`] server: gets the
/// request as recorded, returns `(status, headers, body)`.
pub type Handler =
    Arc<dyn Fn(&RecordedRequest) -> (u16, Vec<(String, String)>, String) + Send + Sync>;

/// A [`Handler`] in [`State`] (which must be `Debug`).
struct HandlerSlot(Handler);

impl std::fmt::Debug for HandlerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

/// HTTPS (HTTP/1.1 over rustls) server on 127.0.0.1, see the module doc for routes.
/// No session resumption (no tickets, no session cache). ALPN: `http/1.1`.
#[derive(Debug)]
pub struct TlsServer {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl TlsServer {
    /// Start serving `chain` (leaf first) with `key`, whatever SNI the client sends.
    pub fn start(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        opts: TlsOpts,
    ) -> TlsServer {
        Self::start_inner(chain, key, opts, State::default())
    }

    /// Like [`TlsServer::start_leaf`], but every request (whatever its method
    /// or path) is answered by `handler` instead of the routes: it gets the
    /// request as recorded (method, path and query, headers) and returns
    /// `(status, headers, body)`. Headers are sent as given, in order
    /// (repeated names are sent repeatedly); nothing is added but what hyper
    /// adds (`content-length`, `date`). Requests are recorded as usual
    /// ([`TlsServer::recorded_requests`]).
    pub fn start_with(leaf: &Leaf, opts: TlsOpts, handler: Handler) -> TlsServer {
        let state = State {
            handler: Some(HandlerSlot(handler)),
            ..State::default()
        };
        Self::start_inner(leaf.chain.clone(), leaf.key(), opts, state)
    }

    /// Like [`TlsServer::start_leaf`], listening on the loopback address
    /// `ip` (e.g. `::1`).
    pub fn start_leaf_on(leaf: &Leaf, opts: TlsOpts, ip: std::net::IpAddr) -> TlsServer {
        Self::start_inner_on(leaf.chain.clone(), leaf.key(), opts, State::default(), ip)
    }

    fn start_inner(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        opts: TlsOpts,
        state: State,
    ) -> TlsServer {
        let localhost = std::net::Ipv4Addr::LOCALHOST.into();
        Self::start_inner_on(chain, key, opts, state, localhost)
    }

    fn start_inner_on(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        opts: TlsOpts,
        state: State,
        ip: std::net::IpAddr,
    ) -> TlsServer {
        let state = Arc::new(state);
        let acceptor = tls_acceptor(chain, key, opts, &state);

        let listener = bind_on(ip);
        let addr = listener.local_addr().expect("local_addr");
        let task = spawn_tls_loop(listener, acceptor, &state, |tls, state| {
            serve_http(TokioIo::new(tls), state)
        });
        TlsServer { addr, state, task }
    }

    /// Start serving `leaf.chain` with `leaf.key()`.
    pub fn start_leaf(leaf: &Leaf, opts: TlsOpts) -> TlsServer {
        TlsServer::start(leaf.chain.clone(), leaf.key(), opts)
    }

    handle_methods!();
    http_stats_methods!();

    /// `https://www.example.test:{port}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{HOST}:{}{path}", self.port())
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.state.handshakes.load(Ordering::SeqCst)
    }

    /// TLS handshakes that failed (client alert, bad bytes, disconnect...).
    pub fn handshake_failures(&self) -> usize {
        self.state.handshake_failures.load(Ordering::SeqCst)
    }

    /// SNI of every ClientHello that reached certificate selection, in order.
    pub fn sni_seen(&self) -> Vec<Option<String>> {
        self.state.sni.lock().unwrap().clone()
    }

    /// SNI of the latest ClientHello (None if none yet or if it had no SNI).
    pub fn last_sni(&self) -> Option<String> {
        self.state.sni.lock().unwrap().last().cloned().flatten()
    }

    /// Negotiated protocol version of every completed handshake, in order.
    pub fn negotiated_versions(&self) -> Vec<ProtocolVersion> {
        self.state.versions.lock().unwrap().clone()
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ------------------------------------------------------ TLS that is not HTTP

/// What [`TlsPortServer`] writes once the handshake is done: an IMAP
/// server's greeting.
pub const IMAP_GREETING: &str = "* OK [CAPABILITY IMAP4rev1] ready\r\n";

/// TLS on 127.0.0.1 that carries no HTTP, as an IMAPS port does: the same
/// rustls setup as [`TlsServer`] but with its own ALPN list (`imap`, so a
/// client offering only `http/1.1` is refused), writes [`IMAP_GREETING`]
/// after the handshake and closes.
#[derive(Debug)]
pub struct TlsPortServer {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl TlsPortServer {
    pub fn start(leaf: &Leaf) -> TlsPortServer {
        let state = Arc::new(State::default());
        let mut config =
            tls_server_config(leaf.chain.clone(), leaf.key(), TlsOpts::default(), &state);
        config.alpn_protocols = vec![b"imap".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = bind_loopback();
        let addr = listener.local_addr().expect("local_addr");
        let task = spawn_tls_loop(listener, acceptor, &state, |mut tls, _| async move {
            let _ = tls.write_all(IMAP_GREETING.as_bytes()).await;
            let _ = tls.shutdown().await;
        });
        TlsPortServer { addr, state, task }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.state.handshakes.load(Ordering::SeqCst)
    }

    /// SNI of the latest ClientHello.
    pub fn last_sni(&self) -> Option<String> {
        self.state.sni.lock().unwrap().last().cloned().flatten()
    }
}

impl Drop for TlsPortServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------- TLS proxy

/// Terminates TLS on 127.0.0.1 (same rustls setup as [`TlsServer`]: the
/// leaf's chain whatever the SNI, no resumption, ALPN `http/1.1`) and copies
/// bytes both ways to a fresh plain TCP connection to `upstream`, one per
/// accepted connection. Puts a plain-HTTP server (e.g. the S3 server of
/// [`super::s3`]) behind HTTPS with a test-PKI chain, so a client sees a real
/// chain in front of it. The bytes are not interpreted: the `Host` header
/// reaches the upstream as the client sent it.
#[derive(Debug)]
pub struct TlsProxy {
    pub addr: SocketAddr,
    pub upstream: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl TlsProxy {
    /// Serve `leaf.chain` in front of `upstream`.
    pub fn start(leaf: &Leaf, upstream: SocketAddr) -> TlsProxy {
        Self::start_opts(leaf, TlsOpts::default(), upstream)
    }

    /// Same, with protocol-version options.
    pub fn start_opts(leaf: &Leaf, opts: TlsOpts, upstream: SocketAddr) -> TlsProxy {
        let state = Arc::new(State::default());
        let acceptor = tls_acceptor(leaf.chain.clone(), leaf.key(), opts, &state);
        let listener = bind_loopback();
        let addr = listener.local_addr().expect("local_addr");
        let task = spawn_tls_loop(listener, acceptor, &state, move |mut tls, _| async move {
            // Upstream down: close the client connection (it sees EOF).
            let Ok(mut up) = TcpStream::connect(upstream).await else {
                return;
            };
            // Errors (either side gone) end the connection; nothing to report.
            let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
        });
        TlsProxy {
            addr,
            upstream,
            state,
            task,
        }
    }

    handle_methods!();

    /// `https://www.example.test:{port}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{HOST}:{}{path}", self.port())
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.state.handshakes.load(Ordering::SeqCst)
    }

    /// TLS handshakes that failed (e.g. the client refused the chain).
    pub fn handshake_failures(&self) -> usize {
        self.state.handshake_failures.load(Ordering::SeqCst)
    }

    /// SNI of every ClientHello that reached certificate selection, in order.
    pub fn sni_seen(&self) -> Vec<Option<String>> {
        self.state.sni.lock().unwrap().clone()
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// --------------------------------------------------------- plain HTTP server

/// Plain HTTP/1.1 server on 127.0.0.1 with the same routes plus `/to-https`.
#[derive(Debug)]
pub struct PlainHttpServer {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl PlainHttpServer {
    /// Start; `/to-https` needs `?port=P` since no HTTPS port is known.
    pub fn start() -> PlainHttpServer {
        Self::start_inner(None)
    }

    /// Start; `/to-https` 301-redirects to `https://www.example.test:{https_port}/`.
    pub fn start_redirecting_to(https_port: u16) -> PlainHttpServer {
        Self::start_inner(Some(https_port))
    }

    /// Start on the loopback address `ip` (e.g. 127.0.0.2).
    pub fn start_on(ip: std::net::IpAddr) -> PlainHttpServer {
        Self::start_inner_on(None, ip)
    }

    fn start_inner(https_port: Option<u16>) -> PlainHttpServer {
        Self::start_inner_on(https_port, std::net::Ipv4Addr::LOCALHOST.into())
    }

    fn start_inner_on(https_port: Option<u16>, ip: std::net::IpAddr) -> PlainHttpServer {
        let state = Arc::new(State {
            https_port,
            ..State::default()
        });
        let listener = bind_on(ip);
        let addr = listener.local_addr().expect("local_addr");
        let st = state.clone();
        let task = spawn_accept_loop(listener, state.connections.clone(), move |tcp| {
            serve_http(TokioIo::new(tcp), st.clone())
        });
        PlainHttpServer { addr, state, task }
    }

    handle_methods!();
    http_stats_methods!();

    /// `http://www.example.test:{port}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{HOST}:{}{path}", self.port())
    }
}

impl Drop for PlainHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ------------------------------------------------------------------- routes

async fn serve_http<I>(io: I, state: Arc<State>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| route(req, state.clone()));
    // Errors (client gone mid-body etc.) are expected in tests; ignore them.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, svc)
        .await;
}

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<RespBody> {
    let mut resp = Response::new(Full::new(body.into()).boxed());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

fn redirect(status: StatusCode, location: &str) -> Response<RespBody> {
    let mut resp = full(status, format!("redirecting to {location}\n"));
    resp.headers_mut().insert(
        LOCATION,
        HeaderValue::from_str(location).expect("valid location"),
    );
    resp
}

fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

async fn route(
    req: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<RespBody>, Infallible> {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let recorded = RecordedRequest {
        method: req.method().to_string(),
        uri: req
            .uri()
            .path_and_query()
            .map(|pq| pq.as_str().to_owned())
            .unwrap_or_else(|| "/".to_owned()),
        headers: req.headers().clone(),
    };
    state.recorded.lock().unwrap().push(recorded.clone());
    if let Some(HandlerSlot(handler)) = &state.handler {
        return Ok(handler_response(handler, &recorded));
    }

    let path = req.uri().path();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let resp = match segments.as_slice() {
        [""] => {
            let mut resp = full(StatusCode::OK, INDEX_BODY);
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
            resp.headers_mut().insert(
                "strict-transport-security",
                HeaderValue::from_static("max-age=31536000"),
            );
            resp
        }
        ["status", code] => match code
            .parse::<u16>()
            .ok()
            .and_then(|c| StatusCode::from_u16(c).ok())
        {
            Some(status) => full(status, format!("status {}\n", status.as_u16())),
            None => full(StatusCode::BAD_REQUEST, "bad status\n"),
        },
        ["slow", ms] => match ms.parse::<u64>() {
            Ok(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                full(StatusCode::OK, "slow ok\n")
            }
            Err(_) => full(StatusCode::BAD_REQUEST, "bad ms\n"),
        },
        ["redirect", n] => match n.parse::<u64>() {
            Ok(0) => full(StatusCode::OK, "redirect chain end\n"),
            Ok(n) => redirect(StatusCode::FOUND, &format!("/redirect/{}", n - 1)),
            Err(_) => full(StatusCode::BAD_REQUEST, "bad n\n"),
        },
        // `/goto?to=URL`: a redirect wherever the test says (URL without
        // `&`; it is sent as given).
        ["goto"] => match query_param(req.uri().query(), "to") {
            Some(to) => redirect(StatusCode::FOUND, to),
            None => full(StatusCode::BAD_REQUEST, "goto needs ?to=URL\n"),
        },
        ["loop-a"] => redirect(StatusCode::FOUND, "/loop-b"),
        ["loop-b"] => redirect(StatusCode::FOUND, "/loop-a"),
        ["big"] => filler(StatusCode::OK, BIG_LEN, false),
        ["big-cl"] => filler(StatusCode::OK, BIG_LEN, true),
        ["bytes", n] => match n.parse::<u64>() {
            Ok(n) => filler(StatusCode::OK, n, true),
            Err(_) => full(StatusCode::BAD_REQUEST, "bad n\n"),
        },
        ["headers"] => {
            let mut resp = full(StatusCode::OK, "headers\n");
            resp.headers_mut()
                .insert("x-test", HeaderValue::from_static("hello"));
            resp
        }
        ["to-https"] => {
            let query = req.uri().query();
            let port = query_param(query, "port")
                .and_then(|p| p.parse::<u16>().ok())
                .or(state.https_port);
            let host = query_param(query, "host").unwrap_or(HOST);
            match port {
                Some(port) => redirect(
                    StatusCode::MOVED_PERMANENTLY,
                    &format!("https://{host}:{port}/"),
                ),
                None => full(StatusCode::BAD_REQUEST, "no https port known\n"),
            }
        }
        _ => full(StatusCode::NOT_FOUND, "not found\n"),
    };
    Ok(resp)
}

/// The response a [`Handler`] asks for.
fn handler_response(handler: &Handler, req: &RecordedRequest) -> Response<RespBody> {
    let (status, headers, body) = handler(req);
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = StatusCode::from_u16(status).expect("handler status is 100..=999");
    for (name, value) in headers {
        let name = hyper::header::HeaderName::from_bytes(name.as_bytes())
            .unwrap_or_else(|e| panic!("handler header name {name:?}: {e}"));
        let value = HeaderValue::from_str(&value)
            .unwrap_or_else(|e| panic!("handler header value {value:?}: {e}"));
        resp.headers_mut().append(name, value);
    }
    resp
}

static FILLER_CHUNK: [u8; 64 * 1024] = [b'x'; 64 * 1024];

/// A body of `remaining` bytes of `x`, produced 64 KiB at a time from a static buffer.
struct FillerBody {
    remaining: u64,
    exact_len: bool,
}

impl Body for FillerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let n = self.remaining.min(FILLER_CHUNK.len() as u64) as usize;
        self.remaining -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
            &FILLER_CHUNK[..n],
        )))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        if self.exact_len {
            SizeHint::with_exact(self.remaining)
        } else {
            SizeHint::default()
        }
    }
}

fn filler(status: StatusCode, len: u64, exact_len: bool) -> Response<RespBody> {
    let mut resp = Response::new(
        FillerBody {
            remaining: len,
            exact_len,
        }
        .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    resp
}

// ------------------------------------------------------------ raw TCP servers

macro_rules! raw_server {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            pub addr: SocketAddr,
            connections: Arc<AtomicUsize>,
            task: JoinHandle<()>,
        }

        impl $name {
            handle_methods!();

            /// TCP connections accepted so far.
            pub fn connections(&self) -> usize {
                self.connections.load(Ordering::SeqCst)
            }

            /// `https://www.example.test:{port}{path}` (what a client would be pointed at).
            pub fn url(&self, path: &str) -> String {
                format!("https://{HOST}:{}{path}", self.port())
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                self.task.abort();
            }
        }
    };
}

raw_server!(
    /// Accepts TCP connections and never answers nor reads; sockets stay open until drop.
    Tarpit
);
raw_server!(
    /// Accepts TCP, writes [`GARBAGE_LEN`] bytes that are not TLS (an HTTP/1.0 response),
    /// then closes cleanly (FIN, after draining what the client sent).
    Garbage
);
raw_server!(
    /// Accepts TCP and closes with RST (SO_LINGER 0), immediately or after the first read.
    Resetter
);

impl Tarpit {
    pub fn start() -> Tarpit {
        let listener = bind_loopback();
        let addr = listener.local_addr().expect("local_addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let task = spawn_accept_loop(listener, connections.clone(), |tcp| async move {
            // Hold the socket, read nothing, until aborted.
            let _tcp = tcp;
            std::future::pending::<()>().await;
        });
        Tarpit {
            addr,
            connections,
            task,
        }
    }
}

/// How many bytes [`Garbage`] writes.
pub const GARBAGE_LEN: usize = 4096;

/// The bytes [`Garbage`] writes: a plain-text HTTP/1.0 response padded to [`GARBAGE_LEN`].
pub fn garbage_bytes() -> Vec<u8> {
    let mut bytes =
        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n".to_vec();
    let filler = b"this is not TLS. ";
    while bytes.len() < GARBAGE_LEN {
        let take = filler.len().min(GARBAGE_LEN - bytes.len());
        bytes.extend_from_slice(&filler[..take]);
    }
    bytes
}

impl Garbage {
    pub fn start() -> Garbage {
        let listener = bind_loopback();
        let addr = listener.local_addr().expect("local_addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let task = spawn_accept_loop(listener, connections.clone(), |mut tcp| async move {
            let _ = tcp.write_all(&garbage_bytes()).await;
            let _ = tcp.shutdown().await;
            // Drain until the client closes (bounded), so close() sends FIN, not RST.
            let mut buf = [0u8; 4096];
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                while let Ok(n) = tcp.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            })
            .await;
        });
        Garbage {
            addr,
            connections,
            task,
        }
    }
}

fn reset(tcp: TcpStream) -> io::Result<()> {
    tcp.set_zero_linger()?;
    drop(tcp);
    Ok(())
}

impl Resetter {
    /// RST right after accept, before reading anything.
    pub fn start() -> Resetter {
        Self::start_inner(false)
    }

    /// RST after the first bytes from the client (e.g. the ClientHello) were read
    /// (or after 5 s without any).
    pub fn start_after_first_read() -> Resetter {
        Self::start_inner(true)
    }

    fn start_inner(after_read: bool) -> Resetter {
        let listener = bind_loopback();
        let addr = listener.local_addr().expect("local_addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let task = spawn_accept_loop(listener, connections.clone(), move |mut tcp| async move {
            if after_read {
                let mut buf = [0u8; 4096];
                let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
            }
            let _ = reset(tcp);
        });
        Resetter {
            addr,
            connections,
            task,
        }
    }
}

/// A loopback address with nothing listening: a connection to it is
/// refused. The port stays bound (not listening) by this process until it
/// exits, so no other test running at the same time is given it by the
/// kernel; `SO_REUSEADDR` still lets a daemon told to listen there bind it.
pub fn refused_addr() -> SocketAddr {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain socket calls on a descriptor this function owns, with
    // pointers to locals of the sizes given.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        let socket = OwnedFd::from_raw_fd(fd);
        let one: libc::c_int = 1;
        let set = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(set, 0, "SO_REUSEADDR: {}", io::Error::last_os_error());
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let bound = libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len);
        assert_eq!(bound, 0, "bind 127.0.0.1:0: {}", io::Error::last_os_error());
        let named = libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len);
        assert_eq!(named, 0, "getsockname: {}", io::Error::last_os_error());
        // Held for the rest of the test process: the reservation.
        std::mem::forget(socket);
        SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, u16::from_be(addr.sin_port)))
    }
}

/// A loopback HTTPS target (the test PKI's valid leaf) answering whatever
/// status the returned cell holds, 200 at first: the tests switch it to
/// make a check go down and come back.
pub fn switchable_target() -> (TlsServer, std::sync::Arc<std::sync::atomic::AtomicU16>) {
    use std::sync::atomic::{AtomicU16, Ordering};
    let status = std::sync::Arc::new(AtomicU16::new(200));
    let answer = status.clone();
    let server = TlsServer::start_with(
        &super::pki::valid_leaf(),
        TlsOpts::default(),
        std::sync::Arc::new(move |_| (answer.load(Ordering::SeqCst), vec![], "ok".to_string())),
    );
    (server, status)
}
