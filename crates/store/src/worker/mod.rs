//! [`Worker`]: one thread's handle acting as one machine, with its port and
//! scratch buffers. Every operation runs here, split by concern:
//!
//! | module | what |
//! |---|---|
//! | `table.rs` | the key table over one-sided operations: LOOKUP, claim a slot, scan |
//! | `read.rs` | GET with the location cache and replicas, `neighbors` |
//! | `khop.rs` | the k-hop query, its hops' reads posted at once or one GET at a time |
//! | `recent.rs` | the worker's recent cache hits: the cache's lock-free read path |
//! | `update.rs` | PUT as read-modify-write, vertex and part ops (check-and-forward's local side) |
//! | `service.rs` | forwarding, the inbox pump, the service loop and its threads |
//! | `migrate.rs` | the driver of [`crate::migrate::MigrateJob`]s: `migrate`, `migrate_batch` |
//! | `handoff.rs` | the driver of a [`crate::handoff::HandoffJob`]: `take_over` (issue 59) |
//! | `gc.rs` | reclaim-ring appends and garbage collection |
//! | `replicas.rs` | read-only replicas: make, list at the home, invalidate, sweep |
//! | `shard.rs` | the shard-based baseline's stop-the-world shard moves |
//! | `snapshot.rs` | a snapshot at a home (BEGIN, PRE-IMAGES, END), its write hooks, the cut reader |
//! | `scan.rs` | the value-region scan's I/O (decisions in [`crate::scan`]) |
//! | `recover.rs` | a survivor's side of a peer's failure (Pragh 5; protocol in [`crate::recover`]) |

mod gc;
mod handoff;
mod handover;
mod khop;
mod migrate;
mod read;
mod recent;
mod recover;
mod replicas;
mod scan;
mod service;
pub(crate) mod shard;
mod snapshot;
mod table;
mod update;

use std::sync::Arc;

use locus_fabric::{Completion, Fabric, MachineId, Port, RegionId};

use crate::addr::{Addr, Header};
use crate::adjacency::PartView;
use crate::alloc::ValueAllocator;
use crate::block::Unpublished;
use crate::cache::LocationCache;
use crate::store::{Shared, KEYS_REGION, VALUES_REGION};
use crate::table::{Key, BUCKET_BYTES};
use crate::track::TrackerView;
use crate::{Result, VertexId};

pub use khop::{HopReads, Khop, KhopLimits, FRONTIER_MAX};
pub use migrate::VertexMoved;
pub use replicas::Replication;
pub(crate) use service::Mailroom;
pub use service::{ServiceStats, Services, DEFERRED_VERTEX_OPS_MAX, FORWARDS_WAITING_MAX};
pub use snapshot::{Cut, CUT_ROUNDS_MAX};
pub use table::HomeSummary;

/// Reads a pipelined hop, and migrations a batch, keep in flight at most.
pub const PIPELINE_WINDOW: usize = 256;
/// Machines a part op follows its value through before giving up.
pub const FORWARD_HOPS_MAX: u32 = 64;
/// Retries on invalidated values before a read gives up (live-lock guard).
pub const READ_RETRIES_MAX: u32 = 1_000_000;
/// Largest read buffer a worker keeps for reuse.
const SPARE_BYTES_MAX: usize = 4096;
/// Read buffers a worker keeps for reuse.
const SPARE_BUFFERS_MAX: usize = 1024;

/// What a worker has done (for reports; never read on hot paths by others).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Values read.
    pub values_read: u64,
    /// Values read from a machine other than this one.
    pub values_read_remote: u64,
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
    /// Migrations that started over rather than invalidate a block read
    /// half a reclaim lease ago (invariant P3).
    pub migrate_expired: u64,
    /// Times a full reclaim ring made a migration wait.
    pub reclaim_waits: u64,
    /// Reads served by a replica held here ([`crate::replica`]).
    pub replica_reads: u64,
    /// Replicas this worker made and had listed.
    pub replicas_created: u64,
    /// Replicas invalidated by updates this worker coordinated (as a home).
    pub replica_invalidations: u64,
    /// Replaced blocks this worker's CASes handed to an open snapshot
    /// instead of retiring them (pre-images, design S3).
    pub snapshot_blocks_kept: u64,
    /// MIGRATEs whose CAS replaced a word a write had recorded for a
    /// snapshot and was about to CAS itself (S3's race: the old copy kept).
    pub snapshot_migrate_races: u64,
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
    /// The value last fetched, header first, possibly followed by stale
    /// bytes of a longer one: the buffer only grows, so a READ never pays
    /// for zero-filling bytes it is about to overwrite (a memset was 8% of
    /// Ideal's worker time, stop 34). Its header says how long it is.
    value: Vec<u8>,
    encode: Vec<u8>,
    scratch: Vec<u32>,
    /// A pipelined hop's buffers (`khop.rs`).
    hop: khop::HopScratch,
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
    /// Recent location-cache hits, served without the cache's lock.
    recent: recent::Recent,
    /// Fault injection: drop retired blocks instead of appending them to
    /// their holders' rings ([`Worker::inject_lost_reclaims`]).
    lose_reclaims: bool,
    /// [`crate::slotmove::HomeOp`]s this worker's caller holds open: while
    /// there are any, its vertex ops enter no slot guard again (the caller
    /// entered one for every vertex it changes).
    pub(crate) held_ops: Arc<std::sync::atomic::AtomicU32>,
    /// While a read follows a MOVED marker: the vertex and the machine
    /// whose table it reads instead of its home's ([`Worker::neighbors`]).
    home_hint: Option<(VertexId, MachineId)>,
    /// A log's replay puts back keys of slots served ahead of the table:
    /// they existed (the old home holds their markers), so V3 does not
    /// refuse them ([`Worker::set_replaying`]).
    pub(crate) replaying: bool,
    /// A forward's timeout instead of the store's, while set
    /// ([`Worker::set_forward_timeout_ms`]).
    forward_timeout_ms: Option<u64>,
    /// Counts of what this worker did.
    pub stats: WorkerStats,
}

/// What a read-modify-write step decides.
enum Change {
    /// Leave the value as it is.
    Keep,
    /// Replace it with the part in `Worker::encode`.
    Replace,
    /// Remove it: the address word becomes 0 (no value).
    Remove,
}

impl<F: Fabric> Worker<F> {
    /// A worker acting as `machine`, which this process hosts.
    pub(crate) fn new(shared: Arc<Shared<F>>, machine: MachineId) -> Result<Worker<F>> {
        let port = shared.fabric.port(machine)?;
        let machines = shared.machines;
        let mut w = Worker {
            shared,
            port,
            machine,
            regions: Vec::with_capacity(machines),
            bucket: vec![0; BUCKET_BYTES as usize],
            value: Vec::new(),
            encode: Vec::new(),
            scratch: Vec::new(),
            hop: Default::default(),
            completions: Vec::new(),
            spare: Vec::new(),
            reclaim_queue: Vec::new(),
            tracker: TrackerView::default(),
            query_now_ns: None,
            recent: recent::Recent::default(),
            lose_reclaims: false,
            held_ops: Arc::new(std::sync::atomic::AtomicU32::new(0)),
            home_hint: None,
            replaying: false,
            forward_timeout_ms: None,
            stats: WorkerStats::default(),
        };
        // Every machine's store registers its regions in the same order
        // (`Store::create`), so a peer's ids are this machine's. A peer's
        // are looked up if known already; otherwise they are taken as this
        // machine's, which lets a worker start while a peer is down or not
        // yet added (operations to it fail at the fabric until it is up).
        // [`crate::Store::check_peer`] looks a peer's up and checks them.
        let own = w.regions_of(machine)?;
        for m in 0..machines {
            let r = match w.shared.regions[m].get() {
                Some(r) => *r,
                None if w.shared.fabric.hosts(m as MachineId) => w.regions_of(m as MachineId)?,
                None => own,
            };
            w.regions.push(r);
        }
        Ok(w)
    }

    /// Location-cache hits served by this worker's recent table (`recent.rs`).
    pub fn recent_hits(&self) -> u64 {
        self.recent.hits
    }

    /// The machine this worker acts as.
    pub fn machine(&self) -> MachineId {
        self.machine
    }

    /// The worker's port (a counting port tells what this worker issued).
    pub fn port(&self) -> &F::Port {
        &self.port
    }

    /// The store's slot table.
    pub fn homes(&self) -> &Arc<crate::homes::Homes> {
        &self.shared.homes
    }

    /// Machines in the cluster.
    pub fn machine_count(&self) -> usize {
        self.shared.machines
    }

    /// Waits a moment for another thread (`Port::relax`: a yield on a real
    /// fabric, a scheduling point on the simulated one). Spin on a lock
    /// held across fabric operations with this, never block: a simulation
    /// runs one actor at a time.
    pub fn relax(&mut self) {
        self.port.relax()
    }

    pub(crate) fn regions_of(&mut self, m: MachineId) -> Result<(RegionId, RegionId)> {
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
        match self.home_hint {
            Some((v, m)) if v == key.vertex() => m,
            _ => self.vertex_home(key.vertex()),
        }
    }

    /// `v`'s home as this worker sees it: its slot's owner in the store's
    /// table, or under shard-based placement its shard's machine in this
    /// machine's copy of the map.
    #[inline]
    pub fn home_of(&self, v: VertexId) -> MachineId {
        self.vertex_home(v)
    }

    #[inline]
    fn vertex_home(&self, v: VertexId) -> MachineId {
        match &self.shared.shard_map {
            None => self.shared.homes.owner(v),
            Some(m) => m.owner(v, self.machine),
        }
    }

    /// This machine's location cache, unless caching is off (`cache_bytes_max = 0`).
    fn cache(&self) -> Option<&LocationCache> {
        self.shared.caches[self.machine as usize].as_ref()
    }

    /// Reads the value at `addr` into `self.value`; false if its header does not match.
    fn fetch(&mut self, home: MachineId, addr: Addr) -> Result<bool> {
        self.fetch_counting(home, addr, None)
    }

    /// [`Worker::fetch`] that also counts an access for the monitor in the
    /// location cache (`record`: key, its address word, the time to stamp a
    /// new entry with) while the READ is in flight, so the counting costs a
    /// remote GET no time of its own (Pragh 4.4's monitor rides on reads).
    fn fetch_counting(
        &mut self,
        home: MachineId,
        addr: Addr,
        record: Option<(Key, u64, u64)>,
    ) -> Result<bool> {
        let holder = addr.holder(home);
        let bytes = (addr.size_units() * 8) as usize;
        if self.value.len() < bytes {
            self.value.resize(bytes, 0);
        }
        let vr = self.values_region(holder);
        let offset = addr.offset_units() * 8;
        let buf = &mut self.value[..bytes];
        match (record, self.shared.caches[self.machine as usize].as_ref()) {
            (Some((key, word, now)), Some(cache)) => {
                // Kept absolute, as every cached word (`cache_form`).
                let word = cache_form(home, word).unwrap_or(word);
                self.port
                    .read_overlapped(holder, vr, offset, buf, &mut || {
                        cache.record(key, word, now)
                    })?
            }
            _ => self.port.read(holder, vr, offset, buf)?,
        }
        self.stats.values_read += 1;
        self.stats.values_read_remote += (holder != self.machine) as u64;
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

    /// A buffer of `len` bytes, reusing one handed back by an earlier
    /// completion. Its contents are unspecified (zero or an earlier
    /// request's bytes): every caller overwrites them or fills them.
    fn buffer(&mut self, len: usize) -> Vec<u8> {
        // One of the last few spares that is long enough needs no
        // zero-filling (a value READ after a bucket READ would otherwise
        // clear the whole value first).
        let n = self.spare.len();
        if let Some(i) = (n.saturating_sub(4)..n)
            .rev()
            .find(|&i| self.spare[i].len() >= len)
        {
            let mut b = self.spare.swap_remove(i);
            b.truncate(len);
            return b;
        }
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

    /// Allocates a block in this machine's value region and WRITEs `bytes`
    /// (a whole value, header included) into it: the first half of every
    /// publish sequence (invariant P1). The guard frees the block if the
    /// WRITE fails or the caller gives up before publishing it.
    fn write_block<'a>(
        &mut self,
        alloc: &'a ValueAllocator,
        bytes: &[u8],
    ) -> Result<Unpublished<'a>> {
        debug_assert!(bytes.len().is_multiple_of(8) && bytes.len() >= 8);
        let block = Unpublished::alloc(alloc, bytes.len() as u64 / 8, self.port.now_ns())?;
        let vr = self.values_region(self.machine);
        self.port
            .write(self.machine, vr, block.offset_units() * 8, bytes)?;
        Ok(block)
    }

    /// The second half: CASes the address word at byte `offset` of `home`'s
    /// key region from `expected` to `new`, which names `block`. True if the
    /// block is published; false if the CAS lost (the block is freed). A CAS
    /// that fails with a peer error may still have been applied (fabric
    /// guarantee 4): the block is then leaked, never freed.
    fn cas_publish(
        &mut self,
        mut block: Unpublished<'_>,
        home: MachineId,
        offset: u64,
        expected: u64,
        new: Addr,
    ) -> Result<bool> {
        debug_assert_eq!(new.offset_units(), block.offset_units());
        let kr = self.keys_region(home);
        block.publishing();
        let prev = self.port.cas(home, kr, offset, expected, new.encode())?;
        if prev == expected {
            block.published();
            Ok(true)
        } else {
            block.refused();
            Ok(false)
        }
    }
}

impl<F: Fabric> Drop for Worker<F> {
    /// Hands the recent table's pending hits to the location cache, and
    /// the worker's GET counts to the store's ([`crate::Store::get_counts`]).
    fn drop(&mut self) {
        if let Some(c) = self.shared.caches[self.machine as usize].as_ref() {
            self.recent.flush(c);
        }
        use std::sync::atomic::Ordering::Relaxed;
        self.shared.gets[0].fetch_add(self.stats.values_read, Relaxed);
        self.shared.gets[1].fetch_add(self.stats.values_read_remote, Relaxed);
    }
}

/// An address word as the location cache keeps it: absolute, a value at
/// the key's home named `Remote(home)`, so that it keeps its meaning when a
/// slot move changes the key's home (a `Local` word means "in the home's
/// region"). `None` for a value too large for a remote word (not cached).
#[inline]
pub(crate) fn cache_form(home: MachineId, word: u64) -> Option<u64> {
    match Addr::decode(word)? {
        Addr::Local {
            size_units,
            offset_units,
        } => Addr::remote(home, size_units, offset_units)
            .ok()
            .map(Addr::encode),
        Addr::Remote { .. } => Some(word),
    }
}

/// A cached word as `home`'s table holds it (the inverse of [`cache_form`]),
/// so a CAS at the home can expect it.
#[inline]
pub(crate) fn table_form(home: MachineId, word: u64) -> u64 {
    match Addr::decode(word) {
        Some(Addr::Remote {
            machine,
            size_units,
            offset_units,
        }) if machine == home => Addr::local(size_units, offset_units).map_or(word, Addr::encode),
        _ => word,
    }
}

#[cfg(test)]
mod cache_form_tests {
    use super::{cache_form, table_form};
    use crate::addr::{moved_word, Addr, LOCAL_SIZE_UNITS_MAX};

    #[test]
    fn a_cached_word_names_its_machine_whatever_the_home() {
        let at_home = Addr::local(3, 40).unwrap().encode();
        let abs = cache_form(2, at_home).unwrap();
        assert_eq!(
            Addr::decode(abs).unwrap().holder(7),
            2,
            "still machine 2 once homed at 7"
        );
        assert_eq!(table_form(2, abs), at_home, "back to the home's form");
        assert_eq!(
            table_form(7, abs),
            abs,
            "another home names machine 2 remotely"
        );
        let away = Addr::remote(5, 3, 40).unwrap().encode();
        assert_eq!(cache_form(2, away), Some(away));
        assert_eq!(table_form(5, away), Addr::local(3, 40).unwrap().encode());
        // Too large to name remotely, or no value: not cached.
        let huge = Addr::local(LOCAL_SIZE_UNITS_MAX, 0).unwrap().encode();
        assert_eq!(cache_form(2, huge), None);
        assert_eq!(cache_form(2, moved_word(1)), None);
        assert_eq!(cache_form(2, 0), None);
    }
}
