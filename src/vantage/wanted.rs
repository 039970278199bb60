//! What the alerter asks of the vantage task, between the two: publish
//! this node's state now, read the peers every second for a while, or
//! every round while some page waits for them. Flags and wake-ups only;
//! the task decides when the bucket is used.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use time::OffsetDateTime;
use tokio::sync::Notify;

use crate::clock::unix_millis;

/// What the alerter asks of the vantage task.
#[derive(Debug, Default)]
pub struct Wanted {
    /// Read the peers every second until then (unix ms).
    urgent_until_ms: AtomicI64,
    /// Some check waits for confirmation: read the peers every round.
    pending: AtomicBool,
    publish: Notify,
    read: Notify,
}

impl Wanted {
    /// A check began waiting at `since`: read the peers every second for
    /// `window` from then.
    pub fn urgent_until(&self, until: OffsetDateTime) {
        let until = unix_millis(until);
        let before = self.urgent_until_ms.fetch_max(until, Ordering::Relaxed);
        if before < until {
            self.read.notify_one();
        }
    }

    pub fn set_pending(&self, pending: bool) {
        self.pending.store(pending, Ordering::Relaxed);
    }

    /// A check changed between down and not here: publish it now.
    pub fn publish_now(&self) {
        self.publish.notify_one();
    }

    pub fn is_urgent(&self, now: OffsetDateTime) -> bool {
        self.urgent_until_ms.load(Ordering::Relaxed) > unix_millis(now)
    }

    /// Some check waits for confirmation.
    pub fn is_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Resolves when the alerter asks for a publication now.
    pub async fn publish_asked(&self) {
        self.publish.notified().await
    }

    /// Resolves when the alerter asks for the peers to be read now.
    pub async fn read_asked(&self) {
        self.read.notified().await
    }
}
