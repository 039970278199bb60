//! Judging what the CA said: its renewal window (ARI) and its CRLs. Pure.
//!
//! - The renewal window's end has passed and the same leaf is still served
//!   (this probe saw it, and ARI answered for it): `tls.renewal_window`,
//!   a warning; once the end is more than `ari_grace` ago, the check is
//!   down (the CA's "renew now": it is about to revoke, or already has).
//! - A served certificate listed on its CRL: `tls.revoked`, down.
//!
//! An ARI endpoint that failed, or a CRL that is unreachable, stale or
//! does not verify, is in the outcome and judged nothing.

use time::OffsetDateTime;

use crate::cert;
use crate::check::TlsExpect;
use crate::outcome::{Assertion, CrlStatus, Failure, Status, TlsReport};

/// Pushes the failures and returns the least status they impose (the ARI
/// escalation to `down` is not the assertion's own severity).
pub fn judge(
    expect: &TlsExpect,
    tls: &TlsReport,
    now: OffsetDateTime,
    out: &mut Vec<Failure>,
) -> Status {
    let status = renewal_window(expect, tls, now, out);
    revoked(tls, out);
    status
}

fn renewal_window(
    expect: &TlsExpect,
    tls: &TlsReport,
    now: OffsetDateTime,
    out: &mut Vec<Failure>,
) -> Status {
    let Some(ari) = &tls.ari else {
        return Status::Up;
    };
    let (Some(start), Some(end)) = (ari.window_start, ari.window_end) else {
        return Status::Up;
    };
    if end > now {
        return Status::Up;
    }
    let late = now - end;
    let grace = time::Duration::try_from(expect.ari_grace).unwrap_or(time::Duration::MAX);
    let status = match late > grace {
        true => Status::Down,
        false => Status::Warn,
    };
    let see = ari
        .explanation_url
        .as_deref()
        .map(|url| format!("; the CA explains why at {url}"))
        .unwrap_or_default();
    let verdict = match status {
        Status::Down => format!(
            "more than {} past the window: renew now",
            crate::when::std_span(expect.ari_grace)
        ),
        _ => "renewal looks stuck".to_string(),
    };
    out.push(Failure {
        assertion: Assertion::TlsRenewalWindow,
        expected: format!(
            "a new certificate by {} (the CA's renewal window)",
            crate::when::minute(end)
        ),
        observed: format!(
            "the same certificate, {} hours after the window ended",
            late.whole_hours()
        ),
        message: format!(
            "the CA asked for this certificate to be renewed between {} and {}, and it is still served ({verdict}){see}",
            crate::when::minute(start),
            crate::when::minute(end)
        ),
    });
    status
}

fn revoked(tls: &TlsReport, out: &mut Vec<Failure>) {
    for report in tls
        .revocation
        .iter()
        .filter(|r| r.status == CrlStatus::Revoked)
    {
        let when = report
            .revoked_at
            .map(crate::when::minute)
            .unwrap_or_else(|| "an unknown date".to_string());
        let reason = report.reason.as_deref().unwrap_or("no reason given");
        let which = match tls.chain.first() {
            Some(leaf) if leaf.subject == report.subject => "certificate".to_string(),
            _ => format!(
                "intermediate certificate {}",
                cert::common_name(&report.subject)
            ),
        };
        out.push(Failure {
            assertion: Assertion::TlsRevoked,
            expected: "a certificate its CA has not revoked".to_string(),
            observed: format!("revoked on {when} ({reason})"),
            message: format!(
                "{which} was revoked on {when}, reason {reason} (CRL {}): browsers may refuse it; replace it now",
                report.url
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::macros::datetime;

    use super::*;
    use crate::outcome::{AriReport, CrlReport};

    const NOW: OffsetDateTime = datetime!(2026-12-10 12:00:00 UTC);

    fn tls(ari: Option<AriReport>, revocation: Vec<CrlReport>) -> TlsReport {
        TlsReport {
            server_name: "www.example.test".into(),
            version: None,
            cipher_suite: None,
            key_exchange: None,
            trusted: true,
            verify_error: None,
            hostname_matches: true,
            ari,
            revocation,
            verified_path: None,
            chain: Vec::new().into(),
        }
    }

    fn window(end: OffsetDateTime) -> AriReport {
        AriReport {
            cert_id: "a.b".into(),
            url: "https://ca.example/ari/a.b".into(),
            window_start: Some(end - time::Duration::days(2)),
            window_end: Some(end),
            explanation_url: None,
            error: None,
            fetched_at: Some(NOW),
        }
    }

    fn status(report: &TlsReport) -> (Status, Vec<Failure>) {
        let mut out = Vec::new();
        let floor = judge(&TlsExpect::default(), report, NOW, &mut out);
        let status = out
            .iter()
            .map(|f| f.assertion.severity())
            .fold(floor, Status::max);
        (status, out)
    }

    #[test]
    fn the_window_ahead_is_up_past_is_warn_and_past_the_grace_is_down() {
        let hour = time::Duration::HOUR;
        assert_eq!(status(&tls(Some(window(NOW + hour)), vec![])).0, Status::Up);
        let (warn, failures) = status(&tls(Some(window(NOW - hour)), vec![]));
        assert_eq!(warn, Status::Warn);
        assert_eq!(failures[0].assertion, Assertion::TlsRenewalWindow);
        assert_eq!(
            TlsExpect::default().ari_grace,
            Duration::from_secs(2 * 86_400)
        );
        let (down, failures) = status(&tls(Some(window(NOW - hour * 49)), vec![]));
        assert_eq!(down, Status::Down);
        assert!(
            failures[0].message.contains("renew now"),
            "{}",
            failures[0].message
        );
    }

    #[test]
    fn a_failed_ari_or_crl_judges_nothing() {
        let mut failed = window(NOW - time::Duration::days(10));
        failed.window_start = None;
        failed.window_end = None;
        failed.error = Some("HTTP 503".into());
        let unavailable = CrlReport {
            subject: "CN=leaf".into(),
            url: "http://crl.example/1.crl".into(),
            status: CrlStatus::Unavailable,
            revoked_at: None,
            reason: None,
            next_update: None,
            detail: Some("connection refused".into()),
        };
        let (up, failures) = status(&tls(Some(failed), vec![unavailable]));
        assert_eq!((up, failures.len()), (Status::Up, 0));
    }

    #[test]
    fn a_revoked_certificate_is_down_with_date_and_reason() {
        let revoked = CrlReport {
            subject: "CN=leaf".into(),
            url: "http://crl.example/1.crl".into(),
            status: CrlStatus::Revoked,
            revoked_at: Some(datetime!(2026-12-09 08:00:00 UTC)),
            reason: Some("key_compromise".into()),
            next_update: None,
            detail: None,
        };
        let (down, failures) = status(&tls(None, vec![revoked]));
        assert_eq!(down, Status::Down);
        assert_eq!(
            failures[0].observed,
            "revoked on 2026-12-09 08:00 UTC (key_compromise)"
        );
    }
}
