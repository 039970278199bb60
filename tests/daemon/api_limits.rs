//! The API's limits against the real daemon (`vigie run`, a child process)
//! on loopback: a thousand slow clients while probes run, 64 clients
//! dripping login forms, bodies over their route's limit, authentication
//! before any body, the `Host` rule, sessions that expire and a login
//! throttle, the memory of a long history answer, cleartext HTTP/2
//! refused, silence reasons capped, HTTPS with the CLI as its client, and
//! the modes of the files the daemon creates under a permissive umask.
//!
//! Every client here is a real TCP (or TLS) client of the real listener;
//! every address is loopback.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::daemon::{api_section, free_addr, poll, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::*;

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

/// A daemon with [`TOKEN`] in force and `extra` added to its `[api]`,
/// healthy; its [`Env`] must outlive it.
async fn daemon_with_token(extra: &str) -> (Env, Daemon) {
    let api = free_addr();
    let env = Env::new();
    env.write_idle_check();
    let token = write_token(&env);
    env.append_config(&format!("{}{extra}", api_section(api, Some(&token))));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some(TOKEN.to_string());
    daemon.wait_healthy(START).await;
    (env, daemon)
}

/// One `GET path` on a fresh connection (`Connection: close`), read to the
/// end: the status code and body, or why not.
async fn raw_get(addr: std::net::SocketAddr, path: &str) -> Result<(u16, String), String> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let answer = raw_exchange(addr, &request).await?;
    Ok((answer.status, answer.body))
}

/// `/healthz` on a fresh connection answers 200 (within 10 s, a connection
/// evicted before its head was in tried again); panics saying `when`.
async fn healthz_answers(api: std::net::SocketAddr, when: &str) {
    let (status, body) = poll(
        Duration::from_secs(10),
        &format!("/healthz {when}"),
        async || raw_get(api, "/healthz").await,
    )
    .await;
    assert_eq!(status, 200, "/healthz {when}: {body}");
}

/// `vigie <args>` with `config`, which must exit 0 (else its stderr is
/// shown).
async fn cli_succeeds(config: &Path, args: &[&str]) -> std::process::Output {
    let out = vigie_cli_async(config, args).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "vigie {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An answer read to the end of the connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The head, status line and headers.
    head: String,
    body: String,
}

impl Answer {
    /// The value of header `name` (lowercase), if present.
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// `request` (the whole text) on a fresh connection to `addr`, read to
/// the end.
async fn raw_exchange(addr: std::net::SocketAddr, request: &str) -> Result<Answer, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    exchange(stream, request).await
}

/// `request` on `stream`, read to the end (the request should say
/// `Connection: close`).
async fn exchange<S>(mut stream: S, request: &str) -> Result<Answer, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer).await;
    // A TLS peer may close without close_notify once it has answered.
    if let (Err(err), true) = (&read, answer.is_empty()) {
        return Err(err.to_string());
    }
    parse_answer(&answer)
}

fn parse_answer(answer: &[u8]) -> Result<Answer, String> {
    let text = String::from_utf8_lossy(answer).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP/1.1 answer: {text:?}"))?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok(Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// The text of a `POST /login` of `token`, as the form sends it.
fn login_request(addr: std::net::SocketAddr, token: &str) -> String {
    let form = format!("token={token}");
    format!(
        "POST /login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    )
}

/// A `POST /login` of `token`, on a fresh connection.
async fn login(addr: std::net::SocketAddr, token: &str) -> Answer {
    raw_exchange(addr, &login_request(addr, token))
        .await
        .unwrap()
}

/// The head of the answer on `stream`, read until its blank line, for at
/// most 10 s; what came if the connection ended first.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    let reading = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let read = tokio::time::timeout(Duration::from_secs(10), reading).await;
    assert!(
        read.is_ok(),
        "no answer within 10 s: {:?}",
        String::from_utf8_lossy(&head)
    );
    String::from_utf8_lossy(&head).into_owned()
}

/// `GET path` with `cookie`, on a fresh connection.
async fn get_with_cookie(addr: std::net::SocketAddr, path: &str, cookie: &str) -> Answer {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    );
    raw_exchange(addr, &request).await.unwrap()
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
        healthz_answers(api, "during the flood").await;
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

// ------------------------------------------------------- slow request bodies

/// The attack as it was found: 64 clients, each sending a login form a
/// byte at a time, for longer than the test's request deadline (2 s).
const DRIPPERS: usize = 64;
const DRIP_FOR: Duration = Duration::from_secs(8);

/// One connection of a dripper: a login form announced at 1000 bytes, sent
/// a byte every 250 ms until the daemon answers or closes, or `until`.
/// The status it answered, if it did.
async fn drip_login(api: std::net::SocketAddr, until: tokio::time::Instant) -> Option<u16> {
    let mut stream = TcpStream::connect(api).await.ok()?;
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {api}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ntoken="
    );
    stream.write_all(head.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        tokio::select! {
            read = stream.read(&mut chunk) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&chunk[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            },
            () = tokio::time::sleep(Duration::from_millis(250)) => {
                if tokio::time::Instant::now() >= until || stream.write_all(b"x").await.is_err() {
                    break;
                }
            }
        }
    }
    parse_answer(&answer).ok().map(|a| a.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_clients_dripping_login_forms_leave_healthz_answering() {
    let (_env, mut daemon) = daemon_with_token("request_timeout = \"2s\"\n").await;
    let api = daemon.api;

    let answers = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
    let mut drippers = tokio::task::JoinSet::new();
    let until = tokio::time::Instant::now() + DRIP_FOR;
    for _ in 0..DRIPPERS {
        let answers = answers.clone();
        drippers.spawn(async move {
            while tokio::time::Instant::now() < until {
                if let Some(status) = drip_login(api, until).await {
                    *answers.lock().unwrap().entry(status).or_insert(0usize) += 1;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
    }
    let mut answered = 0;
    while tokio::time::Instant::now() < until {
        healthz_answers(api, "while the forms drip").await;
        answered += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    while drippers.join_next().await.is_some() {}
    let answers = answers.lock().unwrap().clone();
    println!("dripped login forms answered {answers:?}; /healthz answered {answered} times");
    assert!(answered >= 5, "/healthz answered only {answered} times");
    // The first forms ran into the request deadline; the next ones were
    // throttled before a byte of their body was read.
    assert!(answers.get(&408).is_some_and(|n| *n >= 1), "{answers:?}");
    assert!(answers.get(&429).is_some_and(|n| *n >= 1), "{answers:?}");
    assert!(
        answers.keys().all(|status| [408, 429].contains(status)),
        "{answers:?}"
    );
    daemon.stop(STOP).await;
}

// ---------------------------------------------------- bodies, auth, Host

#[tokio::test]
async fn bodies_are_bounded_per_route_and_read_only_after_authentication() {
    let (_env, mut daemon) = daemon_with_token("").await;
    let api = daemon.api;

    // A silence of 17 KiB, with the token: 413, saying the limit.
    let body =
        serde_json::json!({ "pattern": "site", "for": "1h", "reason": "r".repeat(17 * 1024) });
    let (status, text) = daemon.post("/api/v1/silences", &body).await.unwrap();
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("at most 16384 bytes"), "{text}");
    // A login form of 5 KB: 413 too.
    let answer = login(api, &"t".repeat(5000)).await;
    assert_eq!(answer.status, 413, "{answer:?}");
    assert!(answer.body.contains("at most 4096 bytes"), "{answer:?}");

    // 10 MB announced without the token, or with a wrong one: the head
    // alone is answered 401, and `Expect: 100-continue` gets no go-ahead,
    // so not a byte of the body is asked for.
    for authorization in ["", "Authorization: Bearer wrong-token\r\n"] {
        let mut stream = TcpStream::connect(api).await.unwrap();
        let head = format!(
            "POST /api/v1/silences HTTP/1.1\r\nHost: {api}\r\n{authorization}Content-Type: application/json\r\nContent-Length: 10000000\r\nExpect: 100-continue\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let answer = read_head(&mut stream).await;
        assert!(
            answer.starts_with("HTTP/1.1 401 "),
            "{authorization:?}: {answer:?}"
        );
    }
    // With the token, the same head is told to go on.
    let mut stream = TcpStream::connect(api).await.unwrap();
    let head = format!(
        "POST /api/v1/silences HTTP/1.1\r\nHost: {api}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = read_head(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 100 "), "{answer:?}");
    daemon.stop(STOP).await;
}

#[tokio::test]
async fn a_request_naming_another_host_gets_421() {
    let (env, mut daemon) = daemon_with_token("hosts = [\"vigie.test\"]\n").await;
    let api = daemon.api;
    let port = api.port();
    let ask = |host: String, path: &str, bearer: bool| {
        let authorization = match bearer {
            true => format!("Authorization: Bearer {TOKEN}\r\n"),
            false => String::new(),
        };
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{authorization}Connection: close\r\n\r\n")
    };
    // What a rebound page sends: its own name.
    for path in ["/healthz", "/api/v1/checks", "/login"] {
        let answer = raw_exchange(api, &ask(format!("evil.example:{port}"), path, true))
            .await
            .unwrap();
        assert_eq!(answer.status, 421, "{path}: {answer:?}");
        assert!(answer.body.contains("[api] hosts"), "{answer:?}");
    }
    for host in [
        api.to_string(),
        format!("localhost:{port}"),
        "vigie.test".to_string(),
    ] {
        let answer = raw_exchange(api, &ask(host.clone(), "/api/v1/checks", true))
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
    }
    // The CLI names the listen address.
    cli_succeeds(&env.config_path(), &["report", "--json"]).await;
    daemon.stop(STOP).await;
}

#[tokio::test]
async fn sessions_are_random_and_expire_and_logins_are_throttled() {
    let (_env, mut daemon) = daemon_with_token("session_ttl = \"2s\"\n").await;
    let api = daemon.api;

    // The token in the address no longer logs in.
    let answer = get_with_cookie(api, &format!("/incidents?token={TOKEN}"), "").await;
    assert_eq!(answer.status, 303, "{answer:?}");
    assert_eq!(answer.header("location"), Some("/login"), "{answer:?}");
    assert_eq!(answer.header("set-cookie"), None, "{answer:?}");

    // The form does, with a random id that expires.
    let mut cookies = Vec::new();
    for _ in 0..2 {
        let answer = login(api, TOKEN).await;
        assert_eq!(answer.status, 303, "{answer:?}");
        assert_eq!(answer.header("location"), Some("/"), "{answer:?}");
        let set = answer
            .header("set-cookie")
            .expect("a session cookie")
            .to_string();
        assert!(set.contains("; Max-Age=2;"), "{set}");
        assert!(set.contains("; HttpOnly"), "{set}");
        assert!(set.contains("; SameSite=Strict"), "{set}");
        assert!(!set.contains("Secure"), "plain HTTP: {set}");
        let pair = set.split(';').next().unwrap().to_string();
        let id = pair.strip_prefix("vigie_session=").expect(&set);
        assert!(
            id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        cookies.push(pair);
    }
    assert_ne!(cookies[0], cookies[1], "each login gets its own id");
    let cookie = &cookies[0];
    assert_eq!(get_with_cookie(api, "/", cookie).await.status, 200);
    assert_eq!(
        get_with_cookie(api, "/api/v1/checks", cookie).await.status,
        200
    );
    poll(Duration::from_secs(10), "the session to end", async || {
        let answer = get_with_cookie(api, "/", cookie).await;
        match (answer.status, answer.header("location")) {
            (303, Some("/login")) => Ok(()),
            _ => Err(format!("{answer:?}")),
        }
    })
    .await;
    assert_eq!(
        get_with_cookie(api, "/api/v1/checks", cookie).await.status,
        401
    );

    // Two attempts so far this minute; three wrong ones make five, and the
    // sixth is refused before its form is read, the right token or not.
    for _ in 0..3 {
        assert_eq!(login(api, "wrong").await.status, 401);
    }
    let refused = login(api, TOKEN).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(refused.body.contains("Too many attempts"), "{refused:?}");
    assert_eq!(refused.header("set-cookie"), None);
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
    let mut outcome = crate::common::history::outcome("big", at, n);
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

/// A daemon's directory with check `name` (probing a refused port once a
/// day) and `history` already in its store.
fn env_with_history(
    api: std::net::SocketAddr,
    name: &str,
    history: impl Iterator<Item = vigie::outcome::Outcome>,
) -> Env {
    let env = Env::with_config(&api_section(api, None));
    env.write_checks(
        "t.toml",
        &check_toml(
            name,
            &format!("https://{HOST}:{}/", refused_addr().port()),
            "every = \"1d\"",
        ),
    );
    let state = env.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let store =
        vigie::store::SledStore::open(&vigie::store::history_path(&state), Duration::ZERO).unwrap();
    use vigie::store::Store;
    for outcome in history {
        store.append(&outcome).unwrap();
    }
    store.flush().unwrap();
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_year_history_is_paged_and_streamed_within_a_memory_bound() {
    let api = free_addr();
    let now = time::OffsetDateTime::now_utc();
    // Spread over the last 30 days, oldest first.
    let env = env_with_history(
        api,
        "big",
        (0..STORED).map(|n| {
            let at = now - time::Duration::days(30) + time::Duration::minutes(14 * n as i64);
            large_outcome(n, at)
        }),
    );
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

// ------------------------------------------------- pages of a 1 s check

/// What the daemon's peak resident memory may grow by while it answers a
/// 1 s check's page and `/incidents` over a week of history.
const PAGE_GROWTH_BOUND_KIB: u64 = 16 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_week_of_a_one_second_check_is_paged_from_rollups_within_a_memory_bound() {
    let api = free_addr();
    let now = time::OffsetDateTime::now_utc();
    let env = env_with_history(api, "busy", crate::common::history::busy_week("busy", now));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    let pid = daemon.pid();
    let hwm_before = proc_kib(pid, "VmHWM");
    for path in ["/checks/busy", "/incidents", "/checks/busy", "/incidents"] {
        let (status, body) = daemon.get(path).await.unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        // 600 streaks of flapping and three outages: the newest 500 listed.
        assert!(body.contains("First 500 failures shown"), "{path}: {body}");
        assert_eq!(body.matches("<tr class=\"open\">").count(), 1, "{path}");
        assert!(body.contains("status 503, expected 200"), "{path}");
    }
    let hwm_after = proc_kib(pid, "VmHWM");
    println!("pages of a week of a 1 s check: daemon VmHWM {hwm_before} KiB before, {hwm_after} KiB after");
    assert!(
        hwm_after - hwm_before < PAGE_GROWTH_BOUND_KIB,
        "peak memory grew by {} KiB (bound {PAGE_GROWTH_BOUND_KIB} KiB)",
        hwm_after - hwm_before
    );
    daemon.stop(STOP).await;
}

// ------------------------------------------------------ h2c, silence reasons

#[tokio::test]
async fn cleartext_http2_is_refused_and_long_silence_reasons_too() {
    let (env, mut daemon) = daemon_with_token("").await;
    let api = daemon.api;

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
    // Over TLS the session cookie is Secure and `__Host-` prefixed.
    let answer = exchange(stream, &login_request(api, TOKEN)).await.unwrap();
    assert_eq!(answer.status, 303, "{answer:?}");
    let set = answer.header("set-cookie").expect("a session cookie");
    assert!(set.starts_with("__Host-vigie_session="), "{set}");
    assert!(
        set.contains("; Path=/;") && set.ends_with("; Secure"),
        "{set}"
    );
    assert!(!set.contains("Domain"), "{set}");

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
    // back to the store the daemon holds. (Its config names a local socket
    // that is not there, so that it asks over TCP.)
    let other = env.path().join("other-ca.pem");
    std::fs::write(&other, &staging_ca().root.pem).unwrap();
    let text = std::fs::read_to_string(env.config_path()).unwrap();
    let start = text.find("[api]").unwrap();
    let mut wrong = section(false);
    wrong.push_str(&format!("ca_file = {:?}\n", other.display().to_string()));
    let elsewhere = env.path().join("elsewhere.sock");
    wrong.push_str(&format!("socket = {:?}\n", elsewhere.display().to_string()));
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
    cli_succeeds(&env.config_path(), &["test-email"]).await;
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
