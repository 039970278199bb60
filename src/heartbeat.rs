//! Proof of life: a dead-man's switch at a third party (`[heartbeat] url`).
//!
//! A monitor cannot report its own death, so vigie requests a URL at an
//! outside service every `interval` and that service alerts when the
//! requests stop. The convention is Healthchecks.io's, which most such
//! services (Healthchecks, Cronitor, Uptime Kuma push monitors, Better
//! Stack) accept: a plain `GET url` says "alive and well"; `POST url/fail`
//! says "alive but degraded", with the reason as the body (Healthchecks
//! shows it in the check's log). Silence says "dead".
//!
//! What is sent is decided by the caller's [`Signal`] at each beat; the
//! usual one is [`signal`] over the health verdict:
//!
//! - healthy, nothing degraded: plain ping;
//! - unhealthy (a task failing or stalled, the store refusing writes,
//!   checks late) or degraded (replication failing or far behind, mail
//!   failing, vigie blind): `/fail` with the reason;
//! - scheduler stuck (the supervisor stopped ticking): *nothing*. A stuck
//!   scheduler is a vigie that no longer monitors; going silent lets the
//!   outside service page exactly as if the process had died, instead of
//!   a `/fail` that many setups route to a lower urgency.
//!
//! The task stops with the daemon (the shutdown token), which is what the
//! outside service alerts on. Failures to reach the service are logged and
//! counted ([`HeartbeatStats`]), never retried within a beat, and never
//! block anything else: the task owns its client and takes no lock.
//!
//! Not here: the health judgment itself (`health.rs`); this module only
//! reports it.

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use url::Url;

use crate::clock::{from_unix_millis, unix_millis, Clock};
use crate::config::HeartbeatConfig;
use crate::health::{Status, Verdict};
use crate::metrics::{Exposition, Family};
use crate::net::CaFileError;

/// The longest one ping may take, whatever the interval.
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Most of a `/fail` reason sent (Healthchecks keeps 100 kB; reasons are a
/// line or two).
const REASON_LIMIT: usize = 2000;

/// What the next beat says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Plain ping.
    Alive,
    /// `/fail`, with the reason.
    Degraded(String),
    /// No request at all, and why (logged once per stretch).
    Silent(String),
}

/// The usual signal: silent when the scheduler is stuck; `/fail` when vigie
/// is unhealthy (a task failing or stalled, the store refusing writes,
/// checks late) or degraded (replication, mail, blindness); else alive.
///
/// The `/fail` body goes to a third party, so it names the stage and a
/// short reason (`failing: task alerter keeps dying and being restarted`,
/// `store: the store refuses writes (...)`), never a path, bucket,
/// endpoint, URL or panic message: the verdict's `brief`, and the
/// degradations, which are written that way (`daemon::health_watch`).
pub fn signal(verdict: &Verdict) -> Signal {
    let status = format!("{:?}", verdict.status).to_lowercase();
    let reason = || match &verdict.brief {
        Some(brief) => format!("{status}: {brief}"),
        None => status.clone(),
    };
    match verdict.status {
        Status::Stuck => Signal::Silent(reason()),
        Status::Ok if verdict.degraded.is_empty() => Signal::Alive,
        Status::Ok => Signal::Degraded(verdict.degraded.join("; ")),
        _ => Signal::Degraded(reason()),
    }
}

/// Why the heartbeat could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    #[error("cannot set up TLS for the [heartbeat] url: {0}")]
    Tls(#[from] CaFileError),
    #[error("cannot build the HTTP client for the [heartbeat] url {url}: {detail}")]
    Client { url: String, detail: String },
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct HeartbeatStats {
    alive_total: AtomicU64,
    fail_total: AtomicU64,
    errors_total: AtomicU64,
    withheld_total: AtomicU64,
    last_delivered_ms: AtomicI64,
}

const PINGS: Family = Family::counter(
    "vigie_heartbeat_pings_total",
    "Heartbeat pings by what was sent and how it went.",
);
const LAST_DELIVERED: Family = Family::gauge(
    "vigie_heartbeat_last_delivered_timestamp_seconds",
    "When the heartbeat service last accepted a ping (0: never since start).",
);

impl HeartbeatStats {
    /// Plain pings the service accepted.
    pub fn alive_total(&self) -> u64 {
        self.alive_total.load(Ordering::Relaxed)
    }

    /// `/fail` pings the service accepted.
    pub fn fail_total(&self) -> u64 {
        self.fail_total.load(Ordering::Relaxed)
    }

    /// Pings that did not get a 2xx (refused, timed out, error status).
    pub fn errors_total(&self) -> u64 {
        self.errors_total.load(Ordering::Relaxed)
    }

    /// Beats skipped on purpose (scheduler stuck).
    pub fn withheld_total(&self) -> u64 {
        self.withheld_total.load(Ordering::Relaxed)
    }

    /// The heartbeat's `/metrics` families.
    pub fn write_metrics(&self, out: &mut String) {
        let mut m = Exposition::new(out);
        let last = self.last_delivered_ms.load(Ordering::Relaxed) as f64 / 1000.0;
        m.family(&PINGS);
        let pings = [
            ("alive", "delivered", self.alive_total()),
            ("fail", "delivered", self.fail_total()),
            ("any", "error", self.errors_total()),
            ("none", "withheld", self.withheld_total()),
        ];
        for (signal, result, count) in pings {
            let labels = [("signal", signal), ("result", result)];
            m.sample(&PINGS, &labels, count as f64);
        }
        m.single(&LAST_DELIVERED, last);
    }

    /// When the service last accepted a ping.
    pub fn last_delivered(&self) -> Option<time::OffsetDateTime> {
        let ms = self.last_delivered_ms.load(Ordering::Relaxed);
        (ms != 0).then(|| from_unix_millis(ms)).flatten()
    }
}

/// The heartbeat task; see the module docs.
pub struct Heartbeat {
    client: reqwest::Client,
    url: Url,
    fail_url: Url,
    interval: Duration,
    clock: Arc<dyn Clock>,
    stats: Arc<HeartbeatStats>,
}

/// How one beat went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Beat {
    Delivered { fail: bool },
    Withheld,
    Failed(String),
}

impl Heartbeat {
    /// Builds the client (Mozilla roots plus `extra_ca_file`); sends
    /// nothing.
    pub fn new(
        config: &HeartbeatConfig,
        extra_ca_file: Option<&Path>,
        clock: Arc<dyn Clock>,
    ) -> Result<Heartbeat, HeartbeatError> {
        let timeout = config.interval.min(PING_TIMEOUT);
        let client = crate::net::service_client(extra_ca_file)?
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()
            .map_err(|e| HeartbeatError::Client {
                url: shown(&config.url),
                detail: e.to_string(),
            })?;
        Ok(Heartbeat {
            client,
            url: config.url.clone(),
            fail_url: fail_url(&config.url),
            interval: config.interval,
            clock,
            stats: Arc::new(HeartbeatStats::default()),
        })
    }

    /// How often it beats.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    pub fn stats(&self) -> Arc<HeartbeatStats> {
        self.stats.clone()
    }

    /// Beats every `interval`, the first at once, until `shutdown`; a ping
    /// in flight is abandoned at shutdown.
    pub async fn run<F>(&self, signal: F, shutdown: CancellationToken)
    where
        F: Fn() -> Signal + Send + Sync,
    {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut errors_in_a_row = 0u64;
        let mut withheld = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = signal();
            let beat = tokio::select! {
                _ = shutdown.cancelled() => return,
                beat = self.beat(&now) => beat,
            };
            match (&beat, &now) {
                (Beat::Withheld, Signal::Silent(reason)) if !withheld => {
                    tracing::warn!(reason = %reason, "heartbeat withheld: the outside service will alert");
                }
                (Beat::Failed(error), _) => {
                    errors_in_a_row += 1;
                    if errors_in_a_row == 1 || errors_in_a_row % 10 == 0 {
                        tracing::warn!(url = %shown(&self.url), error = %error, errors_in_a_row, "heartbeat ping failed");
                    }
                }
                (Beat::Delivered { .. }, _) if errors_in_a_row > 0 => {
                    tracing::info!(url = %shown(&self.url), after = errors_in_a_row, "heartbeat ping delivered again");
                    errors_in_a_row = 0;
                }
                _ => {}
            }
            withheld = beat == Beat::Withheld;
        }
    }

    /// One beat: the request `signal` calls for, counted.
    pub async fn beat(&self, signal: &Signal) -> Beat {
        let request = match signal {
            Signal::Silent(_) => {
                self.stats.withheld_total.fetch_add(1, Ordering::Relaxed);
                return Beat::Withheld;
            }
            Signal::Alive => self.client.get(self.url.clone()),
            Signal::Degraded(reason) => {
                let mut body = reason.clone();
                if body.len() > REASON_LIMIT {
                    let cut = (0..=REASON_LIMIT)
                        .rev()
                        .find(|&i| body.is_char_boundary(i))
                        .unwrap_or(0);
                    body.truncate(cut);
                }
                self.client
                    .post(self.fail_url.clone())
                    .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                    .body(body)
            }
        };
        let fail = matches!(signal, Signal::Degraded(_));
        let outcome = match request.send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(format!("the service answered {}", response.status())),
            Err(err) => Err(crate::net::describe(&err)),
        };
        match outcome {
            Ok(()) => {
                let counter = if fail {
                    &self.stats.fail_total
                } else {
                    &self.stats.alive_total
                };
                counter.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .last_delivered_ms
                    .store(unix_millis(self.clock.now()), Ordering::Relaxed);
                Beat::Delivered { fail }
            }
            Err(error) => {
                self.stats.errors_total.fetch_add(1, Ordering::Relaxed);
                Beat::Failed(error)
            }
        }
    }
}

/// `url` + `/fail`, the query kept (Healthchecks accepts `?rid=`).
fn fail_url(url: &Url) -> Url {
    let mut fail = url.clone();
    let path = format!("{}/fail", url.path().trim_end_matches('/'));
    fail.set_path(&path);
    fail
}

/// The URL as logged: scheme and host only. A ping URL's path is a
/// capability (anyone holding it can report "all is well").
fn shown(url: &Url) -> String {
    format!(
        "{}://{}/...",
        url.scheme(),
        url.host_str().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(status: Status, brief: Option<&str>, degraded: &[&str]) -> Verdict {
        Verdict {
            status,
            brief: brief.map(str::to_string),
            reason: brief.map(|b| format!("{b}: /var/lib/vigie/history, https://bucket.example")),
            stage: None,
            last_tick: None,
            late_checks: 0,
            store_errors: 0,
            config_reload_ok: true,
            degraded: degraded.iter().map(|d| d.to_string()).collect(),
            tasks: Vec::new(),
        }
    }

    #[test]
    fn fail_url_appends_to_the_path_and_keeps_the_query() {
        let url = Url::parse("https://hc-ping.com/abc-123?rid=1").unwrap();
        assert_eq!(
            fail_url(&url).as_str(),
            "https://hc-ping.com/abc-123/fail?rid=1"
        );
        let url = Url::parse("https://hc-ping.com/abc-123/").unwrap();
        assert_eq!(fail_url(&url).as_str(), "https://hc-ping.com/abc-123/fail");
        assert_eq!(shown(&url), "https://hc-ping.com/...");
    }

    #[test]
    fn signal_follows_the_verdict_then_what_degrades_it() {
        assert_eq!(signal(&verdict(Status::Ok, None, &[])), Signal::Alive);
        assert_eq!(
            signal(&verdict(Status::Late, Some("2 check(s) waiting"), &[])),
            Signal::Degraded("late: 2 check(s) waiting".into())
        );
        assert_eq!(
            signal(&verdict(
                Status::Failing,
                Some("task alerter keeps dying and being restarted"),
                &["replication failing"]
            )),
            Signal::Degraded("failing: task alerter keeps dying and being restarted".into())
        );
        assert_eq!(
            signal(&verdict(
                Status::Ok,
                None,
                &["replication failing", "mail delivery failing"]
            )),
            Signal::Degraded("replication failing; mail delivery failing".into())
        );
        assert_eq!(
            signal(&verdict(Status::Stuck, Some("not ticked for 5s"), &[])),
            Signal::Silent("stuck: not ticked for 5s".into())
        );
    }

    #[test]
    fn the_fail_body_never_carries_the_store_path_or_a_panic() {
        let stages = std::sync::Arc::new(crate::supervise::Stages::default());
        let health = crate::health::Health::new(time::OffsetDateTime::now_utc(), stages);
        let err = crate::store::StoreError::Locked {
            path: "/var/lib/vigie/history".into(),
        };
        health.store_failed(&err.to_string(), &err.brief());
        let verdict = health.verdict(time::OffsetDateTime::now_utc());
        assert!(verdict.reason.unwrap().contains("/var/lib/vigie/history"));
        assert_eq!(
            signal(&health.verdict(time::OffsetDateTime::now_utc())),
            Signal::Degraded(
                "store: the store refuses writes (the store is in use by another process); pages still go out"
                    .into()
            )
        );
    }
}
