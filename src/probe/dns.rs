//! The `dns` probe: asks the check's resolvers (or those of
//! `/etc/resolv.conf`) about one name, only the record types the check
//! expects, and reports the answers as observed; `evaluate::dns` judges
//! them.
//!
//! A fresh resolver per probe: nothing is cached from one probe to the
//! next, so a deleted record is seen at the next probe, not after its TTL.
//! A name that does not exist (NXDOMAIN) or has no record of a type is an
//! answer, reported as such; only a resolver that fails (no answer,
//! SERVFAIL, REFUSED) is a `dns` probe error.
//!
//! CAA follows RFC 8659 section 3: the relevant RRset is the first
//! non-empty one found climbing from the name towards the root (the
//! resolver follows CNAMEs at each step, as the RFC asks).
//!
//! Every name and value is sanitised where it is captured: a zone is
//! written by whoever controls it, and can answer thousands of records of a
//! type (as many as fit in 64 KiB over TCP). The first [`KEPT_PER_TYPE`]
//! distinct values of each type, sorted, are kept; the rest are counted
//! (`more`). Queries carry EDNS0, so that a large answer comes over UDP
//! where the resolver allows it rather than always falling back to TCP.
//!
//! With `[check.dns] dnssec = true` the resolver is hickory's validating
//! one, anchored at the check's trust anchor: every question, each step of
//! the CAA climb included, gets a verdict (secure, insecure, bogus,
//! indeterminate) in `dnssec_answers`. hickory marks each record of an
//! answer with its proof and a denial by the proof of the SOA that comes
//! with it; a denial it cannot verify comes back as an error, which is a
//! bogus answer here, not a resolver failure: validating resolvers answer
//! SERVFAIL to it, and a CA stops its climb there and refuses to issue.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::lookup::Lookup;
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::dnssec::Proof;
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::{RData, Record, RecordType};
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::proto::ProtoErrorKind;
use hickory_resolver::{Name, ResolveError, TokioResolver};

use crate::check::{Check, DnsCheck, TrustAnchor};
use crate::outcome::{
    Assertion, CaaRecord, CaaReport, DnsReport, Dnssec, DnssecAnswer, ProbeError,
};
use crate::sanitize;

/// The part of the check's timeout the lookups may use: what is left is
/// for reporting a silent resolver as a `dns` failure (naming it) rather
/// than as the probe's generic timeout.
const LOOKUP_SHARE: f64 = 0.9;

/// Values of one record type kept in a report.
pub const KEPT_PER_TYPE: usize = 64;

pub async fn probe(check: &Check, dns: &DnsCheck) -> Result<DnsReport, ProbeError> {
    let servers = servers(dns)?;
    let mut report = DnsReport {
        query: sanitize::value(&dns.query),
        resolvers: servers.iter().map(|s| s.to_string()).collect(),
        ..DnsReport::default()
    };
    let resolver = Resolver {
        hickory: resolver(&servers, check.timeout, dns.dnssec.as_ref()),
        plain: dns
            .dnssec
            .as_ref()
            .map(|_| resolver(&servers, check.timeout, None)),
    };
    let budget = check.timeout.mul_f64(LOOKUP_SHARE);
    let mut asking = String::new();
    let observed = tokio::time::timeout(budget, observe(&resolver, dns, &mut report, &mut asking));
    match observed.await {
        Ok(Ok(())) => Ok(report),
        Ok(Err(err)) => Err(err),
        Err(_elapsed) => Err(ProbeError {
            kind: Assertion::Dns,
            message: format!(
                "no answer from {} within {} ({asking})",
                report.resolvers.join(", "),
                crate::when::std_span(budget_shown(budget))
            ),
        }),
    }
}

/// Milliseconds are noise in a message.
fn budget_shown(budget: Duration) -> Duration {
    Duration::from_millis(budget.as_millis() as u64 / 100 * 100)
}

/// The check's resolvers, else the system's (read now: a changed
/// resolv.conf applies at the next probe).
fn servers(dns: &DnsCheck) -> Result<Vec<SocketAddr>, ProbeError> {
    if let Some(resolvers) = &dns.resolvers {
        return Ok(resolvers.clone());
    }
    let (config, _) =
        hickory_resolver::system_conf::read_system_conf().map_err(|err| ProbeError {
            kind: Assertion::Dns,
            message: format!("no resolvers: cannot read /etc/resolv.conf ({err})"),
        })?;
    let mut addrs: Vec<SocketAddr> = config
        .name_servers()
        .iter()
        .map(|s| s.socket_addr)
        .collect();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(ProbeError {
            kind: Assertion::Dns,
            message: "no resolvers: /etc/resolv.conf names none".to_string(),
        });
    }
    Ok(addrs)
}

/// The probe's resolver, and when it validates, the same without.
struct Resolver {
    hickory: TokioResolver,
    /// Asked again when a validated question fails without an answer:
    /// hickory's validator drops the response code of a question the
    /// servers refused or failed (SERVFAIL, REFUSED), which this one
    /// keeps, so that the failure says what the servers said.
    plain: Option<TokioResolver>,
}

/// A stub resolver asking `servers` in order, UDP then TCP when a
/// response is truncated; no hosts file, no search domains (the query is
/// fully qualified), one attempt per server within `timeout`. With a
/// trust anchor, it validates every answer from it (asking the same
/// servers for the DNSKEY and DS records that takes).
fn resolver(
    servers: &[SocketAddr],
    timeout: Duration,
    anchor: Option<&TrustAnchor>,
) -> TokioResolver {
    let mut config = ResolverConfig::new();
    for &addr in servers {
        config.add_name_server(NameServerConfig::new(addr, Protocol::Udp));
        config.add_name_server(NameServerConfig::new(addr, Protocol::Tcp));
    }
    let mut options = ResolverOpts::default();
    options.timeout = timeout;
    options.attempts = 1;
    options.ndots = 0;
    options.use_hosts_file = ResolveHosts::Never;
    options.num_concurrent_reqs = 1;
    options.preserve_intermediates = true;
    options.cache_size = 64;
    options.edns0 = true;
    options.validate = anchor.is_some();
    let builder = TokioResolver::builder_with_config(config, TokioConnectionProvider::default())
        .with_options(options);
    match anchor {
        // hickory's default anchors are the root zone's.
        None | Some(TrustAnchor::Root) => builder.build(),
        Some(TrustAnchor::File { keys, .. }) => builder.with_trust_anchor(keys.clone()).build(),
    }
}

/// What one question got.
enum Answer {
    Records(Vec<Record>),
    /// The name does not exist.
    NxDomain,
    /// The name exists, without records of this type.
    NoData,
    /// A denial that DNSSEC validation did not accept (bogus, or
    /// indeterminate): validating resolvers answer SERVFAIL, so nothing
    /// can be read from it.
    Unproven,
}

async fn observe(
    resolver: &Resolver,
    dns: &DnsCheck,
    report: &mut DnsReport,
    asking: &mut String,
) -> Result<(), ProbeError> {
    let name = Name::from_ascii(&dns.query).map_err(|err| ProbeError {
        kind: Assertion::Dns,
        message: format!("{} is not a DNS name: {err}", report.query),
    })?;
    let expect = &dns.expect;
    if expect.cname.is_some() {
        let records = ask(resolver, &name, RecordType::CNAME, report, asking).await?;
        report.cname = records.iter().find_map(|r| match r.data() {
            RData::CNAME(target) if r.name() == &name => Some(shown_name(&target.0)),
            _ => None,
        });
    }
    if expect.a.is_some() {
        let records = ask(resolver, &name, RecordType::A, report, asking).await?;
        let a = values(&records, |d| match d {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        });
        report.a = Some(kept(report, RecordType::A, a));
    }
    if expect.aaaa.is_some() {
        let records = ask(resolver, &name, RecordType::AAAA, report, asking).await?;
        let aaaa = values(&records, |d| match d {
            RData::AAAA(a) => Some(a.0.to_string()),
            _ => None,
        });
        report.aaaa = Some(kept(report, RecordType::AAAA, aaaa));
    }
    if expect.txt_regex.is_some() {
        let records = ask(resolver, &name, RecordType::TXT, report, asking).await?;
        let txt = values(&records, |d| match d {
            // A TXT record is several strings; as in SPF and ACME, they
            // are read as one text.
            RData::TXT(txt) => Some(sanitize::value(&String::from_utf8_lossy(
                &txt.txt_data().concat(),
            ))),
            _ => None,
        });
        report.txt = Some(kept(report, RecordType::TXT, txt));
    }
    if expect.wants_caa() {
        // In the zone's order: the first ones are judged.
        let mut caa = relevant_caa(resolver, &name, report, asking).await?;
        if let Some(more) = caa
            .records
            .len()
            .checked_sub(KEPT_PER_TYPE)
            .filter(|n| *n > 0)
        {
            report.more.insert(RecordType::CAA.to_string(), more as u64);
            caa.records.truncate(KEPT_PER_TYPE);
        }
        report.caa = Some(caa);
    }
    // Only `exists = false` is expected: whether the name exists is all
    // there is to ask (NXDOMAIN answers every type alike).
    if !expect.exists {
        ask(resolver, &name, RecordType::A, report, asking).await?;
    }
    Ok(())
}

/// Asks one question; NXDOMAIN is noted in the report (it is the answer
/// to every type).
async fn ask(
    resolver: &Resolver,
    name: &Name,
    record_type: RecordType,
    report: &mut DnsReport,
    asking: &mut String,
) -> Result<Vec<Record>, ProbeError> {
    match lookup(resolver, name, record_type, report, asking).await? {
        Answer::Records(records) => Ok(records),
        Answer::NxDomain => {
            report.nxdomain = true;
            Ok(Vec::new())
        }
        Answer::NoData | Answer::Unproven => Ok(Vec::new()),
    }
}

/// Asks one question; when validating, notes what DNSSEC made of the
/// answer in `report`.
async fn lookup(
    resolver: &Resolver,
    name: &Name,
    record_type: RecordType,
    report: &mut DnsReport,
    asking: &mut String,
) -> Result<Answer, ProbeError> {
    *asking = format!("asking {record_type} {}", shown_name(name));
    let validating = resolver.plain.is_some();
    let result = resolver.hickory.lookup(name.clone(), record_type).await;
    if validating {
        if let Some(verdict) = verdict(&result) {
            note(report, record_type, name, verdict);
        }
    }
    let err = match result {
        Ok(lookup) => return Ok(Answer::Records(lookup.records().to_vec())),
        Err(err) => err,
    };
    let failure = classify(&err, record_type, name, validating);
    let (Err(_), Some(plain)) = (&failure, &resolver.plain) else {
        return failure;
    };
    match plain.lookup(name.clone(), record_type).await {
        Err(theirs) => match classify(&theirs, record_type, name, validating) {
            // The servers' own failure (SERVFAIL, REFUSED), as they gave it.
            Err(failure) => Err(failure),
            Ok(_) => Err(unvalidated(&err, record_type, name)),
        },
        Ok(_) => Err(unvalidated(&err, record_type, name)),
    }
}

/// The servers answered, and validation failed without a verdict.
fn unvalidated(err: &ResolveError, record_type: RecordType, name: &Name) -> ProbeError {
    ProbeError {
        kind: Assertion::Dns,
        message: format!(
            "cannot validate the answer to {record_type} {} by DNSSEC: {}",
            shown_name(name),
            sanitize::message(&err.to_string())
        ),
    }
}

/// What DNSSEC validation made of an answer: the weakest proof of its
/// records (CNAMEs on the way included), or for a denial the proof of the
/// SOA that came with it (hickory only returns a denial whose NSEC proof
/// it accepted, or one from a zone it proved unsigned). `None` when there
/// was no answer to judge (a resolver failure).
fn verdict(result: &Result<Lookup, ResolveError>) -> Option<Dnssec> {
    let err = match result {
        Ok(lookup) => {
            let proofs = lookup.records().iter().map(|r| dnssec(r.proof()));
            return proofs
                .reduce(Dnssec::weakest)
                .or(Some(Dnssec::Indeterminate));
        }
        Err(err) => err,
    };
    match err.proto()?.kind() {
        ProtoErrorKind::NoRecordsFound {
            response_code: ResponseCode::NXDomain | ResponseCode::NoError,
            soa,
            ..
        } => Some(
            soa.as_ref()
                .map_or(Dnssec::Indeterminate, |s| dnssec(s.proof())),
        ),
        ProtoErrorKind::Nsec { proof, .. } => Some(dnssec(*proof)),
        _ => None,
    }
}

fn dnssec(proof: Proof) -> Dnssec {
    match proof {
        Proof::Secure => Dnssec::Secure,
        Proof::Insecure => Dnssec::Insecure,
        Proof::Bogus => Dnssec::Bogus,
        Proof::Indeterminate => Dnssec::Indeterminate,
    }
}

/// Adds a question's verdict to the report, and to its weakest.
fn note(report: &mut DnsReport, record_type: RecordType, name: &Name, verdict: Dnssec) {
    report.dnssec_answers.push(DnssecAnswer {
        record_type: record_type.to_string(),
        name: shown_name(name),
        dnssec: verdict,
    });
    report.dnssec = Some(report.dnssec.map_or(verdict, |d| d.weakest(verdict)));
}

/// A negative answer is an answer; anything else means the resolvers
/// could not say.
fn classify(
    err: &ResolveError,
    record_type: RecordType,
    name: &Name,
    validating: bool,
) -> Result<Answer, ProbeError> {
    if let Some(proto) = err.proto() {
        match proto.kind() {
            ProtoErrorKind::NoRecordsFound { response_code, .. } => match *response_code {
                ResponseCode::NXDomain => return Ok(Answer::NxDomain),
                ResponseCode::NoError => return Ok(Answer::NoData),
                code => {
                    // A resolver that validates itself answers SERVFAIL
                    // to what fails validation, before vigie sees it.
                    let hint = match (validating, code) {
                        (true, ResponseCode::ServFail) => " (a resolver that validates DNSSEC itself answers so to a bogus answer too)",
                        _ => "",
                    };
                    return Err(ProbeError {
                        kind: Assertion::Dns,
                        message: format!(
                            "the resolver answered {code} to {record_type} {}{hint}",
                            shown_name(name)
                        ),
                    });
                }
            },
            // A denial from a zone validation proved unsigned is one.
            ProtoErrorKind::Nsec {
                proof: Proof::Insecure,
                ..
            } => return Ok(Answer::NoData),
            ProtoErrorKind::Nsec { .. } => return Ok(Answer::Unproven),
            _ => {}
        }
    }
    Err(ProbeError {
        kind: Assertion::Dns,
        message: format!(
            "cannot resolve {record_type} {}: {}",
            shown_name(name),
            sanitize::message(&err.to_string())
        ),
    })
}

/// RFC 8659 section 3: the CAA RRset of the name, else of its parent, and
/// so on up to (not including) the root. The name itself not existing is
/// noted in `report` (the parent's CAA would otherwise make it look fine).
/// A step whose denial fails validation ends the climb, as it ends a CA's:
/// what is above it does not count.
async fn relevant_caa(
    resolver: &Resolver,
    name: &Name,
    report: &mut DnsReport,
    asking: &mut String,
) -> Result<CaaReport, ProbeError> {
    let mut at = name.clone();
    while !at.is_root() {
        let answer = lookup(resolver, &at, RecordType::CAA, report, asking).await?;
        if matches!(answer, Answer::NxDomain) && at == *name {
            report.nxdomain = true;
        }
        if matches!(answer, Answer::Unproven) {
            break;
        }
        if let Answer::Records(records) = answer {
            let caa: Vec<CaaRecord> = records
                .iter()
                .filter_map(|r| match r.data() {
                    RData::CAA(caa) => Some(CaaRecord {
                        flags: caa.flags(),
                        tag: sanitize::value(&caa.tag().as_str().to_ascii_lowercase()),
                        value: caa_value(caa.raw_value()),
                    }),
                    _ => None,
                })
                .collect();
            if !caa.is_empty() {
                return Ok(CaaReport {
                    domain: Some(shown_name(&at)),
                    records: caa,
                });
            }
        }
        at = at.base_name();
    }
    Ok(CaaReport::default())
}

/// A CAA value as kept. A tab is whitespace to RFC 8659's grammar, as a
/// space is, but sanitising would escape it to the two characters `\t`,
/// which the judgment could no longer read as whitespace: it is kept as a
/// space.
fn caa_value(raw: &[u8]) -> String {
    sanitize::value(&String::from_utf8_lossy(raw).replace('\t', " "))
}

/// The first [`KEPT_PER_TYPE`] of `values` (sorted and distinct), the
/// others counted in the report's `more`.
fn kept(report: &mut DnsReport, record_type: RecordType, mut values: Vec<String>) -> Vec<String> {
    if values.len() > KEPT_PER_TYPE {
        let more = values.len() - KEPT_PER_TYPE;
        report.more.insert(record_type.to_string(), more as u64);
        values.truncate(KEPT_PER_TYPE);
    }
    values
}

/// Distinct values, sorted.
fn values(records: &[Record], pick: impl Fn(&RData) -> Option<String>) -> Vec<String> {
    let mut values: Vec<String> = records.iter().filter_map(|r| pick(r.data())).collect();
    values.sort();
    values.dedup();
    values
}

/// A name as shown: fully qualified, lower-case, sanitised.
fn shown_name(name: &Name) -> String {
    let mut text = name.to_ascii().to_ascii_lowercase();
    if !text.ends_with('.') {
        text.push('.');
    }
    sanitize::value(&text)
}
