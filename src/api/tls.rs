//! HTTPS for the API (`[api] tls_cert_file`, `tls_key_file`): the rustls
//! server config, built with vigie's one crypto provider (with two
//! providers compiled in, rustls has no implicit default and
//! `ServerConfig::builder()` fails), and the holder a reload swaps so that
//! a renewed certificate is served without a restart.
//!
//! Only `http/1.1` is offered over ALPN: the API speaks HTTP/1 alone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::config::ApiTls;

/// Why the API's certificate or key cannot be served, named.
#[derive(Debug, thiserror::Error)]
pub enum ApiTlsError {
    #[error("cannot read [api] {key} {}: {source}", path.display())]
    Unreadable {
        key: &'static str,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("[api] tls_cert_file {} holds no certificate (PEM, the server's first, then its intermediates)", path.display())]
    NoCertificate { path: PathBuf },
    #[error("[api] tls_cert_file and tls_key_file do not make a server identity: {} (does the key belong to the first certificate?)", crate::tls_words::error(source))]
    Rejected { source: rustls::Error },
}

/// The TLS the API serves now; `None` serves plain HTTP (loopback only:
/// `vigie validate` refuses anything else without TLS).
#[derive(Clone, Default)]
pub struct ServerTls(Arc<RwLock<Option<TlsAcceptor>>>);

impl ServerTls {
    pub fn set(&self, acceptor: Option<TlsAcceptor>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = acceptor;
    }

    pub(super) fn current(&self) -> Option<TlsAcceptor> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The acceptor for `[api]`'s TLS files, `None` without them.
pub fn acceptor(tls: Option<&ApiTls>) -> Result<Option<TlsAcceptor>, ApiTlsError> {
    let Some(tls) = tls else {
        return Ok(None);
    };
    let config = server_config(&tls.cert_file, &tls.key_file)?;
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// TLS 1.2 and 1.3, no client certificates (the bearer token is the
/// credential), `http/1.1` only over ALPN.
pub fn server_config(
    cert_file: &Path,
    key_file: &Path,
) -> Result<rustls::ServerConfig, ApiTlsError> {
    let chain = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| ApiTlsError::Unreadable {
            key: "tls_cert_file",
            path: cert_file.to_path_buf(),
            source,
        })?;
    if chain.is_empty() {
        return Err(ApiTlsError::NoCertificate {
            path: cert_file.to_path_buf(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|source| ApiTlsError::Unreadable {
        key: "tls_key_file",
        path: key_file.to_path_buf(),
        source,
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(crate::net::crypto_provider())
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        // Invariant: aws-lc-rs implements both default versions.
        .expect("the aws-lc-rs provider supports the default TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|source| ApiTlsError::Rejected { source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_certificate_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("cert.pem");
        std::fs::write(&empty, "").unwrap();
        let key = dir.path().join("key.pem");
        let err = server_config(&empty, &key).unwrap_err();
        assert!(matches!(err, ApiTlsError::NoCertificate { .. }), "{err}");
        let err = server_config(&dir.path().join("none.pem"), &key).unwrap_err();
        assert!(err.to_string().contains("tls_cert_file"), "{err}");
    }
}
