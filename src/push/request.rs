//! One HTTP request a channel makes, as data: built by the kinds' files
//! from a [`PushEvent`](super::document::PushEvent), sent by `deliver.rs`.

use url::Url;

/// A request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub url: Url,
    /// Lowercase names; values already valid header values.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// A JSON POST of `body`.
    pub fn json(url: &Url, body: &impl serde::Serialize) -> Request {
        Request {
            url: url.clone(),
            headers: vec![("content-type".to_string(), "application/json".to_string())],
            body: serde_json::to_vec(body).expect("a push document always serializes"),
        }
    }
}
