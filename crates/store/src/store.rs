//! [`Store`]: the cluster-wide handle. It creates every hosted machine's
//! regions (keys, values, reclaim ring), owns what the workers of a machine
//! share (allocator, update locks, location cache, mailroom, replica lists),
//! and answers questions about the whole cluster (owners, usage, capacity).
//! The operations themselves run on a [`Worker`], one thread acting as one
//! machine ([`crate::worker`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use locus_fabric::{Fabric, MachineId, Port, RegionId};

use crate::addr::units_for_payload;
use crate::adjacency::PREFIX_BYTES;
use crate::alloc::{block_units, ValueAllocator};
use crate::cache::LocationCache;
use crate::config::{StoreConfig, VALUE_BASE_UNITS};
use crate::reclaim::{Collector, RingLayout};
use crate::replica::{ReplicaDirectory, ReplicaSet, DIRECTORY_ENTRIES_MAX};
use crate::shard::ShardMap;
use crate::table::{TableLayout, MAGIC};
use crate::track::AccessTracker;
use crate::worker::{Mailroom, Worker};
use crate::{Result, StoreError, VertexId};

/// Name of the key region on every machine.
pub const KEYS_REGION: &str = "keys";
/// Name of the value region on every machine.
pub const VALUES_REGION: &str = "values";
/// Update lock stripes per machine.
const UPDATE_LOCK_STRIPES: usize = 1024;

/// What every worker of the cluster shares (one per process).
pub(crate) struct Shared<F: Fabric> {
    pub(crate) fabric: F,
    pub(crate) config: StoreConfig,
    pub(crate) layout: TableLayout,
    pub(crate) machines: usize,
    /// (keys, values) region ids of each machine, looked up on first use.
    pub(crate) regions: Vec<OnceLock<(RegionId, RegionId)>>,
    /// Allocators of the machines this process hosts.
    pub(crate) allocs: Vec<Option<ValueAllocator>>,
    /// Per hosted machine, striped locks that serialise updates of one vertex
    /// on the machine holding it. A list spanning several parts cannot be
    /// changed atomically by CASes on separate keys; readers never lock.
    pub(crate) update_locks: Vec<Option<Box<[std::sync::Mutex<()>]>>>,
    /// Per hosted machine, the state of check-and-forward messaging.
    pub(crate) mail: Vec<Option<Mailroom>>,
    /// Per hosted machine, its location cache (Pragh 4.2).
    pub(crate) caches: Vec<Option<LocationCache>>,
    /// Per machine, the on-demand table of tracked local accesses (Pragh 4.4).
    pub(crate) trackers: Vec<AccessTracker>,
    /// The slot table: each vertex's home.
    pub(crate) homes: Arc<crate::homes::Homes>,
    /// Per hosted machine, the creation guards of its slots (slot moves).
    pub(crate) guards: Vec<Option<Arc<crate::slotmove::Guards>>>,
    /// Shard-based placement, if configured.
    pub(crate) shard_map: Option<ShardMap>,
    /// Per hosted machine, the collector of its reclaim ring (opened on first use).
    pub(crate) collectors: Vec<Option<std::sync::Mutex<Option<Collector>>>>,
    /// Every machine's reclaim ring, looked up on first use.
    pub(crate) rings: Vec<OnceLock<(RegionId, RingLayout)>>,
    /// Per hosted machine, the replicas it holds (if replicas are on).
    pub(crate) replica_sets: Vec<Option<ReplicaSet>>,
    /// Per hosted machine, the replicas of the vertices homed there.
    pub(crate) directories: Vec<Option<ReplicaDirectory>>,
    /// Per hosted machine, its service thread, woken when a request is sent
    /// to it (an idle service parks instead of polling).
    pub(crate) wakers: Vec<std::sync::Mutex<Option<std::thread::Thread>>>,
    /// Per hosted machine as a home, its snapshot record (`crate::snapshot`).
    pub(crate) snapshots: Vec<Option<crate::snapshot::HomeSnapshot>>,
    /// Values read (GETs, one per part fetched) and those read from another
    /// machine than the reader, added by each worker when it is dropped.
    pub(crate) gets: [std::sync::atomic::AtomicU64; 2],
}

impl<F: Fabric> Shared<F> {
    /// Wakes `machine`'s service thread if this process runs it and it parked.
    pub(crate) fn wake(&self, machine: MachineId) {
        if let Some(t) = self.wakers[machine as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// The allocator of `machine`'s value region, if this process hosts it.
    pub(crate) fn alloc(&self, machine: MachineId) -> Result<&ValueAllocator> {
        self.allocs[machine as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted { machine })
    }

    /// The mailroom of `machine`, if this process hosts it.
    pub(crate) fn mailroom(&self, machine: MachineId) -> Result<&Mailroom> {
        self.mail[machine as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted { machine })
    }

    /// Tries to take the update lock of `v` on `machine`. Never blocks: the
    /// caller spins with `Port::relax`, which the simulated fabric turns into a
    /// scheduling point (a blocking lock held across fabric operations would
    /// stall a simulation).
    #[allow(clippy::type_complexity)]
    pub(crate) fn try_update_lock(
        &self,
        machine: MachineId,
        v: VertexId,
    ) -> Option<Option<std::sync::MutexGuard<'_, ()>>> {
        let Some(stripes) = self.update_locks[machine as usize].as_ref() else {
            return Some(None);
        };
        let i = crate::table::mix(v as u64) as usize % stripes.len();
        match stripes[i].try_lock() {
            Ok(g) => Some(Some(g)),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(Some(p.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// The graph store over a fabric. Cheap to clone.
pub struct Store<F: Fabric> {
    pub(crate) shared: Arc<Shared<F>>,
}

impl<F: Fabric> Clone for Store<F> {
    fn clone(&self) -> Self {
        Store {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Memory use of one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineUsage {
    /// The machine.
    pub machine: MachineId,
    /// Bytes of its key region.
    pub key_region_bytes: u64,
    /// Bytes in live values.
    pub value_live_bytes: u64,
    /// Bytes taken from the value region so far.
    pub value_used_bytes: u64,
}

impl<F: Fabric> Store<F> {
    /// Creates the store's regions on every machine this process hosts.
    pub fn create(fabric: F, config: StoreConfig) -> Result<Self> {
        config.validate()?;
        let machines = fabric.machine_count();
        let layout = config.layout();
        let lease = Duration::from_millis(config.reclaim_lease_ms);
        let mut allocs = Vec::with_capacity(machines);
        let mut caches = Vec::with_capacity(machines);
        for m in 0..machines {
            let m = m as MachineId;
            if !fabric.hosts(m) {
                allocs.push(None);
                caches.push(None);
                continue;
            }
            caches.push(if config.cache_bytes_max == 0 {
                None
            } else {
                Some(LocationCache::new(config.cache_config())?)
            });
            let keys = fabric.register(m, KEYS_REGION, layout.region_bytes())?;
            fabric.register(m, VALUES_REGION, config.value_region_bytes)?;
            crate::reclaim::register(&fabric, m, RingLayout::new(config.reclaim_ring_entries)?)?;
            let mut port = fabric.port(m)?;
            for (i, w) in [MAGIC, layout.buckets, layout.overflow_buckets]
                .into_iter()
                .enumerate()
            {
                port.write_word(m, keys.id, i as u64 * 8, w)?;
            }
            allocs.push(Some(ValueAllocator::new(
                m,
                VALUE_BASE_UNITS,
                config.value_region_bytes / 8,
                lease,
            )));
        }
        Ok(Store {
            shared: Arc::new(Shared {
                fabric,
                layout,
                machines,
                regions: (0..machines).map(|_| OnceLock::new()).collect(),
                update_locks: allocs
                    .iter()
                    .map(|a| {
                        a.as_ref().map(|_| {
                            (0..UPDATE_LOCK_STRIPES)
                                .map(|_| std::sync::Mutex::new(()))
                                .collect()
                        })
                    })
                    .collect(),
                mail: allocs
                    .iter()
                    .map(|a| a.as_ref().map(|_| Mailroom::default()))
                    .collect(),
                caches,
                trackers: (0..machines).map(|_| AccessTracker::default()).collect(),
                homes: Arc::new(crate::homes::Homes::new(
                    &crate::homes::SlotTable::uniform(config.slots, machines as u16)
                        .map_err(|e| StoreError::Config(e.to_string()))?,
                )),
                guards: allocs
                    .iter()
                    .map(|a| {
                        a.as_ref()
                            .map(|_| Arc::new(crate::slotmove::Guards::new(config.slots)))
                    })
                    .collect(),
                shard_map: (config.shards_per_machine > 0)
                    .then(|| ShardMap::new(machines, config.shards_per_machine)),
                collectors: allocs
                    .iter()
                    .map(|a| a.as_ref().map(|_| std::sync::Mutex::new(None)))
                    .collect(),
                rings: (0..machines).map(|_| OnceLock::new()).collect(),
                replica_sets: allocs
                    .iter()
                    .map(|a| {
                        a.as_ref()
                            .filter(|_| config.replica_bytes_max > 0)
                            .map(|_| ReplicaSet::default())
                    })
                    .collect(),
                directories: allocs
                    .iter()
                    .map(|a| {
                        a.as_ref()
                            .filter(|_| config.replica_bytes_max > 0)
                            .map(|_| ReplicaDirectory::new(DIRECTORY_ENTRIES_MAX))
                    })
                    .collect(),
                snapshots: (0..machines)
                    .map(|m| {
                        allocs[m]
                            .as_ref()
                            .map(|_| crate::snapshot::HomeSnapshot::new(m as MachineId))
                    })
                    .collect(),
                wakers: (0..machines).map(|_| std::sync::Mutex::new(None)).collect(),
                gets: Default::default(),
                allocs,
                config,
            }),
        })
    }

    /// Changes the settings that live only in this process's memory, not in
    /// any region: the location cache (`cache_*`, `hot_accesses`) and the
    /// replica budget. Every other setting must stay as it was (the regions
    /// were laid out by it). Each hosted machine gets a new, empty cache and
    /// replica directory, as a newly created store would have.
    ///
    /// Needs the only handle on the store (no worker, clone, service or
    /// driver may be running), and no replica may be held: dropping the sets
    /// would leak their blocks. `bench pragh` uses it to run several schemes
    /// on one loaded graph.
    pub fn reconfigure(&mut self, config: StoreConfig) -> Result<()> {
        config.validate()?;
        let process_only = |c: &StoreConfig| StoreConfig {
            cache_bytes_max: 0,
            cache_lease_ms: 0,
            cache_lookups: false,
            cache_recent_hits: false,
            hot_accesses: 0,
            replica_bytes_max: 0,
            ..c.clone()
        };
        if process_only(&config) != process_only(&self.shared.config) {
            return Err(StoreError::Config(
                "reconfigure may change only the location cache and replica settings: the regions were laid out by the others".into(),
            ));
        }
        if let Some(m) = (0..self.shared.machines).find(|&m| self.replica_bytes(m as MachineId) > 0)
        {
            return Err(StoreError::Config(format!(
                "machine {m} holds replicas: reconfigure would leak their blocks"
            )));
        }
        let shared = Arc::get_mut(&mut self.shared).ok_or_else(|| {
            StoreError::Config("reconfigure needs the only handle on the store (drop workers, services and drivers first)".into())
        })?;
        let hosted: Vec<bool> = shared.allocs.iter().map(Option::is_some).collect();
        let mut caches = Vec::with_capacity(hosted.len());
        for &h in &hosted {
            caches.push(if h && config.cache_bytes_max > 0 {
                Some(LocationCache::new(config.cache_config())?)
            } else {
                None
            });
        }
        let replicas = config.replica_bytes_max > 0;
        shared.caches = caches;
        shared.replica_sets = hosted
            .iter()
            .map(|&h| (h && replicas).then(ReplicaSet::default))
            .collect();
        shared.directories = hosted
            .iter()
            .map(|&h| (h && replicas).then(|| ReplicaDirectory::new(DIRECTORY_ENTRIES_MAX)))
            .collect();
        shared.trackers = (0..hosted.len())
            .map(|_| AccessTracker::default())
            .collect();
        shared.config = config;
        Ok(())
    }

    /// The fabric.
    pub fn fabric(&self) -> &F {
        &self.shared.fabric
    }

    /// The settings.
    pub fn config(&self) -> &StoreConfig {
        &self.shared.config
    }

    /// Machines in the cluster.
    pub fn machines(&self) -> usize {
        self.shared.machines
    }

    /// (values read, of them read from a machine other than the reader) by
    /// workers dropped so far: the unit of the placement bound (a GET is
    /// remote when its value is elsewhere), as opposed to the fabric's
    /// one-sided operations (a home-local GET is two, a cache hit one).
    pub fn get_counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.shared.gets[0].load(Relaxed),
            self.shared.gets[1].load(Relaxed),
        )
    }

    /// A worker that runs operations as `machine` (which must be hosted here).
    pub fn worker(&self, machine: MachineId) -> Result<Worker<F>> {
        if !self.shared.fabric.hosts(machine) {
            return Err(StoreError::NotHosted { machine });
        }
        Worker::new(Arc::clone(&self.shared), machine)
    }

    /// Looks `peer`'s regions up (through hosted machine `me`), failing as
    /// the fabric does while `peer` is unreachable or still starting, and
    /// checks that they are where every worker expects them: at the ids of
    /// `me`'s own (every store registers its regions in the same order).
    pub fn check_peer(&self, me: MachineId, peer: MachineId) -> Result<()> {
        let mut w = self.worker(me)?;
        let own = w.regions_of(me)?;
        let theirs = w.regions_of(peer)?;
        if theirs != own {
            return Err(StoreError::Config(format!(
                "machine {peer}'s regions are at ids {theirs:?}, machine {me}'s at {own:?}: \
                 every server must run the same Locus version"
            )));
        }
        Ok(())
    }

    /// `machine`'s location cache, if it is hosted here and caching is on.
    /// The monitor reads its access counts (Pragh 4.4).
    pub fn cache(&self, machine: MachineId) -> Option<&LocationCache> {
        self.shared.caches.get(machine as usize)?.as_ref()
    }

    /// The machine whose key table holds `v`'s keys (and runs its queries):
    /// its slot's owner, or its shard's machine under shard-based placement.
    pub fn owner(&self, v: VertexId) -> MachineId {
        match &self.shared.shard_map {
            None => self.shared.homes.owner(v),
            Some(m) => m.owner(v, 0),
        }
    }

    /// The slot table this store places homes by.
    pub fn homes(&self) -> &Arc<crate::homes::Homes> {
        &self.shared.homes
    }

    /// `machine`'s slot guards, if it is hosted here.
    pub(crate) fn guards(&self, machine: MachineId) -> Result<&Arc<crate::slotmove::Guards>> {
        self.shared
            .guards
            .get(machine as usize)
            .and_then(|g| g.as_ref())
            .ok_or(StoreError::NotHosted { machine })
    }

    /// The shard map, under shard-based placement.
    pub fn shard_map(&self) -> Option<&ShardMap> {
        self.shared.shard_map.as_ref()
    }

    /// `machine`'s on-demand table of tracked accesses (Pragh 4.4).
    pub fn tracker(&self, machine: MachineId) -> Option<&AccessTracker> {
        self.shared.trackers.get(machine as usize)
    }

    /// Memory use of each hosted machine.
    pub fn usage(&self) -> Vec<MachineUsage> {
        self.shared
            .allocs
            .iter()
            .enumerate()
            .filter_map(|(m, a)| {
                a.as_ref().map(|a| MachineUsage {
                    machine: m as MachineId,
                    key_region_bytes: self.shared.layout.region_bytes(),
                    value_live_bytes: a.live_bytes(),
                    value_used_bytes: a.used_bytes(),
                })
            })
            .collect()
    }

    /// Bytes of read-only replica blocks `machine` holds now (0 if it is not
    /// hosted or replicas are off): the memory replicas cost beyond the graph.
    pub fn replica_bytes(&self, machine: MachineId) -> u64 {
        self.shared
            .replica_sets
            .get(machine as usize)
            .and_then(|s| s.as_ref())
            .map_or(0, |s| s.bytes())
    }

    /// Retired value blocks of `machine` waiting out the reclaim lease (0 if not hosted).
    pub fn reclaim_backlog(&self, machine: MachineId) -> usize {
        self.shared
            .allocs
            .get(machine as usize)
            .and_then(|a| a.as_ref())
            .map_or(0, |a| a.retired_count())
    }

    /// Value-region bytes a vertex of `degree` neighbours occupies (all parts).
    pub fn value_bytes_for_degree(&self, degree: u64) -> u64 {
        let max = self.shared.config.part_neighbors_max as u64;
        let parts = degree.div_ceil(max).max(1);
        let mut bytes = 0;
        for p in 0..parts {
            let n = (degree - p * max).min(max);
            bytes += block_units(units_for_payload(PREFIX_BYTES + n as usize * 4)) * 8;
        }
        bytes
    }

    /// Checks before a bulk load that every machine's value region and key
    /// table can take the graph, so a load never fails half-way for lack of room.
    /// `degree(v)` gives each vertex's stored degree.
    pub fn check_capacity(&self, vertices: u64, degree: impl Fn(u64) -> u64) -> Result<()> {
        self.check_capacity_of((0..vertices).map(|v| (v as VertexId, degree(v))))
    }

    /// [`Store::check_capacity`] for the (vertex, degree) pairs of a graph
    /// whose ids need not be dense.
    pub fn check_capacity_of(&self, degrees: impl Iterator<Item = (VertexId, u64)>) -> Result<()> {
        let n = self.shared.machines;
        let mut bytes = vec![0u64; n];
        let mut keys = vec![0u64; n];
        let max = self.shared.config.part_neighbors_max as u64;
        for (v, d) in degrees {
            let m = self.owner(v) as usize;
            bytes[m] += self.value_bytes_for_degree(d);
            keys[m] += d.div_ceil(max).max(1);
        }
        let cap_bytes = self.shared.config.value_region_bytes - VALUE_BASE_UNITS * 8;
        // Keep a quarter of the table's slots free: hashing is not perfectly even.
        let cap_keys = self.shared.layout.capacity_keys() * 3 / 4;
        for m in 0..n {
            if bytes[m] > cap_bytes {
                return Err(StoreError::RegionFull {
                    machine: m as MachineId,
                    requested_bytes: bytes[m],
                    capacity_bytes: cap_bytes,
                    retired_bytes: 0,
                });
            }
            if keys[m] > cap_keys {
                return Err(StoreError::TableFull {
                    machine: m as MachineId,
                    capacity_keys: cap_keys,
                    overflow_buckets: self.shared.layout.overflow_buckets,
                });
            }
        }
        Ok(())
    }
}
