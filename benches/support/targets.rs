//! Shared by the benchmarks: N local HTTPS targets in a child process (this
//! bench binary re-executed with `--serve`), so the measured process is
//! vigie alone, plus the check files and resource readings around them.
// Each bench uses only some of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// N TLS listeners on 127.0.0.1 serving a test-PKI chain (ECDSA P-256,
/// TLS 1.3, no session resumption).
pub struct Targets {
    child: Child,
    pub ports: Vec<u16>,
    pub dir: tempfile::TempDir,
    pub root_pem: PathBuf,
}

impl Targets {
    pub fn start(n: usize) -> Targets {
        let dir = tempfile::tempdir().expect("tempdir");
        let leaf = crate::common::pki::valid_leaf();
        for (i, der) in leaf.chain.iter().enumerate() {
            std::fs::write(dir.path().join(format!("chain{i}.der")), der).expect("write chain");
        }
        std::fs::write(dir.path().join("key.der"), &leaf.key_der).expect("write key");
        let root_pem = crate::common::pki::write_root_pem(dir.path());
        let mut child = Command::new(std::env::current_exe().expect("current exe"))
            .args(["--serve", &dir.path().display().to_string(), &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start target process");
        let ports = BufReader::new(child.stdout.take().expect("child stdout"))
            .lines()
            .take(n)
            .map(|line| line.expect("port line").parse().expect("port"))
            .collect();
        Targets {
            child,
            ports,
            dir,
            root_pem,
        }
    }

    /// The target process's PID (to read its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One `[[check]]` per target, `extra` added to each.
    pub fn checks_toml(&self, extra: &str) -> String {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                format!(
                    "[[check]]\nname = \"t{i}\"\nkind = \"http\"\nurl = \"https://www.example.test:{port}/\"\n\
                     resolve = \"127.0.0.1\"\n{extra}\n[check.expect]\nbody_contains = \"vigie test\"\n"
                )
            })
            .collect()
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// If this process was started as the target server, serve and return true.
pub fn serve_if_asked() -> bool {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some("--serve") {
        return false;
    }
    serve(Path::new(&args[2]), args[3].parse().expect("target count"));
    true
}

/// The target process: N TLS listeners serving the chain in `dir`; prints
/// one port per line, runs until stdin closes. With
/// `VIGIE_BENCH_CLASSICAL_KX` set, the targets support no post-quantum key
/// exchange (a server not yet upgraded), so that what offering the hybrid
/// costs is told apart from what negotiating it costs.
fn serve(dir: &Path, n: usize) {
    let opts = crate::common::servers::TlsOpts {
        classical_kx_only: std::env::var_os("VIGIE_BENCH_CLASSICAL_KX").is_some(),
        ..crate::common::servers::TlsOpts::default()
    };
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
                crate::common::servers::TlsServer::start(
                    chain.clone(),
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.clone())),
                    opts,
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

/// CPU time (user + system) of this process.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU time of another process, from /proc/PID/stat (clock ticks).
pub fn process_cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name (which may hold spaces) start after ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("stat format") + 2..]
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(ticks * 1_000_000_000 / hz)
}

/// A `/proc/PID/status` memory line (VmRSS, VmHWM) in MiB. VmHWM, not
/// getrusage's ru_maxrss: the latter survives execve and would report
/// cargo's own peak.
pub fn proc_mib(pid: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|l| l.strip_prefix(':')))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .expect("memory line")
        / 1024.0
}
