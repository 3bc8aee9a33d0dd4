//! The reclaim ring: how a remote machine tells a value's owner "you may free
//! this old block" with one-sided operations only (Pragh 4.1, "Invalidation
//! and reclaim", step ❻ and footnotes 3-5).
//!
//! After a migration thread on the target machine has copied a value, swapped
//! the key's address word (CAS) and zeroed the old header (passive
//! invalidation), the old block on the source machine must be freed. The
//! target cannot free it (the allocator's metadata lives in the source's
//! process) and must not wait for the source's threads, so it appends the old
//! address to the source's *reclaim ring*, a circular buffer in a fabric region
//! of the source named [`REGION_NAME`] (footnote 5: "like the circular buffer"
//! of FaRM). The source's GC thread, the ring's only consumer, takes entries
//! out, holds each for the reclaim lease and only then frees its block with
//! [`crate::alloc::ValueAllocator::free_now`]: a worker that fetched the old
//! address just before the swap may still read there, and must find the zeroed
//! header rather than someone else's value.
//!
//! # Layout
//! ```text
//!  byte 0          8          16         24                 16 + 8*capacity
//!  +----------+----------+----------+----------+-- ... --+------------------+
//!  | head u64 | tail u64 | slot 0   | slot 1   |         | slot capacity-1  |
//!  +----------+----------+----------+----------+-- ... --+------------------+
//!   written by  advanced    entry of ticket t lives in slot t % capacity
//!   the owner   by producers
//!   only        with CAS
//! ```
//! All words are little-endian u64. `head` and `tail` are *tickets*: counters
//! that only grow (2^64 appends never happen), not slot indices. Tickets
//! `[head, tail)` are reserved and not yet consumed; `tail - head <= capacity`.
//! An entry is a nonzero word, the retired block as a local-type address word
//! of the owner's value region (`Addr::local(size_units, offset_units).encode()`,
//! see [`crate::addr`]); a zero slot means "empty, or reserved and not yet
//! written". The capacity need not be a power of two.
//!
//! # Producer (any machine, one-sided): [`append`]
//! 1. READ `head` and `tail` with one 16-byte READ, *fenced* (footnote 3): it
//!    starts only after every earlier request of the port has completed, so
//!    the key's CAS and the header-zeroing WRITE of the migration are done
//!    before the owner can learn of the block.
//! 2. If `tail - head >= capacity` the ring is full: return [`Appended::Full`]
//!    and write nothing (back-pressure; the caller decides to retry, see
//!    [`append_blocking`]).
//! 3. CAS `tail` from `t` to `t + 1`. On success the producer owns ticket `t`;
//!    on failure it retries with the word the CAS returned (at most
//!    [`APPEND_CAS_RETRIES_MAX`] times, then [`Appended::Contended`]).
//! 4. WRITE the entry into slot `t % capacity`.
//!
//! Why the slot is free when the CAS succeeds: `head` only grows, so the
//! `head` a producer read is at most the `head` at the moment of its CAS, and
//! `t - head_then <= t - head_read < capacity`; the slot's previous ticket
//! `t - capacity` is below `head`, so it was consumed and (see below) zeroed.
//! A multi-word READ is not atomic (fabric guarantee 2), but a torn pair only
//! errs on the safe side: an old `head` with a newer `tail` may report Full
//! early; a newer `head` with an old `tail` makes the CAS fail.
//!
//! # Consumer (the owner's GC, one per machine): [`Collector`]
//! From its private copy of `head`, the collector READs the slots while they
//! are nonzero (up to `tail`), stamps each entry with the caller's `now_ns`
//! into a local FIFO, WRITEs zeros over those slots, and only *then* WRITEs
//! the new `head`. Zero before advancing: a producer may reserve a slot again
//! only once it has seen `head` pass the slot's previous ticket, and by then
//! the zero is visible (fabric guarantee 4), so a reserved slot is always
//! empty until its own producer writes it, and the consumer never mistakes an
//! old entry for a new one. Entries leave the FIFO once `stamp + lease_ns <=
//! now_ns`, in stamp order. Stamping at observation is conservative: it is
//! after the retire, so the block waits at least the lease.
//!
//! # Invariants
//! - **No entry lost, none overwritten:** a slot is written only by the holder
//!   of its ticket, and only while `head` is within `capacity` of that ticket.
//! - **None consumed twice:** only the collector advances `head`, past slots it
//!   has taken and zeroed; entries enter its FIFO only after the zeroing
//!   WRITE succeeded.
//! - **Full ring = back-pressure:** a producer never waits inside the ring and
//!   never overwrites; it is told [`Appended::Full`].
//! - **Bounded:** the ring holds `capacity` entries; the collector's FIFO holds
//!   at most [`CollectorConfig::pending_entries_max`]; when that is full the
//!   collector stops draining the ring, the ring fills, and producers see Full.
//!   So the memory held by blocks waiting out their lease is bounded too.
//!
//! The consumer takes entries in ticket order and stops at the first slot that
//! is reserved but not yet written. A producer that fails (or whose machine
//! dies) between its CAS and its WRITE leaves that slot empty for good and
//! wedges the ring: later entries are never collected and producers
//! eventually see Full. An error from [`append`] after the CAS is therefore
//! serious; the caller must not append the same block again (if the WRITE
//! did land, the block would be freed twice). Pragh 5 recovers leaked value
//! memory by scanning the value region in the background.
//!
//! # Time is a parameter
//! [`Collector::collect`] takes `now_ns` and never reads a clock: Pragh keeps
//! the lease with PTP-synchronised clocks (footnote 4), a simulation drives
//! time from its seed, and tests check lease expiry with exact instants
//! instead of sleeping.
//!
//! An append costs a READ, a CAS and a WRITE, where Pragh's single WRITE
//! suffices for a ring with one writer; the CAS is what lets many migration
//! threads of many machines share one ring without overwriting each other.

use std::collections::VecDeque;

use locus_fabric::{Fabric, MachineId, Port, RegionId, RegionInfo, WorkRequest, REGION_BYTES_MAX};

use crate::addr::Addr;
use crate::{Result, StoreError};

/// The name of every machine's reclaim ring region.
pub const REGION_NAME: &str = "reclaim";
/// Byte offset of the `head` word (next ticket to consume; written by the owner only).
pub const HEAD_OFFSET: u64 = 0;
/// Byte offset of the `tail` word (next ticket to reserve; advanced by CAS).
pub const TAIL_OFFSET: u64 = 8;
/// Bytes before the first slot.
pub const HEADER_BYTES: u64 = 16;
/// Default ring capacity, in entries (512 KiB of slots).
pub const CAPACITY_DEFAULT: u64 = 1 << 16;
/// Largest capacity, in entries: the region must fit in a fabric region.
pub const CAPACITY_MAX: u64 = (REGION_BYTES_MAX - HEADER_BYTES) / 8;
/// Failed `tail` CASes one [`append`] tolerates before it reports [`Appended::Contended`].
pub const APPEND_CAS_RETRIES_MAX: u32 = 64;
/// Largest [`CollectorConfig::scan_entries_max`] (bounds the collector's scratch buffer).
pub const SCAN_ENTRIES_LIMIT: usize = 1 << 20;
/// Attempts of [`append_blocking`] that spin before it starts yielding the CPU.
const SPINS_BEFORE_YIELD: u32 = 16;

/// The shape of a reclaim ring region; producers and the owner must agree on it
/// (derive it from the region with [`RingLayout::from_region_bytes`] or [`lookup`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLayout {
    /// Entries the ring holds, `1..=CAPACITY_MAX`.
    pub capacity: u64,
}

impl Default for RingLayout {
    fn default() -> Self {
        RingLayout {
            capacity: CAPACITY_DEFAULT,
        }
    }
}

impl RingLayout {
    /// A validated layout of `capacity` entries.
    pub fn new(capacity: u64) -> Result<RingLayout> {
        let layout = RingLayout { capacity };
        layout.validate()?;
        Ok(layout)
    }

    /// Rejects a capacity of 0 or one whose region would exceed the fabric's limit.
    pub fn validate(&self) -> Result<()> {
        if self.capacity == 0 || self.capacity > CAPACITY_MAX {
            return Err(StoreError::Config(format!(
                "reclaim ring capacity = {} entries but must be 1..={CAPACITY_MAX}",
                self.capacity
            )));
        }
        Ok(())
    }

    /// Bytes of the region: the header plus one word per entry.
    pub fn region_bytes(&self) -> u64 {
        debug_assert!(self.validate().is_ok(), "{self:?}");
        HEADER_BYTES + self.capacity * 8
    }

    /// The layout of an existing region of `len_bytes`.
    pub fn from_region_bytes(len_bytes: u64) -> Result<RingLayout> {
        if len_bytes <= HEADER_BYTES || !len_bytes.is_multiple_of(8) {
            return Err(StoreError::Config(format!(
                "a reclaim ring region of {len_bytes} bytes has no room for a slot; \
                 it needs {HEADER_BYTES} header bytes plus 8 bytes per entry"
            )));
        }
        RingLayout::new((len_bytes - HEADER_BYTES) / 8)
    }

    /// Byte offset of the slot that holds ticket `ticket`.
    pub fn slot_offset(&self, ticket: u64) -> u64 {
        HEADER_BYTES + (ticket % self.capacity) * 8
    }
}

/// Registers the ring region on `machine` (hosted by this process); zero-filled, so empty.
pub fn register<F: Fabric>(fabric: &F, machine: MachineId, layout: RingLayout) -> Result<RegionId> {
    layout.validate()?;
    Ok(fabric
        .register(machine, REGION_NAME, layout.region_bytes())?
        .id)
}

/// Finds `machine`'s ring region (any machine) and derives its layout from its size.
pub fn lookup<F: Fabric>(fabric: &F, machine: MachineId) -> Result<(RegionId, RingLayout)> {
    let RegionInfo { id, len_bytes } = fabric.lookup(machine, REGION_NAME)?;
    Ok((id, RingLayout::from_region_bytes(len_bytes)?))
}

/// The ring's two counters as read together (not atomically, see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Next ticket the owner will consume.
    pub head: u64,
    /// Next ticket a producer will reserve.
    pub tail: u64,
}

/// Reads `head` and `tail` of `target`'s ring with one 16-byte READ.
pub fn read_counters<P: Port>(
    port: &mut P,
    target: MachineId,
    region: RegionId,
) -> Result<Counters> {
    let mut b = [0u8; 16];
    port.read(target, region, HEAD_OFFSET, &mut b)?;
    Ok(decode_counters(&b))
}

fn decode_counters(b: &[u8]) -> Counters {
    let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    Counters {
        head: word(0),
        tail: word(1),
    }
}

/// What [`append`] did. Anything but `Done` wrote nothing.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The entry is in the ring under this ticket (slot `ticket % capacity`).
    Done {
        /// The ticket reserved.
        ticket: u64,
    },
    /// The ring held `capacity` unconsumed entries: back-pressure, try later.
    Full,
    /// Other producers won [`APPEND_CAS_RETRIES_MAX`] CAS races in a row; try again.
    Contended,
}

/// Appends `entry` (a nonzero local-type address word of `target`'s value
/// region) to `target`'s ring, one-sided, and waits for it to land.
///
/// On `Err` after the reservation the slot may stay empty and wedge the ring,
/// or the entry may have landed: do not append the same block again (see the
/// module doc).
pub fn append<P: Port>(
    port: &mut P,
    target: MachineId,
    region: RegionId,
    layout: RingLayout,
    entry: u64,
) -> Result<Appended> {
    // A zero entry would read as "not yet written" and wedge the ring for good.
    assert_ne!(entry, 0, "a reclaim entry must be a nonzero address word");
    debug_assert!(
        matches!(Addr::decode(entry), Some(Addr::Local { .. })),
        "a reclaim entry is a local-type address word, got {entry:#x}"
    );
    debug_assert!(layout.validate().is_ok(), "{layout:?}");
    // Fenced (Pragh footnote 3): the migration's CAS and invalidation, posted
    // earlier on this port, complete before the owner can learn of the block.
    let read = |port: &mut P, fence: bool| -> Result<Counters> {
        let mut wr = WorkRequest::read(0, target, region, HEAD_OFFSET, 16);
        if fence {
            wr = wr.fenced();
        }
        let data = port.execute(wr)?.into_buf().expect("a READ returns data");
        Ok(decode_counters(&data))
    };
    let mut c = read(port, true)?;
    // Whether `c.head` was read together with `c.tail` (else it may be old).
    let mut fresh = true;
    let mut cas_failures = 0u32;
    loop {
        if c.tail.saturating_sub(c.head) >= layout.capacity {
            if fresh {
                return Ok(Appended::Full);
            }
            // Only our head is old; look again before reporting Full.
            c = read(port, false)?;
            fresh = true;
            continue;
        }
        let prev = port.cas(target, region, TAIL_OFFSET, c.tail, c.tail + 1)?;
        if prev == c.tail {
            port.write_word(target, region, layout.slot_offset(c.tail), entry)?;
            return Ok(Appended::Done { ticket: c.tail });
        }
        debug_assert!(prev > c.tail, "tail went back from {} to {prev}", c.tail);
        cas_failures += 1;
        if cas_failures > APPEND_CAS_RETRIES_MAX {
            return Ok(Appended::Contended);
        }
        c.tail = prev;
        fresh = false;
    }
}

/// [`append`], retrying a full or contended ring up to `spins_max` more times
/// (spinning, then yielding with [`Port::relax`]); returns the last outcome.
pub fn append_blocking<P: Port>(
    port: &mut P,
    target: MachineId,
    region: RegionId,
    layout: RingLayout,
    entry: u64,
    spins_max: u32,
) -> Result<Appended> {
    let mut spins = 0u32;
    loop {
        let outcome = append(port, target, region, layout, entry)?;
        if matches!(outcome, Appended::Done { .. }) || spins >= spins_max {
            return Ok(outcome);
        }
        spins += 1;
        if spins <= SPINS_BEFORE_YIELD {
            std::hint::spin_loop();
        } else {
            // Yields the CPU; under the simulated fabric, a scheduling point
            // that lets the consumer run.
            port.relax();
        }
    }
}

/// Settings of a [`Collector`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectorConfig {
    /// How long an entry is held after the collector first sees it, in ns.
    pub lease_ns: u64,
    /// Entries taken from the ring and waiting out their lease, at most; when
    /// reached, the collector leaves the rest in the ring (back-pressure).
    pub pending_entries_max: usize,
    /// Ring slots one [`Collector::collect`] call takes at most (bounds a GC pass).
    pub scan_entries_max: usize,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig {
            lease_ns: 60_000_000_000,
            pending_entries_max: 1 << 20,
            scan_entries_max: 4096,
        }
    }
}

impl CollectorConfig {
    /// Rejects limits that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.pending_entries_max == 0 {
            return Err(StoreError::Config(
                "reclaim collector pending_entries_max must be positive".into(),
            ));
        }
        if self.scan_entries_max == 0 || self.scan_entries_max > SCAN_ENTRIES_LIMIT {
            return Err(StoreError::Config(format!(
                "reclaim collector scan_entries_max = {} but must be 1..={SCAN_ENTRIES_LIMIT}",
                self.scan_entries_max
            )));
        }
        Ok(())
    }
}

/// The single consumer of one machine's ring: its GC thread's state.
#[derive(Debug)]
pub struct Collector {
    machine: MachineId,
    region: RegionId,
    layout: RingLayout,
    config: CollectorConfig,
    /// Next ticket to consume; the truth (the ring's `head` word may lag it
    /// after a failed WRITE, which only makes producers more careful).
    head: u64,
    /// The `head` last written to the ring.
    head_published: u64,
    /// Taken entries with the instant they were first seen, stamps non-decreasing.
    pending: VecDeque<(u64, u64)>,
    last_stamp_ns: u64,
    scratch: Vec<u8>,
    zeros: Vec<u8>,
}

impl Collector {
    /// Opens the collector of `port`'s machine's ring, starting at its `head`.
    /// Entries a dropped collector still held are no longer in the ring: they
    /// leak (never freed twice). One collector per ring at a time.
    pub fn open<P: Port>(
        port: &mut P,
        region: RegionId,
        layout: RingLayout,
        config: CollectorConfig,
    ) -> Result<Collector> {
        layout.validate()?;
        config.validate()?;
        let machine = port.machine();
        // A region smaller than the layout fails here (out of bounds), not later.
        port.read_word(machine, region, layout.region_bytes() - 8)?;
        let c = read_counters(port, machine, region)?;
        if c.head > c.tail || c.tail - c.head > layout.capacity {
            return Err(StoreError::RingCorrupt {
                machine,
                head: c.head,
                tail: c.tail,
                capacity: layout.capacity,
            });
        }
        let scan_words = config.scan_entries_max.min(layout.capacity as usize);
        Ok(Collector {
            machine,
            region,
            layout,
            config,
            head: c.head,
            head_published: c.head,
            pending: VecDeque::new(),
            last_stamp_ns: 0,
            scratch: vec![0; scan_words * 8],
            zeros: vec![0; scan_words * 8],
        })
    }

    /// Takes new entries from the ring (stamped `now_ns`) and appends to `out`
    /// those whose lease has passed by `now_ns`, oldest first; returns how many.
    /// The caller frees each (an `Addr::Local` word) with `ValueAllocator::free_now`.
    pub fn collect<P: Port>(
        &mut self,
        port: &mut P,
        now_ns: u64,
        out: &mut Vec<u64>,
    ) -> Result<usize> {
        assert_eq!(
            port.machine(),
            self.machine,
            "a ring is collected by its owner only"
        );
        let before = out.len();
        // Release first, so a full FIFO makes room for this pass.
        self.release(now_ns, out);
        self.take(port, now_ns)?;
        self.release(now_ns, out);
        Ok(out.len() - before)
    }

    /// Moves written entries from the ring to the FIFO, zeroing their slots, then publishes `head`.
    fn take<P: Port>(&mut self, port: &mut P, now_ns: u64) -> Result<()> {
        let (machine, region, capacity) = (self.machine, self.region, self.layout.capacity);
        let tail = port.read_word(machine, region, TAIL_OFFSET)?;
        debug_assert!(tail >= self.head && tail - self.head <= capacity);
        let stamp = now_ns.max(self.last_stamp_ns);
        self.last_stamp_ns = stamp;
        let mut taken = 0usize;
        loop {
            let room = self.config.pending_entries_max - self.pending.len();
            let to_wrap = capacity - self.head % capacity;
            let reserved = tail.saturating_sub(self.head);
            let want = [
                (self.config.scan_entries_max - taken) as u64,
                room as u64,
                to_wrap,
                reserved,
            ]
            .into_iter()
            .min()
            .unwrap_or(0) as usize;
            if want == 0 {
                break;
            }
            let offset = self.layout.slot_offset(self.head);
            port.read(machine, region, offset, &mut self.scratch[..want * 8])?;
            // Stop at the first reserved-but-unwritten slot: ticket order.
            let n = self.scratch[..want * 8]
                .chunks_exact(8)
                .take_while(|w| w.iter().any(|&b| b != 0))
                .count();
            if n == 0 {
                break;
            }
            // Zero before publishing head (module doc), and before keeping the
            // entries, so a failed WRITE cannot lead to taking them twice.
            port.write(machine, region, offset, &self.zeros[..n * 8])?;
            for w in self.scratch[..n * 8].chunks_exact(8) {
                let entry = u64::from_le_bytes(w.try_into().expect("8 bytes"));
                debug_assert!(
                    matches!(Addr::decode(entry), Some(Addr::Local { .. })),
                    "machine {machine}'s reclaim ring holds {entry:#x}, not a local address word"
                );
                self.pending.push_back((stamp, entry));
            }
            self.head += n as u64;
            taken += n;
            if n < want {
                break;
            }
        }
        debug_assert!(self.pending.len() <= self.config.pending_entries_max);
        if self.head != self.head_published {
            port.write_word(machine, region, HEAD_OFFSET, self.head)?;
            self.head_published = self.head;
        }
        Ok(())
    }

    fn release(&mut self, now_ns: u64, out: &mut Vec<u64>) {
        while let Some(&(stamp, entry)) = self.pending.front() {
            if stamp.saturating_add(self.config.lease_ns) > now_ns {
                break;
            }
            self.pending.pop_front();
            out.push(entry);
        }
    }

    /// The machine whose ring this is.
    pub fn machine(&self) -> MachineId {
        self.machine
    }

    /// The ring's region on that machine.
    pub fn region(&self) -> RegionId {
        self.region
    }

    /// The ring's layout.
    pub fn layout(&self) -> RingLayout {
        self.layout
    }

    /// Next ticket to consume.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The entries taken from the ring and still waiting out their lease
    /// (local-type address words), for the value-region scan to leave alone.
    pub fn pending_words(&self) -> impl Iterator<Item = u64> + '_ {
        self.pending.iter().map(|&(_, e)| e)
    }

    /// Entries taken from the ring and still waiting out their lease.
    pub fn pending_entries(&self) -> usize {
        self.pending.len()
    }

    /// When the oldest pending entry's lease passes (when the GC has work next), if any.
    pub fn next_release_ns(&self) -> Option<u64> {
        self.pending
            .front()
            .map(|&(stamp, _)| stamp.saturating_add(self.config.lease_ns))
    }
}

#[cfg(test)]
mod tests;
