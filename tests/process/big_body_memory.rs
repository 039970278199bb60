//! A target serving 50 MiB must not cost 50 MiB: the body is read up to the
//! 1 MiB cap and the rest is never pulled off the socket. It holds
//! [`crate::alone`] so no other test of this binary moves the resident set
//! while it measures.

use crate::common::env::probe;
use crate::common::pki::valid_leaf;
use crate::common::servers::{TlsOpts, TlsServer};

fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

#[test]
fn fifty_mib_bodies_keep_memory_flat() {
    let _alone = crate::alone();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(five_probes_of_fifty_mib());
}

async fn five_probes_of_fifty_mib() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    // Warm up allocator and TLS state once before measuring.
    probe(&server.url("/big"), "").await;
    let before = resident_kib();
    for _ in 0..5 {
        let outcome = probe(&server.url("/big"), "").await;
        assert!(outcome.http.as_ref().unwrap().body_truncated);
    }
    let grown_mib = resident_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 16,
        "resident memory grew by {grown_mib} MiB over 5 probes of 50 MiB"
    );
}
