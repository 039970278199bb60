//! The real `vigie run` as a child process: started with `--config <file>
//! run`, talked to over its local API, signalled and killed by its own PID
//! only. A [`Daemon`] that is still running when dropped is killed (SIGKILL)
//! and reaped, so no daemon outlives its test.
//!
//! Every daemon needs its own `[api] listen` address ([`free_addr`],
//! [`api_section`]) and its own `state_dir` (one [`super::env::Env`] each).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

/// A loopback address nobody listens on, kept from the other tests (see
/// [`super::servers::refused_addr`]): the daemon's `[api] listen`, or a
/// refused target.
pub fn free_addr() -> SocketAddr {
    super::servers::refused_addr()
}

/// The `[api]` section for `config.toml` (see [`super::env::Env::with_config`]).
pub fn api_section(listen: SocketAddr, token_file: Option<&Path>) -> String {
    let mut section = format!("[api]\nlisten = \"{listen}\"\n");
    if let Some(file) = token_file {
        section.push_str(&format!("token_file = {:?}\n", file.display().to_string()));
    }
    section
}

/// Polls `probe` every 50 ms until it returns `Some`, for at most `timeout`;
/// panics naming `what` (and whatever `probe` last said) on timeout.
pub async fn poll<T>(
    timeout: Duration,
    what: &str,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(last) if tokio::time::Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// `vigie --config <config> <args>` to completion (blocking), with the
/// environment that could redirect it removed.
pub fn vigie_cli(config: &Path, args: &[&str]) -> Output {
    vigie_command(config, args).output().expect("run vigie")
}

/// `vigie --config <config> <args>`, not started yet.
fn vigie_command(config: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vigie"));
    command
        .arg("--config")
        .arg(config)
        .args(args)
        .env_remove("VIGIE_CONFIG")
        .env_remove("VIGIE_LOG")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("CREDENTIALS_DIRECTORY")
        .stdin(Stdio::null());
    command
}

/// What [`vigie_cli_measured`] saw of a run.
pub struct Measured {
    pub code: i32,
    pub stdout: String,
    /// Peak resident memory of the process, KiB (`wait4`'s `ru_maxrss`).
    pub peak_kib: u64,
    pub elapsed: std::time::Duration,
}

/// [`vigie_cli`] (blocking) with the process's peak resident memory and
/// wall time; its stderr goes to this process's.
// The child is reaped by `wait4` (which std's `wait` cannot do: it
// drops the rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
pub fn vigie_cli_measured(config: &Path, args: &[&str]) -> Measured {
    let out_path = config.with_extension("stdout");
    let out = std::fs::File::create(&out_path).expect("create the stdout file");
    let started = std::time::Instant::now();
    let child = vigie_command(config, args)
        .stdout(out)
        .spawn()
        .expect("run vigie");
    let mut status = 0;
    // SAFETY: wait4 on our own child with pointers to locals; the Child is
    // not waited on again.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let waited = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        assert_eq!(waited, child.id() as libc::pid_t, "wait4");
        usage
    };
    let elapsed = started.elapsed();
    assert!(
        libc::WIFEXITED(status),
        "vigie {args:?} was killed: {status}"
    );
    Measured {
        code: libc::WEXITSTATUS(status),
        stdout: std::fs::read_to_string(&out_path).expect("read the stdout file"),
        peak_kib: usage.ru_maxrss as u64,
        elapsed,
    }
}

/// [`vigie_cli`] off the async runtime's worker threads.
pub async fn vigie_cli_async(config: &Path, args: &[&str]) -> Output {
    let config = config.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        vigie_cli(&config, &args)
    })
    .await
    .expect("vigie CLI task")
}

/// The value of an unlabelled sample in a `/metrics` text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

static STARTED: AtomicUsize = AtomicUsize::new(0);

/// A running `vigie run`.
pub struct Daemon {
    child: Child,
    exited: Option<ExitStatus>,
    /// Its `[api] listen`.
    pub api: SocketAddr,
    pub config: PathBuf,
    /// Sent as `Authorization: Bearer` by [`Daemon::get`] when set.
    pub token: Option<String>,
    log: PathBuf,
    client: reqwest::Client,
}

impl Daemon {
    /// Starts `vigie --config <config> run`; stderr (the log) goes to a file
    /// beside the config, shown by [`Daemon::log`] and in every panic here.
    pub fn spawn(config: &Path, api: SocketAddr) -> Daemon {
        Daemon::spawn_with_env(config, api, &[])
    }

    /// [`Daemon::spawn`] with extra environment variables (the fault
    /// hook's directory, a systemd notify socket).
    pub fn spawn_with_env(config: &Path, api: SocketAddr, vars: &[(&str, &Path)]) -> Daemon {
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let dir = config.parent().expect("config has a directory");
        let log = dir.join(format!("daemon-{n}.log"));
        let stderr = std::fs::File::create(&log).expect("create daemon log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_vigie"));
        command
            .arg("--config")
            .arg(config)
            .arg("run")
            .env_remove("VIGIE_CONFIG")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("JOURNAL_STREAM")
            .env_remove("VIGIE_FAULT_DIR")
            .env_remove("CREDENTIALS_DIRECTORY")
            .env("VIGIE_LOG", "info");
        for (name, value) in vars {
            command.env(name, value);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn vigie run");
        Daemon {
            child,
            exited: None,
            api,
            config: config.to_path_buf(),
            token: None,
            log,
            client: vigie::net::api_client().expect("API client"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the daemon wrote on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its exit status if it has exited (reaps it), else None.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().expect("try_wait");
        }
        self.exited
    }

    /// Sends `signal` to this daemon's PID. Panics if it already exited
    /// (its PID may belong to someone else by then).
    pub fn signal(&mut self, signal: libc::c_int) {
        if let Some(status) = self.exited() {
            panic!("daemon already exited ({status}):\n{}", self.log());
        }
        let pid = libc::pid_t::try_from(self.pid()).expect("pid fits pid_t");
        // SAFETY: kill(2) with our own, not yet reaped, child's PID.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(
            rc,
            0,
            "kill({pid}, {signal}): {}",
            std::io::Error::last_os_error()
        );
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) -> ExitStatus {
        if let Some(status) = self.exited() {
            panic!("daemon already exited ({status}):\n{}", self.log());
        }
        self.child.kill().expect("SIGKILL the daemon");
        let status = self.child.wait().expect("reap the daemon");
        self.exited = Some(status);
        status
    }

    /// Waits for the daemon to exit by itself; panics after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("daemon still running {timeout:?} later:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then waits for a clean exit (code 0).
    pub async fn stop(&mut self, timeout: Duration) {
        self.signal(libc::SIGTERM);
        let status = self.wait_exit(timeout).await;
        assert_eq!(
            status.code(),
            Some(0),
            "SIGTERM should stop the daemon cleanly ({status}):\n{}",
            self.log()
        );
    }

    /// GET `path` with an explicit `Authorization: Bearer` token (or none).
    pub async fn get_as(&self, path: &str, token: Option<&str>) -> Result<(u16, String), String> {
        let mut request = self.client.get(format!("http://{}{path}", self.api));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| format!("GET {path} body: {e}"))?;
        Ok((status, body))
    }

    /// GET `path` without a token, as the public would, optionally with
    /// `If-None-Match`: the code, the headers and the body.
    pub async fn get_public(
        &self,
        path: &str,
        if_none_match: Option<&str>,
    ) -> Result<(u16, reqwest::header::HeaderMap, String), String> {
        let mut request = self.client.get(format!("http://{}{path}", self.api));
        if let Some(tag) = if_none_match {
            request = request.header(reqwest::header::IF_NONE_MATCH, tag);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        let code = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .text()
            .await
            .map_err(|e| format!("GET {path} body: {e}"))?;
        Ok((code, headers, body))
    }

    /// GET `path` with [`Daemon::token`] if set.
    pub async fn get(&self, path: &str) -> Result<(u16, String), String> {
        self.get_as(path, self.token.as_deref()).await
    }

    /// POST `body` as JSON to `path` with [`Daemon::token`] if set.
    pub async fn post(&self, path: &str, body: &Value) -> Result<(u16, String), String> {
        let mut request = self
            .client
            .post(format!("http://{}{path}", self.api))
            .json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| format!("POST {path} body: {e}"))?;
        Ok((status, body))
    }

    /// GET `path`, expecting 200 and JSON.
    pub async fn get_json(&self, path: &str) -> Result<Value, String> {
        match self.get(path).await? {
            (200, body) => serde_json::from_str(&body).map_err(|e| format!("{path}: {e}: {body}")),
            (status, body) => Err(format!("GET {path}: {status} {body}")),
        }
    }

    /// Waits until the unlabelled `/metrics` sample `name` is at least
    /// `value`, for `timeout` at most.
    pub async fn wait_metric(&self, name: &str, value: f64, timeout: Duration) {
        poll(timeout, &format!("{name} >= {value}"), async || {
            let (_, body) = self.get("/metrics").await?;
            match metric(&body, name) {
                Some(n) if n >= value => Ok(()),
                other => Err(format!("{name} {other:?}")),
            }
        })
        .await;
    }

    /// Waits until `/healthz` answers 200 with `status: "ok"`; panics with
    /// the log if the daemon exits first or `timeout` passes.
    pub async fn wait_healthy(&mut self, timeout: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                panic!(
                    "daemon exited ({status}) before /healthz was ok:\n{}",
                    self.log()
                );
            }
            let last = match self.get_as("/healthz", None).await {
                Ok((200, body)) => match serde_json::from_str::<Value>(&body) {
                    Ok(json) if json["status"] == "ok" => return json,
                    _ => body,
                },
                Ok((status, body)) => format!("{status} {body}"),
                Err(err) => err,
            };
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "/healthz not ok after {timeout:?} (last: {last}):\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `/api/v1/history/{name}?since=1h` outcomes.
    pub async fn history(&self, name: &str) -> Result<Vec<Value>, String> {
        let view = self
            .get_json(&format!("/api/v1/history/{name}?since=1h"))
            .await?;
        view["outcomes"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("no outcomes array: {view}"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.exited.is_none() {
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
            }
            let _ = self.child.wait();
        }
    }
}
