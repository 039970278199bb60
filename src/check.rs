//! A check as the rest of the program sees it: typed, validated, ready to run.
//!
//! `config::resolve` is the only producer; nothing after it can hold an
//! invalid URL, regex or duration. Adding a probe kind means a new
//! [`CheckKind`] variant, and the compiler then points at every `match` that
//! must learn about it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::proto::dnssec::TrustAnchors;
use http::HeaderName;
use regex::Regex;
use serde::{Deserialize, Serialize};
use url::Url;

/// One thing to probe.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub url: Url,
    /// Connect to this address instead of resolving the URL's host; SNI,
    /// `Host` and certificate verification still use the URL's host.
    pub resolve: Option<IpAddr>,
    pub every: Cadence,
    pub timeout: Duration,
    pub labels: BTreeMap<String, String>,
    pub tls: TlsExpect,
    /// `[check.alert]`.
    pub alert: AlertOverrides,
    pub kind: CheckKind,
}

/// What a check overrides of `[alerting]` (`[check.alert]`); `None` keeps
/// the global value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlertOverrides {
    /// At least 1.
    pub failure_threshold: Option<u32>,
    /// At least 1.
    pub recovery_threshold: Option<u32>,
    /// Zero: no reminders.
    pub repeat: Option<Duration>,
    pub to: Option<Vec<lettre::message::Mailbox>>,
    /// `false`: tracked and reported, never paged.
    pub page: Option<bool>,
}

impl Check {
    pub fn kind_name(&self) -> KindName {
        match self.kind {
            CheckKind::Http(_) => KindName::Http,
            CheckKind::Cors(_) => KindName::Cors,
            CheckKind::Dns(_) => KindName::Dns,
            CheckKind::Upload(_) => KindName::Upload,
            CheckKind::Tls(_) => KindName::Tls,
            CheckKind::Smtp(_) => KindName::Smtp,
            CheckKind::Domain(_) => KindName::Domain,
        }
    }
}

/// How often a check runs.
#[derive(Debug, Clone)]
pub enum Cadence {
    Every(Duration),
    Cron(Box<cron::Schedule>),
}

/// The kind-specific part of a check.
#[derive(Debug, Clone)]
pub enum CheckKind {
    Http(HttpCheck),
    Cors(CorsCheck),
    Dns(DnsCheck),
    Upload(UploadCheck),
    Tls(TlsPortCheck),
    Smtp(SmtpCheck),
    Domain(DomainCheck),
}

/// The kind's name, as written in `kind = "..."` and in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KindName {
    Http,
    Cors,
    Dns,
    Upload,
    Tls,
    Smtp,
    Domain,
}

impl KindName {
    pub fn as_str(self) -> &'static str {
        match self {
            KindName::Http => "http",
            KindName::Cors => "cors",
            KindName::Dns => "dns",
            KindName::Upload => "upload",
            KindName::Tls => "tls",
            KindName::Smtp => "smtp",
            KindName::Domain => "domain",
        }
    }
}

/// Browsers give up after about 20; 10 is already more than a healthy site
/// needs and keeps a hostile target from holding a probe for long.
pub const MAX_REDIRECTS: u32 = 10;

#[derive(Debug, Clone)]
pub struct HttpCheck {
    pub follow_redirects: bool,
    /// Redirects may lead to loopback, private and link-local addresses
    /// (never to a cloud metadata address).
    pub redirect_to_private: bool,
    /// Response headers whose values are never kept or shown, beyond the
    /// ones `sanitize` always redacts (cookies, credentials).
    pub redact_headers: Vec<HeaderName>,
    pub expect: HttpExpect,
}

/// What an `http` check expects of the response.
#[derive(Debug, Clone, Default)]
pub struct HttpExpect {
    /// Accepted status codes; empty means any 2xx.
    pub status: Vec<u16>,
    pub body_contains: Option<String>,
    pub body_regex: Option<Regex>,
    pub max_response_time: Option<Duration>,
    /// Header name -> regex its value must match.
    pub headers: Vec<(HeaderName, Regex)>,
}

/// A browser's CORS preflight to the object URL, and the origins the bucket
/// must refuse.
#[derive(Debug, Clone)]
pub struct CorsCheck {
    /// The page's origin, serialized as a browser sends it
    /// (`https://app.example.com`, no path, no trailing slash).
    pub origin: String,
    /// The method of the real request, case-sensitive as a browser sends it.
    pub method: String,
    /// Headers the real request carries, lower-cased (sent sorted, as
    /// browsers do).
    pub request_headers: Vec<String>,
    /// Origins that must not be admitted.
    pub deny_origins: Vec<String>,
    /// Accept `Access-Control-Allow-Origin: *` (a public bucket).
    pub allow_any_origin: bool,
    /// The real request carries credentials (cookies, client certificates),
    /// which makes every `*` in the answer literal.
    pub credentials: bool,
    pub min_max_age: Option<Duration>,
    /// Response headers the page must be able to read (lower-cased), e.g.
    /// `etag` for multipart uploads.
    pub expose_headers: Vec<String>,
}

/// A DNS question and what its answers must be. A dns check has no `url`
/// of its own: [`Check::url`] is the RFC 4501 URI `dns:<query>`, which is
/// what outcomes show as the target.
#[derive(Debug, Clone)]
pub struct DnsCheck {
    /// The name asked about, fully qualified (ends with a dot), so no
    /// search domain of the host is ever appended.
    pub query: String,
    /// Resolvers to ask, in order; `None`: those of `/etc/resolv.conf`,
    /// read at each probe.
    pub resolvers: Option<Vec<SocketAddr>>,
    /// `[check.dns] dnssec = true`: every answer is validated, from this
    /// trust anchor.
    pub dnssec: Option<TrustAnchor>,
    pub expect: DnsExpect,
}

/// Where DNSSEC validation starts: the keys trusted without a DS record
/// above them.
#[derive(Clone)]
pub enum TrustAnchor {
    /// The root zone's key-signing keys, as hickory ships them (KSK-2017
    /// and KSK-2024).
    Root,
    /// `trust_anchor_file`: the DNSKEY records read from it at load.
    File {
        path: PathBuf,
        keys: Arc<TrustAnchors>,
    },
}

impl std::fmt::Debug for TrustAnchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustAnchor::Root => f.write_str("TrustAnchor::Root"),
            TrustAnchor::File { path, keys } => f
                .debug_struct("TrustAnchor::File")
                .field("path", path)
                .field("keys", &keys.len())
                .finish(),
        }
    }
}

/// `[check.expect]` of a dns check; at least one is set (config refuses a
/// dns check that asserts nothing).
#[derive(Debug, Clone)]
pub struct DnsExpect {
    /// The CNAME target, fully qualified and lower-cased.
    pub cname: Option<String>,
    /// CAs (issuer domain names, lower-cased) that must be allowed to issue
    /// for the name (RFC 8659 `issue`).
    pub caa_issue: Vec<String>,
    /// CAs that must be allowed to issue a wildcard for the name
    /// (`issuewild`, else `issue`).
    pub caa_issuewild: Vec<String>,
    /// The ACME account the renewal uses: the records letting each CA of
    /// `caa_issue`/`caa_issuewild` issue must bind it (RFC 8657).
    pub caa_accounturi: Option<String>,
    /// The validation methods the renewal uses (`dns-01`): a record
    /// admitting the CA (and account) must allow each one.
    pub caa_validationmethods: Vec<String>,
    pub a: Option<AddressSet>,
    pub aaaa: Option<AddressSet>,
    /// Some TXT record of the name must match.
    pub txt_regex: Option<Regex>,
    /// `expect.dnssec = "secure"`: an answer from a zone that is not
    /// signed (DNSSEC insecure) fails too, not only a bogus one.
    pub dnssec_secure: bool,
    /// `false`: the name must not exist (NXDOMAIN), e.g. a retired one.
    /// Otherwise a name that does not exist is down whatever else is
    /// expected of it.
    pub exists: bool,
}

impl Default for DnsExpect {
    fn default() -> Self {
        DnsExpect {
            cname: None,
            caa_issue: Vec::new(),
            caa_issuewild: Vec::new(),
            caa_accounturi: None,
            caa_validationmethods: Vec::new(),
            a: None,
            aaaa: None,
            txt_regex: None,
            dnssec_secure: false,
            exists: true,
        }
    }
}

impl DnsExpect {
    pub fn wants_caa(&self) -> bool {
        !self.caa_issue.is_empty() || !self.caa_issuewild.is_empty()
    }
}

/// A validation method name as RFC 8657 writes them, `1*(ALPHA / DIGIT /
/// "-")`: `dns-01`, `http-01`, `tls-alpn-01`, or a CA's own `ca-...`.
pub fn is_validation_method(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// The addresses an A or AAAA expectation accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressSet {
    /// `["*"]`: at least one address, whichever.
    Any,
    /// Exactly these, in any order.
    Exactly(BTreeSet<IpAddr>),
}

/// A TLS handshake on any port (`kind = "tls"`): IMAPS, a database, an
/// MQTT broker. No application protocol is spoken. [`Check::url`] is
/// `tls://host:port`, what outcomes show as the target.
#[derive(Debug, Clone)]
pub struct TlsPortCheck {
    /// Where to connect (a name or an IP address, without brackets).
    pub host: String,
    pub port: u16,
    /// Sent as SNI and verified against: `server_name`, else `host`.
    pub server_name: String,
}

/// An SMTP server's TLS (`kind = "smtp"`): [`Check::url`] is
/// `smtp://host[:port]` (STARTTLS, port 25 by default) or
/// `smtps://host[:port]` (TLS from the first byte, port 465).
#[derive(Debug, Clone)]
pub struct SmtpCheck {
    pub host: String,
    pub port: u16,
    pub tls: SmtpTlsMode,
}

/// How an SMTP check reaches TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTlsMode {
    /// Greeting and EHLO in clear text, then STARTTLS. `required = false`
    /// accepts a server that does not offer it (then no chain is judged).
    Starttls { required: bool },
    /// TLS from the first byte (smtps://).
    Implicit,
}

/// A domain's registration, read over RDAP (`kind = "domain"`): its
/// expiry, its statuses, its registrar. [`Check::url`] is
/// `domain:<name>`, what outcomes show as the target.
#[derive(Debug, Clone)]
pub struct DomainCheck {
    /// The registered name as the registry knows it: lower-case, IDNA
    /// A-labels (`xn--...`), no trailing dot.
    pub domain: String,
    /// The RDAP base URL to ask (ends with `/`; vigie appends
    /// `domain/<name>`) instead of the one IANA's bootstrap names.
    pub rdap_url: Option<Url>,
    pub rules: DomainRules,
}

impl DomainCheck {
    /// An RDAP base URL as it is joined with `domain/NAME`: its path ends
    /// with `/`, so that the join goes under it rather than replacing its
    /// last segment.
    pub fn base(mut url: Url) -> Url {
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        url
    }
}

/// Where IANA publishes the RDAP bootstrap for domain names (RFC 9224),
/// the default of `rdap_bootstrap`.
pub const IANA_RDAP_BOOTSTRAP: &str = "https://data.iana.org/rdap/dns.json";

/// `[check.rdap]`: when a registration is judged close to its end, and how
/// often its registry may be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainRules {
    /// Warn below this many days left (`domain.renewal_due`).
    pub warn_days: u32,
    /// Down below this many days left (`domain.expiry`); less than
    /// `warn_days`.
    pub critical_days: u32,
    /// At most one RDAP query per domain this often, whatever `every`
    /// says: between queries the check reports the last answer.
    pub query_every: Duration,
}

impl Default for DomainRules {
    fn default() -> Self {
        Self {
            warn_days: DEFAULT_DOMAIN_WARN_DAYS,
            critical_days: DEFAULT_CRITICAL_DAYS,
            query_every: DEFAULT_RDAP_QUERY_EVERY,
        }
    }
}

/// `[check.rdap] warn_days`: a month, time enough to renew by hand.
pub const DEFAULT_DOMAIN_WARN_DAYS: u32 = 30;

/// `[check.rdap] query_every`: registries rate-limit RDAP per address
/// without saying how much; an expiry date and statuses that change over
/// days are read twice a day.
pub const DEFAULT_RDAP_QUERY_EVERY: Duration = Duration::from_secs(12 * 3600);

/// A browser's presigned upload, end to end: presign a PUT, preflight it
/// from `origin`, PUT, read the CORS headers of the PUT's answer, delete.
/// [`Check::url`] is where objects live as browsers reach them (object URL
/// = url + key).
#[derive(Debug, Clone)]
pub struct UploadCheck {
    /// How object_store must address the bucket to sign URLs that start
    /// with [`Check::url`].
    pub bucket: String,
    /// The S3 endpoint: `scheme://host[:port]` of the url (for virtual-host
    /// style, the bucket's own host).
    pub endpoint: Url,
    pub virtual_host: bool,
    pub region: String,
    /// The page's origin, as a browser sends it.
    pub origin: String,
    /// Objects are `<key_prefix><node>/<timestamp>`.
    pub key_prefix: String,
    /// This vigie's name in keys: the replication node, else the host name.
    pub node: String,
    /// The Content-Type the app sends and signs.
    pub content_type: String,
    /// Response headers the page must be able to read (lower-cased).
    pub expose_headers: Vec<String>,
    /// Read from the key files when the config is loaded.
    pub keys: UploadKeys,
}

/// The key pair an upload check signs with; `Debug` never shows it.
#[derive(Clone)]
pub struct UploadKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for UploadKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UploadKeys([redacted])")
    }
}

/// What every check with an https URL expects of the certificate chain.
#[derive(Debug, Clone)]
pub struct TlsExpect {
    /// Warn below this many days left; `None` means "when less than a
    /// quarter of the lifetime remains".
    pub warn_days: Option<u32>,
    pub critical_days: u32,
    /// Regex on the leaf's issuer DN.
    pub issuer: Option<Regex>,
    /// Extra trust for this check, on top of the Mozilla roots and the
    /// global `extra_ca_file`.
    pub ca_file: Option<PathBuf>,
    /// `ari`: `None` asks for renewal information when a directory is
    /// known (configured, or the issuer's own: `probe::ari`).
    pub ari: Option<bool>,
    /// The ACME directory to ask (`[check.tls]`, else the top-level key).
    pub acme_directory: Option<url::Url>,
    /// How long after the renewal window ended a still-served leaf is only
    /// a warning.
    pub ari_grace: Duration,
    /// Fetch the CRLs of the served certificates.
    pub revocation: bool,
    /// The handshake must negotiate a post-quantum hybrid key exchange
    /// (`tls.pq`).
    pub require_pq: bool,
}

impl Default for TlsExpect {
    fn default() -> Self {
        Self {
            warn_days: None,
            critical_days: DEFAULT_CRITICAL_DAYS,
            issuer: None,
            ca_file: None,
            ari: None,
            acme_directory: None,
            ari_grace: DEFAULT_ARI_GRACE,
            revocation: true,
            require_pq: false,
        }
    }
}

pub const DEFAULT_CRITICAL_DAYS: u32 = 7;

/// `[check.tls] ari_grace`: two days past the CA's window is its "renew now".
pub const DEFAULT_ARI_GRACE: Duration = Duration::from_secs(2 * 86_400);
