//! The `http` probe: GET the URL, follow redirects like a browser would
//! (but never from https to http, and never where `address` forbids),
//! return what came back. Judging the answer is `evaluate`'s job.
//!
//! Every header and URL a target sent is sanitised here, where it is
//! captured (`sanitize`): the headers keep their raw value only for
//! evaluation, beside the form a message may quote.

use http::header::LOCATION;
use http::HeaderName;
use http_body_util::Empty;
use url::Url;

use super::address::{AddressClass, RedirectPolicy};
use super::client::{self, Client, Hop, Redirect, Response, Trace};
use super::tls::Trust;
use crate::check::{Check, HttpCheck, MAX_REDIRECTS};
use crate::outcome::{Assertion, Header, HttpReport, ProbeError};
use crate::redact::redact;
use crate::sanitize;

pub async fn probe(
    client: &Client,
    check: &Check,
    http: &HttpCheck,
    trust: &Trust,
    trace: &mut Trace,
) -> Result<HttpReport, ProbeError> {
    let started = tokio::time::Instant::now();
    let mut url = check.url.clone();
    let mut visited = vec![url.clone()];
    let mut redirect = None;
    loop {
        let response = get(client, check, &url, trust, redirect, trace).await?;
        let next = match http.follow_redirects {
            true => redirect_target(&url, &response)?,
            false => None,
        };
        let Some(next) = next else {
            let redirects = (visited.len() - 1) as u32;
            return Ok(report(
                response,
                redirects,
                &url,
                started,
                &http.redact_headers,
            ));
        };
        let number = visited.len();
        if url.scheme() == "https" && next.scheme() == "http" {
            return Err(redirect_error(format!(
                "redirect {number} to {} refused: it leaves https for cleartext http",
                shown_url(&next)
            )));
        }
        if visited.contains(&next) {
            visited.push(next);
            return Err(redirect_error(format!(
                "redirect loop: {}",
                visited
                    .iter()
                    .map(shown_url)
                    .collect::<Vec<_>>()
                    .join(" -> ")
            )));
        }
        if visited.len() as u32 > MAX_REDIRECTS {
            return Err(redirect_error(format!(
                "more than {MAX_REDIRECTS} redirects (last to {})",
                shown_url(&next)
            )));
        }
        redirect = Some(Redirect {
            number,
            policy: policy(client, http, trace),
        });
        visited.push(next.clone());
        url = next;
    }
}

/// Where this check's redirects may lead: non-global addresses only if it
/// opted in or its own target is one (see `address`).
fn policy(client: &Client, http: &HttpCheck, trace: &Trace) -> RedirectPolicy {
    let target_is_internal = trace
        .first_peer
        .is_some_and(|ip| client.classify(ip) != AddressClass::Global);
    RedirectPolicy {
        allow_non_global: http.redirect_to_private || target_is_internal,
    }
}

async fn get(
    client: &Client,
    check: &Check,
    url: &Url,
    trust: &Trust,
    redirect: Option<Redirect>,
    trace: &mut Trace,
) -> Result<Response, ProbeError> {
    // `resolve` pins the check's host, like curl's --resolve: a redirect to
    // another host is looked up normally.
    let connect_to = match url.host_str() == check.url.host_str() {
        true => check.resolve,
        false => None,
    };
    let mut request = client::request(http::Method::GET, url);
    if let Some(credentials) = basic_credentials(&check.url, url) {
        request = request.header(http::header::AUTHORIZATION, credentials);
    }
    let request = request.body(Empty::new()).map_err(|err| ProbeError {
        kind: Assertion::HttpProtocol,
        message: format!("cannot build a request for {}: {err}", shown_url(url)),
    })?;
    let hop = Hop {
        url,
        connect_to,
        trust,
        redirect,
    };
    client.send(&hop, request, trace).await
}

/// The check URL's userinfo as Basic credentials, for requests to the
/// check's own origin only (scheme, host and port, as curl does): a
/// redirect elsewhere must not carry them. The value is marked sensitive
/// so that nothing prints it.
fn basic_credentials(configured: &Url, url: &Url) -> Option<http::HeaderValue> {
    use base64::Engine as _;
    if configured.username().is_empty() && configured.password().is_none() {
        return None;
    }
    if configured.origin() != url.origin() {
        return None;
    }
    let decode = |part: &str| percent_encoding::percent_decode_str(part).collect::<Vec<u8>>();
    let mut pair = decode(configured.username());
    pair.push(b':');
    pair.extend(decode(configured.password().unwrap_or_default()));
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = http::HeaderValue::try_from(format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

fn redirect_target(url: &Url, response: &Response) -> Result<Option<Url>, ProbeError> {
    if !response.status.is_redirection() {
        return Ok(None);
    }
    let Some(location) = response.headers.get(LOCATION) else {
        return Ok(None);
    };
    let location = location
        .to_str()
        .map_err(|_| redirect_error("Location header is not valid text".to_string()))?;
    let next = url.join(location).map_err(|err| {
        redirect_error(format!(
            "invalid Location header \"{}\": {err}",
            sanitize::header_value("location", location.as_bytes(), &[] as &[&str])
        ))
    })?;
    match next.scheme() {
        "http" | "https" => Ok(Some(next)),
        other => Err(redirect_error(format!(
            "redirect to unsupported scheme {other:?}"
        ))),
    }
}

fn redirect_error(message: String) -> ProbeError {
    ProbeError {
        kind: Assertion::HttpRedirect,
        message,
    }
}

/// A URL a target sent us to, as it may be shown: redacted, and capped (a
/// hostile `Location` can be kilobytes long).
fn shown_url(url: &Url) -> String {
    sanitize::value(&redact(url))
}

fn report(
    response: Response,
    redirects: u32,
    url: &Url,
    started: tokio::time::Instant,
    redact_also: &[HeaderName],
) -> HttpReport {
    HttpReport {
        status: response.status.as_u16(),
        version: format!("{:?}", response.version),
        redirects,
        final_url: (redirects > 0).then(|| shown_url(url)),
        response_ms: started.elapsed().as_secs_f64() * 1000.0,
        body_bytes: response.body.len() as u64,
        body_truncated: response.truncated,
        headers: headers(&response.headers, redact_also),
        body: response.body,
    }
}

/// Every header twice: as received (for the expectations) and as shown.
/// Each repeated value is redacted on its own (a `WWW-Authenticate` per
/// scheme), then the joined text is capped as one value.
fn headers(map: &http::HeaderMap, redact_also: &[HeaderName]) -> Vec<Header> {
    let mut out = Vec::with_capacity(map.keys_len());
    for name in map.keys() {
        // Repeated headers are joined with ", ", in one string.
        let mut value = String::new();
        let mut shown = String::new();
        for (i, v) in map.get_all(name).iter().enumerate() {
            if i > 0 {
                value.push_str(", ");
                shown.push_str(", ");
            }
            value.push_str(&String::from_utf8_lossy(v.as_bytes()));
            shown.push_str(&sanitize::header_value(
                name.as_str(),
                v.as_bytes(),
                redact_also,
            ));
        }
        out.push(Header {
            name: name.as_str().to_string(),
            value,
            shown: sanitize::value(&shown),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue};
    use proptest::prelude::*;

    use super::*;
    use crate::sanitize::VALUE_CAP;

    fn map(entries: &[(&'static str, Vec<u8>)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in entries {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                map.append(*name, value);
            }
        }
        map
    }

    #[test]
    fn captured_headers_keep_the_raw_value_and_show_the_safe_one() {
        let huge = "A".repeat(60_000) + "SECRET-TAIL";
        let headers = headers(
            &map(&[
                ("set-cookie", b"id=SECRET".to_vec()),
                ("location", b"/cb?token=SECRET".to_vec()),
                ("x-huge", huge.clone().into_bytes()),
                ("x-api-key", b"SECRET".to_vec()),
            ]),
            &[HeaderName::from_static("x-api-key")],
        );
        let shown: Vec<(&str, &str)> = headers
            .iter()
            .map(|h| (h.name.as_str(), h.shown.as_str()))
            .collect();
        assert_eq!(shown[0], ("set-cookie", "[redacted]"));
        assert_eq!(shown[1], ("location", "/cb?[redacted]"));
        assert!(shown[2].1.len() <= VALUE_CAP && !shown[2].1.contains("SECRET"));
        assert_eq!(shown[3], ("x-api-key", "[redacted]"));
        assert_eq!(headers[2].value, huge, "evaluation sees the value as sent");
    }

    proptest! {
        /// Whatever bytes a header carries (as far as hyper lets them
        /// through: `HeaderValue` takes what an HTTP/1 parser takes), the
        /// capture never panics and shows a bounded, clean value.
        #[test]
        fn any_header_bytes_are_captured_bounded(
            values in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3000), 1..4),
            name in prop::sample::select(vec!["location", "link", "refresh", "www-authenticate", "x-any"]),
        ) {
            let entries: Vec<_> = values.into_iter().map(|v| (name, v)).collect();
            for header in headers(&map(&entries), &[]) {
                prop_assert!(header.shown.len() <= VALUE_CAP);
                prop_assert!(!header.shown.chars().any(|c| c.is_control()), "{:?}", header.shown);
            }
        }
    }
}
