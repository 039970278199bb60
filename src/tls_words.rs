//! rustls's errors in the operator's words: the one place a TLS failure
//! (a refused certificate, an alert, a protocol mismatch) becomes the
//! sentence shown in outcomes, mails, reports, pages and the CLI.
//!
//! rustls's own `Display` falls back to `Debug` for most variants, so a
//! self-signed CA certificate read `invalid peer certificate:
//! Other(OtherError(CaUsedAsEndEntity))`. Every variant the probe or the
//! mail sender can meet has a sentence here; webpki's errors, which rustls
//! wraps in `CertificateError::Other`, are downcast and worded too. The
//! enums are `non_exhaustive`: a variant added by a later rustls gets its
//! name split into words ([`words`]), never a `Debug` dump.
//!
//! This module only words errors: it does not decide what is trusted, nor
//! read the presented chain (the probe passes the leaf's subject in).

use rustls::pki_types::UnixTime;
use rustls::{AlertDescription, CertRevocationListError, CertificateError, ExtendedKeyPurpose};
use time::OffsetDateTime;

/// What the caller knows of the certificate the server presented, for the
/// sentences that name it.
#[derive(Debug, Clone, Copy)]
pub struct Leaf<'a> {
    /// Its subject as x509-parser prints it ("C=FR, O=Acme, CN=acme.test").
    pub subject: &'a str,
    /// It names itself as its issuer (self-signed).
    pub self_issued: bool,
}

/// Any rustls error, in words. Certificate errors are worded without the
/// leaf's name; use [`certificate`] where the chain is known.
pub fn error(err: &rustls::Error) -> String {
    use rustls::Error as E;
    match err {
        E::InvalidCertificate(cert) => certificate(cert, None),
        E::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => {
            "the server did not answer with TLS (is the port plain HTTP? then use http://)"
                .to_string()
        }
        E::InvalidMessage(message) => format!(
            "the server sent a corrupt TLS message ({})",
            words(&format!("{message:?}"))
        ),
        E::AlertReceived(description) => alert(*description),
        E::PeerIncompatible(why) => peer_incompatible(why),
        E::PeerMisbehaved(why) => format!(
            "the server broke the TLS protocol ({})",
            words(&format!("{why:?}"))
        ),
        E::InappropriateMessage {
            expect_types,
            got_type,
        } => unexpected(
            got_type.as_str(),
            expect_types.iter().map(|t| t.as_str()),
            "message",
        ),
        E::InappropriateHandshakeMessage {
            expect_types,
            got_type,
        } => unexpected(
            got_type.as_str(),
            expect_types.iter().map(|t| t.as_str()),
            "handshake message",
        ),
        E::NoCertificatesPresented => "the server presented no certificate".to_string(),
        E::UnsupportedNameType => {
            "the server name is of a type TLS cannot verify (use a DNS name or an IP address)"
                .to_string()
        }
        E::DecryptError => {
            "the server's TLS messages could not be decrypted (the handshake keys do not agree)"
                .to_string()
        }
        E::EncryptError => "a TLS message was too large to encrypt".to_string(),
        E::PeerSentOversizedRecord => {
            "the server sent a TLS record larger than the protocol allows".to_string()
        }
        E::HandshakeNotComplete => "the TLS handshake did not complete".to_string(),
        E::NoApplicationProtocol => {
            "the server speaks none of the application protocols offered (ALPN: http/1.1)"
                .to_string()
        }
        E::InvalidCertRevocationList(crl) => revocation_list(crl),
        E::InvalidEncryptedClientHello(why) => format!(
            "encrypted client hello failed ({})",
            words(&format!("{why:?}"))
        ),
        E::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the private key does not belong to the certificate".to_string()
        }
        E::InconsistentKeys(_) => {
            "the private key's public half cannot be compared with the certificate".to_string()
        }
        E::BadMaxFragmentSize => "the configured TLS fragment size is out of range".to_string(),
        E::FailedToGetCurrentTime => "the system clock could not be read".to_string(),
        E::FailedToGetRandomBytes => "the system gave no random bytes".to_string(),
        E::General(text) => text.clone(),
        E::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(pki) => webpki_error(pki, None),
            None => other.to_string(),
        },
        other => format!("TLS failed ({})", words(&format!("{other:?}"))),
    }
}

/// Why a certificate (or its chain) was refused. `leaf` names the server's
/// certificate in the sentences that need it (a CA certificate served as
/// the server's).
pub fn certificate(err: &CertificateError, leaf: Option<Leaf<'_>>) -> String {
    use CertificateError as C;
    match err {
        C::BadEncoding => {
            "a certificate cannot be parsed (its DER encoding is invalid)".to_string()
        }
        C::Expired => "a certificate of the chain has expired".to_string(),
        C::ExpiredContext { not_after, .. } => {
            format!("a certificate of the chain expired on {}", date(*not_after))
        }
        C::NotValidYet => "a certificate of the chain is not valid yet".to_string(),
        C::NotValidYetContext { not_before, .. } => format!(
            "a certificate of the chain is not valid before {}",
            date(*not_before)
        ),
        C::Revoked => "the certificate has been revoked by its CA".to_string(),
        C::UnhandledCriticalExtension => {
            "a certificate has a critical extension that TLS clients do not understand".to_string()
        }
        C::UnknownIssuer => "the certificate is not issued by a trusted CA".to_string(),
        C::UnknownRevocationStatus => {
            "the certificate's revocation status is unknown (no revocation list covers it)"
                .to_string()
        }
        C::ExpiredRevocationList => "the CA's revocation list (CRL) has expired".to_string(),
        C::ExpiredRevocationListContext { next_update, .. } => format!(
            "the CA's revocation list (CRL) expired on {}",
            date(*next_update)
        ),
        C::BadSignature => {
            "a certificate's signature does not verify with its issuer's key (bad signature)"
                .to_string()
        }
        #[allow(deprecated)]
        C::UnsupportedSignatureAlgorithm => {
            "a certificate is signed with an algorithm TLS clients do not support".to_string()
        }
        C::UnsupportedSignatureAlgorithmContext {
            signature_algorithm_id,
            ..
        } => format!(
            "a certificate is signed with an algorithm TLS clients do not support ({})",
            algorithm(signature_algorithm_id)
        ),
        C::UnsupportedSignatureAlgorithmForPublicKeyContext {
            signature_algorithm_id,
            public_key_algorithm_id,
        } => format!(
            "a certificate's signature algorithm ({}) does not fit its issuer's key ({})",
            algorithm(signature_algorithm_id),
            algorithm(public_key_algorithm_id)
        ),
        C::NotValidForName => "the certificate does not cover the server's name".to_string(),
        C::NotValidForNameContext {
            expected,
            presented,
        } => match presented.as_slice() {
            [] => format!(
                "the certificate does not cover {} (it names no host)",
                expected.to_str()
            ),
            names => format!(
                "the certificate does not cover {} (it covers {})",
                expected.to_str(),
                names.join(", ")
            ),
        },
        C::InvalidPurpose => {
            "the certificate is not allowed for TLS server authentication (extended key usage)"
                .to_string()
        }
        C::InvalidPurposeContext {
            required,
            presented,
        } => {
            let allowed: Vec<String> = presented.iter().map(purpose).collect();
            let allowed = match allowed.is_empty() {
                true => "nothing".to_string(),
                false => allowed.join(", "),
            };
            format!(
                "the certificate is not allowed for {} (its extended key usage allows {allowed})",
                purpose(required)
            )
        }
        C::InvalidOcspResponse => "the server stapled an invalid OCSP response".to_string(),
        C::ApplicationVerificationFailure => {
            "the certificate is valid, but the client refused it for another reason".to_string()
        }
        C::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(pki) => webpki_error(pki, leaf),
            None => other.to_string(),
        },
        other => format!(
            "the certificate was refused ({})",
            words(&format!("{other:?}"))
        ),
    }
}

/// The errors webpki raises that rustls has no variant for (rustls passes
/// them on inside `CertificateError::Other`), and the others too, since a
/// caller may meet them directly.
fn webpki_error(err: &webpki::Error, leaf: Option<Leaf<'_>>) -> String {
    use webpki::Error as W;
    match err {
        W::CaUsedAsEndEntity => match leaf {
            Some(leaf) if leaf.self_issued => format!(
                "self-signed CA certificate used as the server certificate ({})",
                named(leaf.subject)
            ),
            Some(leaf) => format!(
                "a CA certificate is used as the server certificate ({})",
                named(leaf.subject)
            ),
            None => "a CA certificate is used as the server certificate".to_string(),
        },
        W::EndEntityUsedAsCa => {
            "the chain uses a server certificate (not a CA) as the issuer of another".to_string()
        }
        W::PathLenConstraintViolated => {
            "the chain has more intermediates than an issuing CA allows (path length constraint)"
                .to_string()
        }
        W::NameConstraintViolation => {
            "the certificate names a host its issuing CA may not certify (name constraints)"
                .to_string()
        }
        W::UnsupportedCriticalExtension => {
            "a certificate has a critical extension that TLS clients do not understand".to_string()
        }
        W::CertDistrusted => "the certificate's CA is distrusted".to_string(),
        W::EmptyEkuExtension => {
            "the certificate allows no purpose (its extended key usage is empty)".to_string()
        }
        W::ExtensionValueInvalid | W::MalformedExtensions => {
            "a certificate has a malformed extension".to_string()
        }
        W::InvalidCertValidity => {
            "a certificate's validity period is invalid (it ends before it starts)".to_string()
        }
        W::InvalidNetworkMaskConstraint | W::MalformedNameConstraint => {
            "an issuing CA has malformed name constraints".to_string()
        }
        W::InvalidSerialNumber => "a certificate has an invalid serial number".to_string(),
        W::MalformedDnsIdentifier => "the certificate has a malformed DNS name".to_string(),
        W::MaximumNameConstraintComparisonsExceeded
        | W::MaximumPathBuildCallsExceeded
        | W::MaximumPathDepthExceeded
        | W::MaximumSignatureChecksExceeded => {
            "the chain is too long or tangled to verify (TLS clients give up on it)".to_string()
        }
        W::SignatureAlgorithmMismatch => {
            "a certificate's two signature algorithm fields disagree".to_string()
        }
        W::UnsupportedCertVersion => "a certificate is not an X.509 version 3 one".to_string(),
        W::UnsupportedNameType => "the server name is of a type TLS cannot verify".to_string(),
        W::BadDer | W::BadDerTime | W::TrailingData(_) => {
            "a certificate cannot be parsed (its DER encoding is invalid)".to_string()
        }
        W::IssuerNotCrlSigner => "the revocation list's issuer may not sign CRLs".to_string(),
        W::UnsupportedCrlVersion
        | W::UnsupportedDeltaCrl
        | W::UnsupportedIndirectCrl
        | W::UnsupportedCrlIssuingDistributionPoint
        | W::UnsupportedRevocationReason
        | W::UnsupportedRevocationReasonsPartitioning
        | W::InvalidCrlNumber => {
            "the CA's revocation list is of a kind TLS clients cannot use".to_string()
        }
        other => format!(
            "the certificate was refused ({})",
            words(&format!("{other:?}"))
        ),
    }
}

/// A revocation list rustls refused.
fn revocation_list(err: &CertRevocationListError) -> String {
    use CertRevocationListError as R;
    let why = match err {
        R::BadSignature => "its signature does not verify with the CA's key",
        R::IssuerInvalidForCrl => "its issuer may not sign CRLs",
        R::ParseError => "it cannot be parsed",
        R::InvalidCrlNumber => "its CRL number is invalid",
        R::InvalidRevokedCertSerialNumber => "it lists an invalid serial number",
        R::UnsupportedCriticalExtension => "it has a critical extension TLS clients do not know",
        R::UnsupportedCrlVersion => "it is not an X.509 v2 CRL",
        R::UnsupportedDeltaCrl => "it is a delta CRL",
        R::UnsupportedIndirectCrl => "it is an indirect CRL",
        R::UnsupportedRevocationReason => "it gives an unknown revocation reason",
        _ => "its signature algorithm is not supported",
    };
    format!("the CA's revocation list (CRL) is unusable: {why}")
}

/// A TLS alert the server sent, as the action it stands for, then its
/// name as RFC 8446 spells it (so it can be searched for).
pub fn alert(description: AlertDescription) -> String {
    use AlertDescription as A;
    let what = match description {
        A::HandshakeFailure => "the server refused the handshake",
        A::ProtocolVersion => "the server refused every TLS version offered (1.2 and 1.3)",
        A::InsufficientSecurity => "the server wants stronger ciphers than those offered",
        A::UnrecognisedName => "the server does not serve this host name (SNI)",
        A::CertificateRequired | A::NoCertificate => "the server requires a client certificate",
        A::NoApplicationProtocol => "the server speaks none of the protocols offered (ALPN)",
        A::InternalError => "the server failed during the handshake",
        A::AccessDenied => "the server denied access",
        A::DecodeError | A::IllegalParameter | A::UnexpectedMessage => {
            "the server refused a handshake message"
        }
        A::UserCanceled | A::CloseNotify => "the server closed the connection during the handshake",
        _ => "the server aborted the TLS handshake",
    };
    let name = match description.as_str() {
        Some(name) => words(name),
        None => format!("unknown alert {}", u8::from(description)),
    };
    format!("{what} (TLS alert: {name})")
}

/// A server that shares no protocol version, cipher suite or group with us.
fn peer_incompatible(why: &rustls::PeerIncompatible) -> String {
    use rustls::PeerIncompatible as P;
    match why {
        P::NoCipherSuitesInCommon => "no cipher suite in common with the server".to_string(),
        P::NoKxGroupsInCommon => "no key exchange group in common with the server".to_string(),
        P::NoSignatureSchemesInCommon => {
            "no signature scheme in common with the server".to_string()
        }
        P::ServerDoesNotSupportTls12Or13 | P::ServerTlsVersionIsDisabledByOurConfig => {
            "the server speaks neither TLS 1.2 nor TLS 1.3".to_string()
        }
        P::ExtendedMasterSecretExtensionRequired => {
            "the server does not support the extended master secret (RFC 7627) that TLS 1.2 needs"
                .to_string()
        }
        P::ServerRejectedEncryptedClientHello(_) => {
            "the server rejected the encrypted client hello".to_string()
        }
        other => format!(
            "the server is incompatible with this TLS client ({})",
            words(&format!("{other:?}"))
        ),
    }
}

/// "the server sent an unexpected TLS message (Alert where Handshake was
/// expected)".
fn unexpected<'a>(
    got: Option<&'a str>,
    expected: impl Iterator<Item = Option<&'a str>>,
    what: &str,
) -> String {
    let expected: Vec<String> = expected.map(|t| words(t.unwrap_or("unknown"))).collect();
    format!(
        "the server sent an unexpected TLS {what} ({} where {} was expected)",
        words(got.unwrap_or("unknown")),
        expected.join(" or ")
    )
}

/// "CN=acme.test" when the subject has a CN, else the whole subject.
fn named(subject: &str) -> String {
    match subject.split(", ").find(|part| part.starts_with("CN=")) {
        Some(cn) => cn.to_string(),
        None => subject.to_string(),
    }
}

fn date(at: UnixTime) -> String {
    let secs = i64::try_from(at.as_secs()).unwrap_or(i64::MAX);
    match OffsetDateTime::from_unix_timestamp(secs) {
        Ok(at) => crate::when::minute(at),
        Err(_) => format!("{secs} seconds after 1970"),
    }
}

fn purpose(purpose: &ExtendedKeyPurpose) -> String {
    match purpose {
        ExtendedKeyPurpose::Other(arcs) => {
            let arcs: Vec<String> = arcs.iter().map(usize::to_string).collect();
            format!("OID {}", arcs.join("."))
        }
        known => known.to_string(),
    }
}

/// An AlgorithmIdentifier's contents (an OID, then any parameters) as the
/// algorithm's usual name, or its dotted OID.
fn algorithm(der: &[u8]) -> String {
    let Some(oid) = oid(der) else {
        return "an unreadable algorithm identifier".to_string();
    };
    let name = match oid.as_str() {
        "1.2.840.113549.1.1.1" => "RSA",
        "1.2.840.113549.1.1.5" => "sha1WithRSAEncryption",
        "1.2.840.113549.1.1.4" => "md5WithRSAEncryption",
        "1.2.840.113549.1.1.11" => "sha256WithRSAEncryption",
        "1.2.840.113549.1.1.12" => "sha384WithRSAEncryption",
        "1.2.840.113549.1.1.13" => "sha512WithRSAEncryption",
        "1.2.840.113549.1.1.10" => "RSASSA-PSS",
        "1.2.840.10045.2.1" => "EC",
        "1.2.840.10045.4.1" => "ecdsa-with-SHA1",
        "1.2.840.10045.4.3.2" => "ecdsa-with-SHA256",
        "1.2.840.10045.4.3.3" => "ecdsa-with-SHA384",
        "1.2.840.10045.4.3.4" => "ecdsa-with-SHA512",
        "1.2.840.10040.4.1" | "1.2.840.10040.4.3" => "DSA",
        "1.3.101.112" => "Ed25519",
        "1.3.101.113" => "Ed448",
        _ => return format!("OID {oid}"),
    };
    name.to_string()
}

/// The dotted form of the OID that starts `der` (tag 6, short length).
fn oid(der: &[u8]) -> Option<String> {
    let (&[6, len], rest) = der.split_first_chunk::<2>()? else {
        return None;
    };
    let body = rest.get(..usize::from(len))?;
    let (&first, tail) = body.split_first()?;
    let mut arcs = vec![u64::from(first / 40).min(2), 0];
    arcs[1] = u64::from(first) - arcs[0] * 40;
    let mut value: u64 = 0;
    for &byte in tail {
        value = value.checked_mul(128)? | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            arcs.push(value);
            value = 0;
        }
    }
    let arcs: Vec<String> = arcs.iter().map(u64::to_string).collect();
    Some(arcs.join("."))
}

/// A `Debug` variant name in words: "NoKxGroupsInCommon" becomes "no kx
/// groups in common", "UnknownCA" "unknown CA". Only the leading name is
/// kept, never the fields of a variant that has some, so no `Debug`
/// punctuation reaches the sentence.
pub fn words(debug: &str) -> String {
    let name: Vec<char> = debug
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    for (i, &c) in name.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| name[p]);
        let next = name.get(i + 1);
        let starts = c.is_ascii_uppercase()
            && prev.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase() && next.is_some_and(char::is_ascii_lowercase))
            });
        if starts && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        word.push(c);
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.iter()
        .map(|w| {
            let acronym = w.len() > 1 && w.chars().all(|c| !c.is_ascii_lowercase());
            match acronym {
                true => w.clone(),
                false => w.to_ascii_lowercase(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::pki_types::{AlgorithmIdentifier, ServerName};
    use rustls::OtherError;

    use super::*;

    /// What no reason may show: `Debug` text of rustls, webpki or std.
    const DEBUG_TEXT: [&str; 8] = [
        "Other(",
        "OtherError",
        "Error {",
        "Kind(",
        "{",
        "}",
        "Context",
        "::",
    ];

    fn assert_sentence(text: &str) {
        assert!(!text.is_empty());
        for debug in DEBUG_TEXT {
            assert!(!text.contains(debug), "{debug:?} in {text:?}");
        }
        assert!(
            text.starts_with(|c: char| c.is_ascii_lowercase()),
            "a reason starts lowercase, after the check's name: {text:?}"
        );
    }

    fn webpki(err: webpki::Error) -> CertificateError {
        CertificateError::Other(OtherError(Arc::new(err)))
    }

    fn at(secs: u64) -> UnixTime {
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs))
    }

    /// Every `CertificateError` of rustls 0.23, and what webpki wraps in
    /// `Other`.
    #[allow(deprecated)]
    fn every_certificate_error() -> Vec<CertificateError> {
        use CertificateError as C;
        // sha256WithRSAEncryption and id-ecPublicKey, as AlgorithmIdentifier
        // contents.
        let rsa_sha256 = vec![6, 9, 42, 134, 72, 134, 247, 13, 1, 1, 11, 5, 0];
        const EC_KEY: &[u8] = &[6, 7, 42, 134, 72, 206, 61, 2, 1];
        let mut all = vec![
            C::BadEncoding,
            C::Expired,
            C::ExpiredContext {
                time: at(1_800_000_000),
                not_after: at(1_700_000_000),
            },
            C::NotValidYet,
            C::NotValidYetContext {
                time: at(1_700_000_000),
                not_before: at(1_800_000_000),
            },
            C::Revoked,
            C::UnhandledCriticalExtension,
            C::UnknownIssuer,
            C::UnknownRevocationStatus,
            C::ExpiredRevocationList,
            C::ExpiredRevocationListContext {
                time: at(1_800_000_000),
                next_update: at(1_700_000_000),
            },
            C::BadSignature,
            C::UnsupportedSignatureAlgorithm,
            C::UnsupportedSignatureAlgorithmContext {
                signature_algorithm_id: rsa_sha256.clone(),
                supported_algorithms: vec![AlgorithmIdentifier::from_slice(EC_KEY)],
            },
            C::UnsupportedSignatureAlgorithmForPublicKeyContext {
                signature_algorithm_id: rsa_sha256,
                public_key_algorithm_id: EC_KEY.to_vec(),
            },
            C::NotValidForName,
            C::NotValidForNameContext {
                expected: ServerName::try_from("www.example.test").unwrap(),
                presented: vec!["other.test".into()],
            },
            C::NotValidForNameContext {
                expected: ServerName::try_from("www.example.test").unwrap(),
                presented: Vec::new(),
            },
            C::InvalidPurpose,
            C::InvalidPurposeContext {
                required: ExtendedKeyPurpose::ServerAuth,
                presented: vec![
                    ExtendedKeyPurpose::ClientAuth,
                    ExtendedKeyPurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 4]),
                ],
            },
            C::InvalidOcspResponse,
            C::ApplicationVerificationFailure,
            C::Other(OtherError(Arc::new(std::io::Error::other(
                "a custom verifier's own words",
            )))),
        ];
        use webpki::Error as W;
        all.extend(
            [
                W::CaUsedAsEndEntity,
                W::EndEntityUsedAsCa,
                W::PathLenConstraintViolated,
                W::NameConstraintViolation,
                W::UnsupportedCriticalExtension,
                W::CertDistrusted,
                W::EmptyEkuExtension,
                W::ExtensionValueInvalid,
                W::MalformedExtensions,
                W::InvalidCertValidity,
                W::InvalidNetworkMaskConstraint,
                W::MalformedNameConstraint,
                W::InvalidSerialNumber,
                W::MalformedDnsIdentifier,
                W::MaximumNameConstraintComparisonsExceeded,
                W::MaximumPathBuildCallsExceeded,
                W::MaximumPathDepthExceeded,
                W::MaximumSignatureChecksExceeded,
                W::SignatureAlgorithmMismatch,
                W::UnsupportedCertVersion,
                W::UnsupportedNameType,
                W::BadDer,
                W::BadDerTime,
                W::IssuerNotCrlSigner,
                W::UnsupportedCrlVersion,
                W::UnsupportedDeltaCrl,
                W::UnsupportedIndirectCrl,
                W::UnsupportedRevocationReason,
                W::InvalidCrlNumber,
                W::UnknownIssuer,
                W::CertRevoked,
            ]
            .into_iter()
            .map(webpki),
        );
        all
    }

    #[test]
    fn every_certificate_error_is_a_sentence() {
        let leaf = Leaf {
            subject: "C=AU, O=Internet Widgits Pty Ltd, CN=www.example.test",
            self_issued: true,
        };
        for err in every_certificate_error() {
            for leaf in [None, Some(leaf)] {
                let text = certificate(&err, leaf);
                assert_sentence(&text);
                let wrapped = error(&rustls::Error::InvalidCertificate(err.clone()));
                assert_sentence(&wrapped);
            }
        }
    }

    #[test]
    fn a_ca_certificate_served_as_the_servers_names_its_cn() {
        let err = webpki(webpki::Error::CaUsedAsEndEntity);
        let leaf = |self_issued| Leaf {
            subject: "C=AU, O=Internet Widgits Pty Ltd, CN=www.example.test",
            self_issued,
        };
        assert_eq!(
            certificate(&err, Some(leaf(true))),
            "self-signed CA certificate used as the server certificate (CN=www.example.test)"
        );
        assert_eq!(
            certificate(&err, Some(leaf(false))),
            "a CA certificate is used as the server certificate (CN=www.example.test)"
        );
    }

    #[test]
    fn the_context_of_an_error_is_worded() {
        use CertificateError as C;
        let expired = C::ExpiredContext {
            time: at(1_800_000_000),
            not_after: at(1_700_000_000),
        };
        assert_eq!(
            certificate(&expired, None),
            "a certificate of the chain expired on 2023-11-14 22:13 UTC"
        );
        let err = every_certificate_error()
            .into_iter()
            .find(|e| {
                matches!(
                    e,
                    C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. }
                )
            })
            .unwrap();
        assert_eq!(
            certificate(&err, None),
            "a certificate's signature algorithm (sha256WithRSAEncryption) does not fit its issuer's key (EC)"
        );
        let purpose = C::InvalidPurposeContext {
            required: ExtendedKeyPurpose::ServerAuth,
            presented: vec![ExtendedKeyPurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 4])],
        };
        assert_eq!(
            certificate(&purpose, None),
            "the certificate is not allowed for server authentication (its extended key usage allows OID 1.3.6.1.5.5.7.3.4)"
        );
    }

    #[test]
    fn every_alert_is_a_sentence_with_its_name() {
        for code in 0..=u8::MAX {
            assert_sentence(&alert(AlertDescription::from(code)));
        }
        assert_eq!(
            alert(AlertDescription::HandshakeFailure),
            "the server refused the handshake (TLS alert: handshake failure)"
        );
        assert_eq!(
            alert(AlertDescription::UnknownCA),
            "the server aborted the TLS handshake (TLS alert: unknown CA)"
        );
        assert_eq!(
            alert(AlertDescription::from(0xfe)),
            "the server aborted the TLS handshake (TLS alert: unknown alert 254)"
        );
    }

    #[test]
    fn handshake_errors_are_sentences() {
        use rustls::{ContentType, Error as E, HandshakeType, PeerIncompatible, PeerMisbehaved};
        let errors = [
            E::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
            E::InvalidMessage(rustls::InvalidMessage::MissingData("ServerHello")),
            E::InvalidMessage(rustls::InvalidMessage::DuplicateExtension(10)),
            E::AlertReceived(AlertDescription::ProtocolVersion),
            E::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon),
            E::PeerIncompatible(PeerIncompatible::Tls12NotOffered),
            E::PeerIncompatible(PeerIncompatible::ServerRejectedEncryptedClientHello(None)),
            E::PeerMisbehaved(PeerMisbehaved::SelectedUnofferedCipherSuite),
            E::InappropriateMessage {
                expect_types: vec![ContentType::Handshake],
                got_type: ContentType::ApplicationData,
            },
            E::InappropriateHandshakeMessage {
                expect_types: vec![HandshakeType::ServerHello, HandshakeType::HelloRetryRequest],
                got_type: HandshakeType::Certificate,
            },
            E::NoCertificatesPresented,
            E::UnsupportedNameType,
            E::DecryptError,
            E::EncryptError,
            E::PeerSentOversizedRecord,
            E::HandshakeNotComplete,
            E::NoApplicationProtocol,
            E::BadMaxFragmentSize,
            E::FailedToGetCurrentTime,
            E::FailedToGetRandomBytes,
            E::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch),
            E::InvalidCertRevocationList(CertRevocationListError::BadSignature),
            E::InvalidEncryptedClientHello(rustls::EncryptedClientHelloError::SniRequired),
            E::Other(OtherError(Arc::new(webpki::Error::BadDer))),
        ];
        for err in errors {
            assert_sentence(&error(&err));
        }
        assert_eq!(
            error(&E::PeerMisbehaved(
                PeerMisbehaved::SelectedUnofferedCipherSuite
            )),
            "the server broke the TLS protocol (selected unoffered cipher suite)"
        );
        assert_eq!(
            error(&E::InappropriateMessage {
                expect_types: vec![ContentType::Handshake],
                got_type: ContentType::ApplicationData,
            }),
            "the server sent an unexpected TLS message (application data where handshake was expected)"
        );
    }

    #[test]
    fn variant_names_split_into_words() {
        assert_eq!(words("NoKxGroupsInCommon"), "no kx groups in common");
        assert_eq!(words("UnknownCA"), "unknown CA");
        assert_eq!(words("UnknownPSKIdentity"), "unknown PSK identity");
        assert_eq!(words("MissingData(\"x\")"), "missing data");
        assert_eq!(words("Tls12NotOffered"), "tls12 not offered");
    }

    #[test]
    fn oids_are_read_from_der() {
        assert_eq!(oid(&[6, 3, 43, 101, 112]).as_deref(), Some("1.3.101.112"));
        assert_eq!(oid(&[6, 5, 43, 101]), None);
        assert_eq!(oid(&[5, 0]), None);
        assert_eq!(algorithm(&[6, 3, 42, 3, 4]), "OID 1.2.3.4");
    }
}
