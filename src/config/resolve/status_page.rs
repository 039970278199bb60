//! `[status_page]` and `[[announcement]]`: what the public page at
//! `/status` shows. Only choices of what to show live here; what it never
//! shows (targets, URLs, failure details) is not configurable.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use toml::Spanned;

use super::super::decode::{Decoded, RawConfig};
use super::super::error::Diagnostics;
use super::super::raw::{RawAnnouncement, RawStatusPage};
use super::super::source::Source;
use super::super::{glob_match, Announcement, StatusPageConfig};
use super::check_pattern;
use super::cx::Cx;
use crate::check::Check;

/// The longest announcement text, in bytes (8 KiB, an incident update's
/// bound too): it lands on a public page.
const MAX_ANNOUNCEMENT: usize = 8 * 1024;

/// `[status_page]`, or its defaults (not public) when absent.
pub(super) fn status_page(
    cx: &mut Cx<'_>,
    decoded: Option<&Decoded<RawStatusPage>>,
) -> StatusPageConfig {
    let defaults = StatusPageConfig::default();
    let Some(raw) = decoded.map(|d| &d.value) else {
        return defaults;
    };
    let checks = match &raw.checks {
        Some(patterns) if patterns.get_ref().is_empty() => {
            let message = "names no check: list globs such as \"web-*\", or leave the key out to show every check";
            cx.error(&patterns.span(), "checks", message);
            defaults.checks.clone()
        }
        Some(patterns) => {
            let patterns = patterns.get_ref();
            for (i, p) in patterns.iter().enumerate() {
                check_pattern(cx, i, p);
            }
            patterns.iter().map(|p| p.get_ref().clone()).collect()
        }
        None => defaults.checks.clone(),
    };
    let title = match &raw.title {
        Some(title) if title.get_ref().trim().is_empty() => {
            cx.error(
                &title.span(),
                "title",
                "is empty: name the service the page is about",
            );
            defaults.title.clone()
        }
        Some(title) => title.get_ref().trim().to_string(),
        None => defaults.title.clone(),
    };
    StatusPageConfig {
        public: raw.public.as_ref().is_some_and(|p| *p.get_ref()),
        title,
        groups: raw
            .groups
            .as_ref()
            .and_then(|g| label_key(cx, "groups", g))
            .unwrap_or(defaults.groups),
        checks,
        public_labels: raw
            .public_labels
            .as_ref()
            .map(|keys| {
                keys.get_ref()
                    .iter()
                    .enumerate()
                    .filter_map(|(i, k)| label_key(cx, &format!("public_labels[{i}]"), k))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A label key as checks write them (`env`, `team`).
fn label_key(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>) -> Option<String> {
    let text = value.get_ref();
    let ok = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        let message = format!("{text:?} is not a label key (letters, digits, '_', '-', '.')");
        cx.error(&value.span(), key, message);
        return None;
    }
    Some(text.clone())
}

/// One `[[announcement]]`: every key is required, and it must end after it
/// begins.
pub(super) fn announcement(cx: &mut Cx<'_>, d: &Decoded<RawAnnouncement>) -> Option<Announcement> {
    let raw = &d.value;
    let title = cx
        .required(d, "title", raw.title.as_ref(), "")
        .and_then(|t| non_empty(cx, "title", t));
    let text = cx
        .required(d, "text", raw.text.as_ref(), " (Markdown)")
        .and_then(|t| non_empty(cx, "text", t))
        .filter(|t| {
            if t.len() <= MAX_ANNOUNCEMENT {
                return true;
            }
            let message = format!(
                "is {} bytes, more than the {MAX_ANNOUNCEMENT} allowed: link to a longer write-up instead",
                t.len()
            );
            cx.error(&raw.text.as_ref().map_or(d.span.clone(), |t| t.span()), "text", message);
            false
        });
    let from = cx
        .required(
            d,
            "from",
            raw.from.as_ref(),
            " (e.g. \"2026-12-07T18:00:00Z\")",
        )
        .and_then(|t| instant(cx, "from", t));
    let until = cx
        .required(
            d,
            "until",
            raw.until.as_ref(),
            " (e.g. \"2026-12-07T20:00:00Z\")",
        )
        .and_then(|t| instant(cx, "until", t));
    if let (Some(from), Some(until), Some(written)) = (from, until, raw.until.as_ref()) {
        if until <= from {
            let message = format!(
                "{} is not after `from` ({}): the announcement would never show",
                written.get_ref(),
                crate::when::minute(from)
            );
            cx.error(&written.span(), "until", message);
            return None;
        }
    }
    Some(Announcement {
        title: title?,
        text: text?,
        from: from?,
        until: until?,
    })
}

fn non_empty(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>) -> Option<String> {
    let text = value.get_ref().trim();
    if text.is_empty() {
        cx.error(&value.span(), key, "is empty");
        return None;
    }
    Some(text.to_string())
}

/// An RFC 3339 time with its offset, as a quoted string.
fn instant(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>) -> Option<OffsetDateTime> {
    match OffsetDateTime::parse(value.get_ref(), &Rfc3339) {
        Ok(at) => Some(at),
        Err(_) => {
            let message = format!(
                "{:?} is not a time: write it as RFC 3339 with its offset, e.g. \"2026-12-07T18:00:00Z\"",
                value.get_ref()
            );
            cx.error(&value.span(), key, message);
            None
        }
    }
}

/// Warns of each `[status_page] checks` pattern that matches no loaded
/// check: a typo there hides a check from the public page silently.
pub(crate) fn warn_unmatched(
    src: &Source,
    raw: &RawConfig,
    checks: &[Check],
    diag: &mut Diagnostics,
) {
    let Some(patterns) = raw
        .status_page
        .as_ref()
        .and_then(|d| d.value.checks.as_ref())
    else {
        return;
    };
    for (i, pattern) in patterns.get_ref().iter().enumerate() {
        if !checks
            .iter()
            .any(|c| glob_match(pattern.get_ref(), &c.name))
        {
            let message = format!(
                "`status_page.checks[{i}]`: {:?} matches no check, so it shows nothing on /status",
                pattern.get_ref()
            );
            diag.warn_at(src, &pattern.span(), message);
        }
    }
}
