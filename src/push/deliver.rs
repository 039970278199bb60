//! Sending one [`Request`]: an HTTP client per channel whose every
//! address is judged before it is connected to, and the endpoint's answer
//! read (4 KiB at most) and judged.
//!
//! The address policy is applied where the name is resolved (the
//! client's resolver), so the address connected to is the address judged:
//! a name that resolves to a metadata address is never connected to, and a
//! private one only with `allow_private`. A URL written as an IP address
//! was judged when the config loaded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use time::OffsetDateTime;

use super::answer::{self, Answer};
use super::request::Request;
use crate::config::channels::{address_refusal, Channel};
use crate::sanitize;

/// What a retry after ntfy's daily quota says; the sender mails it.
pub const QUOTA_SPENT: &str =
    "ntfy's daily message quota is spent; pushes wait until it renews at 00:00 UTC";

/// The most of an answer's body read and quoted.
const MAX_ANSWER: usize = 4096;
/// The most of it quoted in a reason.
const MAX_QUOTED: usize = 200;

/// Resolves with the system resolver and keeps only the addresses the
/// channel may be sent to.
struct Judged {
    allow_private: bool,
}

impl Resolve for Judged {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusals = Vec::new();
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match address_refusal(a.ip(), allow_private) {
                    None => true,
                    Some(why) => {
                        refusals.push(why);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = match refusals.first() {
                    Some(why) => format!("{host} resolves to {why}"),
                    None => format!("{host} resolves to no address"),
                };
                return Err(why.into());
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// The HTTP client of `channel`.
pub fn client(
    channel: &Channel,
    extra_ca_file: Option<&std::path::Path>,
) -> Result<reqwest::Client, String> {
    crate::net::service_client(extra_ca_file)
        .map_err(|e| e.to_string())?
        .dns_resolver(Arc::new(Judged {
            allow_private: channel.allow_private,
        }))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(channel.timeout.min(Duration::from_secs(10)))
        .timeout(channel.timeout)
        .pool_idle_timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// Sends `request` and judges the answer.
pub async fn send(
    client: &reqwest::Client,
    channel: &Channel,
    request: &Request,
    now: OffsetDateTime,
) -> Answer {
    let mut builder = client.post(request.url.clone()).body(request.body.clone());
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let kind = channel.kind.as_str();
    let mut response = match builder.send().await {
        Ok(response) => response,
        Err(err) => {
            return Answer::Retry {
                why: format!(
                    "{kind} {} could not be reached: {}",
                    channel.name,
                    crate::net::describe(&err)
                ),
                after: None,
            };
        }
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    while body.len() < MAX_ANSWER {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ANSWER);
    let text = String::from_utf8_lossy(&body);
    let quoted = sanitize::bounded_bytes(&body, MAX_QUOTED);
    let answer = answer::judge(
        &channel.name,
        kind,
        status,
        retry_after.as_deref(),
        &quoted,
        now,
    );
    match (&answer, kind) {
        // ntfy's daily quota: 429 with error code 42908; retried from the
        // next UTC day, and said so.
        (Answer::Retry { why, .. }, "ntfy")
            if text.contains("42908") || text.contains("daily message quota") =>
        {
            let tomorrow = (now.date() + time::Duration::days(1))
                .midnight()
                .assume_utc();
            Answer::Retry {
                why: format!("{why}: {QUOTA_SPENT}"),
                after: Duration::try_from(tomorrow - now).ok(),
            }
        }
        _ => answer,
    }
}
