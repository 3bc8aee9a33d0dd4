//! Runs monitor, coordinator and migration executors as threads over an
//! embedded cluster (Pragh 3 "Execution flow", 4.4).
//!
//! ```text
//!  monitor thread ──Report/Hot──▶ events ──▶ coordinator thread ──Migrate──▶ jobs ──▶ executor threads
//!  (every machine's cache)          ▲          (policy + record)                       (migrate_batch as
//!                                   └───────────── Migrated / Tracked ◀────────────────  the target)
//! ```
//!
//! * The **monitor** wakes every `hot_poll_ms`: it drains each machine's
//!   hot-key list (instant reports, Pragh 6.4) and, once per interval, takes
//!   the interval's access counts from each location cache (periodic
//!   reports, Pragh 4.4).
//! * The **coordinator** thread feeds events to [`Coordinator::step`],
//!   persists every approval in the [`Record`] (one transaction per batch)
//!   and only then hands the migrations to the executors; `Track`/`Collect`
//!   are carried out on the holder's [`locus_store::track::AccessTracker`].
//! * **Executors** migrate as the target machine with the pipelined
//!   [`Worker::migrate_batch`]; the source's threads are never involved.
//!
//! The monitor and the coordinator run `background_nice` steps nicer than
//! the process ([`DriverConfig::background_nice`]): Pragh 6 gives the monitor
//! cores of its own and the coordinator a machine of its own, so neither
//! takes a query worker's turn; sharing cores with the workers, they wait for
//! a worker's time slice to end instead of preempting it when they wake.
//! Executors keep the workers' priority: a reader that finds a value being
//! moved retries until the executor finishes the move, so a starved executor
//! would leave the workers spinning on it (priority inversion; seen at
//! R-MAT 26 with executors at nice 19, where a reader gave up after
//! `READ_RETRIES_MAX` retries).
//!
//! **Idle threads wait for work, not for a clock.** The coordinator waits
//! for an event or its next deadline ([`Coordinator::next_due_ms`], the end
//! of a deferred-mode tracking window), at most [`COORDINATOR_IDLE_WAIT`];
//! executors block on the job queue, and stopping queues one wake-up job per
//! executor. They used to poll every 50 and 20 ms, and on two cores shared
//! with two workers every empty poll took a worker's core. Under uniform
//! starts, where nothing is worth moving, the executors' polls were what
//! kept Split 1-2% below Orig: waiting halves Split's worker preemptions and
//! brings it level with Orig; the coordinator's polls cost nothing seen
//! (docs/results.md, stop 45). Earlier runs that compared two binaries saw
//! Replica ~10% slower with waiting executors; one binary switching each
//! half by environment, alternating, did not (stop 45).
//!
//! **Pausing** ([`Driver::pause`], [`Driver::resume`]). A paused driver's
//! threads finish the item in hand (a poll, an event, a batch's current
//! migration or replica) and wait; reports and jobs stay queued. It is for
//! benchmarks that keep several clusters in one process and measure them in
//! turns (`bench pragh --slices`): without it a waiting cluster's backlog
//! ran during another's turn, its CPU counted against the other. The monitor
//! and the coordinator keep time on the driver's [`ActiveClock`], which
//! stands still while paused: intervals, dwell and forgetting count running
//! time only, so a cluster run in turns reports, migrates and replicates as
//! it would running alone, its pauses cut out.
//!
//! The coordinator can be stopped and restarted ([`Driver::stop_coordinator`],
//! [`Driver::start_coordinator`]): meanwhile workers serve as before, queued
//! migrations finish, and reports that find the event queue full are dropped
//! and counted. Every queue is bounded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use locus_fabric::{Fabric, MachineId};
use locus_store::{Key, Stores};

use crate::clock::ActiveClock;
use crate::dispatch::{self, Dispatch};
use crate::error::{CoordinatorError, Result};
use crate::executor::Executor;
use crate::monitor::Monitor;
use crate::policy::{Action, Coordinator, Event, PolicyConfig};
use crate::record::Record;

/// Events the coordinator's queue holds at most.
pub const EVENTS_MAX: usize = 4096;
/// Migrations waiting for an executor at most. The queue grows as jobs
/// come (a bounded queue of this size wrote 24 MB when the driver started,
/// whether or not anything ever moved).
pub const JOBS_MAX: usize = 1 << 20;
/// Longest an idle coordinator waits before it looks at the clock (an
/// event, or a stop's wake-up, ends the wait sooner).
pub const COORDINATOR_IDLE_WAIT: Duration = Duration::from_secs(1);

/// Driver settings.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// The coordinator's policy.
    pub policy: PolicyConfig,
    /// How often the monitor drains hot-key lists (instant reports).
    pub hot_poll_ms: u64,
    /// The coordinator's durable record; `None` keeps it in a temporary file.
    pub record_path: Option<PathBuf>,
    /// Migration executor threads.
    pub migration_threads: usize,
    /// Keys one executor migrates per pipelined batch at most.
    pub batch_keys_max: usize,
    /// Niceness the monitor and coordinator threads add to the process's
    /// (0..=19; the total stops at 19; Linux only, ignored elsewhere). With
    /// query workers on every core, a driver thread that wakes at their
    /// priority preempts one of them; 19 lets it run when a worker's slice
    /// ends. 0 leaves them at the process's priority. Executors always keep
    /// it: workers wait on the moves they make (see the module doc).
    pub background_nice: i32,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            policy: PolicyConfig::default(),
            hot_poll_ms: 100,
            record_path: None,
            migration_threads: 1,
            batch_keys_max: 256,
            background_nice: NICE_MAX,
        }
    }
}

/// Counters of what the driver did.
#[derive(Debug, Default)]
pub struct DriverStats {
    /// Periodic reports sent.
    pub reports: AtomicU64,
    /// Instant (hot) reports sent.
    pub hot_reports: AtomicU64,
    /// Reports dropped because the coordinator's queue was full (or it was down).
    pub reports_dropped: AtomicU64,
    /// Migrations approved and queued.
    pub approved: AtomicU64,
    /// Values moved.
    pub moved: AtomicU64,
    /// Bytes moved (headers included).
    pub bytes_moved: AtomicU64,
    /// Background failures (the first one is [`Driver::error`]).
    pub failed: AtomicU64,
    /// Replicas approved and queued.
    pub replicas_approved: AtomicU64,
    /// Replicas made (listed at their home).
    pub replicas_created: AtomicU64,
    /// Bytes copied into replicas (headers included).
    pub replica_bytes: AtomicU64,
}

/// Work for an executor: a migration or a replica, run as the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Migrate(Key, MachineId),
    Replicate(Key, MachineId),
    /// Wakes an executor blocked on the queue so it sees the stop flag.
    Wake,
}

/// What executors and the coordinator share.
struct Shared<F: Fabric> {
    store: Stores<F>,
    config: DriverConfig,
    stats: DriverStats,
    stop: AtomicBool,
    pause: Pause,
    last_error: Mutex<Option<Arc<CoordinatorError>>>,
    events_tx: Sender<Event>,
    events_rx: Receiver<Event>,
    jobs_tx: Sender<Job>,
    jobs_rx: Receiver<Job>,
    record: Mutex<Option<Arc<Record>>>,
    record_path: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

/// Whether the driver is paused, and where paused threads wait.
#[derive(Default)]
struct Pause {
    on: AtomicBool,
    /// The monitor's and coordinator's time, stopped while paused.
    clock: ActiveClock,
    lock: Mutex<()>,
    resumed: Condvar,
}

/// Longest a paused thread waits before it looks at the stop flags again
/// (a stop wakes it at once; this only bounds a missed wake-up).
const PAUSED_WAIT: Duration = Duration::from_secs(1);

/// Returns at once unless the driver is paused; then waits until it is
/// resumed or stopped (`stop`: the caller's own stop flag too).
fn wait_while_paused<F: Fabric>(s: &Shared<F>, stop: &AtomicBool) {
    if !s.pause.on.load(Ordering::Acquire) {
        return;
    }
    let mut g = s.pause.lock.lock().unwrap_or_else(|p| p.into_inner());
    while s.pause.on.load(Ordering::Acquire)
        && !s.stop.load(Ordering::Acquire)
        && !stop.load(Ordering::Acquire)
    {
        g = s
            .pause
            .resumed
            .wait_timeout(g, PAUSED_WAIT)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// Wakes every paused thread (to resume, or to see a stop flag).
fn wake_paused<F: Fabric>(s: &Shared<F>) {
    let _g = s.pause.lock.lock().unwrap_or_else(|p| p.into_inner());
    s.pause.resumed.notify_all();
}

/// The running monitor, coordinator and executors.
pub struct Driver<F: Fabric> {
    shared: Arc<Shared<F>>,
    threads: Vec<JoinHandle<()>>,
    coordinator: Option<(Arc<AtomicBool>, JoinHandle<Coordinator>)>,
}

impl<F: Fabric> Driver<F> {
    /// Starts the threads over `store` (every machine's store). Settings that cannot work are
    /// [`CoordinatorError::InvalidSetting`] or [`CoordinatorError::SettingBelow`].
    pub fn start(store: Stores<F>, config: DriverConfig) -> Result<Self> {
        config.policy.validate()?;
        for (field, value) in [
            ("migration_threads", config.migration_threads as u64),
            ("batch_keys_max", config.batch_keys_max as u64),
            ("hot_poll_ms", config.hot_poll_ms),
        ] {
            if value == 0 {
                return Err(CoordinatorError::invalid(field, value, "positive"));
            }
        }
        if !(0..=NICE_MAX).contains(&config.background_nice) {
            return Err(CoordinatorError::invalid(
                "background_nice",
                config.background_nice,
                "in 0..=19 (niceness added to the process's; a thread may lower its own priority, not raise it)",
            ));
        }
        let lease_ms = store.config().cache_lease_ms;
        if store.config().cache_bytes_max > 0 && lease_ms < config.policy.interval_ms {
            return Err(CoordinatorError::SettingBelow {
                field: "cache_lease_ms",
                value: lease_ms,
                min_field: "interval_ms",
                min_value: config.policy.interval_ms,
                why: "access counts live in cache entries and would expire before they are reported; raise the cache lease (Pragh: 60 s lease, 10 s interval) or shorten the interval",
            });
        }
        if store.config().cache_bytes_max == 0 {
            return Err(CoordinatorError::invalid(
                "cache_bytes_max",
                0,
                "positive (the monitor reads the location cache's access counts, Pragh 4.4); use cache_lookups = false for migration without the cache",
            ));
        }
        let (tmp, record_path) = match &config.record_path {
            Some(p) => (None, p.clone()),
            None => {
                let d = tempfile::tempdir()
                    .map_err(|source| CoordinatorError::TempRecord { source })?;
                let p = d.path().join("coordinator.redb");
                (Some(d), p)
            }
        };
        let (events_tx, events_rx) = bounded(EVENTS_MAX);
        let (jobs_tx, jobs_rx) = unbounded();
        let shared = Arc::new(Shared {
            store,
            config,
            stats: DriverStats::default(),
            stop: AtomicBool::new(false),
            pause: Pause::default(),
            last_error: Mutex::new(None),
            events_tx,
            events_rx,
            jobs_tx,
            jobs_rx,
            record: Mutex::new(None),
            record_path,
            _tmp: tmp,
        });
        let mut d = Driver {
            shared: Arc::clone(&shared),
            threads: Vec::new(),
            coordinator: None,
        };
        let s = Arc::clone(&shared);
        d.threads
            .push(spawn("locus-monitor", move || monitor_loop(&s))?);
        for i in 0..shared.config.migration_threads {
            let s = Arc::clone(&shared);
            d.threads
                .push(spawn(&format!("locus-migrate-{i}"), move || {
                    executor_loop(&s)
                })?);
        }
        d.start_coordinator()?;
        Ok(d)
    }

    /// Counters.
    pub fn stats(&self) -> &DriverStats {
        &self.shared.stats
    }

    /// The first error an executor or the coordinator met, if any (shared:
    /// match on `&*e`). Later failures are counted in [`DriverStats::failed`].
    pub fn error(&self) -> Option<Arc<CoordinatorError>> {
        self.shared
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Migrations queued and not yet taken by an executor.
    pub fn queued(&self) -> usize {
        self.shared.jobs_rx.len()
    }

    /// Starts (or restarts) the coordinator from its durable record.
    pub fn start_coordinator(&mut self) -> Result<()> {
        if self.coordinator.is_some() {
            return Ok(());
        }
        let record = Arc::new(Record::open(&self.shared.record_path)?);
        let restored = record.load()?;
        let coordinator = Coordinator::restore(self.shared.config.policy.clone(), restored)?;
        *self.shared.record.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&record));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&self.shared), Arc::clone(&stop));
        let h = std::thread::Builder::new()
            .name(COORDINATOR_THREAD.into())
            .spawn(move || coordinator_loop(&s, &st, coordinator, &record))
            .map_err(|source| CoordinatorError::Spawn {
                thread: COORDINATOR_THREAD.into(),
                source,
            })?;
        self.coordinator = Some((stop, h));
        Ok(())
    }

    /// Stops the coordinator (as a crash would, minus the lost thread): its
    /// record stays on disk; monitors and executors keep running. `None` if
    /// it was not running, or if it had panicked (then [`Driver::error`]
    /// reports [`CoordinatorError::ThreadPanicked`]).
    pub fn stop_coordinator(&mut self) -> Option<Coordinator> {
        let (stop, h) = self.coordinator.take()?;
        stop.store(true, Ordering::Release);
        wake_paused(&self.shared);
        wake_coordinator(&self.shared);
        let c = join(COORDINATOR_THREAD, h).map_err(|e| fail(&self.shared, e));
        *self.shared.record.lock().unwrap_or_else(|p| p.into_inner()) = None;
        c.ok()
    }

    /// Pauses the driver: its threads finish the item in hand and wait,
    /// reports and jobs staying queued, until [`Driver::resume`] (see the
    /// module's doc).
    pub fn pause(&self) {
        let _g = self
            .shared
            .pause
            .lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.shared.pause.on.store(true, Ordering::Release);
        self.shared.pause.clock.pause();
    }

    /// Resumes a paused driver (nothing if it runs).
    pub fn resume(&self) {
        let _g = self
            .shared
            .pause
            .lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.shared.pause.clock.resume();
        self.shared.pause.on.store(false, Ordering::Release);
        self.shared.pause.resumed.notify_all();
    }

    /// Whether the driver is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.pause.on.load(Ordering::Acquire)
    }

    /// Waits until no migration is queued (or `timeout` passes); true if drained.
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if self.shared.jobs_rx.is_empty() && self.shared.events_rx.is_empty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Stops every thread and returns the coordinator's final state.
    pub fn stop(mut self) -> Option<Coordinator> {
        let c = self.stop_coordinator();
        self.shared.stop.store(true, Ordering::Release);
        wake_paused(&self.shared);
        wake_executors(&self.shared);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        c
    }
}

impl<F: Fabric> Drop for Driver<F> {
    fn drop(&mut self) {
        if let Some((stop, h)) = self.coordinator.take() {
            stop.store(true, Ordering::Release);
            wake_paused(&self.shared);
            wake_coordinator(&self.shared);
            let _ = h.join();
        }
        self.shared.stop.store(true, Ordering::Release);
        wake_paused(&self.shared);
        wake_executors(&self.shared);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

/// Wakes a coordinator waiting for an event (a full queue needs no wake:
/// the coordinator has events to take).
fn wake_coordinator<F: Fabric>(s: &Shared<F>) {
    let _ = s.events_tx.try_send(Event::Tick);
}

/// Wakes every executor blocked on the job queue (call after setting the
/// stop flag). The wake-ups go past the bound: a queue that holds jobs
/// needs none (executors are busy with it and look at the flag before their
/// next job), and one that holds none has room.
fn wake_executors<F: Fabric>(s: &Shared<F>) {
    for _ in 0..s.config.migration_threads {
        let _ = s.jobs_tx.send(Job::Wake);
    }
}

/// Queues `job` unless `max` jobs are waiting; false if it did not. Only
/// the coordinator thread queues jobs, and executors only take them, so the
/// queue cannot pass `max` between the look and the send.
#[must_use = "a job not queued must be undone or dropped"]
fn queue_job(tx: &Sender<Job>, max: usize, job: Job) -> bool {
    tx.len() < max && tx.send(job).is_ok()
}

/// The coordinator thread's name.
const COORDINATOR_THREAD: &str = "locus-coordinator";
/// The largest niceness Linux has.
const NICE_MAX: i32 = 19;

/// Adds `by` to the calling thread's niceness (at most [`NICE_MAX`] in all).
/// On Linux the nice value belongs to a thread, and `who` = 0 names the caller.
#[cfg(target_os = "linux")]
fn lower_priority(by: i32) -> std::io::Result<()> {
    if by == 0 {
        return Ok(());
    }
    // SAFETY: getpriority and setpriority only read and change the calling
    // thread's scheduling attributes; errno is thread-local, and is cleared
    // first because -1 is also a valid niceness.
    unsafe {
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS as _, 0);
        if now == -1 && *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::setpriority(libc::PRIO_PROCESS as _, 0, (now + by).min(NICE_MAX)) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn lower_priority(_by: i32) -> std::io::Result<()> {
    Ok(())
}

/// Lowers the calling driver thread's priority as configured; a failure is
/// counted and kept (the thread runs on at the priority it has).
fn run_in_background<F: Fabric>(s: &Shared<F>) {
    let by = s.config.background_nice;
    if let Err(source) = lower_priority(by) {
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        fail(s, CoordinatorError::Nice { thread, by, source });
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|source| CoordinatorError::Spawn {
            thread: name.into(),
            source,
        })
}

/// Joins `h`, the thread named `thread`; a panic becomes its failure.
fn join<T>(thread: &str, h: JoinHandle<T>) -> Result<T> {
    h.join().map_err(|panic| {
        let reason = panic
            .downcast_ref::<&str>()
            .map(|m| m.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        CoordinatorError::ThreadPanicked {
            thread: thread.into(),
            reason,
        }
    })
}

/// Counts a background failure and keeps it if it is the first.
fn fail<F: Fabric>(s: &Shared<F>, e: CoordinatorError) {
    s.stats.failed.fetch_add(1, Ordering::Relaxed);
    s.last_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(|| Arc::new(e));
}

fn send<F: Fabric>(s: &Shared<F>, e: Event) {
    if s.events_tx.try_send(e).is_err() {
        s.stats.reports_dropped.fetch_add(1, Ordering::Relaxed);
    }
}

fn monitor_loop<F: Fabric>(s: &Shared<F>) {
    run_in_background(s);
    let machines = s.store.machines();
    let poll = Duration::from_millis(s.config.hot_poll_ms);
    let clock = &s.pause.clock;
    let start = clock.now();
    let mut monitors: Vec<Monitor> = (0..machines as MachineId)
        .filter(|&m| s.store.cache(m).is_some())
        .map(|m| {
            Monitor::new_at(
                m,
                Arc::clone(s.store.store(m).homes()),
                s.config.policy.interval_ms,
                s.config.policy.report_count_min,
                start,
            )
        })
        .collect();
    let mut events = Vec::new();
    let never = AtomicBool::new(false);
    while !s.stop.load(Ordering::Acquire) {
        std::thread::sleep(poll);
        wait_while_paused(s, &never);
        for mon in &mut monitors {
            if let Some(cache) = s.store.cache(mon.machine()) {
                mon.poll_at(clock.now(), cache, &mut events);
            }
        }
        for e in events.drain(..) {
            match &e {
                Event::Hot { .. } => s.stats.hot_reports.fetch_add(1, Ordering::Relaxed),
                _ => s.stats.reports.fetch_add(1, Ordering::Relaxed),
            };
            send(s, e);
        }
    }
}

fn coordinator_loop<F: Fabric>(
    s: &Shared<F>,
    stop: &AtomicBool,
    mut c: Coordinator,
    record: &Record,
) -> Coordinator {
    run_in_background(s);
    let clock = &s.pause.clock;
    let mut d = InProcess {
        s,
        tracking_since: HashMap::new(),
    };
    while !stop.load(Ordering::Acquire) && !s.stop.load(Ordering::Acquire) {
        let now_ms = clock.now_ms();
        let wait = c.next_due_ms().map_or(COORDINATOR_IDLE_WAIT, |due| {
            Duration::from_millis(due.saturating_sub(now_ms)).min(COORDINATOR_IDLE_WAIT)
        });
        let event = match s.events_rx.recv_timeout(wait) {
            Ok(e) => e,
            Err(RecvTimeoutError::Timeout) => Event::Tick,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        wait_while_paused(s, stop);
        let stepped = dispatch::step(&mut c, &mut || clock.now_ms(), event, record, &mut d);
        debug_assert!(stepped.is_ok(), "an in-process driver is never fenced");
    }
    c
}

/// The in-process driver's dispatch: jobs to its executors' queue,
/// tracking on the holders' trackers in this process.
struct InProcess<'a, F: Fabric> {
    s: &'a Shared<F>,
    tracking_since: HashMap<MachineId, u64>,
}

impl<F: Fabric> Dispatch<CoordinatorError> for InProcess<'_, F> {
    fn dispatch(&mut self, actions: Vec<Action>, next: &mut Vec<Event>) {
        let s = self.s;
        let clock = &s.pause.clock;
        for a in actions {
            match a {
                Action::Persist { .. } => {}
                Action::Migrate { key, to, .. } => {
                    s.stats.approved.fetch_add(1, Ordering::Relaxed);
                    if !queue_job(&s.jobs_tx, JOBS_MAX, Job::Migrate(key, to)) {
                        next.push(Event::Migrated { key, to, ok: false });
                    }
                }
                Action::Replicate { key, to } => {
                    s.stats.replicas_approved.fetch_add(1, Ordering::Relaxed);
                    // Soft state: a full queue only loses the replica.
                    let _ = queue_job(&s.jobs_tx, JOBS_MAX, Job::Replicate(key, to));
                }
                Action::Track { machine, keys } => {
                    if let Some(t) = s.store.tracker(machine) {
                        let n = keys.len();
                        if let Err(source) = t.install(keys) {
                            fail(
                                s,
                                CoordinatorError::Track {
                                    keys: n,
                                    machine,
                                    source,
                                },
                            );
                        }
                        self.tracking_since.insert(machine, clock.now_ms());
                    }
                }
                Action::Collect { machine } => {
                    if let Some(t) = s.store.tracker(machine) {
                        let since = self.tracking_since.remove(&machine).unwrap_or(0);
                        next.push(Event::Tracked {
                            machine,
                            interval_ms: clock.now_ms().saturating_sub(since),
                            counts: t.take(),
                        });
                    }
                }
            }
        }
    }

    fn persist_failed(&mut self, error: CoordinatorError) {
        // Not durable: nothing was approved (the keys come back in later reports).
        fail(self.s, error);
    }
}

fn executor_loop<F: Fabric>(s: &Shared<F>) {
    // Not run in the background (see `DriverConfig::background_nice`).
    let mut ex = Executor::new();
    let mut by_target: HashMap<MachineId, Vec<Key>> = HashMap::new();
    let mut replicas: HashMap<MachineId, Vec<Key>> = HashMap::new();
    let never = AtomicBool::new(false);
    while !s.stop.load(Ordering::Acquire) {
        // Blocks until a job comes; `Shared` holds a sender, so the queue
        // never disconnects while this runs, and a stop sends `Job::Wake`.
        let Ok(first) = s.jobs_rx.recv() else { break };
        wait_while_paused(s, &never);
        if s.stop.load(Ordering::Acquire) {
            break;
        }
        let mut take = |j: Job| match j {
            Job::Migrate(k, to) => by_target.entry(to).or_default().push(k),
            Job::Replicate(k, to) => replicas.entry(to).or_default().push(k),
            Job::Wake => {}
        };
        take(first);
        let mut n = 1;
        while n < s.config.batch_keys_max {
            match s.jobs_rx.try_recv() {
                Ok(j) => {
                    take(j);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        for (to, keys) in by_target.drain() {
            wait_while_paused(s, &never);
            let (ok, err) = ex.migrate(s.store.store(to), to, &keys, &s.stats);
            if let Some(e) = err {
                fail(s, e);
            }
            for (key, ok) in keys.into_iter().zip(ok) {
                migrated(s, key, to, ok);
            }
        }
        // One batch a target, registrations in flight together.
        for (to, keys) in replicas.drain() {
            // Stopping: the rest are soft state, dropped rather than made (a
            // replica's registration waits for its home's service).
            wait_while_paused(s, &never);
            if s.stop.load(Ordering::Acquire) {
                break;
            }
            if let Err(e) = ex.replicate_batch(s.store.store(to), to, &keys, &s.stats) {
                fail(s, e);
            }
        }
    }
}

/// Tells the coordinator a migration ended. Unlike reports this must not be
/// dropped while the coordinator runs, so it blocks briefly on a full queue.
fn migrated<F: Fabric>(s: &Shared<F>, key: Key, to: MachineId, ok: bool) {
    let e = Event::Migrated { key, to, ok };
    if s.events_tx
        .send_timeout(e, Duration::from_millis(100))
        .is_err()
    {
        s.stats.reports_dropped.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_queue_takes_jobs_up_to_its_bound_and_again_as_they_are_taken() {
        let (tx, rx) = unbounded();
        for i in 0..3 {
            assert!(
                queue_job(&tx, 3, Job::Migrate(Key(i), 1)),
                "room for job {i}"
            );
        }
        assert!(!queue_job(&tx, 3, Job::Migrate(Key(3), 1)), "full at 3");
        assert!(
            !queue_job(&tx, 3, Job::Replicate(Key(3), 1)),
            "replicas too"
        );
        assert!(matches!(rx.try_recv(), Ok(Job::Migrate(Key(0), 1))));
        assert!(queue_job(&tx, 3, Job::Migrate(Key(3), 1)), "room again");
        assert_eq!(rx.len(), 3);
    }

    #[test]
    fn a_panicked_thread_is_named_with_its_message() {
        let h = spawn("locus-test-panics", || panic!("boom {}", 7)).unwrap();
        let e = join("locus-test-panics", h).unwrap_err();
        assert!(
            matches!(
                &e,
                CoordinatorError::ThreadPanicked { thread, reason }
                    if thread == "locus-test-panics" && reason == "boom 7"
            ),
            "{e:?}"
        );
        let ok = spawn("locus-test-returns", || {}).unwrap();
        assert!(join("locus-test-returns", ok).is_ok());
    }
}
