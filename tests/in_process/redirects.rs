//! The redirect policy and IPv6 literals, against real loopback servers.
//!
//! Every probe here connects through a connector that records each address
//! it is asked for and refuses any that is not loopback, so that even a
//! wrong policy never sends a packet off this machine; the same connector
//! can treat one loopback address (127.0.0.2) as a global one, which is
//! how a redirect from a "public" target to a private address is shown.
//! Redirect targets are IP literals: no name is looked up.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::common::env::{failure, pretty, Env};
use crate::common::*;
use tokio::net::TcpStream;
use vigie::clock::{Clock, SystemClock};
use vigie::outcome::{Outcome, Status};
use vigie::probe::address::{self, AddressClass};
use vigie::probe::client::{Client, Connector};
use vigie::probe::Prober;

/// 127.0.0.2, which the recording connector may count as a global address.
const PUBLIC_STAND_IN: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// Records every address a probe asks to connect to; connects only to
/// loopback ones.
#[derive(Debug, Default)]
struct LoopbackOnly {
    attempts: Mutex<Vec<SocketAddr>>,
    public_stand_in: bool,
}

impl LoopbackOnly {
    fn attempts(&self) -> Vec<SocketAddr> {
        self.attempts.lock().unwrap().clone()
    }
}

impl Connector for LoopbackOnly {
    fn connect(
        &self,
        addr: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send + '_>> {
        self.attempts.lock().unwrap().push(addr);
        Box::pin(async move {
            if !addr.ip().is_loopback() {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("the test connector refuses {addr}: not loopback"),
                ));
            }
            TcpStream::connect(addr).await
        })
    }

    fn classify(&self, ip: IpAddr) -> AddressClass {
        match self.public_stand_in && ip == PUBLIC_STAND_IN {
            true => AddressClass::Global,
            false => address::classify(ip),
        }
    }
}

/// Runs the checks of `env` once through `connector`.
async fn probe_through(env: &Env, connector: Arc<LoopbackOnly>) -> Vec<Outcome> {
    let config = env.load();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let client = Client::new(
        config.extra_ca_file.as_deref(),
        &config.checks,
        clock.clone(),
    )
    .expect("client")
    .with_connector(connector);
    let prober = Prober::new(client, config.ca_cache_size);
    let checks = config.all_checks();
    vigie::runner::check_now(&prober, clock.as_ref(), &checks, 1).await
}

/// One http check of `url` with `extra` keys, no `resolve` (URLs here are
/// IP literals, or www.example.test pinned by the caller's `extra`).
fn check(name: &str, url: &str, extra: &str) -> String {
    format!("[[check]]\nname = {name:?}\nkind = \"http\"\nurl = {url:?}\n{extra}\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn https_to_http_is_refused_before_any_connection() {
    let tls = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let plain = PlainHttpServer::start();
    let to = format!("http://127.0.0.1:{}/", plain.port());
    let env = Env::new();
    env.write_checks(
        "c.toml",
        &check(
            "downgrade",
            &tls.url(&format!("/goto?to={to}")),
            "resolve = \"127.0.0.1\"\nredirect_to_private = true\n",
        ),
    );
    let connector = Arc::new(LoopbackOnly::default());
    let outcome = probe_through(&env, connector.clone()).await.remove(0);
    assert_eq!(outcome.status, Status::Down, "{}", pretty(&outcome));
    assert_eq!(
        failure(&outcome, "http.redirect").message,
        format!("redirect 1 to {to} refused: it leaves https for cleartext http")
    );
    assert_eq!(plain.requests(), 0);
    assert_eq!(connector.attempts(), [tls.addr]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_public_target_may_not_redirect_to_a_private_address_unless_the_check_says_so() {
    let public = PlainHttpServer::start_on(PUBLIC_STAND_IN);
    let private = PlainHttpServer::start();
    let to = format!("http://127.0.0.1:{}/", private.port());
    let url = format!("http://{}/goto?to={to}", public.addr);
    let env = Env::new();
    env.write_checks(
        "c.toml",
        &(check("strict", &url, "") + &check("opted-in", &url, "redirect_to_private = true\n")),
    );
    let connector = Arc::new(LoopbackOnly {
        public_stand_in: true,
        ..LoopbackOnly::default()
    });
    let outcomes = probe_through(&env, connector.clone()).await;

    let strict = &outcomes[0];
    assert_eq!(strict.status, Status::Down, "{}", pretty(strict));
    assert_eq!(
        failure(strict, "http.redirect").message,
        format!(
            "redirect 1 to {to} refused: 127.0.0.1 is a loopback address; \
             set redirect_to_private = true on the check to follow it"
        )
    );
    let opted_in = &outcomes[1];
    assert_eq!(opted_in.status, Status::Up, "{}", pretty(opted_in));
    assert_eq!(opted_in.http.as_ref().unwrap().redirects, 1);
    assert_eq!(private.requests(), 1, "only the opted-in check got there");
    assert_eq!(
        connector.attempts(),
        [public.addr, public.addr, private.addr],
        "the refused hop was never connected to"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_target_may_redirect_privately() {
    // The check's own target is loopback: its redirects may stay inside.
    let server = PlainHttpServer::start();
    let other = PlainHttpServer::start();
    let url = format!(
        "http://{}/goto?to=http://127.0.0.1:{}/",
        server.addr,
        other.port()
    );
    let env = Env::new();
    env.write_checks("c.toml", &check("internal", &url, ""));
    let outcome = probe_through(&env, Arc::default()).await.remove(0);
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    assert_eq!(other.requests(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_addresses_are_refused_whatever_the_check_says_with_no_connection_attempt() {
    let server = PlainHttpServer::start();
    let env = Env::new();
    let mut checks = String::new();
    let targets = [
        (
            "v4",
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
        ),
        (
            "v6",
            "http://[fd00:ec2::254]/latest/meta-data/",
            "fd00:ec2::254",
        ),
        (
            "ecs",
            "http://169.254.170.2/v2/credentials",
            "169.254.170.2",
        ),
    ];
    for (name, to, _) in targets {
        let url = format!("http://{}/goto?to={to}", server.addr);
        checks += &check(name, &url, "redirect_to_private = true\n");
    }
    env.write_checks("c.toml", &checks);
    let connector = Arc::new(LoopbackOnly::default());
    let outcomes = probe_through(&env, connector.clone()).await;
    for ((_, to, ip), outcome) in targets.iter().zip(&outcomes) {
        assert_eq!(outcome.status, Status::Down, "{}", pretty(outcome));
        assert_eq!(
            failure(outcome, "http.redirect").message,
            format!(
                "redirect 1 to {to} refused: {ip} is a cloud instance metadata address, never followed"
            )
        );
    }
    assert_eq!(
        connector.attempts(),
        [server.addr; 3],
        "only the check's own target was connected to"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ipv6_literal_target_with_an_ip_san() {
    let loopback6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let leaf = issue(&LeafSpec::new(["::1"]));
    let server = TlsServer::start_leaf_on(&leaf, TlsOpts::default(), loopback6);
    let url = format!("https://[::1]:{}/", server.port());
    let env = Env::new();
    env.write_checks("c.toml", &check("v6", &url, ""));
    let connector = Arc::new(LoopbackOnly::default());
    let outcome = probe_through(&env, connector.clone()).await.remove(0);
    assert_eq!(outcome.status, Status::Up, "{}", pretty(&outcome));
    let tls = outcome.tls.as_ref().expect("TLS facts");
    assert_eq!(tls.server_name, "::1");
    assert!(tls.trusted && tls.hostname_matches, "{}", pretty(&outcome));
    assert_eq!(server.sni_seen(), [None], "no SNI for an IP literal");
    assert_eq!(
        connector.attempts(),
        [SocketAddr::new(loopback6, server.port())]
    );
    assert_eq!(outcome.target, url);
}

#[tokio::test(flavor = "multi_thread")]
async fn url_credentials_are_sent_as_basic_auth_to_the_checks_own_origin_only() {
    let own = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let elsewhere = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let with_credentials =
        |path: &str| format!("https://vigie:s3cr%40t@{HOST}:{}{path}", own.port());
    let env = Env::new();
    let pinned = "resolve = \"127.0.0.1\"\n";
    env.write_checks(
        "c.toml",
        &(check("same-origin", &with_credentials("/redirect/1"), pinned)
            + &check(
                "cross-origin",
                &with_credentials(&format!("/goto?to={}", elsewhere.url("/"))),
                pinned,
            )),
    );
    let outcomes = probe_through(&env, Arc::default()).await;
    for outcome in &outcomes {
        assert_eq!(outcome.status, Status::Up, "{}", pretty(outcome));
        assert!(!outcome.target.contains("s3cr"), "{}", outcome.target);
    }
    let authorization = |request: &crate::common::servers::RecordedRequest| {
        request
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let own_seen: Vec<_> = own.recorded_requests().iter().map(authorization).collect();
    let basic = Some("Basic dmlnaWU6czNjckB0".to_string());
    assert_eq!(
        own_seen,
        [basic.clone(), basic.clone(), basic],
        "decoded user:password, every hop on the check's origin"
    );
    let elsewhere_seen: Vec<_> = elsewhere
        .recorded_requests()
        .iter()
        .map(authorization)
        .collect();
    assert_eq!(elsewhere_seen, [None], "never sent to another origin");
}
