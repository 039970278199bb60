//! vigie and Prometheus blackbox_exporter side by side, on the same N local
//! HTTPS targets (rustls, test-PKI ECDSA P-256 chain, TLS 1.3, no session
//! resumption), at the same concurrency, alternating, several rounds; plus
//! the handshake floor: a bare tokio-rustls connect loop against the same
//! targets with the same verification.
//!
//! Four processes, so each tool's CPU time and peak RSS are its own:
//! - this one: writes the configs, drives blackbox_exporter's `/probe`
//!   endpoint (keep-alive connections, like a Prometheus server) and reads
//!   the children's counters;
//! - the targets (this binary re-executed with `--serve`);
//! - vigie (this binary re-executed with `--vigie`): config -> `app::prober`
//!   -> `app::check_now`, chain parsing and evaluation included, the same
//!   path as `vigie check` and the daemon;
//! - the floor (re-executed with `--floor`);
//! - `prometheus-blackbox-exporter` itself;
//! - and once a round, `vigie check --json` as an operator runs it: the
//!   release binary loading the config, probing every target once and
//!   writing the JSON, measured from the kernel's account of the exited
//!   process (CPU time and peak RSS, start-up included).
//!
//! Run: `benches/compare.sh` (installs blackbox_exporter) or
//! `cargo bench --bench compare -- N CONCURRENCY ROUNDS` (default 1000 50 3).
//! `BLACKBOX=/path/to/blackbox_exporter` overrides the binary.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/targets.rs"]
mod targets;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use vigie::clock::{Clock, SystemClock};

const HOST: &str = common::HOST;
const MODULE: &str = "vigie_bench";

fn main() {
    if targets::serve_if_asked() {
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("--vigie") => return vigie_child(Path::new(&args[1])),
        Some("--floor") => return floor_child(Path::new(&args[1]), args[2].parse().expect("C")),
        _ => {}
    }
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let concurrency: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(50);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    compare(n, concurrency, rounds.max(1));
}

/// One round of the four: vigie in process, blackbox_exporter, the floor,
/// and `vigie check` as a process.
type Tools = (Round, Round, Round, Round);

/// What one tool did in one round.
#[derive(Clone, Copy, Debug, Default)]
struct Round {
    wall: Duration,
    cpu: Duration,
    /// Peak RSS of the tool's process so far (VmHWM), MiB.
    hwm: f64,
    /// CPU time the targets process spent serving this round.
    targets_cpu: Duration,
}

impl Round {
    fn rate(&self, n: usize) -> f64 {
        n as f64 / self.wall.as_secs_f64()
    }
    fn cpu_ms(&self, n: usize) -> f64 {
        self.cpu.as_secs_f64() * 1000.0 / n as f64
    }
    fn targets_ms(&self, n: usize) -> f64 {
        self.targets_cpu.as_secs_f64() * 1000.0 / n as f64
    }
}

fn compare(n: usize, concurrency: usize, rounds: usize) {
    let blackbox_bin =
        std::env::var("BLACKBOX").unwrap_or_else(|_| "prometheus-blackbox-exporter".to_string());
    let targets = targets::Targets::start(n);
    let targets_pid = targets.pid();
    let dir = targets.dir.path().to_path_buf();
    let driver = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");

    // vigie: the same checks a user would write.
    std::fs::create_dir_all(dir.join("checks")).expect("checks dir");
    std::fs::write(dir.join("checks/bench.toml"), targets.checks_toml("")).expect("checks");
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "concurrency = {concurrency}\ndefault_timeout = \"30s\"\nextra_ca_file = {:?}\n[alerting]\nenabled = false\n",
            targets.root_pem.display().to_string()
        ),
    )
    .expect("write config");
    std::fs::write(
        dir.join("ports"),
        targets
            .ports
            .iter()
            .map(|p| format!("{p}\n"))
            .collect::<String>(),
    )
    .expect("write ports");

    // blackbox_exporter: the same request, the same verification.
    std::fs::write(dir.join("blackbox.yml"), blackbox_config(&targets.root_pem))
        .expect("write blackbox config");
    let bb_port = free_port();
    let bb_log = std::fs::File::create(dir.join("blackbox.log")).expect("log");
    let blackbox = Command::new(&blackbox_bin)
        .arg(format!(
            "--config.file={}",
            dir.join("blackbox.yml").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{bb_port}"))
        .stdout(Stdio::null())
        .stderr(bb_log)
        .spawn()
        .unwrap_or_else(|err| {
            panic!("cannot start {blackbox_bin}: {err} (run benches/compare.sh)")
        });
    // Killed on drop, panics included: no exporter is left behind.
    let blackbox = KillOnDrop(blackbox);
    let bb_pid = blackbox.0.id();
    let client = vigie::net::api_client().expect("client");
    let bb_url =
        |target: &str| format!("http://127.0.0.1:{bb_port}/probe?module={MODULE}&target={target}");
    let started = Instant::now();
    while driver
        .block_on(async {
            client
                .get(format!("http://127.0.0.1:{bb_port}/"))
                .send()
                .await
        })
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "blackbox_exporter did not start: see {}",
            dir.join("blackbox.log").display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let version = Command::new(&blackbox_bin)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stderr).to_string() + &String::from_utf8_lossy(&o.stdout)
        })
        .unwrap_or_default();
    let version = version
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or("?")
        .to_string();

    let handshake_check = driver.block_on(check_blackbox_handshakes(&client, &bb_url));

    let mut vigie = Worker::start(&dir, "--vigie", &[]);
    let mut floor = Worker::start(&dir, "--floor", &[&concurrency.to_string()]);
    let setup_vigie = proc_hwm(vigie.child.id());

    println!(
        "compare: {n} local HTTPS targets (rustls, ECDSA P-256 leaf + intermediate, TLS 1.3, no resumption), \
         concurrency {concurrency}, {rounds} rounds after a warm-up; {} cores, load {}",
        std::thread::available_parallelism().map_or(0, |p| p.get()),
        loadavg()
    );
    println!(
        "  blackbox_exporter {version} (pid {bb_pid}); vigie {} in-process check_now (pid {}, {setup_vigie:.1} MiB after setup)",
        env!("CARGO_PKG_VERSION"),
        vigie.child.id()
    );
    println!("  {handshake_check}");
    println!(
        "  {:<8} {:<9} {:>9} {:>12} {:>10} {:>13}",
        "round", "tool", "probes/s", "CPU ms/probe", "peak RSS", "targets ms/pr"
    );

    let mut results: Vec<Tools> = Vec::new();
    let mut perf = Vec::new();
    for round in 0..=rounds {
        if round == 1 {
            perf = start_perf(&[("vigie", vigie.child.id()), ("floor", floor.child.id())]);
        }
        // Alternate who goes first, so neither always runs on a cooler machine.
        let (v, b, f);
        if round % 2 == 0 {
            v = vigie.run(targets_pid);
            b = run_blackbox(
                &driver,
                &client,
                &bb_url,
                &targets.ports,
                concurrency,
                bb_pid,
                targets_pid,
            );
            f = floor.run(targets_pid);
        } else {
            b = run_blackbox(
                &driver,
                &client,
                &bb_url,
                &targets.ports,
                concurrency,
                bb_pid,
                targets_pid,
            );
            v = vigie.run(targets_pid);
            f = floor.run(targets_pid);
        }
        let c = run_vigie_check(&dir, targets_pid);
        let label = match round {
            0 => "warm-up".to_string(),
            r => format!("round {r}"),
        };
        for (tool, r) in [
            ("vigie", &v),
            ("blackbox", &b),
            ("floor", &f),
            ("check", &c),
        ] {
            println!(
                "  {label:<8} {tool:<9} {:>9.0} {:>12.3} {:>6.1} MiB {:>13.3}",
                r.rate(n),
                r.cpu_ms(n),
                r.hwm,
                r.targets_ms(n)
            );
        }
        println!(
            "  {label:<8} vigie/blackbox: CPU {:.3} ({:.1}x less), RSS {:.3}; vigie/floor CPU {:.2}x",
            v.cpu_ms(n) / b.cpu_ms(n),
            b.cpu_ms(n) / v.cpu_ms(n),
            v.hwm / b.hwm,
            v.cpu_ms(n) / f.cpu_ms(n)
        );
        println!(
            "  {label:<8} vigie check process/blackbox: CPU {:.3}, RSS {:.3}",
            c.cpu_ms(n) / b.cpu_ms(n),
            c.hwm / b.hwm,
        );
        if round > 0 {
            results.push((v, b, f, c));
        }
    }

    let median = |f: &dyn Fn(&Tools) -> f64| {
        let mut xs: Vec<f64> = results.iter().map(f).collect();
        xs.sort_by(|a, b| a.total_cmp(b));
        let mid = xs.len() / 2;
        if xs.len() % 2 == 0 {
            (xs[mid - 1] + xs[mid]) / 2.0
        } else {
            xs[mid]
        }
    };
    let v_cpu = median(&|r| r.0.cpu_ms(n));
    let b_cpu = median(&|r| r.1.cpu_ms(n));
    let f_cpu = median(&|r| r.2.cpu_ms(n));
    let v_rate = median(&|r| r.0.rate(n));
    let b_rate = median(&|r| r.1.rate(n));
    let f_rate = median(&|r| r.2.rate(n));
    let c_cpu = median(&|r| r.3.cpu_ms(n));
    let c_rate = median(&|r| r.3.rate(n));
    let c_hwm = results.iter().map(|r| r.3.hwm).fold(0.0, f64::max);
    let v_hwm = proc_hwm(vigie.child.id());
    let b_hwm = proc_hwm(bb_pid);
    let f_hwm = proc_hwm(floor.child.id());
    stop_perf(perf);
    println!("summary (median of {rounds} rounds; peak RSS = VmHWM over the whole run):");
    println!(
        "  vigie     {v_rate:>7.0} probes/s  {v_cpu:.3} ms CPU/probe  peak RSS {v_hwm:5.1} MiB"
    );
    println!(
        "  blackbox  {b_rate:>7.0} probes/s  {b_cpu:.3} ms CPU/probe  peak RSS {b_hwm:5.1} MiB"
    );
    println!(
        "  floor     {f_rate:>7.0} handshakes/s  {f_cpu:.3} ms CPU/handshake  peak RSS {f_hwm:5.1} MiB"
    );
    println!(
        "  vigie check --json (a process per round, start-up and JSON included)  {c_rate:>7.0} probes/s  {c_cpu:.3} ms CPU/probe  peak RSS {c_hwm:5.1} MiB"
    );
    let cpu_ratio = v_cpu / b_cpu;
    let rss_ratio = v_hwm / b_hwm;
    let floor_ratio = v_cpu / f_cpu;
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "  vigie/blackbox: CPU per probe {cpu_ratio:.3} (target <= 0.25: {}), peak RSS {rss_ratio:.3} (target <= 0.5: {}), throughput {:.2}x",
        verdict(cpu_ratio <= 0.25),
        verdict(rss_ratio <= 0.5),
        v_rate / b_rate
    );
    println!(
        "  vigie/floor: CPU per probe {floor_ratio:.2}x the bare handshake (target <= 2: {})",
        verdict(floor_ratio <= 2.0)
    );
    println!(
        "  vigie check process/blackbox: CPU per probe {:.3} (target <= 0.25: {}), peak RSS {:.3} (target <= 0.5: {})",
        c_cpu / b_cpu,
        verdict(c_cpu / b_cpu <= 0.25),
        c_hwm / b_hwm,
        verdict(c_hwm / b_hwm <= 0.5),
    );
    println!("  load after: {}", loadavg());

    drop(vigie);
    drop(floor);
    drop(blackbox);
}

/// A child process killed (SIGTERM, then waited for) when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the child we started, by its PID.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

/// `COMPARE_PERF=PREFIX`: record CPU profiles of the vigie and floor
/// workers over the measured rounds, to PREFIX.vigie.data and
/// PREFIX.floor.data (`perf report -i ...`).
fn start_perf(workers: &[(&str, u32)]) -> Vec<Child> {
    let Some(prefix) = std::env::var_os("COMPARE_PERF") else {
        return Vec::new();
    };
    let perfs = workers
        .iter()
        .map(|(name, pid)| {
            let mut out = prefix.clone();
            out.push(format!(".{name}.data"));
            Command::new("perf")
                .args(["record", "-F", "999", "--call-graph", "dwarf,16384", "-o"])
                .arg(&out)
                .args(["-p", &pid.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("perf record")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    perfs
}

fn stop_perf(perfs: Vec<Child>) {
    for mut perf in perfs {
        // SAFETY: kill(2) on a perf child we started, by its PID.
        unsafe {
            libc::kill(perf.id() as i32, libc::SIGINT);
        }
        let _ = perf.wait();
    }
}

fn blackbox_config(root_pem: &Path) -> String {
    // valid_status_codes empty = 2xx. fail_if_body_not_matches_regexp is
    // vigie's body_contains. The target URL is https://127.0.0.1:PORT/; the
    // Host header and the TLS server name are www.example.test, which is
    // what vigie's `resolve = "127.0.0.1"` does.
    format!(
        "modules:\n  {MODULE}:\n    prober: http\n    timeout: 30s\n    http:\n      method: GET\n      \
         valid_status_codes: []\n      preferred_ip_protocol: ip4\n      ip_protocol_fallback: false\n      \
         follow_redirects: true\n      headers:\n        Host: {HOST}\n      \
         fail_if_body_not_matches_regexp:\n        - \"vigie test\"\n      \
         tls_config:\n        ca_file: {:?}\n        server_name: {HOST}\n        insecure_skip_verify: false\n",
        root_pem.display().to_string()
    )
}

/// Before measuring: blackbox_exporter makes a new TCP connection and a full
/// TLS handshake for every probe. Checked against an in-process target that
/// counts connections and handshakes.
async fn check_blackbox_handshakes(
    client: &reqwest::Client,
    bb_url: &dyn Fn(&str) -> String,
) -> String {
    let leaf = common::valid_leaf();
    let server = common::TlsServer::start_leaf(&leaf, common::TlsOpts::default());
    let target = format!("https://127.0.0.1:{}/", server.port());
    let probes = 20;
    for _ in 0..probes {
        let body = client
            .get(bb_url(&target))
            .send()
            .await
            .expect("probe")
            .text()
            .await
            .expect("probe body");
        assert!(
            body.contains("\nprobe_success 1"),
            "blackbox probe failed:\n{body}"
        );
        assert!(
            body.contains("probe_tls_version_info{version=\"TLS 1.3\"} 1"),
            "blackbox did not use TLS 1.3:\n{body}"
        );
    }
    // The body is read and matched: a page without "vigie test" fails.
    let other = format!("https://127.0.0.1:{}/bytes/10", server.port());
    let debug = client
        .get(bb_url(&other) + "&debug=true")
        .send()
        .await
        .expect("probe")
        .text()
        .await
        .expect("probe body");
    assert!(
        debug.contains("\nprobe_success 0")
            && debug.contains("Body did not match regular expression"),
        "blackbox did not check the body:\n{debug}"
    );
    let probes = probes + 1;
    let ok = common::eventually(Duration::from_secs(5), || server.handshakes() == probes).await;
    assert!(
        ok && server.connections() == probes,
        "blackbox_exporter: {probes} probes made {} connections and {} handshakes",
        server.connections(),
        server.handshakes()
    );
    format!(
        "check: {probes} blackbox probes -> {} TCP connections, {} full TLS 1.3 handshakes at the target (no resumption: \
         the targets keep no sessions and send no tickets); a body without \"vigie test\" fails the blackbox probe",
        server.connections(),
        server.handshakes()
    )
}

#[allow(clippy::too_many_arguments)]
fn run_blackbox(
    driver: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    bb_url: &dyn Fn(&str) -> String,
    ports: &[u16],
    concurrency: usize,
    bb_pid: u32,
    targets_pid: u32,
) -> Round {
    let urls: Vec<String> = ports
        .iter()
        .map(|p| bb_url(&format!("https://127.0.0.1:{p}/")))
        .collect();
    let cpu_before = targets::process_cpu_time(bb_pid);
    let targets_before = targets::process_cpu_time(targets_pid);
    let started = Instant::now();
    let failed: Vec<String> = driver.block_on(async {
        stream::iter(urls.iter())
            .map(|url| async move {
                let body = client.get(url).send().await.ok()?.text().await.ok()?;
                (!body.contains("\nprobe_success 1")).then_some(body)
            })
            .buffer_unordered(concurrency)
            .filter_map(|x| async move { x })
            .collect()
            .await
    });
    let wall = started.elapsed();
    assert!(
        failed.is_empty(),
        "{} blackbox probes failed, e.g.:\n{}",
        failed.len(),
        failed[0]
    );
    Round {
        wall,
        cpu: targets::process_cpu_time(bb_pid) - cpu_before,
        hwm: proc_hwm(bb_pid),
        targets_cpu: targets::process_cpu_time(targets_pid) - targets_before,
    }
}

/// `vigie check --json` on the bench's config, as an operator runs it; its
/// CPU time and peak RSS from wait4(2), the kernel's account of the exited
/// process.
// The child is reaped by wait4 below, which std's `wait` cannot replace:
// it drops the kernel's resource usage of the exited process.
#[allow(clippy::zombie_processes)]
fn run_vigie_check(dir: &Path, targets_pid: u32) -> Round {
    let targets_before = targets::process_cpu_time(targets_pid);
    let log = dir.join("check.log");
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_vigie"))
        .arg("--config")
        .arg(dir.join("config.toml"))
        .args(["check", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("check log"))
        .spawn()
        .expect("start vigie check");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage, filled in by wait4 below.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4(2) on our own child, with pointers to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "vigie check did not find every target up (wait status {status}): see {}",
        log.display()
    );
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Round {
        wall,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        // ru_maxrss is in KiB on Linux.
        hwm: usage.ru_maxrss as f64 / 1024.0,
        targets_cpu: targets::process_cpu_time(targets_pid) - targets_before,
    }
}

/// A measured child process (`--vigie` or `--floor`): one round per line
/// written to its stdin, answered with `wall_ns cpu_ns`.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn start(dir: &Path, mode: &str, args: &[&str]) -> Worker {
        let mut child = Command::new(std::env::current_exe().expect("current exe"))
            .arg(mode)
            .arg(dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start worker");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut ready = String::new();
        stdout.read_line(&mut ready).expect("worker ready");
        assert_eq!(ready.trim(), "ready", "worker {mode} did not start");
        Worker {
            child,
            stdin,
            stdout,
        }
    }

    fn run(&mut self, targets_pid: u32) -> Round {
        let targets_before = targets::process_cpu_time(targets_pid);
        writeln!(self.stdin, "run").expect("worker stdin");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("worker answer");
        let mut fields = line
            .split_whitespace()
            .map(|f| f.parse::<u64>().expect("number"));
        let wall = Duration::from_nanos(fields.next().expect("wall"));
        let cpu = Duration::from_nanos(fields.next().expect("cpu"));
        Round {
            wall,
            cpu,
            hwm: proc_hwm(self.child.id()),
            targets_cpu: targets::process_cpu_time(targets_pid) - targets_before,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one round per line on stdin; prints `wall_ns cpu_ns` for each.
fn serve_rounds(mut round: impl FnMut() -> Duration) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|_| out.flush())
        .expect("stdout");
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        let cpu_before = targets::cpu_time();
        let wall = round();
        let cpu = targets::cpu_time() - cpu_before;
        writeln!(out, "{} {}", wall.as_nanos(), cpu.as_nanos())
            .and_then(|_| out.flush())
            .expect("stdout");
    }
}

/// vigie: the config and checks in `dir`, probed and evaluated by
/// `app::check_now` (what `vigie check` and the daemon's scheduler run).
fn vigie_child(dir: &Path) {
    let config = vigie::config::load(&dir.join("config.toml")).expect("bench config");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let prober = vigie::runner::prober(&config, clock.clone()).expect("prober");
    let runtime = runtime();
    serve_rounds(|| {
        let started = Instant::now();
        let checks = config.all_checks();
        let outcomes = runtime.block_on(vigie::runner::check_now(
            &prober,
            clock.as_ref(),
            &checks,
            config.concurrency,
        ));
        let wall = started.elapsed();
        let down: Vec<_> = outcomes
            .iter()
            .filter(|o| o.status != vigie::outcome::Status::Up)
            .collect();
        assert!(
            down.is_empty(),
            "{} checks down, e.g. {:?}",
            down.len(),
            down[0]
        );
        assert!(outcomes.iter().all(|o| o
            .tls
            .as_ref()
            .is_some_and(|t| t.version.as_deref() == Some("TLSv1.3"))));
        wall
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The floor: TCP connect and a full TLS handshake (tokio-rustls), verifying
/// the same chain against the same trust (Mozilla roots + the test root,
/// same crypto provider, no resumption), nothing else: no HTTP, no
/// certificate parsing, one shared client config.
fn floor_child(dir: &Path, concurrency: usize) {
    let ports: Vec<u16> = std::fs::read_to_string(dir.join("ports"))
        .expect("ports")
        .lines()
        .map(|l| l.parse().expect("port"))
        .collect();
    let root_pem: PathBuf = dir.join("vigie-test-root.pem");
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for cert in CertificateDer::pem_file_iter(&root_pem).expect("root pem") {
        roots.add(cert.expect("root cert")).expect("add root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(vigie::net::crypto_provider())
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(HOST).expect("server name");
    let runtime = runtime();
    serve_rounds(|| {
        let started = Instant::now();
        let handshake = |port: u16,
                         connector: tokio_rustls::TlsConnector,
                         name: ServerName<'static>| async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            tcp.set_nodelay(true).expect("nodelay");
            let tls = connector.connect(name, tcp).await.expect("handshake");
            assert_eq!(
                tls.get_ref().1.protocol_version(),
                Some(rustls::ProtocolVersion::TLSv1_3)
            );
        };
        runtime.block_on(
            stream::iter(ports.iter())
                .map(|port| handshake(*port, connector.clone(), name.clone()))
                .buffer_unordered(concurrency)
                .collect::<()>(),
        );
        started.elapsed()
    });
}

fn proc_hwm(pid: u32) -> f64 {
    targets::proc_mib(&pid.to_string(), "VmHWM")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
