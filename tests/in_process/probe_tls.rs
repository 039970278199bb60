//! The served chain, judged: every certificate scenario the platform has met,
//! served by a real rustls server with an rcgen-made chain, probed through
//! the real config -> probe -> evaluate path.

use crate::common::env::{assertions, failure, pretty, probe};
use crate::common::*;
use vigie::outcome::{Assertion, Status, VerifyError};

async fn probe_leaf(leaf: &Leaf, extra: &str) -> vigie::outcome::Outcome {
    let server = TlsServer::start_leaf(leaf, TlsOpts::default());
    probe(&server.url("/"), extra).await
}

#[tokio::test(flavor = "multi_thread")]
async fn valid_chain_is_up_and_fully_described() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let outcome = probe(&server.url("/"), "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let tls = outcome.tls.as_ref().expect("tls report");
    assert!(tls.trusted);
    assert!(tls.hostname_matches);
    assert_eq!(tls.version.as_deref(), Some("TLSv1.3"));
    assert!(tls
        .cipher_suite
        .as_deref()
        .unwrap_or("")
        .starts_with("TLS13_"));
    assert_eq!(tls.chain.len(), 2, "leaf and intermediate as served");
    let leaf = &tls.chain[0];
    assert_eq!(leaf.subject, "CN=www.example.test");
    assert!(
        leaf.issuer.ends_with("CN=Vigie Test Intermediate R1"),
        "{}",
        leaf.issuer
    );
    assert_eq!(leaf.days_left, 60);
    assert_eq!(leaf.sans, vec!["www.example.test".to_string()]);
    assert_eq!(leaf.key, "ECDSA P-256");
    assert_eq!(leaf.signature, "ecdsa-with-SHA256");
    assert_eq!(leaf.sha256.len(), 64);
    assert!(!leaf.serial.is_empty());
    assert!(tls.chain[1]
        .subject
        .ends_with("CN=Vigie Test Intermediate R1"));
    // SNI and Host carry the URL's host although we connected to 127.0.0.1.
    assert_eq!(server.last_sni().as_deref(), Some(HOST));
    let requests = server.recorded_requests();
    assert_eq!(
        requests[0].host(),
        Some(format!("{HOST}:{}", server.port()).as_str())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_probe_does_a_full_handshake() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let env = crate::common::env::Env::new();
    let checks: String = (0..3)
        .map(|i| crate::common::env::check_toml(&format!("c{i}"), &server.url("/"), ""))
        .collect();
    env.write_checks("three.toml", &checks);
    let outcomes = env.run_all().await;
    assert!(outcomes.iter().all(|o| o.status == Status::Up));
    assert!(
        eventually(std::time::Duration::from_secs(2), || server.handshakes()
            == 3)
        .await
    );
    assert_eq!(server.connections(), 3, "one fresh connection per probe");
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_certificate_is_down_with_the_date_and_chain() {
    let outcome = probe_leaf(&expired_leaf(), "").await;
    assert_eq!(outcome.status, Status::Down);
    let expiry = failure(&outcome, "tls.expiry");
    assert!(
        expiry
            .message
            .starts_with("certificate expired 2 days ago (on "),
        "{}",
        expiry.message
    );
    assert_eq!(expiry.expected, ">= 7 days");
    assert_eq!(expiry.observed, "-2 days");
    let tls = outcome.tls.as_ref().unwrap();
    assert!(!tls.trusted);
    assert!(matches!(
        tls.verify_error,
        Some(VerifyError::Expired { .. })
    ));
    assert_eq!(
        tls.chain.len(),
        2,
        "the chain is reported although verification failed"
    );
    assert_eq!(assertions(&outcome).len(), 1, "{}", pretty(&outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn not_yet_valid_certificate() {
    let outcome = probe_leaf(&not_yet_valid_leaf(), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.not_yet_valid");
    assert!(f.message.contains("is not valid until"), "{}", f.message);
    assert!(matches!(
        outcome.tls.as_ref().unwrap().verify_error,
        Some(VerifyError::NotYetValid { .. })
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_host_names_what_the_certificate_covers() {
    let outcome = probe_leaf(&wrong_host_leaf(), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.hostname");
    assert_eq!(
        f.message,
        "certificate does not cover www.example.test (it covers other.test)"
    );
    assert!(!outcome.tls.as_ref().unwrap().hostname_matches);
    assert_eq!(assertions(&outcome).len(), 1, "{}", pretty(&outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn self_signed_certificate() {
    let outcome = probe_leaf(&self_signed_leaf(), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.trusted");
    assert!(
        f.message.starts_with("self-signed certificate"),
        "{}",
        f.message
    );
    assert_eq!(outcome.tls.as_ref().unwrap().chain.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn staging_issuer_is_named_in_words() {
    let outcome = probe_leaf(&staging_leaf(), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.trusted");
    assert!(
        f.message
            .contains("Let's Encrypt staging CA ((STAGING) Artificial Apricot R3)")
            && f.message.contains("which browsers do not trust"),
        "{}",
        f.message
    );
    let leaf = outcome.leaf().unwrap();
    assert!(leaf.issuer.contains("(STAGING) Artificial Apricot R3"));
}

/// Even when someone trusts the staging root (a ca_file copied from a test
/// setup), an issuer pattern anchored on the organisation catches it; the
/// naive pattern does not. This is what checks/README.md documents.
#[tokio::test(flavor = "multi_thread")]
async fn issuer_pattern_that_rejects_staging() {
    let server = TlsServer::start_leaf(&staging_leaf(), TlsOpts::default());
    let env = crate::common::env::Env::new();
    let staging_root = write_staging_root_pem(env.path());
    let tls = |pattern: &str| {
        format!(
            "[check.tls]\nissuer = {pattern:?}\nca_file = {:?}\n",
            staging_root.display().to_string()
        )
    };
    let checks = [
        crate::common::env::check_toml("naive", &server.url("/"), &tls("Let's Encrypt")),
        crate::common::env::check_toml("anchored", &server.url("/"), &tls("O=Let's Encrypt,")),
    ]
    .concat();
    env.write_checks("staging.toml", &checks);
    let outcomes = env.run_all().await;
    assert_eq!(
        outcomes[0].status,
        Status::Up,
        "naive pattern matches staging: {}",
        pretty(&outcomes[0])
    );
    assert_eq!(outcomes[1].status, Status::Down);
    let f = failure(&outcomes[1], "tls.issuer");
    assert!(
        f.observed.contains("O=(STAGING) Let's Encrypt"),
        "{}",
        f.observed
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn leaf_served_without_its_intermediate() {
    let outcome = probe_leaf(&missing_intermediate_leaf(), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.chain_incomplete");
    assert!(
        f.message.contains("Vigie Test Intermediate R1"),
        "{}",
        f.message
    );
    assert_eq!(outcome.tls.as_ref().unwrap().chain.len(), 1);
    assert_eq!(assertions(&outcome).len(), 1, "{}", pretty(&outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_days_left_of_ninety_warns_renewal_overdue() {
    let outcome = probe_leaf(&twenty_days_left_leaf(), "").await;
    assert_eq!(outcome.status, Status::Warn, "{}", pretty(&outcome));
    let f = failure(&outcome, "tls.renewal_overdue");
    assert!(f.message.contains("expires in 20 days"), "{}", f.message);
    assert!(f.message.ends_with("renewal looks stuck"), "{}", f.message);
    assert_eq!(f.observed, "20 days of 90 left");
}

#[tokio::test(flavor = "multi_thread")]
async fn warn_days_overrides_the_quarter_rule() {
    let leaf = twenty_days_left_leaf();
    let quiet = probe_leaf(&leaf, "[check.tls]\nwarn_days = 14\n").await;
    assert_eq!(quiet.status, Status::Up, "{}", pretty(&quiet));
    let loud = probe_leaf(&days_left_leaf(30), "[check.tls]\nwarn_days = 45\n").await;
    assert_eq!(loud.status, Status::Warn);
    assert_eq!(failure(&loud, "tls.renewal_overdue").expected, ">= 45 days");
}

#[tokio::test(flavor = "multi_thread")]
async fn five_days_left_is_down_by_critical_days() {
    let outcome = probe_leaf(&five_days_left_leaf(), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.expiry");
    assert!(
        f.message.starts_with("certificate expires in 5 days"),
        "{}",
        f.message
    );
    assert!(outcome.tls.as_ref().unwrap().trusted);
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcard_covers_one_label_only() {
    let server = TlsServer::start_leaf(&wildcard_leaf(), TlsOpts::default());
    let port = server.port();
    let www = probe(&format!("https://www.example.test:{port}/"), "").await;
    assert_eq!(www.status, Status::Up, "{}", pretty(&www));
    let deep = probe(&format!("https://a.b.example.test:{port}/"), "").await;
    assert_eq!(deep.status, Status::Down);
    let f = failure(&deep, "tls.hostname");
    assert_eq!(
        f.message,
        "certificate does not cover a.b.example.test (it covers *.example.test)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rsa_key_is_described() {
    let outcome = probe_leaf(&rsa_leaf(), "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let leaf = outcome.leaf().unwrap();
    assert_eq!(leaf.key, "RSA 2048");
    // The intermediate (ECDSA) signed it.
    assert_eq!(leaf.signature, "ecdsa-with-SHA256");
}

#[tokio::test(flavor = "multi_thread")]
async fn tls12_only_server_reports_version_and_suite() {
    let server = TlsServer::start_leaf(
        &valid_leaf(),
        TlsOpts {
            tls12_only: true,
            ..TlsOpts::default()
        },
    );
    let outcome = probe(&server.url("/"), "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let tls = outcome.tls.as_ref().unwrap();
    assert_eq!(tls.version.as_deref(), Some("TLSv1.2"));
    assert!(
        tls.cipher_suite
            .as_deref()
            .unwrap_or("")
            .starts_with("TLS_ECDHE_"),
        "{:?}",
        tls.cipher_suite
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn per_check_ca_file_adds_trust() {
    // The staging root is not trusted globally; a check's ca_file trusts it.
    let server = TlsServer::start_leaf(&staging_leaf(), TlsOpts::default());
    let env = crate::common::env::Env::new();
    let staging_root = write_staging_root_pem(env.path());
    let extra = format!(
        "[check.tls]\nca_file = {:?}\n",
        staging_root.display().to_string()
    );
    env.write_checks(
        "ca.toml",
        &[
            crate::common::env::check_toml("with-ca", &server.url("/"), &extra),
            crate::common::env::check_toml("without-ca", &server.url("/"), ""),
        ]
        .concat(),
    );
    let outcomes = env.run_all().await;
    assert_eq!(outcomes[0].status, Status::Up, "{}", pretty(&outcomes[0]));
    assert_eq!(outcomes[1].status, Status::Down);
}

/// What no reason may show: the `Debug` text of rustls, webpki, hyper or
/// std (`invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))`).
const DEBUG_TEXT: [&str; 7] = [
    "Other(",
    "OtherError",
    "Error {",
    "Kind(",
    "{",
    "Context",
    "::",
];

/// Every failure of `outcome`, and the refusal it carries, read as words.
fn assert_words(scenario: &str, outcome: &vigie::outcome::Outcome) {
    let mut texts: Vec<String> = outcome
        .failures
        .iter()
        .flat_map(|f| [f.message.clone(), f.observed.clone(), f.expected.clone()])
        .collect();
    if let Some(err) = outcome.tls.as_ref().and_then(|t| t.verify_error.as_ref()) {
        texts.push(err.to_string());
    }
    for text in texts {
        for debug in DEBUG_TEXT {
            assert!(
                !text.contains(debug),
                "{scenario}: {debug:?} in {text:?}\n{}",
                pretty(outcome)
            );
        }
    }
}

/// Every chain a real rustls server can serve that WebPKI refuses, and
/// every way a port can answer in the wrong protocol: each reason is a
/// sentence that names the problem, never rustls's `Debug` text.
#[tokio::test(flavor = "multi_thread")]
async fn every_refusal_reads_as_a_sentence() {
    let scenarios: Vec<(&str, Leaf, &str, &str)> = vec![
        (
            "expired",
            expired_leaf(),
            "tls.expiry",
            "certificate expired 2 days ago",
        ),
        (
            "not yet valid",
            not_yet_valid_leaf(),
            "tls.not_yet_valid",
            "is not valid until",
        ),
        (
            "wrong name",
            wrong_host_leaf(),
            "tls.hostname",
            "certificate does not cover www.example.test (it covers other.test)",
        ),
        (
            "self-signed",
            self_signed_leaf(),
            "tls.trusted",
            "self-signed certificate (CN=www.example.test) is not trusted",
        ),
        (
            "self-signed CA as the server's (openssl req -x509)",
            crate::common::pki::self_signed_ca_leaf(),
            "tls.trusted",
            "self-signed CA certificate used as the server certificate (CN=www.example.test)",
        ),
        (
            "staging issuer",
            staging_leaf(),
            "tls.trusted",
            "Let's Encrypt staging CA",
        ),
        (
            "missing intermediate",
            missing_intermediate_leaf(),
            "tls.chain_incomplete",
            "the server did not send the certificate of its issuer",
        ),
        (
            "unknown issuer",
            crate::common::pki::unknown_ca_leaf(),
            "tls.trusted",
            "certificate issued by an unknown CA",
        ),
        (
            "bad signature",
            crate::common::pki::bad_signature_leaf(),
            "tls.trusted",
            "a certificate's signature does not verify with its issuer's key (bad signature)",
        ),
        (
            "issued by a leaf",
            crate::common::pki::issued_by_a_leaf(),
            "tls.trusted",
            "the chain uses a server certificate (not a CA) as the issuer of another",
        ),
        (
            "path length exceeded",
            crate::common::pki::path_too_long_leaf(),
            "tls.trusted",
            "the chain has more intermediates than an issuing CA allows (path length constraint)",
        ),
        (
            "client authentication only",
            crate::common::pki::client_auth_only_leaf(),
            "tls.trusted",
            "the certificate is not allowed for server authentication \
             (its extended key usage allows client authentication)",
        ),
        (
            "outside its CA's name constraints",
            crate::common::pki::outside_name_constraints_leaf(),
            "tls.trusted",
            "the certificate names a host its issuing CA may not certify (name constraints)",
        ),
    ];
    for (scenario, leaf, assertion, reason) in scenarios {
        let outcome = probe_leaf(&leaf, "").await;
        assert_eq!(outcome.status, Status::Down, "{scenario}");
        let f = failure(&outcome, assertion);
        assert!(
            f.message.contains(reason),
            "{scenario}: {:?} lacks {reason:?}",
            f.message
        );
        assert_words(scenario, &outcome);
    }

    // Plain HTTP on an https:// URL.
    let garbage = Garbage::start();
    let outcome = probe(
        &format!("https://www.example.test:{}/", garbage.addr.port()),
        "",
    )
    .await;
    let f = failure(&outcome, "tls.handshake");
    assert_eq!(
        f.message,
        "the server did not answer with TLS (is the port plain HTTP? then use http://)"
    );
    assert_words("plain HTTP port over https://", &outcome);

    // A TLS port on an http:// URL: rustls answers the request with an
    // alert record.
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let url = server.url("/").replacen("https://", "http://", 1);
    let outcome = probe(&url, "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "http.protocol");
    assert_eq!(f.message, "the port answered with TLS: use https://");
    assert_words("TLS port over http://", &outcome);

    // A port that resets an http:// request unanswered (some TLS servers
    // do): nothing tells TLS apart, so the reason says what to try.
    let resetter = Resetter::start_after_first_read();
    let url = format!("http://www.example.test:{}/", resetter.addr.port());
    let outcome = probe(&url, "").await;
    let f = failure(&outcome, "http.protocol");
    assert!(
        f.message
            .ends_with("(nothing was received: if this port speaks TLS, use https://)"),
        "{}",
        f.message
    );
    assert_words("reset over http://", &outcome);
}

/// A check URL written without its scheme is refused at load, naming the
/// file, line and key.
#[test]
fn a_url_without_a_scheme_must_start_with_https() {
    let env = crate::common::env::Env::new();
    env.write_checks(
        "bare.toml",
        "[[check]]\nname = \"bare\"\nkind = \"http\"\nurl = \"www.example.test/\"\n",
    );
    let errors = match vigie::config::load(&env.config_path()) {
        Ok(_) => panic!("a URL without a scheme is refused"),
        Err(errors) => errors.to_string(),
    };
    assert!(
        errors.ends_with("checks/bare.toml:4:7: `url`: must start with https:// (or http://)"),
        "{errors}"
    );
}

/// vigie offers X25519MLKEM768 first, as browsers do: a server that
/// supports it negotiates it, one that does not falls back to X25519, and
/// each outcome says which. `require_pq` turns the fallback into `tls.pq`.
#[tokio::test(flavor = "multi_thread")]
async fn the_key_exchange_group_is_recorded_and_pq_can_be_required() {
    let require = "[check.tls]\nrequire_pq = true\n";
    let upgraded = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let outcome = probe(&upgraded.url("/"), require).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let tls = outcome.tls.as_ref().expect("tls report");
    assert_eq!(tls.key_exchange.as_deref(), Some("X25519MLKEM768"));
    assert_eq!(tls.version.as_deref(), Some("TLSv1.3"));
    assert!(tls.post_quantum());

    let classical = TlsServer::start_leaf(
        &valid_leaf(),
        TlsOpts {
            classical_kx_only: true,
            ..TlsOpts::default()
        },
    );
    let outcome = probe(&classical.url("/"), "").await;
    assert_eq!(
        outcome.status,
        Status::Up,
        "not required: {}",
        pretty(&outcome)
    );
    let tls = outcome.tls.as_ref().expect("tls report");
    assert_eq!(tls.key_exchange.as_deref(), Some("X25519"));
    assert!(!tls.post_quantum());

    let outcome = probe(&classical.url("/"), require).await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    assert_eq!(assertions(&outcome), vec![Assertion::TlsPq]);
    let f = failure(&outcome, "tls.pq");
    assert_eq!(f.observed, "X25519");
    assert!(
        f.message
            .contains("negotiated X25519, not a post-quantum hybrid")
            && f.message.contains("enable X25519MLKEM768"),
        "{}",
        f.message
    );
}

/// A handshake that failed negotiated nothing: `require_pq` adds no second
/// failure to the certificate's.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_handshake_is_not_also_a_pq_failure() {
    let outcome = probe_leaf(&expired_leaf(), "[check.tls]\nrequire_pq = true\n").await;
    assert_eq!(outcome.status, Status::Down);
    assert!(
        !assertions(&outcome).contains(&Assertion::TlsPq),
        "{}",
        pretty(&outcome)
    );
    assert!(assertions(&outcome).contains(&Assertion::TlsExpiry));
}
