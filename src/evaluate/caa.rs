//! RFC 8659 issuance rules on one relevant CAA RRset, pure: may this CA
//! issue for the name (or a wildcard under it), and if not, which records
//! refuse it. Finding the relevant RRset (climbing to parents) is the
//! probe's job (`probe::dns`).

use crate::outcome::CaaRecord;

/// The issuer-critical flag (RFC 8659 section 4.1).
const CRITICAL: u8 = 0x80;

/// Property tags a CA understands: RFC 8659's three, and those of the CA/B
/// Forum's Baseline Requirements and RFC 9495. A *critical* record with
/// any other tag forbids issuance by every CA (RFC 8659 section 4.1).
const KNOWN_TAGS: &[&str] = &[
    "issue",
    "issuewild",
    "iodef",
    "contactemail",
    "contactphone",
    "issuemail",
    "issuevmc",
];

/// Why a CA may not issue: the records that say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A critical record of a tag no CA understands.
    UnknownCritical(CaaRecord),
    /// The `issue` (or, for a wildcard, `issuewild`) records, none of
    /// which names the CA.
    NotListed(Vec<CaaRecord>),
}

impl Refusal {
    /// The refusing records, as in a zone file.
    pub fn records(&self) -> Vec<String> {
        match self {
            Refusal::UnknownCritical(record) => vec![record.to_string()],
            Refusal::NotListed(records) => records.iter().map(ToString::to_string).collect(),
        }
    }
}

/// May `ca` (an issuer domain name such as `letsencrypt.org`) issue a
/// certificate for the name whose relevant RRset is `records` (empty: no
/// CAA anywhere, so any CA may), or for a wildcard under it?
pub fn permits(records: &[CaaRecord], ca: &str, wildcard: bool) -> Result<(), Refusal> {
    if let Some(critical) = records.iter().find(|r| {
        r.flags & CRITICAL != 0 && !KNOWN_TAGS.contains(&r.tag.to_ascii_lowercase().as_str())
    }) {
        return Err(Refusal::UnknownCritical(critical.clone()));
    }
    let tagged = |tag: &str| -> Vec<&CaaRecord> {
        records
            .iter()
            .filter(|r| r.tag.eq_ignore_ascii_case(tag))
            .collect()
    };
    // Section 4.3: issuewild records, when there are any, govern
    // wildcards instead of issue records.
    let mut governing = match wildcard {
        true => tagged("issuewild"),
        false => Vec::new(),
    };
    if governing.is_empty() {
        governing = tagged("issue");
    }
    if governing.is_empty() || governing.iter().any(|r| names(r, ca)) {
        return Ok(());
    }
    Err(Refusal::NotListed(governing.into_iter().cloned().collect()))
}

/// Does this issue/issuewild value name `ca`? The value is an issuer
/// domain name, optionally followed by `;` and parameters; an empty name
/// (`";"`) names no CA.
fn names(record: &CaaRecord, ca: &str) -> bool {
    let issuer = record.value.split(';').next().unwrap_or_default().trim();
    !issuer.is_empty() && issuer.trim_end_matches('.').eq_ignore_ascii_case(ca)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr(flags: u8, tag: &str, value: &str) -> CaaRecord {
        CaaRecord {
            flags,
            tag: tag.to_string(),
            value: value.to_string(),
        }
    }

    const LE: &str = "letsencrypt.org";

    #[test]
    fn no_caa_anywhere_lets_every_ca_issue() {
        assert_eq!(permits(&[], LE, false), Ok(()));
        assert_eq!(permits(&[], LE, true), Ok(()));
    }

    #[test]
    fn issue_lists_the_cas_that_may_issue() {
        let set = [
            rr(0, "issue", "digicert.com"),
            rr(0, "issue", "letsencrypt.org; validationmethods=dns-01"),
        ];
        assert_eq!(permits(&set, LE, false), Ok(()));
        assert_eq!(permits(&set, "LetsEncrypt.org", false), Ok(()));
        let refused = permits(&set, "sectigo.com", false).unwrap_err();
        assert_eq!(
            refused.records(),
            [
                "0 issue \"digicert.com\"",
                "0 issue \"letsencrypt.org; validationmethods=dns-01\""
            ]
        );
    }

    #[test]
    fn an_empty_issuer_forbids_every_ca() {
        let set = [rr(0, "issue", ";")];
        assert_eq!(
            permits(&set, LE, false),
            Err(Refusal::NotListed(vec![rr(0, "issue", ";")]))
        );
    }

    #[test]
    fn only_iodef_restricts_nothing() {
        let set = [rr(0, "iodef", "mailto:security@example.com")];
        assert_eq!(permits(&set, LE, false), Ok(()));
        assert_eq!(permits(&set, LE, true), Ok(()));
    }

    #[test]
    fn issuewild_takes_precedence_for_wildcards_only() {
        let set = [
            rr(0, "issue", "letsencrypt.org"),
            rr(0, "issuewild", "digicert.com"),
        ];
        assert_eq!(permits(&set, LE, false), Ok(()));
        assert_eq!(
            permits(&set, LE, true),
            Err(Refusal::NotListed(vec![rr(0, "issuewild", "digicert.com")]))
        );
        assert_eq!(permits(&set, "digicert.com", true), Ok(()));
        assert!(permits(&set, "digicert.com", false).is_err());
    }

    #[test]
    fn wildcards_fall_back_to_issue_without_issuewild() {
        let set = [rr(0, "issue", "letsencrypt.org")];
        assert_eq!(permits(&set, LE, true), Ok(()));
        assert!(permits(&set, "digicert.com", true).is_err());
    }

    #[test]
    fn an_unknown_critical_tag_forbids_issuance_a_known_one_does_not() {
        let set = [rr(0, "issue", "letsencrypt.org"), rr(128, "tbs", "unknown")];
        assert_eq!(
            permits(&set, LE, false),
            Err(Refusal::UnknownCritical(rr(128, "tbs", "unknown")))
        );
        let set = [rr(0, "issue", "letsencrypt.org"), rr(0, "tbs", "unknown")];
        assert_eq!(permits(&set, LE, false), Ok(()));
        let set = [rr(128, "issue", "letsencrypt.org")];
        assert_eq!(permits(&set, LE, false), Ok(()));
    }
}
