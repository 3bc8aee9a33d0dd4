//! A pool of worker threads that runs each job in the context of a machine.
//!
//! To emulate 8 machines on 2 cores, worker threads are not tied to machines:
//! a job is submitted *for* machine `m`, and whichever thread takes it runs it
//! with that thread's context for `m` (created on first use by the factory:
//! typically a port that acts as `m`, plus `m`'s cache handles and scratch
//! buffers). So a 1-machine (Ideal) and an 8-machine run use the same threads,
//! and only the placement of data differs.
//!
//! A job that panics poisons the pool: the panic is recorded, later calls
//! return [`FabricError::WorkerPanicked`], and the thread drops its contexts
//! (they may be half-updated) and keeps draining the queue without running jobs.
//!
//! [`Pool::broadcast`] hands one job to every thread with all of that
//! thread's contexts ([`Contexts`]): the threads can then take work from a
//! shared counter themselves, acting as whichever machine each item needs,
//! while the caller sleeps. A benchmark measures that way with no thread of
//! its own queueing jobs beside the workers (on 2 cores such a thread took
//! a tenth of the measured window from the fastest runs).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};

use crate::{check_machine, FabricError, MachineId, Result};

type Factory<C> = dyn Fn(MachineId) -> std::result::Result<C, String> + Send + Sync;

/// A job every thread runs with all its contexts ([`Pool::broadcast`]).
type BroadcastJob<C> = Arc<dyn Fn(&mut Contexts<'_, C>) + Send + Sync>;

/// A job for one machine, or (from [`Pool::broadcast`]) for a thread with all its contexts.
enum Job<C> {
    One(MachineId, Box<dyn FnOnce(&mut C) + Send>),
    All(BroadcastJob<C>),
}

/// One worker thread's contexts, one per machine, each made by the pool's
/// factory on first use (see [`Pool::broadcast`]).
pub struct Contexts<'a, C> {
    slots: &'a mut [Option<C>],
    factory: &'a Factory<C>,
}

impl<C> Contexts<'_, C> {
    /// This thread's context for `machine`, made now if it has none. A
    /// machine out of range, or a factory that fails, panics: the pool
    /// records it and is poisoned, as for a job that panics.
    pub fn get(&mut self, machine: MachineId) -> &mut C {
        let machines = self.slots.len();
        let slot = self
            .slots
            .get_mut(machine as usize)
            .unwrap_or_else(|| panic!("machine {machine} is not in a pool of {machines} machines"));
        if slot.is_none() {
            *slot = Some(
                (self.factory)(machine)
                    .unwrap_or_else(|e| panic!("cannot set up machine {machine}: {e}")),
            );
        }
        slot.as_mut().expect("just set")
    }
}

/// Default number of jobs queued before `execute` blocks.
pub const QUEUE_JOBS_MAX: usize = 4096;

struct Shared {
    pending: AtomicUsize,
    idle_lock: Mutex<()>,
    idle: Condvar,
    poison: Mutex<Option<String>>,
}

impl Shared {
    fn check(&self) -> Result<()> {
        match &*self.poison.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(reason) => Err(FabricError::WorkerPanicked {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
    fn finish_one(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _g = self.idle_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.idle.notify_all();
        }
    }
}

/// Worker threads running jobs as machines. Dropping the pool finishes queued jobs and joins.
pub struct Pool<C> {
    tx: Option<Sender<Job<C>>>,
    workers: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    machines: usize,
}

/// Worker threads to use by default: one per core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl<C: 'static> Pool<C> {
    /// Starts `threads` workers for a cluster of `machines`; `factory(m)` builds
    /// a thread's context for machine `m` on first use, on that thread. A
    /// factory error poisons the pool like a panicking job.
    pub fn new<Fac>(threads: usize, machines: usize, factory: Fac) -> Result<Self>
    where
        Fac: Fn(MachineId) -> std::result::Result<C, String> + Send + Sync + 'static,
    {
        if threads == 0 || threads > 1024 {
            return Err(FabricError::Config(format!(
                "worker threads = {threads} but must be 1..=1024"
            )));
        }
        let (tx, rx) = bounded::<Job<C>>(QUEUE_JOBS_MAX);
        let shared = Arc::new(Shared {
            pending: AtomicUsize::new(0),
            idle_lock: Mutex::new(()),
            idle: Condvar::new(),
            poison: Mutex::new(None),
        });
        let factory: Arc<Factory<C>> = Arc::new(factory);
        let mut workers = Vec::with_capacity(threads);
        for t in 0..threads {
            let rx = rx.clone();
            let shared = Arc::clone(&shared);
            let factory = Arc::clone(&factory);
            let handle = std::thread::Builder::new()
                .name(format!("locus-worker-{t}"))
                .spawn(move || {
                    let mut contexts: Vec<Option<C>> = (0..machines).map(|_| None).collect();
                    for job in rx.iter() {
                        if shared.check().is_ok() {
                            let mut ctx = Contexts {
                                slots: &mut contexts,
                                factory: &*factory,
                            };
                            let (run, whose) = match job {
                                Job::One(machine, job) => (
                                    catch_unwind(AssertUnwindSafe(|| job(ctx.get(machine)))),
                                    format!("job for machine {machine}"),
                                ),
                                Job::All(job) => (
                                    catch_unwind(AssertUnwindSafe(|| job(&mut ctx))),
                                    "job broadcast to every thread".to_string(),
                                ),
                            };
                            if let Err(panic) = run {
                                let reason = panic
                                    .downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| panic.downcast_ref::<String>().cloned())
                                    .unwrap_or_else(|| "a job panicked".to_string());
                                let mut p = shared.poison.lock().unwrap_or_else(|e| e.into_inner());
                                p.get_or_insert(format!("{whose}: {reason}"));
                                drop(p);
                                contexts.iter_mut().for_each(|c| *c = None);
                            }
                        }
                        shared.finish_one();
                    }
                })
                .map_err(|e| FabricError::Config(format!("cannot start a worker thread: {e}")))?;
            workers.push(handle);
        }
        Ok(Pool {
            tx: Some(tx),
            workers,
            shared,
            machines,
        })
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Queues `job` to run as `machine` (blocks while the queue is full).
    pub fn execute<J>(&self, machine: MachineId, job: J) -> Result<()>
    where
        J: FnOnce(&mut C) + Send + 'static,
    {
        check_machine(machine, self.machines)?;
        self.shared.check()?;
        self.send(Job::One(machine, Box::new(job)))
    }

    /// Queues one copy of `job` per thread; each copy runs with the
    /// contexts of the thread that takes it ([`Contexts::get`]). Nothing ties
    /// a copy to a thread: one thread may run several copies of a short job
    /// one after another while another runs none (seen in the pool's tests),
    /// and a busy thread leaves its copy to the others. So a job that
    /// splits work should take it from a shared counter (each copy looping
    /// until none is left), as `locus_workloads::traversal::run_ops` does,
    /// and then every item runs exactly once however the copies fall.
    pub fn broadcast<J>(&self, job: J) -> Result<()>
    where
        J: Fn(&mut Contexts<'_, C>) + Send + Sync + 'static,
    {
        self.shared.check()?;
        let job: BroadcastJob<C> = Arc::new(job);
        for _ in 0..self.workers.len() {
            self.send(Job::All(Arc::clone(&job)))?;
        }
        Ok(())
    }

    fn send(&self, job: Job<C>) -> Result<()> {
        self.shared.pending.fetch_add(1, Ordering::AcqRel);
        let tx = self.tx.as_ref().expect("sender lives until drop");
        if tx.send(job).is_err() {
            self.shared.finish_one();
            return Err(FabricError::WorkerPanicked {
                reason: "the worker threads have exited".into(),
            });
        }
        Ok(())
    }

    /// Waits until every queued job has finished; an error if one panicked.
    pub fn wait_idle(&self) -> Result<()> {
        while !self.wait_idle_for(Duration::from_secs(3600))? {}
        Ok(())
    }

    /// Waits at most `timeout` for every queued job to finish: true if they
    /// did, false if some still run; an error if one panicked.
    pub fn wait_idle_for(&self, timeout: Duration) -> Result<bool> {
        let mut g = self
            .shared
            .idle_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let deadline = std::time::Instant::now() + timeout;
        while self.shared.pending.load(Ordering::Acquire) != 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return self.shared.check().map(|()| false);
            }
            g = self
                .shared
                .idle
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(g);
        self.shared.check().map(|()| true)
    }
}

impl<C> Drop for Pool<C> {
    fn drop(&mut self) {
        self.tx.take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn jobs_run_in_their_machines_context() {
        let pool = Pool::new(2, 4, |m| Ok((m, 0u64))).unwrap();
        let sum = Arc::new(AtomicU64::new(0));
        for i in 0..400u64 {
            let sum = Arc::clone(&sum);
            let m = (i % 4) as MachineId;
            pool.execute(m, move |ctx: &mut (MachineId, u64)| {
                assert_eq!(ctx.0, m, "context belongs to the job's machine");
                ctx.1 += 1;
                sum.fetch_add(i, Ordering::Relaxed);
            })
            .unwrap();
        }
        pool.wait_idle().unwrap();
        assert_eq!(sum.load(Ordering::Relaxed), (0..400).sum::<u64>());
        assert!(pool.execute(4, |_| {}).is_err());
    }

    #[test]
    fn a_panicking_job_poisons_the_pool() {
        let pool = Pool::new(2, 1, |_| Ok(())).unwrap();
        pool.execute(0, |_| panic!("boom")).unwrap();
        let err = pool.wait_idle().unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        assert!(pool.execute(0, |_| {}).is_err());
    }

    #[test]
    fn a_failing_factory_poisons_the_pool() {
        let pool: Pool<()> = Pool::new(1, 1, |_| Err("no memory".to_string())).unwrap();
        pool.execute(0, |_| {}).unwrap();
        let err = pool.wait_idle().unwrap_err().to_string();
        assert!(err.contains("no memory"), "{err}");
    }

    #[test]
    fn a_broadcast_job_runs_once_per_thread_and_can_act_as_every_machine() {
        let pool = Pool::new(3, 4, |m| Ok((m, 0u64))).unwrap();
        let next = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let sum = Arc::new(AtomicU64::new(0));
        let (n2, r2, s2) = (Arc::clone(&next), Arc::clone(&runs), Arc::clone(&sum));
        pool.broadcast(move |ctx| {
            r2.fetch_add(1, Ordering::Relaxed);
            loop {
                let i = n2.fetch_add(1, Ordering::Relaxed) as u64;
                if i >= 1000 {
                    break;
                }
                let m = (i % 4) as MachineId;
                let c: &mut (MachineId, u64) = ctx.get(m);
                assert_eq!(c.0, m, "context belongs to the item's machine");
                c.1 += 1;
                s2.fetch_add(i, Ordering::Relaxed);
            }
        })
        .unwrap();
        pool.wait_idle().unwrap();
        // Every item exactly once, however the copies fell to threads.
        assert_eq!(sum.load(Ordering::Relaxed), (0..1000).sum::<u64>());
        assert_eq!(runs.load(Ordering::Relaxed), 3, "one copy per thread");
        // The contexts a broadcast made are the ones later jobs get: every
        // thread's contexts together counted every item once, however
        // unevenly the threads took them. (An idle thread may take several
        // copies of a short job; the barrier holds each copy on its thread
        // until all three have one.)
        let seen = Arc::new(AtomicU64::new(0));
        let s3 = Arc::clone(&seen);
        let all_here = Arc::new(std::sync::Barrier::new(3));
        pool.broadcast(move |ctx| {
            all_here.wait();
            for m in 0..4 {
                s3.fetch_add(ctx.get(m).1, Ordering::Relaxed);
            }
        })
        .unwrap();
        pool.wait_idle().unwrap();
        assert_eq!(seen.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn a_broadcast_job_for_a_machine_out_of_range_poisons_the_pool() {
        let pool = Pool::new(2, 2, |_| Ok(())).unwrap();
        pool.broadcast(|ctx| {
            ctx.get(7);
        })
        .unwrap();
        let err = pool.wait_idle().unwrap_err().to_string();
        assert!(err.contains("machine 7 is not in a pool of 2"), "{err}");
        assert!(pool.broadcast(|_| {}).is_err());
    }

    #[test]
    fn waiting_for_idle_can_time_out() {
        let pool = Pool::new(1, 1, |_| Ok(())).unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        pool.execute(0, move |_| {
            let _ = rx.recv_timeout(Duration::from_secs(30));
        })
        .unwrap();
        assert!(!pool.wait_idle_for(Duration::from_millis(20)).unwrap());
        tx.send(()).unwrap();
        assert!(pool.wait_idle_for(Duration::from_secs(30)).unwrap());
    }

    #[test]
    fn zero_threads_is_a_config_error() {
        assert!(Pool::new(0, 1, |_| Ok(())).is_err());
    }
}
