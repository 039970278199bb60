//! `vigie check --json`: each outcome written to stdout as soon as it is
//! in, rather than the whole document once every probe is done.
//!
//! The probes run on a thread of their own (the runtime's `block_on`)
//! and this one writes: the probes never wait for a slow reader of the
//! output, so their timings stay their own, and what is held is the
//! outcomes not yet written and one outcome's JSON (about 2 KB), where
//! the document of 1,000 outcomes, built whole and copied before it was
//! written, was most of the process's heap.

use std::io;
use std::sync::mpsc;

use futures_util::StreamExt;

use crate::check::Check;
use crate::cli::render::JsonWriter;
use crate::clock::Clock;
use crate::outcome::Status;
use crate::probe::Prober;
use crate::runner;

/// What writing the outcomes came to.
pub struct Written {
    /// The worst status of the outcomes (`Up` when there were none).
    pub worst: Status,
    /// Why stdout stopped taking the output, if it did; the probes ran to
    /// the end all the same.
    pub error: Option<io::Error>,
}

/// Probes `checks` (in their order, `concurrency` at a time) and writes
/// `{"checks": [...]}` to stdout. `Err`: the probes' thread could not be
/// started, and nothing was probed.
pub fn json(
    runtime: &tokio::runtime::Runtime,
    prober: &Prober,
    clock: &dyn Clock,
    checks: &[&Check],
    concurrency: usize,
) -> io::Result<Written> {
    let (sender, outcomes) = mpsc::channel();
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("probes".to_string())
            .spawn_scoped(scope, move || {
                let probed = runner::outcomes(prober, clock, checks, concurrency);
                runtime.block_on(probed.for_each(|outcome| {
                    // The receiver below reads until this sender is
                    // dropped, so the send cannot fail.
                    let _ = sender.send(outcome);
                    std::future::ready(())
                }));
            })?;
        let mut writer = JsonWriter::new(io::BufWriter::new(io::stdout().lock()));
        let mut worst = Status::Up;
        for outcome in outcomes {
            worst = worst.max(outcome.status);
            writer.push(&outcome);
        }
        Ok(Written {
            worst,
            error: writer.finish().err(),
        })
    })
}
