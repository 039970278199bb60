//! vigie: out-of-band monitoring of HTTPS origins, the certificate chains
//! they serve, and the CORS preflight of the bucket browsers upload to.
//!
//! # Codemap
//!
//! Data flows one way: `config` -> `scheduler` -> `probe` ->
//! [`outcome::Outcome`] -> `evaluate` -> `store` -> `alert` -> `mail`;
//! `replicate` and `api` read the store. Imports point down: the leaves
//! first, the wiring (`daemon`, `cli`) on top, imported by nothing.
//!
//! Leaves (pure, or I/O of one kind):
//! - [`clock`]: wall-clock time as a dependency.
//! - [`config`]: `config.toml` + `checks/*.toml`, in two stages: `raw`
//!   (serde mirror, unknown keys rejected) then `resolve` (typed values,
//!   every duration within its `limits`, every problem reported with file,
//!   line and column); `credentials` says where a secret given by name
//!   (`*_credential`) is read: `$CREDENTIALS_DIRECTORY`, else
//!   `credentials_dir`.
//! - [`check`]: a validated check, ready to run.
//! - [`cert`]: DER -> [`cert::CertInfo`], and small pure certificate
//!   judgments (hostname coverage, earliest expiry, staging issuers).
//! - [`outcome`]: the facts and verdict of one probe; the JSON contract.
//! - [`redact`]: URLs without userinfo or query, error reasons reduced to
//!   their kind, for everything shown.
//! - [`signing`]: the vantages' Ed25519 keys (key files, `ed25519:` public
//!   keys, signatures).
//! - [`when`]: the one way instants and durations are written, for the
//!   log, the mail, the pages, the report and the CLI.
//! - [`sanitize`]: text from targets made safe to keep and show: control
//!   characters escaped, values capped at 256 bytes, header values
//!   redacted by rule (cookies, credentials, URL queries, a check's
//!   `redact_headers`); the terminal and JSON escaping of the CLI.
//! - [`tls_words`]: rustls's and webpki's errors (refused certificates,
//!   alerts, protocol mismatches) as the sentences operators read; the
//!   probe, the mail sender and the CA file loader word them here.
//! - [`net`]: TLS roots, the crypto provider, and the HTTP clients of
//!   everything that is not a probe (replication, heartbeat, CLI to
//!   daemon; the mail transport's roots).
//! - [`probe`]: I/O only. `client` is the one place probe connections are
//!   made (fresh TCP + TLS per request, recording verifier from `tls`);
//!   one module per check kind (`http`, `cors`, `dns` on hickory-resolver,
//!   a fresh resolver per probe, `upload`: a presigned PUT signed offline
//!   by object_store, its preflight, the PUT and a presigned DELETE).
//!   Every fact is sanitised where it is captured (`sanitize`;
//!   certificates in `shown`). After the probe, `ca` rebuilds the
//!   verified path by signature and asks what the CA says about the
//!   certificates on it: `ari` (RFC 9773 renewal windows) and `crl`
//!   (revocation), through the shared, single-flight `cache` (bounded in
//!   bytes and entries, least recently used first) on the prober's clock,
//!   all within the probe's `budget` (what the check's timeout leaves).
//! - [`evaluate`]: pure judgment of an outcome against its check, one
//!   module per kind; `evaluate::caa` holds RFC 8659's issuance rules,
//!   `lifetime` the thresholds for any lifetime (in hours for short-lived
//!   certificates), `ca` renewal windows and revocations,
//!   `evaluate::upload` the browser's view of each upload step (which the
//!   upload probe also asks, to stop where a browser would).
//! - [`runner`]: probe + evaluate one check (what `vigie check`, the
//!   scheduler and the canaries share).
//! - [`schedule`]: when each check runs (`every` grid or cron, stable
//!   per-check jitter); pure.
//! - [`supervise`]: restarts long-lived tasks that die, with backoff, and
//!   publishes each one's stage (running, restarting, failing, stalled).
//! - [`fault`]: the test-only hook that makes a supervised task panic.
//! - `testing` (unit tests and the `testing` feature only): made-up
//!   results and certificate chains that tests and benchmarks share.
//! - [`scheduler`]: one config's dispatcher: every check on its schedule
//!   under the concurrency bound, outcomes handed to the recorder; per-check
//!   slots for lateness.
//! - [`store`]: history of judged outcomes (sled on disk, memory for tests;
//!   the `Store` contract, key layout and record format), with each
//!   check's hour and day rollups and certificate timeline kept at append
//!   time (`rollup.rs` the pure math, `sled/rollups.rs` the trees), alert states,
//!   silences and certificate changes ([`store::AlertStore`]), the outbox's
//!   records ([`store::OutboxStore`]) and the newest outcome of each check
//!   ([`store::Latest`]). The only module that opens sled trees.
//! - [`alert`]: pure alerting: per-check incident state machine
//!   (thresholds, reminders, restarts), grouping, silences and maintenance
//!   holds, the blind-monitor gate, and the text of alert mails and the
//!   daily certificate report. No I/O.
//! - [`mail`]: delivery: the outbox (the store's records, the sender's
//!   wake-up and counters) and the sender draining it over SMTP (lettre,
//!   vigie's own rustls) or into `<state_dir>/maildir`; `vigie test-email`.
//! - [`replicate`]: off-region copy of the history to S3-compatible
//!   storage (object_store, SigV4): the replicator ships the store's
//!   replication queue as compressed, checksummed segments; `restore`
//!   rebuilds a store from them (each segment capped before it is
//!   downloaded and read a line at a time); lag for metrics and health.
//! - [`vantage`]: several vigies, one verdict: each publishes its state to
//!   the bucket, pages only on a quorum of live vantages, and claims each
//!   mail with a conditional create so that exactly one node sends it.
//! - [`health`]: the daemon's verdict (stuck, failing, stalled, store,
//!   late, ok; and what degrades it), read by `/healthz`, the metrics, the
//!   systemd watchdog and the heartbeat.
//! - [`heartbeat`]: proof of life at an outside dead-man's switch
//!   (Healthchecks convention: ping, `/fail`, or silence).
//! - [`notify`]: systemd's notify protocol (READY, WATCHDOG, STOPPING).
//! - [`api`]: the local HTTP API (`/healthz`, `/metrics`, `/api/v1/*`);
//!   reads the store, the scheduler's slots and health; silences go to
//!   the alerter. `api/serve` is the listener (HTTP/1.1 only, connection
//!   cap with eviction and places held back for `/healthz` and the token,
//!   one deadline per request, idle timeout), `api/deadline` the body
//!   that fails past it, `api/body` the per-route body limits, `api/host`
//!   the `Host` rule, `api/auth` the token and who may ask,
//!   `api/session` browser sessions, `api/throttle` the login throttle,
//!   `api/tls` its HTTPS, `api/history` the streamed, paged history,
//!   `api/pages` the status pages (`api/pages/streaks` their failure
//!   streaks from the hour rollups, cached per check).
//!
//! The wiring:
//! - [`daemon`]: `vigie run`: builds every task from the config, runs each
//!   under the supervisor (scheduler, recorder, alerter, sender, canaries,
//!   replicator, heartbeat, sweep, API, watch), reloads, stops them in
//!   order.
//! - [`cli`]: the client side of `history`, `report`, `silence`,
//!   `restore` (the daemon's API, else the store), and the terminal table
//!   and JSON of `vigie check`.

pub mod alert;
pub mod api;
pub mod cert;
pub mod check;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod evaluate;
pub mod fault;
pub mod health;
pub mod heartbeat;
pub mod mail;
pub mod metrics;
pub mod net;
pub mod notify;
pub mod outcome;
pub mod probe;
pub mod redact;
pub mod replicate;
pub mod runner;
pub mod sanitize;
pub mod schedule;
pub mod scheduler;
pub mod signing;
pub mod store;
pub mod supervise;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tls_words;
pub mod vantage;
pub mod when;
