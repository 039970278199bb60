//! A webhook receiver verifying Standard Webhooks v1 signatures
//! (<https://www.standardwebhooks.com/>, `spec/standard-webhooks.md`, and
//! its reference Rust library's `verify`).
//!
//! A delivery carries `webhook-id`, `webhook-timestamp` (Unix seconds) and
//! `webhook-signature`: a space-separated list of `v1,<base64>`, each an
//! HMAC-SHA256 of `{id}.{timestamp}.{body}` under the base64-decoded
//! `whsec_` secret (more than one during a key rotation; one matching is
//! enough). The timestamp must be within five minutes of now, either way.
//! A request that fails any check is answered 401 and kept as [`Refused`];
//! one that passes, with a JSON body, is answered 200 and kept as a
//! [`Delivery`]. Retries carry the same id: [`WebhookReceiver::distinct_ids`]
//! counts events, [`WebhookReceiver::deliveries`] attempts.
//!
//! Not implemented: `v1a` (Ed25519) signatures, which are skipped like any
//! other version; remembering ids to refuse replays (the spec leaves that
//! to the consumer; tests read the ids instead).

use std::sync::{Arc, Mutex};

use aws_lc_rs::hmac;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use vigie::clock::{Clock, SystemClock};

use super::{random_bytes, reason, Answer, Protocol, PushPeer, Received};

/// How far a `webhook-timestamp` may be from now, either way, in seconds.
pub const TOLERANCE_SECS: i64 = 5 * 60;

/// A Standard Webhooks receiver; see the module doc.
pub type WebhookReceiver = PushPeer<Webhook>;

/// A fresh random `whsec_` secret (32 bytes, within the spec's 24 to 64).
pub fn whsec_for_test() -> String {
    format!("whsec_{}", STANDARD.encode(random_bytes(32)))
}

/// The `webhook-signature` value for one message: `v1,` and the base64
/// HMAC-SHA256 of `{id}.{timestamp}.{body}` under `secret`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let tag = hmac::sign(&key(secret), &signed_content(id, timestamp, body));
    format!("v1,{}", STANDARD.encode(tag.as_ref()))
}

/// The HMAC key of a `whsec_<base64>` secret (the prefix is optional, as
/// in the reference libraries).
fn key(secret: &str) -> hmac::Key {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    let bytes = STANDARD
        .decode(encoded)
        .unwrap_or_else(|e| panic!("webhook secret {secret:?} is not base64 after whsec_: {e}"));
    assert!(!bytes.is_empty(), "webhook secret {secret:?} is empty");
    hmac::Key::new(hmac::HMAC_SHA256, &bytes)
}

fn signed_content(id: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(body);
    content
}

/// A delivery that passed every check.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// Its `webhook-id`.
    pub id: String,
    /// Its `webhook-timestamp`.
    pub timestamp: i64,
    /// Its body, parsed.
    pub body: serde_json::Value,
    pub request: Received,
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `webhook-id`, `webhook-timestamp` or `webhook-signature` is absent
    /// (or not visible ASCII).
    MissingHeader(&'static str),
    /// `webhook-timestamp` is not an integer.
    BadTimestamp,
    /// The timestamp is more than five minutes old.
    TooOld,
    /// The timestamp is more than five minutes ahead.
    TooNew,
    /// No `v1` signature in the list matches.
    BadSignature,
    /// The signature matches but the body is not JSON (answered 400).
    NotJson,
}

/// A request the receiver refused, and why.
#[derive(Clone, Debug)]
pub struct Refused {
    pub why: Refusal,
    pub request: Received,
}

/// The receiver's protocol state.
pub struct Webhook {
    key: hmac::Key,
    clock: Arc<dyn Clock>,
    deliveries: Mutex<Vec<Delivery>>,
    refused: Mutex<Vec<Refused>>,
}

impl PushPeer<Webhook> {
    /// A receiver for `secret` (`whsec_<base64>`), judging timestamps by
    /// the system clock.
    pub fn start(secret: &str) -> WebhookReceiver {
        Self::start_with_clock(secret, Arc::new(SystemClock))
    }

    /// Same, judging timestamps by `clock` (the sender's clock in a test on
    /// a fake or paused clock).
    pub fn start_with_clock(secret: &str, clock: Arc<dyn Clock>) -> WebhookReceiver {
        PushPeer::serve(Webhook {
            key: key(secret),
            clock,
            deliveries: Mutex::new(Vec::new()),
            refused: Mutex::new(Vec::new()),
        })
    }

    /// Every accepted delivery, in order (retries included).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.protocol().deliveries.lock().unwrap().clone()
    }

    /// The accepted deliveries whose `webhook-id` is `id`.
    pub fn deliveries_with_id(&self, id: &str) -> Vec<Delivery> {
        let deliveries = self.deliveries();
        deliveries.into_iter().filter(|d| d.id == id).collect()
    }

    /// The distinct `webhook-id`s accepted, in order of first delivery.
    pub fn distinct_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for delivery in self.deliveries() {
            if !ids.contains(&delivery.id) {
                ids.push(delivery.id);
            }
        }
        ids
    }

    /// Every refused request, in order.
    pub fn refused(&self) -> Vec<Refused> {
        self.protocol().refused.lock().unwrap().clone()
    }
}

impl Webhook {
    /// The checks of the spec's `verify`, in its order: headers, timestamp,
    /// then the signatures.
    fn verify(&self, request: &Received) -> Result<(String, i64), Refusal> {
        let header = |name: &'static str| request.header(name).ok_or(Refusal::MissingHeader(name));
        let id = header("webhook-id")?;
        let signatures = header("webhook-signature")?;
        let timestamp: i64 = header("webhook-timestamp")?
            .parse()
            .map_err(|_| Refusal::BadTimestamp)?;
        let now = self.clock.now().unix_timestamp();
        if now - timestamp > TOLERANCE_SECS {
            return Err(Refusal::TooOld);
        }
        if timestamp > now + TOLERANCE_SECS {
            return Err(Refusal::TooNew);
        }
        let content = signed_content(id, timestamp, &request.body);
        // hmac::verify compares in constant time, as the spec requires.
        let matches = signatures
            .split(' ')
            .filter_map(|signature| signature.split_once(','))
            .filter(|(version, _)| *version == "v1")
            .filter_map(|(_, encoded)| STANDARD.decode(encoded).ok())
            .any(|tag| hmac::verify(&self.key, &content, &tag).is_ok());
        if !matches {
            return Err(Refusal::BadSignature);
        }
        Ok((id.to_owned(), timestamp))
    }

    fn refuse(&self, why: Refusal, request: &Received) -> Answer {
        let status = if why == Refusal::NotJson { 400 } else { 401 };
        let text = format!("{why:?}\n");
        self.refused.lock().unwrap().push(Refused {
            why,
            request: request.clone(),
        });
        Answer::text(status, &text)
    }
}

impl Protocol for Webhook {
    const NAME: &'static str = "webhook receiver";

    fn endpoint(&self) -> String {
        "/webhook".to_owned()
    }

    fn answer(&self, request: &Received) -> Answer {
        if request.method != "POST" {
            return Answer::text(405, "webhooks are POSTed\n");
        }
        let (id, timestamp) = match self.verify(request) {
            Ok(verified) => verified,
            Err(why) => return self.refuse(why, request),
        };
        let Ok(body) = serde_json::from_slice(&request.body) else {
            return self.refuse(Refusal::NotJson, request);
        };
        self.deliveries.lock().unwrap().push(Delivery {
            id,
            timestamp,
            body,
            request: request.clone(),
        });
        Answer::text(200, "")
    }

    fn scripted(&self, status: u16) -> Answer {
        Answer::text(status, reason(status))
    }
}
