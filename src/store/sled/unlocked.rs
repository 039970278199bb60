//! Opening a store again right after this process closed it, as the tests
//! and benchmarks do: sled's flusher thread lets go of the file lock a
//! moment after the last handle of the process is dropped, so an open at
//! once can find the database still locked (a race a loaded machine shows).

use std::path::Path;
use std::time::Duration;

use super::SledStore;
use crate::store::StoreError;

/// Runs `open` again while it finds the database locked, for up to 5 s.
/// Any other result is returned as it is.
pub fn when_unlocked<T>(mut open: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match open() {
            Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

impl SledStore {
    /// [`SledStore::open`], waiting up to 5 s for this process's own
    /// previous handle on `dir` to let go of the lock.
    pub fn open_when_unlocked(dir: &Path, flush_every: Duration) -> Result<SledStore, StoreError> {
        when_unlocked(|| SledStore::open(dir, flush_every))
    }
}
