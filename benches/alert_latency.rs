//! From the probe that crosses the threshold to the SMTP server's
//! acceptance, through the real daemon (`vigie run`, release build).
//!
//! A loopback HTTPS target is switched between 200 and 503; one check
//! probes it every second with `failure_threshold = 2`,
//! `recovery_threshold = 2` and `group_window = 1s`; the daemon mails
//! aiosmtpd over plain SMTP. For each incident the crossing probe is the
//! second `down` outcome of the streak (read back from the daemon's history
//! API: its start plus its duration is when vigie knew), and the acceptance
//! is when aiosmtpd wrote the message to its spool (just before its 250).
//! The same for the RESOLVED. Target: under 1 s plus `group_window`.
//!
//! Run: `cargo bench --bench alert_latency [-- INCIDENTS]` (default 5).
//! Needs aiosmtpd (`python3 -m pip install aiosmtpd`).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/crossing.rs"]
mod crossing;

use std::time::{Duration, SystemTime};

use time::OffsetDateTime;

use common::daemon::Daemon;
use common::servers::switchable_target;
use common::smtp::{SmtpOpts, SmtpServer};

const GROUP_WINDOW: Duration = Duration::from_secs(1);
const THRESHOLD: usize = 2;

fn main() {
    let incidents: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(bench(incidents));
}

async fn bench(incidents: usize) {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    let (env, api) = crossing::site_env(&smtp, &target, THRESHOLD, GROUP_WINDOW);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    println!(
        "alert latency: crossing probe -> SMTP acceptance, {incidents} incidents, \
         threshold {THRESHOLD}, group_window {}s, checks every 1 s",
        GROUP_WINDOW.as_secs()
    );
    let (down, resolved) = crossing::measure(incidents, &status, &daemon, THRESHOLD, async |n| {
        let mails = smtp.wait_for(n, Duration::from_secs(60));
        acceptance(&smtp, mails[n - 1].seq)
    })
    .await;
    crossing::report(down, resolved, GROUP_WINDOW);
    daemon.stop(Duration::from_secs(30)).await;
}

/// When aiosmtpd accepted message `seq` (its spool file's mtime).
fn acceptance(smtp: &SmtpServer, seq: u64) -> OffsetDateTime {
    let file = smtp.spool.join(format!("{seq:06}.json"));
    let modified = std::fs::metadata(&file)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let since_epoch = modified
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("mtime after 1970");
    OffsetDateTime::from_unix_timestamp_nanos(since_epoch.as_nanos() as i128).expect("a time")
}
