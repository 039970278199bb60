//! The pages' charts as inline SVG: the 90-day uptime bar, the
//! response-time chart and the certificate timeline. Pure: data in,
//! markup out, so the shapes are unit-tested without a browser.
//!
//! Colours come from CSS classes (the stylesheet has light and dark
//! variants); geometry is in SVG attributes, which the page's
//! Content-Security-Policy allows, unlike `style` attributes.

use maud::{html, Markup};
use time::OffsetDateTime;

use super::view::{DayCell, LeafBar, Point};

const CHART_WIDTH: f64 = 720.0;
const CHART_HEIGHT: f64 = 200.0;
/// Room for the axis labels.
const MARGIN_LEFT: f64 = 56.0;
/// The timeline needs no value axis.
const TIMELINE_LEFT: f64 = 8.0;
const MARGIN_BOTTOM: f64 = 22.0;
/// The timeline's row for the "now" label, above the dates, so the two
/// never overlap however close `now` is to either end.
const NOW_ROW: f64 = 16.0;

/// One element per day, oldest first, coloured by that day's uptime (and
/// its tone in the class, for a reader without colour). The figures of
/// each day come on the first hover: the script fetches `data-uptime`
/// (the uptime JSON) and titles every day; 100 checks x 90 titled days
/// in the page itself would weigh half a megabyte.
pub fn uptime_bar(name: &str, days: &[DayCell]) -> Markup {
    let from = days.first().map(|d| d.date.to_string()).unwrap_or_default();
    html! {
        div.bar role="img" aria-label=(format!("daily uptime of {name} over the last {} days", days.len()))
            data-uptime=(format!("/api/v1/uptime/{name}?days={}", days.len())) data-from=(from) {
            @for day in days {
                i class=(day.tone()) {}
            }
        }
    }
}

/// Response times over `[from, to]`: one line per series (p50, p95, max),
/// broken where there is no data, with the highest value and the ends of
/// the time axis labelled.
pub fn response_chart(
    series: &[(&'static str, Vec<Point>)],
    from: OffsetDateTime,
    to: OffsetDateTime,
) -> Markup {
    let top = series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.ms))
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let span = (to - from).as_seconds_f64().max(1.0);
    let plot_w = CHART_WIDTH - MARGIN_LEFT;
    let plot_h = CHART_HEIGHT - MARGIN_BOTTOM;
    let x = |at: OffsetDateTime| MARGIN_LEFT + (at - from).as_seconds_f64() / span * plot_w;
    let y = |ms: f64| plot_h - ms / top * (plot_h - 8.0);
    html! {
        svg.chart viewBox=(format!("0 0 {CHART_WIDTH} {CHART_HEIGHT}")) role="img"
            aria-label="response time" {
            line.axis x1=(MARGIN_LEFT) y1=(plot_h) x2=(CHART_WIDTH) y2=(plot_h) {}
            line.axis x1=(MARGIN_LEFT) y1="0" x2=(MARGIN_LEFT) y2=(plot_h) {}
            text.label x=(MARGIN_LEFT - 4.0) y="12" text-anchor="end" { (format_ms(top)) }
            text.label x=(MARGIN_LEFT - 4.0) y=(plot_h) text-anchor="end" { "0" }
            text.label x=(MARGIN_LEFT) y=(CHART_HEIGHT - 6.0) { (stamp(from)) }
            text.label x=(CHART_WIDTH) y=(CHART_HEIGHT - 6.0) text-anchor="end" { (stamp(to)) }
            @for (name, points) in series {
                @for run in runs(points) {
                    // A lone point (one hour with results) has no line to draw.
                    @if let [only] = run {
                        circle class=(format!("dot {name}")) cx=(format!("{:.1}", x(only.at))) cy=(format!("{:.1}", y(only.ms))) r="3" {}
                    } @else {
                        polyline class=(format!("series {name}")) points=(
                            run.iter().map(|p| format!("{:.1},{:.1}", x(p.at), y(p.ms))).collect::<Vec<_>>().join(" ")
                        ) {}
                    }
                }
            }
        }
    }
}

/// Each leaf as a bar from not_before to not_after, with the stretch
/// vigie saw it served drawn over it, a tick at each renewal (a leaf first
/// seen after another) and a line at `now`, labelled in a row of its own
/// (kept inside the chart at either end).
pub fn certificate_timeline(leaves: &[LeafBar], now: OffsetDateTime) -> Markup {
    let Some(from) = leaves.iter().map(|l| l.not_before).min() else {
        return html! { p.empty { "No certificate served yet." } };
    };
    let to = leaves
        .iter()
        .map(|l| l.not_after)
        .max()
        .unwrap_or(now)
        .max(now);
    let span = (to - from).as_seconds_f64().max(1.0);
    let row = 40.0;
    let bars = leaves.len() as f64 * row;
    let height = bars + NOW_ROW + MARGIN_BOTTOM;
    let plot_w = CHART_WIDTH - TIMELINE_LEFT - 8.0;
    let x = |at: OffsetDateTime| TIMELINE_LEFT + (at - from).as_seconds_f64() / span * plot_w;
    html! {
        svg.timeline viewBox=(format!("0 0 {CHART_WIDTH} {height}")) role="img"
            aria-label="certificates served over time" {
            @for (i, leaf) in leaves.iter().enumerate() {
                @let top = i as f64 * row + 4.0;
                g class=(if leaf.staging { "leaf staging" } else { "leaf" }) {
                    title { (leaf.describe()) }
                    text.label x=(x(leaf.not_before).min(CHART_WIDTH - 260.0)) y=(top + 9.0) { (leaf.short_name()) }
                    rect.validity x=(x(leaf.not_before)) y=(top + 14.0) width=((x(leaf.not_after) - x(leaf.not_before)).max(1.0)) height="18" rx="3" {}
                    rect.served x=(x(leaf.first_seen)) y=(top + 19.0) width=((x(leaf.last_seen) - x(leaf.first_seen)).max(3.0)) height="8" {}
                }
                @if i > 0 {
                    line.renewal x1=(x(leaf.first_seen)) y1="0" x2=(x(leaf.first_seen)) y2=(bars) {}
                }
            }
            line.now x1=(x(now)) y1="0" x2=(x(now)) y2=(bars + 4.0) {}
            text.label.now x=(x(now)) y=(bars + NOW_ROW - 2.0) text-anchor=(now_anchor(x(now))) { "now" }
            text.label x=(TIMELINE_LEFT) y=(height - 6.0) { (stamp(from)) }
            text.label x=(CHART_WIDTH - 8.0) y=(height - 6.0) text-anchor="end" { (stamp(to)) }
        }
    }
}

/// Where the "now" label hangs from its line: inward near either end, so
/// it stays inside the chart.
fn now_anchor(x: f64) -> &'static str {
    if x < TIMELINE_LEFT + 20.0 {
        "start"
    } else if x > CHART_WIDTH - 28.0 {
        "end"
    } else {
        "middle"
    }
}

/// Consecutive points without a gap: a point is `None`-free by
/// construction, a gap is where `Point::gap_before` is set.
fn runs(points: &[Point]) -> Vec<&[Point]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, point) in points.iter().enumerate() {
        if point.gap_before && i > start {
            out.push(&points[start..i]);
            start = i;
        }
    }
    if start < points.len() {
        out.push(&points[start..]);
    }
    out
}

pub fn format_ms(ms: f64) -> String {
    if ms >= 10_000.0 {
        format!("{:.0} s", ms / 1000.0)
    } else if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

fn stamp(at: OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute()
    )
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;
    use time::Duration;

    use super::*;

    const T0: OffsetDateTime = datetime!(2026-11-30 00:00 UTC);

    fn point(hours: i64, ms: f64, gap_before: bool) -> Point {
        Point {
            at: T0 + Duration::hours(hours),
            ms,
            gap_before,
        }
    }

    #[test]
    fn the_bar_has_one_element_per_day_and_says_where_its_figures_are() {
        let days: Vec<DayCell> = (0..90)
            .map(|d| DayCell {
                date: (T0 - Duration::days(89 - d)).date(),
                up: 1440,
                warn: 0,
                down: if d == 5 { 30 } else { 0 },
                p50_ms: Some(120.0),
                p95_ms: Some(300.0),
            })
            .collect();
        let html = uptime_bar("site", &days).into_string();
        assert_eq!(html.matches("<i ").count(), 90);
        assert_eq!(html.matches("<i class=\"good\"></i>").count(), 89);
        assert_eq!(html.matches("<i class=\"bad s2\"></i>").count(), 1);
        assert!(html.contains("data-uptime=\"/api/v1/uptime/site?days=90\""));
        assert!(html.contains("data-from=\"2026-09-02\""));
    }

    fn leaf(days_from: i64, days_to: i64, current: bool) -> LeafBar {
        LeafBar {
            sha256: format!("{days_from:064}"),
            subject: "CN=example.test".into(),
            issuer: "CN=Test CA".into(),
            not_before: T0 + Duration::days(days_from),
            not_after: T0 + Duration::days(days_to),
            first_seen: T0 + Duration::days(days_from),
            last_seen: T0 + Duration::days(days_to.min(10)),
            staging: false,
            current,
        }
    }

    /// The `y` of the `<text>` holding `words`.
    fn text_y(svg: &str, words: &str) -> f64 {
        let end = svg.find(&format!(">{words}</text>")).expect(words);
        let start = svg[..end].rfind("<text").unwrap();
        let tag = &svg[start..end];
        let y = tag.split(" y=\"").nth(1).unwrap();
        y[..y.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn the_now_label_has_a_row_of_its_own_under_the_bars_and_above_the_dates() {
        let leaves = [leaf(0, 90, false), leaf(60, 150, true)];
        // `now` at the very start and at the very end: both collide with a
        // date label if they share its row.
        for now in [T0, T0 + Duration::days(150)] {
            let svg = certificate_timeline(&leaves, now).into_string();
            let now_y = text_y(&svg, "now");
            let date_y = text_y(&svg, &stamp(T0));
            assert!(date_y - now_y >= 12.0, "now at {now_y}, dates at {date_y}");
            assert!(now_y - 11.0 >= 2.0 * 40.0, "below the bars: {now_y}");
        }
        let at_end = certificate_timeline(&leaves, T0 + Duration::days(150)).into_string();
        assert!(at_end.contains("text-anchor=\"end\">now<"), "{at_end}");
        let at_start = certificate_timeline(&leaves, T0).into_string();
        assert!(
            at_start.contains("text-anchor=\"start\">now<"),
            "{at_start}"
        );
    }

    #[test]
    fn the_current_leaf_is_served_since_not_from_a_time_to_itself() {
        let svg = certificate_timeline(&[leaf(0, 90, true)], T0).into_string();
        assert!(
            svg.contains("served since 2026-11-30 00:00 UTC (now)"),
            "{svg}"
        );
        assert!(!svg.contains("served from"), "{svg}");
        let old = certificate_timeline(&[leaf(0, 5, false)], T0).into_string();
        assert!(
            old.contains("served from 2026-11-30 00:00 UTC to 2026-12-05"),
            "{old}"
        );
    }

    #[test]
    fn a_bar_shades_its_bad_days_and_draws_warn_days_amber() {
        let day = |up, warn, down| DayCell {
            date: T0.date(),
            up,
            warn,
            down,
            p50_ms: None,
            p95_ms: None,
        };
        let html = uptime_bar("site", &[day(64, 0, 36), day(0, 0, 5), day(9, 1, 0)]).into_string();
        assert!(
            html.contains("<i class=\"bad s3\"></i><i class=\"bad s4\"></i><i class=\"warn\"></i>"),
            "{html}"
        );
    }

    #[test]
    fn a_gap_breaks_the_line() {
        let points = vec![
            point(0, 100.0, false),
            point(1, 110.0, false),
            point(5, 90.0, true),
        ];
        let svg = response_chart(&[("p50", points)], T0, T0 + Duration::hours(6)).into_string();
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(
            svg.matches("<circle").count(),
            1,
            "the lone point after the gap"
        );
        assert!(svg.contains(">110 ms<"), "the top is labelled: {svg}");
    }
}
