//! `kind = "domain"`: a registration judged from what its registry said.
//!
//! - Down (`domain.status`) when the registry keeps the domain out of the
//!   DNS or it lapsed: `clientHold`, `serverHold`, `redemptionPeriod`,
//!   `pendingDelete`, whatever the expiry date says (auto-renewal moves the
//!   date a year on whether or not anybody paid), or when the registry
//!   knows no such domain.
//! - Down (`domain.expiry`) within `[check.rdap] critical_days` of the
//!   expiry, and after it; a warning (`domain.renewal_due`) within
//!   `warn_days`.
//! - Unknown when vigie has no answer (`domain.rdap`): no RDAP service for
//!   the TLD, a registry that did not answer, or an answer older than
//!   [`STALE_AFTER`] query intervals. Status has no "unknown": this is a
//!   warning, which is never up, never pages, and is listed in the daily
//!   report with the reason.
//!
//! RDAP spells statuses in words (`client hold`, RFC 8056), some servers
//! as EPP does (`clientHold`): both are read, compared without case,
//! spaces, hyphens or underscores.

use time::OffsetDateTime;

use crate::check::DomainRules;
use crate::outcome::{Assertion, DomainReport, Failure};

/// Answers older than this many `query_every` are too old to vouch for
/// the statuses (the expiry date is still judged).
pub const STALE_AFTER: u32 = 4;

/// The statuses that take a domain off the DNS, most severe first, each
/// with its EPP name and what it means for the operator.
const DOWN_STATUSES: [(&str, &str); 4] = [
    (
        "pendingDelete",
        "its registration lapsed and the registry is about to release it: it does not resolve, and it can no longer be renewed",
    ),
    (
        "redemptionPeriod",
        "its registration lapsed: it does not resolve; the registrar can still restore it, for a fee",
    ),
    (
        "serverHold",
        "the domain does not resolve (the registry suspended it)",
    ),
    (
        "clientHold",
        "the domain does not resolve (the registrar suspended it: unpaid, unverified contact, or a complaint)",
    ),
];

/// Judges `report` as of `now`.
pub fn judge(
    rules: &DomainRules,
    report: &DomainReport,
    now: OffsetDateTime,
    out: &mut Vec<Failure>,
) {
    let name = &report.domain;
    let Some(answered_at) = report.answered_at else {
        let why = report.error.as_deref().unwrap_or("no answer yet");
        out.push(Failure {
            assertion: Assertion::DomainRdap,
            expected: "the registry's RDAP answer".to_string(),
            observed: why.to_string(),
            message: match report.no_service {
                true => format!("{name}: {why}"),
                false => format!("cannot read the registration of {name}: {why}"),
            },
        });
        return;
    };
    if report.not_found {
        out.push(Failure {
            assertion: Assertion::DomainStatus,
            expected: "a registered domain".to_string(),
            observed: "not found (HTTP 404)".to_string(),
            message: format!(
                "{name} is not registered: its registry's RDAP server knows no such domain (if {name} is a host name, set domain to the registered name)"
            ),
        });
        return;
    }
    judge_statuses(name, &report.statuses, out);
    judge_expiry(rules, name, report.expires_at, now, out);
    let stale =
        time::Duration::try_from(rules.query_every * STALE_AFTER).unwrap_or(time::Duration::MAX);
    if now - answered_at > stale {
        let why = report
            .error
            .as_deref()
            .map(|why| format!(" ({why})"))
            .unwrap_or_default();
        out.push(Failure {
            assertion: Assertion::DomainRdap,
            expected: format!("an RDAP answer less than {} old", crate::when::std_span(rules.query_every * STALE_AFTER)),
            observed: format!("last answer {}", crate::when::minute(answered_at)),
            message: format!(
                "no answer from the registry about {name} since {}{why}: its statuses may have changed since",
                crate::when::minute(answered_at)
            ),
        });
    }
}

fn judge_statuses(name: &str, statuses: &[String], out: &mut Vec<Failure>) {
    let worst = DOWN_STATUSES
        .iter()
        .find(|(epp, _)| statuses.iter().any(|s| down_status(s) == Some(*epp)));
    let Some((epp, meaning)) = worst else {
        return;
    };
    let verb = match *epp {
        "clientHold" | "serverHold" => "is on",
        _ => "is in",
    };
    out.push(Failure {
        assertion: Assertion::DomainStatus,
        expected: "none of clientHold, serverHold, redemptionPeriod, pendingDelete".to_string(),
        observed: statuses.join(", "),
        message: format!("{name} {verb} {epp} at its registry: {meaning}"),
    });
}

/// The EPP name of `status` when it is one that takes the domain down.
fn down_status(status: &str) -> Option<&'static str> {
    let folded: String = status
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    DOWN_STATUSES
        .iter()
        .map(|(epp, _)| *epp)
        .find(|epp| epp.to_ascii_lowercase() == folded)
}

fn judge_expiry(
    rules: &DomainRules,
    name: &str,
    expires_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
    out: &mut Vec<Failure>,
) {
    let Some(expires_at) = expires_at else {
        return;
    };
    let left = expires_at - now;
    let date = day(expires_at);
    let observed = format!("{} days", left.whole_days());
    if left <= time::Duration::ZERO {
        out.push(Failure {
            assertion: Assertion::DomainExpiry,
            expected: format!(">= {} days", rules.critical_days),
            observed,
            message: match (-left).whole_days() {
                0 => format!("{name} expired today ({date}): renew it now"),
                n => format!("{name} expired {} ago ({date}): renew it now", days(n)),
            },
        });
    } else if left < time::Duration::days(i64::from(rules.critical_days)) {
        let when = match left.whole_days() {
            0 => format!("{name} expires today ({})", crate::when::minute(expires_at)),
            n => format!("{name} expires in {} ({date})", days(n)),
        };
        out.push(Failure {
            assertion: Assertion::DomainExpiry,
            expected: format!(">= {} days", rules.critical_days),
            observed,
            message: when,
        });
    } else if left < time::Duration::days(i64::from(rules.warn_days)) {
        out.push(Failure {
            assertion: Assertion::DomainRenewalDue,
            expected: format!(">= {} days", rules.warn_days),
            observed,
            message: format!(
                "{name} expires in {} ({date}): renew it, or make sure auto-renewal is on and paid",
                days(left.whole_days())
            ),
        });
    }
}

fn days(n: i64) -> String {
    match n {
        1 => "1 day".to_string(),
        n => format!("{n} days"),
    }
}

/// "2026-12-12": registrations expire on a day; the hour is the registry's.
fn day(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:04}-{:02}-{:02}", t.year(), u8::from(t.month()), t.day())
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;
    use time::Duration;

    use super::*;
    use crate::outcome::Status;

    const NOW: OffsetDateTime = datetime!(2026-12-07 08:00 UTC);

    fn answered(expires_at: OffsetDateTime, statuses: &[&str]) -> DomainReport {
        DomainReport {
            domain: "example.com".into(),
            expires_at: Some(expires_at),
            statuses: statuses.iter().map(|s| s.to_string()).collect(),
            answered_at: Some(NOW - Duration::hours(1)),
            queried_at: Some(NOW - Duration::hours(1)),
            ..DomainReport::default()
        }
    }

    fn judged(report: &DomainReport) -> Vec<Failure> {
        let mut out = Vec::new();
        judge(&DomainRules::default(), report, NOW, &mut out);
        out
    }

    fn status_of(failures: &[Failure]) -> Status {
        failures
            .iter()
            .map(|f| f.assertion.severity())
            .fold(Status::Up, Status::max)
    }

    #[test]
    fn a_year_left_and_no_hold_is_up() {
        let report = answered(NOW + Duration::days(365), &["client transfer prohibited"]);
        assert!(judged(&report).is_empty());
    }

    #[test]
    fn expiry_is_down_within_seven_days_and_a_warning_within_thirty() {
        let soon = judged(&answered(datetime!(2026-12-12 12:00 UTC), &[]));
        assert_eq!(status_of(&soon), Status::Down);
        assert_eq!(soon[0].assertion, Assertion::DomainExpiry);
        assert_eq!(
            soon[0].message,
            "example.com expires in 5 days (2026-12-12)"
        );

        let month = judged(&answered(NOW + Duration::days(21), &[]));
        assert_eq!(status_of(&month), Status::Warn);
        assert_eq!(month[0].assertion, Assertion::DomainRenewalDue);
        assert_eq!(
            month[0].message,
            "example.com expires in 21 days (2026-12-28): renew it, or make sure auto-renewal is on and paid"
        );

        let gone = judged(&answered(NOW - Duration::days(2), &[]));
        assert_eq!(status_of(&gone), Status::Down);
        assert_eq!(
            gone[0].message,
            "example.com expired 2 days ago (2026-12-05): renew it now"
        );
        let today = judged(&answered(NOW + Duration::hours(5), &[]));
        assert_eq!(
            today[0].message,
            "example.com expires today (2026-12-07 13:00 UTC)"
        );
    }

    #[test]
    fn the_thresholds_are_the_checks() {
        let rules = DomainRules {
            warn_days: 60,
            critical_days: 14,
            ..DomainRules::default()
        };
        let mut out = Vec::new();
        judge(
            &rules,
            &answered(NOW + Duration::days(10), &[]),
            NOW,
            &mut out,
        );
        assert_eq!(out[0].assertion, Assertion::DomainExpiry);
        out.clear();
        judge(
            &rules,
            &answered(NOW + Duration::days(45), &[]),
            NOW,
            &mut out,
        );
        assert_eq!(out[0].assertion, Assertion::DomainRenewalDue);
    }

    #[test]
    fn a_hold_is_down_whatever_the_date_in_either_spelling() {
        for spelling in ["client hold", "clientHold", "CLIENT_HOLD"] {
            let failures = judged(&answered(NOW + Duration::days(300), &["active", spelling]));
            assert_eq!(status_of(&failures), Status::Down, "{spelling}");
            assert_eq!(failures[0].assertion, Assertion::DomainStatus);
            assert!(
                failures[0].message.starts_with(
                    "example.com is on clientHold at its registry: the domain does not resolve"
                ),
                "{}",
                failures[0].message
            );
        }
        let lapsed = judged(&answered(
            NOW + Duration::days(300),
            &["redemption period", "server hold"],
        ));
        assert_eq!(lapsed.len(), 1, "one failure names the worst status");
        assert!(lapsed[0]
            .message
            .starts_with("example.com is in redemptionPeriod at its registry"));
        assert_eq!(lapsed[0].observed, "redemption period, server hold");
        let deleting = judged(&answered(NOW + Duration::days(300), &["pending delete"]));
        assert!(deleting[0].message.contains("pendingDelete"));
        // Prohibitions are not holds.
        let locked = judged(&answered(
            NOW + Duration::days(300),
            &["client hold prohibited", "server transfer prohibited"],
        ));
        assert!(locked.is_empty(), "{locked:?}");
    }

    #[test]
    fn no_answer_is_unknown_never_up_nor_down() {
        let report = DomainReport {
            domain: "example.io".into(),
            no_service: true,
            error: Some("no RDAP service for .io: set rdap_url".into()),
            ..DomainReport::default()
        };
        let failures = judged(&report);
        assert_eq!(status_of(&failures), Status::Warn);
        assert_eq!(failures[0].assertion, Assertion::DomainRdap);
        assert_eq!(
            failures[0].message,
            "example.io: no RDAP service for .io: set rdap_url"
        );
        let failed = DomainReport {
            no_service: false,
            error: Some("https://rdap.example/domain/example.io: HTTP 503".into()),
            ..report
        };
        assert_eq!(
            judged(&failed)[0].message,
            "cannot read the registration of example.io: https://rdap.example/domain/example.io: HTTP 503"
        );
    }

    #[test]
    fn an_unregistered_domain_is_down() {
        let report = DomainReport {
            domain: "example.com".into(),
            not_found: true,
            answered_at: Some(NOW),
            ..DomainReport::default()
        };
        let failures = judged(&report);
        assert_eq!(status_of(&failures), Status::Down);
        assert!(failures[0]
            .message
            .starts_with("example.com is not registered"));
    }

    #[test]
    fn an_old_answer_still_judges_the_date_and_warns_it_is_old() {
        let mut report = answered(NOW + Duration::days(3), &[]);
        report.answered_at = Some(NOW - Duration::days(3));
        report.error = Some("https://rdap.example/domain/example.com: HTTP 503".into());
        let failures = judged(&report);
        let found: Vec<Assertion> = failures.iter().map(|f| f.assertion).collect();
        assert_eq!(found, [Assertion::DomainExpiry, Assertion::DomainRdap]);
        assert!(failures[1].message.contains("since 2026-12-04 08:00 UTC"));
        // A day old is fresh enough.
        report.answered_at = Some(NOW - Duration::days(1));
        assert_eq!(judged(&report).len(), 1);
    }
}
