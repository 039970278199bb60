//! A real DNS server on loopback for the dns-check tests: hickory-server
//! in-process, authoritative for a few test zones, on 127.0.0.1 UDP and TCP
//! at one random port. And a resolver that never answers.
//!
//! Some zones are signed (DNSSEC, keys made at each start): `test.` plays
//! the root of the test world, and its key is the trust anchor the tests
//! write ([`DnsServer::anchor`]). It delegates securely (a DS record) to the
//! signed zones and insecurely (an NS record and the NSEC that proves no
//! DS) to the others, so that a validating resolver anchored at `test.`
//! finds the first secure and the second insecure, as it would under the
//! real root. A DS record lives on the parent's side of a zone cut: the
//! server's handler answers a DS question about a child zone's apex from
//! `test.`, where a single catalog would answer it from the child.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use hickory_server::authority::{AuthorityObject, Catalog, ZoneType};
use hickory_server::dnssec::NxProofKind;
use hickory_server::proto::dnssec::crypto::EcdsaSigningKey;
use hickory_server::proto::dnssec::rdata::{DNSSECRData, DNSKEY, DS};
use hickory_server::proto::dnssec::{Algorithm, DigestType, SigSigner, SigningKey};
use hickory_server::proto::rr::rdata::caa::{KeyValue, Value};
use hickory_server::proto::rr::rdata::{A, AAAA, CAA, CNAME, NS, SOA, TXT};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordSet, RecordType, RrKey};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
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

/// The address `www.broken.test`'s A record was signed with.
pub const SIGNED_A: &str = "192.0.2.40";

/// The address it is served with instead: the zone changed after signing.
pub const FORGED_A: &str = "192.0.2.66";

/// A running server; stops when dropped.
pub struct DnsServer {
    pub addr: SocketAddr,
    /// A trust anchor file anchoring validation at `test.`: its DNSKEY, as
    /// `dig` prints it.
    pub anchor: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl DnsServer {
    /// The zones (see [`zones`]) on a fresh port, served by a thread with a
    /// runtime of its own, so that any test (async or not) can query it.
    pub fn start() -> DnsServer {
        let (handler, anchor) = handler();
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
                let mut server = ServerFuture::new(handler);
                server.register_socket(tokio::net::UdpSocket::from_std(udp).expect("udp"));
                server.register_listener(
                    tokio::net::TcpListener::from_std(tcp).expect("tcp"),
                    Duration::from_secs(5),
                );
                let _ = stopped.await;
                let _ = server.shutdown_gracefully().await;
            });
        });
        DnsServer {
            addr,
            anchor,
            _stop: stop,
        }
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
///   `www.bound.test` has an A record (and no CAA of its own).
/// - `broken.test.`: signed, then changed: its CAA (letsencrypt.org when
///   signed) now names ca.example.net under the old signature, the A
///   record of `www` is [`FORGED_A`] under a signature of [`SIGNED_A`], and
///   the CAA record of `stripped` is gone while the NSEC still lists it.
/// - `test.` itself, so that climbing reaches the top-level domain and gets
///   an answer (as from a real resolver) rather than REFUSED; the parent of
///   every other zone (see the module's documentation).
///
/// `test.`, `bound.test.` and `broken.test.` are signed ([`SIGNED`]).
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
                record("www.bound.test.", RData::A(A::new(192, 0, 2, 50))),
            ],
        ),
        (
            "broken.test.",
            vec![
                record("broken.test.", issue("letsencrypt.org")),
                record("www.broken.test.", RData::A(A::from_str(SIGNED_A).unwrap())),
                record("stripped.broken.test.", issue("letsencrypt.org")),
                record("stripped.broken.test.", RData::A(A::new(192, 0, 2, 41))),
            ],
        ),
    ];
    zones[1].1.extend(many);
    zones
}

/// The zones that are signed (`test.`'s key is the anchor, and it holds
/// the others' DS records).
const SIGNED: [&str; 3] = ["test.", "bound.test.", "broken.test."];

/// The server's handler, and the trust anchor file of `test.`.
fn handler() -> (ParentSide, String) {
    let mut catalog = Catalog::new();
    let mut delegations = Vec::new();
    let mut children = Vec::new();
    let mut top = None;
    for (text, records) in zones() {
        let origin = name(text);
        let key = SIGNED.contains(&text).then(|| zone_key(&origin));
        if text == "test." {
            top = Some((origin, records, key));
            continue;
        }
        children.push(LowerName::new(&origin));
        delegations.push(record(text, RData::NS(NS(name(&format!("ns.{text}"))))));
        if let Some((_, dnskey)) = &key {
            delegations.push(ds(&origin, dnskey));
        }
        let mut authority = authority(&origin, records, key.map(|(signer, _)| signer));
        if text == "broken.test." {
            break_signatures(&mut authority);
        }
        catalog.upsert(LowerName::new(&origin), vec![Arc::new(authority)]);
    }
    let (origin, mut records, key) = top.expect("a test. zone");
    let (signer, dnskey) = key.expect("test. is signed");
    records.append(&mut delegations);
    let anchor = format!("{origin} 3600 IN DNSKEY {dnskey}\n");
    let top: Arc<dyn AuthorityObject> = Arc::new(authority(&origin, records, Some(signer)));
    catalog.upsert(LowerName::new(&origin), vec![top.clone()]);
    let mut parent = Catalog::new();
    parent.upsert(LowerName::new(&origin), vec![top]);
    let handler = ParentSide {
        catalog,
        parent,
        children,
    };
    (handler, anchor)
}

/// One zone: its SOA, `records`, and with a `signer` its DNSKEY, NSEC
/// chain and signatures.
fn authority(origin: &Name, records: Vec<Record>, signer: Option<SigSigner>) -> InMemoryAuthority {
    let proof = signer.as_ref().map(|_| NxProofKind::Nsec);
    let mut authority = InMemoryAuthority::empty(origin.clone(), ZoneType::Primary, false, proof);
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
    if let Some(signer) = signer {
        authority
            .add_zone_signing_key_mut(signer)
            .expect("add the zone's key");
        authority.secure_zone_mut().expect("sign the zone");
    }
    authority
}

/// A fresh P-256 key for `origin` (algorithm 13, as most signed zones
/// use now), and its DNSKEY as the zone publishes it.
fn zone_key(origin: &Name) -> (SigSigner, DNSKEY) {
    let algorithm = Algorithm::ECDSAP256SHA256;
    let pkcs8 = EcdsaSigningKey::generate_pkcs8(algorithm).expect("generate a zone key");
    let key = EcdsaSigningKey::from_pkcs8(&pkcs8, algorithm).expect("read the zone key");
    let dnskey = DNSKEY::from_key(&key.to_public_key().expect("its public key"));
    let week = Duration::from_secs(7 * 86400);
    let signer = SigSigner::dnssec(dnskey.clone(), Box::new(key), origin.clone(), week);
    (signer, dnskey)
}

/// The DS record of `child`'s key, for the parent's side of the cut.
/// Built by hand: the key tag must be the whole DNSKEY's (RFC 4034
/// appendix B), as RRSIGs carry it.
fn ds(child: &Name, dnskey: &DNSKEY) -> Record {
    let digest = dnskey
        .to_digest(child, DigestType::SHA256)
        .expect("the key's digest");
    let ds = DS::new(
        dnskey.calculate_key_tag().expect("the key's tag"),
        Algorithm::ECDSAP256SHA256,
        DigestType::SHA256,
        digest.as_ref().to_vec(),
    );
    Record::from_rdata(child.clone(), 300, RData::DNSSEC(DNSSECRData::DS(ds)))
}

/// `broken.test.` after signing: data changed under old signatures, and
/// a record removed whose type the NSEC still lists.
fn break_signatures(authority: &mut InMemoryAuthority) {
    let forged_caa = RData::CAA(CAA::new_issue(
        false,
        Some(name("ca.example.net")),
        Vec::new(),
    ));
    replace_data("broken.test.", RecordType::CAA, forged_caa, authority);
    let forged_a = RData::A(A::from_str(FORGED_A).unwrap());
    replace_data("www.broken.test.", RecordType::A, forged_a, authority);
    let stripped = RrKey::new(
        LowerName::new(&name("stripped.broken.test.")),
        RecordType::CAA,
    );
    authority.records_get_mut().remove(&stripped);
}

/// Serves `rdata` as the `rtype` RRset of `owner`, with the signatures
/// made over what was there.
fn replace_data(owner: &str, rtype: RecordType, rdata: RData, authority: &mut InMemoryAuthority) {
    let key = RrKey::new(LowerName::new(&name(owner)), rtype);
    let records = authority.records_get_mut();
    let signed = records.get(&key).expect("a signed RRset to change");
    let mut forged = RecordSet::new(name(owner), rtype, signed.serial());
    forged.insert(record(owner, rdata), signed.serial());
    for rrsig in signed.rrsigs() {
        forged.insert_rrsig(rrsig.clone());
    }
    records.insert(key, Arc::new(forged));
}

/// The catalog, except that a DS question about a child zone's apex is
/// answered by its parent, `test.` (RFC 4035 section 3.1.4.1), as a
/// recursive resolver would get it.
struct ParentSide {
    catalog: Catalog,
    parent: Catalog,
    children: Vec<LowerName>,
}

#[async_trait::async_trait]
impl RequestHandler for ParentSide {
    async fn handle_request<R: ResponseHandler>(
        &self,
        request: &Request,
        response_handle: R,
    ) -> ResponseInfo {
        let parents_side = request.request_info().is_ok_and(|info| {
            info.query.query_type() == RecordType::DS && self.children.contains(info.query.name())
        });
        match parents_side {
            true => self.parent.handle_request(request, response_handle).await,
            false => self.catalog.handle_request(request, response_handle).await,
        }
    }
}
