//! The overview rows' rollup figures, kept between builds of a page that
//! lists every check (the public `/status`), so a build reads the store
//! only for what can have changed.
//!
//! Reading 90 day rollups and 24 hour rollups of each of 1,000 checks is
//! most of a build's time, yet between two builds 10 s apart past buckets
//! are final and most checks have no new result. So each check's
//! [`Figures`] are kept under its newest result:
//! - the same newest result: nothing was stored, no bucket changed; the
//!   window only moves with the clock (an hour leaves the 24 h, and at
//!   midnight UTC a day leaves the bar and an empty one starts);
//! - a newer one: the buckets from the one holding the newest result kept
//!   on are read again (today's day and the last hours; yesterday's too
//!   just after midnight). Results of one check are stored in order, so a
//!   result stored since cannot fall in an older bucket.
//!
//! The row itself (status, response time, certificate, reason) is drawn
//! from the newest result in memory at every build, never kept, so it is
//! never older than the result. What is kept is bounded by the caller's
//! [`RowCache::retain`]: checks no longer listed are dropped.

use std::collections::HashMap;
use std::sync::Mutex;

use time::OffsetDateTime;

use super::build::{self, Figures};
use super::view::CheckRow;
use crate::check::Check;
use crate::outcome::Outcome;
use crate::store::{Store, StoreError};

/// The figures of every check listed, kept between builds.
#[derive(Debug, Default)]
pub struct RowCache {
    checks: Mutex<HashMap<String, Kept>>,
}

/// What is kept of one check.
#[derive(Debug)]
struct Kept {
    /// The start of the newest result counted in `figures`.
    newest: Option<OffsetDateTime>,
    figures: Figures,
}

impl RowCache {
    /// `check`'s overview row at `now`; `latest` is its newest result.
    pub fn row(
        &self,
        store: &dyn Store,
        check: &Check,
        latest: Option<&Outcome>,
        now: OffsetDateTime,
    ) -> Result<CheckRow, StoreError> {
        let newest = latest.map(|o| o.started_at);
        let mut checks = self.checks.lock().unwrap_or_else(|p| p.into_inner());
        let name = check.name.as_str();
        let kept = match checks.get_mut(name) {
            Some(kept) if kept.newest == newest => {
                kept.figures.slide(store, name, now)?;
                kept
            }
            Some(kept) => {
                match kept.newest {
                    Some(since) => kept.figures.update(store, name, since, now)?,
                    None => kept.figures = Figures::read(store, name, now)?,
                }
                kept.newest = newest;
                kept
            }
            None => {
                let figures = Figures::read(store, name, now)?;
                checks
                    .entry(name.to_string())
                    .or_insert(Kept { newest, figures })
            }
        };
        Ok(build::row(check, latest, &kept.figures, now))
    }

    /// Forgets the checks for which `listed` is false.
    pub fn retain(&self, listed: impl Fn(&str) -> bool) {
        let mut checks = self.checks.lock().unwrap_or_else(|p| p.into_inner());
        checks.retain(|name, _| listed(name));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.checks.lock().unwrap().len()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use time::macros::datetime;
    use time::Duration;

    use super::*;
    use crate::outcome::Status;
    use crate::store::{Granularity, MemoryStore, Rollup, ServedLeaf};
    use crate::testing::up;

    const NOW: OffsetDateTime = datetime!(2026-12-07 20:00 UTC);

    /// A memory store that counts its rollup reads.
    #[derive(Debug)]
    pub(in crate::api::pages) struct Counting {
        pub inner: MemoryStore,
        reads: AtomicUsize,
    }

    impl Counting {
        pub fn new(inner: MemoryStore) -> Counting {
            Counting {
                inner,
                reads: AtomicUsize::new(0),
            }
        }

        /// The rollup reads since the last call.
        pub fn reads(&self) -> usize {
            self.reads.swap(0, Ordering::SeqCst)
        }
    }

    fn check(name: &str) -> Check {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("checks")).unwrap();
        let toml = format!(
            "[[check]]\nname = \"{name}\"\nkind = \"http\"\nurl = \"https://{name}.example/\"\n"
        );
        std::fs::write(dir.path().join("checks/all.toml"), toml).unwrap();
        let config = crate::config::load_str(
            &dir.path().join("config.toml"),
            "[alerting]\nenabled = false\n",
        )
        .unwrap();
        config.checks[0].as_ref().clone()
    }

    /// The same row, field by field (a row holds no `PartialEq` types).
    fn same(a: &CheckRow, b: &CheckRow) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    fn down(name: &str, at: OffsetDateTime) -> Outcome {
        let mut outcome = up(name, at);
        outcome.status = Status::Down;
        outcome
    }

    /// `outcomes` stored, the last one the newest.
    fn store(outcomes: &[Outcome]) -> Counting {
        let inner = MemoryStore::new();
        for outcome in outcomes {
            inner.append(outcome).unwrap();
        }
        Counting::new(inner)
    }

    #[test]
    fn an_unchanged_check_reuses_its_figures_and_reads_nothing() {
        let newest = up("web", NOW - Duration::minutes(1));
        let store = store(&[up("web", NOW - Duration::days(3)), newest.clone()]);
        let cache = RowCache::default();
        let first = cache
            .row(&store, &check("web"), Some(&newest), NOW)
            .unwrap();
        assert!(store.reads() > 0);
        let later = NOW + Duration::seconds(10);
        let again = cache
            .row(&store, &check("web"), Some(&newest), later)
            .unwrap();
        assert_eq!(store.reads(), 0, "nothing new: no read");
        assert!(same(&again, &first));
        let whole = build::check_row(&store.inner, &check("web"), Some(&newest), later).unwrap();
        assert!(same(&again, &whole), "{again:?} against {whole:?}");
    }

    #[test]
    fn a_check_with_a_new_result_is_read_again_and_shows_it() {
        let before = up("web", NOW - Duration::minutes(1));
        let store = store(&[up("web", NOW - Duration::days(3)), before.clone()]);
        let cache = RowCache::default();
        cache
            .row(&store, &check("web"), Some(&before), NOW)
            .unwrap();
        let failed = down("web", NOW + Duration::seconds(5));
        store.inner.append(&failed).unwrap();
        store.reads();
        let later = NOW + Duration::seconds(10);
        let row = cache
            .row(&store, &check("web"), Some(&failed), later)
            .unwrap();
        assert_eq!(store.reads(), 2, "today's day and the last hour only");
        assert_eq!(row.status, Some(Status::Down));
        let today = row.days.last().unwrap();
        assert_eq!((today.up, today.down), (1, 1), "{today:?}");
        assert_eq!(row.uptime_24h, Some(0.5));
        let whole = build::check_row(&store.inner, &check("web"), Some(&failed), later).unwrap();
        assert!(same(&row, &whole), "{row:?} against {whole:?}");
    }

    #[test]
    fn midnight_moves_the_bar_and_the_last_hours() {
        let newest = up("web", NOW - Duration::minutes(1));
        let oldest = NOW - Duration::days(89);
        let store = store(&[up("web", oldest), newest.clone()]);
        let cache = RowCache::default();
        let row = cache
            .row(&store, &check("web"), Some(&newest), NOW)
            .unwrap();
        assert_eq!(row.days.first().unwrap().up, 1, "the bar's first day");
        assert_eq!(row.uptime_24h, Some(1.0));
        // The next day, past 20:00: no new result; the oldest day left the
        // bar, today is empty and yesterday holds the newest result.
        let tomorrow = NOW + Duration::hours(25);
        let row = cache
            .row(&store, &check("web"), Some(&newest), tomorrow)
            .unwrap();
        assert_eq!(
            store.reads(),
            2,
            "the first build's days and hours; then none"
        );
        assert_eq!(row.days.len(), build::BAR_DAYS as usize);
        assert_eq!(row.days.first().unwrap().known(), 0, "the oldest day left");
        assert_eq!(row.days.last().unwrap().date, tomorrow.date());
        assert_eq!(row.days.last().unwrap().known(), 0);
        assert_eq!(row.days[row.days.len() - 2].up, 1);
        assert_eq!(row.uptime_24h, None, "no result in the last 24 h");
        let whole = build::check_row(&store.inner, &check("web"), Some(&newest), tomorrow).unwrap();
        assert!(same(&row, &whole), "{row:?} against {whole:?}");
    }

    #[test]
    fn a_result_just_before_midnight_counts_on_yesterday() {
        let evening = datetime!(2026-12-07 23:59:50 UTC);
        let first = up("web", evening - Duration::minutes(1));
        let store = store(std::slice::from_ref(&first));
        let cache = RowCache::default();
        cache
            .row(&store, &check("web"), Some(&first), evening)
            .unwrap();
        let late = down("web", evening + Duration::seconds(5));
        store.inner.append(&late).unwrap();
        let after = datetime!(2026-12-08 00:00:05 UTC);
        let row = cache
            .row(&store, &check("web"), Some(&late), after)
            .unwrap();
        let yesterday = &row.days[row.days.len() - 2];
        assert_eq!((yesterday.up, yesterday.down), (1, 1));
        let whole = build::check_row(&store.inner, &check("web"), Some(&late), after).unwrap();
        assert!(same(&row, &whole), "{row:?} against {whole:?}");
    }

    #[test]
    fn a_check_no_longer_listed_is_dropped() {
        let store = store(&[up("web", NOW), up("api", NOW)]);
        let cache = RowCache::default();
        for name in ["web", "api"] {
            let newest = up(name, NOW);
            cache.row(&store, &check(name), Some(&newest), NOW).unwrap();
        }
        assert_eq!(cache.len(), 2);
        cache.retain(|name| name == "api");
        assert_eq!(cache.len(), 1);
    }

    /// The memory store, rollup reads counted.
    impl Store for Counting {
        fn rollups(
            &self,
            name: &str,
            granularity: Granularity,
            since: OffsetDateTime,
        ) -> Result<Vec<Rollup>, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.rollups(name, granularity, since)
        }
        fn append(&self, outcome: &Outcome) -> Result<(), StoreError> {
            self.inner.append(outcome)
        }
        fn history(&self, name: &str, since: OffsetDateTime) -> Result<Vec<Outcome>, StoreError> {
            self.inner.history(name, since)
        }
        fn history_page(
            &self,
            name: &str,
            since: OffsetDateTime,
            limit: usize,
        ) -> Result<Vec<Outcome>, StoreError> {
            self.inner.history_page(name, since, limit)
        }
        fn latest(&self, name: &str) -> Result<Option<Outcome>, StoreError> {
            self.inner.latest(name)
        }
        fn latest_all(&self) -> Result<Vec<Outcome>, StoreError> {
            self.inner.latest_all()
        }
        fn sweep(&self, before: OffsetDateTime) -> Result<u64, StoreError> {
            self.inner.sweep(before)
        }
        fn certificates(&self, name: &str) -> Result<Vec<ServedLeaf>, StoreError> {
            self.inner.certificates(name)
        }
        fn sweep_rollups(
            &self,
            hours_before: OffsetDateTime,
            days_before: OffsetDateTime,
        ) -> Result<u64, StoreError> {
            self.inner.sweep_rollups(hours_before, days_before)
        }
        fn flush(&self) -> Result<(), StoreError> {
            self.inner.flush()
        }
        fn len(&self) -> Result<u64, StoreError> {
            self.inner.len()
        }
    }
}
