//! moto with SigV4 enforced, for the replication tests: a server of its own
//! (authentication is a process-wide switch in moto, and the CORS tests'
//! shared server must stay open), an IAM user whose one access key may do
//! `s3:*`, and a pool of buckets created before the switch.
//!
//! # How moto enforces authentication (moto 5.2, `moto/core/authorization.py`)
//!
//! `INITIAL_NO_AUTH_ACTION_COUNT` (default: infinite) is how many requests
//! are served before signatures are checked; `POST /moto-api/reset-auth`
//! with a number as a `text/plain` body sets it and restarts the count.
//! Once it is reached, every S3 request is verified like AWS does: the
//! access key id must belong to an IAM user (else `InvalidAccessKeyId`),
//! the SigV4 signature is recomputed with botocore from the request as
//! received (else `SignatureDoesNotMatch`, 403) and the user's policies
//! must allow the action (else `AccessDenied`). An unsigned request then
//! fails with a 500 (moto reads the missing `Authorization` header).
//!
//! Setting up the user needs IAM calls while authentication is still off.
//! moto's single-port server picks the service of an unsigned request from
//! its body's API version, which does not work for IAM's query API; a
//! request carrying an `Authorization` header whose credential scope names
//! `iam` is routed to IAM, and its signature is not checked yet. So the
//! setup sends such placeholder headers, creates the buckets, then turns
//! authentication on with a count of 0.
//!
//! # The one moto bug patched
//!
//! moto verifies a signature by rebuilding the request with botocore from
//! the URL as werkzeug decoded it, and botocore then takes the query
//! string as it finds it (`SigV4Auth._canonical_query_string_url`). A
//! query value with a `/` (every `ListObjectsV2` with `prefix=history/x/`)
//! is therefore canonicalised as `prefix=history/x/`, where SigV4 (and
//! every client, boto3 included) signs `prefix=history%2Fx%2F`: moto
//! answers `SignatureDoesNotMatch` to correctly signed listings. So the
//! server is started by [`MOTO_LAUNCHER`], which re-encodes each query key
//! and value the way SigV4 specifies (RFC 3986 unreserved characters kept,
//! everything else percent-encoded) before moto's own code runs. It makes
//! moto's check correct, not laxer: a wrong key or secret still fails.
//!
//! # Conditional writes made atomic
//!
//! moto honours `If-None-Match: *` and `If-Match` on PutObject
//! (`S3Response.put_object`), but checks and then writes without a lock,
//! and its server is threaded: two creates of one key at the same moment
//! can both succeed, which S3 never allows. The vantage tests race exactly
//! that, so [`MOTO_LAUNCHER`] serialises moto's object writes
//! (`_key_response_put`), as S3 is atomic per key.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use super::s3::S3Server;

/// Starts moto's server after fixing how its signature check canonicalises
/// query strings (see the module docs).
pub const MOTO_LAUNCHER: &str = r#"
from urllib.parse import quote, unquote
import botocore.auth

def canonical_query_string_url(self, parts):
    if not parts.query:
        return ''
    pairs = []
    for pair in parts.query.split('&'):
        key, _, value = pair.partition('=')
        pairs.append((quote(unquote(key), safe='-_.~'), quote(unquote(value), safe='-_.~')))
    return '&'.join(f'{k}={v}' for k, v in sorted(pairs))

botocore.auth.SigV4Auth._canonical_query_string_url = canonical_query_string_url

import threading
import moto.s3.responses

_object_writes = threading.Lock()
_key_response_put = moto.s3.responses.S3Response._key_response_put

def key_response_put(self, *args, **kwargs):
    with _object_writes:
        return _key_response_put(self, *args, **kwargs)

moto.s3.responses.S3Response._key_response_put = key_response_put

from moto.server import main
main()
"#;

/// Buckets created before authentication is switched on.
pub const POOL: usize = 48;

/// A moto server with authentication on, and the key that may use it.
#[derive(Debug)]
pub struct AuthS3 {
    pub server: S3Server,
    pub access_key_id: String,
    pub secret_access_key: String,
    next: AtomicUsize,
}

static SHARED: OnceLock<AuthS3> = OnceLock::new();

impl AuthS3 {
    /// The authenticated moto of this test binary, started on first use
    /// (its process is killed when the binary exits, like
    /// [`S3Server::shared`]'s).
    pub fn shared() -> &'static AuthS3 {
        SHARED.get_or_init(AuthS3::start)
    }

    /// A new moto server, user, key, [`POOL`] buckets, then authentication
    /// on. Synchronous (plain blocking HTTP), callable from any test.
    pub fn start() -> AuthS3 {
        let server = S3Server::start_python(MOTO_LAUNCHER);
        let addr = server.addr;
        iam(addr, "Action=CreateUser&UserName=vigie&Version=2010-05-08");
        let created = iam(
            addr,
            "Action=CreateAccessKey&UserName=vigie&Version=2010-05-08",
        );
        let access_key_id = between(&created, "<AccessKeyId>", "</AccessKeyId>");
        let secret_access_key = between(&created, "<SecretAccessKey>", "</SecretAccessKey>");
        let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#;
        iam(
            addr,
            &format!(
                "Action=PutUserPolicy&UserName=vigie&PolicyName=s3&Version=2010-05-08&PolicyDocument={}",
                form_encode(policy)
            ),
        );
        for n in 0..POOL {
            let (status, body) = http(addr, "PUT", &format!("/repl-{n}"), &[], "");
            assert_eq!(status, 200, "create bucket repl-{n}: {body}");
        }
        let (status, body) = http(
            addr,
            "POST",
            "/moto-api/reset-auth",
            &[("content-type", "text/plain")],
            "0",
        );
        assert_eq!(status, 200, "turn moto's authentication on: {body}");
        let (status, _) = http(addr, "GET", "/repl-0", &[], "");
        assert_ne!(
            status, 200,
            "moto still answers unsigned requests after reset-auth"
        );
        AuthS3 {
            server,
            access_key_id,
            secret_access_key,
            next: AtomicUsize::new(0),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// A bucket of the pool nobody else in this process uses.
    pub fn bucket(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        assert!(
            n < POOL,
            "the authenticated moto has only {POOL} buckets; raise POOL"
        );
        format!("repl-{n}")
    }

    /// Writes the key pair into `dir` as vigie reads it (one file each,
    /// with a trailing newline like `echo` makes); returns (id, secret).
    pub fn write_keys(&self, dir: &Path) -> (PathBuf, PathBuf) {
        write_keys(dir, &self.access_key_id, &self.secret_access_key)
    }
}

/// Key files with the given content.
pub fn write_keys(dir: &Path, id: &str, secret: &str) -> (PathBuf, PathBuf) {
    let id_path = dir.join("s3-access-key-id");
    let secret_path = dir.join("s3-secret-access-key");
    std::fs::write(&id_path, format!("{id}\n")).expect("write access key id file");
    std::fs::write(&secret_path, format!("{secret}\n")).expect("write secret file");
    (id_path, secret_path)
}

/// One IAM query-API call, routed to IAM by a placeholder signature (see
/// the module docs); returns the XML answer.
pub fn iam(addr: SocketAddr, form: &str) -> String {
    let auth =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/iam/aws4_request, \
                SignedHeaders=host, Signature=00";
    let (status, body) = http(
        addr,
        "POST",
        "/",
        &[
            ("authorization", auth),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        form,
    );
    assert_eq!(status, 200, "moto IAM {form}: {body}");
    body
}

/// A blocking HTTP/1.1 request on a fresh connection (`Connection: close`).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut tcp =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to moto");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    tcp.write_all(request.as_bytes()).expect("send to moto");
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).expect("read moto's answer");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer from moto: {text}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

pub fn between(text: &str, open: &str, close: &str) -> String {
    let start = text
        .find(open)
        .unwrap_or_else(|| panic!("no {open} in {text}"))
        + open.len();
    let end = text[start..].find(close).expect("closing tag") + start;
    text[start..end].to_string()
}

pub fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
