//! Listing a prefix of the bucket with its keys percent-encoded.
//!
//! XML 1.0 cannot carry most control characters, and object_store asks S3
//! for raw keys: one object named with a carriage return or an escape
//! (anyone who can write the bucket can make one) makes its XML parser
//! refuse the whole listing, and with it every restore. So vigie lists
//! with `encoding-type=url` itself: S3 and the compatible servers then
//! percent-encode each key, and this module decodes it. What a decoded key
//! holds is the caller's to judge and to escape when it is shown.
//!
//! This file builds the request URL and reads the answer; `bucket.rs`
//! signs the request (object_store's own SigV4 authorizer, the bucket's
//! credentials), sends it through the bucket's client and words failures.

use percent_encoding::percent_decode_str;
use serde::Deserialize;
use url::Url;

/// Keys a page asks for: S3's own maximum.
pub const PAGE_KEYS: usize = 1000;

/// Bytes one listing page may take: 1,000 keys of at most 1,024 bytes,
/// each up to three times longer encoded, with the XML around them.
pub const MAX_PAGE_BYTES: usize = 4 << 20;

/// Bytes kept of an error answer: S3's error documents are a few hundred.
pub const MAX_ERROR_BYTES: usize = 64 << 10;

/// One page of a listing.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// Decoded keys, in the server's (lexicographic) order.
    pub keys: Vec<String>,
    /// Where the next page starts; `None` on the last.
    pub next: Option<String>,
}

/// The ListObjectsV2 URL for one page. `base` addresses the bucket
/// (`https://endpoint/bucket` or `https://bucket.endpoint`).
pub fn page_url(base: &Url, prefix: &str, max_keys: usize, continuation: Option<&str>) -> Url {
    let mut url = base.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("list-type", "2")
            .append_pair("encoding-type", "url")
            .append_pair("prefix", prefix)
            .append_pair("max-keys", &max_keys.to_string());
        if let Some(token) = continuation {
            query.append_pair("continuation-token", token);
        }
    }
    url
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListBucketResult {
    #[serde(default)]
    contents: Vec<Contents>,
    #[serde(default)]
    is_truncated: bool,
    next_continuation_token: Option<String>,
    encoding_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Contents {
    key: String,
}

/// The keys of one ListObjectsV2 answer, decoded when the server says it
/// encoded them (a server that ignores `encoding-type` sends them raw,
/// and decoding those would turn a literal `%41` into `A`). `Err` says what
/// is wrong with the document.
pub fn parse_page(body: &[u8]) -> Result<Page, String> {
    let text = std::str::from_utf8(body).map_err(|_| "the listing is not UTF-8".to_string())?;
    let result: ListBucketResult =
        quick_xml::de::from_str(text).map_err(|e| format!("unreadable listing: {e}"))?;
    let encoded = result
        .encoding_type
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case("url"));
    let keys = result
        .contents
        .into_iter()
        .map(|c| if encoded { decode_key(&c.key) } else { c.key })
        .collect();
    let next = match (result.is_truncated, result.next_continuation_token) {
        (true, Some(token)) if !token.is_empty() => Some(token),
        (true, _) => return Err("the listing is truncated but names no next page".to_string()),
        (false, _) => None,
    };
    Ok(Page { keys, next })
}

/// A key as S3 encodes it: percent-encoded UTF-8, and AWS writes a space as
/// `+` (a literal `+` comes as `%2B`, so reading `+` as a space is safe
/// with servers that write `%20`).
fn decode_key(key: &str) -> String {
    percent_decode_str(&key.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_asks_for_encoded_keys_one_page_at_a_time() {
        let base = Url::parse("http://127.0.0.1:9000/bucket").unwrap();
        let url = page_url(&base, "history/vm 1/", 1000, Some("tok+en/="));
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        assert_eq!(url.path(), "/bucket");
        assert_eq!(
            pairs,
            [
                ("list-type", "2"),
                ("encoding-type", "url"),
                ("prefix", "history/vm 1/"),
                ("max-keys", "1000"),
                ("continuation-token", "tok+en/="),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn encoded_keys_are_decoded_control_characters_and_all() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>history%2Fvm-h%2F</Prefix><KeyCount>3</KeyCount>
  <MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>history/vm-h/%0Dall%20restored%1B%5B2J</Key><Size>1</Size></Contents>
  <Contents><Key>history/vm-h/a+b%2Bc</Key><Size>1</Size></Contents>
  <Contents><Key>history/vm-h/%E2%80%AEtxt.exe</Key><Size>1</Size></Contents>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>"#;
        let page = parse_page(body).unwrap();
        assert_eq!(
            page.keys,
            [
                "history/vm-h/\rall restored\x1b[2J",
                "history/vm-h/a b+c",
                "history/vm-h/\u{202e}txt.exe",
            ]
        );
        assert_eq!(
            page.next.as_deref(),
            Some("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        );
    }

    #[test]
    fn raw_keys_are_kept_as_sent() {
        let body = b"<ListBucketResult><IsTruncated>false</IsTruncated>\
            <Contents><Key>history/100%41</Key></Contents></ListBucketResult>";
        let page = parse_page(body).unwrap();
        assert_eq!(page.keys, ["history/100%41"]);
        assert_eq!(page.next, None);
        let empty =
            parse_page(b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
        assert_eq!(empty.unwrap(), Page::default());
    }

    #[test]
    fn a_broken_listing_says_what_is_wrong() {
        let truncated = b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
        assert_eq!(
            parse_page(truncated).unwrap_err(),
            "the listing is truncated but names no next page"
        );
        assert!(parse_page(b"<ListBucketResult><Contents>").is_err());
        assert_eq!(
            parse_page(&[0xff, 0xfe]).unwrap_err(),
            "the listing is not UTF-8"
        );
    }
}
