//! A real DNS server on loopback for the dns-check tests: hickory-server
//! in-process, authoritative for a few test zones, on 127.0.0.1 UDP and TCP
//! at one random port. And a resolver that never answers.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use hickory_server::authority::{Catalog, ZoneType};
use hickory_server::proto::rr::rdata::caa::{KeyValue, Value};
use hickory_server::proto::rr::rdata::{A, AAAA, CAA, CNAME, SOA, TXT};
use hickory_server::proto::rr::{LowerName, Name, RData, Record};
use hickory_server::store::in_memory::InMemoryAuthority;
use hickory_server::ServerFuture;

/// How many A records `many.example.test` has: more than a report keeps.
pub const MANY_A: u8 = 100;

/// The acme-dns account the delegation points to.
pub const ACME_DNS_TARGET: &str = "d420c923.auth.acme-dns.example.net.";

/// The ACME account `bound.test`'s CAA binds.
pub const ACCOUNT: &str = "https://acme-v02.api.letsencrypt.org/acme/acct/123";

/// The account `other.bound.test`'s CAA binds instead.
pub const OTHER_ACCOUNT: &str = "https://acme-v02.api.letsencrypt.org/acme/acct/999";

/// A running server; stops when dropped.
pub struct DnsServer {
    pub addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl DnsServer {
    /// The zones (see [`zones`]) on a fresh port, served by a thread with a
    /// runtime of its own, so that any test (async or not) can query it.
    pub fn start() -> DnsServer {
        let (udp, tcp, addr) = udp_and_tcp_on_one_port();
        udp.set_nonblocking(true).expect("nonblocking udp");
        tcp.set_nonblocking(true).expect("nonblocking tcp");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("dns server runtime");
            runtime.block_on(async move {
                let mut server = ServerFuture::new(catalog());
                server.register_socket(tokio::net::UdpSocket::from_std(udp).expect("udp"));
                server.register_listener(
                    tokio::net::TcpListener::from_std(tcp).expect("tcp"),
                    Duration::from_secs(5),
                );
                let _ = stopped.await;
                let _ = server.shutdown_gracefully().await;
            });
        });
        DnsServer { addr, _stop: stop }
    }
}

/// A UDP socket and a TCP listener on the same loopback port (TCP for
/// truncated answers). The port is free for UDP when the kernel hands it
/// out, not necessarily for TCP: another test may hold it, so a taken one
/// is given back and another tried.
fn udp_and_tcp_on_one_port() -> (std::net::UdpSocket, std::net::TcpListener, SocketAddr) {
    let mut last = None;
    for _ in 0..50 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let addr = udp.local_addr().expect("udp addr");
        match std::net::TcpListener::bind(addr) {
            Ok(tcp) => return (udp, tcp, addr),
            Err(err) => last = Some(err),
        }
    }
    panic!("no loopback port free for both UDP and TCP in 50 tries: {last:?}");
}

/// A UDP socket (and TCP listener) that read nothing and answer nothing:
/// a resolver that is down.
pub struct SilentResolver {
    pub addr: SocketAddr,
    _udp: std::net::UdpSocket,
    _tcp: std::net::TcpListener,
}

impl SilentResolver {
    pub fn start() -> SilentResolver {
        let (udp, tcp, addr) = udp_and_tcp_on_one_port();
        SilentResolver {
            addr,
            _udp: udp,
            _tcp: tcp,
        }
    }
}

fn name(text: &str) -> Name {
    Name::from_str(text).expect("test name")
}

fn record(owner: &str, rdata: RData) -> Record {
    Record::from_rdata(name(owner), 300, rdata)
}

fn issue(ca: &str) -> RData {
    RData::CAA(CAA::new_issue(false, Some(name(ca)), Vec::new()))
}

/// An issue record for `ca` with RFC 8657 parameters.
fn issue_with(ca: &str, parameters: &[(&str, &str)]) -> RData {
    let parameters = parameters
        .iter()
        .map(|(k, v)| KeyValue::new(*k, *v))
        .collect();
    RData::CAA(CAA::new_issue(false, Some(name(ca)), parameters))
}

/// An issue record whose value is sent exactly as written, whether or not
/// it follows the grammar.
fn issue_raw(value: &str) -> RData {
    let mut caa = CAA::new_issue(false, None, Vec::new());
    caa.set_value(Value::Unknown(value.as_bytes().to_vec()));
    RData::CAA(caa)
}

/// The test zones:
/// - `example.test.`: CAA issue letsencrypt.org, issuewild digicert.com;
///   the acme-dns delegation `_acme-challenge` CNAME; `www` with two A and
///   one AAAA; a TXT at the apex; `deep.sub` with an A only (its CAA is
///   found by climbing to the apex). `_acme-challenge.gone` does not exist.
///   `many` has [`MANY_A`] A records, 198.51.100.0 and up.
/// - `refusing.test.`: CAA issue digicert.com (with a parameter) only.
/// - `nocaa.test.`: no CAA anywhere (and none above it).
/// - `bound.test.`: CAA binding letsencrypt.org to [`ACCOUNT`] with
///   dns-01; `other.bound.test` to [`OTHER_ACCOUNT`]; `http.bound.test`
///   to [`ACCOUNT`] with http-01 only; `spaced.bound.test` to [`ACCOUNT`]
///   with whitespace around `;` and `=`; `broken.bound.test` with a
///   parameter that is not `tag=value`.
/// - `test.` itself, empty, so that climbing reaches the top-level domain
///   and gets an answer (as from a real resolver) rather than REFUSED.
fn zones() -> Vec<(&'static str, Vec<Record>)> {
    let many = (0..MANY_A).map(|n| record("many.example.test.", RData::A(A::new(198, 51, 100, n))));
    let mut zones = vec![
        ("test.", Vec::new()),
        (
            "example.test.",
            vec![
                record("example.test.", issue("letsencrypt.org")),
                record(
                    "example.test.",
                    RData::CAA(CAA::new_issuewild(
                        false,
                        Some(name("digicert.com")),
                        Vec::new(),
                    )),
                ),
                record(
                    "example.test.",
                    RData::TXT(TXT::new(vec!["v=spf1 ".into(), "-all".into()])),
                ),
                record(
                    "_acme-challenge.example.test.",
                    RData::CNAME(CNAME(name(ACME_DNS_TARGET))),
                ),
                record("www.example.test.", RData::A(A::new(192, 0, 2, 10))),
                record("www.example.test.", RData::A(A::new(192, 0, 2, 11))),
                record(
                    "www.example.test.",
                    RData::AAAA(AAAA::from_str("2001:db8::10").unwrap()),
                ),
                record("deep.sub.example.test.", RData::A(A::new(192, 0, 2, 12))),
            ],
        ),
        (
            "refusing.test.",
            vec![
                record(
                    "refusing.test.",
                    RData::CAA(CAA::new_issue(
                        false,
                        Some(name("digicert.com")),
                        vec![KeyValue::new("validationmethods", "dns-01")],
                    )),
                ),
                record("www.refusing.test.", RData::A(A::new(192, 0, 2, 20))),
            ],
        ),
        (
            "nocaa.test.",
            vec![record("www.nocaa.test.", RData::A(A::new(192, 0, 2, 30)))],
        ),
        (
            "bound.test.",
            vec![
                record(
                    "bound.test.",
                    issue_with(
                        "letsencrypt.org",
                        &[("accounturi", ACCOUNT), ("validationmethods", "dns-01")],
                    ),
                ),
                record(
                    "other.bound.test.",
                    issue_with("letsencrypt.org", &[("accounturi", OTHER_ACCOUNT)]),
                ),
                record(
                    "http.bound.test.",
                    issue_with(
                        "letsencrypt.org",
                        &[("accounturi", ACCOUNT), ("validationmethods", "http-01")],
                    ),
                ),
                record(
                    "spaced.bound.test.",
                    issue_raw(&format!(
                        " letsencrypt.org ;\taccounturi = {ACCOUNT} ; validationmethods = dns-01,http-01"
                    )),
                ),
                record(
                    "broken.bound.test.",
                    issue_raw("letsencrypt.org; accounturi"),
                ),
            ],
        ),
    ];
    zones[1].1.extend(many);
    zones
}

fn catalog() -> Catalog {
    let mut catalog = Catalog::new();
    for (origin, records) in zones() {
        let origin = name(origin);
        let mut authority = InMemoryAuthority::empty(origin.clone(), ZoneType::Primary, false);
        let soa = SOA::new(
            name(&format!("ns.{origin}")),
            name(&format!("hostmaster.{origin}")),
            1,
            3600,
            600,
            86400,
            60,
        );
        authority.upsert_mut(Record::from_rdata(origin.clone(), 60, RData::SOA(soa)), 1);
        for record in records {
            authority.upsert_mut(record, 1);
        }
        catalog.upsert(LowerName::new(&origin), vec![Arc::new(authority)]);
    }
    catalog
}
