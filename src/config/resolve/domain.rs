//! The keys of `kind = "domain"` checks: the registered name, the RDAP
//! server to ask instead of the bootstrap's, and `[check.rdap]`.
//!
//! The thresholds table is `[check.rdap]`, named after the protocol whose
//! answers it judges as `[check.tls]` is: `[check.domain]` cannot be, since
//! TOML would read it as a second value of the check's `domain` key.

use std::net::IpAddr;

use url::Url;

use super::cx::Cx;
use super::dns::domain_name;
use crate::check::{
    DomainCheck, DomainRules, DEFAULT_CRITICAL_DAYS, DEFAULT_DOMAIN_WARN_DAYS,
    DEFAULT_RDAP_QUERY_EVERY,
};
use crate::config::decode::Decoded;
use crate::config::limits::{MAX_RDAP_QUERY_EVERY, MIN_RDAP_QUERY_EVERY};
use crate::config::raw::{RawCheck, RawRdap};

/// The URL a domain check stands for: `domain:<name>`. Never fetched; it
/// names the check's target in outcomes.
pub(super) fn domain_url(name: &str) -> Option<Url> {
    Url::parse(&format!("domain:{name}")).ok()
}

/// `domain`, `rdap_url` and `[check.rdap]` of a domain check, and the URL
/// outcomes show as its target.
pub(super) fn domain(
    cx: &mut Cx<'_>,
    d: &Decoded<RawCheck>,
    context: &str,
) -> Option<(DomainCheck, Url)> {
    let raw = &d.value;
    let name = cx
        .required(d, "domain", raw.domain.as_ref(), context)
        .and_then(|value| {
            let name = domain_name(cx, "domain", value, false)?;
            let problem = if name.parse::<IpAddr>().is_ok() {
                Some(format!(
                    "{:?} is an IP address: write the registered domain name, e.g. \"example.com\"",
                    value.get_ref()
                ))
            } else if !name.contains('.') {
                Some(format!(
                    "{:?} is a TLD: write the registered domain name, e.g. \"example.com\"",
                    value.get_ref()
                ))
            } else {
                None
            };
            match problem {
                Some(problem) => {
                    cx.error(&value.span(), "domain", problem);
                    None
                }
                None => Some(name),
            }
        });
    let rdap_url = raw.rdap_url.as_ref().and_then(|value| {
        let url = cx.web_url("rdap_url", value)?;
        if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
            let message = "is the RDAP server's base URL, such as \"https://rdap.nic.example/\" (vigie appends domain/NAME): no user:password@ and no ?query";
            cx.error(&value.span(), "rdap_url", message);
            return None;
        }
        Some(DomainCheck::base(url))
    });
    let rules = rules(cx, raw.rdap.as_ref());
    let name = name?;
    let url = domain_url(&name)?;
    Some((
        DomainCheck {
            domain: name,
            rdap_url: if raw.rdap_url.is_some() {
                Some(rdap_url?)
            } else {
                None
            },
            rules,
        },
        url,
    ))
}

/// `[check.rdap]`. As in `[check.tls]`, `warn_days` at or below
/// `critical_days` is refused: the domain would go from up to down
/// without the warning.
fn rules(cx: &mut Cx<'_>, raw: Option<&RawRdap>) -> DomainRules {
    let Some(raw) = raw else {
        return DomainRules::default();
    };
    let critical_days = raw
        .critical_days
        .as_ref()
        .map_or(DEFAULT_CRITICAL_DAYS, |c| *c.get_ref());
    let warn_days = match &raw.warn_days {
        Some(warn) if *warn.get_ref() <= critical_days => {
            let whose = match raw.critical_days {
                Some(_) => "",
                None => ", the default",
            };
            let message = format!(
                "{} is not more than `rdap.critical_days` ({critical_days}{whose}), so the warning would never fire",
                warn.get_ref()
            );
            cx.error(&warn.span(), "rdap.warn_days", message);
            DEFAULT_DOMAIN_WARN_DAYS.max(critical_days + 1)
        }
        Some(warn) => *warn.get_ref(),
        None if critical_days >= DEFAULT_DOMAIN_WARN_DAYS => {
            if let Some(critical) = &raw.critical_days {
                let message = format!(
                    "{critical_days} is not less than `rdap.warn_days` ({DEFAULT_DOMAIN_WARN_DAYS}, the default): set warn_days above it"
                );
                cx.error(&critical.span(), "rdap.critical_days", message);
            }
            critical_days + 1
        }
        None => DEFAULT_DOMAIN_WARN_DAYS,
    };
    DomainRules {
        warn_days,
        critical_days,
        query_every: cx.duration_or(
            "rdap.query_every",
            raw.query_every.as_ref(),
            DEFAULT_RDAP_QUERY_EVERY,
            MIN_RDAP_QUERY_EVERY,
            MAX_RDAP_QUERY_EVERY,
        ),
    }
}
