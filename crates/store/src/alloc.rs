//! The value-region allocator of one machine (Pragh 2.1: variable-sized values
//! stored in a value region, 8-byte aligned).
//!
//! Metadata lives in the owning machine's process, not in the region: only the
//! owner allocates in its region. Blocks come from a bump pointer and are
//! recycled through size-class free lists: exact classes up to
//! [`EXACT_CLASSES`] units, then four classes per power of two (at most 25%
//! waste). A block's class is a function of the value's size, so freeing needs
//! only the address word's size.
//!
//! Freed memory is not reused at once. An out-of-place update or a migration
//! leaves readers that fetched the old address a moment ago; they must be able
//! to read the old header and find it zeroed rather than find someone else's
//! value there. So blocks are *retired* with a timestamp and only returned to
//! the free lists after the reclaim lease (default 60 s, Pragh 4.1) has passed.
//!
//! The allocator also keeps a registry of its allocated blocks (offset, size,
//! a generation, when it was allocated, whether it is retired), sharded by
//! offset. It is what the value-region scan (`scan.rs`, Pragh 5) walks: a
//! block's header cannot say its size once it was zeroed, and a leaked block
//! (a migration whose reclaim-ring write never happened) has exactly such a
//! header. The generation lets the scan free a block only if it is still the
//! allocation it watched ([`ValueAllocator::free_if_unchanged`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::{Result, StoreError};
use locus_fabric::MachineId;

/// Sizes (in units) that have a class of their own.
pub const EXACT_CLASSES: u64 = 64;

/// The block size (units) a value of `size_units` occupies.
pub fn block_units(size_units: u64) -> u64 {
    debug_assert!(size_units > 0);
    if size_units <= EXACT_CLASSES {
        return size_units;
    }
    // Four steps per power of two: round up to a multiple of 2^(p-2).
    let p = 63 - size_units.leading_zeros() as u64; // floor(log2)
    let step = 1u64 << (p - 2);
    size_units.div_ceil(step) * step
}

fn class_of(block: u64) -> usize {
    if block <= EXACT_CLASSES {
        return block as usize;
    }
    let p = 63 - block.leading_zeros() as u64;
    let step = 1u64 << (p - 2);
    let quarter = block / step - 4; // 0..4 (block = (4 + q) * step)
    EXACT_CLASSES as usize + 1 + ((p - 6) * 4 + quarter) as usize
}

const CLASSES: usize = EXACT_CLASSES as usize + 1 + 60 * 4;

/// Shards of the block registry (by a hash of the offset's run).
const REGISTRY_SHARDS: usize = 64;
/// Offsets in one run of 2^this units (512 KiB) share a registry shard, so
/// consecutive allocations extend one shard (`alloc/registry.rs`).
const REGISTRY_RUN_SHIFT: u32 = 16;

mod registry;

use registry::{BlockInfo, Registry};

/// The freed blocks of one size class, with their count readable without
/// the lock: a bump allocation, the common case while a region fills, then
/// takes no lock to learn that the list is empty. A count read just before
/// another thread's push only means a bump allocation where a reuse was
/// possible.
#[derive(Debug, Default)]
struct FreeList {
    len: AtomicUsize,
    offsets: Mutex<Vec<u64>>,
}

impl FreeList {
    #[inline]
    fn pop(&self) -> Option<u64> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut v = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        let off = v.pop();
        self.len.store(v.len(), Ordering::Relaxed);
        off
    }

    fn push(&self, offset_units: u64) {
        let mut v = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        v.push(offset_units);
        self.len.store(v.len(), Ordering::Relaxed);
    }
}

/// An allocated block that is not retired, as [`ValueAllocator::live_blocks`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveBlock {
    /// Offset in the value region, in units.
    pub offset_units: u64,
    /// The size it was allocated for, in units (header included).
    pub size_units: u64,
    /// Distinguishes this allocation from a later one at the same offset.
    pub generation: u64,
    /// When it was allocated, on the fabric's clock.
    pub alloc_ns: u64,
}

struct Retired {
    at_ns: u64,
    offset_units: u64,
    size_units: u64,
}

/// One machine's allocator over `[base_units, capacity_units)` of its value region.
pub struct ValueAllocator {
    machine: MachineId,
    capacity_units: u64,
    next_units: AtomicU64,
    free: Vec<FreeList>,
    retired: Mutex<VecDeque<Retired>>,
    lease: Duration,
    live_units: AtomicU64,
    retired_units: AtomicU64,
    /// Allocated blocks by offset (see the module doc).
    registry: Vec<Mutex<Registry>>,
}

impl std::fmt::Debug for ValueAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueAllocator")
            .field("machine", &self.machine)
            .field("capacity_units", &self.capacity_units)
            .field("bumped_units", &self.next_units.load(Ordering::Relaxed))
            .finish()
    }
}

impl ValueAllocator {
    /// An allocator handing out `[base_units, capacity_units)`.
    pub fn new(machine: MachineId, base_units: u64, capacity_units: u64, lease: Duration) -> Self {
        ValueAllocator {
            machine,
            capacity_units,
            next_units: AtomicU64::new(base_units),
            free: (0..CLASSES).map(|_| FreeList::default()).collect(),
            retired: Mutex::new(VecDeque::new()),
            lease,
            live_units: AtomicU64::new(0),
            retired_units: AtomicU64::new(0),
            registry: (0..REGISTRY_SHARDS)
                .map(|_| Mutex::new(Registry::default()))
                .collect(),
        }
    }

    fn registry(&self, offset_units: u64) -> std::sync::MutexGuard<'_, Registry> {
        let i = crate::table::mix(offset_units >> REGISTRY_RUN_SHIFT) as usize % REGISTRY_SHARDS;
        self.registry[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, offset_units: u64, size_units: u64, now_ns: u64) -> u64 {
        let off = offset_units;
        let mut r = self.registry(off);
        // Generations need only differ between allocations at one offset,
        // which always lands in the same shard: the shard's counter will do.
        let generation = r.next_generation();
        let prev = r.insert(
            off,
            BlockInfo {
                size_units,
                generation,
                alloc_ns: now_ns,
                retired: false,
            },
        );
        assert!(
            prev.is_none(),
            "machine {}: block at unit {off} handed out twice",
            self.machine
        );
        off
    }

    /// Allocates room for a value of `size_units`; returns its offset in units.
    /// If the region is full, frees what the lease allows at `now_ns` (the
    /// fabric's clock) and tries once more.
    pub fn alloc(&self, size_units: u64, now_ns: u64) -> Result<u64> {
        let off = match self.try_alloc(size_units) {
            Some(off) => off,
            None if self.collect(now_ns) > 0 => self
                .try_alloc(size_units)
                .ok_or_else(|| self.full(size_units))?,
            None => return Err(self.full(size_units)),
        };
        self.register(off, size_units, now_ns);
        Ok(off)
    }

    fn full(&self, size_units: u64) -> StoreError {
        StoreError::RegionFull {
            machine: self.machine,
            requested_bytes: block_units(size_units) * 8,
            capacity_bytes: self.capacity_units * 8,
            retired_bytes: self.retired_units.load(Ordering::Relaxed) * 8,
        }
    }

    fn try_alloc(&self, size_units: u64) -> Option<u64> {
        let block = block_units(size_units);
        let class = class_of(block);
        if let Some(off) = self.free[class].pop() {
            self.live_units.fetch_add(block, Ordering::Relaxed);
            return Some(off);
        }
        // Bump allocation by CAS: never move the pointer past the end, so a
        // failed request cannot make room appear that another one then takes
        // twice (a fetch-add-then-undo would).
        let mut cur = self.next_units.load(Ordering::Relaxed);
        loop {
            let end = cur.checked_add(block)?;
            if end > self.capacity_units {
                return None;
            }
            match self.next_units.compare_exchange_weak(
                cur,
                end,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.live_units.fetch_add(block, Ordering::Relaxed);
                    return Some(cur);
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Returns a block to its free list at once. Only for blocks no reader can
    /// have an address of (never published, or retired for a full lease).
    pub fn free_now(&self, offset_units: u64, size_units: u64) {
        let known = self.registry(offset_units).remove(offset_units);
        debug_assert!(
            known.is_some_and(|b| block_units(b.size_units) == block_units(size_units)),
            "machine {}: freeing unit {offset_units} ({size_units} units) but the registry has {known:?}",
            self.machine
        );
        self.release(offset_units, size_units);
    }

    fn release(&self, offset_units: u64, size_units: u64) {
        let block = block_units(size_units);
        let live = self.live_units.fetch_sub(block, Ordering::Relaxed);
        debug_assert!(
            live >= block,
            "freeing {block} units with only {live} live: a double free"
        );
        self.free[class_of(block)].push(offset_units);
    }

    /// Retires a published block whose header was already zeroed, at
    /// `now_ns` on the fabric's clock; it is freed once the lease has passed.
    /// Also frees whatever has expired meanwhile.
    pub fn retire(&self, offset_units: u64, size_units: u64, now_ns: u64) {
        let now = now_ns;
        if let Some(b) = self.registry(offset_units).get_mut(offset_units) {
            b.retired = true;
        }
        self.retired_units
            .fetch_add(block_units(size_units), Ordering::Relaxed);
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(Retired {
                at_ns: now,
                offset_units,
                size_units,
            });
        self.collect(now);
    }

    /// Frees every retired block whose lease has expired by `now_ns`; returns how many.
    pub fn collect(&self, now_ns: u64) -> usize {
        let mut freed = 0;
        loop {
            let next = {
                let mut r = self.retired.lock().unwrap_or_else(|e| e.into_inner());
                match r.front() {
                    Some(x) if now_ns.saturating_sub(x.at_ns) >= self.lease.as_nanos() as u64 => {
                        r.pop_front()
                    }
                    _ => None,
                }
            };
            match next {
                Some(x) => {
                    self.retired_units
                        .fetch_sub(block_units(x.size_units), Ordering::Relaxed);
                    self.free_now(x.offset_units, x.size_units);
                    freed += 1;
                }
                None => return freed,
            }
        }
    }

    /// Every allocated block that is not retired (the scan's candidates), in
    /// no particular order. Takes each registry shard's lock in turn.
    pub fn live_blocks(&self) -> Vec<LiveBlock> {
        let mut out = Vec::new();
        for shard in &self.registry {
            let s = shard.lock().unwrap_or_else(|e| e.into_inner());
            out.extend(
                s.iter()
                    .filter(|(_, b)| !b.retired)
                    .map(|(o, b)| LiveBlock {
                        offset_units: o,
                        size_units: b.size_units,
                        generation: b.generation,
                        alloc_ns: b.alloc_ns,
                    }),
            );
        }
        out
    }

    /// True if a block starting at `offset_units` is allocated and not retired.
    pub fn holds(&self, offset_units: u64) -> bool {
        let off = offset_units;
        matches!(self.registry(off).get(off), Some(b) if !b.retired)
    }

    /// True if `block` is still that allocation and not retired.
    pub fn is_current(&self, block: &LiveBlock) -> bool {
        let off = block.offset_units;
        matches!(self.registry(off).get(off), Some(b) if b.generation == block.generation && !b.retired)
    }

    /// Frees `block` at once if it is still the same allocation (same
    /// generation) and not retired; true if it did. The scan's free: the
    /// caller has established that no address word names it.
    pub fn free_if_unchanged(&self, block: &LiveBlock) -> bool {
        let off = block.offset_units;
        {
            let mut r = self.registry(off);
            match r.get(off) {
                Some(b) if b.generation == block.generation && !b.retired => {
                    r.remove(off);
                }
                _ => return false,
            }
        }
        self.release(off, block.size_units);
        true
    }

    /// Bytes in live (allocated, not retired-and-freed) blocks.
    pub fn live_bytes(&self) -> u64 {
        self.live_units.load(Ordering::Relaxed) * 8
    }

    /// Bytes ever taken from the bump pointer (high-water mark).
    pub fn used_bytes(&self) -> u64 {
        self.next_units
            .load(Ordering::Relaxed)
            .min(self.capacity_units)
            * 8
    }

    /// Blocks waiting for their lease.
    pub fn retired_count(&self) -> usize {
        self.retired.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_cover_the_value_with_bounded_waste() {
        for s in 1..5000u64 {
            let b = block_units(s);
            assert!(b >= s, "{s} -> {b}");
            assert!(b * 4 <= s * 5 + 4, "waste over 25% for {s} -> {b}");
            assert_eq!(block_units(b), b, "a block size is its own class");
            assert!(class_of(b) < CLASSES);
        }
        let big = crate::addr::LOCAL_SIZE_UNITS_MAX;
        assert!(class_of(block_units(big)) < CLASSES);
    }

    #[test]
    fn classes_are_distinct_per_block_size() {
        let mut seen = std::collections::HashMap::new();
        for s in 1..100_000u64 {
            let b = block_units(s);
            if let Some(prev) = seen.insert(class_of(b), b) {
                assert_eq!(prev, b, "two block sizes share a class");
            }
        }
    }

    #[test]
    fn alloc_free_reuse_and_full_region() {
        let a = ValueAllocator::new(0, 8, 108, Duration::ZERO);
        let x = a.alloc(10, 0).unwrap();
        assert_eq!(x, 8);
        let y = a.alloc(10, 0).unwrap();
        assert_eq!(y, 18);
        a.free_now(x, 10);
        assert_eq!(a.alloc(10, 0).unwrap(), x, "freed block is reused");
        let e = a.alloc(200, 0).unwrap_err();
        assert!(e.to_string().contains("0 bytes are retired"), "{e}");
        assert!(
            matches!(
                e,
                StoreError::RegionFull {
                    requested_bytes: 1792,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            a.alloc(80, 0).unwrap(),
            28,
            "a failed allocation does not leak"
        );
    }

    #[test]
    fn concurrent_allocations_never_overlap_and_fail_only_when_full() {
        let a = ValueAllocator::new(0, 0, 10_000, Duration::ZERO);
        let got: Vec<Vec<(u64, u64)>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u64)
                .map(|t| {
                    let a = &a;
                    s.spawn(move || {
                        let mut mine = Vec::new();
                        for i in 0..2000u64 {
                            // Thread 0 keeps asking for blocks that cannot fit.
                            let size = if t == 0 && i % 2 == 0 {
                                20_000
                            } else {
                                1 + (i + t) % 7
                            };
                            if let Ok(off) = a.alloc(size, 0) {
                                mine.push((off, block_units(size)));
                            }
                        }
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<(u64, u64)> = got.into_iter().flatten().collect();
        all.sort_unstable();
        for w in all.windows(2) {
            assert!(
                w[0].0 + w[0].1 <= w[1].0,
                "blocks {:?} and {:?} overlap",
                w[0],
                w[1]
            );
        }
        let used: u64 = all.iter().map(|b| b.1).sum();
        assert!(all.last().map_or(0, |b| b.0 + b.1) <= 10_000);
        // Small requests only fail once the region is really (nearly) full.
        assert!(
            used > 10_000 - 7 || all.len() == 7000,
            "used {used} of 10000"
        );
    }

    #[test]
    fn retired_blocks_wait_for_the_lease() {
        let a = ValueAllocator::new(0, 0, 1000, Duration::from_secs(3600));
        let x = a.alloc(4, 0).unwrap();
        a.retire(x, 4, 1_000);
        assert_ne!(a.alloc(4, 0).unwrap(), x, "not reused before the lease");
        assert_eq!(
            a.collect(1_000 + 3_599_999_999_999),
            0,
            "one nanosecond early"
        );
        assert_eq!(a.collect(1_000 + 3_600_000_000_000), 1);
        assert_eq!(a.alloc(4, 0).unwrap(), x, "reused after the lease");
    }
}
