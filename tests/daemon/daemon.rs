//! The real daemon (`vigie run`, a child process) against loopback TLS
//! servers: its local API and metrics, the API token, `vigie history`
//! while it runs and after it stopped, SIGHUP reloads (good and bad),
//! kill -9 mid-run, SIGTERM with a probe in flight, and startup errors.
//!
//! Every test starts its own daemon(s) with their own `[api] listen` port
//! and `state_dir`; the [`Daemon`] handle kills its child if the test fails
//! half-way. Waits are polls with a deadline, never fixed long sleeps.

use std::time::Duration;

use prom_text_format_parser::{parse_scrape, Metric, Sample, ScrapeParseError, Type};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::common::daemon::{api_section, free_addr, poll, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::*;

/// Until `/healthz` first answers ok.
const START: Duration = Duration::from_secs(20);
/// Until the results we wait for arrive (checks run every second).
const RESULTS: Duration = Duration::from_secs(20);
/// SIGTERM until exit.
const STOP: Duration = Duration::from_secs(20);

/// A check every second, judged quickly.
const EVERY_1S: &str = "every = \"1s\"\ntimeout = \"5s\"";

// ------------------------------------------------------------------ helpers

fn started_at(outcome: &Value) -> OffsetDateTime {
    let text = outcome["started_at"]
        .as_str()
        .unwrap_or_else(|| panic!("no started_at in {outcome}"));
    OffsetDateTime::parse(text, &Rfc3339).unwrap_or_else(|e| panic!("started_at {text:?}: {e}"))
}

fn times(outcomes: &[Value]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| o["started_at"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn assert_strictly_increasing(outcomes: &[Value], what: &str) {
    for pair in outcomes.windows(2) {
        assert!(
            started_at(&pair[0]) < started_at(&pair[1]),
            "{what}: started_at not strictly increasing: {:?}",
            times(outcomes)
        );
    }
}

/// `prefix` is the beginning of `full`, outcome by outcome (the whole JSON).
fn assert_prefix(prefix: &[Value], full: &[Value], what: &str) {
    assert!(
        prefix.len() <= full.len(),
        "{what}: {} outcomes expected at least, got {}:\nexpected {:?}\ngot {:?}",
        prefix.len(),
        full.len(),
        times(prefix),
        times(full)
    );
    for (i, (a, b)) in prefix.iter().zip(full).enumerate() {
        assert_eq!(a, b, "{what}: outcome {i} differs");
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `vigie history NAME --json` (`--since 1h`); panics unless it exits 0
/// with a history view of `name`. Returns the outcomes.
async fn history_cli(env: &Env, name: &str) -> Vec<Value> {
    let out = vigie_cli_async(
        &env.config_path(),
        &["history", name, "--since", "1h", "--json"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "vigie history {name} --json: {}",
        stderr(&out)
    );
    let view: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "vigie history --json is not JSON: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(view["name"], name, "{view}");
    OffsetDateTime::parse(view["since"].as_str().expect("since"), &Rfc3339)
        .expect("since is RFC 3339");
    view["outcomes"].as_array().expect("outcomes").clone()
}

/// Waits until the API reports at least `n` outcomes of `name`.
async fn wait_outcomes(daemon: &Daemon, name: &str, n: usize) -> Vec<Value> {
    poll(RESULTS, &format!("{n} outcomes of {name}"), async || {
        let outcomes = daemon.history(name).await?;
        match outcomes.len() >= n {
            true => Ok(outcomes),
            false => Err(format!("{} so far", outcomes.len())),
        }
    })
    .await
}

/// Waits until the API reports an outcome of `name` started after `after`.
async fn wait_outcome_after(daemon: &Daemon, name: &str, after: OffsetDateTime) -> Vec<Value> {
    poll(
        RESULTS,
        &format!("an outcome of {name} after {after}"),
        async || {
            let outcomes = daemon.history(name).await?;
            match outcomes.last().map(started_at) {
                Some(last) if last > after => Ok(outcomes),
                last => Err(format!("latest {last:?}")),
            }
        },
    )
    .await
}

/// One `/metrics` scrape, parsed by a Prometheus text-format parser.
///
/// `prom_text_format_parser` rather than `prometheus-parse`: the latter
/// splits label pairs on `,` and `=`, so DN-valued labels
/// (`issuer="C=FR, O=..., CN=..."`) are silently dropped.
struct Scrape {
    metrics: Vec<Metric>,
    text: String,
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let (metrics, error) = parse_scrape(text);
        match error {
            None => {}
            // A family with HELP/TYPE but no sample (e.g. no check has an
            // HTTP status yet) is valid exposition format (the reference Go
            // parser drops such families); this parser reports it. The
            // families we read are checked to be typed, so a sample that
            // lost its TYPE line would still fail.
            Some(ScrapeParseError::Collect(errors))
                if errors.iter().all(|e| {
                    e.error.ends_with("has only HELP")
                        || e.error.ends_with("has only TYPE")
                        || e.error.ends_with("has no samples")
                }) => {}
            Some(err) => panic!("/metrics is not valid Prometheus text: {err:?}\n{text}"),
        }
        Scrape {
            metrics,
            text: text.to_string(),
        }
    }

    fn family(&self, name: &str, kind: Type) -> Option<&Metric> {
        let family = self.metrics.iter().find(|m| m.name == name)?;
        assert_eq!(family.kind, kind, "TYPE of {name}:\n{}", self.text);
        assert!(
            family.help_desc.is_some(),
            "no HELP for {name}:\n{}",
            self.text
        );
        Some(family)
    }

    /// The gauge sample of `name` labelled `check="<check>"`, if any (at most one).
    fn sample(&self, name: &str, check: &str) -> Option<&Sample> {
        let family = self.family(name, Type::Gauge)?;
        let mut samples = family
            .samples
            .iter()
            .filter(|s| label(s, "check") == Some(check));
        let first = samples.next()?;
        assert!(
            samples.next().is_none(),
            "two {name} samples for {check}:\n{}",
            self.text
        );
        Some(first)
    }

    fn value(&self, name: &str, check: &str) -> Option<f64> {
        self.sample(name, check).map(|s| s.value.value.as_f64())
    }

    /// The one unlabelled sample of gauge `name`.
    fn scalar(&self, name: &str) -> Option<f64> {
        let family = self.family(name, Type::Gauge)?;
        assert_eq!(family.samples.len(), 1, "{name}:\n{}", self.text);
        let sample = &family.samples[0];
        assert!(
            sample.labels.is_empty(),
            "{name} has labels:\n{}",
            self.text
        );
        Some(sample.value.value.as_f64())
    }
}

fn label<'a>(sample: &'a Sample, key: &str) -> Option<&'a str> {
    sample
        .labels
        .iter()
        .find(|l| l.key == key)
        .map(|l| l.value.as_str())
}

async fn scrape(daemon: &Daemon) -> Result<Scrape, String> {
    match daemon.get("/metrics").await? {
        (200, text) => Ok(Scrape::parse(&text)),
        (status, body) => Err(format!("/metrics: {status} {body}")),
    }
}

/// Waits until `/metrics` satisfies `cond`; returns that scrape.
async fn wait_metrics(daemon: &Daemon, what: &str, cond: impl Fn(&Scrape) -> bool) -> Scrape {
    poll(RESULTS, what, async || {
        let scrape = scrape(daemon).await?;
        match cond(&scrape) {
            true => Ok(scrape),
            false => Err(scrape.text),
        }
    })
    .await
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// -------------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread")]
async fn api_serves_health_metrics_checks_and_history() {
    let leaf = valid_leaf();
    let server = TlsServer::start_leaf(&leaf, TlsOpts::default());
    let refused = refused_addr();
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), EVERY_1S));
    let down_url = format!("https://{HOST}:{}/", refused.port());
    env.write_checks("down.toml", &check_toml("down", &down_url, EVERY_1S));
    let mut daemon = Daemon::spawn(&env.config_path(), api);

    let health = daemon.wait_healthy(START).await;
    assert_eq!(health["status"], "ok", "{health}");

    // /metrics, once both checks have a result.
    let m = wait_metrics(&daemon, "probe_success of site and down", |m| {
        m.value("probe_success", "site").is_some() && m.value("probe_success", "down").is_some()
    })
    .await;
    let site = m.sample("probe_success", "site").unwrap();
    assert_eq!(site.value.value.as_f64(), 1.0, "{}", m.text);
    assert_eq!(label(site, "kind"), Some("http"));
    assert_eq!(label(site, "target"), Some(server.url("/").as_str()));
    assert_eq!(m.value("probe_success", "down"), Some(0.0), "{}", m.text);
    let duration = m
        .value("probe_duration_seconds", "site")
        .expect("probe_duration_seconds");
    assert!(duration.is_finite() && duration > 0.0, "{}", m.text);
    assert_eq!(
        m.value("probe_http_status_code", "site"),
        Some(200.0),
        "{}",
        m.text
    );
    assert_eq!(
        m.value("probe_http_status_code", "down"),
        None,
        "no HTTP answer, no status:\n{}",
        m.text
    );
    let expiry = m
        .value("probe_ssl_earliest_cert_expiry", "site")
        .expect("probe_ssl_earliest_cert_expiry");
    let not_after = leaf.spec.not_after.unix_timestamp() as f64;
    assert!(
        (expiry - not_after).abs() <= 1.0,
        "earliest expiry {expiry}, leaf not_after {not_after}"
    );
    let chain = m
        .sample("probe_ssl_last_chain_info", "site")
        .expect("probe_ssl_last_chain_info");
    assert_eq!(chain.value.value.as_f64(), 1.0);
    let fingerprint = {
        use sha2::Digest;
        hex(&sha2::Sha256::digest(&leaf.cert))
    };
    let (_, parsed) = x509_parser::parse_x509_certificate(&leaf.cert).expect("leaf parses");
    assert_eq!(
        label(chain, "fingerprint_sha256"),
        Some(fingerprint.as_str())
    );
    assert_eq!(
        label(chain, "serial_number"),
        Some(hex(parsed.raw_serial()).as_str())
    );
    assert_eq!(label(chain, "subject"), Some(format!("CN={HOST}").as_str()));
    let issuer = label(chain, "issuer").expect("issuer label");
    assert!(
        issuer.contains("CN=Vigie Test Intermediate R1") && issuer.contains("O=Vigie Test"),
        "issuer label {issuer:?}"
    );
    assert_eq!(m.scalar("vigie_checks_configured"), Some(2.0), "{}", m.text);
    assert_eq!(
        m.scalar("vigie_config_last_reload_successful"),
        Some(1.0),
        "{}",
        m.text
    );

    // /api/v1/checks: every configured check, with its latest outcome.
    let checks = daemon.get_json("/api/v1/checks").await.unwrap();
    let list = checks["checks"].as_array().expect("checks array");
    let names: Vec<&str> = list.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["down", "site"], "{checks}");
    let by_name = |name: &str| list.iter().find(|c| c["name"] == name).unwrap().clone();
    let site = by_name("site");
    assert_eq!(site["latest"]["name"], "site", "{site}");
    assert_eq!(site["latest"]["status"], "up", "{site}");
    assert_eq!(site["latest"]["http"]["status"], 200, "{site}");
    assert_eq!(
        site["latest"]["tls"]["chain"][0]["sha256"],
        fingerprint.as_str()
    );
    assert_eq!(site["interval_seconds"], 1.0, "{site}");
    let down = by_name("down");
    assert_eq!(down["latest"]["status"], "down", "{down}");
    let failures = down["latest"]["failures"].as_array().expect("failures");
    assert!(
        failures.iter().any(|f| f["assertion"] == "connect"),
        "{down}"
    );

    // /api/v1/history/site?since=1h.
    wait_outcomes(&daemon, "site", 3).await;
    let before = OffsetDateTime::now_utc();
    let view = daemon
        .get_json("/api/v1/history/site?since=1h")
        .await
        .unwrap();
    assert_eq!(view["name"], "site");
    let since = OffsetDateTime::parse(view["since"].as_str().expect("since"), &Rfc3339).unwrap();
    let expected = before - Duration::from_secs(3600);
    assert!(
        (since - expected).abs() < time::Duration::seconds(60),
        "since {since}, expected about {expected}"
    );
    let outcomes = view["outcomes"].as_array().expect("outcomes");
    assert!(outcomes.len() >= 3, "{view}");
    assert_strictly_increasing(outcomes, "API history");
    for o in outcomes {
        assert_eq!(o["name"], "site", "{o}");
        assert_eq!(o["status"], "up", "{o}");
        assert!(started_at(o) >= since, "{o}");
    }

    let (status, body) = daemon.get("/api/v1/history/nope?since=1h").await.unwrap();
    assert_eq!(status, 404, "{body}");
    let error: Value = serde_json::from_str(&body).expect("404 body is JSON");
    assert!(
        error["error"].as_str().is_some_and(|e| e.contains("nope")),
        "{body}"
    );
    let (status, body) = daemon
        .get("/api/v1/history/site?since=banana")
        .await
        .unwrap();
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).expect("400 body is JSON");
    assert!(error["error"].is_string(), "{body}");

    daemon.stop(STOP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_guards_everything_but_healthz() {
    const TOKEN: &str = "s3cret-t0ken";
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::new();
    let token_file = env.path().join("api-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    env.append_config(&api_section(api, Some(&token_file)));
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), EVERY_1S));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    daemon.token = Some(TOKEN.to_string());
    wait_outcomes(&daemon, "site", 1).await;

    for path in [
        "/metrics",
        "/api/v1/checks",
        "/api/v1/history/site?since=1h",
    ] {
        let (status, body) = daemon.get_as(path, None).await.unwrap();
        assert_eq!(status, 401, "{path} without a token: {body}");
        let error: Value = serde_json::from_str(&body).expect("401 body is JSON");
        assert!(error["error"].is_string(), "{body}");
        let (status, body) = daemon.get_as(path, Some("not-the-token")).await.unwrap();
        assert_eq!(status, 401, "{path} with a wrong token: {body}");
        let (status, body) = daemon.get_as(path, Some(TOKEN)).await.unwrap();
        assert_eq!(status, 200, "{path} with the token: {body}");
    }
    let (status, body) = daemon.get_as("/healthz", None).await.unwrap();
    assert_eq!(status, 200, "/healthz needs no token: {body}");

    // The CLI reads token_file and sends it.
    let outcomes = history_cli(&env, "site").await;
    assert!(!outcomes.is_empty());

    // SIGINT stops as cleanly as SIGTERM.
    daemon.signal(libc::SIGINT);
    let status = daemon.wait_exit(STOP).await;
    assert_eq!(status.code(), Some(0), "{status}:\n{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn history_cli_asks_the_daemon_then_reads_the_store() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), EVERY_1S));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    // While it runs: the CLI goes through the API (sled allows one process).
    let before = wait_outcomes(&daemon, "site", 3).await;
    let cli = history_cli(&env, "site").await;
    let after = daemon.history("site").await.unwrap();
    assert_prefix(&before, &cli, "API before vs CLI");
    assert_prefix(&cli, &after, "CLI vs API after");
    assert_strictly_increasing(&cli, "CLI history while running");

    let unknown = vigie_cli_async(&env.config_path(), &["history", "nope", "--json"]).await;
    assert_eq!(unknown.status.code(), Some(3), "{}", stderr(&unknown));
    assert!(stderr(&unknown).contains("nope"), "{}", stderr(&unknown));

    // After SIGTERM: the CLI opens the store itself and finds the same.
    let reported = daemon.history("site").await.unwrap();
    daemon.stop(STOP).await;
    let stored = history_cli(&env, "site").await;
    assert_prefix(&reported, &stored, "API before SIGTERM vs store after");
    assert_strictly_increasing(&stored, "stored history");

    let unknown = vigie_cli_async(&env.config_path(), &["history", "nope", "--json"]).await;
    assert_eq!(unknown.status.code(), Some(3), "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("unknown check \"nope\""),
        "{}",
        stderr(&unknown)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_reloads_and_a_bad_config_keeps_the_old_one() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), EVERY_1S));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    let first = wait_outcomes(&daemon, "site", 2).await;

    // A valid second check file.
    env.write_checks(
        "second.toml",
        &check_toml("second", &server.url("/headers"), EVERY_1S),
    );
    daemon.signal(libc::SIGHUP);
    let checks = poll(RESULTS, "check \"second\" with a result", async || {
        let checks = daemon.get_json("/api/v1/checks").await?;
        let listed = checks["checks"].as_array().cloned().unwrap_or_default();
        match listed.iter().find(|c| c["name"] == "second") {
            Some(second) if second["latest"].is_object() => Ok(checks),
            _ => Err(checks.to_string()),
        }
    })
    .await;
    let names: Vec<&str> = checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["second", "site"], "{checks}");
    let site = daemon.history("site").await.unwrap();
    assert_prefix(&first, &site, "site's history across the reload");
    let m = scrape(&daemon).await.unwrap();
    assert_eq!(m.scalar("vigie_checks_configured"), Some(2.0), "{}", m.text);
    assert_eq!(m.scalar("vigie_config_last_reload_successful"), Some(1.0));

    // An invalid check file: rejected, the running config goes on.
    env.write_checks(
        "third.toml",
        &check_toml(
            "third",
            &server.url("/"),
            "every = \"1s\"\n\n[check.expect]\nbody_regex = \"(unclosed\"",
        ),
    );
    daemon.signal(libc::SIGHUP);
    let m = wait_metrics(&daemon, "vigie_config_last_reload_successful 0", |m| {
        m.scalar("vigie_config_last_reload_successful") == Some(0.0)
    })
    .await;
    let rejected_at = OffsetDateTime::now_utc();
    assert_eq!(m.scalar("vigie_checks_configured"), Some(2.0), "{}", m.text);
    // The log line may land a moment after the metric changed.
    poll(
        RESULTS,
        "the rejected reload to name the problem",
        async || {
            let log = daemon.log();
            match log.contains("third.toml:9:14") && log.contains("invalid regex") {
                true => Ok(()),
                false => Err(log),
            }
        },
    )
    .await;
    wait_outcome_after(&daemon, "site", rejected_at).await;
    wait_outcome_after(&daemon, "second", rejected_at).await;
    assert!(
        daemon.exited().is_none(),
        "the daemon exited:\n{}",
        daemon.log()
    );
    let health = daemon.get_json("/healthz").await.unwrap();
    assert_eq!(health["config_reload_ok"], false, "{health}");
    let checks = daemon.get_json("/api/v1/checks").await.unwrap();
    assert_eq!(checks["checks"].as_array().unwrap().len(), 2, "{checks}");

    // Fixed: the next SIGHUP takes it.
    env.write_checks(
        "third.toml",
        &check_toml("third", &server.url("/"), EVERY_1S),
    );
    daemon.signal(libc::SIGHUP);
    wait_metrics(&daemon, "reload ok with 3 checks", |m| {
        m.scalar("vigie_config_last_reload_successful") == Some(1.0)
            && m.scalar("vigie_checks_configured") == Some(3.0)
    })
    .await;
    wait_outcomes(&daemon, "third", 1).await;
    let site = daemon.history("site").await.unwrap();
    assert_prefix(&first, &site, "site's history across three reloads");
    assert_strictly_increasing(&site, "site's history across reloads");

    daemon.stop(STOP).await;
}

/// One daemon run between two kill -9.
struct Run {
    started: OffsetDateTime,
    killed: OffsetDateTime,
    /// What the API reported ~1.6 s (more than the 1 s flush interval)
    /// before the kill, per check.
    reported: Vec<Vec<Value>>,
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_run_keeps_every_flushed_result() {
    const CHECKS: [&str; 3] = ["a", "b", "c"];
    const ROUNDS: u64 = 4;
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks(
        "checks.toml",
        &[
            check_toml("a", &server.url("/"), EVERY_1S),
            check_toml("b", &server.url("/headers"), EVERY_1S),
            check_toml("c", &server.url("/status/503"), EVERY_1S),
        ]
        .concat(),
    );

    let mut runs = Vec::new();
    for round in 0..ROUNDS {
        let started = OffsetDateTime::now_utc();
        let mut daemon = Daemon::spawn(&env.config_path(), api);
        // The store opens after the previous kill -9.
        daemon.wait_healthy(START).await;
        for name in CHECKS {
            poll(
                RESULTS,
                &format!("round {round}: a result of {name}"),
                async || {
                    let outcomes = daemon.history(name).await?;
                    match outcomes.iter().any(|o| started_at(o) >= started) {
                        true => Ok(()),
                        false => Err(format!("{:?}", times(&outcomes))),
                    }
                },
            )
            .await;
        }
        let mut reported = Vec::new();
        for name in CHECKS {
            let outcomes = daemon.history(name).await.unwrap();
            assert_strictly_increasing(&outcomes, &format!("round {round}: API history of {name}"));
            reported.push(outcomes);
        }
        // More than the flush interval, varied so kills land at different
        // points of the probe cycle.
        tokio::time::sleep(Duration::from_millis(1600 + 270 * round)).await;
        let killed = OffsetDateTime::now_utc();
        let status = daemon.kill9();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
        runs.push(Run {
            started,
            killed,
            reported,
        });
    }

    for (i, name) in CHECKS.iter().enumerate() {
        // Every record decodes: a damaged one fails the command (exit 3).
        let stored = history_cli(&env, name).await;
        assert_strictly_increasing(&stored, &format!("stored history of {name}"));
        for (round, run) in runs.iter().enumerate() {
            for outcome in &run.reported[i] {
                let at = started_at(outcome);
                let found = stored.iter().find(|o| started_at(o) == at);
                assert_eq!(
                    found,
                    Some(outcome),
                    "{name}: result at {at} reported in round {round}, >1.5 s before the kill, is not in the store as reported; stored: {:?}",
                    times(&stored)
                );
            }
            assert!(
                stored
                    .iter()
                    .any(|o| (run.started..=run.killed).contains(&started_at(o))),
                "{name}: nothing stored from round {round} ({}..{}): {:?}",
                run.started,
                run.killed,
                times(&stored)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_waits_for_the_probe_in_flight() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks(
        "slow.toml",
        &check_toml(
            "slow",
            &server.url("/slow/3000"),
            "every = \"1s\"\ntimeout = \"10s\"",
        ),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    poll(
        RESULTS,
        "the slow request at the server",
        async || match server.recorded_requests().len() {
            0 => Err("no request yet".to_string()),
            _ => Ok(()),
        },
    )
    .await;
    let in_flight = daemon.history("slow").await.unwrap();
    assert!(
        in_flight.is_empty(),
        "the first probe is still in flight: {in_flight:?}"
    );
    let sigterm_at = OffsetDateTime::now_utc();
    daemon.signal(libc::SIGTERM);
    // A second SIGTERM while stopping does not cut the probe short.
    tokio::time::sleep(Duration::from_millis(200)).await;
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit(STOP).await;
    assert_eq!(status.code(), Some(0), "{status}:\n{}", daemon.log());

    let stored = history_cli(&env, "slow").await;
    assert_eq!(
        stored.len(),
        1,
        "exactly the probe in flight at SIGTERM, nothing started after: {:?}",
        times(&stored)
    );
    let outcome = &stored[0];
    assert!(started_at(outcome) <= sigterm_at, "{outcome}");
    assert_eq!(outcome["status"], "up", "{outcome}");
    assert_eq!(outcome["http"]["status"], 200, "{outcome}");
    assert!(
        outcome["duration_ms"]
            .as_f64()
            .is_some_and(|ms| ms >= 2900.0),
        "the slow answer was awaited: {outcome}"
    );
    assert_eq!(
        server.recorded_requests().len(),
        1,
        "no probe after SIGTERM"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn api_port_in_use_is_a_startup_error() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = holder.local_addr().unwrap();
    let env = Env::with_config(&api_section(taken, None));
    env.write_checks(
        "site.toml",
        &check_toml("site", &format!("https://{HOST}:1/"), EVERY_1S),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), taken);
    let status = daemon.wait_exit(START).await;
    let log = daemon.log();
    assert_eq!(status.code(), Some(3), "{status}:\n{log}");
    assert!(
        log.contains(&taken.to_string()) && log.contains("[api] listen"),
        "the message names the address and the setting:\n{log}"
    );
    drop(holder);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_config_is_a_startup_error_with_its_position() {
    // A TOML syntax error in config.toml (line 5: after the four lines Env
    // writes, before its [alerting]).
    let api = free_addr();
    let env = Env::with_config(&format!("concurrency = 64 64\n{}", api_section(api, None)));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    let status = daemon.wait_exit(START).await;
    let log = daemon.log();
    assert_eq!(status.code(), Some(3), "{status}:\n{log}");
    assert!(log.contains("config.toml:5:15: TOML syntax error"), "{log}");

    // An invalid regex in a check file.
    let env = Env::with_config(&api_section(api, None));
    env.write_checks(
        "site.toml",
        &check_toml(
            "site",
            &format!("https://{HOST}/"),
            "every = \"1s\"\n\n[check.expect]\nbody_regex = \"(unclosed\"",
        ),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    let status = daemon.wait_exit(START).await;
    let log = daemon.log();
    assert_eq!(status.code(), Some(3), "{status}:\n{log}");
    assert!(
        log.contains("site.toml:9:14: `expect.body_regex`: invalid regex"),
        "{log}"
    );
}

/// `since` longer than the calendar goes back (time's dates stop at year
/// -9999): refused with a message, or read as "everything", never a crash.
#[tokio::test(flavor = "multi_thread")]
async fn a_history_window_past_the_calendar_is_not_a_crash() {
    const HUGE: &str = "20000y";
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), EVERY_1S));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    wait_outcomes(&daemon, "site", 1).await;

    let mut problems = Vec::new();
    match daemon.get(&format!("/api/v1/history/site?since={HUGE}")).await {
        Ok((400, body)) if serde_json::from_str::<Value>(&body).is_ok_and(|e| e["error"].is_string()) => {}
        Ok((200, body)) if serde_json::from_str::<Value>(&body).is_ok_and(|v| v["outcomes"].is_array()) => {}
        Ok((status, body)) => problems.push(format!(
            "GET /api/v1/history/site?since={HUGE}: expected 400 with an error (or 200 with everything), got {status} {body}"
        )),
        Err(err) => problems.push(format!(
            "GET /api/v1/history/site?since={HUGE}: expected 400 with an error (or 200 with everything), got no answer: {err}"
        )),
    }
    let cli = |out: &std::process::Output, when: &str| -> Option<String> {
        let code = out.status.code();
        let err = stderr(out);
        let fine = match code {
            Some(0) => true,
            Some(3) => !err.contains("panicked") && !err.contains("cannot reach the daemon"),
            _ => false,
        };
        (!fine).then(|| {
            format!("vigie history site --since {HUGE} ({when}): expected exit 0 or 3 with a message, got {code:?}: {}", err.lines().take(3).collect::<Vec<_>>().join(" | "))
        })
    };
    let running = vigie_cli_async(&env.config_path(), &["history", "site", "--since", HUGE]).await;
    problems.extend(cli(&running, "daemon running"));
    assert!(
        daemon.exited().is_none(),
        "the daemon died:\n{}",
        daemon.log()
    );
    daemon.stop(STOP).await;
    let stopped = vigie_cli_async(&env.config_path(), &["history", "site", "--since", HUGE]).await;
    problems.extend(cli(&stopped, "daemon stopped"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_daemon_on_the_same_state_dir_is_refused() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), EVERY_1S));
    let mut first = Daemon::spawn(&env.config_path(), api);
    first.wait_healthy(START).await;

    // Same state_dir and checks, another API port.
    let other_api = free_addr();
    let config = std::fs::read_to_string(env.config_path()).unwrap();
    let other_config = env.path().join("other.toml");
    std::fs::write(
        &other_config,
        config.replace(&api.to_string(), &other_api.to_string()),
    )
    .unwrap();
    let mut second = Daemon::spawn(&other_config, other_api);
    let status = second.wait_exit(START).await;
    let log = second.log();
    assert_eq!(status.code(), Some(3), "{status}:\n{log}");
    assert!(log.contains("in use by another process"), "{log}");
    assert!(
        first.exited().is_none(),
        "the first daemon died:\n{}",
        first.log()
    );
    first.get_json("/healthz").await.unwrap();
    first.stop(STOP).await;
}

/// The CLI on the daemon's machine, with the shipped `[api]` (loopback, no
/// token), reaches the running daemon through its local socket: silence,
/// unsilence, history and report work. The daemon runs as under systemd,
/// its socket in `$RUNTIME_DIRECTORY`, which the CLI's shell does not
/// have: it finds it through `<state_dir>/api.sock`. Over TCP the same
/// silence is still refused without the token, and the refusal never says
/// to stop the daemon.
#[tokio::test(flavor = "multi_thread")]
async fn on_its_machine_the_cli_controls_a_running_daemon_without_a_token() {
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_idle_check();
    let runtime = env.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    let mut daemon =
        Daemon::spawn_with_env(&env.config_path(), api, &[("RUNTIME_DIRECTORY", &runtime)]);
    daemon.wait_healthy(START).await;
    let socket = runtime.join("api.sock");
    let link = env.path().join("state/api.sock");
    assert!(socket.exists(), "{}", daemon.log());
    assert_eq!(std::fs::read_link(&link).unwrap(), socket);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "the socket is for its owner and group");

    let cli = async |args: &[&str]| {
        let out = vigie_cli_async(&env.config_path(), args).await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = cli(&["silence", "idle", "--for", "1h", "--reason", "deploy"]).await;
    assert!(said.starts_with("silenced \"idle\" until "), "{said}");
    let silences = daemon.get_json("/api/v1/silences").await.unwrap();
    assert_eq!(
        silences["silences"][0]["pattern"], "idle",
        "the daemon holds it: {silences}"
    );
    cli(&["history", "idle"]).await;
    cli(&["report"]).await;
    cli(&["unsilence", "idle"]).await;
    let silences = daemon.get_json("/api/v1/silences").await.unwrap();
    assert_eq!(
        silences["silences"].as_array().map(Vec::len),
        Some(0),
        "{silences}"
    );

    let body = serde_json::json!({"pattern": "idle", "for": "1h", "reason": "tcp"});
    let (status, answer) = daemon.post("/api/v1/silences", &body).await.unwrap();
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("local socket"), "{answer}");
    assert!(!answer.contains("stop"), "{answer}");

    daemon.stop(STOP).await;
    assert!(!socket.exists() && std::fs::symlink_metadata(&link).is_err());
    // No daemon: the command writes the store itself, as before.
    cli(&["silence", "idle", "--for", "1h"]).await;
}

/// `journalctl -p warning` after a restart with two checks down shows both:
/// each check's first result after a start is told, a check still down at
/// WARN with since when.
#[tokio::test(flavor = "multi_thread")]
async fn after_a_restart_the_journal_says_at_warn_which_checks_are_still_down() {
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    // Nobody listens on either port: connection refused, every second.
    for name in ["api", "app"] {
        let url = format!("https://localhost:{}/", free_addr().port());
        env.write_checks(
            &format!("{name}.toml"),
            &check_toml(name, &url, "every = \"1s\""),
        );
    }
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    let start = daemon.log();
    assert!(
        start.contains("vigie running: 2 checks; mail into the maildir")
            && start.contains("no replication")
            && start.contains(&format!("API http://{api}, local socket ")),
        "{start}"
    );
    poll(START, "both checks down twice", async || {
        let checks = daemon.get_json("/api/v1/checks").await?;
        let down = checks["checks"]
            .as_array()
            .map(|c| c.iter().filter(|c| c["latest"]["status"] == "down").count());
        match down {
            Some(2) => Ok(()),
            _ => Err(checks.to_string()),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    daemon.stop(STOP).await;

    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    let warnings = poll(START, "both still DOWN at WARN", async || {
        let warned: Vec<String> = daemon
            .log()
            .lines()
            .filter(|l| l.contains(" WARN ") && l.contains(" still DOWN since "))
            .map(str::to_string)
            .collect();
        match warned.len() {
            2 => Ok(warned),
            _ => Err(daemon.log()),
        }
    })
    .await;
    for name in ["api", "app"] {
        assert!(
            warnings
                .iter()
                .any(|l| l.contains(&format!("{name} still DOWN since "))
                    && l.contains("connection refused")),
            "{warnings:?}"
        );
    }
    daemon.stop(STOP).await;
}
