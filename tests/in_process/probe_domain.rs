//! `kind = "domain"` against a registry's RDAP server on loopback
//! (`common::rdap_server`), which also serves the bootstrap: recorded RFC
//! 9083 answers for a healthy domain, one expiring, one on clientHold, a
//! 429, a TLD the bootstrap does not know. Time is a [`FakeClock`] at the
//! recorded documents' "now" (2026-12-07 08:00 UTC), moved by the tests;
//! the prober is kept across rounds as the daemon keeps it, and built
//! again on the same state directory for a restart.
//!
//! Every domain is under `.test` or `.io`, which the snapshot shipped
//! with vigie has no server for: nothing here can reach a real registry,
//! even if the test bootstrap were not served.

use std::sync::Arc;
use std::time::Duration;

use time::macros::datetime;
use time::OffsetDateTime;
use vigie::clock::{Clock, FakeClock};
use vigie::config::Config;
use vigie::outcome::{DomainReport, Outcome, Status};
use vigie::probe::Prober;

use crate::common::env::{assertions, failure, pretty, Env};
use crate::common::rdap_server::RdapServer;

/// The recorded documents' present.
const NOW: OffsetDateTime = datetime!(2026-12-07 08:00 UTC);

fn domain_check(name: &str, domain: &str, extra: &str) -> String {
    format!(
        "[[check]]\nname = {name:?}\nkind = \"domain\"\ndomain = {domain:?}\nevery = \"1s\"\n{extra}\n"
    )
}

/// A config whose bootstrap is `server`'s, with `checks`, and its state
/// directory made (as the daemon makes it).
fn env_for(server: &RdapServer, checks: &str) -> Env {
    let env = Env::with_config(&format!("rdap_bootstrap = {:?}\n", server.bootstrap_url()));
    std::fs::create_dir_all(env.path().join("state")).unwrap();
    env.write_checks("domains.toml", checks);
    env
}

/// A prober kept across rounds, on a clock the test moves.
struct Probing {
    config: Config,
    clock: FakeClock,
    prober: Prober,
}

impl Probing {
    fn start(env: &Env, clock: &FakeClock) -> Probing {
        let config = env.load();
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let prober = vigie::runner::prober(&config, shared).expect("prober");
        Probing {
            config,
            clock: clock.clone(),
            prober,
        }
    }

    /// Every check once, in order, one at a time.
    async fn round(&self) -> Vec<Outcome> {
        let checks = self.config.all_checks();
        vigie::runner::check_now(&self.prober, &self.clock, &checks, 1).await
    }

    async fn one(&self) -> Outcome {
        self.round().await.remove(0)
    }
}

fn report(outcome: &Outcome) -> &DomainReport {
    outcome
        .domain
        .as_deref()
        .unwrap_or_else(|| panic!("no domain report in {}", pretty(outcome)))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_domain_is_up_with_its_registration_facts() {
    let server = RdapServer::start().await;
    server.serve("healthy.test", "healthy.json");
    let env = env_for(&server, &domain_check("brand", "healthy.test", ""));
    let outcome = Probing::start(&env, &FakeClock::new(NOW)).one().await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(outcome.target, "domain:healthy.test");
    let facts = report(&outcome);
    assert_eq!(facts.expires_at, Some(datetime!(2027-08-13 09:12:04 UTC)));
    assert_eq!(facts.last_changed, Some(datetime!(2026-07-14 16:40:22 UTC)));
    assert_eq!(facts.registrar.as_deref(), Some("Example Registrar, Inc."));
    assert_eq!(
        facts.statuses,
        [
            "client delete prohibited",
            "client transfer prohibited",
            "client update prohibited"
        ]
    );
    assert!(facts.queried);
    assert_eq!(facts.answered_at, Some(NOW));
    assert_eq!(facts.next_query_at, Some(NOW + time::Duration::hours(12)));
    assert_eq!(
        facts.rdap_url.as_deref(),
        Some(format!("{}domain/healthy.test", server.base_url()).as_str())
    );
    assert_eq!((server.hits("bootstrap"), server.hits("rdap")), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn expiry_within_seven_days_is_down_and_within_thirty_a_warning() {
    let server = RdapServer::start().await;
    server.serve("expiring.test", "expiring.json");
    server.serve("renewal.test", "renewal.json");
    let checks = domain_check("expiring", "expiring.test", "")
        + &domain_check("renewal", "renewal.test", "");
    let env = env_for(&server, &checks);
    let outcomes = Probing::start(&env, &FakeClock::new(NOW)).round().await;

    assert_eq!(outcomes[0].status, Status::Down, "{}", pretty(&outcomes[0]));
    let f = failure(&outcomes[0], "domain.expiry");
    assert_eq!(f.message, "expiring.test expires in 5 days (2026-12-12)");
    assert_eq!(
        (f.expected.as_str(), f.observed.as_str()),
        (">= 7 days", "5 days")
    );

    assert_eq!(outcomes[1].status, Status::Warn, "{}", pretty(&outcomes[1]));
    let f = failure(&outcomes[1], "domain.renewal_due");
    assert!(
        f.message
            .starts_with("renewal.test expires in 21 days (2026-12-28): renew it"),
        "{}",
        f.message
    );
    // One bootstrap for both, one query each.
    assert_eq!((server.hits("bootstrap"), server.hits("rdap")), (1, 2));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_thresholds_come_from_check_rdap() {
    let server = RdapServer::start().await;
    server.serve("renewal.test", "renewal.json");
    let strict = "[check.rdap]\nwarn_days = 60\ncritical_days = 30\n";
    let env = env_for(&server, &domain_check("renewal", "renewal.test", strict));
    let outcome = Probing::start(&env, &FakeClock::new(NOW)).one().await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let f = failure(&outcome, "domain.expiry");
    assert_eq!(f.expected, ">= 30 days");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_domain_on_client_hold_is_down_though_its_date_is_a_year_away() {
    let server = RdapServer::start().await;
    server.serve("held.test", "held.json");
    let env = env_for(&server, &domain_check("held", "held.test", ""));
    let outcome = Probing::start(&env, &FakeClock::new(NOW)).one().await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    assert_eq!(
        assertions(&outcome),
        [vigie::outcome::Assertion::DomainStatus]
    );
    let f = failure(&outcome, "domain.status");
    assert!(
        f.message
            .starts_with("held.test is on clientHold at its registry: the domain does not resolve"),
        "{}",
        f.message
    );
    assert_eq!(f.observed, "client hold, client transfer prohibited");
    assert_eq!(
        report(&outcome).expires_at,
        Some(datetime!(2027-10-01 09:12:04 UTC))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_domain_its_registry_does_not_know_is_down() {
    let server = RdapServer::start().await;
    let env = env_for(&server, &domain_check("lapsed", "lapsed.test", ""));
    let outcome = Probing::start(&env, &FakeClock::new(NOW)).one().await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let f = failure(&outcome, "domain.status");
    assert!(
        f.message.starts_with("lapsed.test is not registered"),
        "{}",
        f.message
    );
    assert!(report(&outcome).not_found);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tld_without_rdap_service_is_unknown_saying_to_set_rdap_url() {
    let server = RdapServer::start().await;
    let env = env_for(&server, &domain_check("startup", "example.io", ""));
    let probing = Probing::start(&env, &FakeClock::new(NOW));
    for _ in 0..3 {
        let outcome = probing.one().await;
        assert_eq!(outcome.status, Status::Warn, "{}", pretty(&outcome));
        assert_ne!(outcome.status, Status::Up);
        let f = failure(&outcome, "domain.rdap");
        assert_eq!(
            f.message,
            "example.io: no RDAP service for .io: set rdap_url"
        );
        assert_eq!(report(&outcome).answered_at, None);
        assert!(report(&outcome).no_service);
    }
    assert_eq!(server.hits("rdap"), 0, "nothing to ask");

    // With rdap_url, the registry is asked there, without the bootstrap.
    let registry = RdapServer::start().await;
    registry.serve("example.io", "healthy.json");
    let with_url = format!(
        "rdap_url = {:?}\n",
        registry.base_url().trim_end_matches('/')
    );
    let env = env_for(&registry, &domain_check("startup", "example.io", &with_url));
    let outcome = Probing::start(&env, &FakeClock::new(NOW)).one().await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(registry.hits("domain/example.io"), 1);
    assert_eq!(registry.hits("bootstrap"), 0, "rdap_url needs no bootstrap");
}

/// The figure: a domain probed every second, then every hour, for two
/// days costs its registry one query per 12 h, also across a restart.
#[tokio::test(flavor = "multi_thread")]
async fn a_domain_probed_every_second_asks_its_registry_at_most_once_per_12_hours() {
    let server = RdapServer::start().await;
    server.serve("healthy.test", "healthy.json");
    let env = env_for(&server, &domain_check("brand", "healthy.test", ""));
    let clock = FakeClock::new(NOW);
    let probing = Probing::start(&env, &clock);
    let mut probes = 0;
    // Every second for a minute: one query.
    for _ in 0..60 {
        let outcome = probing.one().await;
        probes += 1;
        assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(server.hits("rdap"), 1, "{probes} probes in a minute");
    let after_first = probing.one().await;
    probes += 1;
    let facts = report(&after_first);
    assert!(!facts.queried, "answered from the last answer");
    assert_eq!(facts.answered_at, Some(NOW));

    // Then every hour up to 48 h: a query at 12, 24, 36 and 48 h.
    clock.set(NOW);
    for hour in 1..=48u64 {
        clock.set(NOW + time::Duration::hours(hour as i64));
        let outcome = probing.one().await;
        probes += 1;
        assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
        let most = 1 + hour / 12;
        assert!(
            server.hits("rdap") as u64 <= most,
            "{} queries after {hour} h",
            server.hits("rdap")
        );
    }
    let queries = server.hits("rdap");
    assert_eq!(queries, 5, "at 0, 12, 24, 36 and 48 h");
    assert_eq!(
        server.hits("bootstrap"),
        3,
        "the bootstrap at 0, 24 and 48 h"
    );

    // A restart on the same state directory reads the last answer back.
    drop(probing);
    clock.set(NOW + time::Duration::hours(50));
    let restarted = Probing::start(&env, &clock);
    for _ in 0..10 {
        let outcome = restarted.one().await;
        probes += 1;
        assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
        assert_eq!(
            report(&outcome).answered_at,
            Some(NOW + time::Duration::hours(48))
        );
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(server.hits("rdap"), queries, "no query after the restart");
    assert_eq!(server.hits("bootstrap"), 3, "nor a bootstrap");
    eprintln!(
        "rdap figure: {probes} probes of one domain over 50 h (every second, then hourly, a restart) made {} RDAP queries and {} bootstrap fetches",
        server.hits("rdap"),
        server.hits("bootstrap")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_keeps_vigie_off_that_server_until_its_retry_after() {
    let server = RdapServer::start().await;
    server.refuse("busy.test", 429, Some("120"));
    server.serve("other.test", "healthy.json");
    let checks = domain_check("busy", "busy.test", "") + &domain_check("other", "other.test", "");
    let env = env_for(&server, &checks);
    let clock = FakeClock::new(NOW);
    let probing = Probing::start(&env, &clock);
    let outcomes = probing.round().await;
    assert_eq!(outcomes[0].status, Status::Warn, "{}", pretty(&outcomes[0]));
    let f = failure(&outcomes[0], "domain.rdap");
    assert!(f.message.contains("HTTP 429"), "{}", f.message);
    // The same server, another domain: not asked while it waits.
    assert_eq!(outcomes[1].status, Status::Warn, "{}", pretty(&outcomes[1]));
    let f = failure(&outcomes[1], "domain.rdap");
    assert!(
        f.message
            .contains("asked vigie to wait until 2026-12-07 08:02 UTC"),
        "{}",
        f.message
    );
    assert_eq!(
        (
            server.hits("domain/busy.test"),
            server.hits("domain/other.test")
        ),
        (1, 0)
    );

    clock.advance(Duration::from_secs(60));
    probing.round().await;
    assert_eq!(server.hits("rdap"), 1, "still within Retry-After");

    clock.advance(Duration::from_secs(61));
    let outcomes = probing.round().await;
    assert_eq!(outcomes[1].status, Status::Up, "{}", pretty(&outcomes[1]));
    // busy.test was asked 2 min ago: its own 12 h hold still.
    assert_eq!(
        (
            server.hits("domain/busy.test"),
            server.hits("domain/other.test")
        ),
        (1, 1)
    );
    assert_eq!(
        report(&outcomes[0]).next_query_at,
        Some(NOW + time::Duration::hours(12))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_after_as_an_http_date_is_honoured_too() {
    let server = RdapServer::start().await;
    server.refuse("busy.test", 429, Some("Mon, 07 Dec 2026 10:00:00 GMT"));
    server.serve("other.test", "healthy.json");
    let checks = domain_check("busy", "busy.test", "") + &domain_check("other", "other.test", "");
    let env = env_for(&server, &checks);
    let clock = FakeClock::new(NOW);
    let probing = Probing::start(&env, &clock);
    probing.round().await;
    clock.set(NOW + time::Duration::minutes(119));
    probing.round().await;
    assert_eq!(server.hits("domain/other.test"), 0, "before 10:00");
    clock.set(NOW + time::Duration::minutes(121));
    let outcomes = probing.round().await;
    assert_eq!(outcomes[1].status, Status::Up, "{}", pretty(&outcomes[1]));
    assert_eq!(server.hits("domain/other.test"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_bootstrap_refresh_keeps_the_bootstrap_held() {
    let server = RdapServer::start().await;
    server.serve("healthy.test", "healthy.json");
    // example.io looks the bootstrap up at every probe (it has no server).
    let checks =
        domain_check("brand", "healthy.test", "") + &domain_check("startup", "example.io", "");
    let env = env_for(&server, &checks);
    let clock = FakeClock::new(NOW);
    let probing = Probing::start(&env, &clock);
    assert_eq!(probing.round().await[0].status, Status::Up);
    assert_eq!(server.hits("bootstrap"), 1);

    server.set_bootstrap(503, "busy");
    clock.set(NOW + time::Duration::hours(25));
    let outcome = probing.one().await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert!(report(&outcome).queried, "asked through the bootstrap held");
    assert_eq!((server.hits("bootstrap"), server.hits("rdap")), (2, 2));
    // Tried again an hour later, not at every probe.
    clock.set(NOW + time::Duration::minutes(25 * 60 + 30));
    probing.round().await;
    assert_eq!(server.hits("bootstrap"), 2);
    clock.set(NOW + time::Duration::hours(26));
    probing.round().await;
    assert_eq!(server.hits("bootstrap"), 3);

    // A restart reads the copy kept in the state directory (the shipped
    // snapshot has no .test: an answer proves the copy was used).
    drop(probing);
    clock.set(NOW + time::Duration::hours(38));
    let outcome = Probing::start(&env, &clock).one().await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert!(report(&outcome).queried);
    assert_eq!(server.hits("rdap"), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_kept_copy_nor_iana_the_shipped_snapshot_answers() {
    let server = RdapServer::start().await;
    server.set_bootstrap(503, "down");
    server.serve("healthy.test", "healthy.json");
    let env = env_for(&server, &domain_check("brand", "healthy.test", ""));
    let outcome = Probing::start(&env, &FakeClock::new(NOW)).one().await;
    // The shipped snapshot has no .test: so it says, and asks nobody.
    assert_eq!(outcome.status, Status::Warn, "{}", pretty(&outcome));
    let f = failure(&outcome, "domain.rdap");
    assert_eq!(
        f.message,
        "healthy.test: no RDAP service for .test: set rdap_url"
    );
    assert_eq!((server.hits("bootstrap"), server.hits("rdap")), (1, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_over_a_mebibyte_is_not_read() {
    let server = RdapServer::start().await;
    let padding = " ".repeat(2 << 20);
    server.serve_bytes(
        "huge.test",
        format!("{{\"objectClassName\": \"domain\",{padding}\"status\": []}}"),
    );
    let env = env_for(&server, &domain_check("huge", "huge.test", ""));
    let outcome = Probing::start(&env, &FakeClock::new(NOW)).one().await;
    assert_eq!(outcome.status, Status::Warn, "{}", pretty(&outcome));
    let f = failure(&outcome, "domain.rdap");
    assert!(
        f.message.contains("larger than 1048576 bytes"),
        "{}",
        f.message
    );
}
