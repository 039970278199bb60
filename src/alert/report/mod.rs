//! The daily certificate report: what it says ([`Report`], also the JSON
//! of `vigie report --json` and `/api/v1/report`) and how it is built from
//! what the daemon gathered ([`build`]). `changes.rs` finds certificate
//! changes in history; `render.rs` writes the report as text, HTML and a
//! mail.
//!
//! The report doubles as a daily proof that vigie is alive, so it always
//! goes out, with vigie's own health at the end. Reading the store,
//! measuring the outbox and sending are the daemon's job: everything here
//! is handed in.

mod changes;
mod render;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::silence::Silence;
use super::state::AlertState;
use crate::cert;
use crate::cert::CertInfo;
use crate::outcome::{Outcome, Status};

pub use changes::{changes, leaf_change, CertChange, ChangeKind, Leaf};
pub use render::{email, html, text};

/// Everything the report needs, gathered by the daemon.
#[derive(Debug, Clone)]
pub struct ReportInput<'a> {
    pub now: OffsetDateTime,
    /// The machine vigie runs on.
    pub host: &'a str,
    /// The latest outcome of every configured check.
    pub latest: &'a [Outcome],
    /// Alert states (for "down since"); missing ones are fine.
    pub states: &'a [AlertState],
    /// Certificate changes of the last 24 h ([`changes`] per check).
    pub changes: &'a [CertChange],
    /// Silences; expired ones are left out.
    pub silences: &'a [Silence],
    pub health: Health,
    /// Checks using a `danger_*` escape hatch, listed every day.
    pub escape_hatches: &'a [EscapeHatch],
    /// Each check's `env` label, to group rows as the overview does
    /// ([`envs`]); a check without one is in no group.
    pub envs: &'a BTreeMap<String, String>,
    /// `[report] timezone`.
    pub zone: crate::when::Zone,
}

/// The label rows are grouped by, as on the status pages' overview.
pub const GROUP_BY: &str = "env";

/// Each check's [`GROUP_BY`] label, for [`ReportInput::envs`].
pub fn envs(checks: &[std::sync::Arc<crate::check::Check>]) -> BTreeMap<String, String> {
    checks
        .iter()
        .filter_map(|c| Some((c.name.clone(), c.labels.get(GROUP_BY)?.clone())))
        .collect()
}

/// The daily report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    #[serde(with = "time::serde::rfc3339")]
    pub generated_at: OffsetDateTime,
    pub host: String,
    /// Every check that served a certificate, soonest expiry first.
    pub certificates: Vec<CertRow>,
    /// https checks whose latest probe saw no certificate.
    pub unseen: Vec<Unseen>,
    /// Every domain check's registration, soonest expiry first, those
    /// whose expiry is unknown last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainRow>,
    pub changes: Vec<CertChange>,
    /// Checks whose latest probe is `down` or `warn`, down first.
    pub problems: Vec<Problem>,
    /// Incidents open now or ended in the last 24 h, oldest first.
    #[serde(default)]
    pub incidents: Vec<IncidentRow>,
    pub silences: Vec<Silence>,
    pub health: Health,
    pub escape_hatches: Vec<EscapeHatch>,
    /// Where its times are shown (`[report] timezone`); the JSON keeps
    /// instants in RFC 3339 UTC whatever the zone, and names it.
    #[serde(skip)]
    pub zone: crate::when::Zone,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// One incident of the last 24 h.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentRow {
    pub check: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The first failed probe.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// The probe that completed recovery; none while it is open.
    #[serde(with = "time::serde::rfc3339::option")]
    pub resolved_at: Option<OffsetDateTime>,
    /// From `since` to `resolved_at`, or to the report's time while open.
    pub lasted_seconds: u64,
    pub first_failure: String,
    /// What held its page, if nobody was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// One TLS-bearing check's leaf certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertRow {
    pub check: String,
    /// The check's `env` label, by which the report groups its rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The name sent as SNI.
    pub host: String,
    pub subject: String,
    pub issuer: String,
    /// Set when browsers would not accept the chain.
    pub issuer_flag: Option<IssuerFlag>,
    /// Why the chain was not trusted, in words.
    pub trust_problem: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Whole days from the report's time, negative once expired.
    pub days_left: i64,
    pub renewal: Renewal,
    /// A chain certificate that expires before the leaf (it breaks the
    /// site first).
    pub expires_first: Option<ChainExpiry>,
    #[serde(with = "time::serde::rfc3339")]
    pub probed_at: OffsetDateTime,
    /// The CA's renewal window for the leaf (ARI), or why it is unknown;
    /// only from outcomes still in memory (the history does not keep it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ari: Option<crate::outcome::AriReport>,
    /// CRL answers that are not "good": revoked, unavailable, stale, invalid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revocation: Vec<crate::outcome::CrlReport>,
    /// The key exchange group the latest handshake negotiated
    /// (`X25519MLKEM768`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_exchange: Option<String>,
}

/// One domain check's registration, as its registry last gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainRow {
    pub check: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    pub domain: String,
    /// The check's latest status: `warn` also when the registration is
    /// unknown (`note` says why).
    pub status: Status,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<OffsetDateTime>,
    /// Whole days from the report's time, negative once expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days_left: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registrar: Option<String>,
    /// The registry's status codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
    /// When the registry gave these facts.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub answered_at: Option<OffsetDateTime>,
    /// The check's first failure: why it is down, warns, or is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssuerFlag {
    /// A "(STAGING)" CA: the ACME issuer points at a staging endpoint.
    Staging,
    /// Not trusted for another reason (unknown CA, incomplete chain...).
    Untrusted,
}

/// Where a certificate stands in its renewal cycle. ACME clients renew
/// once a third of the lifetime remains, so less than a third left means
/// renewal should be happening now, and less than a quarter means it has
/// been failing for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Renewal {
    Ok,
    Due,
    Overdue,
    Expired,
}

impl Renewal {
    fn of(leaf: &CertInfo, now: OffsetDateTime) -> Self {
        let lifetime = leaf.not_after - leaf.not_before;
        if leaf.not_after <= now {
            Renewal::Expired
        } else if cert::renewal_overdue(leaf, now) {
            Renewal::Overdue
        } else if leaf.not_after - now < lifetime / 3 {
            Renewal::Due
        } else {
            Renewal::Ok
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Renewal::Ok => "ok",
            Renewal::Due => "due",
            Renewal::Overdue => "overdue",
            Renewal::Expired => "expired",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainExpiry {
    pub subject: String,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
}

/// An https check whose latest probe got no certificate (unreachable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unseen {
    pub check: String,
    pub target: String,
    pub reason: String,
}

/// A check whose latest probe is `down` or `warn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub check: String,
    pub status: Status,
    pub target: String,
    pub headline: String,
    /// The first failed probe of the current streak, when known.
    #[serde(with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    /// An incident is open (it paged, or would have but for a hold).
    pub firing: bool,
    /// What holds its page, while one does ("silence site until ...",
    /// "not confirmed by the other vantages: down from fra only").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// vigie's own health; `None` where the daemon did not measure it (or the
/// feature is not configured, for replication).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Health {
    #[serde(with = "opt_secs", rename = "uptime_seconds")]
    pub uptime: Option<Duration>,
    pub outbox_backlog: Option<u64>,
    pub dead_letters: Option<Vec<DeadLetter>>,
    #[serde(with = "opt_secs", rename = "replication_lag_seconds")]
    pub replication_lag: Option<Duration>,
}

/// A mail the SMTP server refused for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub subject: String,
    pub to: Vec<String>,
    pub error: String,
}

/// A check using a `danger_*` key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EscapeHatch {
    pub check: String,
    pub key: String,
}

/// The report from what the daemon gathered.
pub fn build(input: &ReportInput<'_>) -> Report {
    let now = input.now;
    let mut certificates: Vec<CertRow> = input
        .latest
        .iter()
        .filter_map(|o| cert_row(o, now))
        .map(|mut row| {
            row.env = input.envs.get(&row.check).cloned();
            row
        })
        .collect();
    certificates.sort_by(|a, b| (a.not_after, &a.check).cmp(&(b.not_after, &b.check)));
    let unseen = input
        .latest
        .iter()
        .filter(|o| o.target.starts_with("https://") && o.leaf().is_none())
        .map(|o| Unseen {
            check: o.name.clone(),
            target: o.target.clone(),
            reason: o
                .first_failure()
                .map_or("no certificate seen".to_string(), |f| f.message.clone()),
        })
        .collect();
    let mut domains: Vec<DomainRow> = input
        .latest
        .iter()
        .filter_map(|o| domain_row(o, now))
        .map(|mut row| {
            row.env = input.envs.get(&row.check).cloned();
            row
        })
        .collect();
    // Known expiries first, soonest first; then the unknown ones.
    domains.sort_by(|a, b| {
        let key = |r: &DomainRow| (r.expires_at.is_none(), r.expires_at, r.check.clone());
        key(a).cmp(&key(b))
    });
    let mut problems: Vec<Problem> = input
        .latest
        .iter()
        .filter(|o| o.status != Status::Up)
        .map(|o| problem(o, input.states))
        .collect();
    problems.sort_by(|a, b| (b.status, &a.check).cmp(&(a.status, &b.check)));
    let mut changes = input.changes.to_vec();
    changes.sort_by(|a, b| (a.at, &a.check).cmp(&(b.at, &b.check)));
    let incidents = incidents(input.states, input.envs, now);
    Report {
        generated_at: now,
        zone: input.zone,
        timezone: input.zone.tz().map(|tz| tz.name().to_string()),
        host: input.host.to_string(),
        certificates,
        unseen,
        domains,
        changes,
        problems,
        incidents,
        silences: input
            .silences
            .iter()
            .filter(|s| s.is_active(now))
            .cloned()
            .collect(),
        health: input.health.clone(),
        escape_hatches: input.escape_hatches.to_vec(),
    }
}

/// The incidents open at `now` or ended in the 24 h before it, oldest
/// first, from the checks' alert states.
fn incidents(
    states: &[AlertState],
    envs: &BTreeMap<String, String>,
    now: OffsetDateTime,
) -> Vec<IncidentRow> {
    let day_ago = now - time::Duration::days(1);
    let lasted = |from: OffsetDateTime, to: OffsetDateTime| {
        u64::try_from((to - from).whole_seconds()).unwrap_or(0)
    };
    let mut rows = Vec::new();
    for state in states {
        let env = envs.get(&state.check).cloned();
        for ended in state.ended.iter().filter(|e| e.resolved_at > day_ago) {
            rows.push(IncidentRow {
                check: state.check.clone(),
                env: env.clone(),
                since: ended.since,
                resolved_at: Some(ended.resolved_at),
                lasted_seconds: lasted(ended.since, ended.resolved_at),
                first_failure: ended.first_failure.clone(),
                held: ended.held.clone(),
            });
        }
        if let Some(open) = &state.incident {
            rows.push(IncidentRow {
                check: state.check.clone(),
                env,
                since: open.since,
                resolved_at: None,
                lasted_seconds: lasted(open.since, now),
                first_failure: open.first_failure.headline().unwrap_or("down").to_string(),
                held: open.held_by().map(str::to_string),
            });
        }
    }
    rows.sort_by(|a, b| (a.since, &a.check).cmp(&(b.since, &b.check)));
    rows
}

fn cert_row(outcome: &Outcome, now: OffsetDateTime) -> Option<CertRow> {
    let tls = outcome.tls.as_ref()?;
    let leaf = tls.chain.first()?;
    let issuer_flag = if cert::is_staging(&leaf.issuer) {
        Some(IssuerFlag::Staging)
    } else if !tls.trusted {
        Some(IssuerFlag::Untrusted)
    } else {
        None
    };
    let expires_first = cert::earliest_expiry(&tls.chain)
        .filter(|c| c.not_after < leaf.not_after)
        .map(|c| ChainExpiry {
            subject: c.subject.clone(),
            not_after: c.not_after,
        });
    Some(CertRow {
        check: outcome.name.clone(),
        env: None,
        host: tls.server_name.clone(),
        subject: leaf.subject.clone(),
        issuer: leaf.issuer.clone(),
        issuer_flag,
        trust_problem: tls.verify_error.as_ref().map(ToString::to_string),
        not_after: leaf.not_after,
        days_left: (leaf.not_after - now).whole_days(),
        renewal: Renewal::of(leaf, now),
        expires_first,
        probed_at: outcome.started_at,
        ari: tls.ari.clone(),
        revocation: tls
            .revocation
            .iter()
            .filter(|r| r.status != crate::outcome::CrlStatus::Good)
            .cloned()
            .collect(),
        key_exchange: tls.key_exchange.clone(),
    })
}

fn domain_row(outcome: &Outcome, now: OffsetDateTime) -> Option<DomainRow> {
    let domain = outcome.domain.as_ref()?;
    Some(DomainRow {
        check: outcome.name.clone(),
        env: None,
        domain: domain.domain.clone(),
        status: outcome.status,
        expires_at: domain.expires_at,
        days_left: domain.expires_at.map(|at| (at - now).whole_days()),
        registrar: domain.registrar.clone(),
        statuses: domain.statuses.clone(),
        answered_at: domain.answered_at,
        note: outcome.first_failure().map(|f| f.message.clone()),
    })
}

fn problem(outcome: &Outcome, states: &[AlertState]) -> Problem {
    let state = states.iter().find(|s| s.check == outcome.name);
    Problem {
        check: outcome.name.clone(),
        status: outcome.status,
        target: outcome.target.clone(),
        headline: outcome
            .first_failure()
            .map_or(String::new(), |f| f.message.clone()),
        since: state.and_then(AlertState::failing_since),
        firing: state.is_some_and(AlertState::is_firing),
        held: state
            .and_then(|s| s.incident.as_ref())
            .and_then(|i| i.held_by())
            .map(str::to_string),
    }
}

/// `Option<Duration>` as whole seconds in JSON.
mod opt_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_secs))
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::alert::testing::{chain, down, golden, renewed, staging, up, with_leaf, T0};
    use crate::outcome::{Assertion, VerifyError};
    use render::subject;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn renewal_status_follows_the_lifetime_left() {
        let leaf = &chain("site", datetime!(2027-01-28 06:12:09 UTC), T0)[0];
        // 90-day leaf: a third is 30 days, a quarter 22.5.
        assert_eq!(
            Renewal::of(leaf, leaf.not_after - Duration::from_secs(40 * 86400)),
            Renewal::Ok
        );
        assert_eq!(
            Renewal::of(leaf, leaf.not_after - Duration::from_secs(25 * 86400)),
            Renewal::Due
        );
        assert_eq!(
            Renewal::of(leaf, leaf.not_after - Duration::from_secs(10 * 86400)),
            Renewal::Overdue
        );
        assert_eq!(Renewal::of(leaf, leaf.not_after), Renewal::Expired);
    }

    /// Every section filled: the report an on-call person reads on a bad
    /// morning.
    fn sample() -> Report {
        let now = T0;
        let mut app = with_leaf("app", now - HOUR, staging);
        if let Some(tls) = app.tls.as_mut() {
            tls.trusted = false;
            tls.verify_error = Some(VerifyError::StagingIssuer {
                issuer: tls.chain[0].issuer.clone(),
            });
        }
        app.status = Status::Down;
        app.failures = vec![crate::alert::testing::failure(Assertion::TlsTrusted)];
        let api = with_leaf("api", now - HOUR, |leaf| {
            leaf.not_after = datetime!(2026-12-04 09:00 UTC);
            leaf.not_before = leaf.not_after - time::Duration::days(90);
        });
        let mut old = with_leaf("legacy", now - HOUR, |leaf| {
            leaf.not_after = datetime!(2026-12-18 09:00 UTC);
            leaf.not_before = leaf.not_after - time::Duration::days(90);
        });
        old.status = Status::Warn;
        old.failures = vec![crate::alert::testing::failure(Assertion::TlsRenewalOverdue)];
        let cdn = with_leaf("cdn", now - HOUR, |leaf| {
            leaf.not_after = datetime!(2027-06-01 00:00 UTC);
            leaf.not_before = datetime!(2026-06-01 00:00 UTC);
        });
        let mut site = up("site", now - HOUR);
        if let Some(tls) = site.tls.as_mut() {
            tls.key_exchange = Some("X25519MLKEM768".to_string());
        }
        let latest = vec![
            site,
            app,
            api,
            old,
            cdn,
            down(
                "uploads-cors",
                now - Duration::from_secs(60),
                Assertion::Connect,
            ),
            with_leaf("old-api", now - HOUR, |leaf| {
                leaf.not_after = now - time::Duration::days(2);
                leaf.not_before = leaf.not_after - time::Duration::days(90);
            }),
        ];
        // site was down for 90 s this morning, and for a while the day
        // before (too old for the report).
        let mut site_state = AlertState::new("site");
        for (since, lasted) in [(30 * HOUR, 600), (5 * HOUR, 90)] {
            site_state.ended.push(crate::alert::state::EndedIncident {
                since: now - since,
                resolved_at: now - since + Duration::from_secs(lasted),
                first_failure: "HTTP 500 (expected 200)".to_string(),
                held: None,
            });
        }
        let mut cors_state = AlertState::new("uploads-cors");
        cors_state.streak_first = Some(Box::new(crate::alert::Snapshot::of(&latest[5])));
        cors_state.streak_first.as_mut().unwrap().started_at = now - Duration::from_secs(150);
        // app has been paging since its leaf went to staging.
        let mut app_state = AlertState::new("app");
        for minutes in [62, 61] {
            let mut probe = latest[1].clone();
            probe.started_at = now - Duration::from_secs(minutes * 60);
            let step = crate::alert::transition(
                app_state,
                crate::alert::Observation::judged(&probe),
                probe.started_at,
                &crate::alert::testing::policy(),
                None,
            );
            app_state = step.state;
        }
        assert!(app_state.is_firing());
        let changes = vec![
            leaf_change(
                &up("site", now - 20 * HOUR),
                &with_leaf("site", now - 19 * HOUR, renewed),
            )
            .unwrap(),
            leaf_change(
                &up("app", now - 4 * HOUR),
                &with_leaf("app", now - 3 * HOUR, staging),
            )
            .unwrap(),
        ];
        let silences = vec![
            Silence::new("staging-*", 8 * HOUR, "load test <until noon>", now - HOUR).unwrap(),
            Silence::new("expired", HOUR, "", now - 2 * HOUR).unwrap(),
        ];
        let health = Health {
            uptime: Some(Duration::from_secs(3 * 86400 + 4 * 3600 + 120)),
            outbox_backlog: Some(0),
            dead_letters: Some(vec![DeadLetter {
                at: now - 5 * HOUR,
                subject: "[vigie] DOWN app: certificate comes from the Let's Encrypt staging CA"
                    .to_string(),
                to: vec!["old-oncall@example.com".to_string()],
                error:
                    "550 5.1.1 <old-oncall@example.com>: Recipient address rejected: User unknown"
                        .to_string(),
            }]),
            replication_lag: Some(Duration::from_secs(4 * 60 + 10)),
        };
        let hatches = vec![EscapeHatch {
            check: "legacy".to_string(),
            key: "danger_accept_invalid_certs".to_string(),
        }];
        build(&ReportInput {
            now,
            host: "probe-1.example.net",
            latest: &latest,
            states: &[cors_state, app_state, site_state],
            changes: &changes,
            silences: &silences,
            health,
            escape_hatches: &hatches,
            envs: &[
                ("site", "prod"),
                ("app", "prod"),
                ("api", "prod"),
                ("old-api", "prod"),
                ("legacy", "staging"),
                ("cdn", "staging"),
            ]
            .into_iter()
            .map(|(c, e)| (c.to_string(), e.to_string()))
            .collect(),
            zone: Default::default(),
        })
    }

    #[test]
    fn a_report_in_a_time_zone_shows_its_times_there_and_names_it() {
        let mut report = sample();
        report.zone = crate::when::Zone::named(chrono_tz::Europe::Paris);
        let text = render::text(&report);
        let utc = crate::when::minute(report.generated_at);
        let paris = report.zone.minute(report.generated_at);
        assert!(paris.ends_with(" CET"), "{paris}");
        assert!(text.contains(&paris), "{text}");
        assert!(!text.contains(&utc), "no UTC time left: {text}");
    }

    #[test]
    fn the_daily_report_matches_its_golden_files() {
        let report = sample();
        let order: Vec<&str> = report
            .certificates
            .iter()
            .map(|r| r.check.as_str())
            .collect();
        assert_eq!(order, ["old-api", "api", "legacy", "app", "site", "cdn"]);
        let incidents: Vec<(&str, bool)> = report
            .incidents
            .iter()
            .map(|i| (i.check.as_str(), i.resolved_at.is_some()))
            .collect();
        assert_eq!(
            incidents,
            [("site", true), ("app", false)],
            "this morning's outage and the open one, not yesterday's"
        );
        assert_eq!(report.silences.len(), 1, "the expired silence is left out");
        let mail = email(&report, &["team@example.com".to_string()]);
        golden(
            "report/daily.txt",
            &format!(
                "Subject: {}\nMessage-ID: {}\n\n{}",
                mail.subject, mail.message_id, mail.text
            ),
        );
        golden("report/daily.html", &mail.html);
        let json = serde_json::to_string_pretty(&report).unwrap() + "\n";
        golden("report/daily.json", &json);
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report, "the CLI can read the API's JSON back");
    }

    #[test]
    fn the_report_lists_the_cas_renewal_window_and_revocations() {
        use crate::outcome::{AriReport, CrlReport, CrlStatus};
        let mut site = up("site", T0 - HOUR);
        let mut dead = up("dead-ari", T0 - HOUR);
        let window = |tls: &mut crate::outcome::TlsReport| {
            tls.ari = Some(AriReport {
                cert_id: "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE".into(),
                url: "https://ca.example/ari/aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE".into(),
                window_start: Some(datetime!(2026-12-20 00:00 UTC)),
                window_end: Some(datetime!(2026-12-22 00:00 UTC)),
                explanation_url: Some("https://ca.example/incident".into()),
                error: None,
                fetched_at: Some(T0 - HOUR),
            });
            tls.revocation = vec![CrlReport {
                subject: "CN=site.example.com".into(),
                url: "http://crl.example/1.crl".into(),
                status: CrlStatus::Revoked,
                revoked_at: Some(datetime!(2026-11-30 08:00 UTC)),
                reason: Some("key_compromise".into()),
                next_update: None,
                detail: None,
            }];
        };
        window(site.tls.as_mut().unwrap());
        let tls = dead.tls.as_mut().unwrap();
        tls.ari = Some(AriReport {
            cert_id: "a.b".into(),
            url: "https://ca.example/ari/a.b".into(),
            window_start: None,
            window_end: None,
            explanation_url: None,
            error: Some("https://ca.example/ari/a.b: HTTP 503".into()),
            fetched_at: Some(T0 - HOUR),
        });
        let report = build(&ReportInput {
            now: T0,
            host: "probe-1.example.net",
            latest: &[site, dead],
            states: &[],
            changes: &[],
            silences: &[],
            health: Health::default(),
            escape_hatches: &[],
            envs: &BTreeMap::new(),
            zone: Default::default(),
        });
        let text = text(&report);
        assert!(
            text.contains(
                "2026-12-20 00:00 UTC to 2026-12-22 00:00 UTC (see https://ca.example/incident)"
            ),
            "{text}"
        );
        assert!(
            text.contains("revoked on 2026-11-30 08:00 UTC (key_compromise)"),
            "{text}"
        );
        assert!(
            text.contains("unknown: https://ca.example/ari/a.b: HTTP 503"),
            "{text}"
        );
    }

    #[test]
    fn domains_stand_beside_the_certificates_soonest_expiry_first() {
        use crate::outcome::{DomainReport, Failure};
        let domain = |name: &str, expires: Option<OffsetDateTime>, status: Status| {
            let mut o = up(name, T0 - HOUR);
            o.kind = crate::check::KindName::Domain;
            o.tls = None;
            o.status = status;
            o.domain = Some(Box::new(DomainReport {
                domain: format!("{name}.com"),
                expires_at: expires,
                registrar: expires.map(|_| "Example Registrar, Inc.".to_string()),
                statuses: vec!["client transfer prohibited".to_string()],
                answered_at: expires.map(|_| T0 - HOUR),
                ..DomainReport::default()
            }));
            o
        };
        let mut lapsing = domain("lapsing", Some(T0 + time::Duration::days(5)), Status::Down);
        lapsing.failures = vec![Failure {
            assertion: Assertion::DomainExpiry,
            expected: ">= 7 days".to_string(),
            observed: "5 days".to_string(),
            message: "lapsing.com expires in 5 days (2026-12-06)".to_string(),
        }];
        let mut unknown = domain("unknown", None, Status::Warn);
        unknown.failures = vec![Failure {
            assertion: Assertion::DomainRdap,
            expected: "the registry's RDAP answer".to_string(),
            observed: "no RDAP service for .io: set rdap_url".to_string(),
            message: "unknown.io: no RDAP service for .io: set rdap_url".to_string(),
        }];
        let latest = [
            up("site", T0 - HOUR),
            unknown,
            domain("brand", Some(T0 + time::Duration::days(300)), Status::Up),
            lapsing,
        ];
        let envs: BTreeMap<String, String> = [("brand".to_string(), "prod".to_string())].into();
        let report = build(&ReportInput {
            now: T0,
            host: "probe-1.example.net",
            latest: &latest,
            states: &[],
            changes: &[],
            silences: &[],
            health: Health::default(),
            escape_hatches: &[],
            envs: &envs,
            zone: Default::default(),
        });
        let order: Vec<&str> = report.domains.iter().map(|r| r.check.as_str()).collect();
        assert_eq!(order, ["lapsing", "brand", "unknown"]);
        assert_eq!(report.domains[0].days_left, Some(5));
        assert_eq!(report.domains[1].env.as_deref(), Some("prod"));
        assert_eq!(
            report.certificates.len(),
            1,
            "a domain serves no certificate"
        );
        let text = text(&report);
        let certificates = text.find("Certificates, soonest expiry first").unwrap();
        let domains = text.find("Domains, soonest expiry first").unwrap();
        let changes = text.find("Certificate changes in the last 24 h").unwrap();
        assert!(certificates < domains && domains < changes, "{text}");
        assert!(
            text.contains("lapsing.com expires in 5 days (2026-12-06)"),
            "{text}"
        );
        assert!(
            text.contains("no RDAP service for .io: set rdap_url"),
            "{text}"
        );
        assert!(text.contains("Example Registrar, Inc."), "{text}");
        let json = serde_json::to_string(&report).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back.domains, report.domains);
        // Without domain checks the section is not there at all.
        let plain = build(&ReportInput {
            now: T0,
            host: "probe-1.example.net",
            latest: &latest[..1],
            states: &[],
            changes: &[],
            silences: &[],
            health: Health::default(),
            escape_hatches: &[],
            envs: &BTreeMap::new(),
            zone: Default::default(),
        });
        assert!(!render::text(&plain).contains("Domains"));
    }

    #[test]
    fn an_empty_report_still_proves_vigie_is_alive() {
        let report = build(&ReportInput {
            now: T0,
            host: "probe-1.example.net",
            latest: &[],
            states: &[],
            changes: &[],
            silences: &[],
            health: Health::default(),
            escape_hatches: &[],
            envs: &BTreeMap::new(),
            zone: Default::default(),
        });
        let text = text(&report);
        assert!(text.contains("No check serves a certificate."));
        assert!(text.contains("uptime           not measured"), "{text}");
        assert_eq!(
            subject(&report),
            "[vigie] daily report from probe-1.example.net: all checks up"
        );
    }
}
