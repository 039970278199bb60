//! History: every judged [`Outcome`](crate::outcome::Outcome), kept so
//! that `history`, the API, the daily report, alerting and replication can
//! read it back; beside it what alerting remembers ([`AlertStore`]), the
//! mail it queued ([`OutboxStore`]) and the newest outcome of each check in
//! memory ([`Latest`]).
//!
//! This module owns the [`Store`] contract and the on-disk layout; it does
//! not decide what to keep (the caller sweeps with its retention) nor when to
//! flush beyond the backend's background interval. Two backends honour the
//! same contract, checked by one suite of scenarios run against both:
//! [`SledStore`] (the daemon's, on disk) and [`MemoryStore`] (tests and
//! `vigie check`).
//!
//! # What comes back
//!
//! An outcome read back equals the one appended except in three ways, the
//! same for every backend (see [`as_stored`]):
//! - `started_at` is truncated to the millisecond (it is the key) and in UTC;
//! - `http.headers` and `http.body` are empty: they serve evaluation only and
//!   are not part of the JSON either;
//! - the other timestamps (certificate validity, verify errors) come back in
//!   UTC (same instant).
//!
//! Two outcomes of one check with the same millisecond share a key: the
//! later append replaces the earlier.
//!
//! # Rollups and the certificate timeline
//!
//! Every append also adds the result to its check's hour and day
//! [`Rollup`] and notes its leaf certificate in the check's timeline
//! ([`ServedLeaf`]); `rollup.rs` says what they hold and how precise the
//! percentiles are. Both backends keep them the same way, and the contract
//! scenarios check that the rollups equal [`Rollup::from_outcomes`] of the
//! raw results, whatever the order of the appends.
//! - A result that replaces another (same key) takes the other's status
//!   count, histogram entry and leaf count out of the rollups before adding
//!   its own. The maximum response time and the fewest days left are
//!   extremes and cannot be taken back: they keep the replaced result's if
//!   it held them. The timeline keeps every leaf that was ever stored.
//! - [`Store::sweep`] deletes raw results only; rollups outlive them and
//!   go with [`Store::sweep_rollups`] (the daemon: hour rollups after 92
//!   days, day rollups and timeline leaves after `rollup_retention`).
//! - `vigie restore` recomputes the rollups of every day it restored into
//!   from the raw results then stored ([`SledStore::finish_restore`]).
//! - sled keeps each check's newest hour and day in memory and writes
//!   them every 10 appends of the check, when the bucket is left, on
//!   [`Store::flush`] and at close (`sled/rollups.rs` says why); a late
//!   result is written at once. After an unclean stop the next open adds
//!   to the newest buckets the results stored after what they count, and
//!   counts again a bucket that counts results the stop lost, so the
//!   rollups lack at most one late result appended just before the stop.
//!
//! # On disk
//!
//! The sled trees, their keys and values, the journal file of each
//! check's unpacked results beside them, and the schema versions are the
//! on-disk contract, written down in `format/mod.rs`; the sled backend
//! itself is `sled/` (one file per group of trees, and the journal's).
//!
//! Replication (`sled/queue.rs`, `sled/replication.rs`, sled only): while the daemon
//! replicates, each append also queues its key under the next sequence
//! number in `replication`; the replicator (`replicate/`) ships the queue in
//! order and advances `replication_cursor`. [`Store::sweep`] never deletes a
//! result still queued.
//!
//! The same database holds the alert trees (`alert_state`, `silences`,
//! `cert_changes`: [`AlertStore`], `alerts.rs`) and the outbox's
//! (`outbox`, `dead_letters`, the backoff in `meta`: [`OutboxStore`],
//! `outbox.rs`), the push outbox's (`push_outbox`, `push_dead`:
//! [`PushStore`], `pushes.rs`) and who was told of each incident (`told`,
//! `told_deliveries`: [`ToldLedger`], `told.rs`), which
//! [`SledStore::alerts`] opens. This module is the only
//! one that opens sled trees. Both have a memory backend
//! ([`AlertStore::in_memory`]) and one suite of scenarios run against both
//! (`alerting_contract.rs`).

#[cfg(test)]
pub(crate) mod alerting_contract;
mod alerts;
mod aside;
mod backend;
mod error;
mod format;
mod latest;
mod memory;
mod millis;
mod outbox;
mod pushes;
mod rollup;
mod sled;
mod told;
mod updates;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use self::alerts::{AlertStore, Telling};
pub use self::aside::{
    acknowledge, open_or_set_aside, set_aside_earlier, SetAside, CORRUPT_MARKER,
};
pub use self::backend::{as_stored, Store};
pub use self::error::StoreError;
pub use self::latest::Latest;
pub use self::memory::MemoryStore;
pub use self::outbox::{DeadLetter, MessageId, OutboxStore, Pending, Schedule, TransportState};
pub use self::pushes::{DeadPush, NewPush, PushRecord, PushStore};
pub use self::rollup::{Granularity, Histogram, LeafCount, Rollup, ServedLeaf};
pub use self::sled::replication::{
    Backlog, RefusedSegment, Restored, Shipment, ShipmentRange, ShipmentRead, Shipped,
};
#[cfg(test)]
pub(crate) use self::sled::tests::open as open_sled_when_unlocked;
pub use self::sled::{Packing, Restoring, SledStore};
pub use self::told::{Told, ToldEvent, ToldLedger};
pub use self::updates::{IncidentUpdates, UpdateRefused};

/// sled and the journal of the unpacked results flush this often in the
/// background: the most an unclean stop (kill -9, power loss) can lose.
pub const FLUSH_EVERY: Duration = Duration::from_millis(1000);

/// The history's database under `state_dir`.
pub fn history_path(state_dir: &Path) -> PathBuf {
    state_dir.join("history")
}

/// Creates `state_dir` (and its missing parents) for vigie's user only,
/// 0700 whatever the umask: it holds the history, the outbox and the
/// maildir, which name every target and carry alert text. A directory that
/// already exists keeps its mode (it is the operator's), but one that
/// others may read is named in a warning.
pub fn create_state_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        tracing::warn!(
            state_dir = %dir.display(),
            mode = format!("{mode:o}"),
            "state_dir is open to other users; `chmod 700` it (vigie creates it 0700)"
        );
    }
    Ok(())
}

/// The scenarios every backend must pass, written once. Each backend's test
/// module instantiates them with [`contract_tests!`].
#[cfg(test)]
pub(crate) mod contract {
    use time::macros::datetime;
    use time::{Duration, OffsetDateTime};

    use super::{as_stored, Granularity, Rollup, Store, StoreError};
    use crate::outcome::{
        Assertion, CorsReport, DeniedOrigin, Failure, Outcome, ProbeError, Status, VerifyError,
    };

    pub use crate::testing::{up, wildcard_chain as chain, T0};

    /// Everything an outcome can carry at once, with a sub-millisecond
    /// start and `days_left` that do not follow from `started_at`.
    pub fn rich(name: &str) -> Outcome {
        let at = T0 + Duration::nanoseconds(123_456_789);
        let mut outcome = up(name, at);
        outcome.status = Status::Down;
        outcome.duration_ms = 10_000.000_001;
        outcome.failures = vec![
            Failure {
                assertion: Assertion::TlsTrusted,
                expected: "a chain to a trusted root".to_string(),
                observed: "issuer (STAGING) Artificial Apricot R3".to_string(),
                message: "certificate comes from a staging CA".to_string(),
            },
            Failure {
                assertion: Assertion::CorsDeniedOrigin,
                expected: "no Access-Control-Allow-Origin".to_string(),
                observed: "https://evil.example".to_string(),
                message: "the bucket admits https://evil.example".to_string(),
            },
        ];
        outcome.probe_error = Some(ProbeError {
            kind: Assertion::TlsTrusted,
            message: "invalid peer certificate: UnknownIssuer".to_string(),
        });
        let http = outcome.http.as_mut().expect("up() has http");
        http.status = 503;
        http.redirects = 2;
        http.final_url = Some("https://www.example.com/landing".to_string());
        http.body_truncated = true;
        http.body_bytes = u64::MAX;
        let tls = outcome.tls.as_mut().expect("up() has tls");
        tls.trusted = false;
        tls.hostname_matches = false;
        tls.cipher_suite = None;
        tls.verify_error = Some(VerifyError::HostnameMismatch {
            expected: "www.example.org".to_string(),
            covered: vec!["*.example.com".to_string(), "example.com".to_string()],
        });
        let chain = std::sync::Arc::make_mut(&mut tls.chain);
        chain[0].days_left = -3;
        chain[1].days_left = 40_000;
        chain[1].not_before = datetime!(2024-03-13 00:00:00.5 +02:00);
        chain[1].lifetime_hours = (chain[1].not_after - chain[1].not_before).whole_hours();
        outcome.cors = Some(Box::new(CorsReport {
            preflight_status: 403,
            allow_origin: Some("*".to_string()),
            allow_methods: vec!["GET".to_string(), "PUT".to_string()],
            allow_headers: vec!["content-type".to_string()],
            allow_credentials: Some(false),
            expose_headers: vec!["etag".to_string()],
            max_age: Some(3000),
            vary: Some("Origin".to_string()),
            refusal: Some("<CORSResponse>denied</CORSResponse>".to_string()),
            location: Some("https://elsewhere.example/".to_string()),
            denied: vec![
                DeniedOrigin {
                    origin: "https://evil.example".to_string(),
                    admitted: true,
                    allow_origin: Some("https://evil.example".to_string()),
                },
                DeniedOrigin {
                    origin: "https://other.example".to_string(),
                    admitted: false,
                    allow_origin: None,
                },
            ],
        }));
        outcome.dns = Some(Box::new(crate::outcome::DnsReport {
            query: "_acme-challenge.example.com.".to_string(),
            resolvers: vec!["127.0.0.1:5353".to_string(), "[::1]:53".to_string()],
            nxdomain: true,
            cname: Some("d420c923.auth.acme-dns.example.net.".to_string()),
            a: Some(vec!["192.0.2.7".to_string()]),
            aaaa: Some(Vec::new()),
            txt: None,
            // Not stored: a decoded outcome has none.
            more: Default::default(),
            caa: Some(crate::outcome::CaaReport {
                domain: Some("example.com.".to_string()),
                records: vec![crate::outcome::CaaRecord {
                    flags: 128,
                    tag: "issue".to_string(),
                    value: "letsencrypt.org; validationmethods=dns-01".to_string(),
                }],
            }),
            dnssec: Some(crate::outcome::Dnssec::Bogus),
            dnssec_answers: vec![
                crate::outcome::DnssecAnswer {
                    record_type: "CNAME".to_string(),
                    name: "_acme-challenge.example.com.".to_string(),
                    dnssec: crate::outcome::Dnssec::Insecure,
                },
                crate::outcome::DnssecAnswer {
                    record_type: "CAA".to_string(),
                    name: "example.com.".to_string(),
                    dnssec: crate::outcome::Dnssec::Bogus,
                },
            ],
        }));
        outcome.upload = Some(Box::new(crate::outcome::UploadReport {
            key: "vigie-probe/probe-1/20261201T121500.123Z".to_string(),
            step: crate::outcome::UploadStep::Expose,
            ok: false,
            preflight: outcome.cors.as_deref().cloned(),
            put_status: Some(200),
            allow_origin: Some("https://app.example.com".to_string()),
            expose_headers: vec!["x-amz-request-id".to_string()],
            delete_status: Some(403),
            error: Some(crate::outcome::S3Error {
                code: "AccessDenied".to_string(),
                message: "Access Denied".to_string(),
            }),
            reason: None,
        }));
        outcome
    }

    fn minutes(n: i64) -> OffsetDateTime {
        T0 + Duration::minutes(n)
    }

    fn starts(outcomes: &[Outcome]) -> Vec<OffsetDateTime> {
        outcomes.iter().map(|o| o.started_at).collect()
    }

    pub fn history_is_oldest_first_from_since(store: &dyn Store) {
        for n in [3, 1, 4, 0, 2] {
            store.append(&up("site", minutes(n))).unwrap();
        }
        let all = store.history("site", T0).unwrap();
        assert_eq!(starts(&all), (0..5).map(minutes).collect::<Vec<_>>());
        let recent = store.history("site", minutes(2)).unwrap();
        assert_eq!(starts(&recent), vec![minutes(2), minutes(3), minutes(4)]);
        let later = store.history("site", minutes(4) + Duration::milliseconds(1));
        assert!(later.unwrap().is_empty());
        let before_1970 = store.history("site", OffsetDateTime::UNIX_EPOCH - Duration::days(1));
        assert_eq!(before_1970.unwrap().len(), 5);
    }

    /// Pages of `history_page`, each starting a millisecond after the last
    /// one, add up to `history`, from any `since` (also one inside a
    /// packed block) and with late results merged into old blocks.
    pub fn pages_add_up_to_the_history(store: &dyn Store) {
        for n in (0..97).filter(|n| n % 7 != 3) {
            store.append(&up("site", minutes(n))).unwrap();
            store.append(&up("other", minutes(n))).unwrap();
        }
        for n in (0..97).filter(|n| n % 7 == 3) {
            store.append(&up("site", minutes(n))).unwrap();
        }
        for since in [T0, minutes(13) + Duration::seconds(30), minutes(96)] {
            for limit in [1, 7, 20, 1000] {
                let mut paged = Vec::new();
                let mut from = since;
                loop {
                    let page = store.history_page("site", from, limit).unwrap();
                    assert!(page.len() <= limit);
                    let Some(last) = page.last() else { break };
                    from = last.started_at + Duration::milliseconds(1);
                    paged.extend(page);
                }
                assert_eq!(
                    starts(&paged),
                    starts(&store.history("site", since).unwrap()),
                    "since {since}, pages of {limit}"
                );
            }
        }
        assert!(store.history_page("nothing", T0, 10).unwrap().is_empty());
        assert!(store.history_page("site", T0, 0).unwrap().is_empty());
    }

    pub fn unknown_check_is_empty(store: &dyn Store) {
        assert!(store.history("nope", T0).unwrap().is_empty());
        assert_eq!(store.latest("nope").unwrap(), None);
        assert!(store.latest_all().unwrap().is_empty());
        assert_eq!(store.len().unwrap(), 0);
        store.append(&up("site", T0)).unwrap();
        assert!(store.history("nope", T0).unwrap().is_empty());
        assert_eq!(store.latest("nope").unwrap(), None);
    }

    pub fn latest_and_latest_all(store: &dyn Store) {
        store.append(&up("b-site", minutes(5))).unwrap();
        store.append(&up("b-site", minutes(9))).unwrap();
        store.append(&up("b-site", minutes(7))).unwrap();
        store.append(&up("a-api", minutes(1))).unwrap();
        let latest = store.latest("b-site").unwrap().unwrap();
        assert_eq!(latest, up("b-site", minutes(9)));
        let all = store.latest_all().unwrap();
        assert_eq!(all, vec![up("a-api", minutes(1)), up("b-site", minutes(9))]);
    }

    pub fn round_trip_keeps_everything_but_sub_millis(store: &dyn Store) {
        let rich = rich("rich");
        store.append(&rich).unwrap();
        let back = store.history("rich", T0).unwrap();
        assert_eq!(back, vec![as_stored(&rich)]);
        assert_eq!(back[0].started_at, T0 + Duration::milliseconds(123));
        let mut expected = rich.clone();
        expected.started_at = back[0].started_at;
        assert_eq!(back[0], expected, "only started_at may differ");
        assert_eq!(store.latest("rich").unwrap(), Some(as_stored(&rich)));
        let json = serde_json::to_string(&back[0]).unwrap();
        assert!(
            json.contains("\"started_at\":\"2026-11-29T07:00:00.123Z\""),
            "{json}"
        );
    }

    pub fn evaluation_only_fields_are_not_stored(store: &dyn Store) {
        let mut outcome = up("site", T0);
        let http = outcome.http.as_mut().unwrap();
        http.headers = vec![crate::outcome::Header {
            name: "server".to_string(),
            value: "nginx".to_string(),
            shown: "nginx".to_string(),
        }];
        http.body = b"<title>hello</title>".to_vec();
        store.append(&outcome).unwrap();
        let back = store.latest("site").unwrap().unwrap();
        assert_eq!(back, up("site", T0));
        assert_eq!(back, as_stored(&outcome));
    }

    pub fn two_checks_do_not_mix(store: &dyn Store) {
        for n in 0..10 {
            let name = if n % 2 == 0 { "site" } else { "site-2" };
            store.append(&up(name, minutes(n))).unwrap();
        }
        let site = store.history("site", T0).unwrap();
        let site2 = store.history("site-2", T0).unwrap();
        assert_eq!(starts(&site), [0, 2, 4, 6, 8].map(minutes));
        assert_eq!(starts(&site2), [1, 3, 5, 7, 9].map(minutes));
        assert!(site.iter().all(|o| o.name == "site"));
        assert!(site2.iter().all(|o| o.name == "site-2"));
        assert_eq!(
            store.latest("site").unwrap().unwrap().started_at,
            minutes(8)
        );
    }

    pub fn sweep_removes_only_older_results(store: &dyn Store) {
        let day = |d: i64| T0 + Duration::days(d);
        for d in [-3, -2, -1, 0] {
            store.append(&up("site", day(d))).unwrap();
            store
                .append(&up("api", day(d) + Duration::hours(1)))
                .unwrap();
        }
        assert_eq!(store.len().unwrap(), 8);
        assert_eq!(store.sweep(day(-1)).unwrap(), 4);
        assert_eq!(store.len().unwrap(), 4);
        let since_ever = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(
            starts(&store.history("site", since_ever).unwrap()),
            [day(-1), day(0)]
        );
        assert_eq!(
            starts(&store.history("api", since_ever).unwrap()),
            [day(-1), day(0)].map(|d| d + Duration::hours(1))
        );
        assert_eq!(store.sweep(day(-1)).unwrap(), 0);
        assert_eq!(
            store
                .sweep(OffsetDateTime::UNIX_EPOCH - Duration::days(1))
                .unwrap(),
            0
        );
        assert_eq!(store.sweep(day(1)).unwrap(), 4);
        assert_eq!(store.len().unwrap(), 0);
        assert_eq!(store.latest("site").unwrap(), None);
        store.flush().unwrap();
    }

    pub fn same_millisecond_replaces(store: &dyn Store) {
        store.append(&up("site", T0)).unwrap();
        let mut second = up("site", T0 + Duration::microseconds(400));
        second.status = Status::Warn;
        store.append(&second).unwrap();
        assert_eq!(store.len().unwrap(), 1);
        assert_eq!(store.history("site", T0).unwrap(), vec![as_stored(&second)]);
    }

    pub fn before_1970_is_refused(store: &dyn Store) {
        let outcome = up(
            "site",
            OffsetDateTime::UNIX_EPOCH - Duration::milliseconds(1),
        );
        let err = store.append(&outcome).unwrap_err();
        assert!(matches!(err, StoreError::BeforeEpoch { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "cannot store the result of site started at 1969-12-31T23:59:59.999Z: \
             results before 1970 have no key"
        );
        assert_eq!(store.len().unwrap(), 0);
    }

    /// A result of `name` at `at` with a given status, response time and
    /// leaf domain (each domain is its own leaf fingerprint).
    pub fn varied(
        name: &str,
        at: OffsetDateTime,
        status: Status,
        ms: f64,
        domain: &str,
    ) -> Outcome {
        let mut outcome = up(name, at);
        outcome.status = status;
        outcome.duration_ms = ms;
        outcome.tls.as_mut().expect("up() has tls").chain = chain(domain, at).into();
        outcome
    }

    /// Three hours across a day boundary of varied results, in a shuffled
    /// order, with a timeout (no TLS) among them.
    fn a_varied_stretch(name: &str) -> Vec<Outcome> {
        let start = T0 - Duration::hours(8); // 23:00 the day before
        let mut outcomes: Vec<Outcome> = (0..36)
            .map(|n| {
                let status = [Status::Up, Status::Up, Status::Warn, Status::Down][n % 4];
                let domain = if n < 20 { "old.example" } else { "new.example" };
                let ms = 5.0 + (n * 37 % 101) as f64 * 4.5;
                varied(
                    name,
                    start + Duration::minutes(5 * n as i64),
                    status,
                    ms,
                    domain,
                )
            })
            .collect();
        let timeout = &mut outcomes[7];
        timeout.tls = None;
        timeout.http = None;
        timeout.duration_ms = 10_000.0;
        timeout.status = Status::Down;
        // Late and out of order: the scheduler's order is not the clock's.
        outcomes.swap(3, 30);
        outcomes.swap(11, 25);
        outcomes
    }

    fn ever() -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH
    }

    /// Both granularities of `name` against a recomputation from its raw
    /// results.
    fn assert_rollups_recompute(store: &dyn Store, name: &str) {
        let raw = store.history(name, ever()).unwrap();
        for granularity in Granularity::ALL {
            let stored = store.rollups(name, granularity, ever()).unwrap();
            assert_eq!(
                stored,
                Rollup::from_outcomes(granularity, &raw),
                "{granularity:?} rollups of {name}"
            );
        }
    }

    pub fn rollups_equal_a_recomputation_from_raw_results(store: &dyn Store) {
        for outcome in a_varied_stretch("site") {
            store.append(&outcome).unwrap();
        }
        assert_rollups_recompute(store, "site");
        let hours = store.rollups("site", Granularity::Hour, ever()).unwrap();
        assert_eq!(hours.len(), 3);
        assert_eq!(hours.iter().map(Rollup::known).sum::<u64>(), 36);
        let days = store.rollups("site", Granularity::Day, ever()).unwrap();
        assert_eq!(
            days.iter()
                .map(|d| (d.start, d.known()))
                .collect::<Vec<_>>(),
            [
                (T0 - Duration::days(1) - Duration::hours(7), 12),
                (T0 - Duration::hours(7), 24)
            ]
        );
        let leaves: Vec<&str> = days[1].leaves.iter().map(|l| l.sha256.as_str()).collect();
        assert_eq!(leaves.len(), 2, "the renewal falls on the second day");
        assert!(days.iter().all(|d| d.min_days_left.is_some()));
        let from_second = store
            .rollups(
                "site",
                Granularity::Hour,
                T0 - Duration::hours(7) + Duration::minutes(59),
            )
            .unwrap();
        assert_eq!(
            from_second,
            hours[1..],
            "since falls in the second hour: it is included"
        );
        assert!(store
            .rollups("nope", Granularity::Day, ever())
            .unwrap()
            .is_empty());
        assert!(store.certificates("nope").unwrap().is_empty());
    }

    pub fn late_appends_join_their_buckets(store: &dyn Store) {
        for n in 0..120 {
            store
                .append(&varied(
                    "site",
                    T0 + Duration::minutes(n),
                    Status::Up,
                    30.0,
                    "a.example",
                ))
                .unwrap();
        }
        // An hour and a day that already moved on get a result each.
        store
            .append(&varied(
                "site",
                T0 + Duration::seconds(30),
                Status::Down,
                800.0,
                "a.example",
            ))
            .unwrap();
        store
            .append(&varied(
                "site",
                T0 - Duration::days(3),
                Status::Warn,
                2.0,
                "b.example",
            ))
            .unwrap();
        store
            .append(&varied(
                "site",
                T0 + Duration::minutes(120),
                Status::Up,
                31.0,
                "a.example",
            ))
            .unwrap();
        assert_rollups_recompute(store, "site");
        let hours = store.rollups("site", Granularity::Hour, T0).unwrap();
        assert_eq!(
            hours.iter().map(|h| (h.up, h.down)).collect::<Vec<_>>(),
            [(60, 1), (60, 0), (1, 0)]
        );
        assert_eq!(hours[0].max_ms, 800.0);
    }

    pub fn rollups_of_two_checks_do_not_mix(store: &dyn Store) {
        for n in 0..30 {
            let at = T0 + Duration::minutes(n);
            store
                .append(&varied("site", at, Status::Up, 10.0, "site.example"))
                .unwrap();
            store
                .append(&varied("site-2", at, Status::Down, 99.0, "other.example"))
                .unwrap();
        }
        assert_rollups_recompute(store, "site");
        assert_rollups_recompute(store, "site-2");
        let site = &store.rollups("site", Granularity::Day, ever()).unwrap()[0];
        let other = &store.rollups("site-2", Granularity::Day, ever()).unwrap()[0];
        assert_eq!((site.up, site.down, site.max_ms), (30, 0, 10.0));
        assert_eq!((other.up, other.down, other.max_ms), (0, 30, 99.0));
        assert_ne!(site.leaves, other.leaves);
        assert_eq!(store.certificates("site").unwrap().len(), 1);
        assert_eq!(store.certificates("site-2").unwrap().len(), 1);
        assert_ne!(
            store.certificates("site").unwrap()[0].sha256,
            store.certificates("site-2").unwrap()[0].sha256
        );
    }

    /// A result replacing another with the same key (same millisecond)
    /// replaces its counts, histogram entry and leaf count; the maximum and
    /// the fewest days left are extremes and keep the replaced result's.
    pub fn a_replaced_result_is_retracted_but_extremes_stay(store: &dyn Store) {
        store
            .append(&varied(
                "site",
                T0 + Duration::minutes(1),
                Status::Up,
                20.0,
                "a.example",
            ))
            .unwrap();
        let mut first = varied("site", T0, Status::Down, 900.0, "old.example");
        std::sync::Arc::make_mut(&mut first.tls.as_mut().unwrap().chain)[0].days_left = -5;
        store.append(&first).unwrap();
        let second = varied(
            "site",
            T0 + Duration::microseconds(300),
            Status::Warn,
            25.0,
            "a.example",
        );
        store.append(&second).unwrap();
        assert_eq!(store.len().unwrap(), 2);
        let raw = store.history("site", ever()).unwrap();
        for granularity in Granularity::ALL {
            let mut expected = Rollup::from_outcomes(granularity, &raw).remove(0);
            expected.max_ms = 900.0;
            expected.min_days_left = Some(-5);
            let stored = store.rollups("site", granularity, ever()).unwrap();
            assert_eq!(stored, [expected]);
            assert_eq!((stored[0].up, stored[0].warn, stored[0].down), (1, 1, 0));
            assert_eq!(stored[0].leaves.len(), 1, "the replaced leaf is gone");
            assert_eq!(stored[0].leaves[0].results, 2);
        }
        // The timeline keeps what was served, replaced or not.
        assert_eq!(store.certificates("site").unwrap().len(), 2);
        // The same result again changes nothing.
        let before = store.rollups("site", Granularity::Hour, ever()).unwrap();
        store.append(&second).unwrap();
        assert_eq!(
            store.rollups("site", Granularity::Hour, ever()).unwrap(),
            before
        );
    }

    pub fn rollups_outlive_raw_results_and_have_their_own_sweep(store: &dyn Store) {
        let day = |d: i64| T0 + Duration::days(d);
        for d in -10..=0 {
            let domain = if d < -5 { "old.example" } else { "new.example" };
            for h in [0, 1] {
                store
                    .append(&varied(
                        "site",
                        day(d) + Duration::hours(h),
                        Status::Up,
                        12.0,
                        domain,
                    ))
                    .unwrap();
            }
        }
        let rollups_before = store.rollups("site", Granularity::Day, ever()).unwrap();
        assert_eq!(store.sweep(day(-2)).unwrap(), 16);
        assert_eq!(
            store.rollups("site", Granularity::Day, ever()).unwrap(),
            rollups_before,
            "the raw sweep leaves the rollups"
        );
        assert_eq!(store.certificates("site").unwrap().len(), 2);
        // Hours ending at or before day -4's 08:00 go (13); days ending at
        // or before day -7's 07:00 go (days -10 to -8: day -7's own does
        // not end until midnight); no leaf was last seen before that.
        let removed = store
            .sweep_rollups(day(-4) + Duration::hours(1), day(-7))
            .unwrap();
        let hours = store.rollups("site", Granularity::Hour, ever()).unwrap();
        assert_eq!(hours.first().unwrap().start, day(-4) + Duration::hours(1));
        assert_eq!(hours.len(), 1 + 4 * 2);
        let days = store.rollups("site", Granularity::Day, ever()).unwrap();
        assert_eq!(days.first().unwrap().start, day(-7) - Duration::hours(7));
        assert_eq!(days, rollups_before[rollups_before.len() - days.len()..]);
        assert_eq!(removed, 13 + 3);
        assert_eq!(store.certificates("site").unwrap().len(), 2);
        assert_eq!(store.sweep_rollups(day(-4), day(-5)).unwrap(), 2 + 1);
        let leaves = store.certificates("site").unwrap();
        assert_eq!(leaves.len(), 1, "old.example was last seen on day -6");
        assert_eq!(leaves[0].subject, "CN=*.new.example");
        assert_eq!(store.sweep_rollups(day(-4), day(-5)).unwrap(), 0);
    }

    pub fn the_certificate_timeline_records_every_leaf_served(store: &dyn Store) {
        let at = |minutes: i64| T0 + Duration::minutes(minutes);
        for m in 0..300 {
            let domain = if m < 180 {
                "old.example"
            } else {
                "new.example"
            };
            store
                .append(&varied("site", at(m), Status::Up, 10.0, domain))
                .unwrap();
        }
        let mut staging = varied("site", at(300), Status::Warn, 10.0, "staging.example");
        let leaf = &mut std::sync::Arc::make_mut(&mut staging.tls.as_mut().unwrap().chain)[0];
        leaf.issuer = "C=US, O=(STAGING) Let's Encrypt, CN=(STAGING) Artificial Apricot R3".into();
        store.append(&staging).unwrap();
        // A late result moves first_seen back at once.
        store
            .append(&varied("site", at(-30), Status::Up, 10.0, "old.example"))
            .unwrap();
        let timeline = store.certificates("site").unwrap();
        let seen: Vec<_> = timeline
            .iter()
            .map(|l| (l.subject.as_str(), l.first_seen, l.last_seen, l.staging))
            .collect();
        assert_eq!(
            seen,
            [
                ("CN=*.old.example", at(-30), at(120), false),
                ("CN=*.new.example", at(180), at(240), false),
                ("CN=*.staging.example", at(300), at(300), true),
            ]
        );
        let first = &timeline[0];
        let served = &chain("old.example", at(0))[0];
        assert_eq!(first.sha256, served.sha256);
        assert_eq!(first.issuer, served.issuer);
        assert_eq!(
            (first.not_before, first.not_after),
            (served.not_before, served.not_after)
        );
        let mut in_order = store.history("site", ever()).unwrap();
        in_order.retain(|o| o.started_at >= at(0));
        let recomputed = super::ServedLeaf::from_outcomes(&in_order);
        assert_eq!(recomputed[1..], timeline[1..], "appended in time order");
    }

    /// Runs one scenario on a store made with its guard, and closes the
    /// store before the guard (a temporary directory) goes.
    pub fn run<S: Store, G>(made: (S, G), scenario: fn(&dyn Store)) {
        let (store, guard) = made;
        scenario(&store);
        drop(store);
        drop(guard);
    }

    /// One `#[test]` per scenario, for a backend built by `$make` (an
    /// expression giving `(store, guard)`; the guard lives as long as the
    /// test, e.g. a temporary directory).
    macro_rules! contract_tests {
        ($make:expr) => {
            $crate::store::contract::contract_tests!(@each $make;
                history_is_oldest_first_from_since,
                pages_add_up_to_the_history,
                unknown_check_is_empty,
                latest_and_latest_all,
                round_trip_keeps_everything_but_sub_millis,
                evaluation_only_fields_are_not_stored,
                two_checks_do_not_mix,
                sweep_removes_only_older_results,
                same_millisecond_replaces,
                before_1970_is_refused,
                rollups_equal_a_recomputation_from_raw_results,
                late_appends_join_their_buckets,
                rollups_of_two_checks_do_not_mix,
                a_replaced_result_is_retracted_but_extremes_stay,
                rollups_outlive_raw_results_and_have_their_own_sweep,
                the_certificate_timeline_records_every_leaf_served,
            );
        };
        (@each $make:expr; $($scenario:ident,)*) => {
            mod contract {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[test]
                    fn $scenario() {
                        $crate::store::contract::run($make, $crate::store::contract::$scenario);
                    }
                )*
            }
        };
    }
    pub(crate) use contract_tests;
}
