//! The baton: [`Sim::run`] runs each actor on its own thread, one at a time;
//! `Sched` is the scheduler state behind one mutex, and every scheduling point
//! goes through `Sched::point` (see the module doc of `sim.rs`).

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{Actor, Inner, SimConfig, SimFabric, SimFailure, SimFailureKind, SimReport, SimRng};
use crate::fencing::Fences;
use crate::hosted::Hosted;
use crate::Result;

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
pub(super) struct Sched {
    id: u64,
    state: Mutex<State>,
    /// A run is in progress (changed under the lock; read without it by non-actors).
    active: AtomicBool,
    pub(super) clock_ns: AtomicU64,
}

impl Sched {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock, but stay usable if one did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This thread's actor index, if it is an actor of this simulation.
    pub(super) fn current_actor(&self) -> Option<usize> {
        match ACTOR.with(Cell::get) {
            Some((id, actor)) if id == self.id => Some(actor),
            _ => None,
        }
    }

    /// A scheduling point: the step counter and clock advance, the RNG picks
    /// who runs next, and this returns when the caller holds the baton again.
    /// Unwinds (silently) if the run was aborted meanwhile.
    pub(super) fn point(&self, config: &SimConfig) {
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
                only: None,
                inner: Arc::new(Inner {
                    fences: Fences::new(config.machines),
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
