//! vigie: out-of-band monitoring of HTTPS origins, the certificate chains
//! they serve, and the CORS preflight of the bucket browsers upload to.
//!
//! # Codemap
//!
//! Data flows one way: `config` -> `probe` -> [`outcome::Outcome`] ->
//! `evaluate` -> output (later: store -> alert -> mail).
//!
//! - [`config`]: `config.toml` + `checks/*.toml`, in two stages: `raw`
//!   (serde mirror, unknown keys rejected) then `resolve` (typed values,
//!   every duration within its `limits`, every problem reported with file,
//!   line and column).
//! - [`check`]: a validated check, ready to run.
//! - [`probe`]: I/O only. `client` is the one place connections are made
//!   (fresh TCP + TLS per request, recording verifier from `tls`); one
//!   module per check kind.
//! - [`cert`]: DER -> [`outcome::CertInfo`], and small pure certificate
//!   judgments (hostname coverage, earliest expiry, staging issuers).
//! - [`outcome`]: the facts and verdict of one probe; the JSON contract.
//! - [`evaluate`]: pure judgment of an outcome against its check.
//! - [`schedule`]: when each check runs (`every` grid or cron, stable
//!   per-check jitter); pure.
//! - [`scheduler`]: the loop: one task per check under the concurrency
//!   bound, outcomes handed to the recorder; per-check slots for lateness.
//! - [`store`]: history of judged outcomes (sled on disk, memory for tests);
//!   the `Store` contract, key layout and record format.
//! - [`app`]: builds the components from a config and runs them
//!   (`vigie check`, `vigie run`).
//! - [`alert`]: pure alerting: per-check incident state machine
//!   (thresholds, reminders, restarts), grouping, silences and maintenance
//!   holds, the blind-monitor gate, and the text of alert mails and the
//!   daily certificate report. No I/O: the daemon persists and sends.
//! - [`alerting`]: the daemon side of `alert`: alert states, silences and
//!   certificate changes in sled, one transaction per state change and its
//!   mail, canary rounds, the daily report's schedule.
//! - [`mail`]: delivery: the durable outbox (sled trees `outbox`,
//!   `dead_letters`) and the sender task draining it over SMTP (lettre,
//!   vigie's own rustls) or into `<state_dir>/maildir`; `vigie test-email`.
//! - [`api`]: the local HTTP API (`/healthz`, `/metrics`, `/api/v1/*`);
//!   reads the store and the scheduler's slots, never writes.
//! - [`replicate`]: off-region copy of the history to S3-compatible
//!   storage (object_store, SigV4): the replicator task ships the store's
//!   replication queue as compressed, checksummed segments; `restore`
//!   rebuilds a store from them; lag for metrics, `/healthz`, heartbeat.
//! - [`heartbeat`]: proof of life at an outside dead-man's switch
//!   (Healthchecks convention: ping, `/fail`, or silence).
//! - [`health`]: is the daemon on time? Written by the supervisor, read by
//!   `/healthz`, metrics and the systemd watchdog.
//! - [`notify`]: systemd's notify protocol (READY, WATCHDOG, STOPPING).
//! - [`render`]: the terminal table and JSON for `vigie check`.
//! - [`redact`]: URLs without userinfo or query, for everything shown.
//! - [`clock`]: wall-clock time as a dependency.

pub mod alert;
pub mod alerting;
pub mod api;
pub mod app;
pub mod cert;
pub mod check;
pub mod clock;
pub mod config;
pub mod evaluate;
pub mod health;
pub mod heartbeat;
pub mod mail;
pub mod notify;
pub mod outcome;
pub mod probe;
pub mod redact;
pub mod render;
pub mod replicate;
pub mod schedule;
pub mod scheduler;
pub mod store;
