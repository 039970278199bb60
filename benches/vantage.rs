//! Several vantages, measured: the real `vigie run` processes against moto
//! (SigV4, conditional writes) and aiosmtpd, as in `tests/daemon/vantage.rs`.
//!
//! 1. Page latency: from the moment the target becomes unreachable to the
//!    DOWN mail at the SMTP server, for a lone vigie (no `[vantage]`) and
//!    for three vantages at the default `publish_every` (10 s). Aim: the
//!    fleet's extra latency < publish_every + 1 s.
//! 2. At 1,000 checks every 30 s: bucket requests per node per hour (aim:
//!    a few hundred), and the CPU and peak memory of a node with
//!    `[vantage]` against a lone vigie (aim: within noise).
//! 3. The state one node publishes at 1,000 checks: its size, and the CPU
//!    to build and serialise it.
//!
//! Run: `cargo bench --bench vantage [-- RUNS WINDOW]` (default 3 runs,
//! a 2-minute window).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/targets.rs"]
mod targets;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::vantage::{metric, site, wait_mails, Fleet, Spec};
use time::OffsetDateTime;
use vigie::vantage::{CheckView, NodeHealth, NodeState, ViewStatus};

const ALERTING: &str = "failure_threshold = 2\nrecovery_threshold = 2\ngroup_window = \"0s\"\n";

fn main() {
    if targets::serve_if_asked() {
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(3);
    let window = args
        .get(1)
        .map(|a| humantime::parse_duration(a).expect("WINDOW, e.g. 2m"))
        .unwrap_or(Duration::from_secs(120));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        latency(runs).await;
        at_scale(window).await;
    });
    state_size();
}

/// Seconds from closing every node's gate to the DOWN mail, `runs` times.
async fn outage_to_mail(fleet: &Fleet, runs: usize) -> Vec<f64> {
    let mut seconds = Vec::new();
    for run in 1..=runs {
        // Start each outage at a different point of the publication cycle.
        tokio::time::sleep(Duration::from_millis(3_300)).await;
        let at = Instant::now();
        fleet.close_all();
        wait_mails(&fleet.smtp, "DOWN site", run).await;
        seconds.push(at.elapsed().as_secs_f64());
        fleet.open_all();
        wait_mails(&fleet.smtp, "RESOLVED site", run).await;
    }
    seconds
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn list(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn latency(runs: usize) {
    let lone = Spec {
        alerting: ALERTING,
        vantage: None,
        checks: &site,
        extra: "",
    };
    let fleet = Spec {
        alerting: ALERTING,
        vantage: Some(""),
        checks: &site,
        extra: "",
    };
    let one = Fleet::start_with(&["lone"], &lone).await;
    let alone = outage_to_mail(&one, runs).await;
    one.stop().await;
    let three = Fleet::start_with(&["eu-par", "eu-ams", "fra"], &fleet).await;
    let together = outage_to_mail(&three, runs).await;
    let downs = common::vantage::with_subject(&three.smtp, "DOWN site").len();
    three.stop().await;
    let extra = median(together.clone()) - median(alone.clone());
    println!("page latency, check every 1 s, thresholds 2, group_window 0 s, {runs} outages each:");
    println!(
        "  lone vigie:            median {:.2} s  ({})",
        median(alone.clone()),
        list(&alone)
    );
    println!(
        "  3 vantages (10 s):     median {:.2} s  ({}), {downs} DOWN mail(s) for {runs} outages",
        median(together.clone()),
        list(&together)
    );
    println!(
        "  extra latency: {extra:.2} s    aim < publish_every + 1 s = 11 s: {}",
        if extra < 11.0 { "met" } else { "missed" }
    );
}

/// CPU share of one core and peak RSS of `pid` over `window`.
fn cpu_and_peak(pid: u32, window: Duration) -> (f64, f64) {
    let before = targets::process_cpu_time(pid);
    std::thread::sleep(window);
    let cpu = targets::process_cpu_time(pid) - before;
    (
        cpu.as_secs_f64() / window.as_secs_f64() * 100.0,
        targets::proc_mib(&pid.to_string(), "VmHWM"),
    )
}

async fn at_scale(window: Duration) {
    let targets = targets::Targets::start(1000);
    let checks_toml = targets.checks_toml("every = \"30s\"");
    let checks = |_: &str| checks_toml.clone();
    // `extra_ca_file` of each node is the tests' PKI root; the targets'
    // chain is signed by the same test CA.
    let lone = Spec {
        alerting: ALERTING,
        vantage: None,
        checks: &checks,
        extra: "",
    };
    let fleet = Spec {
        alerting: ALERTING,
        vantage: Some(""),
        checks: &checks,
        extra: "",
    };
    let warm_up = Duration::from_secs(35);

    let one = Fleet::start_with(&["lone"], &lone).await;
    tokio::time::sleep(warm_up).await;
    let pid = one.daemon("lone").pid();
    let (lone_cpu, lone_peak) = tokio::task::spawn_blocking(move || cpu_and_peak(pid, window))
        .await
        .unwrap();
    one.stop().await;

    let three = Fleet::start_with(&["eu-par", "eu-ams", "fra"], &fleet).await;
    tokio::time::sleep(warm_up).await;
    let node = three.daemon("eu-par");
    let requests = |text: &str| metric(text, "vigie_vantage_bucket_requests_total").unwrap_or(0.0);
    let before = requests(&node.get("/metrics").await.unwrap().1);
    let pid = node.pid();
    let (cpu, peak) = tokio::task::spawn_blocking(move || cpu_and_peak(pid, window))
        .await
        .unwrap();
    let after = requests(&node.get("/metrics").await.unwrap().1);
    let (_, metrics) = node.get("/metrics").await.unwrap();
    let failures = metric(&metrics, "vigie_vantage_publish_failures_total").unwrap_or(0.0);
    three.stop().await;
    let per_hour = (after - before) / window.as_secs_f64() * 3600.0;
    println!(
        "1000 checks every 30 s, {} window after a {} warm-up:",
        humantime::format_duration(window),
        humantime::format_duration(warm_up)
    );
    println!(
        "  bucket requests per node: {:.0} in the window = {per_hour:.0} per hour ({failures} publish failures)    aim: a few hundred",
        after - before
    );
    println!("  lone vigie:      CPU {lone_cpu:.2}% of one core, peak RSS {lone_peak:.1} MiB");
    println!("  with [vantage]:  CPU {cpu:.2}% of one core, peak RSS {peak:.1} MiB (3 vantages on these 2 cores)");
}

/// The state of 1,000 checks, as the vantage task publishes it.
fn state_size() {
    let now = OffsetDateTime::now_utc();
    let view = |i: usize| CheckView {
        status: if i % 50 == 0 {
            ViewStatus::Down
        } else {
            ViewStatus::Up
        },
        since: now,
        last_probe: now,
        failure: (i % 50 == 0).then(|| "HTTP 503 Service Unavailable (expected 200)".to_string()),
        firing: i % 50 == 0,
        warning: false,
        closed: None,
    };
    let build = || NodeState {
        node: "eu-par".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        published_at: now,
        health: NodeHealth {
            status: "ok".into(),
            degraded: Vec::new(),
        },
        checks: (0..1000)
            .map(|i| (format!("check-{i:04}"), view(i)))
            .collect::<BTreeMap<_, _>>(),
        claims: Vec::new(),
    };
    let rounds = 200;
    let started = targets::cpu_time();
    let mut bytes = 0;
    for _ in 0..rounds {
        bytes = build().to_json().len();
    }
    let per = (targets::cpu_time() - started) / rounds;
    println!(
        "state of 1000 checks: {bytes} bytes; built and serialised in {:.2} ms CPU, {:.1} ms CPU an hour at publish_every 10 s",
        per.as_secs_f64() * 1000.0,
        per.as_secs_f64() * 1000.0 * 360.0
    );
}
