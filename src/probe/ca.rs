//! What the CA says about the certificates a target serves: its renewal
//! window for the leaf (`ari`) and its CRLs (`crl`), asked after the probe.
//!
//! These lookups run once the check's own exchange is over, each fetch with
//! its own timeout (the check's `timeout`, at most [`FETCH_TIMEOUT`]), so a
//! slow or dead CA endpoint can delay an outcome but never turns the check
//! into a timeout. Almost every lookup is answered from the shared caches
//! (`cache`), so in steady state this costs a hash lookup per certificate.
//!
//! The certificate facts they need (serial, AKI, CRL URLs, the issuer's key)
//! are read from the DER as served, once per distinct chain. Only trusted
//! chains are asked about.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use url::Url;
use x509_parser::extensions::{DistributionPointName, GeneralName, ParsedExtension};
use x509_parser::prelude::X509Certificate;

use super::address::{AddressClass, RedirectPolicy};
use super::ari::{self, Ari};
use super::chains;
use super::client::Client;
use super::crl::{self, Crls};
use super::tls::Trust;
use crate::cert;
use crate::check::Check;
use crate::outcome::{AriReport, TlsReport};

/// The longest one ARI or CRL fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Chains whose facts are kept before the map is emptied.
const FACTS_KEPT: usize = 1024;

/// The shared caches (one per prober).
#[derive(Debug, Default)]
pub struct Authority {
    pub ari: Ari,
    pub crls: Crls,
    facts: Mutex<HashMap<FactsKey, Arc<Vec<Facts>>>>,
}

/// A served chain (`chains::key`) under one trust (its address: the
/// anchors decide which issuer keys are known).
type FactsKey = ([u8; 32], usize);

/// What one served certificate says about where to ask.
#[derive(Debug)]
struct Facts {
    subject_name: Vec<u8>,
    serial: Vec<u8>,
    aki: Option<Vec<u8>>,
    crl_url: Option<Url>,
    issuer_name: Vec<u8>,
    issuer_key: Option<Vec<u8>>,
}

impl Authority {
    /// Fills `tls.ari` and `tls.revocation` for the chain `served`.
    pub async fn inspect(
        &self,
        client: &Client,
        check: &Check,
        trust: &Trust,
        served: &[rustls::pki_types::CertificateDer<'static>],
        first_peer: Option<std::net::IpAddr>,
        tls: &mut TlsReport,
    ) {
        if served.is_empty() {
            return;
        }
        let facts = self.facts(served, trust);
        // Only a trusted chain is asked about: an untrusted one is down
        // already, and its certificates (and the keys a CRL would be
        // verified with) are the target's own making, so fetching and
        // keeping what they point at would be the target's choice.
        if !tls.trusted {
            return;
        }
        tls.verified_path = verified_path(&facts, trust).filter(|p| p.len() < facts.len());
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
        let timeout = check.timeout.min(FETCH_TIMEOUT);
        if wants_ari {
            if let Some(leaf) = facts.first() {
                tls.ari = self.ari(client, check, trust, leaf, policy, timeout).await;
            }
        }
        if !check.tls.revocation {
            return;
        }
        for (fact, info) in facts.iter().zip(tls.chain.iter()) {
            let Some(url) = &fact.crl_url else {
                continue;
            };
            let subject = crl::Subject {
                subject: &info.subject,
                serial: &fact.serial,
                issuer_name: &fact.issuer_name,
                issuer_key: fact.issuer_key.as_deref(),
                url,
            };
            let report = self
                .crls
                .lookup(client, trust, &subject, policy, timeout)
                .await;
            tls.revocation.push(report);
        }
    }

    async fn ari(
        &self,
        client: &Client,
        check: &Check,
        trust: &Trust,
        leaf: &Facts,
        policy: RedirectPolicy,
        timeout: Duration,
    ) -> Option<AriReport> {
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
                    .lookup(client, trust, &directory, &cert_id, policy, timeout)
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
        let facts = Arc::new(read_facts(served, trust));
        if kept.len() >= FACTS_KEPT {
            kept.clear();
        }
        kept.insert(key, facts.clone());
        facts
    }
}

/// Serial, AKI, CRL URL and the issuer's key of each certificate. The
/// issuer is looked for among the served certificates, then the anchors.
fn read_facts(served: &[rustls::pki_types::CertificateDer<'static>], trust: &Trust) -> Vec<Facts> {
    let parsed: Vec<Option<X509Certificate<'_>>> = served
        .iter()
        .map(|der| {
            x509_parser::parse_x509_certificate(der)
                .ok()
                .map(|(_, c)| c)
        })
        .collect();
    parsed
        .iter()
        .enumerate()
        .map(|(i, cert)| {
            let Some(cert) = cert else {
                return Facts {
                    subject_name: Vec::new(),
                    serial: Vec::new(),
                    aki: None,
                    crl_url: None,
                    issuer_name: Vec::new(),
                    issuer_key: None,
                };
            };
            let issuer_name = cert.issuer().as_raw();
            let served_issuer = parsed.iter().enumerate().find_map(|(j, other)| {
                let other = other.as_ref()?;
                (j != i && other.subject().as_raw() == issuer_name)
                    .then(|| other.public_key().raw.to_vec())
            });
            let issuer_key = served_issuer.or_else(|| {
                trust
                    .anchor_key(cert::name_contents(issuer_name))
                    .map(<[u8]>::to_vec)
            });
            Facts {
                subject_name: cert.subject().as_raw().to_vec(),
                serial: cert.raw_serial().to_vec(),
                aki: authority_key_id(cert),
                crl_url: crl_url(cert),
                issuer_name: issuer_name.to_vec(),
                issuer_key,
            }
        })
        .collect()
}

/// The served certificates from the leaf to the first one a trust anchor
/// issued, chained by name (WebPKI has verified that such a path exists;
/// this finds which served certificates are on it). `None` when no served
/// path reaches an anchor.
fn verified_path(facts: &[Facts], trust: &Trust) -> Option<Vec<usize>> {
    let mut path = vec![0];
    loop {
        let current = &facts[*path.last()?];
        if current.issuer_name.is_empty() {
            return None;
        }
        if trust.is_anchor(cert::name_contents(&current.issuer_name)) {
            return Some(path);
        }
        let next = (0..facts.len())
            .find(|j| !path.contains(j) && facts[*j].subject_name == current.issuer_name)?;
        path.push(next);
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
