//! Rollups and the certificate timeline: what the pages and the uptime API
//! read instead of raw results. Pure types and math; the backends persist
//! them (`sled/rollups.rs`, `memory.rs`) and keep them up to date as
//! results are appended.
//!
//! A [`Rollup`] sums the results of one check over one UTC hour or day
//! ([`Granularity`]): counts by status, the response time (the probe's
//! `duration_ms`, what `probe_duration_seconds` reports) as a
//! [`Histogram`] plus its exact maximum, the leaf certificates served
//! (sha256, with how many results served each) and the fewest days left on
//! any certificate served (the chain's earliest expiry, as alerting judges
//! it). Everything but the extremes can be taken back out ([`Rollup::retract`]),
//! which is how a result replacing another with the same key is handled.
//!
//! Precision of the percentiles. The histogram has fixed buckets, 5% wide
//! on a log scale from 1 ms to about 4 minutes (bucket `i >= 1` holds
//! `[1.05^(i-1), 1.05^i)` ms, 255 buckets, one byte each); a percentile
//! is the geometric middle of the bucket holding the nearest-rank result,
//! so it is within 2.5% of the exact nearest-rank value, and never above
//! the exact maximum. Times under 1 ms share bucket 0 (reported as 0.5 ms
//! or the maximum, if lower); times past the last bucket are reported as
//! the maximum. Rollups and histograms merge by adding counts, so an hour,
//! a day or 90 days answer the same way.
//!
//! A [`ServedLeaf`] is one leaf certificate a check served, with when
//! vigie first and last saw it. `last_seen` is written at most once an
//! hour per leaf (like `chain_uses`), so it is at most an hour older than
//! the newest result that served the leaf; a result earlier than
//! `first_seen` (late, or restored) moves `first_seen` back at once.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::cert::{is_staging, CertInfo};
use crate::outcome::{Outcome, Status};
use crate::store::millis::{bound_millis, key_millis, time_of_millis};

/// How stale a leaf's `last_seen` may be.
pub(crate) const LEAF_SEEN_GRANULARITY_MS: u64 = 60 * 60 * 1000;

/// Buckets of the response-time histogram (bucket indexes fit a byte).
const BUCKETS: usize = 256;
/// Each bucket is this much wider than the one before.
const BUCKET_RATIO: f64 = 1.05;

/// The span of a rollup, aligned on UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Granularity {
    Hour,
    Day,
}

impl Granularity {
    /// Both, hour first.
    pub const ALL: [Granularity; 2] = [Granularity::Hour, Granularity::Day];

    /// Length in milliseconds.
    pub const fn millis(self) -> u64 {
        match self {
            Granularity::Hour => 3_600_000,
            Granularity::Day => 86_400_000,
        }
    }

    /// The start (unix millis) of the bucket holding `millis`.
    pub const fn start_of(self, millis: u64) -> u64 {
        millis - millis % self.millis()
    }
}

/// Response times in fixed log-scale buckets; see the module docs for the
/// precision. Sparse: (bucket, count) for the non-empty buckets, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    buckets: Vec<(u8, u64)>,
}

impl Histogram {
    /// The bucket holding `ms`.
    pub fn bucket_of(ms: f64) -> u8 {
        // NaN and negative times (a clock step during a probe) count as
        // the fastest: there is nothing better to say about them.
        if ms.is_nan() || ms < 1.0 {
            return 0;
        }
        let index = 1.0 + (ms.ln() / BUCKET_RATIO.ln()).floor();
        if index >= (BUCKETS - 1) as f64 {
            (BUCKETS - 1) as u8
        } else {
            index as u8
        }
    }

    /// The value a percentile falling in `bucket` is reported as (before
    /// the cap at the maximum).
    fn representative(bucket: u8) -> f64 {
        match bucket {
            0 => 0.5,
            b if b as usize == BUCKETS - 1 => f64::INFINITY,
            b => BUCKET_RATIO.powf(f64::from(b) - 0.5),
        }
    }

    pub fn add(&mut self, ms: f64) {
        self.add_count(Self::bucket_of(ms), 1);
    }

    /// Takes one `ms` back out; false if its bucket was empty.
    pub fn remove(&mut self, ms: f64) -> bool {
        let bucket = Self::bucket_of(ms);
        match self.buckets.binary_search_by_key(&bucket, |(b, _)| *b) {
            Ok(at) => {
                self.buckets[at].1 -= 1;
                if self.buckets[at].1 == 0 {
                    self.buckets.remove(at);
                }
                true
            }
            Err(_) => false,
        }
    }

    pub fn merge(&mut self, other: &Histogram) {
        for &(bucket, count) in &other.buckets {
            self.add_count(bucket, count);
        }
    }

    fn add_count(&mut self, bucket: u8, count: u64) {
        match self.buckets.binary_search_by_key(&bucket, |(b, _)| *b) {
            Ok(at) => self.buckets[at].1 += count,
            Err(at) => self.buckets.insert(at, (bucket, count)),
        }
    }

    /// Results counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|(_, count)| count).sum()
    }

    /// The nearest-rank `q` quantile (0 < q <= 1), uncapped; `None` when
    /// empty.
    fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for &(bucket, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                return Some(Self::representative(bucket));
            }
        }
        self.buckets.last().map(|(b, _)| Self::representative(*b))
    }

    /// (bucket, count) of the non-empty buckets, in order (for encoding).
    pub fn buckets(&self) -> &[(u8, u64)] {
        &self.buckets
    }

    /// A histogram from encoded (bucket, count) pairs; `None` unless they
    /// are in strictly increasing bucket order with non-zero counts.
    pub fn from_buckets(buckets: Vec<(u8, u64)>) -> Option<Histogram> {
        let ordered = buckets.windows(2).all(|w| w[0].0 < w[1].0);
        let counted = buckets.iter().all(|(_, count)| *count > 0);
        (ordered && counted).then_some(Histogram { buckets })
    }
}

/// How many results of a rollup served one leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafCount {
    /// The leaf's SHA-256 fingerprint, lowercase hex.
    pub sha256: String,
    pub results: u64,
}

/// One check over one hour or day; see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollup {
    pub granularity: Granularity,
    /// Start of the hour or day, UTC.
    pub start: OffsetDateTime,
    pub up: u64,
    pub warn: u64,
    pub down: u64,
    /// Slowest response time seen (ms); 0 when empty.
    pub max_ms: f64,
    /// Fewest days left on any certificate served; `None` when no result
    /// had a certificate.
    pub min_days_left: Option<i64>,
    /// Leaves served, by fingerprint.
    pub leaves: Vec<LeafCount>,
    pub histogram: Histogram,
}

/// What one outcome adds to a rollup.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub status: Status,
    pub ms: f64,
    pub leaf: Option<String>,
    pub days_left: Option<i64>,
}

impl Sample {
    pub fn of(outcome: &Outcome) -> Sample {
        let chain = outcome
            .tls
            .as_ref()
            .map(|tls| &tls.chain[..])
            .unwrap_or(&[]);
        Sample {
            status: outcome.status,
            ms: outcome.duration_ms,
            leaf: chain.first().map(|leaf| leaf.sha256.clone()),
            days_left: chain.iter().map(|cert| cert.days_left).min(),
        }
    }
}

impl Rollup {
    /// An empty rollup of the bucket starting at `start` millis.
    pub fn empty(granularity: Granularity, start: u64) -> Rollup {
        Rollup {
            granularity,
            start: time_of_millis(granularity.start_of(start)),
            up: 0,
            warn: 0,
            down: 0,
            max_ms: 0.0,
            min_days_left: None,
            leaves: Vec::new(),
            histogram: Histogram::default(),
        }
    }

    /// The rollups of `outcomes` (any order, any checks' mix is the
    /// caller's business: they are summed as given), oldest bucket first.
    /// What the backends must agree with, and what a restore writes.
    pub fn from_outcomes(granularity: Granularity, outcomes: &[Outcome]) -> Vec<Rollup> {
        let mut buckets: BTreeMap<u64, Rollup> = BTreeMap::new();
        for outcome in outcomes {
            let Ok(millis) = key_millis(outcome) else {
                continue;
            };
            let start = granularity.start_of(millis);
            buckets
                .entry(start)
                .or_insert_with(|| Rollup::empty(granularity, start))
                .add(&Sample::of(outcome));
        }
        buckets.into_values().collect()
    }

    /// Start of the bucket, unix millis.
    pub fn start_millis(&self) -> u64 {
        bound_millis(self.start)
    }

    /// Results with a status (every status is known today: up, warn and
    /// down are all there is).
    pub fn known(&self) -> u64 {
        self.up + self.warn + self.down
    }

    /// (up + warn) / known; `None` for an empty bucket (no data is not 0%).
    pub fn uptime(&self) -> Option<f64> {
        let known = self.known();
        (known > 0).then(|| (self.up + self.warn) as f64 / known as f64)
    }

    /// Median response time (ms), within 2.5%.
    pub fn p50(&self) -> Option<f64> {
        self.percentile(0.50)
    }

    /// 95th percentile response time (ms), within 2.5%.
    pub fn p95(&self) -> Option<f64> {
        self.percentile(0.95)
    }

    /// The nearest-rank `q` quantile (0 < q <= 1) of the response times,
    /// capped at the maximum.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        self.histogram.quantile(q).map(|ms| ms.min(self.max_ms))
    }

    pub(crate) fn add(&mut self, sample: &Sample) {
        *self.count_of(sample.status) += 1;
        self.histogram.add(sample.ms);
        if sample.ms > self.max_ms {
            self.max_ms = sample.ms;
        }
        if let Some(days) = sample.days_left {
            self.min_days_left = Some(self.min_days_left.map_or(days, |m| m.min(days)));
        }
        if let Some(leaf) = &sample.leaf {
            match self
                .leaves
                .binary_search_by(|l| l.sha256.as_str().cmp(leaf))
            {
                Ok(at) => self.leaves[at].results += 1,
                Err(at) => {
                    // Room for one more, not four: the daemon keeps two
                    // rollups of every check, most of them of one leaf.
                    self.leaves.reserve_exact(1);
                    self.leaves.insert(
                        at,
                        LeafCount {
                            sha256: leaf.clone(),
                            results: 1,
                        },
                    );
                }
            }
        }
    }

    /// Takes a sample back out: its status count, histogram entry and leaf
    /// count. The maximum and the fewest days left are extremes and stay
    /// (the store's docs say when this matters).
    pub(crate) fn retract(&mut self, sample: &Sample) {
        let count = self.count_of(sample.status);
        *count = count.saturating_sub(1);
        self.histogram.remove(sample.ms);
        if let Some(leaf) = &sample.leaf {
            if let Ok(at) = self
                .leaves
                .binary_search_by(|l| l.sha256.as_str().cmp(leaf))
            {
                self.leaves[at].results -= 1;
                if self.leaves[at].results == 0 {
                    self.leaves.remove(at);
                }
            }
        }
    }

    /// Adds `other` (e.g. days into a month); the start stays this one's.
    pub fn merge(&mut self, other: &Rollup) {
        self.up += other.up;
        self.warn += other.warn;
        self.down += other.down;
        self.max_ms = self.max_ms.max(other.max_ms);
        self.min_days_left = match (self.min_days_left, other.min_days_left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.histogram.merge(&other.histogram);
        for leaf in &other.leaves {
            match self.leaves.binary_search_by(|l| l.sha256.cmp(&leaf.sha256)) {
                Ok(at) => self.leaves[at].results += leaf.results,
                Err(at) => self.leaves.insert(at, leaf.clone()),
            }
        }
    }

    fn count_of(&mut self, status: Status) -> &mut u64 {
        match status {
            Status::Up => &mut self.up,
            Status::Warn => &mut self.warn,
            Status::Down => &mut self.down,
        }
    }
}

/// One leaf certificate a check served; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedLeaf {
    /// SHA-256 fingerprint, lowercase hex.
    pub sha256: String,
    pub subject: String,
    pub issuer: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    /// The issuer is an ACME staging CA ([`is_staging`]): browsers trust
    /// none of these.
    pub staging: bool,
    pub first_seen: OffsetDateTime,
    /// At most an hour older than the newest result that served it.
    pub last_seen: OffsetDateTime,
}

impl ServedLeaf {
    /// The leaf as first seen at `at` millis.
    pub fn new(leaf: &CertInfo, at: u64) -> ServedLeaf {
        let seen = time_of_millis(at);
        ServedLeaf {
            sha256: leaf.sha256.clone(),
            subject: leaf.subject.clone(),
            issuer: leaf.issuer.clone(),
            not_before: leaf.not_before.to_offset(time::UtcOffset::UTC),
            not_after: leaf.not_after.to_offset(time::UtcOffset::UTC),
            staging: is_staging(&leaf.issuer),
            first_seen: seen,
            last_seen: seen,
        }
    }

    /// Notes that the leaf was served at `at` millis; true when that
    /// changed `first_seen` or `last_seen` (what a backend then writes).
    pub(crate) fn observe(&mut self, at: u64) -> bool {
        let (first, last) = (self.first_seen_millis(), self.last_seen_millis());
        let mut changed = false;
        if at < first {
            self.first_seen = time_of_millis(at);
            changed = true;
        }
        if at >= last.saturating_add(LEAF_SEEN_GRANULARITY_MS) {
            self.last_seen = time_of_millis(at);
            changed = true;
        }
        changed
    }

    pub fn first_seen_millis(&self) -> u64 {
        bound_millis(self.first_seen)
    }

    pub fn last_seen_millis(&self) -> u64 {
        bound_millis(self.last_seen)
    }

    /// The timeline `outcomes` (of one check, oldest first) make when
    /// appended in that order to a store that never saw the check; the
    /// order [`sort_timeline`] gives.
    pub fn from_outcomes(outcomes: &[Outcome]) -> Vec<ServedLeaf> {
        let mut timeline = Timeline::default();
        for outcome in outcomes {
            timeline.observe(outcome);
        }
        timeline.sorted()
    }
}

/// One check's timeline as a backend keeps it in memory: its leaves in a
/// vector of exactly their number, found by fingerprint in order.
///
/// A check serves one leaf, or a few over a rotation, and the daemon keeps
/// the timeline of every check. A `BTreeMap` keyed by fingerprint
/// allocated a node of eleven entries for the first leaf, plus a second
/// copy of its fingerprint: about 1.8 KB a check, megabytes of the
/// daemon's heap at thousands of checks (heaptrack), against the
/// 144 bytes of one leaf (and its strings) here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Timeline {
    leaves: Vec<ServedLeaf>,
}

impl Timeline {
    /// Applies one outcome's leaf (by fingerprint); returns the entry when
    /// it is new or changed (what a backend then writes).
    pub(crate) fn observe(&mut self, outcome: &Outcome) -> Option<&ServedLeaf> {
        let leaf = outcome.tls.as_ref()?.chain.first()?;
        let at = key_millis(outcome).ok()?;
        match self.position(&leaf.sha256) {
            Some(index) => {
                let served = &mut self.leaves[index];
                served.observe(at).then_some(&*served)
            }
            None => Some(self.push(ServedLeaf::new(leaf, at))),
        }
    }

    /// Puts a leaf read from the disk, replacing one of the same
    /// fingerprint.
    pub(crate) fn insert(&mut self, leaf: ServedLeaf) {
        match self.position(&leaf.sha256) {
            Some(index) => self.leaves[index] = leaf,
            None => {
                self.push(leaf);
            }
        }
    }

    /// Keeps the leaves `keep` says to keep; returns the others.
    pub(crate) fn retain(&mut self, keep: impl Fn(&ServedLeaf) -> bool) -> Vec<ServedLeaf> {
        if self.leaves.iter().all(&keep) {
            return Vec::new();
        }
        let (kept, dropped): (Vec<ServedLeaf>, Vec<ServedLeaf>) =
            std::mem::take(&mut self.leaves).into_iter().partition(keep);
        self.leaves = kept;
        self.leaves.shrink_to_fit();
        dropped
    }

    pub(crate) fn len(&self) -> usize {
        self.leaves.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &ServedLeaf> {
        self.leaves.iter()
    }

    /// The leaves in timeline order ([`sort_timeline`]).
    pub(crate) fn sorted(&self) -> Vec<ServedLeaf> {
        let mut leaves = self.leaves.clone();
        sort_timeline(&mut leaves);
        leaves
    }

    fn position(&self, sha256: &str) -> Option<usize> {
        self.leaves.iter().position(|leaf| leaf.sha256 == sha256)
    }

    /// Grows by exactly one: a vector's doubling would keep room for four
    /// leaves in a check that serves one.
    fn push(&mut self, leaf: ServedLeaf) -> &ServedLeaf {
        self.leaves.reserve_exact(1);
        self.leaves.push(leaf);
        &self.leaves[self.leaves.len() - 1]
    }
}

/// Timeline order: first seen, then fingerprint.
pub(crate) fn sort_timeline(leaves: &mut [ServedLeaf]) {
    leaves.sort_by(|a, b| (a.first_seen, &a.sha256).cmp(&(b.first_seen, &b.sha256)));
}

/// Whether the bucket of `granularity` starting at `start` millis ends at
/// or before `cutoff` millis (what
/// [`Store::sweep_rollups`](crate::store::Store::sweep_rollups) deletes).
pub(in crate::store) fn bucket_swept(granularity: Granularity, start: u64, cutoff: u64) -> bool {
    start.saturating_add(granularity.millis()) <= cutoff
}

#[cfg(test)]
mod tests {
    use time::Duration;

    use super::*;
    use crate::store::contract::{chain, up, T0};

    fn at(minutes: i64, ms: f64, status: Status) -> Outcome {
        let mut outcome = up("site", T0 + Duration::minutes(minutes));
        outcome.duration_ms = ms;
        outcome.status = status;
        outcome
    }

    #[test]
    fn buckets_are_five_percent_wide_from_one_millisecond() {
        assert_eq!(Histogram::bucket_of(0.3), 0);
        assert_eq!(Histogram::bucket_of(f64::NAN), 0);
        assert_eq!(Histogram::bucket_of(-5.0), 0);
        assert_eq!(Histogram::bucket_of(1.0), 1);
        assert_eq!(Histogram::bucket_of(1.04), 1);
        assert_eq!(Histogram::bucket_of(1.06), 2);
        assert_eq!(Histogram::bucket_of(1e12), 255);
        for ms in [1.5, 41.7, 250.0, 9_999.0, 120_000.0] {
            let reported = Histogram::representative(Histogram::bucket_of(ms));
            let error = (reported - ms).abs() / ms;
            assert!(error <= 0.0247, "{ms} reported as {reported}");
        }
    }

    #[test]
    fn percentiles_are_nearest_rank_within_the_bucket_and_capped_at_the_max() {
        let outcomes: Vec<Outcome> = (1..=100)
            .map(|n| at(n, n as f64 * 10.0, Status::Up))
            .collect();
        let rollup = &Rollup::from_outcomes(Granularity::Day, &outcomes)[0];
        assert_eq!(rollup.max_ms, 1000.0);
        let p50 = rollup.p50().unwrap();
        let p95 = rollup.p95().unwrap();
        assert!((p50 - 500.0).abs() / 500.0 <= 0.025, "{p50}");
        assert!((p95 - 950.0).abs() / 950.0 <= 0.025, "{p95}");
        assert!(rollup.percentile(1.0).unwrap() <= 1000.0);
        let one = &Rollup::from_outcomes(Granularity::Hour, &[at(0, 0.2, Status::Up)])[0];
        assert_eq!(one.p50(), Some(0.2), "capped at the max");
        assert_eq!(Rollup::empty(Granularity::Hour, 0).p50(), None);
    }

    #[test]
    fn uptime_is_up_and_warn_over_known() {
        let outcomes = [
            at(0, 10.0, Status::Up),
            at(1, 10.0, Status::Warn),
            at(2, 10.0, Status::Down),
            at(3, 10.0, Status::Up),
        ];
        let rollup = &Rollup::from_outcomes(Granularity::Hour, &outcomes)[0];
        assert_eq!((rollup.up, rollup.warn, rollup.down), (2, 1, 1));
        assert_eq!(rollup.uptime(), Some(0.75));
        assert_eq!(Rollup::empty(Granularity::Day, 0).uptime(), None);
    }

    #[test]
    fn buckets_follow_utc_hours_and_days() {
        let outcomes = [
            at(-1, 10.0, Status::Up),
            at(0, 10.0, Status::Up),
            at(61, 10.0, Status::Down),
        ];
        let hours = Rollup::from_outcomes(Granularity::Hour, &outcomes);
        let starts: Vec<_> = hours.iter().map(|r| r.start).collect();
        assert_eq!(
            starts,
            [T0 - Duration::hours(1), T0, T0 + Duration::hours(1)]
        );
        let days = Rollup::from_outcomes(Granularity::Day, &outcomes);
        assert_eq!(days.len(), 1);
        assert_eq!(days[0].start, T0 - Duration::hours(7));
        assert_eq!(days[0].known(), 3);
    }

    #[test]
    fn retracting_takes_back_all_but_the_extremes() {
        let first = at(0, 900.0, Status::Down);
        let second = at(1, 20.0, Status::Up);
        let mut rollup =
            Rollup::from_outcomes(Granularity::Hour, &[first.clone(), second.clone()]).remove(0);
        rollup.retract(&Sample::of(&first));
        let only_second = &Rollup::from_outcomes(Granularity::Hour, &[second])[0];
        assert_eq!(rollup.known(), 1);
        assert_eq!(rollup.histogram, only_second.histogram);
        assert_eq!(rollup.leaves, only_second.leaves);
        assert_eq!(rollup.max_ms, 900.0, "extremes stay");
    }

    #[test]
    fn merging_days_equals_rolling_up_their_results_at_once() {
        let outcomes: Vec<Outcome> = (0..72 * 6)
            .map(|n| {
                at(
                    n * 10,
                    (n % 37) as f64 * 3.3,
                    [Status::Up, Status::Warn, Status::Down][n as usize % 3],
                )
            })
            .collect();
        let days = Rollup::from_outcomes(Granularity::Day, &outcomes);
        assert!(days.len() >= 3);
        let mut merged = days[0].clone();
        for day in &days[1..] {
            merged.merge(day);
        }
        let mut all = Rollup::empty(Granularity::Day, days[0].start_millis());
        for outcome in &outcomes {
            all.add(&Sample::of(outcome));
        }
        assert_eq!(merged, all);
    }

    #[test]
    fn a_leaf_is_seen_again_at_most_hourly_and_earlier_at_once() {
        let outcomes: Vec<Outcome> = (0..130).map(|m| at(m, 10.0, Status::Up)).collect();
        let timeline = ServedLeaf::from_outcomes(&outcomes);
        assert_eq!(timeline.len(), 1);
        assert_eq!(timeline[0].first_seen, T0);
        assert_eq!(timeline[0].last_seen, T0 + Duration::minutes(120));
        assert!(!timeline[0].staging);
        let mut leaf = timeline[0].clone();
        assert!(!leaf.observe(crate::store::millis::bound_millis(
            T0 + Duration::minutes(125)
        )));
        assert!(leaf.observe(crate::store::millis::bound_millis(
            T0 - Duration::minutes(5)
        )));
        assert_eq!(leaf.first_seen, T0 - Duration::minutes(5));
    }

    #[test]
    fn a_staging_issuer_is_flagged() {
        let mut outcome = at(0, 10.0, Status::Warn);
        let tls = outcome.tls.as_mut().unwrap();
        let chain = std::sync::Arc::make_mut(&mut tls.chain);
        chain[0].issuer =
            "C=US, O=(STAGING) Let's Encrypt, CN=(STAGING) Artificial Apricot R3".into();
        assert!(ServedLeaf::from_outcomes(&[outcome])[0].staging);
    }

    #[test]
    fn encoded_buckets_must_be_ordered_and_counted() {
        assert!(Histogram::from_buckets(vec![(1, 2), (5, 1)]).is_some());
        assert!(Histogram::from_buckets(vec![(5, 2), (1, 1)]).is_none());
        assert!(Histogram::from_buckets(vec![(1, 0)]).is_none());
    }

    /// An outcome of "site" at `minutes` serving `domain`'s leaf.
    fn serving(minutes: i64, domain: &str) -> Outcome {
        let mut outcome = at(minutes, 10.0, Status::Up);
        let tls = outcome.tls.as_mut().expect("up() has tls");
        tls.chain = chain(domain, T0).into();
        outcome
    }

    /// The daemon keeps every check's timeline: room for the leaves a
    /// check served, not a tree node's eleven.
    #[test]
    fn a_timeline_keeps_room_for_the_leaves_served_and_no_more() {
        let mut timeline = Timeline::default();
        let written: Vec<bool> = (0..180)
            .map(|minute| timeline.observe(&serving(minute, "old.example")).is_some())
            .collect();
        assert_eq!(
            written.iter().filter(|w| **w).count(),
            3,
            "new, then hourly"
        );
        assert_eq!((timeline.len(), timeline.leaves.capacity()), (1, 1));
        timeline.observe(&serving(200, "new.example"));
        assert_eq!((timeline.len(), timeline.leaves.capacity()), (2, 2));
        let old = timeline.sorted()[0].clone();
        timeline.insert(old.clone());
        assert_eq!(timeline.len(), 2, "a leaf read again replaces its entry");

        let swept = timeline.retain(|leaf| leaf.sha256 != old.sha256);
        assert_eq!(swept, [old]);
        assert_eq!((timeline.len(), timeline.leaves.capacity()), (1, 1));
        assert!(timeline.retain(|_| true).is_empty());
    }
}
