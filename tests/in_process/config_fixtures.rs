//! Config fixtures: every directory under `tests/fixtures/config/` is one
//! case, a `config.toml` (plus whatever `checks/` it needs) and an
//! `expected.txt` holding the exact output of `vigie::config::load`, one
//! problem per line, paths relative to the case directory. The `valid`
//! case expects nothing.
//!
//! To add a case: create the directory, write the files, run once with
//! `VIGIE_BLESS=1` to write `expected.txt`, then read it and make sure every
//! line is what a user should see.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config");
    let mut cases: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    cases
}

/// What `load` reports for a case, as `expected.txt` spells it.
fn actual(case: &Path) -> String {
    let prefix = format!("{}/", case.display());
    match vigie::config::load(&case.join("config.toml")) {
        Ok(_) => String::new(),
        Err(errors) => errors
            .0
            .iter()
            .map(|e| format!("{}\n", e.to_string().replace(&prefix, "")))
            .collect(),
    }
}

#[test]
fn every_case_reports_exactly_its_expected_output() {
    let cases = cases();
    assert!(
        cases.len() >= 20,
        "fixtures missing? found {} cases",
        cases.len()
    );
    let bless = std::env::var_os("VIGIE_BLESS").is_some();
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap_or_default().to_string_lossy();
        let expected_path = case.join("expected.txt");
        let actual = actual(case);
        if bless {
            fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        if actual != expected {
            failures.push(format!(
                "--- case {name}\n--- expected ({}):\n{expected}--- actual:\n{actual}",
                expected_path.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} config fixtures differ:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_valid_case_loads_every_section() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/valid");
    let config = vigie::config::load(&case.join("config.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.extra_ca_file.is_some());
    assert_eq!(config.ca_cache_size, 32 * 1024 * 1024);
    assert!(config.api.token_file.is_some());
    let vantage = config.vantage.as_ref().expect("[vantage]");
    assert_eq!(
        (
            vantage.node.as_str(),
            vantage.bucket.as_str(),
            vantage.prefix.as_str()
        ),
        ("eu-par", "vigie-coordination", "prod")
    );
    let peers: Vec<&str> = vantage.peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(peers, ["eu-ams", "fra"]);
    assert_eq!(
        vantage.peers[1].public_key.to_string(),
        "ed25519:lEFOvYlLttrKSI+GJigITJB90saJbwmTbzHUUv7uIuk="
    );
    assert_eq!(vantage.max_clock_skew, std::time::Duration::from_secs(30));
    assert_eq!(
        (vantage.quorum, vantage.publish_every, vantage.stale_after),
        (Some(2), Duration::from_secs(10), Duration::from_secs(60))
    );
    assert!(config.api.tls.is_some());
    assert!(config.api.ca_file.is_some());
    assert_eq!(config.api.hosts, ["vigie.example.com", "10.0.0.5"]);
    assert_eq!(
        (config.api.request_timeout, config.api.session_ttl),
        (Duration::from_secs(5), Duration::from_secs(8 * 3600))
    );
    assert!(!config.connectivity.canaries.is_empty());
    assert!(config.alerting.from.is_some());
    assert!(config
        .smtp
        .as_ref()
        .is_some_and(|s| s.password_file.is_some()));
    assert!(config.replication.as_ref().is_some_and(
        |r| r.endpoint.is_some() && r.credentials == vigie::config::Credentials::Files
    ));
    assert!(config.heartbeat.is_some());
    assert_eq!(config.history.retention, Duration::from_secs(90 * 86_400));
    assert_eq!(
        config.history.rollup_retention,
        Duration::from_secs(2 * 31_557_600)
    );
    assert!(!config.maintenance.is_empty());
    assert!(config.maintenance[0].covers("staging-api"));
    assert!(config.checks.len() >= 2);
}
