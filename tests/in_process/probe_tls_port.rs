//! `kind = "tls"`: TLS on a port that is not HTTP (here an IMAPS-like
//! server with its own ALPN list), its chain judged exactly as for https,
//! and no HTTP exchange made.

use crate::common::env::{assertions, failure, pretty, run_one, Env};
use crate::common::*;
use vigie::outcome::{Assertion, Status};

fn tls_check(address: &str, extra: &str) -> String {
    format!("[[check]]\nname = \"imaps\"\nkind = \"tls\"\naddress = {address:?}\n{extra}\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tls_port_that_is_not_http_is_judged_like_https() {
    let server = TlsPortServer::start(&valid_leaf());
    let address = format!("127.0.0.1:{}", server.port());
    let outcome = run_one(&tls_check(&address, &format!("server_name = {HOST:?}"))).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(outcome.target, format!("tls://{address}"));
    assert!(outcome.http.is_none(), "no HTTP exchange is made");
    let tls = outcome.tls.as_ref().expect("tls report");
    assert!(tls.trusted && tls.hostname_matches);
    assert_eq!(tls.server_name, HOST);
    assert_eq!(tls.key_exchange.as_deref(), Some("X25519MLKEM768"));
    assert_eq!(tls.chain[0].subject, format!("CN={HOST}"));
    assert_eq!(server.last_sni().as_deref(), Some(HOST));
    assert!(
        eventually(std::time::Duration::from_secs(5), || server.handshakes()
            == 1)
        .await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_or_misnamed_certificate_on_a_tls_port_is_down() {
    let expired = TlsPortServer::start(&expired_leaf());
    let address = format!("127.0.0.1:{}", expired.port());
    let outcome = run_one(&tls_check(&address, &format!("server_name = {HOST:?}"))).await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    assert!(failure(&outcome, "tls.expiry").message.contains("expired"));

    let misnamed = TlsPortServer::start(&wrong_host_leaf());
    let address = format!("127.0.0.1:{}", misnamed.port());
    let outcome = run_one(&tls_check(&address, &format!("server_name = {HOST:?}"))).await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    let f = failure(&outcome, "tls.hostname");
    assert!(
        f.message.contains(HOST) && f.message.contains(OTHER_HOST),
        "{}",
        f.message
    );
}

/// The host of `address` is the name verified unless `server_name` says
/// otherwise, and `resolve` connects elsewhere as for https.
#[tokio::test(flavor = "multi_thread")]
async fn the_address_host_is_the_server_name_by_default() {
    let server = TlsPortServer::start(&valid_leaf());
    let address = format!("{HOST}:{}", server.port());
    let outcome = run_one(&tls_check(&address, "resolve = \"127.0.0.1\"")).await;
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(server.last_sni().as_deref(), Some(HOST));
}

/// A port that answers in clear text is a handshake failure with a reason,
/// not a panic or a hang.
#[tokio::test(flavor = "multi_thread")]
async fn a_clear_text_port_is_a_handshake_failure() {
    let garbage = Garbage::start();
    let address = format!("127.0.0.1:{}", garbage.addr.port());
    let outcome = run_one(&tls_check(&address, &format!("server_name = {HOST:?}"))).await;
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    assert_eq!(assertions(&outcome), vec![Assertion::TlsHandshake]);
    assert!(outcome.tls.is_none());
}

#[test]
fn an_address_without_a_port_names_file_line_and_key() {
    let env = Env::new();
    env.write_checks("tls.toml", &tls_check("imap.example.com", ""));
    let errors = vigie::config::load(&env.config_path())
        .expect_err("an address without a port is refused")
        .to_string();
    assert!(
        errors.contains("tls.toml:4:")
            && errors.contains("`address`")
            && errors.contains("\"imap.example.com\" is not host:port"),
        "{errors}"
    );
    env.write_checks(
        "tls.toml",
        &tls_check(
            "imap.example.com:993",
            "url = \"https://imap.example.com/\"",
        ),
    );
    let errors = vigie::config::load(&env.config_path())
        .expect_err("a tls check has no url")
        .to_string();
    assert!(errors.contains("a tls check has no url"), "{errors}");
}
