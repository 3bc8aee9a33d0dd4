//! [`StoreConfig`]: the store's settings, the same on every machine, validated
//! before anything is created.

use crate::addr::{units_for_payload, REMOTE_SIZE_UNITS_MAX};
use crate::adjacency::PREFIX_BYTES;
use crate::cache::CacheConfig;
use crate::table::{TableLayout, BUCKET_BYTES, KEY_SLOTS};
use crate::{Result, StoreError};

/// Units reserved at the start of the value region (offset 0 is never a value).
pub(crate) const VALUE_BASE_UNITS: u64 = 8;
/// How long a forwarded request waits for its reply, by default.
pub const FORWARD_TIMEOUT_MS: u64 = 30_000;

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
    /// Serve repeated cache hits from each worker's private table of recent
    /// hits, without the cache's lock (`worker/recent.rs`); off, every
    /// lookup takes the shard's lock.
    pub cache_recent_hits: bool,
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
    /// A machine whose replicas fill `replica_bytes_max` sweeps them for
    /// invalidated ones (reading every replica's header) at most once per
    /// this many ms before refusing a new replica; 0 sweeps before every
    /// refusal. While the budget stays full, a sweep per replication request
    /// would read the whole set each time.
    pub replica_sweep_interval_ms: u64,
    /// A read that keeps finding its value invalidated for this long gives
    /// up with `Contention` (a liveness guard: a migration whose target
    /// died between invalidating the old copy and publishing the new one
    /// never ends until Pragh 5 repairs it, F5); 0 means two reclaim leases.
    /// A live migration takes microseconds, but on a loaded machine its
    /// thread may wait out many time slices: tests with leases of a few
    /// milliseconds and live migrators set it well above their lease.
    pub read_stall_ms: u64,
    /// Slots of the cluster (issue 59): a vertex's home is the owner of
    /// slot `vertex % slots` in the slot table ([`crate::homes`]). Fixed
    /// when a cluster is made; a new store's table gives slot `s` to
    /// machine `s % machines`. With `slots` equal to the machine count the
    /// homes are Pragh's `vertex % machines` (clusters made before slots).
    pub slots: u32,
}

impl StoreConfig {
    /// How long a read may find its value invalidated before it gives up
    /// ([`StoreConfig::read_stall_ms`], or two reclaim leases).
    pub fn read_stall_ns(&self) -> u64 {
        let ms = if self.read_stall_ms == 0 {
            self.reclaim_lease_ms.saturating_mul(2)
        } else {
            self.read_stall_ms
        };
        ms.saturating_mul(1_000_000)
    }
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
            read_stall_ms: 0,
            slots: crate::homes::SLOTS_DEFAULT,
            cache_recent_hits: true,
            hot_accesses: 100,
            shards_per_machine: 0,
            replica_bytes_max: 0,
            replica_sweep_interval_ms: 1_000,
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
        if self.slots == 0 || self.slots > crate::homes::SLOTS_MAX {
            return bad(format!(
                "slots = {} must be 1..={}",
                self.slots,
                crate::homes::SLOTS_MAX
            ));
        }
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

    pub(crate) fn cache_config(&self) -> CacheConfig {
        CacheConfig {
            bytes_max: self.cache_bytes_max,
            lease_ms: self.cache_lease_ms,
            hot_count: self.hot_accesses,
            ..CacheConfig::default()
        }
    }

    pub(crate) fn layout(&self) -> TableLayout {
        TableLayout {
            buckets: self.buckets_per_machine,
            overflow_buckets: self.overflow_buckets_per_machine,
        }
    }
}
