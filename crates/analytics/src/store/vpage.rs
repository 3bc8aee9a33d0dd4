//! The paged baseline's frame pool, and vertex data that pages too (issue
//! 12, requirement 4: "Fastswap as it is"; Fargraph+ 2.2, 3.1, 9.2).
//!
//! **The pool** (`store/pool.rs`). The paged backend's local budget is one pool of 4 KB frames
//! shared by edge pages (fetched by `paged.rs`'s streams, exact LRU on every
//! touch) and, with `paged_vertices`, vertex pages. Frames are ordered by a
//! last-use stamp; the oldest usable frame is reclaimed when a page needs one.
//!
//! **Vertex pages.** With `paged_vertices` the algorithms' vertex arrays
//! ([`crate::vertex::VertexVec`]) are allocated in an anonymous mapping
//! registered with userfaultfd for missing-page and write-protect faults.
//! Each page has a slot in a far-memory region. A handler thread resolves
//! faults; any thread that needs a frame may reclaim a vertex page. Hits
//! cost nothing: a resident page is ordinary mapped memory, as under the
//! kernel's swap.
//!
//! Page states (`V` = in the pool as a frame; not in the pool = absent):
//!
//! ```text
//!                    touch, no far copy: zero page installed (no READ)
//!   absent ─────────────────────────────────────────────────────┐
//!     │ touch, far copy: Fetching (charged READ, plus readahead) │
//!     ▼                                                          ▼
//!   Fetching ──UFFDIO_COPY (WP unless a write)──►  Clean (mapped, write-protected)
//!                                                  │  first write: WP fault, WP cleared
//!                                                  ▼
//!                                                 Dirty (mapped, writable)
//!   reclaim of the oldest frame, if mapped (Clean or Dirty):
//!     Busy: WP set, bytes copied out, MADV_DONTNEED ──► Inactive{bytes, dirty} (restamped newest)
//!   touch of an Inactive page (a minor fault, no READ):
//!     Busy: UFFDIO_COPY of its bytes (writable iff dirty) ──► Clean / Dirty
//!   reclaim of the oldest frame, if Inactive:
//!     clean: dropped ──► absent
//!     dirty: Busy: charged WRITE of its bytes ──► absent (far copy valid)
//! ```
//!
//! The Inactive step is the reference bit the kernel reads from page tables
//! and userfaultfd cannot: a page is unmapped first and evicted only if no
//! thread touched it while it went once more round the pool (VMS's
//! second-chance lists, or CLOCK). Without it hot vertex pages, whose hits
//! are invisible here, would be evicted in fault order.
//!
//! Invariants (checked by assertions and by `tests/paged_vertices.rs`):
//! 1. A mapped page's bytes are its value. A Clean page equals its far copy
//!    (or is zero and has none); a page becomes writable only through the
//!    handler marking it Dirty first. So no write is lost: a Clean page is
//!    write-protected and its first write waits for the handler.
//! 2. An absent page's value is its far copy, or zero if it has none. Every
//!    absent page's bytes reach a thread only through a charged READ into a
//!    buffer and `UFFDIO_COPY`; no other path maps a page of the region (an
//!    untraced access to a non-resident page is impossible: it faults).
//! 3. Only the thread that marked a page Busy changes its mapping or its far
//!    copy; everyone else (the handler too) waits for the pool's condition
//!    variable. Fetching pages are the handler's alone (one handler thread).
//! 4. Write-protection is set *before* a page's bytes are copied out, and
//!    the page is dropped only after: a write racing an eviction faults,
//!    waits until the page is Inactive, and is then resolved by mapping the
//!    copied bytes, so it lands in the copy that is kept.
//! 5. The pool holds at most `capacity` frames (every state counts, Busy and
//!    Fetching too); the mapping and the far slots are freed together.
//!
//! What it does not model: the kernel's fault path is modelled by a real
//! userfaultfd round trip (two context switches) plus the fabric's charged
//! READ, which costs more CPU than Fastswap's in-kernel fault; readahead of
//! vertex pages is synchronous (the fault waits for the whole window, one
//! posted batch); a fatal far-memory error during a fault aborts the process
//! (the kernel raises SIGBUS on a failed swap-in): the faulting thread cannot
//! be handed an error.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

use locus_fabric::{Fabric, Output, Port, WorkRequest};

use super::pool::{Frame, Pool, Reclaim, VFrame, VERTEX};
use super::uffd::{Fault, Mapping, Uffd, PAGE};
use crate::error::{config_err, Result};
use crate::server::Lease;
use crate::store::far::FarConfig;
use crate::vertex::{VertexMemory, VertexPagingStats};

/// Fewest frames a pool with vertex pages may have: a fault holds up to
/// `1 + readahead` Fetching frames and each other thread one Busy frame
/// (the floor is this plus twice `1 + readahead`).
pub const VERTEX_POOL_PAGES_MIN: u64 = 8;

/// Tests only: microseconds an unmap waits between copying a page out and
/// dropping it, to widen the window a write racing it would be lost in
/// (were it not write-protected first).
#[doc(hidden)]
pub static UNMAP_DELAY_US: AtomicU64 = AtomicU64::new(0);

/// The pool and the condition variable Busy and Fetching frames are waited on.
pub(crate) struct Shared {
    pub(crate) pool: Mutex<Pool>,
    changed: Condvar,
}

impl Shared {
    /// A pool of `capacity` frames.
    pub(crate) fn new(capacity: usize) -> Arc<Shared> {
        Arc::new(Shared {
            pool: Mutex::new(Pool::new(capacity)),
            changed: Condvar::new(),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, Pool>) -> MutexGuard<'a, Pool> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    /// Caches edge page `page` (unless another thread did meanwhile),
    /// reclaiming frames first; returns buffers freed, for reuse. `pager` and
    /// `port` carry out vertex reclaims (unmaps and write-backs).
    pub(crate) fn insert_edge<F: Fabric>(
        &self,
        page: u64,
        bytes: Arc<Vec<u8>>,
        pager: Option<&Inner<F>>,
        port: &mut F::Port,
        freed: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        debug_assert!(page & VERTEX == 0);
        let mut g = self.lock();
        if g.contains(page) {
            return Ok(());
        }
        g = self.make_room(g, 1, pager, port, freed)?;
        // make_room may have let go of the lock: another stream may have
        // cached the page meanwhile.
        if !g.contains(page) {
            g.insert(page, Frame::Edge(bytes));
        }
        Ok(())
    }

    /// Reclaims frames until `need` more fit.
    fn make_room<'a, F: Fabric>(
        &'a self,
        mut g: MutexGuard<'a, Pool>,
        need: usize,
        pager: Option<&Inner<F>>,
        port: &mut F::Port,
        freed: &mut Vec<Vec<u8>>,
    ) -> Result<MutexGuard<'a, Pool>> {
        while g.full(need) {
            match g.reclaim() {
                Reclaim::Freed(b) => freed.extend(b),
                Reclaim::Wait => g = self.wait(g),
                Reclaim::Unmap { q, dirty } => {
                    drop(g);
                    let p = pager.expect("vertex frames exist only with a pager");
                    let bytes = p.unmap(q);
                    g = self.lock();
                    g.set(q, VFrame::Inactive { bytes, dirty });
                    self.changed.notify_all();
                }
                Reclaim::Writeback { q, bytes } => {
                    drop(g);
                    let p = pager.expect("vertex frames exist only with a pager");
                    let r = p.write_back(q, bytes, port);
                    g = self.lock();
                    if let Err(e) = r {
                        // The page's only copy is gone: nothing can be right after this.
                        fatal(&format!("writing back vertex page {q}: {e}"));
                    }
                    g.remove(q | VERTEX);
                    g.far_copy.insert(q);
                    self.changed.notify_all();
                }
            }
        }
        Ok(g)
    }
}

fn uffd_err(call: &'static str) -> impl FnOnce(std::io::Error) -> crate::AnalyticsError {
    move |e| config_err("paged_vertices", format!("{call} failed: {e}"))
}

fn fatal(what: &str) -> ! {
    eprintln!(
        "locus-analytics: vertex pager: {what}; aborting (as a failed swap-in raises SIGBUS)"
    );
    std::process::abort()
}

/// Vertex memory paged through userfaultfd into the pool (see the module doc).
pub struct Pager<F: Fabric> {
    inner: Arc<Inner<F>>,
}

pub(crate) struct Inner<F: Fabric> {
    fabric: F,
    config: FarConfig,
    lease: Lease,
    map: Mapping,
    uffd: Arc<Uffd>,
    shared: Arc<Shared>,
    pages: u64,
    readahead_pages: u32,
    /// Free page runs of the mapping: first page -> pages.
    free_runs: Mutex<BTreeMap<u64, u64>>,
    live_bytes: AtomicU64,
    live_bytes_peak: AtomicU64,
    stats: Counters,
    handler: Mutex<Option<JoinHandle<()>>>,
    handler_id: Mutex<Option<std::thread::ThreadId>>,
}

#[derive(Default)]
struct Counters {
    faults: AtomicU64,
    readahead_pages: AtomicU64,
    zero_fills: AtomicU64,
    minor_faults: AtomicU64,
    write_faults: AtomicU64,
    deactivations: AtomicU64,
    writebacks: AtomicU64,
}

/// Checks that userfaultfd with write-protection works here: `Ok` or the
/// reason it does not.
pub fn available() -> std::result::Result<(), String> {
    let m = Mapping::new(PAGE).map_err(|e| format!("mmap of one page failed: {e}"))?;
    Uffd::register(&m).map(|_| ())
}

impl<F: Fabric> Pager<F> {
    /// A mapping of `bytes` (rounded up to pages) for vertex arrays, backed
    /// by `lease` (at least as large) in far memory, paging into `shared`.
    pub(crate) fn new(
        fabric: F,
        config: FarConfig,
        lease: Lease,
        bytes: u64,
        shared: Arc<Shared>,
        readahead_pages: u32,
    ) -> Result<Pager<F>> {
        let len = bytes.next_multiple_of(PAGE as u64).max(PAGE as u64);
        assert!(lease.len_bytes >= len, "the far region covers the mapping");
        let map = Mapping::new(len as usize).map_err(|e| {
            config_err(
                "paged_vertices",
                format!("cannot reserve {len} bytes for vertex data: {e}"),
            )
        })?;
        let uffd = Uffd::register(&map).map_err(|e| {
            config_err(
                "paged_vertices",
                format!("userfaultfd is not available: {e}"),
            )
        })?;
        let pages = len / PAGE as u64;
        let inner = Arc::new(Inner {
            fabric,
            config,
            lease,
            map,
            uffd: Arc::new(uffd),
            shared,
            pages,
            readahead_pages,
            free_runs: Mutex::new(BTreeMap::from([(0, pages)])),
            live_bytes: AtomicU64::new(0),
            live_bytes_peak: AtomicU64::new(0),
            stats: Counters::default(),
            handler: Mutex::new(None),
            handler_id: Mutex::new(None),
        });
        let port = inner.fabric.port(config.client)?;
        let weak = Arc::downgrade(&inner);
        let uffd = Arc::clone(&inner.uffd);
        let h = std::thread::Builder::new()
            .name("vertex-pager".into())
            .spawn(move || handler(uffd, weak, port))
            .map_err(|e| config_err("paged_vertices", format!("cannot start the handler: {e}")))?;
        *inner.handler_id.lock().unwrap_or_else(|e| e.into_inner()) = Some(h.thread().id());
        *inner.handler.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        Ok(Pager { inner })
    }

    /// The pager as vertex memory for [`crate::vertex::scope`].
    pub fn memory(&self) -> Arc<dyn VertexMemory> {
        Arc::clone(&self.inner) as Arc<dyn VertexMemory>
    }

    /// Bytes of vertex arrays allocated and not yet freed.
    pub fn live_bytes(&self) -> u64 {
        self.inner.live_bytes.load(Relaxed)
    }

    /// The pager's state, for reclaims by the edge streams.
    pub(crate) fn inner(&self) -> &Inner<F> {
        &self.inner
    }
}

impl<F: Fabric> Inner<F> {
    fn unmap(&self, q: u64) -> Vec<u8> {
        let addr = self.map.page_addr(q);
        // Invariant 4: protect, then copy, then drop.
        if let Err(e) = self.uffd.write_protect(addr, PAGE as u64, true) {
            fatal(&format!("write-protecting vertex page {q}: {e}"));
        }
        let mut bytes = vec![0u8; PAGE];
        self.map.read_page(q, &mut bytes);
        let delay_us = UNMAP_DELAY_US.load(Relaxed);
        if delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay_us));
        }
        if let Err(e) = self.map.dont_need(q, 1) {
            fatal(&format!("dropping vertex page {q}: {e}"));
        }
        self.stats.deactivations.fetch_add(1, Relaxed);
        bytes
    }

    fn write_back(&self, q: u64, bytes: Vec<u8>, port: &mut F::Port) -> Result<()> {
        port.execute(WorkRequest::write(
            0,
            self.config.server,
            self.lease.region,
            q * PAGE as u64,
            bytes,
        ))?;
        self.stats.writebacks.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Resolves one fault (see the module doc's diagram).
    fn handle(&self, f: Fault, port: &mut F::Port, freed: &mut Vec<Vec<u8>>) -> Result<()> {
        let base = self.map.base() as u64;
        assert!(
            f.address >= base && f.address < base + self.map.len() as u64,
            "a fault outside the vertex mapping"
        );
        let q = (f.address - base) / PAGE as u64;
        let addr = self.map.page_addr(q);
        let shared = &self.shared;
        let mut g = shared.lock();
        loop {
            enum Kind {
                Wait,
                FirstWrite,
                Stale,
                Minor,
                Absent,
            }
            let kind = match g.vframe(q) {
                Some(VFrame::Busy | VFrame::Fetching) => Kind::Wait,
                Some(VFrame::Clean) if f.wp => Kind::FirstWrite,
                Some(VFrame::Clean | VFrame::Dirty) => Kind::Stale,
                Some(VFrame::Inactive { .. }) => Kind::Minor,
                None => Kind::Absent,
            };
            match kind {
                Kind::Wait => g = shared.wait(g),
                Kind::FirstWrite => {
                    g.set(q, VFrame::Dirty);
                    drop(g);
                    self.stats.write_faults.fetch_add(1, Relaxed);
                    // Clears the protection and wakes the writer.
                    self.uffd
                        .write_protect(addr, PAGE as u64, false)
                        .map_err(uffd_err("UFFDIO_WRITEPROTECT"))?;
                    return Ok(());
                }
                Kind::Stale => {
                    // Already resolved for another thread's fault on the page.
                    drop(g);
                    self.uffd
                        .wake(addr, PAGE as u64)
                        .map_err(uffd_err("UFFDIO_WAKE"))?;
                    return Ok(());
                }
                Kind::Minor => {
                    let v = g.vframe(q).expect("inactive");
                    let VFrame::Inactive { bytes, dirty } = std::mem::replace(v, VFrame::Busy)
                    else {
                        unreachable!("checked above")
                    };
                    drop(g);
                    let dirty = dirty || f.write;
                    self.uffd
                        .copy(addr, &bytes, !dirty)
                        .map_err(uffd_err("UFFDIO_COPY"))?;
                    freed.push(bytes);
                    self.stats.minor_faults.fetch_add(1, Relaxed);
                    g = shared.lock();
                    g.set(q, if dirty { VFrame::Dirty } else { VFrame::Clean });
                    shared.changed.notify_all();
                    return Ok(());
                }
                Kind::Absent => return self.fetch(g, q, f.write, port, freed),
            }
        }
    }

    /// Brings absent page `q` in: zero-filled if it has no far copy, else by
    /// a charged READ, with the following absent pages that have far copies.
    fn fetch(
        &self,
        g: MutexGuard<'_, Pool>,
        q: u64,
        write: bool,
        port: &mut F::Port,
        freed: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        let shared = &self.shared;
        let far = g.far_copy.contains(&q);
        let window = if far {
            u64::from(self.readahead_pages)
        } else {
            0
        };
        let ahead = |g: &MutexGuard<'_, Pool>| -> Vec<u64> {
            (q + 1..(q + 1 + window).min(self.pages))
                .filter(|p| !g.frames.contains_key(&(p | VERTEX)) && g.far_copy.contains(p))
                .collect()
        };
        let need = 1 + ahead(&g).len();
        let mut g = shared.make_room(g, need, Some(self), port, freed)?;
        // Only this thread makes absent pages present; frees only drop far
        // copies and write-backs add some, so keep to the room made.
        assert!(g.vframe(q).is_none(), "page {q} became present meanwhile");
        let pages: Vec<u64> = std::iter::once(q)
            .chain(ahead(&g).into_iter().take(need - 1))
            .collect();
        for &p in &pages {
            g.insert(p | VERTEX, Frame::Vertex(VFrame::Fetching));
        }
        drop(g);
        let mut bufs: Vec<Vec<u8>> = Vec::with_capacity(pages.len());
        if far {
            for &p in &pages {
                let buf = freed.pop().unwrap_or_else(|| vec![0u8; PAGE]);
                port.post(WorkRequest::read_into(
                    p,
                    self.config.server,
                    self.lease.region,
                    p * PAGE as u64,
                    buf,
                ))?;
            }
            let mut done = Vec::with_capacity(pages.len());
            while done.len() < pages.len() {
                let n = port.wait(&mut done)?;
                assert!(n > 0 || port.inflight() > 0, "a vertex READ vanished");
            }
            done.sort_by_key(|c| c.id);
            for c in done {
                match c.result? {
                    Output::Data(mut b) => {
                        b.resize(PAGE, 0);
                        bufs.push(b)
                    }
                    other => unreachable!("a READ completed with {other:?}"),
                }
            }
            // `pages` is increasing, as the completions now are.
            self.stats.faults.fetch_add(1, Relaxed);
            self.stats
                .readahead_pages
                .fetch_add(pages.len() as u64 - 1, Relaxed);
        } else {
            bufs.push(vec![0u8; PAGE]);
            self.stats.zero_fills.fetch_add(1, Relaxed);
        }
        // The faulting page first, so its thread runs on at once.
        self.uffd
            .copy(self.map.page_addr(q), &bufs[0], !write)
            .map_err(uffd_err("UFFDIO_COPY"))?;
        for (&p, b) in pages.iter().zip(&bufs).skip(1) {
            self.uffd
                .copy(self.map.page_addr(p), b, true)
                .map_err(uffd_err("UFFDIO_COPY"))?;
        }
        let mut g = shared.lock();
        g.set(q, if write { VFrame::Dirty } else { VFrame::Clean });
        for &p in &pages[1..] {
            g.set(p, VFrame::Clean);
        }
        shared.changed.notify_all();
        drop(g);
        freed.extend(bufs);
        freed.truncate(64);
        Ok(())
    }
}

/// The handler thread: resolves faults until the pager is dropped.
fn handler<F: Fabric>(uffd: Arc<Uffd>, weak: Weak<Inner<F>>, mut port: F::Port) {
    let mut freed: Vec<Vec<u8>> = Vec::new();
    loop {
        let fault = match uffd.next_fault() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => fatal(&format!("reading userfaultfd: {e}")),
        };
        let Some(inner) = weak.upgrade() else {
            // Faults after the pager is gone cannot happen: arrays hold it.
            fatal("a fault on vertex memory whose pager is gone");
        };
        if let Err(e) = inner.handle(fault, &mut port, &mut freed) {
            fatal(&format!("resolving a fault at {:#x}: {e}", fault.address));
        }
    }
}

impl<F: Fabric> VertexMemory for Inner<F> {
    fn alloc(&self, bytes: usize) -> NonNull<u8> {
        let n = (bytes as u64).div_ceil(PAGE as u64);
        let mut runs = self.free_runs.lock().unwrap_or_else(|e| e.into_inner());
        let Some((&start, &len)) = runs.iter().find(|&(_, &len)| len >= n) else {
            panic!(
                "vertex memory exhausted: {bytes} bytes asked, {} of {} bytes in use \
                 (the mapping is sized from the algorithm's vertex bytes)",
                self.live_bytes.load(Relaxed),
                self.map.len()
            );
        };
        runs.remove(&start);
        if len > n {
            runs.insert(start + n, len - n);
        }
        let live = self.live_bytes.fetch_add(n * PAGE as u64, Relaxed) + n * PAGE as u64;
        self.live_bytes_peak.fetch_max(live, Relaxed);
        NonNull::new(self.map.page_addr(start) as *mut u8).expect("mapped")
    }

    fn free(&self, ptr: NonNull<u8>, bytes: usize) {
        let n = (bytes as u64).div_ceil(PAGE as u64);
        let start = (ptr.as_ptr() as u64 - self.map.base() as u64) / PAGE as u64;
        {
            let shared = &self.shared;
            let mut g = shared.lock();
            for q in start..start + n {
                while matches!(g.vframe(q), Some(VFrame::Busy | VFrame::Fetching)) {
                    g = shared.wait(g);
                }
                g.remove(q | VERTEX);
                g.far_copy.remove(&q);
            }
            shared.changed.notify_all();
        }
        // No frame and no far copy: nobody maps these pages again before reuse.
        if let Err(e) = self.map.dont_need(start, n) {
            fatal(&format!(
                "dropping freed vertex pages {start}..{}: {e}",
                start + n
            ));
        }
        let mut runs = self.free_runs.lock().unwrap_or_else(|e| e.into_inner());
        let (mut s, mut l) = (start, n);
        if let Some((&ps, &pl)) = runs.range(..s).next_back() {
            if ps + pl == s {
                runs.remove(&ps);
                (s, l) = (ps, pl + l);
            }
        }
        if let Some(&nl) = runs.get(&(s + l)) {
            runs.remove(&(s + l));
            l += nl;
        }
        runs.insert(s, l);
        self.live_bytes.fetch_sub(n * PAGE as u64, Relaxed);
    }

    fn stats(&self) -> VertexPagingStats {
        let s = &self.stats;
        let faults = s.faults.load(Relaxed);
        let readahead_pages = s.readahead_pages.load(Relaxed);
        let writebacks = s.writebacks.load(Relaxed);
        VertexPagingStats {
            faults,
            readahead_pages,
            zero_fills: s.zero_fills.load(Relaxed),
            minor_faults: s.minor_faults.load(Relaxed),
            write_faults: s.write_faults.load(Relaxed),
            deactivations: s.deactivations.load(Relaxed),
            writebacks,
            bytes_fetched: (faults + readahead_pages) * PAGE as u64,
            bytes_written: writebacks * PAGE as u64,
            resident_pages_peak: self.shared.lock().vertex_frames_peak,
            array_bytes_peak: self.live_bytes_peak.load(Relaxed),
        }
    }
}

impl<F: Fabric> Drop for Inner<F> {
    fn drop(&mut self) {
        self.uffd.stop();
        let me = std::thread::current().id();
        let on_handler = *self.handler_id.lock().unwrap_or_else(|e| e.into_inner()) == Some(me);
        if let Some(h) = self
            .handler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            if !on_handler {
                let _ = h.join();
            }
        }
    }
}

impl<F: Fabric> Pager<F> {
    /// The far-memory lease behind the vertex pages.
    pub(crate) fn lease(&self) -> Lease {
        self.inner.lease
    }
}
