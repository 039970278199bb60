//! The stored form of an [`Outcome`]: a compact, versioned binary record
//! (format byte, then postcard), plus the certificate chain it refers to.
//!
//! `Outcome`'s serde attributes are made for JSON (`skip_serializing_if`,
//! internally tagged enums), which a non-self-describing format like
//! postcard cannot read back, so the record has its own types here, with
//! conversions both ways. What a record leaves out and where it is instead
//! is described in the key layout of `format/mod.rs`: the name (key), the
//! chain (`chains` tree) and the check's recurring strings (its dictionary).
//!
//! A `results` value is either one record (first byte [`RECORD_FORMAT`])
//! or a block of consecutive records of one check, keyed by its first
//! result: a fixed header (count, last result's unix millis, uncompressed
//! length) then the records compressed. Blocks are written column-wise
//! (`columns.rs`, format byte 5); schema 3's blocks ([`BLOCK_FORMAT`],
//! read here) were LZ4 of the records, each as postcard (millis after the
//! key, record), back to back: about 25 bytes of key and value a result
//! in blocks of 20 (`benches/store.rs`), against some 70 for a lone
//! record and under 10 column-wise in blocks of 120.
//!
//! This file is the on-disk format. Field order, enum variant order and the
//! codes in the `*_code` functions are part of it: add variants and fields
//! only at the end of a new format version (bump [`RECORD_FORMAT`] and keep
//! a reader for the old one), never renumber.
//!
//! Facts added after version 1 (the `dns` and `upload` reports) travel as
//! *extensions*: a record that has some is written as format
//! [`RECORD_FORMAT_EXT`] (the version-1 record, then a list of
//! [`Extension`]s), and a block holding one as [`BLOCK_FORMAT_EXT`]. A
//! record without extensions is still written as version 1, so results of
//! the older kinds stay readable by an older vigie. New facts append a
//! variant to [`Extension`]; nothing is renumbered.
//!
//! It knows nothing of sled: the backend supplies the dictionary (through
//! the `intern` callback and the `strings` slice) and the chain bytes.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::keys::ChainKey;
use crate::cert::CertInfo;
use crate::check::KindName;
use crate::outcome::{
    Assertion, CaaRecord, CaaReport, CorsReport, DeniedOrigin, DnsReport, Dnssec, DnssecAnswer,
    DomainReport, Failure, HttpReport, Outcome, ProbeError, S3Error, Status, TlsReport,
    UploadReport, UploadStep, VerifyError,
};

/// First byte of every result value.
pub(in crate::store) const RECORD_FORMAT: u8 = 1;
/// First byte of a `results` value holding a block of records.
pub(in crate::store) const BLOCK_FORMAT: u8 = 2;
/// First byte of a record with extensions.
pub(in crate::store) const RECORD_FORMAT_EXT: u8 = 3;
/// First byte of a block whose records carry (possibly empty) extensions.
pub(in crate::store) const BLOCK_FORMAT_EXT: u8 = 4;
/// First byte of a column-wise block (`format/columns.rs`).
pub(in crate::store) const BLOCK_FORMAT_COLUMNS: u8 = 5;
/// First byte of every chain value.
pub(in crate::store) const CHAIN_FORMAT: u8 = 1;

/// Format byte, count (u32 BE), last millis (u64 BE), raw length (u32 BE).
pub(super) const BLOCK_HEADER: usize = 1 + 4 + 8 + 4;
/// No block is ever this large uncompressed: a damaged length is refused
/// before it is allocated.
const BLOCK_MAX_RAW: usize = 64 << 20;

/// A string a check sees again and again, or a one-off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(in crate::store) enum Str {
    /// Index into the check's dictionary.
    Dict(u32),
    Inline(String),
}

/// Why bytes could not be read back as a record or chain.
#[derive(Debug)]
pub(in crate::store) struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One outcome, ready to store.
pub(in crate::store) struct Encoded {
    pub value: Vec<u8>,
    pub chain: Option<EncodedChain>,
}

/// A chain as stored in `chains`, and its key.
#[derive(Clone)]
pub(in crate::store) struct EncodedChain {
    pub key: ChainKey,
    pub bytes: Vec<u8>,
}

/// A record read back, waiting for its dictionary and chain.
pub(in crate::store) struct Decoded(pub(super) Full);

/// Is this `results` value a lone record (of either format)?
pub(in crate::store) fn is_single(value: &[u8]) -> bool {
    matches!(value.first(), Some(&RECORD_FORMAT | &RECORD_FORMAT_EXT))
}

/// Is this `results` value a block (of any format)?
pub(in crate::store) fn is_block(value: &[u8]) -> bool {
    matches!(
        value.first(),
        Some(&BLOCK_FORMAT | &BLOCK_FORMAT_EXT | &BLOCK_FORMAT_COLUMNS)
    )
}

/// How many results a `results` value holds and when the last started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) struct Span {
    pub count: u64,
    pub last: u64,
}

/// One certificate of a stored chain: [`CertInfo`] without `days_left`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(in crate::store) struct StoredCert {
    subject: String,
    issuer: String,
    not_before: Time,
    not_after: Time,
    sans: Vec<String>,
    serial: String,
    sha256: String,
    key: String,
    signature: String,
}

// ---- the format (version 1) ----

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    kind: u8,
    target: Str,
    status: u8,
    duration_ms: f64,
    failures: Vec<StoredFailure>,
    probe_error: Option<StoredProbeError>,
    http: Option<StoredHttp>,
    tls: Option<StoredTls>,
    cors: Option<StoredCors>,
}

/// A record and its extensions (formats 3 and 4; empty for 1 and 2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Full {
    base: Record,
    ext: Vec<Extension>,
}

/// The fields of a record that change from one result to the next, taken
/// out of it so that a block stores the rest (its *shape*) once for every
/// result that shares it (`format/columns.rs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Varying {
    pub duration_ms: f64,
    /// With the HTTP facts: the response time and the body's size.
    pub http: Option<(f64, u64)>,
    /// One per certificate of the chain.
    pub days_left: Vec<i64>,
}

impl Full {
    /// This record with its varying fields zeroed (a certificate's
    /// `days_left` kept as a 0, so that the shape still says how many),
    /// and those fields.
    pub(super) fn split(mut self) -> (Full, Varying) {
        let mut varying = Varying {
            duration_ms: std::mem::take(&mut self.base.duration_ms),
            ..Varying::default()
        };
        if let Some(http) = self.base.http.as_mut() {
            varying.http = Some((
                std::mem::take(&mut http.response_ms),
                std::mem::take(&mut http.body_bytes),
            ));
        }
        if let Some(tls) = self.base.tls.as_mut() {
            varying.days_left = tls.days_left.clone();
            tls.days_left.iter_mut().for_each(|days| *days = 0);
        }
        (self, varying)
    }

    /// Whether the shape has HTTP facts, and how many certificates: which
    /// columns hold a value for a result of this shape.
    pub(super) fn varying_slots(&self) -> (bool, usize) {
        (
            self.base.http.is_some(),
            self.base.tls.as_ref().map_or(0, |tls| tls.days_left.len()),
        )
    }

    /// A shape with its varying fields put back, in place (the inverse of
    /// [`Full::split`]; `days_left` is as long as the shape's).
    pub(super) fn join(&mut self, duration_ms: f64, http: Option<(f64, u64)>, days_left: &[i64]) {
        self.base.duration_ms = duration_ms;
        if let (Some(stored), Some((response_ms, body_bytes))) = (self.base.http.as_mut(), http) {
            stored.response_ms = response_ms;
            stored.body_bytes = body_bytes;
        }
        if let Some(tls) = self.base.tls.as_mut() {
            tls.days_left.copy_from_slice(days_left);
        }
    }
}

/// Facts added after version 1. Variant order is format: append only.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Extension {
    Dns(StoredDns),
    Upload(StoredUpload),
    /// The TLS report's negotiated key exchange group.
    KeyExchange(Str),
    /// A domain check's registration (`kind = "domain"`).
    Domain(StoredDomain),
    /// The dns report's DNSSEC verdicts (`[check.dns] dnssec = true`).
    Dnssec(StoredDnssec),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredDnssec {
    /// [`dnssec_code`] of the weakest verdict.
    weakest: u8,
    /// Record type, name, [`dnssec_code`].
    answers: Vec<(Str, Str, u8)>,
}

/// A [`DomainReport`]: the registry's words are interned (they repeat
/// from one probe to the next until the next query).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredDomain {
    domain: Str,
    rdap_url: Option<Str>,
    expires_at: Option<Time>,
    last_changed: Option<Time>,
    registrar: Option<Str>,
    statuses: Vec<Str>,
    not_found: bool,
    no_service: bool,
    answered_at: Option<Time>,
    queried_at: Option<Time>,
    next_query_at: Option<Time>,
    queried: bool,
    error: Option<Str>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredUpload {
    key: String,
    /// [`step_code`].
    step: u8,
    ok: bool,
    preflight: Option<StoredCors>,
    put_status: Option<u16>,
    allow_origin: Option<Str>,
    expose_headers: Vec<Str>,
    delete_status: Option<u16>,
    /// Code, message.
    error: Option<(Str, String)>,
    reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredDns {
    query: Str,
    resolvers: Vec<Str>,
    nxdomain: bool,
    cname: Option<Str>,
    a: Option<Vec<Str>>,
    aaaa: Option<Vec<Str>>,
    txt: Option<Vec<Str>>,
    caa: Option<StoredCaa>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredCaa {
    domain: Option<Str>,
    /// flags, tag, value.
    records: Vec<(u8, Str, Str)>,
}

/// Failures change with what was observed: stored inline.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredFailure {
    assertion: u8,
    expected: String,
    observed: String,
    message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredProbeError {
    kind: u8,
    message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredHttp {
    status: u16,
    version: Str,
    redirects: u32,
    final_url: Option<Str>,
    response_ms: f64,
    body_bytes: u64,
    body_truncated: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredTls {
    server_name: Str,
    version: Option<Str>,
    cipher_suite: Option<Str>,
    trusted: bool,
    verify_error: Option<StoredVerifyError>,
    hostname_matches: bool,
    /// `None` when no certificate was presented.
    chain: Option<ChainKey>,
    /// Per certificate of the chain, as the probe computed it: the probe's
    /// "now" is taken after the handshake, not at `started_at`, so it cannot
    /// be recomputed exactly from the key.
    days_left: Vec<i64>,
}

/// Variant order is format: append only.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum StoredVerifyError {
    Expired(Time),
    NotYetValid(Time),
    HostnameMismatch { expected: Str, covered: Vec<Str> },
    SelfSigned(Str),
    StagingIssuer(Str),
    ChainIncomplete(Str),
    UnknownIssuer(Str),
    Other(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredCors {
    preflight_status: u16,
    allow_origin: Option<Str>,
    allow_methods: Vec<Str>,
    allow_headers: Vec<Str>,
    allow_credentials: Option<bool>,
    expose_headers: Vec<Str>,
    max_age: Option<u64>,
    vary: Option<Str>,
    refusal: Option<String>,
    location: Option<Str>,
    denied: Vec<StoredDenied>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredDenied {
    origin: Str,
    admitted: bool,
    allow_origin: Option<Str>,
}

/// An instant as unix seconds and nanoseconds (always read back in UTC).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Time {
    secs: i64,
    nanos: u32,
}

// ---- encoding ----

/// Encodes `outcome`; `intern` turns a recurring string into a [`Str`].
pub(in crate::store) fn encode(outcome: &Outcome, intern: &mut dyn FnMut(&str) -> Str) -> Encoded {
    let (full, chain) = full_record(outcome, intern, &mut |chain| encode_chain(chain));
    let value = match full.ext.is_empty() {
        true => to_bytes(RECORD_FORMAT, &full.base),
        false => to_bytes(RECORD_FORMAT_EXT, &full),
    };
    Encoded { value, chain }
}

/// What [`encode`] gives, read back ([`Decoded::parse`] of its value),
/// without the bytes in between; `chain_of` stands for [`encode_chain`]
/// (a caller that sees the same chain over and over keeps its encoding).
pub(in crate::store) fn decoded(
    outcome: &Outcome,
    intern: &mut dyn FnMut(&str) -> Str,
    chain_of: &mut dyn FnMut(&[CertInfo]) -> EncodedChain,
) -> (Decoded, Option<EncodedChain>) {
    let (full, chain) = full_record(outcome, intern, chain_of);
    (Decoded(full), chain)
}

/// The record of `outcome` and its chain.
fn full_record(
    outcome: &Outcome,
    intern: &mut dyn FnMut(&str) -> Str,
    chain_of: &mut dyn FnMut(&[CertInfo]) -> EncodedChain,
) -> (Full, Option<EncodedChain>) {
    let (tls, chain) = match &outcome.tls {
        Some(tls) => {
            let (stored, chain) = stored_tls(tls, intern, chain_of);
            (Some(stored), chain)
        }
        None => (None, None),
    };
    let record = Record {
        kind: kind_code(outcome.kind),
        target: intern(&outcome.target),
        status: status_code(outcome.status),
        duration_ms: outcome.duration_ms,
        failures: outcome.failures.iter().map(stored_failure).collect(),
        probe_error: outcome.probe_error.as_ref().map(|err| StoredProbeError {
            kind: assertion_code(err.kind),
            message: err.message.clone(),
        }),
        http: outcome.http.as_ref().map(|http| stored_http(http, intern)),
        tls,
        cors: outcome.cors.as_ref().map(|cors| stored_cors(cors, intern)),
    };
    let mut ext = Vec::new();
    if let Some(dns) = &outcome.dns {
        ext.push(Extension::Dns(stored_dns(dns, intern)));
        if let Some(weakest) = dns.dnssec {
            ext.push(Extension::Dnssec(StoredDnssec {
                weakest: dnssec_code(weakest),
                answers: dns
                    .dnssec_answers
                    .iter()
                    .map(|a| {
                        (
                            intern(&a.record_type),
                            intern(&a.name),
                            dnssec_code(a.dnssec),
                        )
                    })
                    .collect(),
            }));
        }
    }
    if let Some(upload) = &outcome.upload {
        ext.push(Extension::Upload(stored_upload(upload, intern)));
    }
    if let Some(group) = outcome.tls.as_ref().and_then(|t| t.key_exchange.as_deref()) {
        ext.push(Extension::KeyExchange(intern(group)));
    }
    if let Some(domain) = &outcome.domain {
        ext.push(Extension::Domain(stored_domain(domain, intern)));
    }
    (Full { base: record, ext }, chain)
}

fn stored_domain(domain: &DomainReport, intern: &mut dyn FnMut(&str) -> Str) -> StoredDomain {
    StoredDomain {
        domain: intern(&domain.domain),
        rdap_url: domain.rdap_url.as_deref().map(&mut *intern),
        expires_at: domain.expires_at.map(Time::of),
        last_changed: domain.last_changed.map(Time::of),
        registrar: domain.registrar.as_deref().map(&mut *intern),
        statuses: domain.statuses.iter().map(|s| intern(s)).collect(),
        not_found: domain.not_found,
        no_service: domain.no_service,
        answered_at: domain.answered_at.map(Time::of),
        queried_at: domain.queried_at.map(Time::of),
        next_query_at: domain.next_query_at.map(Time::of),
        queried: domain.queried,
        error: domain.error.as_deref().map(&mut *intern),
    }
}

fn domain_from(domain: StoredDomain, strings: &[String]) -> Result<DomainReport, DecodeError> {
    let time = |t: Option<Time>| t.map(Time::to_datetime).transpose();
    Ok(DomainReport {
        domain: resolve(domain.domain, strings)?,
        rdap_url: resolve_opt(domain.rdap_url, strings)?,
        expires_at: time(domain.expires_at)?,
        last_changed: time(domain.last_changed)?,
        registrar: resolve_opt(domain.registrar, strings)?,
        statuses: resolve_all(domain.statuses, strings)?,
        not_found: domain.not_found,
        no_service: domain.no_service,
        answered_at: time(domain.answered_at)?,
        queried_at: time(domain.queried_at)?,
        next_query_at: time(domain.next_query_at)?,
        queried: domain.queried,
        error: resolve_opt(domain.error, strings)?,
    })
}

fn stored_upload(upload: &UploadReport, intern: &mut dyn FnMut(&str) -> Str) -> StoredUpload {
    StoredUpload {
        // Unique per probe: interning it would only grow the dictionary.
        key: upload.key.clone(),
        step: step_code(upload.step),
        ok: upload.ok,
        preflight: upload.preflight.as_ref().map(|c| stored_cors(c, intern)),
        put_status: upload.put_status,
        allow_origin: upload.allow_origin.as_deref().map(&mut *intern),
        expose_headers: upload.expose_headers.iter().map(|h| intern(h)).collect(),
        delete_status: upload.delete_status,
        error: upload
            .error
            .as_ref()
            .map(|e| (intern(&e.code), e.message.clone())),
        reason: upload.reason.clone(),
    }
}

fn stored_dns(dns: &DnsReport, intern: &mut dyn FnMut(&str) -> Str) -> StoredDns {
    let mut list = |items: &Option<Vec<String>>| {
        items
            .as_ref()
            .map(|items| items.iter().map(|s| intern(s)).collect::<Vec<_>>())
    };
    let (a, aaaa, txt) = (list(&dns.a), list(&dns.aaaa), list(&dns.txt));
    StoredDns {
        query: intern(&dns.query),
        resolvers: dns.resolvers.iter().map(|r| intern(r)).collect(),
        nxdomain: dns.nxdomain,
        cname: dns.cname.as_deref().map(&mut *intern),
        a,
        aaaa,
        txt,
        caa: dns.caa.as_ref().map(|caa| StoredCaa {
            domain: caa.domain.as_deref().map(&mut *intern),
            records: caa
                .records
                .iter()
                .map(|r| (r.flags, intern(&r.tag), intern(&r.value)))
                .collect(),
        }),
    }
}

/// Postcard into a Vec after a format byte. Serialising these plain structs
/// into a growable buffer cannot fail: postcard only errors on serde
/// features they do not use (maps with unknown length, `serialize_any`) or
/// on a full fixed-size buffer.
fn to_bytes<T: Serialize>(format: u8, value: &T) -> Vec<u8> {
    postcard::to_extend(value, vec![format]).expect("postcard into a Vec cannot fail")
}

fn stored_failure(failure: &Failure) -> StoredFailure {
    StoredFailure {
        assertion: assertion_code(failure.assertion),
        expected: failure.expected.clone(),
        observed: failure.observed.clone(),
        message: failure.message.clone(),
    }
}

fn stored_http(http: &HttpReport, intern: &mut dyn FnMut(&str) -> Str) -> StoredHttp {
    StoredHttp {
        status: http.status,
        version: intern(&http.version),
        redirects: http.redirects,
        final_url: http.final_url.as_deref().map(&mut *intern),
        response_ms: http.response_ms,
        body_bytes: http.body_bytes,
        body_truncated: http.body_truncated,
    }
}

fn stored_tls(
    tls: &TlsReport,
    intern: &mut dyn FnMut(&str) -> Str,
    chain_of: &mut dyn FnMut(&[CertInfo]) -> EncodedChain,
) -> (StoredTls, Option<EncodedChain>) {
    let chain = (!tls.chain.is_empty()).then(|| chain_of(&tls.chain));
    let stored = StoredTls {
        server_name: intern(&tls.server_name),
        version: tls.version.as_deref().map(&mut *intern),
        cipher_suite: tls.cipher_suite.as_deref().map(&mut *intern),
        trusted: tls.trusted,
        verify_error: tls
            .verify_error
            .as_ref()
            .map(|err| stored_verify_error(err, intern)),
        hostname_matches: tls.hostname_matches,
        chain: chain.as_ref().map(|chain| chain.key),
        days_left: tls.chain.iter().map(|cert| cert.days_left).collect(),
    };
    (stored, chain)
}

/// A chain as `chains` stores it, and its key.
pub(in crate::store) fn encode_chain(chain: &[CertInfo]) -> EncodedChain {
    let certs: Vec<StoredCert> = chain.iter().map(stored_cert).collect();
    let bytes = to_bytes(CHAIN_FORMAT, &certs);
    let digest = Sha256::digest(&bytes);
    let mut key = ChainKey::default();
    key.copy_from_slice(&digest[..16]);
    EncodedChain { key, bytes }
}

fn stored_cert(cert: &CertInfo) -> StoredCert {
    StoredCert {
        subject: cert.subject.clone(),
        issuer: cert.issuer.clone(),
        not_before: Time::of(cert.not_before),
        not_after: Time::of(cert.not_after),
        sans: cert.sans.clone(),
        serial: cert.serial.clone(),
        sha256: cert.sha256.clone(),
        key: cert.key.clone(),
        signature: cert.signature.clone(),
    }
}

fn stored_verify_error(
    err: &VerifyError,
    intern: &mut dyn FnMut(&str) -> Str,
) -> StoredVerifyError {
    match err {
        VerifyError::Expired { not_after } => StoredVerifyError::Expired(Time::of(*not_after)),
        VerifyError::NotYetValid { not_before } => {
            StoredVerifyError::NotYetValid(Time::of(*not_before))
        }
        VerifyError::HostnameMismatch { expected, covered } => {
            StoredVerifyError::HostnameMismatch {
                expected: intern(expected),
                covered: covered.iter().map(|name| intern(name)).collect(),
            }
        }
        VerifyError::SelfSigned { subject } => StoredVerifyError::SelfSigned(intern(subject)),
        VerifyError::StagingIssuer { issuer } => StoredVerifyError::StagingIssuer(intern(issuer)),
        VerifyError::ChainIncomplete { missing_issuer } => {
            StoredVerifyError::ChainIncomplete(intern(missing_issuer))
        }
        VerifyError::UnknownIssuer { issuer } => StoredVerifyError::UnknownIssuer(intern(issuer)),
        VerifyError::Other { detail } => StoredVerifyError::Other(detail.clone()),
    }
}

fn stored_cors(cors: &CorsReport, intern: &mut dyn FnMut(&str) -> Str) -> StoredCors {
    let mut list = |items: &[String]| items.iter().map(|item| intern(item)).collect::<Vec<_>>();
    let allow_methods = list(&cors.allow_methods);
    let allow_headers = list(&cors.allow_headers);
    let expose_headers = list(&cors.expose_headers);
    StoredCors {
        preflight_status: cors.preflight_status,
        allow_origin: cors.allow_origin.as_deref().map(&mut *intern),
        allow_methods,
        allow_headers,
        allow_credentials: cors.allow_credentials,
        expose_headers,
        max_age: cors.max_age,
        vary: cors.vary.as_deref().map(&mut *intern),
        refusal: cors.refusal.clone(),
        location: cors.location.as_deref().map(&mut *intern),
        denied: cors
            .denied
            .iter()
            .map(|denied| StoredDenied {
                origin: intern(&denied.origin),
                admitted: denied.admitted,
                allow_origin: denied.allow_origin.as_deref().map(&mut *intern),
            })
            .collect(),
    }
}

/// A block as schema 3 wrote it (formats 2 and 4: the records one after
/// the other, LZ4): kept for the tests that build an older store.
#[cfg(test)]
pub(in crate::store) fn encode_row_block(results: &[(u64, Decoded)]) -> Vec<u8> {
    let base = results.first().map_or(0, |(millis, _)| *millis);
    let last = results.last().map_or(0, |(millis, _)| *millis);
    let extended = results.iter().any(|(_, d)| !d.0.ext.is_empty());
    let mut raw = Vec::new();
    for (millis, decoded) in results {
        // As in `to_bytes`: postcard into a Vec cannot fail.
        raw = match extended {
            true => postcard::to_extend(&(millis - base, &decoded.0), raw),
            false => postcard::to_extend(&(millis - base, &decoded.0.base), raw),
        }
        .expect("postcard into a Vec cannot fail");
    }
    let packed = lz4_flex::block::compress(&raw);
    let format = match extended {
        true => BLOCK_FORMAT_EXT,
        false => BLOCK_FORMAT,
    };
    let mut value = write_header(format, results.len(), last, raw.len(), packed.len());
    value.extend_from_slice(&packed);
    value
}

/// A block's header, in a buffer with room for the `packed` bytes that
/// follow it.
pub(super) fn write_header(
    format: u8,
    count: usize,
    last: u64,
    raw: usize,
    packed: usize,
) -> Vec<u8> {
    let mut value = Vec::with_capacity(BLOCK_HEADER + packed);
    value.push(format);
    value.extend_from_slice(&(count as u32).to_be_bytes());
    value.extend_from_slice(&last.to_be_bytes());
    value.extend_from_slice(&(raw as u32).to_be_bytes());
    value
}

// ---- decoding ----

/// The span of a `results` value stored under `key_millis`, from its header
/// only (nothing is decompressed).
pub(in crate::store) fn span(key_millis: u64, value: &[u8]) -> Result<Span, DecodeError> {
    match value.first() {
        Some(&RECORD_FORMAT | &RECORD_FORMAT_EXT) => Ok(Span {
            count: 1,
            last: key_millis,
        }),
        Some(&BLOCK_FORMAT | &BLOCK_FORMAT_EXT | &BLOCK_FORMAT_COLUMNS) => {
            block_header(value).map(|(count, last, _)| Span { count, last })
        }
        _ => Err(entry_format_error(value)),
    }
}

/// The results of a row block (formats 2 and 4), appended to `results`;
/// `raw` is the caller's buffer for the decompressed records.
pub(super) fn read_row_block(
    key_millis: u64,
    value: &[u8],
    raw: &mut Vec<u8>,
    results: &mut Vec<(u64, Decoded)>,
) -> Result<(), DecodeError> {
    let (count, last, raw_len) = block_header(value)?;
    raw.resize(raw_len, 0);
    let written = lz4_flex::block::decompress_into(&value[BLOCK_HEADER..], raw)
        .map_err(|err| DecodeError(format!("block does not decompress: {err}")))?;
    let extended = value[0] == BLOCK_FORMAT_EXT;
    let mut rest = &raw[..written];
    while !rest.is_empty() {
        let undecodable =
            |err: postcard::Error| DecodeError(format!("block does not decode: {err}"));
        let ((offset, record), tail): ((u64, Full), _) = match extended {
            true => postcard::take_from_bytes(rest).map_err(undecodable)?,
            false => {
                let ((offset, base), tail): ((u64, Record), _) =
                    postcard::take_from_bytes(rest).map_err(undecodable)?;
                (
                    (
                        offset,
                        Full {
                            base,
                            ext: Vec::new(),
                        },
                    ),
                    tail,
                )
            }
        };
        let millis = key_millis.saturating_add(offset);
        if results
            .last()
            .is_some_and(|(previous, _)| *previous >= millis)
        {
            return Err(DecodeError(format!(
                "block results out of order at {millis}"
            )));
        }
        results.push((millis, Decoded(record)));
        rest = tail;
    }
    let consistent = written == raw_len
        && results.len() as u64 == count
        && results.last().map(|(millis, _)| *millis) == Some(last);
    if !consistent {
        return Err(DecodeError(format!(
            "block header says {count} results up to {last}, its contents disagree"
        )));
    }
    Ok(())
}

/// (count, last millis, raw length) of a block value.
pub(super) fn block_header(value: &[u8]) -> Result<(u64, u64, usize), DecodeError> {
    let header = value
        .get(1..BLOCK_HEADER)
        .ok_or_else(|| DecodeError(format!("block of {} bytes has no header", value.len())))?;
    let count = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let mut last = [0; 8];
    last.copy_from_slice(&header[4..12]);
    let raw_len = u32::from_be_bytes([header[12], header[13], header[14], header[15]]) as usize;
    if raw_len > BLOCK_MAX_RAW {
        return Err(DecodeError(format!(
            "block claims {raw_len} bytes uncompressed"
        )));
    }
    Ok((u64::from(count), u64::from_be_bytes(last), raw_len))
}

pub(super) fn entry_format_error(value: &[u8]) -> DecodeError {
    match value.first() {
        None => DecodeError("empty result value".into()),
        Some(&found) if found > BLOCK_FORMAT_COLUMNS => DecodeError(format!(
            "result value format {found} is newer than this vigie reads ({BLOCK_FORMAT_COLUMNS})"
        )),
        Some(&found) => DecodeError(format!("result value format {found} is unknown")),
    }
}

impl Decoded {
    /// Reads a result value; the chain and strings are resolved later.
    pub fn parse(value: &[u8]) -> Result<Decoded, DecodeError> {
        match value.first() {
            Some(&RECORD_FORMAT_EXT) => {
                from_bytes(RECORD_FORMAT_EXT, "result record", value).map(Decoded)
            }
            _ => from_bytes(RECORD_FORMAT, "result record", value).map(|base| {
                Decoded(Full {
                    base,
                    ext: Vec::new(),
                })
            }),
        }
    }

    /// The chain this record refers to, if any.
    pub fn chain_key(&self) -> Option<ChainKey> {
        self.0.base.tls.as_ref().and_then(|tls| tls.chain)
    }

    /// The outcome, given its name and key time, the check's dictionary and
    /// the chain named by [`Decoded::chain_key`] (from [`chain_infos`]).
    pub fn into_outcome(
        self,
        name: &str,
        started_at: OffsetDateTime,
        strings: &[String],
        chain: Option<&mut SharedChain>,
    ) -> Result<Outcome, DecodeError> {
        let text = |s: Str| resolve(s, strings);
        let Full { base: record, ext } = self.0;
        let (mut dns, mut upload, mut key_exchange) = (None, None, None);
        let (mut domain, mut dnssec) = (None, None);
        for extension in ext {
            match extension {
                Extension::Dns(d) => dns = Some(dns_from(d, strings)?),
                Extension::Upload(u) => upload = Some(upload_from(u, strings)?),
                Extension::KeyExchange(group) => key_exchange = Some(resolve(group, strings)?),
                Extension::Domain(d) => domain = Some(domain_from(d, strings)?),
                Extension::Dnssec(d) => dnssec = Some(d),
            }
        }
        if let (Some(dns), Some(stored)) = (dns.as_mut(), dnssec) {
            dnssec_from(dns, stored, strings)?;
        }
        Ok(Outcome {
            name: name.to_string(),
            kind: kind_from(record.kind)?,
            target: text(record.target)?,
            status: status_from(record.status)?,
            started_at,
            duration_ms: record.duration_ms,
            failures: record
                .failures
                .into_iter()
                .map(failure_from)
                .collect::<Result<_, _>>()?,
            probe_error: record
                .probe_error
                .map(|err| {
                    Ok::<_, DecodeError>(ProbeError {
                        kind: assertion_from(err.kind)?,
                        message: err.message,
                    })
                })
                .transpose()?,
            http: record
                .http
                .map(|http| http_from(http, strings))
                .transpose()?,
            tls: record
                .tls
                .map(|tls| tls_from(tls, strings, chain, started_at))
                .transpose()?
                .map(|tls| TlsReport {
                    key_exchange,
                    ..tls
                }),
            cors: record
                .cors
                .map(|cors| cors_from(cors, strings).map(Box::new))
                .transpose()?,
            dns: dns.map(Box::new),
            upload: upload.map(Box::new),
            smtp: None,
            domain: domain.map(Box::new),
        })
    }
}

fn upload_from(upload: StoredUpload, strings: &[String]) -> Result<UploadReport, DecodeError> {
    Ok(UploadReport {
        key: upload.key,
        step: step_from(upload.step)?,
        ok: upload.ok,
        preflight: upload
            .preflight
            .map(|c| cors_from(c, strings))
            .transpose()?,
        put_status: upload.put_status,
        allow_origin: resolve_opt(upload.allow_origin, strings)?,
        expose_headers: resolve_all(upload.expose_headers, strings)?,
        delete_status: upload.delete_status,
        error: upload
            .error
            .map(|(code, message)| {
                Ok::<_, DecodeError>(S3Error {
                    code: resolve(code, strings)?,
                    message,
                })
            })
            .transpose()?,
        reason: upload.reason,
    })
}

/// Puts the stored DNSSEC verdicts back into the dns report.
fn dnssec_from(
    dns: &mut DnsReport,
    stored: StoredDnssec,
    strings: &[String],
) -> Result<(), DecodeError> {
    dns.dnssec = Some(dnssec_from_code(stored.weakest)?);
    dns.dnssec_answers = stored
        .answers
        .into_iter()
        .map(|(record_type, name, verdict)| {
            Ok(DnssecAnswer {
                record_type: resolve(record_type, strings)?,
                name: resolve(name, strings)?,
                dnssec: dnssec_from_code(verdict)?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    Ok(())
}

/// Part of the format: append only.
fn dnssec_code(verdict: Dnssec) -> u8 {
    match verdict {
        Dnssec::Secure => 0,
        Dnssec::Insecure => 1,
        Dnssec::Bogus => 2,
        Dnssec::Indeterminate => 3,
    }
}

fn dnssec_from_code(code: u8) -> Result<Dnssec, DecodeError> {
    Ok(match code {
        0 => Dnssec::Secure,
        1 => Dnssec::Insecure,
        2 => Dnssec::Bogus,
        3 => Dnssec::Indeterminate,
        _ => return Err(unknown_code("DNSSEC verdict", code)),
    })
}

/// Part of the format: append only.
fn step_code(step: UploadStep) -> u8 {
    match step {
        UploadStep::Presign => 0,
        UploadStep::Preflight => 1,
        UploadStep::Put => 2,
        UploadStep::Expose => 3,
        UploadStep::Delete => 4,
    }
}

fn step_from(code: u8) -> Result<UploadStep, DecodeError> {
    Ok(match code {
        0 => UploadStep::Presign,
        1 => UploadStep::Preflight,
        2 => UploadStep::Put,
        3 => UploadStep::Expose,
        4 => UploadStep::Delete,
        _ => return Err(unknown_code("upload step", code)),
    })
}

fn dns_from(dns: StoredDns, strings: &[String]) -> Result<DnsReport, DecodeError> {
    let list = |items: Option<Vec<Str>>| items.map(|i| resolve_all(i, strings)).transpose();
    Ok(DnsReport {
        query: resolve(dns.query, strings)?,
        resolvers: resolve_all(dns.resolvers, strings)?,
        nxdomain: dns.nxdomain,
        cname: resolve_opt(dns.cname, strings)?,
        a: list(dns.a)?,
        aaaa: list(dns.aaaa)?,
        txt: list(dns.txt)?,
        more: Default::default(),
        // Its own extension, read after this one.
        dnssec: None,
        dnssec_answers: Vec::new(),
        caa: dns
            .caa
            .map(|caa| {
                Ok::<_, DecodeError>(CaaReport {
                    domain: resolve_opt(caa.domain, strings)?,
                    records: caa
                        .records
                        .into_iter()
                        .map(|(flags, tag, value)| {
                            Ok(CaaRecord {
                                flags,
                                tag: resolve(tag, strings)?,
                                value: resolve(value, strings)?,
                            })
                        })
                        .collect::<Result<_, DecodeError>>()?,
                })
            })
            .transpose()?,
    })
}

/// Reads a `chains` value.
pub(in crate::store) fn parse_chain(bytes: &[u8]) -> Result<Vec<StoredCert>, DecodeError> {
    from_bytes(CHAIN_FORMAT, "certificate chain", bytes)
}

/// A `chains` value as the certificates outcomes carry. A history decodes
/// each distinct chain once, and its results share it.
pub(in crate::store) fn chain_infos(bytes: &[u8]) -> Result<SharedChain, DecodeError> {
    let base = parse_chain(bytes)?
        .iter()
        .map(|cert| cert.to_info(0))
        .collect::<Result<_, _>>()?;
    Ok(SharedChain { base, last: None })
}

/// One stored chain, handed to the results that refer to it: the results
/// with the same `days_left` (a day of one check) share one allocation
/// instead of a copy of every certificate's strings each.
pub(in crate::store) struct SharedChain {
    /// `days_left` zero: each record has its own.
    base: Vec<CertInfo>,
    last: Option<Arc<[CertInfo]>>,
}

impl SharedChain {
    /// `hours_left` is derived from `started_at`: the probe computes it
    /// there (see `cert::CertInfo`), unlike `days_left`.
    fn with_days_left(
        &mut self,
        days_left: &[i64],
        started_at: OffsetDateTime,
    ) -> Result<Arc<[CertInfo]>, DecodeError> {
        if self.base.len() != days_left.len() {
            return Err(DecodeError(format!(
                "its chain has {} certificates but the record {} expiry counts",
                self.base.len(),
                days_left.len()
            )));
        }
        if let Some(last) = &self.last {
            let same_hours = last
                .iter()
                .all(|cert| cert.hours_left == crate::cert::hours_left(cert.not_after, started_at));
            if same_hours
                && last
                    .iter()
                    .map(|cert| cert.days_left)
                    .eq(days_left.iter().copied())
            {
                return Ok(last.clone());
            }
        }
        let chain: Arc<[CertInfo]> = self
            .base
            .iter()
            .zip(days_left)
            .map(|(cert, &days_left)| CertInfo {
                days_left,
                hours_left: crate::cert::hours_left(cert.not_after, started_at),
                ..cert.clone()
            })
            .collect();
        self.last = Some(chain.clone());
        Ok(chain)
    }
}

fn from_bytes<'a, T: Deserialize<'a>>(
    format: u8,
    what: &str,
    bytes: &'a [u8],
) -> Result<T, DecodeError> {
    match bytes.split_first() {
        None => Err(DecodeError(format!("empty {what}"))),
        Some((&found, _)) if found > format => Err(DecodeError(format!(
            "{what} format {found} is newer than this vigie reads ({format})"
        ))),
        Some((&found, _)) if found != format => {
            Err(DecodeError(format!("{what} format {found} is unknown")))
        }
        Some((_, rest)) => match postcard::take_from_bytes(rest) {
            Ok((value, [])) => Ok(value),
            Ok((_, extra)) => Err(DecodeError(format!(
                "{what} has {} trailing bytes",
                extra.len()
            ))),
            Err(err) => Err(DecodeError(format!("{what} does not decode: {err}"))),
        },
    }
}

fn resolve(s: Str, strings: &[String]) -> Result<String, DecodeError> {
    match s {
        Str::Inline(text) => Ok(text),
        Str::Dict(index) => strings.get(index as usize).cloned().ok_or_else(|| {
            DecodeError(format!(
                "string {index} is missing from the check's dictionary ({} entries)",
                strings.len()
            ))
        }),
    }
}

fn resolve_all(items: Vec<Str>, strings: &[String]) -> Result<Vec<String>, DecodeError> {
    items.into_iter().map(|s| resolve(s, strings)).collect()
}

fn resolve_opt(s: Option<Str>, strings: &[String]) -> Result<Option<String>, DecodeError> {
    s.map(|s| resolve(s, strings)).transpose()
}

fn failure_from(failure: StoredFailure) -> Result<Failure, DecodeError> {
    Ok(Failure {
        assertion: assertion_from(failure.assertion)?,
        expected: failure.expected,
        observed: failure.observed,
        message: failure.message,
    })
}

fn http_from(http: StoredHttp, strings: &[String]) -> Result<HttpReport, DecodeError> {
    Ok(HttpReport {
        status: http.status,
        version: resolve(http.version, strings)?,
        redirects: http.redirects,
        final_url: resolve_opt(http.final_url, strings)?,
        response_ms: http.response_ms,
        body_bytes: http.body_bytes,
        body_truncated: http.body_truncated,
        headers: Vec::new(),
        body: Vec::new(),
    })
}

fn tls_from(
    tls: StoredTls,
    strings: &[String],
    chain: Option<&mut SharedChain>,
    started_at: OffsetDateTime,
) -> Result<TlsReport, DecodeError> {
    let chain = match (tls.chain, chain) {
        (None, _) => Arc::from([]),
        (Some(_), None) => return Err(DecodeError("its certificate chain is missing".into())),
        (Some(_), Some(shared)) => shared.with_days_left(&tls.days_left, started_at)?,
    };
    Ok(TlsReport {
        server_name: resolve(tls.server_name, strings)?,
        version: resolve_opt(tls.version, strings)?,
        cipher_suite: resolve_opt(tls.cipher_suite, strings)?,
        key_exchange: None,
        trusted: tls.trusted,
        verify_error: tls
            .verify_error
            .map(|err| verify_error_from(err, strings))
            .transpose()?,
        hostname_matches: tls.hostname_matches,
        ari: None,
        revocation: Vec::new(),
        verified_path: None,
        chain,
    })
}

fn verify_error_from(
    err: StoredVerifyError,
    strings: &[String],
) -> Result<VerifyError, DecodeError> {
    let text = |s: Str| resolve(s, strings);
    Ok(match err {
        StoredVerifyError::Expired(at) => VerifyError::Expired {
            not_after: at.to_datetime()?,
        },
        StoredVerifyError::NotYetValid(at) => VerifyError::NotYetValid {
            not_before: at.to_datetime()?,
        },
        StoredVerifyError::HostnameMismatch { expected, covered } => {
            VerifyError::HostnameMismatch {
                expected: text(expected)?,
                covered: resolve_all(covered, strings)?,
            }
        }
        StoredVerifyError::SelfSigned(subject) => VerifyError::SelfSigned {
            subject: text(subject)?,
        },
        StoredVerifyError::StagingIssuer(issuer) => VerifyError::StagingIssuer {
            issuer: text(issuer)?,
        },
        StoredVerifyError::ChainIncomplete(missing) => VerifyError::ChainIncomplete {
            missing_issuer: text(missing)?,
        },
        StoredVerifyError::UnknownIssuer(issuer) => VerifyError::UnknownIssuer {
            issuer: text(issuer)?,
        },
        StoredVerifyError::Other(detail) => VerifyError::Other { detail },
    })
}

fn cors_from(cors: StoredCors, strings: &[String]) -> Result<CorsReport, DecodeError> {
    Ok(CorsReport {
        preflight_status: cors.preflight_status,
        allow_origin: resolve_opt(cors.allow_origin, strings)?,
        allow_methods: resolve_all(cors.allow_methods, strings)?,
        allow_headers: resolve_all(cors.allow_headers, strings)?,
        allow_credentials: cors.allow_credentials,
        expose_headers: resolve_all(cors.expose_headers, strings)?,
        max_age: cors.max_age,
        vary: resolve_opt(cors.vary, strings)?,
        refusal: cors.refusal,
        location: resolve_opt(cors.location, strings)?,
        denied: cors
            .denied
            .into_iter()
            .map(|denied| {
                Ok(DeniedOrigin {
                    origin: resolve(denied.origin, strings)?,
                    admitted: denied.admitted,
                    allow_origin: resolve_opt(denied.allow_origin, strings)?,
                })
            })
            .collect::<Result<_, DecodeError>>()?,
    })
}

impl StoredCert {
    /// `lifetime_hours` follows from the dates; `hours_left` is set per
    /// record, from its `started_at`.
    fn to_info(&self, days_left: i64) -> Result<CertInfo, DecodeError> {
        let not_before = self.not_before.to_datetime()?;
        let not_after = self.not_after.to_datetime()?;
        Ok(CertInfo {
            subject: self.subject.clone(),
            issuer: self.issuer.clone(),
            not_before,
            not_after,
            days_left,
            hours_left: 0,
            lifetime_hours: crate::cert::lifetime_hours(not_before, not_after),
            sans: self.sans.clone(),
            serial: self.serial.clone(),
            sha256: self.sha256.clone(),
            key: self.key.clone(),
            signature: self.signature.clone(),
        })
    }
}

impl Time {
    fn of(at: OffsetDateTime) -> Time {
        Time {
            secs: at.unix_timestamp(),
            nanos: at.nanosecond(),
        }
    }

    fn to_datetime(self) -> Result<OffsetDateTime, DecodeError> {
        let nanos = i128::from(self.secs) * 1_000_000_000 + i128::from(self.nanos);
        OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .map_err(|err| DecodeError(format!("time {}s {}ns: {err}", self.secs, self.nanos)))
    }
}

// ---- codes: part of the format, never renumber ----

fn status_code(status: Status) -> u8 {
    match status {
        Status::Up => 0,
        Status::Warn => 1,
        Status::Down => 2,
    }
}

fn status_from(code: u8) -> Result<Status, DecodeError> {
    Ok(match code {
        0 => Status::Up,
        1 => Status::Warn,
        2 => Status::Down,
        _ => return Err(unknown_code("status", code)),
    })
}

fn kind_code(kind: KindName) -> u8 {
    match kind {
        KindName::Http => 0,
        KindName::Cors => 1,
        KindName::Dns => 2,
        KindName::Upload => 3,
        // The kinds added alongside TLS without HTTP: the domain's
        // registration; 5 to 9 are left to others.
        KindName::Domain => 4,
        KindName::Tls => 10,
        KindName::Smtp => 11,
    }
}

fn kind_from(code: u8) -> Result<KindName, DecodeError> {
    Ok(match code {
        0 => KindName::Http,
        1 => KindName::Cors,
        2 => KindName::Dns,
        3 => KindName::Upload,
        4 => KindName::Domain,
        10 => KindName::Tls,
        11 => KindName::Smtp,
        _ => return Err(unknown_code("check kind", code)),
    })
}

/// A new assertion gets the next free code here and in [`assertion_from`].
fn assertion_code(assertion: Assertion) -> u8 {
    match assertion {
        Assertion::Dns => 0,
        Assertion::Connect => 1,
        Assertion::Timeout => 2,
        Assertion::TlsHandshake => 3,
        Assertion::HttpProtocol => 4,
        Assertion::HttpRedirect => 5,
        Assertion::HttpStatus => 6,
        Assertion::HttpBody => 7,
        Assertion::HttpHeader => 8,
        Assertion::HttpResponseTime => 9,
        Assertion::TlsTrusted => 10,
        Assertion::TlsHostname => 11,
        Assertion::TlsExpiry => 12,
        Assertion::TlsRenewalOverdue => 13,
        Assertion::TlsNotYetValid => 14,
        Assertion::TlsIssuer => 15,
        Assertion::TlsChainIncomplete => 16,
        Assertion::CorsPreflight => 17,
        Assertion::CorsOrigin => 18,
        Assertion::CorsMethods => 19,
        Assertion::CorsHeaders => 20,
        Assertion::CorsMaxAge => 21,
        Assertion::CorsExposeHeaders => 22,
        Assertion::CorsDeniedOrigin => 23,
        Assertion::Internal => 24,
        Assertion::DnsCname => 25,
        Assertion::DnsCaa => 26,
        Assertion::DnsA => 27,
        Assertion::DnsAaaa => 28,
        Assertion::DnsTxt => 29,
        Assertion::UploadPresign => 30,
        Assertion::UploadPreflight => 31,
        Assertion::UploadPut => 32,
        Assertion::UploadExpose => 33,
        Assertion::UploadDelete => 34,
        // Issue 17 (ARI, CRLs); codes 25..39 are left to the check kinds
        // being added at the same time.
        Assertion::TlsRenewalWindow => 40,
        Assertion::TlsRevoked => 41,
        Assertion::VantageSilent => 42,
        // The key exchange and the mail relay; 43..49 are left to others.
        Assertion::TlsPq => 50,
        Assertion::SmtpBanner => 51,
        Assertion::SmtpEhlo => 52,
        Assertion::SmtpStarttls => 53,
        // CAA account binding (RFC 8657).
        Assertion::DnsCaaAccounturi => 54,
        Assertion::DnsCaaValidationmethods => 55,
        // kind = "domain" (RDAP).
        Assertion::DomainExpiry => 56,
        Assertion::DomainRenewalDue => 57,
        Assertion::DomainStatus => 58,
        Assertion::DomainRdap => 59,
        Assertion::DnsDnssec => 60,
    }
}

fn assertion_from(code: u8) -> Result<Assertion, DecodeError> {
    Ok(match code {
        0 => Assertion::Dns,
        1 => Assertion::Connect,
        2 => Assertion::Timeout,
        3 => Assertion::TlsHandshake,
        4 => Assertion::HttpProtocol,
        5 => Assertion::HttpRedirect,
        6 => Assertion::HttpStatus,
        7 => Assertion::HttpBody,
        8 => Assertion::HttpHeader,
        9 => Assertion::HttpResponseTime,
        10 => Assertion::TlsTrusted,
        11 => Assertion::TlsHostname,
        12 => Assertion::TlsExpiry,
        13 => Assertion::TlsRenewalOverdue,
        14 => Assertion::TlsNotYetValid,
        15 => Assertion::TlsIssuer,
        16 => Assertion::TlsChainIncomplete,
        17 => Assertion::CorsPreflight,
        18 => Assertion::CorsOrigin,
        19 => Assertion::CorsMethods,
        20 => Assertion::CorsHeaders,
        21 => Assertion::CorsMaxAge,
        22 => Assertion::CorsExposeHeaders,
        23 => Assertion::CorsDeniedOrigin,
        24 => Assertion::Internal,
        25 => Assertion::DnsCname,
        26 => Assertion::DnsCaa,
        27 => Assertion::DnsA,
        28 => Assertion::DnsAaaa,
        29 => Assertion::DnsTxt,
        30 => Assertion::UploadPresign,
        31 => Assertion::UploadPreflight,
        32 => Assertion::UploadPut,
        33 => Assertion::UploadExpose,
        34 => Assertion::UploadDelete,
        40 => Assertion::TlsRenewalWindow,
        41 => Assertion::TlsRevoked,
        42 => Assertion::VantageSilent,
        50 => Assertion::TlsPq,
        51 => Assertion::SmtpBanner,
        52 => Assertion::SmtpEhlo,
        53 => Assertion::SmtpStarttls,
        54 => Assertion::DnsCaaAccounturi,
        55 => Assertion::DnsCaaValidationmethods,
        56 => Assertion::DomainExpiry,
        57 => Assertion::DomainRenewalDue,
        58 => Assertion::DomainStatus,
        59 => Assertion::DomainRdap,
        60 => Assertion::DnsDnssec,
        _ => return Err(unknown_code("assertion", code)),
    })
}

fn unknown_code(what: &str, code: u8) -> DecodeError {
    DecodeError(format!("unknown {what} code {code}"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use time::Duration;

    use super::super::entries::{encode_block, parse_entry};
    use super::*;
    use crate::store::as_stored;
    use crate::store::contract::{rich, up, T0};

    /// A dictionary as a backend keeps one.
    #[derive(Default)]
    struct Dict {
        strings: Vec<String>,
        index: HashMap<String, u32>,
    }

    impl Dict {
        fn intern(&mut self, text: &str) -> Str {
            let next = self.strings.len() as u32;
            let index = *self.index.entry(text.to_string()).or_insert(next);
            if index == next {
                self.strings.push(text.to_string());
            }
            Str::Dict(index)
        }
    }

    fn round_trip(outcome: &Outcome, dict: &mut Dict) -> (Outcome, usize) {
        let encoded = encode(outcome, &mut |s| dict.intern(s));
        let mut chain = encoded
            .chain
            .as_ref()
            .map(|c| chain_infos(&c.bytes).unwrap());
        let decoded = Decoded::parse(&encoded.value).unwrap();
        assert_eq!(decoded.chain_key(), encoded.chain.as_ref().map(|c| c.key));
        let started_at = as_stored(outcome).started_at;
        let back = decoded
            .into_outcome(&outcome.name, started_at, &dict.strings, chain.as_mut())
            .unwrap();
        (back, encoded.value.len())
    }

    #[test]
    fn rich_outcome_round_trips() {
        let rich = rich("rich");
        let (back, _) = round_trip(&rich, &mut Dict::default());
        assert_eq!(back, as_stored(&rich));
    }

    /// The key exchange group travels as an extension: an http check's
    /// record with one is written extended, and reads back with it.
    #[test]
    fn key_exchange_group_round_trips() {
        let mut outcome = up("site", T0);
        let tls = outcome.tls.as_mut().expect("up() has tls");
        tls.key_exchange = Some("X25519MLKEM768".to_string());
        let encoded = encode(&outcome, &mut |s| Str::Inline(s.to_string()));
        assert_eq!(encoded.value[0], RECORD_FORMAT_EXT);
        let (back, _) = round_trip(&outcome, &mut Dict::default());
        let group = back.tls.and_then(|tls| tls.key_exchange);
        assert_eq!(group.as_deref(), Some("X25519MLKEM768"));
    }

    /// A domain check's registration travels as an extension, its
    /// registry's words through the dictionary.
    #[test]
    fn a_domain_registration_round_trips() {
        let mut outcome = up("example-domain", T0);
        outcome.kind = KindName::Domain;
        outcome.target = "domain:example.com".to_string();
        outcome.tls = None;
        outcome.http = None;
        outcome.status = Status::Down;
        outcome.failures = vec![Failure {
            assertion: Assertion::DomainStatus,
            expected: "none of clientHold".to_string(),
            observed: "client hold".to_string(),
            message: "example.com is on clientHold at its registry".to_string(),
        }];
        outcome.domain = Some(Box::new(DomainReport {
            domain: "example.com".to_string(),
            rdap_url: Some("https://rdap.example/domain/example.com".to_string()),
            expires_at: Some(T0 + Duration::days(300)),
            last_changed: Some(T0 - Duration::days(3)),
            registrar: Some("Example Registrar, Inc.".to_string()),
            statuses: vec!["client hold".to_string(), "active".to_string()],
            not_found: false,
            no_service: false,
            answered_at: Some(T0 - Duration::hours(2)),
            queried_at: Some(T0 - Duration::hours(2)),
            next_query_at: Some(T0 + Duration::hours(10)),
            queried: false,
            error: None,
        }));
        let (back, _) = round_trip(&outcome, &mut Dict::default());
        assert_eq!(back.domain, outcome.domain);
        assert_eq!(back.kind, KindName::Domain);
        assert_eq!(back.failures, outcome.failures);
        for assertion in [
            Assertion::DomainExpiry,
            Assertion::DomainRenewalDue,
            Assertion::DomainStatus,
            Assertion::DomainRdap,
        ] {
            let code = assertion_code(assertion);
            assert_eq!(assertion_from(code).unwrap(), assertion);
        }
    }

    /// What a restore puts in a block without the bytes in between is
    /// what the bytes read back to, extended record or not, and the
    /// chain a caller hands over is the one the record names.
    #[test]
    fn a_record_decoded_without_its_bytes_is_what_its_bytes_read_back_to() {
        let mut grouped = up("site", T0);
        grouped.tls.as_mut().unwrap().key_exchange = Some("X25519".to_string());
        for outcome in [up("site", T0), rich("rich"), grouped] {
            let inline = &mut |s: &str| Str::Inline(s.to_string());
            let encoded = encode(&outcome, inline);
            let (decoded, chain) = decoded(&outcome, inline, &mut |c| encode_chain(c));
            let read = Decoded::parse(&encoded.value).unwrap();
            assert_eq!(
                to_bytes(encoded.value[0], &decoded.0),
                to_bytes(encoded.value[0], &read.0)
            );
            assert_eq!(decoded.chain_key(), read.chain_key());
            assert_eq!(
                chain.map(|c| (c.key, c.bytes)),
                encoded.chain.map(|c| (c.key, c.bytes))
            );
        }
    }

    #[test]
    fn inline_strings_round_trip_without_a_dictionary() {
        let rich = rich("rich");
        let encoded = encode(&rich, &mut |s| Str::Inline(s.to_string()));
        let mut chain = chain_infos(&encoded.chain.unwrap().bytes).unwrap();
        let back = Decoded::parse(&encoded.value)
            .unwrap()
            .into_outcome("rich", as_stored(&rich).started_at, &[], Some(&mut chain))
            .unwrap();
        assert_eq!(back, as_stored(&rich));
    }

    /// `days_left` is kept as the probe computed it, which need not be
    /// `(not_after - started_at).whole_days()`: the probe reads its clock
    /// after the handshake, possibly across a day boundary.
    #[test]
    fn days_left_is_kept_not_recomputed() {
        let mut outcome = up("site", T0);
        let tls = outcome.tls.as_mut().unwrap();
        let recomputed = (tls.chain[0].not_after - T0).whole_days();
        std::sync::Arc::make_mut(&mut tls.chain)[0].days_left = recomputed - 1;
        let (back, _) = round_trip(&outcome, &mut Dict::default());
        assert_eq!(back.tls.unwrap().chain[0].days_left, recomputed - 1);
    }

    /// The budget is 200 bytes per result on disk, sled's overhead
    /// included; the value itself must stay well under half of that.
    #[test]
    fn typical_up_record_is_small() {
        let mut dict = Dict::default();
        let (_, first) = round_trip(&up("site", T0), &mut dict);
        let (_, next) = round_trip(&up("site", T0 + Duration::seconds(30)), &mut dict);
        assert_eq!(first, next, "the dictionary is filled by the first result");
        assert!(next <= 72, "typical record is {next} bytes");
    }

    #[test]
    fn same_certificates_share_a_chain_key_across_checks_and_days() {
        let key = |outcome: &Outcome| {
            encode(outcome, &mut |s| Str::Inline(s.into()))
                .chain
                .unwrap()
                .key
        };
        let a = key(&up("a", T0));
        assert_eq!(a, key(&up("b", T0 + Duration::days(9))));
        let mut other = up("a", T0);
        std::sync::Arc::make_mut(&mut other.tls.as_mut().unwrap().chain)[0].sha256 =
            "00".repeat(32);
        assert_ne!(a, key(&other));
    }

    #[test]
    fn codes_are_a_bijection() {
        for code in 0..=u8::MAX {
            if let Ok(assertion) = assertion_from(code) {
                assert_eq!(assertion_code(assertion), code);
            }
            if let Ok(status) = status_from(code) {
                assert_eq!(status_code(status), code);
            }
            if let Ok(kind) = kind_from(code) {
                assert_eq!(kind_code(kind), code);
            }
            if let Ok(verdict) = dnssec_from_code(code) {
                assert_eq!(dnssec_code(verdict), code);
            }
        }
        assert_eq!(assertion_from(56).unwrap(), Assertion::DomainExpiry);
        assert_eq!(assertion_from(60).unwrap(), Assertion::DnsDnssec);
        assert!(dnssec_from_code(4).is_err());
        assert_eq!(assertion_from(24).unwrap(), Assertion::Internal);
        assert_eq!(assertion_from(29).unwrap(), Assertion::DnsTxt);
        assert_eq!(
            assertion_from(35).unwrap_err().0,
            "unknown assertion code 35"
        );
        assert_eq!(kind_from(2).unwrap(), KindName::Dns);
        assert_eq!(kind_from(3).unwrap(), KindName::Upload);
        assert_eq!(kind_from(4).unwrap(), KindName::Domain);
        assert!(kind_from(5).is_err());
    }

    /// Outcomes without extensions keep formats 1 and 2 (readable by an
    /// older vigie); one dns report makes the record, and its block, the
    /// extended formats, and both read back whole.
    #[test]
    fn extensions_change_the_format_only_when_present() {
        let inline = &mut |s: &str| Str::Inline(s.to_string());
        let plain = encode(&up("site", T0), inline);
        assert_eq!(plain.value[0], RECORD_FORMAT);
        let rich = rich("rich");
        assert!(rich.dns.is_some() && rich.upload.is_some());
        let extended = encode(&rich, inline);
        assert_eq!(extended.value[0], RECORD_FORMAT_EXT);
        assert!(is_single(&plain.value) && is_single(&extended.value));
        // The row blocks of schema 3 (still read), then the column-wise
        // block every block is written as now, which keeps extensions in
        // its shapes whatever the format byte.
        let plain_block = encode_row_block(&[(1, Decoded::parse(&plain.value).unwrap())]);
        assert_eq!(plain_block[0], BLOCK_FORMAT);
        let pair = || {
            [
                (1, Decoded::parse(&plain.value).unwrap()),
                (2, Decoded::parse(&extended.value).unwrap()),
            ]
        };
        let mixed = encode_row_block(&pair());
        assert_eq!(mixed[0], BLOCK_FORMAT_EXT);
        let columns = encode_block(&pair());
        assert_eq!(columns[0], BLOCK_FORMAT_COLUMNS);
        assert!(is_block(&mixed) && is_block(&plain_block) && is_block(&columns));
        for block in [mixed, columns] {
            check_plain_then_rich(&block, &plain, &extended, &rich);
        }
    }

    fn check_plain_then_rich(block: &[u8], plain: &Encoded, extended: &Encoded, rich: &Outcome) {
        let mut results = parse_entry(1, block).unwrap();
        let (_, back) = results.pop().unwrap();
        let mut chain = chain_infos(&extended.chain.as_ref().unwrap().bytes).unwrap();
        let back = back
            .into_outcome("rich", as_stored(rich).started_at, &[], Some(&mut chain))
            .unwrap();
        assert_eq!(back, as_stored(rich));
        let (_, first) = results.pop().unwrap();
        let mut chain = chain_infos(&plain.chain.as_ref().unwrap().bytes).unwrap();
        let first = first
            .into_outcome(
                "site",
                as_stored(&up("site", T0)).started_at,
                &[],
                Some(&mut chain),
            )
            .unwrap();
        assert_eq!(first.dns, None);
    }

    #[test]
    fn unknown_and_damaged_records_are_refused() {
        let encoded = encode(&up("site", T0), &mut |s| Str::Inline(s.into()));
        let mut newer = encoded.value.clone();
        newer[0] = 9;
        let err = Decoded::parse(&newer).err().unwrap();
        assert_eq!(
            err.0,
            "result record format 9 is newer than this vigie reads (1)"
        );
        let truncated = &encoded.value[..encoded.value.len() - 3];
        assert!(Decoded::parse(truncated).is_err());
        let mut longer = encoded.value.clone();
        longer.push(0);
        let err = Decoded::parse(&longer).err().unwrap();
        assert_eq!(err.0, "result record has 1 trailing bytes");
        assert!(Decoded::parse(&[]).is_err());
    }

    #[test]
    fn blocks_round_trip_and_report_their_span() {
        let mut dict = Dict::default();
        let outcomes: Vec<Outcome> = (0..120)
            .map(|n| {
                let mut outcome = up("site", T0 + Duration::seconds(30 * n));
                outcome.duration_ms = 40.0 + n as f64 / 7.0;
                outcome
            })
            .collect();
        let mut singles = 0;
        let results: Vec<(u64, Decoded)> = outcomes
            .iter()
            .map(|outcome| {
                let encoded = encode(outcome, &mut |s| dict.intern(s));
                singles += encoded.value.len();
                let millis = crate::store::format::keys::key_millis(outcome).unwrap();
                (millis, Decoded::parse(&encoded.value).unwrap())
            })
            .collect();
        let base = results[0].0;
        let last = results[119].0;
        let block = encode_block(&results);
        assert!(
            block.len() * 3 < singles,
            "block {} bytes, singles {singles}",
            block.len()
        );
        assert_eq!(span(base, &block).unwrap(), Span { count: 120, last });
        let chain = encode(&outcomes[0], &mut |s| dict.intern(s)).chain.unwrap();
        let mut chain = chain_infos(&chain.bytes).unwrap();
        let back: Vec<Outcome> = parse_entry(base, &block)
            .unwrap()
            .into_iter()
            .map(|(millis, decoded)| {
                let at = crate::store::format::keys::time_of_millis(millis);
                decoded
                    .into_outcome("site", at, &dict.strings, Some(&mut chain))
                    .unwrap()
            })
            .collect();
        assert_eq!(back, outcomes);
    }

    #[test]
    fn damaged_blocks_are_refused() {
        let encoded = encode(&up("site", T0), &mut |s| Str::Inline(s.into()));
        let one = vec![(5, Decoded::parse(&encoded.value).unwrap())];
        let block = encode_block(&one);
        assert_eq!(parse_entry(5, &block).unwrap().len(), 1);
        let mut lying = block.clone();
        lying[4] = 2; // count 2
        let err = parse_entry(5, &lying).err().unwrap();
        assert_eq!(
            err.0,
            "block header says 2 results up to 5, its contents disagree"
        );
        let mut huge = block.clone();
        huge[13] = 0xff;
        assert!(parse_entry(5, &huge)
            .err()
            .unwrap()
            .0
            .contains("uncompressed"));
        assert!(parse_entry(5, &block[..10]).is_err());
        assert!(parse_entry(5, &block[..block.len() - 2]).is_err());
        let err = parse_entry(5, &[7, 0]).err().unwrap();
        assert_eq!(
            err.0,
            "result value format 7 is newer than this vigie reads (5)"
        );
    }

    #[test]
    fn missing_dictionary_entry_is_an_error_not_a_panic() {
        let mut dict = Dict::default();
        let encoded = encode(&up("site", T0), &mut |s| dict.intern(s));
        let mut chain = chain_infos(&encoded.chain.unwrap().bytes).unwrap();
        let err = Decoded::parse(&encoded.value)
            .unwrap()
            .into_outcome("site", T0, &dict.strings[..1], Some(&mut chain))
            .err()
            .unwrap();
        assert!(
            err.0.contains("missing from the check's dictionary"),
            "{err}"
        );
    }
}
