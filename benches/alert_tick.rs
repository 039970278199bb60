//! The alerter's tick with every check firing: the reminders pass over
//! every open incident once a second, finding each one's policy through the
//! alerter's cache (`daemon::alerter::Policies`) and its hold (silences,
//! maintenance windows) as the alerter does. Target: under 5 ms a tick at
//! 10,000 checks down.
//!
//! Run: `cargo bench --bench alert_tick [-- CHECKS [TICKS]]` (default
//! 10000 checks, 200 ticks). Prints the median, p90 and max per tick, with
//! and without a maintenance window configured, and what a linear scan of
//! the checks (the lookup before the cache) would cost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use vigie::alert::Engine;
use vigie::check::KindName;
use vigie::config::Config;
use vigie::daemon::alerter::{hold_of, Policies};
use vigie::outcome::{Assertion, Failure, Outcome, Status};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let checks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let ticks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    for maintenance in [false, true] {
        let config = Arc::new(config(checks, maintenance));
        let (times, changed) = run(&config, ticks);
        let label = match maintenance {
            true => "with one [[maintenance]] window",
            false => "no silences or windows",
        };
        report(&format!("{checks} checks firing, {label}"), &times);
        println!("  states changed over the ticks: {changed}");
    }
    let config = config(checks, false);
    let started = Instant::now();
    let mut found = 0;
    for c in &config.checks {
        found += usize::from(config.checks.iter().any(|other| other.name == c.name));
    }
    println!(
        "a linear scan per firing check (before the cache): {:.1} ms a tick ({found} lookups)",
        started.elapsed().as_secs_f64() * 1000.0
    );
}

/// `checks` checks in a temporary config directory, loaded as the daemon
/// loads it.
fn config(checks: usize, maintenance: bool) -> Config {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("checks")).unwrap();
    let mut config = String::from(
        "state_dir = \"state\"\nchecks_dir = \"checks\"\n\
         [alerting]\nto = [\"oncall@example.com\"]\nrepeat = \"4h\"\n",
    );
    if maintenance {
        config.push_str(
            "[[maintenance]]\nchecks = [\"staging-*\"]\nschedule = \"0 0 20 * * Mon-Fri\"\nduration = \"11h\"\n",
        );
    }
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    let mut toml = String::new();
    for i in 0..checks {
        toml.push_str(&format!(
            "[[check]]\nname = \"site-{i}\"\nkind = \"http\"\nurl = \"https://site-{i}.example/\"\nevery = \"30s\"\n\n"
        ));
    }
    std::fs::write(dir.path().join("checks/checks.toml"), toml).unwrap();
    match vigie::config::load(&dir.path().join("config.toml")) {
        Ok(config) => config,
        Err(errors) => panic!("bench config: {errors}"),
    }
}

fn down(name: &str, at: OffsetDateTime) -> Outcome {
    Outcome {
        name: name.to_string(),
        kind: KindName::Http,
        target: format!("https://{name}.example/"),
        status: Status::Down,
        started_at: at,
        duration_ms: 12.0,
        failures: vec![Failure {
            assertion: Assertion::HttpStatus,
            expected: "200".into(),
            observed: "503".into(),
            message: "503 Service Unavailable".into(),
        }],
        probe_error: None,
        http: None,
        tls: None,
        cors: None,
        dns: None,
        upload: None,
        smtp: None,
        domain: None,
    }
}

/// Fires every check (two down results each), drains the DOWN mails, then
/// times `ticks` ticks one second apart.
fn run(config: &Arc<Config>, ticks: usize) -> (Vec<Duration>, usize) {
    let mut now = OffsetDateTime::now_utc();
    let policies = Policies::new(config);
    let mut engine = Engine::new(
        "bench",
        config.alerting.group_window,
        Vec::new(),
        now,
        |c| policies.get(c).clone(),
    );
    for _ in 0..2 {
        for check in &config.checks {
            let outcome = down(&check.name, now);
            let policy = policies.get(&check.name);
            engine.observe(&outcome, now, policy, None);
        }
        now += Duration::from_secs(1);
    }
    now += config.alerting.group_window + Duration::from_secs(1);
    let sent = engine.poll(now);
    assert!(!sent.is_empty(), "the DOWN mails");
    let firing = engine.states().filter(|s| s.is_firing()).count();
    assert_eq!(firing, config.checks.len(), "every check fires");
    let mut times = Vec::with_capacity(ticks);
    let mut changed = 0;
    for _ in 0..ticks {
        now += Duration::from_secs(1);
        let started = Instant::now();
        let states = engine.tick(now, |c| policies.get(c), |c| hold_of(config, &[], c, now));
        times.push(started.elapsed());
        changed += states.len();
    }
    (times, changed)
}

fn report(label: &str, times: &[Duration]) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label}: tick median {:.2} ms, p90 {:.2} ms, max {:.2} ms over {} ticks (aim < 5 ms)",
        ms(at(0.5)),
        ms(at(0.9)),
        ms(*sorted.last().unwrap()),
        sorted.len()
    );
}
