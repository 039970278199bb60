//! Let's Encrypt-like chains: a leaf described by [`LeafFacts`] under the
//! R11 intermediate, with `days_left` and `hours_left` as seen at a given
//! instant.

use time::macros::datetime;
use time::OffsetDateTime;

use crate::cert::CertInfo;

/// What tells one made-up leaf from another.
#[derive(Debug, Clone)]
pub struct LeafFacts {
    /// The first is the subject's CN; all are SANs.
    pub names: Vec<String>,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    pub serial: String,
    pub sha256: String,
}

impl LeafFacts {
    /// A 90-day leaf for `names` issued on 2026-10-30, with a fixed serial
    /// and `sha256`.
    pub fn new(names: &[String], sha256: String) -> LeafFacts {
        LeafFacts {
            names: names.to_vec(),
            not_before: datetime!(2026-10-30 06:12:10 UTC),
            not_after: datetime!(2027-01-28 06:12:09 UTC),
            serial: "04f1c2d9a3b0e6f7d8c9b0a1e2f3d4c5b6a7".to_string(),
            sha256,
        }
    }
}

/// The leaf `facts` describe, issued by R11, seen at `at`.
pub fn leaf(facts: &LeafFacts, at: OffsetDateTime) -> CertInfo {
    CertInfo {
        subject: format!("CN={}", facts.names[0]),
        issuer: "C=US, O=Let's Encrypt, CN=R11".to_string(),
        not_before: facts.not_before,
        not_after: facts.not_after,
        days_left: (facts.not_after - at).whole_days(),
        hours_left: (facts.not_after - at).whole_hours(),
        lifetime_hours: (facts.not_after - facts.not_before).whole_hours(),
        sans: facts.names.clone(),
        serial: facts.serial.clone(),
        sha256: facts.sha256.clone(),
        key: "ECDSA P-256".to_string(),
        signature: "sha256WithRSAEncryption".to_string(),
    }
}

/// Let's Encrypt's R11 intermediate (under ISRG Root X1), seen at `at`.
pub fn r11(at: OffsetDateTime) -> CertInfo {
    let not_before = datetime!(2024-03-13 00:00:00 UTC);
    let not_after = datetime!(2027-03-12 23:59:59 UTC);
    CertInfo {
        subject: "C=US, O=Let's Encrypt, CN=R11".to_string(),
        issuer: "C=US, O=Internet Security Research Group, CN=ISRG Root X1".to_string(),
        not_before,
        not_after,
        days_left: (not_after - at).whole_days(),
        hours_left: (not_after - at).whole_hours(),
        lifetime_hours: (not_after - not_before).whole_hours(),
        sans: Vec::new(),
        serial: "8a7d3e13d62f30ef2386bd29076b34f8".to_string(),
        sha256: "591e9ce6c863d3a079e9fabe1478c7339a26b21269dde795211361024ae31a44".to_string(),
        key: "RSA 2048".to_string(),
        signature: "sha256WithRSAEncryption".to_string(),
    }
}

/// The leaf `facts` describe and R11, as a server presents them.
pub fn chain(facts: &LeafFacts, at: OffsetDateTime) -> Vec<CertInfo> {
    vec![leaf(facts, at), r11(at)]
}

/// A `*.<domain>` leaf (also naming `domain`) and R11, seen at `at`; the
/// leaf's fingerprint is the domain's bytes in hex.
pub fn wildcard_chain(domain: &str, at: OffsetDateTime) -> Vec<CertInfo> {
    let hex: String = domain.bytes().map(|b| format!("{b:02x}")).collect();
    let names = [format!("*.{domain}"), domain.to_string()];
    chain(&LeafFacts::new(&names, format!("{hex:0>64}")), at)
}
