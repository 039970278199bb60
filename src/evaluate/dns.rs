//! Judging a dns outcome: the CNAME, CAA (with its account and method
//! binding), A/AAAA and TXT expectations of a `kind = "dns"` check against
//! what the resolvers answered, after DNSSEC's verdicts (`dnssec.rs`): the
//! records of an answer that fails validation are not judged, since no
//! validating resolver passes them on.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::caa::{self, Refusal, Unbound};
use super::dnssec;
use crate::check::{AddressSet, DnsCheck, DnsExpect};
use crate::outcome::{Assertion, CaaReport, DnsReport, Failure};

pub(super) fn judge(check: &DnsCheck, report: &DnsReport, out: &mut Vec<Failure>) {
    dnssec::judge(check, report, out);
    let judged = |rtype: &str| !dnssec::unvalidated(report, rtype);
    let expect = &check.expect;
    let name = report.query.trim_end_matches('.');
    // `exists = false` asks for A records: a denial that fails
    // validation proves nothing either way.
    let existence = expect.exists || judged("A");
    // First, and whatever else is judged: a parent's CAA, found by the
    // climb, would otherwise make a missing name look fine.
    match (expect.exists, report.nxdomain) {
        _ if !existence => {}
        (true, true) => out.push(Failure {
            assertion: Assertion::Dns,
            expected: format!("{name} exists"),
            observed: "NXDOMAIN".to_string(),
            message: format!("{name} does not exist (NXDOMAIN)"),
        }),
        (false, false) => out.push(Failure {
            assertion: Assertion::Dns,
            expected: format!("{name} does not exist (NXDOMAIN)"),
            observed: "it exists".to_string(),
            message: format!("{name} exists, though `expect.exists = false` says it must not"),
        }),
        _ => {}
    }
    if let Some(cname) = expect.cname.as_ref().filter(|_| judged("CNAME")) {
        judge_cname(cname, report, out);
    }
    if let Some(set) = expect.a.as_ref().filter(|_| judged("A")) {
        judge_addresses(Assertion::DnsA, "A", set, report.a.as_deref(), report, out);
    }
    if let Some(set) = expect.aaaa.as_ref().filter(|_| judged("AAAA")) {
        judge_addresses(
            Assertion::DnsAaaa,
            "AAAA",
            set,
            report.aaaa.as_deref(),
            report,
            out,
        );
    }
    if let Some(pattern) = expect.txt_regex.as_ref().filter(|_| judged("TXT")) {
        let txt = report.txt.as_deref().unwrap_or_default();
        if !txt.iter().any(|t| pattern.is_match(t)) {
            out.push(Failure {
                assertion: Assertion::DnsTxt,
                expected: format!("a TXT record matching /{pattern}/"),
                observed: observed_list(txt, "TXT", report),
                message: format!("no TXT record of {} matches /{pattern}/", report.query),
            });
        }
    }
    if !judged("CAA") {
        return;
    }
    let empty = CaaReport::default();
    let caa = report.caa.as_ref().unwrap_or(&empty);
    let wanted = expect.caa_issue.iter().map(|ca| (ca, false));
    for (ca, wildcard) in wanted.chain(expect.caa_issuewild.iter().map(|ca| (ca, true))) {
        // A CA that may not issue at all is `dns.caa`'s failure alone.
        if judge_caa(ca, wildcard, caa, report, out) {
            judge_binding(expect, ca, wildcard, caa, report, out);
        }
    }
}

fn judge_cname(expected: &str, report: &DnsReport, out: &mut Vec<Failure>) {
    if report
        .cname
        .as_deref()
        .is_some_and(|c| c.eq_ignore_ascii_case(expected))
    {
        return;
    }
    let (observed, message) = match (&report.cname, report.nxdomain) {
        (Some(other), _) => (
            format!("CNAME {other}"),
            format!("{} points to {other}, not to {expected}", report.query),
        ),
        (None, true) => (
            "NXDOMAIN (the name does not exist)".to_string(),
            format!(
                "{} does not exist: the CNAME to {expected} is gone",
                report.query
            ),
        ),
        (None, false) => (
            "no CNAME".to_string(),
            format!("{} has no CNAME (expected one to {expected})", report.query),
        ),
    };
    out.push(Failure {
        assertion: Assertion::DnsCname,
        expected: format!("CNAME {expected}"),
        observed,
        message,
    });
}

fn judge_addresses(
    assertion: Assertion,
    rtype: &str,
    expected: &AddressSet,
    observed: Option<&[String]>,
    report: &DnsReport,
    out: &mut Vec<Failure>,
) {
    let observed = observed.unwrap_or_default();
    let seen: BTreeSet<IpAddr> = observed.iter().filter_map(|a| a.parse().ok()).collect();
    let (holds, expected_text) = match expected {
        AddressSet::Any => (!seen.is_empty(), format!("at least one {rtype} record")),
        AddressSet::Exactly(want) => (
            &seen == want,
            format!(
                "{rtype} {}",
                want.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    };
    if holds {
        return;
    }
    let observed_text = observed_list(observed, rtype, report);
    out.push(Failure {
        assertion,
        message: format!(
            "{} has {observed_text}, expected {expected_text}",
            report.query
        ),
        expected: expected_text,
        observed: observed_text,
    });
}

/// "A 192.0.2.1, 192.0.2.2", "A 192.0.2.1, ... and 36 more", "no A
/// record" or "NXDOMAIN".
fn observed_list(values: &[String], rtype: &str, report: &DnsReport) -> String {
    let more = match report.more.get(rtype) {
        Some(n) => format!(" and {n} more"),
        None => String::new(),
    };
    match (values.is_empty(), report.nxdomain) {
        (false, _) => format!("{rtype} {}{more}", values.join(", ")),
        (true, true) => "NXDOMAIN (the name does not exist)".to_string(),
        (true, false) => format!("no {rtype} record"),
    }
}

/// Whether `ca` may issue; a failure says which records refuse it.
fn judge_caa(
    ca: &str,
    wildcard: bool,
    caa: &CaaReport,
    report: &DnsReport,
    out: &mut Vec<Failure>,
) -> bool {
    let Err(refusal) = caa::permits(&caa.records, ca, wildcard) else {
        return true;
    };
    let what = certificate(wildcard, report);
    let at = caa.domain.as_deref().unwrap_or(&report.query);
    let records = refusal.records().join(", ");
    let unreadable = caa::unreadable(&caa.records, wildcard);
    let reason = match &refusal {
        Refusal::UnknownCritical(_) => {
            "a critical record no CA understands forbids every CA".to_string()
        }
        Refusal::NotListed(_) if unreadable.is_empty() => "it is not named".to_string(),
        Refusal::NotListed(_) => format!(
            "it is not named by a record a CA can read; unreadable, so authorising no CA: {}",
            unreadable.join("; ")
        ),
    };
    out.push(Failure {
        assertion: Assertion::DnsCaa,
        expected: format!("CAA lets {ca} issue {what}"),
        observed: format!("CAA at {at}: {records}"),
        message: format!("CAA at {at} refuses {ca} {what} ({reason}): {records}"),
    });
    false
}

fn certificate(wildcard: bool, report: &DnsReport) -> String {
    match wildcard {
        true => format!("a wildcard certificate for *.{}", report.query),
        false => format!("a certificate for {}", report.query),
    }
}

/// RFC 8657: the records letting `ca` issue must bind the renewal's
/// account and allow its validation methods.
fn judge_binding(
    expect: &DnsExpect,
    ca: &str,
    wildcard: bool,
    caa: &CaaReport,
    report: &DnsReport,
    out: &mut Vec<Failure>,
) {
    let account = expect.caa_accounturi.as_deref();
    let methods = &expect.caa_validationmethods;
    if account.is_none() && methods.is_empty() {
        return;
    }
    let at = caa.domain.as_deref().unwrap_or(&report.query);
    let what = certificate(wildcard, report);
    let named = account.unwrap_or_default();
    for unbound in caa::binds(&caa.records, ca, wildcard, account, methods) {
        let records = match &unbound {
            Unbound::NoRecord => Vec::new(),
            Unbound::AnyAccount(records) | Unbound::OtherAccount(records) => records.clone(),
            Unbound::Methods { records, .. } => records.clone(),
        };
        let shown = records.join(", ");
        let (assertion, message) = match &unbound {
            Unbound::NoRecord => (
                Assertion::DnsCaaAccounturi,
                format!("no CAA record binds {what} to an account: any account of any CA may issue (add 0 issue \"{ca}; accounturi={named}\")"),
            ),
            Unbound::AnyAccount(_) => (
                Assertion::DnsCaaAccounturi,
                format!("CAA {shown} at {at} has no accounturi: not bound, any account of {ca} may issue {what}"),
            ),
            Unbound::OtherAccount(_) => (
                Assertion::DnsCaaAccounturi,
                format!("CAA {shown} at {at} binds another account than {named}: renewal will be refused"),
            ),
            Unbound::Methods { missing, .. } => (
                Assertion::DnsCaaValidationmethods,
                format!("CAA {shown} at {at} does not allow validationmethods {}: renewal will be refused", missing.join(", ")),
            ),
        };
        let expected = match assertion {
            Assertion::DnsCaaValidationmethods => {
                format!("CAA lets {ca} validate {what} with {}", methods.join(", "))
            }
            _ => format!("CAA binds {what} by {ca} to account {named}"),
        };
        let observed = match records.is_empty() {
            true => format!("no CAA record for {}", report.query),
            false => format!("CAA at {at}: {shown}"),
        };
        out.push(Failure {
            assertion,
            expected,
            observed,
            message,
        });
    }
}
