//! RFC 8659 issuance rules on one relevant CAA RRset, pure: may this CA
//! issue for the name (or a wildcard under it), and if not, which records
//! refuse it; and RFC 8657's parameters on the records that authorise it:
//! which ACME account (`accounturi`) and which validation methods
//! (`validationmethods`) they let the CA accept. Finding the relevant
//! RRset (climbing to parents) is the probe's job (`probe::dns`); reading
//! an issue value's parameters is `caa_value`'s.

use super::caa_value::IssueValue;
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
    let governing = governing(records, wildcard);
    if governing.is_empty() || !naming(&governing, ca).is_empty() {
        return Ok(());
    }
    Err(Refusal::NotListed(governing.into_iter().cloned().collect()))
}

/// The records that decide: section 4.3, issuewild records, when there are
/// any, govern wildcards instead of issue records.
fn governing(records: &[CaaRecord], wildcard: bool) -> Vec<&CaaRecord> {
    let tagged = |tag: &str| -> Vec<&CaaRecord> {
        records
            .iter()
            .filter(|r| r.tag.eq_ignore_ascii_case(tag))
            .collect()
    };
    let wild = match wildcard {
        true => tagged("issuewild"),
        false => Vec::new(),
    };
    match wild.is_empty() {
        true => tagged("issue"),
        false => wild,
    }
}

/// The governing records that name `ca`, with their parameters. A value
/// that does not follow RFC 8659's grammar names no CA: CAs such as Let's
/// Encrypt skip it rather than guess, and so does the judgment here (an
/// empty issuer, `";"`, names none either).
fn naming<'r>(governing: &[&'r CaaRecord], ca: &str) -> Vec<(&'r CaaRecord, IssueValue)> {
    governing
        .iter()
        .filter_map(|r| Some((*r, IssueValue::parse(&r.value).ok()?)))
        .filter(|(_, value)| {
            value
                .issuer
                .as_deref()
                .is_some_and(|i| i.trim_end_matches('.').eq_ignore_ascii_case(ca))
        })
        .collect()
}

/// Why the records that let `ca` issue do not let *this* renewal through
/// (RFC 8657), each with the records concerned, as in a zone file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unbound {
    /// `expect.caa_accounturi` is set but these records name the CA
    /// without `accounturi`: any account of the CA may issue. RFC 8657
    /// permits it; the operator asked for the binding, so it fails.
    AnyAccount(Vec<String>),
    /// No CAA record at all, or none governing: nothing binds an account.
    NoRecord,
    /// Every record naming the CA binds another account (its
    /// `accounturi` shown in the record).
    OtherAccount(Vec<String>),
    /// The records that admit the account allow none of these methods.
    Methods {
        missing: Vec<String>,
        records: Vec<String>,
    },
}

/// Is issuance by `ca` bound to `account` (when given), and does some
/// record admitting that account allow each of `methods`? Only judged
/// when [`permits`] lets `ca` issue: a refused CA is `dns.caa`'s failure.
pub fn binds(
    records: &[CaaRecord],
    ca: &str,
    wildcard: bool,
    account: Option<&str>,
    methods: &[String],
) -> Vec<Unbound> {
    let governing = governing(records, wildcard);
    let naming = naming(&governing, ca);
    let mut unbound = Vec::new();
    // Section 3: a record with `accounturi` authorises that account
    // alone; the URI is compared as a plain string.
    let admitting: Vec<&(&CaaRecord, IssueValue)> = naming
        .iter()
        .filter(|(_, v)| account.is_none() || v.accounturi().is_none_or(|a| Some(a) == account))
        .collect();
    if account.is_some() {
        let open: Vec<String> = naming
            .iter()
            .filter(|(_, v)| v.accounturi().is_none())
            .map(|(r, _)| r.to_string())
            .collect();
        if governing.is_empty() {
            unbound.push(Unbound::NoRecord);
        } else if !open.is_empty() {
            unbound.push(Unbound::AnyAccount(open));
        } else if admitting.is_empty() {
            let shown = naming.iter().map(|(r, _)| r.to_string()).collect();
            unbound.push(Unbound::OtherAccount(shown));
        }
        if admitting.is_empty() {
            return unbound;
        }
    }
    // Section 4: without `validationmethods` a record allows every method.
    let missing: Vec<String> = methods
        .iter()
        .filter(|m| {
            !admitting.is_empty()
                && !admitting
                    .iter()
                    .any(|(_, v)| v.validationmethods().is_none_or(|list| list.contains(m)))
        })
        .cloned()
        .collect();
    if !missing.is_empty() {
        let records = admitting.iter().map(|(r, _)| r.to_string()).collect();
        unbound.push(Unbound::Methods { missing, records });
    }
    unbound
}

/// The governing records whose value does not follow RFC 8659's grammar,
/// each with what is wrong: they authorise no CA, which a refusal says.
pub fn unreadable(records: &[CaaRecord], wildcard: bool) -> Vec<String> {
    governing(records, wildcard)
        .into_iter()
        .filter_map(|r| {
            let problem = IssueValue::parse(&r.value).err()?;
            Some(format!("{r}: {problem}"))
        })
        .collect()
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

    const ACCT: &str = "https://acme-v02.api.letsencrypt.org/acme/acct/123";

    fn methods(list: &[&str]) -> Vec<String> {
        list.iter().map(|m| m.to_string()).collect()
    }

    #[test]
    fn a_record_with_the_account_binds_it() {
        let set = [rr(
            0,
            "issue",
            &format!("letsencrypt.org; accounturi={ACCT}"),
        )];
        assert_eq!(binds(&set, LE, false, Some(ACCT), &[]), []);
    }

    #[test]
    fn another_account_does_not_authorise_this_one() {
        let other = rr(
            0,
            "issue",
            "letsencrypt.org; accounturi=https://acme.example/acct/999",
        );
        assert_eq!(
            binds(
                std::slice::from_ref(&other),
                LE,
                false,
                Some(ACCT),
                &methods(&["dns-01"])
            ),
            [Unbound::OtherAccount(vec![other.to_string()])]
        );
    }

    #[test]
    fn a_record_without_accounturi_leaves_any_account_free() {
        let set = [
            rr(0, "issue", &format!("letsencrypt.org; accounturi={ACCT}")),
            rr(0, "issue", "letsencrypt.org"),
        ];
        assert_eq!(
            binds(&set, LE, false, Some(ACCT), &[]),
            [Unbound::AnyAccount(vec![
                "0 issue \"letsencrypt.org\"".to_string()
            ])]
        );
        assert_eq!(binds(&[], LE, false, Some(ACCT), &[]), [Unbound::NoRecord]);
        // Without an expected account, nothing is asked of accounturi.
        assert_eq!(binds(&set, LE, false, None, &[]), []);
    }

    #[test]
    fn methods_are_judged_on_the_records_admitting_the_account() {
        let set = [
            rr(
                0,
                "issue",
                &format!("letsencrypt.org; accounturi={ACCT}; validationmethods=http-01"),
            ),
            rr(
                0,
                "issue",
                "letsencrypt.org; accounturi=https://x.example/1; validationmethods=dns-01",
            ),
        ];
        assert_eq!(
            binds(
                &set,
                LE,
                false,
                Some(ACCT),
                &methods(&["dns-01", "http-01"])
            ),
            [Unbound::Methods {
                missing: methods(&["dns-01"]),
                records: vec![set[0].to_string()],
            }]
        );
        assert_eq!(binds(&set, LE, false, None, &methods(&["dns-01"])), []);
    }

    #[test]
    fn no_validationmethods_allows_every_method() {
        let set = [rr(0, "issue", "letsencrypt.org")];
        assert_eq!(binds(&set, LE, false, None, &methods(&["tls-alpn-01"])), []);
        assert_eq!(binds(&[], LE, false, None, &methods(&["dns-01"])), []);
    }

    #[test]
    fn wildcards_are_bound_by_issuewild() {
        let set = [
            rr(0, "issue", &format!("letsencrypt.org; accounturi={ACCT}")),
            rr(0, "issuewild", "letsencrypt.org; validationmethods=http-01"),
        ];
        assert_eq!(
            binds(&set, LE, false, Some(ACCT), &methods(&["dns-01"])),
            []
        );
        assert_eq!(
            binds(&set, LE, true, Some(ACCT), &[]),
            [Unbound::AnyAccount(vec![set[1].to_string()])]
        );
    }

    #[test]
    fn an_unreadable_record_authorises_no_ca() {
        let set = [rr(0, "issue", "letsencrypt.org; accounturi")];
        assert_eq!(
            permits(&set, LE, false),
            Err(Refusal::NotListed(set.to_vec()))
        );
        assert_eq!(
            unreadable(&set, false),
            ["0 issue \"letsencrypt.org; accounturi\": parameter \"accounturi\" is not tag=value"]
        );
    }
}
