//! `vigie restore [--from URL]`: rebuilds the local history from the
//! off-region replica (the work is `replicate::restore`).

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::replicate::{
    blocking, restore_telling, Bucket, BucketSettings, ReplicateError, RestoreProgress,
    RestoreReport,
};
use crate::store::SledStore;

/// `vigie restore [--from URL]`: opens the store under `state_dir`
/// (creating it), restores into it from `[replication]` (or `from`, same
/// endpoint and credentials), flushes. Fails if the daemon holds the store.
pub async fn restore_command(
    config: &Config,
    from: Option<&str>,
) -> Result<RestoreReport, ReplicateError> {
    let replication = config
        .replication
        .as_ref()
        .ok_or_else(|| ReplicateError::NotConfigured {
            config: config.path.clone(),
        })?;
    let mut settings = BucketSettings::from_config(replication, config.extra_ca_file.as_deref());
    if let Some(url) = from {
        settings = settings.with_url(url)?;
    }
    let bucket = Bucket::open(&settings)?;
    crate::store::create_state_dir(&config.state_dir).map_err(|source| {
        ReplicateError::StateDir {
            path: config.state_dir.clone(),
            source,
        }
    })?;
    let path = crate::store::history_path(&config.state_dir);
    let store = Arc::new(SledStore::open(&path, crate::store::FLUSH_EVERY)?);
    let told = Told::new();
    let report = restore_telling(&bucket, store.clone(), &|p| told.tell(p)).await;
    told.finish();
    let report = report?;
    blocking(move || crate::store::Store::flush(&*store)).await??;
    if report.is_complete() {
        if let Ok(Some(aside)) = crate::store::acknowledge(&config.state_dir) {
            tracing::warn!(moved_to = %aside.moved_to.display(), "restored: the notice of the store set aside is cleared (the directory stays; delete it when done)");
        }
    }
    Ok(report)
}

/// Lines under systemd or a pipe: one every this often.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// What `vigie restore` says of its progress on stderr: segments done out
/// of all, results a second and what is left, as a bar on a terminal
/// (indicatif) and as a line every [`LINE_EVERY`] otherwise (a journal or a
/// pipe, where a bar would be noise).
struct Told {
    started: Instant,
    bar: Option<indicatif::ProgressBar>,
    last_line: Mutex<Option<Instant>>,
}

impl Told {
    fn new() -> Told {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "restoring {bar:30} {pos}/{len} segments, {msg}, {eta} left",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Told {
            started: Instant::now(),
            bar,
            last_line: Mutex::new(None),
        }
    }

    fn tell(&self, p: RestoreProgress) {
        let elapsed = self.started.elapsed();
        let rate = per_second(p.results, elapsed);
        if let Some(bar) = &self.bar {
            bar.set_length(p.segments as u64);
            bar.set_position(p.segments_done as u64);
            bar.set_message(format!("{} results ({rate} a second)", p.results));
            return;
        }
        let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|at| at.elapsed() >= LINE_EVERY) || p.segments_done == p.segments;
        if !due || p.segments == 0 {
            return;
        }
        *last = Some(Instant::now());
        eprintln!("{}", progress_line(p, elapsed));
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn per_second(results: u64, elapsed: Duration) -> u64 {
    let secs = elapsed.as_secs_f64();
    match secs > 0.0 {
        true => (results as f64 / secs) as u64,
        false => 0,
    }
}

/// "restoring: 12 of 340 segments, 1200000 results (41000 a second), about
/// 3 min left".
fn progress_line(p: RestoreProgress, elapsed: Duration) -> String {
    let left = match p.segments_done {
        0 => "time left not known yet".to_string(),
        done => {
            let per_segment = elapsed.as_secs_f64() / done as f64;
            let remaining = per_segment * (p.segments - done.min(p.segments)) as f64;
            format!(
                "about {} left",
                crate::when::std_span(Duration::from_secs_f64(remaining))
            )
        }
    };
    format!(
        "restoring: {} of {} segments, {} results ({} a second), {left}",
        p.segments_done,
        p.segments,
        p.results,
        per_second(p.results, elapsed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_how_far_how_fast_and_how_long_is_left() {
        let p = RestoreProgress {
            segments_done: 10,
            segments: 40,
            results: 500_000,
        };
        assert_eq!(
            progress_line(p, Duration::from_secs(10)),
            "restoring: 10 of 40 segments, 500000 results (50000 a second), about 30 s left"
        );
        let first = RestoreProgress {
            segments_done: 0,
            ..p
        };
        assert!(progress_line(first, Duration::ZERO).ends_with("time left not known yet"));
    }
}
