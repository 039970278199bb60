//! Judging what DNSSEC validation made of a dns check's answers
//! (`[check.dns] dnssec = true`).
//!
//! A bogus answer is down, and the message says what breaks for whoever
//! relies on the record: CAs validate CAA lookups and refuse to issue on a
//! bogus one, and every validating resolver answers SERVFAIL instead of
//! the records. An indeterminate answer (the keys and signatures needed
//! could not be had) is down too: vigie was asked to validate and cannot
//! say the answer is good. An insecure answer (a zone its signed parent
//! proves unsigned) is how most of the DNS still is: a fact in the report,
//! down only with `expect.dnssec = "secure"`.

use crate::check::DnsCheck;
use crate::outcome::{Assertion, DnsReport, Dnssec, DnssecAnswer, Failure};

pub(super) fn judge(check: &DnsCheck, report: &DnsReport, out: &mut Vec<Failure>) {
    if check.dnssec.is_none() {
        return;
    }
    let query = bare(&report.query);
    for answer in report.dnssec_answers.iter().filter(|a| !a.dnssec.passes()) {
        out.push(unvalidated_answer(answer, query));
    }
    if check.expect.dnssec_secure {
        judge_insecure(&report.dnssec_answers, query, out);
    }
}

/// Whether an answer of `record_type` failed validation (or could not be
/// validated): its records are then not judged, since no validating
/// resolver passes them on; the DNSSEC failure says so instead.
pub(super) fn unvalidated(report: &DnsReport, record_type: &str) -> bool {
    report
        .dnssec_answers
        .iter()
        .any(|a| a.record_type == record_type && !a.dnssec.passes())
}

fn unvalidated_answer(answer: &DnssecAnswer, query: &str) -> Failure {
    let (rtype, name) = (&answer.record_type, bare(&answer.name));
    let message = match answer.dnssec {
        Dnssec::Bogus => format!(
            "{rtype} answer for {name} fails DNSSEC validation: {}",
            consequence(rtype, name, query)
        ),
        _ => format!(
            "{rtype} answer for {name} cannot be validated (DNSSEC {}: the keys and signatures it takes could not be had); ask resolvers that pass DNSSEC records on",
            answer.dnssec
        ),
    };
    Failure {
        assertion: Assertion::DnsDnssec,
        expected: format!("a {rtype} answer for {name} that passes DNSSEC validation"),
        observed: format!("{rtype} {name}: {}", answer.dnssec),
        message,
    }
}

/// What a bogus answer of `rtype` breaks.
fn consequence(rtype: &str, name: &str, query: &str) -> String {
    match rtype {
        // RFC 8659 section 3: a CA whose CAA lookup fails validation must
        // not issue; the climb from `query` stopped at `name`.
        "CAA" if name == query => "CAs refuse to issue".to_string(),
        "CAA" => format!("CAs refuse to issue for {query}"),
        "CNAME" => "resolvers that validate return SERVFAIL, so ACME validation through this delegation fails".to_string(),
        "A" | "AAAA" => "resolvers that validate return SERVFAIL: the name does not resolve for their users".to_string(),
        _ => "resolvers that validate return SERVFAIL instead of the records".to_string(),
    }
}

/// `expect.dnssec = "secure"`: one failure naming every question whose
/// answer came from an unsigned zone.
fn judge_insecure(answers: &[DnssecAnswer], query: &str, out: &mut Vec<Failure>) {
    let insecure: Vec<String> = answers
        .iter()
        .filter(|a| a.dnssec == Dnssec::Insecure)
        .map(|a| format!("{} {}", a.record_type, bare(&a.name)))
        .collect();
    if insecure.is_empty() {
        return;
    }
    let questions = insecure.join(", ");
    out.push(Failure {
        assertion: Assertion::DnsDnssec,
        expected: format!("every answer for {query} signed and valid (DNSSEC secure)"),
        observed: format!("insecure: {questions}"),
        message: format!(
            "{query} is not signed: the answers to {questions} are DNSSEC insecure (no chain of DS records from the trust anchor reaches them)"
        ),
    });
}

/// A name without its final dot, as messages write it.
fn bare(name: &str) -> &str {
    name.trim_end_matches('.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{DnsExpect, TrustAnchor};

    fn check(secure: bool) -> DnsCheck {
        DnsCheck {
            query: "www.example.com.".to_string(),
            resolvers: None,
            dnssec: Some(TrustAnchor::Root),
            expect: DnsExpect {
                dnssec_secure: secure,
                ..DnsExpect::default()
            },
        }
    }

    fn report(answers: &[(&str, &str, Dnssec)]) -> DnsReport {
        let answers: Vec<DnssecAnswer> = answers
            .iter()
            .map(|(t, n, d)| DnssecAnswer {
                record_type: t.to_string(),
                name: n.to_string(),
                dnssec: *d,
            })
            .collect();
        DnsReport {
            query: "www.example.com.".to_string(),
            dnssec: answers.iter().map(|a| a.dnssec).reduce(Dnssec::weakest),
            dnssec_answers: answers,
            ..DnsReport::default()
        }
    }

    fn judged(check: &DnsCheck, report: &DnsReport) -> Vec<String> {
        let mut out = Vec::new();
        judge(check, report, &mut out);
        assert!(out.iter().all(|f| f.assertion == Assertion::DnsDnssec));
        out.into_iter().map(|f| f.message).collect()
    }

    #[test]
    fn a_bogus_answer_says_what_breaks_for_its_type() {
        let report = report(&[
            ("A", "www.example.com.", Dnssec::Bogus),
            ("CAA", "www.example.com.", Dnssec::Secure),
            ("CAA", "example.com.", Dnssec::Bogus),
            ("TXT", "www.example.com.", Dnssec::Bogus),
        ]);
        assert_eq!(
            judged(&check(false), &report),
            [
                "A answer for www.example.com fails DNSSEC validation: resolvers that validate return SERVFAIL: the name does not resolve for their users",
                "CAA answer for example.com fails DNSSEC validation: CAs refuse to issue for www.example.com",
                "TXT answer for www.example.com fails DNSSEC validation: resolvers that validate return SERVFAIL instead of the records",
            ]
        );
        assert!(unvalidated(&report, "CAA") && unvalidated(&report, "A"));
        assert!(!unvalidated(&report, "AAAA"));
    }

    #[test]
    fn a_bogus_caa_answer_at_the_name_itself_refuses_issuance() {
        let report = report(&[("CAA", "www.example.com.", Dnssec::Bogus)]);
        assert_eq!(
            judged(&check(false), &report),
            ["CAA answer for www.example.com fails DNSSEC validation: CAs refuse to issue"]
        );
    }

    #[test]
    fn an_indeterminate_answer_fails_saying_it_could_not_be_validated() {
        let report = report(&[("CNAME", "www.example.com.", Dnssec::Indeterminate)]);
        let messages = judged(&check(false), &report);
        assert_eq!(messages.len(), 1);
        assert!(
            messages[0].starts_with(
                "CNAME answer for www.example.com cannot be validated (DNSSEC indeterminate"
            ),
            "{messages:?}"
        );
    }

    #[test]
    fn insecure_answers_are_a_fact_unless_secure_is_expected() {
        let report = report(&[
            ("A", "www.example.com.", Dnssec::Insecure),
            ("CAA", "www.example.com.", Dnssec::Insecure),
            ("CAA", "example.com.", Dnssec::Insecure),
            ("CAA", "com.", Dnssec::Secure),
        ]);
        assert!(judged(&check(false), &report).is_empty());
        assert_eq!(
            judged(&check(true), &report),
            ["www.example.com is not signed: the answers to A www.example.com, CAA www.example.com, CAA example.com are DNSSEC insecure (no chain of DS records from the trust anchor reaches them)"]
        );
    }

    #[test]
    fn secure_answers_pass_and_nothing_is_judged_without_validation() {
        let secure = report(&[("A", "www.example.com.", Dnssec::Secure)]);
        assert!(judged(&check(true), &secure).is_empty());
        let bogus = report(&[("A", "www.example.com.", Dnssec::Bogus)]);
        let unvalidated_check = DnsCheck {
            dnssec: None,
            ..check(false)
        };
        assert!(judged(&unvalidated_check, &bogus).is_empty());
    }
}
