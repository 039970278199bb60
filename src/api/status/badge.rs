//! `/status/badge/{name}.svg`: a shields.io-style flat badge, the check's
//! name on the left and its status word (or, with `?show=uptime`, its
//! 30-day uptime) on the right. Plain SVG with attributes only (no style,
//! no script, no font file), so it draws in any `<img>`.

use super::super::pages::view::percent;
use super::view::{PublicCheck, Word};

/// What a badge shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    Status,
    Uptime,
}

/// The badge of `check`.
pub fn badge(check: &PublicCheck, show: Show) -> String {
    let (value, colour) = match show {
        Show::Status => (check.word.text().to_string(), check.word.colour()),
        Show::Uptime => match check.uptime_30d {
            Some(u) => (format!("{} 30d", percent(u)), uptime_colour(u)),
            None => ("no data".to_string(), Word::NoData.colour()),
        },
    };
    svg(&check.name, &value, colour)
}

/// Shields' thresholds, tightened for a service: green from 99.9 %.
fn uptime_colour(share: f64) -> &'static str {
    match share {
        s if s >= 0.999 => Word::Operational.colour(),
        s if s >= 0.99 => Word::Degraded.colour(),
        _ => Word::Down.colour(),
    }
}

/// Verdana 11 px averages about 6.5 px a character: widths need not be
/// exact, only wide enough.
fn width(text: &str) -> usize {
    text.chars().count() * 13 / 2 + 10
}

fn svg(label: &str, value: &str, colour: &str) -> String {
    let (left, right) = (width(label), width(value));
    let total = left + right;
    let label = escape(label);
    let value = escape(value);
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="20" role="img" aria-label="{label}: {value}"><title>{label}: {value}</title><rect width="{left}" height="20" fill="#555"/><rect x="{left}" width="{right}" height="20" fill="{colour}"/><g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11"><text x="{lx}" y="14">{label}</text><text x="{rx}" y="14">{value}</text></g></svg>"##,
        lx = left / 2,
        rx = left + right / 2,
    )
}

fn escape(text: &str) -> String {
    quick_xml::escape::escape(text).into_owned()
}
