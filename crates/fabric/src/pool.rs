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

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Sender};

use crate::{check_machine, FabricError, MachineId, Result};

type Job<C> = (MachineId, Box<dyn FnOnce(&mut C) + Send>);

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
        let factory = Arc::new(factory);
        let mut workers = Vec::with_capacity(threads);
        for t in 0..threads {
            let rx = rx.clone();
            let shared = Arc::clone(&shared);
            let factory = Arc::clone(&factory);
            let handle = std::thread::Builder::new()
                .name(format!("locus-worker-{t}"))
                .spawn(move || {
                    let mut contexts: Vec<Option<C>> = (0..machines).map(|_| None).collect();
                    for (machine, job) in rx.iter() {
                        if shared.check().is_ok() {
                            let slot = &mut contexts[machine as usize];
                            let run = catch_unwind(AssertUnwindSafe(|| {
                                if slot.is_none() {
                                    *slot = Some(factory(machine).unwrap_or_else(|e| {
                                        panic!("cannot set up machine {machine}: {e}")
                                    }));
                                }
                                job(slot.as_mut().expect("just set"));
                            }));
                            if let Err(panic) = run {
                                let reason = panic
                                    .downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| panic.downcast_ref::<String>().cloned())
                                    .unwrap_or_else(|| "a job panicked".to_string());
                                let mut p = shared.poison.lock().unwrap_or_else(|e| e.into_inner());
                                p.get_or_insert(format!("job for machine {machine}: {reason}"));
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
        self.shared.pending.fetch_add(1, Ordering::AcqRel);
        let tx = self.tx.as_ref().expect("sender lives until drop");
        if tx.send((machine, Box::new(job))).is_err() {
            self.shared.finish_one();
            return Err(FabricError::WorkerPanicked {
                reason: "the worker threads have exited".into(),
            });
        }
        Ok(())
    }

    /// Waits until every queued job has finished; an error if one panicked.
    pub fn wait_idle(&self) -> Result<()> {
        let mut g = self
            .shared
            .idle_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while self.shared.pending.load(Ordering::Acquire) != 0 {
            g = self.shared.idle.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        drop(g);
        self.shared.check()
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
    fn zero_threads_is_a_config_error() {
        assert!(Pool::new(0, 1, |_| Ok(())).is_err());
    }
}
