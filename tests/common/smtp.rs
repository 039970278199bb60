//! A real SMTP server for the mail tests and the outbox benchmark: aiosmtpd
//! (Python) running `tests/support/smtp_server.py` on a loopback port, one
//! child process per server, every accepted message recorded as a JSON file
//! in a spool directory this side reads.
//!
//! ```ignore
//! let server = SmtpServer::start(SmtpOpts::plain());
//! // ... point vigie at 127.0.0.1:server.port ...
//! let got = server.wait_for(1, Duration::from_secs(10));
//! assert_eq!(got[0].rcpt_tos, ["oncall@example.test"]);
//! ```
//!
//! Scripted answers (see the script's docstring): RCPT to `reject...@` gets
//! 550, `tempfail@` always 451, `tempfailN-...@` 451 for its first N tries.
//! `delay` slows DATA down so a client can be killed mid-delivery.
//!
//! Self-contained (no other `common` module) so that `benches/` can include
//! it with `#[path]`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What to tell whoever runs the tests without aiosmtpd.
pub const AIOSMTPD_MISSING: &str = "aiosmtpd not found: run `python3 -m pip install aiosmtpd` \
     (./scripts/test.sh installs it)";

/// How long the server may take to print READY.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How the server protects its port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plain,
    Starttls,
    Tls,
}

/// How to start a server.
#[derive(Debug, Clone)]
pub struct SmtpOpts {
    pub mode: Mode,
    /// Certificate chain and key PEM files; required for STARTTLS and TLS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Login and password; when set, AUTH is required before MAIL.
    pub auth: Option<(String, String)>,
    /// Sleep in DATA before recording and answering.
    pub delay: Duration,
}

impl SmtpOpts {
    pub fn plain() -> Self {
        SmtpOpts {
            mode: Mode::Plain,
            tls: None,
            auth: None,
            delay: Duration::ZERO,
        }
    }

    pub fn starttls(cert: &Path, key: &Path) -> Self {
        SmtpOpts {
            mode: Mode::Starttls,
            tls: Some((cert.to_path_buf(), key.to_path_buf())),
            ..SmtpOpts::plain()
        }
    }

    pub fn tls(cert: &Path, key: &Path) -> Self {
        SmtpOpts {
            mode: Mode::Tls,
            ..SmtpOpts::starttls(cert, key)
        }
    }

    pub fn auth(mut self, user: &str, password: &str) -> Self {
        self.auth = Some((user.to_owned(), password.to_owned()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// One message the server accepted.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Received {
    pub seq: u64,
    pub mail_from: String,
    pub rcpt_tos: Vec<String>,
    /// Whether it came over TLS (implicit or after STARTTLS).
    pub tls: bool,
    pub auth_user: Option<String>,
    /// The message as sent (CRLF).
    pub data: String,
}

impl Received {
    /// A header's value, unfolded; the first if repeated.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
        unfolded.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    pub fn message_id(&self) -> String {
        self.header("Message-ID").unwrap_or_default()
    }
}

/// A running aiosmtpd; killed when dropped.
pub struct SmtpServer {
    pub port: u16,
    /// Where accepted messages are recorded.
    pub spool: PathBuf,
    opts: SmtpOpts,
    proc: Option<Proc>,
    /// The spool and the server's stderr live here.
    dir: tempfile::TempDir,
}

struct Proc {
    pid: u32,
    exited: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
}

impl SmtpServer {
    /// Starts a server on a free loopback port; panics with
    /// [`AIOSMTPD_MISSING`] when aiosmtpd is not installed.
    pub fn start(opts: SmtpOpts) -> SmtpServer {
        ensure_aiosmtpd();
        let dir = tempfile::tempdir().expect("tempdir for the SMTP spool");
        let spool = dir.path().join("spool");
        std::fs::create_dir_all(&spool).expect("create spool");
        let mut server = SmtpServer {
            port: 0,
            spool,
            opts,
            proc: None,
            dir,
        };
        server.launch(0);
        server
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Stops the server (SIGTERM) and waits for it: the port then refuses
    /// connections until [`SmtpServer::restart`].
    pub fn stop(&mut self) {
        if let Some(proc) = self.proc.take() {
            if !proc.exited.load(Ordering::SeqCst) {
                // SAFETY: kill(2) on our own child's PID, not yet reaped (the
                // waiter thread sets `exited` after reaping it).
                unsafe { libc::kill(proc.pid as libc::pid_t, libc::SIGTERM) };
            }
            let _ = proc.done.recv_timeout(Duration::from_secs(10));
        }
    }

    /// Starts it again on the same port and spool.
    pub fn restart(&mut self) {
        self.stop();
        let port = self.port;
        // The port was ours a moment ago; retry briefly should a closing
        // socket still hold it.
        for _ in 0..50 {
            if self.try_launch(port).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "SMTP server could not listen on port {port} again:\n{}",
            self.stderr()
        );
    }

    /// Every message accepted so far, in order.
    pub fn received(&self) -> Vec<Received> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.spool)
            .expect("read spool")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).expect("read spool file");
                serde_json::from_str(&text).expect("spool file is JSON")
            })
            .collect()
    }

    /// Number of messages accepted so far (cheap: no parsing).
    pub fn count(&self) -> usize {
        std::fs::read_dir(&self.spool)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// Waits until at least `n` messages arrived; panics after `timeout`
    /// saying how many did.
    /// The `[alerting]` section (to `oncall@example.com`, from
    /// `vigie@example.com`, plus `extra` lines such as thresholds) and the
    /// `[smtp]` section mailing this server in plain text: what a daemon
    /// config that pages here appends.
    pub fn alerting_sections(&self, extra: &str) -> String {
        format!(
            "[alerting]\nto = [\"oncall@example.com\"]\nfrom = \"vigie <vigie@example.com>\"\n{extra}\
             [smtp]\nhost = \"127.0.0.1\"\nport = {}\ntls = \"none\"\n",
            self.port
        )
    }

    /// Waits for the first message and checks it is the DOWN page of
    /// `check`; panics with its subject otherwise.
    pub fn wait_for_down(&self, check: &str, timeout: Duration) -> Received {
        let first = self.wait_for(1, timeout).swap_remove(0);
        let subject = first.header("Subject").unwrap_or_default();
        assert!(
            subject.contains("DOWN") && subject.contains(check),
            "the first mail is not the DOWN page of {check}: {subject}"
        );
        first
    }

    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        while self.count() < n {
            if Instant::now() > deadline {
                panic!(
                    "SMTP server got {} of {n} messages within {timeout:?}; its stderr:\n{}",
                    self.count(),
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.received()
    }

    /// The server's stderr (aiosmtpd logs, tracebacks).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    fn launch(&mut self, port: u16) {
        if let Err(e) = self.try_launch(port) {
            panic!("SMTP server did not start: {e}\n{}", self.stderr());
        }
    }

    fn try_launch(&mut self, port: u16) -> Result<(), String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/smtp_server.py");
        let mut cmd = Command::new("python3");
        cmd.arg(&script)
            .args(["--mode", mode_arg(self.opts.mode)])
            .args(["--port", &port.to_string()])
            .arg("--spool")
            .arg(&self.spool)
            .args(["--delay", &self.opts.delay.as_secs_f64().to_string()]);
        if let Some((cert, key)) = &self.opts.tls {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        if let Some((user, password)) = &self.opts.auth {
            cmd.args(["--user", user, "--password", password]);
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("stderr.log"))
            .map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        // Linux: the child gets SIGTERM when the thread that spawned it
        // ends, so a killed test binary leaves no server behind. That thread
        // is the waiter below, which lives as long as the child.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let exited = Arc::new(AtomicBool::new(false));
        let exited_flag = exited.clone();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(u32, u16), String>>();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("aiosmtpd".into())
            .spawn(move || {
                let mut child = match cmd.spawn() {
                    Ok(child) => child,
                    Err(e) => {
                        exited_flag.store(true, Ordering::SeqCst);
                        let _ = ready_tx
                            .send(Err(format!("{AIOSMTPD_MISSING} (spawning python3: {e})")));
                        let _ = done_tx.send(());
                        return;
                    }
                };
                let pid = child.id();
                let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
                let ready = match lines.next() {
                    Some(Ok(line)) => line
                        .strip_prefix("READY ")
                        .and_then(|p| p.trim().parse().ok())
                        .map(|port| (pid, port))
                        .ok_or_else(|| format!("unexpected first line {line:?}")),
                    _ => Err("the server exited before listening".to_owned()),
                };
                let _ = ready_tx.send(ready);
                // Keep reading so the pipe never fills.
                for _ in lines {}
                let _ = child.wait();
                exited_flag.store(true, Ordering::SeqCst);
                let _ = done_tx.send(());
            })
            .expect("spawn the aiosmtpd waiter thread");
        let (pid, port) = ready_rx
            .recv_timeout(START_TIMEOUT)
            .map_err(|_| format!("no READY line within {START_TIMEOUT:?}"))??;
        self.port = port;
        self.proc = Some(Proc {
            pid,
            exited,
            done: done_rx,
        });
        Ok(())
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn mode_arg(mode: Mode) -> &'static str {
    match mode {
        Mode::Plain => "plain",
        Mode::Starttls => "starttls",
        Mode::Tls => "tls",
    }
}

fn ensure_aiosmtpd() {
    let found = Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "{AIOSMTPD_MISSING}");
}

/// A message as Python's `email` package reads it: a real MIME parser, not
/// ours, decides whether what vigie wrote is well-formed.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Parsed {
    /// Decoded (RFC 2047 words joined back).
    pub subject: String,
    pub from: String,
    pub to: Vec<String>,
    pub date: Option<String>,
    pub message_id: Option<String>,
    pub in_reply_to: Option<String>,
    pub references: Option<String>,
    pub auto_submitted: Option<String>,
    pub content_type: String,
    /// Leaf parts: (content type, decoded text).
    pub parts: Vec<(String, String)>,
    /// Set for a Maildir message: its file name.
    pub file: Option<String>,
}

/// Parses raw messages (as sent, CRLF) with Python's `email` package.
pub fn parse_messages(raw: &[String]) -> Vec<Parsed> {
    run_parser(
        &["--stdin"],
        Some(serde_json::to_string(raw).expect("json")),
    )
}

/// Reads every message of a Maildir with Python's `mailbox.Maildir`, as a
/// mail client would, sorted by file name.
pub fn parse_maildir(dir: &Path) -> Vec<Parsed> {
    run_parser(&["--maildir", &dir.display().to_string()], None)
}

fn run_parser(args: &[&str], stdin: Option<String>) -> Vec<Parsed> {
    use std::io::Write;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/parse_mail.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3 parse_mail.py");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write to parse_mail.py");
    drop(input);
    let out = child.wait_with_output().expect("parse_mail.py output");
    assert!(
        out.status.success(),
        "parse_mail.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("parse_mail.py prints JSON")
}
