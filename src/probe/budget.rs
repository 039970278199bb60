//! The time one probe's CA lookups may take together.
//!
//! ARI and CRL lookups run after the check's own exchange, for the
//! certificates on the verified path. They share one deadline, the end of
//! the check's `timeout` counted from the probe's start, so that however
//! many lookups there are and however slowly the CA answers, the outcome
//! arrives within the check's `timeout`. A lookup still running at the
//! deadline is cut, and its report says so ([`CUT`]); it is never a
//! failure of the check by itself.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Why a lookup was cut, after what was cut ("CRL not fetched: ...").
pub const CUT: &str = "not fetched: the probe's time budget was spent";

/// A deadline shared by every CA lookup of one probe.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    deadline: Instant,
}

impl Budget {
    /// A budget ending at `deadline`.
    pub fn until(deadline: Instant) -> Self {
        Self { deadline }
    }

    /// What is left (zero once spent).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    pub fn is_spent(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// `work`'s output, or `None` when the deadline comes first (`work` is
    /// then dropped).
    pub async fn run<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::time::timeout_at(self.deadline, work).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_past_the_deadline_is_cut() {
        let budget = Budget::until(Instant::now() + Duration::from_secs(5));
        assert_eq!(budget.run(async { 1 }).await, Some(1));
        let slow = tokio::time::sleep(Duration::from_secs(6));
        assert_eq!(budget.run(slow).await, None);
        assert!(budget.is_spent());
        assert_eq!(budget.remaining(), Duration::ZERO);
    }
}
