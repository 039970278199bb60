//! vigie's own families: the scheduler (checks, start delays, lateness,
//! the supervisor's tick), health (the verdict, config reloads, store
//! errors, supervised tasks) and the build.

use std::collections::BTreeMap;
use std::sync::Arc;

use time::OffsetDateTime;

use crate::health::Health;
use crate::metrics::{flag, Exposition, Family};
use crate::scheduler::Slot;
use crate::supervise::StageState;

const CHECKS_CONFIGURED: Family =
    Family::gauge("vigie_checks_configured", "checks in the running config");
const START_DELAY: Family = Family::gauge(
    "vigie_check_start_delay_seconds",
    "how late after its due time the last probe started",
);
const LATENESS: Family = Family::gauge(
    "vigie_scheduler_lateness_seconds",
    "longest wait past a due time among checks not yet started",
);
const LAST_TICK: Family = Family::gauge(
    "vigie_scheduler_last_tick_timestamp_seconds",
    "last supervisor tick",
);
const HEALTHY: Family = Family::gauge("vigie_healthy", "1 when /healthz answers 200");
const RELOAD_OK: Family = Family::gauge(
    "vigie_config_last_reload_successful",
    "1 when the last config (re)load succeeded",
);
const RELOAD_OK_AT: Family = Family::gauge(
    "vigie_config_last_reload_success_timestamp_seconds",
    "when the running config was loaded",
);
const STORE_ERRORS: Family = Family::counter(
    "vigie_store_errors_total",
    "results that could not be written to the store",
);
const TASK_RESTARTS: Family = Family::counter(
    "vigie_task_restarts_total",
    "restarts of a supervised task after it panicked or returned early",
);
const TASK_UP: Family = Family::gauge(
    "vigie_task_up",
    "1 while a supervised task runs, 0 while it waits to restart or is failing",
);
const BUILD: Family = Family::gauge("vigie_build_info", "the running vigie version");

pub(super) fn write_scheduler(
    out: &mut String,
    health: &Health,
    slots: &BTreeMap<String, Arc<Slot>>,
    now: OffsetDateTime,
) {
    let mut m = Exposition::new(out);
    m.single(&CHECKS_CONFIGURED, slots.len() as f64);
    m.family(&START_DELAY);
    for (name, slot) in slots {
        let check = [("check", name.as_str())];
        m.sample(&START_DELAY, &check, slot.last_delay().as_secs_f64());
    }
    let worst = slots
        .values()
        .map(|s| s.lateness(now))
        .max()
        .unwrap_or_default();
    m.single(&LATENESS, worst.as_secs_f64());
    m.family(&LAST_TICK);
    if let Some(tick) = health.last_tick() {
        m.sample(&LAST_TICK, &[], tick.unix_timestamp() as f64);
    }
}

pub(super) fn write_health(out: &mut String, health: &Health, now: OffsetDateTime) {
    let mut m = Exposition::new(out);
    m.single(&HEALTHY, flag(health.verdict(now).is_healthy()));
    m.single(&RELOAD_OK, flag(health.reload_ok()));
    m.family(&RELOAD_OK_AT);
    if let Some(at) = health.last_reload_ok() {
        m.sample(&RELOAD_OK_AT, &[], at.unix_timestamp() as f64);
    }
    m.single(&STORE_ERRORS, health.store_errors() as f64);
    let stages = health.stages().all();
    m.family(&TASK_RESTARTS);
    for stage in &stages {
        let task = [("task", stage.name())];
        m.sample(&TASK_RESTARTS, &task, stage.restarts() as f64);
    }
    m.family(&TASK_UP);
    for stage in &stages {
        let task = [("task", stage.name())];
        let up = stage.state() == StageState::Running;
        m.sample(&TASK_UP, &task, flag(up));
    }
}

pub(super) fn write_build(out: &mut String) {
    let mut m = Exposition::new(out);
    m.family(&BUILD);
    m.sample(&BUILD, &[("version", env!("CARGO_PKG_VERSION"))], 1.0);
}
