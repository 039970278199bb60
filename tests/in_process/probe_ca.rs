//! What the CA says, judged (issue 17): ARI renewal windows from an RFC 9773
//! responder, revocation from rcgen-made CRLs, short-lived (160-hour)
//! leaves and a Gen Y-shaped chain. Every peer is a loopback server this
//! test starts; the CA endpoints are named by `acme_directory` and by the
//! certificates' CRL distribution points, never by the real CA's.

use std::sync::Arc;

use crate::common::ca_server::CaServer;
use crate::common::env::{assertions, check_toml, failure, pretty, probe, Env};
use crate::common::pki::{crl, GenY};
use crate::common::*;
use time::Duration;
use vigie::clock::{Clock, FakeClock};
use vigie::outcome::{Assertion, CrlStatus, Outcome, Status};
use x509_parser::prelude::FromDer;

async fn probe_leaf(leaf: &Leaf, extra: &str) -> Outcome {
    let server = TlsServer::start_leaf(leaf, TlsOpts::default());
    probe(&server.url("/"), extra).await
}

fn ari_config(ca: &CaServer) -> String {
    format!("[check.tls]\nacme_directory = {:?}\n", ca.directory_url())
}

// ---------------------------------------------------------------- ARI

#[tokio::test(flavor = "multi_thread")]
async fn a_window_ahead_is_up_and_reported() {
    let ca = CaServer::start().await;
    let (start, end) = (now() + days(20), now() + days(22));
    ca.set_window(start, end, Some("https://ca.test/why"), Some(21600));
    let outcome = probe_leaf(&valid_leaf(), &ari_config(&ca)).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let ari = outcome.tls.as_ref().unwrap().ari.as_ref().expect("tls.ari");
    assert_eq!((ari.window_start, ari.window_end), (Some(start), Some(end)));
    assert_eq!(ari.explanation_url.as_deref(), Some("https://ca.test/why"));
    assert_eq!(ari.error, None);
    // The CertID is the leaf's: base64url(AKI) "." base64url(serial).
    assert!(
        ari.url.ends_with(&format!("/ari/{}", ari.cert_id)),
        "{}",
        ari.url
    );
    assert_eq!(ari.cert_id.split('.').count(), 2);
    assert_eq!((ca.hits("directory"), ca.hits("ari")), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_ended_with_the_same_leaf_served_warns() {
    let ca = CaServer::start().await;
    ca.set_window(now() - days(2), now() - Duration::hours(5), None, None);
    let outcome = probe_leaf(&valid_leaf(), &ari_config(&ca)).await;
    assert_eq!(outcome.status, Status::Warn, "{}", pretty(&outcome));
    assert_eq!(assertions(&outcome), [Assertion::TlsRenewalWindow]);
    let f = failure(&outcome, "tls.renewal_window");
    assert!(f.message.contains("still served"), "{}", f.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_ended_longer_than_ari_grace_ago_is_down() {
    let ca = CaServer::start().await;
    ca.set_window(
        now() - days(5),
        now() - days(3),
        Some("https://ca.test/incident"),
        None,
    );
    let outcome = probe_leaf(&valid_leaf(), &ari_config(&ca)).await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let f = failure(&outcome, "tls.renewal_window");
    assert!(f.message.contains("renew now"), "{}", f.message);
    assert!(
        f.message.contains("https://ca.test/incident"),
        "{}",
        f.message
    );
    // A longer grace keeps it a warning.
    let lenient = format!("{}ari_grace = \"4d\"\n", ari_config(&ca));
    let outcome = probe_leaf(&valid_leaf(), &lenient).await;
    assert_eq!(outcome.status, Status::Warn, "{}", pretty(&outcome));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ari_endpoint_that_fails_is_reported_never_down() {
    let ca = CaServer::start().await;
    ca.set_ari_status(503);
    let outcome = probe_leaf(&valid_leaf(), &ari_config(&ca)).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let ari = outcome.tls.as_ref().unwrap().ari.as_ref().expect("tls.ari");
    assert!(
        ari.error.as_deref().unwrap().contains("HTTP 503"),
        "{ari:?}"
    );
    assert_eq!(ari.window_end, None);

    // A directory nobody answers at.
    let dead = format!(
        "[check.tls]\nacme_directory = \"http://{}/directory\"\n",
        refused_addr()
    );
    let outcome = probe_leaf(&valid_leaf(), &dead).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let ari = outcome.tls.as_ref().unwrap().ari.as_ref().expect("tls.ari");
    assert!(ari.error.as_deref().unwrap().contains("refused"), "{ari:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_after_is_honoured_across_probes() {
    let ca = CaServer::start().await;
    ca.set_window(now() + days(20), now() + days(22), None, Some(3600));
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let env = Env::new();
    let checks: String = (0..3)
        .map(|i| check_toml(&format!("c{i}"), &server.url("/"), &ari_config(&ca)))
        .collect();
    env.write_checks("t.toml", &checks);
    let config = env.load();
    let clock = FakeClock::new(now());
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let prober = vigie::runner::prober(&config, shared.clone()).unwrap();
    let all = config.all_checks();
    let round = || vigie::runner::check_now(&prober, shared.as_ref(), &all, 1);
    for outcome in round().await {
        assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    }
    assert_eq!(
        ca.hits("ari"),
        1,
        "three checks, one certificate, one request"
    );
    clock.advance(std::time::Duration::from_secs(30 * 60));
    round().await;
    assert_eq!(
        ca.hits("ari"),
        1,
        "within Retry-After (1 h): from the cache"
    );
    clock.advance(std::time::Duration::from_secs(31 * 60));
    let outcomes = round().await;
    assert_eq!(ca.hits("ari"), 2, "past Retry-After: asked once again");
    assert!(outcomes[0]
        .tls
        .as_ref()
        .unwrap()
        .ari
        .as_ref()
        .unwrap()
        .window_end
        .is_some());
    assert_eq!(ca.hits("directory"), 1, "the directory is kept for a day");
    assert_eq!(prober.authority().ari.fetches(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_top_level_acme_directory_applies_to_every_check_unless_ari_is_off() {
    let ca = CaServer::start().await;
    ca.set_window(now() + days(20), now() + days(22), None, None);
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let env = Env::with_config(&format!("acme_directory = {:?}\n", ca.directory_url()));
    let checks = check_toml("asks", &server.url("/"), "")
        + &check_toml("off", &server.url("/"), "[check.tls]\nari = false\n");
    env.write_checks("t.toml", &checks);
    let outcomes = env.run_all().await;
    assert!(
        outcomes[0].tls.as_ref().unwrap().ari.is_some(),
        "{}",
        pretty(&outcomes[0])
    );
    assert_eq!(
        outcomes[1].tls.as_ref().unwrap().ari,
        None,
        "{}",
        pretty(&outcomes[1])
    );
    assert_eq!(ca.hits("ari"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_test_hierarchy_named_like_lets_encrypt_never_asks_the_real_ca() {
    // No acme_directory: ARI applies only to issuers known by key id, and
    // this R11 is a test key. No request can leave: there is no outcome
    // field, and nothing to connect to.
    let lookalike = Ca::generate("ISRG Root X1", "R11", "Let's Encrypt", "US");
    let leaf = lookalike.issue(&LeafSpec::new([HOST]));
    let env = Env::new();
    let root = lookalike.write_root_pem_as(env.path(), "lookalike.pem");
    let server = TlsServer::start_leaf(&leaf, TlsOpts::default());
    let extra = format!("[check.tls]\nca_file = {:?}\n", root.display().to_string());
    env.write_checks("t.toml", &check_toml("t", &server.url("/"), &extra));
    let outcome = env.run_all().await.remove(0);
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert!(outcome.leaf().unwrap().issuer.ends_with("CN=R11"));
    assert_eq!(
        outcome.tls.as_ref().unwrap().ari,
        None,
        "{}",
        pretty(&outcome)
    );
}

// ---------------------------------------------------------------- CRLs

fn crl_leaf(ca: &CaServer, serial: u64) -> Leaf {
    issue(
        &LeafSpec::new([HOST])
            .crl_url(ca.crl_url("r1.crl"))
            .serial(serial),
    )
}

fn current_crl(revoked: &[u64]) -> Vec<u8> {
    crl(
        &test_ca().intermediate,
        revoked,
        now() - Duration::hours(2),
        now() + days(1),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_leaf_is_down_with_date_and_reason() {
    let ca = CaServer::start().await;
    ca.set_crl("r1.crl", current_crl(&[1001, 4242]));
    let outcome = probe_leaf(&crl_leaf(&ca, 4242), "").await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let f = failure(&outcome, "tls.revoked");
    assert!(f.observed.contains("key_compromise"), "{}", f.observed);
    assert!(
        f.message.starts_with("certificate was revoked on"),
        "{}",
        f.message
    );
    let report = &outcome.tls.as_ref().unwrap().revocation[0];
    assert_eq!(report.status, CrlStatus::Revoked);
    assert!(report.revoked_at.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leaf_not_listed_is_up_and_its_crl_reported() {
    let ca = CaServer::start().await;
    ca.set_crl("r1.crl", current_crl(&[1001, 4242]));
    let outcome = probe_leaf(&crl_leaf(&ca, 777), "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let revocation = &outcome.tls.as_ref().unwrap().revocation;
    assert_eq!(revocation.len(), 1, "only the leaf names a CRL");
    assert_eq!(revocation[0].status, CrlStatus::Good);
    assert!(revocation[0].next_update.is_some());
    // revocation = false: nothing fetched.
    let before = ca.hits("crl/r1.crl");
    let outcome = probe_leaf(&crl_leaf(&ca, 4242), "[check.tls]\nrevocation = false\n").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(ca.hits("crl/r1.crl"), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_crl_is_reported_never_down() {
    let url = format!("http://{}/crl/r1.crl", refused_addr());
    let leaf = issue(&LeafSpec::new([HOST]).crl_url(url).serial(4242));
    let outcome = probe_leaf(&leaf, "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let report = &outcome.tls.as_ref().unwrap().revocation[0];
    assert_eq!(report.status, CrlStatus::Unavailable);
    assert!(
        report.detail.as_deref().unwrap().contains("refused"),
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_crl_is_reported_never_down() {
    let ca = CaServer::start().await;
    ca.set_crl(
        "r1.crl",
        crl(
            &test_ca().intermediate,
            &[1001],
            now() - days(3),
            now() - days(1),
        ),
    );
    let outcome = probe_leaf(&crl_leaf(&ca, 777), "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let report = &outcome.tls.as_ref().unwrap().revocation[0];
    assert_eq!(report.status, CrlStatus::Stale, "{report:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crl_signed_by_another_key_is_rejected_and_reported() {
    let ca = CaServer::start().await;
    impostor_crl(&ca, 4242);
    let outcome = probe_leaf(&crl_leaf(&ca, 4242), "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_signature_refused(&outcome.tls.as_ref().unwrap().revocation[0]);
}

/// A hierarchy with the real one's names and other keys (only a signature
/// tells them apart), whose intermediate signs `r1.crl`, listing `serial`.
fn impostor_crl(ca: &CaServer, serial: u64) -> Ca {
    let impostor = Ca::generate(
        "Vigie Test Root CA",
        "Vigie Test Intermediate R1",
        "Vigie Test",
        "FR",
    );
    ca.set_crl(
        "r1.crl",
        crl(
            &impostor.intermediate,
            &[serial],
            now() - Duration::hours(1),
            now() + days(1),
        ),
    );
    impostor
}

#[track_caller]
fn assert_signature_refused(report: &vigie::outcome::CrlReport) {
    assert_eq!(report.status, CrlStatus::Invalid, "{report:?}");
    assert!(
        report.detail.as_deref().unwrap().contains("signature"),
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crl_signed_by_a_served_key_off_the_verified_path_is_not_used() {
    let ca = CaServer::start().await;
    // An impostor named like the real intermediate, served before it: the
    // chain still verifies (through the real one), but a CRL signed by
    // the impostor's key must not count.
    let impostor = impostor_crl(&ca, 4242);
    let mut leaf = crl_leaf(&ca, 4242);
    leaf.chain.insert(1, impostor.intermediate.cert.clone());
    let outcome = probe_leaf(&leaf, "").await;
    let tls = outcome.tls.as_ref().unwrap();
    assert!(tls.trusted, "{}", pretty(&outcome));
    assert_eq!(tls.verified_path, Some(vec![0, 2]), "{}", pretty(&outcome));
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(tls.revocation.len(), 1, "{}", pretty(&outcome));
    assert_signature_refused(&tls.revocation[0]);
}

/// A trusted leaf served with as many self-made certificates as fit in a
/// handshake, each naming a 10 MiB CRL its served issuer really signed, or
/// a URL that never answers; the leaf's own CRL and the ACME directory
/// stall too. Nothing off the verified path is fetched, and the stalled
/// lookups on it are cut at the check's timeout, reported, never failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_handshake_full_of_crl_bombs_is_not_fetched_and_stalled_lookups_are_cut() {
    let ca = CaServer::start().await;
    let stall = Tarpit::start();
    let stalled = |name: &str| format!("http://{}/{name}", stall.addr);
    let leaf = issue(
        &LeafSpec::new([HOST])
            .crl_url(stalled("leaf.crl"))
            .serial(4242),
    );
    let bomb = bomb::bomb(leaf, |i| match i % 2 {
        0 => ca.crl_url(&format!("bomb{i}.crl")),
        _ => stalled(&format!("bomb{i}.crl")),
    });
    for i in (0..bomb.extra).step_by(2) {
        ca.set_crl(&format!("bomb{i}.crl"), bomb.crl.clone());
    }
    // The bomb is real: a 10 MiB CRL that verifies with a served key.
    assert!(bomb.extra >= 100, "{} extra certificates", bomb.extra);
    assert!(bomb.crl.len() > 10_000_000, "{} bytes", bomb.crl.len());
    let (_, list) = x509_parser::revocation_list::CertificateRevocationList::from_der(&bomb.crl)
        .expect("the bomb's CRL parses");
    let (_, key) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&bomb.issuer_key).unwrap();
    list.verify_signature(&key)
        .expect("the bomb's CRL verifies with the served issuer's key");

    let server = TlsServer::start_leaf(&bomb.leaf, TlsOpts::default());
    let extra = format!(
        "timeout = \"2s\"\n[check.tls]\nacme_directory = {:?}\n",
        stalled("directory")
    );
    let outcome = probe(&server.url("/"), &extra).await;
    let tls = outcome.tls.as_ref().unwrap();
    assert!(tls.trusted, "{}", pretty(&outcome));
    assert_eq!(tls.chain.len(), 3 + bomb.extra);
    assert_eq!(tls.verified_path, Some(vec![0, 1]));
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let fetched: usize = (0..bomb.extra)
        .map(|i| ca.hits(&format!("crl/bomb{i}.crl")))
        .sum();
    assert_eq!(fetched, 0, "no CRL off the verified path is fetched");
    // The directory, and perhaps the leaf's CRL: nothing else.
    assert!(stall.connections() <= 2, "{} stalled", stall.connections());
    let ari = tls.ari.as_ref().expect("ARI asked");
    assert_eq!(
        ari.error.as_deref(),
        Some("ARI not fetched: the probe's time budget was spent"),
        "{ari:?}"
    );
    assert_eq!(tls.revocation.len(), 1, "only the leaf's CRL");
    assert_eq!(tls.revocation[0].status, CrlStatus::Unavailable);
    assert_eq!(
        tls.revocation[0].detail.as_deref(),
        Some("CRL not fetched: the probe's time budget was spent")
    );
}

// ------------------------------------------------------ short-lived

fn short_lived(left: i64) -> Leaf {
    issue(&LeafSpec::new([HOST]).hours_left(left, 160))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_160_hour_leaf_is_judged_in_hours() {
    let fresh = probe_leaf(&short_lived(159), "").await;
    assert_eq!(fresh.status, Status::Up, "{}", pretty(&fresh));
    let leaf = fresh.leaf().unwrap();
    assert_eq!((leaf.hours_left, leaf.lifetime_hours), (159, 160));

    let aging = probe_leaf(&short_lived(30), "").await;
    assert_eq!(aging.status, Status::Warn, "{}", pretty(&aging));
    assert_eq!(
        failure(&aging, "tls.renewal_overdue").observed,
        "30 hours of 160 left"
    );

    let late = probe_leaf(&short_lived(10), "").await;
    assert_eq!(late.status, Status::Down, "{}", pretty(&late));
    let f = failure(&late, "tls.expiry");
    assert_eq!(f.expected, ">= 16 hours (a tenth of the 160-hour lifetime)");
    assert_eq!(f.observed, "10 hours");
}

// ------------------------------------------------------------ Gen Y

async fn gen_y_check(env: &Env, server: &TlsServer, anchor: &CaCert) -> Outcome {
    let path = env.path().join("anchor.pem");
    std::fs::write(&path, &anchor.pem).unwrap();
    let extra = format!("[check.tls]\nca_file = {:?}\n", path.display().to_string());
    env.write_checks("t.toml", &check_toml("t", &server.url("/"), &extra));
    env.run_all().await.remove(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gen_y_chain_is_reported_as_served_and_judged_on_the_verified_path() {
    // X2's cross-sign by X1 expires in 3 days.
    let gen_y = GenY::generate(3);
    let leaf = gen_y.issue(&LeafSpec::new([HOST]));
    let server = TlsServer::start_leaf(&leaf, TlsOpts::default());

    // Trusting X1 only: the path goes through both cross-signs, and the
    // expiring X2 breaks it.
    let env = Env::new();
    let outcome = gen_y_check(&env, &server, &gen_y.x1).await;
    let tls = outcome.tls.as_ref().unwrap();
    assert!(tls.trusted, "{}", pretty(&outcome));
    assert_eq!(
        tls.chain.len(),
        4,
        "leaf and three certificates above it, as served"
    );
    assert!(tls.chain[3].subject.ends_with("CN=Vigie Root X2"));
    assert!(tls.chain[3].issuer.ends_with("CN=Vigie Root X1"));
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let f = failure(&outcome, "tls.expiry");
    assert!(f.message.contains("Vigie Root X2"), "{}", f.message);

    // Trusting Root YE itself: the path ends at YE1, and the cross-signs
    // served for older clients are not judged.
    let env = Env::new();
    let outcome = gen_y_check(&env, &server, &gen_y.root_ye).await;
    let tls = outcome.tls.as_ref().unwrap();
    assert!(tls.trusted, "{}", pretty(&outcome));
    assert_eq!(tls.chain.len(), 4);
    assert_eq!(tls.verified_path, Some(vec![0, 1]), "{}", pretty(&outcome));
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
}
