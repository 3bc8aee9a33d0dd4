//! [`Stores`]: the stores of a cluster's machines seen as one, indexed by
//! machine. A node (`locus-node`) holds a store hosting its machine alone;
//! an embedded cluster is one node per machine, and what runs over all of
//! its machines (the coordinator's driver, the traversal driver, the RDF
//! loader, the benchmarks) takes machine `m`'s worker, cache and tracker
//! from the store that hosts `m`. A single store hosting every machine
//! (the store's own tests) is a `Stores` too ([`Stores::from`]).

use std::sync::Arc;

use locus_fabric::{Fabric, MachineId};

use crate::cache::LocationCache;
use crate::shard::ShardMap;
use crate::store::{MachineUsage, Store};
use crate::track::AccessTracker;
use crate::worker::{Services, Worker};
use crate::{Result, StoreConfig, StoreError, VertexId};

/// The stores of every machine of a cluster (see the module doc). Cheap to clone.
pub struct Stores<F: Fabric> {
    /// Each distinct store once.
    distinct: Arc<[Store<F>]>,
    /// `of[m]`: the index in `distinct` of the store hosting machine `m`.
    of: Arc<[usize]>,
}

impl<F: Fabric> Clone for Stores<F> {
    fn clone(&self) -> Self {
        Stores {
            distinct: Arc::clone(&self.distinct),
            of: Arc::clone(&self.of),
        }
    }
}

impl<F: Fabric> From<Store<F>> for Stores<F> {
    /// One store that hosts every machine.
    fn from(store: Store<F>) -> Self {
        let machines = store.machines();
        Stores {
            distinct: Arc::from(vec![store]),
            of: vec![0; machines].into(),
        }
    }
}

impl<F: Fabric> Stores<F> {
    /// The stores of nodes, `per_machine[m]` hosting machine `m`. Every
    /// store must see the same number of machines, with the same settings.
    pub fn per_machine(per_machine: Vec<Store<F>>) -> Result<Self> {
        let machines = per_machine.len();
        for (m, s) in per_machine.iter().enumerate() {
            if s.machines() != machines {
                return Err(StoreError::Config(format!(
                    "store {m} of {machines} sees {} machines",
                    s.machines()
                )));
            }
            if !s.fabric().hosts(m as MachineId) {
                return Err(StoreError::NotHosted {
                    machine: m as MachineId,
                });
            }
            if s.config() != per_machine[0].config() {
                return Err(StoreError::Config(format!(
                    "the store of machine {m} has other settings than machine 0's"
                )));
            }
        }
        Ok(Stores {
            of: (0..machines).collect::<Vec<_>>().into(),
            distinct: per_machine.into(),
        })
    }

    /// Installs `table` in every store (each node places homes by its own
    /// copy); true if it was newer than the tables held.
    pub fn install_slot_table(&self, table: &crate::SlotTable) -> Result<bool> {
        let mut newer = false;
        for s in self.distinct.iter() {
            newer |= s.homes().install(table)?;
        }
        Ok(newer)
    }

    /// The store hosting `machine`.
    pub fn store(&self, machine: MachineId) -> &Store<F> {
        &self.distinct[self.of[machine as usize]]
    }

    /// Each distinct store once (one per node).
    pub fn distinct(&self) -> &[Store<F>] {
        &self.distinct
    }

    /// Machines in the cluster.
    pub fn machines(&self) -> usize {
        self.of.len()
    }

    /// The settings (the same in every store).
    pub fn config(&self) -> &StoreConfig {
        self.distinct[0].config()
    }

    /// A worker acting as `machine`.
    pub fn worker(&self, machine: MachineId) -> Result<Worker<F>> {
        self.store(machine).worker(machine)
    }

    /// One worker per machine, in machine order.
    pub fn workers(&self) -> Result<Vec<Worker<F>>> {
        (0..self.machines())
            .map(|m| self.worker(m as MachineId))
            .collect()
    }

    /// `machine`'s location cache, if caching is on.
    pub fn cache(&self, machine: MachineId) -> Option<&LocationCache> {
        self.store(machine).cache(machine)
    }

    /// `machine`'s table of tracked accesses.
    pub fn tracker(&self, machine: MachineId) -> Option<&AccessTracker> {
        self.store(machine).tracker(machine)
    }

    /// The machine whose key table holds `v`'s keys (see [`Store::owner`]).
    pub fn owner(&self, v: VertexId) -> MachineId {
        self.distinct[0].owner(v)
    }

    /// The shard map under shard-based placement (machine 0's store's; moves
    /// update every store's, [`Stores::move_shards`]).
    pub fn shard_map(&self) -> Option<&ShardMap> {
        self.distinct[0].shard_map()
    }

    /// Memory use of every machine, in machine order.
    pub fn usage(&self) -> Vec<MachineUsage> {
        let mut all: Vec<MachineUsage> = self.distinct.iter().flat_map(|s| s.usage()).collect();
        all.sort_by_key(|u| u.machine);
        all
    }

    /// (values read, of them remote) by workers dropped so far, over every store.
    pub fn get_counts(&self) -> (u64, u64) {
        self.distinct.iter().fold((0, 0), |(a, b), s| {
            let (x, y) = s.get_counts();
            (a + x, b + y)
        })
    }

    /// Bytes of replica blocks `machine` holds now.
    pub fn replica_bytes(&self, machine: MachineId) -> u64 {
        self.store(machine).replica_bytes(machine)
    }

    /// Retired value blocks of `machine` waiting out the reclaim lease.
    pub fn reclaim_backlog(&self, machine: MachineId) -> usize {
        self.store(machine).reclaim_backlog(machine)
    }

    /// See [`Store::value_bytes_for_degree`].
    pub fn value_bytes_for_degree(&self, degree: u64) -> u64 {
        self.distinct[0].value_bytes_for_degree(degree)
    }

    /// See [`Store::check_capacity_of`] (the settings are every store's).
    pub fn check_capacity_of(&self, degrees: impl Iterator<Item = (VertexId, u64)>) -> Result<()> {
        self.distinct[0].check_capacity_of(degrees)
    }

    /// Service threads for every machine, under one stop and one failure.
    pub fn spawn_services(&self) -> Result<Services> {
        let mut s = Services::none();
        for store in self.distinct.iter() {
            store.add_services(&mut s)?;
        }
        Ok(s)
    }

    /// Moves whole shards as [`Store::move_shards`] does, each copy made by
    /// a worker of the target's store, and every store's map updated.
    pub fn move_shards(&self, moves: &[(u32, MachineId, MachineId)]) -> Result<(u64, u64)> {
        let maps = self
            .distinct
            .iter()
            .map(|s| s.shard_map_or_off())
            .collect::<Result<Vec<_>>>()?;
        crate::worker::shard::move_shards(&|m| self.worker(m), &maps, moves)
    }
}
