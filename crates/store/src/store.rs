//! The store handle, its settings, and the per-thread worker that runs operations.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use locus_fabric::{Completion, Fabric, MachineId, Output, Port, RegionId, WorkRequest};

use crate::addr::{units_for_payload, Addr, Header, LOCAL_SIZE_UNITS_MAX, REMOTE_SIZE_UNITS_MAX};
use crate::adjacency::{self, PartView, MORE, PREFIX_BYTES};
use crate::alloc::{block_units, ValueAllocator};
use crate::cache::{CacheConfig, LocationCache, REPLICA_POSITION};
use crate::forward::{self, Envelope, PartOp, PartReply, Reply, Request, VertexOp};
use crate::reclaim::{Appended, Collector, CollectorConfig, RingLayout};
use crate::replica::{Listed, ReplicaDirectory, ReplicaSet, DIRECTORY_ENTRIES_MAX};
use crate::shard::ShardMap;
use crate::table::{
    addr_word_offset, home_of, key_word_offset, link_offset, BucketView, Key, TableLayout,
    BUCKET_BYTES, KEY_SLOTS, MAGIC, OVERFLOW_USED_OFFSET,
};
use crate::track::{AccessTracker, TrackerView};
use crate::{Result, StoreError, VertexId};

/// Name of the key region on every machine.
pub const KEYS_REGION: &str = "keys";
/// Name of the value region on every machine.
pub const VALUES_REGION: &str = "values";
/// Units reserved at the start of the value region (offset 0 is never a value).
const VALUE_BASE_UNITS: u64 = 8;
/// Second-hop reads a pipelined traversal keeps in flight at most.
pub const PIPELINE_WINDOW: usize = 256;
/// Machines a part op follows its value through before giving up.
pub const FORWARD_HOPS_MAX: u32 = 64;
/// How long a forwarded request waits for its reply, by default.
pub const FORWARD_TIMEOUT_MS: u64 = 30_000;
/// Largest read buffer a worker keeps for reuse.
const SPARE_BYTES_MAX: usize = 4096;
/// Read buffers a worker keeps for reuse.
const SPARE_BUFFERS_MAX: usize = 1024;
/// Retries on invalidated values before a read gives up (live-lock guard).
pub const READ_RETRIES_MAX: u32 = 1_000_000;

/// Settings of the store; the same on every machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Main buckets of each machine's key table (a power of two).
    pub buckets_per_machine: u64,
    /// Overflow buckets of each machine's key table.
    pub overflow_buckets_per_machine: u64,
    /// Bytes of each machine's value region (reserved lazily).
    pub value_region_bytes: u64,
    /// Vertex decomposition: neighbours per key-value pair at most.
    pub part_neighbors_max: u32,
    /// Reclaim lease: a retired value's memory is reused only after this long (Pragh 4.1).
    pub reclaim_lease_ms: u64,
    /// How long a forwarded update waits for its reply before failing.
    pub forward_timeout_ms: u64,
    /// Location cache of each machine, in bytes (Pragh 4.2); 0 turns it off.
    pub cache_bytes_max: u64,
    /// Location cache lease: a cached address older than this is not used (at most the reclaim lease).
    pub cache_lease_ms: u64,
    /// Entries of each machine's reclaim ring (Pragh 4.1, footnote 5).
    pub reclaim_ring_entries: u64,
    /// Use the location cache to find addresses (Pragh 4.2). Off, the cache
    /// still counts accesses for the monitor but every lookup reads the
    /// key's bucket: Pragh's "Split" scheme (migration without the cache).
    pub cache_lookups: bool,
    /// A cached key accessed this many times in one monitoring interval is
    /// reported at once (Pragh 6.4: 100 accesses/s; 0: no instant reports).
    pub hot_accesses: u32,
    /// Shard-based placement (Pragh 2.3, the "Shard" baseline): shards per
    /// machine (Pragh: 100), consulted through a shard map on every access;
    /// 0 places keys by hash alone (`vertex % machines`), as Pragh does.
    pub shards_per_machine: u32,
    /// Read-only replicas of hot shared values ([`crate::replica`], a Locus
    /// extension): bytes of replica blocks each machine may hold; 0 turns
    /// replicas off (Pragh keeps one copy of every value).
    pub replica_bytes_max: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            buckets_per_machine: 1 << 12,
            overflow_buckets_per_machine: 1 << 10,
            value_region_bytes: 64 << 20,
            part_neighbors_max: 1 << 16,
            reclaim_lease_ms: 60_000,
            forward_timeout_ms: FORWARD_TIMEOUT_MS,
            cache_bytes_max: 128 << 20,
            cache_lease_ms: 60_000,
            reclaim_ring_entries: crate::reclaim::CAPACITY_DEFAULT,
            cache_lookups: true,
            hot_accesses: 100,
            shards_per_machine: 0,
            replica_bytes_max: 0,
        }
    }
}

impl StoreConfig {
    /// Settings sized for a graph of `vertices` vertices and `adjacency_entries`
    /// stored neighbour ids, spread over `machines` machines, with room for
    /// updates (the value regions are reserved lazily, so headroom is cheap).
    pub fn for_graph(
        vertices: u64,
        adjacency_entries: u64,
        machines: usize,
        part_neighbors_max: u32,
    ) -> Self {
        let machines = machines.max(1) as u64;
        let keys = vertices.div_ceil(machines)
            + adjacency_entries / part_neighbors_max.max(1) as u64 / machines
            + 64;
        // About 3.5 keys per 7-slot bucket on average.
        let buckets = (keys * 2 / KEY_SLOTS).max(64).next_power_of_two();
        let per_machine_values =
            vertices.div_ceil(machines) * 8 * 3 + adjacency_entries.div_ceil(machines) * 4;
        let value_region_bytes = (per_machine_values * 5 / 4 * 2 + (64 << 20)).next_multiple_of(8);
        StoreConfig {
            buckets_per_machine: buckets,
            overflow_buckets_per_machine: buckets / 4 + 64,
            value_region_bytes,
            part_neighbors_max,
            ..Self::default()
        }
    }

    /// Rejects settings that cannot work.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(StoreError::Config(m));
        if !self.buckets_per_machine.is_power_of_two() {
            return bad(format!(
                "buckets_per_machine = {} must be a power of two",
                self.buckets_per_machine
            ));
        }
        let key_region = self
            .buckets_per_machine
            .checked_add(self.overflow_buckets_per_machine)
            .and_then(|b| b.checked_mul(BUCKET_BYTES));
        if key_region.is_none_or(|b| b > locus_fabric::REGION_BYTES_MAX / 2) {
            return bad(format!(
                "buckets_per_machine + overflow_buckets_per_machine = {} + {} buckets of {BUCKET_BYTES} bytes exceed 64 GiB per machine",
                self.buckets_per_machine, self.overflow_buckets_per_machine
            ));
        }
        if !self.value_region_bytes.is_multiple_of(8)
            || self.value_region_bytes < VALUE_BASE_UNITS * 8 + 64
        {
            return bad(format!(
                "value_region_bytes = {} must be a multiple of 8 and at least 128",
                self.value_region_bytes
            ));
        }
        if self.value_region_bytes > locus_fabric::REGION_BYTES_MAX {
            return bad(format!(
                "value_region_bytes = {} exceeds the 128 GiB an address word can reach",
                self.value_region_bytes
            ));
        }
        let part_units = units_for_payload(PREFIX_BYTES + self.part_neighbors_max as usize * 4);
        if self.part_neighbors_max == 0 || part_units > REMOTE_SIZE_UNITS_MAX {
            return bad(format!(
                "part_neighbors_max = {} must be 1..={} so every part can migrate (32 MiB remote values, Pragh 4.1)",
                self.part_neighbors_max,
                ((REMOTE_SIZE_UNITS_MAX - 1) * 8 - PREFIX_BYTES as u64) / 4
            ));
        }
        if self.reclaim_lease_ms == 0 {
            return bad("reclaim_lease_ms must be positive".into());
        }
        if self.cache_bytes_max > 0 {
            self.cache_config().validate()?;
            self.cache_config()
                .check_against_reclaim(self.reclaim_lease_ms)?;
        }
        crate::reclaim::RingLayout::new(self.reclaim_ring_entries)?;
        if self.shards_per_machine > crate::shard::SHARDS_PER_MACHINE_MAX {
            return bad(format!(
                "shards_per_machine = {} exceeds {} (Pragh uses 100)",
                self.shards_per_machine,
                crate::shard::SHARDS_PER_MACHINE_MAX
            ));
        }
        if self.replica_bytes_max > 0 {
            if self.cache_bytes_max == 0 || !self.cache_lookups {
                return bad(format!(
                    "replica_bytes_max = {} needs the location cache (cache_bytes_max > 0 and cache_lookups): replicas are found through it",
                    self.replica_bytes_max
                ));
            }
            if self.shards_per_machine > 0 {
                return bad(
                    "replicas and shard-based placement do not go together (a shard move changes a key's home, which lists its replicas)".into(),
                );
            }
            if self.replica_bytes_max > self.value_region_bytes {
                return bad(format!(
                    "replica_bytes_max = {} exceeds value_region_bytes = {} (replicas live in the value region)",
                    self.replica_bytes_max, self.value_region_bytes
                ));
            }
        }
        Ok(())
    }

    fn cache_config(&self) -> CacheConfig {
        CacheConfig {
            bytes_max: self.cache_bytes_max,
            lease_ms: self.cache_lease_ms,
            hot_count: self.hot_accesses,
            ..CacheConfig::default()
        }
    }

    fn layout(&self) -> TableLayout {
        TableLayout {
            buckets: self.buckets_per_machine,
            overflow_buckets: self.overflow_buckets_per_machine,
        }
    }
}

struct Shared<F: Fabric> {
    fabric: F,
    config: StoreConfig,
    layout: TableLayout,
    machines: usize,
    /// (keys, values) region ids of each machine, looked up on first use.
    regions: Vec<OnceLock<(RegionId, RegionId)>>,
    /// Allocators of the machines this process hosts.
    allocs: Vec<Option<ValueAllocator>>,
    /// Per hosted machine, striped locks that serialise updates of one vertex
    /// on the machine holding it. A list spanning several parts cannot be
    /// changed atomically by CASes on separate keys; readers never lock.
    update_locks: Vec<Option<Box<[std::sync::Mutex<()>]>>>,
    /// Per hosted machine, the state of check-and-forward messaging.
    mail: Vec<Option<Mailroom>>,
    /// Per hosted machine, its location cache (Pragh 4.2).
    caches: Vec<Option<LocationCache>>,
    /// Per machine, the on-demand table of tracked local accesses (Pragh 4.4).
    trackers: Vec<AccessTracker>,
    /// Shard-based placement, if configured.
    shard_map: Option<ShardMap>,
    /// Per hosted machine, the collector of its reclaim ring (opened on first use).
    collectors: Vec<Option<std::sync::Mutex<Option<Collector>>>>,
    /// Every machine's reclaim ring, looked up on first use.
    rings: Vec<OnceLock<(RegionId, RingLayout)>>,
    /// Per hosted machine, the replicas it holds (if replicas are on).
    replica_sets: Vec<Option<ReplicaSet>>,
    /// Per hosted machine, the replicas of the vertices homed there.
    directories: Vec<Option<ReplicaDirectory>>,
    /// Per hosted machine, its service thread, woken when a request is sent
    /// to it (an idle service parks instead of polling).
    wakers: Vec<std::sync::Mutex<Option<std::thread::Thread>>>,
}

/// One machine's forwarding state, shared by every worker acting as it
/// (they share the machine's inbox, so a reply may be read by any of them).
#[derive(Default)]
struct Mailroom {
    next_id: std::sync::atomic::AtomicU64,
    replies: std::sync::Mutex<std::collections::HashMap<u64, Reply>>,
    /// Vertex ops read by a worker that was only waiting for a reply; the
    /// machine's service runs them.
    deferred: std::sync::Mutex<std::collections::VecDeque<(MachineId, u64, Request)>>,
}

/// Update lock stripes per machine.
const UPDATE_LOCK_STRIPES: usize = 1024;

impl<F: Fabric> Shared<F> {
    /// Wakes `machine`'s service thread if this process runs it and it parked.
    fn wake(&self, machine: MachineId) {
        if let Some(t) = self.wakers[machine as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// Tries to take the update lock of `v` on `machine`. Never blocks: the
    /// caller spins with `Port::relax`, which the simulated fabric turns into a
    /// scheduling point (a blocking lock held across fabric operations would
    /// stall a simulation).
    #[allow(clippy::type_complexity)]
    fn try_update_lock(
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
    shared: Arc<Shared<F>>,
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
                wakers: (0..machines).map(|_| std::sync::Mutex::new(None)).collect(),
                allocs,
                config,
            }),
        })
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

    /// A worker that runs operations as `machine` (which must be hosted here).
    pub fn worker(&self, machine: MachineId) -> Result<Worker<F>> {
        if !self.shared.fabric.hosts(machine) {
            return Err(StoreError::NotHosted { machine });
        }
        let port = self.shared.fabric.port(machine)?;
        let mut w = Worker {
            shared: Arc::clone(&self.shared),
            port,
            machine,
            regions: Vec::with_capacity(self.shared.machines),
            bucket: vec![0; BUCKET_BYTES as usize],
            value: Vec::new(),
            encode: Vec::new(),
            scratch: Vec::new(),
            completions: Vec::new(),
            spare: Vec::new(),
            reclaim_queue: Vec::new(),
            tracker: TrackerView::default(),
            query_now_ns: None,
            stats: WorkerStats::default(),
        };
        for m in 0..self.shared.machines {
            let r = w.regions_of(m as MachineId)?;
            w.regions.push(r);
        }
        Ok(w)
    }

    /// `machine`'s location cache, if it is hosted here and caching is on.
    /// The monitor reads its access counts (Pragh 4.4).
    pub fn cache(&self, machine: MachineId) -> Option<&LocationCache> {
        self.shared.caches.get(machine as usize)?.as_ref()
    }

    /// The machine whose key table holds `v`'s keys (and runs its queries):
    /// `v % machines`, or its shard's machine under shard-based placement.
    pub fn owner(&self, v: VertexId) -> MachineId {
        match &self.shared.shard_map {
            None => home_of(v, self.shared.machines),
            Some(m) => m.owner(v, 0),
        }
    }

    /// The shard map, under shard-based placement.
    pub fn shard_map(&self) -> Option<&ShardMap> {
        self.shared.shard_map.as_ref()
    }

    /// Moves whole shards (the shard-based baseline, Pragh 2.3): for each
    /// `(shard, from, to)`, a worker acting as `to` scans `from`'s key table
    /// with large READs, copies every key of the shard and its value into its
    /// own table and value region, and then every machine's shard map names
    /// `to`; the old blocks go to their holders' reclaim rings. The stale key
    /// slots at `from` are unreachable (no map names `from` for the shard) and
    /// are reused if the shard comes back.
    ///
    /// Stop-the-world: no other operation may run on the cluster meanwhile,
    /// and the machines' services must be running (they drain the reclaim
    /// rings). Returns (keys moved, bytes moved: values plus 16-byte slots).
    pub fn move_shards(&self, moves: &[(u32, MachineId, MachineId)]) -> Result<(u64, u64)> {
        let map = self.shared.shard_map.as_ref().ok_or_else(|| {
            StoreError::Config(
                "move_shards needs shard-based placement (shards_per_machine > 0)".into(),
            )
        })?;
        let mut sources: Vec<MachineId> = moves.iter().map(|m| m.1).collect();
        sources.sort_unstable();
        sources.dedup();
        let (mut keys_moved, mut bytes_moved) = (0u64, 0u64);
        for from in sources {
            let mine: Vec<(u32, MachineId)> = moves
                .iter()
                .filter(|m| m.1 == from)
                .map(|m| (m.0, m.2))
                .collect();
            for &(shard, _) in &mine {
                if map.owner_of_shard(shard) != from {
                    return Err(StoreError::Config(format!(
                        "shard {shard} is on machine {}, not {from}",
                        map.owner_of_shard(shard)
                    )));
                }
            }
            let mut scanner = self.worker(mine[0].1)?;
            let entries = scanner.scan_table(from)?;
            for (shard, to) in mine {
                let mut w = self.worker(to)?;
                for &(key, word) in entries
                    .iter()
                    .filter(|(k, _)| map.shard_of(k.vertex()) == shard)
                {
                    bytes_moved += w.copy_key_here(key, word, from)?;
                    keys_moved += 1;
                    if w.reclaim_queue.len() >= 4096 {
                        w.flush_reclaims()?;
                    }
                }
                w.flush_reclaims()?;
                map.set(shard, to);
            }
        }
        Ok((keys_moved, bytes_moved))
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
        let n = self.shared.machines;
        let mut bytes = vec![0u64; n];
        let mut keys = vec![0u64; n];
        let max = self.shared.config.part_neighbors_max as u64;
        for v in 0..vertices {
            let d = degree(v);
            let m = home_of(v as VertexId, n) as usize;
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

/// Service threads, one per hosted machine, that answer forwarded updates
/// and collect garbage. Stopped and joined on drop.
pub struct Services {
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

/// Idle rounds a service spins (yielding) before it starts sleeping.
const SERVICE_SPINS_MAX: u32 = 64;
/// How long an idle service parks between looks at its inbox (a forwarded
/// request wakes it at once).
const SERVICE_IDLE_SLEEP_US: u64 = 200;

impl Services {
    /// The first error a service thread stopped on, if any.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<F: Fabric> Store<F> {
    /// Starts one service thread per machine this process hosts. Updates
    /// forwarded to a machine (check-and-forward) complete only while some
    /// thread serves it; with services running, any worker may update any vertex.
    pub fn spawn_services(&self) -> Result<Services> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let failure = Arc::new(std::sync::Mutex::new(None));
        let mut threads = Vec::new();
        for m in 0..self.shared.machines {
            let m = m as MachineId;
            if !self.shared.fabric.hosts(m) {
                continue;
            }
            let mut w = self.worker(m)?;
            let (stop, failure) = (Arc::clone(&stop), Arc::clone(&failure));
            let shared = Arc::clone(&self.shared);
            let t = std::thread::Builder::new()
                .name(format!("locus-service-{m}"))
                .spawn(move || {
                    *shared.wakers[m as usize]
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
                    let mut idle = 0u32;
                    while !stop.load(std::sync::atomic::Ordering::Acquire) {
                        match w.serve() {
                            Ok(0) => {
                                idle = idle.saturating_add(1);
                                if idle < SERVICE_SPINS_MAX {
                                    std::thread::yield_now();
                                } else {
                                    if idle.is_multiple_of(64) {
                                        if let Err(e) = w.collect_garbage() {
                                            failure
                                                .lock()
                                                .unwrap_or_else(|p| p.into_inner())
                                                .get_or_insert(format!(
                                                    "garbage collection on machine {m}: {e}"
                                                ));
                                            return;
                                        }
                                    }
                                    // A request sent here unparks us (`Shared::wake`);
                                    // the timeout bounds the wait for anything else.
                                    std::thread::park_timeout(Duration::from_micros(
                                        SERVICE_IDLE_SLEEP_US,
                                    ));
                                }
                            }
                            Ok(_) => idle = 0,
                            Err(e) => {
                                failure
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .get_or_insert(format!("service of machine {m}: {e}"));
                                return;
                            }
                        }
                    }
                })
                .map_err(|e| StoreError::Config(format!("cannot start a service thread: {e}")))?;
            threads.push(t);
        }
        Ok(Services {
            stop,
            threads,
            failure,
        })
    }
}

/// What a worker has done (for reports; never read on hot paths by others).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Values read.
    pub values_read: u64,
    /// Reads that found an invalidated value and looked the key up again.
    pub invalid_retries: u64,
    /// Address-word CASes lost to a concurrent update.
    pub cas_conflicts: u64,
    /// Overflow buckets followed.
    pub overflow_hops: u64,
    /// Requests forwarded to another machine (check-and-forward).
    pub forwarded: u64,
    /// Values migrated here.
    pub migrated: u64,
    /// Migrations that lost their CAS and retried.
    pub migrate_conflicts: u64,
    /// Times a full reclaim ring made a migration wait.
    pub reclaim_waits: u64,
    /// Reads served by a replica held here ([`crate::replica`]).
    pub replica_reads: u64,
    /// Replicas this worker made and had listed.
    pub replicas_created: u64,
    /// Replicas invalidated by updates this worker coordinated (as a home).
    pub replica_invalidations: u64,
}

/// A step of a pipelined migration ([`Worker::migrate_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MigrateStage {
    Bucket,
    Value,
    Invalidate,
    Publish,
}

/// One key's pipelined migration.
#[derive(Debug, Clone)]
struct MigrateJob {
    index: usize,
    key: Key,
    stage: MigrateStage,
    home: MachineId,
    addr_offset: u64,
    addr_word: u64,
    addr: Option<Addr>,
    holder: MachineId,
    new_addr: Option<Addr>,
    /// When the publishing CAS was posted: the cache entry for the new
    /// address is stamped with it (its lease counts from before the CAS).
    cas_ns: u64,
    /// Whether `addr_word` came from the location cache (drop it if stale).
    from_cache: bool,
    result: Option<Migration>,
}

impl MigrateJob {
    fn new(index: usize, key: Key) -> Self {
        MigrateJob {
            index,
            key,
            stage: MigrateStage::Bucket,
            home: 0,
            addr_offset: 0,
            addr_word: 0,
            addr: None,
            holder: 0,
            new_addr: None,
            cas_ns: 0,
            from_cache: false,
            result: None,
        }
    }
}

/// What [`Worker::migrate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migration {
    /// The value moved here from `from`.
    Moved {
        /// The previous holder.
        from: MachineId,
        /// Bytes copied (header included).
        bytes: u64,
    },
    /// The value was here already.
    AlreadyHere,
    /// The key has no value.
    Absent,
}

/// Where a key's slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    home: MachineId,
    /// Byte offset of the key's address word in the home's key region.
    addr_offset: u64,
    /// The address word as read (or as cached).
    addr_word: u64,
    /// Whether `addr_word` came from the location cache.
    cached: bool,
    /// Whether `addr_word` is this machine's replica of the value ([`crate::replica`]).
    replica: bool,
}

/// One thread's handle acting as one machine.
pub struct Worker<F: Fabric> {
    shared: Arc<Shared<F>>,
    port: F::Port,
    machine: MachineId,
    regions: Vec<(RegionId, RegionId)>,
    bucket: Vec<u8>,
    value: Vec<u8>,
    encode: Vec<u8>,
    scratch: Vec<u32>,
    completions: Vec<Completion>,
    /// Read buffers handed back by completions, reused by later posts.
    spare: Vec<Vec<u8>>,
    /// Retired blocks (holder, entry) waiting to be appended to their
    /// holder's reclaim ring in bulk ([`Worker::flush_reclaims`]).
    reclaim_queue: Vec<(MachineId, u64)>,
    /// This machine's tracked-key set as last seen (Pragh 4.4, on demand).
    tracker: TrackerView,
    /// The clock as read when the current query started: a query's cache
    /// lookups check leases against it instead of reading the clock per GET.
    /// It only makes an entry look younger by the query's duration, which
    /// is the "reader stalls for a lease" risk every lookup already takes
    /// between its clock read and its READ (invariant P3).
    query_now_ns: Option<u64>,
    /// Counts of what this worker did.
    pub stats: WorkerStats,
}

/// What a read-modify-write step decides.
enum Change {
    /// Leave the value as it is.
    Keep,
    /// Replace it with the part in `Worker::encode`.
    Replace,
}

impl<F: Fabric> Worker<F> {
    /// The machine this worker acts as.
    pub fn machine(&self) -> MachineId {
        self.machine
    }

    fn regions_of(&mut self, m: MachineId) -> Result<(RegionId, RegionId)> {
        if let Some(r) = self.shared.regions[m as usize].get() {
            return Ok(*r);
        }
        let k = self.shared.fabric.lookup(m, KEYS_REGION)?.id;
        let v = self.shared.fabric.lookup(m, VALUES_REGION)?.id;
        Ok(*self.shared.regions[m as usize].get_or_init(|| (k, v)))
    }

    #[inline]
    fn keys_region(&self, m: MachineId) -> RegionId {
        self.regions[m as usize].0
    }

    #[inline]
    fn values_region(&self, m: MachineId) -> RegionId {
        self.regions[m as usize].1
    }

    /// The machine whose key table holds `key`: its hash home, or with
    /// shard-based placement the machine this worker's shard map names.
    #[inline]
    fn home(&self, key: Key) -> MachineId {
        self.vertex_home(key.vertex())
    }

    #[inline]
    fn vertex_home(&self, v: VertexId) -> MachineId {
        match &self.shared.shard_map {
            None => home_of(v, self.shared.machines),
            Some(m) => m.owner(v, self.machine),
        }
    }

    /// Finds a key's slot (LOOKUP in Pragh Fig. 8): reads whole buckets along its chain.
    fn lookup(&mut self, key: Key) -> Result<Option<Slot>> {
        let home = self.home(key);
        let layout = self.shared.layout;
        let mut off = layout.bucket_offset(layout.bucket_of(key));
        let kr = self.keys_region(home);
        loop {
            self.port.read(home, kr, off, &mut self.bucket)?;
            let view = BucketView::parse(&self.bucket);
            for (i, &(kw, aw)) in view.slots.iter().enumerate() {
                if kw == key.word() {
                    return Ok(Some(Slot {
                        home,
                        addr_offset: addr_word_offset(off, i as u64),
                        addr_word: aw,
                        cached: false,
                        replica: false,
                    }));
                }
                if kw == 0 {
                    return Ok(None);
                }
            }
            if view.link == 0 {
                return Ok(None);
            }
            self.stats.overflow_hops += 1;
            off = layout.overflow_offset(view.link - 1);
        }
    }

    /// Finds a key's slot, claiming the first empty one on its chain if absent.
    fn find_or_claim(&mut self, key: Key) -> Result<Slot> {
        self.find_or_claim_at(key, self.home(key))
    }

    /// [`Worker::find_or_claim`] in machine `home`'s key table.
    fn find_or_claim_at(&mut self, key: Key, home: MachineId) -> Result<Slot> {
        let layout = self.shared.layout;
        let kr = self.keys_region(home);
        let mut off = layout.bucket_offset(layout.bucket_of(key));
        loop {
            self.port.read(home, kr, off, &mut self.bucket)?;
            let view = BucketView::parse(&self.bucket);
            for (i, &(kw, aw)) in view.slots.iter().enumerate() {
                let i = i as u64;
                let found = |addr_word| Slot {
                    home,
                    addr_offset: addr_word_offset(off, i),
                    addr_word,
                    cached: false,
                    replica: false,
                };
                if kw == key.word() {
                    return Ok(found(aw));
                }
                if kw == 0 {
                    let prev = self
                        .port
                        .cas(home, kr, key_word_offset(off, i), 0, key.word())?;
                    if prev == 0 {
                        return Ok(found(0));
                    }
                    if prev == key.word() {
                        let aw = self.port.read_word(home, kr, addr_word_offset(off, i))?;
                        return Ok(found(aw));
                    }
                    // Another key took the slot; slots fill in order, go on.
                }
            }
            let link = if view.link != 0 {
                view.link
            } else {
                let idx = self.port.fetch_add(home, kr, OVERFLOW_USED_OFFSET, 1)?;
                if idx >= layout.overflow_buckets {
                    // Another inserter may have linked a bucket since we read this one.
                    let link = self.port.read_word(home, kr, link_offset(off))?;
                    if link == 0 {
                        return Err(StoreError::TableFull {
                            machine: home,
                            capacity_keys: layout.capacity_keys(),
                            overflow_buckets: layout.overflow_buckets,
                        });
                    }
                    link
                } else {
                    let prev = self.port.cas(home, kr, link_offset(off), 0, idx + 1)?;
                    if prev == 0 {
                        idx + 1
                    } else {
                        prev
                    }
                }
            };
            self.stats.overflow_hops += 1;
            off = layout.overflow_offset(link - 1);
        }
    }

    /// Reads a key's value into `self.value` (GET in Pragh Fig. 8, without the
    /// location cache): returns the slot whose address matched a valid header,
    /// or `None` if the key has no published value.
    fn read_value(&mut self, key: Key) -> Result<Option<(Slot, Addr)>> {
        self.read_value_from(key, false)
    }

    /// [`Worker::read_value`] for queries: with `replica_ok`, a replica of the
    /// value held here may serve it ([`crate::replica`]).
    fn read_value_from(&mut self, key: Key, replica_ok: bool) -> Result<Option<(Slot, Addr)>> {
        let mut retries = 0;
        loop {
            let Some(slot) = self.locate(key, replica_ok)? else {
                return Ok(None);
            };
            let Some(addr) = Addr::decode(slot.addr_word) else {
                return Ok(None);
            };
            if self.fetch(slot.home, addr)? {
                self.note_access(key, &slot, addr);
                return Ok(Some((slot, addr)));
            }
            // Invalidated (updated or migrated, Pragh Fig. 8 lines 15-18): drop
            // a cached address and look the key up again.
            if slot.replica {
                self.drop_replica(key, slot.addr_word, addr);
            } else if slot.cached {
                if let Some(c) = self.cache() {
                    c.remove_if(key, slot.addr_word);
                }
            }
            self.stats.invalid_retries += 1;
            retries += 1;
            if retries >= READ_RETRIES_MAX {
                return Err(StoreError::Contention {
                    key: key.0,
                    retries,
                });
            }
        }
    }

    /// Counts a successful read of `key` for the monitor (Pragh 4.4): in the
    /// on-demand table if the key is tracked, and in the location cache when
    /// the cache did not see it (a key homed here whose value is elsewhere,
    /// or any remote key when the cache is not used for lookups).
    #[inline]
    fn note_access(&mut self, key: Key, slot: &Slot, addr: Addr) {
        self.shared.trackers[self.machine as usize].refresh(&mut self.tracker);
        if !self.tracker.tracked().is_empty() {
            self.tracker.tracked().note(key);
        }
        if slot.cached {
            return;
        }
        let home_here = slot.home == self.machine;
        let record = if home_here {
            addr.holder(slot.home) != self.machine
        } else {
            !self.shared.config.cache_lookups
        };
        if record {
            let now = self.port.now_ns();
            if let Some(c) = self.cache() {
                c.record(key, slot.addr_word, now);
            }
        }
    }

    /// The time a cache lookup checks leases against: the query's start if
    /// one is running ([`Worker::two_hop`]), else now.
    #[inline]
    fn lookup_now_ns(&self) -> u64 {
        self.query_now_ns.unwrap_or_else(|| self.port.now_ns())
    }

    /// This machine's location cache, unless caching is off (`cache_bytes_max = 0`).
    fn cache(&self) -> Option<&LocationCache> {
        self.shared.caches[self.machine as usize].as_ref()
    }

    /// LOOKUP with the location cache (Pragh Fig. 8 lines 19-27): a key homed
    /// here is read from the local table; another machine's key is taken from
    /// the cache if its entry is younger than the cache lease, else read
    /// remotely and cached with the position of its address word (keys never
    /// move), so a CAS needs no lookup READ either (Pragh 5, first optimization).
    fn locate(&mut self, key: Key, replica_ok: bool) -> Result<Option<Slot>> {
        let home = self.home(key);
        let replicas = replica_ok && self.shared.config.replica_bytes_max > 0;
        if home == self.machine || !self.shared.config.cache_lookups {
            let slot = self.lookup(key)?;
            // A key homed here whose value is away may have a replica here.
            if replicas {
                if let Some(s) = &slot {
                    if Addr::decode(s.addr_word).is_some_and(|a| a.holder(home) != self.machine) {
                        let now = self.lookup_now_ns();
                        let hit = self.cache().and_then(|c| c.get_for_read(key, now));
                        if let Some((word, REPLICA_POSITION)) = hit {
                            self.stats.replica_reads += 1;
                            return Ok(Some(Slot {
                                addr_word: word,
                                cached: true,
                                replica: true,
                                ..*s
                            }));
                        }
                    }
                }
            }
            return Ok(slot);
        }
        let now = self.lookup_now_ns();
        let hit = self.cache().and_then(|c| {
            if replicas {
                c.get_for_read(key, now)
            } else {
                c.get_with_position(key, now)
            }
        });
        if let Some((addr_word, addr_offset)) = hit.filter(|h| h.1 != u64::MAX) {
            let replica = addr_offset == REPLICA_POSITION;
            if replica {
                self.stats.replica_reads += 1;
            }
            return Ok(Some(Slot {
                home,
                // A replica slot is only read, never CASed: the position is unused.
                addr_offset,
                addr_word,
                cached: true,
                replica,
            }));
        }
        self.locate_fresh(key)
    }

    /// LOOKUP that reads the key's bucket (and refreshes the cache).
    fn locate_fresh(&mut self, key: Key) -> Result<Option<Slot>> {
        // Stamp the cache entry with the time *before* the READ: the address
        // may have been retired just after we read it, and its lease started then.
        let now = self.port.now_ns();
        let slot = self.lookup(key)?;
        if let Some(s) = &slot {
            if s.addr_word != 0 {
                self.remember_at(key, s.addr_word, s.addr_offset, now);
            }
        }
        Ok(slot)
    }

    /// Caches a key's address word, for keys homed elsewhere, stamped `now`
    /// (a time before the READ or CAS that made the address current).
    fn remember_at(&mut self, key: Key, addr_word: u64, addr_offset: u64, now: u64) {
        if self.home(key) != self.machine {
            if let Some(c) = self.cache() {
                c.insert_at(key, addr_word, addr_offset, now);
            }
        }
    }

    /// Reads the value at `addr` into `self.value`; false if its header does not match.
    fn fetch(&mut self, home: MachineId, addr: Addr) -> Result<bool> {
        let holder = addr.holder(home);
        let bytes = (addr.size_units() * 8) as usize;
        self.value.resize(bytes, 0);
        let vr = self.values_region(holder);
        self.port
            .read(holder, vr, addr.offset_units() * 8, &mut self.value)?;
        self.stats.values_read += 1;
        let header = Header::decode(u64::from_le_bytes(
            self.value[..8].try_into().expect("8 bytes"),
        ));
        Ok(header.matches(addr) && PartView::parse(self.payload(header)).is_some())
    }

    fn payload(&self, header: Header) -> &[u8] {
        &self.value[8..8 + header.payload_bytes as usize]
    }

    fn current_part(&self) -> PartView<'_> {
        let header = Header::decode(u64::from_le_bytes(
            self.value[..8].try_into().expect("8 bytes"),
        ));
        PartView::parse(self.payload(header)).expect("checked in fetch")
    }

    /// Appends up to `k` neighbours of `v` to `out` (all of them for `usize::MAX`).
    /// Returns false if the vertex does not exist.
    pub fn neighbors(&mut self, v: VertexId, k: usize, out: &mut Vec<VertexId>) -> Result<bool> {
        let start = out.len();
        let mut part = 0;
        loop {
            if self.read_value_from(Key::part(v, part), true)?.is_none() {
                debug_assert!(part == 0, "a MORE flag points at a missing part");
                return Ok(part > 0);
            }
            let view = self.current_part();
            let want = k - (out.len() - start);
            view.extend_into(want, out);
            if out.len() - start >= k || !view.more() {
                return Ok(true);
            }
            part += 1;
        }
    }

    /// All neighbours of `v`, or `None` if it does not exist.
    pub fn get(&mut self, v: VertexId) -> Result<Option<Vec<VertexId>>> {
        let mut out = Vec::new();
        Ok(self.neighbors(v, usize::MAX, &mut out)?.then_some(out))
    }

    /// Two-hop query (Pragh 6): up to `k` neighbours of `v`, then up to `k`
    /// neighbours of each of those, one synchronous GET at a time as in Pragh
    /// Fig. 8. Appends the second hop to `out`; returns vertices visited.
    pub fn two_hop(&mut self, v: VertexId, k: usize, out: &mut Vec<VertexId>) -> Result<usize> {
        let mut first = std::mem::take(&mut self.scratch);
        first.clear();
        self.query_now_ns = Some(self.port.now_ns());
        let r = (|| {
            self.neighbors(v, k, &mut first)?;
            for &u in &first {
                self.neighbors(u, k, out)?;
            }
            Ok(1 + first.len())
        })();
        self.query_now_ns = None;
        self.scratch = first;
        r
    }

    /// Two-hop query with the second hop pipelined: the buckets of all
    /// first-hop vertices are read with one batch of posted READs, then their
    /// values with another. Vertices that need more (overflow chains, several
    /// parts, invalidated values) fall back to the synchronous path. Same
    /// result as [`Worker::two_hop`].
    pub fn two_hop_pipelined(
        &mut self,
        v: VertexId,
        k: usize,
        out: &mut Vec<VertexId>,
    ) -> Result<usize> {
        let mut first = std::mem::take(&mut self.scratch);
        first.clear();
        let r = self.two_hop_pipelined_inner(v, k, &mut first, out);
        self.scratch = first;
        r
    }

    fn two_hop_pipelined_inner(
        &mut self,
        v: VertexId,
        k: usize,
        first: &mut Vec<VertexId>,
        out: &mut Vec<VertexId>,
    ) -> Result<usize> {
        self.neighbors(v, k, first)?;
        for batch in first.chunks(PIPELINE_WINDOW) {
            if let Err(e) = self.second_hop_batch(batch, k, out) {
                // Leave the port empty: a later call must not meet stale completions.
                self.drain_all();
                return Err(e);
            }
        }
        Ok(1 + first.len())
    }

    /// Second hop for up to [`PIPELINE_WINDOW`] vertices: their buckets with
    /// one batch of posted READs, then their values with another.
    fn second_hop_batch(
        &mut self,
        batch: &[VertexId],
        k: usize,
        out: &mut Vec<VertexId>,
    ) -> Result<()> {
        let n = batch.len();
        let layout = self.shared.layout;
        for (i, &u) in batch.iter().enumerate() {
            let key = Key::part(u, 0);
            let home = self.home(key);
            let kr = self.keys_region(home);
            let off = layout.bucket_offset(layout.bucket_of(key));
            let buf = self.buffer(BUCKET_BYTES as usize);
            self.port
                .post(WorkRequest::read_into(i as u64, home, kr, off, buf))?;
        }
        let mut addrs: Vec<Option<Addr>> = vec![None; n];
        let mut fallback = vec![false; n];
        self.drain(n)?;
        for c in std::mem::take(&mut self.completions) {
            let i = c.id as usize;
            debug_assert!(i < n, "a completion this batch did not post");
            let Output::Data(bytes) = c.result? else {
                unreachable!("a READ completes with data")
            };
            if i >= n {
                continue;
            }
            let view = BucketView::parse(&bytes);
            self.keep(bytes);
            let key = Key::part(batch[i], 0);
            match view.slots.iter().find(|s| s.0 == key.word() || s.0 == 0) {
                Some(&(kw, aw)) if kw == key.word() => addrs[i] = Addr::decode(aw),
                Some(_) => {}
                None => fallback[i] = view.link != 0,
            }
        }
        let mut posted = 0;
        for i in 0..n {
            if let Some(a) = addrs[i] {
                let home = self.home(Key::part(batch[i], 0));
                let holder = a.holder(home);
                let vr = self.values_region(holder);
                let buf = self.buffer((a.size_units() * 8) as usize);
                self.port.post(WorkRequest::read_into(
                    i as u64,
                    holder,
                    vr,
                    a.offset_units() * 8,
                    buf,
                ))?;
                posted += 1;
            }
        }
        self.drain(posted)?;
        let mut values: Vec<Option<Vec<u8>>> = vec![None; n];
        for c in std::mem::take(&mut self.completions) {
            let Output::Data(bytes) = c.result? else {
                unreachable!("a READ completes with data")
            };
            if let Some(slot) = values.get_mut(c.id as usize) {
                *slot = Some(bytes);
            }
        }
        self.stats.values_read += posted as u64;
        for i in 0..n {
            let done = match (&values[i], addrs[i]) {
                (Some(bytes), Some(a)) => {
                    let header =
                        Header::decode(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")));
                    // Check the header before trusting its length (an invalidated
                    // value's header is zero; `matches` bounds the payload).
                    let view = if header.matches(a) {
                        PartView::parse(&bytes[8..8 + header.payload_bytes as usize])
                    } else {
                        None
                    };
                    match view {
                        Some(view) if !view.more() || view.len() >= k => {
                            view.extend_into(k, out);
                            true
                        }
                        _ => false,
                    }
                }
                _ => !fallback[i] && addrs[i].is_none(),
            };
            if let Some(b) = values[i].take() {
                self.keep(b);
            }
            if !done {
                self.neighbors(batch[i], k, out)?;
            }
        }
        Ok(())
    }

    /// A buffer of `len` bytes, reusing one handed back by an earlier completion.
    fn buffer(&mut self, len: usize) -> Vec<u8> {
        match self.spare.pop() {
            Some(mut b) if b.capacity() >= len => {
                b.resize(len, 0);
                b
            }
            _ => vec![0; len],
        }
    }

    /// Keeps a buffer for reuse unless it is large (large reads are rare and
    /// would pin memory) or enough are kept already.
    fn keep(&mut self, b: Vec<u8>) {
        if b.capacity() <= SPARE_BYTES_MAX && self.spare.len() < SPARE_BUFFERS_MAX {
            self.spare.push(b);
        }
    }

    /// Waits out everything in flight, dropping the completions.
    fn drain_all(&mut self) {
        let mut sink = Vec::new();
        while self.port.inflight() > 0 {
            sink.clear();
            match self.port.wait(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        self.completions.clear();
    }

    fn drain(&mut self, n: usize) -> Result<()> {
        self.completions.clear();
        while self.completions.len() < n {
            self.port.wait(&mut self.completions)?;
        }
        Ok(())
    }

    /// Read-modify-write of one key (PUT in Pragh Fig. 9): reads the current
    /// part, lets `decide` look at it (`None`: no value yet) and fill
    /// `self.encode`, writes the new value out of place, CASes the address
    /// word, then invalidates and retires the old value. Retries on a lost
    /// CAS. Returns false if `decide` asked for a restart.
    fn rmw(
        &mut self,
        key: Key,
        mut decide: impl FnMut(Option<PartView<'_>>, &mut Vec<u8>) -> Change,
    ) -> Result<bool> {
        loop {
            let (slot, old) = match self.read_value(key)? {
                Some((slot, addr)) => (slot, Some(addr)),
                None => {
                    // A new key's value starts at its home: refuse elsewhere
                    // before claiming a slot that would then stay empty.
                    let home = self.home(key);
                    if home != self.machine {
                        return Err(StoreError::NotHolder {
                            vertex: key.vertex(),
                            holder: home,
                            this: self.machine,
                        });
                    }
                    (self.find_or_claim(key)?, None)
                }
            };
            let old = match (old, Addr::decode(slot.addr_word)) {
                (None, Some(_)) => continue, // published meanwhile: read it
                (o, _) => o,
            };
            let holder = old.map_or(slot.home, |a| a.holder(slot.home));
            if holder != self.machine {
                return Err(StoreError::NotHolder {
                    vertex: key.vertex(),
                    holder,
                    this: self.machine,
                });
            }
            let mut encode = std::mem::take(&mut self.encode);
            let change = {
                let view = old.map(|_| self.current_part());
                decide(view, &mut encode)
            };
            let r = match change {
                Change::Keep => Ok(Some(true)),
                Change::Replace => self.publish(key, slot, old, &encode),
            };
            self.encode = encode;
            match r? {
                Some(done) => return Ok(done),
                None => {
                    self.stats.cas_conflicts += 1;
                    continue;
                }
            }
        }
    }

    /// Writes `payload` as a new value here and CASes it into `slot`.
    /// `Some(true)` on success, `None` if the CAS lost.
    fn publish(
        &mut self,
        key: Key,
        slot: Slot,
        old: Option<Addr>,
        payload: &[u8],
    ) -> Result<Option<bool>> {
        let header = Header::for_payload(payload.len())?;
        let size_units = header.size_units as u64;
        let me = self.machine;
        let new_addr_probe = Addr::at(slot.home, me, size_units, 0)?;
        debug_assert!(size_units <= LOCAL_SIZE_UNITS_MAX);
        let alloc = self.shared.allocs[me as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted { machine: me })?;
        let offset_units = alloc.alloc(size_units, self.port.now_ns())?;
        let new_addr = match new_addr_probe {
            Addr::Local { .. } => Addr::local(size_units, offset_units)?,
            Addr::Remote { .. } => Addr::remote(me, size_units, offset_units)?,
        };
        let vr = self.values_region(me);
        let mut bytes = std::mem::take(&mut self.value);
        bytes.clear();
        bytes.extend_from_slice(&header.encode().to_le_bytes());
        bytes.extend_from_slice(payload);
        bytes.resize((size_units * 8) as usize, 0);
        let w = self.port.write(me, vr, offset_units * 8, &bytes);
        self.value = bytes;
        if let Err(e) = w {
            alloc.free_now(offset_units, size_units);
            return Err(e.into());
        }
        // Invalidate the old value *before* publishing the new one (a
        // deliberate change of Fig. 9's order, see the protocol notes in
        // ARCHITECTURE.md): a reader holding the old address, even a cached
        // one, then either finds the old header zeroed and looks again, or read
        // before this point, when the old value was still current. So reads
        // stay linearizable with location caches. The old value is ours.
        if let Some(old) = old {
            debug_assert_eq!(old.holder(slot.home), me);
            self.port.write_word(me, vr, old.offset_units() * 8, 0)?;
        }
        let kr = self.keys_region(slot.home);
        // If this CAS fails with a peer error it may still have been applied
        // (fabric guarantee 8): the new block then stays allocated, never freed
        // twice, and the old one is not retired (a bounded leak, not a wrong answer).
        let prev = self.port.cas(
            slot.home,
            kr,
            slot.addr_offset,
            slot.addr_word,
            new_addr.encode(),
        )?;
        if prev != slot.addr_word {
            // The cached word (if any) is stale: drop it so the retry looks again.
            if slot.cached {
                if let Some(c) = self.cache() {
                    c.remove_if(key, slot.addr_word);
                }
            }
            // Never published: nobody can hold its address, free it at once.
            // The old value was superseded by whoever changed the word (only
            // a migration can, updates of a vertex being serialised), and that
            // migration reclaims it.
            alloc.free_now(offset_units, size_units);
            return Ok(None);
        }
        if let Some(old) = old {
            alloc.retire(old.offset_units(), old.size_units(), self.port.now_ns());
        }
        Ok(Some(true))
    }

    /// Replaces `v`'s adjacency list. Runs anywhere: the update is carried to
    /// `v`'s home, which coordinates it under its per-vertex lock, and each
    /// part is rewritten by the machine holding it (check-and-forward, Pragh
    /// 4.3). A list longer than `part_neighbors_max` is split into several
    /// keys (vertex decomposition); a reader may see such a list half
    /// replaced (each part is replaced atomically, the list is not).
    pub fn put(&mut self, v: VertexId, neighbors: &[VertexId]) -> Result<()> {
        self.vertex_op(v, VertexOp::Put(neighbors.to_vec()))
            .map(|_| ())
    }

    /// Adds the edge v -> u unless present. Returns whether it was added.
    pub fn insert_edge(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        self.vertex_op(v, VertexOp::Insert(u))
    }

    /// Removes every occurrence of the edge v -> u. Returns whether there was one.
    pub fn delete_edge(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        self.vertex_op(v, VertexOp::Delete(u))
    }

    /// Runs a vertex op at `v`'s home: here under the vertex's lock, or by
    /// forwarding it there and waiting for the reply.
    fn vertex_op(&mut self, v: VertexId, op: VertexOp) -> Result<bool> {
        let home = self.vertex_home(v);
        if home != self.machine {
            return match self.forward(home, Request::Vertex { vertex: v, op })? {
                Reply::Vertex(Ok(b)) => Ok(b),
                Reply::Vertex(Err(e)) => Err(StoreError::Forwarded {
                    machine: home,
                    reason: e,
                }),
                Reply::Part(_) | Reply::Replica(_) => Err(StoreError::Config(
                    "a vertex op was answered with another op's reply".into(),
                )),
            };
        }
        let shared = Arc::clone(&self.shared);
        let _serial = loop {
            match shared.try_update_lock(self.machine, v) {
                Some(g) => break g,
                None => self.port.relax(),
            }
        };
        // Replicas go before anything publishes (replica invariant 1).
        self.invalidate_replicas(v)?;
        match op {
            VertexOp::Put(list) => self.put_at_home(v, &list).map(|_| true),
            VertexOp::Insert(u) => self.insert_at_home(v, u),
            VertexOp::Delete(u) => self.delete_at_home(v, u),
        }
    }

    fn put_at_home(&mut self, v: VertexId, neighbors: &[VertexId]) -> Result<()> {
        let max = self.shared.config.part_neighbors_max as usize;
        let parts: Vec<&[VertexId]> = if neighbors.is_empty() {
            vec![&[]]
        } else {
            neighbors.chunks(max).collect()
        };
        let last = parts.len() - 1;
        // Write parts from the last to the first, so a MORE flag never points
        // at a part that is not there yet.
        for (i, chunk) in parts.iter().enumerate().rev() {
            let flags = if i < last { MORE } else { 0 };
            let op = PartOp::Replace {
                ids: chunk.to_vec(),
                flags,
            };
            self.part_op(Key::part(v, i as u32), op)?;
        }
        // Empty what is left of a longer previous list (updates of v are
        // serialised here, so what we read cannot change under us).
        let mut p = parts.len() as u32;
        loop {
            if self.read_value(Key::part(v, p))?.is_none() {
                break;
            }
            let had_more = self.current_part().more();
            self.part_op(
                Key::part(v, p),
                PartOp::Replace {
                    ids: Vec::new(),
                    flags: 0,
                },
            )?;
            if !had_more {
                break;
            }
            p += 1;
        }
        Ok(())
    }

    fn insert_at_home(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        let max = self.shared.config.part_neighbors_max;
        for _ in 0..READ_RETRIES_MAX {
            // Find the last part, and whether u is already there.
            let mut part = 0u32;
            loop {
                if self.read_value(Key::part(v, part))?.is_none() {
                    break;
                }
                let view = self.current_part();
                if view.iter().any(|x| x == u) {
                    return Ok(false);
                }
                if !view.more() {
                    break;
                }
                part += 1;
            }
            let key = Key::part(v, part);
            match self.part_op(key, PartOp::Append { u, max })? {
                PartReply::Done { changed, .. } => return Ok(changed),
                PartReply::HasMore => continue,
                PartReply::Absent => {
                    if let PartReply::Done { changed: true, .. } =
                        self.part_op(key, PartOp::CreateWith { u })?
                    {
                        return Ok(true);
                    }
                }
                PartReply::Full => {
                    // Publish the next part, then flag the full one.
                    let next = Key::part(v, part + 1);
                    let created = matches!(
                        self.part_op(next, PartOp::CreateWith { u })?,
                        PartReply::Done { changed: true, .. }
                    );
                    self.part_op(key, PartOp::SetMore)?;
                    if created {
                        return Ok(true);
                    }
                    // An emptied part from a longer earlier list was there:
                    // it is linked now; scan again.
                }
                PartReply::Moved(m) => unreachable!("part_op follows moves, got Moved({m})"),
            }
        }
        Err(StoreError::Contention {
            key: Key::part(v, 0).0,
            retries: READ_RETRIES_MAX,
        })
    }

    fn delete_at_home(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        let mut any = false;
        let mut part = 0u32;
        loop {
            match self.part_op(Key::part(v, part), PartOp::Remove { u })? {
                PartReply::Done { changed, more } => {
                    any |= changed;
                    if !more {
                        return Ok(any);
                    }
                }
                _ => return Ok(any),
            }
            part += 1;
        }
    }

    /// Applies a part op where the key's value is: here if it is held here,
    /// else at its holder (following moves). Pragh 4.3's check-and-forward.
    fn part_op(&mut self, key: Key, op: PartOp) -> Result<PartReply> {
        let mut target = self.machine;
        for _ in 0..FORWARD_HOPS_MAX {
            let reply = if target == self.machine {
                self.part_op_here(key, &op)?
            } else {
                match self.forward(
                    target,
                    Request::Part {
                        key: key.0,
                        op: op.clone(),
                    },
                )? {
                    Reply::Part(r) => r,
                    Reply::Vertex(_) | Reply::Replica(_) => {
                        return Err(StoreError::Config(
                            "a part op was answered with another op's reply".into(),
                        ))
                    }
                }
            };
            match reply {
                PartReply::Moved(m) => target = m,
                r => return Ok(r),
            }
        }
        Err(StoreError::Contention {
            key: key.0,
            retries: FORWARD_HOPS_MAX,
        })
    }

    /// Applies a part op on this machine; `Moved` if the value is held elsewhere.
    fn part_op_here(&mut self, key: Key, op: &PartOp) -> Result<PartReply> {
        let mut reply = PartReply::Absent;
        let mut ids: Vec<VertexId> = Vec::new();
        let r = self.rmw(key, |cur, enc| {
            let (change, r) = decide_part_op(op, cur, enc, &mut ids);
            reply = r;
            change
        });
        match r {
            Ok(_) => Ok(reply),
            Err(StoreError::NotHolder { holder, .. }) => Ok(PartReply::Moved(holder)),
            Err(e) => Err(e),
        }
    }

    /// Sends `request` to `target` and waits for its reply, answering part
    /// ops addressed to this machine meanwhile (so two machines forwarding to
    /// each other cannot deadlock).
    fn forward(&mut self, target: MachineId, request: Request) -> Result<Reply> {
        let shared = Arc::clone(&self.shared);
        let mail = shared.mail[self.machine as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted {
                machine: self.machine,
            })?;
        let id = mail
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut bytes = Vec::new();
        forward::encode_request(self.machine, id, &request, &mut bytes);
        self.send_with_backpressure(target, &bytes)?;
        self.shared.wake(target);
        self.stats.forwarded += 1;
        let timeout_ms = self.shared.config.forward_timeout_ms;
        let deadline = self.port.now_ns() + timeout_ms * 1_000_000;
        loop {
            if let Some(r) = mail
                .replies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id)
            {
                return Ok(r);
            }
            if self.pump(false)? == 0 {
                if self.port.now_ns() > deadline {
                    return Err(StoreError::Forwarded {
                        machine: target,
                        reason: format!(
                            "no reply within {timeout_ms} ms (is its service running?)"
                        ),
                    });
                }
                self.port.relax();
            }
        }
    }

    fn send_with_backpressure(&mut self, target: MachineId, bytes: &[u8]) -> Result<()> {
        loop {
            match self.port.send(target, bytes) {
                Err(locus_fabric::FabricError::InboxFull { .. }) => {
                    self.pump(false)?;
                    self.port.relax();
                }
                r => return Ok(r?),
            }
        }
    }

    /// Handles the messages in this machine's inbox: replies are filed for
    /// their waiters, part ops are applied and answered, vertex ops are run
    /// if `vertex_ops` (else kept for the service). Returns messages handled.
    fn pump(&mut self, vertex_ops: bool) -> Result<usize> {
        let shared = Arc::clone(&self.shared);
        let mail = shared.mail[self.machine as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted {
                machine: self.machine,
            })?;
        let mut handled = 0;
        while let Some(m) = self.port.try_recv()? {
            handled += 1;
            match forward::decode(&m.payload)? {
                Envelope::Reply { id, reply } => {
                    mail.replies
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(id, reply);
                }
                Envelope::Request { from, id, request } => match request {
                    Request::Part { key, op } => {
                        let reply = Reply::Part(self.part_op_here(Key(key), &op)?);
                        self.reply(from, id, &reply)?;
                    }
                    Request::Replica {
                        key,
                        seen,
                        offset_units,
                    } => {
                        let listed = self.list_replica(Key(key), from, seen, offset_units)?;
                        self.reply(from, id, &Reply::Replica(listed))?;
                    }
                    vertex @ Request::Vertex { .. } => {
                        if vertex_ops {
                            self.run_vertex_request(from, id, vertex)?;
                        } else {
                            mail.deferred
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push_back((from, id, vertex));
                        }
                    }
                },
            }
        }
        Ok(handled)
    }

    fn reply(&mut self, to: MachineId, id: u64, reply: &Reply) -> Result<()> {
        let mut bytes = Vec::new();
        forward::encode_reply(self.machine, id, reply, &mut bytes);
        self.send_with_backpressure(to, &bytes)
    }

    fn run_vertex_request(&mut self, from: MachineId, id: u64, request: Request) -> Result<()> {
        let Request::Vertex { vertex, op } = request else {
            unreachable!("only vertex requests are deferred")
        };
        let outcome = match self.vertex_op(vertex, op) {
            Ok(b) => Ok(b),
            // The requester gets the error; this machine's service goes on.
            Err(
                e @ (StoreError::RegionFull { .. }
                | StoreError::TableFull { .. }
                | StoreError::Contention { .. }),
            ) => Err(e.to_string()),
            Err(e) => return Err(e),
        };
        self.reply(from, id, &Reply::Vertex(outcome))
    }

    /// One round of this machine's service: runs vertex ops left by waiting
    /// workers, then handles the inbox. Returns the work done (0: idle).
    /// Some thread acting as each machine must call this regularly (see
    /// [`Store::spawn_services`]) for updates forwarded to it to complete.
    pub fn serve(&mut self) -> Result<usize> {
        let shared = Arc::clone(&self.shared);
        let mail = shared.mail[self.machine as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted {
                machine: self.machine,
            })?;
        let mut done = 0;
        loop {
            let next = mail
                .deferred
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            let Some((from, id, request)) = next else {
                break;
            };
            self.run_vertex_request(from, id, request)?;
            done += 1;
        }
        Ok(done + self.pump(true)?)
    }

    /// MIGRATE (Pragh 4.1, Fig. 6): moves `key`'s value into this machine's
    /// value region, alone, with one-sided operations; the holder's and the
    /// home's threads take no part.
    ///
    /// Steps: READ the value (verifying its header), ALLOC here and copy it,
    /// WRITE zero over the old header (invalidation), CAS the key's address
    /// word at its home from the old address to the new one (retry on
    /// conflict with an update or another migration), then WRITE the old block
    /// into the old holder's reclaim ring. Invalidating before the CAS (Fig. 6
    /// does it after) means no reader can see the old copy once the new one is
    /// published, and so the next update of the key can never race a pending
    /// invalidation (Pragh footnote 10).
    pub fn migrate(&mut self, key: Key) -> Result<Migration> {
        let me = self.machine;
        for _ in 0..READ_RETRIES_MAX {
            let Some((slot, addr)) = self.read_value(key)? else {
                return Ok(Migration::Absent);
            };
            let home = slot.home;
            let holder = addr.holder(home);
            if holder == me {
                return Ok(Migration::AlreadyHere);
            }
            let size_units = addr.size_units();
            // A value held away from its home must fit the remote address's size field.
            Addr::at(home, me, size_units, 0)?;
            let alloc = self.shared.allocs[me as usize]
                .as_ref()
                .ok_or(StoreError::NotHosted { machine: me })?;
            let offset_units = alloc.alloc(size_units, self.port.now_ns())?;
            let new_addr = Addr::at(home, me, size_units, offset_units)?;
            let vr_here = self.values_region(me);
            let copy = std::mem::take(&mut self.value);
            let w = self.port.write(me, vr_here, offset_units * 8, &copy);
            self.value = copy;
            if let Err(e) = w {
                alloc.free_now(offset_units, size_units);
                return Err(e.into());
            }
            let vr_old = self.values_region(holder);
            self.port
                .write_word(holder, vr_old, addr.offset_units() * 8, 0)?;
            let kr = self.keys_region(home);
            // Stamp the new address's cache entry with a time before the CAS:
            // a reclaim wait below may outlast a lease, and by then the new
            // block may itself have been replaced, freed and reused.
            let cas_ns = self.port.now_ns();
            let prev = self.port.cas(
                home,
                kr,
                slot.addr_offset,
                slot.addr_word,
                new_addr.encode(),
            )?;
            if prev != slot.addr_word {
                // Lost to an update or another migration: ours was never published.
                alloc.free_now(offset_units, size_units);
                if let Some(c) = self.cache() {
                    c.remove_if(key, slot.addr_word);
                }
                self.stats.migrate_conflicts += 1;
                continue;
            }
            self.reclaim(
                holder,
                Addr::local(size_units, addr.offset_units())?.encode(),
            )?;
            self.remember_at(key, new_addr.encode(), slot.addr_offset, cas_ns);
            self.stats.migrated += 1;
            return Ok(Migration::Moved {
                from: holder,
                bytes: size_units * 8,
            });
        }
        Err(StoreError::Contention {
            key: key.0,
            retries: READ_RETRIES_MAX,
        })
    }

    /// Migrates many keys here with their one-sided operations pipelined
    /// (Pragh 5, "Optimizations"): up to [`PIPELINE_WINDOW`] keys are in
    /// flight at once, each advancing through the steps of [`Worker::migrate`]
    /// as its previous operation completes, so one thread keeps the network
    /// busy instead of waiting out one round trip per step. Invalidation still
    /// completes before the CAS that publishes the new copy; the reclaim ring
    /// append of a published key proceeds in the background of the others.
    /// Returns what happened to each key, in order.
    pub fn migrate_batch(&mut self, keys: &[Key]) -> Result<Vec<Migration>> {
        let mut results: Vec<Option<Migration>> = vec![None; keys.len()];
        // A fixed set of slots; a slot's index is the id of its job's one
        // operation in flight, and a slot is reused only once its job is done.
        let window = PIPELINE_WINDOW.min(keys.len());
        let mut slots: Vec<Option<MigrateJob>> = (0..window).map(|_| None).collect();
        let mut next = 0;
        let mut active = 0;
        let mut done = Vec::new();
        let r = (|| -> Result<()> {
            loop {
                for (id, slot) in slots.iter_mut().enumerate() {
                    while slot.is_none() && next < keys.len() {
                        let mut job = MigrateJob::new(next, keys[next]);
                        next += 1;
                        self.post_bucket_read(&mut job, id)?;
                        // A job can finish without posting (value already here).
                        if let Some(m) = job.result {
                            results[job.index] = Some(m);
                        } else {
                            *slot = Some(job);
                            active += 1;
                        }
                    }
                }
                if active == 0 {
                    return Ok(());
                }
                done.clear();
                self.port.wait(&mut done)?;
                for c in done.drain(..) {
                    let id = c.id as usize;
                    let job = slots[id].as_mut().expect("a completion for a live job");
                    self.advance(job, id, c.result?)?;
                    if let Some(m) = job.result {
                        results[job.index] = Some(m);
                        slots[id] = None;
                        active -= 1;
                    }
                }
            }
        })();
        if let Err(e) = r {
            self.drain_all();
            // Blocks of keys already published must still reach their rings.
            let _ = self.flush_reclaims();
            return Err(e);
        }
        self.flush_reclaims()?;
        Ok(results
            .into_iter()
            .map(|m| m.expect("every key finished"))
            .collect())
    }

    /// Every (key, address word) in machine `m`'s key table, read with large
    /// READs over its main and used overflow buckets.
    fn scan_table(&mut self, m: MachineId) -> Result<Vec<(Key, u64)>> {
        const CHUNK_BUCKETS: u64 = 1024;
        let layout = self.shared.layout;
        let kr = self.keys_region(m);
        let used = self
            .port
            .read_word(m, kr, OVERFLOW_USED_OFFSET)?
            .min(layout.overflow_buckets);
        let total = layout.buckets + used;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut b = 0;
        while b < total {
            let n = (total - b).min(CHUNK_BUCKETS);
            buf.resize((n * BUCKET_BYTES) as usize, 0);
            self.port.read(m, kr, layout.bucket_offset(b), &mut buf)?;
            for chunk in buf.chunks_exact(BUCKET_BYTES as usize) {
                for &(kw, aw) in BucketView::parse(chunk).slots.iter() {
                    if let (Some(k), true) = (Key::from_word(kw), aw != 0) {
                        out.push((k, aw));
                    }
                }
            }
            b += n;
        }
        Ok(out)
    }

    /// Copies `key` (address word `word`, keyed at `from`) with its value into
    /// this machine's key table and value region; returns the bytes copied.
    fn copy_key_here(&mut self, key: Key, word: u64, from: MachineId) -> Result<u64> {
        let Some(addr) = Addr::decode(word) else {
            return Ok(0);
        };
        let me = self.machine;
        if !self.fetch(from, addr)? {
            return Err(StoreError::Config(format!(
                "key {} changed while its shard was moving: shard moves need the cluster paused",
                key.0
            )));
        }
        let size_units = addr.size_units();
        let shared = Arc::clone(&self.shared);
        let alloc = shared.allocs[me as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted { machine: me })?;
        let off = alloc.alloc(size_units, self.port.now_ns())?;
        let vr = self.values_region(me);
        let bytes = std::mem::take(&mut self.value);
        let w = self.port.write(me, vr, off * 8, &bytes);
        self.value = bytes;
        if let Err(e) = w {
            alloc.free_now(off, size_units);
            return Err(e.into());
        }
        let slot = self.find_or_claim_at(key, me)?;
        let new = Addr::local(size_units, off)?;
        let kr = self.keys_region(me);
        let prev = self
            .port
            .cas(me, kr, slot.addr_offset, slot.addr_word, new.encode())?;
        if prev != slot.addr_word {
            alloc.free_now(off, size_units);
            return Err(StoreError::Config(format!(
                "key {} was written while its shard was moving: shard moves need the cluster paused",
                key.0
            )));
        }
        self.reclaim_queue.push((
            addr.holder(from),
            Addr::local(size_units, addr.offset_units())?.encode(),
        ));
        Ok(size_units * 8 + 16)
    }

    /// Appends the queued retired blocks to their holders' reclaim rings,
    /// reserving a run of slots with one CAS per holder and writing the run
    /// with one or two WRITEs (two when it wraps). Waits while a ring is full
    /// (back-pressure; the owner's GC drains it).
    fn flush_reclaims(&mut self) -> Result<()> {
        let mut queue = std::mem::take(&mut self.reclaim_queue);
        queue.sort_by_key(|e| e.0);
        for group in queue.chunk_by(|a, b| a.0 == b.0) {
            let holder = group[0].0;
            let (region, layout) = self.ring_of(holder)?;
            let mut rest: Vec<u64> = group.iter().map(|e| e.1).collect();
            while !rest.is_empty() {
                let c = crate::reclaim::read_counters(&mut self.port, holder, region)?;
                let used = c.tail.saturating_sub(c.head).min(layout.capacity);
                let room = layout.capacity - used;
                if room == 0 {
                    self.stats.reclaim_waits += 1;
                    self.port.relax();
                    continue;
                }
                let k = (rest.len() as u64).min(room);
                let tail = c.tail;
                let prev =
                    self.port
                        .cas(holder, region, crate::reclaim::TAIL_OFFSET, tail, tail + k)?;
                if prev != tail {
                    continue;
                }
                // Slots tail..tail+k are ours: write them, in at most two runs.
                let taken: Vec<u64> = rest.drain(..k as usize).collect();
                let mut t = tail;
                let mut at = 0usize;
                while at < taken.len() {
                    let first = t % layout.capacity;
                    let run = ((layout.capacity - first) as usize).min(taken.len() - at);
                    let mut bytes = Vec::with_capacity(run * 8);
                    for e in &taken[at..at + run] {
                        bytes.extend_from_slice(&e.to_le_bytes());
                    }
                    self.port
                        .write(holder, region, layout.slot_offset(t), &bytes)?;
                    t += run as u64;
                    at += run;
                }
            }
        }
        Ok(())
    }

    fn post_bucket_read(&mut self, job: &mut MigrateJob, id: usize) -> Result<()> {
        let home = self.home(job.key);
        // Address cached (with its position): skip the lookup READ (Pragh 5).
        let now = self.port.now_ns();
        let hit = self
            .cache()
            .and_then(|c| c.get_with_position(job.key, now))
            .filter(|h| h.1 != u64::MAX);
        if let Some((word, position)) = hit {
            if let Some(addr) = Addr::decode(word) {
                job.home = home;
                job.addr_offset = position;
                job.addr_word = word;
                job.holder = addr.holder(home);
                job.from_cache = true;
                if job.holder == self.machine {
                    // Only if our copy is still live: a stale entry may name
                    // a copy that has moved on (its header is zero then).
                    let vr = self.values_region(self.machine);
                    let header = self
                        .port
                        .read_word(self.machine, vr, addr.offset_units() * 8)?;
                    if Header::decode(header).matches(addr) {
                        job.result = Some(Migration::AlreadyHere);
                        return Ok(());
                    }
                    self.forget_cached(job);
                    return self.post_bucket_read(job, id);
                }
                job.addr = Some(addr);
                let vr = self.values_region(job.holder);
                let buf = self.buffer((addr.size_units() * 8) as usize);
                job.stage = MigrateStage::Value;
                self.port.post(WorkRequest::read_into(
                    id as u64,
                    job.holder,
                    vr,
                    addr.offset_units() * 8,
                    buf,
                ))?;
                return Ok(());
            }
        }
        job.from_cache = false;
        let layout = self.shared.layout;
        let off = layout.bucket_offset(layout.bucket_of(job.key));
        let kr = self.keys_region(home);
        let buf = self.buffer(BUCKET_BYTES as usize);
        job.home = home;
        job.stage = MigrateStage::Bucket;
        self.port
            .post(WorkRequest::read_into(id as u64, home, kr, off, buf))?;
        Ok(())
    }

    /// Moves a pipelined migration one step on, given its last operation's output.
    fn advance(&mut self, job: &mut MigrateJob, id: usize, output: Output) -> Result<()> {
        let me = self.machine;
        let id64 = id as u64;
        match job.stage {
            MigrateStage::Bucket => {
                let Output::Data(bytes) = output else {
                    unreachable!("a READ")
                };
                let view = BucketView::parse(&bytes);
                let found = view
                    .slots
                    .iter()
                    .enumerate()
                    .find(|(_, s)| s.0 == job.key.word() || s.0 == 0)
                    .map(|(i, s)| (i, *s));
                self.keep(bytes);
                let (i, (kw, aw)) = match found {
                    Some(f) if f.1 .0 == job.key.word() => f,
                    Some(_) => {
                        job.result = Some(Migration::Absent);
                        return Ok(());
                    }
                    None if view.link == 0 => {
                        job.result = Some(Migration::Absent);
                        return Ok(());
                    }
                    None => {
                        // Overflow chain: take the synchronous path for this key.
                        job.result = Some(self.migrate(job.key)?);
                        return Ok(());
                    }
                };
                debug_assert_eq!(kw, job.key.word());
                let layout = self.shared.layout;
                let bucket = layout.bucket_offset(layout.bucket_of(job.key));
                job.addr_offset = addr_word_offset(bucket, i as u64);
                job.addr_word = aw;
                let Some(addr) = Addr::decode(aw) else {
                    job.result = Some(Migration::Absent);
                    return Ok(());
                };
                job.holder = addr.holder(job.home);
                if job.holder == me {
                    job.result = Some(Migration::AlreadyHere);
                    return Ok(());
                }
                job.addr = Some(addr);
                let vr = self.values_region(job.holder);
                let buf = self.buffer((addr.size_units() * 8) as usize);
                job.stage = MigrateStage::Value;
                self.port.post(WorkRequest::read_into(
                    id64,
                    job.holder,
                    vr,
                    addr.offset_units() * 8,
                    buf,
                ))?;
            }
            MigrateStage::Value => {
                let Output::Data(bytes) = output else {
                    unreachable!("a READ")
                };
                let addr = job.addr.expect("set with the bucket");
                let header =
                    Header::decode(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")));
                if !header.matches(addr) {
                    // Invalidated meanwhile (or a stale cached address): start again.
                    self.keep(bytes);
                    self.forget_cached(job);
                    return self.post_bucket_read(job, id);
                }
                let size_units = addr.size_units();
                Addr::at(job.home, me, size_units, 0)?;
                let shared = Arc::clone(&self.shared);
                let alloc = shared.allocs[me as usize]
                    .as_ref()
                    .ok_or(StoreError::NotHosted { machine: me })?;
                let off = alloc.alloc(size_units, self.port.now_ns())?;
                let vr_here = self.values_region(me);
                let w = self.port.write(me, vr_here, off * 8, &bytes);
                self.keep(bytes);
                if let Err(e) = w {
                    alloc.free_now(off, size_units);
                    return Err(e.into());
                }
                job.new_addr = Some(Addr::at(job.home, me, size_units, off)?);
                let vr_old = self.values_region(job.holder);
                job.stage = MigrateStage::Invalidate;
                self.port.post(WorkRequest::write(
                    id64,
                    job.holder,
                    vr_old,
                    addr.offset_units() * 8,
                    vec![0; 8],
                ))?;
            }
            MigrateStage::Invalidate => {
                let kr = self.keys_region(job.home);
                let new = job.new_addr.expect("allocated").encode();
                job.stage = MigrateStage::Publish;
                job.cas_ns = self.port.now_ns();
                self.port.post(WorkRequest::cas(
                    id64,
                    job.home,
                    kr,
                    job.addr_offset,
                    job.addr_word,
                    new,
                ))?;
            }
            MigrateStage::Publish => {
                let prev = output.word().expect("a CAS");
                let new = job.new_addr.expect("allocated");
                if prev != job.addr_word {
                    let alloc = self.shared.allocs[me as usize].as_ref().expect("hosted");
                    alloc.free_now(new.offset_units(), new.size_units());
                    self.stats.migrate_conflicts += 1;
                    self.forget_cached(job);
                    return self.post_bucket_read(job, id);
                }
                self.remember_at(job.key, new.encode(), job.addr_offset, job.cas_ns);
                let addr = job.addr.expect("set");
                self.reclaim_queue.push((
                    job.holder,
                    Addr::local(addr.size_units(), addr.offset_units())?.encode(),
                ));
                self.stats.migrated += 1;
                job.result = Some(Migration::Moved {
                    from: job.holder,
                    bytes: addr.size_units() * 8,
                });
            }
        }
        Ok(())
    }

    /// Drops a stale cached address a pipelined migration started from.
    fn forget_cached(&mut self, job: &mut MigrateJob) {
        if job.from_cache {
            if let Some(c) = self.cache() {
                c.remove_if(job.key, job.addr_word);
            }
            job.from_cache = false;
        }
    }

    fn ring_of(&mut self, machine: MachineId) -> Result<(RegionId, RingLayout)> {
        match self.shared.rings[machine as usize].get() {
            Some(r) => Ok(*r),
            None => {
                let r = crate::reclaim::lookup(&self.shared.fabric, machine)?;
                Ok(*self.shared.rings[machine as usize].get_or_init(|| r))
            }
        }
    }

    /// Migrates every part of vertex `v` here. Returns how many parts moved.
    pub fn migrate_vertex(&mut self, v: VertexId) -> Result<u32> {
        let mut moved = 0;
        let mut part = 0;
        loop {
            match self.migrate(Key::part(v, part))? {
                Migration::Absent => return Ok(moved),
                Migration::Moved { .. } => moved += 1,
                Migration::AlreadyHere => {}
            }
            if self.read_value(Key::part(v, part))?.is_none() || !self.current_part().more() {
                return Ok(moved);
            }
            part += 1;
        }
    }

    /// Appends a retired block to its machine's reclaim ring (Pragh 4.1, Fig. 6 line 11).
    fn reclaim(&mut self, machine: MachineId, entry: u64) -> Result<()> {
        let (region, layout) = self.ring_of(machine)?;
        loop {
            match crate::reclaim::append(&mut self.port, machine, region, layout, entry)? {
                Appended::Done { .. } => return Ok(()),
                // Back-pressure: the owner's collector is behind. Waiting keeps
                // the entry (a dropped one would leak the block for good).
                Appended::Full | Appended::Contended => {
                    self.stats.reclaim_waits += 1;
                    self.port.relax();
                }
            }
        }
    }

    /// The address word of `v`'s first part as stored at its home (0: absent).
    pub fn address_word(&mut self, v: VertexId) -> Result<u64> {
        Ok(self.lookup(Key::part(v, 0))?.map_or(0, |s| s.addr_word))
    }

    /// Garbage collection on this worker's machine: frees the blocks this
    /// machine retired itself, and those other machines appended to its
    /// reclaim ring, once the reclaim lease has passed. Returns blocks freed.
    pub fn collect_garbage(&mut self) -> Result<usize> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let Some(alloc) = shared.allocs[me as usize].as_ref() else {
            return Ok(0);
        };
        let mut freed = alloc.collect(self.port.now_ns());
        let Some(slot) = shared.collectors[me as usize].as_ref() else {
            return Ok(freed);
        };
        // One collector per machine; if another thread is collecting, leave it to it.
        let mut guard = match slot.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(freed),
        };
        if guard.is_none() {
            let (region, layout) = crate::reclaim::lookup(&shared.fabric, me)?;
            let config = CollectorConfig {
                lease_ns: shared.config.reclaim_lease_ms * 1_000_000,
                ..CollectorConfig::default()
            };
            *guard = Some(Collector::open(&mut self.port, region, layout, config)?);
        }
        let collector = guard.as_mut().expect("opened above");
        let mut entries = Vec::new();
        let now = self.port.now_ns();
        collector.collect(&mut self.port, now, &mut entries)?;
        for e in entries {
            if let Some(a) = Addr::decode(e) {
                alloc.free_now(a.offset_units(), a.size_units());
                freed += 1;
            }
        }
        Ok(freed)
    }

    /// Makes a read-only replica of `key`'s value on this machine
    /// ([`crate::replica`]): copy the value into a block here, have the key's
    /// home list it, then serve this machine's reads from it until an update
    /// invalidates it. Replicas must be on (`replica_bytes_max > 0`).
    pub fn replicate(&mut self, key: Key) -> Result<Replication> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let set = shared.replica_sets[me as usize]
            .as_ref()
            .ok_or_else(|| StoreError::Config("replicas are off (replica_bytes_max = 0)".into()))?;
        let alloc = shared.allocs[me as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted { machine: me })?;
        let vr = self.values_region(me);
        if let Some(word) = set.get(key) {
            let a = Addr::decode(word).expect("replica words are valid addresses");
            let header = Header::decode(self.port.read_word(me, vr, a.offset_units() * 8)?);
            if header.matches(a) {
                // Still listed and valid: make sure reads find it.
                let now = self.port.now_ns();
                if let Some(c) = self.cache() {
                    c.insert_replica(key, word, now);
                }
                return Ok(Replication::Present);
            }
            self.drop_replica(key, word, a);
        }
        let Some((slot, addr)) = self.read_value(key)? else {
            return Ok(Replication::Absent);
        };
        if addr.holder(slot.home) == me {
            return Ok(Replication::HeldHere);
        }
        let size_units = addr.size_units();
        if set.bytes() + size_units * 8 > shared.config.replica_bytes_max {
            self.sweep_replicas()?;
            if set.bytes() + size_units * 8 > shared.config.replica_bytes_max {
                return Ok(Replication::Full);
            }
        }
        let offset_units = alloc.alloc(size_units, self.port.now_ns())?;
        let word = Addr::remote(me, size_units, offset_units)?.encode();
        // `self.value` holds the copy, header included (checked by the read).
        let bytes = std::mem::take(&mut self.value);
        let w = self.port.write(
            me,
            vr,
            offset_units * 8,
            &bytes[..(size_units * 8) as usize],
        );
        self.value = bytes;
        if let Err(e) = w {
            alloc.free_now(offset_units, size_units);
            return Err(e.into());
        }
        let listed = if slot.home == me {
            self.list_replica(key, me, slot.addr_word, offset_units)?
        } else {
            let request = Request::Replica {
                key: key.0,
                seen: slot.addr_word,
                offset_units,
            };
            match self.forward(slot.home, request)? {
                Reply::Replica(b) => b,
                _ => {
                    return Err(StoreError::Config(
                        "a replica registration was answered with another op's reply".into(),
                    ))
                }
            }
        };
        if !listed {
            // Never listed, so no invalidation can reach it (replica invariant 4);
            // nobody read it either: reuse at once.
            alloc.free_now(offset_units, size_units);
            return Ok(Replication::Refused);
        }
        set.insert(key, word, size_units * 8);
        let now = self.port.now_ns();
        if let Some(c) = self.cache() {
            c.insert_replica(key, word, now);
        }
        self.stats.replicas_created += 1;
        Ok(Replication::Created {
            bytes: size_units * 8,
        })
    }

    /// The home's side of a replica registration (replica invariants 2, 5):
    /// lists `machine`'s replica of `key` if the key's address word is still
    /// `seen`, checked under the vertex lock, which it never waits for.
    fn list_replica(
        &mut self,
        key: Key,
        machine: MachineId,
        seen: u64,
        offset_units: u64,
    ) -> Result<bool> {
        let shared = Arc::clone(&self.shared);
        let Some(dir) = shared.directories[self.machine as usize].as_ref() else {
            return Ok(false);
        };
        if self.home(key) != self.machine {
            return Ok(false);
        }
        let Some(_serial) = shared.try_update_lock(self.machine, key.vertex()) else {
            return Ok(false); // an update is in progress: the copy may be stale
        };
        let current = self.lookup(key)?.map(|s| s.addr_word);
        if current != Some(seen) || seen == 0 {
            return Ok(false);
        }
        Ok(dir.list(Listed {
            key,
            machine,
            offset_units,
        }))
    }

    /// The update path at `v`'s home, under its vertex lock: zeroes the
    /// header of every replica of `v`'s keys before anything publishes
    /// (replica invariant 1).
    fn invalidate_replicas(&mut self, v: VertexId) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let Some(dir) = shared.directories[self.machine as usize].as_ref() else {
            return Ok(());
        };
        if dir.is_empty() {
            return Ok(());
        }
        for r in dir.take(v) {
            let (_, vr) = self.regions_of(r.machine)?;
            self.port.write_word(r.machine, vr, r.offset_units * 8, 0)?;
            self.stats.replica_invalidations += 1;
        }
        Ok(())
    }

    /// A read found this machine's replica of `key` invalidated: forget it
    /// and retire its block (replica invariant 4).
    fn drop_replica(&mut self, key: Key, word: u64, addr: Addr) {
        if let Some(c) = self.cache() {
            c.remove_if(key, word);
        }
        let me = self.machine as usize;
        let (Some(set), Some(alloc)) = (
            self.shared.replica_sets[me].as_ref(),
            self.shared.allocs[me].as_ref(),
        ) else {
            return;
        };
        if set.remove_if(key, word, addr.size_units() * 8) {
            alloc.retire(addr.offset_units(), addr.size_units(), self.port.now_ns());
        }
    }

    /// Retires the blocks of replicas here that updates invalidated but no
    /// read has noticed yet. Returns how many.
    pub fn sweep_replicas(&mut self) -> Result<usize> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let (Some(set), Some(alloc)) = (
            shared.replica_sets[me as usize].as_ref(),
            shared.allocs[me as usize].as_ref(),
        ) else {
            return Ok(0);
        };
        let vr = self.values_region(me);
        // Read headers without the set's lock (replica invariant 4: only a
        // zeroed header, which no later WRITE can target, frees a block).
        let mut invalid = Vec::new();
        for (key, w) in set.snapshot() {
            let a = Addr::decode(w).expect("replica words are valid addresses");
            let h = self.port.read_word(me, vr, a.offset_units() * 8)?;
            if !Header::decode(h).matches(a) {
                invalid.push((key, w));
            }
        }
        let dead = set.forget(&invalid, |w| {
            Addr::decode(w).map_or(0, |a| a.size_units() * 8)
        });
        let now = self.port.now_ns();
        for (key, w) in &dead {
            let a = Addr::decode(*w).expect("replica words are valid addresses");
            if let (Some(k), Some(c)) = (key, self.cache()) {
                c.remove_if(*k, *w);
            }
            alloc.retire(a.offset_units(), a.size_units(), now);
        }
        Ok(dead.len())
    }

    /// Replicas held by this machine and their bytes (orphans included).
    pub fn replicas_held(&self) -> (usize, u64) {
        self.shared.replica_sets[self.machine as usize]
            .as_ref()
            .map_or((0, 0), |s| (s.len(), s.bytes()))
    }
}

/// What [`Worker::replicate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// A replica was made and listed at the key's home.
    Created {
        /// Bytes copied (header included).
        bytes: u64,
    },
    /// A valid replica was here already.
    Present,
    /// The value itself is held here: nothing to replicate.
    HeldHere,
    /// The key has no value.
    Absent,
    /// The home refused (the value changed meanwhile, or an update was in progress).
    Refused,
    /// This machine's replica budget is spent.
    Full,
}

/// What a part op does to the current part (or its absence): the change to
/// make and the reply to give. `ids` is scratch space.
fn decide_part_op(
    op: &PartOp,
    cur: Option<PartView<'_>>,
    enc: &mut Vec<u8>,
    ids: &mut Vec<VertexId>,
) -> (Change, PartReply) {
    let more_of = |c: &PartView<'_>| c.more();
    match (op, cur) {
        (PartOp::Replace { ids: new, flags }, _) => {
            adjacency::encode(new, *flags, enc);
            (
                Change::Replace,
                PartReply::Done {
                    changed: true,
                    more: flags & MORE != 0,
                },
            )
        }
        (PartOp::CreateWith { u }, None) => {
            adjacency::encode(&[*u], 0, enc);
            (
                Change::Replace,
                PartReply::Done {
                    changed: true,
                    more: false,
                },
            )
        }
        (PartOp::CreateWith { .. }, Some(c)) => (
            Change::Keep,
            PartReply::Done {
                changed: false,
                more: more_of(&c),
            },
        ),
        (_, None) => (Change::Keep, PartReply::Absent),
        (PartOp::Append { u, max }, Some(c)) => {
            if c.iter().any(|x| x == *u) {
                (
                    Change::Keep,
                    PartReply::Done {
                        changed: false,
                        more: c.more(),
                    },
                )
            } else if c.more() {
                (Change::Keep, PartReply::HasMore)
            } else if c.len() >= *max as usize {
                (Change::Keep, PartReply::Full)
            } else {
                ids.clear();
                ids.extend(c.iter());
                ids.push(*u);
                adjacency::encode(ids, c.flags, enc);
                (
                    Change::Replace,
                    PartReply::Done {
                        changed: true,
                        more: false,
                    },
                )
            }
        }
        (PartOp::Remove { u }, Some(c)) => {
            if c.iter().any(|x| x == *u) {
                ids.clear();
                ids.extend(c.iter().filter(|x| x != u));
                adjacency::encode(ids, c.flags, enc);
                (
                    Change::Replace,
                    PartReply::Done {
                        changed: true,
                        more: c.more(),
                    },
                )
            } else {
                (
                    Change::Keep,
                    PartReply::Done {
                        changed: false,
                        more: c.more(),
                    },
                )
            }
        }
        (PartOp::SetMore, Some(c)) => {
            if c.more() {
                (
                    Change::Keep,
                    PartReply::Done {
                        changed: false,
                        more: true,
                    },
                )
            } else {
                ids.clear();
                ids.extend(c.iter());
                adjacency::encode(ids, c.flags | MORE, enc);
                (
                    Change::Replace,
                    PartReply::Done {
                        changed: true,
                        more: true,
                    },
                )
            }
        }
    }
}
