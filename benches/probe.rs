//! Probe throughput and cost: N local HTTPS targets (default 1000), probed
//! at concurrency 64 through the real config -> probe -> evaluate path, a
//! full TLS 1.3 handshake with an ECDSA P-256 chain each time.
//!
//! The targets run in a child process (this binary re-executed with
//! `--serve`), so the CPU time and peak RSS printed are vigie's alone.
//!
//! Run: `cargo bench --bench probe` (or `-- N CONCURRENCY ROUNDS`);
//! `VIGIE_BENCH_CLASSICAL_KX=1` makes the targets support no post-quantum
//! key exchange (see `support/targets.rs`).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/targets.rs"]
mod targets;

use std::sync::Arc;
use std::time::Instant;

use vigie::clock::{Clock, SystemClock};

fn main() {
    if targets::serve_if_asked() {
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let concurrency: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    measure(n, concurrency, rounds);
}

fn measure(n: usize, concurrency: usize, rounds: usize) {
    let targets = targets::Targets::start(n);
    let dir = &targets.dir;
    let checks = targets.checks_toml("");
    std::fs::create_dir_all(dir.path().join("checks")).expect("checks dir");
    std::fs::write(dir.path().join("checks/bench.toml"), checks).expect("write checks");
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "concurrency = {concurrency}\ndefault_timeout = \"30s\"\nextra_ca_file = {:?}\n[alerting]\nenabled = false\n",
            targets.root_pem.display().to_string()
        ),
    )
    .expect("write config");

    let config = vigie::config::load(&dir.path().join("config.toml")).expect("bench config");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let prober = vigie::runner::prober(&config, clock.clone()).expect("prober");
    let checks = config.all_checks();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    println!(
        "after setup (config, trust, runtime): peak RSS {:.1} MiB",
        targets::proc_mib("self", "VmHWM")
    );
    println!("probe bench: {n} HTTPS targets, concurrency {concurrency}, TLS 1.3 + ECDSA P-256, full handshake each");
    for round in 0..=rounds {
        let cpu_before = targets::cpu_time();
        let started = Instant::now();
        let outcomes = runtime.block_on(vigie::runner::check_now(
            &prober,
            clock.as_ref(),
            &checks,
            config.concurrency,
        ));
        let wall = started.elapsed();
        let cpu = targets::cpu_time() - cpu_before;
        let down = outcomes
            .iter()
            .filter(|o| o.status != vigie::outcome::Status::Up)
            .count();
        assert_eq!(
            down,
            0,
            "every probe must succeed: {:?}",
            outcomes.iter().find(|o| !o.failures.is_empty())
        );
        let label = match round {
            0 => "warm-up".to_string(),
            r => format!("round {r}"),
        };
        println!(
            "{label:>8}: {:>7.0} probes/s  {:>6.3} ms CPU/probe  peak RSS {:>5.1} MiB",
            n as f64 / wall.as_secs_f64(),
            cpu.as_secs_f64() * 1000.0 / n as f64,
            targets::proc_mib("self", "VmHWM")
        );
    }
}
