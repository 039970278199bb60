//! moto for the upload tests: SigV4 enforced, presigned URLs verified the
//! way S3 verifies them, an IAM user whose key may only write and delete
//! under `vigie-probe/` (what the platform gives the probe), an
//! administrator key to look into the buckets, and the buckets of
//! [`BUCKETS`] with their CORS rules, set before authentication is on.
//!
//! # What moto 5.2 does with a presigned URL, and the patch
//!
//! With authentication on (see `s3_auth.rs`), moto verifies only the
//! `Authorization` header: a presigned request has none, and moto fails
//! it with a 500 (`KeyError: HTTP_AUTHORIZATION`), whatever its
//! signature. Its preflights fail the same way: S3 answers an OPTIONS from
//! the bucket's CORS rules and never asks for a signature, moto asks for
//! one. [`PRESIGN_PATCH`] wraps moto's one S3 authorisation entry point
//! (`ActionAuthenticatorMixin._authenticate_and_authorize_s3_action`):
//!
//! - OPTIONS: not authenticated (as S3);
//! - a request with `X-Amz-Signature` in its query and no `Authorization`:
//!   verified as S3 documents query-string SigV4 ("Authenticating Requests:
//!   Using Query Parameters"): `X-Amz-Date` + `X-Amz-Expires` in the past
//!   is `403 AccessDenied: Request has expired`; the canonical request
//!   (method, path, every query parameter but the signature, the
//!   `X-Amz-SignedHeaders` as received, `UNSIGNED-PAYLOAD`) signed with
//!   the key's secret must give `X-Amz-Signature`, else `403
//!   SignatureDoesNotMatch`; an unknown key is `InvalidAccessKeyId`; then
//!   the user's policies are checked by moto's own code, on the same
//!   resource as a header-signed request (`AccessDenied`);
//! - everything else: moto's own check, unchanged.
//!
//! The signature is recomputed independently of botocore and object_store,
//! so a signer bug in either would show as a refusal here.

use std::net::SocketAddr;
use std::sync::OnceLock;

use super::s3::{base64, cors_xml, md5, CorsRule, S3Server};
use super::s3_auth::{between, form_encode, http, iam, MOTO_LAUNCHER};

/// Python run before [`MOTO_LAUNCHER`] (see the module docs).
pub const PRESIGN_PATCH: &str = r#"
import datetime, hashlib, hmac
from urllib.parse import parse_qsl, quote, urlparse

from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin
from moto.iam.access_control import CreateAccessKeyFailure, S3IAMRequest, create_access_key
from moto.s3.exceptions import S3ClientError, S3InvalidAccessKeyIdError, S3SignatureDoesNotMatchError
from moto.utilities.utils import get_partition

_authorize_s3 = ActionAuthenticatorMixin._authenticate_and_authorize_s3_action

def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()

def _enc(text):
    return quote(text, safe='-_.~')

def _verify_presigned(self, pairs, bucket_name, key_name):
    params = dict(pairs)
    credential = params.get('X-Amz-Credential', '')
    key_id, _, scope = credential.partition('/')
    date, region, service = (scope.split('/') + ['', '', ''])[:3]
    amz_date = params.get('X-Amz-Date', '')
    try:
        signed_at = datetime.datetime.strptime(amz_date, '%Y%m%dT%H%M%SZ').replace(tzinfo=datetime.timezone.utc)
        expires = int(params.get('X-Amz-Expires', ''))
    except ValueError:
        raise S3ClientError('AuthorizationQueryParametersError', 'X-Amz-Date and X-Amz-Expires must be given')
    if params.get('X-Amz-Algorithm') != 'AWS4-HMAC-SHA256' or not 1 <= expires <= 604800:
        raise S3ClientError('AuthorizationQueryParametersError', 'X-Amz-Algorithm must be AWS4-HMAC-SHA256 and X-Amz-Expires 1 to 604800 seconds')
    if datetime.datetime.now(datetime.timezone.utc) > signed_at + datetime.timedelta(seconds=expires):
        raise S3ClientError('AccessDenied', 'Request has expired')
    signed_headers = params.get('X-Amz-SignedHeaders', '')
    try:
        access_key = create_access_key(self.current_account, get_partition(region or 'us-east-1'), key_id, {})
        secret = access_key.create_credentials().secret_key
    except CreateAccessKeyFailure:
        raise S3InvalidAccessKeyIdError()
    headers = {k.lower(): ' '.join(str(v).split()) for k, v in self.headers.items()}
    canonical_headers = ''.join(f'{h}:{headers.get(h, "")}\n' for h in signed_headers.split(';'))
    query = '&'.join(f'{_enc(k)}={_enc(v)}' for k, v in sorted(pairs) if k != 'X-Amz-Signature')
    path = urlparse(self.uri).path
    canonical = '\n'.join([self.method, quote(path, safe='/-_.~%'), query, canonical_headers, signed_headers, 'UNSIGNED-PAYLOAD'])
    to_sign = '\n'.join(['AWS4-HMAC-SHA256', amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signing_key = _hmac(_hmac(_hmac(_hmac(('AWS4' + secret).encode(), date), region), service), 'aws4_request')
    signature = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(signature, params.get('X-Amz-Signature', '')):
        raise S3SignatureDoesNotMatchError()
    # The policy check of a header-signed request, on the same resource.
    arn = f"{bucket_name or '*'}/{key_name}" if key_name else (bucket_name or '*')
    resource = f"arn:{get_partition(region)}:s3:::{arn}"
    authorization = f'AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed_headers}, Signature={signature}'
    request = S3IAMRequest(
        account_id=self.current_account, method=self.method, path=path, data=self.data,
        body=self.raw_body, headers={'Authorization': authorization}, action=self._get_action(),
    )
    request.check_action_permitted(resource)

def _authenticate_and_authorize_s3_action(self, bucket_name=None, key_name=None):
    enforced = ActionAuthenticatorMixin.request_count >= settings.INITIAL_NO_AUTH_ACTION_COUNT
    if enforced and self.method == 'OPTIONS':
        return  # S3 answers preflights from the bucket's CORS rules, unsigned.
    pairs = parse_qsl(urlparse(self.uri).query, keep_blank_values=True)
    if enforced and 'Authorization' not in self.headers and any(k == 'X-Amz-Signature' for k, _ in pairs):
        return _verify_presigned(self, pairs, bucket_name, key_name)
    return _authorize_s3(self, bucket_name, key_name)

ActionAuthenticatorMixin._authenticate_and_authorize_s3_action = _authenticate_and_authorize_s3_action
"#;

/// The prefix the probe's key may write under.
pub const PROBE_PREFIX: &str = "vigie-probe/";

/// A bucket of the shared server and its CORS rules.
pub struct BucketSpec {
    pub name: &'static str,
    pub rules: fn() -> Vec<CorsRule>,
}

/// moto with presigned URLs verified, its keys, and its buckets.
pub struct UploadS3 {
    pub server: S3Server,
    /// May put and delete objects under [`PROBE_PREFIX`] only.
    pub probe_id: String,
    pub probe_secret: String,
    /// May do everything (listing, in the tests).
    pub admin_id: String,
    pub admin_secret: String,
}

static SHARED: OnceLock<UploadS3> = OnceLock::new();

impl UploadS3 {
    /// The server of this test binary with `buckets`, started on first use
    /// (later calls must pass the same list).
    pub fn shared(buckets: &[BucketSpec]) -> &'static UploadS3 {
        SHARED.get_or_init(|| UploadS3::start(buckets))
    }

    pub fn start(buckets: &[BucketSpec]) -> UploadS3 {
        let server = S3Server::start_python(&format!("{PRESIGN_PATCH}\n{MOTO_LAUNCHER}"));
        let addr = server.addr;
        let (admin_id, admin_secret) = user(
            addr,
            "admin",
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#,
        );
        let probe_policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":["s3:PutObject","s3:DeleteObject"],"Resource":"arn:aws:s3:::*/{PROBE_PREFIX}*"}}]}}"#
        );
        let (probe_id, probe_secret) = user(addr, "probe", &probe_policy);
        for bucket in buckets {
            let (status, body) = http(addr, "PUT", &format!("/{}", bucket.name), &[], "");
            assert_eq!(status, 200, "create bucket {}: {body}", bucket.name);
            let rules = (bucket.rules)();
            if rules.is_empty() {
                continue;
            }
            let xml = cors_xml(&rules);
            let md5 = base64(&md5(xml.as_bytes()));
            let headers = [
                ("content-type", "application/xml"),
                ("content-md5", md5.as_str()),
            ];
            let (status, body) = http(
                addr,
                "PUT",
                &format!("/{}?cors", bucket.name),
                &headers,
                &xml,
            );
            assert_eq!(status, 200, "PutBucketCors {}: {body}", bucket.name);
        }
        let (status, body) = http(
            addr,
            "POST",
            "/moto-api/reset-auth",
            &[("content-type", "text/plain")],
            "0",
        );
        assert_eq!(status, 200, "turn moto's authentication on: {body}");
        UploadS3 {
            server,
            probe_id,
            probe_secret,
            admin_id,
            admin_secret,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }
}

/// An IAM user with one access key and one inline policy.
fn user(addr: SocketAddr, name: &str, policy: &str) -> (String, String) {
    iam(
        addr,
        &format!("Action=CreateUser&UserName={name}&Version=2010-05-08"),
    );
    let created = iam(
        addr,
        &format!("Action=CreateAccessKey&UserName={name}&Version=2010-05-08"),
    );
    iam(
        addr,
        &format!(
            "Action=PutUserPolicy&UserName={name}&PolicyName=p&Version=2010-05-08&PolicyDocument={}",
            form_encode(policy)
        ),
    );
    (
        between(&created, "<AccessKeyId>", "</AccessKeyId>"),
        between(&created, "<SecretAccessKey>", "</SecretAccessKey>"),
    )
}
