//! Failure streaks (the pages' "incidents"): every run of `down` results of
//! a check in the last [`WINDOW`], from its first down result to the next
//! result that was not down, computed from the hour rollups and cached.
//!
//! A week of a 1 s check is 604,800 results; reading them all for one page
//! view cost a gigabyte. So the hour rollups decide what is read:
//! - an hour without a `down` holds no streak and is not read, except its
//!   first result (one record) when a streak is open from the hour before,
//!   which that result ends;
//! - an hour of nothing but `down` is one stretch of a streak; only its
//!   first result is read, for the start and the cause;
//! - only an hour that mixes `down` with other results is read whole,
//!   through the paged history read ([`PAGE`] results at a time), and it
//!   keeps at most its last [`SHOWN`] runs.
//!
//! What an hour yields is kept per check with the hour's counts and reused
//! until the counts change. A check's results are stored in the order
//! they start (the scheduler runs one probe of a check at a time), so
//! after a new result only the rollups from the hour holding the newest
//! result counted before are read again: a page refresh reads one or two
//! hour rollups, not the week's 168. The assembled list is kept too,
//! under the check's newest result and the window's first hour: until a
//! new result is stored a page reads nothing, and when an hour leaves the
//! window it is dropped without a read. At most [`SHOWN`] streaks are listed, the newest; a list cut
//! there says so on the page.
//!
//! Each streak counts its `down` results, which is all the pages need to
//! tell an incident from a blip (`view::Incident::is_incident`); this
//! module does not decide what a streak means to alerting: the alerter's
//! thresholds live in `alert/`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use time::{Duration, OffsetDateTime};

use super::view::Incident;
use crate::outcome::{Outcome, Status};
use crate::store::{Granularity, Rollup, Store, StoreError};

/// How far back failure streaks are listed.
pub const WINDOW: Duration = Duration::days(7);
/// Most streaks a page lists (the newest).
pub const SHOWN: usize = 500;
/// Raw results decoded at a time when an hour is read whole.
const PAGE: usize = 512;

/// One check's streaks, newest first.
#[derive(Debug, Default)]
pub struct Streaks {
    pub list: Vec<Incident>,
    /// More than [`SHOWN`] streaks: the oldest are left out.
    pub capped: bool,
}

/// The streaks of every check, kept between page views; see the module
/// docs for when an entry is computed again.
#[derive(Debug, Default)]
pub struct StreakCache {
    checks: Mutex<HashMap<String, Arc<Mutex<Entry>>>>,
}

/// What is kept of one check.
#[derive(Debug, Default)]
struct Entry {
    /// The check's newest result and the window's first hour when
    /// `streaks` was assembled.
    key: Option<(Option<OffsetDateTime>, OffsetDateTime)>,
    hours: BTreeMap<OffsetDateTime, Hour>,
    streaks: Arc<Streaks>,
}

/// What one hour holds of streaks.
#[derive(Debug, Clone)]
struct Hour {
    /// The rollup's (up, warn, down) when this was read.
    counts: (u64, u64, u64),
    /// The hour's first result (the hour's start if its raw results were
    /// swept); `None` until needed in an hour without a `down`, where it
    /// is read only to end a streak open from the hour before.
    first_at: Option<OffsetDateTime>,
    /// Runs of down results, oldest first.
    runs: Vec<Run>,
    /// Earlier runs of this hour were left out ([`SHOWN`]).
    dropped: bool,
}

#[derive(Debug, Clone)]
struct Run {
    start: OffsetDateTime,
    /// The first result after the run; `None` when the hour's last result
    /// is down.
    end: Option<OffsetDateTime>,
    cause: Arc<str>,
    /// Its `down` results.
    downs: u64,
}

impl StreakCache {
    /// The streaks of `name` at `now`; `newest` is when its newest result
    /// started (the in-memory latest), which says whether the store
    /// changed for it since the last call.
    pub fn streaks(
        &self,
        store: &dyn Store,
        name: &str,
        newest: Option<OffsetDateTime>,
        now: OffsetDateTime,
    ) -> Result<Arc<Streaks>, StoreError> {
        let entry = {
            let mut checks = self.checks.lock().unwrap_or_else(|p| p.into_inner());
            checks.entry(name.to_string()).or_default().clone()
        };
        // Held while computing: a second view of the same check waits and
        // then takes what the first computed.
        let mut entry = entry.lock().unwrap_or_else(|p| p.into_inner());
        let from = hour_of(now - WINDOW);
        let key = Some((newest, from));
        if entry.key == key {
            return Ok(entry.streaks.clone());
        }
        match refresh(&mut entry, store, name, newest, from) {
            Ok(streaks) => Ok(streaks),
            Err(err) => {
                // Half refreshed hours must not pass for read ones.
                *entry = Entry::default();
                Err(err)
            }
        }
    }

    /// Forgets checks no longer configured.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut checks = self.checks.lock().unwrap_or_else(|p| p.into_inner());
        checks.retain(|name, _| keep(name));
    }
}

/// The start of the UTC hour holding `at`.
pub(super) fn hour_of(at: OffsetDateTime) -> OffsetDateTime {
    let at = at.to_offset(time::UtcOffset::UTC);
    at.replace_time(time::Time::from_hms(at.hour(), 0, 0).unwrap_or(time::Time::MIDNIGHT))
}

/// Brings `entry` to `newest` and the window starting at `from`. Only the
/// hours from the one holding the newest result counted so far can have
/// changed (one check's results are stored in order, so the earlier hours
/// are final): those are read again, the others kept; with no new result
/// the window only moves and nothing is read.
fn refresh(
    entry: &mut Entry,
    store: &dyn Store,
    name: &str,
    newest: Option<OffsetDateTime>,
    from: OffsetDateTime,
) -> Result<Arc<Streaks>, StoreError> {
    let read_from = match entry.key {
        Some((counted, _)) if counted == newest => None,
        Some((Some(counted), _)) => Some(hour_of(counted).max(from)),
        _ => Some(from),
    };
    let mut hours = std::mem::take(&mut entry.hours).split_off(&from);
    if let Some(read_from) = read_from {
        let mut kept = hours.split_off(&read_from);
        for rollup in &store.rollups(name, Granularity::Hour, read_from)? {
            let counts = (rollup.up, rollup.warn, rollup.down);
            let hour = match kept.remove(&rollup.start) {
                Some(kept) if kept.counts == counts => kept,
                _ => read_hour(store, name, rollup)?,
            };
            hours.insert(rollup.start, hour);
        }
    }
    let mut open_before = false;
    for (start, hour) in hours.iter_mut() {
        if open_before && hour.first_at.is_none() {
            let first = store.history_page(name, *start, 1)?.pop();
            hour.first_at = Some(first.map_or(*start, |o| o.started_at));
        }
        open_before = hour.runs.last().is_some_and(|r| r.end.is_none());
    }
    let streaks = Arc::new(assemble(name, &hours));
    *entry = Entry {
        key: Some((newest, from)),
        hours,
        streaks: streaks.clone(),
    };
    Ok(streaks)
}

/// The words a streak is listed with: its first result's first failure.
fn cause_of(outcome: &Outcome) -> Arc<str> {
    outcome
        .first_failure()
        .map_or_else(|| Arc::from("down"), |f| Arc::from(f.message.as_str()))
}

/// Reads what `rollup`'s hour holds of streaks; see the module docs for
/// how little that is outside mixed hours.
fn read_hour(store: &dyn Store, name: &str, rollup: &Rollup) -> Result<Hour, StoreError> {
    let counts = (rollup.up, rollup.warn, rollup.down);
    if rollup.down == 0 {
        return Ok(Hour {
            counts,
            first_at: None,
            runs: Vec::new(),
            dropped: false,
        });
    }
    let first = store.history_page(name, rollup.start, 1)?.pop();
    let end = rollup.start + Duration::hours(1);
    let Some(first) = first.filter(|o| o.started_at < end) else {
        return Ok(Hour {
            counts,
            first_at: Some(rollup.start),
            runs: Vec::new(),
            dropped: false,
        });
    };
    let mut hour = Hour {
        counts,
        first_at: Some(first.started_at),
        runs: Vec::new(),
        dropped: false,
    };
    if rollup.down == rollup.known() {
        hour.runs.push(Run {
            start: first.started_at,
            end: None,
            cause: cause_of(&first),
            downs: rollup.down,
        });
        return Ok(hour);
    }
    let mut runs: VecDeque<Run> = VecDeque::new();
    let mut open: Option<Run> = None;
    let mut since = rollup.start;
    'pages: loop {
        let page = store.history_page(name, since, PAGE)?;
        let Some(last) = page.last() else { break };
        since = last.started_at + Duration::milliseconds(1);
        let full = page.len() == PAGE;
        for outcome in page {
            if outcome.started_at >= end {
                break 'pages;
            }
            match (outcome.status == Status::Down, open.take()) {
                (true, None) => {
                    open = Some(Run {
                        start: outcome.started_at,
                        end: None,
                        cause: cause_of(&outcome),
                        downs: 1,
                    })
                }
                (true, Some(mut run)) => {
                    run.downs += 1;
                    open = Some(run)
                }
                (false, Some(mut run)) => {
                    run.end = Some(outcome.started_at);
                    runs.push_back(run);
                    if runs.len() > SHOWN {
                        runs.pop_front();
                        hour.dropped = true;
                    }
                }
                (false, None) => {}
            }
        }
        if !full {
            break;
        }
    }
    runs.extend(open);
    if runs.len() > SHOWN {
        runs.pop_front();
        hour.dropped = true;
    }
    hour.runs = runs.into();
    Ok(hour)
}

/// The streaks the hours hold, oldest hour first: a run that reaches the
/// end of its hour goes on into the next hour's first run if that starts
/// at the next hour's first result, and ends at that first result
/// otherwise. Hours without results (the check was paused, or the daemon
/// down) do not end a streak, as they would not in the raw results.
fn assemble(name: &str, hours: &BTreeMap<OffsetDateTime, Hour>) -> Streaks {
    let mut list: VecDeque<Incident> = VecDeque::new();
    let mut capped = false;
    let mut open: Option<Incident> = None;
    let close = |incident: Incident, list: &mut VecDeque<Incident>| {
        list.push_back(incident);
        list.len() > SHOWN && list.pop_front().is_some()
    };
    for (start, hour) in hours {
        capped |= hour.dropped;
        let first_at = hour.first_at.unwrap_or(*start);
        let mut runs = hour.runs.iter().peekable();
        if let Some(mut incident) = open.take() {
            match runs.peek() {
                Some(run) if run.start == first_at && !hour.dropped => {
                    incident.end = run.end;
                    incident.downs += run.downs;
                    runs.next();
                }
                _ => incident.end = Some(first_at),
            }
            match incident.end {
                Some(_) => capped |= close(incident, &mut list),
                None => open = Some(incident),
            }
        }
        for run in runs {
            let incident = Incident {
                check: name.to_string(),
                start: run.start,
                end: run.end,
                cause: run.cause.to_string(),
                downs: run.downs,
                told: Vec::new(),
                key: None,
                updates: Vec::new(),
            };
            match run.end {
                Some(_) => capped |= close(incident, &mut list),
                None => open = Some(incident),
            }
        }
    }
    if let Some(incident) = open {
        capped |= close(incident, &mut list);
    }
    let mut list: Vec<Incident> = list.into();
    list.reverse();
    Streaks { list, capped }
}

#[cfg(test)]
pub(super) mod tests {
    use time::macros::datetime;

    use super::super::rows::tests::Counting;
    use super::*;
    use crate::outcome::{Assertion, Failure};
    use crate::store::contract::up;
    use crate::store::MemoryStore;

    pub(in crate::api::pages) fn at(seconds: i64) -> OffsetDateTime {
        datetime!(2026-03-02 00:00 UTC) + Duration::seconds(seconds)
    }

    /// `web`'s result `seconds` into the test's day, down or up.
    pub(in crate::api::pages) fn result(seconds: i64, down: bool) -> Outcome {
        let mut outcome = up("web", at(seconds));
        if down {
            outcome.status = Status::Down;
            outcome.failures = vec![Failure {
                assertion: Assertion::HttpStatus,
                expected: "200".to_string(),
                observed: "503".to_string(),
                message: format!("503 at {seconds}"),
            }];
        }
        outcome
    }

    /// A streak in brief: start, end, cause, `down` results.
    type Brief = (OffsetDateTime, Option<OffsetDateTime>, String, u64);

    /// The streaks as the raw results give them, newest first.
    fn from_raw(store: &dyn Store, now: OffsetDateTime) -> Vec<Brief> {
        let mut out = Vec::new();
        let mut open: Option<Brief> = None;
        for outcome in store.history("web", hour_of(now - WINDOW)).unwrap() {
            match (outcome.status == Status::Down, open.take()) {
                (true, None) => {
                    open = Some((outcome.started_at, None, cause_of(&outcome).to_string(), 1))
                }
                (true, Some(mut o)) => {
                    o.3 += 1;
                    open = Some(o)
                }
                (false, Some(mut o)) => {
                    o.1 = Some(outcome.started_at);
                    out.push(o);
                }
                (false, None) => {}
            }
        }
        out.extend(open);
        out.reverse();
        out
    }

    fn shown(streaks: &Streaks) -> Vec<Brief> {
        streaks
            .list
            .iter()
            .map(|i| (i.start, i.end, i.cause.clone(), i.downs))
            .collect()
    }

    #[test]
    fn streaks_across_hours_equal_those_of_the_raw_results() {
        let store = MemoryStore::new();
        // Every 10 s over three hours, with a gap: a streak inside an hour,
        // one across an hour boundary, a whole-down hour, and one still open.
        let down = |s: i64| {
            (600..700).contains(&s)
                || (3500..3700).contains(&s)
                || (7200..10_800).contains(&s)
                || s >= 14_000
        };
        for s in (0..14_400).step_by(10) {
            if (11_000..12_000).contains(&s) {
                continue;
            }
            store.append(&result(s, down(s))).unwrap();
        }
        let now = at(14_400);
        let cache = StreakCache::default();
        let streaks = cache.streaks(&store, "web", Some(at(14_390)), now).unwrap();
        assert_eq!(shown(&streaks), from_raw(&store, now));
        assert_eq!(streaks.list.len(), 4, "{:?}", streaks.list);
        assert!(!streaks.capped);
        assert_eq!(streaks.list[0].end, None, "the newest is still open");
    }

    #[test]
    fn a_streak_open_before_a_quiet_hour_ends_at_its_first_result() {
        let store = MemoryStore::new();
        for s in (3000..3600).step_by(60) {
            store.append(&result(s, true)).unwrap();
        }
        for s in (3720..7200).step_by(60) {
            store.append(&result(s, false)).unwrap();
        }
        let now = at(7200);
        let streaks = StreakCache::default()
            .streaks(&store, "web", None, now)
            .unwrap();
        assert_eq!(shown(&streaks), from_raw(&store, now));
        assert_eq!(streaks.list[0].end, Some(at(3720)));
    }

    #[test]
    fn only_the_newest_streaks_are_listed_and_the_cut_is_said() {
        let store = MemoryStore::new();
        // Flapping every second for 20 minutes: 600 streaks.
        for s in 0..1200 {
            store.append(&result(s, s % 2 == 0)).unwrap();
        }
        let now = at(1200);
        let streaks = StreakCache::default()
            .streaks(&store, "web", None, now)
            .unwrap();
        assert!(streaks.capped);
        let raw = from_raw(&store, now);
        assert_eq!(raw.len(), 600);
        assert_eq!(shown(&streaks), raw[..SHOWN].to_vec());
    }

    #[test]
    fn a_new_result_recomputes_only_when_the_store_changed() {
        let store = MemoryStore::new();
        store.append(&result(0, true)).unwrap();
        let cache = StreakCache::default();
        let now = at(60);
        let first = cache.streaks(&store, "web", Some(at(0)), now).unwrap();
        assert_eq!(first.list.len(), 1);
        store.append(&result(30, false)).unwrap();
        // The same newest result: what was assembled is reused.
        let same = cache.streaks(&store, "web", Some(at(0)), now).unwrap();
        assert!(Arc::ptr_eq(&first, &same));
        let changed = cache.streaks(&store, "web", Some(at(30)), now).unwrap();
        assert_eq!(changed.list[0].end, Some(at(30)));
    }

    #[test]
    fn a_new_result_reads_again_only_from_the_hour_of_the_newest_counted() {
        let store = Counting::new(MemoryStore::new());
        // Every 60 s for three hours: a streak across the first hour's end,
        // and one open at the end.
        let down = |s: i64| (3000..4000).contains(&s) || s >= 10_500;
        for s in (0..10_800).step_by(60) {
            store.inner.append(&result(s, down(s))).unwrap();
        }
        let cache = StreakCache::default();
        cache
            .streaks(&store, "web", Some(at(10_740)), at(10_800))
            .unwrap();
        store.reads();
        // The open streak goes on into the next hour, then ends.
        for (s, down) in [(10_800, true), (10_860, true), (10_920, false)] {
            store.inner.append(&result(s, down)).unwrap();
        }
        let now = at(10_980);
        let streaks = cache.streaks(&store, "web", Some(at(10_920)), now).unwrap();
        assert_eq!(store.reads(), 1, "the hour rollups from 02:00 on only");
        assert_eq!(shown(&streaks), from_raw(&store.inner, now));
        assert_eq!(streaks.list[0].end, Some(at(10_920)));
        // With no new result, the window moves past the first two hours
        // without a read.
        let later = at(7200) + WINDOW;
        let streaks = cache
            .streaks(&store, "web", Some(at(10_920)), later)
            .unwrap();
        assert_eq!(store.reads(), 0);
        assert_eq!(shown(&streaks), from_raw(&store.inner, later));
        assert_eq!(streaks.list.len(), 1);
    }
}
