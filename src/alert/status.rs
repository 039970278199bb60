//! [`AlertStatus`]: what the alerter publishes for `/metrics` (whose
//! families are declared here), health and the pages (checks firing,
//! blindness, the last report, the fleet's notes). The alerter writes it;
//! readers never wait on the alerter.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use time::OffsetDateTime;

use crate::metrics::{flag, Exposition, Family};

/// What the alerter publishes for `/metrics` and health.
#[derive(Debug, Default)]
pub struct AlertStatus {
    firing: AtomicU64,
    blind: AtomicBool,
    /// When the last daily report was queued (the pages' footer).
    last_report: Mutex<Option<OffsetDateTime>>,
    /// With `[vantage]`: the checks whose page waits for the other
    /// vantages, in words ("down from fra only; eu-par: up"), for the pages.
    fleet_notes: Mutex<BTreeMap<String, String>>,
}

impl AlertStatus {
    pub fn last_report(&self) -> Option<OffsetDateTime> {
        *self.last_report.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_last_report(&self, at: OffsetDateTime) {
        *self.last_report.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
    }

    pub fn set_fleet_notes(&self, notes: BTreeMap<String, String>) {
        *self.fleet_notes.lock().unwrap_or_else(|p| p.into_inner()) = notes;
    }

    /// What the other vantages say of `check`, while its page waits.
    pub fn fleet_note(&self, check: &str) -> Option<String> {
        self.fleet_notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(check)
            .cloned()
    }

    pub fn firing(&self) -> u64 {
        self.firing.load(Ordering::Relaxed)
    }

    pub fn set_firing(&self, firing: u64) {
        self.firing.store(firing, Ordering::Relaxed);
    }

    pub fn blind(&self) -> bool {
        self.blind.load(Ordering::Relaxed)
    }

    pub fn set_blind(&self, blind: bool) {
        self.blind.store(blind, Ordering::Relaxed);
    }

    /// The alerter's `/metrics` families.
    pub fn write_metrics(&self, out: &mut String) {
        let mut m = Exposition::new(out);
        m.single(&FIRING, self.firing() as f64);
        m.single(&BLIND, flag(self.blind()));
    }
}

const FIRING: Family = Family::gauge(
    "vigie_alerts_firing",
    "checks with an open incident (DOWN sent, or held by a silence or window)",
);
const BLIND: Family = Family::gauge(
    "vigie_blind",
    "1 when every canary fails and network failures are not judged",
);
