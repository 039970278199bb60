//! [`Policy`]: how one check is alerted on, once its overrides are applied.
//!
//! Owns the merge of `[alerting]` with a check's own settings and nothing
//! else: the state machine reads a `Policy` and never the config, so the
//! config can change shape without touching the machine, and a policy can
//! change between two probes (a reload) without corrupting any state.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::config::AlertingConfig;

/// The alerting settings of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Consecutive `down` probes before the incident fires; at least 1.
    pub failure_threshold: u32,
    /// Consecutive probes that are not `down` (up or warn) before it
    /// resolves; at least 1.
    pub recovery_threshold: u32,
    /// Reminder interval while firing; zero means no reminders.
    pub repeat: Duration,
    /// Recipients, as mailbox strings (`Name <addr>` or `addr`).
    pub to: Vec<String>,
    /// `false`: the check is tracked (state, history, report) but never
    /// pages, as if silenced for good.
    pub page: bool,
    /// The check's labels, copied into every event so that a mail can be
    /// rendered from its events alone.
    pub labels: BTreeMap<String, String>,
}

/// What a check may override of `[alerting]` (`[check.alert]`).
pub use crate::check::AlertOverrides as Overrides;

impl Policy {
    /// `[alerting]` with a check's overrides and labels applied.
    pub fn new(
        alerting: &AlertingConfig,
        overrides: &Overrides,
        labels: &BTreeMap<String, String>,
    ) -> Self {
        let to = overrides.to.as_ref().unwrap_or(&alerting.to);
        Self {
            // The config already refuses 0; the clamp keeps a hand-built
            // policy from firing on a check that never failed.
            failure_threshold: overrides
                .failure_threshold
                .unwrap_or(alerting.failure_threshold)
                .max(1),
            recovery_threshold: overrides
                .recovery_threshold
                .unwrap_or(alerting.recovery_threshold)
                .max(1),
            repeat: overrides.repeat.unwrap_or(alerting.repeat),
            to: to.iter().map(ToString::to_string).collect(),
            // `[alerting] enabled = false` holds every page, forever.
            page: alerting.enabled && overrides.page.unwrap_or(true),
            labels: labels.clone(),
        }
    }

    /// The policy of `check` under `alerting`: what the alerter applies to
    /// it, and what the pages judge its failure streaks by.
    pub fn of_check(alerting: &AlertingConfig, check: &crate::check::Check) -> Self {
        Self::new(alerting, &check.alert, &check.labels)
    }

    /// The policy of every configured check, by name: the alerter's
    /// cache of them and the pages' judgment of failure streaks alike.
    pub fn of_every_check(config: &crate::config::Config) -> HashMap<String, Policy> {
        config
            .checks
            .iter()
            .map(|c| (c.name.clone(), Self::of_check(&config.alerting, c)))
            .collect()
    }

    /// Whether `downs` `down` probes in a row open an incident: below
    /// that, a failure streak is a blip that never pages.
    pub fn opens_incident(&self, downs: u64) -> bool {
        downs >= u64::from(self.failure_threshold)
    }

    /// `[alerting]` as it is, for vigie's own network alert.
    pub fn global(alerting: &AlertingConfig) -> Self {
        Self::new(alerting, &Overrides::default(), &BTreeMap::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alerting() -> AlertingConfig {
        AlertingConfig {
            enabled: true,
            to: vec!["oncall@example.com".parse().unwrap()],
            from: None,
            failure_threshold: 2,
            recovery_threshold: 3,
            repeat: Duration::from_secs(4 * 3600),
            group_window: Duration::from_secs(30),
        }
    }

    #[test]
    fn overrides_replace_only_what_they_set() {
        let overrides = Overrides {
            failure_threshold: Some(5),
            to: Some(vec!["Web team <web@example.com>".parse().unwrap()]),
            page: Some(false),
            ..Overrides::default()
        };
        let labels = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let policy = Policy::new(&alerting(), &overrides, &labels);
        assert_eq!(policy.failure_threshold, 5);
        assert_eq!(policy.recovery_threshold, 3);
        assert_eq!(policy.repeat, Duration::from_secs(4 * 3600));
        assert_eq!(policy.to, ["Web team <web@example.com>"]);
        assert!(!policy.page);
        assert_eq!(policy.labels, labels);
        let global = Policy::global(&alerting());
        assert_eq!(global.to, ["oncall@example.com"]);
        assert!(global.page);
    }

    #[test]
    fn zero_thresholds_are_clamped() {
        let overrides = Overrides {
            failure_threshold: Some(0),
            recovery_threshold: Some(0),
            ..Overrides::default()
        };
        let policy = Policy::new(&alerting(), &overrides, &BTreeMap::new());
        assert_eq!(
            (policy.failure_threshold, policy.recovery_threshold),
            (1, 1)
        );
    }
}
