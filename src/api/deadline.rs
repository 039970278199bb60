//! A request body that fails once its request's deadline has passed.
//!
//! hyper bounds the time a request head may take (`header_read_timeout`)
//! but not its body: a client that announces 1 KiB and sends one byte
//! every 5 s keeps its connection busy, and so unevictable, for as long as
//! it likes. Every body the router sees is wrapped here, with the deadline
//! the listener computed for the whole request (head and body), so that a
//! handler reading it gets an error, [`RequestTimedOut`], instead of
//! waiting; `body.rs` turns that error into a 408.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::connections::ServerStats;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a body could not be read: its request's deadline passed first.
#[derive(Debug, thiserror::Error)]
#[error("the request's head and body did not arrive within {}", crate::when::std_span(*.0))]
pub(super) struct RequestTimedOut(pub Duration);

/// `inner`, failing with [`RequestTimedOut`] from `deadline` on.
pub(super) struct Deadline<B> {
    inner: B,
    sleep: Pin<Box<Sleep>>,
    timeout: Duration,
    stats: Arc<ServerStats>,
    expired: bool,
}

impl<B> Deadline<B> {
    pub(super) fn new(
        inner: B,
        deadline: Instant,
        timeout: Duration,
        stats: Arc<ServerStats>,
    ) -> Deadline<B> {
        Deadline {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            timeout,
            stats,
            expired: false,
        }
    }
}

impl<B> Body for Deadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        // The deadline first: bytes that arrive after it are not taken.
        if this.expired || this.sleep.as_mut().poll(cx).is_ready() {
            if !this.expired {
                this.expired = true;
                this.stats.count_timed_out();
            }
            return Poll::Ready(Some(Err(Box::new(RequestTimedOut(this.timeout)))));
        }
        Pin::new(&mut this.inner)
            .poll_frame(cx)
            .map(|frame| frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test(start_paused = true)]
    async fn a_body_still_arriving_at_the_deadline_fails() {
        use futures_util::StreamExt;
        // One byte, then nothing: a client that stopped sending.
        let first = futures_util::stream::once(async {
            Ok::<_, BoxError>(Frame::data(Bytes::from_static(b"t")))
        });
        let stream = first.chain(futures_util::stream::pending());
        let body = http_body_util::StreamBody::new(Box::pin(stream));
        let stats = Arc::new(ServerStats::default());
        let timeout = Duration::from_secs(10);
        let deadline = Instant::now() + timeout;
        let body = Deadline::new(body, deadline, timeout, stats.clone());
        let err = body.collect().await.expect_err("the deadline passed");
        assert!(err.downcast_ref::<RequestTimedOut>().is_some(), "{err}");
        assert_eq!(
            err.to_string(),
            "the request's head and body did not arrive within 10 s"
        );
        assert_eq!(stats.snapshot().timed_out_total, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_complete_before_the_deadline_is_read_whole() {
        let stats = Arc::new(ServerStats::default());
        let timeout = Duration::from_secs(10);
        let inner = http_body_util::Full::new(Bytes::from_static(b"token=x"));
        let body = Deadline::new(inner, Instant::now() + timeout, timeout, stats.clone());
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"token=x");
        assert_eq!(stats.snapshot().timed_out_total, 0);
    }
}
