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
