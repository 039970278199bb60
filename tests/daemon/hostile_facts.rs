//! Secrets and escapes (issue 14): targets that answer with a token in
//! `Location`, a session in `Set-Cookie`, a header the check redacts, a
//! 60 KB header, and a certificate whose CN holds terminal escapes. The
//! real daemon probes them, stores, pages into its Maildir, logs, exports
//! `/metrics` and replicates to a real S3 server (moto, SigV4); then every
//! place a fact can end up is searched for the secrets and the escapes,
//! raw and decoded (sled and the segments compress, mail encodes): 0 hits.
//! `vigie check`, `history` and `report` are searched the same way.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::daemon::{api_section, free_addr, metric, poll, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::history;
use crate::common::pki::{issue, valid_leaf, LeafSpec, HOST};
use crate::common::s3_auth::AuthS3;
use crate::common::servers::{TlsOpts, TlsServer};
use crate::common::smtp::parse_maildir;
use vigie::replicate::{Bucket, BucketSettings};
use vigie::store::{SledStore, Store, FLUSH_EVERY};

const START: Duration = Duration::from_secs(20);
const WAIT: Duration = Duration::from_secs(60);
const STOP: Duration = Duration::from_secs(30);

/// In the redirect's query string (and in a `Link` URL's userinfo).
const TOKEN: &str = "SECRET-TOKEN-4f9a";
/// The value of `Set-Cookie`.
const COOKIE: &str = "SECRET-COOKIE-77c1";
/// The value of a header the check lists in `redact_headers`.
const PRIVATE: &str = "SECRET-HEADER-91be";
/// The end of the 60 KB header, far past the cap.
const TAIL: &str = "SECRET-TAIL-3c5d";
/// An OSC (set the window title) and an SGR (red), as a CN.
const ESCAPES: &str = "\x1b]0;OWNED-TITLE-e2d0\x07\x1b[31mevil\x1b[0m";

/// What must never be found, raw or JSON-escaped.
fn needles() -> Vec<Vec<u8>> {
    let mut needles: Vec<Vec<u8>> = [TOKEN, COOKIE, PRIVATE, TAIL]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    needles.push(b"\x1b]0;OWNED".to_vec());
    needles.push(b"\x1b[31m".to_vec());
    // serde_json writes ESC and BEL this way; seeing them would mean an
    // unescaped control character was stored.
    needles.push(b"\\u001b".to_vec());
    needles.push(b"\\u0007".to_vec());
    needles
}

/// Every needle found in `haystack`, named for the failure message.
fn hits(haystack: &[u8]) -> Vec<String> {
    needles()
        .into_iter()
        .filter(|needle| {
            haystack
                .windows(needle.len())
                .any(|w| w == needle.as_slice())
        })
        .map(|needle| String::from_utf8_lossy(&needle).escape_debug().to_string())
        .collect()
}

fn assert_clean(what: &str, haystack: &[u8]) {
    let found = hits(haystack);
    assert!(
        found.is_empty(),
        "{what} holds {found:?}:\n{}",
        String::from_utf8_lossy(haystack).escape_debug()
    );
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
    out
}

/// The redirecting target: a 302 whose `Location` carries the token, with
/// the cookie, the private header and a `Link` with userinfo; the landing
/// page answers 200 with the same headers.
fn secrets_server() -> TlsServer {
    TlsServer::start_with(
        &valid_leaf(),
        TlsOpts::default(),
        Arc::new(|req| {
            let headers = vec![
                (
                    "set-cookie".to_string(),
                    format!("session={COOKIE}; HttpOnly"),
                ),
                ("x-internal-token".to_string(), PRIVATE.to_string()),
                (
                    "link".to_string(),
                    format!("<https://user:{TOKEN}@{HOST}/next?sig={TOKEN}>; rel=\"next\""),
                ),
            ];
            match req.uri.starts_with("/landing") {
                true => (200, headers, "landed\n".to_string()),
                false => {
                    let mut headers = headers;
                    headers.push(("location".to_string(), format!("/landing?token={TOKEN}")));
                    (302, headers, String::new())
                }
            }
        }),
    )
}

fn huge_server() -> TlsServer {
    let huge = "H".repeat(60 * 1024) + TAIL;
    TlsServer::start_with(
        &valid_leaf(),
        TlsOpts::default(),
        Arc::new(move |_| {
            (
                200,
                vec![("x-huge".to_string(), huge.clone())],
                "ok\n".into(),
            )
        }),
    )
}

fn escapes_server() -> TlsServer {
    let leaf = issue(&LeafSpec::new([HOST]).common_name(ESCAPES));
    TlsServer::start_with(
        &leaf,
        TlsOpts::default(),
        Arc::new(|_| (200, vec![], "a page without the marker\n".into())),
    )
}

fn checks(secrets: &TlsServer, huge: &TlsServer, escapes: &TlsServer) -> String {
    let every = "every = \"1s\"\ntimeout = \"5s\"";
    [
        check_toml(
            "secrets-follow",
            &secrets.url("/start"),
            &format!(
                "{every}\nredact_headers = [\"X-Internal-Token\"]\n[check.expect]\nheaders = {{ \
                 \"set-cookie\" = \"^never$\", \"x-internal-token\" = \"^never$\", \"link\" = \"^never$\" }}"
            ),
        ),
        check_toml(
            "secrets-302",
            &secrets.url("/start"),
            &format!(
                "{every}\nfollow_redirects = false\n[check.expect]\nstatus = [200]\n\
                 headers = {{ \"location\" = \"^never$\" }}"
            ),
        ),
        check_toml(
            "huge-header",
            &huge.url("/"),
            &format!("{every}\n[check.expect]\nheaders = {{ \"x-huge\" = \"^never$\" }}"),
        ),
        check_toml(
            "ansi-cn",
            &escapes.url("/"),
            &format!("{every}\n[check.expect]\nbody_contains = \"never-there\""),
        ),
    ]
    .join("\n")
}

const NAMES: [&str; 4] = ["secrets-follow", "secrets-302", "huge-header", "ansi-cn"];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn cli(env: &Env, args: &[&str]) -> Vec<u8> {
    let out = vigie_cli_async(&env.config_path(), args).await;
    assert!(
        out.status.code().is_some_and(|c| c <= 2),
        "vigie {args:?}: {}",
        text(&out.stderr)
    );
    let mut all = out.stdout;
    all.extend_from_slice(&out.stderr);
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_and_escapes_from_targets_reach_no_store_mail_log_metrics_or_bucket() {
    let s3 = AuthS3::shared();
    let bucket = s3.bucket();
    let (secrets, huge, escapes) = (secrets_server(), huge_server(), escapes_server());
    let api = free_addr();
    let env = Env::with_config(&format!(
        "{}[alerting]\nto = [\"oncall@example.com\"]\nfailure_threshold = 1\ngroup_window = \"0s\"\n",
        api_section(api, None)
    ));
    let (id, secret) = s3.write_keys(env.path());
    env.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket}/node-1\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\ninterval = \"1s\"\n",
        s3.endpoint(),
        id.display().to_string(),
        secret.display().to_string(),
    ));
    env.write_checks("hostile.toml", &checks(&secrets, &huge, &escapes));

    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;
    let maildir = env.path().join("state/maildir");
    poll(WAIT, "a DOWN page for every hostile check", async || {
        let mail: String = files(&maildir).iter().map(|(_, b)| text(b)).collect();
        match NAMES.iter().all(|name| mail.contains(name)) {
            true => Ok(()),
            false => Err(format!("{} files in the maildir", files(&maildir).len())),
        }
    })
    .await;
    let metrics = poll(WAIT, "8 results replicated", async || {
        let (_, body) = daemon.get("/metrics").await?;
        match metric(&body, "vigie_replication_results_total") {
            Some(n) if n >= 8.0 => Ok(body),
            other => Err(format!("vigie_replication_results_total {other:?}")),
        }
    })
    .await;

    // Through the running daemon: its API, and the CLI that asks it.
    let mut answers = Vec::new();
    for name in NAMES {
        let (status, body) = daemon
            .get(&format!("/api/v1/history/{name}?since=1h"))
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        answers.push((format!("API history of {name}"), body.into_bytes()));
        let table = cli(&env, &["history", name, "--since", "1h"]).await;
        answers.push((format!("vigie history {name}"), table));
    }
    let (_, checks) = daemon.get("/api/v1/checks").await.unwrap();
    answers.push(("API checks".to_string(), checks.into_bytes()));
    answers.push(("vigie check".into(), cli(&env, &["check"]).await));
    answers.push((
        "vigie check --json".into(),
        cli(&env, &["check", "--json"]).await,
    ));
    answers.push(("vigie report".into(), cli(&env, &["report"]).await));
    answers.push((
        "vigie report --json".into(),
        cli(&env, &["report", "--json"]).await,
    ));
    daemon.stop(STOP).await;

    // What is stored, decoded by vigie itself from sled (no daemon now).
    let mut decoded = String::new();
    for name in NAMES {
        let json = cli(&env, &["history", name, "--since", "1h", "--json"]).await;
        answers.push((format!("vigie history {name} --json (store)"), json.clone()));
        decoded.push_str(&text(&json));
    }
    for (what, bytes) in &answers {
        assert_clean(what, bytes);
    }
    // The facts did get through, as visible escapes and markers.
    assert!(
        decoded.contains("OWNED-TITLE-e2d0"),
        "the CN is stored: {decoded}"
    );
    assert!(decoded.contains("\\\\x1b[31mevil"), "escaped, visibly");
    assert!(decoded.contains("[redacted]"), "redacted, visibly");
    assert!(decoded.contains(" bytes]"), "the 60 KB header is cut");

    // The sled files as they lie on disk (LZ4 blocks: not proof alone,
    // hence the decoded history above).
    let store = files(&env.path().join("state/history"));
    assert!(!store.is_empty(), "no sled files");
    for (path, bytes) in &store {
        assert_clean(path, bytes);
    }

    // The maildir, as written and as a mail reader decodes it.
    let raw_mail = files(&maildir);
    assert!(raw_mail.len() >= NAMES.len(), "{} mails", raw_mail.len());
    for (path, bytes) in &raw_mail {
        assert_clean(path, bytes);
    }
    let parsed = parse_maildir(&maildir);
    for message in &parsed {
        let mut all = message.subject.clone();
        for (_, part) in &message.parts {
            all.push_str(part);
        }
        assert_clean(&format!("mail {:?}", message.subject), all.as_bytes());
    }
    assert!(
        parsed
            .iter()
            .any(|m| m.parts.iter().any(|(_, p)| p.contains("OWNED-TITLE-e2d0"))),
        "the mail shows the served chain"
    );

    // The daemon's log and its /metrics.
    assert_clean("the daemon's log", daemon.log().as_bytes());
    assert!(
        metrics.contains("OWNED-TITLE-e2d0"),
        "the CN is a label: {metrics}"
    );
    assert_clean("/metrics", metrics.as_bytes());

    // The replicated segments, raw and decompressed.
    let config = env.load();
    let settings = BucketSettings::from_config(
        config.replication.as_ref().expect("[replication]"),
        config.extra_ca_file.as_deref(),
    );
    let bucket = Bucket::open(&settings).expect("open the bucket");
    let mut names = Vec::new();
    bucket
        .list("history/", &mut |name| names.push(name))
        .await
        .expect("list the segments");
    assert!(!names.is_empty(), "no segment in the bucket");
    let mut shipped = 0;
    for name in names {
        let bytes = bucket.get(&name).await.expect("get a segment");
        assert_clean(&name, &bytes);
        let plain = zstd::decode_all(&bytes[..]).expect("a zstd segment");
        assert_clean(&format!("{name}, decompressed"), &plain);
        shipped += text(&plain).matches("OWNED-TITLE-e2d0").count();
    }
    assert!(shipped > 0, "the CN was replicated");
}

/// Terminal safety for data stored before facts were sanitised at capture:
/// a store written by an older vigie holds a certificate subject, issuer
/// and failure message with raw escapes (and a C1 CSI, which serde_json
/// writes as it is). `vigie history` and `vigie report`, as table and as
/// JSON, must show them escaped.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_store_with_raw_escapes_reaches_no_terminal() {
    let env = Env::new();
    env.write_checks(
        "old.toml",
        &check_toml("old", "https://www.example.test:1/", ""),
    );
    let state_dir = env.load().state_dir;
    {
        let store = SledStore::open(&vigie::store::history_path(&state_dir), FLUSH_EVERY)
            .expect("open the store");
        let at = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
        // The seventh-ish result of the made-up history is down, with a chain.
        let mut outcome = history::outcome("old", at, 3);
        outcome.failures[0].message = format!("certificate {ESCAPES} is \u{9b}31m wrong");
        let mut chain = outcome.tls.as_ref().expect("a chain").chain.to_vec();
        chain[0].subject = format!("CN={ESCAPES}");
        chain[0].issuer = format!("CN=R11\u{9b}2J{ESCAPES}");
        outcome.tls.as_mut().expect("a chain").chain = chain.into();
        store.append(&outcome).expect("store the old result");
        store.flush().expect("flush");
    }
    for args in [
        &["history", "old", "--since", "1h"][..],
        &["history", "old", "--since", "1h", "--json"],
        &["report"],
        &["report", "--json"],
    ] {
        let out = vigie_cli_async(&env.config_path(), args).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "vigie {args:?}: {}",
            text(&out.stderr)
        );
        let stdout = out.stdout;
        assert!(
            text(&stdout).contains("OWNED-TITLE-e2d0"),
            "vigie {args:?} shows the stored text: {}",
            text(&stdout)
        );
        let raw_control = stdout.iter().any(|&b| b == 0x1b || b == 0x07)
            || stdout.windows(2).any(|w| w == [0xc2, 0x9b]);
        assert!(
            !raw_control,
            "vigie {args:?} prints raw control characters: {}",
            text(&stdout).escape_debug()
        );
    }
}
