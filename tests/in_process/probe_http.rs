//! The http probe against real loopback servers, friendly and hostile:
//! status, body, headers, redirects, timeouts, and targets that hang, reset,
//! or answer garbage. Each must give a precise `down`, never a hang.

use std::time::Duration;

use crate::common::env::{failure, pretty, probe};
use crate::common::*;
use vigie::outcome::Status;

fn valid_server() -> TlsServer {
    TlsServer::start_leaf(&valid_leaf(), TlsOpts::default())
}

#[tokio::test(flavor = "multi_thread")]
async fn status_503_is_down() {
    let server = valid_server();
    let outcome = probe(&server.url("/status/503"), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "http.status");
    assert_eq!(f.message, "HTTP 503 Service Unavailable (expected 2xx)");
    assert_eq!(f.observed, "503");
    assert_eq!(outcome.http.as_ref().unwrap().status, 503);
    assert!(
        outcome.tls.as_ref().unwrap().trusted,
        "TLS is still reported"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn explicit_status_list() {
    let server = valid_server();
    let outcome = probe(
        &server.url("/status/503"),
        "[check.expect]\nstatus = [503]\n",
    )
    .await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let outcome = probe(&server.url("/"), "[check.expect]\nstatus = [204, 301]\n").await;
    assert_eq!(failure(&outcome, "http.status").expected, "204 or 301");
}

#[tokio::test(flavor = "multi_thread")]
async fn body_marker_present_and_absent() {
    let server = valid_server();
    let present = probe(
        &server.url("/"),
        "[check.expect]\nbody_contains = \"<title>vigie test</title>\"\nbody_regex = \"(?i)\\\\bOK\\\\b\"\n",
    )
    .await;
    assert_eq!(present.status, Status::Up, "{}", pretty(&present));
    let absent = probe(
        &server.url("/"),
        "[check.expect]\nbody_contains = \"Welcome\"\n",
    )
    .await;
    assert_eq!(absent.status, Status::Down);
    let f = failure(&absent, "http.body");
    assert_eq!(
        f.message,
        "page does not contain \"Welcome\" (in the 40-byte body)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn header_regexes() {
    let server = valid_server();
    let ok = probe(
        &server.url("/"),
        "[check.expect]\nheaders = { \"strict-transport-security\" = \"max-age=\\\\d+\" }\n",
    )
    .await;
    assert_eq!(ok.status, Status::Up, "{}", pretty(&ok));
    let wrong = probe(
        &server.url("/headers"),
        "[check.expect]\nheaders = { \"x-test\" = \"^bye$\", \"strict-transport-security\" = \".\" }\n",
    )
    .await;
    assert_eq!(wrong.status, Status::Down);
    let observed: Vec<_> = wrong.failures.iter().map(|f| f.observed.as_str()).collect();
    assert!(observed.contains(&"x-test: hello"), "{observed:?}");
    assert!(
        observed.contains(&"no strict-transport-security header"),
        "{observed:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn slower_than_max_response_time() {
    let server = valid_server();
    let outcome = probe(
        &server.url("/slow/300"),
        "[check.expect]\nmax_response_time = \"100ms\"\n",
    )
    .await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "http.response_time");
    assert_eq!(f.expected, "<= 100 ms");
}

#[tokio::test(flavor = "multi_thread")]
async fn server_slower_than_the_timeout() {
    let server = valid_server();
    let started = std::time::Instant::now();
    let outcome = probe(&server.url("/slow/5000"), "timeout = \"500ms\"\n").await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the timeout bounds the probe"
    );
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "timeout");
    assert_eq!(
        f.message,
        "no answer within 500 ms (waiting for the response headers)"
    );
    assert!(
        outcome.tls.is_some(),
        "the handshake happened and is reported"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tarpit_that_accepts_and_never_answers() {
    let tarpit = Tarpit::start();
    let url = format!("https://www.example.test:{}/", tarpit.addr.port());
    let outcome = probe(&url, "timeout = \"500ms\"\n").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "timeout");
    assert!(
        f.message
            .starts_with("no answer within 500 ms (during the TLS handshake with 127.0.0.1:"),
        "{}",
        f.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_instead_of_tls() {
    let garbage = Garbage::start();
    let url = format!("https://www.example.test:{}/", garbage.addr.port());
    let outcome = probe(&url, "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.handshake");
    assert!(
        f.message.starts_with("the server did not answer with TLS"),
        "{}",
        f.message
    );
    assert!(outcome.tls.is_none(), "no certificate was seen");
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_refused() {
    let addr = refused_addr();
    let outcome = probe(&format!("https://www.example.test:{}/", addr.port()), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "connect");
    assert_eq!(f.message, format!("connection refused by {addr}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_reset_during_handshake() {
    let resetter = Resetter::start_after_first_read();
    let url = format!("https://www.example.test:{}/", resetter.addr.port());
    let outcome = probe(&url, "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "tls.handshake");
    assert!(
        f.message.contains("reset") || f.message.contains("closed"),
        "{}",
        f.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unresolvable_host_is_a_dns_failure() {
    // No `resolve` override: the .invalid TLD never resolves (RFC 6761).
    let env = crate::common::env::Env::new();
    env.write_checks(
        "dns.toml",
        "[[check]]\nname = \"nowhere\"\nkind = \"http\"\nurl = \"https://nowhere.invalid/\"\n",
    );
    let outcome = env.run_all().await.remove(0);
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "dns");
    assert!(
        f.message.starts_with("cannot resolve nowhere.invalid"),
        "{}",
        f.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn http_to_https_redirect_is_followed() {
    let tls = valid_server();
    let plain = PlainHttpServer::start_redirecting_to(tls.port());
    let outcome = probe(&plain.url("/to-https"), "").await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let http = outcome.http.as_ref().unwrap();
    assert_eq!(http.redirects, 1);
    assert_eq!(
        http.final_url.as_deref(),
        Some(format!("https://www.example.test:{}/", tls.port()).as_str())
    );
    let report = outcome.tls.as_ref().expect("the https hop's chain");
    assert!(report.trusted);
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_counted_and_bounded() {
    let server = valid_server();
    let three = probe(&server.url("/redirect/3"), "").await;
    assert_eq!(three.status, Status::Up);
    assert_eq!(three.http.as_ref().unwrap().redirects, 3);

    let endless = probe(&server.url("/redirect/30"), "").await;
    assert_eq!(endless.status, Status::Down);
    let f = failure(&endless, "http.redirect");
    assert!(
        f.message.starts_with("more than 10 redirects"),
        "{}",
        f.message
    );
    assert_eq!(server.requests(), 4 + 11, "stopped after 10 redirects");
}

#[tokio::test(flavor = "multi_thread")]
async fn redirect_loop_is_detected() {
    let server = valid_server();
    let outcome = probe(&server.url("/loop-a"), "").await;
    assert_eq!(outcome.status, Status::Down);
    let f = failure(&outcome, "http.redirect");
    let port = server.port();
    assert_eq!(
        f.message,
        format!(
            "redirect loop: https://www.example.test:{port}/loop-a -> \
             https://www.example.test:{port}/loop-b -> https://www.example.test:{port}/loop-a"
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_not_followed_when_disabled() {
    let server = valid_server();
    let outcome = probe(
        &server.url("/redirect/1"),
        "follow_redirects = false\n[check.expect]\nstatus = [302]\n",
    )
    .await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(outcome.http.as_ref().unwrap().redirects, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_body_is_capped() {
    let server = valid_server();
    let outcome = probe(
        &server.url("/big"),
        "[check.expect]\nbody_contains = \"marker\"\n",
    )
    .await;
    let http = outcome.http.as_ref().unwrap();
    assert_eq!(http.body_bytes, 1024 * 1024);
    assert!(http.body_truncated);
    let f = failure(&outcome, "http.body");
    assert_eq!(f.observed, "not found in the first 1048576 bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn urls_are_redacted_in_outcomes() {
    let server = valid_server();
    let url = format!(
        "https://user:secret@www.example.test:{}/?X-Amz-Signature=abc",
        server.port()
    );
    let outcome = probe(&url, "").await;
    let json = serde_json::to_string(&outcome).unwrap();
    assert!(
        !json.contains("secret") && !json.contains("X-Amz-Signature"),
        "{json}"
    );
    assert_eq!(
        outcome.target,
        format!("https://www.example.test:{}/?[redacted]", server.port())
    );
}
