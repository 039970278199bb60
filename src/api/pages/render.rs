//! The pages' HTML (maud: checked at compile time, every value escaped by
//! construction). One function per page, one layout around them.
//!
//! The layout links one stylesheet and one small script, both served by
//! vigie (`/assets/...`): no CDN, no font, nothing from another origin,
//! which the Content-Security-Policy enforces. Everything that changes
//! lives in `<main>`, which the script swaps in place on refresh.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use time::OffsetDateTime;

use super::build::window_labels;
use super::chart;
use super::view::{
    clock, days_left, hold_words, percent, status_word, CheckRow, FailureRow, Footer, Group,
    Incident, LeafBar, Point,
};
use crate::alert::{IncidentId, Silence};
use crate::incident_update::{IncidentUpdate, UpdateState};
use crate::when::{minute, span};

/// Which page the navigation marks as current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Check,
    Incidents,
}

/// What every page's `<head>` holds: the title, the stylesheet, the icon.
fn head_common(title: &str) -> Markup {
    html! {
        meta charset="utf-8";
        meta name="viewport" content="width=device-width, initial-scale=1";
        meta name="color-scheme" content="light dark";
        title { (title) " · vigie" }
        link rel="stylesheet" href="/assets/vigie.css";
        link rel="icon" type="image/svg+xml" href="/assets/favicon.svg";
    }
}

fn layout(title: &str, nav: Nav, footer: &Footer, main: Markup) -> Markup {
    layout_with(title, nav, footer, main, true)
}

/// The layout; `refresh`: whether the script swaps `<main>` every 30 s
/// (never under a form being written, which it would wipe).
fn layout_with(title: &str, nav: Nav, footer: &Footer, main: Markup, refresh: bool) -> Markup {
    let current = |n: Nav| if n == nav { "page" } else { "false" };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                (head_common(title))
                script src="/assets/vigie.js" defer {}
            }
            body {
                header {
                    a.brand href="/" { "vigie" }
                    nav {
                        a href="/" aria-current=(current(Nav::Overview)) { "Overview" }
                        a href="/incidents" aria-current=(current(Nav::Incidents)) { "Incidents" }
                    }
                }
                @if refresh { main data-refresh="30" { (main) } } @else { main { (main) } }
                footer { (footer_markup(footer)) }
            }
        }
    }
}

fn footer_markup(footer: &Footer) -> Markup {
    html! {
        ul.health {
            li class=(if footer.healthy { "ok" } else { "bad" }) {
                "vigie: " (footer.health)
            }
            @if let Some(lag) = &footer.replication_lag { li { "replication lag: " (lag) } }
            @if let Some(backlog) = footer.outbox_backlog { li { "outbox: " (backlog) " waiting" } }
            @if let Some(dead) = footer.dead_letters { li { "dead letters: " (dead) } }
            li { "last daily report: " (footer.last_report.as_deref().unwrap_or("none yet")) }
            li { "vigie " (footer.version) }
        }
    }
}

fn status_badge(status: Option<crate::outcome::Status>) -> Markup {
    let (word, symbol, class) = status_word(status);
    html! { span class=(format!("status {class}")) { span aria-hidden="true" { (symbol) } " " (word) } }
}

fn uptime_cell(share: Option<f64>) -> Markup {
    html! {
        @match share {
            Some(share) => (percent(share)),
            None => span.muted { "–" },
        }
    }
}

/// `/`: every check, grouped.
pub fn overview(groups: &[Group], now: OffsetDateTime, footer: &Footer) -> Markup {
    let main = html! {
        h1 { "Overview" }
        @if groups.is_empty() { p.empty { "No checks configured." } }
        @for group in groups {
            section.group {
                h2 { (group.title) }
                ul.checks {
                    @for check in &group.checks {
                        li.check { (check_head(check)) (why(check, now)) (check_card(check, now)) }
                    }
                }
            }
        }
    };
    layout("Overview", Nav::Overview, footer, main)
}

fn check_head(check: &CheckRow) -> Markup {
    html! {
        div.head {
            (status_badge(check.status))
            a.name href=(format!("/checks/{}", check.name)) { (check.name) }
            (labels_and_time(check))
        }
    }
}

fn labels_and_time(check: &CheckRow) -> Markup {
    html! {
        @for (key, value) in &check.labels { span.labelchip { (key) "=" (value) } }
        @if let Some(ms) = check.response_ms { span.ms { (chart::format_ms(ms)) } }
        @if let Some(words) = &check.vantage { span.vantage title="not paged: the other vantages do not confirm it" { (words) } }
    }
}

/// What a card says besides its figures: the silence or window holding
/// its pages, why it is not UP (the first failure, a WARN's warning), or
/// when a check without a result is first probed.
fn why(check: &CheckRow, now: OffsetDateTime) -> Markup {
    html! {
        @if let Some(hold) = &check.hold {
            @let (badge, words) = hold_words(hold, now);
            p.hold { span.holdbadge { (badge) } " " (words) }
        }
        @if let Some(reason) = &check.reason {
            p class=(format!("reason {}", status_word(check.status).2)) { (reason) }
        }
        @if check.status.is_none() {
            p.reason.none {
                @match check.first_probe {
                    Some(at) => { "first probe at " (clock(at, now)) }
                    None => "no result yet",
                }
            }
        }
    }
}

/// The bar and the figures (the overview puts a head above them). A
/// figure over a window longer than the history is headed "since ...".
fn check_card(check: &CheckRow, now: OffsetDateTime) -> Markup {
    let [label_24h, label_30d, label_90d] = window_labels(check.history_from, now);
    html! {
        (chart::uptime_bar(&check.name, &check.days))
        dl.figures {
            dt { (label_24h) } dd { (uptime_cell(check.uptime_24h)) }
            // Windows that say the same thing are shown once.
            @if label_30d != label_24h { dt { (label_30d) } dd { (uptime_cell(check.uptime_30d)) } }
            @if label_90d != label_30d { dt { (label_90d) } dd { (uptime_cell(check.uptime_90d)) } }
            @if let Some(cert) = &check.certificate {
                dt { "certificate" }
                dd class=(if cert.staging || cert.days_left < 7 { "bad" } else { "" }) {
                    (days_left(cert.days_left)) ", " (cert.issuer)
                    @if cert.staging { strong.flag { " STAGING issuer: browsers do not trust it" } }
                }
                @if let Some(group) = &cert.key_exchange {
                    dt { "key exchange" }
                    dd { (group) }
                }
            }
        }
    }
}

/// The time ranges of a check's response-time chart.
pub const RANGES: [(&str, &str); 4] = [
    ("24h", "24 h"),
    ("7d", "7 d"),
    ("30d", "30 d"),
    ("90d", "90 d"),
];

/// What `/checks/{name}` shows.
pub struct CheckPage<'a> {
    pub check: &'a CheckRow,
    pub target: Option<&'a str>,
    pub range: &'a str,
    pub from: OffsetDateTime,
    pub now: OffsetDateTime,
    pub series: Vec<(&'static str, Vec<Point>)>,
    pub failures: Vec<FailureRow>,
    /// The alerter's incidents, newest first.
    pub incidents: &'a [Incident],
    /// The streaks too short to page, newest first.
    pub blips: &'a [Incident],
    /// More streaks than listed (at most [`super::streaks::SHOWN`]).
    pub capped: bool,
    pub leaves: Vec<LeafBar>,
}

/// One leaf of the list under the timeline: the one served now reads
/// "served since ... (now)".
fn leaf_served(leaf: &LeafBar) -> String {
    match leaf.current {
        true => format!("served since {} (now)", minute(leaf.first_seen)),
        false => format!(
            "served {} to {}",
            minute(leaf.first_seen),
            minute(leaf.last_seen)
        ),
    }
}

/// `/checks/{name}`.
pub fn check_page(page: &CheckPage<'_>, footer: &Footer) -> Markup {
    let check = page.check;
    let main = html! {
        h1.head { (status_badge(check.status)) " " (check.name) " " (labels_and_time(check)) }
        @if let Some(target) = page.target { p.target { code { (target) } } }
        (why(check, page.now))
        (check_card(check, page.now))
        section {
            h2 { "Response time" }
            nav.ranges {
                @for (key, label) in RANGES {
                    a href=(format!("?range={key}")) aria-current=(if key == page.range { "page" } else { "false" }) { (label) }
                }
            }
            (chart::response_chart(&page.series, page.from, page.now))
            p.legend { span.key.p50 { "p50" } " " span.key.p95 { "p95" } " " span.key.max { "max" } }
        }
        section {
            h2 { "Latest probe" }
            @if page.failures.is_empty() { p { "No failure." } } @else {
                table {
                    thead { tr { th { "assertion" } th { "expected" } th { "observed" } th { "what happened" } } }
                    tbody {
                        @for f in &page.failures {
                            tr { td { code { (f.assertion) } } td { (f.expected) } td { (f.observed) } td { (f.message) } }
                        }
                    }
                }
            }
        }
        section {
            h2 { "Incidents" }
            (incident_table(page.incidents, page.capped, false, page.now))
        }
        section {
            h2 { "Blips" }
            (blip_list(page.blips, false, page.now))
        }
        section {
            h2 { "Certificate timeline" }
            (chart::certificate_timeline(&page.leaves, page.now))
            @if !page.leaves.is_empty() {
                ul.leaves {
                    @for leaf in &page.leaves {
                        li class=(if leaf.staging { "staging" } else { "" }) {
                            code { (leaf.sha256.get(..16).unwrap_or(&leaf.sha256)) } " "
                            (leaf.issuer)
                            @if leaf.staging { strong.flag { " STAGING" } }
                            ", valid to " (super::view::day(leaf.not_after))
                            ", " (leaf_served(leaf))
                        }
                    }
                }
            }
        }
    };
    layout(&check.name, Nav::Check, footer, main)
}

fn incident_table(
    incidents: &[Incident],
    capped: bool,
    with_check: bool,
    now: OffsetDateTime,
) -> Markup {
    html! {
        @if incidents.is_empty() { p { "None in the kept history." } } @else {
            @if capped { p.capped { (format!("First {} failures shown (the newest).", super::streaks::SHOWN)) } }
            table.incidents {
                thead { tr {
                    @if with_check { th { "check" } }
                    th { "start" } th { "end" } th { "duration" } th { "first failure" } th { "told" }
                } }
                @for i in incidents {
                    tbody.incident {
                        tr class=(if i.end.is_none() { "open" } else { "" }) {
                            @if with_check { td.name data-label="check" { a href=(format!("/checks/{}", i.check)) { (i.check) } } }
                            td data-label="start" { (incident_link(i, minute(i.start))) }
                            td data-label="end" { @match i.end { Some(end) => (minute(end)), None => strong { "open" } } }
                            td data-label="duration" { (span(i.end.unwrap_or(now) - i.start)) }
                            td data-label="first failure" { (i.cause) }
                            td.told { (told(&i.told)) }
                        }
                        tr.updates {
                            td colspan=(if with_check { 6 } else { 5 }) {
                                (updates(&i.updates))
                                @if let Some(key) = &i.key {
                                    a.write href=(incident_address(key.as_str())) { "Write an update" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The address of an incident's own page.
pub fn incident_address(key: &str) -> String {
    format!("/incidents/{key}")
}

/// Where an incident's page posts its form.
fn updates_address(key: &IncidentId) -> String {
    format!("/incidents/{key}/updates")
}

/// `text`, linked to the incident's page when it has one.
fn incident_link(incident: &Incident, text: String) -> Markup {
    html! {
        @match &incident.key {
            Some(key) => a href=(incident_address(key.as_str())) { (text) },
            None => (text),
        }
    }
}

/// An incident's updates, newest first as they are given, each with its
/// state, time and text. The text is the one piece of HTML not built
/// here: [`IncidentUpdate::html`], Markdown with raw HTML shown as text.
fn updates(list: &[IncidentUpdate]) -> Markup {
    html! {
        @if !list.is_empty() {
            ol.updates {
                @for u in list {
                    li {
                        p.said {
                            strong class=(format!("state {}", u.state)) { (u.state.as_str().to_uppercase()) }
                            " " span.when { (minute(u.at)) }
                        }
                        div.text { (PreEscaped(u.html())) }
                    }
                }
            }
        }
    }
}

/// The streaks that stayed under the check's failure threshold: one line
/// each, since nobody was paged and there is nothing to write about.
fn blip_list(blips: &[Incident], with_check: bool, now: OffsetDateTime) -> Markup {
    html! {
        @if blips.is_empty() { p { "None in the kept history." } } @else {
            p.muted { "Failure streaks shorter than the check's failure threshold: never paged." }
            ul.blips {
                @for b in blips {
                    li class=(if b.end.is_none() { "open" } else { "" }) {
                        @if with_check { a.name href=(format!("/checks/{}", b.check)) { (b.check) } " " }
                        span.when { (minute(b.start)) }
                        " · " (span(b.end.unwrap_or(now) - b.start))
                        " · " (b.downs) (if b.downs == 1 { " failed probe" } else { " failed probes" })
                        @if b.end.is_none() { " · " strong { "open" } }
                        " · " span.cause { (b.cause) }
                    }
                }
            }
        }
    }
}

/// Who was told about an incident and when, an event a line: "DOWN: mail
/// 19:36:31, phone 19:36:31". A delivery still waiting says "queued", one
/// given up says so with its reason.
fn told(entries: &[crate::store::Told]) -> Markup {
    let mut lines: Vec<(crate::alert::EventKind, Vec<String>)> = Vec::new();
    for entry in entries {
        let said = match (&entry.told_at, &entry.gave_up) {
            (Some(at), _) => format!("{} {}", entry.channel, crate::when::second(*at)),
            (None, Some(why)) => format!("{} given up ({why})", entry.channel),
            (None, None) => format!("{} queued", entry.channel),
        };
        match lines.last_mut() {
            Some((kind, said_so_far)) if *kind == entry.kind => said_so_far.push(said),
            _ => lines.push((entry.kind, vec![said])),
        }
    }
    html! {
        @if lines.is_empty() { span.none { "nobody (not paged)" } }
        @for (kind, said) in &lines {
            div { strong { (kind.word()) } ": " (said.join(", ")) }
        }
    }
}

/// A maintenance window, as `/incidents` lists it.
pub struct WindowRow {
    pub checks: String,
    pub start: OffsetDateTime,
    pub end: OffsetDateTime,
}

/// `/incidents`.
pub fn incidents_page(
    incidents: &[Incident],
    blips: &[Incident],
    capped: bool,
    silences: &[Silence],
    windows: &[WindowRow],
    now: OffsetDateTime,
    footer: &Footer,
) -> Markup {
    let main = html! {
        h1 { "Incidents" }
        section { h2 { "Open and recent" } (incident_table(incidents, capped, true, now)) }
        section { h2 { "Blips" } (blip_list(blips, true, now)) }
        section {
            h2 { "Silences in force" }
            @if silences.is_empty() { p { "None." } } @else {
                table { thead { tr { th { "checks" } th { "until" } th { "reason" } } }
                    tbody { @for s in silences { tr { td.name { code { (s.pattern) } } td { (minute(s.until)) } td { (s.reason) } } } } }
            }
        }
        section {
            h2 { "Maintenance windows, in force and coming" }
            @if windows.is_empty() { p { "None in the next 7 days." } } @else {
                table { thead { tr { th { "checks" } th { "from" } th { "to" } } }
                    tbody { @for w in windows {
                        tr class=(if w.start <= now { "open" } else { "" }) { td.name { code { (w.checks) } } td { (minute(w.start)) } td { (minute(w.end)) } }
                    } } }
            }
        }
    };
    layout("Incidents", Nav::Incidents, footer, main)
}

/// What the update form on an incident's page holds.
pub enum Form<'a> {
    /// A session may post: its anti-forgery token, and after a refusal
    /// the reason with what was written, kept.
    Open {
        csrf: &'a str,
        problem: Option<&'a str>,
        state: UpdateState,
        text: &'a str,
    },
    /// No token is configured, so no session: the page cannot write.
    Closed,
}

/// `/incidents/{key}`: one incident, its updates and the form that adds
/// one. Not refreshed: a refresh would wipe the text being written.
pub fn incident_page(
    incident: &Incident,
    form: &Form<'_>,
    now: OffsetDateTime,
    footer: &Footer,
) -> Markup {
    let title = format!("{} incident", incident.check);
    let main = html! {
        h1 { a href=(format!("/checks/{}", incident.check)) { (incident.check) } " incident" }
        dl.facts {
            dt { "start" } dd { (minute(incident.start)) }
            dt { "end" } dd { @match incident.end { Some(end) => (minute(end)), None => strong { "open" } } }
            dt { "duration" } dd { (span(incident.end.unwrap_or(now) - incident.start)) }
            dt { "first failure" } dd { (incident.cause) }
            dt { "told" } dd.told { (told(&incident.told)) }
        }
        section {
            h2 { "Updates" }
            @if incident.updates.is_empty() { p { "None yet." } }
            (updates(&incident.updates))
        }
        section {
            h2 { "Write an update" }
            @match form {
                Form::Open { csrf, problem, state, text } if incident.key.is_some() => {
                    form.update method="post" action=(incident.key.as_ref().map(updates_address).unwrap_or_default()) {
                        input type="hidden" name="csrf" value=(csrf);
                        label for="state" { "State" }
                        select #state name="state" {
                            @for s in UpdateState::ALL {
                                option value=(s.as_str()) selected[s == *state] { (s.as_str()) }
                            }
                        }
                        label for="text" { "What is known (Markdown)" }
                        textarea #text name="text" rows="6" required { (text) }
                        @if let Some(problem) = problem { p.bad role="alert" { (problem) } }
                        button type="submit" { "Post the update" }
                    }
                }
                _ => {
                    p {
                        "Writing from this page needs a login, hence [api] token_file. "
                        "On the daemon's machine: " code { "vigie incident note " (incident.check) " --state investigating TEXT" }
                    }
                }
            }
        }
    };
    layout_with(&title, Nav::Incidents, footer, main, false)
}

/// The 404 of an incident key that names none of the kept incidents.
pub fn no_such_incident(key: &str, footer: &Footer) -> Markup {
    let main = html! {
        h1 { "No such incident" }
        p {
            "No incident of the last 7 days has the key " code { (key) }
            " (a failure streak too short to page is a blip, and has no page)."
        }
        p { a href="/incidents" { "Back to the incidents" } }
    };
    layout("No such incident", Nav::Incidents, footer, main)
}

/// The 404 of a check the config does not name, in the layout, with a
/// way back.
pub fn not_found(name: &str, footer: &Footer) -> Markup {
    let main = html! {
        h1 { "No such check" }
        p { "The config names no check " code { (name) } "." }
        p { a href="/" { "Back to the overview" } }
    };
    layout("No such check", Nav::Check, footer, main)
}

/// `/login`: the token form, with what went wrong last time (a wrong
/// token, too many attempts, a body too large).
pub fn login(problem: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { (head_common("Log in")) }
            body.login {
                main {
                    h1 { "vigie" }
                    form method="post" action="/login" {
                        label for="token" { "API token (the content of [api] token_file)" }
                        input #token type="password" name="token" autocomplete="current-password" required;
                        button type="submit" { "Log in" }
                    }
                    @if let Some(problem) = problem { p.bad role="alert" { (problem) } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;
    use time::Duration;

    use super::*;
    use crate::alert::{Hold, HoldCause};
    use crate::outcome::Status;
    use crate::store::Told;

    const NOW: OffsetDateTime = datetime!(2026-12-07 19:00 UTC);

    fn row(status: Option<Status>) -> CheckRow {
        CheckRow::bare("web", status)
    }

    fn overview_of(check: CheckRow) -> String {
        let groups = [Group {
            title: "no env".into(),
            checks: vec![check],
        }];
        overview(&groups, NOW, &Footer::default()).into_string()
    }

    #[test]
    fn a_down_card_says_why_and_a_warn_card_its_warning() {
        let mut down = row(Some(Status::Down));
        down.reason = Some("HTTP 500, expected 200".into());
        let html = overview_of(down);
        assert!(
            html.contains(r#"<p class="reason down">HTTP 500, expected 200</p>"#),
            "{html}"
        );
        let mut warn = row(Some(Status::Warn));
        warn.reason = Some("renewal looks stuck".into());
        assert!(overview_of(warn).contains(r#"<p class="reason warn">renewal looks stuck</p>"#));
        assert!(!overview_of(row(Some(Status::Up))).contains("class=\"reason"));
    }

    #[test]
    fn a_check_without_a_result_says_when_it_is_first_probed() {
        let mut fresh = row(None);
        fresh.first_probe = Some(datetime!(2026-12-07 19:36 UTC));
        let html = overview_of(fresh);
        assert!(html.contains("NO DATA"), "{html}");
        assert!(html.contains("first probe at 19:36 UTC"), "{html}");
        assert!(overview_of(row(None)).contains("no result yet"));
    }

    #[test]
    fn a_silenced_check_shows_a_badge_naming_the_silence_and_its_end() {
        let mut held = row(Some(Status::Down));
        held.hold = Some(Hold {
            cause: HoldCause::Silence {
                pattern: "we*".into(),
                reason: "db migration".into(),
            },
            until: Some(datetime!(2026-12-07 21:30 UTC)),
        });
        let html = overview_of(held);
        assert!(
            html.contains(r#"<span class="holdbadge">SILENCED</span> silence we* until 21:30 UTC: db migration"#),
            "{html}"
        );
        assert!(!overview_of(row(Some(Status::Down))).contains("holdbadge"));
    }

    #[test]
    fn an_expired_certificate_on_a_card_reads_expired() {
        let mut expired = row(Some(Status::Down));
        expired.certificate = Some(super::super::view::CertSummary {
            days_left: -2,
            issuer: "CN=Test CA".into(),
            staging: false,
            key_exchange: None,
        });
        let html = overview_of(expired);
        assert!(html.contains("expired 2 days ago, CN=Test CA"), "{html}");
        assert!(!html.contains("-2 days"), "{html}");
        assert!(!html.contains("key exchange"), "{html}");
    }

    #[test]
    fn a_card_shows_the_negotiated_key_exchange_group() {
        let mut served = row(Some(Status::Up));
        served.certificate = Some(super::super::view::CertSummary {
            days_left: 60,
            issuer: "CN=Test CA".into(),
            staging: false,
            key_exchange: Some("X25519MLKEM768".into()),
        });
        let html = overview_of(served);
        assert!(
            html.contains("<dt>key exchange</dt><dd>X25519MLKEM768</dd>"),
            "{html}"
        );
    }

    #[test]
    fn uptime_windows_longer_than_the_history_say_since_when() {
        let mut young = row(Some(Status::Up));
        young.history_from = Some(datetime!(2026-12-07 18:36 UTC));
        young.uptime_24h = Some(1.0);
        let html = overview_of(young);
        assert!(html.contains("<dt>since 18:36 UTC</dt>"), "{html}");
        assert!(
            !html.contains("<dt>30 d</dt>") && !html.contains("<dt>90 d</dt>"),
            "{html}"
        );
        let mut older = row(Some(Status::Up));
        older.history_from = Some(NOW - Duration::days(3));
        let html = overview_of(older);
        assert!(html.contains("<dt>24 h</dt>"), "{html}");
        assert!(
            html.contains("<dt>since 2026-12-04 19:00 UTC</dt>"),
            "{html}"
        );
        assert_eq!(html.matches("<dt>since").count(), 1, "{html}");
        let html = overview_of(row(Some(Status::Up)));
        assert!(html.contains("<dt>30 d</dt>") && html.contains("<dt>90 d</dt>"));
    }

    #[test]
    fn an_unknown_check_gets_the_layout_and_a_way_home() {
        let html = not_found("nope<", &Footer::default()).into_string();
        assert!(html.contains("/assets/vigie.css"), "{html}");
        assert!(
            html.contains(r#"<a href="/">Back to the overview</a>"#),
            "{html}"
        );
        assert!(html.contains("<code>nope&lt;</code>"), "{html}");
    }

    #[test]
    fn names_in_tables_do_not_wrap() {
        let incident = Incident {
            check: "a-rather-long-check-name".into(),
            start: NOW,
            end: None,
            cause: "HTTP 500".into(),
            downs: 3,
            told: Vec::<Told>::new(),
            key: None,
            updates: Vec::new(),
        };
        let html = incident_table(&[incident], false, true, NOW).into_string();
        assert!(html.contains(
            r#"<td class="name" data-label="check"><a href="/checks/a-rather-long-check-name">"#
        ));
        let css = include_str!("assets/vigie.css");
        assert!(css.contains("td.name { white-space: nowrap; }"), "{css}");
    }

    #[test]
    fn an_incident_shows_its_updates_newest_first_as_markdown_and_a_blip_one_line() {
        let key = IncidentId::new("web", NOW);
        let update = |minutes: i64, state, text: &str| IncidentUpdate {
            check: "web".into(),
            incident: key.clone(),
            since: NOW,
            at: NOW + Duration::minutes(minutes),
            state,
            text: text.into(),
        };
        let incident = Incident {
            check: "web".into(),
            start: NOW,
            end: None,
            cause: "HTTP 500".into(),
            downs: 3,
            told: Vec::new(),
            key: Some(key.clone()),
            updates: vec![
                update(
                    9,
                    UpdateState::Identified,
                    "**DNS** <script>alert(1)</script>",
                ),
                update(2, UpdateState::Investigating, "looking"),
            ],
        };
        let html = incident_table(std::slice::from_ref(&incident), false, true, NOW).into_string();
        let identified = html.find("IDENTIFIED").expect("the newest update");
        let investigating = html.find("INVESTIGATING").expect("the first update");
        assert!(identified < investigating, "newest first: {html}");
        assert!(html.contains("<strong>DNS</strong>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains(r#"<a class="write" href="/incidents/web@2026-12-07T19:00:00.000Z">"#),
            "{html}"
        );
        let blip = Incident {
            downs: 1,
            key: None,
            updates: Vec::new(),
            end: Some(NOW + Duration::seconds(30)),
            ..incident
        };
        let html = blip_list(&[blip], true, NOW).into_string();
        assert!(html.contains("30 s · 1 failed probe · "), "{html}");
        assert!(!html.contains("/incidents/"), "a blip has no page: {html}");
    }

    #[test]
    fn the_leaf_served_now_reads_since_now() {
        let leaf = LeafBar {
            sha256: "ab".repeat(32),
            subject: "CN=web".into(),
            issuer: "CN=Test CA".into(),
            not_before: NOW - Duration::days(10),
            not_after: NOW + Duration::days(80),
            first_seen: datetime!(2026-12-07 18:36 UTC),
            last_seen: NOW,
            staging: false,
            current: true,
        };
        assert_eq!(
            leaf_served(&leaf),
            "served since 2026-12-07 18:36 UTC (now)"
        );
        let old = LeafBar {
            current: false,
            ..leaf
        };
        assert_eq!(
            leaf_served(&old),
            "served 2026-12-07 18:36 UTC to 2026-12-07 19:00 UTC"
        );
    }
}
