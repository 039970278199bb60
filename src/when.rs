//! One way of saying time, for the log, the mail, the pages, the report
//! and the CLI alike: instants to the minute (or the second where a second
//! matters, as when a silence ends) in UTC with the zone named, durations
//! in their two largest units. One 90 s outage reads "1 min 30 s"
//! everywhere; nothing shows nanoseconds or `+00:00:00`.

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{Duration, OffsetDateTime, UtcOffset};

/// "45 s", "1 min 30 s", "12 min", "2 h 13 min", "3 d 4 h": the two
/// largest units, a zero second one left out. Negative spans read as 0 s.
pub fn span(d: Duration) -> String {
    let secs = d.whole_seconds().max(0);
    let (days, hours, mins, s) = (
        secs / 86_400,
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60,
    );
    match (days, hours, mins, s) {
        (0, 0, 0, s) => format!("{s} s"),
        (0, 0, m, 0) => format!("{m} min"),
        (0, 0, m, s) => format!("{m} min {s} s"),
        (0, h, 0, _) => format!("{h} h"),
        (0, h, m, _) => format!("{h} h {m} min"),
        (d, 0, _, _) => format!("{d} d"),
        (d, h, _, _) => format!("{d} d {h} h"),
    }
}

/// [`span`] of a `std` duration (timeouts, intervals, backoffs); below a
/// minute a timeout's fraction matters, so "500 ms" and "4.5 s".
pub fn std_span(d: std::time::Duration) -> String {
    let millis = d.subsec_millis();
    match d.as_secs() {
        0 => format!("{millis} ms"),
        s if s < 60 && millis >= 100 => format!("{s}.{} s", millis / 100),
        s => span(Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX))),
    }
}

/// "2026-12-02 11:43 UTC".
pub fn minute(t: OffsetDateTime) -> String {
    utc(
        t,
        format_description!("[year]-[month]-[day] [hour]:[minute] UTC"),
    )
}

/// "2026-12-02 11:43:31 UTC": where the second matters (a silence's end,
/// a retry's time).
pub fn second(t: OffsetDateTime) -> String {
    utc(
        t,
        format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC"),
    )
}

/// `t` in UTC as `format` says; `format` is a literal that always applies.
fn utc(t: OffsetDateTime, format: &[BorrowedFormatItem<'_>]) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(format)
        .unwrap_or_default()
}

/// Where the daily report's times are shown and its schedule runs: UTC,
/// or an IANA zone (`[report] timezone`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Zone(Option<chrono_tz::Tz>);

impl Zone {
    pub fn named(tz: chrono_tz::Tz) -> Zone {
        Zone(Some(tz))
    }

    pub fn tz(self) -> Option<chrono_tz::Tz> {
        self.0
    }

    /// "Europe/Paris", or "UTC".
    pub fn name(self) -> &'static str {
        self.0.map_or("UTC", |tz| tz.name())
    }

    /// [`minute`] in this zone, its abbreviation named: "2026-12-02 12:43
    /// CET", "2026-07-02 13:43 CEST".
    pub fn minute(self, t: OffsetDateTime) -> String {
        let Some(tz) = self.0 else {
            return minute(t);
        };
        use chrono::TimeZone;
        let at = tz.from_utc_datetime(&crate::clock::to_chrono(t).naive_utc());
        at.format("%Y-%m-%d %H:%M %Z").to_string()
    }
}

/// "1 min 30 s ago", measured from `now` (a mail's `Date`, not when its
/// event fired: the grouping window lies between).
pub fn ago(then: OffsetDateTime, now: OffsetDateTime) -> String {
    format!("{} ago", span(now - then))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn spans_read_like_a_person_would_say_them() {
        let s = |secs: i64| span(Duration::seconds(secs));
        assert_eq!(s(-5), "0 s");
        assert_eq!(s(45), "45 s");
        assert_eq!(s(90), "1 min 30 s");
        assert_eq!(s(720), "12 min");
        assert_eq!(s(3600), "1 h");
        assert_eq!(s(2 * 3600 + 13 * 60 + 9), "2 h 13 min");
        assert_eq!(s(3 * 86_400), "3 d");
        assert_eq!(s(3 * 86_400 + 4 * 3600 + 59), "3 d 4 h");
        // As the pages show an incident's length.
        assert_eq!(s(600), "10 min");
        assert_eq!(s(3 * 3600 + 120), "3 h 2 min");
        assert_eq!(s(3 * 86_400 + 7200), "3 d 2 h");
        let ms = std::time::Duration::from_millis;
        assert_eq!(std_span(ms(90_999)), "1 min 30 s");
        assert_eq!(std_span(ms(4_500)), "4.5 s");
        assert_eq!(std_span(ms(5_000)), "5 s");
        assert_eq!(std_span(ms(500)), "500 ms");
    }

    #[test]
    fn instants_name_their_zone_and_stop_at_the_second() {
        let t = datetime!(2026-12-02 12:43:31.249545274 +01:00);
        assert_eq!(minute(t), "2026-12-02 11:43 UTC");
        assert_eq!(second(t), "2026-12-02 11:43:31 UTC");
        assert_eq!(ago(t - Duration::seconds(60), t), "1 min ago");
    }

    #[test]
    fn a_zone_shows_its_local_time_across_summer_time() {
        let paris = Zone::named(chrono_tz::Europe::Paris);
        assert_eq!(
            paris.minute(datetime!(2026-12-02 11:43 UTC)),
            "2026-12-02 12:43 CET"
        );
        assert_eq!(
            paris.minute(datetime!(2026-07-02 11:43 UTC)),
            "2026-07-02 13:43 CEST"
        );
        assert_eq!(
            Zone::default().minute(datetime!(2026-07-02 11:43 UTC)),
            "2026-07-02 11:43 UTC"
        );
        assert_eq!(paris.name(), "Europe/Paris");
    }
}
