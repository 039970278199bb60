//! The API's listener: every accepted connection is served over HTTP/1.1
//! only (hyper's http1 connection, never the auto builder, so cleartext
//! HTTP/2 is never spoken whatever features the dependency tree turns on),
//! optionally inside TLS, within [`Limits`].
//!
//! The limits exist because the API shares the process's file descriptors
//! with the probes and the mail sender: 300 slow clients once held the
//! API open for 40 s, used up the descriptors, and made a probe report a
//! false DOWN ("Too many open files"). So:
//!
//! - at most [`Limits::max_connections`] connections are open at once. A
//!   newcomer beyond that takes the place of the oldest connection that has
//!   no request in flight (one still sending its headers, or idle between
//!   requests), which is closed; when every connection is busy answering,
//!   the newcomer is closed at once. A flood of clients that never finish
//!   their headers thus never locks out `/healthz` or the CLI, and a client
//!   in the middle of a response is never cut off for a newcomer;
//! - [`Limits::reserved`] of those places are held back for `/healthz` and
//!   requests carrying a bearer token (the CLI, a scraper): other requests
//!   in flight at once are at most `max_connections - reserved`, and one
//!   more is answered 503 at once. Without this, 64 clients each sending
//!   a login form one byte every 5 s made every connection busy, so none
//!   could be evicted and every `/healthz` failed. A wrong bearer token
//!   cannot hold a held-back place: authentication runs before any body
//!   is read, so it is refused as soon as its head is in;
//! - an evicted connection's socket closes when its task next runs, so a
//!   burst of newcomers could outrun the closing: the listener accepts only
//!   while fewer than twice `max_connections` sockets are open, counting
//!   those on their way out, and otherwise leaves newcomers in the
//!   kernel's queue for the moment it takes;
//! - a request, head and body together (and a TLS handshake), must arrive
//!   whole within [`Limits::request_timeout`], counted from the
//!   connection's start or the end of the previous response, which also
//!   bounds keep-alive idling: hyper enforces it on the head, the
//!   [`Deadline`] wrapper on the body (a handler reading past it gets an
//!   error and answers 408);
//! - a connection on which no byte moves either way for
//!   [`Limits::idle_timeout`] is closed (a client that stopped reading its
//!   response).
//!
//! This file owns connections, not routes: the router comes from
//! `router.rs`; the counters it keeps are `connections.rs`'s.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use super::connections::ServerStats;
use super::deadline::Deadline;
use super::local::LocalAccess;
use super::peer::Peer;
use super::tls::ServerTls;

/// How long and how many; see the module docs for what each bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// Places among `max_connections` that only `/healthz` and requests
    /// with a bearer token may hold while they are answered.
    pub reserved: usize,
}

impl Limits {
    /// 64 connections: the CLI, a Prometheus scrape, a peer vigie and a few
    /// browsers need a handful; 64 descriptors are a small share of the
    /// unit's `LimitNOFILE=65536` and of a shell's 1024. 10 s for a request
    /// head is ages for any real client on the networks an API is opened
    /// to; 30 s without a byte is a client that went away. 4 held-back
    /// places let `/healthz`, the CLI and a scrape through together while
    /// 60 others are in flight.
    pub const DEFAULT: Limits = Limits {
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
        max_connections: 64,
        reserved: 4,
    };
}

/// Serves `router` on `listener` until `shutdown`, then lets requests in
/// flight finish for up to [`Limits::request_timeout`].
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: ServerTls,
    limits: Limits,
    stats: Arc<ServerStats>,
    shutdown: CancellationToken,
) {
    let table = Arc::new(Table::new(
        limits.max_connections,
        limits.reserved,
        stats.clone(),
    ));
    let sockets = Arc::new(Semaphore::new(2 * limits.max_connections.max(1)));
    let tracker = TaskTracker::new();
    loop {
        let socket = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = sockets.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                // Invariant: the semaphore is never closed.
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors (EMFILE) or a connection reset before
                // it was accepted: pause instead of spinning on the error.
                tracing::warn!(error = %err, "API cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = table.admit() else {
            ServerStats::count(&stats.refused);
            drop(stream);
            continue;
        };
        ServerStats::count(&stats.accepted);
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            _socket: Some(socket),
            peer: Peer {
                addr: Some(peer),
                tls: false,
                local: false,
            },
            slot,
            router: router.clone(),
            limits,
            stats: stats.clone(),
            shutdown: shutdown.clone(),
        };
        tracker.spawn(connection.run(stream, tls.current()));
    }
    drain(tracker, limits.request_timeout).await;
}

/// Serves the local socket until `shutdown`: `router` to the users
/// [`LocalAccess`] lets in, as if they held the token; a 403 saying who
/// may to anyone else. Its own table of connections, so that a flood on
/// the TCP listener never takes local control away.
pub async fn serve_local(
    listener: tokio::net::UnixListener,
    router: Router,
    access: LocalAccess,
    limits: Limits,
    stats: Arc<ServerStats>,
    shutdown: CancellationToken,
) {
    let table = Arc::new(Table::new(limits.max_connections, 0, stats.clone()));
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                tracing::warn!(error = %err, "the local socket cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = table.admit() else {
            ServerStats::count(&stats.refused);
            continue;
        };
        let verdict = access.judge(stream.peer_cred().ok());
        let router = match &verdict {
            Ok(()) => router.clone(),
            Err(why) => super::local::refusal(why.clone()),
        };
        let connection = Connection {
            _socket: None,
            peer: Peer {
                addr: None,
                tls: false,
                local: verdict.is_ok(),
            },
            slot,
            router,
            limits,
            stats: stats.clone(),
            shutdown: shutdown.clone(),
        };
        tracker.spawn(connection.run(stream, None));
    }
    drain(tracker, limits.request_timeout).await;
}

/// Lets the requests in flight finish, for `grace` at most.
async fn drain(tracker: TaskTracker, grace: Duration) {
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!("API connections still open {grace:?} after shutdown; closing them");
    }
}

/// One accepted connection and what it needs.
struct Connection {
    /// Held until the task ends and its socket is closed (TCP only).
    _socket: Option<OwnedSemaphorePermit>,
    peer: Peer,
    slot: Slot,
    router: Router,
    limits: Limits,
    stats: Arc<ServerStats>,
    shutdown: CancellationToken,
}

impl Connection {
    async fn run<S>(self, stream: S, tls: Option<TlsAcceptor>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::new());
        let stream = Watched {
            inner: stream,
            activity: activity.clone(),
        };
        let Some(acceptor) = tls else {
            return self.http(stream, activity, false).await;
        };
        let handshake = tokio::time::timeout(self.limits.request_timeout, acceptor.accept(stream));
        let evicted = self.slot.live.evicted.clone();
        let stream = tokio::select! {
            () = evicted.cancelled() => return,
            () = self.shutdown.cancelled() => return,
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    tracing::debug!(error = %err, "API TLS handshake failed");
                    return;
                }
                Err(_) => {
                    ServerStats::count(&self.stats.timed_out);
                    return;
                }
            },
        };
        self.http(stream, activity, true).await;
    }

    /// HTTP/1.1 on `io` until the client leaves, a limit closes it, it is
    /// evicted, or the daemon stops.
    async fn http<S>(self, io: S, activity: Arc<Activity>, tls: bool)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let live = self.slot.live.clone();
        let table = self.slot.table.clone();
        let router = self.router.clone();
        let peer = Peer { tls, ..self.peer };
        let (timeout, stats) = (self.limits.request_timeout, self.stats.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
            let busy = table.enter(&live, held_back_for(&request));
            let deadline = live.ready_since() + timeout;
            let stats = stats.clone();
            let mut request = request.map(|body: hyper::body::Incoming| {
                axum::body::Body::new(Deadline::new(body, deadline, timeout, stats.clone()))
            });
            request.extensions_mut().insert(peer);
            let router = router.clone();
            async move {
                let Some(busy) = busy else {
                    ServerStats::count(&stats.shed);
                    return Ok(shed());
                };
                let response = router.oneshot(request).await?;
                // The request counts as in flight until its body is sent
                // (or dropped): a streamed history is never evicted.
                Ok::<_, Infallible>(response.map(|body| {
                    axum::body::Body::new(body.map_frame(move |frame| {
                        let _in_flight = &busy;
                        frame
                    }))
                }))
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.request_timeout)
            .keep_alive(true);
        let connection = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(connection);
        let evicted = self.slot.live.evicted.clone();
        let mut stopping = false;
        loop {
            let quiet_until = activity.last() + self.limits.idle_timeout;
            tokio::select! {
                served = connection.as_mut() => {
                    if let Err(err) = served {
                        if err.is_timeout() {
                            ServerStats::count(&self.stats.timed_out);
                        }
                        tracing::debug!(error = %err, "API connection ended");
                    }
                    return;
                }
                () = evicted.cancelled() => return,
                () = self.shutdown.cancelled(), if !stopping => {
                    connection.as_mut().graceful_shutdown();
                    stopping = true;
                }
                () = tokio::time::sleep_until(quiet_until) => {
                    if activity.last() + self.limits.idle_timeout <= Instant::now() {
                        ServerStats::count(&self.stats.timed_out);
                        return;
                    }
                }
            }
        }
    }
}

/// Whether a request may take a held-back place: `/healthz`, and one
/// with a bearer token (checked before its body is read, so a wrong one is
/// answered at once and holds nothing).
fn held_back_for<B>(request: &hyper::Request<B>) -> bool {
    request.uri().path() == "/healthz" || super::auth::bearer(request.headers()).is_some()
}

/// The answer to a request beyond the places not held back.
fn shed() -> axum::response::Response {
    let body = r#"{"error":"the API is answering as many requests as it takes at once; /healthz and requests with the token still get through; retry in a moment"}"#;
    axum::http::Response::builder()
        .status(axum::http::StatusCode::SERVICE_UNAVAILABLE)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .header(axum::http::header::RETRY_AFTER, "1")
        .header(axum::http::header::CONNECTION, "close")
        .body(axum::body::Body::from(body))
        // Invariant: static, valid header names and values.
        .expect("a static response builds")
}

/// The open connections, oldest first, and how many may be.
struct Table {
    cap: usize,
    /// Of `cap`, the places only held-back requests may hold while busy.
    reserved: usize,
    /// Requests in flight that are not held back ones.
    ordinary_busy: AtomicUsize,
    stats: Arc<ServerStats>,
    inner: Mutex<TableInner>,
}

#[derive(Default)]
struct TableInner {
    next: u64,
    live: BTreeMap<u64, Arc<Live>>,
}

/// What the table knows of one connection.
struct Live {
    /// Requests whose response is not yet sent.
    busy: AtomicUsize,
    /// Cancelled to close the connection for a newcomer.
    evicted: CancellationToken,
    /// The connection's start, then the end of its last response: where
    /// the next request's deadline counts from.
    ready_since: Mutex<Instant>,
}

impl Live {
    fn new() -> Live {
        Live {
            busy: AtomicUsize::new(0),
            evicted: CancellationToken::new(),
            ready_since: Mutex::new(Instant::now()),
        }
    }

    fn ready_since(&self) -> Instant {
        *self.ready_since.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A connection's place in the table; leaving it frees the place.
struct Slot {
    id: u64,
    live: Arc<Live>,
    table: Arc<Table>,
}

impl Table {
    fn new(cap: usize, reserved: usize, stats: Arc<ServerStats>) -> Table {
        let cap = cap.max(1);
        Table {
            cap,
            reserved: reserved.min(cap - 1),
            ordinary_busy: AtomicUsize::new(0),
            stats,
            inner: Mutex::new(TableInner::default()),
        }
    }

    /// A request in flight on `live`; `None` for an ordinary request when
    /// every place not held back is busy answering.
    fn enter(self: &Arc<Self>, live: &Arc<Live>, held_back: bool) -> Option<Busy> {
        if held_back {
            return Some(Busy::enter(live.clone(), None));
        }
        let most = self.cap - self.reserved;
        let taken = self
            .ordinary_busy
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < most).then_some(n + 1)
            });
        taken.ok()?;
        Some(Busy::enter(live.clone(), Some(self.clone())))
    }

    /// A place for a newcomer: a free one, else the oldest connection with
    /// no request in flight is evicted; `None` when every one is busy.
    fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.live.len() >= self.cap {
            let idle = inner
                .live
                .iter()
                .find(|(_, live)| live.busy.load(Ordering::Acquire) == 0)
                .map(|(id, _)| *id)?;
            if let Some(evicted) = inner.live.remove(&idle) {
                evicted.evicted.cancel();
                ServerStats::count(&self.stats.evicted);
            }
        }
        let id = inner.next;
        inner.next += 1;
        let live = Arc::new(Live::new());
        inner.live.insert(id, live.clone());
        self.stats
            .open
            .store(inner.live.len() as u64, Ordering::Relaxed);
        Some(Slot {
            id,
            live,
            table: self.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.table.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.live.remove(&self.id);
        self.table
            .stats
            .open
            .store(inner.live.len() as u64, Ordering::Relaxed);
    }
}

/// One request in flight on a connection, from its head to the end of its
/// response body; an ordinary one also holds its place in the table's
/// count.
struct Busy {
    live: Arc<Live>,
    ordinary: Option<Arc<Table>>,
}

impl Busy {
    fn enter(live: Arc<Live>, ordinary: Option<Arc<Table>>) -> Busy {
        live.busy.fetch_add(1, Ordering::AcqRel);
        Busy { live, ordinary }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self
            .live
            .ready_since
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.live.busy.fetch_sub(1, Ordering::AcqRel);
        if let Some(table) = &self.ordinary {
            table.ordinary_busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// When a byte last moved on a connection.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A stream that records in its [`Activity`] every read or write that
/// moved bytes.
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(cap: usize) -> Arc<Table> {
        Arc::new(Table::new(cap, 0, Arc::new(ServerStats::default())))
    }

    #[test]
    fn beyond_the_cap_the_oldest_idle_connection_makes_room() {
        let table = table(2);
        let first = table.admit().unwrap();
        let second = table.admit().unwrap();
        let third = table.admit().unwrap();
        assert!(first.live.evicted.is_cancelled());
        assert!(!second.live.evicted.is_cancelled());
        assert!(!third.live.evicted.is_cancelled());
        assert_eq!(table.stats.snapshot().evicted_total, 1);
        assert_eq!(table.stats.snapshot().open, 2);
        // The evicted connection's task ends and leaves: nothing changes.
        drop(first);
        assert_eq!(table.stats.snapshot().open, 2);
    }

    #[test]
    fn a_connection_answering_is_never_evicted_and_a_full_busy_table_refuses() {
        let table = table(2);
        let first = table.admit().unwrap();
        let second = table.admit().unwrap();
        let _answering = Busy::enter(first.live.clone(), None);
        let third = table.admit().unwrap();
        assert!(!first.live.evicted.is_cancelled());
        assert!(second.live.evicted.is_cancelled());
        let _also = Busy::enter(third.live.clone(), None);
        assert!(table.admit().is_none());
        drop(_answering);
        let fourth = table.admit().unwrap();
        assert!(first.live.evicted.is_cancelled());
        assert!(!fourth.live.evicted.is_cancelled());
    }

    #[test]
    fn ordinary_requests_leave_the_held_back_places_to_healthz_and_the_cli() {
        let table = Arc::new(Table::new(4, 1, Arc::new(ServerStats::default())));
        let slots: Vec<Slot> = (0..4).map(|_| table.admit().unwrap()).collect();
        let uploads: Vec<Busy> = slots[..3]
            .iter()
            .map(|slot| table.enter(&slot.live, false).unwrap())
            .collect();
        // A fourth slow upload is refused; the health check is not, and
        // the slot it came on stays evictable until then.
        assert!(table.enter(&slots[3].live, false).is_none());
        let newcomer = table.admit().expect("the idle connection makes room");
        assert!(slots[3].live.evicted.is_cancelled());
        let health = table.enter(&newcomer.live, true).expect("held back");
        drop(health);
        drop(uploads);
        assert!(table.enter(&newcomer.live, false).is_some());
    }

    #[test]
    fn leaving_frees_the_place() {
        let table = table(1);
        let only = table.admit().unwrap();
        let _busy = Busy::enter(only.live.clone(), None);
        assert!(table.admit().is_none());
        drop(_busy);
        drop(only);
        assert_eq!(table.stats.snapshot().open, 0);
        assert!(table.admit().is_some());
    }
}
