//! The daemon's configuration: `config.toml` plus every `checks/*.toml`,
//! loaded into typed values once; after [`load`] nothing can hold an invalid
//! URL, regex, cron expression, duration or mailbox, a duration outside its
//! [`limits`], or a cron expression that never fires again.
//!
//! Loading has two stages (ripgrep's raw-then-validated shape), and reports
//! every problem of every file at once as `FILE:LINE:COL: message`, the
//! message naming the key (`vigie validate` prints them as they are):
//!
//! - `source.rs`: a file held in memory; byte offset -> line and column.
//! - `error.rs`: [`ConfigError`], [`ConfigErrors`], and the collector every
//!   stage reports into instead of returning at the first problem.
//! - `raw.rs`: the serde mirror of the files, unknown keys rejected, values
//!   as written with their spans.
//! - `decode.rs`: text -> raw structs, one section or entry at a time, so
//!   serde stopping at its first error costs at most one key.
//! - `resolve`: raw -> typed, with the semantic rules (schemes, ranges,
//!   files that must exist, duplicate names, defaults): `config.toml` there,
//!   `[[check]]` entries in `resolve/check.rs`, the shared string -> value
//!   conversions and their messages in `resolve/cx.rs`.
//! - `limits.rs`: the minimum and maximum of every duration key.
//! - `credentials.rs`: which file a secret given by name stands for.
//! - this file: the typed configuration, which files are read in which
//!   order, and small queries on the result ([`Config::select`],
//!   [`MaintenanceWindow::covers`]).
//!
//! Relative paths are resolved against the directory of the file they are
//! written in: `config.toml`'s for its keys, a checks file's for
//! `tls.ca_file`. Paths are joined, not canonicalized, so messages show
//! them as the user would find them.

pub mod channels;
pub mod credentials;
mod decode;
mod error;
pub mod limits;
mod raw;
mod resolve;
mod source;

use std::collections::BTreeSet;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lettre::message::Mailbox;
use time::OffsetDateTime;
use url::Url;

use crate::check::Check;
use crate::clock::{Clock, SystemClock};
use credentials::CredentialDirs;

pub use error::{ConfigError, ConfigErrors};
pub use resolve::RELAY_CHECK;

use error::Diagnostics;
use source::Source;

/// Everything the daemon and the CLI need, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// The config file itself.
    pub path: PathBuf,
    /// sled database, maildir, etc. Not required to exist: the daemon
    /// creates it.
    pub state_dir: PathBuf,
    /// Where the checks files were read from; exists.
    pub checks_dir: PathBuf,
    /// Probes in flight at most; at least 1.
    pub concurrency: usize,
    /// Timeout of a check that sets none; more than zero.
    pub default_timeout: Duration,
    /// Added to the Mozilla roots for every check; exists.
    pub extra_ca_file: Option<PathBuf>,
    /// Top-level `acme_directory`: every check's default.
    pub acme_directory: Option<url::Url>,
    /// What the CRL and ARI caches hold together, in bytes
    /// (`limits::MIN_CA_CACHE_SIZE..=MAX_CA_CACHE_SIZE`).
    pub ca_cache_size: usize,
    /// `rdap_bootstrap`: where domain checks refresh IANA's RDAP bootstrap
    /// (`dns.json`) from, at most daily.
    pub rdap_bootstrap: Url,
    /// Where `*_credential` names were looked up: `credentials_dir`
    /// (default `/etc/vigie/credentials`), or `$CREDENTIALS_DIRECTORY`
    /// under systemd.
    pub credentials: CredentialDirs,
    pub api: ApiConfig,
    pub connectivity: ConnectivityConfig,
    pub alerting: AlertingConfig,
    /// `None`: messages go to `<state_dir>/maildir`.
    pub smtp: Option<SmtpConfig>,
    pub report: ReportConfig,
    pub history: HistoryConfig,
    /// `None`: history is kept locally only.
    pub replication: Option<ReplicationConfig>,
    pub heartbeat: Option<HeartbeatConfig>,
    pub vantage: Option<VantageConfig>,
    pub maintenance: Vec<MaintenanceWindow>,
    /// `[status_page]`: the public page (off unless `public = true`).
    pub status_page: StatusPageConfig,
    /// `[[announcement]]` entries, in file order.
    pub announcements: Vec<Announcement>,
    /// `[[notify]]` channels and `[[route]]`s.
    pub notify: channels::Notify,
    /// From every `checks_dir/*.toml`, files in name order, checks in file
    /// order; names are unique.
    pub checks: Vec<std::sync::Arc<Check>>,
    /// What loaded but deserves a look (a secret file others may read):
    /// `validate` shows them, `run` logs them at WARN.
    pub warnings: Vec<ConfigError>,
}

/// `[api]`: the local HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    pub listen: SocketAddr,
    /// Required by mutating endpoints, and by every endpoint but /healthz
    /// when `listen` is not loopback (enforced by the API). Set, and
    /// holding at least [`limits::MIN_REMOTE_TOKEN_BYTES`], whenever
    /// `listen` is not loopback.
    pub token_file: Option<PathBuf>,
    /// The API serves HTTPS with this certificate chain and key; set,
    /// both, whenever `listen` is not loopback.
    pub tls: Option<ApiTls>,
    /// What the CLI trusts when it asks a TLS API (besides the Mozilla
    /// roots); `None`: the certificates of `tls_cert_file` themselves.
    pub ca_file: Option<PathBuf>,
    /// Names a `Host` header may carry besides the listen address and
    /// `localhost` (a DNS name the API is reached by), lowercase, without
    /// a trailing dot.
    pub hosts: Vec<String>,
    /// One deadline for a request's head and body together.
    pub request_timeout: Duration,
    /// How long a browser session made at `/login` lasts.
    pub session_ttl: Duration,
    /// The local control socket as written; `None`: the default place
    /// (`api::local::socket_path`).
    pub socket: Option<PathBuf>,
    /// Where people reach the pages (`https://status.example.com/`): the
    /// links pushes carry. `None`: pushes carry none.
    pub public_url: Option<url::Url>,
}

/// `[api] tls_cert_file` and `tls_key_file`: PEM files that exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTls {
    /// The server certificate first, then its intermediates.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// `[connectivity]`: the blind-monitor gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectivityConfig {
    /// http(s) URLs outside the watched platform; none means no gate.
    pub canaries: Vec<Url>,
    /// The canaries are probed this often when the alerter asks no sooner.
    pub every: Duration,
}

/// `[alerting]`.
#[derive(Debug, Clone)]
pub struct AlertingConfig {
    /// `false`: checks are judged and shown, nobody is paged (the only
    /// way to run without recipients).
    pub enabled: bool,
    /// Never empty while `enabled`: the config is refused.
    pub to: Vec<Mailbox>,
    pub from: Option<Mailbox>,
    /// Consecutive failed probes before DOWN; at least 1.
    pub failure_threshold: u32,
    /// Consecutive good probes before UP again; at least 1.
    pub recovery_threshold: u32,
    /// Reminder interval while still down.
    pub repeat: Duration,
    /// Alerts firing within this window share one email.
    pub group_window: Duration,
}

/// `[smtp]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpConfig {
    pub host: String,
    /// Defaults by `tls`: 587 starttls, 465 tls, 25 none.
    pub port: u16,
    pub tls: SmtpTls,
    /// Set together with `password_file`, or neither is.
    pub username: Option<String>,
    pub password_file: Option<PathBuf>,
    /// Extra trust for a private relay.
    pub ca_file: Option<PathBuf>,
    /// Add the check of this relay's TLS ([`resolve::RELAY_CHECK`]).
    pub watch: bool,
}

/// How the SMTP connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS (required, not opportunistic).
    Starttls,
    /// TLS from the first byte (SMTPS).
    Tls,
    /// Clear text; only ever to a loopback host.
    None,
}

impl SmtpTls {
    /// The port this mode is conventionally served on.
    pub fn default_port(self) -> u16 {
        match self {
            SmtpTls::Starttls => 587,
            SmtpTls::Tls => 465,
            SmtpTls::None => 25,
        }
    }
}

/// `[report]`: the daily certificate report.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// Evaluated in `zone`.
    pub schedule: cron::Schedule,
    /// `timezone`: where the schedule runs and the times are shown; UTC
    /// by default.
    pub zone: crate::when::Zone,
    /// Defaults to `alerting.to`.
    pub to: Vec<Mailbox>,
}

/// `[history]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryConfig {
    /// Raw results (default 35 days).
    pub retention: Duration,
    /// Day rollups and the certificate timeline (default 400 days); never
    /// shorter than `retention`.
    pub rollup_retention: Duration,
}

impl HistoryConfig {
    /// What hour rollups are kept for: 92 days (the pages' longest
    /// response-time chart is 90 days), but never less than the raw
    /// results nor more than the day rollups.
    pub fn hour_rollup_retention(&self) -> Duration {
        const HOURS_KEPT: Duration = Duration::from_secs(92 * 86_400);
        HOURS_KEPT.max(self.retention).min(self.rollup_retention)
    }
}

/// `[replication]`: off-region copy of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `s3://bucket/prefix`; see [`Self::bucket`] and [`Self::prefix`].
    pub url: Url,
    /// S3-compatible endpoint; plain http only to a loopback host.
    pub endpoint: Option<Url>,
    pub region: Option<String>,
    /// Set together with `secret_access_key_file`, or neither is.
    pub access_key_id_file: Option<PathBuf>,
    pub secret_access_key_file: Option<PathBuf>,
    /// `None`: [`Addressing::default_for`] the endpoint.
    pub addressing: Option<Addressing>,
    /// Where the bucket's credentials come from.
    pub credentials: Credentials,
    pub interval: Duration,
}

/// `[replication] credentials`: where the bucket's keys come from. Never
/// the instance metadata service unless the operator says so: on a VM at
/// another provider, 169.254.169.254 may answer with someone else's role,
/// and a probe host reaching it at all is a surprise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credentials {
    /// `access_key_id_file` and `secret_access_key_file` (the default when
    /// they are set).
    Files,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and optionally
    /// `AWS_SESSION_TOKEN` from vigie's environment, nothing else (the
    /// default without key files).
    Environment,
    /// object_store's whole AWS chain: the environment, web identity, ECS,
    /// then the instance metadata service.
    Instance,
}

impl Credentials {
    /// Without `credentials`: the key files when given, else the
    /// environment only.
    pub fn default_for(has_key_files: bool) -> Credentials {
        match has_key_files {
            true => Credentials::Files,
            false => Credentials::Environment,
        }
    }
}

/// How requests name the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// `https://endpoint/bucket/key`.
    Path,
    /// `https://bucket.endpoint/key`.
    VirtualHost,
}

impl Addressing {
    /// Virtual-host for AWS itself (no endpoint), path style otherwise.
    pub fn default_for(endpoint: Option<&Url>) -> Addressing {
        match endpoint {
            None => Addressing::VirtualHost,
            Some(_) => Addressing::Path,
        }
    }
}

impl ReplicationConfig {
    /// The bucket: the URL's host (never empty after `load`).
    pub fn bucket(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// The key prefix inside the bucket, without leading or trailing `/`;
    /// may be empty.
    pub fn prefix(&self) -> &str {
        self.url.path().trim_matches('/')
    }
}

/// `[heartbeat]`: dead-man's switch at a third party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatConfig {
    pub url: Url,
    pub interval: Duration,
}

/// `[vantage]`: this vigie is one of several that watch the same checks
/// and agree, through the bucket, before paging (`docs/vantages.md`).
/// The bucket's endpoint, region and credentials are `[replication]`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VantageConfig {
    /// This vantage's name in the bucket and in mails.
    pub node: String,
    /// The other vantages, each with its public key; empty: this node
    /// pages alone.
    pub peers: Vec<VantagePeer>,
    /// This node's key: it signs the state and the claims it writes.
    pub signing_key: crate::signing::SigningKey,
    /// A peer's state whose probes are further ahead of this node's clock
    /// than this is refused (a clock, or a signer, gone wrong).
    pub max_clock_skew: Duration,
    /// The coordination bucket.
    pub bucket: String,
    /// Key prefix in the bucket, without a trailing `/` (`vantage`).
    pub prefix: String,
    pub publish_every: Duration,
    /// Live vantages that must judge a check down; `None`: a majority of
    /// those alive.
    pub quorum: Option<u32>,
    /// A peer whose state is older than this is dead.
    pub stale_after: Duration,
    /// One request to the coordination bucket, connect to last byte.
    pub request_timeout: Duration,
}

/// One entry of `[vantage] peers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VantagePeer {
    pub name: String,
    pub public_key: crate::signing::PublicKey,
}

/// One `[[maintenance]]` entry: a recurring quiet window.
#[derive(Debug, Clone)]
pub struct MaintenanceWindow {
    /// Check-name globs (`*` any run, `?` one character); at least one.
    pub checks: Vec<String>,
    /// When the window opens.
    pub schedule: cron::Schedule,
    /// How long it stays open.
    pub duration: Duration,
    /// Listed on the public status page while open or upcoming.
    pub public: bool,
}

/// `[status_page]`: what the public page at `/status` shows. It never
/// shows targets, URLs or failure details, whatever is set here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPageConfig {
    /// Serve `/status`, its feed and badges without a token.
    pub public: bool,
    /// The page's heading.
    pub title: String,
    /// The label whose value groups the checks (default `env`).
    pub groups: String,
    /// Check-name globs of the checks shown (default every check).
    pub checks: Vec<String>,
    /// Label keys shown beside a check's name (default none).
    pub public_labels: Vec<String>,
}

impl Default for StatusPageConfig {
    fn default() -> Self {
        StatusPageConfig {
            public: false,
            title: "Status".to_string(),
            groups: "env".to_string(),
            checks: vec!["*".to_string()],
            public_labels: Vec::new(),
        }
    }
}

impl StatusPageConfig {
    /// Whether the check called `name` is on the public page.
    pub fn shows(&self, name: &str) -> bool {
        self.checks.iter().any(|pattern| glob_match(pattern, name))
    }
}

/// One `[[announcement]]`: a notice shown at the top of `/status` from
/// `from` until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub title: String,
    /// Markdown.
    pub text: String,
    pub from: OffsetDateTime,
    pub until: OffsetDateTime,
}

impl Announcement {
    pub fn is_shown(&self, now: OffsetDateTime) -> bool {
        self.from <= now && now < self.until
    }
}

impl MaintenanceWindow {
    /// Whether the window applies to the check called `name`.
    pub fn covers(&self, name: &str) -> bool {
        self.checks.iter().any(|pattern| glob_match(pattern, name))
    }
}

impl Config {
    /// Every check, in config order, as `app::check_now` takes them.
    pub fn all_checks(&self) -> Vec<&Check> {
        self.checks.iter().map(|c| &**c).collect()
    }

    /// The checks named on a command line, in config order; all of them
    /// when `names` is empty. Unknown names are an error listing the known
    /// ones.
    pub fn select(&self, names: &[String]) -> Result<Vec<&Check>, String> {
        if names.is_empty() {
            return Ok(self.all_checks());
        }
        let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let known: BTreeSet<&str> = self.checks.iter().map(|c| c.name.as_str()).collect();
        let unknown: Vec<String> = wanted
            .difference(&known)
            .map(|n| format!("{n:?}"))
            .collect();
        if !unknown.is_empty() {
            let plural = if unknown.len() == 1 { "" } else { "s" };
            let known = match known.is_empty() {
                true => "no checks are defined".to_owned(),
                false => format!(
                    "known: {}",
                    known.into_iter().collect::<Vec<_>>().join(", ")
                ),
            };
            return Err(format!(
                "unknown check{plural} {} ({known})",
                unknown.join(", ")
            ));
        }
        Ok(self
            .checks
            .iter()
            .filter(|c| wanted.contains(c.name.as_str()))
            .map(|c| &**c)
            .collect())
    }
}

/// Loads `path` and the checks files of its `checks_dir`.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    match fs::read_to_string(path) {
        Ok(text) => load_str(path, &text),
        Err(e) => {
            let mut diag = Diagnostics::default();
            diag.file(0, path, format!("cannot read config file: {e}"));
            Err(diag.into_errors())
        }
    }
}

/// Upload checks name this vigie in their object keys: the replication
/// node when there is one (`s3://bucket/NODE`), which already tells one
/// vantage from another; else the host name, set when the check was read.
fn name_upload_node(checks: &mut [Check], replication: &ReplicationConfig) {
    let node = replication.url.path().trim_matches('/');
    if node.is_empty() {
        return;
    }
    for check in checks {
        if let crate::check::CheckKind::Upload(upload) = &mut check.kind {
            upload.node = resolve::key_segment(node);
        }
    }
}

/// Like [`load`] with the config text given; `path` still names the file
/// in messages and anchors relative paths, and the checks files are read
/// from disk.
pub fn load_str(path: &Path, text: &str) -> Result<Config, ConfigErrors> {
    load_str_at(path, text, SystemClock.now())
}

/// Like [`load_str`], as if read at `now`: a cron expression with no time
/// after `now` is an error (loading at the wall clock is [`load_str`]).
pub fn load_str_at(path: &Path, text: &str, now: OffsetDateTime) -> Result<Config, ConfigErrors> {
    let mut diag = Diagnostics::default();
    let src = Source::new(path, text.to_owned(), 0);
    let Some(raw) = decode::config(&src, &mut diag) else {
        // Not TOML at all: where the checks are and their default timeout
        // are unknown, so the checks are not read.
        return Err(diag.into_errors());
    };
    let mut config = resolve::config(&src, &raw, now, &mut diag);
    // A missing checks_dir was reported by `resolve`.
    if config.checks_dir.is_dir() {
        let defaults = resolve::CheckDefaults {
            timeout: config.default_timeout,
            acme_directory: config.acme_directory.clone(),
            credentials: config.credentials.clone(),
        };
        let (mut checks, skipped) =
            load_checks(path, &config.checks_dir, &defaults, now, &mut diag);
        if let Some(replication) = &config.replication {
            name_upload_node(&mut checks, replication);
        }
        if checks.is_empty() && !diag.has_errors() {
            no_checks(&src, &raw, &config.checks_dir, &skipped, &mut diag);
        }
        // The relay that carries vigie's own pages is watched like any
        // target: its certificate can expire unnoticed, since mail
        // servers keep accepting expired ones.
        if let Some(smtp) = &config.smtp {
            let acme_directory = config.acme_directory.as_ref();
            checks.extend(resolve::relay_check(
                smtp,
                config.default_timeout,
                acme_directory,
            ));
        }
        resolve::warn_unmatched(&src, &raw, &checks, &mut diag);
        config.checks = share(checks);
    }
    config.warnings = diag.take_warnings();
    diag.finish(config)
}

/// The checks, each behind its `Arc` (the scheduler shares them). Collected
/// in place, the vector of `Arc`s would keep the buffer of the `Check`s it
/// was collected from (744 bytes a check, 7 MiB at 10,000 checks, for the
/// daemon's whole run: heaptrack), so it is shrunk to its length.
fn share(checks: Vec<Check>) -> Vec<std::sync::Arc<Check>> {
    let mut shared: Vec<std::sync::Arc<Check>> =
        checks.into_iter().map(std::sync::Arc::new).collect();
    shared.shrink_to_fit();
    shared
}

/// Parses one checks file's text, as if it were the only one; for tests and
/// tools that need a [`Check`] without a config. `path` names the file in
/// messages and anchors `tls.ca_file`.
pub fn checks_from_str(
    path: &Path,
    text: &str,
    default_timeout: Duration,
) -> Result<Vec<Check>, ConfigErrors> {
    let mut diag = Diagnostics::default();
    let src = Source::new(path, text.to_owned(), 0);
    let defaults = resolve::CheckDefaults {
        timeout: default_timeout,
        acme_directory: None,
        credentials: CredentialDirs::from_env(credentials::DEFAULT_CREDENTIALS_DIR.into()),
    };
    let checks = match decode::checks(&src, &mut diag) {
        Some(raw) => resolve::checks(
            &src,
            &raw,
            &defaults,
            &mut resolve::Names::default(),
            SystemClock.now(),
            &mut diag,
        ),
        None => Vec::new(),
    };
    diag.finish(checks)
}

/// A vigie with nothing to check would say "OK" forever: refused, at
/// `checks_dir` when it is written, else on the config file.
fn no_checks(
    src: &Source,
    raw: &decode::RawConfig,
    dir: &Path,
    skipped: &[PathBuf],
    diag: &mut Diagnostics,
) {
    let mut message = format!(
        "no checks: {} holds no `[[check]]` in any *.toml file; write one there (e.g. {}/site.toml with a `[[check]]` table)",
        dir.display(),
        dir.display()
    );
    if !skipped.is_empty() {
        let names: Vec<String> = skipped
            .iter()
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        message.push_str(&format!(
            "; not read, for their names: {}",
            names.join(", ")
        ));
    }
    match raw.top.as_ref().and_then(|t| t.value.checks_dir.as_ref()) {
        Some(written) => diag.at(src, &written.span(), format!("`checks_dir`: {message}")),
        None => diag.file(0, &src.path, message),
    }
}

/// Reads every checks file in `dir`, reporting problems of all of them;
/// also the files skipped for their names (each warned of).
fn load_checks(
    config_path: &Path,
    dir: &Path,
    defaults: &resolve::CheckDefaults,
    now: OffsetDateTime,
    diag: &mut Diagnostics,
) -> (Vec<Check>, Vec<PathBuf>) {
    let (files, skipped) = match checks_files(dir) {
        Ok((files, skipped)) => {
            for file in &skipped {
                diag.warn_file(
                    0,
                    config_path,
                    format!(
                        "{} is skipped: only *.toml files in checks_dir are read",
                        file.display()
                    ),
                );
            }
            (files, skipped)
        }
        Err(e) => {
            diag.file(
                0,
                config_path,
                format!("cannot list checks_dir {}: {e}", dir.display()),
            );
            return (Vec::new(), Vec::new());
        }
    };
    let mut names = resolve::Names::default();
    let mut checks = Vec::new();
    for (i, file) in files.iter().enumerate() {
        // Rank 0 is the config file.
        let rank = i + 1;
        let text = match fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => {
                diag.file(rank, file, format!("cannot read checks file: {e}"));
                continue;
            }
        };
        let src = Source::new(file, text, rank);
        if let Some(raw) = decode::checks(&src, diag) {
            if raw.is_empty() {
                diag.warn_file(rank, file, "holds no `[[check]]`: nothing in it is checked");
            }
            checks.extend(resolve::checks(&src, &raw, defaults, &mut names, now, diag));
        }
    }
    (checks, skipped)
}

/// The `*.toml` files of `dir`, by name. Dotfiles are skipped: editors
/// leave `.#site.toml` lock files and `.site.toml.swp`-style siblings next
/// to the file being edited. Other files (`README.md`) are documentation.
/// The `*.toml` files of `dir` in name order, and the other files it
/// holds (`site.tml`, `site.toml.dpkg-old`), which are skipped and named
/// in a warning. Hidden files (an editor's swap file) and directories are
/// passed over in silence.
fn checks_files(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            skipped.push(path);
            continue;
        };
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        match name.ends_with(".toml") {
            true => files.push(path),
            false => skipped.push(path),
        }
    }
    files.sort();
    skipped.sort();
    Ok((files, skipped))
}

/// `*` matches any run of characters (including none), `?` exactly one;
/// everything else matches itself.
///
/// The alerter asks this of every firing check against every silence and
/// maintenance window once a second, so an ASCII name (check names are
/// `[a-z0-9._-]+`) is matched byte by byte without allocating: a
/// multi-byte character of the pattern never equals an ASCII byte, and `?`
/// then matches one byte, which is one character.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if name.is_ascii() {
        return glob_match_in(pattern.as_bytes(), name.as_bytes(), b'*', b'?');
    }
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    glob_match_in(&p, &n, '*', '?')
}

fn glob_match_in<T: Copy + PartialEq>(p: &[T], n: &[T], any_run: T, any_one: T) -> bool {
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was and what it had matched up to: on a mismatch
    // that star swallows one more character and matching resumes. Linear
    // backtracking suffices because a later star can absorb anything an
    // earlier one would have.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(&c) if c == any_run => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == any_one || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    pi = sp + 1;
                    ni = sn + 1;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == any_run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Cadence, CheckKind, DEFAULT_CRITICAL_DAYS};

    /// The least a config needs: someone to page.
    const PAGES_ONCALL: &str = "[alerting]\nto = [\"oncall@example.com\"]\n";
    const ONE_CHECK: &str =
        "[[check]]\nname = \"site\"\nkind = \"http\"\nurl = \"https://example.com/\"\n";

    fn messages(errors: &ConfigErrors) -> Vec<String> {
        errors.0.iter().map(ToString::to_string).collect()
    }

    fn dir_with_checks(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("checks")).unwrap();
        for (name, text) in files {
            fs::write(dir.path().join("checks").join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn a_config_with_only_a_recipient_gets_every_default() {
        let dir = dir_with_checks(&[("site.toml", ONE_CHECK)]);
        let path = dir.path().join("config.toml");
        let config = load_str(&path, PAGES_ONCALL).unwrap();
        assert_eq!(config.path, path);
        assert_eq!(config.state_dir, dir.path().join("state"));
        assert_eq!(config.checks_dir, dir.path().join("checks"));
        assert_eq!(config.concurrency, 64);
        assert_eq!(config.default_timeout, Duration::from_secs(10));
        assert_eq!(config.extra_ca_file, None);
        assert_eq!(config.api.listen, "127.0.0.1:9464".parse().unwrap());
        assert_eq!(config.api.token_file, None);
        assert!(config.connectivity.canaries.is_empty());
        assert!(config.alerting.enabled);
        assert_eq!(config.alerting.to[0].to_string(), "oncall@example.com");
        assert!(config.alerting.from.is_none());
        assert_eq!(config.alerting.failure_threshold, 2);
        assert_eq!(config.alerting.recovery_threshold, 2);
        assert_eq!(config.alerting.repeat, Duration::from_secs(4 * 3600));
        assert_eq!(config.alerting.group_window, Duration::from_secs(30));
        assert!(config.smtp.is_none());
        assert_eq!(config.report.schedule.to_string(), "0 0 7 * * *");
        assert_eq!(config.report.to, config.alerting.to);
        assert_eq!(config.history.retention, Duration::from_secs(35 * 86400));
        assert_eq!(
            config.history.rollup_retention,
            Duration::from_secs(400 * 86400)
        );
        assert_eq!(
            config.history.hour_rollup_retention(),
            Duration::from_secs(92 * 86400)
        );
        assert!(config.replication.is_none());
        assert!(config.heartbeat.is_none());
        assert!(config.maintenance.is_empty());
        assert_eq!(config.checks.len(), 1);
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }

    /// The loaded checks hold no room for the `Check`s they came from.
    #[test]
    fn the_shared_checks_keep_no_buffer_of_the_parsed_ones() {
        let text: String = (0..100)
            .map(|n| format!("[[check]]\nname = \"site-{n}\"\nkind = \"http\"\nurl = \"https://example.com/{n}\"\n"))
            .collect();
        let dir = dir_with_checks(&[("sites.toml", &text)]);
        let config = load_str(&dir.path().join("config.toml"), PAGES_ONCALL).unwrap();
        assert_eq!(config.checks.len(), 100);
        assert_eq!(config.checks.capacity(), 100);
    }

    #[test]
    fn a_config_that_would_page_nobody_is_refused() {
        let dir = dir_with_checks(&[("site.toml", ONE_CHECK)]);
        let path = dir.path().join("config.toml");
        let shown = path.display().to_string();
        let refused = |text: &str| messages(&load_str(&path, text).unwrap_err());
        assert_eq!(
            refused(""),
            [format!("{shown}:1:1: no [alerting] section: pages would go to nobody; add one and set `to = [\"oncall@example.com\"]` in [alerting], or `enabled = false` there to run without paging anyone")]
        );
        assert_eq!(
            refused("[alerting]\nfailure_threshold = 3\n"),
            [format!("{shown}:1:1: missing key `alerting.to`: pages would go to nobody; set `to = [\"oncall@example.com\"]` in [alerting], or `enabled = false` there to run without paging anyone")]
        );
        assert!(refused("[alerting]\nto = []\n")[0].contains("`alerting.to`: no recipient"));
        // The report defaults to [alerting] to: refused once, there.
        assert_eq!(refused("[alerting]\nto = []\n[report]\n").len(), 1);
        let report = refused(&format!("{PAGES_ONCALL}[report]\nto = []\n"));
        assert_eq!(
            report,
            [format!("{shown}:3:1: the daily report has no recipient: set `report.to`, or `[alerting] to`, which it defaults to")]
        );
        // Said outright, no recipient is fine, and nobody is paged.
        let quiet = load_str(&path, "[alerting]\nenabled = false\n").unwrap();
        assert!(!quiet.alerting.enabled);
        assert!(quiet.report.to.is_empty(), "no report either");
        assert!(!crate::alert::Policy::global(&quiet.alerting).page);
        let report_only = "[alerting]\nenabled = false\n[report]\n";
        assert!(refused(report_only)[0].contains("the daily report has no recipient"));
        let with_report = "[alerting]\nenabled = false\n[report]\nto = [\"team@example.com\"]\n";
        assert_eq!(load_str(&path, with_report).unwrap().report.to.len(), 1);
    }

    #[test]
    fn a_check_whose_own_recipients_are_empty_is_refused_unless_it_does_not_page() {
        let empty = format!("{ONE_CHECK}[check.alert]\nto = []\n");
        let dir = dir_with_checks(&[("site.toml", &empty)]);
        let path = dir.path().join("config.toml");
        let errors = messages(&load_str(&path, PAGES_ONCALL).unwrap_err());
        let file = dir.path().join("checks/site.toml").display().to_string();
        assert_eq!(
            errors,
            [format!("{file}:6:6: `alert.to`: an empty list pages nobody: leave it out to page `[alerting] to`, or set `alert.page = false`")]
        );
        let unpaged = format!("{empty}page = false\n");
        fs::write(dir.path().join("checks/site.toml"), unpaged).unwrap();
        assert!(load_str(&path, PAGES_ONCALL).is_ok());
    }

    #[test]
    fn no_checks_is_refused_and_files_that_are_not_read_are_named() {
        let dir = dir_with_checks(&[("site.tml", ONE_CHECK), ("notes.toml", "# later\n")]);
        let path = dir.path().join("config.toml");
        let checks = dir.path().join("checks");
        let errors = messages(&load_str(&path, PAGES_ONCALL).unwrap_err());
        assert_eq!(
            errors,
            [format!(
                "{}:1:1: no checks: {} holds no `[[check]]` in any *.toml file; write one there (e.g. {}/site.toml with a `[[check]]` table); not read, for their names: site.tml",
                path.display(),
                checks.display(),
                checks.display()
            )]
        );
        let written = format!("checks_dir = \"checks\"\n{PAGES_ONCALL}");
        let errors = messages(&load_str(&path, &written).unwrap_err());
        assert!(
            errors[0].starts_with(&format!("{}:1:14: `checks_dir`: no checks", path.display())),
            "{errors:?}"
        );

        fs::write(checks.join("site.toml"), ONE_CHECK).unwrap();
        let config = load_str(&path, PAGES_ONCALL).unwrap();
        let warnings: Vec<String> = config.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                format!(
                    "{}:1:1: {} is skipped: only *.toml files in checks_dir are read",
                    path.display(),
                    checks.join("site.tml").display()
                ),
                format!(
                    "{}:1:1: holds no `[[check]]`: nothing in it is checked",
                    checks.join("notes.toml").display()
                ),
            ]
        );
    }

    #[test]
    fn section_defaults() {
        let dir = dir_with_checks(&[("site.toml", ONE_CHECK)]);
        let text = r#"
            [alerting]
            to = ["oncall@example.com"]
            [smtp]
            host = "localhost"
            tls = "none"
            [replication]
            url = "s3://bucket/some/prefix/"
            credentials = "environment"
            [heartbeat]
            url = "https://hc-ping.example/uuid"
        "#;
        let config = load_str(&dir.path().join("config.toml"), text).unwrap();
        assert_eq!(
            config.report.to, config.alerting.to,
            "report.to defaults to alerting.to"
        );
        let smtp = config.smtp.unwrap();
        assert_eq!((smtp.tls, smtp.port), (SmtpTls::None, 25));
        let replication = config.replication.unwrap();
        assert_eq!(replication.bucket(), "bucket");
        assert_eq!(replication.prefix(), "some/prefix");
        assert_eq!(replication.interval, Duration::from_secs(300));
        assert_eq!(config.heartbeat.unwrap().interval, Duration::from_secs(60));
    }

    #[test]
    fn smtp_port_follows_tls_mode() {
        assert_eq!(SmtpTls::Starttls.default_port(), 587);
        assert_eq!(SmtpTls::Tls.default_port(), 465);
        assert_eq!(SmtpTls::None.default_port(), 25);
    }

    #[test]
    fn the_status_page_is_private_unless_asked_and_its_keys_resolve() {
        let dir = dir_with_checks(&[("site.toml", ONE_CHECK)]);
        let path = dir.path().join("config.toml");
        let config = load_str(&path, PAGES_ONCALL).unwrap();
        assert_eq!(config.status_page, StatusPageConfig::default());
        assert!(!config.status_page.public);
        let text = format!(
            "{PAGES_ONCALL}[status_page]\npublic = true\ntitle = \"Example\"\ngroups = \"tier\"\n\
             checks = [\"si*\"]\npublic_labels = [\"env\"]\n\
             [[announcement]]\ntitle = \"Move\"\ntext = \"We *move*.\"\n\
             from = \"2026-12-07T18:00:00Z\"\nuntil = \"2026-12-07T20:00:00+01:00\"\n"
        );
        let config = load_str(&path, &text).unwrap();
        assert!(config.status_page.public);
        assert_eq!(config.status_page.title, "Example");
        assert_eq!(config.status_page.groups, "tier");
        assert!(config.status_page.shows("site"));
        assert!(!config.status_page.shows("other"));
        assert_eq!(config.status_page.public_labels, ["env"]);
        let notice = &config.announcements[0];
        assert_eq!(notice.until - notice.from, time::Duration::hours(1));
        assert!(notice.is_shown(time::macros::datetime!(2026-12-07 18:30 UTC)));
        assert!(!notice.is_shown(time::macros::datetime!(2026-12-07 19:00 UTC)));
    }

    #[test]
    fn an_announcement_ending_before_it_begins_is_refused_at_its_key() {
        let dir = dir_with_checks(&[("site.toml", ONE_CHECK)]);
        let text = format!(
            "{PAGES_ONCALL}[[announcement]]\ntitle = \"Move\"\ntext = \"x\"\n\
             from = \"2026-12-07T18:00:00Z\"\nuntil = \"2026-12-07T17:00:00Z\"\n\
             [[announcement]]\ntitle = \"Later\"\ntext = \"x\"\nfrom = \"tomorrow\"\n"
        );
        let errors = load_str(&dir.path().join("config.toml"), &text).unwrap_err();
        let path = dir.path().join("config.toml").display().to_string();
        assert_eq!(
            messages(&errors),
            [
                format!("{path}:7:9: `announcement[0].until`: 2026-12-07T17:00:00Z is not after `from` (2026-12-07 18:00 UTC): the announcement would never show"),
                format!("{path}:8:1: missing key `announcement[1].until` (e.g. \"2026-12-07T20:00:00Z\")"),
                format!("{path}:11:8: `announcement[1].from`: \"tomorrow\" is not a time: write it as RFC 3339 with its offset, e.g. \"2026-12-07T18:00:00Z\""),
            ]
        );
    }

    #[test]
    fn a_status_page_pattern_matching_no_check_is_warned_of() {
        let dir = dir_with_checks(&[("site.toml", ONE_CHECK)]);
        let text =
            format!("{PAGES_ONCALL}[status_page]\npublic = true\nchecks = [\"site\", \"sitte\"]\n");
        let config = load_str(&dir.path().join("config.toml"), &text).unwrap();
        let warnings: Vec<String> = config.warnings.iter().map(ToString::to_string).collect();
        let path = dir.path().join("config.toml").display().to_string();
        assert_eq!(
            warnings,
            [format!("{path}:5:19: `status_page.checks[1]`: \"sitte\" matches no check, so it shows nothing on /status")]
        );
    }

    #[test]
    fn check_defaults() {
        let text = "[[check]]\nname = \"site\"\nkind = \"http\"\nurl = \"https://example.com/\"\n";
        let checks = checks_from_str(Path::new("site.toml"), text, Duration::from_secs(3)).unwrap();
        let check = &checks[0];
        assert!(matches!(check.every, Cadence::Every(d) if d == Duration::from_secs(60)));
        assert_eq!(
            check.timeout,
            Duration::from_secs(3),
            "the config's default_timeout"
        );
        assert_eq!(check.resolve, None);
        assert!(check.labels.is_empty());
        assert_eq!(check.tls.warn_days, None);
        assert_eq!(check.tls.critical_days, DEFAULT_CRITICAL_DAYS);
        let CheckKind::Http(http) = &check.kind else {
            panic!("an http check");
        };
        assert!(http.follow_redirects);
        assert!(http.expect.status.is_empty(), "empty = any 2xx");
    }

    #[test]
    fn checks_are_read_in_file_name_order_skipping_other_files() {
        let check = |name: &str| {
            format!("[[check]]\nname = \"{name}\"\nkind = \"http\"\nurl = \"https://{name}.example/\"\n")
        };
        let dir = dir_with_checks(&[
            ("b.toml", &check("b")),
            ("a.toml", &format!("{}{}", check("a2"), check("a1"))),
            ("README.md", "not toml"),
            (".#a.toml", "not toml either"),
        ]);
        let config = load_str(&dir.path().join("config.toml"), PAGES_ONCALL).unwrap();
        let names: Vec<_> = config.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a2", "a1", "b"]);
    }

    #[test]
    fn select_keeps_config_order_and_names_unknown_checks() {
        let dir = dir_with_checks(&[(
            "c.toml",
            "[[check]]\nname = \"one\"\nkind = \"http\"\nurl = \"https://a.example/\"\n\
             [[check]]\nname = \"two\"\nkind = \"http\"\nurl = \"https://b.example/\"\n",
        )]);
        let config = load_str(&dir.path().join("config.toml"), PAGES_ONCALL).unwrap();
        let all: Vec<_> = config
            .select(&[])
            .unwrap()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(all, ["one", "two"]);
        let picked = config.select(&["two".into(), "one".into()]).unwrap();
        assert_eq!(picked.len(), 2);
        assert_eq!(picked[0].name, "one");
        let err = config.select(&["three".into(), "one".into()]).unwrap_err();
        assert_eq!(err, "unknown check \"three\" (known: one, two)");
    }

    #[test]
    fn cron_expressions_must_fire_after_the_load_time() {
        let dir = dir_with_checks(&[(
            "c.toml",
            "[[check]]\nname = \"once\"\nkind = \"http\"\nurl = \"https://a.example/\"\n\
             schedule = \"0 0 9 1 6 * 2030\"\n",
        )]);
        let text = "[alerting]\nto = [\"oncall@example.com\"]\n\
                    [report]\nschedule = \"0 0 7 1 6 * 2030\"\n\
                    [[maintenance]]\nchecks = [\"*\"]\nschedule = \"0 0 8 1 6 * 2030\"\nduration = \"1h\"\n";
        let path = dir.path().join("config.toml");
        let before = time::macros::datetime!(2030-06-01 0:00 UTC);
        assert!(load_str_at(&path, text, before).is_ok());
        let after = time::macros::datetime!(2030-06-02 0:00 UTC);
        let errors = load_str_at(&path, text, after).unwrap_err();
        let messages: Vec<&str> = errors.0.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`report.schedule`: \"0 0 7 1 6 * 2030\" never fires: it has no time after now (its last was 2030-06-01 07:00:00 UTC)",
                "`maintenance[0].schedule`: \"0 0 8 1 6 * 2030\" never fires: it has no time after now (its last was 2030-06-01 08:00:00 UTC)",
                "`schedule`: \"0 0 9 1 6 * 2030\" never fires: it has no time after now (its last was 2030-06-01 09:00:00 UTC)",
            ]
        );
    }

    #[test]
    fn missing_config_file() {
        let err = load(Path::new("/nonexistent/vigie/config.toml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/nonexistent/vigie/config.toml:1:1: cannot read config file: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn globs() {
        assert!(glob_match("staging-*", "staging-api"));
        assert!(glob_match("staging-*", "staging-"));
        assert!(!glob_match("staging-*", "prod-api"));
        assert!(glob_match("*-api", "staging-api"));
        assert!(glob_match("s?te", "site"));
        assert!(!glob_match("s?te", "ste"));
        assert!(glob_match("*a*b*", "xxaxxbxx"));
        assert!(!glob_match("*a*b", "xxaxxbxx"));
        assert!(glob_match("site", "site"));
        assert!(!glob_match("site", "sites"));
        assert!(glob_match("*", ""));
        // Multi-byte characters: one `?` is one character on either path.
        assert!(glob_match("caf?", "café"));
        assert!(!glob_match("caf??", "café"));
        assert!(!glob_match("café-*", "cafe-api"));
        assert!(glob_match("é*", "éa"));
    }
}
