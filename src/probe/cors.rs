//! The `cors` probe: the preflight a browser sends before uploading to the
//! bucket, then the same preflight from every origin that must be refused.
//! Reports the Access-Control-* answer as observed; `evaluate` judges it
//! the way the Fetch standard makes browsers judge it.
//!
//! What is reported is sanitised here, where it is captured (escaped,
//! capped, the `Location` redacted: see `sanitize`); only whether a denied
//! origin was admitted is decided on the raw answer, as a browser would.

use http::header::{HeaderMap, LOCATION, VARY};
use http_body_util::Empty;

use super::client::{self, Client, Hop, Response, Trace};
use super::tls::Trust;
use crate::check::{Check, CorsCheck};
use crate::outcome::{Assertion, CorsReport, DeniedOrigin, ProbeError};
use crate::redact::redact;
use crate::sanitize;

pub async fn probe(
    client: &Client,
    check: &Check,
    cors: &CorsCheck,
    trust: &Trust,
    trace: &mut Trace,
) -> Result<CorsReport, ProbeError> {
    let answer = preflight(client, check, cors, &cors.origin, trust, trace).await?;
    let mut report = observe(&answer);
    for origin in &cors.deny_origins {
        let answer = preflight(client, check, cors, origin, trust, trace).await?;
        let allow_origin = header(&answer.headers, "access-control-allow-origin");
        report.denied.push(DeniedOrigin {
            origin: origin.clone(),
            admitted: admits(&answer, allow_origin.as_deref(), origin),
            allow_origin: allow_origin.map(|a| sanitize::value(&a)),
        });
    }
    Ok(report)
}

/// Would a browser on `origin` get past this preflight? Only a 2xx answer
/// whose Access-Control-Allow-Origin is that origin or `*`.
fn admits(answer: &Response, allow_origin: Option<&str>, origin: &str) -> bool {
    answer.status.is_success() && matches!(allow_origin, Some(a) if a == origin || a == "*")
}

async fn preflight(
    client: &Client,
    check: &Check,
    cors: &CorsCheck,
    origin: &str,
    trust: &Trust,
    trace: &mut Trace,
) -> Result<Response, ProbeError> {
    let ask = Preflight {
        url: &check.url,
        connect_to: check.resolve,
        origin,
        method: &cors.method,
        request_headers: &cors.request_headers,
    };
    send_preflight(client, &ask, trust, trace).await
}

/// What a browser's preflight asks, and where.
pub(super) struct Preflight<'a> {
    pub url: &'a url::Url,
    pub connect_to: Option<std::net::IpAddr>,
    pub origin: &'a str,
    pub method: &'a str,
    pub request_headers: &'a [String],
}

/// `OPTIONS` with the headers a browser sends: `Origin`, the method, and the
/// non-safelisted header names lower-cased, sorted and comma-joined (Fetch,
/// "CORS-unsafe request-header names"). Never follows a redirect: browsers
/// fail a redirected preflight.
pub(super) async fn send_preflight(
    client: &Client,
    ask: &Preflight<'_>,
    trust: &Trust,
    trace: &mut Trace,
) -> Result<Response, ProbeError> {
    let mut builder = client::request(http::Method::OPTIONS, ask.url)
        .header(http::header::ORIGIN, ask.origin)
        .header("access-control-request-method", ask.method);
    if !ask.request_headers.is_empty() {
        let mut names = ask.request_headers.to_vec();
        names.sort();
        names.dedup();
        builder = builder.header("access-control-request-headers", names.join(","));
    }
    let request = builder.body(Empty::new()).map_err(|err| ProbeError {
        kind: Assertion::HttpProtocol,
        message: format!("cannot build a preflight for {}: {err}", redact(ask.url)),
    })?;
    let hop = Hop {
        url: ask.url,
        connect_to: ask.connect_to,
        trust,
        redirect: None,
    };
    client.send(&hop, request, trace).await
}

/// The preflight's answer as reported: every value sanitised.
pub(super) fn observe(answer: &Response) -> CorsReport {
    let headers = &answer.headers;
    let refused = !answer.status.is_success();
    let shown = |name: &str| header(headers, name).map(|v| sanitize::value(&v));
    CorsReport {
        preflight_status: answer.status.as_u16(),
        allow_origin: shown("access-control-allow-origin"),
        allow_methods: sanitize::list(list(headers, "access-control-allow-methods")),
        allow_headers: sanitize::list(list(headers, "access-control-allow-headers")),
        allow_credentials: header(headers, "access-control-allow-credentials").map(|v| v == "true"),
        expose_headers: sanitize::list(list(headers, "access-control-expose-headers")),
        max_age: header(headers, "access-control-max-age").and_then(|v| v.trim().parse().ok()),
        vary: shown(VARY.as_str()),
        refusal: refused.then(|| refusal_excerpt(&answer.body)).flatten(),
        location: answer
            .status
            .is_redirection()
            .then(|| {
                header(headers, LOCATION.as_str())
                    .map(|l| sanitize::header_value("location", l.as_bytes(), &[] as &[&str]))
            })
            .flatten(),
        denied: Vec::new(),
    }
}

/// A header's value; repeated headers joined by ", " (so a doubled
/// Access-Control-Allow-Origin never equals the origin, as in browsers).
pub(super) fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    let values: Vec<String> = headers
        .get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// A comma-separated list header, as the Fetch standard splits it.
pub(super) fn list(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// S3 explains a refused preflight in XML: `<Code>AccessForbidden</Code>
/// <Message>CORSResponse: ...</Message>`. Show code and message when they
/// are there, else the start of the body; either way one capped value.
fn refusal_excerpt(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let excerpt = match (element(&text, "Code"), element(&text, "Message")) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (None, Some(message)) => message,
        _ => text.split_whitespace().collect::<Vec<_>>().join(" "),
    };
    if excerpt.is_empty() {
        return None;
    }
    Some(sanitize::value(&excerpt))
}

/// The text of the first `<tag>...</tag>` of an S3 error document, raw
/// (callers sanitise it).
pub(super) fn element(text: &str, tag: &str) -> Option<String> {
    let start = text.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = start + text[start..].find(&format!("</{tag}>"))?;
    Some(text[start..end].trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_refusal_shows_code_and_message() {
        let body = b"<?xml version=\"1.0\"?><Error><Code>AccessForbidden</Code>\
            <Message>CORSResponse: This CORS request is not allowed.</Message></Error>";
        assert_eq!(
            refusal_excerpt(body).as_deref(),
            Some("AccessForbidden: CORSResponse: This CORS request is not allowed.")
        );
    }

    #[test]
    fn other_refusals_show_the_start_of_the_body() {
        assert_eq!(
            refusal_excerpt(b"  Forbidden\n by policy ").as_deref(),
            Some("Forbidden by policy")
        );
        assert_eq!(refusal_excerpt(b""), None);
        let long = "x".repeat(1000);
        let excerpt = refusal_excerpt(long.as_bytes()).unwrap();
        assert!(excerpt.len() <= sanitize::VALUE_CAP, "{excerpt}");
        assert!(excerpt.ends_with(" bytes]"), "{excerpt}");
        assert_eq!(
            refusal_excerpt(b"<Error><Code>X\x1b[2J</Code><Message>m</Message></Error>").as_deref(),
            Some("X\\x1b[2J: m")
        );
    }

    #[test]
    fn list_headers_split_on_commas_across_repeats() {
        let mut headers = HeaderMap::new();
        headers.append("access-control-allow-methods", "GET, PUT".parse().unwrap());
        headers.append("access-control-allow-methods", "POST,".parse().unwrap());
        assert_eq!(
            list(&headers, "access-control-allow-methods"),
            ["GET", "PUT", "POST"]
        );
    }
}
