//! The one place TLS and HTTP connections for probes are made.
//!
//! Every request gets its own TCP connection and its own TLS handshake: a
//! pooled or resumed connection would show an old handshake and hide the
//! chain the server serves *now*. Trust (root stores, WebPKI verifiers and
//! the rustls `ClientConfig`) is built once per distinct CA set and shared;
//! each handshake runs inside `tls::recording`, which gives the shared
//! verifier a per-connection place to record what it is shown.
//!
//! This module reports *what happened* (a response, or a classified
//! [`ProbeError`]) and records progress in a [`Trace`] so that a timeout can
//! say how far the probe got. It judges nothing.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, Request, StatusCode, Version};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use url::{Host, Url};

use super::address::{self, AddressClass, RedirectPolicy};
use super::chains::{self, Chains};
use super::shown;
use super::tls::{self, Carrying, Trust};
use crate::cert;
use crate::check::Check;
use crate::clock::Clock;
use crate::net::CaFileError;
use crate::outcome::{Assertion, ProbeError, SmtpReport, TlsReport};
use crate::redact::redact;
use crate::tls_words;

/// Most of a body vigie reads; the rest is left unread and the body is
/// reported as truncated. Enough for any health page, small enough that a
/// target serving gigabytes costs nothing.
pub const BODY_CAP: usize = 1024 * 1024;

const USER_AGENT: &str = concat!("vigie/", env!("CARGO_PKG_VERSION"));

/// How a probe opens a TCP connection and judges an address: the seam
/// between probes and the network. The daemon uses [`Direct`]; a test can
/// record every address a probe tries and refuse any that is not
/// loopback, or treat one loopback address as a global one.
pub trait Connector: Send + Sync {
    fn connect(
        &self,
        addr: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send + '_>>;

    /// What kind of address `ip` is, for the redirect policy.
    fn classify(&self, ip: IpAddr) -> AddressClass {
        address::classify(ip)
    }
}

/// Plain `connect(2)`, and addresses classified as they are.
#[derive(Debug)]
pub struct Direct;

impl Connector for Direct {
    fn connect(
        &self,
        addr: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send + '_>> {
        Box::pin(TcpStream::connect(addr))
    }
}

/// Connections for probes, with the trust each check needs.
pub struct Client {
    global: Arc<Trust>,
    per_ca_file: HashMap<PathBuf, Arc<Trust>>,
    clock: Arc<dyn Clock>,
    chains: Chains,
    connector: Arc<dyn Connector>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("per_ca_file", &self.per_ca_file.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Client {
    /// Reads the global `extra_ca_file` and every check's `ca_file` once.
    pub fn new(
        extra_ca_file: Option<&Path>,
        checks: &[Arc<Check>],
        clock: Arc<dyn Clock>,
    ) -> Result<Self, CaFileError> {
        let provider = crate::net::crypto_provider();
        let global_extra = match extra_ca_file {
            Some(path) => crate::net::read_ca_file(path)?,
            None => Vec::new(),
        };
        let global = Arc::new(trust(&provider, &global_extra, extra_ca_file)?);
        let mut per_ca_file = HashMap::new();
        for path in checks.iter().filter_map(|c| c.tls.ca_file.as_ref()) {
            if per_ca_file.contains_key(path) {
                continue;
            }
            let mut extra = global_extra.clone();
            extra.extend(crate::net::read_ca_file(path)?);
            per_ca_file.insert(
                path.clone(),
                Arc::new(trust(&provider, &extra, Some(path))?),
            );
        }
        Ok(Self {
            global,
            per_ca_file,
            clock,
            chains: Chains::default(),
            connector: Arc::new(Direct),
        })
    }

    /// The same client, connecting through `connector`.
    pub fn with_connector(mut self, connector: Arc<dyn Connector>) -> Self {
        self.connector = connector;
        self
    }

    pub fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// What kind of address `ip` is, as this client's connector sees it.
    pub fn classify(&self, ip: IpAddr) -> AddressClass {
        self.connector.classify(ip)
    }

    /// The trust a check uses: its own `ca_file` if it has one, else the
    /// global one.
    pub fn trust_for(&self, check: &Check) -> Arc<Trust> {
        check
            .tls
            .ca_file
            .as_ref()
            .and_then(|path| self.per_ca_file.get(path))
            .unwrap_or(&self.global)
            .clone()
    }

    /// One request on a fresh connection. Records the TLS facts of the first
    /// https hop into `trace.tls`, and the address the first hop connected
    /// to into `trace.first_peer`. The body is `Empty` for every probe but
    /// the upload's PUT (`Full`).
    pub async fn send<B: RequestBody>(
        &self,
        hop: &Hop<'_>,
        request: Request<B>,
        trace: &mut Trace,
    ) -> Result<Response, ProbeError> {
        self.send_capped(hop, request, BODY_CAP, trace).await
    }

    /// [`Client::send`], reading at most `cap` bytes of body (a CRL may be
    /// larger than a page).
    pub async fn send_capped<B: RequestBody>(
        &self,
        hop: &Hop<'_>,
        request: Request<B>,
        cap: usize,
        trace: &mut Trace,
    ) -> Result<Response, ProbeError> {
        // Without brackets: `[::1]` is the URL's spelling, not an address
        // or a TLS server name.
        let (host, literal) = match hop.url.host() {
            Some(Host::Ipv4(ip)) => (ip.to_string(), Some(IpAddr::V4(ip))),
            Some(Host::Ipv6(ip)) => (ip.to_string(), Some(IpAddr::V6(ip))),
            Some(Host::Domain(name)) => (name.to_string(), None),
            None => (String::new(), None),
        };
        let port = hop.url.port_or_known_default().unwrap_or(443);
        trace.hops.push(redact(hop.url));
        let target = hop.connect_to.or(literal);
        let tcp = self
            .connect(
                &host,
                port,
                target,
                hop.redirect.as_ref().map(|r| (r, hop.url)),
                trace,
            )
            .await?;
        if trace.first_peer.is_none() {
            trace.first_peer = tcp.peer_addr().ok().map(|addr| addr.ip());
        }
        match hop.url.scheme() {
            "https" => {
                let tls = self
                    .handshake(tcp, &host, hop.trust, Carrying::Http, trace)
                    .await?;
                exchange(tls, request, cap, trace).await
            }
            _ => {
                let (tcp, answer) = Sniffed::new(tcp);
                exchange(tcp, request, cap, trace)
                    .await
                    .map_err(|err| answer.explain(err))
            }
        }
    }

    /// A TCP connection to `host:port` (or to `connect_to`, keeping `host`
    /// for the TLS name), for the probes that speak something other than
    /// HTTP (`tls`, `smtp`); the address it reached is the probe's first
    /// peer, as for an https check.
    pub async fn open(
        &self,
        host: &str,
        port: u16,
        connect_to: Option<IpAddr>,
        trace: &mut Trace,
    ) -> Result<TcpStream, ProbeError> {
        let target = connect_to.or_else(|| host.parse().ok());
        let tcp = self.connect(host, port, target, None, trace).await?;
        trace.first_peer = tcp.peer_addr().ok().map(|addr| addr.ip());
        Ok(tcp)
    }

    /// The TLS handshake on `tcp` for a protocol that is not HTTP (no ALPN
    /// offered), verified for `server_name`: its facts go to `trace.tls`
    /// exactly as an https hop's, so the chain is judged the same way.
    pub async fn secure(
        &self,
        tcp: TcpStream,
        server_name: &str,
        trust: &Trust,
        trace: &mut Trace,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ProbeError> {
        self.handshake(tcp, server_name, trust, Carrying::Other, trace)
            .await
    }

    async fn connect(
        &self,
        host: &str,
        port: u16,
        target: Option<IpAddr>,
        redirect: Option<(&Redirect, &Url)>,
        trace: &mut Trace,
    ) -> Result<TcpStream, ProbeError> {
        let mut addrs: Vec<SocketAddr> = match target {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None => {
                trace.phase = Phase::Resolving(host.to_string());
                resolve(host, port).await?
            }
        };
        if let Some((redirect, url)) = redirect {
            // Every address is judged, not the name: a public name may
            // resolve to a private address.
            let mut refusal = None;
            addrs.retain(|addr| {
                let why = redirect
                    .policy
                    .refusal(addr.ip(), self.connector.classify(addr.ip()));
                let allowed = why.is_none();
                refusal = refusal.take().or(why);
                allowed
            });
            if let (true, Some(why)) = (addrs.is_empty(), refusal) {
                return Err(ProbeError {
                    kind: Assertion::HttpRedirect,
                    message: format!(
                        "redirect {} to {} refused: {why}",
                        redirect.number,
                        redact(url)
                    ),
                });
            }
        }
        let mut last_error = None;
        for addr in addrs {
            trace.phase = Phase::Connecting(addr);
            match self.connector.connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(err) => last_error = Some((addr, err)),
            }
        }
        let (addr, err) = last_error.ok_or_else(|| ProbeError {
            kind: Assertion::Dns,
            message: format!("{host} resolved to no address"),
        })?;
        Err(ProbeError {
            kind: Assertion::Connect,
            message: connect_message(addr, &err),
        })
    }

    async fn handshake(
        &self,
        tcp: TcpStream,
        host: &str,
        trust: &Trust,
        carrying: Carrying,
        trace: &mut Trace,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ProbeError> {
        let server_name = ServerName::try_from(host.to_string()).map_err(|_| ProbeError {
            kind: Assertion::TlsHandshake,
            message: format!("{host:?} is not a valid TLS server name"),
        })?;
        let peer = tcp.peer_addr().ok();
        trace.phase = Phase::Handshaking(peer);
        let connector = tokio_rustls::TlsConnector::from(trust.client_config(carrying));
        let (result, seen) = tls::recording(connector.connect(server_name, tcp)).await;
        // Certificate facts are as of the probe's start: `hours_left` is
        // then derivable from `started_at` (the store does so on read).
        let now = trace.started_at.unwrap_or_else(|| self.clock.now());
        let served = match (&seen, trace.served.is_empty()) {
            (Some(seen), true) => seen.chain.clone(),
            _ => Vec::new(),
        };
        if !served.is_empty() {
            trace.served = served;
        }
        let report = seen.map(|seen| {
            let key = chains::key(&seen.chain);
            // A refused chain is parsed again: explaining the refusal needs
            // the certificates' raw names.
            let known = match seen.verdict {
                Ok(()) => self.chains.get(&key, now),
                Err(_) => None,
            };
            // WebPKI checked the name when it accepted the chain; otherwise
            // coverage is judged on the names as issued, before they are
            // escaped and the SAN list bounded.
            let mut hostname_matches = seen.verdict.is_ok();
            let (chain, verify_error) = match known {
                Some(chain) => (chain, None),
                None => {
                    let presented: Vec<_> =
                        seen.chain.iter().map(|der| cert::read(der, now)).collect();
                    hostname_matches |= presented
                        .first()
                        .is_some_and(|leaf| cert::covers(&leaf.info.sans, host));
                    let verify_error = seen.verdict.as_ref().err().map(|err| {
                        shown::verify_error(tls::explain(err, &presented, trust, host, now))
                    });
                    let chain = presented.into_iter().map(|p| shown::cert(p.info)).collect();
                    (self.chains.keep(key, chain), verify_error)
                }
            };
            TlsReport {
                server_name: host.to_string(),
                version: None,
                cipher_suite: None,
                key_exchange: None,
                trusted: verify_error.is_none(),
                hostname_matches,
                ari: None,
                revocation: Vec::new(),
                verified_path: None,
                verify_error,
                chain,
            }
        });
        match result {
            Ok(stream) => {
                let (_, conn) = stream.get_ref();
                if trace.tls.is_none() {
                    trace.tls = report.map(|mut r| {
                        r.version = conn.protocol_version().map(version_name);
                        r.cipher_suite = conn
                            .negotiated_cipher_suite()
                            .map(|s| format!("{:?}", s.suite()));
                        // rustls spells groups as IANA does (`X25519MLKEM768`,
                        // `secp256r1`).
                        r.key_exchange = conn
                            .negotiated_key_exchange_group()
                            .map(|group| format!("{:?}", group.name()));
                        r
                    });
                }
                Ok(stream)
            }
            Err(err) => {
                let refused_chain = report.as_ref().and_then(|r| r.verify_error.clone());
                if trace.tls.is_none() {
                    trace.tls = report;
                }
                Err(match refused_chain {
                    Some(verify_error) => ProbeError {
                        kind: verify_error.assertion(),
                        message: verify_error.to_string(),
                    },
                    None => handshake_error(&err),
                })
            }
        }
    }
}

/// Where one request goes: the URL, an address override for its host, the
/// trust to verify it with, and, when a redirect led here, which one and
/// the policy its addresses must pass.
pub struct Hop<'a> {
    pub url: &'a Url,
    pub connect_to: Option<IpAddr>,
    pub trust: &'a Trust,
    pub redirect: Option<Redirect>,
}

/// The `number`th redirect of a probe (from 1), and where it may lead.
#[derive(Debug, Clone, Copy)]
pub struct Redirect {
    pub number: usize,
    pub policy: RedirectPolicy,
}

/// A response with its body read up to [`BODY_CAP`].
#[derive(Debug)]
pub struct Response {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub truncated: bool,
}

/// How far a probe got; read after a timeout to say where it stuck.
#[derive(Debug, Default)]
pub struct Trace {
    pub phase: Phase,
    /// TLS facts of the first https hop.
    pub tls: Option<TlsReport>,
    /// Redacted URLs requested, in order.
    pub hops: Vec<String>,
    /// The address the first request connected to (the check's own
    /// target, which decides whether its redirects may stay private).
    pub first_peer: Option<IpAddr>,
    /// When the probe started: the "now" of certificate facts.
    pub started_at: Option<time::OffsetDateTime>,
    /// The certificates of the first https hop as served (DER, leaf
    /// first), for what the CA says about them (`probe::ca`).
    pub served: Vec<CertificateDer<'static>>,
    /// What an SMTP server said so far (`probe::smtp`).
    pub smtp: Option<SmtpReport>,
}

#[derive(Debug, Default, Clone)]
pub enum Phase {
    #[default]
    Starting,
    Resolving(String),
    Connecting(SocketAddr),
    Handshaking(Option<SocketAddr>),
    AwaitingHeaders,
    ReadingBody(u64),
    /// Waiting for what a protocol other than HTTP says next (the SMTP
    /// greeting).
    Awaiting(&'static str),
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Starting => f.write_str("before connecting"),
            Phase::Resolving(host) => write!(f, "while resolving {host}"),
            Phase::Connecting(addr) => write!(f, "while connecting to {addr}"),
            Phase::Handshaking(Some(addr)) => write!(f, "during the TLS handshake with {addr}"),
            Phase::Handshaking(None) => f.write_str("during the TLS handshake"),
            Phase::AwaitingHeaders => f.write_str("waiting for the response headers"),
            Phase::ReadingBody(bytes) => write!(f, "reading the body ({bytes} bytes received)"),
            Phase::Awaiting(what) => write!(f, "waiting for {what}"),
        }
    }
}

/// A request body a probe may send: hyper's bounds, data in `Bytes`.
pub trait RequestBody:
    hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
    + Send
    + Unpin
    + 'static
{
}

impl RequestBody for Empty<Bytes> {}
impl RequestBody for Full<Bytes> {}

/// Sends one request over an established connection and reads the answer.
async fn exchange<IO, B: RequestBody>(
    io: IO,
    request: Request<B>,
    cap: usize,
    trace: &mut Trace,
) -> Result<Response, ProbeError>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(protocol_error)?;
    // The connection is driven here, in the probe's own task, rather than
    // spawned: no task allocation and no cross-thread wake-up per probe, and
    // it dies with the probe (a timed-out probe must not leave a socket
    // behind). Its result is not needed: failures surface through the
    // request. Once HTTP is done with it (the response is in, or the
    // connection failed) it is dropped, which closes the socket, so that a
    // response it never delivered fails at once instead of waiting for the
    // timeout. It is not shut down gracefully first: the request said
    // `Connection: close` and the answer is complete, so a TLS close_notify
    // and a shutdown(2) would only cost another record, write and wake-up
    // per probe, and the outcome does not depend on them.
    let mut conn = Some(conn);
    let mut answer = std::pin::pin!(read_response(&mut sender, request, cap, trace));
    std::future::poll_fn(|cx| {
        if let Some(driver) = conn.as_mut() {
            if driver.poll_without_shutdown(cx).is_ready() {
                conn = None;
            }
        }
        answer.as_mut().poll(cx)
    })
    .await
}

/// Sends the request and reads the answer, up to `cap` bytes of body.
async fn read_response<B: RequestBody>(
    sender: &mut hyper::client::conn::http1::SendRequest<B>,
    request: Request<B>,
    cap: usize,
    trace: &mut Trace,
) -> Result<Response, ProbeError> {
    trace.phase = Phase::AwaitingHeaders;
    let response = sender.send_request(request).await.map_err(protocol_error)?;
    let (parts, mut body) = response.into_parts();
    // One allocation when the length is announced, instead of regrowing per
    // frame; never more than the cap, whatever the server claims.
    let announced = hyper::body::Body::size_hint(&body).exact().unwrap_or(0);
    let mut bytes = Vec::with_capacity(announced.min(cap as u64) as usize);
    let mut truncated = false;
    trace.phase = Phase::ReadingBody(0);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(protocol_error)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let room = cap - bytes.len();
        if data.len() > room {
            bytes.extend_from_slice(&data[..room]);
            truncated = true;
            break;
        }
        bytes.extend_from_slice(&data);
        trace.phase = Phase::ReadingBody(bytes.len() as u64);
    }
    Ok(Response {
        status: parts.status,
        version: parts.version,
        headers: parts.headers,
        body: bytes,
        truncated,
    })
}

/// Builds the request vigie sends: origin-form URI, explicit Host, and
/// `Connection: close` because the connection is never reused.
pub fn request(method: http::Method, url: &Url) -> http::request::Builder {
    let mut target = url.path().to_string();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let host = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => String::new(),
    };
    Request::builder()
        .method(method)
        .uri(target)
        .header(http::header::HOST, host)
        .header(http::header::USER_AGENT, USER_AGENT)
        .header(http::header::ACCEPT, "*/*")
        .header(http::header::CONNECTION, "close")
}

async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, ProbeError> {
    match tokio::net::lookup_host((host, port)).await {
        Ok(addrs) => Ok(addrs.collect()),
        Err(err) => Err(ProbeError {
            kind: Assertion::Dns,
            message: format!("cannot resolve {host}: {err}"),
        }),
    }
}

fn connect_message(addr: SocketAddr, err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::ConnectionRefused => format!("connection refused by {addr}"),
        io::ErrorKind::TimedOut => format!("connection to {addr} timed out"),
        io::ErrorKind::HostUnreachable => format!("host {addr} is unreachable"),
        io::ErrorKind::NetworkUnreachable => format!("network unreachable for {addr}"),
        _ => format!("cannot connect to {addr}: {err}"),
    }
}

/// A handshake that failed for a reason other than the certificate: the
/// peer is not speaking TLS, hung up, or shares no protocol with us.
fn handshake_error(err: &io::Error) -> ProbeError {
    let message = match err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls) => tls_words::error(rustls),
        None => match err.kind() {
            io::ErrorKind::UnexpectedEof => {
                "the server closed the connection during the TLS handshake".to_string()
            }
            io::ErrorKind::ConnectionReset => {
                "the server reset the connection during the TLS handshake".to_string()
            }
            _ => format!("TLS handshake failed: {err}"),
        },
    };
    ProbeError {
        kind: Assertion::TlsHandshake,
        message,
    }
}

/// hyper's errors say what went wrong with the HTTP conversation; the source
/// chain says why (reset, EOF), worded here rather than shown as hyper and
/// std print it ("connection error: Connection reset by peer (os error 104)").
fn protocol_error(err: hyper::Error) -> ProbeError {
    let io = std::iter::successors(std::error::Error::source(&err), |e| e.source())
        .find_map(|e| e.downcast_ref::<io::Error>());
    let message = match io.map(io::Error::kind) {
        Some(io::ErrorKind::ConnectionReset) => {
            "the server reset the connection before a complete response".to_string()
        }
        Some(io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted) => {
            "the server closed the connection while the request was sent".to_string()
        }
        _ if err.is_incomplete_message() => {
            "the server closed the connection before a complete response".to_string()
        }
        _ if err.is_parse() => format!("the server did not answer with valid HTTP ({err})"),
        _ => match io {
            Some(io) => format!("the HTTP exchange failed: {io}"),
            None => format!("the HTTP exchange failed: {err}"),
        },
    };
    ProbeError {
        kind: Assertion::HttpProtocol,
        message,
    }
}

fn version_name(version: rustls::ProtocolVersion) -> String {
    match version {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
        other => format!("TLS version 0x{:04x}", u16::from(other)),
    }
}

/// A plain-HTTP connection that keeps the first two bytes the server
/// answered: a TLS port spoken to over `http://` answers the request with
/// a TLS record (an alert, 0x15, or a handshake, 0x16, then the major
/// version 3), which hyper only sees as a response that is not HTTP.
struct Sniffed<IO> {
    inner: IO,
    answer: Answer,
}

/// The first bytes read on a [`Sniffed`] connection: the count (0 to 2) in
/// the high byte, the bytes below it. Shared because hyper owns the
/// connection by the time its error comes back.
#[derive(Clone, Default)]
struct Answer(Arc<AtomicU32>);

impl<IO> Sniffed<IO> {
    fn new(inner: IO) -> (Self, Answer) {
        let answer = Answer::default();
        (
            Self {
                inner,
                answer: answer.clone(),
            },
            answer,
        )
    }
}

impl Answer {
    fn record(&self, bytes: &[u8]) {
        let seen = self.0.load(Ordering::Relaxed);
        let mut count = seen >> 24;
        let mut value = seen & 0xffff;
        for &byte in bytes.iter().take(2usize.saturating_sub(count as usize)) {
            value = (value << 8) | u32::from(byte);
            count += 1;
        }
        self.0.store((count << 24) | value, Ordering::Relaxed);
    }

    fn first_two(&self) -> Option<[u8; 2]> {
        let seen = self.0.load(Ordering::Relaxed);
        (seen >> 24 == 2).then_some([(seen >> 8) as u8, seen as u8])
    }

    fn nothing(&self) -> bool {
        self.0.load(Ordering::Relaxed) >> 24 == 0
    }

    /// `err` with the reason the answer shows: TLS instead of HTTP, or
    /// nothing at all before the connection ended.
    fn explain(&self, err: ProbeError) -> ProbeError {
        if err.kind != Assertion::HttpProtocol {
            return err;
        }
        if let Some([0x15 | 0x16, 0x03]) = self.first_two() {
            return ProbeError {
                kind: Assertion::HttpProtocol,
                message: "the port answered with TLS: use https://".to_string(),
            };
        }
        match self.nothing() {
            true => ProbeError {
                message: format!(
                    "{} (nothing was received: if this port speaks TLS, use https://)",
                    err.message
                ),
                ..err
            },
            false => err,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Sniffed<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if self.answer.0.load(Ordering::Relaxed) >> 24 < 2 {
            self.answer.record(&buf.filled()[before..]);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Sniffed<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

fn trust(
    provider: &Arc<CryptoProvider>,
    extra: &[CertificateDer<'static>],
    path: Option<&Path>,
) -> Result<Trust, CaFileError> {
    Trust::new(provider.clone(), extra).map_err(|source| CaFileError::Rejected {
        path: path.map(Path::to_path_buf).unwrap_or_default(),
        source,
    })
}
