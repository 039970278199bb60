//! A minimal rustls + hyper client, to check the harness servers (not the program under test).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A rustls client config (aws-lc-rs provider, TLS 1.2 + 1.3) trusting only `roots`.
pub fn client_config(roots: &[CertificateDer<'static>]) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for root in roots {
        store.add(root.clone()).expect("add root");
    }
    let config = ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_root_certificates(store)
    .with_no_client_auth();
    Arc::new(config)
}

/// A client config trusting only the test root ("Vigie Test Root CA").
pub fn test_client_config() -> Arc<ClientConfig> {
    client_config(&[super::pki::test_ca().root.cert.clone()])
}

/// TCP-connect to `addr` and run a TLS handshake with SNI / verified name `server_name`.
/// A verification failure comes back as an `io::Error` wrapping a `rustls::Error`
/// (see [`rustls_error`]).
pub async fn tls_connect(
    addr: SocketAddr,
    server_name: &str,
    config: Arc<ClientConfig>,
) -> io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(server_name.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    TlsConnector::from(config).connect(name, tcp).await
}

/// The `rustls::Error` inside an `io::Error` from [`tls_connect`], if any.
pub fn rustls_error(err: &io::Error) -> Option<&rustls::Error> {
    err.get_ref()?.downcast_ref::<rustls::Error>()
}

/// The answer to [`http_get`].
#[derive(Debug)]
pub struct HttpResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// One HTTP/1.1 `GET path` with `Host: host` over an established stream; reads the whole body.
pub async fn http_get<S>(stream: S, host: &str, path: &str) -> Result<HttpResponse, hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let conn_task = tokio::spawn(conn);
    let req = Request::get(path)
        .header(hyper::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .expect("valid request");
    let resp = sender.send_request(req).await?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await?.to_bytes();
    conn_task.abort();
    Ok(HttpResponse {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// Send `GET path` with `Host: host` and return as soon as the response head is in;
/// the body is left to stream (read it with `http_body_util::BodyExt::frame`).
pub async fn http_get_streaming<S>(
    stream: S,
    host: &str,
    path: &str,
) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection task ends by itself once the response body is dropped.
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(hyper::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .expect("valid request");
    sender.send_request(req).await
}
