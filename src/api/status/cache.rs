//! The render cache: `/status` is public, so its cost must not follow the
//! request rate. One snapshot (the public data, the page, the feed and
//! their ETags) is built at most once per [`FRESH`]: the first request
//! after it expires builds the next one while the others wait on the same
//! lock and then share it, so N requests at once build it once.
//!
//! It also keeps what makes a build cheap: the public checks' day and hour
//! figures and failure streaks, so a build reads the store only for the
//! checks with a new result.

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use tokio::sync::Mutex;
use tokio::time::{Duration, Instant};

use super::super::pages::rows::RowCache;
use super::super::pages::streaks::StreakCache;
use super::view::PublicStatus;
use crate::metrics::{Exposition, Family};

/// How long one snapshot is served.
pub const FRESH: Duration = Duration::from_secs(10);

/// One build of everything public.
#[derive(Debug)]
pub struct Snapshot {
    pub status: PublicStatus,
    /// Shared by every answer: a request copies no body.
    pub page: Bytes,
    pub page_etag: String,
    pub feed: Bytes,
    pub feed_etag: String,
    built: Instant,
}

impl Snapshot {
    pub fn new(status: PublicStatus, page: String, feed: String) -> Snapshot {
        Snapshot {
            page_etag: etag(&page),
            feed_etag: etag(&feed),
            status,
            page: Bytes::from(page),
            feed: Bytes::from(feed),
            built: Instant::now(),
        }
    }
}

/// A strong validator from the body's hash: the same body, the same tag,
/// across renders and restarts (SipHash with fixed keys).
pub(super) fn etag(body: &str) -> String {
    let mut hasher = std::hash::DefaultHasher::new();
    body.hash(&mut hasher);
    format!("\"{:016x}\"", hasher.finish())
}

/// The snapshot in force and how many were built; one per API.
#[derive(Debug, Default)]
pub struct StatusCache {
    current: Mutex<Option<Arc<Snapshot>>>,
    renders: AtomicU64,
    /// The failure streaks of the public checks, kept between builds.
    pub(super) streaks: StreakCache,
    /// The public checks' day and hour figures, kept between builds.
    pub(super) rows: RowCache,
}

impl StatusCache {
    /// The snapshot in force, built by `build` when there is none or it is
    /// older than [`FRESH`]. A failed build is not kept: the next request
    /// tries again.
    pub(super) async fn current<E, F>(&self, build: impl FnOnce() -> F) -> Result<Arc<Snapshot>, E>
    where
        F: Future<Output = Result<Snapshot, E>>,
    {
        let mut current = self.current.lock().await;
        if let Some(snapshot) = current.as_ref() {
            if snapshot.built.elapsed() < FRESH {
                return Ok(snapshot.clone());
            }
        }
        let snapshot = Arc::new(build().await?);
        self.renders.fetch_add(1, Ordering::Relaxed);
        *current = Some(snapshot.clone());
        Ok(snapshot)
    }

    /// Drops the snapshot, so the next request builds one: for the
    /// benchmark, which times builds back to back.
    #[cfg(any(test, feature = "testing"))]
    pub async fn expire(&self) {
        *self.current.lock().await = None;
    }

    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }

    pub fn write_metrics(&self, out: &mut String) {
        let mut m = Exposition::new(out);
        let family = Family::counter(
            "vigie_status_page_renders_total",
            "times the public status page was built (at most once per 10 s)",
        );
        m.single(&family, self.renders() as f64);
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn empty() -> PublicStatus {
        PublicStatus {
            title: "Status".into(),
            now: datetime!(2026-12-07 20:00 UTC),
            notices: Vec::new(),
            groups: Vec::new(),
            incidents: Vec::new(),
        }
    }

    async fn build(builds: &AtomicU64) -> Result<Snapshot, ()> {
        let n = builds.fetch_add(1, Ordering::SeqCst);
        // A build that takes a while, so the other requests arrive during it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(Snapshot::new(empty(), format!("page {n}"), String::new()))
    }

    #[tokio::test(start_paused = true)]
    async fn many_requests_at_once_build_once_and_again_only_after_ten_seconds() {
        let cache = Arc::new(StatusCache::default());
        let builds = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let (cache, builds) = (cache.clone(), builds.clone());
            tasks
                .spawn(async move { cache.current(|| build(&builds)).await.unwrap().page.clone() });
        }
        let pages = tasks.join_all().await;
        assert!(pages.iter().all(|p| p == "page 0"), "{pages:?}");
        assert_eq!(cache.renders(), 1);
        tokio::time::advance(Duration::from_secs(9)).await;
        let page = cache.current(|| build(&builds)).await.unwrap();
        assert_eq!(page.page, "page 0".as_bytes(), "still fresh at 9.5 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        let page = cache.current(|| build(&builds)).await.unwrap();
        assert_eq!(page.page, "page 1".as_bytes());
        assert_eq!(cache.renders(), 2);
        assert_eq!(builds.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn the_same_body_has_the_same_etag() {
        assert_eq!(etag("a"), etag("a"));
        assert_ne!(etag("a"), etag("b"));
        assert!(etag("a").starts_with('"') && etag("a").ends_with('"'));
    }
}
