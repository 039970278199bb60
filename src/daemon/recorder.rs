//! The recorder task: every judged outcome, as the scheduler hands it over,
//! is stored, kept as the check's latest, narrated in the log when it says
//! something new, and passed to the alerter.
//!
//! The log is what an operator running `vigie run` in a terminal, or
//! `journalctl -u vigie`, reads: after every start each check's first
//! result (`site UP`, `api still DOWN since 2026-12-01 19:36 UTC: HTTP
//! 500`), then every change of status, one line each with the reason
//! (`site DOWN: cannot resolve www.example.com`, `site UP again after
//! 3m`). A check down is a WARN line, the rest INFO; routine results stay
//! out.

use std::collections::{HashMap, HashSet};
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
    /// Since when each check that was failing at start had been failing
    /// (the stored alert states' streaks), for the journal's first lines.
    pub down_since: Arc<HashMap<String, OffsetDateTime>>,
}

/// Runs until the scheduler's side of `outcomes` closes.
pub async fn run(parts: RecorderParts, outcomes: &mut mpsc::Receiver<Outcome>, stage: Arc<Stage>) {
    let mut narrator = Narrator::from_latest(&parts.latest, &parts.down_since);
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
        match narrator.tell(&outcome) {
            Some(Told { warn: true, line }) => tracing::warn!("{line}"),
            Some(Told { warn: false, line }) => tracing::info!("{line}"),
            None => {}
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
    /// Checks whose first result since this start has been told: the
    /// journal after a restart says where every check stands, a check
    /// still down included, but not every routine result after that.
    told: HashSet<String>,
}

/// One line for the journal and its level: a check going (or still) down
/// is a WARN, so that `journalctl -p warning` shows every outage.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Told {
    warn: bool,
    line: String,
}

impl Narrator {
    /// Starts from the stored latest results and, for a check that was
    /// failing, the start of its streak (`down_since`, from the alert
    /// states), so that a check still down after a restart says since when.
    fn from_latest(latest: &Latest, down_since: &HashMap<String, OffsetDateTime>) -> Self {
        let last = latest
            .all()
            .into_iter()
            .map(|o| {
                let since = match o.status {
                    Status::Down => down_since.get(&o.name).copied().unwrap_or(o.started_at),
                    _ => o.started_at,
                };
                (o.name.clone(), (o.status, since))
            })
            .collect();
        Narrator {
            last,
            told: HashSet::new(),
        }
    }

    /// The line to log for `outcome`, if it is news: the check's first
    /// result since this start, or a change of status.
    fn tell(&mut self, outcome: &Outcome) -> Option<Told> {
        let reason = || {
            outcome
                .first_failure()
                .map(|f| format!(": {}", f.message))
                .unwrap_or_default()
        };
        let name = &outcome.name;
        let status = outcome.status.to_string().to_uppercase();
        let first = self.told.insert(name.clone());
        let before = self.last.get(name).copied();
        let since = match before {
            Some((was, since)) if was == outcome.status => since,
            _ => outcome.started_at,
        };
        let line = match before {
            Some((Status::Down, since)) if outcome.status == Status::Down && first => format!(
                "{name} still DOWN since {}{}",
                crate::when::minute(since),
                reason()
            ),
            Some((was, _)) if was == outcome.status && !first => return None,
            Some((Status::Down, since)) if outcome.status == Status::Up => {
                let after = crate::when::span(outcome.started_at - since);
                format!("{name} UP again after {after}")
            }
            _ => format!("{name} {status}{}", reason()),
        };
        self.last.insert(name.clone(), (outcome.status, since));
        Some(Told {
            warn: outcome.status == Status::Down,
            line,
        })
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
            upload: None,
            smtp: None,
            domain: None,
        }
    }

    fn narrator() -> Narrator {
        Narrator {
            last: HashMap::new(),
            told: HashSet::new(),
        }
    }

    fn lines(narrator: &mut Narrator, outcomes: &[Outcome]) -> Vec<Option<(bool, String)>> {
        outcomes
            .iter()
            .map(|o| narrator.tell(o).map(|t| (t.warn, t.line)))
            .collect()
    }

    #[test]
    fn first_results_and_changes_are_told_routine_results_are_not() {
        let told = lines(
            &mut narrator(),
            &[
                outcome(Status::Up, 0),
                outcome(Status::Up, 1),
                outcome(Status::Down, 2),
                outcome(Status::Down, 3),
                outcome(Status::Up, 5),
                outcome(Status::Up, 6),
            ],
        );
        let down = "site DOWN: cannot resolve www.example.com: no such host";
        assert_eq!(
            told,
            [
                Some((false, "site UP".to_string())),
                None,
                Some((true, down.to_string())),
                None,
                Some((false, "site UP again after 3 min".to_string())),
                None,
            ]
        );
    }

    #[test]
    fn after_a_restart_every_check_says_where_it_stands_once() {
        // Stored before the restart: site down since 03:02, its streak
        // known from the alert state; app up.
        let mut narrator = Narrator {
            last: HashMap::from([
                (
                    "site".to_string(),
                    (Status::Down, T0 + Duration::from_secs(120)),
                ),
                ("app".to_string(), (Status::Up, T0)),
            ]),
            told: HashSet::new(),
        };
        let mut app = outcome(Status::Up, 10);
        app.name = "app".into();
        let told = lines(
            &mut narrator,
            &[
                outcome(Status::Down, 10),
                app.clone(),
                outcome(Status::Down, 11),
                app,
            ],
        );
        assert_eq!(
            told,
            [
                Some((
                    true,
                    "site still DOWN since 2026-12-01 03:02 UTC: cannot resolve www.example.com: no such host"
                        .to_string()
                )),
                Some((false, "app UP".to_string())),
                None,
                None,
            ]
        );
    }
}
