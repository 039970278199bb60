//! Which kind (of http, cors, dns, upload, tls, smtp and domain) owns which key of a
//! `[[check]]`, so a key written on the wrong kind is reported instead of
//! silently asserting nothing.

use std::ops::Range;

use toml::Spanned;

use super::cx::Cx;
use crate::check::KindName;
use crate::config::decode::Decoded;
use crate::config::raw::{RawCheck, RawExpect};

/// A key, where it is written (if it is), and the kinds it belongs to.
type Owned = (String, Option<Range<usize>>, &'static [KindName]);

/// Every kind-specific key of a `[[check]]` present in `d`, with its span
/// and the kinds it belongs to. `expect` is judged key by key, since http
/// and dns checks share the table but not its keys.
fn owned_keys(d: &Decoded<RawCheck>) -> Vec<(String, Range<usize>, &'static [KindName])> {
    use KindName::{Cors, Dns, Domain, Http, Smtp, Tls, Upload};
    const HTTP: &[KindName] = &[Http];
    const TLS: &[KindName] = &[Tls];
    const SMTP: &[KindName] = &[Smtp];
    const DOMAIN: &[KindName] = &[Domain];
    // Every kind that makes a TLS connection of its own choosing.
    const CONNECTS: &[KindName] = &[Http, Cors, Upload, Tls, Smtp];
    const CORS: &[KindName] = &[Cors];
    const DNS: &[KindName] = &[Dns];
    const UPLOAD: &[KindName] = &[Upload];
    const BROWSER: &[KindName] = &[Cors, Upload];
    let raw = &d.value;
    let span = |v: Option<Range<usize>>| v;
    let mut keys: Vec<Owned> = vec![
        (
            "resolve".into(),
            span(raw.resolve.as_ref().map(|v| v.span())),
            CONNECTS,
        ),
        (
            "tls".into(),
            raw.tls.as_ref().map(|_| d.span.clone()),
            CONNECTS,
        ),
        (
            "address".into(),
            raw.address.as_ref().map(|v| v.span()),
            TLS,
        ),
        (
            "server_name".into(),
            raw.server_name.as_ref().map(|v| v.span()),
            TLS,
        ),
        (
            "require_starttls".into(),
            raw.require_starttls.as_ref().map(|v| v.span()),
            SMTP,
        ),
        (
            "domain".into(),
            raw.domain.as_ref().map(|v| v.span()),
            DOMAIN,
        ),
        (
            "rdap_url".into(),
            raw.rdap_url.as_ref().map(|v| v.span()),
            DOMAIN,
        ),
        (
            "rdap".into(),
            raw.rdap.as_ref().map(|_| d.span.clone()),
            DOMAIN,
        ),
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
        ("dns".into(), raw.dns.as_ref().map(|_| d.span.clone()), DNS),
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
        (
            "caa_accounturi".into(),
            e.caa_accounturi.as_ref().map(|v| v.span()),
            DNS,
        ),
        (
            "caa_validationmethods".into(),
            e.caa_validationmethods.as_ref().map(|v| v.span()),
            DNS,
        ),
        ("a".into(), first_span(e.a.as_deref()), DNS),
        ("aaaa".into(), first_span(e.aaaa.as_deref()), DNS),
        (
            "txt_regex".into(),
            e.txt_regex.as_ref().map(|v| v.span()),
            DNS,
        ),
        ("dnssec".into(), e.dnssec.as_ref().map(|v| v.span()), DNS),
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
