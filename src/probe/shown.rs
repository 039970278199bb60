//! Certificate facts as vigie keeps them: every name a server put in its
//! certificates escaped and capped (`sanitize`), the SAN list bounded.
//!
//! A certificate is the target's to write: its subject can hold terminal
//! escapes, its SAN list thousands of names. The chain is sanitised once,
//! as it is captured, so the store, the mail, `/metrics` and `vigie check`
//! all see the same bounded text. The judgments that need the names as
//! issued (hostname coverage, which issuer is missing) run on the raw
//! certificate before this, in `client` and `tls::explain`.

use crate::cert::CertInfo;
use crate::outcome::VerifyError;
use crate::sanitize;

/// The certificate's description, every text field sanitised.
pub fn cert(info: CertInfo) -> CertInfo {
    CertInfo {
        subject: sanitize::value(&info.subject),
        issuer: sanitize::value(&info.issuer),
        sans: sanitize::list(&info.sans),
        serial: sanitize::value(&info.serial),
        key: sanitize::value(&info.key),
        signature: sanitize::value(&info.signature),
        ..info
    }
}

/// WebPKI's refusal, explained with sanitised names.
pub fn verify_error(err: VerifyError) -> VerifyError {
    match err {
        VerifyError::HostnameMismatch { expected, covered } => VerifyError::HostnameMismatch {
            expected: sanitize::value(&expected),
            covered: sanitize::list(&covered),
        },
        VerifyError::SelfSigned { subject } => VerifyError::SelfSigned {
            subject: sanitize::value(&subject),
        },
        VerifyError::StagingIssuer { issuer } => VerifyError::StagingIssuer {
            issuer: sanitize::value(&issuer),
        },
        VerifyError::ChainIncomplete { missing_issuer } => VerifyError::ChainIncomplete {
            missing_issuer: sanitize::value(&missing_issuer),
        },
        VerifyError::UnknownIssuer { issuer } => VerifyError::UnknownIssuer {
            issuer: sanitize::value(&issuer),
        },
        // rustls's own text can quote the names the certificate presents.
        VerifyError::Other { detail } => VerifyError::Other {
            detail: sanitize::message(&detail),
        },
        dated @ (VerifyError::Expired { .. } | VerifyError::NotYetValid { .. }) => dated,
    }
}

#[cfg(test)]
mod tests {
    use time::OffsetDateTime;

    use super::*;

    #[test]
    fn every_name_is_escaped_and_bounded() {
        let info = CertInfo {
            subject: "CN=\x1b[31mevil\x1b[0m".to_string(),
            issuer: "CN=".to_string() + &"i".repeat(10_000),
            not_before: OffsetDateTime::UNIX_EPOCH,
            not_after: OffsetDateTime::UNIX_EPOCH,
            days_left: 0,
            hours_left: 0,
            lifetime_hours: 0,
            sans: (0..500).map(|i| format!("h{i}.example")).collect(),
            serial: "00".repeat(1000),
            sha256: "ab".repeat(32),
            key: "ECDSA P-256".to_string(),
            signature: "ecdsa-with-SHA256".to_string(),
        };
        let shown = cert(info);
        assert_eq!(shown.subject, "CN=\\x1b[31mevil\\x1b[0m");
        assert!(shown.issuer.len() <= sanitize::VALUE_CAP);
        assert!(shown.serial.len() <= sanitize::VALUE_CAP);
        assert_eq!(shown.sans.len(), sanitize::LIST_CAP + 1);
        assert_eq!(shown.key, "ECDSA P-256");
        let err = verify_error(VerifyError::SelfSigned {
            subject: "CN=\x07".to_string(),
        });
        assert_eq!(
            err.to_string(),
            "self-signed certificate (CN=\\x07) is not trusted"
        );
    }
}

/// Certificates as a hostile server may send them: the capture
/// (`cert::read` then [`cert`]) must never panic, and always give bounded,
/// clean names.
#[cfg(test)]
mod generated {
    use proptest::prelude::*;
    use time::OffsetDateTime;

    use super::*;
    use crate::sanitize::{LIST_CAP, VALUE_CAP};

    fn capture(der: &[u8]) -> CertInfo {
        cert(crate::cert::read(der, OffsetDateTime::now_utc()).info)
    }

    fn assert_bounded(info: &CertInfo) {
        for text in [
            &info.subject,
            &info.issuer,
            &info.serial,
            &info.key,
            &info.signature,
        ] {
            assert!(text.len() <= VALUE_CAP, "{} bytes", text.len());
            assert!(!text.chars().any(char::is_control), "{text:?}");
        }
        assert!(info.sans.len() <= LIST_CAP + 1);
    }

    /// A real certificate whose CN holds escapes and whose SAN list is long.
    fn hostile_der() -> Vec<u8> {
        let names: Vec<String> = (0..300).map(|i| format!("h{i}.example.test")).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "\x1b]0;owned\x07\x1b[31mevil");
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    /// `depth` SEQUENCEs inside each other (DER, long-form lengths).
    fn nested(depth: usize) -> Vec<u8> {
        let mut der = vec![0x05, 0x00];
        for _ in 0..depth {
            let len = der.len() as u32;
            let mut outer = vec![0x30, 0x84];
            outer.extend_from_slice(&len.to_be_bytes());
            outer.extend_from_slice(&der);
            der = outer;
        }
        der
    }

    #[test]
    fn a_hostile_certificate_is_captured_bounded() {
        let info = capture(&hostile_der());
        assert_bounded(&info);
        assert!(
            info.subject.contains("\\x1b]0;owned\\x07"),
            "{}",
            info.subject
        );
        assert_eq!(info.sans.len(), LIST_CAP + 1);
    }

    #[test]
    fn deeply_nested_der_is_refused_without_a_panic() {
        for depth in [1, 10, 100, 10_000] {
            assert_bounded(&capture(&nested(depth)));
        }
    }

    proptest! {
        #[test]
        fn random_bytes(der in prop::collection::vec(any::<u8>(), 0..4096)) {
            assert_bounded(&capture(&der));
        }

        #[test]
        fn truncated_certificates(cut in 0usize..2048) {
            let der = hostile_der();
            assert_bounded(&capture(&der[..cut.min(der.len())]));
        }

        #[test]
        fn mutated_certificates(
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        ) {
            let mut der = hostile_der();
            for (at, byte) in flips {
                let i = at.index(der.len());
                der[i] = byte;
            }
            assert_bounded(&capture(&der));
        }
    }
}
