//! The result of one probe: the data that flows everywhere else.
//!
//! A probe fills in what it observed (HTTP facts, the chain as served, a
//! transport error if any); `evaluate` then judges it and sets
//! `status` and `failures`. The JSON shape is a public contract (DESIGN.md):
//! `vigie check --json`, stored history and the API all use it, so fields are
//! only ever added, never renamed.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::cert::CertInfo;
use crate::check::KindName;

/// One probe's facts and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub name: String,
    pub kind: KindName,
    /// The probed URL with userinfo and query redacted.
    pub target: String,
    pub status: Status,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    pub duration_ms: f64,
    pub failures: Vec<Failure>,
    /// Why the probe could not complete (DNS, connect, TLS handshake,
    /// timeout, protocol); `None` when it got an HTTP response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_error: Option<ProbeError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsReport>,
    // The reports of the other kinds are boxed: inline, they were 816 of
    // an outcome's 1,408 bytes whatever its kind, and the daemon keeps the
    // latest outcome of every check (heaptrack at 10,000 checks: 13.6 MiB
    // of `Arc<Outcome>`s). The JSON is the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Box<CorsReport>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Box<DnsReport>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<Box<UploadReport>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp: Option<Box<SmtpReport>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<Box<DomainReport>>,
}

impl Outcome {
    /// The result of a probe that vigie could not finish because of its own
    /// fault (`panic`): down, saying so, so that the check is neither
    /// reported up nor silently dropped from its schedule.
    pub fn internal_error(
        check: &crate::check::Check,
        started_at: OffsetDateTime,
        panic: &str,
    ) -> Self {
        let message = format!("vigie failed while probing (a bug; please report it): {panic}");
        Outcome {
            name: check.name.clone(),
            kind: check.kind_name(),
            target: crate::redact::redact(&check.url),
            status: Status::Down,
            started_at,
            duration_ms: 0.0,
            failures: vec![Failure {
                assertion: Assertion::Internal,
                expected: "a probe that completes".to_string(),
                observed: "vigie panicked".to_string(),
                message: message.clone(),
            }],
            probe_error: Some(ProbeError {
                kind: Assertion::Internal,
                message,
            }),
            http: None,
            tls: None,
            cors: None,
            dns: None,
            upload: None,
            smtp: None,
            domain: None,
        }
    }

    /// The failure an operator should read first: the most severe, in
    /// evaluation order.
    pub fn first_failure(&self) -> Option<&Failure> {
        self.failures
            .iter()
            .find(|f| f.assertion.severity() == Status::Down)
            .or_else(|| self.failures.first())
    }

    /// The leaf certificate as served, if the probe saw one.
    pub fn leaf(&self) -> Option<&CertInfo> {
        self.tls.as_ref().and_then(|tls| tls.chain.first())
    }
}

/// The verdict, worst last so that `max()` picks the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Up,
    Warn,
    Down,
}

impl Status {
    /// Exit code in the monitoring-plugins convention.
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Up => 0,
            Status::Warn => 1,
            Status::Down => 2,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Up => "up",
            Status::Warn => "warn",
            Status::Down => "down",
        })
    }
}

/// One assertion that did not hold, with what was expected and seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub assertion: Assertion,
    pub expected: String,
    pub observed: String,
    /// The operator's sentence: what broke, in words.
    pub message: String,
}

/// The closed set of things vigie asserts. The dotted names are the public
/// contract (DESIGN.md); `tls.handshake`, `http.protocol` and
/// `http.redirect` extend it for failures that have no certificate or status
/// to blame, `cors.max_age` and `cors.expose_headers` for the optional cors
/// expectations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Assertion {
    #[serde(rename = "dns")]
    Dns,
    #[serde(rename = "connect")]
    Connect,
    #[serde(rename = "timeout")]
    Timeout,
    #[serde(rename = "tls.handshake")]
    TlsHandshake,
    #[serde(rename = "http.protocol")]
    HttpProtocol,
    #[serde(rename = "http.redirect")]
    HttpRedirect,
    #[serde(rename = "http.status")]
    HttpStatus,
    #[serde(rename = "http.body")]
    HttpBody,
    #[serde(rename = "http.header")]
    HttpHeader,
    #[serde(rename = "http.response_time")]
    HttpResponseTime,
    #[serde(rename = "tls.trusted")]
    TlsTrusted,
    #[serde(rename = "tls.hostname")]
    TlsHostname,
    #[serde(rename = "tls.expiry")]
    TlsExpiry,
    #[serde(rename = "tls.renewal_overdue")]
    TlsRenewalOverdue,
    #[serde(rename = "tls.not_yet_valid")]
    TlsNotYetValid,
    #[serde(rename = "tls.issuer")]
    TlsIssuer,
    #[serde(rename = "tls.chain_incomplete")]
    TlsChainIncomplete,
    /// The CA's renewal window (ARI) ended and the same leaf is still
    /// served: `warn`, `down` once `ari_grace` has passed too.
    #[serde(rename = "tls.renewal_window")]
    TlsRenewalWindow,
    /// A served certificate is listed on its CRL.
    #[serde(rename = "tls.revoked")]
    TlsRevoked,
    /// `[check.tls] require_pq`: the handshake did not negotiate a
    /// post-quantum hybrid key exchange (such as X25519MLKEM768).
    #[serde(rename = "tls.pq")]
    TlsPq,
    /// The SMTP server's greeting: none, not `220`, or not SMTP at all.
    #[serde(rename = "smtp.banner")]
    SmtpBanner,
    /// The server refused `EHLO` or answered it with something not SMTP.
    #[serde(rename = "smtp.ehlo")]
    SmtpEhlo,
    /// STARTTLS required but not offered, or refused when asked for.
    #[serde(rename = "smtp.starttls")]
    SmtpStarttls,
    /// The registration expires within `[check.rdap] critical_days`, or
    /// has expired.
    #[serde(rename = "domain.expiry")]
    DomainExpiry,
    /// The registration expires within `[check.rdap] warn_days`: renew it,
    /// or make sure auto-renewal is paid.
    #[serde(rename = "domain.renewal_due")]
    DomainRenewalDue,
    /// The registry holds the domain out of the DNS (`clientHold`,
    /// `serverHold`), it lapsed (`redemptionPeriod`, `pendingDelete`), or
    /// it knows no such domain.
    #[serde(rename = "domain.status")]
    DomainStatus,
    /// vigie could not learn the registration's facts: no RDAP service for
    /// the TLD, the registry not answering, or its last answer too old.
    /// Neither up nor down: a warning that says what is unknown.
    #[serde(rename = "domain.rdap")]
    DomainRdap,
    /// A peer vantage's state in the bucket is older than `stale_after`
    /// (vigie's own pseudo-check `vigie:vantage:<peer>`, never a probe's).
    #[serde(rename = "vantage.silent")]
    VantageSilent,
    #[serde(rename = "cors.preflight")]
    CorsPreflight,
    #[serde(rename = "cors.origin")]
    CorsOrigin,
    #[serde(rename = "cors.methods")]
    CorsMethods,
    #[serde(rename = "cors.headers")]
    CorsHeaders,
    #[serde(rename = "cors.max_age")]
    CorsMaxAge,
    #[serde(rename = "cors.expose_headers")]
    CorsExposeHeaders,
    #[serde(rename = "cors.denied_origin")]
    CorsDeniedOrigin,
    #[serde(rename = "dns.cname")]
    DnsCname,
    #[serde(rename = "dns.caa")]
    DnsCaa,
    /// `expect.caa_accounturi`: the records that let the CA issue do not
    /// bind it to that ACME account (RFC 8657 `accounturi`).
    #[serde(rename = "dns.caa_accounturi")]
    DnsCaaAccounturi,
    /// `expect.caa_validationmethods`: no record admitting the account
    /// allows a method the renewal uses (RFC 8657 `validationmethods`).
    #[serde(rename = "dns.caa_validationmethods")]
    DnsCaaValidationmethods,
    #[serde(rename = "dns.a")]
    DnsA,
    #[serde(rename = "dns.aaaa")]
    DnsAaaa,
    #[serde(rename = "dns.txt")]
    DnsTxt,
    /// `[check.dns] dnssec = true`: an answer fails DNSSEC validation
    /// (bogus) or cannot be validated (indeterminate); with
    /// `expect.dnssec = "secure"`, also one from a zone that is not signed.
    #[serde(rename = "dns.dnssec")]
    DnsDnssec,
    #[serde(rename = "upload.presign")]
    UploadPresign,
    #[serde(rename = "upload.preflight")]
    UploadPreflight,
    #[serde(rename = "upload.put")]
    UploadPut,
    #[serde(rename = "upload.expose")]
    UploadExpose,
    #[serde(rename = "upload.delete")]
    UploadDelete,

    /// vigie itself failed while probing (a panic, caught): the check is
    /// `down` until a probe completes, and the reason says so.
    #[serde(rename = "internal")]
    Internal,
}

impl Assertion {
    /// What a failure of this assertion does to the check's status. Only a
    /// renewal that looks stuck or due is a warning: the certificate (or
    /// the domain) still works, someone should look today, nobody should
    /// be woken up. So is a domain whose registration vigie cannot read:
    /// that is unknown, which is neither up nor a reason to page. A renewal
    /// window ended longer than `ari_grace` ago is the one escalation:
    /// `evaluate` makes that check down.
    pub fn severity(self) -> Status {
        match self {
            Assertion::TlsRenewalOverdue
            | Assertion::TlsRenewalWindow
            | Assertion::DomainRenewalDue
            | Assertion::DomainRdap => Status::Warn,
            _ => Status::Down,
        }
    }

    /// The dotted name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Assertion::Dns => "dns",
            Assertion::Connect => "connect",
            Assertion::Timeout => "timeout",
            Assertion::TlsHandshake => "tls.handshake",
            Assertion::HttpProtocol => "http.protocol",
            Assertion::HttpRedirect => "http.redirect",
            Assertion::HttpStatus => "http.status",
            Assertion::HttpBody => "http.body",
            Assertion::HttpHeader => "http.header",
            Assertion::HttpResponseTime => "http.response_time",
            Assertion::TlsTrusted => "tls.trusted",
            Assertion::TlsHostname => "tls.hostname",
            Assertion::TlsExpiry => "tls.expiry",
            Assertion::TlsRenewalOverdue => "tls.renewal_overdue",
            Assertion::TlsNotYetValid => "tls.not_yet_valid",
            Assertion::TlsIssuer => "tls.issuer",
            Assertion::TlsChainIncomplete => "tls.chain_incomplete",
            Assertion::TlsRenewalWindow => "tls.renewal_window",
            Assertion::TlsRevoked => "tls.revoked",
            Assertion::TlsPq => "tls.pq",
            Assertion::SmtpBanner => "smtp.banner",
            Assertion::SmtpEhlo => "smtp.ehlo",
            Assertion::SmtpStarttls => "smtp.starttls",
            Assertion::DomainExpiry => "domain.expiry",
            Assertion::DomainRenewalDue => "domain.renewal_due",
            Assertion::DomainStatus => "domain.status",
            Assertion::DomainRdap => "domain.rdap",
            Assertion::VantageSilent => "vantage.silent",
            Assertion::CorsPreflight => "cors.preflight",
            Assertion::CorsOrigin => "cors.origin",
            Assertion::CorsMethods => "cors.methods",
            Assertion::CorsHeaders => "cors.headers",
            Assertion::CorsMaxAge => "cors.max_age",
            Assertion::CorsExposeHeaders => "cors.expose_headers",
            Assertion::CorsDeniedOrigin => "cors.denied_origin",
            Assertion::DnsCname => "dns.cname",
            Assertion::DnsCaa => "dns.caa",
            Assertion::DnsCaaAccounturi => "dns.caa_accounturi",
            Assertion::DnsCaaValidationmethods => "dns.caa_validationmethods",
            Assertion::DnsA => "dns.a",
            Assertion::DnsAaaa => "dns.aaaa",
            Assertion::DnsTxt => "dns.txt",
            Assertion::DnsDnssec => "dns.dnssec",
            Assertion::UploadPresign => "upload.presign",
            Assertion::UploadPreflight => "upload.preflight",
            Assertion::UploadPut => "upload.put",
            Assertion::UploadExpose => "upload.expose",
            Assertion::UploadDelete => "upload.delete",

            Assertion::Internal => "internal",
        }
    }
}

impl fmt::Display for Assertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a probe could not get an answer, classified once where it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeError {
    /// One of `dns`, `connect`, `timeout`, `tls.handshake`, `http.protocol`,
    /// `http.redirect`, or a `tls.*` assertion when certificate
    /// verification refused the handshake.
    pub kind: Assertion,
    pub message: String,
}

/// What the HTTP exchange looked like (of the last hop when redirected).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpReport {
    pub status: u16,
    pub version: String,
    pub redirects: u32,
    /// The URL that answered last (redacted), when redirects were followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_url: Option<String>,
    /// Time for the whole exchange: every hop, headers and body read.
    pub response_ms: f64,
    /// Bytes of body read (at most the cap).
    pub body_bytes: u64,
    /// True when the body was longer than the cap and reading stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
    /// The response headers, lower-cased names, repeated headers joined by
    /// ", "; kept in memory for evaluation only (history stays small).
    #[serde(skip)]
    pub headers: Vec<Header>,
    /// The body as read (up to the cap), kept only in memory for evaluation.
    #[serde(skip)]
    pub body: Vec<u8>,
}

/// One response header, in the two forms evaluation needs: the value as
/// received, which expectations are matched against, and the value as it
/// may be shown (escaped, capped, redacted by `sanitize::header_value`),
/// which is all a failure message may quote.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Lower-case.
    pub name: String,
    pub value: String,
    pub shown: String,
}

/// The TLS session and the chain as the server presented it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlsReport {
    /// The host name sent as SNI and verified against.
    pub server_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_suite: Option<String>,
    /// The negotiated key exchange group as IANA names it
    /// (`X25519MLKEM768`, `X25519`, `secp256r1`); absent when the
    /// handshake did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_exchange: Option<String>,
    pub trusted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_error: Option<VerifyError>,
    pub hostname_matches: bool,
    /// Leaf first, then the intermediates in the order served. Shared: a
    /// chain seen again (the same check tomorrow, or many checks behind one
    /// certificate) is one allocation (see `probe::chains`).
    pub chain: Arc<[CertInfo]>,
    /// What the CA's ACME Renewal Information (RFC 9773) says about the
    /// leaf; absent when ARI does not apply. Not stored in the history
    /// (its verdict is, as a `tls.renewal_window` failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ari: Option<AriReport>,
    /// The CRL answer for each served certificate that names a CRL
    /// distribution point. Not stored in the history (its verdict is, as a
    /// `tls.revoked` failure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revocation: Vec<CrlReport>,
    /// The positions in `chain` of the path to a trust anchor, leaf first,
    /// when the chain was trusted and some served certificates are not on
    /// it (cross-signs for older clients): expiry is judged on these. Not
    /// stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_path: Option<Vec<usize>>,
}

/// The renewal window the CA suggests for the leaf (RFC 9773), or why vigie
/// could not learn it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AriReport {
    /// The RFC 9773 CertID asked about.
    pub cert_id: String,
    /// Where the renewal information came from (redacted).
    pub url: String,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub window_start: Option<OffsetDateTime>,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub window_end: Option<OffsetDateTime>,
    /// The CA's page explaining an early window (a mass revocation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation_url: Option<String>,
    /// Why there is no window: the endpoint could not be reached or
    /// answered nonsense. Never makes a check down by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the answer was fetched (it is cached until its `Retry-After`).
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub fetched_at: Option<OffsetDateTime>,
}

/// What one certificate's CRL says about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrlReport {
    /// The certificate's subject (as in the chain).
    pub subject: String,
    /// The CRL distribution point (redacted).
    pub url: String,
    pub status: CrlStatus,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub revoked_at: Option<OffsetDateTime>,
    /// RFC 5280 reason, e.g. `key_compromise`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_update: Option<OffsetDateTime>,
    /// Why the CRL could not be used (unreachable, stale, bad signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A CRL's answer. Only `revoked` fails a check; the others are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrlStatus {
    /// The serial is not listed on a current, verified CRL.
    Good,
    Revoked,
    /// The CRL could not be fetched or parsed.
    Unavailable,
    /// The newest CRL is past its `nextUpdate`.
    Stale,
    /// The CRL's signature or issuer does not match the certificate's issuer.
    Invalid,
}

/// Why the chain was not trusted, in the operator's terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum VerifyError {
    Expired {
        #[serde(with = "time::serde::rfc3339")]
        not_after: OffsetDateTime,
    },
    NotYetValid {
        #[serde(with = "time::serde::rfc3339")]
        not_before: OffsetDateTime,
    },
    HostnameMismatch {
        expected: String,
        covered: Vec<String>,
    },
    SelfSigned {
        subject: String,
    },
    /// The issuer is Let's Encrypt's staging CA (or another "(STAGING)" CA).
    StagingIssuer {
        issuer: String,
    },
    /// The leaf's issuer is neither served nor a trusted root.
    ChainIncomplete {
        missing_issuer: String,
    },
    UnknownIssuer {
        issuer: String,
    },
    Other {
        detail: String,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Expired { not_after } => {
                write!(f, "certificate expired on {}", crate::when::minute(*not_after))
            }
            VerifyError::NotYetValid { not_before } => write!(
                f,
                "certificate is not valid before {}",
                crate::when::minute(*not_before)
            ),
            VerifyError::HostnameMismatch { expected, covered } => write!(
                f,
                "certificate does not cover {expected} (it covers {})",
                covered.join(", ")
            ),
            VerifyError::SelfSigned { subject } => {
                write!(f, "self-signed certificate ({subject}) is not trusted")
            }
            VerifyError::StagingIssuer { issuer } => write!(
                f,
                "certificate comes from a staging CA that browsers do not trust (issuer {issuer})"
            ),
            VerifyError::ChainIncomplete { missing_issuer } => write!(
                f,
                "chain incomplete: the server did not send the certificate of its issuer ({missing_issuer}), which is not a trusted root either"
            ),
            VerifyError::UnknownIssuer { issuer } => {
                write!(f, "certificate issued by an unknown CA ({issuer})")
            }
            VerifyError::Other { detail } => f.write_str(detail),
        }
    }
}

/// What a CORS preflight answered (filled by the cors probe).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CorsReport {
    pub preflight_status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_origin: Option<String>,
    #[serde(default)]
    pub allow_methods: Vec<String>,
    #[serde(default)]
    pub allow_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_credentials: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vary: Option<String>,
    /// The start of the body when the preflight was refused (S3 explains
    /// itself in an XML `CORSResponse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Where a redirected preflight pointed (redacted); browsers refuse it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default)]
    pub denied: Vec<DeniedOrigin>,
}

/// One `deny_origins` preflight and whether the bucket admitted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeniedOrigin {
    pub origin: String,
    pub admitted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_origin: Option<String>,
}

/// What a dns check's resolvers answered. Each list is `None` when the
/// check did not ask for that type, and empty when the name has no such
/// record. Names are fully qualified and lower-cased; every value is
/// sanitised where it was captured; at most 64 values of a type are kept
/// (sorted, the first ones), the others counted in `more`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DnsReport {
    /// The name asked about.
    pub query: String,
    /// The resolvers asked (`IP:PORT`).
    pub resolvers: Vec<String>,
    /// The name does not exist (NXDOMAIN): a deleted delegation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nxdomain: bool,
    /// The name's CNAME target, when the check expects one and there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aaaa: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txt: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caa: Option<CaaReport>,
    /// Distinct values past the first 64 kept of a record type, by type
    /// (`"A"`, `"AAAA"`, `"TXT"`, `"CAA"`): a zone can answer thousands.
    /// Not stored in the history (the failures that quote it are).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub more: std::collections::BTreeMap<String, u64>,
    /// With `[check.dns] dnssec = true`: the weakest verdict of DNSSEC
    /// validation over every answer (bogus, then indeterminate, then
    /// insecure, then secure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dnssec: Option<Dnssec>,
    /// Each question asked and its verdict, in the order asked (the CAA
    /// climb one question per name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dnssec_answers: Vec<DnssecAnswer>,
}

/// What DNSSEC validation made of an answer (RFC 4035 section 4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dnssec {
    /// Signed, and the signatures chain up to the trust anchor.
    Secure,
    /// Provably unsigned: a signed parent says the zone has no DS record.
    Insecure,
    /// Should be signed and does not validate (a bad, expired or missing
    /// signature): validating resolvers answer SERVFAIL.
    Bogus,
    /// The records needed to decide could not be had.
    Indeterminate,
}

impl Dnssec {
    pub fn as_str(self) -> &'static str {
        match self {
            Dnssec::Secure => "secure",
            Dnssec::Insecure => "insecure",
            Dnssec::Bogus => "bogus",
            Dnssec::Indeterminate => "indeterminate",
        }
    }

    /// The weaker of two verdicts: what a set of answers is worth is what
    /// its weakest answer is worth. A failed validation outranks one that
    /// could not be decided, which outranks an unsigned zone.
    pub fn weakest(self, other: Dnssec) -> Dnssec {
        let rank = |d: Dnssec| match d {
            Dnssec::Secure => 0,
            Dnssec::Insecure => 1,
            Dnssec::Indeterminate => 2,
            Dnssec::Bogus => 3,
        };
        match rank(other) > rank(self) {
            true => other,
            false => self,
        }
    }

    /// Whether a validating resolver passes the answer on (secure or
    /// insecure), rather than answering SERVFAIL.
    pub fn passes(self) -> bool {
        matches!(self, Dnssec::Secure | Dnssec::Insecure)
    }
}

impl fmt::Display for Dnssec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One question of a dns check and what DNSSEC validation made of its
/// answer, a denial (NXDOMAIN, no record of the type) included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnssecAnswer {
    /// The record type asked: `"A"`, `"CAA"`, ...
    #[serde(rename = "type")]
    pub record_type: String,
    /// The name asked about, fully qualified.
    pub name: String,
    pub dnssec: Dnssec,
}

/// The relevant CAA RRset (RFC 8659 section 3): the first found climbing
/// from the queried name towards the root.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CaaReport {
    /// Where the RRset was found; `None`: no CAA record anywhere up the
    /// tree, so every CA may issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(default)]
    pub records: Vec<CaaRecord>,
}

/// One CAA record, as in a zone file: `0 issue "letsencrypt.org"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaaRecord {
    pub flags: u8,
    pub tag: String,
    pub value: String,
}

impl fmt::Display for CaaRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {:?}", self.flags, self.tag, self.value)
    }
}

/// The steps of an upload check, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UploadStep {
    Presign,
    Preflight,
    Put,
    Expose,
    Delete,
}

impl UploadStep {
    /// The assertion that fails when this step does.
    pub fn assertion(self) -> Assertion {
        match self {
            UploadStep::Presign => Assertion::UploadPresign,
            UploadStep::Preflight => Assertion::UploadPreflight,
            UploadStep::Put => Assertion::UploadPut,
            UploadStep::Expose => Assertion::UploadExpose,
            UploadStep::Delete => Assertion::UploadDelete,
        }
    }
}

impl TlsReport {
    /// Whether the negotiated group is a post-quantum hybrid: every such
    /// group IANA lists (`X25519MLKEM768`, `SecP256r1MLKEM768`,
    /// `SecP384r1MLKEM1024`) carries ML-KEM in its name.
    pub fn post_quantum(&self) -> bool {
        self.key_exchange
            .as_deref()
            .is_some_and(|group| group.to_ascii_uppercase().contains("MLKEM"))
    }
}

/// What an SMTP server said before the TLS handshake (`kind = "smtp"`).
/// Not stored in the history: its verdicts are (`smtp.*` failures), and
/// the chain is, as for https.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SmtpReport {
    /// `starttls` (smtp://) or `tls` (smtps://, TLS from the first byte).
    pub tls: String,
    /// The greeting's first line, escaped and capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub banner: Option<String>,
    /// From connected to the greeting read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub banner_ms: Option<f64>,
    /// From `EHLO` sent to its answer read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ehlo_ms: Option<f64>,
    /// Whether the EHLO answer offered STARTTLS (smtp:// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starttls_offered: Option<bool>,
}

/// A domain's registration as its registry's RDAP server gave it
/// (`kind = "domain"`, RFC 9083), or why vigie does not know it. Registries
/// are asked at most once per `[check.rdap] query_every`: between queries
/// the facts are those of the last answer, `queried` false. Every text
/// from the registry is sanitised where it was read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DomainReport {
    /// The name asked about (A-labels).
    pub domain: String,
    /// The RDAP URL asked (redacted); absent when no server is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdap_url: Option<String>,
    /// The `expiration` event.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<OffsetDateTime>,
    /// The `last changed` event.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_changed: Option<OffsetDateTime>,
    /// The name (vCard `fn`) of the entity with the `registrar` role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registrar: Option<String>,
    /// The `status` array as the registry spells it (`client hold`,
    /// `redemption period`; some write the EPP names, `clientHold`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
    /// The registry answered that it knows no such domain (HTTP 404).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_found: bool,
    /// The RDAP bootstrap names no server for the TLD and the check sets
    /// no `rdap_url`: nobody was asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_service: bool,
    /// When the registry gave the facts above.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub answered_at: Option<OffsetDateTime>,
    /// When vigie last asked, answered or not.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub queried_at: Option<OffsetDateTime>,
    /// The earliest vigie asks again (`query_every`, a server's
    /// `Retry-After`).
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_query_at: Option<OffsetDateTime>,
    /// This probe asked the registry; false when it reported vigie's last
    /// answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queried: bool,
    /// Why there is no (new) answer: no RDAP service for the TLD, the last
    /// query's failure, a server asking vigie to wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What an upload check's steps met (filled by the upload probe). Never
/// holds the presigned URL: its query string is a credential.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadReport {
    /// The object's key in the bucket.
    pub key: String,
    /// The step the upload stopped at: the one that failed, or `delete`
    /// when every step passed (then `ok`).
    pub step: UploadStep,
    pub ok: bool,
    /// The preflight's answer, as a cors check reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<CorsReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub put_status: Option<u16>,
    /// Access-Control-Allow-Origin of the PUT's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_origin: Option<String>,
    /// Access-Control-Expose-Headers of the PUT's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_status: Option<u16>,
    /// S3's words when it refused the PUT or the DELETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<S3Error>,
    /// Why signing failed (the `presign` step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl UploadReport {
    /// An upload of `key` that has got no further than `step`.
    pub fn new(key: String, step: UploadStep) -> Self {
        Self {
            key,
            step,
            ok: false,
            preflight: None,
            put_status: None,
            allow_origin: None,
            expose_headers: Vec::new(),
            delete_status: None,
            error: None,
            reason: None,
        }
    }
}

/// An S3 error answer's `<Code>` and `<Message>`, sanitised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Error {
    pub code: String,
    pub message: String,
}

impl fmt::Display for S3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message.is_empty() {
            true => f.write_str(&self.code),
            false => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl VerifyError {
    /// The assertion a refused chain fails.
    pub fn assertion(&self) -> Assertion {
        match self {
            VerifyError::Expired { .. } => Assertion::TlsExpiry,
            VerifyError::NotYetValid { .. } => Assertion::TlsNotYetValid,
            VerifyError::HostnameMismatch { .. } => Assertion::TlsHostname,
            VerifyError::ChainIncomplete { .. } => Assertion::TlsChainIncomplete,
            VerifyError::SelfSigned { .. }
            | VerifyError::StagingIssuer { .. }
            | VerifyError::UnknownIssuer { .. }
            | VerifyError::Other { .. } => Assertion::TlsTrusted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon keeps the latest outcome of every check: the reports
    /// only some kinds fill stay out of line, so an HTTP check's outcome
    /// does not carry the room of a CORS, DNS and upload report.
    #[test]
    fn an_outcome_keeps_the_reports_of_other_kinds_out_of_line() {
        let inline = std::mem::size_of::<Outcome>();
        let reports = std::mem::size_of::<CorsReport>()
            + std::mem::size_of::<DnsReport>()
            + std::mem::size_of::<UploadReport>();
        assert!(inline < 700, "an Outcome is {inline} bytes");
        assert!(inline < reports, "{inline} bytes against {reports}");
    }

    #[test]
    fn the_weakest_dnssec_verdict_wins_whatever_the_order() {
        use Dnssec::{Bogus, Indeterminate, Insecure, Secure};
        let cases = [
            (Secure, Secure, Secure),
            (Secure, Insecure, Insecure),
            (Insecure, Indeterminate, Indeterminate),
            (Indeterminate, Bogus, Bogus),
            (Secure, Bogus, Bogus),
            (Insecure, Bogus, Bogus),
        ];
        for (a, b, weakest) in cases {
            assert_eq!(a.weakest(b), weakest, "{a} and {b}");
            assert_eq!(b.weakest(a), weakest, "{b} and {a}");
        }
        assert!(Secure.passes() && Insecure.passes());
        assert!(!Bogus.passes() && !Indeterminate.passes());
    }

    #[test]
    fn dnssec_verdicts_are_written_in_lower_case() {
        let answer = DnssecAnswer {
            record_type: "CAA".to_string(),
            name: "example.com.".to_string(),
            dnssec: Dnssec::Bogus,
        };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"type":"CAA","name":"example.com.","dnssec":"bogus"}"#
        );
        assert_eq!(Dnssec::Indeterminate.to_string(), "indeterminate");
    }
}
