//! Stage two: raw values -> the typed [`Config`] and [`Check`]s.
//!
//! Owns the meaning of every key: defaults, ranges, URL schemes, files that
//! must exist, the loopback-only rules, duplicate check names. Every
//! problem is reported into the [`Diagnostics`] and resolution carries on
//! with a fallback value, so one run shows them all; the partial result is
//! thrown away by `load` when anything was reported.
//!
//! Structural problems (syntax, unknown keys, wrong types) were reported by
//! `decode.rs`; a key dropped there is listed in [`Decoded::broken`] and is
//! not reported again here as missing.
//!
//! This file resolves `config.toml`; `check.rs` the `[[check]]` entries
//! (`keys.rs` which kind owns which key, `dns.rs` (with `dnssec.rs`),
//! `domain.rs`, `tls_kinds.rs` and `upload.rs` the keys of those kinds,
//! `browser.rs` the
//! origins and header names the `cors` and `upload` kinds share); `cx.rs`
//! the shared turning of one string into one typed value (duration, cron,
//! URL, regex, mailbox, existing file) with its message.

mod browser;
mod check;
mod cx;
mod dns;
mod dnssec;
mod domain;
mod keys;
mod notify;
mod status_page;
mod tls_kinds;
mod upload;

pub(crate) use status_page::warn_unmatched;
pub(crate) use upload::key_segment;

use std::fs;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use time::OffsetDateTime;
use toml::Spanned;
use url::{Host, Url};

use super::credentials::{CredentialDirs, DEFAULT_CREDENTIALS_DIR};
use super::decode::{Decoded, RawConfig};
use super::error::Diagnostics;
use super::limits::{
    DEFAULT_CA_CACHE_SIZE, MAX_CA_CACHE_SIZE, MAX_EVERY, MAX_GROUP_WINDOW, MAX_HEARTBEAT_INTERVAL,
    MAX_HOLD, MAX_REPEAT, MAX_REPLICATION_INTERVAL, MAX_REQUEST_TIMEOUT, MAX_RETENTION,
    MAX_SESSION_TTL, MAX_SOCKET_PATH, MAX_TIMEOUT, MIN_CA_CACHE_SIZE, MIN_INTERVAL, MIN_POSITIVE,
    MIN_REMOTE_TOKEN_BYTES, MIN_REQUEST_TIMEOUT,
};
use super::raw::{
    DurationText, RawAlerting, RawApi, RawConnectivity, RawHeartbeat, RawHistory, RawMaintenance,
    RawPeer, RawPeerKey, RawReplication, RawReport, RawSmtp, RawVantage,
};
use super::source::Source;
use super::{
    Addressing, AlertingConfig, ApiConfig, ApiTls, Config, ConnectivityConfig, Credentials,
    HeartbeatConfig, HistoryConfig, MaintenanceWindow, ReplicationConfig, ReportConfig, SmtpConfig,
    SmtpTls, VantageConfig, VantagePeer,
};
#[cfg(doc)]
use crate::check::Check;
use crate::signing::{PublicKey, SigningKey};
use check::is_name_char;
use cx::Cx;

pub(crate) use check::{checks, CheckDefaults, Names};
pub(crate) use tls_kinds::relay_check;
pub use tls_kinds::RELAY_CHECK;

const DEFAULT_STATE_DIR: &str = "state";
const DEFAULT_CHECKS_DIR: &str = "checks";
/// Probes in flight: each is one short TCP + TLS connection, so 64 is far
/// below any file-descriptor limit and far above what a few dozen checks
/// need.
const DEFAULT_CONCURRENCY: usize = 64;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Loopback only: the API must never be reachable from elsewhere unless the
/// user writes so.
const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9464);
/// A request head and a body of a few KiB: ages on any real network.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A working day: a browser logged in in the morning is asked again the
/// next day, and a cookie copied off a machine stops working by then.
const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
const DEFAULT_THRESHOLD: u32 = 2;
/// Reminder while down: a few per working day, not a flood.
const DEFAULT_REPEAT: Duration = Duration::from_secs(4 * 3600);
const DEFAULT_GROUP_WINDOW: Duration = Duration::from_secs(30);
const DEFAULT_REPORT_SCHEDULE: &str = "0 0 7 * * *";
/// Raw results: long enough to look into last month's incidents result by
/// result; the rollups keep the long view.
const DEFAULT_RETENTION: Duration = Duration::from_secs(35 * 86400);
/// Rollups and the certificate timeline: more than a year, so that last
/// year's renewal of a certificate is still on its timeline.
const DEFAULT_ROLLUP_RETENTION: Duration = Duration::from_secs(400 * 86400);
const DEFAULT_REPLICATION_INTERVAL: Duration = Duration::from_secs(5 * 60);
const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);
/// How often a vantage publishes its state: the bulk of its bucket
/// requests (360 an hour), and the most a peer's view of it lags.
const DEFAULT_PUBLISH_EVERY: Duration = Duration::from_secs(10);
/// Six missed publications: a peer restarting (a deploy, a reboot) is not
/// paged as silent, one that is gone is within a minute.
const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(60);
/// A peer's probes may be this far ahead of this node's clock (NTP keeps
/// them within milliseconds; this is for a clock gone wrong).
const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(30);
/// `[connectivity] every`: a canary round a minute when nothing asks sooner.
const DEFAULT_CANARY_EVERY: Duration = Duration::from_secs(60);
/// `[vantage] request_timeout`: a bucket that hangs costs a round this
/// long, so it stays well under the default `publish_every`.
const DEFAULT_VANTAGE_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_PUBLISH_EVERY: Duration = Duration::from_secs(600);
const MAX_STALE_AFTER: Duration = Duration::from_secs(86_400);
/// Vantages in one fleet: each reads every peer's state, so the cost grows
/// with the square of it; a handful of regions is the point.
const MAX_VANTAGES: usize = 16;

/// Resolves `config.toml`. Always returns a config (with defaults where a
/// value was wrong) so the checks can still be validated; `checks` is left
/// empty for the caller to fill.
/// Cron expressions must fire after `now`.
pub(crate) fn config(
    src: &Source,
    raw: &RawConfig,
    now: OffsetDateTime,
    diag: &mut Diagnostics,
) -> Config {
    let base = base_dir(&src.path);
    let top = raw.top.as_ref().map(|d| &d.value);
    // Read before any section: every `*_credential` key looks names up in it.
    let credentials =
        CredentialDirs::from_env(match top.and_then(|t| t.credentials_dir.as_ref()) {
            Some(dir) => base.join(dir.get_ref()),
            None => PathBuf::from(DEFAULT_CREDENTIALS_DIR),
        });
    let mut cx = Cx::new(src, diag, base, now, &credentials);
    let state_dir = match top.and_then(|t| t.state_dir.as_ref()) {
        Some(dir) => cx.path(dir.get_ref()),
        None => base.join(DEFAULT_STATE_DIR),
    };
    let checks_dir = checks_dir(&mut cx, top.and_then(|t| t.checks_dir.as_ref()));
    let concurrency = top
        .and_then(|t| t.concurrency.as_ref())
        .map_or(DEFAULT_CONCURRENCY, |c| concurrency(&mut cx, c));
    let default_timeout = cx.duration_or(
        "default_timeout",
        top.and_then(|t| t.default_timeout.as_ref()),
        DEFAULT_TIMEOUT,
        MIN_POSITIVE,
        MAX_TIMEOUT,
    );
    let extra_ca_file = top
        .and_then(|t| t.extra_ca_file.as_ref())
        .and_then(|f| cx.file("extra_ca_file", f));
    let acme_directory = top
        .and_then(|t| t.acme_directory.as_ref())
        .and_then(|url| cx.web_url("acme_directory", url));
    let rdap_bootstrap = top
        .and_then(|t| t.rdap_bootstrap.as_ref())
        .and_then(|url| cx.web_url("rdap_bootstrap", url))
        .unwrap_or_else(default_rdap_bootstrap);
    let ca_cache_size = top
        .and_then(|t| t.ca_cache_size.as_ref())
        .and_then(|size| {
            cx.size_within("ca_cache_size", size, MIN_CA_CACHE_SIZE, MAX_CA_CACHE_SIZE)
        })
        .unwrap_or(DEFAULT_CA_CACHE_SIZE);

    let alerting = alerting(&mut cx.section("alerting"), raw.alerting.as_ref());
    let replication = raw
        .replication
        .as_ref()
        .and_then(|d| replication(&mut cx.section("replication"), d));
    let report = report(&mut cx.section("report"), raw.report.as_ref(), &alerting);
    Config {
        path: src.path.clone(),
        state_dir,
        checks_dir,
        concurrency,
        default_timeout,
        extra_ca_file,
        acme_directory,
        ca_cache_size,
        rdap_bootstrap,
        credentials: credentials.clone(),
        api: api(&mut cx.section("api"), raw.api.as_ref()),
        connectivity: connectivity(&mut cx.section("connectivity"), raw.connectivity.as_ref()),
        alerting,
        smtp: raw
            .smtp
            .as_ref()
            .and_then(|d| smtp(&mut cx.section("smtp"), d)),
        report,
        history: history(&mut cx.section("history"), raw.history.as_ref()),
        vantage: raw
            .vantage
            .as_ref()
            .and_then(|d| vantage(&mut cx.section("vantage"), d, replication.as_ref())),
        replication,
        heartbeat: raw
            .heartbeat
            .as_ref()
            .and_then(|d| heartbeat(&mut cx.section("heartbeat"), d)),
        maintenance: raw
            .maintenance
            .iter()
            .enumerate()
            .filter_map(|(i, d)| maintenance(&mut cx.section(&format!("maintenance[{i}]")), d))
            .collect(),
        notify: notify::notify(&mut cx, &raw.notify, &raw.route),
        status_page: status_page::status_page(
            &mut cx.section("status_page"),
            raw.status_page.as_ref(),
        ),
        announcements: raw
            .announcement
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                status_page::announcement(&mut cx.section(&format!("announcement[{i}]")), d)
            })
            .collect(),
        checks: Vec::new(),
        warnings: Vec::new(),
    }
}

/// IANA's RDAP bootstrap for domain names.
fn default_rdap_bootstrap() -> Url {
    // Invariant: a constant URL.
    Url::parse(crate::check::IANA_RDAP_BOOTSTRAP).expect("IANA's bootstrap URL parses")
}

/// The directory relative paths in `file` are resolved against. A bare
/// `config.toml` has the empty parent, which joins as the current
/// directory.
fn base_dir(file: &Path) -> &Path {
    file.parent().unwrap_or(Path::new(""))
}

/// The checks directory must exist: an empty or mistyped path would
/// otherwise mean a daemon that silently watches nothing.
fn checks_dir(cx: &mut Cx<'_>, raw: Option<&Spanned<String>>) -> PathBuf {
    let dir = cx.path(raw.map_or(DEFAULT_CHECKS_DIR, |d| d.get_ref()));
    let problem = match fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => return dir,
        Ok(_) => format!("{} is not a directory", dir.display()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            format!("directory {} does not exist", dir.display())
        }
        Err(e) => format!("cannot access directory {}: {e}", dir.display()),
    };
    match raw {
        Some(raw) => cx.error(&raw.span(), "checks_dir", problem),
        // Nothing in the file to point at: the start of the file, and the
        // key named so the user knows what to add.
        None => {
            let message = format!("`checks_dir` (default \"{DEFAULT_CHECKS_DIR}\"): {problem}");
            cx.report(&(0..0), message);
        }
    }
    dir
}

/// `concurrency = 0` would never run a probe.
fn concurrency(cx: &mut Cx<'_>, raw: &Spanned<u64>) -> usize {
    match usize::try_from(*raw.get_ref()) {
        Ok(n) if n >= 1 => n,
        _ => {
            cx.error(&raw.span(), "concurrency", "must be at least 1");
            DEFAULT_CONCURRENCY
        }
    }
}

/// `[api]`: loopback by default; the token file must exist. Listening
/// anywhere else publishes every target's name, URL and certificate to
/// whoever can reach the port and carries the token over the network, so
/// that needs a token of [`MIN_REMOTE_TOKEN_BYTES`] and TLS.
fn api(cx: &mut Cx<'_>, raw: Option<&Decoded<RawApi>>) -> ApiConfig {
    let raw = raw.map(|d| &d.value);
    let listen = match raw.and_then(|r| r.listen.as_ref()) {
        None => DEFAULT_LISTEN,
        Some(listen) => listen.get_ref().parse().unwrap_or_else(|_| {
            let message = format!(
                "{:?} is not an address and port, e.g. \"127.0.0.1:9464\"",
                listen.get_ref()
            );
            cx.error(&listen.span(), "listen", message);
            DEFAULT_LISTEN
        }),
    };
    let file = |cx: &mut Cx<'_>, key: &str, value: Option<&Spanned<String>>| {
        value.and_then(|f| cx.file(key, f))
    };
    let token = raw.and_then(|r| r.token_file.as_ref().or(r.token_credential.as_ref()));
    let token_file = cx.secret(
        "token",
        raw.and_then(|r| r.token_file.as_ref()),
        raw.and_then(|r| r.token_credential.as_ref()),
    );
    let cert_file = raw.and_then(|r| r.tls_cert_file.as_ref());
    let key_given = secret_given(
        "tls_key",
        raw.and_then(|r| r.tls_key_file.as_ref()),
        raw.and_then(|r| r.tls_key_credential.as_ref()),
    );
    cx.both_or_neither(("tls_cert_file", cert_file), (&key_given.0, key_given.1));
    let tls = match (
        file(cx, "tls_cert_file", cert_file),
        cx.secret(
            "tls_key",
            raw.and_then(|r| r.tls_key_file.as_ref()),
            raw.and_then(|r| r.tls_key_credential.as_ref()),
        ),
    ) {
        (Some(cert_file), Some(key_file)) => Some(ApiTls {
            cert_file,
            key_file,
        }),
        _ => None,
    };
    let ca_file = file(cx, "ca_file", raw.and_then(|r| r.ca_file.as_ref()));
    if let Some(spanned) = raw.and_then(|r| r.listen.as_ref()) {
        if !listen.ip().is_loopback() {
            remote_api_rules(
                cx,
                spanned,
                token,
                token_file.as_deref(),
                cert_file.is_some(),
            );
        }
    }
    let hosts = raw
        .and_then(|r| r.hosts.as_deref())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter_map(|(i, host)| api_host(cx, &format!("hosts[{i}]"), host))
        .collect();
    let request_timeout = cx.duration_or(
        "request_timeout",
        raw.and_then(|r| r.request_timeout.as_ref()),
        DEFAULT_REQUEST_TIMEOUT,
        MIN_REQUEST_TIMEOUT,
        MAX_REQUEST_TIMEOUT,
    );
    let session_ttl = cx.duration_or(
        "session_ttl",
        raw.and_then(|r| r.session_ttl.as_ref()),
        DEFAULT_SESSION_TTL,
        MIN_POSITIVE,
        MAX_SESSION_TTL,
    );
    let socket = raw
        .and_then(|r| r.socket.as_ref())
        .and_then(|s| api_socket(cx, s));
    let public_url = raw
        .and_then(|r| r.public_url.as_ref())
        .and_then(|u| cx.web_url("public_url", u));
    ApiConfig {
        listen,
        token_file,
        tls,
        ca_file,
        hosts,
        request_timeout,
        session_ttl,
        socket,
        public_url,
    }
}

/// `[api] socket`: a path a Unix socket can be bound at (the kernel takes
/// at most 107 bytes), whose directory exists.
fn api_socket(cx: &mut Cx<'_>, raw: &Spanned<String>) -> Option<PathBuf> {
    let path = cx.path(raw.get_ref());
    let len = path.as_os_str().len();
    if raw.get_ref().is_empty() || len > MAX_SOCKET_PATH {
        let message = format!(
            "{} is {len} bytes; a socket path has 1 to {MAX_SOCKET_PATH}: pick a shorter one",
            path.display()
        );
        cx.error(&raw.span(), "socket", message);
        return None;
    }
    if !path
        .parent()
        .is_some_and(|d| d.as_os_str().is_empty() || d.is_dir())
    {
        let message = format!(
            "the directory of {} does not exist; create it or pick another place",
            path.display()
        );
        cx.error(&raw.span(), "socket", message);
        return None;
    }
    Some(path)
}

/// One of `[api] hosts`: a DNS name or an IP address as a `Host` header
/// carries it, without scheme or port; kept lowercase without a trailing
/// dot, the form the API compares.
fn api_host(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>) -> Option<String> {
    let text = value
        .get_ref()
        .trim()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let unbracketed = text.trim_start_matches('[').trim_end_matches(']');
    let is_ip = unbracketed.parse::<IpAddr>().is_ok();
    let is_name = !text.is_empty()
        && !text.starts_with(['.', '-'])
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    if is_ip {
        return Some(unbracketed.to_string());
    }
    if is_name {
        return Some(text);
    }
    let message = format!(
        "{:?} is not a host name: a DNS name or an IP address, without scheme or port (e.g. \"vigie.example.com\")",
        value.get_ref()
    );
    cx.error(&value.span(), key, message);
    None
}

/// Which of `{stem}_file` and `{stem}_credential` gives a secret, for the
/// rules that pair it with another key: the key as written and its value,
/// or, when neither is given, both names (`password_file`/`password_credential`)
/// for the message that asks for one.
fn secret_given<'v>(
    stem: &str,
    file: Option<&'v Spanned<String>>,
    credential: Option<&'v Spanned<String>>,
) -> (String, Option<&'v Spanned<String>>) {
    match (file, credential) {
        (Some(file), _) => (format!("{stem}_file"), Some(file)),
        (None, Some(name)) => (format!("{stem}_credential"), Some(name)),
        (None, None) => (format!("{stem}_file`/`{stem}_credential"), None),
    }
}

/// A `listen` that is not loopback: a token long enough not to be guessed,
/// and TLS so that it does not cross the network in clear.
fn remote_api_rules(
    cx: &mut Cx<'_>,
    listen: &Spanned<String>,
    token: Option<&Spanned<String>>,
    token_file: Option<&Path>,
    has_tls: bool,
) {
    let shown = listen.get_ref();
    match (token, token_file) {
        (None, _) => {
            let message = format!(
                "{shown} is not a loopback address: set `api.token_file` or `api.token_credential` (at least {MIN_REMOTE_TOKEN_BYTES} bytes, e.g. `openssl rand -hex 32`) so that every endpoint but /healthz needs a bearer token"
            );
            cx.error(&listen.span(), "listen", message);
        }
        (Some(spanned), Some(path)) => match fs::read_to_string(path) {
            Ok(token) if token.trim().len() >= MIN_REMOTE_TOKEN_BYTES => {}
            Ok(token) => {
                let message = format!(
                    "{} holds a token of {} bytes; with `listen` = {shown} (not loopback) it needs at least {MIN_REMOTE_TOKEN_BYTES} (e.g. `openssl rand -hex 32 > {}`)",
                    path.display(),
                    token.trim().len(),
                    path.display()
                );
                cx.error(&spanned.span(), "token_file", message);
            }
            Err(e) => {
                let message = format!("cannot read {}: {e}", path.display());
                cx.error(&spanned.span(), "token_file", message);
            }
        },
        // Missing file: already reported.
        (Some(_), None) => {}
    }
    if !has_tls {
        let message = format!(
            "{shown} is not a loopback address: set `api.tls_cert_file` and `api.tls_key_file` so that the token and the history do not cross the network in clear"
        );
        cx.error(&listen.span(), "listen", message);
    }
}

/// `[connectivity]`: canaries are http(s) URLs.
fn connectivity(cx: &mut Cx<'_>, raw: Option<&Decoded<RawConnectivity>>) -> ConnectivityConfig {
    let canaries = raw
        .and_then(|d| d.value.canaries.as_deref())
        .unwrap_or_default();
    let every = cx.duration_or(
        "every",
        raw.and_then(|d| d.value.every.as_ref()),
        DEFAULT_CANARY_EVERY,
        MIN_INTERVAL,
        MAX_EVERY,
    );
    ConnectivityConfig {
        canaries: canaries
            .iter()
            .enumerate()
            .filter_map(|(i, url)| cx.web_url(&format!("canaries[{i}]"), url))
            .collect(),
        every,
    }
}

/// `[alerting]`: recipients, thresholds and timings.
fn alerting(cx: &mut Cx<'_>, decoded: Option<&Decoded<RawAlerting>>) -> AlertingConfig {
    let raw = decoded.map(|d| &d.value);
    let enabled = raw
        .and_then(|r| r.enabled.as_ref())
        .is_none_or(|e| *e.get_ref());
    let to = cx.mailboxes("to", raw.and_then(|r| r.to.as_deref()));
    if enabled && to.is_empty() {
        recipient_missing(cx, decoded);
    }
    AlertingConfig {
        enabled,
        to,
        from: raw
            .and_then(|r| r.from.as_ref())
            .and_then(|from| cx.mailbox("from", from)),
        failure_threshold: threshold(
            cx,
            "failure_threshold",
            raw.and_then(|r| r.failure_threshold.as_ref()),
        ),
        recovery_threshold: threshold(
            cx,
            "recovery_threshold",
            raw.and_then(|r| r.recovery_threshold.as_ref()),
        ),
        repeat: cx.duration_or(
            "repeat",
            raw.and_then(|r| r.repeat.as_ref()),
            DEFAULT_REPEAT,
            MIN_INTERVAL,
            MAX_REPEAT,
        ),
        // Zero is fine: no grouping, one email per alert.
        group_window: cx.duration_or(
            "group_window",
            raw.and_then(|r| r.group_window.as_ref()),
            DEFAULT_GROUP_WINDOW,
            Duration::ZERO,
            MAX_GROUP_WINDOW,
        ),
    }
}

/// Pages with nobody to page: refused, at `to` when it is an empty list,
/// at `[alerting]` when it lacks `to`, on the file when there is no
/// `[alerting]` at all. A `to` that did not decode was reported already.
fn recipient_missing(cx: &mut Cx<'_>, decoded: Option<&Decoded<RawAlerting>>) {
    const FIX: &str = "set `to = [\"oncall@example.com\"]` in [alerting], or `enabled = false` there to run without paging anyone";
    match decoded {
        Some(d) if d.broken.contains("to") => {}
        Some(d) => match &d.value.to {
            // Entries that are not mailboxes were reported one by one.
            Some(to) if !to.is_empty() => {}
            Some(_) => {
                let span = d.span.clone();
                cx.error(
                    &span,
                    "to",
                    format!("no recipient: pages would go to nobody; {FIX}"),
                );
            }
            None => {
                let span = d.span.clone();
                cx.report(
                    &span,
                    format!("missing key `alerting.to`: pages would go to nobody; {FIX}"),
                );
            }
        },
        None => cx.file_error(format!(
            "no [alerting] section: pages would go to nobody; add one and {FIX}"
        )),
    }
}

/// A count of consecutive probes: zero would flip state without any probe.
fn threshold(cx: &mut Cx<'_>, key: &str, value: Option<&Spanned<u32>>) -> u32 {
    match value {
        None => DEFAULT_THRESHOLD,
        Some(v) if *v.get_ref() >= 1 => *v.get_ref(),
        Some(v) => {
            cx.error(&v.span(), key, "must be at least 1");
            DEFAULT_THRESHOLD
        }
    }
}

/// `[smtp]`: `host` is required; the port follows the TLS mode unless set;
/// credentials come as a pair, the password from a file.
fn smtp(cx: &mut Cx<'_>, d: &Decoded<RawSmtp>) -> Option<SmtpConfig> {
    let raw = &d.value;
    let host = cx
        .required(d, "host", raw.host.as_ref(), "")
        .and_then(|host| {
            if host.get_ref().trim().is_empty() {
                cx.error(&host.span(), "host", "must not be empty");
                return None;
            }
            Some(host)
        });
    let tls = match raw.tls.as_ref() {
        None => SmtpTls::Starttls,
        Some(tls) => smtp_tls(cx, tls, host),
    };
    let port = match raw.port.as_ref() {
        None => tls.default_port(),
        Some(port) if *port.get_ref() == 0 => {
            cx.error(&port.span(), "port", "must be from 1 to 65535");
            tls.default_port()
        }
        Some(port) => *port.get_ref(),
    };
    let password = secret_given(
        "password",
        raw.password_file.as_ref(),
        raw.password_credential.as_ref(),
    );
    cx.both_or_neither(
        ("username", raw.username.as_ref()),
        (&password.0, password.1),
    );
    Some(SmtpConfig {
        host: host?.get_ref().clone(),
        port,
        tls,
        username: raw.username.as_ref().map(|u| u.get_ref().clone()),
        password_file: cx.secret(
            "password",
            raw.password_file.as_ref(),
            raw.password_credential.as_ref(),
        ),
        ca_file: raw.ca_file.as_ref().and_then(|f| cx.file("ca_file", f)),
        watch: raw.watch.as_ref().is_none_or(|w| *w.get_ref()),
    })
}

/// `tls = "none"` sends the password and every alert in clear text, so it
/// is only accepted to a relay on the same machine.
fn smtp_tls(cx: &mut Cx<'_>, tls: &Spanned<String>, host: Option<&Spanned<String>>) -> SmtpTls {
    let mode = match tls.get_ref().as_str() {
        "starttls" => SmtpTls::Starttls,
        "tls" => SmtpTls::Tls,
        "none" => SmtpTls::None,
        other => {
            let message =
                format!("unknown mode {other:?} (expected \"starttls\", \"tls\" or \"none\")");
            cx.error(&tls.span(), "tls", message);
            return SmtpTls::Starttls;
        }
    };
    if let (SmtpTls::None, Some(host)) = (mode, host) {
        if !is_loopback_name(host.get_ref()) {
            let message = format!(
                "\"none\" (clear text) is only allowed to a loopback host, not {:?}; use \"starttls\" or \"tls\"",
                host.get_ref()
            );
            cx.error(&tls.span(), "tls", message);
        }
    }
    mode
}

/// `[report]`: its recipients default to the alert recipients.
fn report(
    cx: &mut Cx<'_>,
    decoded: Option<&Decoded<RawReport>>,
    alerting: &AlertingConfig,
) -> ReportConfig {
    let raw = decoded.map(|d| &d.value);
    let schedule = raw
        .and_then(|r| r.schedule.as_ref())
        .and_then(|s| cx.cron("schedule", s))
        .unwrap_or_else(default_report_schedule);
    let to = match raw.and_then(|r| r.to.as_deref()) {
        Some(to) => cx.mailboxes("to", Some(to)),
        None => alerting.to.clone(),
    };
    // A written [report] that mails nobody is a mistake; without one, an
    // empty list only follows `[alerting] enabled = false`, and the report
    // is simply off. An empty `[alerting] to` it defaults to was refused
    // there already.
    if let Some(d) = decoded.filter(|d| to.is_empty() && !d.broken.contains("to")) {
        let own = d.value.to.as_ref();
        let refused_there = own.is_none() && alerting.enabled;
        if own.is_none_or(Vec::is_empty) && !refused_there {
            let span = d.span.clone();
            cx.report(
                &span,
                "the daily report has no recipient: set `report.to`, or `[alerting] to`, which it defaults to"
                    .to_string(),
            );
        }
    }
    let zone = raw
        .and_then(|r| r.timezone.as_ref())
        .and_then(|tz| timezone(cx, tz))
        .unwrap_or_default();
    ReportConfig { schedule, zone, to }
}

/// `[report] timezone`: an IANA name ("Europe/Paris"), as the time zone
/// database spells it.
fn timezone(cx: &mut Cx<'_>, raw: &Spanned<String>) -> Option<crate::when::Zone> {
    match raw.get_ref().parse::<chrono_tz::Tz>() {
        Ok(tz) => Some(crate::when::Zone::named(tz)),
        Err(_) => {
            let message = format!(
                "{:?} is not a time zone of the IANA database: write a name such as \"Europe/Paris\", \"America/New_York\" or \"UTC\"",
                raw.get_ref()
            );
            cx.error(&raw.span(), "timezone", message);
            None
        }
    }
}

fn default_report_schedule() -> cron::Schedule {
    // Invariant: a literal this file owns, parsed by a unit test below.
    cron::Schedule::from_str(DEFAULT_REPORT_SCHEDULE)
        .expect("DEFAULT_REPORT_SCHEDULE is valid cron")
}

/// `[history]`: the raw results' retention and the rollups', which must
/// keep at least as long (a rollup outliving its results is the point; a
/// result outliving its rollup would make the pages disagree with the
/// history).
fn history(cx: &mut Cx<'_>, raw: Option<&Decoded<RawHistory>>) -> HistoryConfig {
    let retention_raw = raw.and_then(|d| d.value.retention.as_ref());
    let rollup_raw = raw.and_then(|d| d.value.rollup_retention.as_ref());
    let retention = cx.duration_or(
        "retention",
        retention_raw,
        DEFAULT_RETENTION,
        MIN_INTERVAL,
        MAX_RETENTION,
    );
    let rollup_retention = cx.duration_or(
        "rollup_retention",
        rollup_raw,
        DEFAULT_ROLLUP_RETENTION,
        MIN_INTERVAL,
        MAX_RETENTION,
    );
    if rollup_retention < retention {
        // As written, or the default in whole days ("35d", where humantime
        // would print months of 30.44 days).
        let shown = |written: Option<&Spanned<DurationText>>, value: Duration| match written {
            Some(text) => format!("{:?}", text.get_ref().0),
            None if value.as_secs() % 86_400 == 0 => {
                format!("\"{}d\", the default", value.as_secs() / 86_400)
            }
            None => format!("{}, the default", humantime::format_duration(value)),
        };
        let why = "rollups must be kept at least as long as the results they sum";
        // Reported at the key that was written (the rollups' if both were).
        match (rollup_raw, retention_raw) {
            (Some(at), _) => {
                let message = format!(
                    "{} is shorter than `history.retention` ({}): {why}",
                    shown(rollup_raw, rollup_retention),
                    shown(retention_raw, retention)
                );
                cx.error(&at.span(), "rollup_retention", message);
            }
            (None, Some(at)) => {
                let message = format!(
                    "{} is longer than `history.rollup_retention` ({}): {why}; set `rollup_retention` too",
                    shown(retention_raw, retention),
                    shown(rollup_raw, rollup_retention)
                );
                cx.error(&at.span(), "retention", message);
            }
            (None, None) => {}
        }
        return HistoryConfig {
            retention,
            rollup_retention: retention,
        };
    }
    HistoryConfig {
        retention,
        rollup_retention,
    }
}

/// `[replication]`: an `s3://bucket/prefix` URL, an optional endpoint, and
/// the key pair as files, both or neither.
fn replication(cx: &mut Cx<'_>, d: &Decoded<RawReplication>) -> Option<ReplicationConfig> {
    let raw = &d.value;
    let url = cx
        .required(d, "url", raw.url.as_ref(), "")
        .and_then(|url| bucket_url(cx, url));
    // No endpoint means AWS S3 itself, found from the bucket and region.
    let endpoint = raw.endpoint.as_ref().and_then(|e| {
        let url = cx.web_url("endpoint", e)?;
        // Credentials and history travel in clear over plain http; fine for
        // a test server on this machine, not across a network.
        if url.scheme() == "http" && !url.host().is_some_and(|h| is_loopback_host(&h)) {
            cx.error(
                &e.span(),
                "endpoint",
                "plain http is only allowed to a loopback host; use https",
            );
            return None;
        }
        Some(url)
    });
    let region = raw.region.as_ref().and_then(|r| {
        if r.get_ref().trim().is_empty() {
            cx.error(
                &r.span(),
                "region",
                "must not be empty (leave it out for the default)",
            );
            return None;
        }
        Some(r.get_ref().clone())
    });
    let key_id = secret_given(
        "access_key_id",
        raw.access_key_id_file.as_ref(),
        raw.access_key_id_credential.as_ref(),
    );
    let secret = secret_given(
        "secret_access_key",
        raw.secret_access_key_file.as_ref(),
        raw.secret_access_key_credential.as_ref(),
    );
    cx.both_or_neither((&key_id.0, key_id.1), (&secret.0, secret.1));
    let access_key_id_file = cx.secret(
        "access_key_id",
        raw.access_key_id_file.as_ref(),
        raw.access_key_id_credential.as_ref(),
    );
    let secret_access_key_file = cx.secret(
        "secret_access_key",
        raw.secret_access_key_file.as_ref(),
        raw.secret_access_key_credential.as_ref(),
    );
    let addressing = raw.addressing.as_ref().and_then(|a| match a.get_ref().as_str() {
        "path" => Some(Addressing::Path),
        "virtual_host" => Some(Addressing::VirtualHost),
        other => {
            let message = format!(
                "unknown addressing {other:?} (expected \"path\" for https://endpoint/bucket/key or \"virtual_host\" for https://bucket.endpoint/key)"
            );
            cx.error(&a.span(), "addressing", message);
            None
        }
    });
    let has_files = key_id.1.is_some() || secret.1.is_some();
    // Without keys nor a word on where they come from, replication would
    // start, fail every upload and leave the history on one disk.
    if !has_files && raw.credentials.is_none() {
        cx.report(
            &d.span,
            "`[replication]` has no credentials: set `access_key_id_file` and `secret_access_key_file` (or their `*_credential` names), or `credentials = \"environment\"` (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or `\"instance\"` (the cloud's metadata service) to say where they come from".to_string(),
        );
    }
    let credentials = raw
        .credentials
        .as_ref()
        .map_or(Credentials::default_for(has_files), |c| {
            credentials(cx, c, has_files)
        });
    let interval = cx.duration_or(
        "interval",
        raw.interval.as_ref(),
        DEFAULT_REPLICATION_INTERVAL,
        MIN_INTERVAL,
        MAX_REPLICATION_INTERVAL,
    );
    Some(ReplicationConfig {
        url: url?,
        endpoint,
        region,
        access_key_id_file,
        secret_access_key_file,
        addressing,
        credentials,
        interval,
    })
}

/// `[replication] credentials`: "files" needs the key files, the others
/// exclude them (two sources of keys would leave the operator guessing
/// which one signs).
fn credentials(cx: &mut Cx<'_>, raw: &Spanned<String>, has_files: bool) -> Credentials {
    let chosen = match raw.get_ref().as_str() {
        "files" => Credentials::Files,
        "environment" => Credentials::Environment,
        "instance" => Credentials::Instance,
        other => {
            let message = format!(
                "unknown source {other:?} (expected \"files\" for access_key_id_file and secret_access_key_file, \"environment\" for AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \"instance\" for the cloud's instance metadata service)"
            );
            cx.error(&raw.span(), "credentials", message);
            return Credentials::default_for(has_files);
        }
    };
    match (chosen, has_files) {
        (Credentials::Files, false) => cx.error(
            &raw.span(),
            "credentials",
            "\"files\" needs `replication.access_key_id_file` and `replication.secret_access_key_file`",
        ),
        (Credentials::Environment | Credentials::Instance, true) => {
            let message = format!(
                "{:?} with key files set: remove the key files, or this key (the files are then used)",
                raw.get_ref()
            );
            cx.error(&raw.span(), "credentials", message);
        }
        _ => {}
    }
    chosen
}

/// `s3://bucket/prefix`.
/// The bucket is the host and the prefix the path, which the `url` crate
/// parses like any URL; only the scheme and a non-empty bucket need saying.
fn bucket_url(cx: &mut Cx<'_>, raw: &Spanned<String>) -> Option<Url> {
    let url = cx.url("url", raw)?;
    if url.scheme() != "s3" {
        let message = format!(
            "must be an s3:// URL (s3://bucket/prefix), not {:?}",
            url.scheme()
        );
        cx.error(&raw.span(), "url", message);
        return None;
    }
    if url.host_str().is_none_or(str::is_empty) {
        cx.error(&raw.span(), "url", "has no bucket (s3://bucket/prefix)");
        return None;
    }
    Some(url)
}

/// `[vantage]`: names, the coordination bucket (by default the replication
/// bucket, prefix `vantage`), and the timing. The bucket is reached with
/// `[replication]`'s endpoint and keys, so that section is required.
fn vantage(
    cx: &mut Cx<'_>,
    d: &Decoded<RawVantage>,
    replication: Option<&ReplicationConfig>,
) -> Option<VantageConfig> {
    let raw = &d.value;
    let Some(replication) = replication else {
        cx.report(
            &d.span,
            "[vantage] needs [replication]: the vantages coordinate through a bucket reached with its endpoint, region and credentials".to_string(),
        );
        return None;
    };
    let default_node = replication.url.path().trim_matches('/').to_string();
    let node = match &raw.node {
        Some(node) => vantage_name(cx, "node", node),
        None if is_vantage_name(&default_node) => Some(default_node),
        None => {
            let message = format!(
                "missing key `vantage.node`: the replication node {default_node:?} is not a valid vantage name (use only a-z, 0-9, '.', '_' and '-')"
            );
            cx.report(&d.span, message);
            None
        }
    };
    let mut peers: Vec<VantagePeer> = Vec::new();
    for entry in raw.peers.iter().flat_map(|p| p.get_ref()) {
        let Some(peer) = vantage_peer(cx, entry) else {
            continue;
        };
        let name = &peer.name;
        if Some(name) == node.as_ref() {
            let message = format!("{name:?} is this vantage's own node; list only the others");
            cx.error(&entry.span(), "peers", message);
        } else if peers.iter().any(|p| p.name == *name) {
            cx.error(&entry.span(), "peers", format!("{name:?} is listed twice"));
        } else {
            peers.push(peer);
        }
    }
    if peers.len() + 1 > MAX_VANTAGES {
        if let Some(p) = &raw.peers {
            let message = format!(
                "{} vantages is more than the maximum of {MAX_VANTAGES}",
                peers.len() + 1
            );
            cx.error(&p.span(), "peers", message);
        }
    }
    let (bucket, prefix) = match &raw.bucket {
        Some(url) => {
            let parsed = bucket_url(cx, url).map(|u| {
                let bucket = u.host_str().unwrap_or_default().to_string();
                (bucket, u.path().trim_matches('/').to_string())
            });
            match parsed {
                Some((_, prefix)) if prefix.is_empty() => {
                    cx.error(
                        &url.span(),
                        "bucket",
                        "names no prefix: write s3://BUCKET/PREFIX (the vantages' objects go under PREFIX/)",
                    );
                    (None, String::new())
                }
                Some((bucket, prefix)) => (Some(bucket), prefix),
                None => (None, String::new()),
            }
        }
        None => (
            replication.url.host_str().map(str::to_string),
            "vantage".to_string(),
        ),
    };
    let publish_every = cx.duration_or(
        "publish_every",
        raw.publish_every.as_ref(),
        DEFAULT_PUBLISH_EVERY,
        MIN_INTERVAL,
        MAX_PUBLISH_EVERY,
    );
    let stale_after = cx.duration_or(
        "stale_after",
        raw.stale_after.as_ref(),
        DEFAULT_STALE_AFTER,
        MIN_INTERVAL,
        MAX_STALE_AFTER,
    );
    if stale_after < publish_every.saturating_mul(2) {
        let span = raw
            .stale_after
            .as_ref()
            .map_or(d.span.clone(), |s| s.span());
        let message = format!(
            "{} is less than two publications ({} each): a live peer would be called dead between two of them",
            humantime::format_duration(stale_after),
            humantime::format_duration(publish_every)
        );
        cx.error(&span, "stale_after", message);
    }
    let vantages = peers.len() as u64 + 1;
    let quorum = raw.quorum.as_ref().and_then(|q| match *q.get_ref() {
        n if n >= 1 && n <= vantages => Some(n as u32),
        n => {
            let message = format!(
                "{n} is not between 1 and the number of vantages ({vantages}: this node and {} peer(s))",
                peers.len()
            );
            cx.error(&q.span(), "quorum", message);
            None
        }
    });
    let signing_key = signing_key(cx, d);
    let max_clock_skew = cx.duration_or(
        "max_clock_skew",
        raw.max_clock_skew.as_ref(),
        DEFAULT_MAX_CLOCK_SKEW,
        Duration::from_secs(1),
        MAX_STALE_AFTER,
    );
    let request_timeout = cx.duration_or(
        "request_timeout",
        raw.request_timeout.as_ref(),
        DEFAULT_VANTAGE_REQUEST_TIMEOUT,
        MIN_REQUEST_TIMEOUT,
        MAX_REQUEST_TIMEOUT,
    );
    Some(VantageConfig {
        node: node?,
        peers,
        signing_key: signing_key?,
        max_clock_skew,
        bucket: bucket?,
        prefix,
        publish_every,
        quorum,
        stale_after,
        request_timeout,
    })
}

/// How keys are made, for every message about a missing or bad one.
const KEYGEN_HELP: &str = "make each node's key with `vigie vantage keygen NODE --out DIR`, set `signing_key_file` to DIR/NODE.key on that node, and paste the line it prints into the other nodes' `peers`";

/// `signing_key_file`, read and parsed: a node that cannot sign cannot
/// coordinate, better said by `validate` than at the first publication.
fn signing_key(cx: &mut Cx<'_>, d: &Decoded<RawVantage>) -> Option<SigningKey> {
    let raw = &d.value;
    let given = raw
        .signing_key_file
        .as_ref()
        .or(raw.signing_key_credential.as_ref());
    let Some(value) = given else {
        let message =
            format!("missing key `vantage.signing_key_file` (or `vantage.signing_key_credential`): this node signs its state and claims; {KEYGEN_HELP}");
        cx.report(&d.span, message);
        return None;
    };
    let path = cx.secret(
        "signing_key",
        raw.signing_key_file.as_ref(),
        raw.signing_key_credential.as_ref(),
    )?;
    let problem = match fs::read_to_string(&path) {
        Ok(text) => match SigningKey::from_pem(&text) {
            Ok(key) => return Some(key),
            Err(why) => format!("{} {why}", path.display()),
        },
        Err(e) => format!("cannot read {}: {e}", path.display()),
    };
    let key = match raw.signing_key_file {
        Some(_) => "signing_key_file",
        None => "signing_key_credential",
    };
    cx.error(&value.span(), key, problem);
    None
}

/// One `peers` entry: `{ name = "fra", public_key = "ed25519:..." }`.
fn vantage_peer(cx: &mut Cx<'_>, value: &Spanned<RawPeer>) -> Option<VantagePeer> {
    let (name, key) = match value.get_ref() {
        RawPeer::Bare(name) => {
            let message = format!(
                "{name:?} names a peer without its public key: write {{ name = {name:?}, public_key = \"ed25519:BASE64\" }}; {KEYGEN_HELP}"
            );
            cx.error(&value.span(), "peers", message);
            return None;
        }
        RawPeer::Keyed(RawPeerKey { name, public_key }) => (name, public_key),
    };
    let name = vantage_name(cx, "peers", &Spanned::new(value.span(), name.clone()))?;
    match PublicKey::parse(key) {
        Ok(public_key) => Some(VantagePeer { name, public_key }),
        Err(why) => {
            cx.error(&value.span(), "peers", format!("{name:?}: {why}"));
            None
        }
    }
}

fn is_vantage_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(is_name_char)
}

/// A vantage's name: it is a key segment in the bucket and a word in mails.
fn vantage_name(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>) -> Option<String> {
    let name = value.get_ref();
    if is_vantage_name(name) {
        return Some(name.clone());
    }
    let message =
        format!("{name:?} is not a valid vantage name (1 to 64 of a-z, 0-9, '.', '_' and '-')");
    cx.error(&value.span(), key, message);
    None
}

/// `[heartbeat]`: the URL to ping, and how often.
fn heartbeat(cx: &mut Cx<'_>, d: &Decoded<RawHeartbeat>) -> Option<HeartbeatConfig> {
    let raw = &d.value;
    let url = cx
        .required(d, "url", raw.url.as_ref(), "")
        .and_then(|url| cx.web_url("url", url));
    let interval = cx.duration_or(
        "interval",
        raw.interval.as_ref(),
        DEFAULT_HEARTBEAT_INTERVAL,
        MIN_INTERVAL,
        MAX_HEARTBEAT_INTERVAL,
    );
    Some(HeartbeatConfig {
        url: url?,
        interval,
    })
}

/// One `[[maintenance]]`: every key is required.
fn maintenance(cx: &mut Cx<'_>, d: &Decoded<RawMaintenance>) -> Option<MaintenanceWindow> {
    let raw = &d.value;
    let checks = cx
        .required(d, "checks", raw.checks.as_ref(), "")
        .and_then(|patterns| {
            if patterns.get_ref().is_empty() {
                let message = "must name at least one check (globs such as \"staging-*\")";
                cx.error(&patterns.span(), "checks", message);
                return None;
            }
            let patterns = patterns.get_ref();
            let valid = patterns
                .iter()
                .enumerate()
                .all(|(i, p)| check_pattern(cx, i, p));
            valid.then(|| patterns.iter().map(|p| p.get_ref().clone()).collect())
        });
    let schedule = cx
        .required(d, "schedule", raw.schedule.as_ref(), "")
        .and_then(|s| cx.cron("schedule", s));
    let duration = cx
        .required(d, "duration", raw.duration.as_ref(), "")
        .and_then(|dur| cx.duration_within("duration", dur, MIN_INTERVAL, MAX_HOLD));
    Some(MaintenanceWindow {
        checks: checks?,
        schedule: schedule?,
        duration: duration?,
        public: raw.public.as_ref().is_some_and(|p| *p.get_ref()),
    })
}

/// A pattern that can match no valid check name is a typo.
fn check_pattern(cx: &mut Cx<'_>, index: usize, pattern: &Spanned<String>) -> bool {
    let ok = !pattern.get_ref().is_empty()
        && pattern
            .get_ref()
            .chars()
            .all(|c| is_name_char(c) || c == '*' || c == '?');
    if !ok {
        let message = format!(
            "{:?} can match no check name (names use a-z, 0-9, '.', '_', '-'; globs add '*' and '?')",
            pattern.get_ref()
        );
        cx.error(&pattern.span(), &format!("checks[{index}]"), message);
    }
    ok
}

/// `localhost`, or an IP literal that is loopback (`127.0.0.0/8`, `::1`).
fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || literal.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// [`is_loopback_name`] for an already-parsed URL host.
fn is_loopback_host(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(name) => is_loopback_name(name),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_report_schedule_parses() {
        assert_eq!(
            default_report_schedule().to_string(),
            DEFAULT_REPORT_SCHEDULE
        );
    }

    #[test]
    fn loopback_names() {
        for host in [
            "localhost",
            "LOCALHOST",
            "localhost.",
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
        ] {
            assert!(is_loopback_name(host), "{host}");
        }
        for host in [
            "smtp.example.com",
            "10.0.0.1",
            "localhost.example.com",
            "::2",
            "",
        ] {
            assert!(!is_loopback_name(host), "{host}");
        }
    }
}
