//! The integration tests that need this process to themselves: one measures
//! the test process's own resident memory, one the peak of a `vigie
//! restore` it spawns (which starts from this process's high-water mark),
//! and one kills its re-executed writer with SIGKILL under a steady load.
//! Each holds [`alone`] for its whole run, so the binary runs them one at a
//! time whatever `--test-threads` says, and builds only the harness modules
//! they use.

use std::sync::{Mutex, MutexGuard};

/// The part of the harness in `tests/common/` these tests use: the test
/// PKI, the loopback servers, the in-process probe, moto, made-up history
/// and its segments, and the CLI runner.
#[allow(dead_code)]
#[path = "../common"]
mod common {
    pub mod daemon;
    pub mod env;
    pub mod history;
    pub mod pki;
    pub mod s3;
    pub mod s3_auth;
    pub mod segments;
    pub mod servers;
}

mod big_body_memory;
mod restore_memory;
mod store_crash;

/// Held by each test for its whole run: no two tests of this binary run
/// at once. A test that failed while holding it poisons it; the next one
/// runs anyway.
fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
