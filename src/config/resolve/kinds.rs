//! The keys of `kind = "dns"` checks, and which kind (of http, cors,
//! dns and upload)
//! owns which key (so a key written on the wrong kind is reported instead
//! of silently asserting nothing).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::str::FromStr;

use toml::Spanned;
use url::Url;

use super::cx::Cx;
use crate::check::{AddressSet, DnsCheck, DnsExpect, KindName};
use crate::config::decode::{key_as_written, Decoded};
use crate::config::raw::{RawCheck, RawExpect};

/// A key, where it is written (if it is), and the kinds it belongs to.
type Owned = (String, Option<Range<usize>>, &'static [KindName]);

/// Every kind-specific key of a `[[check]]` present in `d`, with its span
/// and the kinds it belongs to. `expect` is judged key by key, since http
/// and dns checks share the table but not its keys.
fn owned_keys(d: &Decoded<RawCheck>) -> Vec<(String, Range<usize>, &'static [KindName])> {
    use KindName::{Cors, Dns, Http, Upload};
    const HTTP: &[KindName] = &[Http];
    const CORS: &[KindName] = &[Cors];
    const DNS: &[KindName] = &[Dns];
    const UPLOAD: &[KindName] = &[Upload];
    const BROWSER: &[KindName] = &[Cors, Upload];
    const WEB: &[KindName] = &[Http, Cors, Upload];
    let raw = &d.value;
    let span = |v: Option<Range<usize>>| v;
    let mut keys: Vec<Owned> = vec![
        (
            "resolve".into(),
            span(raw.resolve.as_ref().map(|v| v.span())),
            WEB,
        ),
        ("tls".into(), raw.tls.as_ref().map(|_| d.span.clone()), WEB),
        (
            "follow_redirects".into(),
            raw.follow_redirects.as_ref().map(|v| v.span()),
            HTTP,
        ),
        (
            "redirect_to_private".into(),
            raw.redirect_to_private.as_ref().map(|v| v.span()),
            HTTP,
        ),
        (
            "redact_headers".into(),
            first_span(raw.redact_headers.as_deref()),
            HTTP,
        ),
        (
            "origin".into(),
            raw.origin.as_ref().map(|v| v.span()),
            BROWSER,
        ),
        ("method".into(), raw.method.as_ref().map(|v| v.span()), CORS),
        (
            "request_headers".into(),
            first_span(raw.request_headers.as_deref()),
            CORS,
        ),
        (
            "deny_origins".into(),
            first_span(raw.deny_origins.as_deref()),
            CORS,
        ),
        (
            "allow_any_origin".into(),
            raw.allow_any_origin.as_ref().map(|v| v.span()),
            CORS,
        ),
        (
            "credentials".into(),
            raw.credentials.as_ref().map(|v| v.span()),
            CORS,
        ),
        (
            "min_max_age".into(),
            raw.min_max_age.as_ref().map(|v| v.span()),
            CORS,
        ),
        (
            "expose_headers".into(),
            first_span(raw.expose_headers.as_deref()),
            BROWSER,
        ),
        ("query".into(), raw.query.as_ref().map(|v| v.span()), DNS),
        (
            "resolvers".into(),
            first_span(raw.resolvers.as_deref()),
            DNS,
        ),
        (
            "region".into(),
            raw.region.as_ref().map(|v| v.span()),
            UPLOAD,
        ),
        (
            "key_prefix".into(),
            raw.key_prefix.as_ref().map(|v| v.span()),
            UPLOAD,
        ),
        (
            "content_type".into(),
            raw.content_type.as_ref().map(|v| v.span()),
            UPLOAD,
        ),
        (
            "access_key_id_file".into(),
            raw.access_key_id_file.as_ref().map(|v| v.span()),
            UPLOAD,
        ),
        (
            "secret_access_key_file".into(),
            raw.secret_access_key_file.as_ref().map(|v| v.span()),
            UPLOAD,
        ),
        (
            "access_key_id_credential".into(),
            raw.access_key_id_credential.as_ref().map(|v| v.span()),
            UPLOAD,
        ),
        (
            "secret_access_key_credential".into(),
            raw.secret_access_key_credential.as_ref().map(|v| v.span()),
            UPLOAD,
        ),
    ];
    if let Some(expect) = &raw.expect {
        keys.extend(expect_keys(expect, d));
    }
    keys.into_iter()
        .filter_map(|(key, span, owners)| Some((key, span?, owners)))
        .collect()
}

/// The keys of `[check.expect]`, each with its owner.
fn expect_keys(e: &RawExpect, d: &Decoded<RawCheck>) -> Vec<Owned> {
    const HTTP: &[KindName] = &[KindName::Http];
    const DNS: &[KindName] = &[KindName::Dns];
    let header = || d.span.clone();
    let mut keys: Vec<Owned> = vec![
        (
            "status".into(),
            e.status
                .as_ref()
                .map(|s| s.first().map_or_else(header, |c| c.span())),
            HTTP,
        ),
        (
            "body_contains".into(),
            e.body_contains.as_ref().map(|v| v.span()),
            HTTP,
        ),
        (
            "body_regex".into(),
            e.body_regex.as_ref().map(|v| v.span()),
            HTTP,
        ),
        (
            "max_response_time".into(),
            e.max_response_time.as_ref().map(|v| v.span()),
            HTTP,
        ),
        (
            "headers".into(),
            e.headers
                .as_ref()
                .map(|h| h.keys().next().map_or_else(header, |k| k.span())),
            HTTP,
        ),
        ("cname".into(), e.cname.as_ref().map(|v| v.span()), DNS),
        ("caa_issue".into(), first_span(e.caa_issue.as_deref()), DNS),
        (
            "caa_issuewild".into(),
            first_span(e.caa_issuewild.as_deref()),
            DNS,
        ),
        ("a".into(), first_span(e.a.as_deref()), DNS),
        ("aaaa".into(), first_span(e.aaaa.as_deref()), DNS),
        (
            "txt_regex".into(),
            e.txt_regex.as_ref().map(|v| v.span()),
            DNS,
        ),
        ("exists".into(), e.exists.as_ref().map(|v| v.span()), DNS),
    ];
    for key in &mut keys {
        key.0 = format!("expect.{}", key.0);
    }
    keys
}

fn first_span(values: Option<&[Spanned<String>]>) -> Option<Range<usize>> {
    values.map(|v| v.first().map(|f| f.span()).unwrap_or_default())
}

/// Reports every key that does not belong to `kind`.
pub(super) fn foreign_keys(cx: &mut Cx<'_>, d: &Decoded<RawCheck>, kind: KindName) {
    for (key, span, owners) in owned_keys(d) {
        if owners.contains(&kind) {
            continue;
        }
        let kinds: Vec<String> = owners.iter().map(|k| format!("{:?}", k.as_str())).collect();
        let kinds = match kinds.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        let message = format!("only applies to kind = {kinds} checks");
        cx.error(&span, &key, message);
    }
}

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
    let expect = match &raw.expect {
        Some(e) => dns_expect(cx, e, &d.span),
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

fn dns_expect(cx: &mut Cx<'_>, raw: &RawExpect, header: &Range<usize>) -> DnsExpect {
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
    DnsExpect {
        cname: raw
            .cname
            .as_ref()
            .and_then(|c| domain_name(cx, "expect.cname", c, true)),
        caa_issue: cas(cx, "expect.caa_issue", raw.caa_issue.as_deref()),
        caa_issuewild: cas(cx, "expect.caa_issuewild", raw.caa_issuewild.as_deref()),
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
        exists: raw.exists.as_ref().is_none_or(|e| *e.get_ref()),
    }
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
fn domain_name(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>, fqdn: bool) -> Option<String> {
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
