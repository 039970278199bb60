//! TLS for everything that is not a probe: the crypto provider, CA files,
//! root stores and the HTTP clients of vigie's own services (the replication
//! bucket, the heartbeat URL, the CLI asking the daemon). The mail transport
//! builds its rustls config from [`roots`] too.
//!
//! Probes build their trust in `probe/` instead: they record the chain they
//! are shown and never pool connections, which these clients may.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

const USER_AGENT: &str = concat!("vigie/", env!("CARGO_PKG_VERSION"));

/// A CA file that cannot serve as trust, named.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error("cannot read CA file {path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("CA file {path} holds no certificate")]
    Empty { path: PathBuf },
    #[error("CA file {path}: {}", crate::tls_words::error(source))]
    Rejected {
        path: PathBuf,
        source: rustls::Error,
    },
}

/// vigie's crypto: aws-lc-rs, the provider reqwest and lettre use too, so the
/// whole dependency tree carries one. Passed explicitly everywhere because
/// with more than one provider compiled in, rustls has no implicit default.
///
/// Cipher suites are offered in the order browsers offer them (AES-128-GCM
/// first): a probe should negotiate what a visitor negotiates, and the
/// SHA-256 key schedule is measurably cheaper than SHA-384 per handshake.
///
/// Key exchange groups are offered as browsers offer them too, the
/// post-quantum hybrid X25519MLKEM768 first: rustls then sends its key
/// share along with a plain X25519 one (the same X25519 key, no extra
/// work), so a server that supports the hybrid picks it without a retry,
/// and a probe's `key_exchange` says what a visitor's browser gets. With
/// the hybrid last (this build's default), a client sends only an X25519
/// share and servers settle for it, hiding whether they could do better.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    use rustls::crypto::aws_lc_rs::cipher_suite::*;
    use rustls::crypto::aws_lc_rs::kx_group;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![
        kx_group::X25519MLKEM768,
        kx_group::X25519,
        kx_group::SECP256R1,
        kx_group::SECP384R1,
    ];
    provider.cipher_suites = vec![
        TLS13_AES_128_GCM_SHA256,
        TLS13_AES_256_GCM_SHA384,
        TLS13_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(provider)
}

/// Every certificate of a PEM file; a file with none is an error, since an
/// operator who names a CA file means to trust something.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, CaFileError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|source| CaFileError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(CaFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// Mozilla's roots plus the operator's CA file: a private service's CA is
/// trusted *in addition*, so moving to a public one needs no edit.
pub fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, CaFileError> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = ca_file {
        for cert in read_ca_file(path)? {
            roots.add(cert).map_err(|source| CaFileError::Rejected {
                path: path.to_path_buf(),
                source,
            })?;
        }
    }
    Ok(roots)
}

/// A rustls client config over `roots`, TLS 1.2 and 1.3, no client
/// certificate.
pub fn client_config(roots: RootCertStore) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(crypto_provider())
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        // Invariant: aws-lc-rs implements both default versions.
        .expect("the aws-lc-rs provider supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The client for vigie's own API (the CLI asking the daemon), trusting
/// the Mozilla roots: plain HTTP to loopback, or HTTPS to a certificate
/// from a public CA. Short timeouts. Built with an explicit crypto provider
/// because reqwest has no default one in this build.
pub fn api_client() -> Result<reqwest::Client, reqwest::Error> {
    api_client_with(RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    })
}

/// [`api_client`] trusting `roots` (see [`roots`]: the Mozilla roots plus
/// `[api] ca_file`, or the API's own certificate file).
pub fn api_client_with(roots: RootCertStore) -> Result<reqwest::Client, reqwest::Error> {
    api_client_builder(roots).build()
}

/// A client for the daemon's local control socket: plain HTTP over it
/// (the TLS setup is there only because reqwest builds one either way, and
/// must be given its crypto provider).
pub fn local_api_client(socket: &std::path::Path) -> Result<reqwest::Client, reqwest::Error> {
    api_client_builder(RootCertStore::empty())
        .unix_socket(socket)
        .build()
}

/// Pooled connections are dropped after 500 ms idle: the API closes a
/// keep-alive connection `[api] request_timeout` after its last response
/// (1 s at the least, 10 s by default), and a client that reused one at
/// that moment saw "error sending request" (a test polling `/healthz`
/// after a 10 s sleep did, once in CI). A new loopback or LAN connection
/// costs far less than a failed call.
fn api_client_builder(roots: RootCertStore) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .tls_backend_preconfigured(client_config(roots))
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(30))
        .pool_idle_timeout(Duration::from_millis(500))
        .no_proxy()
}

/// A client builder for vigie's own outbound services (the replication
/// bucket, the heartbeat URL): the Mozilla roots plus `extra_ca_file` (a
/// private S3 endpoint or ping service), no proxy. Unlike probes, these
/// connections may be pooled: nothing is judged about the chain, and a
/// replication catch-up makes hundreds of requests to one host. Callers add
/// their own timeouts.
pub fn service_client(extra_ca_file: Option<&Path>) -> Result<reqwest::ClientBuilder, CaFileError> {
    let tls = client_config(roots(extra_ca_file)?);
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .user_agent(USER_AGENT)
        .no_proxy())
}

/// A reqwest error in words: what failed (timed out, cannot connect) and
/// its causes, never its URL, which can carry a secret (a heartbeat UUID,
/// a Slack webhook's token).
pub fn describe(err: &reqwest::Error) -> String {
    let mut text = if err.is_timeout() {
        "timed out".to_string()
    } else if err.is_connect() {
        "cannot connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
