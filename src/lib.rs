//! vigie: out-of-band monitoring of HTTPS origins, the certificate chains
//! they serve, and the CORS preflight of the bucket browsers upload to.
//!
//! # Codemap
//!
//! Data flows one way: `config` -> `scheduler` -> `probe` ->
//! [`outcome::Outcome`] -> `evaluate` -> `store` -> `alert` -> `mail`;
//! `replicate`, `vantage` and `api` read the store. The modules stand on
//! floors: a module imports only modules on lower floors, never one on its
//! own floor or above (`tests/in_process/layers.rs` keeps the files of each
//! folder free of import circles too). Folders use `foo/mod.rs`.
//!
//! Where new work goes: a new check kind is a probe in `probe/`, its
//! judgment in `evaluate/`, its keys in `config/resolve/keys.rs`; a new
//! delivery channel sits beside `mail/` on floor 6, fed by `alert`; a new
//! endpoint is a file in `api/` routed in `api/router.rs`; a new
//! long-lived task is a function in `daemon/tasks.rs`.
//!
//! Floor 0, no vigie imports:
//! - [`address`]: what kind of address an IP is (global, metadata, private
//!   ranges).
//! - [`cert`]: DER -> [`cert::CertInfo`], small pure certificate judgments.
//! - [`check`]: a validated check, ready to run.
//! - [`clock`]: wall-clock time as a dependency.
//! - [`fault`]: the test-only hook that makes a supervised task panic.
//! - [`notify`]: systemd's notify protocol (READY, WATCHDOG, STOPPING).
//! - [`redact`]: URLs and error reasons as they may be shown.
//! - [`signing`]: the vantages' Ed25519 keys and signatures.
//!
//! Floor 1:
//! - [`sanitize`]: text from targets made safe to keep and show.
//! - [`when`]: the one way instants and durations are written.
//!
//! Floor 2:
//! - [`config`]: `config.toml` + `checks/*.toml`: `raw` (serde mirror),
//!   `decode` (syntax, unknown keys), `resolve/` (typed values within
//!   `limits`, every problem with file, line and column), `credentials`.
//! - [`metrics`]: the Prometheus text writer every `/metrics` family goes
//!   through.
//! - [`outcome`]: the facts and verdict of one probe; the JSON contract.
//! - [`schedule`]: when each check runs (`every` grid or cron, jitter).
//! - [`supervise`]: restarts long-lived tasks that die, and their stages.
//! - [`tls_words`]: rustls's and webpki's errors as operators read them.
//!
//! Floor 3:
//! - [`evaluate`]: pure judgment of an outcome against its check, a file
//!   per kind (`caa`, with `caa_value` reading an issue record's
//!   parameters; `cors`, `dns` with `dnssec` for its answers' DNSSEC
//!   verdicts, `domain`, `upload`, `lifetime`, `ca`, `key_exchange`).
//! - [`health`]: the daemon's verdict, read by `/healthz`, the metrics, the
//!   watchdog and the heartbeat.
//! - [`net`]: TLS roots, the crypto provider, the HTTP clients of what is
//!   not a probe.
//! - `testing` (unit tests and the `testing` feature): made-up outcomes and
//!   chains shared by the tests and benches.
//!
//! Floor 4:
//! - [`alert`]: pure alerting: incident state machine, grouping, silences,
//!   the blind-monitor gate, the mail `layout` and `render`ing, the daily
//!   `report`, and the alerter's `requests` and published `status`.
//! - [`heartbeat`]: proof of life at an outside dead-man's switch.
//! - [`probe`]: I/O only: `client` (every probe connection), one file per
//!   kind, `ca` (what the CA says about the verified path: `ari`, `crl`,
//!   through the bounded `cache`, within the probe's `budget`), `domain/`
//!   (RDAP: IANA's `bootstrap`, the registry's `document`, the `memory` of
//!   answers that rate-limits the queries, kept in the state directory).
//!
//! Floor 5:
//! - [`incident_update`]: what the on-call person says about an incident
//!   (state and Markdown text), and that text as safe HTML.
//! - [`runner`]: probe + evaluate one check (`vigie check`, the scheduler,
//!   the canaries).
//! - [`store`]: the history and everything kept on disk: `format/` is the
//!   on-disk contract (keys, record codec, rollups, journal frames,
//!   schema), `sled/` its trees (history, rollups, replication queue,
//!   upgrades) and the journal file of the unpacked results, beside the
//!   alert states, the outbox's records and the newest outcome of each
//!   check. The only module that opens sled trees.
//!
//! Floor 6:
//! - [`mail`]: the outbox and the sender draining it over SMTP or into a
//!   Maildir.
//! - [`push`]: the push channels (webhook, ntfy, PagerDuty, Slack): their
//!   documents and requests, and the sender draining the push outbox.
//! - [`replicate`]: the history to S3-compatible storage in segments
//!   (`bucket`, `listing`, `segment`), incident updates beside them
//!   (`updates`), and `restore` from them.
//! - [`scheduler`]: every check on its schedule under the concurrency
//!   bound, outcomes handed to the recorder.
//!
//! Floor 7:
//! - [`vantage`]: several vigies, one verdict: published states, the
//!   quorum, and the `PageClaims` that make exactly one node send a mail.
//!
//! Floor 8:
//! - [`api`]: the local HTTP API: `serve` (the listener and its bounds),
//!   `router`, `auth`, a file per endpoint group (`health`, `checks`,
//!   `history`, `alerts`, `incidents`, `metrics/`), `pages/` (the operator
//!   pages), `status/` (the public `/status` page, its feed and badges,
//!   redacted from the pages' data), `local` (the control socket).
//!
//! Floor 9, the wiring, imported by nothing:
//! - [`daemon`]: `vigie run`: `Daemon::start` builds each task by a named
//!   function (`tasks.rs`, `api_server.rs`), runs it under the supervisor,
//!   reloads (`reload.rs`, `controls.rs`) and stops them in order.
//! - [`cli`]: the client side of `history`, `report`, `silence`,
//!   `incident`, `restore`, and the table and JSON of `vigie check`.

pub mod address;
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
pub mod incident_update;
pub mod mail;
pub mod metrics;
pub mod net;
pub mod notify;
pub mod outcome;
pub mod probe;
pub mod push;
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
