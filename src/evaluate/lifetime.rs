//! How much validity is "too little", for any lifetime: the thresholds of
//! `tls.expiry` and `tls.renewal_overdue`, pure.
//!
//! `critical_days` was written for 90-day certificates. Applied as-is to a
//! 6-day (160-hour) certificate it makes the check down from the moment the
//! certificate is issued. So a certificate whose lifetime is under four
//! times `critical_days` is *short-lived*: its critical threshold is a tenth
//! of its lifetime instead (16 hours for 160 hours, 14.4 hours for 6 days),
//! and everything about it is counted and said in hours. The renewal rule
//! (a quarter of the lifetime, or `warn_days`) is unchanged: ACME clients
//! renew short-lived certificates when about half remains, so a quarter
//! left means renewals have been failing for a day or more.

use time::Duration;

/// The lifetime below which a certificate is judged in hours, as a multiple
/// of `critical_days`.
pub const SHORT_LIVED_FACTOR: i64 = 4;
/// The share of a short-lived certificate's lifetime that is critical.
pub const SHORT_LIVED_CRITICAL_SHARE: i32 = 10;

/// How one certificate's remaining validity is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Below this much validity left: `tls.expiry` (down).
    pub critical: Duration,
    /// True when the lifetime is under [`SHORT_LIVED_FACTOR`] ×
    /// `critical_days`: thresholds and messages are in hours.
    pub short_lived: bool,
}

/// The thresholds for a certificate valid for `lifetime`.
pub fn thresholds(critical_days: u32, lifetime: Duration) -> Thresholds {
    let configured = Duration::days(i64::from(critical_days));
    let short_lived = lifetime < configured * SHORT_LIVED_FACTOR as i32;
    Thresholds {
        critical: match short_lived {
            true => lifetime / SHORT_LIVED_CRITICAL_SHARE,
            false => configured,
        },
        short_lived,
    }
}

/// True when less than a quarter of `lifetime` is `left`.
pub fn under_a_quarter(left: Duration, lifetime: Duration) -> bool {
    left < lifetime / 4
}

/// "16 hours", "1 hour", "3 days": a span as the operator reads it, in
/// hours when `in_hours`.
pub fn phrase(span: Duration, in_hours: bool) -> String {
    let (n, unit) = match in_hours {
        true => (span.whole_hours(), "hour"),
        false => (span.whole_days(), "day"),
    };
    match n {
        1 => format!("1 {unit}"),
        n => format!("{n} {unit}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::HOUR;

    #[test]
    fn a_160_hour_certificate_has_a_16_hour_critical_threshold() {
        let t = thresholds(7, HOUR * 160);
        assert!(t.short_lived);
        assert_eq!(t.critical, HOUR * 16);
    }

    #[test]
    fn ninety_days_keep_critical_days() {
        let t = thresholds(7, Duration::days(90));
        assert!(!t.short_lived);
        assert_eq!(t.critical, Duration::days(7));
    }

    #[test]
    fn the_boundary_is_four_times_critical_days() {
        assert!(!thresholds(7, Duration::days(28)).short_lived);
        assert!(thresholds(7, Duration::days(28) - HOUR).short_lived);
        // critical_days = 1: a 6-day certificate keeps its 1-day threshold.
        assert_eq!(thresholds(1, Duration::days(6)).critical, Duration::days(1));
    }

    #[test]
    fn the_160_hour_ages_of_issue_17() {
        let lifetime = HOUR * 160;
        let t = thresholds(7, lifetime);
        // Fresh: nothing.
        assert!(HOUR * 159 >= t.critical && !under_a_quarter(HOUR * 159, lifetime));
        // 30 hours left: a quarter is 40 hours, critical is 16: warn.
        assert!(HOUR * 30 >= t.critical && under_a_quarter(HOUR * 30, lifetime));
        // 10 hours left: down.
        assert!(HOUR * 10 < t.critical);
    }

    #[test]
    fn phrases() {
        assert_eq!(phrase(HOUR * 30, true), "30 hours");
        assert_eq!(phrase(HOUR, true), "1 hour");
        assert_eq!(phrase(Duration::days(3) + HOUR, false), "3 days");
    }
}
