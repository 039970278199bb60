//! What `vigie check` prints: a table for people, the DESIGN.md JSON for
//! scripts. Pure functions from outcomes to text.
//!
//! Every cell is escaped for the terminal (`sanitize::escape_controls`):
//! new outcomes are sanitised where they were captured, but a store or a
//! daemon written by an older vigie may still hold a certificate subject
//! with escape sequences in it. `main` passes all output through
//! [`sanitize::terminal`] as well.

use std::fmt::Write;

use serde::Serialize;

use crate::cert;
use crate::outcome::Outcome;
use crate::sanitize;

#[derive(Serialize)]
struct Report<'a> {
    checks: &'a [Outcome],
}

/// `{"checks": [...]}`, pretty-printed, safe for a terminal.
pub fn json(outcomes: &[Outcome]) -> String {
    let text = serde_json::to_string_pretty(&Report { checks: outcomes })
        .unwrap_or_else(|err| format!("{{\"error\": \"cannot encode outcomes: {err}\"}}"));
    sanitize::terminal_json(&text)
}

/// One line per check: name, status, time, leaf days left, leaf issuer,
/// first failure in plain words.
pub fn table(outcomes: &[Outcome]) -> String {
    let rows: Vec<[String; 6]> = outcomes
        .iter()
        .map(|o| row(o).map(|cell| sanitize::escape_controls(&cell)))
        .collect();
    let header = ["NAME", "STATUS", "TIME", "DAYS", "ISSUER", "REASON"].map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            match i {
                5 => line.push_str(cell),
                _ => {
                    let _ = write!(line, "{cell:<width$}  ");
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn row(outcome: &Outcome) -> [String; 6] {
    let leaf = outcome.leaf();
    [
        outcome.name.clone(),
        outcome.status.to_string().to_uppercase(),
        format!("{:.0} ms", outcome.duration_ms),
        leaf.map(|c| c.days_left.to_string())
            .unwrap_or_else(|| "-".into()),
        leaf.map(|c| cert::common_name(&c.issuer).to_string())
            .unwrap_or_else(|| "-".into()),
        outcome
            .first_failure()
            .map(|f| match outcome.failures.len() {
                1 => f.message.clone(),
                n => format!("{} (+{} more)", f.message, n - 1),
            })
            .unwrap_or_default(),
    ]
}

/// `vigie history`: one line per stored result, oldest first.
pub fn history_table(outcomes: &[Outcome]) -> String {
    let mut out = String::from("STARTED (UTC)            STATUS  TIME      REASON\n");
    for o in outcomes {
        let reason = o
            .first_failure()
            .map(|f| sanitize::escape_controls(&f.message))
            .unwrap_or_default();
        let line = format!(
            "{:<23}  {:<6}  {:<8}  {reason}",
            crate::when::minute(o.started_at)
                .trim_end_matches(" UTC")
                .to_string()
                + &format!(":{:02}", o.started_at.second()),
            o.status.to_string().to_uppercase(),
            format!("{:.0} ms", o.duration_ms),
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
