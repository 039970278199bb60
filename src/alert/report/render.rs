//! The daily report in words: plain text (`vigie report`), HTML, and the
//! mail that carries both.

use std::time::Duration;

use time::OffsetDateTime;

use super::{
    CertChange, CertRow, DomainRow, Health, IncidentRow, IssuerFlag, Leaf, Problem, Renewal,
    Report, GROUP_BY,
};
use crate::alert::layout::{self, days_left, Block, Doc, Item, Tone};
use crate::alert::render::{domain, Email};
use crate::alert::silence::Silence;
use crate::cert;
use crate::outcome::Status;
use crate::when::span;
use crate::when::Zone;

/// The report as a mail to `to`. Its Message-ID names the report's time
/// to the second, so that `vigie report --send` next to the scheduled one
/// is a distinct message, not a duplicate a client would hide. A report
/// starts no thread: each day stands alone.
pub fn email(report: &Report, to: &[String]) -> Email {
    let doc = doc(report);
    let t = report.generated_at;
    Email {
        subject: layout::one_line(&subject(report)),
        text: layout::text(&doc),
        html: layout::html(&doc),
        message_id: format!(
            "<vigie.report.{}@{}>",
            crate::clock::compact_utc(t),
            domain(&report.host)
        ),
        in_reply_to: None,
        references: Vec::new(),
        to: to.to_vec(),
    }
}

/// The report as plain text (`vigie report`).
pub fn text(report: &Report) -> String {
    layout::text(&doc(report))
}

/// The report as HTML.
pub fn html(report: &Report) -> String {
    layout::html(&doc(report))
}

/// "[vigie] daily report from HOST: 1 down, 1 warn; next expiry site in 5
/// days": the state of things, readable from the inbox list.
pub(super) fn subject(report: &Report) -> String {
    let down = count(report, Status::Down);
    let warn = count(report, Status::Warn);
    let state = match (down, warn) {
        (0, 0) => "all checks up".to_string(),
        (d, 0) => format!("{d} down"),
        (0, w) => format!("{w} warn"),
        (d, w) => format!("{d} down, {w} warn"),
    };
    let next = match report.certificates.first() {
        Some(row) => format!(
            "; next expiry {} ({})",
            row.check,
            days_left(row.not_after, report.generated_at)
        ),
        None => String::new(),
    };
    format!("[vigie] daily report from {}: {state}{next}", report.host)
}

fn count(report: &Report, status: Status) -> usize {
    report
        .problems
        .iter()
        .filter(|p| p.status == status)
        .count()
}

/// The sections in the order an on-call person acts on them: what will
/// expire, what changed, what is broken now, what is muted, and last
/// whether vigie itself is healthy (the report's proof of life).
fn doc(report: &Report) -> Doc {
    let now = report.generated_at;
    let z = report.zone;
    let mut blocks = Vec::new();
    certificate_blocks(report, &mut blocks);
    domain_blocks(report, &mut blocks);
    blocks.push(Block::Section(
        "Certificate changes in the last 24 h".to_string(),
    ));
    // Empty sections say "None." rather than vanish: a missing section
    // would read as "not checked".
    match report.changes.is_empty() {
        true => blocks.push(Block::Para("None.".to_string())),
        false => blocks.push(Block::Items(
            report
                .changes
                .iter()
                .map(|c| change_item(c, report.zone))
                .collect(),
        )),
    }
    blocks.push(Block::Section("Checks down or warning".to_string()));
    match report.problems.is_empty() {
        true => blocks.push(Block::Para("None: every check is up.".to_string())),
        false => blocks.push(Block::Items(
            report
                .problems
                .iter()
                .map(|p| problem_item(p, now, report.zone))
                .collect(),
        )),
    }
    incident_blocks(report, &mut blocks);
    blocks.push(Block::Section("Active silences".to_string()));
    match report.silences.is_empty() {
        true => blocks.push(Block::Para("None.".to_string())),
        false => blocks.push(Block::Items(
            report
                .silences
                .iter()
                .map(|s| silence_item(s, report.zone))
                .collect(),
        )),
    }
    // Listed every day while in use, so that a `danger_` key added for an
    // emergency is not forgotten there.
    if !report.escape_hatches.is_empty() {
        blocks.push(Block::Section(
            "Checks using a danger_ escape hatch".to_string(),
        ));
        blocks.push(Block::Fields(
            report
                .escape_hatches
                .iter()
                .map(|h| (h.check.clone(), h.key.clone()))
                .collect(),
        ));
    }
    blocks.push(Block::Section("vigie's own health".to_string()));
    health_blocks(&report.health, report.zone, &mut blocks);
    Doc {
        title: format!("vigie daily report from {}, {}", report.host, z.minute(now)),
        tone: Tone::Neutral,
        blocks,
        footer: vec![format!("vigie on {}", report.host)],
    }
}

fn certificate_blocks(report: &Report, blocks: &mut Vec<Block>) {
    let now = report.generated_at;
    let z = report.zone;
    blocks.push(Block::Section(
        "Certificates, soonest expiry first".to_string(),
    ));
    if report.certificates.is_empty() && report.unseen.is_empty() {
        blocks.push(Block::Para("No check serves a certificate.".to_string()));
        return;
    }
    // One table per env, as on the overview ("no env" last), when any
    // check has one; soonest expiry first within each.
    let grouped = report.certificates.iter().any(|row| row.env.is_some());
    let mut groups: std::collections::BTreeMap<(bool, String), Vec<&CertRow>> = Default::default();
    for row in &report.certificates {
        let key = match &row.env {
            Some(env) => (false, format!("{GROUP_BY} = {env}")),
            None => (true, format!("no {GROUP_BY}")),
        };
        groups.entry(key).or_default().push(row);
    }
    let no_group = (true, format!("no {GROUP_BY}"));
    if !report.unseen.is_empty() {
        groups.entry(no_group.clone()).or_default();
    }
    for (key, rows) in &groups {
        if grouped {
            blocks.push(Block::Heading(key.1.clone()));
        }
        let marked = rows
            .iter()
            .enumerate()
            .filter(|(_, row)| matches!(row.renewal, Renewal::Expired | Renewal::Overdue))
            .map(|(i, _)| i)
            .collect();
        let mut cells: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                vec![
                    row.check.clone(),
                    row.host.clone(),
                    row.days_left.to_string(),
                    z.minute(row.not_after),
                    renewal_cell(row.renewal),
                    issuer_cell(row),
                    row.key_exchange.clone().unwrap_or_else(|| "-".to_string()),
                ]
            })
            .collect();
        // A check whose latest probe read no certificate keeps its row, last
        // and marked "?": a certificate vigie cannot read can still expire.
        if *key == no_group {
            cells.extend(report.unseen.iter().map(|u| {
                vec![
                    u.check.clone(),
                    host_of(&u.target),
                    "?".to_string(),
                    "-".to_string(),
                    "unknown".to_string(),
                    format!("no certificate seen: {}", u.reason),
                    "-".to_string(),
                ]
            }));
        }
        blocks.push(Block::Table {
            head: [
                "check",
                "host",
                "days",
                "not after",
                "renewal",
                "issuer",
                "key exchange",
            ]
            .map(String::from)
            .to_vec(),
            rows: cells,
            marked,
        });
    }
    let notes: Vec<Item> = report
        .certificates
        .iter()
        .filter_map(|row| {
            let mut fields = Vec::new();
            if let Some(problem) = &row.trust_problem {
                fields.push(("untrusted".to_string(), problem.clone()));
            }
            if let Some(ari) = &row.ari {
                fields.push((
                    "renewal window (ARI)".to_string(),
                    ari_note(ari, report.zone),
                ));
            }
            for crl in &row.revocation {
                fields.push(("revocation (CRL)".to_string(), crl_note(crl, report.zone)));
            }
            if let Some(first) = &row.expires_first {
                fields.push((
                    "expires first".to_string(),
                    format!(
                        "{} on {} ({})",
                        first.subject,
                        z.minute(first.not_after),
                        days_left(first.not_after, now)
                    ),
                ));
            }
            (!fields.is_empty()).then(|| Item {
                title: row.check.clone(),
                fields,
            })
        })
        .collect();
    if !notes.is_empty() {
        blocks.push(Block::Items(notes));
    }
}

/// "Domains, soonest expiry first", beside the certificates: one table,
/// the rows of checks not up marked, then each such check's reason. Left
/// out when there is no domain check (it is not a thing vigie forgot to
/// look at).
fn domain_blocks(report: &Report, blocks: &mut Vec<Block>) {
    if report.domains.is_empty() {
        return;
    }
    let z = report.zone;
    blocks.push(Block::Section("Domains, soonest expiry first".to_string()));
    let marked = report
        .domains
        .iter()
        .enumerate()
        .filter(|(_, row)| row.status != Status::Up)
        .map(|(i, _)| i)
        .collect();
    let rows = report
        .domains
        .iter()
        .map(|row: &DomainRow| {
            let check = match &row.env {
                Some(env) => format!("{} ({GROUP_BY} = {env})", row.check),
                None => row.check.clone(),
            };
            vec![
                check,
                row.domain.clone(),
                row.days_left.map_or("?".to_string(), |d| d.to_string()),
                row.expires_at.map_or("-".to_string(), |t| z.minute(t)),
                row.registrar.clone().unwrap_or_else(|| "-".to_string()),
                match row.statuses.is_empty() {
                    true => "-".to_string(),
                    false => row.statuses.join(", "),
                },
            ]
        })
        .collect();
    blocks.push(Block::Table {
        head: [
            "check",
            "domain",
            "days",
            "expires",
            "registrar",
            "registry status",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        marked,
    });
    let notes: Vec<Item> = report
        .domains
        .iter()
        .filter(|row| row.status != Status::Up)
        .filter_map(|row| {
            let note = row.note.clone()?;
            let mut fields = vec![(row.status.to_string(), note)];
            if let Some(at) = row.answered_at {
                fields.push(("registry's answer".to_string(), z.minute(at)));
            }
            Some(Item {
                title: row.check.clone(),
                fields,
            })
        })
        .collect();
    if !notes.is_empty() {
        blocks.push(Block::Items(notes));
    }
}

/// The renewal column: the two states that need someone now in capitals
/// (their rows are also marked).
fn renewal_cell(renewal: Renewal) -> String {
    match renewal {
        Renewal::Expired => "EXPIRED".to_string(),
        Renewal::Overdue => "OVERDUE".to_string(),
        other => other.as_str().to_string(),
    }
}

/// "Incidents in the last 24 h": each one opened, resolved or still open,
/// how long, and its first failure; open ones marked.
fn incident_blocks(report: &Report, blocks: &mut Vec<Block>) {
    blocks.push(Block::Section("Incidents in the last 24 h".to_string()));
    if report.incidents.is_empty() {
        blocks.push(Block::Para("None.".to_string()));
        return;
    }
    let marked = report
        .incidents
        .iter()
        .enumerate()
        .filter(|(_, i)| i.resolved_at.is_none())
        .map(|(n, _)| n)
        .collect();
    let rows = report
        .incidents
        .iter()
        .map(|i| incident_row(i, report.zone))
        .collect();
    blocks.push(Block::Table {
        head: ["check", "opened", "resolved", "lasted", "first failure"]
            .map(String::from)
            .to_vec(),
        rows,
        marked,
    });
}

fn incident_row(incident: &IncidentRow, z: Zone) -> Vec<String> {
    let lasted = span(time::Duration::seconds(
        i64::try_from(incident.lasted_seconds).unwrap_or(i64::MAX),
    ));
    let first_failure = match &incident.held {
        Some(held) => format!("{} (not paged: {held})", incident.first_failure),
        None => incident.first_failure.clone(),
    };
    let check = match &incident.env {
        Some(env) => format!("{} ({GROUP_BY} = {env})", incident.check),
        None => incident.check.clone(),
    };
    vec![
        check,
        z.minute(incident.since),
        incident
            .resolved_at
            .map_or("still open".to_string(), |t| z.minute(t)),
        lasted,
        first_failure,
    ]
}

/// "2027-01-01 00:00 UTC to 2027-01-03 00:00 UTC (see URL)", or why the
/// CA's window is unknown.
fn ari_note(ari: &crate::outcome::AriReport, z: Zone) -> String {
    let (Some(start), Some(end)) = (ari.window_start, ari.window_end) else {
        let why = ari.error.as_deref().unwrap_or("no answer");
        return format!("unknown: {why}");
    };
    let see = ari
        .explanation_url
        .as_deref()
        .map(|url| format!(" (see {url})"))
        .unwrap_or_default();
    format!("{} to {}{see}", z.minute(start), z.minute(end))
}

/// "revoked on DATE (reason)", or why the CRL could not say.
fn crl_note(crl: &crate::outcome::CrlReport, z: Zone) -> String {
    use crate::outcome::CrlStatus;
    let what = match crl.status {
        CrlStatus::Revoked => format!(
            "{} revoked on {} ({})",
            cert::common_name(&crl.subject),
            crl.revoked_at.map(|t| z.minute(t)).unwrap_or_default(),
            crl.reason.as_deref().unwrap_or("no reason given")
        ),
        CrlStatus::Good => "not revoked".to_string(),
        CrlStatus::Unavailable => "CRL unavailable".to_string(),
        CrlStatus::Stale => "CRL stale".to_string(),
        CrlStatus::Invalid => "CRL rejected".to_string(),
    };
    match &crl.detail {
        Some(detail) => format!("{what}: {detail}"),
        None => what,
    }
}

/// The issuer's CN, flagged when browsers would refuse it. Full DNs do not
/// fit a table row; they are in the JSON and in the "untrusted" note.
fn issuer_cell(row: &CertRow) -> String {
    let name = cert::common_name(&row.issuer);
    match row.issuer_flag {
        Some(IssuerFlag::Staging) => format!("{name} [STAGING, untrusted]"),
        Some(IssuerFlag::Untrusted) => format!("{name} [untrusted]"),
        None => name.to_string(),
    }
}

fn host_of(target: &str) -> String {
    url::Url::parse(target)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| target.to_string())
}

fn change_item(c: &CertChange, z: Zone) -> Item {
    let leaf = |l: &Leaf| {
        format!(
            "{} from {}, until {}, sha256 {}",
            l.subject,
            cert::common_name(&l.issuer),
            z.minute(l.not_after),
            // 64 bits tell two leaves apart at a glance; the JSON has all.
            l.sha256.get(..16).unwrap_or(&l.sha256)
        )
    };
    Item {
        title: format!("{}: {} at {}", c.check, c.kind.as_str(), z.minute(c.at)),
        fields: vec![
            ("before".to_string(), leaf(&c.before)),
            ("after".to_string(), leaf(&c.after)),
        ],
    }
}

fn problem_item(p: &Problem, now: OffsetDateTime, z: Zone) -> Item {
    let mut fields = vec![("target".to_string(), p.target.clone())];
    if let Some(since) = p.since {
        fields.push((
            "since".to_string(),
            format!("{} ({})", z.minute(since), span(now - since)),
        ));
    }
    // Without a state (a check vigie has not tracked yet) there is
    // nothing to say about alerting.
    if p.status == Status::Down && (p.firing || p.since.is_some()) {
        let paging = match p.firing {
            true => "incident open",
            false => "below the failure threshold",
        };
        fields.push(("alert".to_string(), paging.to_string()));
    }
    if let Some(held) = &p.held {
        fields.push(("not paged".to_string(), held.clone()));
    }
    Item {
        title: format!("{} {}: {}", p.check, p.status, p.headline),
        fields,
    }
}

fn silence_item(s: &Silence, z: Zone) -> Item {
    let mut fields = vec![
        ("until".to_string(), z.minute(s.until)),
        ("created".to_string(), z.minute(s.created)),
    ];
    if !s.reason.is_empty() {
        fields.push(("reason".to_string(), s.reason.clone()));
    }
    Item {
        title: s.pattern.clone(),
        fields,
    }
}

fn health_blocks(health: &Health, z: Zone, blocks: &mut Vec<Block>) {
    let unknown = || "not measured".to_string();
    // `None` means the daemon did not measure it, except for replication,
    // where it means there is none to measure.
    let fields = vec![
        (
            "uptime".to_string(),
            health
                .uptime
                .map_or_else(unknown, |d| span(time_duration(d))),
        ),
        (
            "outbox backlog".to_string(),
            health
                .outbox_backlog
                .map_or_else(unknown, |n| format!("{n} messages")),
        ),
        (
            "dead letters".to_string(),
            match &health.dead_letters {
                None => unknown(),
                Some(list) if list.is_empty() => "none".to_string(),
                Some(list) => format!("{} (listed below)", list.len()),
            },
        ),
        (
            "replication lag".to_string(),
            health
                .replication_lag
                .map_or("not configured".to_string(), |d| span(time_duration(d))),
        ),
    ];
    blocks.push(Block::Fields(fields));
    if let Some(letters) = health.dead_letters.as_ref().filter(|l| !l.is_empty()) {
        blocks.push(Block::Items(
            letters
                .iter()
                .map(|l| Item {
                    title: format!("{}: {}", z.minute(l.at), l.subject),
                    fields: vec![
                        ("to".to_string(), l.to.join(", ")),
                        ("refused".to_string(), l.error.clone()),
                    ],
                })
                .collect(),
        ));
    }
}

fn time_duration(d: Duration) -> time::Duration {
    time::Duration::try_from(d).unwrap_or(time::Duration::MAX)
}
