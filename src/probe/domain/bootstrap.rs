//! IANA's RDAP bootstrap for domain names (RFC 9224, `dns.json`): which
//! RDAP server answers for which TLD.
//!
//! A snapshot ships inside the binary (`dns.json` beside this file). It is
//! a compact copy of IANA's file as published in late 2026, cut down to
//! the registries most platforms use: the daemon replaces it with IANA's
//! own at the first domain query and refreshes that at most daily
//! (`mod.rs`), so the snapshot only answers until then, or when neither a
//! cached copy nor IANA can be read. Like IANA's file it has no entry for
//! the TLDs whose registries run no RDAP service IANA lists (.io, .de,
//! .eu, .co, .sh, .me, .ch among them): a check of such a name sets
//! `rdap_url`.
//!
//! The document is read as RFC 9224 writes it: `services` is a list of
//! `[[labels...], [base URLs...]]` pairs. An entry of another shape makes
//! the whole document unreadable, so a fetched file IANA changed in a way
//! vigie does not understand is refused, and the last one kept.

use serde::{Deserialize, Serialize};
use url::Url;

use crate::check::DomainCheck;

/// The snapshot shipped with vigie.
const SHIPPED: &str = include_str!("dns.json");

/// An RFC 9224 bootstrap document, kept as written (it is also what the
/// state directory's copy holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bootstrap {
    #[serde(default)]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publication: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub services: Vec<Vec<Vec<String>>>,
}

impl Bootstrap {
    /// Reads a bootstrap document; every service must be a pair of
    /// non-empty lists, and name at least one http(s) URL.
    pub fn parse(bytes: &[u8]) -> Result<Bootstrap, String> {
        let bootstrap: Bootstrap = serde_json::from_slice(bytes)
            .map_err(|err| format!("not an RFC 9224 bootstrap document ({err})"))?;
        bootstrap.validate()?;
        Ok(bootstrap)
    }

    /// The snapshot shipped with vigie.
    pub fn shipped() -> Bootstrap {
        // Invariant: the shipped file is read by a unit test below.
        Bootstrap::parse(SHIPPED.as_bytes()).expect("the shipped RDAP bootstrap is valid")
    }

    /// Every service a pair of non-empty lists naming an http(s) URL.
    pub fn validate(&self) -> Result<(), String> {
        if self.services.is_empty() {
            return Err("the bootstrap document lists no service".to_string());
        }
        for (i, service) in self.services.iter().enumerate() {
            let (Some(labels), Some(urls)) = (service.first(), service.get(1)) else {
                return Err(format!("service {i} is not a [labels, URLs] pair"));
            };
            if service.len() != 2 || labels.is_empty() || base(urls).is_none() {
                return Err(format!(
                    "service {i} is not a [labels, URLs] pair with an http(s) URL"
                ));
            }
        }
        Ok(())
    }

    /// The RDAP base URL for `domain` (lower-case A-labels): the service
    /// whose entry matches the most trailing labels (RFC 9224 §4), its
    /// https URL first. `None`: the bootstrap knows no server for it.
    pub fn base_for(&self, domain: &str) -> Option<Url> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let mut best: Option<(usize, &Vec<String>)> = None;
        for service in &self.services {
            let (Some(labels), Some(urls)) = (service.first(), service.get(1)) else {
                continue;
            };
            for entry in labels {
                let entry = entry.trim_end_matches('.').to_ascii_lowercase();
                let matches = domain == entry || domain.ends_with(&format!(".{entry}"));
                let depth = entry.split('.').count();
                if matches && best.is_none_or(|(known, _)| depth > known) {
                    best = Some((depth, urls));
                }
            }
        }
        best.and_then(|(_, urls)| base(urls))
    }
}

/// The URL to use of a service's list: https first (RFC 9224 §3), else
/// http; with a trailing `/` so that `domain/NAME` joins under it.
fn base(urls: &[String]) -> Option<Url> {
    let parsed: Vec<Url> = urls.iter().filter_map(|u| Url::parse(u).ok()).collect();
    let url = parsed
        .iter()
        .find(|u| u.scheme() == "https")
        .or_else(|| parsed.iter().find(|u| u.scheme() == "http"))?;
    Some(DomainCheck::base(url.clone()))
}

/// The TLD of `domain`, as an operator names it: `.io`.
pub fn tld(domain: &str) -> String {
    let last = domain
        .trim_end_matches('.')
        .rsplit('.')
        .next()
        .unwrap_or("");
    format!(".{last}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_snapshot_names_the_big_registries() {
        let shipped = Bootstrap::shipped();
        let base = |d: &str| shipped.base_for(d).map(|u| u.to_string());
        assert_eq!(
            base("example.com").as_deref(),
            Some("https://rdap.verisign.com/com/v1/")
        );
        assert_eq!(
            base("example.net").as_deref(),
            Some("https://rdap.verisign.com/net/v1/")
        );
        assert_eq!(
            base("example.org").as_deref(),
            Some("https://rdap.publicinterestregistry.org/rdap/")
        );
        assert_eq!(
            base("vigie.dev").as_deref(),
            Some("https://pubapi.registry.google/rdap/")
        );
        assert_eq!(base("exemple.fr").as_deref(), Some("https://rdap.nic.fr/"));
        // As at IANA: these registries list no RDAP service.
        for tld in ["io", "de", "eu", "co", "sh", "me", "ch"] {
            assert_eq!(base(&format!("example.{tld}")), None, ".{tld}");
        }
    }

    #[test]
    fn the_longest_matching_entry_wins_and_https_comes_first() {
        let doc = br#"{"version": "1.0", "services": [
            [["uk"], ["http://rdap.uk.example/", "https://rdap.uk.example/"]],
            [["co.uk"], ["https://rdap.co-uk.example/base"]]
        ]}"#;
        let bootstrap = Bootstrap::parse(doc).unwrap();
        let base = |d: &str| bootstrap.base_for(d).map(|u| u.to_string());
        assert_eq!(
            base("shop.co.uk").as_deref(),
            Some("https://rdap.co-uk.example/base/")
        );
        assert_eq!(
            base("Example.UK.").as_deref(),
            Some("https://rdap.uk.example/")
        );
        assert_eq!(base("notuk"), None, "labels match whole");
    }

    #[test]
    fn a_document_of_another_shape_is_refused() {
        for bad in [
            &br#"{"services": []}"#[..],
            br#"{"services": [[["com"]]]}"#,
            br#"{"services": [[["com"], ["ftp://x/"]]]}"#,
            br#"{"services": [[["com"], ["https://x/"], ["extra"]]]}"#,
            br#"<html>"#,
        ] {
            assert!(
                Bootstrap::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_tld_is_named_with_its_dot() {
        assert_eq!(tld("example.io"), ".io");
        assert_eq!(tld("example.io."), ".io");
    }
}
