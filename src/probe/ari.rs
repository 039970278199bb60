//! ACME Renewal Information (RFC 9773): the CA's own word on when the
//! served leaf should be renewed.
//!
//! The leaf is named by its CertID, base64url(AKI keyIdentifier) "."
//! base64url(serial), and asked about at the `renewalInfo` URL of an ACME
//! directory. Which directory: the check's `acme_directory`, else the
//! top-level one, else the directory of a CA vigie knows, recognised by the
//! *key identifier* of the leaf's issuer ([`known_directory`]), never by its
//! name: a test hierarchy named like Let's Encrypt's never makes a request
//! to the real CA.
//!
//! Answers are cached per CertID until their `Retry-After` (bounded, see
//! [`retry_after`]); the directory document for a day. Fetches run after
//! the probe, each bounded by its own timeout (at most 10 s) and all by the
//! probe's time budget (`budget.rs`), so a slow CA never turns a check into
//! a timeout nor delays its outcome past the check's `timeout`. A failure,
//! or a lookup cut by the budget, is reported in the outcome
//! (`tls.ari.error`) and never judged by itself.

use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use time::OffsetDateTime;
use url::Url;

use super::address::RedirectPolicy;
use super::budget::{Budget, CUT};
use super::cache::{self, Cache, Limits, Slot, Weight};
use super::client::Client;
use super::tls::Trust;
use crate::outcome::AriReport;
use crate::redact::redact;

/// Let's Encrypt's production directory.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Let's Encrypt's staging directory.
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// The Subject Key Identifiers of Let's Encrypt's issuing intermediates,
/// which are the Authority Key Identifiers of the leaves they sign. Taken
/// from the certificate dumps Let's Encrypt publishes with its hierarchy
/// (github.com/letsencrypt/website, `static/certs/2024/*.txt`,
/// `static/certs/gen-y/int-*.txt` and `static/certs/staging/2024/*.txt`,
/// commit b89871ef735cbb447f8d72c86146fcc8e62fc4ab). A cross-signed
/// intermediate has the same key, hence the same identifier. The staging
/// Gen Y intermediates were not published there; a check behind them sets
/// `acme_directory`.
const KNOWN: &[(&str, &[u8; 20])] = &[
    (
        LETS_ENCRYPT,
        b"\x9F\x2B\x5F\xCF\x3C\x21\x4F\x9D\x04\xB7\xED\x2B\x2C\xC4\xC6\x70\x8B\xD2\xD7\x0D",
    ), // E5
    (
        LETS_ENCRYPT,
        b"\x93\x27\x46\x98\x03\xA9\x51\x68\x8E\x98\xD6\xC4\x42\x48\xDB\x23\xBF\x58\x94\xD2",
    ), // E6
    (
        LETS_ENCRYPT,
        b"\xAE\x48\x9E\xDC\x87\x1D\x44\xA0\x6F\xDA\xA2\xE5\x60\x74\x04\x78\xC2\x9C\x00\x80",
    ), // E7
    (
        LETS_ENCRYPT,
        b"\x8F\x0D\x13\xA2\xF6\x2E\x7E\xD1\x50\x6C\x33\x18\x38\x5D\x59\x8E\x23\x72\x91\xCA",
    ), // E8
    (
        LETS_ENCRYPT,
        b"\x5D\x77\xD1\x4D\xAC\x4D\x22\x78\x59\xB2\x86\x59\x8E\x43\x1C\xB7\x64\x59\x13\x41",
    ), // E9
    (
        LETS_ENCRYPT,
        b"\xBB\xBC\xC3\x47\xA5\xE4\xBC\xA9\xC6\xC3\xA4\x72\x0C\x10\x8D\xA2\x35\xE1\xC8\xE8",
    ), // R10
    (
        LETS_ENCRYPT,
        b"\xC5\xCF\x46\xA4\xEA\xF4\xC3\xC0\x7A\x6C\x95\xC4\x2D\xB0\x5E\x92\x2F\x26\xE3\xB9",
    ), // R11
    (
        LETS_ENCRYPT,
        b"\x00\xB5\x29\xF2\x2D\x8E\x6F\x31\xE8\x9B\x4C\xAD\x78\x3E\xFA\xDC\xE9\x0C\xD1\xD2",
    ), // R12
    (
        LETS_ENCRYPT,
        b"\xE7\xAB\x9F\x0F\x2C\x33\xA0\x53\xD3\x5E\x4F\x78\xC8\xB2\x84\x0E\x3B\xD6\x92\x33",
    ), // R13
    (
        LETS_ENCRYPT,
        b"\xE5\x10\x95\xD8\xB6\x0C\x51\xD7\xA7\x72\x35\x63\x0A\x54\x68\x6E\x06\x53\xF8\xFB",
    ), // R14
    (
        LETS_ENCRYPT,
        b"\xBB\x20\xCA\x47\x0B\xFE\xD7\xE5\x9C\xF9\x8F\x09\x2A\xA3\x8C\x37\x45\xB1\xBC\xD8",
    ), // YE1
    (
        LETS_ENCRYPT,
        b"\xB9\x59\xF2\x8E\xCF\x22\xF0\x86\xD3\x37\x48\xFF\x76\x14\x18\xBA\x82\xD8\x55\x87",
    ), // YE2
    (
        LETS_ENCRYPT,
        b"\xF6\xA2\x7E\xD6\x5E\x23\x6F\xDD\xDD\x45\x46\x61\x1E\x82\x15\x75\xCD\xF1\xE6\x8E",
    ), // YE3
    (
        LETS_ENCRYPT,
        b"\x1F\x2F\x35\xBE\x46\x14\x82\xCD\x40\xB1\xAE\x79\x2C\x55\x78\xFA\xF7\xD4\x68\xFB",
    ), // YR1
    (
        LETS_ENCRYPT,
        b"\x40\x15\x2D\x26\x79\xED\x32\x20\x9E\xDF\x9A\x72\x1D\xD6\x32\x1F\x81\x0C\x81\x0C",
    ), // YR2
    (
        LETS_ENCRYPT,
        b"\x69\x65\x29\xF9\x33\xF8\x09\xB6\x42\xD5\xE1\xF3\xB5\xB5\x9D\x1F\x5F\x7A\x22\x7C",
    ), // YR3
    (
        LETS_ENCRYPT_STAGING,
        b"\xFC\x46\xD1\x01\x43\x5F\xBB\x7B\xA6\x3D\x30\x68\xAE\x11\xBA\xE0\xBC\x6D\xC9\xD3",
    ), // (STAGING) E5
    (
        LETS_ENCRYPT_STAGING,
        b"\xA1\x74\x1A\x06\x6D\x50\xB7\x86\x2D\x4A\x2C\xC1\x7E\xB4\x8D\x88\x49\x6C\xCD\x16",
    ), // (STAGING) E6
    (
        LETS_ENCRYPT_STAGING,
        b"\xA4\x0F\x94\x0B\x44\x63\x6A\x99\xA9\xA0\xD9\x8C\x66\x43\xB1\x4F\xDC\xB0\x2C\x46",
    ), // (STAGING) E7
    (
        LETS_ENCRYPT_STAGING,
        b"\xC9\x41\x93\x42\x48\xD1\x8C\x17\x06\x91\xF2\xF2\x39\xD2\xA0\x1F\xA7\xBB\xDB\x39",
    ), // (STAGING) E8
    (
        LETS_ENCRYPT_STAGING,
        b"\x8E\xDD\xE5\xA8\xF7\xB0\xD9\xD1\xA5\x71\xD4\xFF\x8A\x38\xF9\xD6\x3B\x02\x6D\x57",
    ), // (STAGING) E9
    (
        LETS_ENCRYPT_STAGING,
        b"\xA4\x52\x46\xEA\x58\xA8\x8F\x68\xD8\xB7\xB1\x90\xD1\x4A\x42\x4A\x8F\x6B\x28\x71",
    ), // (STAGING) R10
    (
        LETS_ENCRYPT_STAGING,
        b"\x13\xCB\xD7\xF6\xAE\x9D\xFC\x69\x42\x64\xD6\x5C\x7C\x23\xCC\x85\xF9\x47\xC7\xB6",
    ), // (STAGING) R11
    (
        LETS_ENCRYPT_STAGING,
        b"\xF6\x43\x03\x91\x2F\x66\x25\xAF\x85\x25\xDD\xE4\x64\xD1\x69\x7E\xCB\xA2\x1C\xD9",
    ), // (STAGING) R12
    (
        LETS_ENCRYPT_STAGING,
        b"\x3E\x34\x8F\xCA\x29\x73\x2B\x10\x58\x19\xA1\xEB\xF8\xBB\xA9\xC4\x5E\x64\xE6\xD1",
    ), // (STAGING) R13
    (
        LETS_ENCRYPT_STAGING,
        b"\x4D\xD3\x36\x62\x68\x95\x05\xF9\x64\x12\x0E\xFC\xDD\xE0\x2C\x1F\x81\x2B\xAC\xF6",
    ), // (STAGING) R14
];

/// Directory documents are refetched daily.
const DIRECTORY_REFRESH: Duration = Duration::from_secs(24 * 3600);
/// An answer without `Retry-After` is asked again after six hours, Let's
/// Encrypt's usual value.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(6 * 3600);
/// `Retry-After` is honoured within these bounds: a CA asking every second
/// is ignored, and one asking once a month would hide a mass revocation.
const MIN_RETRY_AFTER: Duration = Duration::from_secs(60);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Directory and renewal-information documents are small JSON.
const DOCUMENT_CAP: usize = 64 * 1024;

/// The ACME directory of the CA whose key identifier is `aki`, if vigie
/// knows it.
pub fn known_directory(aki: &[u8]) -> Option<&'static str> {
    KNOWN
        .iter()
        .find(|(_, id)| id.as_slice() == aki)
        .map(|(dir, _)| *dir)
}

/// RFC 9773 §4.1: base64url (no padding) of the AKI keyIdentifier, ".",
/// base64url of the serial's DER contents (with its leading zero octet,
/// if any).
pub fn cert_id(aki: &[u8], serial: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{}.{}", b64.encode(aki), b64.encode(serial))
}

/// The shared answers of every check (cheap to share; one per prober).
#[derive(Debug)]
pub struct Ari {
    directories: Cache<Result<Url, String>>,
    answers: Cache<AriReport>,
}

impl Weight for AriReport {
    fn weight(&self) -> usize {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        self.cert_id.capacity()
            + self.url.capacity()
            + text(&self.explanation_url)
            + text(&self.error)
    }
}

impl Ari {
    /// Directories and answers kept within `limits`, each.
    pub fn new(limits: Limits) -> Self {
        Self {
            directories: Cache::new(limits),
            answers: Cache::new(limits),
        }
    }

    /// What `directory` says about the certificate `cert_id`, as of the
    /// client's clock: kept, or fetched when due; cut when `budget` ends
    /// first.
    #[allow(clippy::too_many_arguments)]
    pub async fn lookup(
        &self,
        client: &Client,
        trust: &Trust,
        directory: &Url,
        cert_id: &str,
        policy: RedirectPolicy,
        budget: &Budget,
        timeout: Duration,
    ) -> AriReport {
        let now = client.clock().now();
        let base = match self
            .renewal_info(client, trust, directory, budget, timeout)
            .await
        {
            Ok(url) => url,
            Err(error) => return failed(cert_id, &redact(directory), error, now),
        };
        let Ok(url) = Url::parse(&format!(
            "{}/{cert_id}",
            base.as_str().trim_end_matches('/')
        )) else {
            return failed(
                cert_id,
                &redact(&base),
                "invalid renewalInfo URL".into(),
                now,
            );
        };
        let key = url.as_str().to_string();
        let shown = redact(&url);
        let cut = |_| failed(cert_id, &shown, format!("ARI {CUT}"), now);
        let fetch = |_| async move {
            let fetched =
                cache::get(client, &url, trust, Some(policy), DOCUMENT_CAP, timeout).await;
            let (report, wait) = match fetched {
                Ok(response) => match parse(&response.body) {
                    Ok(info) => (
                        AriReport {
                            cert_id: cert_id.to_string(),
                            url: redact(&url),
                            window_start: Some(info.start),
                            window_end: Some(info.end),
                            explanation_url: info.explanation_url,
                            error: None,
                            fetched_at: Some(now),
                        },
                        retry_after(&response.headers, now).unwrap_or(DEFAULT_RETRY_AFTER),
                    ),
                    Err(why) => (
                        failed(cert_id, &redact(&url), why, now),
                        cache::RETRY_AFTER_FAILURE,
                    ),
                },
                Err(why) => (
                    failed(cert_id, &redact(&url), why, now),
                    cache::RETRY_AFTER_FAILURE,
                ),
            };
            let wait = wait.clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER);
            Slot {
                value: report,
                refresh_at: cache::after(now, wait),
            }
        };
        self.answers.get(&key, now, budget, fetch, cut).await
    }

    /// What the kept answers and directories weigh, and how many there are.
    pub fn usage(&self) -> (usize, usize) {
        let (a, b) = (self.answers.usage(), self.directories.usage());
        (a.0 + b.0, a.1 + b.1)
    }

    /// How many requests this cache has made (directories and answers).
    pub fn fetches(&self) -> u64 {
        self.directories.fetches() + self.answers.fetches()
    }

    async fn renewal_info(
        &self,
        client: &Client,
        trust: &Trust,
        directory: &Url,
        budget: &Budget,
        timeout: Duration,
    ) -> Result<Url, String> {
        let now = client.clock().now();
        let fetch = |_| async move {
            // The directory is what the configuration names (or a CA
            // vigie knows): no address policy. Its renewalInfo URL is
            // the CA's word and gets the check's.
            let value =
                match cache::get(client, directory, trust, None, DOCUMENT_CAP, timeout).await {
                    Ok(response) => renewal_info_url(&response.body)
                        .map_err(|why| format!("{}: {why}", redact(directory))),
                    Err(why) => Err(why),
                };
            let wait = match value {
                Ok(_) => DIRECTORY_REFRESH,
                Err(_) => cache::RETRY_AFTER_FAILURE,
            };
            Slot {
                value,
                refresh_at: cache::after(now, wait),
            }
        };
        let cut = |_| Err(format!("ARI {CUT}"));
        self.directories
            .get(directory.as_str(), now, budget, fetch, cut)
            .await
    }
}

fn failed(cert_id: &str, url: &str, error: String, now: OffsetDateTime) -> AriReport {
    AriReport {
        cert_id: cert_id.to_string(),
        url: url.to_string(),
        window_start: None,
        window_end: None,
        explanation_url: None,
        error: Some(crate::sanitize::message(&error)),
        fetched_at: Some(now),
    }
}

/// The `renewalInfo` URL of a directory document (RFC 9773 §3).
pub fn renewal_info_url(body: &[u8]) -> Result<Url, String> {
    #[derive(Deserialize)]
    struct Directory {
        #[serde(rename = "renewalInfo")]
        renewal_info: Option<String>,
    }
    let directory: Directory =
        serde_json::from_slice(body).map_err(|err| format!("not an ACME directory ({err})"))?;
    let text = directory
        .renewal_info
        .ok_or("the directory has no renewalInfo (the CA does not offer ARI)")?;
    let url = Url::parse(&text).map_err(|err| format!("invalid renewalInfo URL ({err})"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!("renewalInfo URL with scheme {other:?}")),
    }
}

/// A suggested window, as RFC 9773 §4.2 sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct RenewalInfo {
    pub start: OffsetDateTime,
    pub end: OffsetDateTime,
    pub explanation_url: Option<String>,
}

/// Reads a renewal-information document. The explanation URL is the
/// CA's, shown as a URL without userinfo or query, escaped and capped.
pub fn parse(body: &[u8]) -> Result<RenewalInfo, String> {
    #[derive(Deserialize)]
    struct Window {
        #[serde(with = "time::serde::rfc3339")]
        start: OffsetDateTime,
        #[serde(with = "time::serde::rfc3339")]
        end: OffsetDateTime,
    }
    #[derive(Deserialize)]
    struct Info {
        #[serde(rename = "suggestedWindow")]
        suggested_window: Window,
        #[serde(rename = "explanationURL")]
        explanation_url: Option<String>,
    }
    let info: Info = serde_json::from_slice(body)
        .map_err(|err| format!("not RFC 9773 renewal information ({err})"))?;
    let window = info.suggested_window;
    if window.end <= window.start {
        return Err("the suggested window ends before it starts".to_string());
    }
    Ok(RenewalInfo {
        start: window.start,
        end: window.end,
        explanation_url: info
            .explanation_url
            .map(|url| crate::sanitize::value(&crate::sanitize::url_text(&url))),
    })
}

/// `Retry-After` as seconds or an HTTP date, from `now`.
pub fn retry_after(headers: &http::HeaderMap, now: OffsetDateTime) -> Option<Duration> {
    let text = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    let at = time::PrimitiveDateTime::parse(text, &format)
        .ok()?
        .assume_utc();
    Some((at - now).try_into().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn cert_id_is_rfc_9773s_example() {
        // RFC 9773 §4.1: keyIdentifier 69:88:5B:6B:87:46:40:41:E1:B3:7B:84:
        // 7B:A0:AE:2C:DE:01:C8:D4, serial 00:87:65:43:21.
        let aki = [
            0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3, 0x7B, 0x84, 0x7B, 0xA0,
            0xAE, 0x2C, 0xDE, 0x01, 0xC8, 0xD4,
        ];
        let serial = [0x00, 0x87, 0x65, 0x43, 0x21];
        assert_eq!(
            cert_id(&aki, &serial),
            "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE"
        );
    }

    #[test]
    fn lets_encrypt_is_known_by_key_identifier_only() {
        let r11 =
            b"\xC5\xCF\x46\xA4\xEA\xF4\xC3\xC0\x7A\x6C\x95\xC4\x2D\xB0\x5E\x92\x2F\x26\xE3\xB9";
        assert_eq!(known_directory(r11), Some(LETS_ENCRYPT));
        assert_eq!(known_directory(&[0u8; 20]), None);
        let staging_e6 =
            b"\xA1\x74\x1A\x06\x6D\x50\xB7\x86\x2D\x4A\x2C\xC1\x7E\xB4\x8D\x88\x49\x6C\xCD\x16";
        assert_eq!(known_directory(staging_e6), Some(LETS_ENCRYPT_STAGING));
    }

    #[test]
    fn a_renewal_window_is_read() {
        let body =
            br#"{"suggestedWindow":{"start":"2026-12-01T00:00:00Z","end":"2026-12-03T00:00:00Z"},
            "explanationURL":"https://community.example/incident?token=x"}"#;
        let info = parse(body).unwrap();
        assert_eq!(info.start, datetime!(2026-12-01 00:00:00 UTC));
        assert_eq!(info.end, datetime!(2026-12-03 00:00:00 UTC));
        assert_eq!(
            info.explanation_url.as_deref(),
            Some("https://community.example/incident?[redacted]")
        );
        assert!(parse(
            br#"{"suggestedWindow":{"start":"2026-12-03T00:00:00Z","end":"2026-12-01T00:00:00Z"}}"#
        )
        .is_err());
        assert!(parse(b"<html>").is_err());
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = datetime!(2026-12-01 00:00:00 UTC);
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, "21600".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(21600)));
        headers.insert(
            http::header::RETRY_AFTER,
            "Tue, 01 Dec 2026 01:00:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(3600)));
        headers.insert(http::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers, now), None);
    }

    #[test]
    fn a_directory_names_its_renewal_info() {
        let url = renewal_info_url(br#"{"newNonce":"x","renewalInfo":"https://ca.example/ari"}"#);
        assert_eq!(url.unwrap().as_str(), "https://ca.example/ari");
        assert!(renewal_info_url(br#"{"newNonce":"x"}"#).is_err());
    }
}
