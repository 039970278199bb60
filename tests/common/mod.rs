//! Reusable integration-test harness: a test PKI ([`pki`]), loopback servers
//! ([`servers`]), a registry's RDAP server ([`rdap_server`]), a real S3
//! server (moto, [`s3`]), a real SMTP server (aiosmtpd, [`smtp`]), the
//! receivers of the push channels (webhook, ntfy,
//! PagerDuty, Slack: [`push`]) and a tiny rustls/hyper client ([`client`])
//! to check them.
//!
//! Use from a test file with `mod common;`. Not every test uses everything.
#![allow(dead_code)]

pub mod bomb;
pub mod browser;
pub mod ca_server;
pub mod client;
pub mod cors_server;
pub mod daemon;
pub mod dns;
pub mod env;
pub mod gate;
pub mod history;
pub mod pki;
pub mod push;
pub mod rdap_server;
pub mod s3;
pub mod s3_auth;
pub mod s3_upload;
pub mod segments;
pub mod servers;
pub mod smtp;
pub mod vantage;

// Convenience re-exports; each test binary uses only some of them.
#[allow(unused_imports)]
pub use pki::{
    days, days_left_leaf, ecdsa_leaf, expired_leaf, five_days_left_leaf, issue,
    missing_intermediate_leaf, not_yet_valid_leaf, now, rsa_leaf, self_signed, self_signed_leaf,
    staging_ca, staging_leaf, test_ca, twenty_days_left_leaf, valid_leaf, wildcard_leaf,
    write_root_pem, write_staging_root_pem, wrong_host_leaf, Ca, CaCert, KeyAlg, Leaf, LeafSpec,
    HOST, OTHER_HOST, WILDCARD,
};
#[allow(unused_imports)]
pub use servers::{
    refused_addr, Garbage, Handler, PlainHttpServer, RecordedRequest, Resetter, Tarpit, TlsOpts,
    TlsPortServer, TlsProxy, TlsServer, IMAP_GREETING,
};

/// Poll `cond` every 10 ms until it is true (returns true) or `timeout` passes (returns false).
/// Server counters are updated by server tasks, slightly after the client sees the effect.
pub async fn eventually(timeout: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
