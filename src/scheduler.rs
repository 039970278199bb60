//! The loop: every check on its own schedule, under one concurrency bound.
//!
//! One dispatcher per config holds every check in a timer queue. When a
//! check is due it takes a permit from the concurrency bound and gets a
//! task of its own for as long as it probes, judges and hands the
//! [`Outcome`] to the sink. A slow or hanging target holds only its own
//! task (and one permit, for at most its timeout), so it never delays
//! other checks beyond the concurrency bound. A [`Generation`] is one
//! config's dispatcher and probes: reload starts a new generation and stops
//! the old one, whose in-flight probes finish and are recorded.
//!
//! Each check's next due time is published in a [`Slot`] so the supervisor
//! can tell "on time" from "late" (probes queuing behind the concurrency
//! bound) for `/healthz` and the systemd watchdog.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::check::Check;
use crate::clock::{from_unix_millis, unix_millis, Clock};
use crate::outcome::Outcome;
use crate::probe::Prober;
use crate::schedule;
use crate::supervise::{catch_panic, Feed};

/// Runs one check once: probe and judge. The daemon's runner is
/// [`ProbeRunner`]; the scheduler's own tests use one that only sleeps, so
/// timelines can run on paused tokio time.
pub trait Runner: Send + Sync + 'static {
    fn run<'a>(&'a self, check: &'a Check) -> impl Future<Output = Outcome> + Send + 'a;
}

/// Probes with a [`Prober`] and judges with `evaluate`.
pub struct ProbeRunner {
    pub prober: Prober,
    pub clock: Arc<dyn Clock>,
}

impl Runner for ProbeRunner {
    fn run<'a>(&'a self, check: &'a Check) -> impl Future<Output = Outcome> + Send + 'a {
        crate::runner::run_check(&self.prober, self.clock.as_ref(), check)
    }
}

/// What one generation runs.
pub struct Plan<R> {
    pub checks: Vec<Arc<Check>>,
    pub runner: Arc<R>,
    pub concurrency: usize,
}

impl<R> Clone for Plan<R> {
    fn clone(&self) -> Self {
        Plan {
            checks: self.checks.clone(),
            runner: self.runner.clone(),
            concurrency: self.concurrency,
        }
    }
}

/// The running tasks of one config.
pub struct Generation {
    token: CancellationToken,
    tracker: TaskTracker,
    dispatcher: Option<tokio::task::JoinHandle<()>>,
}

/// A generation dropped without [`Generation::stop`] (its scheduler task
/// died) starts no more probes; those in flight finish on their own.
impl Drop for Generation {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl Generation {
    /// Waits for the dispatcher to end: it ends only when stopped, so an
    /// end before that is its death, returned for the supervisor (a panic
    /// resumes here).
    pub async fn dispatcher_died(&mut self) {
        let Some(handle) = self.dispatcher.as_mut() else {
            return std::future::pending().await;
        };
        let ended = handle.await;
        self.dispatcher = None;
        if let Err(err) = ended {
            if err.is_panic() {
                std::panic::resume_unwind(err.into_panic());
            }
        }
    }

    /// Stops starting probes; waits for in-flight ones (each bounded by its
    /// timeout) to finish and hand over their outcomes.
    pub async fn stop(self) {
        self.token.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// Starts the generation's dispatcher. It stops when `shutdown` or the
/// returned generation is cancelled.
pub fn spawn<R: Runner>(
    plan: Plan<R>,
    clock: Arc<dyn Clock>,
    sink: Feed<Outcome>,
    slots: &Slots,
    shutdown: &CancellationToken,
) -> Generation {
    let token = shutdown.child_token();
    let tracker = TaskTracker::new();
    let now = clock.now();
    let mut fresh = BTreeMap::new();
    let checks: Vec<Scheduled> = plan
        .checks
        .into_iter()
        .map(|check| {
            let slot = Arc::new(Slot::new(schedule::interval(&check.every, now)));
            fresh.insert(check.name.clone(), slot.clone());
            let jitter = schedule::jitter(&check.name, &check.every, now);
            Scheduled {
                check,
                jitter,
                slot,
            }
        })
        .collect();
    slots.replace(fresh);
    let (finished, finished_rx) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher {
        queue: BinaryHeap::with_capacity(checks.len()),
        checks,
        runner: plan.runner,
        clock,
        permits: Arc::new(Semaphore::new(plan.concurrency.max(1))),
        sink,
        token: token.clone(),
        tracker: tracker.clone(),
        finished,
        finished_rx,
    };
    let dispatcher = tracker.spawn(dispatcher.run());
    Generation {
        token,
        tracker,
        dispatcher: Some(dispatcher),
    }
}

/// A check as the dispatcher holds it between runs.
struct Scheduled {
    check: Arc<Check>,
    jitter: Duration,
    slot: Arc<Slot>,
}

/// One timer queue for a whole generation: checks wait as entries in a
/// heap, not as one sleeping task each (10,000 idle tasks cost ~20 MiB and
/// a wake-up each), and a probe gets its own task only while it runs.
///
/// A check is queued again only once its probe has finished and its
/// outcome is handed over, so one check never overlaps itself, and a
/// check slower than its period skips the runs it missed.
struct Dispatcher<R> {
    checks: Vec<Scheduled>,
    /// (due, index into `checks`), earliest first.
    queue: BinaryHeap<Reverse<(OffsetDateTime, usize)>>,
    runner: Arc<R>,
    clock: Arc<dyn Clock>,
    permits: Arc<Semaphore>,
    sink: Feed<Outcome>,
    token: CancellationToken,
    tracker: TaskTracker,
    /// Probe tasks report here, with the check's index, once done.
    finished: mpsc::UnboundedSender<usize>,
    finished_rx: mpsc::UnboundedReceiver<usize>,
}

impl<R: Runner> Dispatcher<R> {
    async fn run(mut self) {
        for index in 0..self.checks.len() {
            self.queue_next(index);
        }
        loop {
            let wait = match self.queue.peek() {
                Some(Reverse((due, _))) => (*due - self.clock.now())
                    .try_into()
                    .unwrap_or(Duration::ZERO),
                // Every check is running or idle: only a finished probe
                // (or the end) can wake us.
                None => Duration::MAX,
            };
            tokio::select! {
                biased;
                _ = self.token.cancelled() => return,
                Some(index) = self.finished_rx.recv() => self.queue_next(index),
                _ = sleep_at_most(wait) => {}
            }
            while let Ok(index) = self.finished_rx.try_recv() {
                self.queue_next(index);
            }
            let now = self.clock.now();
            while let Some(&Reverse((due, index))) = self.queue.peek() {
                if due > now {
                    break;
                }
                self.queue.pop();
                // Waiting here holds every later check too: they would
                // queue behind the same bound anyway, and in due order.
                let permit = tokio::select! {
                    biased;
                    _ = self.token.cancelled() => return,
                    permit = self.permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_closed) => return,
                    },
                };
                self.start(index, due, permit);
            }
        }
    }

    /// Queues the check's next run after now, or marks it idle when its
    /// schedule has no future run.
    fn queue_next(&mut self, index: usize) {
        let scheduled = &self.checks[index];
        let now = self.clock.now();
        match schedule::next_due(&scheduled.check.every, scheduled.jitter, now) {
            Some(due) => {
                scheduled.slot.set_due(due);
                self.queue.push(Reverse((due, index)));
            }
            None => {
                tracing::info!(check = %scheduled.check.name, "schedule has no future run; check idle");
                scheduled.slot.set_idle();
            }
        }
    }

    fn start(&self, index: usize, due: OffsetDateTime, permit: OwnedSemaphorePermit) {
        if self.token.is_cancelled() {
            return;
        }
        let scheduled = &self.checks[index];
        let check = scheduled.check.clone();
        let slot = scheduled.slot.clone();
        let runner = self.runner.clone();
        let sink = self.sink.clone();
        let finished = self.finished.clone();
        let clock = self.clock.clone();
        slot.set_running(true);
        self.tracker.spawn(async move {
            // A probe that panics (a hostile answer meeting a bug) must not
            // end the check's schedule: it is a `down` result naming the
            // fault, and the check is queued again like any other.
            let started = clock.now();
            let outcome = match catch_panic(runner.run(&check)).await {
                Ok(outcome) => outcome,
                Err(panic) => {
                    tracing::error!(check = %check.name, panic = %panic, "the probe panicked");
                    Outcome::internal_error(&check, started, &panic)
                }
            };
            drop(permit);
            slot.finished(due, outcome.started_at);
            tracing::debug!(
                check = %outcome.name,
                status = %outcome.status,
                duration_ms = format_args!("{:.1}", outcome.duration_ms),
                "probe finished"
            );
            // The receiver only goes away at shutdown, after generations
            // stop; then the check is not queued again either.
            if sink.send(outcome).await.is_ok() {
                let _ = finished.send(index);
            }
        });
    }
}

/// Sleeps for `wait`, or forever when it is too long for the timer wheel.
async fn sleep_at_most(wait: Duration) {
    // tokio's timer tops out at about two years; a cron check due later
    // than that is re-read when some probe finishes, or on reload.
    const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);
    if wait > LONGEST {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(wait).await;
}

/// One check's schedule state, shared with the supervisor and the API.
#[derive(Debug)]
pub struct Slot {
    interval: Duration,
    next_due_ms: AtomicI64,
    running: AtomicBool,
    idle: AtomicBool,
    last_started_ms: AtomicI64,
    /// How late the last probe started after its due time.
    last_delay_ms: AtomicI64,
}

impl Slot {
    fn new(interval: Duration) -> Self {
        Self {
            interval,
            next_due_ms: AtomicI64::new(i64::MAX),
            running: AtomicBool::new(false),
            idle: AtomicBool::new(false),
            last_started_ms: AtomicI64::new(0),
            last_delay_ms: AtomicI64::new(0),
        }
    }

    fn set_due(&self, due: OffsetDateTime) {
        self.next_due_ms.store(unix_millis(due), Ordering::Relaxed);
        self.running.store(false, Ordering::Relaxed);
    }

    fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::Relaxed);
    }

    fn set_idle(&self) {
        self.idle.store(true, Ordering::Relaxed);
        self.next_due_ms.store(i64::MAX, Ordering::Relaxed);
    }

    fn finished(&self, due: OffsetDateTime, started: OffsetDateTime) {
        self.last_started_ms
            .store(unix_millis(started), Ordering::Relaxed);
        self.last_delay_ms
            .store(unix_millis(started) - unix_millis(due), Ordering::Relaxed);
        self.running.store(false, Ordering::Relaxed);
    }

    /// How long past its due time this check has been waiting to start;
    /// zero while running or not yet due.
    pub fn lateness(&self, now: OffsetDateTime) -> Duration {
        if self.running.load(Ordering::Relaxed) || self.idle.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        let late_ms = unix_millis(now).saturating_sub(self.next_due_ms.load(Ordering::Relaxed));
        Duration::from_millis(late_ms.max(0) as u64)
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    pub fn next_due(&self) -> Option<OffsetDateTime> {
        match self.next_due_ms.load(Ordering::Relaxed) {
            i64::MAX => None,
            ms => from_unix_millis(ms),
        }
    }

    pub fn last_started(&self) -> Option<OffsetDateTime> {
        match self.last_started_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => from_unix_millis(ms),
        }
    }

    /// Start delay of the last probe (started_at - due).
    pub fn last_delay(&self) -> Duration {
        Duration::from_millis(self.last_delay_ms.load(Ordering::Relaxed).max(0) as u64)
    }
}

/// The slots of the running generation, by check name.
#[derive(Debug, Default, Clone)]
pub struct Slots(Arc<RwLock<BTreeMap<String, Arc<Slot>>>>);

impl Slots {
    fn replace(&self, fresh: BTreeMap<String, Arc<Slot>>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = fresh;
    }

    pub fn snapshot(&self) -> BTreeMap<String, Arc<Slot>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Checks waiting past their due time by more than their own interval
    /// (they missed a whole run) and more than `floor`, with how long.
    pub fn late(&self, now: OffsetDateTime, floor: Duration) -> Vec<(String, Duration)> {
        self.snapshot()
            .into_iter()
            .map(|(name, slot)| {
                let late = slot.lateness(now);
                (name, late, slot.interval().max(floor))
            })
            .filter(|(_, late, limit)| late > limit)
            .map(|(name, late, _)| (name, late))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::str::FromStr;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    use super::*;
    use crate::check::{Cadence, CheckKind, HttpCheck, HttpExpect, KindName, TlsExpect};
    use crate::clock::TokioClock;
    use crate::outcome::Status;

    /// Sleeps for the check's configured "work" time and records when each
    /// run started and how many runs overlapped.
    #[derive(Default)]
    struct SleepyRunner {
        work: BTreeMap<String, Duration>,
        starts: Mutex<Vec<(String, OffsetDateTime)>>,
        in_flight: AtomicUsize,
        max_in_flight: AtomicUsize,
        clock: Option<TokioClock>,
    }

    impl Runner for SleepyRunner {
        #[allow(clippy::manual_async_fn)] // the trait promises a Send future
        fn run<'a>(&'a self, check: &'a Check) -> impl Future<Output = Outcome> + Send + 'a {
            async move {
                let now = self.clock.as_ref().expect("clock").now();
                self.starts.lock().unwrap().push((check.name.clone(), now));
                let running = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.max_in_flight.fetch_max(running, Ordering::SeqCst);
                let work = self.work.get(&check.name).copied().unwrap_or_default();
                tokio::time::sleep(work).await;
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                outcome(&check.name, now)
            }
        }
    }

    fn outcome(name: &str, at: OffsetDateTime) -> Outcome {
        Outcome {
            name: name.to_string(),
            kind: KindName::Http,
            target: String::new(),
            status: Status::Up,
            started_at: at,
            duration_ms: 0.0,
            failures: vec![],
            probe_error: None,
            http: None,
            tls: None,
            cors: None,
            dns: None,
            upload: None,
            smtp: None,
            domain: None,
        }
    }

    fn check(name: &str, every: Cadence) -> Arc<Check> {
        Arc::new(Check {
            name: name.to_string(),
            url: "https://www.example.test/".parse().unwrap(),
            resolve: None,
            every,
            timeout: Duration::from_secs(10),
            labels: BTreeMap::new(),
            tls: TlsExpect::default(),
            alert: Default::default(),
            kind: CheckKind::Http(HttpCheck {
                follow_redirects: true,
                redirect_to_private: false,
                redact_headers: Vec::new(),
                expect: HttpExpect::default(),
            }),
        })
    }

    fn every(secs: u64) -> Cadence {
        Cadence::Every(Duration::from_secs(secs))
    }

    /// 2027-01-15 08:00:00 UTC, a round minute.
    fn start() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    struct Timeline {
        runner: Arc<SleepyRunner>,
        outcomes: Vec<Outcome>,
    }

    /// Runs `checks` for `span` of paused tokio time, then stops.
    async fn run_for(
        checks: Vec<Arc<Check>>,
        work: &[(&str, u64)],
        concurrency: usize,
        span: Duration,
    ) -> Timeline {
        let clock = TokioClock::starting_at(start());
        let runner = Arc::new(SleepyRunner {
            work: work
                .iter()
                .map(|(n, s)| (n.to_string(), Duration::from_secs(*s)))
                .collect(),
            clock: Some(clock.clone()),
            ..SleepyRunner::default()
        });
        let (sink, mut rx) = mpsc::channel(10_000);
        let shutdown = CancellationToken::new();
        let slots = Slots::default();
        let plan = Plan {
            checks,
            runner: Arc::new(SharedRunner(runner.clone())),
            concurrency,
        };
        let generation = spawn(
            plan,
            Arc::new(clock),
            Feed::unwatched(sink),
            &slots,
            &shutdown,
        );
        tokio::time::sleep(span).await;
        generation.stop().await;
        let mut outcomes = Vec::new();
        while let Ok(o) = rx.try_recv() {
            outcomes.push(o);
        }
        Timeline { runner, outcomes }
    }

    struct SharedRunner(Arc<SleepyRunner>);

    impl Runner for SharedRunner {
        fn run<'a>(&'a self, check: &'a Check) -> impl Future<Output = Outcome> + Send + 'a {
            self.0.run(check)
        }
    }

    fn starts_of(t: &Timeline, name: &str) -> Vec<OffsetDateTime> {
        t.runner
            .starts
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, at)| *at)
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn every_runs_on_its_jittered_grid_on_time() {
        let checks = vec![
            check("a", every(30)),
            check("b", every(30)),
            check("c", every(60)),
        ];
        let t = run_for(checks, &[], 64, Duration::from_secs(300)).await;
        for (name, period, runs) in [("a", 30, 10), ("b", 30, 10), ("c", 60, 5)] {
            let starts = starts_of(&t, name);
            assert_eq!(starts.len(), runs, "{name}: {starts:?}");
            let jitter = schedule::jitter(name, &every(period), start());
            for (k, at) in starts.iter().enumerate() {
                let due = start() + Duration::from_secs(period * k as u64) + jitter;
                assert_eq!(*at, due, "{name} run {k} starts exactly when due");
            }
        }
        assert_ne!(
            starts_of(&t, "a")[0],
            starts_of(&t, "b")[0],
            "two checks with the same period are spread apart"
        );
        assert_eq!(t.outcomes.len(), 25, "every outcome reaches the sink");
    }

    #[tokio::test(start_paused = true)]
    async fn cron_checks_run_at_their_times_plus_a_bounded_jitter() {
        let cron = Cadence::Cron(Box::new(cron::Schedule::from_str("0 * * * * *").unwrap()));
        let jitter = schedule::jitter("minutely", &cron, start());
        assert!(
            jitter < Duration::from_secs(6),
            "a tenth of the minute at most"
        );
        let t = run_for(
            vec![check("minutely", cron)],
            &[],
            4,
            Duration::from_secs(180),
        )
        .await;
        let starts = starts_of(&t, "minutely");
        let expected: Vec<_> = (0..3)
            .map(|m| start() + Duration::from_secs(60 * m) + jitter)
            .collect();
        assert_eq!(starts, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_never_exceeded() {
        let checks: Vec<_> = (0..20)
            .map(|i| check(&format!("c{i}"), every(10)))
            .collect();
        let work: Vec<(String, u64)> = (0..20).map(|i| (format!("c{i}"), 4)).collect();
        let work: Vec<(&str, u64)> = work.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let t = run_for(checks, &work, 3, Duration::from_secs(60)).await;
        assert_eq!(t.runner.max_in_flight.load(Ordering::SeqCst), 3);
        assert!(!t.outcomes.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_check_never_delays_others() {
        let checks = vec![check("slow", every(30)), check("fast", every(10))];
        let t = run_for(checks, &[("slow", 25)], 64, Duration::from_secs(120)).await;
        let jitter = schedule::jitter("fast", &every(10), start());
        let fast = starts_of(&t, "fast");
        assert_eq!(fast.len(), 12);
        for (k, at) in fast.iter().enumerate() {
            assert_eq!(*at, start() + Duration::from_secs(10 * k as u64) + jitter);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_slower_than_its_period_skips_missed_runs() {
        let t = run_for(
            vec![check("sluggish", every(10))],
            &[("sluggish", 25)],
            64,
            Duration::from_secs(100),
        )
        .await;
        let starts = starts_of(&t, "sluggish");
        for pair in starts.windows(2) {
            assert_eq!(
                pair[1] - pair[0],
                time::Duration::seconds(30),
                "next grid point after finishing: {starts:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_lets_the_in_flight_probe_finish_and_report() {
        // Due at jitter < 60s, works 50s; stop 1s after it starts.
        let c = check("long", every(60));
        let jitter = schedule::jitter("long", &every(60), start());
        let t = run_for(
            vec![c],
            &[("long", 50)],
            64,
            jitter + Duration::from_secs(1),
        )
        .await;
        assert_eq!(
            t.outcomes.len(),
            1,
            "the in-flight probe's outcome is delivered"
        );
        assert_eq!(
            starts_of(&t, "long").len(),
            1,
            "nothing new starts after stop"
        );
    }

    #[test]
    fn lateness_counts_only_waiting_checks() {
        let slot = Slot::new(Duration::from_secs(30));
        let due = start();
        slot.set_due(due);
        assert_eq!(slot.lateness(due - Duration::from_secs(1)), Duration::ZERO);
        assert_eq!(
            slot.lateness(due + Duration::from_secs(40)),
            Duration::from_secs(40)
        );
        slot.set_running(true);
        assert_eq!(slot.lateness(due + Duration::from_secs(40)), Duration::ZERO);
    }

    /// Panics for the check called `bad`, answers up for every other.
    struct PanickyRunner;

    impl Runner for PanickyRunner {
        #[allow(clippy::manual_async_fn)] // the trait promises a Send future
        fn run<'a>(&'a self, check: &'a Check) -> impl Future<Output = Outcome> + Send + 'a {
            async move {
                if check.name == "bad" {
                    panic!("a hostile answer met a bug");
                }
                outcome(&check.name, start())
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_panics_is_a_down_result_and_its_check_stays_scheduled() {
        let (sink, mut rx) = mpsc::channel(1000);
        let shutdown = CancellationToken::new();
        let plan = Plan {
            checks: vec![check("bad", every(10)), check("good", every(10))],
            runner: Arc::new(PanickyRunner),
            concurrency: 4,
        };
        let clock = TokioClock::starting_at(start());
        let generation = spawn(
            plan,
            Arc::new(clock),
            Feed::unwatched(sink),
            &Slots::default(),
            &shutdown,
        );
        tokio::time::sleep(Duration::from_secs(35)).await;
        generation.stop().await;
        let mut outcomes = Vec::new();
        while let Ok(o) = rx.try_recv() {
            outcomes.push(o);
        }
        let bad: Vec<&Outcome> = outcomes.iter().filter(|o| o.name == "bad").collect();
        assert!(
            bad.len() >= 3,
            "the check stays on its schedule: {}",
            bad.len()
        );
        for o in &bad {
            assert_eq!(o.status, Status::Down);
            assert_eq!(o.failures[0].assertion, crate::outcome::Assertion::Internal);
            assert!(
                o.failures[0].message.contains("a hostile answer met a bug"),
                "{}",
                o.failures[0].message
            );
        }
        assert!(outcomes
            .iter()
            .any(|o| o.name == "good" && o.status == Status::Up));
    }
}
