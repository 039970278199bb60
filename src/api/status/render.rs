//! The public page's HTML (maud, every value escaped by construction).
//! It reads with no script: the day bar's figures are in each day's
//! `title`, and the page links only vigie's own stylesheet and icon, so
//! the operator pages' Content-Security-Policy holds unchanged.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use time::OffsetDateTime;

use super::super::pages::build::window_labels;
use super::super::pages::view::{clock, days_left, percent, DayCell};
use super::view::{Notice, PublicCheck, PublicIncident, PublicStatus, Word};
use crate::when::minute;

/// `/status`, whole.
pub fn page(status: &PublicStatus) -> Markup {
    let now = status.now;
    let overall = status.overall();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (status.title) }
                link rel="stylesheet" href="/assets/vigie.css";
                link rel="icon" type="image/svg+xml" href="/assets/favicon.svg";
                link rel="alternate" type="application/atom+xml" title="Incidents" href="/status/feed.atom";
            }
            body.public {
                header { span.brand { (status.title) } }
                main {
                    p class=(format!("overall {}", overall.class())) { (overall_words(overall)) }
                    @for notice in &status.notices { (notice_markup(notice, now)) }
                    @if status.groups.is_empty() { p.empty { "No services are listed yet." } }
                    @for group in &status.groups {
                        section.group {
                            h2 { (group.title) }
                            ul.checks {
                                @for check in &group.checks { li.check { (check_markup(check, now)) } }
                            }
                        }
                    }
                    section.incidents {
                        h2 { "Incidents" }
                        @if status.incidents.is_empty() {
                            p.empty { "No incidents in the last 7 days." }
                        }
                        @for incident in &status.incidents { (incident_markup(incident, now)) }
                    }
                }
                footer {
                    p.muted {
                        "Updated " (clock(now, now)) ". "
                        a href="/status/feed.atom" { "Incident feed (Atom)" }
                    }
                }
            }
        }
    }
}

fn overall_words(word: Word) -> &'static str {
    match word {
        Word::Operational => "All systems operational",
        Word::Degraded => "Some systems degraded",
        Word::Down => "Some systems down",
        Word::NoData => "No data yet",
    }
}

fn notice_markup(notice: &Notice, now: OffsetDateTime) -> Markup {
    let class = match notice.html {
        Some(_) => "notice announcement",
        None => "notice maintenance",
    };
    html! {
        section class=(class) {
            h2 { (notice.title) }
            p.when {
                @if notice.from <= now { "until " (clock(notice.until, now)) }
                @else { (clock(notice.from, now)) " to " (clock(notice.until, now)) }
            }
            @if let Some(text) = &notice.html { div.text { (PreEscaped(text)) } }
        }
    }
}

fn check_markup(check: &PublicCheck, now: OffsetDateTime) -> Markup {
    let today = now.date();
    let [label_24h, label_30d, label_90d] = window_labels(check.history_from, now);
    html! {
        div.head {
            span class=(format!("status {}", check.word.class())) { (check.word.text()) }
            span.name { (check.name) }
            @if check.maintenance { span.holdbadge { "MAINTENANCE" } }
            @for (key, value) in &check.labels { span.labelchip { (key) "=" (value) } }
        }
        div.bar role="img" aria-label=(format!("daily uptime of {} over the last {} days", check.name, check.days.len())) {
            // Only days with something to say carry their figures: at
            // 1,000 checks a title on each of the 90 days would triple the
            // page.
            @for day in &check.days {
                @match day.tone() {
                    tone @ ("good" | "none") => i class=(tone) {},
                    tone => i class=(tone) title=(day_title(day, today)) {},
                }
            }
        }
        // Each figure with its heading in one box, so a narrow screen
        // wraps between figures, never inside one.
        dl.figures.pairs {
            div { dt { (label_24h) } dd { (share(check.uptime_24h)) } }
            // Windows that say the same thing (a young history) are
            // shown once.
            @if label_30d != label_24h { div { dt { (label_30d) } dd { (share(check.uptime_30d)) } } }
            @if label_90d != label_30d { div { dt { (label_90d) } dd { (share(check.uptime_90d)) } } }
            @if let Some(days) = check.cert_days_left {
                div {
                    dt { "certificate" }
                    dd class=(if days < 7 { "bad" } else { "" }) { (days_left(days)) }
                }
            }
        }
    }
}

/// A day's figures for its tooltip: the date and its uptime.
fn day_title(day: &DayCell, today: time::Date) -> String {
    let date = match day.date == today {
        true => "today".to_string(),
        false => day.date.to_string(),
    };
    match day.uptime() {
        Some(u) => format!("{date}: {} up", percent(u)),
        None => format!("{date}: no data"),
    }
}

fn share(value: Option<f64>) -> Markup {
    html! {
        @match value {
            Some(v) => (percent(v)),
            None => span.muted { "–" },
        }
    }
}

fn incident_markup(incident: &PublicIncident, now: OffsetDateTime) -> Markup {
    html! {
        article class=(if incident.end.is_none() { "incident open" } else { "incident" }) {
            h3 {
                (incident.check) " "
                @match incident.end {
                    None => span.status.down { "ongoing" },
                    Some(_) => span.status.up { "resolved" },
                }
            }
            p.when {
                "from " (minute(incident.start))
                @if let Some(end) = incident.end { " to " (clock(end, now)) }
            }
            @for update in incident.updates.iter().rev() {
                div.update {
                    p.when { strong { (update.state.as_str()) } " · " (clock(update.at, now)) }
                    div.text { (PreEscaped(&update.html)) }
                }
            }
        }
    }
}
