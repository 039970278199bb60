//! The dns check end to end against a real DNS server on loopback
//! (hickory-server, `tests/common/dns.rs`): the acme-dns delegation, CAA by
//! RFC 8659 (climbing to the parent, a refusing CA, issuewild), A/AAAA, TXT,
//! a deleted delegation and a resolver that never answers. Every check sets
//! `resolvers`, so no query leaves the machine.

use crate::common::dns::{
    DnsServer, SilentResolver, ACCOUNT, ACME_DNS_TARGET, MANY_A, OTHER_ACCOUNT,
};
use crate::common::env::{failure, pretty, Env};
use vigie::outcome::{Assertion, DnsReport, Outcome, Status};

/// Runs one dns check asking `resolver` about `query`, with `expect`
/// lines for `[check.expect]` and `extra` top-level keys.
async fn probe_dns(
    resolver: std::net::SocketAddr,
    query: &str,
    extra: &str,
    expect: &str,
) -> Outcome {
    let env = Env::new();
    env.write_checks(
        "dns.toml",
        &format!(
            "[[check]]\nname = \"t\"\nkind = \"dns\"\nquery = {query:?}\nresolvers = [\"{resolver}\"]\n{extra}\n[check.expect]\n{expect}\n"
        ),
    );
    env.run_all().await.remove(0)
}

fn report(outcome: &Outcome) -> &DnsReport {
    outcome
        .dns
        .as_ref()
        .unwrap_or_else(|| panic!("no dns report in {}", pretty(outcome)))
}

/// The assertions `outcome` failed, in order, and its status to match:
/// up when none failed, else down. The DNSSEC tests judge with it too.
#[track_caller]
pub(crate) fn assert_failures(outcome: &Outcome, expected: &[&str]) {
    let names: Vec<&str> = outcome
        .failures
        .iter()
        .map(|f| f.assertion.as_str())
        .collect();
    assert_eq!(names, expected, "{}", pretty(outcome));
    let status = match expected.is_empty() {
        true => Status::Up,
        false => Status::Down,
    };
    assert_eq!(outcome.status, status, "{}", pretty(outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn acme_dns_delegation_is_up() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "_acme-challenge.example.test",
        "",
        &format!("cname = {ACME_DNS_TARGET:?}"),
    )
    .await;
    assert_failures(&outcome, &[]);
    assert_eq!(outcome.target, "dns:_acme-challenge.example.test.");
    let report = report(&outcome);
    assert_eq!(report.query, "_acme-challenge.example.test.");
    assert_eq!(report.resolvers, [server.addr.to_string()]);
    assert_eq!(report.cname.as_deref(), Some(ACME_DNS_TARGET));
    assert!(!report.nxdomain);
}

/// Someone deleted the CNAME: renewal would fail silently in weeks.
#[tokio::test(flavor = "multi_thread")]
async fn deleted_delegation_fails_dns_cname_with_nxdomain() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "_acme-challenge.gone.example.test.",
        "",
        &format!("cname = {ACME_DNS_TARGET:?}"),
    )
    .await;
    assert_failures(&outcome, &["dns", "dns.cname"]);
    assert!(report(&outcome).nxdomain, "{}", pretty(&outcome));
    assert_eq!(
        failure(&outcome, "dns").message,
        "_acme-challenge.gone.example.test does not exist (NXDOMAIN)"
    );
    let f = failure(&outcome, "dns.cname");
    assert_eq!(f.expected, format!("CNAME {ACME_DNS_TARGET}"));
    assert_eq!(f.observed, "NXDOMAIN (the name does not exist)");
    assert!(f.message.contains("the CNAME to"), "{}", f.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn delegation_to_another_account_fails_naming_both_targets() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "_acme-challenge.example.test",
        "",
        "cname = \"other.auth.acme-dns.example.net.\"",
    )
    .await;
    assert_failures(&outcome, &["dns.cname"]);
    let f = failure(&outcome, "dns.cname");
    assert_eq!(f.observed, format!("CNAME {ACME_DNS_TARGET}"));
    assert!(
        f.message.contains("other.auth.acme-dns.example.net."),
        "{}",
        f.message
    );
}

/// `deep.sub.example.test` has no CAA and `sub.example.test` does not
/// exist: the relevant set is the apex's, found by climbing.
#[tokio::test(flavor = "multi_thread")]
async fn caa_is_found_by_climbing_to_the_parent() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "deep.sub.example.test",
        "",
        "caa_issue = [\"letsencrypt.org\"]",
    )
    .await;
    assert_failures(&outcome, &[]);
    let caa = report(&outcome).caa.as_ref().expect("caa report");
    assert_eq!(caa.domain.as_deref(), Some("example.test."));
    let shown: Vec<String> = caa.records.iter().map(ToString::to_string).collect();
    assert!(
        shown.contains(&"0 issue \"letsencrypt.org\"".to_string()),
        "{shown:?}"
    );
    assert!(
        shown.contains(&"0 issuewild \"digicert.com\"".to_string()),
        "{shown:?}"
    );
}

/// The parent's CAA admits the CA, but the name itself does not exist: no
/// certificate can be validated for it, so it is down, saying so.
#[tokio::test(flavor = "multi_thread")]
async fn caa_on_a_name_that_does_not_exist_is_down_unless_its_absence_is_expected() {
    let server = DnsServer::start();
    let missing = "nowhere.example.test";
    let outcome = probe_dns(
        server.addr,
        missing,
        "",
        "caa_issue = [\"letsencrypt.org\"]",
    )
    .await;
    assert_failures(&outcome, &["dns"]);
    assert!(report(&outcome).nxdomain, "{}", pretty(&outcome));
    assert!(
        serde_json::to_string(&outcome)
            .unwrap()
            .contains("\"nxdomain\":true"),
        "{}",
        pretty(&outcome)
    );
    let f = failure(&outcome, "dns");
    assert_eq!(f.message, "nowhere.example.test does not exist (NXDOMAIN)");
    assert_eq!(f.observed, "NXDOMAIN");

    // A retired name that must stay gone.
    let outcome = probe_dns(server.addr, missing, "", "exists = false").await;
    assert_failures(&outcome, &[]);
    let outcome = probe_dns(server.addr, "example.test", "", "exists = false").await;
    assert_failures(&outcome, &["dns"]);
    assert_eq!(
        failure(&outcome, "dns").message,
        "example.test exists, though `expect.exists = false` says it must not"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caa_that_refuses_the_ca_names_the_refusing_record() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "www.refusing.test",
        "",
        "caa_issue = [\"letsencrypt.org\"]",
    )
    .await;
    assert_failures(&outcome, &["dns.caa"]);
    let f = failure(&outcome, "dns.caa");
    assert_eq!(
        f.observed,
        "CAA at refusing.test.: 0 issue \"digicert.com; validationmethods=dns-01\""
    );
    assert!(
        f.message.contains("refuses letsencrypt.org"),
        "{}",
        f.message
    );
    assert!(f.message.contains("digicert.com"), "{}", f.message);
}

/// issuewild takes precedence for wildcards; issue still governs the name.
#[tokio::test(flavor = "multi_thread")]
async fn issuewild_governs_wildcards() {
    let server = DnsServer::start();
    let refused = probe_dns(
        server.addr,
        "example.test",
        "",
        "caa_issue = [\"letsencrypt.org\"]\ncaa_issuewild = [\"letsencrypt.org\"]",
    )
    .await;
    assert_failures(&refused, &["dns.caa"]);
    let f = failure(&refused, "dns.caa");
    assert!(f.expected.contains("wildcard"), "{}", f.expected);
    assert_eq!(
        f.observed,
        "CAA at example.test.: 0 issuewild \"digicert.com\""
    );
    let admitted = probe_dns(
        server.addr,
        "example.test",
        "",
        "caa_issuewild = [\"digicert.com\"]",
    )
    .await;
    assert_failures(&admitted, &[]);
}

/// No CAA anywhere up the tree: every CA may issue.
#[tokio::test(flavor = "multi_thread")]
async fn no_caa_anywhere_admits_every_ca() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "www.nocaa.test",
        "",
        "caa_issue = [\"letsencrypt.org\"]\ncaa_issuewild = [\"letsencrypt.org\"]",
    )
    .await;
    assert_failures(&outcome, &[]);
    let caa = report(&outcome).caa.as_ref().expect("caa report");
    assert_eq!(caa.domain, None);
    assert!(caa.records.is_empty());
}

/// `[check.expect]` binding letsencrypt.org to [`ACCOUNT`], with `more`.
fn bound(more: &str) -> String {
    format!("caa_issue = [\"letsencrypt.org\"]\ncaa_accounturi = {ACCOUNT:?}\n{more}")
}

#[tokio::test(flavor = "multi_thread")]
async fn caa_bound_to_the_account_and_its_method_is_up() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "bound.test",
        "",
        &bound("caa_validationmethods = [\"dns-01\"]"),
    )
    .await;
    assert_failures(&outcome, &[]);
    let caa = report(&outcome).caa.as_ref().expect("caa report");
    assert_eq!(caa.domain.as_deref(), Some("bound.test."));
    assert_eq!(
        caa.records[0].value,
        format!("letsencrypt.org; accounturi={ACCOUNT}; validationmethods=dns-01")
    );
}

/// Whitespace around `;` and `=` is allowed (RFC 8659 section 4.2).
#[tokio::test(flavor = "multi_thread")]
async fn caa_parameters_may_be_spaced() {
    let server = DnsServer::start();
    let outcome = probe_dns(
        server.addr,
        "spaced.bound.test",
        "",
        &bound("caa_validationmethods = [\"http-01\", \"dns-01\"]"),
    )
    .await;
    assert_failures(&outcome, &[]);
    // The tab after the `;` is kept as a space, not escaped to `\t`.
    let caa = report(&outcome).caa.as_ref().expect("caa report");
    assert_eq!(
        caa.records[0].value,
        format!(" letsencrypt.org ; accounturi = {ACCOUNT} ; validationmethods = dns-01,http-01")
    );
}

/// The renewal's account is not the one the record binds: the CA will
/// refuse it, and the reason names the record and the parameter.
#[tokio::test(flavor = "multi_thread")]
async fn caa_bound_to_another_account_is_down_naming_record_and_accounturi() {
    let server = DnsServer::start();
    let outcome = probe_dns(server.addr, "other.bound.test", "", &bound("")).await;
    assert_failures(&outcome, &["dns.caa_accounturi"]);
    let f = failure(&outcome, "dns.caa_accounturi");
    let record = format!("0 issue \"letsencrypt.org; accounturi={OTHER_ACCOUNT}\"");
    assert_eq!(
        f.message,
        format!("CAA {record} at other.bound.test. binds another account than {ACCOUNT}: renewal will be refused")
    );
    assert_eq!(f.observed, format!("CAA at other.bound.test.: {record}"));
    assert_eq!(
        f.expected,
        format!(
            "CAA binds a certificate for other.bound.test. by letsencrypt.org to account {ACCOUNT}"
        )
    );
}

/// RFC 8657 lets a record without `accounturi` admit every account; the
/// operator who names an account wants it bound, so that fails.
#[tokio::test(flavor = "multi_thread")]
async fn caa_without_accounturi_is_not_bound() {
    let server = DnsServer::start();
    let outcome = probe_dns(server.addr, "example.test", "", &bound("")).await;
    assert_failures(&outcome, &["dns.caa_accounturi"]);
    assert_eq!(
        failure(&outcome, "dns.caa_accounturi").message,
        "CAA 0 issue \"letsencrypt.org\" at example.test. has no accounturi: not bound, any account of letsencrypt.org may issue a certificate for example.test."
    );
    let outcome = probe_dns(server.addr, "www.nocaa.test", "", &bound("")).await;
    assert_failures(&outcome, &["dns.caa_accounturi"]);
    assert!(
        failure(&outcome, "dns.caa_accounturi")
            .message
            .starts_with("no CAA record binds a certificate for www.nocaa.test."),
        "{}",
        pretty(&outcome)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn caa_validationmethods_must_allow_the_renewals_method() {
    let server = DnsServer::start();
    let allowed = probe_dns(
        server.addr,
        "http.bound.test",
        "",
        &bound("caa_validationmethods = [\"http-01\"]"),
    )
    .await;
    assert_failures(&allowed, &[]);
    let refused = probe_dns(
        server.addr,
        "http.bound.test",
        "",
        &bound("caa_validationmethods = [\"dns-01\"]"),
    )
    .await;
    assert_failures(&refused, &["dns.caa_validationmethods"]);
    let f = failure(&refused, "dns.caa_validationmethods");
    assert_eq!(
        f.message,
        format!("CAA 0 issue \"letsencrypt.org; accounturi={ACCOUNT}; validationmethods=http-01\" at http.bound.test. does not allow validationmethods dns-01: renewal will be refused")
    );
    // No validationmethods parameter: every method is allowed.
    let open = probe_dns(
        server.addr,
        "example.test",
        "",
        "caa_issue = [\"letsencrypt.org\"]\ncaa_validationmethods = [\"tls-alpn-01\"]",
    )
    .await;
    assert_failures(&open, &[]);
}

/// A parameter list outside RFC 8659's grammar: CAs read the record as
/// authorising nobody, so the CA is refused (`dns.caa`), and the reason
/// says which record cannot be read and why.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_caa_parameter_list_refuses_the_ca() {
    let server = DnsServer::start();
    let outcome = probe_dns(server.addr, "broken.bound.test", "", &bound("")).await;
    assert_failures(&outcome, &["dns.caa"]);
    let f = failure(&outcome, "dns.caa");
    assert!(
        f.message.contains(
            "unreadable, so authorising no CA: 0 issue \"letsencrypt.org; accounturi\": parameter \"accounturi\" is not tag=value"
        ),
        "{}",
        f.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn addresses_are_compared_as_sets() {
    let server = DnsServer::start();
    let up = probe_dns(
        server.addr,
        "www.example.test",
        "",
        "a = [\"192.0.2.11\", \"192.0.2.10\"]\naaaa = [\"*\"]",
    )
    .await;
    assert_failures(&up, &[]);
    assert_eq!(
        report(&up).a.as_deref(),
        Some(&["192.0.2.10".to_string(), "192.0.2.11".to_string()][..])
    );
    assert_eq!(
        report(&up).aaaa.as_deref(),
        Some(&["2001:db8::10".to_string()][..])
    );

    let down = probe_dns(server.addr, "www.example.test", "", "a = [\"192.0.2.10\"]").await;
    assert_failures(&down, &["dns.a"]);
    let f = failure(&down, "dns.a");
    assert_eq!(f.expected, "A 192.0.2.10");
    assert_eq!(f.observed, "A 192.0.2.10, 192.0.2.11");

    let missing = probe_dns(server.addr, "deep.sub.example.test", "", "aaaa = [\"*\"]").await;
    assert_failures(&missing, &["dns.aaaa"]);
    assert_eq!(failure(&missing, "dns.aaaa").observed, "no AAAA record");
}

/// A zone can answer as many records of a type as fit in a message: the
/// first 64 (sorted) are kept and the others counted, in the report and in
/// the failure that quotes them.
#[tokio::test(flavor = "multi_thread")]
async fn answers_past_64_records_of_a_type_are_counted_not_kept() {
    let server = DnsServer::start();
    let outcome = probe_dns(server.addr, "many.example.test", "", "a = [\"192.0.2.10\"]").await;
    assert_failures(&outcome, &["dns.a"]);
    let dns = report(&outcome);
    let kept = dns.a.as_deref().unwrap();
    assert_eq!(kept.len(), 64);
    assert!(kept.windows(2).all(|w| w[0] < w[1]), "sorted: {kept:?}");
    let more = u64::from(MANY_A) - 64;
    assert_eq!(dns.more.get("A"), Some(&more), "{}", pretty(&outcome));
    let observed = &failure(&outcome, "dns.a").observed;
    assert!(observed.starts_with("A 198.51.100."), "{observed}");
    assert!(
        observed.ends_with(&format!(" and {more} more")),
        "{observed}"
    );
    // Within the bound, nothing is counted.
    let few = probe_dns(server.addr, "www.example.test", "", "a = [\"*\"]").await;
    assert!(report(&few).more.is_empty(), "{}", pretty(&few));
}

#[tokio::test(flavor = "multi_thread")]
async fn txt_records_are_matched_by_regex() {
    let server = DnsServer::start();
    let up = probe_dns(
        server.addr,
        "example.test",
        "",
        "txt_regex = \"^v=spf1 .*-all$\"",
    )
    .await;
    assert_failures(&up, &[]);
    assert_eq!(
        report(&up).txt.as_deref(),
        Some(&["v=spf1 -all".to_string()][..])
    );
    let down = probe_dns(
        server.addr,
        "example.test",
        "",
        "txt_regex = \"^google-site\"",
    )
    .await;
    assert_failures(&down, &["dns.txt"]);
    assert_eq!(failure(&down, "dns.txt").observed, "TXT v=spf1 -all");
}

/// A resolver that never answers is a `dns` failure naming it, reported
/// within the check's timeout (not the probe's generic `timeout`).
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_resolver_is_a_dns_failure() {
    let silent = SilentResolver::start();
    let outcome = probe_dns(
        silent.addr,
        "_acme-challenge.example.test",
        "timeout = \"1s\"",
        &format!("cname = {ACME_DNS_TARGET:?}"),
    )
    .await;
    assert_failures(&outcome, &["dns"]);
    let err = outcome.probe_error.as_ref().expect("probe error");
    assert_eq!(err.kind, Assertion::Dns);
    assert!(
        err.message.contains(&silent.addr.to_string()),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("asking CNAME _acme-challenge.example.test."),
        "{}",
        err.message
    );
    assert_eq!(
        failure(&outcome, "dns").expected,
        "an answer from the resolvers"
    );
    assert!(outcome.dns.is_none());
}
