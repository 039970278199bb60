//! The keys of `kind = "upload"` checks: where the bucket's objects live,
//! how to sign for them, and what the browser sends.
//!
//! The key pair is read here, when the config is loaded, like every other
//! secret file: a missing or empty file is a `validate` error, not a probe
//! that fails at 3 a.m.

use std::fs;
use std::ops::Range;

use http::HeaderValue;
use toml::Spanned;
use url::Url;

use super::browser::{header_names, parse_origin};
use super::cx::Cx;
use crate::check::{UploadCheck, UploadKeys};
use crate::config::decode::Decoded;
use crate::config::raw::RawCheck;

/// Where probe objects go unless the check says otherwise; the key pair
/// should be limited to this prefix.
pub(crate) const DEFAULT_KEY_PREFIX: &str = "vigie-probe/";
/// What a browser sends for a file it cannot type.
const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";
/// What a multipart upload reads from every part's answer.
const DEFAULT_EXPOSE_HEADERS: [&str; 1] = ["etag"];

/// The keys of an upload check; `url` is the check's url, already parsed
/// (`None` when it was missing or invalid, reported already).
pub(super) fn upload(
    cx: &mut Cx<'_>,
    d: &Decoded<RawCheck>,
    url: Option<&Url>,
    context: &str,
) -> Option<UploadCheck> {
    let raw = &d.value;
    let addressing = match (url, &raw.url) {
        (Some(url), Some(written)) => addressing(cx, url, &written.span()),
        _ => None,
    };
    let region = cx
        .required(d, "region", raw.region.as_ref(), context)
        .and_then(|r| {
            let text = r.get_ref().trim();
            if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                let message = format!(
                    "{:?} is not a region name (letters, digits and '-', e.g. \"fr-par\")",
                    r.get_ref()
                );
                cx.error(&r.span(), "region", message);
                return None;
            }
            Some(text.to_string())
        });
    let origin = cx
        .required(d, "origin", raw.origin.as_ref(), context)
        .and_then(|o| parse_origin(cx, "origin", o));
    let key_prefix = match &raw.key_prefix {
        Some(p) => key_prefix(cx, p),
        None => Some(DEFAULT_KEY_PREFIX.to_string()),
    };
    let content_type = match &raw.content_type {
        Some(t) => content_type(cx, t),
        None => Some(DEFAULT_CONTENT_TYPE.to_string()),
    };
    let expose_headers = match raw.expose_headers.as_deref() {
        Some(list) => header_names(cx, "expose_headers", Some(list)),
        None => DEFAULT_EXPOSE_HEADERS.map(String::from).to_vec(),
    };
    let access_key_id = key(
        cx,
        d,
        "access_key_id",
        (
            raw.access_key_id_file.as_ref(),
            raw.access_key_id_credential.as_ref(),
        ),
        context,
    );
    let secret_access_key = key(
        cx,
        d,
        "secret_access_key",
        (
            raw.secret_access_key_file.as_ref(),
            raw.secret_access_key_credential.as_ref(),
        ),
        context,
    );
    let (bucket, endpoint, virtual_host) = addressing?;
    Some(UploadCheck {
        bucket,
        endpoint,
        virtual_host,
        region: region?,
        origin: origin?,
        key_prefix: key_prefix?,
        node: host_name(),
        content_type: content_type?,
        expose_headers,
        keys: UploadKeys {
            access_key_id: access_key_id?,
            secret_access_key: secret_access_key?,
        },
    })
}

/// Bucket, endpoint and style from the url browsers use: `https://host/`
/// is virtual-host style (the bucket is the host's first label),
/// `https://host/bucket/` path style. https only: the presigned query
/// string is a credential, and would cross the network in clear.
fn addressing(cx: &mut Cx<'_>, url: &Url, span: &Range<usize>) -> Option<(String, Url, bool)> {
    let problem = if url.scheme() != "https" {
        Some("must be https: a presigned URL's query string is a credential".to_string())
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("must not carry user:password@ (the check signs with its key files)".to_string())
    } else if url.query().is_some() || url.fragment().is_some() {
        Some("must not have a query or fragment: object URLs are url + key".to_string())
    } else {
        None
    };
    if let Some(problem) = problem {
        cx.error(span, "url", problem);
        return None;
    }
    let mut endpoint = url.clone();
    endpoint.set_path("/");
    let segments: Vec<&str> = url.path().trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        [""] => {
            let host = url.host_str().unwrap_or_default();
            let bucket = host.split('.').next().unwrap_or_default();
            if bucket.is_empty() || !host.contains('.') {
                let message = format!(
                    "{host:?} names no bucket: write https://BUCKET.s3.REGION.example/ or https://s3.REGION.example/BUCKET/"
                );
                cx.error(span, "url", message);
                return None;
            }
            Some((bucket.to_string(), endpoint, true))
        }
        [bucket, ""] if !bucket.is_empty() => Some((bucket.to_string(), endpoint, false)),
        _ => {
            let message = format!(
                "path {:?} is neither \"/\" (virtual-host style) nor \"/BUCKET/\" (path style); put deeper folders in `key_prefix`",
                url.path()
            );
            cx.error(span, "url", message);
            None
        }
    }
}

/// A key prefix ends with `/` and uses only characters that need no
/// escaping in a URL path (so the object URL is exactly url + key).
fn key_prefix(cx: &mut Cx<'_>, value: &Spanned<String>) -> Option<String> {
    let text = value.get_ref();
    let safe = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    let problem = if text.is_empty() || text.starts_with('/') || !text.ends_with('/') {
        Some(format!(
            "{text:?} must be a folder: not starting with '/', ending with '/' (e.g. \"vigie-probe/\")"
        ))
    } else if !safe || text.contains("//") {
        Some(format!(
            "{text:?} may only hold letters, digits, '-', '_', '.' and single '/'"
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        cx.error(&value.span(), "key_prefix", problem);
        return None;
    }
    Some(text.clone())
}

fn content_type(cx: &mut Cx<'_>, value: &Spanned<String>) -> Option<String> {
    let text = value.get_ref();
    if HeaderValue::from_str(text).is_err() || !text.contains('/') {
        let message = format!("{text:?} is not a media type such as \"image/jpeg\"");
        cx.error(&value.span(), "content_type", message);
        return None;
    }
    Some(text.clone())
}

/// The key given by `{stem}_file` or `{stem}_credential` (one of them is
/// required), trimmed (files usually end with a newline). Never shown:
/// errors name the file, not its content.
fn key(
    cx: &mut Cx<'_>,
    d: &Decoded<RawCheck>,
    stem: &str,
    (file, credential): (Option<&Spanned<String>>, Option<&Spanned<String>>),
    context: &str,
) -> Option<String> {
    let (key, value) = match (file, credential) {
        (Some(file), _) => (format!("{stem}_file"), file),
        (None, Some(name)) => (format!("{stem}_credential"), name),
        (None, None) => {
            let also = format!(" (or `{stem}_credential`){context}");
            if !d.broken.contains(&format!("{stem}_credential")) {
                cx.required(d, &format!("{stem}_file"), file, &also);
            }
            return None;
        }
    };
    let key = key.as_str();
    let path = cx.secret(stem, file, credential)?;
    match fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Some(text.trim().to_string()),
        Ok(_) => {
            let message = format!("file {} is empty", path.display());
            cx.error(&value.span(), key, message);
            None
        }
        Err(e) => {
            let message = format!("cannot read file {}: {e}", path.display());
            cx.error(&value.span(), key, message);
            None
        }
    }
}

/// This machine's name for object keys, reduced to characters a key
/// prefix may hold (the config replaces it with the replication node when
/// there is one).
fn host_name() -> String {
    let name = lettre::transport::smtp::extension::ClientId::default().to_string();
    key_segment(name.trim_matches(['[', ']']))
}

/// `text` with every character a key prefix may not hold replaced by `-`.
pub(crate) fn key_segment(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                true => c,
                false => '-',
            },
        )
        .collect();
    match cleaned.is_empty() {
        true => "vigie".to_string(),
        false => cleaned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_segments_keep_safe_characters_only() {
        assert_eq!(key_segment("probe-1.example"), "probe-1.example");
        assert_eq!(key_segment("a/b c?"), "a-b-c-");
        assert_eq!(key_segment(""), "vigie");
    }
}
