//! What an endpoint's answer means for the push: delivered, try again
//! later (and when), or never (and what the operator must fix).
//!
//! Network errors, 5xx, 408, 425 and 429 are worth retrying; every other
//! 4xx says the request itself is wrong (a revoked token, a deleted
//! webhook) and repeating it would only hide that. A redirect is never
//! followed: the channel's URL moved, and a signed request is not sent to
//! wherever an answer points.

use std::time::Duration;

use http::StatusCode;
use time::OffsetDateTime;

/// The verdict on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    /// Worth another attempt; `after` is what the endpoint asked for
    /// (`Retry-After`), if it did.
    Retry {
        why: String,
        after: Option<Duration>,
    },
    /// The endpoint will refuse this request whatever the delay.
    Permanent {
        why: String,
    },
}

/// Which key the operator should look at when the endpoint refuses who
/// vigie is.
pub fn credential_key(kind: &str) -> &'static str {
    match kind {
        "webhook" => "secret_file",
        "ntfy" => "token_file (or user and password_file)",
        "pagerduty" => "routing_key_file",
        _ => "url",
    }
}

/// Judges a status and its headers; `body` is the start of the answer,
/// quoted in the reason (already made safe to show).
pub fn judge(
    channel: &str,
    kind: &str,
    status: StatusCode,
    retry_after: Option<&str>,
    body: &str,
    now: OffsetDateTime,
) -> Answer {
    let said = match body.trim() {
        "" => String::new(),
        text => format!(" ({text})"),
    };
    let what = format!(
        "{kind} {channel} answered {} {}{said}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    match status.as_u16() {
        200..=299 => Answer::Accepted,
        408 | 425 | 429 | 500..=599 => Answer::Retry {
            why: what,
            after: retry_after.and_then(|v| parse_retry_after(v, now)),
        },
        300..=399 => Answer::Permanent {
            why: format!(
                "{what}: a redirect is not followed; set url to where the endpoint is now"
            ),
        },
        401 | 403 => Answer::Permanent {
            why: format!("{what}: check {}", credential_key(kind)),
        },
        404 | 410 => Answer::Permanent {
            why: format!("{what}: check url (the topic, webhook or integration may be gone)"),
        },
        _ => Answer::Permanent {
            why: format!("{what}: the endpoint refuses the request"),
        },
    }
}

/// `Retry-After` as seconds or an HTTP date (RFC 9110 10.2.3), at most a
/// day; a date in the past is no wait.
pub fn parse_retry_after(value: &str, now: OffsetDateTime) -> Option<Duration> {
    const MAX: Duration = Duration::from_secs(86_400);
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds).min(MAX));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at = OffsetDateTime::from(at);
    Some(Duration::try_from(at - now).unwrap_or_default().min(MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-12-01 10:00:00 UTC);

    fn judge_of(code: u16, retry_after: Option<&str>) -> Answer {
        let status = StatusCode::from_u16(code).unwrap();
        judge("phone", "ntfy", status, retry_after, "", NOW)
    }

    #[test]
    fn what_is_retried_and_what_is_not() {
        for code in [200, 201, 202, 204] {
            assert_eq!(judge_of(code, None), Answer::Accepted, "{code}");
        }
        for code in [408, 425, 429, 500, 502, 503, 504] {
            assert!(
                matches!(judge_of(code, None), Answer::Retry { .. }),
                "{code}"
            );
        }
        for code in [301, 400, 401, 403, 404, 410, 413, 422] {
            assert!(
                matches!(judge_of(code, None), Answer::Permanent { .. }),
                "{code}"
            );
        }
    }

    #[test]
    fn a_refused_credential_names_the_key_to_check() {
        assert_eq!(
            judge_of(401, None),
            Answer::Permanent {
                why: "ntfy phone answered 401 Unauthorized: check token_file (or user and password_file)".to_string()
            }
        );
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        assert_eq!(
            judge_of(429, Some("5")),
            Answer::Retry {
                why: "ntfy phone answered 429 Too Many Requests".to_string(),
                after: Some(Duration::from_secs(5)),
            }
        );
        assert_eq!(
            parse_retry_after("Tue, 01 Dec 2026 10:01:00 GMT", NOW),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Tue, 01 Dec 2026 09:00:00 GMT", NOW),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("999999999", NOW),
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(parse_retry_after("soon", NOW), None);
    }
}
