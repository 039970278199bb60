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
//!   every problem reported with file, line and column).
//! - [`check`]: a validated check, ready to run.
//! - [`probe`]: I/O only. `client` is the one place connections are made
//!   (fresh TCP + TLS per request, recording verifier from `tls`); one
//!   module per check kind.
//! - [`cert`]: DER -> [`outcome::CertInfo`], and small pure certificate
//!   judgments (hostname coverage, earliest expiry, staging issuers).
//! - [`outcome`]: the facts and verdict of one probe; the JSON contract.
//! - [`evaluate`]: pure judgment of an outcome against its check.
//! - [`app`]: builds the components from a config and runs them
//!   (`vigie check`).
//! - [`render`]: the terminal table and JSON for `vigie check`.
//! - [`redact`]: URLs without userinfo or query, for everything shown.
//! - [`clock`]: wall-clock time as a dependency.

pub mod app;
pub mod cert;
pub mod check;
pub mod clock;
pub mod config;
pub mod evaluate;
pub mod outcome;
pub mod probe;
pub mod redact;
pub mod render;
