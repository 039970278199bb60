//! The recorder task: every judged outcome, as the scheduler hands it over,
//! is stored, kept as the check's latest, narrated in the log when it says
//! something new, and passed to the alerter.
//!
//! The log is what an operator running `vigie run` in a terminal reads:
//! each check's first result and every change of status, one INFO line
//! each with the reason (`site DOWN: cannot resolve www.example.com`,
//! `site UP again after 3m`). Routine "still up" results stay out of INFO.

use std::collections::HashMap;
use std::sync::Arc;

use time::OffsetDateTime;
use tokio::sync::mpsc;

use crate::health::Health;
use crate::outcome::{Outcome, Status};
use crate::store::{Latest, Store};
use crate::supervise::{Feed, Stage};

/// What every start of the recorder is built from.
#[derive(Clone)]
pub struct RecorderParts {
    pub store: Arc<dyn Store>,
    pub health: Arc<Health>,
    pub latest: Latest,
    pub alerter: Feed<Arc<Outcome>>,
}

/// Runs until the scheduler's side of `outcomes` closes.
pub async fn run(parts: RecorderParts, outcomes: &mut mpsc::Receiver<Outcome>, stage: Arc<Stage>) {
    let mut narrator = Narrator::from_latest(&parts.latest);
    while let Some(mut outcome) = outcomes.recv().await {
        // Headers and body served evaluation only; what is kept from here
        // on (stored, cached for the API, alerted on) never shows them, and
        // 10,000 checks' worth is megabytes.
        if let Some(http) = outcome.http.as_mut() {
            http.headers = Vec::new();
            http.body = Vec::new();
        }
        match parts.store.append(&outcome) {
            Ok(()) => {
                parts.health.recorded();
                if parts.health.store_ok() {
                    tracing::info!("the store takes writes again; history resumes");
                }
            }
            Err(err) => {
                let first = parts.health.store_failing().is_none();
                parts.health.store_failed(&err.to_string(), &err.brief());
                match first {
                    true => {
                        tracing::error!(check = %outcome.name, error = %err, "cannot store results; probing and paging go on, history is not kept until the store takes writes again")
                    }
                    false => {
                        tracing::debug!(check = %outcome.name, error = %err, "cannot store the result")
                    }
                }
            }
        }
        if let Some(line) = narrator.tell(&outcome) {
            tracing::info!("{line}");
        }
        let outcome = Arc::new(outcome);
        parts.latest.record(outcome.clone());
        if parts.alerter.send(outcome).await.is_err() {
            tracing::error!(
                "the alerter's channel is closed; results are stored but not alerted on"
            );
        }
        stage.took();
    }
}

/// Each check's last status and since when, to log only what is news.
struct Narrator {
    last: HashMap<String, (Status, OffsetDateTime)>,
}

impl Narrator {
    /// Starts from the stored latest results, so that a restart does not
    /// announce every check again as a first result.
    fn from_latest(latest: &Latest) -> Self {
        let last = latest
            .all()
            .into_iter()
            .map(|o| (o.name.clone(), (o.status, o.started_at)))
            .collect();
        Narrator { last }
    }

    /// The line to log for `outcome`, if it is news: the check's first
    /// result, or a change of status.
    fn tell(&mut self, outcome: &Outcome) -> Option<String> {
        let reason = || {
            outcome
                .first_failure()
                .map(|f| format!(": {}", f.message))
                .unwrap_or_default()
        };
        let name = &outcome.name;
        let status = outcome.status.to_string().to_uppercase();
        let line = match self.last.get(name).copied() {
            None => format!("{name} {status}{} (first result)", reason()),
            Some((before, _)) if before == outcome.status => return None,
            Some((_, since)) if outcome.status == Status::Up => {
                let after = (outcome.started_at - since)
                    .try_into()
                    .map(|d: std::time::Duration| {
                        humantime::format_duration(std::time::Duration::from_secs(d.as_secs()))
                            .to_string()
                    })
                    .unwrap_or_else(|_| "a while".to_string());
                format!("{name} UP again after {after}")
            }
            Some(_) => format!("{name} {status}{}", reason()),
        };
        self.last
            .insert(name.clone(), (outcome.status, outcome.started_at));
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::macros::datetime;

    use super::*;
    use crate::check::KindName;
    use crate::outcome::{Assertion, Failure};

    const T0: OffsetDateTime = datetime!(2026-12-01 03:00:00 UTC);

    fn outcome(status: Status, minutes: u64) -> Outcome {
        let failures = match status {
            Status::Up => Vec::new(),
            _ => vec![Failure {
                assertion: Assertion::Dns,
                expected: "an address".into(),
                observed: "NXDOMAIN".into(),
                message: "cannot resolve www.example.com: no such host".into(),
            }],
        };
        Outcome {
            name: "site".into(),
            kind: KindName::Http,
            target: "https://www.example.com/".into(),
            status,
            started_at: T0 + Duration::from_secs(60 * minutes),
            duration_ms: 3.0,
            failures,
            probe_error: None,
            http: None,
            tls: None,
            cors: None,
            dns: None,
        }
    }

    #[test]
    fn first_results_and_changes_are_told_routine_results_are_not() {
        let mut narrator = Narrator {
            last: HashMap::new(),
        };
        let lines: Vec<Option<String>> = [
            outcome(Status::Up, 0),
            outcome(Status::Up, 1),
            outcome(Status::Down, 2),
            outcome(Status::Down, 3),
            outcome(Status::Up, 5),
            outcome(Status::Up, 6),
        ]
        .iter()
        .map(|o| narrator.tell(o))
        .collect();
        assert_eq!(
            lines,
            [
                Some("site UP (first result)".to_string()),
                None,
                Some("site DOWN: cannot resolve www.example.com: no such host".to_string()),
                None,
                Some("site UP again after 3m".to_string()),
                None,
            ]
        );
    }

    #[test]
    fn a_first_result_that_fails_says_why() {
        let mut narrator = Narrator {
            last: HashMap::new(),
        };
        assert_eq!(
            narrator.tell(&outcome(Status::Down, 0)).as_deref(),
            Some("site DOWN: cannot resolve www.example.com: no such host (first result)")
        );
    }
}
