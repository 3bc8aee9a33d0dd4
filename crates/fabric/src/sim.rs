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
//! # Crashes
//! [`SimFabric::crash`] is a machine's process dying. Its regions are
//! dropped and marked gone: an operation on one fails with
//! `PeerUnavailable` from any port, also from one whose region cache still
//! holds it, until the restarted machine registers regions again: from id 0,
//! as a restarted TCP node does, so a peer's address into the old memory
//! names the new one; what keeps a peer from using it is fencing (a peer
//! that does not know the new epoch is refused, so it has run Pragh 5 for
//! the old incarnation first), as on TCP. Lookups by name fail until the machine registers again. Its inbox
//! and the messages in it are dropped. Requests posted to it and not yet
//! applied fail when their port comes to them (they were lost with its
//! memory). Its ports, the dead process's, fail every operation, and its
//! epoch table starts over. Then it can register its regions again, as a
//! restarted node, and `lookup` finds the new ones. Called by an actor, a
//! crash is a scheduling point, so a run with crashes is still a function of
//! the seed; between runs it happens at once. [`crate::local::LocalFabric::crash`]
//! is the same on the in-process fabric, where nothing is ever pending.
//!
//! # Nodes
//! [`SimFabric::hosting_only`] gives the view of the node that hosts one
//! machine: the same memory, scheduler, clock and seed, but `hosts(x)` only
//! for its machine, and registering, opening ports and fencing only there.
//! Software built to run as one node per process (a store creating the
//! regions of the machines it hosts) runs as several nodes of one simulated
//! cluster with one view each, and each node's machine keeps its own epoch
//! table ([`crate::fencing`]), as a TCP node would.
//!
//! # Outside a run
//! Operations from a thread that is not an actor while no run is active (setup
//! and checking code, or the conformance suite's own threads) run directly,
//! without scheduling and without advancing the clock, exactly as on the
//! in-process fabric without a latency model.

mod port;
mod sched;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::fencing::{fencing_by_tables, Fences, PeerEpoch};
use crate::hosted::{check_machine_count, check_queue_limits, Hosted, RegionCache};
use crate::memory::MachineMemory;
use crate::{Fabric, FabricError, MachineId, RegionInfo, Result};
// The module doc links to `Port`'s methods.
#[cfg(doc)]
use crate::Port;

pub use port::SimPort;
use sched::Sched;
pub use sched::Sim;

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

struct Inner {
    config: SimConfig,
    hosted: Hosted,
    /// Every machine's epoch table (`fencing.rs`).
    fences: Fences,
    sched: Sched,
    /// Ports opened so far: each port's RNG stream (opening order is deterministic).
    ports_opened: AtomicU64,
}

/// The simulated cluster: N machines' memory plus the scheduler; cheap to clone (shared).
#[derive(Clone)]
pub struct SimFabric {
    inner: Arc<Inner>,
    /// A node view ([`SimFabric::hosting_only`]): the one machine it hosts.
    only: Option<MachineId>,
}

impl std::fmt::Debug for SimFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFabric")
            .field("config", &self.inner.config)
            .field("only", &self.only)
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
        self.hosted(machine)
    }

    /// The same simulation seen as the node that hosts only machine `m`
    /// (see "Nodes" in the module doc): `hosts(x)` is `x == m`, and
    /// registering on, opening a port of or fencing another machine is
    /// refused ([`FabricError::NotHosted`]); lookups and operations reach
    /// every machine, and the scheduler, clock and seed are the simulation's.
    pub fn hosting_only(&self, m: MachineId) -> Result<SimFabric> {
        self.hosted(m)?;
        Ok(SimFabric {
            inner: Arc::clone(&self.inner),
            only: Some(m),
        })
    }

    /// Machine `m` crashes (see "Crashes" in the module doc). A scheduling
    /// point when an actor calls it, so it is ordered with every operation
    /// of the run; between runs, it happens at once.
    pub fn crash(&self, m: MachineId) -> Result<()> {
        self.inner.sched.point(&self.inner.config);
        self.hosted(m)?.crash();
        self.inner.fences.reset(m);
        Ok(())
    }

    /// The memory of `machine` if this fabric (or view) hosts it.
    fn hosted(&self, machine: MachineId) -> Result<&MachineMemory> {
        self.inner.hosted.memory_for(machine, self.only)
    }
}

fencing_by_tables!(SimFabric);

impl Fabric for SimFabric {
    type Port = SimPort;

    fn machine_count(&self) -> usize {
        self.inner.hosted.count()
    }

    fn hosts(&self, machine: MachineId) -> bool {
        self.inner.hosted.hosts_for(machine, self.only)
    }

    fn register(&self, machine: MachineId, name: &str, len_bytes: u64) -> Result<RegionInfo> {
        self.hosted(machine)?.register(name, len_bytes)
    }

    fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo> {
        self.inner.hosted.lookup(machine, name)
    }

    fn wake_on_message(&self, machine: MachineId, waker: std::thread::Thread) -> Result<bool> {
        self.hosted(machine)?;
        self.inner.hosted.set_waker(machine, waker).map(|()| true)
    }

    fn port(&self, machine: MachineId) -> Result<SimPort> {
        let incarnation = self.hosted(machine)?.incarnation();
        let serial = self.inner.ports_opened.fetch_add(1, Ordering::Relaxed);
        Ok(SimPort {
            inner: Arc::clone(&self.inner),
            machine,
            incarnation,
            pending: VecDeque::new(),
            done: VecDeque::new(),
            rng: SimRng::stream(self.inner.config.seed, serial),
            regions: RegionCache::new(self.inner.hosted.count()),
        })
    }
}

#[cfg(test)]
mod tests;
