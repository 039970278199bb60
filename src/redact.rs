//! URLs as they may be shown: without userinfo or query string.
//!
//! Presigned object-storage URLs carry their signature in the query, and
//! some targets embed credentials as `user:pass@`. Anything printed, logged,
//! stored or mailed goes through [`redact`].

use url::Url;

/// The URL with userinfo removed and the query replaced by a marker.
pub fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    let had_userinfo = !shown.username().is_empty() || shown.password().is_some();
    if had_userinfo {
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
    }
    if shown.query().is_some() {
        shown.set_query(Some("[redacted]"));
    }
    shown.set_fragment(None);
    shown.to_string().replace("%5Bredacted%5D", "[redacted]")
}

/// Redacts a URL given as text; text that is not a URL is returned whole
/// only if it has no `@` or `?` that could hide a secret.
pub fn redact_str(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => redact(&url),
        Err(_) if text.contains(['@', '?']) => "[redacted]".to_string(),
        Err(_) => text.to_string(),
    }
}

/// An error reason reduced to its kind, the text before its first `:`
/// (`"replication failing (3 cycles in a row): cannot reach https://..."`
/// becomes `"replication failing (3 cycles in a row)"`): what may be shown
/// without a token or sent to a third party, never a bucket or endpoint.
pub fn reason_kind(reason: &str) -> String {
    match reason.split_once(':') {
        Some((kind, _)) => kind.to_string(),
        None => reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_userinfo_and_query() {
        let url =
            Url::parse("https://user:secret@bucket.example/obj?X-Amz-Signature=abc#frag").unwrap();
        assert_eq!(redact(&url), "https://bucket.example/obj?[redacted]");
    }

    #[test]
    fn leaves_plain_urls_alone() {
        let url = Url::parse("https://www.example.com/health").unwrap();
        assert_eq!(redact(&url), "https://www.example.com/health");
    }

    #[test]
    fn redacts_unparseable_text_that_could_hide_secrets() {
        assert_eq!(redact_str("/relative?token=1"), "[redacted]");
        assert_eq!(redact_str("/relative"), "/relative");
    }
}
