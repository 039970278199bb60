//! What a CA publishes about certificates (ARI windows, CRLs), fetched once
//! and shared by every probe until it is due again.
//!
//! A thousand checks behind ten certificates must not ask the CA a thousand
//! times: an answer is kept per key (a CertID, a CRL URL) until its
//! `refresh_at` (the `Retry-After` of an ARI answer, the `nextUpdate` of a
//! CRL, a short back-off after a failure), and only one probe fetches a
//! given key at a time, the others wait for its answer (single flight).
//! Time is the prober's [`Clock`](crate::clock::Clock), so a simulated
//! clock drives it in tests and in `benches/revocation.rs`.
//!
//! The fetch itself goes through the probe client (`client.rs`): a fresh
//! connection, a bounded body, and the check's redirect policy applied to
//! every address, because the URL comes from the target (a CRL
//! distribution point in its certificate) or from a directory document.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;
use url::Url;

use super::address::RedirectPolicy;
use super::client::{self, Client, Hop, Redirect, Response, Trace};
use super::tls::Trust;
use crate::redact::redact;

/// Entries kept before the ones no longer fresh are dropped.
const SWEEP_AT: usize = 4096;

/// Back-off after a failed fetch: the CA is not hammered by every probe,
/// and a fixed endpoint is seen again within a quarter of an hour.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(15 * 60);

/// Answers by key, each refreshed when due by exactly one fetch.
pub struct Cache<V> {
    entries: Mutex<HashMap<String, Entry<V>>>,
    fetches: AtomicU64,
}

impl<V> std::fmt::Debug for Cache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("fetches", &self.fetches())
            .finish()
    }
}

impl<V> Default for Cache<V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            fetches: AtomicU64::new(0),
        }
    }
}

/// A key's answer, locked while it is being fetched.
type Entry<V> = Arc<tokio::sync::Mutex<Option<Slot<V>>>>;

/// One kept answer and when to ask again.
#[derive(Debug, Clone)]
pub struct Slot<V> {
    pub value: V,
    pub refresh_at: OffsetDateTime,
}

impl<V> Cache<V> {
    /// How many fetches this cache has made.
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }
}

impl<V: Clone> Cache<V> {
    /// The answer for `key` as of `now`: the kept one while it is fresh,
    /// else what `fetch` returns (given the previous answer, if any), kept
    /// until the time it returns with it.
    pub async fn get<F, Fut>(&self, key: &str, now: OffsetDateTime, fetch: F) -> V
    where
        F: FnOnce(Option<V>) -> Fut,
        Fut: Future<Output = Slot<V>>,
    {
        let entry = self.entry(key, now);
        let mut slot = entry.lock().await;
        if let Some(kept) = slot.as_ref().filter(|s| s.refresh_at > now) {
            return kept.value.clone();
        }
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let fresh = fetch(slot.take().map(|s| s.value)).await;
        let value = fresh.value.clone();
        *slot = Some(fresh);
        value
    }

    fn entry(&self, key: &str, now: OffsetDateTime) -> Entry<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= SWEEP_AT && !entries.contains_key(key) {
            // Keep what is fresh or being fetched; the rest is fetched again
            // when asked for.
            entries.retain(|_, e| match e.try_lock() {
                Ok(slot) => slot.as_ref().is_some_and(|s| s.refresh_at > now),
                Err(_) => true,
            });
        }
        entries.entry(key.to_string()).or_default().clone()
    }
}

/// `now + after`, saturating at the far future.
pub fn after(now: OffsetDateTime, after: Duration) -> OffsetDateTime {
    time::Duration::try_from(after)
        .ok()
        .and_then(|d| now.checked_add(d))
        .unwrap_or(crate::clock::FAR_FUTURE)
}

/// One GET of a CA document, on a fresh connection, at most `cap` bytes,
/// within `timeout`; every address of `url` judged by `policy` when set.
/// Errors are the operator's sentence, with the URL redacted.
pub async fn get(
    client: &Client,
    url: &Url,
    trust: &Trust,
    policy: Option<RedirectPolicy>,
    cap: usize,
    timeout: Duration,
) -> Result<Response, String> {
    let shown = redact(url);
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{shown}: only http and https are fetched"));
    }
    let hop = Hop {
        url,
        connect_to: None,
        trust,
        redirect: policy.map(|policy| Redirect { number: 1, policy }),
    };
    let request = client::request(http::Method::GET, url)
        .body(http_body_util::Empty::new())
        .map_err(|err| format!("{shown}: {err}"))?;
    let mut trace = Trace::default();
    let sent = tokio::time::timeout(timeout, client.send_capped(&hop, request, cap, &mut trace));
    let response = match sent.await {
        Err(_) => {
            return Err(format!(
                "{shown}: no answer within {} ({})",
                crate::when::std_span(timeout),
                trace.phase
            ))
        }
        Ok(Err(err)) => return Err(format!("{shown}: {}", refusal(&err.message))),
        Ok(Ok(response)) => response,
    };
    if !response.status.is_success() {
        return Err(format!("{shown}: HTTP {}", response.status.as_u16()));
    }
    if response.truncated {
        return Err(format!("{shown}: larger than {cap} bytes"));
    }
    Ok(response)
}

/// The address policy's refusal, worded for a CA fetch: the client words it
/// for a redirect ("redirect 1 to URL refused: WHY; set
/// redirect_to_private = true ..."), and neither the hop number nor that
/// key applies here.
fn refusal(message: &str) -> String {
    match message.split_once(" refused: ") {
        Some((_, why)) if message.starts_with("redirect ") => {
            let why = why.split("; set redirect_to_private").next().unwrap_or(why);
            format!("not fetched: {why}")
        }
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    const T0: OffsetDateTime = datetime!(2026-12-01 00:00:00 UTC);

    #[test]
    fn a_refused_address_is_worded_for_a_fetch() {
        let message = "redirect 1 to http://169.254.169.254/crl refused: 169.254.169.254 is a cloud instance metadata address, never followed";
        assert_eq!(
            refusal(message),
            "not fetched: 169.254.169.254 is a cloud instance metadata address, never followed"
        );
        let private = "redirect 1 to http://10.0.0.1/ refused: 10.0.0.1 is a private (RFC 1918) address; set redirect_to_private = true on the check to follow it";
        assert_eq!(
            refusal(private),
            "not fetched: 10.0.0.1 is a private (RFC 1918) address"
        );
        assert_eq!(
            refusal("connection refused by 127.0.0.1:1"),
            "connection refused by 127.0.0.1:1"
        );
    }

    #[tokio::test]
    async fn a_fresh_answer_is_not_fetched_again() {
        let cache = Cache::<u32>::default();
        let fetch = |n| {
            move |_previous: Option<u32>| async move {
                Slot {
                    value: n,
                    refresh_at: T0 + time::Duration::hours(6),
                }
            }
        };
        assert_eq!(cache.get("k", T0, fetch(1)).await, 1);
        assert_eq!(
            cache
                .get("k", T0 + time::Duration::hours(5), fetch(2))
                .await,
            1
        );
        assert_eq!(cache.fetches(), 1);
        assert_eq!(
            cache
                .get("k", T0 + time::Duration::hours(6), fetch(3))
                .await,
            3
        );
        assert_eq!(cache.fetches(), 2);
    }

    #[tokio::test]
    async fn the_previous_answer_is_handed_to_the_next_fetch() {
        let cache = Cache::<u32>::default();
        let first = |_: Option<u32>| async {
            Slot {
                value: 7,
                refresh_at: T0,
            }
        };
        cache.get("k", T0, first).await;
        let seen = cache
            .get("k", T0, |previous| async move {
                Slot {
                    value: previous.unwrap_or(0) + 1,
                    refresh_at: T0,
                }
            })
            .await;
        assert_eq!(seen, 8);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_fetch_once() {
        let cache = Arc::new(Cache::<u32>::default());
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let cache = cache.clone();
            tasks.spawn(async move {
                cache
                    .get("k", T0, |_| async {
                        tokio::task::yield_now().await;
                        Slot {
                            value: 1,
                            refresh_at: T0 + time::Duration::hours(1),
                        }
                    })
                    .await
            });
        }
        while let Some(value) = tasks.join_next().await {
            assert_eq!(value.unwrap(), 1);
        }
        assert_eq!(cache.fetches(), 1);
    }
}
