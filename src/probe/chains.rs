//! Certificate chains seen before, shared instead of parsed and kept again.
//!
//! A target serves the same chain for weeks, and many checks often sit
//! behind one certificate. Parsing it on every probe cost ~5% of a probe's
//! CPU, and keeping one copy per check in the latest outcomes ~1 KiB per
//! check. A chain is known by the SHA-256 of its certificates' DER; the
//! only parts of its description that move with time are each
//! certificate's `days_left` and `hours_left`, recomputed on every probe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::cert::CertInfo;

/// The chains alive in some outcome, by content. Entries only point at
/// them: a chain no outcome holds any more is dropped, and its entry swept.
#[derive(Debug, Default)]
pub struct Chains {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    chains: HashMap<[u8; 32], Weak<[CertInfo]>>,
    /// Sweep dead entries when the map reaches this size.
    sweep_at: usize,
}

/// What identifies a chain as served.
pub fn key(ders: &[impl AsRef<[u8]>]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for der in ders {
        let der = der.as_ref();
        hash.update((der.len() as u64).to_be_bytes());
        hash.update(der);
    }
    hash.finalize().into()
}

impl Chains {
    /// The chain known by `key`, with `days_left` and `hours_left` as of
    /// `now`; `None` if it is not alive anywhere.
    pub fn get(&self, key: &[u8; 32], now: OffsetDateTime) -> Option<Arc<[CertInfo]>> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let chain = seen.chains.get(key)?.upgrade()?;
        drop(seen);
        let current = |cert: &CertInfo| {
            cert.days_left == (cert.not_after - now).whole_days()
                && cert.hours_left == crate::cert::hours_left(cert.not_after, now)
        };
        if chain.iter().all(current) {
            return Some(chain);
        }
        // An hour has passed: a new description, kept for the next probes.
        let updated: Arc<[CertInfo]> = chain
            .iter()
            .map(|cert| CertInfo {
                days_left: (cert.not_after - now).whole_days(),
                hours_left: crate::cert::hours_left(cert.not_after, now),
                ..cert.clone()
            })
            .collect();
        Some(self.keep(*key, updated))
    }

    /// Remembers `chain` under `key` and hands it back.
    pub fn keep(&self, key: [u8; 32], chain: Arc<[CertInfo]>) -> Arc<[CertInfo]> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.chains.insert(key, Arc::downgrade(&chain));
        if seen.chains.len() >= seen.sweep_at {
            seen.chains.retain(|_, chain| chain.strong_count() > 0);
            seen.sweep_at = (seen.chains.len() * 2).max(64);
        }
        chain
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.lock().unwrap().chains.len()
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn cert(not_after: OffsetDateTime, now: OffsetDateTime) -> CertInfo {
        CertInfo {
            subject: "CN=www.example.com".to_string(),
            issuer: "CN=R11".to_string(),
            not_before: datetime!(2026-10-01 00:00:00 UTC),
            not_after,
            days_left: (not_after - now).whole_days(),
            hours_left: crate::cert::hours_left(not_after, now),
            lifetime_hours: 0,
            sans: vec!["www.example.com".to_string()],
            serial: "01".to_string(),
            sha256: "ab".repeat(32),
            key: "ECDSA P-256".to_string(),
            signature: "ecdsa-with-SHA256".to_string(),
        }
    }

    const NOW: OffsetDateTime = datetime!(2026-11-29 12:00:00 UTC);
    const EXPIRY: OffsetDateTime = datetime!(2027-01-28 06:30:00 UTC);

    #[test]
    fn a_chain_seen_again_is_the_same_allocation() {
        let chains = Chains::default();
        let key = key(&[b"leaf".as_slice(), b"intermediate".as_slice()]);
        assert!(chains.get(&key, NOW).is_none());
        let kept = chains.keep(key, vec![cert(EXPIRY, NOW)].into());
        let again = chains.get(&key, NOW + time::Duration::minutes(1)).unwrap();
        assert!(Arc::ptr_eq(&kept, &again));
    }

    #[test]
    fn days_left_follow_the_probe_time() {
        let chains = Chains::default();
        let key = key(&[b"leaf".as_slice()]);
        let _kept = chains.keep(key, vec![cert(EXPIRY, NOW)].into());
        let tomorrow = NOW + time::Duration::days(1);
        let later = chains.get(&key, tomorrow).unwrap();
        assert_eq!(later[0].days_left, (EXPIRY - tomorrow).whole_days());
        assert!(Arc::ptr_eq(&later, &chains.get(&key, tomorrow).unwrap()));
    }

    #[test]
    fn different_chains_do_not_meet_and_dropped_ones_are_swept() {
        assert_ne!(
            key(&[b"ab".as_slice(), b"c".as_slice()]),
            key(&[b"a".as_slice(), b"bc".as_slice()]),
            "lengths are part of the key"
        );
        let chains = Chains::default();
        for i in 0..200u32 {
            let chain = chains.keep(key(&[i.to_be_bytes()]), vec![cert(EXPIRY, NOW)].into());
            drop(chain);
        }
        assert!(chains.len() < 200, "dead entries are swept");
        assert!(chains.get(&key(&[7u32.to_be_bytes()]), NOW).is_none());
    }
}
