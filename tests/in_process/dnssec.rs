//! DNSSEC validation of dns checks (`[check.dns] dnssec = true`) against
//! the loopback server's signed zones (`tests/common/dns.rs`), anchored at
//! its `test.` zone through a `trust_anchor_file` each test writes: a
//! signed zone is secure and judged as before, one changed after signing
//! is bogus and down naming the record, an unsigned one is insecure and up
//! unless `expect.dnssec = "secure"`. Every check sets `resolvers`, so no
//! query leaves the machine.

use crate::common::dns::{DnsServer, ACCOUNT, FORGED_A, SIGNED_A};
use crate::common::env::{failure, pretty, Env};
use crate::dns::assert_failures;
use vigie::check::{CheckKind, TrustAnchor};
use vigie::outcome::{DnsReport, Dnssec, DnssecAnswer, Outcome};

/// One dns check asking `server` about `query` with `expect`, validated
/// from the anchor file holding `anchor`.
async fn validated_with(server: &DnsServer, anchor: &str, query: &str, expect: &str) -> Outcome {
    let env = Env::new();
    let file = env.path().join("test.anchor");
    std::fs::write(&file, anchor).expect("write the trust anchor file");
    env.write_checks(
        "dns.toml",
        &format!(
            "[[check]]\nname = \"t\"\nkind = \"dns\"\nquery = {query:?}\nresolvers = [\"{}\"]\n\n\
             [check.dns]\ndnssec = true\ntrust_anchor_file = {:?}\n\n[check.expect]\n{expect}\n",
            server.addr,
            file.display().to_string()
        ),
    );
    env.run_all().await.remove(0)
}

/// As [`validated_with`], anchored at the server's `test.` key.
async fn validated(server: &DnsServer, query: &str, expect: &str) -> Outcome {
    validated_with(server, &server.anchor, query, expect).await
}

fn report(outcome: &Outcome) -> &DnsReport {
    outcome
        .dns
        .as_ref()
        .unwrap_or_else(|| panic!("no dns report in {}", pretty(outcome)))
}

/// The questions asked and their verdicts, as `(type, name, verdict)`.
fn answers(outcome: &Outcome) -> Vec<(String, String, Dnssec)> {
    report(outcome)
        .dnssec_answers
        .iter()
        .map(
            |DnssecAnswer {
                 record_type,
                 name,
                 dnssec,
             }| { (record_type.clone(), name.clone(), *dnssec) },
        )
        .collect()
}

fn answer(record_type: &str, name: &str, dnssec: Dnssec) -> (String, String, Dnssec) {
    (record_type.to_string(), name.to_string(), dnssec)
}

fn bound(more: &str) -> String {
    format!("caa_issue = [\"letsencrypt.org\"]\ncaa_accounturi = {ACCOUNT:?}\n{more}")
}

/// `bound.test` is signed, with a DS record in `test.`: its CAA answer
/// validates through the chain from the anchor, and the RFC 8657 binding
/// is judged as without DNSSEC, a wrong account still down.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_caa_with_accounturi_is_secure_and_judged_as_before() {
    let server = DnsServer::start();
    let outcome = validated(
        &server,
        "bound.test",
        &bound("caa_validationmethods = [\"dns-01\"]"),
    )
    .await;
    assert_failures(&outcome, &[]);
    assert_eq!(report(&outcome).dnssec, Some(Dnssec::Secure));
    assert_eq!(
        answers(&outcome),
        [answer("CAA", "bound.test.", Dnssec::Secure)]
    );
    let json = serde_json::to_string(&outcome).unwrap();
    assert!(json.contains(r#""dnssec":"secure""#), "{json}");

    // `www` has no CAA: the signed denial (NSEC) is secure too, and the
    // climb goes on to the apex.
    let outcome = validated(&server, "www.bound.test", &bound("")).await;
    assert_failures(&outcome, &[]);
    assert_eq!(
        answers(&outcome),
        [
            answer("CAA", "www.bound.test.", Dnssec::Secure),
            answer("CAA", "bound.test.", Dnssec::Secure),
        ]
    );

    let outcome = validated(&server, "other.bound.test", &bound("")).await;
    assert_failures(&outcome, &["dns.caa_accounturi"]);
    assert_eq!(report(&outcome).dnssec, Some(Dnssec::Secure));
}

/// A retired name in a signed zone: the NXDOMAIN is proven (NSEC), so
/// `exists = false` holds, securely.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_denial_proves_a_retired_name_gone() {
    let server = DnsServer::start();
    let outcome = validated(&server, "retired.bound.test", "exists = false").await;
    assert_failures(&outcome, &[]);
    assert!(report(&outcome).nxdomain, "{}", pretty(&outcome));
    assert_eq!(
        answers(&outcome),
        [answer("A", "retired.bound.test.", Dnssec::Secure)]
    );
}

/// `www.broken.test`'s A record was changed after the zone was signed:
/// bogus, down with the reason naming type and name, and the address is
/// not judged (no validating resolver passes it on) though it is reported.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_changed_after_signing_is_bogus_and_down() {
    let server = DnsServer::start();
    let outcome = validated(&server, "www.broken.test", &format!("a = [{SIGNED_A:?}]")).await;
    assert_failures(&outcome, &["dns.dnssec"]);
    let f = failure(&outcome, "dns.dnssec");
    assert_eq!(
        f.message,
        "A answer for www.broken.test fails DNSSEC validation: resolvers that validate return SERVFAIL: the name does not resolve for their users"
    );
    assert_eq!(f.observed, "A www.broken.test: bogus");
    assert_eq!(
        f.expected,
        "a A answer for www.broken.test that passes DNSSEC validation"
    );
    let report = report(&outcome);
    assert_eq!(report.dnssec, Some(Dnssec::Bogus));
    assert_eq!(report.a.as_deref(), Some(&[FORGED_A.to_string()][..]));
}

/// The CAA record of `broken.test` changed after signing: CAs validate
/// CAA lookups and refuse to issue. The forged record (another CA) is not
/// judged: the DNSSEC failure is the one reason.
#[tokio::test(flavor = "multi_thread")]
async fn caa_changed_after_signing_refuses_issuance() {
    let server = DnsServer::start();
    let expect = "caa_issue = [\"letsencrypt.org\"]";
    let outcome = validated(&server, "broken.test", expect).await;
    assert_failures(&outcome, &["dns.dnssec"]);
    let f = failure(&outcome, "dns.dnssec");
    assert_eq!(
        f.message,
        "CAA answer for broken.test fails DNSSEC validation: CAs refuse to issue"
    );
    assert_eq!(f.observed, "CAA broken.test: bogus");

    // Found by climbing from `www`, whose own (signed) denial is fine.
    let outcome = validated(&server, "www.broken.test", expect).await;
    assert_failures(&outcome, &["dns.dnssec"]);
    assert_eq!(
        failure(&outcome, "dns.dnssec").message,
        "CAA answer for broken.test fails DNSSEC validation: CAs refuse to issue for www.broken.test"
    );
    assert_eq!(
        answers(&outcome),
        [
            answer("CAA", "www.broken.test.", Dnssec::Secure),
            answer("CAA", "broken.test.", Dnssec::Bogus),
        ]
    );
}

/// The CAA record of `stripped.broken.test` was deleted after signing (or
/// stripped on the way): the NSEC still lists CAA, so the denial is bogus.
/// The climb stops there, as a CA's does: the apex's CAA is not asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_caa_record_deleted_after_signing_is_a_bogus_denial_that_ends_the_climb() {
    let server = DnsServer::start();
    let outcome = validated(
        &server,
        "stripped.broken.test",
        "caa_issue = [\"letsencrypt.org\"]",
    )
    .await;
    assert_failures(&outcome, &["dns.dnssec"]);
    assert_eq!(
        failure(&outcome, "dns.dnssec").message,
        "CAA answer for stripped.broken.test fails DNSSEC validation: CAs refuse to issue"
    );
    assert_eq!(
        answers(&outcome),
        [answer("CAA", "stripped.broken.test.", Dnssec::Bogus)]
    );
}

/// `example.test` and `nocaa.test` are not signed, and `test.` proves it
/// (no DS, under NSEC): insecure, a fact in the report, up. The climb
/// from `www.nocaa.test` reaches the signed `test.` itself. With
/// `expect.dnssec = "secure"` the unsigned answers are down.
#[tokio::test(flavor = "multi_thread")]
async fn an_unsigned_zone_is_insecure_and_up_unless_secure_is_expected() {
    let server = DnsServer::start();
    let expect = "a = [\"192.0.2.10\", \"192.0.2.11\"]\ncaa_issue = [\"letsencrypt.org\"]";
    let outcome = validated(&server, "www.example.test", expect).await;
    assert_failures(&outcome, &[]);
    assert_eq!(report(&outcome).dnssec, Some(Dnssec::Insecure));
    assert_eq!(
        answers(&outcome),
        [
            answer("A", "www.example.test.", Dnssec::Insecure),
            answer("CAA", "www.example.test.", Dnssec::Insecure),
            answer("CAA", "example.test.", Dnssec::Insecure),
        ]
    );

    let outcome = validated(
        &server,
        "www.nocaa.test",
        "caa_issue = [\"letsencrypt.org\"]",
    )
    .await;
    assert_failures(&outcome, &[]);
    assert_eq!(
        answers(&outcome),
        [
            answer("CAA", "www.nocaa.test.", Dnssec::Insecure),
            answer("CAA", "nocaa.test.", Dnssec::Insecure),
            answer("CAA", "test.", Dnssec::Secure),
        ]
    );
    assert_eq!(report(&outcome).dnssec, Some(Dnssec::Insecure));

    let outcome = validated(
        &server,
        "www.example.test",
        &format!("{expect}\ndnssec = \"secure\""),
    )
    .await;
    assert_failures(&outcome, &["dns.dnssec"]);
    let f = failure(&outcome, "dns.dnssec");
    assert_eq!(
        f.message,
        "www.example.test is not signed: the answers to A www.example.test, CAA www.example.test, CAA example.test are DNSSEC insecure (no chain of DS records from the trust anchor reaches them)"
    );
    // A signed zone meets the same expectation.
    let outcome = validated(&server, "bound.test", &bound("dnssec = \"secure\"")).await;
    assert_failures(&outcome, &[]);
}

/// Without `[check.dns]`, nothing is validated: the forged address is
/// what the check sees, and the report says nothing of DNSSEC.
#[tokio::test(flavor = "multi_thread")]
async fn without_validation_the_forged_record_is_taken_as_served() {
    let server = DnsServer::start();
    let env = Env::new();
    env.write_checks(
        "dns.toml",
        &format!(
            "[[check]]\nname = \"t\"\nkind = \"dns\"\nquery = \"www.broken.test\"\nresolvers = [\"{}\"]\n\n[check.expect]\na = [{SIGNED_A:?}]\n",
            server.addr
        ),
    );
    let outcome = env.run_all().await.remove(0);
    assert_failures(&outcome, &["dns.a"]);
    assert_eq!(failure(&outcome, "dns.a").observed, format!("A {FORGED_A}"));
    let report = report(&outcome);
    assert_eq!(report.dnssec, None);
    assert!(report.dnssec_answers.is_empty());
    assert!(!serde_json::to_string(&outcome).unwrap().contains("dnssec"));
}

/// An anchor that is not the zone's key (a key rolled over, the wrong
/// file): nothing chains up to it, so the signed answer is bogus.
#[tokio::test(flavor = "multi_thread")]
async fn an_anchor_that_is_not_the_zones_key_makes_its_answers_bogus() {
    let server = DnsServer::start();
    // RFC 6605's example P-256 key.
    let other = "test. 3600 IN DNSKEY 257 3 13 GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edbkrSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA==\n";
    let outcome = validated_with(&server, other, "bound.test", &bound("")).await;
    assert_failures(&outcome, &["dns.dnssec"]);
    assert_eq!(
        failure(&outcome, "dns.dnssec").message,
        "CAA answer for bound.test fails DNSSEC validation: CAs refuse to issue"
    );
    assert_eq!(report(&outcome).dnssec, Some(Dnssec::Bogus));
}

/// A trust anchor file holding a DS record, or no record at all, is
/// refused when the config is read, naming the file and the problem.
#[test]
fn a_bad_trust_anchor_file_is_a_config_error_naming_the_file() {
    let cases = [
        (
            "example.com. 3600 IN DS 370 13 2 BE74359954660069D5C63D200C39F5603827D7DD02B56F120EE9F3A86764247C\n",
            "line 1: example.com. has a DS record; vigie anchors at DNSKEY records, not at their digests: write DNSKEY records as `dig +noall +answer DNSKEY example.com.` prints them",
        ),
        ("\n; nothing\n", "holds no DNSKEY record: "),
    ];
    for (text, problem) in cases {
        let env = Env::new();
        let file = env.path().join("root.anchor");
        std::fs::write(&file, text).unwrap();
        env.write_checks(
            "dns.toml",
            "[[check]]\nname = \"t\"\nkind = \"dns\"\nquery = \"example.com\"\n\n\
             [check.dns]\ndnssec = true\ntrust_anchor_file = \"../root.anchor\"\n\n\
             [check.expect]\ncaa_issue = [\"letsencrypt.org\"]\n",
        );
        let errors = match vigie::config::load(&env.config_path()) {
            Ok(_) => panic!("a config with a bad trust anchor file loaded"),
            Err(errors) => errors.to_string(),
        };
        let expected = format!(
            "checks/dns.toml:8:21: `dns.trust_anchor_file`: {}: {problem}",
            env.path().join("checks/../root.anchor").display()
        );
        assert!(errors.contains(&expected), "{errors}\nexpected: {expected}");
    }
}

/// Without `trust_anchor_file`, validation starts at the root zone's keys
/// that hickory ships.
#[test]
fn validation_starts_at_the_root_by_default() {
    let env = Env::new();
    env.write_checks(
        "dns.toml",
        "[[check]]\nname = \"t\"\nkind = \"dns\"\nquery = \"example.com\"\n\n\
         [check.dns]\ndnssec = true\n\n[check.expect]\ncaa_issue = [\"letsencrypt.org\"]\n",
    );
    let config = env.load();
    let checks = config.all_checks();
    let CheckKind::Dns(dns) = &checks[0].kind else {
        panic!("not a dns check: {:?}", checks[0]);
    };
    assert!(
        matches!(dns.dnssec, Some(TrustAnchor::Root)),
        "{:?}",
        dns.dnssec
    );
}

/// A question the server refuses (no zone of its own): under validation
/// too, the failure is the server's answer, not the validator's
/// confusion over a denial without records.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_question_is_a_dns_failure_naming_the_servers_answer() {
    let server = DnsServer::start();
    let outcome = validated(&server, "www.elsewhere.example", "a = [\"*\"]").await;
    assert_failures(&outcome, &["dns"]);
    assert_eq!(
        failure(&outcome, "dns").message,
        "the resolver answered Query Refused to A www.elsewhere.example."
    );
}
