//! Supervision: every long-lived task of the daemon runs under
//! [`Supervisor::spawn`], which restarts it when it panics or returns
//! before it was told to stop, and publishes each task's [`Stage`] for
//! health, metrics, the watchdog and the heartbeat.
//!
//! A task is a factory: each (re)start calls it again, and the future it
//! makes rebuilds the task from its persisted state (the alerter from the
//! stored alert states, the sender from the outbox). Channels a task reads
//! from outlive it (the daemon hands it a shared receiver), so a restart
//! loses at most the one item the panic interrupted.
//!
//! Restarts back off from one second, doubling to a minute. A task that
//! dies [`GIVE_UP_AFTER`] times in a row without running for
//! [`HEALTHY_RUN`] in between is `failing`: it is still restarted, but
//! health answers 503 and the systemd watchdog stops, so systemd restarts
//! the whole service. A stage may also be `stalled`: it has work waiting
//! (or a period it keeps) and has not made progress for its stall limit.
//!
//! This module knows nothing of what the tasks do; the daemon names them
//! and says which progress each one owes.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The first restart waits this long; each further one twice as long.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A task that ran this long before dying starts its count of deaths in a
/// row afresh.
pub const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// Deaths in a row after which a task is `failing`.
pub const GIVE_UP_AFTER: u32 = 5;

/// What a stage is doing, as health reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StageState {
    Running,
    /// Died; waiting out its backoff before the next start.
    Restarting,
    /// Died [`GIVE_UP_AFTER`] times in a row; still restarted.
    Failing,
    /// Told to stop, and stopped.
    Stopped,
}

impl StageState {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Running,
            1 => Self::Restarting,
            2 => Self::Failing,
            _ => Self::Stopped,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Self::Running => 0,
            Self::Restarting => 1,
            Self::Failing => 2,
            Self::Stopped => 3,
        }
    }
}

/// How a stage proves it is making progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Work is handed to it ([`Stage::fed`]) and it takes it
    /// ([`Stage::progressed`]): stalled when work waits and nothing was
    /// taken for this long.
    Fed(Duration),
    /// It wakes on its own timer: stalled when it has not progressed for
    /// this long.
    Every(Duration),
    /// Only death counts (it may rightly wait on outside events for long).
    Unwatched,
}

/// One supervised task as health sees it.
#[derive(Debug)]
pub struct Stage {
    name: &'static str,
    progress: Progress,
    base: Instant,
    state: AtomicU8,
    restarts: AtomicU64,
    deaths_in_a_row: AtomicU32,
    last_death: Mutex<Option<String>>,
    /// Milliseconds after `base`, +1 (0: never).
    last_progress_ms: AtomicU64,
    fed: AtomicU64,
    taken: AtomicU64,
}

/// Why a stage counts against health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trouble {
    /// Dying in a loop: the count and the last death.
    Failing { deaths: u32, last: String },
    /// Has not made progress for `for_` (work waiting, or its period
    /// passed).
    Stalled { for_: Duration, waiting: u64 },
}

impl Stage {
    fn new(name: &'static str, progress: Progress) -> Self {
        let stage = Stage {
            name,
            progress,
            base: Instant::now(),
            state: AtomicU8::new(StageState::Running.as_u8()),
            restarts: AtomicU64::new(0),
            deaths_in_a_row: AtomicU32::new(0),
            last_death: Mutex::new(None),
            last_progress_ms: AtomicU64::new(0),
            fed: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        };
        stage.progressed();
        stage
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The task did its work once (ran a round, woke on its timer).
    pub fn progressed(&self) {
        let ms = self.base.elapsed().as_millis() as u64;
        self.last_progress_ms
            .store(ms.saturating_add(1), Ordering::Relaxed);
    }

    /// The task took one item of the work it was fed.
    pub fn took(&self) {
        self.taken.fetch_add(1, Ordering::Relaxed);
        self.progressed();
    }

    /// One item of work was handed to the task. Work arriving at an idle
    /// stage starts its clock: it owes progress from now, not from the
    /// last item it took long ago.
    pub fn fed(&self) {
        let was_idle = self.waiting() == 0;
        self.fed.fetch_add(1, Ordering::Relaxed);
        if was_idle {
            self.progressed();
        }
    }

    pub fn state(&self) -> StageState {
        StageState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Restarts since the daemon started.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// How the task last died, if it did.
    pub fn last_death(&self) -> Option<String> {
        self.last_death
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether the stage reports progress at all.
    pub fn watched(&self) -> bool {
        self.progress != Progress::Unwatched
    }

    /// Time since the task last progressed.
    pub fn since_progress(&self) -> Duration {
        let last = self
            .last_progress_ms
            .load(Ordering::Relaxed)
            .saturating_sub(1);
        let now = self.base.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(last))
    }

    /// Why this stage counts against health now, if it does.
    pub fn trouble(&self) -> Option<Trouble> {
        if self.state() == StageState::Failing {
            return Some(Trouble::Failing {
                deaths: self.deaths_in_a_row.load(Ordering::Relaxed),
                last: self.last_death().unwrap_or_default(),
            });
        }
        if self.state() != StageState::Running {
            return None;
        }
        let since = self.since_progress();
        match self.progress {
            Progress::Fed(limit) => {
                let waiting = self.waiting();
                (waiting > 0 && since > limit).then_some(Trouble::Stalled {
                    for_: since,
                    waiting,
                })
            }
            Progress::Every(limit) => (since > limit).then_some(Trouble::Stalled {
                for_: since,
                waiting: 0,
            }),
            Progress::Unwatched => None,
        }
    }

    /// Items fed and not yet taken.
    pub fn waiting(&self) -> u64 {
        let taken = self.taken.load(Ordering::Relaxed);
        self.fed.load(Ordering::Relaxed).saturating_sub(taken)
    }

    fn set_state(&self, state: StageState) {
        self.state.store(state.as_u8(), Ordering::Relaxed);
    }
}

/// A channel's sending side that counts what it hands to the stage that
/// reads it, so that the stage's stall can be told.
#[derive(Debug)]
pub struct Feed<T> {
    sender: tokio::sync::mpsc::Sender<T>,
    stage: Arc<Stage>,
}

impl<T> Clone for Feed<T> {
    fn clone(&self) -> Self {
        Feed {
            sender: self.sender.clone(),
            stage: self.stage.clone(),
        }
    }
}

impl<T> Feed<T> {
    pub fn new(sender: tokio::sync::mpsc::Sender<T>, stage: Arc<Stage>) -> Self {
        Feed { sender, stage }
    }

    /// A feed whose reader nobody watches (tests).
    #[cfg(test)]
    pub fn unwatched(sender: tokio::sync::mpsc::Sender<T>) -> Self {
        Feed::new(
            sender,
            Arc::new(Stage::new("unwatched", Progress::Unwatched)),
        )
    }

    /// Sends, counting the item as fed; `Err` when the reader is gone.
    pub async fn send(&self, item: T) -> Result<(), tokio::sync::mpsc::error::SendError<T>> {
        self.stage.fed();
        self.sender.send(item).await
    }
}

/// Every stage, by name, for health and metrics.
#[derive(Debug, Default)]
pub struct Stages(RwLock<BTreeMap<&'static str, Arc<Stage>>>);

impl Stages {
    pub fn all(&self) -> Vec<Arc<Stage>> {
        let map = self.0.read().unwrap_or_else(|p| p.into_inner());
        map.values().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<Stage>> {
        let map = self.0.read().unwrap_or_else(|p| p.into_inner());
        map.get(name).cloned()
    }

    /// Registers `name`, or returns the stage already registered under it
    /// (a task spawned again, e.g. the scheduler of a reloaded config).
    pub fn register(&self, name: &'static str, progress: Progress) -> Arc<Stage> {
        let mut map = self.0.write().unwrap_or_else(|p| p.into_inner());
        map.entry(name)
            .or_insert_with(|| Arc::new(Stage::new(name, progress)))
            .clone()
    }

    /// Every restart so far, by task, for the exit of the daemon.
    pub fn restarted(&self) -> Vec<(&'static str, u64)> {
        self.all()
            .iter()
            .filter(|s| s.restarts() > 0)
            .map(|s| (s.name(), s.restarts()))
            .collect()
    }
}

/// Spawns and restarts the daemon's tasks; see the module docs.
#[derive(Debug, Clone)]
pub struct Supervisor {
    tracker: TaskTracker,
    stages: Arc<Stages>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Self::new()
    }
}

impl Supervisor {
    pub fn new() -> Self {
        Supervisor {
            tracker: TaskTracker::new(),
            stages: Arc::new(Stages::default()),
        }
    }

    pub fn stages(&self) -> Arc<Stages> {
        self.stages.clone()
    }

    /// Runs `make()` as the task `name` until it returns after `stop` was
    /// cancelled; restarts it (calling `make` again) whenever it panics or
    /// returns before that. The returned stage is where the task reports
    /// its progress.
    pub fn spawn<F, Fut>(
        &self,
        name: &'static str,
        progress: Progress,
        stop: CancellationToken,
        mut make: F,
    ) -> Arc<Stage>
    where
        F: FnMut(Arc<Stage>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stage = self.stages.register(name, progress);
        let supervised = stage.clone();
        self.tracker.spawn(async move {
            let stage = supervised;
            let mut backoff = FIRST_BACKOFF;
            loop {
                stage.set_state(StageState::Running);
                let started = Instant::now();
                let task = crate::fault::armed(name, make(stage.clone()));
                let death = match tokio::spawn(task).await {
                    Ok(()) if stop.is_cancelled() => break,
                    Ok(()) => "returned before it was told to stop".to_string(),
                    Err(err) if err.is_panic() => {
                        format!("panicked: {}", panic_message(err.into_panic()))
                    }
                    Err(err) => format!("was cancelled: {err}"),
                };
                if started.elapsed() >= HEALTHY_RUN {
                    stage.deaths_in_a_row.store(0, Ordering::Relaxed);
                    backoff = FIRST_BACKOFF;
                }
                let deaths = stage.deaths_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
                stage.restarts.fetch_add(1, Ordering::Relaxed);
                *stage.last_death.lock().unwrap_or_else(|p| p.into_inner()) = Some(death.clone());
                let failing = deaths >= GIVE_UP_AFTER;
                stage.set_state(match failing {
                    true => StageState::Failing,
                    false => StageState::Restarting,
                });
                tracing::error!(
                    task = name,
                    deaths_in_a_row = deaths,
                    restart_in = %crate::when::std_span(backoff),
                    "task {name} {death}; restarting it{}",
                    match failing {
                        true => " (failing: /healthz answers 503 and the watchdog stops)",
                        false => "",
                    }
                );
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                // A restarted stage owes progress from now on, not since
                // its last one before it died.
                stage.progressed();
            }
            stage.set_state(StageState::Stopped);
        });
        stage
    }

    /// Tracks short work (an old scheduler generation finishing its probes)
    /// so that [`Supervisor::wait`] waits for it too; not restarted.
    pub fn track(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.tracker.spawn(work);
    }

    /// Waits for every supervised task to stop (each on its own token).
    pub async fn wait(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// The text of a panic payload (`panic!` with a literal or a format).
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(text) => (*text).to_string(),
            Err(_) => "(a panic without a message)".to_string(),
        },
    }
}

/// Runs `future`, turning a panic into `Err(message)`: for work that must
/// not take its caller down (one probe of a hostile target).
pub async fn catch_panic<T>(future: impl Future<Output = T>) -> Result<T, String> {
    std::panic::AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .map_err(panic_message)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_task_that_panics_is_restarted_and_counted() {
        let supervisor = Supervisor::new();
        let stop = CancellationToken::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let counted = starts.clone();
        let told = stop.clone();
        let stage = supervisor.spawn("flaky", Progress::Unwatched, stop.clone(), move |_| {
            let start = counted.fetch_add(1, Ordering::SeqCst);
            let told = told.clone();
            async move {
                if start < 2 {
                    panic!("boom {start}");
                }
                told.cancelled().await
            }
        });
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 3);
        assert_eq!(stage.restarts(), 2);
        assert_eq!(stage.state(), StageState::Running);
        assert_eq!(stage.last_death().as_deref(), Some("panicked: boom 1"));
        stop.cancel();
        supervisor.wait().await;
        assert_eq!(stage.state(), StageState::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_dies_at_every_start_is_failing_and_backs_off() {
        let supervisor = Supervisor::new();
        let stop = CancellationToken::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let counted = starts.clone();
        let stage = supervisor.spawn("broken", Progress::Unwatched, stop.clone(), move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { panic!("always") }
        });
        // Backoffs 1 + 2 + 4 + 8 s: the fifth death comes after 15 s.
        tokio::time::sleep(Duration::from_millis(15_500)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 5);
        assert_eq!(stage.state(), StageState::Failing);
        assert!(matches!(
            stage.trouble(),
            Some(Trouble::Failing { deaths: 5, .. })
        ));
        // The backoff is capped: a minute between starts at most.
        tokio::time::sleep(Duration::from_secs(600)).await;
        let later = starts.load(Ordering::SeqCst);
        assert!((12..=16).contains(&later), "{later} starts");
        stop.cancel();
        supervisor.wait().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_early_return_is_a_death_and_a_return_after_stop_is_not() {
        let supervisor = Supervisor::new();
        let stop = CancellationToken::new();
        let stage = supervisor.spawn("quitter", Progress::Unwatched, stop.clone(), |_| async {});
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(stage.restarts(), 1);
        assert_eq!(
            stage.last_death().as_deref(),
            Some("returned before it was told to stop")
        );
        stop.cancel();
        supervisor.wait().await;
        assert_eq!(stage.state(), StageState::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fed_stage_stalls_only_while_work_waits() {
        let stages = Stages::default();
        let stage = stages.register("alerter", Progress::Fed(Duration::from_secs(30)));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(stage.trouble(), None, "nothing fed, nothing owed");
        stage.fed();
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(stage.trouble(), None, "fed 10 s ago to an idle stage");
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert!(matches!(
            stage.trouble(),
            Some(Trouble::Stalled { waiting: 1, .. })
        ));
        stage.took();
        assert_eq!(stage.trouble(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timed_stage_stalls_when_its_period_passes() {
        let stages = Stages::default();
        let stage = stages.register("heartbeat", Progress::Every(Duration::from_secs(120)));
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(stage.trouble(), None);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(matches!(stage.trouble(), Some(Trouble::Stalled { .. })));
    }

    #[tokio::test]
    async fn catch_panic_gives_the_message() {
        let caught = catch_panic(async { panic!("hostile {}", 42) }).await;
        assert_eq!(caught, Err::<(), _>("hostile 42".to_string()));
    }
}
