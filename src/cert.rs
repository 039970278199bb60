//! Certificate facts: DER in, [`CertInfo`] out, plus the small pure judgments
//! built on them (hostname coverage, earliest expiry, staging issuers).
//!
//! Nothing here verifies signatures or builds paths: that is WebPKI's job in
//! `probe/tls.rs`. These functions read what the server presented, so they
//! work on chains that failed verification too.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use x509_parser::asn1_rs::Tag;
use x509_parser::certificate::X509CertificateParser;
use x509_parser::der_parser::oid::Oid;
use x509_parser::extensions::{GeneralName, SubjectAlternativeName};
use x509_parser::nom::Parser;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_NIST_EC_P384, OID_NIST_EC_P521, OID_SIG_ED25519, OID_X509_EXT_SUBJECT_ALT_NAME,
};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;
use x509_parser::x509::X509Name;

/// The facts of one certificate, as read from its DER.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertInfo {
    pub subject: String,
    pub issuer: String,
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Whole days until `not_after`, negative once expired.
    pub days_left: i64,
    /// Whole hours until `not_after`, negative once expired: what a
    /// 160-hour certificate is judged in. Computed at the probe's
    /// `started_at`, so the store derives it on read.
    #[serde(default)]
    pub hours_left: i64,
    /// Whole hours from `not_before` to `not_after`.
    #[serde(default)]
    pub lifetime_hours: i64,
    pub sans: Vec<String>,
    pub serial: String,
    pub sha256: String,
    pub key: String,
    pub signature: String,
}

/// A certificate as presented, with the raw names needed to reason about the
/// chain (which issuer is missing, which certificate is self-signed).
#[derive(Debug, Clone)]
pub struct Presented {
    pub info: CertInfo,
    /// DER of the subject Name's contents (without the SEQUENCE header), the
    /// form WebPKI keeps for trust anchors.
    pub subject_der: Vec<u8>,
    pub issuer_der: Vec<u8>,
}

impl Presented {
    pub fn is_self_issued(&self) -> bool {
        self.subject_der == self.issuer_der
    }
}

/// Reads one certificate. A certificate x509-parser cannot read is still
/// reported, by fingerprint, so the operator sees that *something* was sent.
pub fn read(der: &[u8], now: OffsetDateTime) -> Presented {
    let sha256 = hex(&Sha256::digest(der));
    // Extensions are split but not decoded: only the SAN is read (see
    // `sans`), and decoding the others (SCT lists, policies, AIA) is most of
    // x509-parser's work on a real leaf. An undecodable extension never
    // failed the certificate, so nothing else changes.
    let parsed = X509CertificateParser::new()
        .with_deep_parse_extensions(false)
        .parse(der);
    match parsed {
        Ok((_, cert)) => Presented {
            info: describe(&cert, sha256, now),
            subject_der: name_contents(cert.subject().as_raw()).to_vec(),
            issuer_der: name_contents(cert.issuer().as_raw()).to_vec(),
        },
        Err(err) => Presented {
            info: CertInfo {
                subject: format!("(unreadable certificate: {err})"),
                issuer: String::new(),
                not_before: OffsetDateTime::UNIX_EPOCH,
                not_after: OffsetDateTime::UNIX_EPOCH,
                days_left: 0,
                hours_left: 0,
                lifetime_hours: 0,
                sans: Vec::new(),
                serial: String::new(),
                sha256,
                key: String::new(),
                signature: String::new(),
            },
            subject_der: Vec::new(),
            issuer_der: Vec::new(),
        },
    }
}

fn describe(cert: &X509Certificate<'_>, sha256: String, now: OffsetDateTime) -> CertInfo {
    let not_before = cert.validity().not_before.to_datetime();
    let not_after = cert.validity().not_after.to_datetime();
    CertInfo {
        subject: name_string(cert.subject()),
        issuer: name_string(cert.issuer()),
        not_before,
        not_after,
        days_left: (not_after - now).whole_days(),
        hours_left: hours_left(not_after, now),
        lifetime_hours: lifetime_hours(not_before, not_after),
        sans: sans(cert),
        serial: hex(cert.raw_serial()),
        sha256,
        key: key_description(cert),
        signature: signature_name(cert),
    }
}

/// A DN the way x509-parser prints it ("C=US, O=X, CN=R11"), written into
/// one string. Names with anything but text values or attribute types
/// without an abbreviation (rare) are left to x509-parser, so the output is
/// the same either way.
fn name_string(name: &X509Name<'_>) -> String {
    plain_name_string(name).unwrap_or_else(|| name.to_string())
}

fn plain_name_string(name: &X509Name<'_>) -> Option<String> {
    let registry = x509_parser::objects::oid_registry();
    let mut out = String::with_capacity(name.as_raw().len());
    for rdn in name.iter() {
        // x509-parser separates with ", " only after a non-empty prefix.
        if !out.is_empty() {
            out.push_str(", ");
        }
        for (i, attr) in rdn.iter().enumerate() {
            let value = attr.attr_value();
            match value.tag() {
                Tag::NumericString
                | Tag::VisibleString
                | Tag::PrintableString
                | Tag::GeneralString
                | Tag::ObjectDescriptor
                | Tag::GraphicString
                | Tag::T61String
                | Tag::VideotexString
                | Tag::Utf8String
                | Tag::Ia5String => {}
                _ => return None,
            }
            let text = std::str::from_utf8(value.data).ok()?;
            let abbrev = x509_parser::objects::oid2abbrev(attr.attr_type(), registry).ok()?;
            if i > 0 {
                out.push_str(" + ");
            }
            out.push_str(abbrev);
            out.push('=');
            out.push_str(text);
        }
    }
    Some(out)
}

/// The DNS names and IP addresses of the SAN extension; none when it is
/// absent, repeated or undecodable.
fn sans(cert: &X509Certificate<'_>) -> Vec<String> {
    let Ok(Some(ext)) = cert.get_extension_unique(&OID_X509_EXT_SUBJECT_ALT_NAME) else {
        return Vec::new();
    };
    let Ok((_, san)) = SubjectAlternativeName::from_der(ext.value) else {
        return Vec::new();
    };
    san.general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some(dns.to_string()),
            GeneralName::IPAddress(bytes) => ip_from_bytes(bytes).map(|ip| ip.to_string()),
            _ => None,
        })
        .collect()
}

fn ip_from_bytes(bytes: &[u8]) -> Option<std::net::IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        _ => None,
    }
}

fn key_description(cert: &X509Certificate<'_>) -> String {
    let spki = cert.public_key();
    match spki.parsed() {
        Ok(PublicKey::RSA(rsa)) => format!("RSA {}", rsa.key_size()),
        Ok(PublicKey::EC(_)) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|oid| curve_name(&oid))
                .unwrap_or_else(|| "unknown curve".into());
            format!("ECDSA {curve}")
        }
        Ok(PublicKey::DSA(_)) => "DSA".to_string(),
        Ok(PublicKey::GostR3410(_)) | Ok(PublicKey::GostR3410_2012(_)) => "GOST".to_string(),
        Ok(PublicKey::Unknown(_)) | Err(_) => oid_name(&spki.algorithm.algorithm),
    }
}

fn curve_name(oid: &Oid<'_>) -> std::borrow::Cow<'static, str> {
    if *oid == OID_EC_P256 {
        "P-256".into()
    } else if *oid == OID_NIST_EC_P384 {
        "P-384".into()
    } else if *oid == OID_NIST_EC_P521 {
        "P-521".into()
    } else {
        oid.to_id_string().into()
    }
}

fn signature_name(cert: &X509Certificate<'_>) -> String {
    oid_name(&cert.signature_algorithm.algorithm)
}

fn oid_name(oid: &Oid<'_>) -> String {
    if *oid == OID_SIG_ED25519 {
        return "ED25519".to_string();
    }
    x509_parser::objects::oid2sn(oid, x509_parser::objects::oid_registry())
        .map(str::to_string)
        .unwrap_or_else(|_| oid.to_id_string())
}

/// Whole hours from `now` to `not_after` (negative once expired).
pub fn hours_left(not_after: OffsetDateTime, now: OffsetDateTime) -> i64 {
    (not_after - now).whole_hours()
}

/// Whole hours of a certificate's validity.
pub fn lifetime_hours(not_before: OffsetDateTime, not_after: OffsetDateTime) -> i64 {
    (not_after - not_before).whole_hours()
}

/// Strips the outer SEQUENCE tag and length from a DER Name. WebPKI stores
/// trust-anchor subjects this way, so comparing like with like needs it.
pub fn name_contents(der: &[u8]) -> &[u8] {
    let Some(&first_len) = der.get(1) else {
        return der;
    };
    let header = if first_len < 0x80 {
        2
    } else {
        2 + usize::from(first_len & 0x7f)
    };
    der.get(header..).unwrap_or(der)
}

/// Does a certificate with these SANs cover `host`? RFC 6125 rules as
/// browsers apply them: case-insensitive, a wildcard only as the whole
/// left-most label and matching exactly one label, no fallback to the CN.
pub fn covers(sans: &[String], host: &str) -> bool {
    // An IP literal matches an IP SAN of the same address, never a
    // wildcard (RFC 6125 6.2.1); both spellings are parsed, so `::1` and
    // `0:0:0:0:0:0:0:1` agree.
    if let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    {
        return sans.iter().any(|san| san.parse() == Ok(ip));
    }
    let host = host.trim_end_matches('.');
    sans.iter().any(|san| san_matches(san, host))
}

/// Case-insensitive (ASCII, as DNS names are compared), without lowering
/// copies.
fn san_matches(san: &str, host: &str) -> bool {
    if let Some(suffix) = san.strip_prefix("*.") {
        return match host.split_once('.') {
            Some((label, rest)) => !label.is_empty() && rest.eq_ignore_ascii_case(suffix),
            None => false,
        };
    }
    san.eq_ignore_ascii_case(host)
}

/// The certificate that expires first among those served: the one that
/// breaks the site first, whatever its position in the chain.
pub fn earliest_expiry(chain: &[CertInfo]) -> Option<&CertInfo> {
    chain.iter().min_by_key(|c| c.not_after)
}

/// True when less than a quarter of the certificate's lifetime remains.
/// ACME clients renew once a third remains, so a quarter means renewal has
/// been failing for a while, whatever the lifetime.
pub fn renewal_overdue(cert: &CertInfo, now: OffsetDateTime) -> bool {
    let lifetime = cert.not_after - cert.not_before;
    let left = cert.not_after - now;
    left < lifetime / 4
}

/// Let's Encrypt's staging hierarchy (and other ACME staging CAs) put
/// "(STAGING)" in their names; browsers trust none of them.
pub fn is_staging(dn: &str) -> bool {
    dn.to_ascii_uppercase().contains("(STAGING)")
}

/// The CN of a DN string as x509-parser prints it ("C=US, O=X, CN=R11"), or
/// the whole DN when it has none.
pub fn common_name(dn: &str) -> &str {
    dn.split(", ")
        .find_map(|part| part.strip_prefix("CN="))
        .unwrap_or(dn)
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sans(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn wildcard_covers_one_label_only() {
        let w = sans(&["*.example.test"]);
        assert!(covers(&w, "www.example.test"));
        assert!(covers(&w, "WWW.Example.Test."));
        assert!(!covers(&w, "a.b.example.test"));
        assert!(!covers(&w, "example.test"));
    }

    #[test]
    fn exact_names_and_ips() {
        let s = sans(&["example.test", "127.0.0.1"]);
        assert!(covers(&s, "example.test"));
        assert!(covers(&s, "127.0.0.1"));
        assert!(!covers(&s, "www.example.test"));
        let v6 = sans(&["::1", "*.0.0.1"]);
        assert!(covers(&v6, "::1"));
        assert!(covers(&v6, "[0:0:0:0:0:0:0:1]"));
        assert!(!covers(&v6, "127.0.0.1"), "no wildcard for an address");
    }

    #[test]
    fn name_contents_strips_short_and_long_headers() {
        assert_eq!(name_contents(&[0x30, 0x02, 0xaa, 0xbb]), &[0xaa, 0xbb]);
        let mut long = vec![0x30, 0x81, 0x80];
        long.extend(std::iter::repeat_n(7, 0x80));
        assert_eq!(name_contents(&long).len(), 0x80);
    }

    #[test]
    fn quarter_of_lifetime_rule() {
        let now = OffsetDateTime::now_utc();
        let cert = |left_days: i64| CertInfo {
            subject: String::new(),
            issuer: String::new(),
            not_before: now - time::Duration::days(90 - left_days),
            not_after: now + time::Duration::days(left_days),
            days_left: left_days,
            hours_left: left_days * 24,
            lifetime_hours: 90 * 24,
            sans: vec![],
            serial: String::new(),
            sha256: String::new(),
            key: String::new(),
            signature: String::new(),
        };
        assert!(renewal_overdue(&cert(20), now));
        assert!(!renewal_overdue(&cert(23), now));
        assert!(!renewal_overdue(&cert(60), now));
    }

    #[test]
    fn staging_and_common_name() {
        let dn = "C=US, O=(STAGING) Let's Encrypt, CN=(STAGING) Artificial Apricot R3";
        assert!(is_staging(dn));
        assert!(!is_staging("C=US, O=Let's Encrypt, CN=R11"));
        assert_eq!(common_name(dn), "(STAGING) Artificial Apricot R3");
        assert_eq!(common_name("O=Only Org"), "O=Only Org");
    }
}
