//! Migration executors (Pragh 4.1): approved jobs run as the target machine.
//!
//! An [`Executor`] keeps one worker per target machine it has run jobs for
//! and runs a batch of migrations to one target with the pipelined
//! [`Worker::migrate_batch`] (the source's threads are never involved), or
//! a batch of read-only replicas to one target with
//! [`Worker::replicate_batch`] (registrations in flight together). Used by
//! the embedded driver's executor threads and by a server process for the
//! jobs its coordinator sends it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use locus_fabric::{Fabric, MachineId};
use locus_store::{Key, Migration, Replication, Store, Worker};

use crate::driver::DriverStats;
use crate::error::{CoordinatorError, Result};

/// Runs jobs as their target machines.
pub struct Executor<F: Fabric> {
    workers: HashMap<MachineId, Worker<F>>,
}

impl<F: Fabric> Default for Executor<F> {
    fn default() -> Self {
        Executor {
            workers: HashMap::new(),
        }
    }
}

impl<F: Fabric> Executor<F> {
    /// An executor with no workers yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn worker(
        &mut self,
        store: &Store<F>,
        to: MachineId,
        role: &'static str,
    ) -> Result<&mut Worker<F>> {
        match self.workers.entry(to) {
            std::collections::hash_map::Entry::Occupied(o) => Ok(o.into_mut()),
            std::collections::hash_map::Entry::Vacant(v) => {
                let w = store
                    .worker(to)
                    .map_err(|source| CoordinatorError::Worker {
                        role,
                        machine: to,
                        source,
                    })?;
                Ok(v.insert(w))
            }
        }
    }

    /// Migrates `keys` to `to`, pipelined, counting moves in `stats`. Returns
    /// whether each key's value is now at `to` (already being there counts;
    /// an absent key does not), and the error that failed the whole batch,
    /// if one did (then every key is `false`).
    pub fn migrate(
        &mut self,
        store: &Store<F>,
        to: MachineId,
        keys: &[Key],
        stats: &DriverStats,
    ) -> (Vec<bool>, Option<CoordinatorError>) {
        if keys.is_empty() {
            return (Vec::new(), None);
        }
        let w = match self.worker(store, to, "migration executor") {
            Ok(w) => w,
            Err(e) => return (vec![false; keys.len()], Some(e)),
        };
        match w.migrate_batch(keys) {
            Ok(results) => {
                let ok = results
                    .into_iter()
                    .map(|r| match r {
                        Migration::Moved { bytes, .. } => {
                            stats.moved.fetch_add(1, Ordering::Relaxed);
                            stats.bytes_moved.fetch_add(bytes, Ordering::Relaxed);
                            true
                        }
                        Migration::AlreadyHere => true,
                        Migration::Absent => false,
                    })
                    .collect();
                (ok, None)
            }
            Err(source) => (
                vec![false; keys.len()],
                Some(CoordinatorError::Migrate {
                    keys: keys.len(),
                    first: keys[0],
                    machine: to,
                    source,
                }),
            ),
        }
    }

    /// Makes a read-only replica of `key` at `to`, counting it in `stats`.
    pub fn replicate(
        &mut self,
        store: &Store<F>,
        to: MachineId,
        key: Key,
        stats: &DriverStats,
    ) -> Result<()> {
        self.replicate_batch(store, to, &[key], stats)
    }

    /// Makes read-only replicas of `keys` at `to` in one batch (their
    /// registrations in flight together, [`Worker::replicate_batch`]),
    /// counting them in `stats`. A key that fails does not stop the others;
    /// the first failure is returned.
    pub fn replicate_batch(
        &mut self,
        store: &Store<F>,
        to: MachineId,
        keys: &[Key],
        stats: &DriverStats,
    ) -> Result<()> {
        let Some(&first) = keys.first() else {
            return Ok(());
        };
        let w = self.worker(store, to, "replica executor")?;
        let results = w
            .replicate_batch(keys)
            .map_err(|source| CoordinatorError::Replicate {
                key: first,
                machine: to,
                source,
            })?;
        let mut failed = None;
        for (&key, r) in keys.iter().zip(results) {
            match r {
                Ok(Replication::Created { bytes }) => {
                    stats.replicas_created.fetch_add(1, Ordering::Relaxed);
                    stats.replica_bytes.fetch_add(bytes, Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(source) => {
                    failed.get_or_insert(CoordinatorError::Replicate {
                        key,
                        machine: to,
                        source,
                    });
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }
}
