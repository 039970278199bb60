//! The integration tests that drive vigie's library in this process: probes
//! against loopback TLS, DNS (DNSSEC too), RDAP, S3 and SMTP servers, CORS, uploads, mail
//! delivery, replication, the heartbeat, vantage claims, config loading,
//! the push channels' loopback receivers (`push_peers`), the push
//! sender's rate limit against them (`push_rate`) and the docs, and
//! the whole daemon run in this process on paused time
//! (`daemon_inprocess`). No process is spawned here; one binary so the harness in
//! `tests/common/` is compiled once for all of them (docs/testing.md).

#[path = "../common/mod.rs"]
mod common;

mod config_fixtures;
mod config_generated;
mod cors_edge;
mod cors_s3;
mod daemon_inprocess;
mod dns;
mod dnssec;
mod docs;
mod harness_s3_selftest;
mod harness_selftest;
mod heartbeat;
mod layers;
mod mail;
mod probe_ca;
mod probe_domain;
mod probe_http;
mod probe_smtp;
mod probe_tls;
mod probe_tls_port;
mod push_peers;
mod push_rate;
mod redirects;
mod replicate;
mod upload;
mod vantage_claims;
