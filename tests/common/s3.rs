//! A real S3-compatible server for the CORS tests: [moto](https://github.com/getmoto/moto)
//! in server mode (`python3 -m moto.server`), a child process on a free
//! loopback port, driven through the plain S3 REST API.
//!
//! Put it behind HTTPS with [`super::servers::TlsProxy`] so the program under
//! test sees a test-PKI chain in front of the bucket:
//!
//! ```ignore
//! let s3 = S3Server::shared();
//! let bucket = s3.new_bucket("uploads").await;
//! s3.put_bucket_cors(&bucket, &cors_xml(&[CorsRule::new(&[APP], &["PUT"])])).await;
//! let proxy = TlsProxy::start(&valid_leaf(), s3.addr);
//! let url = proxy.url(&format!("/{bucket}/probe-object"));
//! ```
//!
//! Requests are unsigned: moto does not enforce authentication unless told to
//! (`INITIAL_NO_AUTH_ACTION_COUNT` is infinite by default), so plain HTTP
//! requests to the REST API (`PUT /bucket`, `PUT /bucket?cors`, ...) are
//! accepted as they are.
//!
//! # moto's CORS, as observed (moto 5.2.1, `moto/s3/responses.py`,
//! `_response_options` / `_set_cors_headers_options`)
//!
//! Real S3 picks the first rule matching Origin, Access-Control-Request-Method
//! *and* Access-Control-Request-Headers, and refuses the preflight (403) when
//! none matches. moto does less:
//!
//! - **Only the Origin is matched.** The requested method and headers are
//!   never looked at: a preflight for `DELETE` with `x-foo` gets 200 with the
//!   rule's `Access-Control-Allow-Methods: PUT, GET` and
//!   `Access-Control-Allow-Headers: content-type`. The client must compare
//!   the lists itself (which is what a browser does, and what vigie does).
//! - **Every rule is applied in turn** (later rules overwrite the headers of
//!   earlier ones), and *any* rule whose AllowedOrigin does not match raises
//!   the refusal: with several rules, an origin must match all of them. Tests
//!   use one rule per bucket.
//! - **The refusal** (origin not matched) is `403` with an S3 XML error body:
//!   `<Code>AccessForbidden</Code><Message>CORSResponse: This CORS request is
//!   not allowed. This is usually because the evalution of Origin, request
//!   method / Access-Control-Request-Method or Access-Control-Request-Headers
//!   are not whitelisted by the resource's CORS spec.</Message>` (see
//!   [`MOTO_CORS_REFUSAL`]). Access-Control-Allow-Methods is still sent on
//!   that 403 (it is set before the origin is checked).
//! - **Access-Control-Allow-Origin always echoes the request's Origin**, even
//!   when the rule's AllowedOrigin is `*` (real S3 answers a literal `*`
//!   there). So a `*` rule admits every origin *by name*: a check without
//!   `allow_any_origin` still passes, and every deny origin is admitted.
//!   AllowedOrigin patterns with one `*` (`https://*.example.com`) work too.
//! - **No CORS configuration** (never set, or deleted): the preflight is
//!   `200` with *no* CORS headers at all (real S3: 403 "CORS is not enabled
//!   for this bucket"). A missing bucket: `403` with an empty body.
//! - Access-Control-Expose-Headers and Access-Control-Max-Age are sent on the
//!   preflight when the rule has them; Access-Control-Allow-Credentials and
//!   `Vary` never are. Lists are joined with `", "`, in the rule's order and
//!   case.
//! - A preflight without an `Origin` header is a 500 (moto crashes on it).
//! - The object need not exist: OPTIONS on `/bucket/anything` answers from
//!   the bucket's rules.
//!
//! # Server quirks the harness works around
//!
//! - `MOTO_DISABLE_GLOBAL_CORS=true`: otherwise moto wraps every answer in
//!   flask-cors and adds its own permissive CORS headers.
//! - `S3_IGNORE_SUBDOMAIN_BUCKETNAME=true`: through the proxy the `Host` is
//!   `www.example.test:PORT`, which moto would read as virtual-host style
//!   (bucket `www`); this keeps every request path-style (`/bucket/key`).
//! - A body sent with `Content-Type: application/x-www-form-urlencoded` is
//!   consumed by moto's service dispatcher: PutBucketCors then fails with a
//!   500 (empty XML). Requests here always send `application/xml` or
//!   `application/octet-stream`.
//! - moto accepts PutBucketCors without Content-MD5 and does not check it;
//!   AWS requires it, so [`S3Server::put_bucket_cors`] sends a correct one.
//! - Bucket names must be 3..=63 characters (`InvalidBucketName` otherwise).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{HeaderMap, Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What to tell whoever runs the tests without moto.
pub const MOTO_MISSING: &str =
    "moto server not found: run `python3 -m pip install 'moto[server]'` \
     (./scripts/test.sh installs it)";

/// The `<Message>` of moto's 403 when a preflight's Origin matches no rule.
pub const MOTO_CORS_REFUSAL: &str = "CORSResponse: This CORS request is not allowed.";

/// How long to wait for moto to answer after spawning it.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A moto server child process on 127.0.0.1, killed (by its PID) when the
/// handle is dropped, or at exit for [`S3Server::shared`].
#[derive(Debug)]
pub struct S3Server {
    /// Plain HTTP, path-style S3 REST API.
    pub addr: SocketAddr,
    pid: u32,
    /// Set by the thread that waits on the child once it has exited (and
    /// been reaped): its PID may then belong to someone else.
    exited: Arc<AtomicBool>,
    /// moto's stdout + stderr (one line per request, tracebacks).
    log: PathBuf,
}

static SHARED: OnceLock<S3Server> = OnceLock::new();
static BUCKETS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn kill_shared_at_exit() {
    if let Some(server) = SHARED.get() {
        server.kill();
        let _ = std::fs::remove_file(&server.log);
    }
}

impl S3Server {
    /// The moto server of this test binary, started on first use and killed
    /// when the process exits. Test functions run in parallel threads: give
    /// each its own bucket ([`S3Server::new_bucket`]).
    pub fn shared() -> &'static S3Server {
        SHARED.get_or_init(|| {
            let server = S3Server::start();
            // SAFETY: registering a plain `extern "C" fn` without arguments.
            unsafe { libc::atexit(kill_shared_at_exit) };
            server
        })
    }

    /// Start a moto server of one's own on a free loopback port; waits until
    /// it answers (up to 20 s). Panics with [`MOTO_MISSING`] if moto is not
    /// installed. Synchronous: callable from a test body or outside Tokio.
    pub fn start() -> S3Server {
        Self::start_launched(&["-m", "moto.server"])
    }

    /// Like [`S3Server::start`], but moto is started as `python3 -c CODE`,
    /// where CODE must end by calling `moto.server.main()`: for harnesses
    /// that patch moto before it serves (see `s3_auth.rs`).
    pub fn start_python(code: &str) -> S3Server {
        Self::start_launched(&["-c", code])
    }

    fn start_launched(launcher: &[&str]) -> S3Server {
        ensure_moto_installed();
        // The free port is found by binding and releasing it; should moto
        // lose the race for it, try another.
        let mut last_log = String::new();
        for _ in 0..3 {
            match Self::try_start(launcher) {
                Ok(server) => return server,
                Err(log) => last_log = log,
            }
        }
        panic!("moto server did not start; its output:\n{last_log}");
    }

    fn try_start(launcher: &[&str]) -> Result<S3Server, String> {
        let port = super::servers::refused_addr().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let log =
            std::env::temp_dir().join(format!("vigie-test-moto-{}-{port}.log", std::process::id()));
        let log_file = std::fs::File::create(&log).expect("create moto log file");
        let log_err = log_file.try_clone().expect("clone moto log file");

        let mut cmd = Command::new("python3");
        cmd.args(launcher)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("MOTO_DISABLE_GLOBAL_CORS", "true")
            .env("S3_IGNORE_SUBDOMAIN_BUCKETNAME", "true")
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        // Linux: the child gets SIGTERM when the thread that spawned it ends,
        // so a killed test binary does not leave moto behind. That thread is
        // the waiter below, which lives as long as the child.
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
        let (tx, rx) = std::sync::mpsc::channel();
        let exited_flag = exited.clone();
        std::thread::Builder::new()
            .name(format!("moto-{port}"))
            .spawn(move || match cmd.spawn() {
                Ok(mut child) => {
                    let _ = tx.send(Ok(child.id()));
                    let _ = child.wait();
                    exited_flag.store(true, Ordering::SeqCst);
                }
                Err(e) => {
                    exited_flag.store(true, Ordering::SeqCst);
                    let _ = tx.send(Err(e));
                }
            })
            .expect("spawn moto waiter thread");
        let pid = match rx.recv().expect("moto waiter thread") {
            Ok(pid) => pid,
            Err(e) => panic!("{MOTO_MISSING} (spawning python3: {e})"),
        };
        let server = S3Server {
            addr,
            pid,
            exited,
            log,
        };

        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if server.exited.load(Ordering::SeqCst) {
                let out = server.log_text();
                let _ = std::fs::remove_file(&server.log);
                return Err(out);
            }
            if answers_http(addr) {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                let out = server.log_text();
                drop(server);
                panic!(
                    "moto server did not answer on {addr} within {START_TIMEOUT:?}; \
                     its output:\n{out}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `http://127.0.0.1:{port}`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// moto's output so far (request lines, tracebacks).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&self) {
        if !self.exited.load(Ordering::SeqCst) {
            // SAFETY: kill(2) on the child's own PID, still unreaped.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        }
    }

    // ------------------------------------------------------------ REST API

    /// One request to moto (`Host: 127.0.0.1:PORT`, unsigned) on a fresh
    /// connection; returns status, headers and the whole body.
    pub async fn request(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> (StatusCode, HeaderMap, Bytes) {
        let tcp = TcpStream::connect(self.addr)
            .await
            .unwrap_or_else(|e| panic!("connect to moto on {}: {e}", self.addr));
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("HTTP handshake with moto");
        let conn_task = tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method.clone())
            .uri(path_and_query)
            .header(hyper::header::HOST, self.addr.to_string());
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req
            .body(Full::new(body.into()))
            .expect("valid request to moto");
        let resp = sender
            .send_request(req)
            .await
            .unwrap_or_else(|e| panic!("moto {method} {path_and_query}: {e}"));
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.expect("moto body").to_bytes();
        conn_task.abort();
        (parts.status, parts.headers, body)
    }

    /// [`S3Server::request`] that panics, showing moto's answer, unless the
    /// status is 2xx.
    async fn expect_ok(
        &self,
        what: &str,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Bytes {
        let (status, _, body) = self
            .request(method.clone(), path_and_query, headers, body)
            .await;
        if !status.is_success() {
            panic!(
                "moto {what} ({method} {path_and_query}) failed: {status}\n{}",
                String::from_utf8_lossy(&body)
            );
        }
        body
    }

    /// CreateBucket: `PUT /{name}` (3..=63 lower-case characters).
    pub async fn create_bucket(&self, name: &str) {
        self.expect_ok("CreateBucket", Method::PUT, &format!("/{name}"), &[], "")
            .await;
    }

    /// A bucket name nobody else in this process uses, `{prefix}-{n}`;
    /// creates the bucket.
    pub async fn new_bucket(&self, prefix: &str) -> String {
        let name = format!("{prefix}-{}", BUCKETS.fetch_add(1, Ordering::SeqCst));
        self.create_bucket(&name).await;
        name
    }

    /// PutBucketCors: `PUT /{name}?cors` with a `CORSConfiguration` document
    /// (see [`cors_xml`]) and its Content-MD5, as AWS requires.
    pub async fn put_bucket_cors(&self, name: &str, xml: &str) {
        let md5 = base64(&md5(xml.as_bytes()));
        self.expect_ok(
            "PutBucketCors",
            Method::PUT,
            &format!("/{name}?cors"),
            &[("content-type", "application/xml"), ("content-md5", &md5)],
            xml.to_owned(),
        )
        .await;
    }

    /// GetBucketCors: the stored configuration as moto serializes it.
    pub async fn get_bucket_cors(&self, name: &str) -> String {
        let body = self
            .expect_ok(
                "GetBucketCors",
                Method::GET,
                &format!("/{name}?cors"),
                &[],
                "",
            )
            .await;
        String::from_utf8_lossy(&body).into_owned()
    }

    /// DeleteBucketCors: `DELETE /{name}?cors` (moto answers 204).
    pub async fn delete_bucket_cors(&self, name: &str) {
        self.expect_ok(
            "DeleteBucketCors",
            Method::DELETE,
            &format!("/{name}?cors"),
            &[],
            "",
        )
        .await;
    }

    /// PutObject: `PUT /{name}/{key}` with `body`, private: like S3, moto
    /// answers an unsigned (anonymous) GET of it with a bare 403.
    pub async fn put_object(&self, name: &str, key: &str, body: impl Into<Bytes>) {
        self.put_object_acl(name, key, body, "private").await;
    }

    /// PutObject with `x-amz-acl: public-read`: readable by unsigned GETs.
    pub async fn put_public_object(&self, name: &str, key: &str, body: impl Into<Bytes>) {
        self.put_object_acl(name, key, body, "public-read").await;
    }

    async fn put_object_acl(&self, name: &str, key: &str, body: impl Into<Bytes>, acl: &str) {
        self.expect_ok(
            "PutObject",
            Method::PUT,
            &format!("/{name}/{key}"),
            &[
                ("content-type", "application/octet-stream"),
                ("x-amz-acl", acl),
            ],
            body,
        )
        .await;
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Fails with [`MOTO_MISSING`] unless `python3 -c 'import moto.server'` works.
fn ensure_moto_installed() {
    match Command::new("python3")
        .args(["-c", "import moto.server"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "{MOTO_MISSING}\n(python3 -c 'import moto.server': {})",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!("{MOTO_MISSING}\n(python3: {e})"),
    }
}

/// True once `GET /` gets any HTTP response (moto answers ListBuckets).
fn answers_http(addr: SocketAddr) -> bool {
    let Ok(mut tcp) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
    else {
        return false;
    };
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if tcp.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}

// ------------------------------------------------------------ CORS rules

/// One `<CORSRule>`; build with [`CorsRule::new`] and the setters.
#[derive(Clone, Debug, Default)]
pub struct CorsRule {
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    pub allowed_headers: Vec<String>,
    pub expose_headers: Vec<String>,
    pub max_age_seconds: Option<u32>,
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl CorsRule {
    pub fn new(origins: &[&str], methods: &[&str]) -> CorsRule {
        CorsRule {
            allowed_origins: owned(origins),
            allowed_methods: owned(methods),
            ..CorsRule::default()
        }
    }

    pub fn headers(mut self, headers: &[&str]) -> CorsRule {
        self.allowed_headers = owned(headers);
        self
    }

    pub fn expose(mut self, headers: &[&str]) -> CorsRule {
        self.expose_headers = owned(headers);
        self
    }

    pub fn max_age(mut self, seconds: u32) -> CorsRule {
        self.max_age_seconds = Some(seconds);
        self
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The PutBucketCors document for `rules`, elements in the order S3 documents
/// them (AllowedOrigin, AllowedMethod, AllowedHeader, ExposeHeader,
/// MaxAgeSeconds).
pub fn cors_xml(rules: &[CorsRule]) -> String {
    let mut xml =
        String::from("<CORSConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for rule in rules {
        xml.push_str("<CORSRule>");
        let lists = [
            ("AllowedOrigin", &rule.allowed_origins),
            ("AllowedMethod", &rule.allowed_methods),
            ("AllowedHeader", &rule.allowed_headers),
            ("ExposeHeader", &rule.expose_headers),
        ];
        for (tag, values) in lists {
            for value in values {
                xml.push_str(&format!("<{tag}>{}</{tag}>", xml_escape(value)));
            }
        }
        if let Some(secs) = rule.max_age_seconds {
            xml.push_str(&format!("<MaxAgeSeconds>{secs}</MaxAgeSeconds>"));
        }
        xml.push_str("</CORSRule>");
    }
    xml.push_str("</CORSConfiguration>");
    xml
}

// ------------------------------------------------- Content-MD5 (RFC 1321)

/// MD5 of `data` (for Content-MD5 only; kept here rather than adding a
/// dev-dependency for one header).
pub fn md5(data: &[u8]) -> [u8; 16] {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    // K[i] = floor(abs(sin(i + 1)) * 2^32)
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_le_bytes());

    let (mut a0, mut b0, mut c0, mut d0) = (
        0x6745_2301u32,
        0xefcd_ab89u32,
        0x98ba_dcfeu32,
        0x1032_5476u32,
    );
    for chunk in msg.chunks_exact(64) {
        let m: Vec<u32> = chunk
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    let mut out = [0u8; 16];
    for (i, word) in [a0, b0, c0, d0].iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&word.to_le_bytes());
    }
    out
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
