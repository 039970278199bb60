//! Running vigie itself against the harness servers: a temporary config
//! directory that trusts the test root, checks written as TOML, and the real
//! load -> probe -> evaluate path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use vigie::clock::{Clock, SystemClock};
use vigie::config::Config;
use vigie::outcome::{Assertion, Outcome};

use super::pki;

/// Where an [`Env`]'s pages go unless the test says otherwise.
pub const RECIPIENT: &str = "oncall@example.test";
const DEFAULT_ALERTING: &str = "[alerting]\nto = [\"oncall@example.test\"]\n";

fn has_alerting(text: &str) -> bool {
    text.lines().any(|l| l.trim() == "[alerting]")
}

/// A config directory: `config.toml` trusting the test root, `checks/`.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root_pem: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        Env::with_config("")
    }

    /// `extra` is appended to config.toml (top-level keys first, so only
    /// sections here).
    ///
    /// Unless `extra` (or a later [`Env::append_config`]) brings its own
    /// `[alerting]`, pages go to [`RECIPIENT`]: vigie refuses a config
    /// that pages nobody.
    pub fn with_config(extra: &str) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let root_pem = pki::write_root_pem(dir.path());
        std::fs::create_dir_all(dir.path().join("checks")).expect("checks dir");
        // Top-level keys `extra` starts with stay top-level: the default
        // [alerting] goes before its first table.
        let (top, tables) = match extra.find("\n[") {
            _ if extra.starts_with('[') => ("", extra),
            Some(at) => extra.split_at(at + 1),
            None => (extra, ""),
        };
        let alerting = match has_alerting(extra) {
            true => "",
            false => DEFAULT_ALERTING,
        };
        let config = format!(
            "state_dir = \"state\"\nchecks_dir = \"checks\"\ndefault_timeout = \"5s\"\n\
             extra_ca_file = {:?}\n{top}{}{alerting}{tables}",
            root_pem.display().to_string(),
            if top.is_empty() || top.ends_with('\n') {
                ""
            } else {
                "\n"
            },
        );
        std::fs::write(dir.path().join("config.toml"), config).expect("write config");
        Env { dir, root_pem }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    /// Writes `token` to a file here and appends an `[api]` section
    /// listening on `listen` that requires it.
    pub fn api_with_token(&self, listen: std::net::SocketAddr, token: &str) {
        let token_file = self.path().join("api-token");
        std::fs::write(&token_file, token).expect("write the token file");
        self.append_config(&super::daemon::api_section(listen, Some(&token_file)));
    }

    /// Appends `text` to config.toml (for sections that name files inside
    /// this directory, known only once it exists).
    pub fn append_config(&self, text: &str) {
        use std::io::Write;
        if has_alerting(text) {
            let path = self.config_path();
            let config = std::fs::read_to_string(&path).expect("read config.toml");
            std::fs::write(&path, config.replacen(DEFAULT_ALERTING, "", 1))
                .expect("write config.toml");
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.config_path())
            .expect("open config.toml");
        file.write_all(text.as_bytes())
            .expect("append to config.toml");
    }

    /// One check that is never probed during a test (scheduled for
    /// 2099), for tests that need a config vigie accepts, not a target.
    pub fn write_idle_check(&self) {
        self.write_checks(
            "idle.toml",
            "[[check]]\nname = \"idle\"\nkind = \"http\"\nurl = \"https://localhost:1/\"\n\
             schedule = \"0 0 0 1 1 * 2099\"\n",
        );
    }

    /// Puts `text` at the top of config.toml, for top-level keys that
    /// must come before any section.
    pub fn prepend_config(&self, text: &str) {
        let config = std::fs::read_to_string(self.config_path()).expect("read config.toml");
        std::fs::write(self.config_path(), format!("{text}{config}")).expect("write config.toml");
    }

    /// A secret file (a token, a key) in the directory, mode 600 as vigie
    /// wants them; its path as config.toml writes it.
    pub fn write_secret(&self, name: &str, text: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path().join(name);
        std::fs::write(&path, format!("{text}\n")).expect("write secret");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .expect("secret mode");
        path.display().to_string()
    }

    pub fn write_checks(&self, file: &str, toml: &str) {
        std::fs::write(self.dir.path().join("checks").join(file), toml).expect("write checks");
    }

    /// The config as vigie reads it; a checks dir left empty gets
    /// [`Env::write_idle_check`] first (vigie refuses to check nothing).
    pub fn load(&self) -> Config {
        let none_yet = std::fs::read_dir(self.dir.path().join("checks"))
            .map(|mut files| files.next().is_none())
            .unwrap_or(false);
        if none_yet {
            self.write_idle_check();
        }
        match vigie::config::load(&self.config_path()) {
            Ok(config) => config,
            Err(errors) => panic!("test config does not load:\n{errors}"),
        }
    }

    /// Loads the config and runs every check once, in order.
    pub async fn run_all(&self) -> Vec<Outcome> {
        let config = self.load();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let prober = vigie::runner::prober(&config, clock.clone()).expect("prober");
        let checks = config.all_checks();
        vigie::runner::check_now(&prober, clock.as_ref(), &checks, config.concurrency).await
    }
}

/// One `[[check]]` named `name` for `url`, connecting to 127.0.0.1 whatever
/// the host, plus `extra` lines (keys or sub-tables).
pub fn check_toml(name: &str, url: &str, extra: &str) -> String {
    format!(
        "[[check]]\nname = {name:?}\nkind = \"http\"\nurl = {url:?}\nresolve = \"127.0.0.1\"\n{extra}\n"
    )
}

/// Runs one check against `url` and returns its outcome.
pub async fn probe(url: &str, extra: &str) -> Outcome {
    run_one(&check_toml("t", url, extra)).await
}

/// Runs the one `[[check]]` of `toml` and returns its outcome.
pub async fn run_one(toml: &str) -> Outcome {
    let env = Env::new();
    env.write_checks("test.toml", toml);
    env.run_all().await.remove(0)
}

/// The failure for `assertion`, or a panic showing the whole outcome.
pub fn failure<'a>(outcome: &'a Outcome, assertion: &str) -> &'a vigie::outcome::Failure {
    outcome
        .failures
        .iter()
        .find(|f| f.assertion.as_str() == assertion)
        .unwrap_or_else(|| panic!("no {assertion} failure in {}", pretty(outcome)))
}

pub fn assertions(outcome: &Outcome) -> Vec<Assertion> {
    outcome.failures.iter().map(|f| f.assertion).collect()
}

pub fn pretty(outcome: &Outcome) -> String {
    serde_json::to_string_pretty(outcome).unwrap_or_default()
}
