//! The real binary: exit codes (0 up, 1 warn, 2 down, 3 config/usage), the
//! table, the JSON contract, and the shipped config.

use std::process::Command;

use crate::common::daemon::{api_section, free_addr};
use crate::common::env::{check_toml, Env};
use crate::common::*;

fn vigie(env: &Env, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vigie"))
        .arg("--config")
        .arg(env.config_path())
        .args(args)
        .output()
        .expect("run vigie")
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_follow_the_worst_status() {
    let good = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let aging = TlsServer::start_leaf(&twenty_days_left_leaf(), TlsOpts::default());
    let env = Env::new();
    env.write_checks(
        "checks.toml",
        &[
            check_toml("good", &good.url("/"), ""),
            check_toml("aging", &aging.url("/"), ""),
            check_toml("broken", &good.url("/status/500"), ""),
        ]
        .concat(),
    );
    let out = tokio::task::spawn_blocking(move || {
        let all = vigie(&env, &["check"]);
        let good = vigie(&env, &["check", "good"]);
        let aging = vigie(&env, &["check", "aging"]);
        let unknown = vigie(&env, &["check", "nope"]);
        (all, good, aging, unknown)
    })
    .await
    .unwrap();
    let (all, good, aging, unknown) = out;
    assert_eq!(all.status.code(), Some(2), "{}", stdout(&all));
    let table = stdout(&all);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert!(
        lines[1].starts_with("good ") && lines[1].contains(" UP "),
        "{table}"
    );
    assert!(lines[1].contains("Vigie Test Intermediate R1"), "{table}");
    assert!(
        lines[2].contains(" WARN ") && lines[2].contains("renewal looks stuck"),
        "{table}"
    );
    assert!(
        lines[3].contains(" DOWN ")
            && lines[3].ends_with("HTTP 500 Internal Server Error (expected 2xx)"),
        "{table}"
    );
    assert_eq!(good.status.code(), Some(0));
    assert_eq!(aging.status.code(), Some(1));
    assert_eq!(unknown.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown check \"nope\""));
}

#[tokio::test(flavor = "multi_thread")]
async fn json_output_is_the_design_contract() {
    let server = TlsServer::start_leaf(&expired_leaf(), TlsOpts::default());
    let env = Env::new();
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), ""));
    let out = tokio::task::spawn_blocking(move || vigie(&env, &["check", "--json"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let check = &json["checks"][0];
    assert_eq!(check["name"], "site");
    assert_eq!(check["kind"], "http");
    assert_eq!(check["status"], "down");
    assert!(check["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(check["duration_ms"].as_f64().is_some());
    let failure = &check["failures"][0];
    assert_eq!(failure["assertion"], "tls.expiry");
    assert_eq!(failure["expected"], ">= 7 days");
    assert_eq!(failure["observed"], "-2 days");
    let tls = &check["tls"];
    assert_eq!(tls["trusted"], false);
    assert_eq!(tls["verify_error"]["reason"], "expired");
    assert_eq!(tls["hostname_matches"], true);
    let leaf = &tls["chain"][0];
    for key in [
        "subject",
        "issuer",
        "not_before",
        "not_after",
        "days_left",
        "sans",
        "serial",
        "sha256",
        "key",
        "signature",
    ] {
        assert!(!leaf[key].is_null(), "chain[0].{key} missing: {leaf}");
    }
}

#[test]
fn validate_reports_errors_with_exit_3() {
    let env = Env::new();
    env.write_checks(
        "bad.toml",
        "[[check]]\nname = \"Bad Name\"\nkind = \"http\"\nurl = \"ftp://x\"\nevery = \"soon\"\n",
    );
    let out = vigie(&env, &["validate"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 3, "{stderr}");
    assert!(
        stderr.lines().all(|l| l.contains("checks/bad.toml:")),
        "{stderr}"
    );
    // `check` refuses to run on a broken config too.
    assert_eq!(vigie(&env, &["check"]).status.code(), Some(3));
}

#[test]
fn validate_warns_of_a_secret_file_others_may_read() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write_idle_check();
    let token = env.path().join("api-token");
    std::fs::write(&token, "a token of no consequence\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    env.append_config(&format!(
        "[api]\nlisten = \"{}\"\ntoken_file = \"{}\"\n",
        free_addr(),
        token.display()
    ));
    let out = vigie(&env, &["validate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A warning, not a refusal: the config still loads.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("warning: "))
        .unwrap_or_else(|| panic!("no warning: {stderr}"));
    assert!(
        warning.contains("config.toml:")
            && warning.contains("`api.token_file`")
            && warning.contains(&format!("{} holds a secret", token.display()))
            && warning.contains("its group and others may read it (mode 0644)")
            && warning.contains("chmod 600"),
        "{warning}"
    );
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = vigie(&env, &["validate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn silence_without_a_daemon_refuses_more_than_a_year() {
    let env = Env::new();
    env.write_idle_check();
    // Nobody listens there: the command writes the store itself.
    env.append_config(&api_section(free_addr(), None));
    let out = vigie(&env, &["silence", "site", "--for", "20000y"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // It used to panic (`now + 20000y` is past the year 9999).
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "vigie: a silence of 20000years is longer than the maximum of 1year"
    );
    let out = vigie(&env, &["silence", "site", "--for", "1y"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).starts_with("silenced \"site\" until "));
}

#[test]
fn a_config_that_pages_nobody_or_checks_nothing_is_refused() {
    // No [alerting] at all, one check.
    let env = Env::with_config("[alerting]\nfailure_threshold = 2\n");
    env.write_idle_check();
    for args in [&["validate"][..], &["check"], &["run"]] {
        let out = vigie(&env, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(
            stderr.contains("missing key `alerting.to`: pages would go to nobody"),
            "{args:?}: {stderr}"
        );
    }
    // Someone to page, nothing to check: "OK (0 checks)" no more.
    let env = Env::new();
    env.write_checks("site.tml", "[[check]]\nname = \"site\"\n");
    for args in [&["validate"][..], &["check"]] {
        let out = vigie(&env, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains("no checks:"), "{args:?}: {stderr}");
        assert!(
            stderr.contains("not read, for their names: site.tml"),
            "{args:?}: {stderr}"
        );
    }
    // Said outright: nobody is paged, and that is accepted.
    let env = Env::with_config("[alerting]\nenabled = false\n");
    env.write_idle_check();
    let out = vigie(&env, &["validate"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn shipped_config_validates() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO_BIN_EXE_vigie"))
        .current_dir(root)
        .arg("validate")
        .output()
        .expect("run vigie");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `validate` with `CREDENTIALS_DIRECTORY` set to `systemd`, or unset.
fn validate_with(env: &Env, systemd: Option<&std::path::Path>) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vigie"));
    command
        .arg("--config")
        .arg(env.config_path())
        .arg("validate")
        .env_remove("CREDENTIALS_DIRECTORY");
    if let Some(dir) = systemd {
        command.env("CREDENTIALS_DIRECTORY", dir);
    }
    let out = command.output().expect("run vigie");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

#[test]
fn a_secret_by_name_is_read_from_systemds_directory_else_from_credentials_dir() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write_idle_check();
    env.prepend_config("credentials_dir = \"creds\"\n");
    env.append_config(&format!(
        "[api]\nlisten = \"{}\"\ntoken_credential = \"api-token\"\n",
        free_addr()
    ));
    let creds = env.path().join("creds");
    let systemd = env.path().join("run");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::create_dir_all(&systemd).unwrap();

    // Missing: each message names the files looked for and what to do.
    let (code, stderr) = validate_with(&env, None);
    assert_eq!(code, Some(3), "{stderr}");
    let wanted = format!(
        "`api.token_credential`: credential \"api-token\": {}/api-token does not exist; write the secret there",
        creds.display()
    );
    assert!(
        stderr.contains("config.toml:") && stderr.contains(&wanted),
        "{stderr}"
    );
    let (code, stderr) = validate_with(&env, Some(&systemd));
    assert_eq!(code, Some(3), "{stderr}");
    let wanted = format!(
        "credential \"api-token\" is not loaded: neither {0}/api-token nor {0}/vigie_api-token exists; put the secret in {1}/api-token (mode 0600) and restart the service",
        systemd.display(),
        creds.display()
    );
    assert!(stderr.contains(&wanted), "{stderr}");

    // In credentials_dir: found outside systemd, not under it (the
    // service's user could not read it there).
    let token = creds.join("api-token");
    std::fs::write(&token, "a token of no consequence\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, stderr) = validate_with(&env, None);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let (code, stderr) = validate_with(&env, Some(&systemd));
    assert_eq!(code, Some(3), "{stderr}");

    // systemd's copy, under the name the packaged unit gives it.
    std::fs::write(systemd.join("vigie_api-token"), "a token\n").unwrap();
    std::fs::set_permissions(
        systemd.join("vigie_api-token"),
        std::fs::Permissions::from_mode(0o400),
    )
    .unwrap();
    let (code, stderr) = validate_with(&env, Some(&systemd));
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
}

#[test]
fn a_secret_given_both_as_a_file_and_by_name_is_refused() {
    let env = Env::new();
    env.write_idle_check();
    let token = env.path().join("api-token");
    std::fs::write(&token, "a token of no consequence\n").unwrap();
    env.append_config(&format!(
        "[api]\nlisten = \"{}\"\ntoken_file = {:?}\ntoken_credential = \"api-token\"\n",
        free_addr(),
        token.display().to_string()
    ));
    let (code, stderr) = validate_with(&env, None);
    assert_eq!(code, Some(3), "{stderr}");
    let config = env.config_path();
    let line = std::fs::read_to_string(&config)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("token_credential"))
        .unwrap()
        + 1;
    let wanted = format!(
        "{}:{line}:20: `api.token_credential`: set together with `api.token_file` at {}:{}:14; give the secret one way",
        config.display(),
        config.display(),
        line - 1
    );
    assert!(stderr.contains(&wanted), "{stderr}");
}
