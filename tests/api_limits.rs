//! The API's limits against the real daemon (`vigie run`, a child process)
//! on loopback: a thousand slow clients while probes run, the memory of a
//! long history answer, cleartext HTTP/2 refused, silence reasons capped,
//! HTTPS with the CLI as its client, and the modes of the files the daemon
//! creates under a permissive umask.
//!
//! Every client here is a real TCP (or TLS) client of the real listener;
//! every address is loopback.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::daemon::{api_section, free_addr, poll, vigie_cli_async, Daemon};
use common::env::{check_toml, Env};
use common::*;

const START: Duration = Duration::from_secs(20);
const STOP: Duration = Duration::from_secs(20);
const EVERY_1S: &str = "every = \"1s\"\ntimeout = \"5s\"";

// ------------------------------------------------------------------ helpers

/// A token long enough for any listen address.
const TOKEN: &str = "0123456789abcdef0123456789abcdef-test";

fn write_token(env: &Env) -> std::path::PathBuf {
    let path = env.path().join("api-token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    path
}

/// One `GET path` on a fresh connection (`Connection: close`), read to the
/// end: the status code and body, or why not.
async fn raw_get(addr: std::net::SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: vigie\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP/1.1 answer: {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Raises this process's soft descriptor limit to `want` (or the hard
/// limit); returns the soft limit now in force.
fn raise_nofile(want: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < want {
            limit.rlim_cur = want.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    limit.rlim_cur
}

/// Sets the daemon's own soft descriptor limit (its hard limit stays).
fn limit_daemon_nofile(pid: u32, soft: u64) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let pid = libc::pid_t::try_from(pid).unwrap();
    // SAFETY: prlimit on our own child with valid pointers to locals.
    unsafe {
        assert_eq!(
            libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old),
            0
        );
        let new = libc::rlimit {
            rlim_cur: soft,
            rlim_max: old.rlim_max,
        };
        assert_eq!(
            libc::prlimit(pid, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()),
            0,
            "prlimit: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

// -------------------------------------------------------------- slow clients

/// How many slow clients, and how long each dribbles its never-finished
/// request head.
const SLOW_CLIENTS: usize = 1000;
const SLOW_FOR: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_slow_clients_starve_neither_probes_nor_healthz() {
    // The test holds 1000 sockets plus its own; the daemon gets 256
    // descriptors, far fewer than the clients, so only the connection cap
    // keeps its probes from "Too many open files".
    let soft = raise_nofile(4096);
    assert!(
        soft >= SLOW_CLIENTS as u64 + 200,
        "RLIMIT_NOFILE cannot be raised to hold {SLOW_CLIENTS} clients (soft limit {soft}); raise the hard limit (ulimit -Hn)"
    );
    let target = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks("t.toml", &check_toml("site", &target.url("/"), EVERY_1S));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    limit_daemon_nofile(daemon.pid(), 256);
    daemon.wait_healthy(START).await;
    poll(START, "a first result", async || {
        match daemon.history("site").await?.len() {
            0 => Err("none yet".to_string()),
            _ => Ok(()),
        }
    })
    .await;
    let flood_start = time::OffsetDateTime::now_utc();

    let connected = Arc::new(AtomicUsize::new(0));
    let closed_by_server = Arc::new(AtomicUsize::new(0));
    let mut slow = tokio::task::JoinSet::new();
    for _ in 0..SLOW_CLIENTS {
        let (connected, closed) = (connected.clone(), closed_by_server.clone());
        slow.spawn(async move {
            let Ok(mut stream) = TcpStream::connect(api).await else {
                return;
            };
            connected.fetch_add(1, Ordering::SeqCst);
            let deadline = tokio::time::Instant::now() + SLOW_FOR;
            let mut sent = stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                .await;
            while sent.is_ok() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(500)).await;
                sent = stream.write_all(b"X").await;
            }
            if sent.is_err() {
                closed.fetch_add(1, Ordering::SeqCst);
            }
        });
    }

    // While they dribble: /healthz on fresh connections, every one answered.
    let mut answered = 0;
    let until = tokio::time::Instant::now() + SLOW_FOR;
    let mut peak_open = 0.0f64;
    while tokio::time::Instant::now() < until {
        let (status, body) = poll(
            Duration::from_secs(10),
            "/healthz during the flood",
            async || raw_get(api, "/healthz").await,
        )
        .await;
        assert_eq!(status, 200, "/healthz during the flood: {body}");
        answered += 1;
        if let Ok((200, text)) = raw_get(api, "/metrics").await {
            peak_open = peak_open.max(metric(&text, "vigie_api_connections"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    while slow.join_next().await.is_some() {}

    let (_, metrics) = raw_get(api, "/metrics").await.unwrap();
    let evicted = metric(&metrics, "vigie_api_connections_evicted_total");
    let refused = metric(&metrics, "vigie_api_connections_refused_total");
    let timed_out = metric(&metrics, "vigie_api_connections_timed_out_total");
    println!(
        "slow clients: {} connected, {} closed by the daemon; /healthz answered {answered} times; \
         peak open {peak_open}, evicted {evicted}, refused {refused}, timed out {timed_out}",
        connected.load(Ordering::SeqCst),
        closed_by_server.load(Ordering::SeqCst),
    );
    assert!(answered >= 5, "/healthz answered only {answered} times");
    assert!(peak_open <= 64.0, "{peak_open} connections open at once");
    assert!(evicted > 0.0, "no slow client was evicted:\n{metrics}");

    // Probes went on, and none of them failed for want of a descriptor.
    let outcomes = daemon.history("site").await.unwrap();
    let during: Vec<&Value> = outcomes
        .iter()
        .filter(|o| {
            let at = o["started_at"].as_str().unwrap();
            time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).unwrap()
                > flood_start
        })
        .collect();
    assert!(
        during.len() >= 5,
        "only {} probes ran during the flood",
        during.len()
    );
    for outcome in &outcomes {
        assert_eq!(outcome["status"], "up", "a false DOWN: {outcome}");
    }
    let log = daemon.log();
    assert!(!log.contains("Too many open files"), "{log}");
    daemon.stop(STOP).await;
}

// ------------------------------------------------------------- memory bound

/// Results stored before the daemon starts, each with a failure message of
/// [`FACT_BYTES`] no other result shares: about 60 MiB of JSON together.
const STORED: u64 = 3000;
const FACT_BYTES: usize = 20_000;
/// What the daemon's peak resident memory may grow by while it answers.
const GROWTH_BOUND_KIB: u64 = 24 * 1024;

fn large_outcome(n: u64, at: time::OffsetDateTime) -> vigie::outcome::Outcome {
    let mut outcome = common::history::outcome("big", at, n);
    outcome.status = vigie::outcome::Status::Down;
    let fact: String = (0..FACT_BYTES)
        .map(|i| char::from(b'a' + ((i as u64 * 7 + n * 13) % 26) as u8))
        .collect();
    outcome.failures = vec![vigie::outcome::Failure {
        assertion: vigie::outcome::Assertion::HttpBody,
        expected: "a body".to_string(),
        observed: format!("{n}-{fact}"),
        message: format!("result {n}"),
    }];
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_year_history_is_paged_and_streamed_within_a_memory_bound() {
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    // A check the daemon knows, probing rarely (a refused port).
    env.write_checks(
        "t.toml",
        &check_toml(
            "big",
            &format!("https://{HOST}:{}/", refused_addr().port()),
            "every = \"1d\"",
        ),
    );
    let now = time::OffsetDateTime::now_utc();
    {
        let state = env.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let store =
            vigie::store::SledStore::open(&vigie::store::history_path(&state), Duration::ZERO)
                .unwrap();
        use vigie::store::Store;
        for n in 0..STORED {
            // Spread over the last 30 days, oldest first.
            let at = now - time::Duration::days(30) + time::Duration::minutes(14 * n as i64);
            store.append(&large_outcome(n, at)).unwrap();
        }
        store.flush().unwrap();
    }
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    let pid = daemon.pid();
    let client = vigie::net::api_client().unwrap();
    let base = format!("http://{api}/api/v1/history/big");
    let hwm_before = proc_kib(pid, "VmHWM");

    // Ten years without `limit`: refused, with what to do instead.
    let (status, body) = daemon.get("/api/v1/history/big?since=10y").await.unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("limit"), "{body}");

    // A month, whole and streamed.
    let response = client
        .get(format!("{base}?since=31d"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().await.unwrap();
    let view: Value = serde_json::from_slice(&bytes).unwrap();
    let month = view["outcomes"].as_array().unwrap().len() as u64;
    assert!(month >= STORED, "{month} of {STORED} results");
    assert!(view.get("next_after").is_none());
    let hwm_month = proc_kib(pid, "VmHWM");

    // Ten years in pages of 1000.
    let mut after: Option<u64> = None;
    let mut paged = 0u64;
    let mut pages = 0;
    loop {
        let mut url = format!("{base}?since=10y&limit=1000");
        if let Some(after) = after {
            url.push_str(&format!("&after={after}"));
        }
        let page: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        paged += page["outcomes"].as_array().unwrap().len() as u64;
        pages += 1;
        match page["next_after"].as_u64() {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(paged, month, "pages of 1000 add up to the month");
    assert_eq!(pages, month.div_ceil(1000));
    let hwm_after = proc_kib(pid, "VmHWM");
    println!(
        "history answer: {} KiB of JSON for a month ({month} results); daemon VmHWM {hwm_before} KiB before, {hwm_month} KiB after the month, {hwm_after} KiB after {pages} pages",
        bytes.len() / 1024
    );
    assert!(
        bytes.len() as u64 > 2 * GROWTH_BOUND_KIB * 1024,
        "the answer is larger than the bound"
    );
    assert!(
        hwm_after - hwm_before <= GROWTH_BOUND_KIB,
        "peak memory grew by {} KiB (bound {GROWTH_BOUND_KIB} KiB)",
        hwm_after - hwm_before
    );

    // `vigie history --since 10y` pages through the daemon.
    let out = vigie_cli_async(
        &env.config_path(),
        &["history", "big", "--since", "10y", "--json"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["outcomes"].as_array().unwrap().len() as u64, month);
    assert!(view.get("next_after").is_none());
    daemon.stop(STOP).await;
}

// ------------------------------------------------------ h2c, silence reasons

#[tokio::test]
async fn cleartext_http2_is_refused_and_long_silence_reasons_too() {
    let api = free_addr();
    let env = Env::new();
    let token = write_token(&env);
    env.append_config(&api_section(api, Some(&token)));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some(TOKEN.to_string());
    daemon.wait_healthy(START).await;

    // HTTP/2 with prior knowledge: the preface, then an empty SETTINGS.
    let mut stream = TcpStream::connect(api).await.unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the daemon neither answered nor closed");
    // An HTTP/2 server answers with its own SETTINGS frame (type 4 in the
    // fourth byte); an HTTP/1 one with an error status line, or nothing.
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 "),
        "answered as HTTP/2? {answer:?}"
    );
    assert!(
        !(answer.len() >= 9 && answer[3] == 4),
        "a SETTINGS frame: {answer:?}"
    );
    // HTTP/1.1 still works on the same listener.
    assert_eq!(raw_get(api, "/healthz").await.unwrap().0, 200);

    // A reason over 1 KB: 400 at the API, refused by the CLI, never logged.
    let reason = "R".repeat(vigie::alert::MAX_REASON_BYTES + 1);
    let body = serde_json::json!({ "pattern": "site", "for": "1h", "reason": reason });
    let (status, text) = daemon.post("/api/v1/silences", &body).await.unwrap();
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("reason: a reason of 1025 bytes"), "{text}");
    let out = vigie_cli_async(
        &env.config_path(),
        &["silence", "site", "--for", "1h", "--reason", &reason],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("maximum of 1024"), "{stderr}");
    let most = "r".repeat(vigie::alert::MAX_REASON_BYTES);
    let body = serde_json::json!({ "pattern": "site", "for": "1h", "reason": most });
    assert_eq!(daemon.post("/api/v1/silences", &body).await.unwrap().0, 201);
    assert!(!daemon.log().contains(&reason));
    daemon.stop(STOP).await;
}

// ------------------------------------------------------------------- HTTPS

/// A certificate for 127.0.0.1 (an IP SAN: what the CLI connects to) from
/// the test CA: the leaf and its intermediate, and the key, written beside
/// the config.
fn write_api_certificate(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let leaf = issue(&LeafSpec::new(["127.0.0.1"]));
    let chain = format!("{}{}", leaf.cert_pem, test_ca().intermediate.pem);
    let (cert, key) = (dir.join("api-cert.pem"), dir.join("api-key.pem"));
    std::fs::write(&cert, chain).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    (cert, key)
}

#[tokio::test]
async fn the_cli_asks_an_https_api_and_plain_http_gets_no_answer() {
    let target = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::new();
    let token = write_token(&env);
    let (cert, key) = write_api_certificate(env.path());
    env.write_checks("t.toml", &check_toml("site", &target.url("/"), EVERY_1S));
    let section = |ca: bool| {
        let mut text = api_section(api, Some(&token));
        text.push_str(&format!(
            "tls_cert_file = {:?}\ntls_key_file = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        ));
        if ca {
            text.push_str(&format!(
                "ca_file = {:?}\n",
                env.root_pem.display().to_string()
            ));
        }
        text
    };
    env.append_config(&section(true));
    let daemon = Daemon::spawn(&env.config_path(), api);

    let roots = vigie::net::roots(Some(&env.root_pem)).unwrap();
    let client = vigie::net::api_client_with(roots).unwrap();
    poll(START, "/healthz over HTTPS", async || {
        let response = client
            .get(format!("https://{api}/healthz"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        match response.status().as_u16() {
            200 => Ok(()),
            other => Err(format!("{other}")),
        }
    })
    .await;
    poll(START, "a result of site", async || {
        let view: Value = client
            .get(format!("https://{api}/api/v1/history/site?since=1h"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        match view["outcomes"].as_array().map_or(0, Vec::len) {
            0 => Err(format!("{view}")),
            _ => Ok(()),
        }
    })
    .await;

    // Plain HTTP to the HTTPS port: no HTTP answer.
    assert!(raw_get(api, "/healthz").await.is_err());
    // A client offering h2 first over ALPN gets http/1.1.
    let mut tls = vigie::net::client_config(vigie::net::roots(Some(&env.root_pem)).unwrap());
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls));
    let tcp = TcpStream::connect(api).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = connector.connect(name, tcp).await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    drop(stream);

    // The CLI, trusting [api] ca_file; then, without it, the certificate
    // file itself. The daemon holds the store, so an answer came through
    // the API.
    for with_ca in [true, false] {
        let text = std::fs::read_to_string(env.config_path()).unwrap();
        let start = text.find("[api]").unwrap();
        std::fs::write(
            env.config_path(),
            format!("{}{}", &text[..start], section(with_ca)),
        )
        .unwrap();
        let out = vigie_cli_async(
            &env.config_path(),
            &["history", "site", "--since", "1h", "--json"],
        )
        .await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "ca_file {with_ca}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let view: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!view["outcomes"].as_array().unwrap().is_empty());
        let out = vigie_cli_async(
            &env.config_path(),
            &["silence", "site", "--for", "1h", "--reason", "tls"],
        )
        .await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // A CLI that trusts something else is told why, rather than falling
    // back to the store the daemon holds.
    let other = env.path().join("other-ca.pem");
    std::fs::write(&other, &staging_ca().root.pem).unwrap();
    let text = std::fs::read_to_string(env.config_path()).unwrap();
    let start = text.find("[api]").unwrap();
    let mut wrong = section(false);
    wrong.push_str(&format!("ca_file = {:?}\n", other.display().to_string()));
    std::fs::write(env.config_path(), format!("{}{wrong}", &text[..start])).unwrap();
    let out = vigie_cli_async(&env.config_path(), &["history", "site", "--json"]).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot reach the daemon"), "{stderr}");
    drop(daemon);
}

// --------------------------------------------------------------- file modes

#[tokio::test]
async fn state_files_are_private_whatever_the_umask() {
    // What a shell usually has; vigie must not keep it.
    // SAFETY: umask(2) only sets this process's mask (children inherit it).
    let previous = unsafe { libc::umask(0o022) };
    let target = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&format!(
        "{}[alerting]\nto = [\"oncall@example.com\"]\nfrom = \"vigie <vigie@example.com>\"\n",
        api_section(api, None)
    ));
    env.write_checks("t.toml", &check_toml("site", &target.url("/"), EVERY_1S));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    poll(START, "a stored result", async || {
        match daemon.history("site").await?.len() {
            0 => Err("none".to_string()),
            _ => Ok(()),
        }
    })
    .await;
    // A message into the maildir, written by the CLI beside the daemon.
    let out = vigie_cli_async(&env.config_path(), &["test-email"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    daemon.stop(STOP).await;
    // SAFETY: as above.
    unsafe { libc::umask(previous) };

    use std::os::unix::fs::PermissionsExt;
    let state = env.path().join("state");
    let mut seen = (0, 0);
    let mut stack = vec![state.clone()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            assert_eq!(mode, 0o700, "{} is {mode:o}", path.display());
            seen.0 += 1;
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else {
            assert_eq!(mode, 0o600, "{} is {mode:o}", path.display());
            seen.1 += 1;
        }
    }
    println!(
        "{} directories and {} files under state/, all private",
        seen.0, seen.1
    );
    assert!(state.join("history").is_dir());
    assert!(state.join("maildir").is_dir());
    assert!(seen.1 >= 3, "{seen:?}");
}
