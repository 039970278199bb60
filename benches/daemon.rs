//! The daemon at steady state: N checks (default 1000) every P (default
//! 30s) against N local HTTPS targets, measured from outside over a window
//! (default 5 minutes) after one warm-up period: CPU share of one core,
//! resident memory, and how late probes start after their due time.
//!
//! Run: `cargo bench --bench daemon` or `-- N EVERY WINDOW`, e.g.
//! `cargo bench --bench daemon -- 10000 60s 5m` for the 10,000-check case.
//! `VIGIE_BENCH_CHANNELS=4` adds four push channels (webhook, ntfy,
//! PagerDuty, Slack, each against its loopback peer), to compare the
//! daemon's cost with and without them.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/targets.rs"]
mod targets;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    if targets::serve_if_asked() {
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let every = args
        .get(1)
        .map(|a| humantime::parse_duration(a).expect("EVERY, e.g. 30s"))
        .unwrap_or(Duration::from_secs(30));
    let window = args
        .get(2)
        .map(|a| humantime::parse_duration(a).expect("WINDOW, e.g. 5m"))
        .unwrap_or(Duration::from_secs(300));
    measure(n, every, window);
}

/// The loopback peers of four push channels, kept for the run.
type Peers = (
    common::push::webhook::WebhookReceiver,
    common::push::ntfy::NtfyServer,
    common::push::pagerduty::PagerDutyEvents,
    common::push::slack::SlackWebhook,
);

/// Starts a webhook, ntfy, PagerDuty and Slack peer and adds a
/// `[[notify]]` channel for each to `config`, secrets in `dir`.
fn push_channels(dir: &Path, config: &mut String) -> Peers {
    let whsec = common::push::webhook::whsec_for_test();
    let hook = common::push::webhook::WebhookReceiver::start(&whsec);
    let ntfy = common::push::ntfy::NtfyServer::start(common::push::ntfy::NtfyConfig::default());
    let pagerduty = common::push::pagerduty::PagerDutyEvents::start();
    let slack = common::push::slack::SlackWebhook::start();
    let secret = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write a secret");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("secret mode");
        path.display().to_string()
    };
    let hook_secret = secret("hook.secret", &whsec);
    let key = secret("pd.key", "0123456789abcdef0123456789abcdef");
    let _ = write!(
        config,
        "[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"{}\"\nallow_private = true\nsecret_file = {hook_secret:?}\n\
         [[notify]]\nname = \"phone\"\nkind = \"ntfy\"\nurl = \"{}\"\nallow_private = true\n\
         [[notify]]\nname = \"pager\"\nkind = \"pagerduty\"\nurl = \"{}\"\nallow_private = true\nrouting_key_file = {key:?}\n\
         [[notify]]\nname = \"chat\"\nkind = \"slack\"\nurl = \"{}\"\nallow_private = true\n",
        hook.url(),
        ntfy.topic_url("vigie-bench"),
        pagerduty.url(),
        slack.url()
    );
    (hook, ntfy, pagerduty, slack)
}

fn measure(n: usize, every: Duration, window: Duration) {
    let targets = targets::Targets::start(n);
    let dir = targets.dir.path();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    std::fs::create_dir_all(dir.join("checks")).expect("checks dir");
    let every_text = humantime::format_duration(every).to_string();
    std::fs::write(
        dir.join("checks/bench.toml"),
        targets.checks_toml(&format!("every = {every_text:?}")),
    )
    .expect("write checks");
    let mut config = format!(
        "state_dir = \"state\"\nconcurrency = 64\nextra_ca_file = {:?}\n[alerting]\nto = [\"oncall@example.com\"]\n[api]\nlisten = \"127.0.0.1:{port}\"\n",
        targets.root_pem.display().to_string()
    );
    let channels = std::env::var("VIGIE_BENCH_CHANNELS").is_ok_and(|v| v == "4");
    // A worker thread of its own, as any scraper has: the API closes a
    // connection idle for 10 s, and a current-thread runtime driven only
    // inside `block_on` would not notice until it reused the dead pooled
    // connection for the next scrape, which then failed (every scrape
    // after the first one, with 15 s between them). The push peers serve
    // on it too.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let _peers = channels.then(|| {
        let _inside = runtime.enter();
        push_channels(dir, &mut config)
    });
    std::fs::write(dir.join("config.toml"), config).expect("write config");
    let log = std::fs::File::create(dir.join("vigie.log")).expect("log file");
    // VIGIE_BENCH_WRAP="heaptrack -o /tmp/vigie-daemon" runs the daemon
    // under a wrapper (a memory profiler); the figures are then the
    // wrapped daemon's, found among the wrapper's descendants.
    let wrap: Vec<String> = std::env::var("VIGIE_BENCH_WRAP")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let mut command = match wrap.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(env!("CARGO_BIN_EXE_vigie"));
            command
        }
        None => Command::new(env!("CARGO_BIN_EXE_vigie")),
    };
    let mut daemon = command
        .arg("--config")
        .arg(dir.join("config.toml"))
        .arg("run")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start vigie run");
    let pid = if wrap.is_empty() {
        daemon.id()
    } else {
        let started = Instant::now();
        loop {
            if let Some(pid) = descendant_running(daemon.id(), env!("CARGO_BIN_EXE_vigie")) {
                break pid;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no vigie under the wrapper"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let client = vigie::net::api_client().expect("client");
    let get = |path: &str| -> Result<String, String> {
        runtime.block_on(async {
            let response = client
                .get(format!("http://127.0.0.1:{port}{path}"))
                .send()
                .await
                .map_err(|e| format!("GET {path}: {e}"))?;
            response
                .text()
                .await
                .map_err(|e| format!("GET {path}: reading the body: {e}"))
        })
    };
    let started = Instant::now();
    while get("/healthz").is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "daemon bench: {n} checks every {every_text} against {n} local HTTPS targets, {} push channels; warm-up {every_text}, window {}",
        if channels { 4 } else { 0 },
        humantime::format_duration(window)
    );
    std::thread::sleep(every + Duration::from_secs(2));

    let pid_text = pid.to_string();
    // VIGIE_BENCH_PERF=1 records a CPU profile of the daemon over the window.
    let perf = std::env::var_os("VIGIE_BENCH_PERF").map(|_| {
        Command::new("perf")
            .args(["record", "-F", "199", "--call-graph", "dwarf,16384", "-o"])
            .arg(dir.join("perf.data"))
            .args(["-p", &pid_text])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("perf record")
    });
    let cpu_before = targets::process_cpu_time(pid);
    let targets_cpu_before = targets::process_cpu_time(targets.pid());
    let window_start = Instant::now();
    // Every run of every check: `vigie_check_last_run_timestamp_seconds`
    // changes when a probe of that check finished, and
    // `vigie_check_start_delay_seconds` then holds that run's start time
    // minus its due time. Both stay until the check's next run, so sampling
    // more often than `every` sees each run once.
    let sample_every = Duration::from_secs(15).min(every / 2).min(window);
    let mut last_run: HashMap<String, f64> = per_check(
        &get("/metrics").expect("the first scrape"),
        "vigie_check_last_run_timestamp_seconds",
    );
    // Scrapes that failed: each one hides the runs of its interval, so
    // any of them fails the bench.
    let mut failed_scrapes: Vec<String> = Vec::new();
    let mut delays: Vec<f64> = Vec::new();
    let mut rss = Vec::new();
    let mut worst_waiting = 0.0f64;
    let mut unhealthy = 0;
    let mut scrape_ms = Vec::new();
    while window_start.elapsed() < window {
        std::thread::sleep(sample_every);
        rss.push(targets::proc_mib(&pid_text, "VmRSS"));
        let scrape = Instant::now();
        let metrics = get("/metrics").unwrap_or_else(|e| {
            failed_scrapes.push(e);
            String::new()
        });
        scrape_ms.push(scrape.elapsed().as_secs_f64() * 1000.0);
        let runs = per_check(&metrics, "vigie_check_last_run_timestamp_seconds");
        let delay = per_check(&metrics, "vigie_check_start_delay_seconds");
        for (check, at) in &runs {
            if last_run.get(check) != Some(at) {
                delays.push(delay.get(check).copied().unwrap_or(f64::NAN));
                last_run.insert(check.clone(), *at);
            }
        }
        worst_waiting = worst_waiting.max(max_metric(&metrics, "vigie_scheduler_lateness_seconds"));
        if !get("/healthz").is_ok_and(|h| h.contains("\"status\":\"ok\"")) {
            unhealthy += 1;
        }
    }
    let cpu = targets::process_cpu_time(pid) - cpu_before;
    let targets_cpu = targets::process_cpu_time(targets.pid()) - targets_cpu_before;
    let elapsed = window_start.elapsed();
    let peak = targets::proc_mib(&pid_text, "VmHWM");
    let memory_detail = memory_detail(pid);
    let expected = elapsed.as_secs_f64() / every.as_secs_f64() * n as f64;
    let probes = delays.len();
    delays.sort_by(|a, b| a.total_cmp(b));
    let quantile = |q: f64| -> f64 {
        if delays.is_empty() {
            return f64::NAN;
        }
        delays[((delays.len() - 1) as f64 * q).round() as usize]
    };
    let max_delay = delays.last().copied().unwrap_or(f64::NAN);
    let checks_seen = last_run.len();
    let stale = {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs_f64();
        last_run
            .values()
            .filter(|at| now - **at > every.as_secs_f64() + sample_every.as_secs_f64() + 2.0)
            .count()
    };

    if let Some(mut perf) = perf {
        // SAFETY: kill(2) on the perf child we started, by its PID.
        unsafe {
            libc::kill(perf.id() as i32, libc::SIGINT);
        }
        let _ = perf.wait();
        let report = Command::new("perf")
            .args([
                "report",
                "--children",
                "--stdio",
                "-g",
                "none",
                "--percent-limit",
                "0.7",
                "-i",
            ])
            .arg(dir.join("perf.data"))
            .output()
            .expect("perf report");
        std::fs::write("/tmp/vigie-daemon-perf.txt", &report.stdout).expect("write perf report");
        println!("  perf report: /tmp/vigie-daemon-perf.txt");
    }
    // SAFETY: kill(2) on the child we started, by its PID.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let status = daemon.wait().expect("wait for vigie");

    let mean_rss = rss.iter().sum::<f64>() / rss.len().max(1) as f64;
    let max_rss = rss.iter().copied().fold(0.0, f64::max);
    let core_share = cpu.as_secs_f64() / elapsed.as_secs_f64() * 100.0;
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "  CPU: {core_share:.2}% of one core ({:.3} ms CPU per probe, {probes} runs seen in {:.0} s, {expected:.0} expected); targets process {:.2}% of one core",
        cpu.as_secs_f64() * 1000.0 / probes.max(1) as f64,
        elapsed.as_secs_f64(),
        targets_cpu.as_secs_f64() / elapsed.as_secs_f64() * 100.0,
    );
    println!("  RSS: mean {mean_rss:.1} MiB, max {max_rss:.1} MiB, peak (VmHWM) {peak:.1} MiB");
    println!("  memory at the end: {memory_detail}");
    println!(
        "  schedule: start delay (start - due) over every run seen: p50 {:.3} s, p99 {:.3} s, max {max_delay:.3} s; \
         worst wait of a not-yet-started check at a scrape {worst_waiting:.3} s; checks with no run in the last {:.0} s: {stale} of {checks_seen}",
        quantile(0.5),
        quantile(0.99),
        every.as_secs_f64() + sample_every.as_secs_f64() + 2.0,
    );
    println!(
        "  API: /metrics scrape (every {:.0} s, {n} checks) mean {:.0} ms, max {:.0} ms; /healthz not ok in {unhealthy} of {} samples",
        sample_every.as_secs_f64(),
        scrape_ms.iter().sum::<f64>() / scrape_ms.len().max(1) as f64,
        scrape_ms.iter().copied().fold(0.0, f64::max),
        rss.len()
    );
    let on_time = max_delay <= 1.0 && stale == 0 && unhealthy == 0;
    // The aims are set for two sizes; any other size is reported, not judged.
    match (n, every.as_secs()) {
        (1000, 30) => println!(
            "  aims at 1,000 checks / 30 s: every start within 1 s: {}; < 2% of one core: {}; < 25 MB peak RSS: {}",
            verdict(on_time),
            verdict(core_share < 2.0),
            verdict(peak * 1024.0 * 1024.0 < 25e6)
        ),
        (10_000, 60) => println!(
            "  aims at 10,000 checks / 60 s: every start within 1 s: {}; < 12% of one core: {}; < 64 MB peak RSS: {}",
            verdict(on_time),
            verdict(core_share < 12.0),
            verdict(peak * 1024.0 * 1024.0 < 64e6)
        ),
        _ => println!("  every start within 1 s: {}", verdict(on_time)),
    }
    println!("  SIGTERM -> exit {:?}", status.code());

    // Every run counted, or the figures above mean nothing: the CPU per
    // probe divides by the runs seen. One run per check may fall outside
    // the window at either edge.
    let mut missed = Vec::new();
    if !failed_scrapes.is_empty() {
        missed.push(format!(
            "{} of {} scrapes failed (first: {})",
            failed_scrapes.len(),
            rss.len(),
            failed_scrapes[0]
        ));
    }
    if (probes as f64) < expected - n as f64 {
        missed.push(format!("{probes} runs seen, {expected:.0} expected"));
    }
    if stale > 0 {
        missed.push(format!(
            "{stale} of {checks_seen} checks did not run lately"
        ));
    }
    if checks_seen < n {
        missed.push(format!("{checks_seen} of {n} checks seen in /metrics"));
    }
    if !missed.is_empty() {
        eprintln!("daemon bench FAILED: {}", missed.join("; "));
        std::process::exit(1);
    }
}

/// A process below `parent` (itself excluded) whose executable is `exe`.
fn descendant_running(parent: u32, exe: &str) -> Option<u32> {
    let children = std::fs::read_dir(format!("/proc/{parent}/task"))
        .ok()?
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|pid| pid.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>();
    children.iter().find_map(|&child| {
        let target = std::fs::read_link(format!("/proc/{child}/exe")).ok()?;
        (target == Path::new(exe))
            .then_some(child)
            .or_else(|| descendant_running(child, exe))
    })
}

/// Where the daemon's resident memory is: anonymous (heap, arenas, stacks)
/// vs file-backed (the binary), from /proc/PID/smaps_rollup, and its thread
/// count.
fn memory_detail(pid: u32) -> String {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kib = |field: &str| -> f64 {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
            / 1024.0
    };
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0);
    format!(
        "RSS {:.1} MiB = anonymous {:.1} MiB + file-backed {:.1} MiB; {threads} threads",
        kib("Rss"),
        kib("Anonymous"),
        kib("Rss") - kib("Anonymous"),
    )
}

/// One value per `check` label of a metric in Prometheus text (enough for
/// a bench; the tests parse metrics properly).
fn per_check(text: &str, name: &str) -> HashMap<String, f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix("{check=\""))
        .filter_map(|l| {
            let (check, rest) = l.split_once('"')?;
            let value = rest.rsplit(' ').next()?.parse().ok()?;
            Some((check.to_string(), value))
        })
        .collect()
}

/// The largest value of a metric in Prometheus text (enough for a bench;
/// the tests parse metrics properly).
fn max_metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, f64::max)
}
