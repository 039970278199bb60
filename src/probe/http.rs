//! The `http` probe: GET the URL, follow redirects like a browser would
//! (but never from https to http, and never where `address` forbids),
//! return what came back. Judging the answer is `evaluate`'s job.

use http::header::LOCATION;
use http_body_util::Empty;
use url::Url;

use super::address::{AddressClass, RedirectPolicy};
use super::client::{self, Client, Hop, Redirect, Response, Trace};
use super::tls::Trust;
use crate::check::{Check, HttpCheck, MAX_REDIRECTS};
use crate::outcome::{Assertion, HttpReport, ProbeError};
use crate::redact::{redact, redact_str};

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
            return Ok(report(response, redirects, &url, started));
        };
        let number = visited.len();
        if url.scheme() == "https" && next.scheme() == "http" {
            return Err(redirect_error(format!(
                "redirect {number} to {} refused: it leaves https for cleartext http",
                redact(&next)
            )));
        }
        if visited.contains(&next) {
            visited.push(next);
            return Err(redirect_error(format!(
                "redirect loop: {}",
                visited.iter().map(redact).collect::<Vec<_>>().join(" -> ")
            )));
        }
        if visited.len() as u32 > MAX_REDIRECTS {
            return Err(redirect_error(format!(
                "more than {MAX_REDIRECTS} redirects (last to {})",
                redact(&next)
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
        message: format!("cannot build a request for {}: {err}", redact(url)),
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
            "invalid Location header {:?}: {err}",
            redact_str(location)
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

fn report(
    response: Response,
    redirects: u32,
    url: &Url,
    started: tokio::time::Instant,
) -> HttpReport {
    HttpReport {
        status: response.status.as_u16(),
        version: format!("{:?}", response.version),
        redirects,
        final_url: (redirects > 0).then(|| redact(url)),
        response_ms: started.elapsed().as_secs_f64() * 1000.0,
        body_bytes: response.body.len() as u64,
        body_truncated: response.truncated,
        headers: headers(&response.headers),
        body: response.body,
    }
}

fn headers(map: &http::HeaderMap) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(map.keys_len());
    for name in map.keys() {
        // Repeated headers are joined with ", ", in one string.
        let mut value = String::new();
        for (i, v) in map.get_all(name).iter().enumerate() {
            if i > 0 {
                value.push_str(", ");
            }
            value.push_str(&String::from_utf8_lossy(v.as_bytes()));
        }
        out.push((name.as_str().to_string(), value));
    }
    out
}
