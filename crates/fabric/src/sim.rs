//! The simulated fabric: a deterministic, seeded twin of [`crate::local`] for
//! testing lock-free protocols built on the fabric (CAS on address words,
//! invalidation, reclaim) under many interleavings, each one reproducible from
//! a single seed (TigerBeetle's simulator; crossbeam's loom models in spirit).
//!
//! Memory is the same as the in-process fabric's, and held by the same code:
//! every machine is a [`MachineMemory`] in this process, kept by the `hosted`
//! module's `Hosted` (regions, lookup, inboxes) and reached through a port's
//! `RegionCache`, and every verb goes through the `memory` module's
//! `apply_on`/`apply_region`, so the semantics are identical. There is no
//! latency model; what is simulated is *scheduling*.
//!
//! # The baton
//! [`Sim::run`] runs a set of *actors* (closures), each on its own OS thread,
//! but only the actor that holds the baton runs. Every call on a [`SimPort`]
//! that issues or completes work (each one-sided verb, `execute`, `post`,
//! `poll`, `wait`, `send`, `try_recv`, `recv_timeout`) and every
//! [`Port::relax`] is a *scheduling point*: the caller hands the baton to an
//! actor that the run's RNG picks uniformly among the unfinished ones (possibly
//! itself), sleeps until the baton comes back, and only then performs its
//! operation. So each operation is one atomic step and the code between two
//! operations of an actor runs as part of the step before it.
//! ```text
//!   actor 0  ─op─op─┐               ┌─op──────┐
//!   actor 1         └─op─┐          │         └─op─op─ ...
//!   actor 2              └─op─op─op─┘
//!            at every op the RNG picks who continues (self included)
//! ```
//! The baton is one mutex with a condition variable per actor: the holder sets
//! `running` to the chosen actor, wakes that actor's condition variable and
//! waits on its own. A switch costs a thread wake-up (about 10 us on a small
//! VM; staying with the same actor costs a lock), so a run is sized in
//! thousands to a few hundred thousand steps; explore with many short runs
//! over many seeds rather than one long one.
//!
//! # Why a run is deterministic
//! The OS decides when threads wake up but never what they do: an actor only
//! runs while it holds the baton, and who gets the baton next is a function of
//! the RNG state (which starts from [`SimConfig::seed`]) and of the set of
//! finished actors, which is itself a function of what ran before. The order
//! of every operation, the values it sees, the simulated clock and the step
//! counts of a run are therefore a pure function of the seed and the actors'
//! code, **provided that**:
//! - actors interact only through the fabric. Other shared mutable state (a
//!   `Mutex<Vec<_>>` log, an atomic counter) is fine only if a lock on it is
//!   never held across a scheduling point: an actor blocked on a lock held by
//!   a descheduled actor would hang the run, which nothing can detect;
//! - actors make no nondeterministic choices of their own: no wall clock, no
//!   `HashMap` iteration order, no thread-local RNG (use [`SimFabric::rng`]);
//! - actors do not hand the fabric to other threads during a run. A port used
//!   by a thread that is not an actor while a run is active panics, because
//!   its operations could not be ordered;
//! - actors do not spin without a scheduling point (on a plain atomic, say):
//!   nobody else can run meanwhile. Spin with [`Port::relax`].
//!
//! # Time
//! The simulated clock ([`SimFabric::now_ns`], and [`Port::now_ns`] on a [`SimPort`]) starts at
//! 0 and advances by [`SimConfig::clock_step_ns`] at every scheduling point of
//! a run, so leases and timeouts are deterministic: protocols take `now_ns` as
//! a parameter. [`SimPort::recv_timeout`] counts its timeout in simulated time.
//!
//! # Posted operations
//! With [`SimConfig::posted_delay`] off, a posted operation takes effect at its
//! post's scheduling point and its completion is reported by the next
//! `poll`/`wait`. With it on (the default), posted operations wait in their
//! port and, at each later scheduling point of that port, the port's RNG may
//! apply some of them, in any order that the ordering guarantees allow
//! (posting order within a target; a fenced request only after every earlier
//! one), looking at most [`REORDER_WINDOW`] requests ahead. `wait` applies at
//! least one; a synchronous operation to a target first applies every earlier
//! posted request to that target (posting order), and so does `send` (as every
//! other fabric does); dropping the port applies the rest. A completion is
//! reported only after its effect. Pending requests progress only at *their
//! own port's* scheduling points, as if the port had to be polled to make
//! progress: code that spins on another port while its posted writes are
//! unpolled ends as a livelock.
//!
//! # Failures, and reproducing them
//! A run ends with a [`SimFailure`] when an actor panics (the run stops at
//! once: every other actor unwinds out of its next scheduling point with a
//! private payload, without printing, so every thread exits) or when the run
//! takes more than [`SimConfig::steps_max`] scheduling points (a livelock, or
//! a run too long for its bound). The failure's `Display` (and `Debug`, so
//! `unwrap` shows it) starts with `seed N:`; rerunning with that seed replays
//! the same interleaving, step for step, under a debugger or with logging.
//!
//! # Outside a run
//! Operations from a thread that is not an actor while no run is active (setup
//! and checking code, or the conformance suite's own threads) run directly,
//! without scheduling and without advancing the clock, exactly as on the
//! in-process fabric without a latency model.

use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::hosted::{check_inflight, check_machine_count, check_queue_limits, Hosted, RegionCache};
use crate::memory::{MachineMemory, VerbRef};
use crate::{
    Completion, Fabric, FabricError, MachineId, Message, Output, Port, RegionId, RegionInfo,
    Result, WorkRequest,
};

/// How far past the oldest pending request a delayed port looks for one to
/// apply: a NIC's reordering is bounded too, and the scan is per step.
pub const REORDER_WINDOW: usize = 64;

/// Settings of a simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Machines in the cluster (1..=128).
    pub machines: usize,
    /// The seed of every scheduling decision (and of [`SimFabric::rng`]).
    pub seed: u64,
    /// Scheduling points one run may take; the next one fails the run as a livelock.
    pub steps_max: u64,
    /// Simulated time added at every scheduling point, in nanoseconds.
    pub clock_step_ns: u64,
    /// Whether posted operations take effect at a later, random scheduling
    /// point of their port (see the module doc) instead of at their post.
    pub posted_delay: bool,
    /// Operations a port may have posted and not yet polled.
    pub inflight_ops_max: usize,
    /// Messages an inbox holds before senders see back-pressure.
    pub inbox_messages_max: usize,
    /// Largest message payload.
    pub message_bytes_max: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            machines: 4,
            seed: 0,
            steps_max: 1_000_000,
            clock_step_ns: 1_000,
            posted_delay: true,
            inflight_ops_max: 4096,
            inbox_messages_max: 65_536,
            message_bytes_max: 1 << 20,
        }
    }
}

impl SimConfig {
    /// The default settings with `seed`.
    pub fn with_seed(seed: u64) -> Self {
        SimConfig {
            seed,
            ..Self::default()
        }
    }

    /// Rejects settings that cannot work.
    pub fn validate(&self) -> Result<()> {
        check_machine_count(self.machines)?;
        if self.steps_max == 0 || self.clock_step_ns == 0 {
            return Err(FabricError::Config(
                "steps_max and clock_step_ns must be positive (time must advance for leases to expire)"
                    .into(),
            ));
        }
        check_queue_limits(
            self.inflight_ops_max,
            self.inbox_messages_max,
            self.message_bytes_max,
        )
    }
}

/// SplitMix64: expands one seed into well-mixed words (seeds [`SimRng`]).
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A small deterministic RNG (xoshiro256**, seeded by SplitMix64): the
/// simulator's only source of randomness, and the one actors should use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRng {
    s: [u64; 4],
}

impl SimRng {
    /// A generator whose whole sequence is a function of `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        // SplitMix64 is a bijection of a counter, so four outputs are never all zero.
        debug_assert!(s.iter().any(|&w| w != 0));
        SimRng { s }
    }

    /// Independent stream `stream` of `seed` (one per port, one per actor, ...).
    pub fn stream(seed: u64, stream: u64) -> Self {
        let mut x = stream ^ 0x5EED_5EED_5EED_5EED;
        Self::new(seed ^ splitmix64(&mut x))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// A number in `0..n` (`n > 0`), by multiply-shift (bias below 2^-32 for small `n`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "SimRng::below(0)");
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The boxed closure of one actor. It borrows from the caller's stack if it
/// likes: [`Sim::run`] joins every actor thread before returning.
pub type Actor<'a> = Box<dyn FnOnce(&SimFabric) + Send + 'a>;

/// What a finished run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimReport {
    /// The seed of the simulation.
    pub seed: u64,
    /// Scheduling points taken by the run.
    pub steps: u64,
    /// Scheduling points taken by each actor, by index.
    pub actor_steps: Vec<u64>,
    /// The simulated clock at the end of the run, in ns.
    pub now_ns: u64,
}

/// Why a run failed.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimFailureKind {
    /// An actor panicked; the run was stopped there.
    Panicked {
        /// The actor's index.
        actor: usize,
        /// The panic message.
        message: String,
    },
    /// The run reached [`SimConfig::steps_max`] scheduling points.
    Livelock {
        /// The actor that took the step past the bound.
        actor: usize,
        /// The bound.
        steps_max: u64,
    },
    /// An actor thread could not be started.
    Spawn {
        /// The OS error.
        reason: String,
    },
}

/// A failed run: what happened, and the seed that replays it.
#[derive(Clone, PartialEq, Eq)]
pub struct SimFailure {
    /// The seed of the simulation: rerun with it to reproduce the failure.
    pub seed: u64,
    /// Scheduling points taken before the run stopped.
    pub steps: u64,
    /// Scheduling points taken by each actor.
    pub actor_steps: Vec<u64>,
    /// What happened.
    pub kind: SimFailureKind,
}

impl std::fmt::Display for SimFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seed {}: ", self.seed)?;
        match &self.kind {
            SimFailureKind::Panicked { actor, message } => write!(
                f,
                "actor {actor} panicked at step {}: {message}",
                self.steps
            )?,
            SimFailureKind::Livelock { actor, steps_max } => write!(
                f,
                "livelock: the run did not end within steps_max = {steps_max} scheduling points \
                 (actor {actor} took the last one; steps per actor {:?})",
                self.actor_steps
            )?,
            SimFailureKind::Spawn { reason } => {
                write!(f, "could not start an actor thread: {reason}")?
            }
        }
        write!(f, " (replay with SimConfig {{ seed: {}, .. }})", self.seed)
    }
}

// `Debug` shows the same text so that `run(..).unwrap()` prints the seed first.
impl std::fmt::Debug for SimFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for SimFailure {}

/// The unwinding payload that stops the other actors of an aborted run. It is
/// raised with `resume_unwind`, so the panic hook does not print it.
struct SimAborted;

#[derive(Debug)]
enum Abort {
    Panicked { actor: usize, message: String },
    Livelock { actor: usize },
    Spawn { reason: String },
}

/// Scheduler state, behind the baton mutex.
struct State {
    /// The actor holding the baton.
    running: Option<usize>,
    finished: Vec<bool>,
    /// One condition variable per actor, all used with this state's mutex.
    wake: Vec<Arc<Condvar>>,
    steps: u64,
    actor_steps: Vec<u64>,
    abort: Option<Abort>,
    rng: SimRng,
}

impl State {
    /// Picks the next baton holder among the unfinished actors.
    fn pick(&mut self) -> Option<usize> {
        let unfinished = self.finished.iter().filter(|&&f| !f).count();
        if unfinished == 0 {
            return None;
        }
        let k = self.rng.below(unfinished as u64) as usize;
        self.finished
            .iter()
            .enumerate()
            .filter(|(_, &f)| !f)
            .nth(k)
            .map(|(i, _)| i)
    }

    fn wake_all(&self) {
        for cv in &self.wake {
            cv.notify_one();
        }
    }
}

thread_local! {
    /// The simulation (by id) and actor index this thread runs, if it is an actor.
    static ACTOR: Cell<Option<(u64, usize)>> = const { Cell::new(None) };
}

/// Distinguishes simulations in [`ACTOR`] (addresses could be reused).
static SIM_IDS: AtomicU64 = AtomicU64::new(1);

/// The baton and the clock.
struct Sched {
    id: u64,
    state: Mutex<State>,
    /// A run is in progress (changed under the lock; read without it by non-actors).
    active: AtomicBool,
    clock_ns: AtomicU64,
}

impl Sched {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock, but stay usable if one did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This thread's actor index, if it is an actor of this simulation.
    fn current_actor(&self) -> Option<usize> {
        match ACTOR.with(Cell::get) {
            Some((id, actor)) if id == self.id => Some(actor),
            _ => None,
        }
    }

    /// A scheduling point: the step counter and clock advance, the RNG picks
    /// who runs next, and this returns when the caller holds the baton again.
    /// Unwinds (silently) if the run was aborted meanwhile.
    fn point(&self, config: &SimConfig) {
        let Some(me) = self.current_actor() else {
            assert!(
                !self.active.load(Ordering::Acquire),
                "a thread that is not an actor used the simulated fabric during a run: its \
                 operations cannot be ordered, so the run would not be deterministic; issue \
                 them from an actor (or before/after Sim::run)"
            );
            return;
        };
        if std::thread::panicking() {
            // Drop code of an unwinding actor: the run is failing or stopping;
            // run directly (a second panic would abort the process).
            return;
        }
        let mut st = self.lock();
        if st.abort.is_some() {
            drop(st);
            resume_unwind(Box::new(SimAborted));
        }
        assert_eq!(
            st.running,
            Some(me),
            "actor {me} reached a scheduling point without the baton"
        );
        let next = st.pick().expect("the caller is unfinished");
        if next != me {
            st.running = Some(next);
            st.wake[next].notify_one();
            let cv = Arc::clone(&st.wake[me]);
            while st.running != Some(me) && st.abort.is_none() {
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.abort.is_some() {
                drop(st);
                resume_unwind(Box::new(SimAborted));
            }
        }
        // The step is counted when it is taken (the caller holds the baton and
        // its operation follows), so every operation has its own clock value.
        st.steps += 1;
        st.actor_steps[me] += 1;
        self.clock_ns
            .fetch_add(config.clock_step_ns, Ordering::Relaxed);
        if st.steps > config.steps_max {
            st.abort = Some(Abort::Livelock { actor: me });
            st.wake_all();
            drop(st);
            resume_unwind(Box::new(SimAborted));
        }
    }

    /// Waits for an actor's first turn; false if the run was aborted first.
    fn first_turn(&self, me: usize) -> bool {
        let mut st = self.lock();
        let cv = Arc::clone(&st.wake[me]);
        while st.running != Some(me) && st.abort.is_none() {
            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.abort.is_none()
    }

    /// An actor is done: record a panic, pass the baton on (or release everyone).
    fn finish(&self, me: usize, outcome: std::thread::Result<()>) {
        let mut st = self.lock();
        st.finished[me] = true;
        let payload = outcome.err();
        if let Some(p) = &payload {
            if !p.is::<SimAborted>() && st.abort.is_none() {
                st.abort = Some(Abort::Panicked {
                    actor: me,
                    message: panic_message(p.as_ref()),
                });
            }
        }
        if st.abort.is_some() {
            st.wake_all();
        } else {
            assert_eq!(
                st.running,
                Some(me),
                "actor {me} finished without the baton"
            );
            st.running = st.pick();
            if let Some(next) = st.running {
                st.wake[next].notify_one();
            }
        }
        drop(st);
        // The payload's destructor runs outside the lock.
        drop(payload);
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic payload that is not a string)".to_string()
    }
}

struct Inner {
    config: SimConfig,
    hosted: Hosted,
    sched: Sched,
    /// Ports opened so far: each port's RNG stream (opening order is deterministic).
    ports_opened: AtomicU64,
}

/// The simulated cluster: N machines' memory plus the scheduler; cheap to clone (shared).
#[derive(Clone)]
pub struct SimFabric {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFabric")
            .field("config", &self.inner.config)
            .field("now_ns", &self.now_ns())
            .finish()
    }
}

impl SimFabric {
    /// The settings.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    /// The simulation's seed.
    pub fn seed(&self) -> u64 {
        self.inner.config.seed
    }

    /// The simulated clock, in ns: [`SimConfig::clock_step_ns`] per scheduling point so far.
    pub fn now_ns(&self) -> u64 {
        self.inner.sched.clock_ns.load(Ordering::Relaxed)
    }

    /// A deterministic RNG for an actor's own choices: stream `stream` of the seed.
    pub fn rng(&self, stream: u64) -> SimRng {
        SimRng::stream(self.inner.config.seed, stream.wrapping_add(1 << 63))
    }

    /// Direct access to a machine's memory (for checks; not a scheduling point).
    pub fn memory(&self, machine: MachineId) -> Result<&MachineMemory> {
        self.inner.hosted.memory(machine)
    }
}

impl Fabric for SimFabric {
    type Port = SimPort;

    fn machine_count(&self) -> usize {
        self.inner.hosted.count()
    }

    fn hosts(&self, machine: MachineId) -> bool {
        self.inner.hosted.hosts(machine)
    }

    fn register(&self, machine: MachineId, name: &str, len_bytes: u64) -> Result<RegionInfo> {
        self.inner.hosted.register(machine, name, len_bytes)
    }

    fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo> {
        self.inner.hosted.lookup(machine, name)
    }

    fn port(&self, machine: MachineId) -> Result<SimPort> {
        self.inner.hosted.memory(machine)?;
        let serial = self.inner.ports_opened.fetch_add(1, Ordering::Relaxed);
        Ok(SimPort {
            inner: Arc::clone(&self.inner),
            machine,
            pending: VecDeque::new(),
            done: VecDeque::new(),
            rng: SimRng::stream(self.inner.config.seed, serial),
            regions: RegionCache::new(self.inner.hosted.count()),
        })
    }
}

/// A simulation: a [`SimFabric`] and the scheduler that runs actors on it.
///
/// Set up through [`Sim::fabric`] (register regions, write initial state),
/// then [`Sim::run`] the actors; check the outcome through the fabric. A sim
/// may run several times in a row: the RNG and the clock carry on, so the
/// whole sequence is still a function of the seed.
#[derive(Debug)]
pub struct Sim {
    fabric: SimFabric,
}

impl Sim {
    /// A simulation with empty machines.
    pub fn new(config: SimConfig) -> Result<Sim> {
        config.validate()?;
        let hosted = Hosted::all(
            config.machines,
            config.inbox_messages_max,
            config.message_bytes_max,
            false,
        );
        let sched = Sched {
            id: SIM_IDS.fetch_add(1, Ordering::Relaxed),
            active: AtomicBool::new(false),
            state: Mutex::new(State {
                running: None,
                finished: Vec::new(),
                wake: Vec::new(),
                steps: 0,
                actor_steps: Vec::new(),
                abort: None,
                // Ports and `SimFabric::rng` use `SimRng::stream`s of the seed.
                rng: SimRng::new(config.seed),
            }),
            clock_ns: AtomicU64::new(0),
        };
        Ok(Sim {
            fabric: SimFabric {
                inner: Arc::new(Inner {
                    config,
                    hosted,
                    sched,
                    ports_opened: AtomicU64::new(0),
                }),
            },
        })
    }

    /// The simulated fabric (clone it freely).
    pub fn fabric(&self) -> &SimFabric {
        &self.fabric
    }

    /// The simulation's seed.
    pub fn seed(&self) -> u64 {
        self.fabric.seed()
    }

    /// Runs `actors` to completion under the scheduler, one at a time. Returns
    /// once every actor thread has exited: the report, or the failure (with
    /// the seed) if an actor panicked or the run exceeded
    /// [`SimConfig::steps_max`].
    pub fn run<'a>(
        &mut self,
        actors: Vec<Actor<'a>>,
    ) -> std::result::Result<SimReport, SimFailure> {
        let inner = &self.fabric.inner;
        let sched = &inner.sched;
        let n = actors.len();
        {
            let mut st = sched.lock();
            assert!(
                !sched.active.swap(true, Ordering::AcqRel),
                "Sim::run while a run is active"
            );
            st.finished = vec![false; n];
            st.wake = (0..n).map(|_| Arc::new(Condvar::new())).collect();
            st.steps = 0;
            st.actor_steps = vec![0; n];
            st.abort = None;
            st.running = st.pick();
        }
        let fabric = &self.fabric;
        std::thread::scope(|s| {
            for (me, actor) in actors.into_iter().enumerate() {
                let spawned = std::thread::Builder::new()
                    .name(format!("sim-actor-{me}"))
                    .spawn_scoped(s, move || {
                        ACTOR.with(|a| a.set(Some((sched.id, me))));
                        let started = sched.first_turn(me);
                        // Dropping an actor that never started may run its
                        // captures' destructors: under catch_unwind as well.
                        let outcome = catch_unwind(AssertUnwindSafe(move || {
                            if started {
                                actor(fabric)
                            } else {
                                drop(actor)
                            }
                        }));
                        ACTOR.with(|a| a.set(None));
                        sched.finish(me, outcome);
                    });
                if let Err(e) = spawned {
                    let mut st = sched.lock();
                    if st.abort.is_none() {
                        st.abort = Some(Abort::Spawn {
                            reason: e.to_string(),
                        });
                    }
                    st.wake_all();
                    break;
                }
            }
        });
        let mut st = sched.lock();
        sched.active.store(false, Ordering::Release);
        st.running = None;
        let abort = st.abort.take();
        let seed = inner.config.seed;
        let (steps, actor_steps) = (st.steps, std::mem::take(&mut st.actor_steps));
        drop(st);
        let failure = |kind| SimFailure {
            seed,
            steps,
            actor_steps: actor_steps.clone(),
            kind,
        };
        match abort {
            None => Ok(SimReport {
                seed,
                steps,
                actor_steps: actor_steps.clone(),
                now_ns: fabric.now_ns(),
            }),
            Some(Abort::Panicked { actor, message }) => {
                Err(failure(SimFailureKind::Panicked { actor, message }))
            }
            Some(Abort::Livelock { actor }) => Err(failure(SimFailureKind::Livelock {
                actor,
                steps_max: inner.config.steps_max,
            })),
            Some(Abort::Spawn { reason }) => Err(failure(SimFailureKind::Spawn { reason })),
        }
    }
}

/// A port of the simulated fabric. Every operation is a scheduling point when
/// called from an actor during a run (see the module doc).
pub struct SimPort {
    inner: Arc<Inner>,
    machine: MachineId,
    /// Posted requests not yet applied, in posting order (`posted_delay` only).
    pending: VecDeque<WorkRequest>,
    /// Applied requests' completions, in application order.
    done: VecDeque<Completion>,
    /// Decides when pending requests apply.
    rng: SimRng,
    /// Regions seen by this port (never unregistered, so stable).
    regions: RegionCache,
}

impl std::fmt::Debug for SimPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimPort")
            .field("machine", &self.machine)
            .field("pending", &self.pending.len())
            .field("done", &self.done.len())
            .finish()
    }
}

impl SimPort {
    /// Applies a verb on borrowed buffers through the port's region cache.
    fn apply_ref(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        verb: VerbRef<'_>,
    ) -> Result<u64> {
        self.regions
            .apply_ref(&self.inner.hosted, target, region, offset, verb)
    }

    /// Applies a request and queues its completion.
    fn complete(&mut self, wr: WorkRequest) {
        let result =
            self.regions
                .apply(&self.inner.hosted, wr.target, wr.region, wr.offset, wr.verb);
        self.done.push_back(Completion {
            id: wr.id,
            target: wr.target,
            result,
        });
    }

    /// Every operation's scheduling point; then pending requests may progress.
    fn point(&mut self) {
        self.inner.sched.point(&self.inner.config);
        // Each draw applies one more pending request with probability 1/2.
        while !self.pending.is_empty() && self.rng.below(2) == 1 {
            self.apply_one();
        }
    }

    /// Applies one pending request that the ordering guarantees allow next:
    /// the oldest of its target, and if fenced the oldest of all.
    fn apply_one(&mut self) {
        let mut seen = [0u64; 4]; // targets met so far, a bit per MachineId
        let mut eligible = [0usize; REORDER_WINDOW];
        let mut n = 0;
        for (i, wr) in self.pending.iter().take(REORDER_WINDOW).enumerate() {
            let t = wr.target as usize;
            let first_of_target = seen[t / 64] & (1 << (t % 64)) == 0;
            seen[t / 64] |= 1 << (t % 64);
            if first_of_target && (!wr.fence || i == 0) {
                eligible[n] = i;
                n += 1;
            }
        }
        debug_assert!(n > 0, "the oldest pending request is always eligible");
        let i = eligible[self.rng.below(n as u64) as usize];
        let wr = self.pending.remove(i).expect("eligible index");
        self.complete(wr);
    }

    /// Applies, in posting order, every pending request up to the last one to
    /// `target` (a synchronous operation or a message to `target` follows them).
    fn flush_to(&mut self, target: MachineId) {
        if let Some(last) = self.pending.iter().rposition(|wr| wr.target == target) {
            for _ in 0..=last {
                let wr = self.pending.pop_front().expect("within pending");
                self.complete(wr);
            }
        }
    }

    fn flush_all(&mut self) {
        while let Some(wr) = self.pending.pop_front() {
            self.complete(wr);
        }
    }
}

impl Drop for SimPort {
    fn drop(&mut self) {
        // Posted requests take effect even if nobody polls them (as on a NIC).
        self.flush_all();
    }
}

impl Port for SimPort {
    fn machine(&self) -> MachineId {
        self.machine
    }

    fn machine_count(&self) -> usize {
        self.inner.hosted.count()
    }

    fn post(&mut self, wr: WorkRequest) -> Result<()> {
        self.point();
        check_inflight(self.inflight(), self.inner.config.inflight_ops_max)?;
        if self.inner.config.posted_delay {
            self.pending.push_back(wr);
        } else {
            self.complete(wr);
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.point();
        let n = self.done.len();
        out.extend(self.done.drain(..));
        Ok(n)
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.point();
        if self.done.is_empty() && !self.pending.is_empty() {
            self.apply_one();
        }
        let n = self.done.len();
        out.extend(self.done.drain(..));
        Ok(n)
    }

    fn inflight(&self) -> usize {
        self.pending.len() + self.done.len()
    }

    fn execute(&mut self, wr: WorkRequest) -> Result<Output> {
        self.point();
        if wr.fence {
            self.flush_all();
        } else {
            self.flush_to(wr.target);
        }
        self.regions
            .apply(&self.inner.hosted, wr.target, wr.region, wr.offset, wr.verb)
    }

    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::Read(buf))?;
        Ok(())
    }

    fn read_word(&mut self, target: MachineId, region: RegionId, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(target, region, offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::Write(data))?;
        Ok(())
    }

    fn cas(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::Cas { expected, new })
    }

    fn fetch_add(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::FetchAdd { add })
    }

    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()> {
        self.point();
        self.inner.hosted.check_send(target, payload.len())?;
        self.flush_to(target);
        self.inner.hosted.deliver(self.machine, target, payload, 0)
    }

    fn try_recv(&mut self) -> Result<Option<Message>> {
        self.point();
        self.inner.hosted.take(self.machine, u64::MAX)
    }

    /// In an actor, `timeout` is simulated time (a scheduling point per try);
    /// elsewhere it is wall-clock time, as on the in-process fabric.
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Message>> {
        if self.inner.sched.current_actor().is_none() {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                if let Some(m) = self.try_recv()? {
                    return Ok(Some(m));
                }
                if std::time::Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::yield_now();
            }
        }
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let deadline_ns = self.now_ns().saturating_add(timeout_ns);
        loop {
            if let Some(m) = self.try_recv()? {
                return Ok(Some(m));
            }
            if self.now_ns() >= deadline_ns {
                return Ok(None);
            }
        }
    }

    /// Simulated time (as [`SimFabric::now_ns`]).
    fn now_ns(&self) -> u64 {
        self.inner.sched.clock_ns.load(Ordering::Relaxed)
    }

    fn relax(&mut self) {
        if self.inner.sched.current_actor().is_none() {
            std::thread::yield_now();
        }
        self.point();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MACHINES_MAX;

    #[test]
    fn rng_matches_the_reference_implementations() {
        // SplitMix64 of 0, from the reference C implementation.
        let mut x = 0;
        assert_eq!(splitmix64(&mut x), 0xE220_A839_7B1D_CDAF);
        // xoshiro256** from state [1, 2, 3, 4] (reference values, as in rand_xoshiro).
        let mut r = SimRng { s: [1, 2, 3, 4] };
        let expected = [11520, 0, 1509978240, 1215971899390074240];
        for e in expected {
            assert_eq!(r.next_u64(), e);
        }
        let mut r = SimRng::new(7);
        assert!((0..1000).all(|_| r.below(3) < 3));
        assert_ne!(SimRng::stream(7, 0), SimRng::stream(7, 1));
    }

    #[test]
    fn config_limits() {
        assert!(SimConfig::default().validate().is_ok());
        let bad = [
            SimConfig {
                machines: 0,
                ..SimConfig::default()
            },
            SimConfig {
                machines: MACHINES_MAX + 1,
                ..SimConfig::default()
            },
            SimConfig {
                steps_max: 0,
                ..SimConfig::default()
            },
            SimConfig {
                clock_step_ns: 0,
                ..SimConfig::default()
            },
            SimConfig {
                inflight_ops_max: 0,
                ..SimConfig::default()
            },
        ];
        for c in bad {
            assert!(Sim::new(c).is_err());
        }
        assert!(Sim::new(SimConfig {
            machines: MACHINES_MAX,
            ..SimConfig::default()
        })
        .is_ok());
    }

    #[test]
    fn failure_display_starts_with_the_seed() {
        let f = SimFailure {
            seed: 42,
            steps: 7,
            actor_steps: vec![3, 4],
            kind: SimFailureKind::Panicked {
                actor: 1,
                message: "boom".into(),
            },
        };
        assert!(f
            .to_string()
            .starts_with("seed 42: actor 1 panicked at step 7: boom"));
        assert_eq!(format!("{f:?}"), f.to_string());
    }
}
