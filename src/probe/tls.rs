//! Trust and the recording verifier: how vigie sees the chain a server
//! presents even when it refuses to trust it.
//!
//! rustls hands the presented certificates to a `ServerCertVerifier` and, if
//! that verifier says no, aborts the handshake: the caller never sees the
//! chain. Browsers show the user an error page; an operator needs the
//! certificate that caused it. So the verifier used for probes records what
//! it was given, and its own verdict, then delegates every decision to the
//! ordinary WebPKI verifier. It never accepts anything WebPKI rejects: this is
//! the only use of rustls's `danger` API in vigie, and it changes what is
//! *recorded*, not what is *trusted*.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use time::OffsetDateTime;

use crate::cert::{self, Presented};
use crate::outcome::VerifyError;
use crate::tls_words;

/// One trust configuration (Mozilla roots plus any extra CAs), built once and
/// shared by every probe that uses it.
pub struct Trust {
    /// Shared by every connection made with this trust: its verifier
    /// records into the task-local slot of the handshake being polled (see
    /// [`recording`]), so nothing in it is per connection.
    config: Arc<rustls::ClientConfig>,
    /// The same without ALPN, for TLS that carries something else than
    /// HTTP (see [`Carrying`]).
    bare: Arc<rustls::ClientConfig>,
    /// Subjects of the trust anchors, to tell "intermediate not served" from
    /// "issued by a CA nobody trusts".
    anchor_subjects: HashSet<Vec<u8>>,
    /// Each anchor's SubjectPublicKeyInfo (DER), by subject: the key a CRL
    /// issued by a root is verified with (`probe::crl`).
    anchor_keys: HashMap<Vec<u8>, Vec<u8>>,
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trust")
            .field("anchors", &self.anchor_subjects.len())
            .finish()
    }
}

impl Trust {
    /// Mozilla's roots (compiled in, no file read) plus `extra`.
    pub fn new(
        provider: Arc<CryptoProvider>,
        extra: &[CertificateDer<'static>],
    ) -> Result<Self, rustls::Error> {
        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        for der in extra {
            roots.add(der.clone())?;
        }
        let anchor_subjects = roots
            .roots
            .iter()
            .map(|anchor| anchor.subject.as_ref().to_vec())
            .collect();
        let anchor_keys = roots
            .roots
            .iter()
            .map(|anchor| {
                let contents = anchor.subject_public_key_info.as_ref();
                (anchor.subject.as_ref().to_vec(), der_sequence(contents))
            })
            .collect();
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|err| rustls::Error::General(err.to_string()))?;
        let config = client_config(provider, verifier);
        let mut bare = config.clone();
        bare.alpn_protocols.clear();
        Ok(Self {
            config: Arc::new(config),
            bare: Arc::new(bare),
            anchor_subjects,
            anchor_keys,
        })
    }

    /// The SubjectPublicKeyInfo DER of the trust anchor named `subject`
    /// (the Name's contents, as [`cert::Presented::subject_der`]).
    pub fn anchor_key(&self, subject_der: &[u8]) -> Option<&[u8]> {
        self.anchor_keys.get(subject_der).map(Vec::as_slice)
    }

    /// The client configuration for probes. Its verifier records what it is
    /// shown when the handshake runs inside [`recording`], and it has no
    /// session cache, so every probe does a full handshake and sees the
    /// chain actually served.
    pub fn client_config(&self, carrying: Carrying) -> Arc<rustls::ClientConfig> {
        match carrying {
            Carrying::Http => self.config.clone(),
            Carrying::Other => self.bare.clone(),
        }
    }

    /// Is a trust anchor named `subject_der` (the Name's contents)?
    pub fn is_anchor(&self, subject_der: &[u8]) -> bool {
        self.anchor_subjects.contains(subject_der)
    }
}

/// What a probe's TLS connection carries, which decides the ALPN it
/// offers: `http/1.1` for HTTP, nothing otherwise. A server with its own
/// ALPN list (MQTT, a database, a mail server) may refuse a handshake
/// offering only a protocol it does not speak (RFC 7301, section 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrying {
    Http,
    Other,
}

/// `contents` wrapped in a DER SEQUENCE header: webpki keeps an anchor's
/// SubjectPublicKeyInfo without it.
fn der_sequence(contents: &[u8]) -> Vec<u8> {
    let len = contents.len();
    let mut out = vec![0x30];
    match len {
        0..=0x7f => out.push(len as u8),
        0x80..=0xff => out.extend([0x81, len as u8]),
        _ => out.extend([0x82, (len >> 8) as u8, len as u8]),
    }
    out.extend_from_slice(contents);
    out
}

fn client_config(
    provider: Arc<CryptoProvider>,
    verifier: Arc<WebPkiServerVerifier>,
) -> rustls::ClientConfig {
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .expect("the aws-lc-rs provider supports TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(RecordingVerifier { inner: verifier }))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    config
}

tokio::task_local! {
    /// Where the verifier records, for the handshake being polled. The
    /// verifier runs synchronously inside the handshake future's `poll`, so
    /// the slot of the task polling it is the one of that connection: one
    /// shared `ClientConfig` serves every probe.
    static SEEN: RefCell<Option<Seen>>;
}

/// Runs `handshake` (a connect future using [`Trust::client_config`]) and
/// returns its output with what the verifier was shown, if it got that far.
pub async fn recording<F: Future>(handshake: F) -> (F::Output, Option<Seen>) {
    let mut scoped = std::pin::pin!(SEEN.scope(RefCell::new(None), handshake));
    let output = scoped.as_mut().await;
    let seen = scoped.as_mut().take_value().and_then(RefCell::into_inner);
    (output, seen)
}

/// What the verifier was shown, and what WebPKI said about it.
#[derive(Clone)]
pub struct Seen {
    /// Leaf first, then intermediates in the order served.
    pub chain: Vec<CertificateDer<'static>>,
    pub verdict: Result<(), rustls::Error>,
}

struct RecordingVerifier {
    inner: Arc<WebPkiServerVerifier>,
}

impl fmt::Debug for RecordingVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RecordingVerifier")
    }
}

impl ServerCertVerifier for RecordingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verdict = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        // Outside `recording` there is nowhere to record: nothing is lost
        // but the report, and the decision is WebPKI's either way.
        let _ = SEEN.try_with(|slot| {
            let chain = std::iter::once(end_entity)
                .chain(intermediates)
                .map(|c| c.clone().into_owned())
                .collect();
            *slot.borrow_mut() = Some(Seen {
                chain,
                verdict: verdict.as_ref().map(|_| ()).map_err(Clone::clone),
            });
        });
        verdict
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Turns WebPKI's verdict into the operator's reason, using the chain as
/// presented: an "unknown issuer" is really a missing intermediate, a
/// self-signed certificate, or a staging CA, and each has its own fix.
/// Whatever the chain does not explain is worded by [`tls_words`], with the
/// leaf's name for the sentences that need it.
pub fn explain(
    error: &rustls::Error,
    presented: &[Presented],
    trust: &Trust,
    host: &str,
    now: OffsetDateTime,
) -> VerifyError {
    let rustls::Error::InvalidCertificate(cert_error) = error else {
        return VerifyError::Other {
            detail: tls_words::error(error),
        };
    };
    let leaf = presented.first();
    let worded = || VerifyError::Other {
        detail: tls_words::certificate(
            cert_error,
            leaf.map(|leaf| tls_words::Leaf {
                subject: &leaf.info.subject,
                self_issued: leaf.is_self_issued(),
            }),
        ),
    };
    match cert_error {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            let expired = presented
                .iter()
                .filter(|p| p.info.not_after < now)
                .min_by_key(|p| p.info.not_after);
            match expired {
                Some(p) => VerifyError::Expired {
                    not_after: p.info.not_after,
                },
                None => worded(),
            }
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            let future = presented
                .iter()
                .filter(|p| p.info.not_before > now)
                .max_by_key(|p| p.info.not_before);
            match future {
                Some(p) => VerifyError::NotYetValid {
                    not_before: p.info.not_before,
                },
                None => worded(),
            }
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            let expected = match cert_error {
                CertificateError::NotValidForNameContext { expected, .. } => {
                    expected.to_str().into_owned()
                }
                _ => host.to_string(),
            };
            VerifyError::HostnameMismatch {
                expected,
                covered: leaf.map(|l| l.info.sans.clone()).unwrap_or_default(),
            }
        }
        CertificateError::UnknownIssuer => match leaf {
            Some(leaf) => unknown_issuer(leaf, presented, trust),
            None => worded(),
        },
        _ => worded(),
    }
}

fn unknown_issuer(leaf: &Presented, presented: &[Presented], trust: &Trust) -> VerifyError {
    // The leaf's issuer is the name operators know ("R11"), so report the
    // first staging issuer from the leaf up.
    if let Some(staging) = presented.iter().find(|p| cert::is_staging(&p.info.issuer)) {
        return VerifyError::StagingIssuer {
            issuer: staging.info.issuer.clone(),
        };
    }
    if leaf.is_self_issued() && presented.len() == 1 {
        return VerifyError::SelfSigned {
            subject: leaf.info.subject.clone(),
        };
    }
    let issuer_served = presented[1..]
        .iter()
        .any(|p| p.subject_der == leaf.issuer_der);
    if !issuer_served && !trust.is_anchor(&leaf.issuer_der) {
        return VerifyError::ChainIncomplete {
            missing_issuer: leaf.info.issuer.clone(),
        };
    }
    let top = presented.last().unwrap_or(leaf);
    VerifyError::UnknownIssuer {
        issuer: top.info.issuer.clone(),
    }
}
