//! The pages' data, gathered from the store's rollups and timeline, the
//! newest outcomes and the config. Reads only: rollups for every figure
//! over time (never raw results; the failure streaks are `streaks.rs`'s),
//! the in-memory newest outcome for "now".

use std::collections::BTreeMap;

use time::{Duration, OffsetDateTime};

use super::streaks::hour_of;
use super::view::{
    uptime, window_label, CertSummary, CheckRow, DayCell, FailureRow, Group, LeafBar, Point,
};
use crate::cert::is_staging;
use crate::check::Check;
use crate::outcome::Outcome;
use crate::store::{Granularity, Rollup, Store, StoreError};

/// Days on the overview's bar.
pub const BAR_DAYS: i64 = 90;

/// UTC midnight of `at`'s day.
fn midnight(at: OffsetDateTime) -> OffsetDateTime {
    at.replace_time(time::Time::MIDNIGHT)
}

/// One check's overview row, read whole from the store.
pub fn check_row(
    store: &dyn Store,
    check: &Check,
    latest: Option<&Outcome>,
    now: OffsetDateTime,
) -> Result<CheckRow, StoreError> {
    let figures = Figures::read(store, &check.name, now)?;
    Ok(row(check, latest, &figures, now))
}

/// What a row takes from the rollups: the day bar's cells, the hours of
/// the last 24 h and when the history began. Kept apart from the row so
/// that `rows.rs` can keep it between builds and read again only the
/// buckets that can have changed.
#[derive(Debug, Clone)]
pub struct Figures {
    /// The bar's first day (UTC midnight) these figures are for.
    first_day: OffsetDateTime,
    /// Day cells with results, by the day's start, from `first_day` on.
    days: BTreeMap<OffsetDateTime, DayCell>,
    /// (up + warn, known) of each hour with results, from the hour
    /// holding `now - 24 h` on.
    hours: BTreeMap<OffsetDateTime, (u64, u64)>,
    history_from: Option<OffsetDateTime>,
}

impl Figures {
    /// Every bucket of the window at `now`.
    pub fn read(store: &dyn Store, name: &str, now: OffsetDateTime) -> Result<Self, StoreError> {
        let mut figures = Figures {
            first_day: first_day(now),
            days: BTreeMap::new(),
            hours: BTreeMap::new(),
            history_from: None,
        };
        figures.update(store, name, first_day(now), now)?;
        Ok(figures)
    }

    /// Reads again the day and hour buckets holding `since` and the later
    /// ones (the only ones a result stored since can have changed: past
    /// buckets are final), then moves the window to `now`.
    pub fn update(
        &mut self,
        store: &dyn Store,
        name: &str,
        since: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let day_from = midnight(since).max(first_day(now));
        let days = store.rollups(name, Granularity::Day, day_from)?;
        self.days.split_off(&day_from);
        self.days
            .extend(days.iter().map(|r| (r.start, day_cell(r.start, Some(r)))));
        let hour_from = hour_of(since).max(hour_of(now - Duration::hours(24)));
        let hours = store.rollups(name, Granularity::Hour, hour_from)?;
        self.hours.split_off(&hour_from);
        self.hours
            .extend(hours.iter().map(|r| (r.start, (r.up + r.warn, r.known()))));
        self.settle(store, name, now, true)
    }

    /// Moves the window to `now` for a check without a new result: no
    /// bucket changed, some left the window (and a new day starts empty).
    pub fn slide(
        &mut self,
        store: &dyn Store,
        name: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.settle(store, name, now, false)
    }

    /// Drops the buckets that left the window at `now`, and looks at the
    /// history's start again when days were `read` or the first day moved.
    fn settle(
        &mut self,
        store: &dyn Store,
        name: &str,
        now: OffsetDateTime,
        read: bool,
    ) -> Result<(), StoreError> {
        self.hours = self.hours.split_off(&hour_of(now - Duration::hours(24)));
        let first_day = first_day(now);
        if !read && first_day == self.first_day {
            return Ok(());
        }
        self.days = self.days.split_off(&first_day);
        // Moved only once read: a failed read is tried again next time.
        self.history_from = history_from(store, name, &self.days, first_day)?;
        self.first_day = first_day;
        Ok(())
    }
}

/// The bar's first day at `now`: [`BAR_DAYS`] days ending today.
fn first_day(now: OffsetDateTime) -> OffsetDateTime {
    midnight(now) - Duration::days(BAR_DAYS - 1)
}

/// The day starting at `start`, from its rollup (`None`: no results).
fn day_cell(start: OffsetDateTime, rollup: Option<&Rollup>) -> DayCell {
    DayCell {
        date: start.date(),
        up: rollup.map_or(0, |r| r.up),
        warn: rollup.map_or(0, |r| r.warn),
        down: rollup.map_or(0, |r| r.down),
        p50_ms: rollup.and_then(Rollup::p50),
        p95_ms: rollup.and_then(Rollup::p95),
    }
}

/// One check's overview row from its figures at `now` and its newest
/// result (read from memory, so always the newest).
pub fn row(
    check: &Check,
    latest: Option<&Outcome>,
    figures: &Figures,
    now: OffsetDateTime,
) -> CheckRow {
    let today = midnight(now);
    let first_day = first_day(now);
    let cells = (0..BAR_DAYS)
        .map(|d| {
            let start = first_day + Duration::days(d);
            match figures.days.get(&start) {
                Some(cell) => cell.clone(),
                None => day_cell(start, None),
            }
        })
        .collect();
    let since = |from: OffsetDateTime| {
        let (good, known) = figures
            .days
            .range(from..)
            .fold((0, 0), |(g, k), (_, c)| (g + c.up + c.warn, k + c.known()));
        uptime(good, known)
    };
    let (good_24h, known_24h) = figures
        .hours
        .values()
        .fold((0, 0), |(g, k), (good, known)| (g + good, k + known));
    let tls = latest.and_then(|o| o.tls.as_ref());
    let certificate = tls
        .and_then(|tls| tls.chain.first().map(|leaf| (tls, leaf)))
        .map(|(tls, leaf)| CertSummary {
            days_left: leaf.days_left,
            issuer: leaf.issuer.clone(),
            staging: is_staging(&leaf.issuer),
            key_exchange: tls.key_exchange.clone(),
        });
    CheckRow {
        name: check.name.clone(),
        status: latest.map(|o| o.status),
        labels: check
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        response_ms: latest.map(|o| o.duration_ms),
        days: cells,
        uptime_24h: uptime(good_24h, known_24h),
        uptime_30d: since(today - Duration::days(29)),
        uptime_90d: since(first_day),
        certificate,
        vantage: None,
        reason: latest.and_then(reason),
        first_probe: None,
        hold: None,
        history_from: figures.history_from,
    }
}

/// Why a result is not UP, in the operator's words: its first failure
/// (a WARN's warning), else what stopped the probe.
pub fn reason(outcome: &Outcome) -> Option<String> {
    if outcome.status == crate::outcome::Status::Up {
        return None;
    }
    outcome
        .failures
        .first()
        .map(|f| f.message.clone())
        .or_else(|| outcome.probe_error.as_ref().map(|e| e.message.clone()))
}

/// When the check's history began, if after `first_day` (the bar's first
/// day): the first raw result of its first day with results, or that
/// day's start when the raw results were swept. `None` for a history as
/// long as the bar, or none at all. One record is read.
fn history_from(
    store: &dyn Store,
    name: &str,
    days: &BTreeMap<OffsetDateTime, DayCell>,
    first_day: OffsetDateTime,
) -> Result<Option<OffsetDateTime>, StoreError> {
    let Some((&first, _)) = days.iter().find(|(_, c)| c.known() > 0) else {
        return Ok(None);
    };
    if first <= first_day {
        return Ok(None);
    }
    let next_day = first + Duration::days(1);
    let at = store
        .history_page(name, first, 1)?
        .first()
        .map(|o| o.started_at)
        .filter(|at| *at < next_day)
        .unwrap_or(first);
    Ok(Some(at))
}

/// Checks grouped by the value of `label` (`no <label>` last).
pub fn group(rows: Vec<CheckRow>, label: &str) -> Vec<Group> {
    let mut groups: BTreeMap<(bool, String), Vec<CheckRow>> = BTreeMap::new();
    for row in rows {
        let key = match row.labels.iter().find(|(k, _)| k == label) {
            Some((_, value)) => (false, format!("{label} = {value}")),
            None => (true, format!("no {label}")),
        };
        groups.entry(key).or_default().push(row);
    }
    groups
        .into_iter()
        .map(|((_, title), checks)| Group { title, checks })
        .collect()
}

/// The window of a response-time chart and its rollups' granularity.
pub fn range(key: &str) -> (&'static str, Duration, Granularity) {
    match key {
        "7d" => ("7d", Duration::days(7), Granularity::Hour),
        "30d" => ("30d", Duration::days(30), Granularity::Day),
        "90d" => ("90d", Duration::days(90), Granularity::Day),
        _ => ("24h", Duration::hours(24), Granularity::Hour),
    }
}

/// p50, p95 and max per rollup over `[from, now]`, broken where a rollup
/// is missing.
pub fn response_series(
    rollups: &[Rollup],
    granularity: Granularity,
    now: OffsetDateTime,
) -> Vec<(&'static str, Vec<Point>)> {
    let step = Duration::milliseconds(granularity.millis() as i64);
    let mut series: [(&'static str, Vec<Point>); 3] = [
        ("p50", Vec::new()),
        ("p95", Vec::new()),
        ("max", Vec::new()),
    ];
    let mut previous: Option<OffsetDateTime> = None;
    for rollup in rollups.iter().filter(|r| r.known() > 0) {
        let gap_before = previous.is_some_and(|p| rollup.start - p > step);
        // The middle of the bucket, or of its part that has passed.
        let middle: OffsetDateTime = rollup.start + step / 2;
        let elapsed: Duration = now - rollup.start;
        let at = middle.min(rollup.start + elapsed / 2);
        let values = [rollup.p50(), rollup.p95(), Some(rollup.max_ms)];
        for ((_, points), value) in series.iter_mut().zip(values) {
            if let Some(ms) = value {
                points.push(Point { at, ms, gap_before });
            }
        }
        previous = Some(rollup.start);
    }
    series.into_iter().collect()
}

/// The timeline's bars, oldest leaf first; `current` is the fingerprint of
/// the leaf the latest probe was served.
pub fn leaves(
    store: &dyn Store,
    name: &str,
    current: Option<&str>,
) -> Result<Vec<LeafBar>, StoreError> {
    let mut leaves: Vec<LeafBar> = store
        .certificates(name)?
        .into_iter()
        .map(|leaf| LeafBar {
            current: current == Some(leaf.sha256.as_str()),
            sha256: leaf.sha256,
            subject: leaf.subject,
            issuer: leaf.issuer,
            not_before: leaf.not_before,
            not_after: leaf.not_after,
            first_seen: leaf.first_seen,
            last_seen: leaf.last_seen,
            staging: leaf.staging,
        })
        .collect();
    leaves.sort_by_key(|l| l.first_seen);
    Ok(leaves)
}

/// The latest probe's failures, expected against observed.
pub fn failures(latest: Option<&Outcome>) -> Vec<FailureRow> {
    latest
        .map(|o| {
            o.failures
                .iter()
                .map(|f| FailureRow {
                    assertion: f.assertion.as_str().to_string(),
                    expected: f.expected.clone(),
                    observed: f.observed.clone(),
                    message: f.message.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The headings of the 24 h, 30 d and 90 d figures at `now` for a
/// history that began at `history_from` (see [`window_label`]), on the
/// operator pages and the public page alike.
pub fn window_labels(history_from: Option<OffsetDateTime>, now: OffsetDateTime) -> [String; 3] {
    let today = now.replace_time(time::Time::MIDNIGHT);
    [
        window_label("24 h", now - Duration::hours(24), history_from, now),
        window_label("30 d", today - Duration::days(29), history_from, now),
        window_label(
            "90 d",
            today - Duration::days(BAR_DAYS - 1),
            history_from,
            now,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::outcome::{Assertion, Failure, Status};
    use crate::store::MemoryStore;
    use crate::testing::up;

    const NOW: OffsetDateTime = datetime!(2026-12-07 20:00 UTC);

    fn failing(status: Status, message: &str) -> Outcome {
        let mut outcome = up("web", NOW);
        outcome.status = status;
        outcome.failures = vec![
            Failure {
                assertion: Assertion::HttpStatus,
                expected: "200".into(),
                observed: "500".into(),
                message: message.into(),
            },
            Failure {
                assertion: Assertion::Timeout,
                expected: "under 2 s".into(),
                observed: "3 s".into(),
                message: "the second failure".into(),
            },
        ];
        outcome
    }

    #[test]
    fn a_card_that_is_not_up_carries_its_first_failure_or_warning() {
        assert_eq!(reason(&up("web", NOW)), None);
        let down = failing(Status::Down, "HTTP 500, expected 200");
        assert_eq!(reason(&down).as_deref(), Some("HTTP 500, expected 200"));
        let warn = failing(Status::Warn, "renewal looks stuck");
        assert_eq!(reason(&warn).as_deref(), Some("renewal looks stuck"));
        let mut refused = up("web", NOW);
        refused.status = Status::Down;
        refused.probe_error = Some(crate::outcome::ProbeError {
            kind: Assertion::Connect,
            message: "connection refused".into(),
        });
        assert_eq!(reason(&refused).as_deref(), Some("connection refused"));
    }

    #[test]
    fn the_history_start_is_known_only_when_younger_than_the_bar() {
        let first_day = midnight(NOW) - Duration::days(BAR_DAYS - 1);
        let store = MemoryStore::new();
        let read = |store: &MemoryStore| Figures::read(store, "web", NOW).unwrap().history_from;
        assert_eq!(read(&store), None, "no history at all");
        let started = datetime!(2026-12-07 19:36:12 UTC);
        store.append(&up("web", started)).unwrap();
        store
            .append(&up("web", started + Duration::minutes(1)))
            .unwrap();
        assert_eq!(read(&store), Some(started));
        store
            .append(&up("web", first_day + Duration::hours(3)))
            .unwrap();
        assert_eq!(read(&store), None, "as old as the bar");
    }
}
