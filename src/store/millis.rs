//! The store's unit of time: unix milliseconds. Keys, records and rollups
//! all count in it; its own file so that the rollup math and the on-disk
//! format both read it without importing each other.

use time::OffsetDateTime;

use crate::outcome::Outcome;
use crate::store::StoreError;

/// The key time of an outcome: unix milliseconds, truncated.
pub(in crate::store) fn key_millis(outcome: &Outcome) -> Result<u64, StoreError> {
    let millis = outcome
        .started_at
        .unix_timestamp_nanos()
        .div_euclid(1_000_000);
    u64::try_from(millis).map_err(|_| StoreError::BeforeEpoch {
        name: outcome.name.clone(),
        started_at: outcome.started_at,
    })
}

/// A `since`/`before` bound as key millis; times before 1970 mean "from the
/// start".
pub(in crate::store) fn bound_millis(at: OffsetDateTime) -> u64 {
    let millis = at.unix_timestamp_nanos().div_euclid(1_000_000);
    u64::try_from(millis.max(0)).unwrap_or(u64::MAX)
}

/// The time a key stands for, in UTC.
pub(in crate::store) fn time_of_millis(millis: u64) -> OffsetDateTime {
    // Every u64 millisecond count that `key_millis` produced came from an
    // OffsetDateTime, so it is in range; a corrupt key far in the future is
    // clamped rather than trusted.
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `at` to the millisecond, as the outbox records keep their times.
pub(in crate::store) fn to_millisecond(at: OffsetDateTime) -> OffsetDateTime {
    crate::clock::from_unix_millis(crate::clock::unix_millis(at)).unwrap_or(at)
}

/// A record's time as unix milliseconds in its JSON, as the keys count
/// (`#[serde(with = "...::millis::serde_millis")]`).
pub(in crate::store) mod serde_millis {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        crate::clock::unix_millis(*t).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let ms = i64::deserialize(d)?;
        crate::clock::from_unix_millis(ms)
            .ok_or_else(|| serde::de::Error::custom(format!("{ms} ms is out of range")))
    }
}

/// [`serde_millis`] for an optional time: `null` when there is none.
pub(in crate::store) mod serde_opt_millis {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &Option<OffsetDateTime>, s: S) -> Result<S::Ok, S::Error> {
        t.map(crate::clock::unix_millis).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<OffsetDateTime>, D::Error> {
        Option::<i64>::deserialize(d)?
            .map(|ms| {
                crate::clock::from_unix_millis(ms)
                    .ok_or_else(|| serde::de::Error::custom(format!("{ms} ms is out of range")))
            })
            .transpose()
    }
}
