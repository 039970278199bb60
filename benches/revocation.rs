//! What ARI and CRL lookups cost (issue 17).
//!
//! 1. Requests to the CA: 1,000 checks every 30 s sharing 10 certificates,
//!    over a simulated day (a `FakeClock` advanced 30 s per round). Every
//!    lookup goes through the prober's real caches (`probe::ca::Authority`:
//!    facts per chain, the ARI and CRL caches) to a real loopback CA
//!    (`tests/common/ca_server.rs`) answering ARI with `Retry-After: 21600`
//!    (Let's Encrypt's usual six hours) and CRLs valid for 24 hours, one
//!    CRL URL per certificate (the worst case: Let's Encrypt shards).
//!    Printed: requests in the first hour and per hour over the day.
//! 2. CPU per probe for revocation on a cached CRL of 100,000 entries: the
//!    first lookup fetches, verifies and indexes it (timed once), then
//!    100,000 lookups of a served leaf (not listed) and of a revoked one
//!    are timed, with ARI off, through `Authority::inspect` as a probe
//!    calls it.
//! 3. (run first, while the process is small) A hostile target, probed as the daemon probes it (config, prober,
//!    `runner::check_now`) over loopback: a trusted leaf served with as
//!    many self-made certificates as fit in a handshake
//!    (`tests/common/bomb.rs`), each naming a 10 MiB CRL that their served
//!    issuer signed; then the same with every CRL URL, and the ACME
//!    directory, stalling (a TCP server that never answers). Printed: the
//!    process's peak RSS during the probe (VmHWM, reset before it through
//!    /proc/self/clear_refs), when the outcome arrived against the check's
//!    `timeout`, and how many CRLs were fetched. The bench fails if the
//!    peak passes 64 MiB or the outcome comes later than `timeout` + 1 s.
//!
//! Run: `cargo bench --features fault-injection --bench revocation`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::ca_server::CaServer;
use common::env::{check_toml, Env};
use common::pki::{crl, issue, now, test_ca, LeafSpec, HOST};
use common::servers::{Tarpit, TlsOpts, TlsServer};
use vigie::check::Check;
use vigie::clock::{Clock, FakeClock};
use vigie::outcome::{CrlStatus, TlsReport};
use vigie::probe::budget::Budget;
use vigie::probe::ca::Authority;
use vigie::probe::client::Client;

const CHECKS: usize = 1000;
const CERTS: usize = 10;
const EVERY: Duration = Duration::from_secs(30);
/// The checks' own target: a loopback server, so the CA on loopback is
/// within their address policy, as in the tests.
const LOOPBACK: Option<std::net::IpAddr> =
    Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // First, while the process is small: its peak RSS is the figure.
        crl_bomb().await;
        requests_per_hour().await;
        cpu_per_lookup().await;
    });
}

struct Served {
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    report: TlsReport,
}

fn served(leaf: &common::pki::Leaf, at: time::OffsetDateTime) -> Served {
    let chain: Arc<[vigie::cert::CertInfo]> = leaf
        .chain
        .iter()
        .map(|der| vigie::cert::read(der, at).info)
        .collect();
    Served {
        chain: leaf.chain.clone(),
        report: TlsReport {
            server_name: HOST.to_string(),
            version: None,
            cipher_suite: None,
            key_exchange: None,
            trusted: true,
            verify_error: None,
            hostname_matches: true,
            ari: None,
            revocation: Vec::new(),
            verified_path: None,
            chain,
        },
    }
}

fn setup(tls_keys: &str, clock: Arc<dyn Clock>) -> (tempfile::TempDir, Client, Vec<Check>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = common::pki::write_root_pem(dir.path());
    let text = format!(
        "[[check]]\nname = \"bench\"\nkind = \"http\"\nurl = \"https://{HOST}/\"\n[check.tls]\n{tls_keys}\n"
    );
    let checks = vigie::config::checks_from_str(
        &dir.path().join("bench.toml"),
        &text,
        Duration::from_secs(10),
    )
    .expect("bench check");
    let arcs: Vec<Arc<Check>> = checks.iter().cloned().map(Arc::new).collect();
    let client = Client::new(Some(&root), &arcs, clock).expect("client");
    (dir, client, checks)
}

async fn requests_per_hour() {
    let ca = CaServer::start().await;
    let start = now();
    ca.set_window(
        start + time::Duration::days(30),
        start + time::Duration::days(32),
        None,
        Some(21600),
    );
    let leaves: Vec<Served> = (0..CERTS)
        .map(|i| {
            let name = format!("c{i}.crl");
            ca.set_crl(
                &name,
                crl(
                    &test_ca().intermediate,
                    &[9_999],
                    start,
                    start + time::Duration::hours(24),
                ),
            );
            let leaf = issue(
                &LeafSpec::new([HOST])
                    .crl_url(ca.crl_url(&name))
                    .serial(100 + i as u64),
            );
            served(&leaf, start)
        })
        .collect();
    let clock = FakeClock::new(start);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let keys = format!("acme_directory = {:?}", ca.directory_url());
    let (_dir, client, checks) = setup(&keys, shared);
    let check = &checks[0];
    let trust = client.trust_for(check);
    let authority = Authority::default();
    let rounds_per_hour = 3600 / EVERY.as_secs() as usize;
    let mut first_hour = 0;
    let wall = Instant::now();
    for round in 0..rounds_per_hour * 24 {
        for i in 0..CHECKS {
            let leaf = &leaves[i % CERTS];
            let report = inspect(&authority, &client, check, &trust, leaf).await;
            assert!(
                report.ari.as_ref().is_some_and(|a| a.error.is_none())
                    && report.revocation[0].status == CrlStatus::Good,
                "{report:?}"
            );
        }
        if round + 1 == rounds_per_hour {
            first_hour = ca.hits("ari") + ca.hits("directory") + crl_hits(&ca);
        }
        clock.advance(EVERY);
    }
    let (ari, directory, crls) = (ca.hits("ari"), ca.hits("directory"), crl_hits(&ca));
    println!(
        "requests: {CHECKS} checks every {}s sharing {CERTS} certificates, simulated 24 h \
         ({} lookups each of ARI and CRL, {:.1} s wall)",
        EVERY.as_secs(),
        CHECKS * rounds_per_hour * 24,
        wall.elapsed().as_secs_f64()
    );
    println!("  first hour: {first_hour} requests (cold caches)");
    println!(
        "  24 hours: ARI {ari}, directory {directory}, CRL {crls}: {:.1} requests per hour",
        (ari + directory + crls) as f64 / 24.0
    );
}

fn crl_hits(ca: &CaServer) -> usize {
    (0..CERTS).map(|i| ca.hits(&format!("crl/c{i}.crl"))).sum()
}

async fn cpu_per_lookup() {
    const ENTRIES: u64 = 100_000;
    let ca = CaServer::start().await;
    let start = now();
    let made = Instant::now();
    let revoked: Vec<u64> = (1..=ENTRIES).map(|n| n * 7).collect();
    let der = crl(
        &test_ca().intermediate,
        &revoked,
        start,
        start + time::Duration::hours(24),
    );
    println!(
        "CRL of {ENTRIES} entries: {:.1} MiB (made in {:.1} s)",
        der.len() as f64 / (1024.0 * 1024.0),
        made.elapsed().as_secs_f64()
    );
    ca.set_crl("big.crl", der);
    let good = served(
        &issue(
            &LeafSpec::new([HOST])
                .crl_url(ca.crl_url("big.crl"))
                .serial(7 * ENTRIES + 1),
        ),
        start,
    );
    let listed = served(
        &issue(
            &LeafSpec::new([HOST])
                .crl_url(ca.crl_url("big.crl"))
                .serial(7 * 4242),
        ),
        start,
    );
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(start));
    let (_dir, client, checks) = setup("ari = false", clock);
    let check = &checks[0];
    let trust = client.trust_for(check);
    let authority = Authority::default();

    let first = Instant::now();
    let report = inspect(&authority, &client, check, &trust, &good).await;
    assert_eq!(report.revocation[0].status, CrlStatus::Good, "{report:?}");
    println!(
        "  first lookup (fetch over loopback, verify, index): {:.1} ms",
        first.elapsed().as_secs_f64() * 1000.0
    );
    for (name, leaf, status) in [
        ("not listed", &good, CrlStatus::Good),
        ("revoked", &listed, CrlStatus::Revoked),
    ] {
        const LOOKUPS: u32 = 100_000;
        let cpu = cpu_time();
        let timed = Instant::now();
        for _ in 0..LOOKUPS {
            let report = inspect(&authority, &client, check, &trust, leaf).await;
            assert_eq!(report.revocation[0].status, status);
        }
        let wall = timed.elapsed() / LOOKUPS;
        let cpu = (cpu_time() - cpu) / LOOKUPS;
        println!(
            "  cached lookup, {name}: {:.2} us wall, {:.2} us CPU per probe (aim < 100 us)",
            wall.as_secs_f64() * 1e6,
            cpu.as_secs_f64() * 1e6
        );
    }
    assert_eq!(ca.hits("crl/big.crl"), 1, "one fetch for every lookup");
}

/// `served`'s report once `authority` has looked its chain up, as a probe
/// does, with a budget no lookup here comes near: these parts measure the
/// caches.
async fn inspect(
    authority: &Authority,
    client: &Client,
    check: &Check,
    trust: &vigie::probe::tls::Trust,
    served: &Served,
) -> TlsReport {
    let budget = Budget::until(tokio::time::Instant::now() + Duration::from_secs(3600));
    let mut report = served.report.clone();
    authority
        .inspect(
            client,
            check,
            trust,
            &served.chain,
            LOOPBACK,
            &budget,
            &mut report,
        )
        .await;
    report
}

async fn crl_bomb() {
    const TIMEOUT: Duration = Duration::from_secs(5);
    let ca = CaServer::start().await;
    let stall = Tarpit::start();
    let start = now();
    ca.set_crl(
        "leaf.crl",
        crl(
            &test_ca().intermediate,
            &[9_999],
            start,
            start + time::Duration::hours(24),
        ),
    );
    let leaf = |url: String| issue(&LeafSpec::new([HOST]).crl_url(url).serial(4242));
    let bombs = common::bomb::bomb(leaf(ca.crl_url("leaf.crl")), |i| {
        ca.crl_url(&format!("bomb{i}.crl"))
    });
    for i in 0..bombs.extra {
        ca.set_crl(&format!("bomb{i}.crl"), bombs.crl.clone());
    }
    let stalled = |name: &str| format!("http://{}/{name}", stall.addr);
    let stalls = common::bomb::bomb(leaf(stalled("leaf.crl")), |i| {
        stalled(&format!("bomb{i}.crl"))
    });
    println!(
        "CRL bomb: {} extra certificates in one handshake, each naming a {:.1} MiB CRL; \
         check timeout {}",
        bombs.extra,
        bombs.crl.len() as f64 / (1024.0 * 1024.0),
        humantime::format_duration(TIMEOUT)
    );
    let timeout = format!("timeout = \"{}s\"\n", TIMEOUT.as_secs());
    let bomb_extra = format!("{timeout}[check.tls]\nari = false\n");
    let stall_extra = format!(
        "{timeout}[check.tls]\nacme_directory = {:?}\n",
        stalled("directory")
    );
    for (name, leaf, extra) in [
        ("10 MiB CRLs", &bombs.leaf, bomb_extra),
        ("stalled CRL and ARI URLs", &stalls.leaf, stall_extra),
    ] {
        let server = TlsServer::start_leaf(leaf, TlsOpts::default());
        let env = Env::new();
        env.write_checks("bomb.toml", &check_toml("bomb", &server.url("/"), &extra));
        // What making the bomb freed goes back to the system first, so
        // the peak is the probe's (and the loopback servers', the 10 MiB
        // CRL they serve included).
        // SAFETY: malloc_trim only returns free heap memory to the system.
        unsafe { libc::malloc_trim(0) };
        reset_peak_rss();
        let base = peak_rss();
        let stalled_before = stall.connections();
        let timed = Instant::now();
        let outcome = env.run_all().await.remove(0);
        let took = timed.elapsed();
        let peak = peak_rss();
        let fetched: usize = (0..bombs.extra)
            .map(|i| ca.hits(&format!("crl/bomb{i}.crl")))
            .sum();
        let tls = outcome.tls.as_ref().expect("a TLS report");
        println!(
            "  {name}: status {:?}, peak RSS {:.1} MiB (before the probe {:.1} MiB), outcome after \
             {:.2} s, {fetched} extra CRLs fetched, {} connections to the stalling server, \
             leaf CRL {:?}",
            outcome.status,
            peak as f64 / (1024.0 * 1024.0),
            base as f64 / (1024.0 * 1024.0),
            took.as_secs_f64(),
            stall.connections() - stalled_before,
            tls.revocation.first().map(|r| (r.status, r.detail.clone())),
        );
        assert!(tls.trusted, "the bomb's chain verifies");
        assert_eq!(fetched, 0, "no CRL off the verified path is fetched");
        assert!(peak < 64 * 1024 * 1024, "peak RSS {peak} bytes");
        assert!(
            took < TIMEOUT + Duration::from_secs(1),
            "outcome after {took:?}"
        );
    }
}

/// Resets this process's peak RSS (VmHWM) to its current RSS.
fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
}

/// This process's peak RSS (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

/// CPU time of this process (user + system).
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
