//! What the CA says about the certificates on the verified path: its
//! renewal window for the leaf (`ari`) and its CRLs (`crl`), asked after the
//! probe.
//!
//! Only the verified path is asked about. A target may serve any number of
//! certificates of its own making beside it (as many as fit in a
//! handshake), each naming a CRL or a stalling URL, and signing those CRLs
//! with keys it also serves: fetching, verifying and keeping what they point
//! at would be the target's choice, a memory bomb and a download amplifier.
//! So the path is rebuilt by signature, from the leaf through the served
//! certificates to a trust anchor ([`verified_path`]), and each CRL is
//! verified with the key of the next certificate on that path, or of the
//! anchor: never with a key the target served beside it.
//!
//! Every lookup of one probe shares the probe's [`Budget`], the rest of the
//! check's `timeout`, each fetch also bounded by [`FETCH_TIMEOUT`]: a slow
//! or dead CA endpoint never delays an outcome past the check's `timeout`
//! and never makes it fail; a cut lookup says so in its report. Almost
//! every lookup is answered from the shared caches (`cache`), so in steady
//! state this costs a hash lookup per certificate on the path.
//!
//! The facts (serial, AKI, CRL URL, the issuer's key) are read from the DER
//! as served, once per distinct chain.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use url::Url;
use x509_parser::extensions::{DistributionPointName, GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::SubjectPublicKeyInfo;

use super::address::{AddressClass, RedirectPolicy};
use super::ari::{self, Ari};
use super::budget::Budget;
use super::cache::Limits;
use super::chains;
use super::client::Client;
use super::crl::{self, Crls};
use super::tls::Trust;
use crate::cert;
use crate::check::Check;
use crate::outcome::{AriReport, TlsReport};

/// The longest one ARI or CRL fetch may take (the probe's budget may cut
/// it sooner).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Keys each cache keeps at most, whatever they weigh.
const ENTRIES_KEPT: usize = 4096;
/// Chains whose facts are kept before the map is emptied.
const FACTS_KEPT: usize = 1024;
/// Signatures checked at most while rebuilding one chain's path, as
/// WebPKI bounds its own path building: a chain of many certificates all
/// named like the leaf's issuer costs at most this many.
const SIGNATURES_CHECKED: usize = 100;

/// The shared caches (one per prober).
#[derive(Debug)]
pub struct Authority {
    pub ari: Ari,
    pub crls: Crls,
    facts: Mutex<HashMap<FactsKey, Arc<Vec<Facts>>>>,
}

/// A served chain (`chains::key`) under one trust (its address: the
/// anchors decide which path verifies).
type FactsKey = ([u8; 32], usize);

/// What one certificate on the verified path says about where to ask.
#[derive(Debug)]
struct Facts {
    /// Its position in the chain as served.
    position: usize,
    serial: Vec<u8>,
    aki: Option<Vec<u8>>,
    crl_url: Option<Url>,
    issuer_name: Vec<u8>,
    /// The SubjectPublicKeyInfo DER of the next certificate on the path,
    /// or of the anchor: the key its issuer signs with.
    issuer_key: Vec<u8>,
}

impl Default for Authority {
    fn default() -> Self {
        Self::new(crate::config::limits::DEFAULT_CA_CACHE_SIZE)
    }
}

impl Authority {
    /// Caches holding `cache_size` bytes together: fifteen sixteenths for
    /// the CRLs, the rest for ARI answers and directories (a few hundred
    /// bytes each).
    pub fn new(cache_size: usize) -> Self {
        let ari_share = cache_size / 32;
        let limits = |bytes| Limits {
            bytes,
            entries: ENTRIES_KEPT,
        };
        Self {
            ari: Ari::new(limits(ari_share)),
            crls: Crls::new(limits(cache_size - 2 * ari_share)),
            facts: Mutex::new(HashMap::new()),
        }
    }

    /// Fills `tls.ari` and `tls.revocation` for the verified path of the
    /// chain `served`, within `budget`.
    #[allow(clippy::too_many_arguments)]
    pub async fn inspect(
        &self,
        client: &Client,
        check: &Check,
        trust: &Trust,
        served: &[rustls::pki_types::CertificateDer<'static>],
        first_peer: Option<std::net::IpAddr>,
        budget: &Budget,
        tls: &mut TlsReport,
    ) {
        // Only a trusted chain is asked about: an untrusted one is down
        // already, and nothing in it is vouched for by a trust anchor.
        if served.is_empty() || !tls.trusted {
            return;
        }
        let path = self.facts(served, trust);
        if path.len() < served.len() && !path.is_empty() {
            tls.verified_path = Some(path.iter().map(|f| f.position).collect());
        }
        let wants_ari = check.tls.ari != Some(false);
        if !wants_ari && !check.tls.revocation {
            return;
        }
        // The check's own address policy: a CA URL may lead to private
        // addresses only when the target itself is one.
        let policy = RedirectPolicy {
            allow_non_global: first_peer
                .is_some_and(|ip| client.classify(ip) != AddressClass::Global),
        };
        let asking = Asking {
            client,
            trust,
            policy,
            budget,
        };
        if wants_ari {
            if let Some(leaf) = path.first() {
                tls.ari = self.ari(&asking, check, leaf).await;
            }
        }
        if !check.tls.revocation {
            return;
        }
        for fact in path.iter() {
            let (Some(url), Some(info)) = (&fact.crl_url, tls.chain.get(fact.position)) else {
                continue;
            };
            let subject = crl::Subject {
                subject: &info.subject,
                serial: &fact.serial,
                issuer_name: &fact.issuer_name,
                issuer_key: &fact.issuer_key,
                url,
            };
            let report = self
                .crls
                .lookup(client, trust, &subject, policy, budget, FETCH_TIMEOUT)
                .await;
            tls.revocation.push(report);
        }
    }

    async fn ari(&self, asking: &Asking<'_>, check: &Check, leaf: &Facts) -> Option<AriReport> {
        let aki = leaf.aki.as_deref();
        let directory = match &check.tls.acme_directory {
            Some(url) => Some(url.clone()),
            None => aki
                .and_then(ari::known_directory)
                .and_then(|known| Url::parse(known).ok()),
        };
        let cert_id = aki.map(|aki| ari::cert_id(aki, &leaf.serial));
        match (directory, cert_id) {
            (Some(directory), Some(cert_id)) => Some(
                self.ari
                    .lookup(
                        asking.client,
                        asking.trust,
                        &directory,
                        &cert_id,
                        asking.policy,
                        asking.budget,
                        FETCH_TIMEOUT,
                    )
                    .await,
            ),
            // Asked for explicitly: say why nothing was asked.
            (directory, cert_id) if check.tls.ari == Some(true) => Some(AriReport {
                cert_id: cert_id.clone().unwrap_or_default(),
                url: directory
                    .as_ref()
                    .map(crate::redact::redact)
                    .unwrap_or_default(),
                window_start: None,
                window_end: None,
                explanation_url: None,
                error: Some(match cert_id {
                    None => {
                        "the certificate has no authority key identifier, so it has no ARI CertID"
                            .to_string()
                    }
                    Some(_) => "no ACME directory is known for this issuer: set `acme_directory`"
                        .to_string(),
                }),
                fetched_at: None,
            }),
            _ => None,
        }
    }

    /// The facts of the verified path of `served` (empty when no path
    /// verifies), read once per chain and trust.
    fn facts(
        &self,
        served: &[rustls::pki_types::CertificateDer<'static>],
        trust: &Trust,
    ) -> Arc<Vec<Facts>> {
        let key = (chains::key(served), trust as *const Trust as usize);
        let mut kept = self.facts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(facts) = kept.get(&key) {
            return facts.clone();
        }
        let facts = Arc::new(path_facts(served, trust));
        if kept.len() >= FACTS_KEPT {
            kept.clear();
        }
        kept.insert(key, facts.clone());
        facts
    }

    /// What the caches hold: (bytes, entries) of the CRLs and of ARI.
    pub fn usage(&self) -> ((usize, usize), (usize, usize)) {
        (self.crls.usage(), self.ari.usage())
    }
}

/// What every lookup of one probe shares.
struct Asking<'a> {
    client: &'a Client,
    trust: &'a Trust,
    policy: RedirectPolicy,
    budget: &'a Budget,
}

/// The facts of each certificate on the verified path, leaf first.
fn path_facts(served: &[rustls::pki_types::CertificateDer<'static>], trust: &Trust) -> Vec<Facts> {
    let parsed: Vec<Option<X509Certificate<'_>>> = served
        .iter()
        .map(|der| {
            x509_parser::parse_x509_certificate(der)
                .ok()
                .map(|(_, c)| c)
        })
        .collect();
    let Some(path) = verified_path(&parsed, trust) else {
        return Vec::new();
    };
    path.iter()
        .filter_map(|step| {
            let cert = parsed.get(step.position)?.as_ref()?;
            Some(Facts {
                position: step.position,
                serial: cert.raw_serial().to_vec(),
                aki: authority_key_id(cert),
                crl_url: crl_url(cert),
                issuer_name: cert.issuer().as_raw().to_vec(),
                issuer_key: step.issuer_key.clone(),
            })
        })
        .collect()
}

/// One certificate of the path and the key that verified its signature.
#[derive(Debug)]
struct Step {
    position: usize,
    issuer_key: Vec<u8>,
}

/// The served certificates from the leaf to a trust anchor, each one's
/// signature verified with the key of the next (or of the anchor). WebPKI
/// has verified that such a path exists; this finds which served
/// certificates are on it and the keys that vouch for them. An anchor is
/// tried before served certificates, as WebPKI does, and no certificate is
/// used twice. `None` when no path verifies within [`SIGNATURES_CHECKED`].
fn verified_path(parsed: &[Option<X509Certificate<'_>>], trust: &Trust) -> Option<Vec<Step>> {
    let mut path: Vec<Step> = Vec::new();
    let mut position = 0;
    let mut checked = 0;
    loop {
        let current = parsed.get(position)?.as_ref()?;
        let issuer_name = current.issuer().as_raw();
        let mut signed_by = |key: &SubjectPublicKeyInfo<'_>| {
            checked += 1;
            checked <= SIGNATURES_CHECKED && current.verify_signature(Some(key)).is_ok()
        };
        if let Some(anchor_key) = trust.anchor_key(cert::name_contents(issuer_name)) {
            let verified =
                SubjectPublicKeyInfo::from_der(anchor_key).is_ok_and(|(_, key)| signed_by(&key));
            if verified {
                path.push(Step {
                    position,
                    issuer_key: anchor_key.to_vec(),
                });
                return Some(path);
            }
        }
        let next = (0..parsed.len()).find(|&j| {
            let on_path = j == position || path.iter().any(|s| s.position == j);
            !on_path
                && parsed[j].as_ref().is_some_and(|issuer| {
                    issuer.subject().as_raw() == issuer_name && signed_by(issuer.public_key())
                })
        })?;
        let issuer = parsed[next].as_ref()?;
        path.push(Step {
            position,
            issuer_key: issuer.public_key().raw.to_vec(),
        });
        position = next;
    }
}

fn authority_key_id(cert: &X509Certificate<'_>) -> Option<Vec<u8>> {
    cert.extensions()
        .iter()
        .find_map(|ext| match ext.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                aki.key_identifier.as_ref().map(|id| id.0.to_vec())
            }
            _ => None,
        })
}

/// The first http(s) URI of the CRL distribution points.
fn crl_url(cert: &X509Certificate<'_>) -> Option<Url> {
    cert.extensions()
        .iter()
        .find_map(|ext| match ext.parsed_extension() {
            ParsedExtension::CRLDistributionPoints(points) => Some(points),
            _ => None,
        })?
        .points
        .iter()
        .filter_map(|point| match &point.distribution_point {
            Some(DistributionPointName::FullName(names)) => Some(names),
            _ => None,
        })
        .flatten()
        .find_map(|name| match name {
            GeneralName::URI(uri) => Url::parse(uri)
                .ok()
                .filter(|url| matches!(url.scheme(), "http" | "https")),
            _ => None,
        })
}
