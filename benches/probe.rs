//! Probe throughput and cost: N local HTTPS targets (default 1000), probed
//! at concurrency 64 through the real config -> probe -> evaluate path, a
//! full TLS 1.3 handshake with an ECDSA P-256 chain each time.
//!
//! The targets run in a child process (this binary re-executed with
//! `--serve`), so the CPU time and peak RSS printed are vigie's alone.
//!
//! Run: `cargo bench --bench probe` (or `-- N CONCURRENCY ROUNDS`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use vigie::clock::{Clock, SystemClock};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--serve") {
        serve(Path::new(&args[1]), args[2].parse().expect("target count"));
        return;
    }
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let concurrency: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    measure(n, concurrency, rounds);
}

fn measure(n: usize, concurrency: usize, rounds: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let leaf = common::pki::valid_leaf();
    for (i, der) in leaf.chain.iter().enumerate() {
        std::fs::write(dir.path().join(format!("chain{i}.der")), der).expect("write chain");
    }
    std::fs::write(dir.path().join("key.der"), &leaf.key_der).expect("write key");
    let root = common::pki::write_root_pem(dir.path());

    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .args(["--serve", &dir.path().display().to_string(), &n.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start target process");
    let ports: Vec<u16> = BufReader::new(child.stdout.take().expect("child stdout"))
        .lines()
        .take(n)
        .map(|line| line.expect("port line").parse().expect("port"))
        .collect();

    let checks: String = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            format!(
                "[[check]]\nname = \"t{i}\"\nkind = \"http\"\nurl = \"https://www.example.test:{port}/\"\n\
                 resolve = \"127.0.0.1\"\n[check.expect]\nbody_contains = \"vigie test\"\n"
            )
        })
        .collect();
    std::fs::create_dir_all(dir.path().join("checks")).expect("checks dir");
    std::fs::write(dir.path().join("checks/bench.toml"), checks).expect("write checks");
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "concurrency = {concurrency}\ndefault_timeout = \"30s\"\nextra_ca_file = {:?}\n",
            root.display().to_string()
        ),
    )
    .expect("write config");

    let config = vigie::config::load(&dir.path().join("config.toml")).expect("bench config");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let prober = vigie::app::prober(&config, clock.clone()).expect("prober");
    let checks: Vec<_> = config.checks.iter().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    println!(
        "after setup (config, trust, runtime): peak RSS {:.1} MiB",
        peak_rss_mib()
    );
    println!("probe bench: {n} HTTPS targets, concurrency {concurrency}, TLS 1.3 + ECDSA P-256, full handshake each");
    for round in 0..=rounds {
        let cpu_before = cpu_time();
        let started = Instant::now();
        let outcomes = runtime.block_on(vigie::app::check_now(
            &prober,
            clock.as_ref(),
            &checks,
            config.concurrency,
        ));
        let wall = started.elapsed();
        let cpu = cpu_time() - cpu_before;
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
            peak_rss_mib()
        );
    }
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
}

/// The target process: N TLS listeners on 127.0.0.1 serving the chain in
/// `dir`; prints one port per line, runs until stdin closes.
fn serve(dir: &Path, n: usize) {
    let mut chain = Vec::new();
    for i in 0.. {
        match std::fs::read(dir.join(format!("chain{i}.der"))) {
            Ok(der) => chain.push(CertificateDer::from(der)),
            Err(_) => break,
        }
    }
    let key = std::fs::read(dir.join("key.der")).expect("key");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let servers: Vec<_> = (0..n)
            .map(|_| {
                common::servers::TlsServer::start(
                    chain.clone(),
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.clone())),
                    common::servers::TlsOpts::default(),
                )
            })
            .collect();
        let mut stdout = std::io::stdout().lock();
        for server in &servers {
            writeln!(stdout, "{}", server.port()).expect("write port");
        }
        stdout.flush().expect("flush");
        drop(stdout);
        tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin()
                .read_line(&mut sink)
                .map(|n| n > 0)
                .unwrap_or(false)
            {}
        })
        .await
        .expect("stdin watcher");
        drop(servers);
    });
}

fn cpu_time() -> Duration {
    let usage = rusage();
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// VmHWM, the high-water mark of this process image. (getrusage's
/// ru_maxrss survives execve, so it would report cargo's own peak.)
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .expect("VmHWM line")
        / 1024.0
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    }
}
