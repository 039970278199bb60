//! What a CA publishes about certificates (ARI windows, CRLs), fetched once
//! and shared by every probe until it is due again.
//!
//! A thousand checks behind ten certificates must not ask the CA a thousand
//! times: an answer is kept per key (a CertID, a CRL URL) until its
//! `refresh_at` (the `Retry-After` of an ARI answer, the `nextUpdate` of a
//! CRL, a short back-off after a failure), and only one probe fetches a
//! given key at a time, the others wait for its answer (single flight).
//! What is kept is bounded in bytes and in entries (`ca_cache_size`, see
//! `ca.rs` for how it is shared), the least recently used answer dropped
//! first. Waiting and fetching both end with the probe's [`Budget`].
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
use super::budget::Budget;
use super::client::{self, Client, Hop, Redirect, Response, Trace};
use super::tls::Trust;
use crate::redact::redact;

/// Back-off after a failed fetch: the CA is not hammered by every probe,
/// and a fixed endpoint is seen again within a quarter of an hour.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(15 * 60);

/// What a kept answer costs in memory, roughly: the bytes it owns on the
/// heap and inline.
pub trait Weight {
    fn weight(&self) -> usize;
}

/// How much one cache keeps at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The answers' [`Weight`] plus their keys, added up.
    pub bytes: usize,
    pub entries: usize,
}

/// Answers by key, each refreshed when due by exactly one fetch, the
/// least recently used dropped first when the cache is over its
/// [`Limits`].
pub struct Cache<V> {
    kept: Mutex<Kept<V>>,
    limits: Limits,
    fetches: AtomicU64,
}

impl<V> std::fmt::Debug for Cache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("fetches", &self.fetches())
            .field("limits", &self.limits)
            .finish()
    }
}

/// The entries, the clock of their use, and their total weight.
struct Kept<V> {
    entries: HashMap<String, Use<V>>,
    tick: u64,
    bytes: usize,
}

/// One key's entry, when it was last asked for, and what it weighs.
struct Use<V> {
    entry: Entry<V>,
    used: u64,
    bytes: usize,
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
    pub fn new(limits: Limits) -> Self {
        Self {
            kept: Mutex::new(Kept {
                entries: HashMap::new(),
                tick: 0,
                bytes: 0,
            }),
            limits,
            fetches: AtomicU64::new(0),
        }
    }

    /// How many fetches this cache has made.
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// What the kept answers weigh together, and how many keys there are.
    pub fn usage(&self) -> (usize, usize) {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        (kept.bytes, kept.entries.len())
    }
}

impl<V: Clone + Weight> Cache<V> {
    /// The answer for `key` as of `now`: the kept one while it is fresh,
    /// else what `fetch` returns (given the previous answer, if any), kept
    /// until the time it returns with it. When `budget` ends first (while
    /// another probe fetches the same key, or during this fetch), the
    /// answer is `cut` of the previous one, and nothing is kept: the next
    /// probe asks again.
    pub async fn get<F, Fut>(
        &self,
        key: &str,
        now: OffsetDateTime,
        budget: &Budget,
        fetch: F,
        cut: impl FnOnce(Option<V>) -> V,
    ) -> V
    where
        F: FnOnce(Option<V>) -> Fut,
        Fut: Future<Output = Slot<V>>,
    {
        let entry = self.entry(key);
        let Some(mut slot) = budget.run(entry.lock()).await else {
            return cut(None);
        };
        if let Some(kept) = slot.as_ref().filter(|s| s.refresh_at > now) {
            return kept.value.clone();
        }
        let previous = slot.as_ref().map(|s| s.value.clone());
        if budget.is_spent() {
            return cut(previous);
        }
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let Some(fresh) = budget.run(fetch(previous.clone())).await else {
            return cut(previous);
        };
        let value = fresh.value.clone();
        let bytes = key.len() + std::mem::size_of::<Slot<V>>() + fresh.value.weight();
        *slot = Some(fresh);
        drop(slot);
        self.settle(key, &entry, bytes);
        value
    }

    /// The entry for `key`, marked as just used; a new one when there is
    /// none (room made for it first).
    fn entry(&self, key: &str) -> Entry<V> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.tick += 1;
        let tick = kept.tick;
        if let Some(known) = kept.entries.get_mut(key) {
            known.used = tick;
            return known.entry.clone();
        }
        while kept.entries.len() >= self.limits.entries && kept.evict_one() {}
        let entry = Entry::default();
        kept.entries.insert(
            key.to_string(),
            Use {
                entry: entry.clone(),
                used: tick,
                bytes: 0,
            },
        );
        entry
    }

    /// Records what `key`'s new answer weighs, then drops the least
    /// recently used answers until the cache is within its limits. An
    /// answer heavier than the whole cache is dropped too: it was given to
    /// the probe that fetched it, and is fetched again when asked for.
    fn settle(&self, key: &str, entry: &Entry<V>, bytes: usize) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let Some(known) = kept.entries.get_mut(key) else {
            return;
        };
        // Evicted and replaced while this fetch ran: the new entry is not
        // this answer's.
        if !Arc::ptr_eq(&known.entry, entry) {
            return;
        }
        let before = std::mem::replace(&mut known.bytes, bytes);
        kept.bytes = kept.bytes - before + bytes;
        while kept.bytes > self.limits.bytes && kept.evict_one() {}
    }
}

impl<V> Kept<V> {
    /// Drops the least recently used entry that no probe is fetching;
    /// false when there is none.
    fn evict_one(&mut self) -> bool {
        let oldest = self
            .entries
            .iter()
            .filter(|(_, u)| u.entry.try_lock().is_ok())
            .min_by_key(|(_, u)| u.used)
            .map(|(key, _)| key.clone());
        let Some(key) = oldest else {
            return false;
        };
        if let Some(gone) = self.entries.remove(&key) {
            self.bytes -= gone.bytes;
        }
        true
    }
}

impl Weight for String {
    fn weight(&self) -> usize {
        self.capacity()
    }
}

impl<T: Weight, E: Weight> Weight for Result<T, E> {
    fn weight(&self) -> usize {
        match self {
            Ok(value) => value.weight(),
            Err(error) => error.weight(),
        }
    }
}

impl Weight for Url {
    fn weight(&self) -> usize {
        self.as_str().len()
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
    const ROOMY: Limits = Limits {
        bytes: 1 << 20,
        entries: 100,
    };

    impl Weight for u32 {
        fn weight(&self) -> usize {
            0
        }
    }

    /// A value weighing its own number of bytes.
    #[derive(Debug, Clone, PartialEq)]
    struct Heavy(usize);

    impl Weight for Heavy {
        fn weight(&self) -> usize {
            self.0
        }
    }

    fn budget() -> Budget {
        Budget::until(tokio::time::Instant::now() + Duration::from_secs(60))
    }

    fn never_cut<V>(_: Option<V>) -> V {
        panic!("cut with a budget of a minute")
    }

    async fn kept_until<V>(value: V, refresh_at: OffsetDateTime) -> Slot<V> {
        Slot { value, refresh_at }
    }

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
        let cache = Cache::<u32>::new(ROOMY);
        let budget = budget();
        let six_hours = T0 + time::Duration::hours(6);
        let get = |n: u32, at| {
            let cache = &cache;
            async move {
                cache
                    .get("k", at, &budget, |_| kept_until(n, six_hours), never_cut)
                    .await
            }
        };
        assert_eq!(get(1, T0).await, 1);
        assert_eq!(get(2, T0 + time::Duration::hours(5)).await, 1);
        assert_eq!(cache.fetches(), 1);
        assert_eq!(get(3, six_hours).await, 3);
        assert_eq!(cache.fetches(), 2);
    }

    #[tokio::test]
    async fn the_previous_answer_is_handed_to_the_next_fetch() {
        let cache = Cache::<u32>::new(ROOMY);
        let budget = budget();
        cache
            .get("k", T0, &budget, |_| kept_until(7, T0), never_cut)
            .await;
        let seen = cache
            .get(
                "k",
                T0,
                &budget,
                |previous| kept_until(previous.unwrap_or(0) + 1, T0),
                never_cut,
            )
            .await;
        assert_eq!(seen, 8);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_fetch_once() {
        let cache = Arc::new(Cache::<u32>::new(ROOMY));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let cache = cache.clone();
            tasks.spawn(async move {
                let fetch = |_| async {
                    tokio::task::yield_now().await;
                    Slot {
                        value: 1,
                        refresh_at: T0 + time::Duration::hours(1),
                    }
                };
                cache.get("k", T0, &budget(), fetch, never_cut).await
            });
        }
        while let Some(value) = tasks.join_next().await {
            assert_eq!(value.unwrap(), 1);
        }
        assert_eq!(cache.fetches(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fetch_past_the_budget_is_cut_and_not_kept() {
        let cache = Cache::<u32>::new(ROOMY);
        let short = Budget::until(tokio::time::Instant::now() + Duration::from_secs(2));
        let stalled = |_| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Slot {
                value: 1,
                refresh_at: T0 + time::Duration::hours(1),
            }
        };
        let cut = |previous: Option<u32>| previous.unwrap_or(0) + 100;
        assert_eq!(cache.get("k", T0, &short, stalled, cut).await, 100);
        // Nothing was kept: the next probe, with time left, fetches.
        let fresh = cache
            .get(
                "k",
                T0,
                &budget(),
                |_| kept_until(5, T0 + time::Duration::hours(1)),
                never_cut,
            )
            .await;
        assert_eq!(fresh, 5);
        // A spent budget still gets what is kept and fresh.
        assert!(short.is_spent());
        let kept = cache.get("k", T0, &short, |_| kept_until(6, T0), cut).await;
        assert_eq!(kept, 5);
    }

    #[tokio::test]
    async fn the_least_recently_used_answers_go_first_by_bytes_and_by_count() {
        let slot = size_of::<Slot<Heavy>>() + 2;
        let cache = Cache::<Heavy>::new(Limits {
            bytes: 3 * (1000 + slot),
            entries: 4,
        });
        let budget = budget();
        let later = T0 + time::Duration::hours(1);
        // Asks for `key`, fetching an answer weighing `weight` if needed.
        let put = |key: &'static str, weight: usize| {
            let (cache, budget) = (&cache, &budget);
            async move {
                let fetch = move |_| kept_until(Heavy(weight), later);
                cache.get(key, T0, budget, fetch, never_cut).await
            }
        };
        for key in ["k1", "k2", "k3"] {
            put(key, 1000).await;
        }
        assert_eq!(cache.usage(), (3 * (1000 + slot), 3));
        // k1 used again: k2 is now the oldest, and goes to make room.
        put("k1", 0).await;
        put("k4", 1000).await;
        assert_eq!(cache.usage().1, 3);
        let fetches = cache.fetches();
        put("k2", 10).await;
        assert_eq!(cache.fetches(), fetches + 1, "k2 was evicted");
        // By count: light answers, at most four keys.
        for key in ["a", "b", "c", "d", "e", "f"] {
            put(key, 1).await;
        }
        assert_eq!(cache.usage().1, 4);
        // Heavier than the whole cache: given to its probe, not kept.
        assert_eq!(put("h", 1 << 20).await, Heavy(1 << 20));
        assert!(cache.usage().0 <= 3 * (1000 + slot));
    }
}
