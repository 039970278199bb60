//! Revocation through CRLs: is a served certificate listed by its issuer?
//!
//! Let's Encrypt ended OCSP in 2025; a revocation is now published only on
//! the CRL named by the certificate's CRL distribution point. vigie fetches
//! it (http or https, at most [`CRL_CAP`] bytes and at most a quarter of
//! the CRL cache, through the probe client and the check's address
//! policy), checks that it is issued by the certificate's issuer and
//! signed by the key of the next certificate on the verified path (or of
//! the trust anchor: never a key the target served beside the path), and
//! indexes its serials once (a `HashMap`, built on a blocking thread, off
//! the async workers), so that every probe until `nextUpdate` answers from
//! memory. No OCSP.
//!
//! Parsing and signature checking use x509-parser (its `verify-aws`
//! feature: the aws-lc-rs that rustls already uses) rather than
//! rustls-webpki's CRL support: webpki checks a CRL only while building a
//! path, and does not expose the list's dates, reasons or a standalone
//! signature check, which is what vigie reports.
//!
//! A CRL that cannot be fetched, is stale, or does not verify never makes a
//! check down: it is reported (`tls.revocation[].status`). A serial listed
//! on a CRL that verified once stays revoked, even when that CRL has gone
//! stale since.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest as _;

use time::OffsetDateTime;
use url::Url;
use x509_parser::prelude::FromDer;
use x509_parser::revocation_list::CertificateRevocationList;
use x509_parser::x509::SubjectPublicKeyInfo;

use super::address::RedirectPolicy;
use super::budget::{Budget, CUT};
use super::cache::{self, Cache, Limits, Slot, Weight};
use super::client::Client;
use super::tls::Trust;
use crate::outcome::{CrlReport, CrlStatus};
use crate::redact::redact;

/// Largest CRL read. Let's Encrypt shards its CRLs to well under a
/// megabyte; 10 MiB admits a big CA's unsharded list.
pub const CRL_CAP: usize = 10 * 1024 * 1024;
/// A CRL without `nextUpdate`, or one already past it, is fetched again
/// after this long at most.
const MAX_KEEP: Duration = Duration::from_secs(24 * 3600);
const MIN_KEEP: Duration = Duration::from_secs(60);

/// What one served certificate needs for a revocation lookup.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    /// As shown in the chain.
    pub subject: &'a str,
    /// The serial's DER contents.
    pub serial: &'a [u8],
    /// The issuer Name, full DER: the CRL's issuer must be the same.
    pub issuer_name: &'a [u8],
    /// The SubjectPublicKeyInfo DER of the next certificate on the
    /// verified path, or of the trust anchor that issued this one.
    pub issuer_key: &'a [u8],
    pub url: &'a Url,
}

/// One CRL as last fetched: its index, or why there is none usable.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The newest list that verified.
    pub index: Option<Arc<Index>>,
    /// Why the last fetch gave nothing newer.
    pub problem: Option<(CrlStatus, String)>,
}

/// A verified CRL's revoked serials, indexed once per fetch.
#[derive(Debug)]
pub struct Index {
    revoked: HashMap<Box<[u8]>, Revoked>,
    pub this_update: OffsetDateTime,
    pub next_update: Option<OffsetDateTime>,
    /// What the index holds in memory, about (the cache's weight).
    weight: usize,
}

#[derive(Debug, Clone, Copy)]
struct Revoked {
    at: OffsetDateTime,
    reason: Option<u8>,
}

impl Index {
    pub fn len(&self) -> usize {
        self.revoked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.revoked.is_empty()
    }
}

impl Weight for Known {
    fn weight(&self) -> usize {
        let index = self.index.as_ref().map_or(0, |i| i.weight);
        let problem = self.problem.as_ref().map_or(0, |(_, why)| why.capacity());
        index + problem
    }
}

/// The CRLs of every check, shared (one per prober).
#[derive(Debug)]
pub struct Crls {
    lists: Cache<Known>,
    /// The largest CRL fetched: [`CRL_CAP`], or a quarter of the cache when
    /// that is less, so that a list's index always fits in the cache (one
    /// that did not would be fetched again by every probe).
    cap: usize,
}

impl Crls {
    /// CRLs kept within `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            lists: Cache::new(limits),
            cap: CRL_CAP.min(limits.bytes / 4),
        }
    }

    /// What `of`'s CRL says about it, as of the client's clock; a lookup
    /// still waiting or fetching when `budget` ends is cut.
    pub async fn lookup(
        &self,
        client: &Client,
        trust: &Trust,
        of: &Subject<'_>,
        policy: RedirectPolicy,
        budget: &Budget,
        timeout: Duration,
    ) -> CrlReport {
        let now = client.clock().now();
        // One entry per list and issuer key: a URL claimed by certificates
        // of different issuers is verified against each.
        let issuer_key = sha2::Sha256::digest(of.issuer_key);
        let key = format!("{} {}", of.url, crate::cert::hex(&issuer_key));
        let cap = self.cap;
        let fetch = |previous: Option<Known>| async move {
            let fetched = cache::get(client, of.url, trust, Some(policy), cap, timeout).await;
            let result = match fetched {
                Ok(response) => read_blocking(response.body, of).await,
                Err(why) => Err((CrlStatus::Unavailable, why)),
            };
            let previous = previous.and_then(|p| p.index);
            let (known, keep) = match result {
                Ok(index) => {
                    let keep = index
                        .next_update
                        .map(|next| (next - now).try_into().unwrap_or(MIN_KEEP))
                        .unwrap_or(MAX_KEEP);
                    let known = Known {
                        index: Some(Arc::new(index)),
                        problem: None,
                    };
                    (known, keep.clamp(MIN_KEEP, MAX_KEEP))
                }
                Err(problem) => (
                    Known {
                        index: previous,
                        problem: Some(problem),
                    },
                    cache::RETRY_AFTER_FAILURE,
                ),
            };
            Slot {
                value: known,
                refresh_at: cache::after(now, keep),
            }
        };
        // Cut: what was known before, if anything, and why nothing newer.
        let cut = |previous: Option<Known>| Known {
            index: previous.and_then(|p| p.index),
            problem: Some((CrlStatus::Unavailable, format!("CRL {CUT}"))),
        };
        let known = self.lists.get(&key, now, budget, fetch, cut).await;
        judge(&known, of, now)
    }

    /// What the kept CRLs weigh, and how many lists are known.
    pub fn usage(&self) -> (usize, usize) {
        self.lists.usage()
    }

    /// How many CRL fetches this cache has made.
    pub fn fetches(&self) -> u64 {
        self.lists.fetches()
    }
}

/// The report for `of` from what is known of its CRL.
pub fn judge(known: &Known, of: &Subject<'_>, now: OffsetDateTime) -> CrlReport {
    let mut report = CrlReport {
        subject: of.subject.to_string(),
        url: redact(of.url),
        status: CrlStatus::Good,
        revoked_at: None,
        reason: None,
        next_update: known.index.as_ref().and_then(|i| i.next_update),
        detail: None,
    };
    let listed = known
        .index
        .as_ref()
        .and_then(|i| i.revoked.get(normal(of.serial)));
    if let Some(revoked) = listed {
        report.status = CrlStatus::Revoked;
        report.revoked_at = Some(revoked.at);
        report.reason = revoked.reason.map(|code| reason_name(code).to_string());
        return report;
    }
    if let Some((status, detail)) = &known.problem {
        report.status = *status;
        report.detail = Some(crate::sanitize::message(detail));
        return report;
    }
    if let Some(next) = report.next_update.filter(|next| *next < now) {
        report.status = CrlStatus::Stale;
        report.detail = Some(format!(
            "the CRL was due to be replaced on {}",
            crate::when::minute(next)
        ));
    }
    report
}

/// Parses and verifies one CRL (DER) against the issuer's name and key,
/// and indexes its serials.
pub fn read(
    der: &[u8],
    issuer_name: &[u8],
    issuer_key: &[u8],
) -> Result<Index, (CrlStatus, String)> {
    let invalid = |why: String| (CrlStatus::Invalid, why);
    let (_, crl) = CertificateRevocationList::from_der(der)
        .map_err(|err| (CrlStatus::Unavailable, format!("not a DER CRL ({err})")))?;
    if crl.issuer().as_raw() != issuer_name {
        return Err(invalid(format!(
            "the CRL is issued by {}, not by the certificate's issuer",
            crate::sanitize::value(&crl.issuer().to_string())
        )));
    }
    let (_, spki) = SubjectPublicKeyInfo::from_der(issuer_key)
        .map_err(|err| invalid(format!("unreadable issuer key ({err})")))?;
    crl.verify_signature(&spki).map_err(|err| {
        invalid(format!(
            "the CRL's signature does not verify with the issuer's key ({err})"
        ))
    })?;
    let revoked: HashMap<Box<[u8]>, Revoked> = crl
        .iter_revoked_certificates()
        .map(|entry| {
            let revoked = Revoked {
                at: entry.revocation_date.to_datetime(),
                reason: entry.reason_code().map(|(_, code)| code.0),
            };
            (Box::<[u8]>::from(normal(entry.raw_serial())), revoked)
        })
        .collect();
    // Each entry: its slot in the table (and hashbrown's control byte),
    // and the boxed serial with the allocator's overhead.
    let per_slot = std::mem::size_of::<(Box<[u8]>, Revoked)>() + 1;
    let serials: usize = revoked.keys().map(|s| s.len() + 16).sum();
    Ok(Index {
        weight: revoked.capacity() * per_slot + serials,
        revoked,
        this_update: crl.last_update().to_datetime(),
        next_update: crl.next_update().map(|t| t.to_datetime()),
    })
}

/// [`read`] on a blocking thread: a list of megabytes takes tens of
/// milliseconds to verify and index, which would stall every probe sharing
/// the async worker. When the probe's budget ends first, the thread still
/// finishes (and its result is dropped).
async fn read_blocking(der: Vec<u8>, of: &Subject<'_>) -> Result<Index, (CrlStatus, String)> {
    let (name, key) = (of.issuer_name.to_vec(), of.issuer_key.to_vec());
    tokio::task::spawn_blocking(move || read(&der, &name, &key))
        .await
        .unwrap_or_else(|err| {
            Err((
                CrlStatus::Unavailable,
                format!("the CRL could not be read ({err})"),
            ))
        })
}

/// A serial without leading zero octets: the sign octet DER adds (and a
/// careless encoder's padding) does not make another serial.
fn normal(serial: &[u8]) -> &[u8] {
    let zeros = serial.iter().take_while(|b| **b == 0).count();
    &serial[zeros.min(serial.len().saturating_sub(1))..]
}

/// RFC 5280 §5.3.1 CRLReason, snake_case.
pub fn reason_name(code: u8) -> &'static str {
    match code {
        0 => "unspecified",
        1 => "key_compromise",
        2 => "ca_compromise",
        3 => "affiliation_changed",
        4 => "superseded",
        5 => "cessation_of_operation",
        6 => "certificate_hold",
        8 => "remove_from_crl",
        9 => "privilege_withdrawn",
        10 => "aa_compromise",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{
        BasicConstraints, CertificateParams, CertificateRevocationListParams, IsCa, Issuer,
        KeyIdMethod, KeyPair, KeyUsagePurpose, RevocationReason, RevokedCertParams, SerialNumber,
    };
    use time::macros::datetime;

    use super::*;

    const NOW: OffsetDateTime = datetime!(2026-12-01 12:00:00 UTC);

    struct Ca {
        issuer: Issuer<'static, KeyPair>,
        name: Vec<u8>,
        key: Vec<u8>,
    }

    fn ca(cn: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.der()).unwrap();
        let name = parsed.subject().as_raw().to_vec();
        let spki = parsed.public_key().raw.to_vec();
        Ca {
            issuer: Issuer::new(params, key),
            name,
            key: spki,
        }
    }

    fn crl(ca: &Ca, serials: impl IntoIterator<Item = u64>) -> Vec<u8> {
        CertificateRevocationListParams {
            this_update: NOW - time::Duration::hours(1),
            next_update: NOW + time::Duration::days(1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .into_iter()
                .map(|serial| RevokedCertParams {
                    serial_number: SerialNumber::from(serial),
                    revocation_time: NOW - time::Duration::minutes(30),
                    reason_code: Some(RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        }
        .signed_by(&ca.issuer)
        .unwrap()
        .der()
        .to_vec()
    }

    fn serial(n: u64) -> Vec<u8> {
        SerialNumber::from(n).to_bytes()
    }

    fn subject<'a>(ca: &'a Ca, serial: &'a [u8], url: &'a Url) -> Subject<'a> {
        Subject {
            subject: "CN=leaf",
            serial,
            issuer_name: &ca.name,
            issuer_key: &ca.key,
            url,
        }
    }

    #[test]
    fn a_listed_serial_is_revoked_with_date_and_reason() {
        let ca = ca("Test CA");
        let index = read(&crl(&ca, [5, 7]), &ca.name, &ca.key).unwrap();
        assert_eq!(index.len(), 2);
        let known = Known {
            index: Some(Arc::new(index)),
            problem: None,
        };
        let url: Url = "http://crl.example/1.crl".parse().unwrap();
        let (seven, six) = (serial(7), serial(6));
        let report = judge(&known, &subject(&ca, &seven, &url), NOW);
        assert_eq!(report.status, CrlStatus::Revoked);
        assert_eq!(report.reason.as_deref(), Some("key_compromise"));
        assert_eq!(report.revoked_at, Some(NOW - time::Duration::minutes(30)));
        let good = judge(&known, &subject(&ca, &six, &url), NOW);
        assert_eq!(good.status, CrlStatus::Good);
        let later = judge(
            &known,
            &subject(&ca, &six, &url),
            NOW + time::Duration::days(2),
        );
        assert_eq!(later.status, CrlStatus::Stale);
    }

    #[test]
    fn a_crl_signed_by_another_key_is_invalid() {
        let (real, impostor) = (ca("Test CA"), ca("Test CA"));
        let err = read(&crl(&impostor, [5]), &real.name, &real.key).unwrap_err();
        assert_eq!(err.0, CrlStatus::Invalid, "{}", err.1);
        let other = ca("Other CA");
        let err = read(&crl(&other, [5]), &real.name, &real.key).unwrap_err();
        assert!(
            err.1.contains("not by the certificate's issuer"),
            "{}",
            err.1
        );
        assert_eq!(
            read(b"junk", &real.name, &real.key).unwrap_err().0,
            CrlStatus::Unavailable
        );
    }
}
