//! Registered memory: regions of atomic words and per-machine inboxes.
//!
//! A region is an array of `AtomicU64`, so concurrent one-sided operations
//! from any thread are data-race free and every aligned word is atomic, the
//! guarantee RDMA gives (Pragh footnote 2). Regions are zero-filled pages
//! mapped with `mmap(MAP_NORESERVE)`: nothing is reserved or backed until it
//! is written, so a 4 GiB value region costs nothing until used, and a
//! region larger than the machine's free memory is refused only if the
//! kernel's strict overcommit accounting is on (`vm.overcommit_memory = 2`),
//! with [`FabricError::NoMemory`], not by the heuristic that refuses one
//! mapping larger than all of memory (the store sizes its value regions with
//! room for migrations it may never make). A machine
//! created with `pin_memory` instead touches every page of a region when it
//! is registered, as RDMA registration (`ibv_reg_mr`) pins memory, so the
//! first write to a page does not pay a page fault inside a measurement.
//!
//! A region's words are [`crate::sync::AtomicU64`]: `std`'s, or loom's under
//! `cfg(loom)`. Loom atomics cannot be conjured from zeroed memory, so under
//! loom a region is a boxed slice of atomics created one by one (loom models
//! use regions of a few words); the methods are the same.

use std::collections::VecDeque;
#[cfg(not(loom))]
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};

use crate::sync::{self, Ordering};

use crate::{FabricError, MachineId, Message, RegionId, RegionInfo, Result};

/// Largest region: 2^34 words of 8 bytes = 128 GiB, the reach of the 34-bit
/// offset in the address word (Pragh 4.1).
pub const REGION_BYTES_MAX: u64 = 1 << 37;

/// Most bytes [`Region::prefetch`] asks for at once: two lines, the whole
/// of a bucket or a small value. A longer request's copy reads on from
/// there, where the hardware's stream prefetcher follows it; asking for
/// every line of 1 KB values (and of the blocks they land in) made one
/// thread's migrations about 10% slower than asking for two (stop 30 in
/// docs/results.md), as if the hints crowded out each other and the copies.
pub const PREFETCH_BYTES_MAX: u64 = 128;

/// A zero-initialised, fixed-size array of atomic words.
pub struct Region {
    name: String,
    #[cfg(not(loom))]
    words: NonNull<sync::AtomicU64>,
    #[cfg(loom)]
    words: Box<[sync::AtomicU64]>,
    len_words: usize,
    /// Set when its machine crashed: a port that still holds the region
    /// (`hosted::RegionCache`) must fail instead of reading or writing the
    /// memory of an incarnation that ended. Beside `len_words`, which every
    /// access reads, so checking it costs no extra cache line.
    gone: AtomicBool,
}

// SAFETY: the region owns its allocation and only hands out shared references
// to `AtomicU64`s, which are `Sync`.
#[cfg(not(loom))]
unsafe impl Send for Region {}
// SAFETY: as above; all access goes through atomics.
#[cfg(not(loom))]
unsafe impl Sync for Region {}

impl Region {
    /// Allocates a zeroed region of `len_bytes` (a multiple of 8).
    pub fn new(name: &str, len_bytes: u64) -> Result<Region> {
        if !len_bytes.is_multiple_of(8) {
            return Err(FabricError::Misaligned {
                offset: 0,
                len: len_bytes,
            });
        }
        if len_bytes > REGION_BYTES_MAX {
            return Err(FabricError::RegionTooLarge {
                name: name.to_string(),
                len: len_bytes,
                limit: REGION_BYTES_MAX,
            });
        }
        let len_words = (len_bytes / 8) as usize;
        #[cfg(loom)]
        let words = (0..len_words).map(|_| sync::AtomicU64::new(0)).collect();
        #[cfg(not(loom))]
        let words = if len_words == 0 {
            NonNull::dangling()
        } else {
            // SAFETY: a fresh private anonymous mapping; no existing memory is
            // touched. Anonymous pages read as zero, and an all-zero bit
            // pattern is a valid AtomicU64 (same representation as u64).
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len_bytes as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(FabricError::NoMemory {
                    name: name.to_string(),
                    len: len_bytes,
                });
            }
            NonNull::new(ptr as *mut sync::AtomicU64).expect("mmap never returns null on success")
        };
        Ok(Region {
            name: name.to_string(),
            words,
            len_words,
            gone: AtomicBool::new(false),
        })
    }

    /// Faults in every page for writing without changing any word (a CAS of
    /// 0 to 0 per 4 KiB; LLVM turns an idempotent `fetch_or(0)` into a plain
    /// load, which would map the shared zero page), as RDMA registration pins.
    pub fn pin(&self) {
        const WORDS_PER_PAGE: usize = 4096 / 8;
        for word in self.words().iter().step_by(WORDS_PER_PAGE) {
            let _ = word.compare_exchange(0, 0, sync::Ordering::Relaxed, sync::Ordering::Relaxed);
        }
    }

    /// Asks the CPU to bring the lines of bytes `[offset, offset + len)` into
    /// its cache (at most [`PREFETCH_BYTES_MAX`] of them; out of bounds is
    /// ignored). A hint only: no word changes and nothing is checked. The
    /// in-process fabric uses it for requests about to be posted, so the copy
    /// a NIC's DMA would make does not stall the posting thread on a miss.
    /// With `for_write`, the lines are asked for in a state that lets them be
    /// written without another bus transaction.
    #[inline]
    pub fn prefetch(&self, offset: u64, len: u64, for_write: bool) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            let len_bytes = self.len_words as u64 * 8;
            if offset >= len_bytes {
                return;
            }
            let end = offset
                .saturating_add(len.min(PREFETCH_BYTES_MAX))
                .min(len_bytes);
            let base = self.words.as_ptr() as *const i8;
            let mut at = offset & !63;
            while at < end {
                // SAFETY: `at` is inside the region's mapping (`at < end <=
                // len_bytes`); a prefetch never faults or changes memory.
                unsafe {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0, _MM_HINT_T0};
                    let line = base.add(at as usize);
                    if for_write {
                        _mm_prefetch::<_MM_HINT_ET0>(line);
                    } else {
                        _mm_prefetch::<_MM_HINT_T0>(line);
                    }
                }
                at += 64;
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        {
            let _ = (offset, len, for_write);
        }
    }

    /// The region's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the region's machine crashed since it was registered (its
    /// memory is gone; see [`MachineMemory::incarnation`]).
    #[inline]
    pub fn is_gone(&self) -> bool {
        // Relaxed: an operation racing with the crash may land before it;
        // one ordered after the crash (any synchronisation) sees the flag.
        self.gone.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.len_words as u64 * 8
    }

    /// The words, as atomics.
    #[cfg(loom)]
    #[inline]
    pub fn words(&self) -> &[sync::AtomicU64] {
        &self.words
    }

    /// The words, as atomics.
    #[cfg(not(loom))]
    #[inline]
    pub fn words(&self) -> &[sync::AtomicU64] {
        // SAFETY: `words` points to `len_words` initialised atomics owned by self
        // (or is dangling with length 0).
        unsafe { std::slice::from_raw_parts(self.words.as_ptr(), self.len_words) }
    }

    /// Bounds and alignment check; returns the first word index.
    #[inline]
    pub fn check(
        &self,
        machine: MachineId,
        region: RegionId,
        offset: u64,
        len: u64,
    ) -> Result<usize> {
        crate::check_alignment(offset, len)?;
        match offset.checked_add(len) {
            Some(end) if end <= self.len_bytes() => Ok((offset / 8) as usize),
            _ => Err(FabricError::OutOfBounds {
                machine,
                region,
                offset,
                len,
                region_len: self.len_bytes(),
            }),
        }
    }

    /// Copies words starting at word `first` into `buf` (little-endian),
    /// each word read atomically. Long reads on x86-64 take
    /// [`wide::copy_words`], which keeps that guarantee at memcpy speed.
    #[inline]
    pub fn read_words(&self, first: usize, buf: &mut [u8]) {
        let words = &self.words()[first..first + buf.len() / 8];
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        if buf.len() >= wide::BYTES_MIN && wide::available() {
            wide::copy_words(words, buf);
            return;
        }
        for (w, chunk) in words.iter().zip(buf.chunks_exact_mut(8)) {
            chunk.copy_from_slice(&w.load(Ordering::Acquire).to_le_bytes());
        }
    }

    /// Stores `data` (little-endian words) starting at word `first`, each
    /// word stored atomically ([`wide::store_words`] for long writes on x86-64).
    #[inline]
    pub fn write_words(&self, first: usize, data: &[u8]) {
        let words = &self.words()[first..first + data.len() / 8];
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        if data.len() >= wide::BYTES_MIN && wide::available() {
            wide::store_words(words, data);
            return;
        }
        for (w, chunk) in words.iter().zip(data.chunks_exact(8)) {
            let v = u64::from_le_bytes(chunk.try_into().expect("chunks_exact(8)"));
            w.store(v, Ordering::Release);
        }
    }

    /// Copies `words` words from word `first` of this region to word
    /// `dst_first` of `dst`, each word loaded and stored atomically (a READ
    /// into the initiator's own memory, [`crate::Verb::ReadTo`]; overlapping
    /// ranges of one region end up unspecified, as for RDMA). Long copies on
    /// x86-64 take [`wide::move_words`].
    #[inline]
    pub fn copy_words_to(&self, first: usize, dst: &Region, dst_first: usize, words: usize) {
        let src = &self.words()[first..first + words];
        let out = &dst.words()[dst_first..dst_first + words];
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        if words * 8 >= wide::BYTES_MIN && wide::available() {
            wide::move_words(src, out);
            return;
        }
        for (s, d) in src.iter().zip(out) {
            d.store(s.load(Ordering::Acquire), Ordering::Release);
        }
    }

    /// Compare-and-swap on word `index`; returns the previous value.
    #[inline]
    pub fn cas_word(&self, index: usize, expected: u64, new: u64) -> u64 {
        match self.words()[index].compare_exchange(
            expected,
            new,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(prev) | Err(prev) => prev,
        }
    }

    /// Fetch-and-add on word `index`; returns the previous value.
    #[inline]
    pub fn fetch_add_word(&self, index: usize, add: u64) -> u64 {
        self.words()[index].fetch_add(add, Ordering::AcqRel)
    }
}

#[cfg(not(loom))]
impl Drop for Region {
    fn drop(&mut self) {
        if self.len_words > 0 {
            // SAFETY: mapped in `new` with exactly this length; no reference
            // to the words outlives the region.
            let rc = unsafe {
                libc::munmap(self.words.as_ptr() as *mut libc::c_void, self.len_words * 8)
            };
            debug_assert_eq!(rc, 0, "munmap of region '{}' failed", self.name);
        }
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("name", &self.name)
            .field("len_bytes", &self.len_bytes())
            .finish()
    }
}

/// A message waiting in an inbox, with the time it becomes visible.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) visible_at_ns: u64,
    pub(crate) message: Message,
}

/// The error of an access to a region its machine dropped when it crashed.
pub(crate) fn gone(machine: MachineId, region: RegionId) -> FabricError {
    FabricError::PeerUnavailable {
        machine,
        reason: format!(
            "region {region} of machine {machine} is gone: the machine crashed and its memory \
             with it; look its regions up by name again once it has restarted"
        ),
    }
}

/// The memory one machine exposes: its regions and its message inbox.
#[derive(Debug)]
pub struct MachineMemory {
    id: MachineId,
    /// By id, in registration order (a crash empties it: the restarted
    /// machine registers from id 0 again, as a restarted TCP node does).
    regions: RwLock<Vec<Option<Arc<Region>>>>,
    /// Crashes so far: ports and posted requests remember it, so that those
    /// of an incarnation that ended fail instead of acting on the new one.
    incarnation: AtomicU64,
    inbox: Mutex<VecDeque<Queued>>,
    inbox_messages_max: usize,
    /// The thread to unpark when a message is delivered (a service that
    /// parks until one comes), if any.
    waker: Mutex<Option<std::thread::Thread>>,
    pin_memory: bool,
    /// Modelled NIC: time (ns since the fabric's epoch) when its link is free.
    pub(crate) nic_free_ns: AtomicU64,
}

impl MachineMemory {
    /// An empty machine with an inbox of at most `inbox_messages_max` messages;
    /// with `pin_memory`, regions are faulted in when registered.
    pub fn new(id: MachineId, inbox_messages_max: usize, pin_memory: bool) -> Self {
        MachineMemory {
            id,
            regions: RwLock::new(Vec::new()),
            incarnation: AtomicU64::new(0),
            inbox: Mutex::new(VecDeque::new()),
            inbox_messages_max,
            waker: Mutex::new(None),
            pin_memory,
            nic_free_ns: AtomicU64::new(0),
        }
    }

    /// The machine's id.
    pub fn id(&self) -> MachineId {
        self.id
    }

    /// Registers a new zeroed region.
    pub fn register(&self, name: &str, len_bytes: u64) -> Result<RegionInfo> {
        let mut regions = self.regions.write().unwrap_or_else(|e| e.into_inner());
        if regions.iter().flatten().any(|r| r.name() == name) {
            return Err(FabricError::DuplicateRegion {
                machine: self.id,
                name: name.to_string(),
            });
        }
        if regions.len() >= u16::MAX as usize {
            return Err(FabricError::Config(format!(
                "machine {} has {} region ids, the most there are: register fewer regions",
                self.id,
                regions.len()
            )));
        }
        let region = Region::new(name, len_bytes)?;
        if self.pin_memory {
            region.pin();
        }
        let id = RegionId(regions.len() as u16);
        regions.push(Some(Arc::new(region)));
        Ok(RegionInfo { id, len_bytes })
    }

    /// Looks a region up by name.
    pub fn lookup(&self, name: &str) -> Result<RegionInfo> {
        let regions = self.regions.read().unwrap_or_else(|e| e.into_inner());
        regions
            .iter()
            .enumerate()
            .find_map(|(i, r)| {
                let r = r.as_ref().filter(|r| r.name() == name)?;
                Some(RegionInfo {
                    id: RegionId(i as u16),
                    len_bytes: r.len_bytes(),
                })
            })
            .ok_or_else(|| FabricError::NoSuchRegion {
                machine: self.id,
                region: format!("'{name}'"),
            })
    }

    /// The region with id `region` (`PeerUnavailable` if a crash dropped it).
    pub fn region(&self, region: RegionId) -> Result<Arc<Region>> {
        let regions = self.regions.read().unwrap_or_else(|e| e.into_inner());
        match regions.get(region.0 as usize) {
            Some(Some(r)) => Ok(Arc::clone(r)),
            Some(None) => Err(gone(self.id, region)),
            // Crashed and not restarted yet: the machine is down.
            None if regions.is_empty() && self.incarnation() > 0 => Err(gone(self.id, region)),
            None => Err(FabricError::NoSuchRegion {
                machine: self.id,
                region: region.to_string(),
            }),
        }
    }

    /// Number of registered regions (of this incarnation).
    pub fn region_count(&self) -> usize {
        let regions = self.regions.read().unwrap_or_else(|e| e.into_inner());
        regions.iter().flatten().count()
    }

    /// Crashes so far: 0 for the first incarnation.
    #[inline]
    pub fn incarnation(&self) -> u64 {
        self.incarnation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The machine crashed: every region is dropped (marked gone, so a port
    /// still holding one fails; unmapped when the last holder lets go), the
    /// inbox and its messages are dropped, and the waker forgotten. The
    /// machine registers regions again when it restarts, from id 0, as a
    /// restarted TCP node does: an id names the region of the incarnation
    /// that registered it, and a peer reaches the new one only once its
    /// fencing admits it (it knows the new epoch, so it has run Pragh 5 for
    /// the old one).
    pub(crate) fn crash(&self) {
        let dropped: Vec<Arc<Region>> = {
            let mut regions = self.regions.write().unwrap_or_else(|e| e.into_inner());
            let dropped: Vec<Arc<Region>> = regions.drain(..).flatten().collect();
            for r in &dropped {
                r.gone.store(true, std::sync::atomic::Ordering::Release);
            }
            self.incarnation
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            dropped
        };
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.set_waker(None);
        // Unmapped here, outside the lock, unless a port still holds one.
        drop(dropped);
    }

    /// Queues a message, visible from `visible_at_ns` on.
    pub(crate) fn deliver(&self, message: Message, visible_at_ns: u64) -> Result<()> {
        let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        if inbox.len() >= self.inbox_messages_max {
            return Err(FabricError::InboxFull {
                machine: self.id,
                limit: self.inbox_messages_max,
            });
        }
        inbox.push_back(Queued {
            visible_at_ns,
            message,
        });
        drop(inbox);
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(t) = waker {
            t.unpark();
        }
        Ok(())
    }

    /// Has every message delivered from now on unpark `waker` (`None`: no one).
    pub(crate) fn set_waker(&self, waker: Option<std::thread::Thread>) {
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = waker;
    }

    /// Takes the oldest message if it is visible at `now_ns`.
    pub(crate) fn take(&self, now_ns: u64) -> Option<Message> {
        let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        match inbox.front() {
            Some(q) if q.visible_at_ns <= now_ns => inbox.pop_front().map(|q| q.message),
            _ => None,
        }
    }
}

/// Executes a one-sided verb on local memory. Shared by every fabric that
/// holds memory (the in-process fabric, and the TCP fabric's service thread
/// and local path), so all of them have exactly the same semantics.
pub(crate) fn apply(
    memory: &MachineMemory,
    region: RegionId,
    offset: u64,
    verb: crate::Verb,
) -> Result<crate::Output> {
    let r = memory.region(region)?;
    apply_on(&r, memory.id(), region, offset, verb)
}

/// A [`crate::Verb::ReadTo`]: `len` bytes at `offset` of `src` (region
/// `region` of `machine`) into the initiator's region `dst` (`dst_region`
/// of `me`) at `dst_offset`. Both ranges are checked before any word moves,
/// so a rejected request changes nothing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_to(
    src: &Region,
    machine: MachineId,
    region: RegionId,
    offset: u64,
    dst: (&Region, MachineId, RegionId),
    dst_offset: u64,
    len: u64,
) -> Result<crate::Output> {
    let (dst, me, dst_region) = dst;
    let first = src.check(machine, region, offset, len)?;
    let dst_first = dst.check(me, dst_region, dst_offset, len)?;
    src.copy_words_to(first, dst, dst_first, (len / 8) as usize);
    Ok(crate::Output::Placed)
}

/// [`read_to`] between two machines' memories held by this process (the
/// TCP fabric's path for a target it hosts).
pub(crate) fn read_to_memory(
    src: &MachineMemory,
    region: RegionId,
    offset: u64,
    dst: &MachineMemory,
    dst_region: RegionId,
    dst_offset: u64,
    len: u64,
) -> Result<crate::Output> {
    let s = src.region(region)?;
    let d = dst.region(dst_region)?;
    read_to(
        &s,
        src.id(),
        region,
        offset,
        (&d, dst.id(), dst_region),
        dst_offset,
        len,
    )
}

/// [`apply`] on a region the caller already holds (a port's `hosted::RegionCache`).
pub(crate) fn apply_on(
    r: &Region,
    machine: MachineId,
    region: RegionId,
    offset: u64,
    verb: crate::Verb,
) -> Result<crate::Output> {
    use crate::{Output, Verb};
    match verb {
        Verb::Read { mut buf } => {
            apply_region(r, machine, region, offset, VerbRef::Read(&mut buf))?;
            Ok(Output::Data(buf))
        }
        Verb::ReadTo { region: local, .. } => panic!(
            "a READ into region {local} of the initiator reached a path that holds only region {region} of machine {machine}: the fabric resolves both regions first (read_to)"
        ),
        Verb::Write { data } => {
            apply_region(r, machine, region, offset, VerbRef::Write(&data))?;
            Ok(Output::Written(data))
        }
        Verb::Cas { expected, new } => Ok(Output::Word(apply_region(
            r,
            machine,
            region,
            offset,
            VerbRef::Cas { expected, new },
        )?)),
        Verb::FetchAdd { add } => Ok(Output::Word(apply_region(
            r,
            machine,
            region,
            offset,
            VerbRef::FetchAdd { add },
        )?)),
    }
}

/// A one-sided verb on borrowed buffers: the form the TCP fabric executes
/// straight from its receive buffer into its send buffer (no owned
/// [`crate::Verb`], so no allocation per operation).
#[derive(Debug)]
pub(crate) enum VerbRef<'a> {
    /// Read `buf.len()` bytes into `buf`.
    Read(&'a mut [u8]),
    /// Write `data`.
    Write(&'a [u8]),
    /// Compare-and-swap one word.
    Cas { expected: u64, new: u64 },
    /// Fetch-and-add one word.
    FetchAdd { add: u64 },
}

impl VerbRef<'_> {
    /// What it does at its target (fencing's rules 3 and 4).
    pub(crate) fn access(&self) -> crate::fencing::Access {
        match self {
            VerbRef::Read(_) => crate::fencing::Access::Read,
            _ => crate::fencing::Access::Write,
        }
    }
}

/// Executes a verb on borrowed buffers: the one implementation behind
/// [`apply`]. Returns the previous word for CAS and fetch-add, 0 otherwise.
/// Checks happen before any effect, so a rejected access changes nothing.
pub(crate) fn apply_ref(
    memory: &MachineMemory,
    region: RegionId,
    offset: u64,
    verb: VerbRef<'_>,
) -> Result<u64> {
    let r = memory.region(region)?;
    apply_region(&r, memory.id(), region, offset, verb)
}

/// A word-atomic copy out of (and into) a region at memcpy speed, for long
/// READs and WRITEs (`memory/wide.rs`).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[allow(unsafe_code)]
mod wide;

/// The one implementation of every verb on a region (checks first, so a
/// rejected access changes nothing). `machine` and `region` name it in errors.
#[inline]
pub(crate) fn apply_region(
    r: &Region,
    machine: MachineId,
    region: RegionId,
    offset: u64,
    verb: VerbRef<'_>,
) -> Result<u64> {
    match verb {
        VerbRef::Read(buf) => {
            let first = r.check(machine, region, offset, buf.len() as u64)?;
            r.read_words(first, buf);
            Ok(0)
        }
        VerbRef::Write(data) => {
            let first = r.check(machine, region, offset, data.len() as u64)?;
            r.write_words(first, data);
            Ok(0)
        }
        VerbRef::Cas { expected, new } => {
            let first = r.check(machine, region, offset, 8)?;
            Ok(r.cas_word(first, expected, new))
        }
        VerbRef::FetchAdd { add } => {
            let first = r.check(machine, region, offset, 8)?;
            Ok(r.fetch_add_word(first, add))
        }
    }
}

#[cfg(test)]
mod tests;
