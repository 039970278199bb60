//! The keys of `kind = "dns"` checks: the query, the resolver and what
//! the answer must hold (DNSSEC's keys in `dnssec.rs`).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::str::FromStr;

use toml::Spanned;
use url::Url;

use super::cx::Cx;
use crate::check::{is_validation_method, AddressSet, DnsCheck, DnsExpect};
use crate::config::decode::{key_as_written, Decoded};
use crate::config::raw::{RawCheck, RawExpect};

/// The URL a dns check stands for: RFC 4501's `dns:` URI of its query.
/// Never probed; it names the check's target in outcomes.
pub(super) fn dns_url(query: &str) -> Option<Url> {
    Url::parse(&format!("dns:{query}")).ok()
}

/// The keys of a dns check. `query` is required; so is at least one
/// expectation, since a dns check that asserts nothing would be up for a
/// deleted delegation.
pub(super) fn dns(cx: &mut Cx<'_>, d: &Decoded<RawCheck>, context: &str) -> Option<DnsCheck> {
    let raw = &d.value;
    let query = cx
        .required(d, "query", raw.query.as_ref(), context)
        .and_then(|q| domain_name(cx, "query", q, true));
    let resolvers = raw.resolvers.as_deref().map(|list| {
        if list.is_empty() {
            let message = "is empty: name at least one resolver, or leave `resolvers` out to use /etc/resolv.conf";
            cx.error(&d.span, "resolvers", message);
        }
        list.iter()
            .enumerate()
            .filter_map(|(i, r)| resolver(cx, &format!("resolvers[{i}]"), r))
            .collect::<Vec<_>>()
    });
    let dnssec = super::dnssec::validation(cx, raw.dns.as_ref());
    let expect = match &raw.expect {
        Some(e) => dns_expect(cx, e, &d.span, dnssec.is_some()),
        None => DnsExpect::default(),
    };
    let records = expect.cname.is_some()
        || expect.wants_caa()
        || expect.a.is_some()
        || expect.aaaa.is_some()
        || expect.txt_regex.is_some();
    let broken_expect = raw.expect.as_ref().is_some_and(|e| {
        e.cname.is_some()
            || e.caa_issue.is_some()
            || e.caa_issuewild.is_some()
            || e.caa_accounturi.is_some()
            || e.caa_validationmethods.is_some()
            || e.a.is_some()
            || e.aaaa.is_some()
            || e.txt_regex.is_some()
    });
    let absent = raw
        .expect
        .as_ref()
        .and_then(|e| e.exists.as_ref())
        .filter(|e| !*e.get_ref());
    match absent {
        // Records of a name that must not exist: one of the two is a
        // mistake.
        Some(exists) if records || broken_expect => cx.error(
            &exists.span(),
            "expect.exists",
            "`false` says the name must not exist, so it cannot also have the records expected here: keep one or the other",
        ),
        Some(_) => {}
        None if !records && !broken_expect => {
            let message = format!(
                "a dns check needs at least one of `expect.cname`, `expect.caa_issue`, `expect.caa_issuewild`, `expect.a`, `expect.aaaa`, `expect.txt_regex`, or `expect.exists = false`{context}"
            );
            cx.report(&d.span, message);
        }
        None => {}
    }
    Some(DnsCheck {
        query: query?,
        resolvers,
        dnssec,
        expect,
    })
}

/// `IP:PORT`, or a bare IP for port 53.
fn resolver(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>) -> Option<SocketAddr> {
    let text = value.get_ref();
    if let Ok(addr) = SocketAddr::from_str(text) {
        return Some(addr);
    }
    if let Ok(ip) = IpAddr::from_str(text) {
        return Some(SocketAddr::new(ip, 53));
    }
    let message = format!("{text:?} is not a resolver address (write \"IP:PORT\", e.g. \"192.0.2.53:53\" or \"[2001:db8::53]:53\")");
    cx.error(&value.span(), key, message);
    None
}

fn dns_expect(
    cx: &mut Cx<'_>,
    raw: &RawExpect,
    header: &Range<usize>,
    validated: bool,
) -> DnsExpect {
    let cas = |cx: &mut Cx<'_>, key: &str, list: Option<&[Spanned<String>]>| -> Vec<String> {
        list.into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, ca)| {
                let name = domain_name(cx, &format!("{key}[{i}]"), ca, false)?;
                Some(name.trim_end_matches('.').to_string())
            })
            .collect()
    };
    let binding = [
        (
            "expect.caa_accounturi",
            raw.caa_accounturi.as_ref().map(|v| v.span()),
        ),
        (
            "expect.caa_validationmethods",
            raw.caa_validationmethods.as_ref().map(|v| v.span()),
        ),
    ];
    if raw.caa_issue.is_none() && raw.caa_issuewild.is_none() {
        for (key, span) in binding {
            if let Some(span) = span {
                let message = "applies to the CAs named in `expect.caa_issue` (or `expect.caa_issuewild`): name the CA there too, e.g. caa_issue = [\"letsencrypt.org\"]";
                cx.error(&span, key, message);
            }
        }
    }
    DnsExpect {
        cname: raw
            .cname
            .as_ref()
            .and_then(|c| domain_name(cx, "expect.cname", c, true)),
        caa_issue: cas(cx, "expect.caa_issue", raw.caa_issue.as_deref()),
        caa_issuewild: cas(cx, "expect.caa_issuewild", raw.caa_issuewild.as_deref()),
        caa_accounturi: raw
            .caa_accounturi
            .as_ref()
            .and_then(|uri| account_uri(cx, uri)),
        caa_validationmethods: raw
            .caa_validationmethods
            .as_ref()
            .map(|list| validation_methods(cx, list))
            .unwrap_or_default(),
        a: raw.a.as_deref().and_then(|list| {
            addresses::<Ipv4Addr>(cx, "expect.a", list, header, "an IPv4 address")
        }),
        aaaa: raw.aaaa.as_deref().and_then(|list| {
            addresses::<Ipv6Addr>(cx, "expect.aaaa", list, header, "an IPv6 address")
        }),
        txt_regex: raw
            .txt_regex
            .as_ref()
            .and_then(|r| cx.regex("expect.txt_regex", r)),
        dnssec_secure: raw
            .dnssec
            .as_ref()
            .is_some_and(|d| super::dnssec::expect(cx, d, validated)),
        exists: raw.exists.as_ref().is_none_or(|e| *e.get_ref()),
    }
}

/// The ACME account URI as the CAA record must hold it: compared as a
/// plain string (RFC 8657 section 3), so kept as written, not normalised.
fn account_uri(cx: &mut Cx<'_>, value: &Spanned<String>) -> Option<String> {
    let key = "expect.caa_accounturi";
    let text = value.get_ref();
    let example = "write the account URL your ACME client shows, e.g. \"https://acme-v02.api.letsencrypt.org/acme/acct/123456789\"";
    if let Err(err) = Url::parse(text) {
        cx.error(
            &value.span(),
            key,
            format!("{text:?} is not a URI ({err}): {example}"),
        );
        return None;
    }
    // A CAA parameter value is printable ASCII without `;` (RFC 8659).
    if let Some(bad) = text.chars().find(|c| !c.is_ascii_graphic() || *c == ';') {
        let message = format!("{text:?} holds {bad:?}, which no CAA record can carry: {example}");
        cx.error(&value.span(), key, message);
        return None;
    }
    Some(text.clone())
}

/// The methods the renewal validates with; at least one.
fn validation_methods(cx: &mut Cx<'_>, list: &Spanned<Vec<Spanned<String>>>) -> Vec<String> {
    let key = "expect.caa_validationmethods";
    if list.get_ref().is_empty() {
        let message = "is empty: name the methods your ACME client validates with, e.g. [\"dns-01\"], or leave the key out";
        cx.error(&list.span(), key, message);
    }
    list.get_ref()
        .iter()
        .enumerate()
        .filter_map(|(i, method)| {
            if is_validation_method(method.get_ref()) {
                return Some(method.get_ref().clone());
            }
            let message = format!(
                "{:?} is not a validation method (letters, digits and '-': \"dns-01\", \"http-01\", \"tls-alpn-01\")",
                method.get_ref()
            );
            cx.error(&method.span(), &format!("{key}[{i}]"), message);
            None
        })
        .collect()
}

/// `["*"]`, or addresses of one family (`T`).
fn addresses<T: FromStr + Into<IpAddr>>(
    cx: &mut Cx<'_>,
    key: &str,
    list: &[Spanned<String>],
    header: &Range<usize>,
    what: &str,
) -> Option<AddressSet> {
    if list.iter().any(|v| v.get_ref() == "*") {
        if list.len() > 1 {
            let message = "\"*\" (any address) stands alone: write [\"*\"] or the exact addresses";
            cx.error(&list[0].span(), key, message);
            return None;
        }
        return Some(AddressSet::Any);
    }
    if list.is_empty() {
        let message = "is empty: write the addresses, or [\"*\"] for any";
        cx.error(header, key, message);
        return None;
    }
    let mut set = BTreeSet::new();
    let mut ok = true;
    for (i, value) in list.iter().enumerate() {
        match T::from_str(value.get_ref()) {
            Ok(addr) => {
                set.insert(addr.into());
            }
            Err(_) => {
                let message = format!("{:?} is not {what}", value.get_ref());
                cx.error(&value.span(), &format!("{key}[{i}]"), message);
                ok = false;
            }
        }
    }
    ok.then_some(AddressSet::Exactly(set))
}

/// A DNS name as written in zone files, lower-cased and (`fqdn`) with its
/// trailing dot. ASCII only: international names go in their `xn--` form,
/// which is what is on the wire. Underscores are allowed (`_acme-challenge`).
pub(super) fn domain_name(
    cx: &mut Cx<'_>,
    key: &str,
    value: &Spanned<String>,
    fqdn: bool,
) -> Option<String> {
    let text = value.get_ref().to_ascii_lowercase();
    let bare = text.strip_suffix('.').unwrap_or(&text);
    let problem = if bare.is_empty() {
        Some("is empty".to_string())
    } else if !text.is_ascii() {
        Some(format!(
            "{:?} is not ASCII: write an international name in its xn-- form",
            value.get_ref()
        ))
    } else if bare.len() > 253 {
        Some(format!(
            "is {} characters long; a DNS name has at most 253",
            bare.len()
        ))
    } else {
        bare.split('.')
            .find(|label| {
                label.is_empty()
                    || label.len() > 63
                    || !label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
            .map(|label| {
                format!(
                    "{:?} is not a DNS name (label {} must be 1 to 63 letters, digits, '-' or '_')",
                    value.get_ref(),
                    key_as_written(label)
                )
            })
    };
    if let Some(problem) = problem {
        cx.error(&value.span(), key, problem);
        return None;
    }
    Some(match fqdn {
        true => format!("{bare}."),
        false => bare.to_string(),
    })
}
