//! Stage one: a serde mirror of `config.toml` and `checks/*.toml`.
//!
//! Every struct denies unknown fields, so a misspelt key is an error rather
//! than a silently ignored setting. Values stay as written (strings for
//! durations, URLs, regexes, cron expressions, mailboxes) and are wrapped in
//! [`Spanned`] so `resolve` can point at them; turning them into typed
//! values is `resolve`'s job, not this file's.
//!
//! Every key is optional here, including required ones: serde would stop at
//! the first missing field, while `resolve` can report each missing key next
//! to the other problems of the same table.
//!
//! These structs are never deserialized from a whole file in one go (see
//! `decode.rs`): each section, `[[maintenance]]` entry and `[[check]]` entry
//! is decoded on its own, so one bad entry does not hide the others.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// The keys of `config.toml` that are not sections.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTop {
    pub state_dir: Option<Spanned<String>>,
    pub checks_dir: Option<Spanned<String>>,
    pub concurrency: Option<Spanned<u64>>,
    pub default_timeout: Option<Spanned<DurationText>>,
    pub extra_ca_file: Option<Spanned<String>>,
    /// Where `*_credential` names are read from outside systemd.
    pub credentials_dir: Option<Spanned<String>>,
    /// The ACME directory every check asks for renewal information (ARI).
    pub acme_directory: Option<Spanned<String>>,
    /// The bytes the CRL and ARI caches hold together ("64 MiB").
    pub ca_cache_size: Option<Spanned<String>>,
    /// Where the RDAP bootstrap of domain checks is refreshed from.
    pub rdap_bootstrap: Option<Spanned<String>>,
    // The sections are decoded one by one, elsewhere. Naming them here makes
    // them known keys (and lists them in the "known keys" of an error), so
    // a misspelt section is reported like any unknown key.
    #[serde(rename = "api")]
    _api: Option<IgnoredAny>,
    #[serde(rename = "connectivity")]
    _connectivity: Option<IgnoredAny>,
    #[serde(rename = "alerting")]
    _alerting: Option<IgnoredAny>,
    #[serde(rename = "smtp")]
    _smtp: Option<IgnoredAny>,
    #[serde(rename = "report")]
    _report: Option<IgnoredAny>,
    #[serde(rename = "history")]
    _history: Option<IgnoredAny>,
    #[serde(rename = "replication")]
    _replication: Option<IgnoredAny>,
    #[serde(rename = "heartbeat")]
    _heartbeat: Option<IgnoredAny>,
    #[serde(rename = "vantage")]
    _vantage: Option<IgnoredAny>,
    #[serde(rename = "maintenance")]
    _maintenance: Option<IgnoredAny>,
    #[serde(rename = "notify")]
    _notify: Option<IgnoredAny>,
    #[serde(rename = "route")]
    _route: Option<IgnoredAny>,
    #[serde(rename = "status_page")]
    _status_page: Option<IgnoredAny>,
    #[serde(rename = "announcement")]
    _announcement: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApi {
    pub listen: Option<Spanned<String>>,
    pub token_file: Option<Spanned<String>>,
    pub token_credential: Option<Spanned<String>>,
    pub tls_cert_file: Option<Spanned<String>>,
    pub tls_key_file: Option<Spanned<String>>,
    pub tls_key_credential: Option<Spanned<String>>,
    pub ca_file: Option<Spanned<String>>,
    pub hosts: Option<Vec<Spanned<String>>>,
    pub request_timeout: Option<Spanned<DurationText>>,
    pub session_ttl: Option<Spanned<DurationText>>,
    pub socket: Option<Spanned<String>>,
    pub public_url: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConnectivity {
    pub canaries: Option<Vec<Spanned<String>>>,
    pub every: Option<Spanned<DurationText>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAlerting {
    pub enabled: Option<Spanned<bool>>,
    pub to: Option<Vec<Spanned<String>>>,
    pub from: Option<Spanned<String>>,
    pub failure_threshold: Option<Spanned<u32>>,
    pub recovery_threshold: Option<Spanned<u32>>,
    pub repeat: Option<Spanned<DurationText>>,
    pub group_window: Option<Spanned<DurationText>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSmtp {
    pub host: Option<Spanned<String>>,
    pub port: Option<Spanned<u16>>,
    pub tls: Option<Spanned<String>>,
    pub username: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub password_credential: Option<Spanned<String>>,
    pub ca_file: Option<Spanned<String>>,
    pub watch: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReport {
    pub schedule: Option<Spanned<CronText>>,
    pub to: Option<Vec<Spanned<String>>>,
    pub timezone: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHistory {
    pub retention: Option<Spanned<DurationText>>,
    pub rollup_retention: Option<Spanned<DurationText>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReplication {
    pub url: Option<Spanned<String>>,
    pub endpoint: Option<Spanned<String>>,
    pub region: Option<Spanned<String>>,
    pub access_key_id_file: Option<Spanned<String>>,
    pub access_key_id_credential: Option<Spanned<String>>,
    pub secret_access_key_file: Option<Spanned<String>>,
    pub secret_access_key_credential: Option<Spanned<String>>,
    pub addressing: Option<Spanned<String>>,
    pub credentials: Option<Spanned<String>>,
    pub interval: Option<Spanned<DurationText>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVantage {
    pub node: Option<Spanned<String>>,
    pub peers: Option<Spanned<Vec<Spanned<RawPeer>>>>,
    pub bucket: Option<Spanned<String>>,
    pub publish_every: Option<Spanned<DurationText>>,
    pub quorum: Option<Spanned<u64>>,
    pub stale_after: Option<Spanned<DurationText>>,
    pub signing_key_file: Option<Spanned<String>>,
    pub signing_key_credential: Option<Spanned<String>>,
    pub max_clock_skew: Option<Spanned<DurationText>>,
    pub request_timeout: Option<Spanned<DurationText>>,
}

/// One entry of `[vantage] peers`: `{ name, public_key }`, or a bare name
/// (what vigie took before vantages signed; `resolve` refuses it and says
/// how to make keys).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawPeer {
    Bare(String),
    Keyed(RawPeerKey),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPeerKey {
    pub name: String,
    pub public_key: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHeartbeat {
    pub url: Option<Spanned<String>>,
    pub interval: Option<Spanned<DurationText>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMaintenance {
    pub checks: Option<Spanned<Vec<Spanned<String>>>>,
    pub schedule: Option<Spanned<CronText>>,
    pub duration: Option<Spanned<DurationText>>,
    /// Shown at the top of the public status page while upcoming.
    pub public: Option<Spanned<bool>>,
}

/// `[status_page]`: the public, redacted page.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStatusPage {
    pub public: Option<Spanned<bool>>,
    pub title: Option<Spanned<String>>,
    pub groups: Option<Spanned<String>>,
    pub checks: Option<Spanned<Vec<Spanned<String>>>>,
    pub public_labels: Option<Spanned<Vec<Spanned<String>>>>,
}

/// One `[[announcement]]`: a notice at the top of the public page.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAnnouncement {
    pub title: Option<Spanned<String>>,
    pub text: Option<Spanned<String>>,
    pub from: Option<Spanned<String>>,
    pub until: Option<Spanned<String>>,
}

/// One `[[notify]]` entry: a push channel. The keys of every kind live in
/// this one struct, for the reason given on [`RawCheck`]; `resolve`
/// rejects the keys that do not belong to the channel's kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotify {
    pub name: Option<Spanned<String>>,
    pub kind: Option<Spanned<String>>,
    pub url: Option<Spanned<String>>,
    pub allow_private: Option<Spanned<bool>>,
    pub timeout: Option<Spanned<DurationText>>,
    pub rate_limit: Option<Spanned<u32>>,
    pub min_backoff: Option<Spanned<DurationText>>,
    pub max_backoff: Option<Spanned<DurationText>>,
    pub give_up_after: Option<Spanned<DurationText>>,
    pub breaker_pause: Option<Spanned<DurationText>>,
    // kind = "webhook"
    pub secret_file: Option<Spanned<String>>,
    pub secret_credential: Option<Spanned<String>>,
    pub headers: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    // kind = "ntfy"
    pub token_file: Option<Spanned<String>>,
    pub token_credential: Option<Spanned<String>>,
    pub user: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub password_credential: Option<Spanned<String>>,
    pub priority: Option<BTreeMap<Spanned<String>, Spanned<u8>>>,
    /// `env` label value -> event -> priority.
    pub priority_env: Option<BTreeMap<Spanned<String>, SpannedMap<u8>>>,
    pub tags: Option<Vec<Spanned<String>>>,
    // kind = "pagerduty"
    pub routing_key_file: Option<Spanned<String>>,
    pub routing_key_credential: Option<Spanned<String>>,
}

/// A table of keys to values, each with its place.
pub(crate) type SpannedMap<T> = BTreeMap<Spanned<String>, Spanned<T>>;

/// One `[[route]]` entry: which channels the events of matching checks go to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    #[serde(rename = "match")]
    pub equal: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    pub match_re: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    pub events: Option<Vec<Spanned<String>>>,
    pub notify: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(rename = "continue")]
    pub and_continue: Option<Spanned<bool>>,
}

/// The top level of a checks file: only `[[check]]` entries.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChecksFile {
    // Decoded entry by entry elsewhere; named here to be the one known key.
    #[serde(rename = "check")]
    _check: Option<IgnoredAny>,
}

/// One `[[check]]` entry.
///
/// The keys of every kind live in this one struct: serde cannot combine
/// `deny_unknown_fields` with a kind-tagged enum or `flatten`, and spans do
/// not survive serde's buffering of tagged enums. When a second kind
/// arrives, `resolve` rejects the keys that do not belong to the check's
/// kind (e.g. `expect` on a cors check).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheck {
    pub name: Option<Spanned<String>>,
    pub kind: Option<Spanned<String>>,
    pub url: Option<Spanned<String>>,
    pub every: Option<Spanned<DurationText>>,
    pub schedule: Option<Spanned<CronText>>,
    pub timeout: Option<Spanned<DurationText>>,
    pub resolve: Option<Spanned<String>>,
    pub labels: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    pub tls: Option<RawTls>,
    pub alert: Option<RawCheckAlert>,
    // kind = "http"
    pub follow_redirects: Option<Spanned<bool>>,
    pub redirect_to_private: Option<Spanned<bool>>,
    pub redact_headers: Option<Vec<Spanned<String>>>,
    pub expect: Option<RawExpect>,
    // kind = "cors"
    pub origin: Option<Spanned<String>>,
    pub method: Option<Spanned<String>>,
    pub request_headers: Option<Vec<Spanned<String>>>,
    pub deny_origins: Option<Vec<Spanned<String>>>,
    pub allow_any_origin: Option<Spanned<bool>>,
    pub credentials: Option<Spanned<bool>>,
    pub min_max_age: Option<Spanned<DurationText>>,
    pub expose_headers: Option<Vec<Spanned<String>>>,
    // kind = "dns"
    pub query: Option<Spanned<String>>,
    pub resolvers: Option<Vec<Spanned<String>>>,
    pub dns: Option<RawDns>,
    // kind = "upload" (with `origin` and `expose_headers` of cors)
    pub region: Option<Spanned<String>>,
    pub key_prefix: Option<Spanned<String>>,
    pub content_type: Option<Spanned<String>>,
    pub access_key_id_file: Option<Spanned<String>>,
    pub access_key_id_credential: Option<Spanned<String>>,
    pub secret_access_key_file: Option<Spanned<String>>,
    pub secret_access_key_credential: Option<Spanned<String>>,
    // kind = "tls"
    pub address: Option<Spanned<String>>,
    pub server_name: Option<Spanned<String>>,
    // kind = "smtp"
    pub require_starttls: Option<Spanned<bool>>,
    // kind = "domain"
    pub domain: Option<Spanned<String>>,
    pub rdap_url: Option<Spanned<String>>,
    pub rdap: Option<RawRdap>,
}

/// `[check.expect]` of an http or a dns check (one table for both, for the
/// reason given on [`RawCheck`]; `resolve` rejects the other kind's keys).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExpect {
    pub status: Option<Vec<Spanned<u16>>>,
    pub body_contains: Option<Spanned<String>>,
    pub body_regex: Option<Spanned<String>>,
    pub max_response_time: Option<Spanned<DurationText>>,
    /// Header name -> regex on its value.
    pub headers: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    // kind = "dns"
    pub cname: Option<Spanned<String>>,
    pub caa_issue: Option<Vec<Spanned<String>>>,
    pub caa_issuewild: Option<Vec<Spanned<String>>>,
    pub caa_accounturi: Option<Spanned<String>>,
    pub caa_validationmethods: Option<Spanned<Vec<Spanned<String>>>>,
    pub a: Option<Vec<Spanned<String>>>,
    pub aaaa: Option<Vec<Spanned<String>>>,
    pub txt_regex: Option<Spanned<String>>,
    pub dnssec: Option<Spanned<String>>,
    pub exists: Option<Spanned<bool>>,
}

/// `[check.dns]`: how a dns check's answers are validated.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDns {
    pub dnssec: Option<Spanned<bool>>,
    pub trust_anchor_file: Option<Spanned<String>>,
}

/// `[check.alert]`: this check's exceptions to `[alerting]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheckAlert {
    pub failure_threshold: Option<Spanned<u32>>,
    pub recovery_threshold: Option<Spanned<u32>>,
    pub repeat: Option<Spanned<DurationText>>,
    pub to: Option<Spanned<Vec<Spanned<String>>>>,
    pub page: Option<Spanned<bool>>,
}

/// `[check.tls]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub warn_days: Option<Spanned<u32>>,
    pub critical_days: Option<Spanned<u32>>,
    pub issuer: Option<Spanned<String>>,
    pub ca_file: Option<Spanned<String>>,
    pub ari: Option<Spanned<bool>>,
    pub acme_directory: Option<Spanned<String>>,
    pub ari_grace: Option<Spanned<DurationText>>,
    pub revocation: Option<Spanned<bool>>,
    pub require_pq: Option<Spanned<bool>>,
}

/// `[check.rdap]` of a domain check.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRdap {
    pub warn_days: Option<Spanned<u32>>,
    pub critical_days: Option<Spanned<u32>>,
    pub query_every: Option<Spanned<DurationText>>,
}

/// Declares a string newtype whose only purpose is a better "expected ..."
/// in type errors: `every = 30` then reads "expected a duration such as
/// "30s", found an integer 30" instead of "expected a string".
macro_rules! text_type {
    ($(#[$doc:meta])* $name:ident, $expecting:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(crate) struct $name(pub String);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Expecting;
                impl Visitor<'_> for Expecting {
                    type Value = String;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
                        Ok(v.to_owned())
                    }
                }
                deserializer.deserialize_str(Expecting).map($name)
            }
        }
    };
}

text_type!(
    /// A humantime duration as written ("30s", "4h", "400d").
    DurationText,
    "a duration such as \"30s\""
);

text_type!(
    /// A cron expression as written, cron crate syntax (with seconds).
    CronText,
    "a cron expression such as \"0 0 7 * * *\""
);
