//! The integration tests that run the real binary (`vigie run` and the other
//! subcommands, as child processes) against loopback servers: the API and
//! pages, alerting, replication, supervision, vantages, storage faults, the
//! CLI and the Debian package. Each test starts its own daemon on its own
//! ephemeral port and temporary directory, so they run concurrently.

#[path = "../common/mod.rs"]
mod common;

mod api_limits;
mod cli;
mod daemon;
mod daemon_alerting;
mod daemon_replicate;
mod hostile_facts;
mod incident_updates;
mod package;
mod pages;
mod push;
mod status_page;
mod store_faults;
mod supervision;
mod vantage;
