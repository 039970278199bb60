//! `[[check]]` entries -> [`Check`]s: names (unique across files),
//! kind, cadence, timeout, labels, TLS and kind-specific expectations.
//!
//! The kind is dispatched in exactly one `match` ([`check`]); the kind
//! names themselves come from [`KindName`]'s serde names in `check.rs`, so
//! they are never listed here.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use http::HeaderName;
use serde::de::value::{Error as ValueError, StrDeserializer};
use serde::Deserialize;
use time::OffsetDateTime;
use toml::Spanned;

use super::base_dir;
use super::browser::{header_names, parse_origin};
use super::cx::Cx;
use super::upload;
use super::{dns, domain, keys, tls_kinds};
use crate::check::{
    AlertOverrides, Cadence, Check, CheckKind, CorsCheck, HttpCheck, HttpExpect, KindName,
    TlsExpect, DEFAULT_ARI_GRACE, DEFAULT_CRITICAL_DAYS,
};
use crate::config::credentials::CredentialDirs;
use crate::config::decode::{backticked, key_as_written, Decoded};
use crate::config::error::Diagnostics;
use crate::config::limits::{
    MAX_ARI_GRACE, MAX_EVERY, MAX_MIN_MAX_AGE, MAX_REPEAT, MAX_TIMEOUT, MIN_INTERVAL, MIN_POSITIVE,
};
use crate::config::raw::{RawCheck, RawCheckAlert, RawExpect, RawTls};
use crate::config::source::Source;

/// Cadence of a check that sets neither `every` nor `schedule`: often
/// enough that two failed probes (the default failure threshold) page
/// within a few minutes, rare enough to be invisible in the target's logs.
const DEFAULT_EVERY: Duration = Duration::from_secs(60);

/// What a check takes from the config when it does not say.
#[derive(Debug, Clone)]
pub(crate) struct CheckDefaults {
    pub timeout: Duration,
    /// The top-level `acme_directory`.
    pub acme_directory: Option<url::Url>,
    /// Where `*_credential` names are looked up (upload checks' keys).
    pub credentials: CredentialDirs,
}

/// Check names seen so far and where, to report duplicates across files.
/// The name is the key of the stored history and of alert state, so two
/// checks sharing one would silently mix their results.
#[derive(Debug, Default)]
pub(crate) struct Names {
    first: HashMap<String, String>,
}

/// Resolves the `[[check]]` entries of one checks file, in order; cron
/// schedules must fire after `now`.
pub(crate) fn checks(
    src: &Source,
    raw: &[Decoded<RawCheck>],
    defaults: &CheckDefaults,
    names: &mut Names,
    now: OffsetDateTime,
    diag: &mut Diagnostics,
) -> Vec<Check> {
    let mut cx = Cx::new(src, diag, base_dir(&src.path), now, &defaults.credentials);
    raw.iter()
        .enumerate()
        .filter_map(|(i, d)| check(&mut cx, d, i, defaults, names))
        .collect()
}

/// One `[[check]]`. Every key is looked at even when an earlier one is
/// wrong, so all of a check's problems are reported together.
fn check(
    cx: &mut Cx<'_>,
    d: &Decoded<RawCheck>,
    index: usize,
    defaults: &CheckDefaults,
    names: &mut Names,
) -> Option<Check> {
    let raw = &d.value;
    let context = match &raw.name {
        Some(name) => format!(" in check {:?}", name.get_ref()),
        None => format!(" in check #{}", index + 1),
    };
    let name = cx
        .required(d, "name", raw.name.as_ref(), &context)
        .and_then(|n| check_name(cx, n, names));
    let kind_name = cx
        .required(d, "kind", raw.kind.as_ref(), &context)
        .and_then(|k| kind_name(cx, k));
    // A dns check has no URL of its own (it asks `query`), nor has a tls
    // check (it connects to `address`) or a domain check (it asks the
    // registry about `domain`); an smtp check's URL is read with its
    // kind; every other kind needs a web URL.
    let mut url = match (kind_name, &raw.url) {
        (Some(KindName::Dns), Some(u)) => {
            let message = "a dns check has no url: it asks `query` (write the name there)";
            cx.error(&u.span(), "url", message);
            None
        }
        (Some(KindName::Tls), Some(u)) => {
            let message = "a tls check has no url: write `address = \"host:port\"`";
            cx.error(&u.span(), "url", message);
            None
        }
        (Some(KindName::Domain), Some(u)) => {
            let message = "a domain check has no url: write `domain = \"example.com\"` (and `rdap_url` for the registry's RDAP server, if IANA lists none)";
            cx.error(&u.span(), "url", message);
            None
        }
        (Some(KindName::Dns | KindName::Tls | KindName::Smtp | KindName::Domain), _) => None,
        _ => cx
            .required(d, "url", raw.url.as_ref(), &context)
            .and_then(|u| cx.web_url("url", u)),
    };
    let every = cadence(cx, raw);
    let timeout = cx.duration_or(
        "timeout",
        raw.timeout.as_ref(),
        defaults.timeout,
        MIN_POSITIVE,
        MAX_TIMEOUT,
    );
    let resolve = raw.resolve.as_ref().and_then(|r| {
        let ip = r.get_ref().parse::<IpAddr>().ok();
        if ip.is_none() {
            let message = format!("{:?} is not an IP address", r.get_ref());
            cx.error(&r.span(), "resolve", message);
        }
        ip
    });
    let labels = labels(cx, raw.labels.as_ref());
    // TLS expectations are resolved whatever the URL's scheme: a `[check.tls]`
    // on an http:// check is inert, not wrong, and may precede a move to https.
    let tls = tls(cx, raw.tls.as_ref(), defaults);
    let alert = alert(cx, raw.alert.as_ref());
    // The one place a kind's own keys are read: adding a kind is one arm.
    // Without a known kind its own keys cannot be judged; the common keys
    // above have been, so their problems are already reported.
    let kind_name = kind_name?;
    keys::foreign_keys(cx, d, kind_name);
    let kind = match kind_name {
        KindName::Http => CheckKind::Http(http(cx, raw)),
        KindName::Cors => {
            if let (Some(url), Some(raw_url)) = (&url, &raw.url) {
                if !url.username().is_empty() || url.password().is_some() {
                    let message = "a cors check sends no credentials (a browser's preflight carries none): remove the user:password@ part";
                    cx.error(&raw_url.span(), "url", message.to_string());
                }
            }
            CheckKind::Cors(cors(cx, d, &context)?)
        }
        KindName::Dns => CheckKind::Dns(dns::dns(cx, d, &context)?),
        KindName::Upload => CheckKind::Upload(upload::upload(cx, d, url.as_ref(), &context)?),
        KindName::Tls => {
            let (tls, own_url) = tls_kinds::tls_port(cx, d, &context)?;
            url = Some(own_url);
            CheckKind::Tls(tls)
        }
        KindName::Smtp => {
            let (smtp, own_url) = tls_kinds::smtp(cx, d, &context)?;
            url = Some(own_url);
            CheckKind::Smtp(smtp)
        }
        KindName::Domain => {
            let (domain, own_url) = domain::domain(cx, d, &context)?;
            url = Some(own_url);
            CheckKind::Domain(domain)
        }
    };
    let url = match &kind {
        CheckKind::Dns(dns) => dns::dns_url(&dns.query),
        _ => url,
    };
    Some(Check {
        name: name?,
        url: url?,
        resolve,
        every,
        timeout,
        labels,
        tls,
        alert,
        kind,
    })
}

/// A valid, unique name. The second definition is the one reported, with
/// the position of the first, since files are read in name order and the
/// first one is usually the established check.
fn check_name(cx: &mut Cx<'_>, name: &Spanned<String>, names: &mut Names) -> Option<String> {
    let value = name.get_ref();
    if value.is_empty() || !value.chars().all(is_name_char) {
        let message =
            format!("{value:?} is not a valid check name (use only a-z, 0-9, '.', '_' and '-')");
        cx.error(&name.span(), "name", message);
        return None;
    }
    let here = cx.location(&name.span());
    if let Some(first) = names.first.get(value) {
        let message = format!("duplicate check name {value:?} (first defined at {first})");
        cx.report(&name.span(), message);
        return None;
    }
    names.first.insert(value.clone(), here);
    Some(value.clone())
}

pub(super) fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
}

/// The kind's name is parsed by [`KindName`]'s own serde names, so the list
/// of kinds lives in one place (`check.rs`) and the error lists it.
fn kind_name(cx: &mut Cx<'_>, kind: &Spanned<String>) -> Option<KindName> {
    let parsed = KindName::deserialize(StrDeserializer::<ValueError>::new(kind.get_ref()));
    parsed
        .map_err(|e| {
            // "unknown variant `htp`, expected `http`": the first quoted word
            // is what was written, the others are the kinds.
            let known: Vec<String> = backticked(&e.to_string()).into_iter().skip(1).collect();
            let message = format!(
                "unknown kind {:?} (known kinds: {})",
                kind.get_ref(),
                known.join(", ")
            );
            cx.error(&kind.span(), "kind", message);
        })
        .ok()
}

/// `every` or `schedule`, at most one of them; every minute by default.
fn cadence(cx: &mut Cx<'_>, raw: &RawCheck) -> Cadence {
    let fallback = Cadence::Every(DEFAULT_EVERY);
    match (&raw.every, &raw.schedule) {
        (Some(every), Some(schedule)) => {
            // Point at whichever comes second in the file.
            let (key, span) = match every.span().start > schedule.span().start {
                true => ("every", every.span()),
                false => ("schedule", schedule.span()),
            };
            cx.error(
                &span,
                key,
                "`every` and `schedule` are both set; a check has one or the other",
            );
            fallback
        }
        (Some(every), None) => cx
            .duration_within("every", every, MIN_INTERVAL, MAX_EVERY)
            .map_or(fallback, Cadence::Every),
        (None, Some(schedule)) => cx
            .cron("schedule", schedule)
            .map_or(fallback, |s| Cadence::Cron(Box::new(s))),
        (None, None) => fallback,
    }
}

/// Label names follow the Prometheus rules so they can be exported as
/// metric labels without mangling.
fn labels(
    cx: &mut Cx<'_>,
    raw: Option<&BTreeMap<Spanned<String>, Spanned<String>>>,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for (key, value) in raw.into_iter().flatten() {
        let name = key.get_ref();
        let mut chars = name.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            let message = "label names must match [a-zA-Z_][a-zA-Z0-9_]* (Prometheus label rules)";
            cx.error(
                &key.span(),
                &format!("labels.{}", key_as_written(name)),
                message,
            );
            continue;
        }
        labels.insert(name.clone(), value.get_ref().clone());
    }
    labels
}

/// `[check.tls]`. `warn_days` at or below `critical_days` is rejected
/// rather than ignored: the certificate would go straight from up to down,
/// skipping the early warning the user asked for.
fn tls(cx: &mut Cx<'_>, raw: Option<&RawTls>, defaults: &CheckDefaults) -> TlsExpect {
    let Some(raw) = raw else {
        return TlsExpect {
            acme_directory: defaults.acme_directory.clone(),
            ..TlsExpect::default()
        };
    };
    let critical_days = raw
        .critical_days
        .as_ref()
        .map_or(DEFAULT_CRITICAL_DAYS, |c| *c.get_ref());
    let warn_days = raw.warn_days.as_ref().and_then(|warn| {
        if *warn.get_ref() > critical_days {
            return Some(*warn.get_ref());
        }
        let whose = match raw.critical_days {
            Some(_) => "",
            None => ", the default",
        };
        let message = format!(
            "{} is not more than `tls.critical_days` ({critical_days}{whose}), so the warning would never fire",
            warn.get_ref()
        );
        cx.error(&warn.span(), "tls.warn_days", message);
        None
    });
    TlsExpect {
        warn_days,
        critical_days,
        issuer: raw.issuer.as_ref().and_then(|i| cx.regex("tls.issuer", i)),
        ca_file: raw.ca_file.as_ref().and_then(|f| cx.file("tls.ca_file", f)),
        ari: raw.ari.as_ref().map(|a| *a.get_ref()),
        acme_directory: match &raw.acme_directory {
            Some(url) => cx.web_url("tls.acme_directory", url),
            None => defaults.acme_directory.clone(),
        },
        ari_grace: cx.duration_or(
            "tls.ari_grace",
            raw.ari_grace.as_ref(),
            DEFAULT_ARI_GRACE,
            Duration::ZERO,
            MAX_ARI_GRACE,
        ),
        revocation: raw.revocation.as_ref().is_none_or(|r| *r.get_ref()),
        require_pq: raw.require_pq.as_ref().is_some_and(|r| *r.get_ref()),
    }
}

/// `[check.alert]`. `repeat = "0s"` turns reminders off for this check.
fn alert(cx: &mut Cx<'_>, raw: Option<&RawCheckAlert>) -> AlertOverrides {
    let Some(raw) = raw else {
        return AlertOverrides::default();
    };
    let threshold = |cx: &mut Cx<'_>, key: &str, value: Option<&Spanned<u32>>| {
        let value = value?;
        if *value.get_ref() == 0 {
            cx.error(&value.span(), key, "must be at least 1");
            return None;
        }
        Some(*value.get_ref())
    };
    AlertOverrides {
        failure_threshold: threshold(
            cx,
            "alert.failure_threshold",
            raw.failure_threshold.as_ref(),
        ),
        recovery_threshold: threshold(
            cx,
            "alert.recovery_threshold",
            raw.recovery_threshold.as_ref(),
        ),
        repeat: raw
            .repeat
            .as_ref()
            .and_then(|r| cx.duration_within("alert.repeat", r, Duration::ZERO, MAX_REPEAT)),
        to: raw.to.as_ref().map(|to| {
            let paged = raw.page.as_ref().is_none_or(|p| *p.get_ref());
            if to.get_ref().is_empty() && paged {
                cx.error(
                    &to.span(),
                    "alert.to",
                    "an empty list pages nobody: leave it out to page `[alerting] to`, or set `alert.page = false`",
                );
            }
            cx.mailboxes("alert.to", Some(to.get_ref()))
        }),
        page: raw.page.as_ref().map(|p| *p.get_ref()),
    }
}

/// The keys of an http check. Redirects are followed by default, as a
/// browser would; `follow_redirects = false` checks the redirect itself.
/// Redirects stay on global addresses unless `redirect_to_private` says
/// otherwise (see `probe::address`).
fn http(cx: &mut Cx<'_>, raw: &RawCheck) -> HttpCheck {
    HttpCheck {
        follow_redirects: raw.follow_redirects.as_ref().is_none_or(|f| *f.get_ref()),
        redirect_to_private: raw
            .redirect_to_private
            .as_ref()
            .is_some_and(|f| *f.get_ref()),
        redact_headers: redact_headers(cx, raw.redact_headers.as_deref()),
        expect: raw
            .expect
            .as_ref()
            .map(|e| expect(cx, e))
            .unwrap_or_default(),
    }
}

/// `redact_headers`: header names, compared case-insensitively (a
/// `HeaderName` is lower-case). A name that is not a valid header name
/// could never match, so it is a typo worth reporting.
fn redact_headers(cx: &mut Cx<'_>, raw: Option<&[Spanned<String>]>) -> Vec<HeaderName> {
    let mut names = Vec::new();
    for (i, name) in raw.into_iter().flatten().enumerate() {
        match HeaderName::from_str(name.get_ref()) {
            Ok(header) => names.push(header),
            Err(_) => {
                let message = format!(
                    "{:?} is not a valid HTTP header name (write it as sent, e.g. \"x-api-key\")",
                    name.get_ref()
                );
                cx.error(&name.span(), &format!("redact_headers[{i}]"), message);
            }
        }
    }
    names
}

/// `[check.expect]`. Status codes outside 100..=599 cannot be returned by
/// a server, so expecting one is a typo; header names are validated here
/// because an invalid name could never match a response header.
fn expect(cx: &mut Cx<'_>, raw: &RawExpect) -> HttpExpect {
    let mut status = Vec::new();
    for (i, code) in raw.status.iter().flatten().enumerate() {
        if (100..=599).contains(code.get_ref()) {
            status.push(*code.get_ref());
        } else {
            let message = format!("{} is not an HTTP status code (100 to 599)", code.get_ref());
            cx.error(&code.span(), &format!("expect.status[{i}]"), message);
        }
    }
    let mut headers = Vec::new();
    for (name, pattern) in raw.headers.iter().flatten() {
        let key = format!("expect.headers.{}", key_as_written(name.get_ref()));
        let header = HeaderName::from_str(name.get_ref()).ok();
        if header.is_none() {
            let message = format!("{:?} is not a valid HTTP header name", name.get_ref());
            cx.error(&name.span(), &key, message);
        }
        if let (Some(header), Some(regex)) = (header, cx.regex(&key, pattern)) {
            headers.push((header, regex));
        }
    }
    HttpExpect {
        status,
        body_contains: raw.body_contains.as_ref().map(|b| b.get_ref().clone()),
        body_regex: raw
            .body_regex
            .as_ref()
            .and_then(|r| cx.regex("expect.body_regex", r)),
        max_response_time: raw.max_response_time.as_ref().and_then(|t| {
            cx.duration_within("expect.max_response_time", t, MIN_POSITIVE, MAX_TIMEOUT)
        }),
        headers,
    }
}

/// Methods browsers send as they are written; `put` and `PUT` differ in a
/// preflight, so the method is kept exactly as configured.
const DEFAULT_CORS_METHOD: &str = "PUT";

/// The keys of a cors check. `origin` is required: there is no sensible
/// default for "the page that uploads".
fn cors(cx: &mut Cx<'_>, d: &Decoded<RawCheck>, context: &str) -> Option<CorsCheck> {
    let raw = &d.value;
    let origin = cx
        .required(d, "origin", raw.origin.as_ref(), context)
        .and_then(|o| parse_origin(cx, "origin", o));
    let method = match &raw.method {
        Some(m) if http::Method::from_bytes(m.get_ref().as_bytes()).is_err() => {
            let message = format!("{:?} is not a valid HTTP method", m.get_ref());
            cx.error(&m.span(), "method", message);
            None
        }
        Some(m) => Some(m.get_ref().clone()),
        None => Some(DEFAULT_CORS_METHOD.to_string()),
    };
    let request_headers = header_names(cx, "request_headers", raw.request_headers.as_deref());
    let expose_headers = header_names(cx, "expose_headers", raw.expose_headers.as_deref());
    let mut deny_origins = Vec::new();
    for (i, o) in raw.deny_origins.iter().flatten().enumerate() {
        let key = format!("deny_origins[{i}]");
        let Some(denied) = parse_origin(cx, &key, o) else {
            continue;
        };
        if origin.as_deref() == Some(denied.as_str()) {
            cx.error(
                &o.span(),
                &key,
                "is the check's own `origin`: it cannot be both admitted and denied",
            );
            continue;
        }
        deny_origins.push(denied);
    }
    let min_max_age = raw
        .min_max_age
        .as_ref()
        .and_then(|t| cx.duration_within("min_max_age", t, MIN_INTERVAL, MAX_MIN_MAX_AGE));
    Some(CorsCheck {
        origin: origin?,
        method: method?,
        request_headers,
        deny_origins,
        allow_any_origin: raw.allow_any_origin.as_ref().is_some_and(|v| *v.get_ref()),
        credentials: raw.credentials.as_ref().is_some_and(|v| *v.get_ref()),
        min_max_age,
        expose_headers,
    })
}
