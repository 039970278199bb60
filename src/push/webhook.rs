//! `kind = "webhook"`: the push document as JSON, signed as Standard
//! Webhooks v1 says (<https://www.standardwebhooks.com/>): the headers
//! `webhook-id` (the event's stable id, so a receiver can drop a retry it
//! already has), `webhook-timestamp` (unix seconds) and
//! `webhook-signature` (`v1,` + base64 of HMAC-SHA256 over
//! `{id}.{timestamp}.{body}`, keyed with the secret's decoded bytes).

use std::collections::BTreeMap;

use aws_lc_rs::hmac;
use base64::Engine;
use time::OffsetDateTime;
use url::Url;

use super::document::PushEvent;
use super::request::Request;

/// The signed request for `event`, at `now` (the timestamp is the time of
/// this attempt: receivers refuse old ones).
pub fn request(
    url: &Url,
    key: &[u8],
    headers: &BTreeMap<String, String>,
    event: &PushEvent,
    now: OffsetDateTime,
) -> Request {
    let mut request = Request::json(url, event);
    let timestamp = now.unix_timestamp().to_string();
    let signature = sign(key, &event.id, &timestamp, &request.body);
    request.headers.extend([
        ("webhook-id".to_string(), event.id.clone()),
        ("webhook-timestamp".to_string(), timestamp),
        ("webhook-signature".to_string(), format!("v1,{signature}")),
    ]);
    request
        .headers
        .extend(headers.iter().map(|(n, v)| (n.clone(), v.clone())));
    request
}

/// base64 of HMAC-SHA256(`key`, `{id}.{timestamp}.{body}`).
pub fn sign(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut context = hmac::Context::with_key(&key);
    context.update(id.as_bytes());
    context.update(b".");
    context.update(timestamp.as_bytes());
    context.update(b".");
    context.update(body);
    base64::engine::general_purpose::STANDARD.encode(context.sign().as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference
    /// libraries (secret, id, timestamp, payload, signature).
    #[test]
    fn the_signature_is_the_specifications_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let key = crate::config::channels::webhook_secret(secret).unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signature = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body);
        assert_eq!(signature, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
