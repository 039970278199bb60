//! The replication bucket: an S3-compatible object store reached through
//! `object_store` (S3 API, SigV4 signing), with vigie's own TLS setup and
//! credentials read from files.
//!
//! This file owns how the bucket is addressed and how its failures are
//! told to the operator; it knows nothing of segments or the store.
//! Listings are the one request vigie signs itself, with object_store's
//! authorizer: see `listing.rs` for why.
//!
//! Transport. The HTTP client is built by `net::service_client`
//! (rustls, aws-lc-rs, the Mozilla roots plus `extra_ca_file`), handed to
//! `object_store` through its connector hook, so the bucket is trusted
//! exactly like everything else vigie talks to and the dependency tree
//! keeps one crypto provider. Plain `http://` endpoints are refused unless
//! the host is a loopback address (a test server, or a local gateway):
//! SigV4 signs requests but does not encrypt them, and the history names
//! every target.
//!
//! Addressing. Path style (`https://endpoint/bucket/key`) is what every
//! S3-compatible server accepts and the default with an `endpoint`;
//! virtual-host style (`https://bucket.endpoint/key`) is the default for AWS
//! itself (no `endpoint`), where new regions require it.

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AwsAuthorizer, S3ConditionalPut};
use object_store::client::{HttpClient, HttpConnector, HttpRequestBody};
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, RetryConfig, UpdateVersion,
};
use time::OffsetDateTime;
use url::Url;

use super::listing::{self, Page};
use super::ReplicateError;
use crate::config::{Credentials, ReplicationConfig};
use crate::redact::redact;

pub use crate::config::Addressing;

/// The region signed into requests when none is configured: what AWS and
/// most S3-compatible servers expect when they do not care.
pub const DEFAULT_REGION: &str = "us-east-1";

/// The wait before a request's first retry, doubled at each next one up to
/// [`LONGEST_RETRY_WAIT`]: object_store's retries and the listing's.
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(200);
const LONGEST_RETRY_WAIT: Duration = Duration::from_secs(5);

/// S3 error codes that mean "these credentials may not do this".
const AUTH_CODES: [&str; 6] = [
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "AccessDenied",
    "InvalidToken",
    "ExpiredToken",
    "AuthorizationHeaderMalformed",
];

/// Everything needed to reach the bucket.
#[derive(Debug, Clone)]
pub struct BucketSettings {
    /// `s3://bucket/node`.
    pub url: Url,
    /// `None`: AWS S3, found from the region.
    pub endpoint: Option<Url>,
    pub region: Option<String>,
    /// Both or neither; read when `credentials` is [`Credentials::Files`].
    pub access_key_id_file: Option<PathBuf>,
    pub secret_access_key_file: Option<PathBuf>,
    /// Where the keys come from (see [`key_source`]).
    pub credentials: Credentials,
    pub addressing: Addressing,
    /// Added to the Mozilla roots (a private endpoint's CA).
    pub extra_ca_file: Option<PathBuf>,
    /// One request, connect to last byte.
    pub request_timeout: Duration,
    /// Retries of one request (connection errors, 5xx), and how long they
    /// may go on: a cycle that cannot reach the bucket gives up within
    /// this and tries again at the next interval.
    pub max_retries: usize,
    pub retry_timeout: Duration,
}

impl BucketSettings {
    /// `[replication]` as configured; `extra_ca_file` is the top-level key.
    pub fn from_config(config: &ReplicationConfig, extra_ca_file: Option<&Path>) -> BucketSettings {
        BucketSettings {
            url: config.url.clone(),
            endpoint: config.endpoint.clone(),
            region: config.region.clone(),
            access_key_id_file: config.access_key_id_file.clone(),
            secret_access_key_file: config.secret_access_key_file.clone(),
            credentials: config.credentials,
            addressing: config
                .addressing
                .unwrap_or_else(|| Addressing::default_for(config.endpoint.as_ref())),
            extra_ca_file: extra_ca_file.map(Path::to_path_buf),
            request_timeout: Duration::from_secs(60),
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
        }
    }

    /// The same endpoint and credentials, another `s3://bucket/node` (for
    /// `vigie restore --from`).
    pub fn with_url(mut self, url: &str) -> Result<BucketSettings, ReplicateError> {
        let parsed = Url::parse(url).map_err(|_| ReplicateError::BadUrl {
            url: url.to_string(),
        })?;
        if parsed.scheme() != "s3" || parsed.host_str().is_none_or(str::is_empty) {
            return Err(ReplicateError::BadUrl {
                url: url.to_string(),
            });
        }
        self.url = parsed;
        Ok(self)
    }
}

/// One node's place in one bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    store: Arc<AmazonS3>,
    bucket: String,
    node: String,
    /// Where requests go, for messages.
    endpoint: String,
    /// What listings are sent through and signed for (see `listing.rs`).
    client: reqwest::Client,
    list_base: Url,
    region: String,
    max_retries: usize,
    retry_timeout: Duration,
}

/// Hands object_store the client vigie built (see the module docs).
#[derive(Debug)]
struct Connector(reqwest::Client);

impl HttpConnector for Connector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(self.0.clone()))
    }
}

impl Bucket {
    /// Reads the key files and builds the client; sends nothing.
    pub fn open(settings: &BucketSettings) -> Result<Bucket, ReplicateError> {
        let bucket = settings.url.host_str().unwrap_or_default().to_string();
        let node = settings.url.path().trim_matches('/').to_string();
        if bucket.is_empty() {
            return Err(ReplicateError::BadUrl {
                url: settings.url.to_string(),
            });
        }
        if node.is_empty() {
            return Err(ReplicateError::NoNode {
                url: settings.url.to_string(),
            });
        }
        let plain_http = match &settings.endpoint {
            Some(endpoint) if endpoint.scheme() == "http" => {
                if !is_loopback(endpoint) {
                    return Err(ReplicateError::PlainHttp {
                        endpoint: redact(endpoint),
                    });
                }
                true
            }
            _ => false,
        };
        let region = settings
            .region
            .clone()
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        let virtual_host = settings.addressing == Addressing::VirtualHost;
        let endpoint = settings
            .endpoint
            .as_ref()
            .map(|e| endpoint_for(e, &bucket, virtual_host));
        let shown_endpoint = match &endpoint {
            Some(e) => e.clone(),
            None => format!("https://s3.{region}.amazonaws.com"),
        };

        let list_base = list_base(endpoint.as_deref(), &bucket, &region, virtual_host)?;
        let client = crate::net::service_client(settings.extra_ca_file.as_deref())?
            .connect_timeout(Duration::from_secs(10))
            .timeout(settings.request_timeout)
            .https_only(!plain_http)
            .build()
            .map_err(|e| ReplicateError::Setup {
                bucket: bucket.clone(),
                detail: e.to_string(),
            })?;

        let source = key_source(settings, &|name| std::env::var(name).ok())?;
        let mut builder = source
            .builder()
            .with_bucket_name(&bucket)
            .with_region(&region)
            .with_virtual_hosted_style_request(virtual_host)
            .with_allow_http(plain_http)
            // `If-None-Match: *` and `If-Match` (the vantages' claims).
            // Set explicitly: a future default must not turn them off.
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: FIRST_RETRY_WAIT,
                    max_backoff: LONGEST_RETRY_WAIT,
                    base: 2.0,
                },
                max_retries: settings.max_retries,
                retry_timeout: settings.retry_timeout,
            })
            .with_http_connector(Connector(client.clone()));
        if let Some(endpoint) = &endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let store = builder.build().map_err(|e| ReplicateError::Setup {
            bucket: bucket.clone(),
            detail: e.to_string(),
        })?;
        Ok(Bucket {
            store: Arc::new(store),
            bucket,
            node,
            endpoint: shown_endpoint,
            client,
            list_base,
            region,
            max_retries: settings.max_retries,
            retry_timeout: settings.retry_timeout,
        })
    }

    /// The node: the URL's path, naming this vigie's history in the bucket.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// `s3://bucket/node`, for messages.
    pub fn shown(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.node)
    }

    /// Writes (or rewrites) one object.
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<(), ReplicateError> {
        let action = format!("uploading {name}");
        self.store
            .put(&ObjectPath::from(name), PutPayload::from(bytes))
            .await
            .map_err(|e| self.error(&action, e))?;
        Ok(())
    }

    /// Reads one object whole.
    pub async fn get(&self, name: &str) -> Result<Bytes, ReplicateError> {
        let action = format!("downloading {name}");
        let got = self
            .store
            .get(&ObjectPath::from(name))
            .await
            .map_err(|e| self.error(&action, e))?;
        got.bytes().await.map_err(|e| self.error(&action, e))
    }

    /// Hands `visit` every object name under `prefix` (a folder path ending
    /// in `/`), a page at a time, so a prefix of millions of objects costs
    /// one page of memory. Names are decoded: they may hold any character,
    /// control characters included.
    pub async fn list(
        &self,
        prefix: &str,
        visit: &mut (dyn FnMut(String) + Send),
    ) -> Result<(), ReplicateError> {
        let mut next: Option<String> = None;
        loop {
            let page = self
                .list_page(prefix, listing::PAGE_KEYS, next.as_deref())
                .await?;
            page.keys.into_iter().for_each(&mut *visit);
            match page.next {
                // A server that hands back the token it was given would
                // list the same page forever.
                Some(token) if next.as_deref() == Some(token.as_str()) => {
                    let detail = "the server named the same next page twice".to_string();
                    return Err(self.reported(
                        &format!("listing {prefix}"),
                        Trouble::Other,
                        detail,
                    ));
                }
                Some(token) => next = Some(token),
                None => return Ok(()),
            }
        }
    }

    /// The first object name under `prefix`, if any (one list request).
    pub async fn first(&self, prefix: &str) -> Result<Option<String>, ReplicateError> {
        let page = self.list_page(prefix, 1, None).await?;
        Ok(page.keys.into_iter().next())
    }

    /// One page of a listing, retried like object_store retries (a
    /// transport error, 5xx, 429), within `max_retries` and `retry_timeout`.
    async fn list_page(
        &self,
        prefix: &str,
        max_keys: usize,
        continuation: Option<&str>,
    ) -> Result<Page, ReplicateError> {
        let action = format!("listing {prefix}");
        let url = listing::page_url(&self.list_base, prefix, max_keys, continuation);
        let started = std::time::Instant::now();
        let mut backoff = FIRST_RETRY_WAIT;
        let mut retries = 0;
        loop {
            let failure = match self.list_once(&action, &url).await? {
                Ok(page) => return Ok(page),
                Err(failure) => failure,
            };
            if !failure.retry
                || retries >= self.max_retries
                || started.elapsed() + backoff > self.retry_timeout
            {
                let detail = crate::sanitize::message(&failure.detail);
                return Err(self.reported(&action, failure.trouble, detail));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(LONGEST_RETRY_WAIT);
            retries += 1;
        }
    }

    /// One signed ListObjectsV2 request. The outer `Err` is final (no
    /// credentials to sign with); the inner one says whether to retry.
    async fn list_once(
        &self,
        action: &str,
        url: &Url,
    ) -> Result<Result<Page, ListFailure>, ReplicateError> {
        let credential = self
            .store
            .credentials()
            .get_credential()
            .await
            .map_err(|e| self.error(action, e))?;
        let mut request = http::Request::builder()
            .method(http::Method::GET)
            .uri(url.as_str())
            .body(HttpRequestBody::from(Vec::new()))
            .map_err(|e| ReplicateError::Setup {
                bucket: self.bucket.clone(),
                detail: e.to_string(),
            })?;
        AwsAuthorizer::new(&credential, "s3", &self.region)
            .try_authorize(&mut request, None)
            .map_err(|e| self.error(action, e))?;
        let sent = self
            .client
            .get(url.clone())
            .headers(request.headers().clone())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => return Ok(Err(ListFailure::transport(&e))),
        };
        let status = response.status();
        if status.is_success() {
            return Ok(match read_capped(response, listing::MAX_PAGE_BYTES).await {
                Ok((body, false)) => listing::parse_page(&body).map_err(ListFailure::garbled),
                Ok((_, true)) => Err(ListFailure::garbled(format!(
                    "a listing page over {} bytes",
                    listing::MAX_PAGE_BYTES
                ))),
                Err(e) => Err(ListFailure::transport(&e)),
            });
        }
        let body = read_capped(response, listing::MAX_ERROR_BYTES)
            .await
            .map(|(body, _)| body)
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        let detail = s3_error(&body).unwrap_or_else(|| status.to_string());
        let trouble = match status.as_u16() {
            401 | 403 => Trouble::Denied,
            _ => Trouble::Other,
        };
        let retry = status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS;
        Ok(Err(ListFailure {
            trouble,
            detail,
            retry,
        }))
    }

    /// Creates `name` only if it does not exist (`If-None-Match: *`):
    /// `false` when it already does.
    pub async fn create(&self, name: &str, bytes: Vec<u8>) -> Result<bool, ReplicateError> {
        let action = format!("creating {name}");
        let options = PutOptions::from(PutMode::Create);
        match self
            .store
            .put_opts(&ObjectPath::from(name), PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.error(&action, e)),
        }
    }

    /// Reads `name` if it is at most `cap` bytes: the size the server
    /// announces is checked before any of the body is read, and the body
    /// is counted as it comes in case that size lied. With `unless_etag`
    /// (`If-None-Match`), an object still at that ETag is not downloaded
    /// again: what was unusable stays unusable until it changes.
    pub async fn get_capped(
        &self,
        name: &str,
        cap: u64,
        unless_etag: Option<&str>,
    ) -> Result<Capped, ReplicateError> {
        let action = format!("downloading {name}");
        let options = GetOptions {
            if_none_match: unless_etag.map(str::to_string),
            ..GetOptions::default()
        };
        let got = match self.store.get_opts(&ObjectPath::from(name), options).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(Capped::Missing),
            Err(object_store::Error::NotModified { .. }) => return Ok(Capped::Unchanged),
            Err(e) => return Err(self.error(&action, e)),
        };
        let version = ObjectVersion(UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        });
        let announced = got.meta.size;
        if announced > cap {
            // Dropping the response unread closes the connection.
            return Ok(Capped::Oversized {
                size: announced,
                version,
            });
        }
        let mut body = Vec::with_capacity(announced as usize);
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.error(&action, e))?;
            if (body.len() + chunk.len()) as u64 > cap {
                return Ok(Capped::Oversized {
                    size: (body.len() + chunk.len()) as u64,
                    version,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Capped::Found {
            bytes: Bytes::from(body),
            version,
        })
    }

    /// Rewrites `name` only if it is still at `version` (`If-Match`):
    /// `false` when someone wrote it in between.
    pub async fn update(
        &self,
        name: &str,
        bytes: Vec<u8>,
        version: &ObjectVersion,
    ) -> Result<bool, ReplicateError> {
        let action = format!("updating {name}");
        let options = PutOptions::from(PutMode::Update(version.0.clone()));
        match self
            .store
            .put_opts(&ObjectPath::from(name), PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(self.error(&action, e)),
        }
    }

    /// When the bucket last wrote `name`, and its ETag (one HEAD); `None`
    /// if it is not there.
    pub async fn modified(
        &self,
        name: &str,
    ) -> Result<Option<(OffsetDateTime, Option<String>)>, ReplicateError> {
        let action = format!("looking up {name}");
        match self.store.head(&ObjectPath::from(name)).await {
            Ok(meta) => Ok(Some((
                OffsetDateTime::from_unix_timestamp_nanos(
                    i128::from(meta.last_modified.timestamp_micros()) * 1000,
                )
                .unwrap_or(OffsetDateTime::UNIX_EPOCH),
                meta.e_tag,
            ))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(&action, e)),
        }
    }

    /// An object_store error in the operator's terms: refused credentials,
    /// a missing bucket, an unreachable endpoint, or what the server said.
    fn error(&self, action: &str, err: object_store::Error) -> ReplicateError {
        let detail = detail(&err);
        // A transport error (no HTTP answer at all: refused, reset, cut,
        // timed out, a pooled connection that died) means the endpoint is
        // away; only a garbled answer (Decode) is the server's fault.
        let unreachable = source_chain(&err).any(|e| {
            e.downcast_ref::<object_store::client::HttpError>()
                .is_some_and(|h| !matches!(h.kind(), object_store::client::HttpErrorKind::Decode))
        });
        let trouble = match &err {
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => Trouble::Denied,
            _ if unreachable => Trouble::Unreachable,
            _ => Trouble::Other,
        };
        self.reported(action, trouble, detail)
    }

    /// A failure as the operator is told it. object_store maps 401/403 to
    /// its own variants for some calls and leaves others (listing) as
    /// generic errors: the S3 error code in `detail` decides too.
    fn reported(&self, action: &str, trouble: Trouble, detail: String) -> ReplicateError {
        let refused = AUTH_CODES.iter().any(|code| detail.starts_with(code));
        match trouble {
            Trouble::Denied => ReplicateError::Denied {
                bucket: self.shown(),
                endpoint: self.endpoint.clone(),
                action: action.to_string(),
                detail,
            },
            _ if refused => ReplicateError::Denied {
                bucket: self.shown(),
                endpoint: self.endpoint.clone(),
                action: action.to_string(),
                detail,
            },
            _ if detail.starts_with("NoSuchBucket") => ReplicateError::NoBucket {
                bucket: self.bucket.clone(),
                endpoint: self.endpoint.clone(),
            },
            Trouble::Unreachable => ReplicateError::Unreachable {
                endpoint: self.endpoint.clone(),
                action: action.to_string(),
                detail,
            },
            Trouble::Other => ReplicateError::Failed {
                bucket: self.shown(),
                action: action.to_string(),
                detail,
            },
        }
    }
}

/// What kind of failure a request met, before the S3 error code is read.
#[derive(Debug, Clone, Copy)]
enum Trouble {
    /// 401/403: the credentials may not do this.
    Denied,
    /// No HTTP answer at all.
    Unreachable,
    Other,
}

/// One listing request that failed, unescaped (escaped when reported).
#[derive(Debug)]
struct ListFailure {
    trouble: Trouble,
    detail: String,
    retry: bool,
}

impl ListFailure {
    /// No answer, or one cut short: the root cause, worth another try.
    fn transport(err: &reqwest::Error) -> ListFailure {
        let root = source_chain(err).last().map(ToString::to_string);
        ListFailure {
            trouble: Trouble::Unreachable,
            detail: root.unwrap_or_else(|| err.to_string()),
            retry: true,
        }
    }

    /// An answer that is not a listing: the server's fault, not retried.
    fn garbled(detail: String) -> ListFailure {
        ListFailure {
            trouble: Trouble::Other,
            detail,
            retry: false,
        }
    }
}

/// At most `cap` bytes of `response`'s body, and whether there was more.
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > cap {
            body.extend_from_slice(&chunk[..cap - body.len()]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The URL that addresses the bucket itself, as object_store addresses it:
/// `endpoint` is [`endpoint_for`]'s (the bucket already in the host for
/// virtual-host style); without one, AWS's regional endpoint.
fn list_base(
    endpoint: Option<&str>,
    bucket: &str,
    region: &str,
    virtual_host: bool,
) -> Result<Url, ReplicateError> {
    let base = match (endpoint, virtual_host) {
        (Some(endpoint), true) => endpoint.to_string(),
        (Some(endpoint), false) => format!("{endpoint}/{bucket}"),
        (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
        (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
    };
    Url::parse(&base).map_err(|e| ReplicateError::Setup {
        bucket: bucket.to_string(),
        detail: format!("{base}: {e}"),
    })
}

/// The version of an object a conditional write compares against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion(UpdateVersion);

impl ObjectVersion {
    /// The ETag, to ask for the object only if it changed.
    pub fn etag(&self) -> Option<&str> {
        self.0.e_tag.as_deref()
    }
}

/// What [`Bucket::get_capped`] found.
#[derive(Debug)]
pub enum Capped {
    Missing,
    /// Still at the ETag given: not downloaded.
    Unchanged,
    Found {
        bytes: Bytes,
        version: ObjectVersion,
    },
    /// Over the cap (`size`: announced, or counted so far); not read.
    Oversized {
        size: u64,
        version: ObjectVersion,
    },
}

/// Where the bucket's keys come from, decided before anything is sent.
#[derive(Debug, PartialEq, Eq)]
pub enum KeySource {
    /// Keys vigie read itself (files or the environment): object_store
    /// signs with exactly these and asks no credential service.
    Static {
        id: String,
        secret: String,
        session_token: Option<String>,
    },
    /// object_store's whole AWS chain, ending at the instance metadata
    /// service (`credentials = "instance"` only).
    Instance,
}

impl KeySource {
    /// The S3 builder signing with these keys. `AmazonS3Builder::from_env`
    /// is only used for `Instance`: with no key set, object_store falls
    /// back to the metadata service at 169.254.169.254 by itself.
    pub fn builder(&self) -> AmazonS3Builder {
        match self {
            KeySource::Static {
                id,
                secret,
                session_token,
            } => {
                let builder = AmazonS3Builder::new()
                    .with_access_key_id(id)
                    .with_secret_access_key(secret);
                match session_token {
                    Some(token) => builder.with_token(token),
                    None => builder,
                }
            }
            KeySource::Instance => AmazonS3Builder::from_env(),
        }
    }
}

/// The keys `settings` name: read from the key files, or from `env` (the
/// process environment in the daemon, a map in tests) for
/// [`Credentials::Environment`]. Never [`KeySource::Instance`] unless
/// configured so.
pub fn key_source(
    settings: &BucketSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<KeySource, ReplicateError> {
    match settings.credentials {
        Credentials::Instance => Ok(KeySource::Instance),
        Credentials::Files => {
            let (Some(id_file), Some(secret_file)) = (
                &settings.access_key_id_file,
                &settings.secret_access_key_file,
            ) else {
                return Err(ReplicateError::NoCredentials {
                    missing: "access_key_id_file and secret_access_key_file",
                });
            };
            Ok(KeySource::Static {
                id: read_key("access_key_id_file", id_file)?,
                secret: read_key("secret_access_key_file", secret_file)?,
                session_token: None,
            })
        }
        Credentials::Environment => {
            let var = |name: &'static str| {
                env(name)
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
            };
            let id = var("AWS_ACCESS_KEY_ID");
            let secret = var("AWS_SECRET_ACCESS_KEY");
            match (id, secret) {
                (Some(id), Some(secret)) => Ok(KeySource::Static {
                    id,
                    secret,
                    session_token: var("AWS_SESSION_TOKEN"),
                }),
                _ => Err(ReplicateError::NoCredentials {
                    missing: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in vigie's environment",
                }),
            }
        }
    }
}

/// The credential in `path`, trimmed (files usually end with a newline).
fn read_key(key: &'static str, path: &Path) -> Result<String, ReplicateError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReplicateError::KeyFile {
        key,
        path: path.to_path_buf(),
        source,
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ReplicateError::EmptyKeyFile {
            key,
            path: path.to_path_buf(),
        });
    }
    Ok(text.to_string())
}

/// The endpoint object_store is given: as configured for path style; with
/// the bucket prepended to the host for virtual-host style, which is how
/// object_store expects a custom virtual-host endpoint.
fn endpoint_for(endpoint: &Url, bucket: &str, virtual_host: bool) -> String {
    let mut url = endpoint.clone();
    if virtual_host {
        if let Some(host) = endpoint.host_str() {
            let _ = url.set_host(Some(&format!("{bucket}.{host}")));
        }
    }
    url.as_str().trim_end_matches('/').to_string()
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

fn source_chain<'a>(
    err: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(err), |&e| e.source())
}

/// What went wrong, shortest useful form: the S3 error code and message
/// when the server sent one (`SignatureDoesNotMatch (The request signature
/// we calculated does not match...)`), else the root cause (`Connection
/// refused (os error 111)`). Escaped and capped: it can quote a key or a
/// message the bucket chose (a listing that fails on a key holding a
/// carriage return quotes the key).
fn detail(err: &object_store::Error) -> String {
    crate::sanitize::message(&unescaped_detail(err))
}

fn unescaped_detail(err: &object_store::Error) -> String {
    let texts: Vec<String> = source_chain(err).map(|e| e.to_string()).collect();
    let all = texts.join(": ");
    if let Some(code_and_message) = s3_error(&all) {
        return code_and_message;
    }
    let status = texts.iter().find_map(|t| {
        let at = t.find("status code: ")?;
        Some(t[at + "status code: ".len()..].trim().to_string())
    });
    match (status, texts.last()) {
        (Some(status), _) => status,
        (None, Some(root)) => root.clone(),
        (None, None) => err.to_string(),
    }
}

/// `SignatureDoesNotMatch (The request signature ...)` from an S3 error
/// document anywhere in `text`, or the code alone without a message.
fn s3_error(text: &str) -> Option<String> {
    let code = between(text, "<Code>", "</Code>")?;
    Some(match between(text, "<Message>", "</Message>") {
        Some(message) => format!("{code} ({message})"),
        None => code.to_string(),
    })
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}

#[cfg(test)]
mod tests {
    use object_store::aws::AmazonS3ConfigKey;

    use super::*;

    #[test]
    fn virtual_host_endpoints_carry_the_bucket() {
        let endpoint = Url::parse("https://s3.nl-ams.scw.cloud").unwrap();
        assert_eq!(
            endpoint_for(&endpoint, "b", true),
            "https://b.s3.nl-ams.scw.cloud"
        );
        assert_eq!(
            endpoint_for(&endpoint, "b", false),
            "https://s3.nl-ams.scw.cloud"
        );
    }

    #[test]
    fn listings_address_the_bucket_as_object_store_does() {
        let base = |endpoint, virtual_host| {
            list_base(endpoint, "b", "eu-west-3", virtual_host)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            base(Some("http://127.0.0.1:9000"), false),
            "http://127.0.0.1:9000/b"
        );
        assert_eq!(
            base(Some("https://b.s3.nl-ams.scw.cloud"), true),
            "https://b.s3.nl-ams.scw.cloud/"
        );
        assert_eq!(base(None, true), "https://b.s3.eu-west-3.amazonaws.com/");
        assert_eq!(base(None, false), "https://s3.eu-west-3.amazonaws.com/b");
    }

    #[test]
    fn plain_http_is_refused_except_to_loopback() {
        let settings = |endpoint: &str| BucketSettings {
            url: Url::parse("s3://bucket/node").unwrap(),
            endpoint: Some(Url::parse(endpoint).unwrap()),
            region: None,
            access_key_id_file: None,
            secret_access_key_file: None,
            // `open` builds the client and sends nothing: object_store
            // asks the metadata service lazily, at a first request, which
            // this test never makes.
            credentials: Credentials::Instance,
            addressing: Addressing::Path,
            extra_ca_file: None,
            request_timeout: Duration::from_secs(1),
            max_retries: 0,
            retry_timeout: Duration::from_secs(1),
        };
        let err = Bucket::open(&settings("http://s3.example.com")).unwrap_err();
        assert!(matches!(err, ReplicateError::PlainHttp { .. }), "{err}");
        assert!(Bucket::open(&settings("http://127.0.0.1:9000")).is_ok());
        assert!(Bucket::open(&settings("http://[::1]:9000")).is_ok());
        let err = Bucket::open(&BucketSettings {
            url: Url::parse("s3://bucket").unwrap(),
            ..settings("https://s3.example.com")
        })
        .unwrap_err();
        assert!(matches!(err, ReplicateError::NoNode { .. }), "{err}");
    }

    #[test]
    fn s3_error_bodies_become_code_and_message() {
        let text = "Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error>";
        assert_eq!(
            between(text, "<Code>", "</Code>"),
            Some("SignatureDoesNotMatch")
        );
    }

    fn settings_with(
        credentials: Credentials,
        files: Option<(PathBuf, PathBuf)>,
    ) -> BucketSettings {
        let (id, secret) = files.unzip();
        BucketSettings {
            url: Url::parse("s3://bucket/node").unwrap(),
            endpoint: Some(Url::parse("http://127.0.0.1:9").unwrap()),
            region: None,
            access_key_id_file: id,
            secret_access_key_file: secret,
            credentials,
            addressing: Addressing::Path,
            extra_ca_file: None,
            request_timeout: Duration::from_secs(1),
            max_retries: 0,
            retry_timeout: Duration::from_secs(1),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn without_key_files_the_metadata_service_is_never_a_fallback() {
        // The environment holds nothing: object_store would now go to
        // 169.254.169.254; vigie refuses and says what to set.
        let err = key_source(&settings_with(Credentials::Environment, None), &no_env).unwrap_err();
        assert!(matches!(err, ReplicateError::NoCredentials { .. }), "{err}");
        assert!(err.to_string().contains("AWS_ACCESS_KEY_ID"), "{err}");
        assert!(
            err.to_string().contains("credentials = \"instance\""),
            "{err}"
        );
        let err = key_source(&settings_with(Credentials::Files, None), &no_env).unwrap_err();
        assert!(matches!(err, ReplicateError::NoCredentials { .. }), "{err}");
        // Only when configured so.
        assert_eq!(
            key_source(&settings_with(Credentials::Instance, None), &no_env).unwrap(),
            KeySource::Instance
        );
    }

    #[test]
    fn environment_keys_are_static_and_signed_with_as_given() {
        let env = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("AKIDENV".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("secret-env\n".to_string()),
            _ => None,
        };
        let source = key_source(&settings_with(Credentials::Environment, None), &env).unwrap();
        assert_eq!(
            source,
            KeySource::Static {
                id: "AKIDENV".to_string(),
                secret: "secret-env".to_string(),
                session_token: None,
            }
        );
        // A builder with both keys set is what makes object_store sign with
        // a static provider instead of asking the metadata service.
        let builder = source.builder();
        assert_eq!(
            builder.get_config_value(&AmazonS3ConfigKey::AccessKeyId),
            Some("AKIDENV".to_string())
        );
        assert_eq!(
            builder.get_config_value(&AmazonS3ConfigKey::SecretAccessKey),
            Some("secret-env".to_string())
        );
    }

    #[test]
    fn key_files_win_over_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let (id, secret) = (dir.path().join("id"), dir.path().join("secret"));
        std::fs::write(&id, "AKIDFILE\n").unwrap();
        std::fs::write(&secret, "secret-file\n").unwrap();
        let env = |_: &str| Some("from-env".to_string());
        let source =
            key_source(&settings_with(Credentials::Files, Some((id, secret))), &env).unwrap();
        assert_eq!(
            source,
            KeySource::Static {
                id: "AKIDFILE".to_string(),
                secret: "secret-file".to_string(),
                session_token: None,
            }
        );
    }
}
