//! `kind = "domain"`: a domain's registration, read from its registry's
//! RDAP server (RFC 9083): the expiry, the last change, the registrar and
//! the statuses. `evaluate::domain` judges them.
//!
//! Which server: the check's `rdap_url`, else the one IANA's bootstrap
//! names for the TLD (`bootstrap.rs`). The bootstrap is the snapshot
//! shipped with vigie until IANA's own (top-level `rdap_bootstrap`) is
//! fetched, at the first domain query and then at most daily; the copy
//! fetched is kept in the state directory (`rdap-bootstrap.json`), so a
//! restart does not fetch it again. A refresh that fails is logged and
//! tried again an hour later, and the checks go on with the bootstrap
//! they had. A TLD the bootstrap does not know makes no query at all: the
//! report says "no RDAP service for .io: set rdap_url".
//!
//! Registries rate-limit RDAP per address without saying how much, so a
//! domain is asked about at most once per `[check.rdap] query_every` (12 h
//! by default), whatever `every` says and whatever the last query got: a
//! failed query is not retried sooner either. Between queries the probe
//! reports the last answer from `memory.rs`, which the state directory
//! keeps across restarts. An RDAP server answering 429 is not asked about
//! any domain before its `Retry-After` (60 s to 24 h; 1 h when it gives
//! none).
//!
//! Everything runs within the check's `timeout` (the bootstrap's refresh
//! in at most half of it), a little under it in fact: the outcome of a
//! slow registry is this report saying so, a warning, never the probe's
//! `timeout` failure, which would make the check down. Requests go through
//! the probe client (a fresh connection, the check's trust), but with a
//! trace of their own: the registry's certificate is not the check's.
//! Bodies are capped before they are read: [`RDAP_CAP`] for an answer,
//! [`BOOTSTRAP_CAP`] for the bootstrap.

pub mod bootstrap;
pub mod document;
pub mod memory;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::{HeaderValue, ACCEPT};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use tokio::time::Instant;
use url::Url;

use super::ari::retry_after;
use super::budget::{Budget, CUT};
use super::client::{self, Client, Hop, Response, Trace};
use super::tls::Trust;
use crate::check::{Check, DomainCheck};
use crate::clock::saturating_add;
use crate::outcome::DomainReport;
use crate::redact::redact;
use bootstrap::Bootstrap;
use document::Registration;
use memory::{read_capped, write_atomically, Answer, Memory, Remembered};

/// Most bytes of an RDAP answer read (a domain object is a few KiB).
pub const RDAP_CAP: usize = 1 << 20;
/// Most bytes of a bootstrap document read (IANA's is about 100 KiB).
pub const BOOTSTRAP_CAP: usize = 4 << 20;
/// The bootstrap's name in the state directory.
pub const BOOTSTRAP_FILE: &str = "rdap-bootstrap.json";
/// A fetched bootstrap is fetched again a day later.
const BOOTSTRAP_REFRESH: Duration = Duration::from_secs(24 * 3600);
/// A refresh that failed is tried again an hour later.
const BOOTSTRAP_RETRY: Duration = Duration::from_secs(3600);
/// A 429 without `Retry-After` keeps the server unasked this long...
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// ...and one with it, this long at least and at most: a server asking
/// for a second is not asked again at once, one asking for a month is
/// asked again the next day.
const MIN_RETRY_AFTER: Duration = Duration::from_secs(60);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);
/// A clock moved back by more than this since a query makes the domain
/// due again (a clock set right after running years ahead).
const CLOCK_SLACK: time::Duration = time::Duration::DAY;

/// The RDAP side of every domain check: the bootstrap and the remembered
/// answers (one per prober, shared by its probes).
#[derive(Debug)]
pub struct Rdap {
    bootstrap: Bootstraps,
    memory: Memory,
}

impl Default for Rdap {
    /// IANA's bootstrap, nothing kept on disk.
    fn default() -> Self {
        // Invariant: a constant URL.
        let iana =
            Url::parse(crate::check::IANA_RDAP_BOOTSTRAP).expect("IANA's bootstrap URL parses");
        Self::new(iana, None)
    }
}

impl Rdap {
    /// Bootstrap refreshed from `bootstrap_url`; the bootstrap and the
    /// answers kept in `state_dir` when given.
    pub fn new(bootstrap_url: Url, state_dir: Option<&Path>) -> Self {
        Self {
            bootstrap: Bootstraps {
                url: bootstrap_url,
                path: state_dir.map(|d| d.join(BOOTSTRAP_FILE)),
                held: Mutex::new(None),
                refreshing: tokio::sync::Mutex::new(()),
            },
            memory: Memory::new(state_dir),
        }
    }

    /// The registration of `domain`, from its registry when a query is
    /// due, else as last answered. Never fails: what went wrong is in the
    /// report's `error`.
    pub async fn probe(
        &self,
        client: &Client,
        check: &Check,
        domain: &DomainCheck,
        trust: &Trust,
    ) -> DomainReport {
        // Under the prober's own timeout (the check's), so that this
        // report is the outcome.
        let budget = Budget::until(Instant::now() + check.timeout.mul_f64(0.9));
        let key = key(domain);
        let every = domain.rules.query_every;
        let turn = self.memory.turn(&key);
        let Some(_turn) = budget.run(turn.lock()).await else {
            let remembered = self.memory.get(&key);
            let error = format!("RDAP {CUT}");
            return report(domain, remembered.as_ref(), every, None, Some(error));
        };
        let now = client.clock().now();
        let remembered = self.memory.get(&key);
        if let Some(last) = remembered
            .as_ref()
            .filter(|r| !due(r.queried_at, every, now))
        {
            let wait = self.memory.backoff(&server_of_shown(&last.url), now);
            return report(domain, Some(last), every, wait, None);
        }
        let base = match &domain.rdap_url {
            Some(url) => url.clone(),
            None => {
                let bootstrap = self.bootstrap.current(client, trust, &budget).await;
                match bootstrap.base_for(&domain.domain) {
                    Some(base) => base,
                    None => return no_service(domain),
                }
            }
        };
        let Ok(url) = base.join(&format!("domain/{}", domain.domain)) else {
            let error = format!("cannot ask {} about {}", redact(&base), domain.domain);
            return report(domain, remembered.as_ref(), every, None, Some(error));
        };
        let server = url.origin().ascii_serialization();
        if let Some(until) = self.memory.backoff(&server, now) {
            let error = format!(
                "not asked: {server} asked vigie to wait until {} (HTTP 429)",
                crate::when::minute(until)
            );
            return report(domain, remembered.as_ref(), every, Some(until), Some(error));
        }
        let fetched = query(client, &url, trust, &budget, now).await;
        let previous = remembered.and_then(|r| r.answer);
        let (answer, error, wait) = match fetched {
            Fetched::Registration(registration) => (
                Some(Answer {
                    answered_at: now,
                    not_found: false,
                    registration,
                }),
                None,
                None,
            ),
            Fetched::NotFound => (
                Some(Answer {
                    answered_at: now,
                    not_found: true,
                    registration: Registration::default(),
                }),
                None,
                None,
            ),
            Fetched::Failed(error) => (previous, Some(error), None),
            Fetched::Wait { until, error } => (previous, Some(error), Some(until)),
        };
        let last = Remembered {
            queried_at: now,
            url: redact(&url),
            answer,
            error,
        };
        self.memory
            .record(&key, last.clone(), wait.map(|until| (server, until)), now)
            .await;
        let mut shown = report(domain, Some(&last), every, wait, None);
        shown.queried = true;
        shown
    }
}

/// What a domain's answers are remembered under: its name, and the
/// `rdap_url` it is asked at when the check names one (a check moved to
/// another server is asked there at once).
fn key(domain: &DomainCheck) -> String {
    match &domain.rdap_url {
        Some(url) => format!("{} {url}", domain.domain),
        None => domain.domain.clone(),
    }
}

/// Whether a domain last asked about at `queried_at` may be asked again.
fn due(queried_at: OffsetDateTime, every: Duration, now: OffsetDateTime) -> bool {
    now >= saturating_add(queried_at, every) || now + CLOCK_SLACK < queried_at
}

/// The origin of a redacted URL as remembered (`https://rdap.example`).
fn server_of_shown(url: &str) -> String {
    Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}

/// The report of what is remembered; `error` (this probe's) replaces the
/// remembered one.
fn report(
    domain: &DomainCheck,
    remembered: Option<&Remembered>,
    every: Duration,
    wait: Option<OffsetDateTime>,
    error: Option<String>,
) -> DomainReport {
    let answer = remembered.and_then(|r| r.answer.as_ref());
    let registration = answer.map(|a| a.registration.clone()).unwrap_or_default();
    let next = remembered.map(|r| saturating_add(r.queried_at, every));
    DomainReport {
        domain: domain.domain.clone(),
        rdap_url: remembered.map(|r| r.url.clone()),
        expires_at: registration.expires_at,
        last_changed: registration.last_changed,
        registrar: registration.registrar,
        statuses: registration.statuses,
        not_found: answer.is_some_and(|a| a.not_found),
        no_service: false,
        answered_at: answer.map(|a| a.answered_at),
        queried_at: remembered.map(|r| r.queried_at),
        next_query_at: match (next, wait) {
            (Some(next), Some(wait)) => Some(next.max(wait)),
            (next, wait) => next.or(wait),
        },
        queried: false,
        error: error.or_else(|| remembered.and_then(|r| r.error.clone())),
    }
}

/// A TLD the bootstrap has no server for: unknown, saying what to do.
fn no_service(domain: &DomainCheck) -> DomainReport {
    DomainReport {
        domain: domain.domain.clone(),
        no_service: true,
        error: Some(format!(
            "no RDAP service for {}: set rdap_url",
            bootstrap::tld(&domain.domain)
        )),
        ..DomainReport::default()
    }
}

/// What one RDAP query got.
enum Fetched {
    Registration(Registration),
    /// HTTP 404.
    NotFound,
    Failed(String),
    /// HTTP 429: the server is not asked again before `until`.
    Wait {
        until: OffsetDateTime,
        error: String,
    },
}

async fn query(
    client: &Client,
    url: &Url,
    trust: &Trust,
    budget: &Budget,
    now: OffsetDateTime,
) -> Fetched {
    let shown = redact(url);
    let response = match get(
        client,
        url,
        trust,
        "application/rdap+json",
        RDAP_CAP,
        budget,
    )
    .await
    {
        Ok(response) => response,
        Err(error) => return Fetched::Failed(error),
    };
    match response.status.as_u16() {
        404 => Fetched::NotFound,
        429 => {
            let wait = retry_after(&response.headers, now)
                .unwrap_or(DEFAULT_RETRY_AFTER)
                .clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER);
            let until = saturating_add(now, wait);
            Fetched::Wait {
                until,
                error: format!(
                    "{shown}: HTTP 429, too many requests: the server is not asked again before {}",
                    crate::when::minute(until)
                ),
            }
        }
        code if !(200..300).contains(&code) => Fetched::Failed(format!("{shown}: HTTP {code}")),
        _ if response.truncated => Fetched::Failed(format!(
            "{shown}: the answer is larger than {RDAP_CAP} bytes"
        )),
        _ => match document::parse(&response.body) {
            Ok(registration) => Fetched::Registration(registration),
            Err(why) => Fetched::Failed(format!("{shown}: {why}")),
        },
    }
}

/// One GET within `budget`, at most `cap` bytes of body; the answer
/// whatever its status. Errors are sentences naming the URL (redacted).
async fn get(
    client: &Client,
    url: &Url,
    trust: &Trust,
    accept: &'static str,
    cap: usize,
    budget: &Budget,
) -> Result<Response, String> {
    let shown = redact(url);
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{shown}: only http and https are fetched"));
    }
    let hop = Hop {
        url,
        connect_to: None,
        trust,
        redirect: None,
    };
    let mut request = client::request(http::Method::GET, url);
    if let Some(headers) = request.headers_mut() {
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
    }
    let request = request
        .body(http_body_util::Empty::new())
        .map_err(|err| format!("{shown}: {err}"))?;
    let mut trace = Trace::default();
    let sent = budget
        .run(client.send_capped(&hop, request, cap, &mut trace))
        .await;
    match sent {
        Some(Ok(response)) => Ok(response),
        Some(Err(err)) => Err(format!("{shown}: {}", err.message)),
        None => Err(format!(
            "{shown}: no answer within the check's timeout ({})",
            trace.phase
        )),
    }
}

/// The bootstrap in use, and how it is kept fresh.
#[derive(Debug)]
struct Bootstraps {
    url: Url,
    path: Option<PathBuf>,
    /// `None` until first needed.
    held: Mutex<Option<Held>>,
    /// One refresh at a time; the others go on with the bootstrap held.
    refreshing: tokio::sync::Mutex<()>,
}

#[derive(Debug, Clone)]
struct Held {
    bootstrap: Arc<Bootstrap>,
    /// The next refresh, at the earliest.
    next_attempt: OffsetDateTime,
}

/// The state directory's copy: when and where it was fetched.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    #[serde(with = "time::serde::rfc3339")]
    fetched_at: OffsetDateTime,
    url: String,
    bootstrap: Bootstrap,
}

impl Bootstraps {
    /// The bootstrap to use now: refreshed first when due, in half of what
    /// is left of `budget`.
    async fn current(&self, client: &Client, trust: &Trust, budget: &Budget) -> Arc<Bootstrap> {
        let now = client.clock().now();
        let held = self.held(now);
        if now < held.next_attempt {
            return held.bootstrap;
        }
        let Ok(_refreshing) = self.refreshing.try_lock() else {
            return held.bootstrap;
        };
        // Refreshed by another probe between the two looks?
        let held = self.held(now);
        if now < held.next_attempt {
            return held.bootstrap;
        }
        let half = Budget::until(Instant::now() + budget.remaining() / 2);
        let fetched = match get(
            client,
            &self.url,
            trust,
            "application/json",
            BOOTSTRAP_CAP,
            &half,
        )
        .await
        {
            Ok(response) if response.status.is_success() && !response.truncated => {
                Bootstrap::parse(&response.body)
                    .map_err(|why| format!("{}: {why}", redact(&self.url)))
            }
            Ok(response) if response.truncated => Err(format!(
                "{}: larger than {BOOTSTRAP_CAP} bytes",
                redact(&self.url)
            )),
            Ok(response) => Err(format!(
                "{}: HTTP {}",
                redact(&self.url),
                response.status.as_u16()
            )),
            Err(error) => Err(error),
        };
        match fetched {
            Ok(fresh) => {
                tracing::info!(
                    "RDAP bootstrap refreshed from {} (published {})",
                    redact(&self.url),
                    crate::sanitize::value(fresh.publication.as_deref().unwrap_or("-"))
                );
                self.keep(&fresh, now).await;
                let fresh = Arc::new(fresh);
                self.set(Held {
                    bootstrap: fresh.clone(),
                    next_attempt: saturating_add(now, BOOTSTRAP_REFRESH),
                });
                fresh
            }
            Err(error) => {
                tracing::warn!(
                    "RDAP bootstrap not refreshed ({error}); going on with the one held, trying again in an hour"
                );
                self.set(Held {
                    next_attempt: saturating_add(now, BOOTSTRAP_RETRY),
                    ..held.clone()
                });
                held.bootstrap
            }
        }
    }

    fn set(&self, held: Held) {
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(held);
    }

    /// The bootstrap held, first read from the state directory's copy, or
    /// the shipped snapshot when there is none to read. A copy fetched
    /// from another URL than the one configured is used until a refresh
    /// from the configured one succeeds.
    fn held(&self, now: OffsetDateTime) -> Held {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get_or_insert_with(|| match self.read() {
            Some(kept) => {
                let same = kept.url == redact(&self.url);
                let next = saturating_add(kept.fetched_at, BOOTSTRAP_REFRESH);
                Held {
                    bootstrap: Arc::new(kept.bootstrap),
                    next_attempt: match same && kept.fetched_at <= now {
                        true => next,
                        false => now,
                    },
                }
            }
            None => Held {
                bootstrap: Arc::new(Bootstrap::shipped()),
                next_attempt: now,
            },
        })
        .clone()
    }

    fn read(&self) -> Option<Kept> {
        let path = self.path.as_ref()?;
        let bytes = match read_capped(path, BOOTSTRAP_CAP as u64 * 2) {
            Ok(bytes) => bytes?,
            Err(err) => {
                tracing::warn!("ignoring {}: {err}", path.display());
                return None;
            }
        };
        let kept = serde_json::from_slice::<Kept>(&bytes)
            .map_err(|err| err.to_string())
            .and_then(|kept| kept.bootstrap.validate().map(|()| kept));
        match kept {
            Ok(kept) => Some(kept),
            Err(err) => {
                tracing::warn!("ignoring {}: {err}", path.display());
                None
            }
        }
    }

    async fn keep(&self, bootstrap: &Bootstrap, now: OffsetDateTime) {
        let Some(path) = &self.path else {
            return;
        };
        let kept = Kept {
            fetched_at: now,
            url: redact(&self.url),
            bootstrap: bootstrap.clone(),
        };
        let written = match serde_json::to_vec(&kept) {
            Ok(bytes) => write_atomically(path, &bytes).await,
            Err(err) => Err(std::io::Error::other(err)),
        };
        if let Err(err) = written {
            tracing::warn!(
                "cannot keep the RDAP bootstrap in {}: {err}",
                path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::check::DomainRules;

    const T0: OffsetDateTime = datetime!(2026-12-07 08:00 UTC);
    const HOUR: Duration = Duration::from_secs(3600);

    fn check(rdap_url: Option<&str>) -> DomainCheck {
        DomainCheck {
            domain: "example.com".into(),
            rdap_url: rdap_url.map(|u| Url::parse(u).unwrap()),
            rules: DomainRules::default(),
        }
    }

    #[test]
    fn a_domain_is_due_once_per_query_every_and_after_a_clock_set_back() {
        let every = 12 * HOUR;
        assert!(!due(T0, every, T0));
        assert!(!due(T0, every, T0 + 11 * HOUR));
        assert!(due(T0, every, T0 + 12 * HOUR));
        assert!(!due(T0, every, T0 - 2 * HOUR), "a small step back waits");
        assert!(due(T0, every, T0 - 48 * HOUR), "a clock set back days asks");
    }

    #[test]
    fn answers_are_remembered_per_domain_and_server_named_by_the_check() {
        assert_eq!(key(&check(None)), "example.com");
        assert_eq!(
            key(&check(Some("https://rdap.example/"))),
            "example.com https://rdap.example/"
        );
    }

    #[test]
    fn a_tld_without_rdap_says_what_to_set() {
        let mut io = check(None);
        io.domain = "example.io".into();
        let report = no_service(&io);
        assert_eq!(
            report.error.as_deref(),
            Some("no RDAP service for .io: set rdap_url")
        );
        assert_eq!(report.answered_at, None);
        assert!(report.no_service);
    }

    #[test]
    fn the_next_query_waits_for_both_the_interval_and_the_server() {
        let last = Remembered {
            queried_at: T0,
            url: "https://rdap.example/domain/example.com".into(),
            answer: None,
            error: Some("HTTP 503".into()),
        };
        let every = 12 * HOUR;
        let shown = report(&check(None), Some(&last), every, None, None);
        assert_eq!(shown.next_query_at, Some(T0 + 12 * HOUR));
        assert_eq!(shown.error.as_deref(), Some("HTTP 503"));
        let later = T0 + time::Duration::days(1);
        let shown = report(&check(None), Some(&last), every, Some(later), None);
        assert_eq!(shown.next_query_at, Some(later));
        assert_eq!(
            server_of_shown("https://rdap.example/domain/example.com"),
            "https://rdap.example"
        );
    }

    #[tokio::test]
    async fn the_bootstrap_is_the_kept_copy_else_the_shipped_one() {
        let dir = tempfile::tempdir().unwrap();
        let url = Url::parse("http://127.0.0.1:9/dns.json").unwrap();
        let rdap = Rdap::new(url.clone(), Some(dir.path()));
        let held = rdap.bootstrap.held(T0);
        assert_eq!(*held.bootstrap, Bootstrap::shipped());
        assert_eq!(held.next_attempt, T0, "the shipped copy is refreshed first");

        let mine = Bootstrap::parse(
            br#"{"version": "1.0", "services": [[["test"], ["http://127.0.0.1:9/rdap/"]]]}"#,
        )
        .unwrap();
        rdap.bootstrap.keep(&mine, T0).await;
        let again = Rdap::new(url, Some(dir.path()));
        let held = again.bootstrap.held(T0 + HOUR);
        assert_eq!(*held.bootstrap, mine);
        assert_eq!(held.next_attempt, T0 + BOOTSTRAP_REFRESH);
        // Configured elsewhere since: used, and refreshed at once.
        let moved = Rdap::new(
            Url::parse("http://127.0.0.1:9/other.json").unwrap(),
            Some(dir.path()),
        );
        let held = moved.bootstrap.held(T0 + HOUR);
        assert_eq!(*held.bootstrap, mine);
        assert_eq!(held.next_attempt, T0 + HOUR);
    }
}
