//! The Fastswap-like baseline (Fargraph+ 2.2, 3.1, 9.2): edge data lives in
//! far memory as 4 KB pages and is demand-fetched into a bounded local page
//! cache with LRU eviction.
//!
//! It models what kernel swapping to far memory does to the edge stream,
//! without knowing anything about the graph: every edge byte is in the swap
//! space (no placement), a touch of a page that is not cached is a fault, and
//! the least recently used page is evicted when the cache is full. The cache
//! is shared by all threads, as the kernel's is.
//!
//! **Readahead** (issue 12, requirement 4). Linux answers a swap fault by
//! reading a window of swap slots around the faulting one (`swapin_readahead`:
//! `2^page-cluster` pages, `vm.page-cluster` defaulting to 3, so 8 pages;
//! newer kernels shrink or grow the window from readahead hits, up to that
//! size), and Fastswap keeps this, reading the faulting page with a
//! synchronous load on a queue pair it polls (`read_swap_cache_sync`,
//! `QP_LOAD_SYNC`) and the readahead pages with asynchronous loads on another
//! (`frontswap_load_async`, `QP_LOAD_ASYNC`). Locus does the same
//! with two ports per stream: a fault posts its own page's READ on the
//! *demand* port, then READs for the following [`READAHEAD_PAGES_DEFAULT`]
//! pages (the `readahead_pages` setting; 0 turns it off) that are neither
//! cached nor already in flight on the *readahead* port, and waits only for
//! its own page. Readahead completions are taken whenever the stream next
//! touches a page (a poll that never blocks) and go into the shared cache,
//! charged like any page (they may evict). Touching a page whose readahead
//! READ is still in flight waits for that READ (a hit, as Linux's swap cache
//! hit on a locked page). The window is the *following* pages: edge blocks are
//! streamed forward, where the aligned cluster Linux reads would waste half.
//!
//! Honesty: every byte of a page comes from one charged one-sided READ
//! (demand or readahead) into a local buffer, and only cached or fetched
//! bytes reach the engine. What it does not model (so it is kinder than
//! Fastswap): the kernel's fault and reclaim time on the edge path.
//!
//! **Vertex data** stays local unless `paged_vertices` is set
//! ([`PagedStore::with_vertices`]): then the algorithms' vertex arrays live
//! in memory paged through userfaultfd into the same frame pool as the edge
//! pages, sized to the whole local budget ([`super::vpage`]), as the
//! kernel's memory holds both under Fastswap.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use locus_fabric::{Completion, Fabric, Output, Port, WorkRequest};

use super::{
    ns_since, BlockTable, EdgeStore, FetchStream, Footprint, Segment, StreamStats,
    SEGMENT_BYTES_DEFAULT,
};
use crate::error::{config_err, Result};
use crate::grid::{Grid, Order};
use crate::server::{Control, Lease};
use crate::store::far::FarConfig;
use crate::store::vpage::{Pager, Shared, VERTEX_POOL_PAGES_MIN};
use crate::store::{Backend, PAGE_BYTES};
use crate::vertex::VertexMemory;

/// Readahead window in pages: Linux's default `vm.page-cluster` of 3 reads
/// `2^3` pages per swap fault.
pub const READAHEAD_PAGES_DEFAULT: u32 = 8;
/// Largest readahead window (Linux caps `page-cluster` at 2^5 = 32 pages
/// in practice; 256 leaves room for experiments).
pub const READAHEAD_PAGES_MAX: u32 = 256;
/// Readahead READs one stream may have in flight (older windows must land
/// before a fault starts another).
const READAHEAD_INFLIGHT_MAX: usize = 1024;

/// Checks a readahead window.
pub fn check_readahead_pages(pages: u32) -> Result<()> {
    if pages > READAHEAD_PAGES_MAX {
        return Err(config_err(
            "readahead_pages",
            format!("{pages} exceeds {READAHEAD_PAGES_MAX}"),
        ));
    }
    Ok(())
}

/// All edge bytes in far memory, paged into a bounded LRU cache.
pub struct PagedStore<F: Fabric> {
    fabric: F,
    config: FarConfig,
    table: BlockTable,
    lease: Lease,
    /// Per order: the block's offset in the far region (every block is remote).
    at: [Vec<u64>; 2],
    bytes: u64,
    /// Pages of the far region.
    region_pages: u64,
    /// The local budget's frames (edge pages, and vertex pages with `pager`).
    cache: Arc<Shared>,
    cache_bytes: u64,
    readahead_pages: u32,
    /// Vertex data paged too (`paged_vertices`).
    pager: Option<Pager<F>>,
}

impl<F: Fabric + Clone> PagedStore<F> {
    /// Writes every block of `orders` to far memory; the page cache holds at
    /// most `cache_bytes` (at least one page); a fault reads ahead
    /// `readahead_pages` following pages (0: none).
    pub fn new(
        fabric: F,
        grid: &Grid,
        orders: &[Order],
        cache_bytes: u64,
        config: FarConfig,
        readahead_pages: u32,
    ) -> Result<PagedStore<F>> {
        PagedStore::with_vertices(
            fabric,
            grid,
            orders,
            cache_bytes,
            config,
            readahead_pages,
            None,
        )
    }

    /// [`PagedStore::new`], and with `vertex_bytes_max` vertex arrays page
    /// too (see [`super::vpage`]): up to that many bytes of them, in the
    /// same `cache_bytes` as the edge pages (at least
    /// [`VERTEX_POOL_PAGES_MIN`] + 2 (readahead + 1) pages then). Fails, saying why, where
    /// userfaultfd is not available.
    pub fn with_vertices(
        fabric: F,
        grid: &Grid,
        orders: &[Order],
        cache_bytes: u64,
        config: FarConfig,
        readahead_pages: u32,
        vertex_bytes_max: Option<u64>,
    ) -> Result<PagedStore<F>> {
        check_readahead_pages(readahead_pages)?;
        let table = BlockTable::new(grid, orders)?;
        let n = table.shape().blocks();
        let mut at = [vec![0; n], vec![0; n]];
        let mut bytes = 0u64;
        for (o, p) in table.blocks() {
            at[o.index()][p] = bytes;
            bytes += table.block_len(o, p);
        }
        let region_bytes = bytes.next_multiple_of(PAGE_BYTES);
        let floor = match vertex_bytes_max {
            Some(_) => VERTEX_POOL_PAGES_MIN + 2 * (u64::from(readahead_pages) + 1),
            None => 1,
        };
        let capacity_pages = (cache_bytes / PAGE_BYTES).max(floor);
        if capacity_pages > usize::MAX as u64 {
            return Err(config_err("page_cache_bytes", "too large for this machine"));
        }
        let mut control = Control::connect(&fabric, config.client, config.server)?;
        let lease = control.alloc(region_bytes)?;
        // The swap space is written once, like pages swapped out before the run.
        let mut port = fabric.port(config.client)?;
        for (o, p) in table.blocks() {
            let r = grid.block_bytes(o, p);
            let src = &grid.bytes(o)[r.start as usize..r.end as usize];
            for (k, piece) in src.chunks(1 << 20).enumerate() {
                port.execute(WorkRequest::write(
                    0,
                    config.server,
                    lease.region,
                    at[o.index()][p] + (k << 20) as u64,
                    piece.to_vec(),
                ))?;
            }
        }
        let cache = Shared::new(capacity_pages as usize);
        let pager = match vertex_bytes_max {
            None => None,
            Some(b) => {
                let len = b.next_multiple_of(PAGE_BYTES).max(PAGE_BYTES);
                let vlease = control.alloc(len)?;
                let p = Pager::new(
                    fabric.clone(),
                    config,
                    vlease,
                    len,
                    Arc::clone(&cache),
                    readahead_pages,
                );
                if p.is_err() {
                    let _ = control.free(vlease);
                    let _ = control.free(lease);
                }
                Some(p?)
            }
        };
        Ok(PagedStore {
            fabric,
            config,
            table,
            lease,
            at,
            bytes,
            region_pages: region_bytes / PAGE_BYTES,
            cache,
            cache_bytes: capacity_pages * PAGE_BYTES,
            readahead_pages,
            pager,
        })
    }
}

impl<F: Fabric + Clone> EdgeStore for PagedStore<F> {
    fn backend(&self) -> Backend {
        Backend::Paged
    }

    fn table(&self) -> &BlockTable {
        &self.table
    }

    fn open_stream(&self) -> Result<Box<dyn FetchStream + '_>> {
        Ok(Box::new(PagedStream {
            store: self,
            port: self.fabric.port(self.config.client)?,
            ahead: self.fabric.port(self.config.client)?,
            inflight: HashSet::new(),
            landed: Vec::new(),
            pending: VecDeque::with_capacity(2),
            spare: Vec::new(),
            stats: StreamStats::default(),
        }))
    }

    fn segment_bytes_max(&self) -> u64 {
        SEGMENT_BYTES_DEFAULT
    }

    fn footprint(&self) -> Footprint {
        Footprint {
            resident_bytes: 0,
            remote_bytes: self.bytes,
            page_cache_bytes: self.cache_bytes,
        }
    }

    fn vertex_memory(&self) -> Option<Arc<dyn VertexMemory>> {
        self.pager.as_ref().map(Pager::memory)
    }
}

impl<F: Fabric> Drop for PagedStore<F> {
    fn drop(&mut self) {
        // Best effort: a server that is gone keeps nothing to return.
        if let Ok(mut c) = Control::connect_quick(&self.fabric, self.config) {
            let _ = c.free(self.lease);
            // Arrays still alive would page through a freed region: keep it then.
            if let Some(p) = self.pager.as_ref().filter(|p| p.live_bytes() == 0) {
                let _ = c.free(p.lease());
            }
        }
    }
}

struct PagedStream<'s, F: Fabric> {
    store: &'s PagedStore<F>,
    /// Demand faults: one READ at a time, waited for (Fastswap's sync queue).
    port: F::Port,
    /// Readahead READs, never waited for unless their page is touched
    /// (Fastswap's async queue). A READ's id is its page number.
    ahead: F::Port,
    /// Pages with a readahead READ in flight on `ahead`.
    inflight: HashSet<u64>,
    /// Completions taken from `ahead`, reused.
    landed: Vec<Completion>,
    pending: VecDeque<Segment>,
    spare: Vec<Vec<u8>>,
    stats: StreamStats,
}

impl<F: Fabric> PagedStream<'_, F> {
    /// The page, from the cache, from a readahead READ, or by a fault.
    /// Returns the bytes and whether the touch was a hit.
    fn page(&mut self, page: u64) -> Result<(Arc<Vec<u8>>, bool)> {
        if !self.inflight.is_empty() {
            // Readahead that has landed goes into the cache (never blocks).
            self.ahead.poll(&mut self.landed)?;
            self.take_landed(None)?;
        }
        if let Some(p) = self.store.cache.lock().get(page) {
            self.stats.page_hits += 1;
            return Ok((p, true));
        }
        if self.inflight.contains(&page) {
            // Its readahead READ is on the way: wait for it, not a new fault.
            let t = Instant::now();
            let mut got = None;
            while got.is_none() {
                let n = self.ahead.wait(&mut self.landed)?;
                assert!(
                    n > 0 || self.ahead.inflight() > 0,
                    "a readahead READ vanished from the port"
                );
                got = self.take_landed(Some(page))?;
            }
            self.stats.wait_ns += ns_since(t);
            self.stats.page_hits += 1;
            return Ok((got.expect("waited for it"), true));
        }
        let mut buf = self
            .spare
            .pop()
            .unwrap_or_else(|| vec![0u8; PAGE_BYTES as usize]);
        buf.resize(PAGE_BYTES as usize, 0);
        let t = Instant::now();
        let (server, region) = (self.store.config.server, self.store.lease.region);
        self.port.post(WorkRequest::read_into(
            page,
            server,
            region,
            page * PAGE_BYTES,
            buf,
        ))?;
        self.read_ahead(page)?;
        let mut done = Vec::with_capacity(1);
        while done.is_empty() {
            let n = self.port.wait(&mut done)?;
            assert!(n > 0 || self.port.inflight() > 0, "a fault's READ vanished");
        }
        let c = done.pop().expect("one completion");
        debug_assert_eq!(c.id, page);
        let buf = match c.result? {
            Output::Data(b) => b,
            other => unreachable!("a READ completed with {other:?}"),
        };
        self.stats.wait_ns += ns_since(t);
        self.stats.page_faults += 1;
        self.stats.fetch_ops += 1;
        self.stats.bytes_fetched += PAGE_BYTES;
        let p = Arc::new(buf);
        self.cache_insert(page, Arc::clone(&p))?;
        Ok((p, false))
    }

    /// Posts READs for the pages after `page` that are neither cached nor in flight.
    fn read_ahead(&mut self, page: u64) -> Result<()> {
        let w = u64::from(self.store.readahead_pages);
        if w == 0 || self.inflight.len() >= READAHEAD_INFLIGHT_MAX {
            return Ok(());
        }
        let last = (page + w).min(self.store.region_pages - 1);
        let wanted: Vec<u64> = {
            let cache = self.store.cache.lock();
            (page + 1..=last)
                .filter(|q| !self.inflight.contains(q) && !cache.contains(*q))
                .collect()
        };
        let (server, region) = (self.store.config.server, self.store.lease.region);
        for q in wanted {
            let mut buf = self
                .spare
                .pop()
                .unwrap_or_else(|| vec![0u8; PAGE_BYTES as usize]);
            buf.resize(PAGE_BYTES as usize, 0);
            self.ahead.post(WorkRequest::read_into(
                q,
                server,
                region,
                q * PAGE_BYTES,
                buf,
            ))?;
            self.inflight.insert(q);
            self.stats.fetch_ops += 1;
            self.stats.bytes_fetched += PAGE_BYTES;
            self.stats.readahead_pages += 1;
        }
        let held = 1 + self.spare.len() + self.inflight.len();
        self.stats.buffer_bytes_peak = self.stats.buffer_bytes_peak.max(PAGE_BYTES * held as u64);
        Ok(())
    }

    /// Caches every landed readahead page; returns `want`'s bytes if it landed.
    fn take_landed(&mut self, want: Option<u64>) -> Result<Option<Arc<Vec<u8>>>> {
        let mut got = None;
        for c in std::mem::take(&mut self.landed) {
            let q = c.id;
            self.inflight.remove(&q);
            let buf = match c.result? {
                Output::Data(b) => b,
                other => unreachable!("a READ completed with {other:?}"),
            };
            let p = Arc::new(buf);
            if want == Some(q) {
                got = Some(Arc::clone(&p));
            }
            self.cache_insert(q, p)?;
        }
        Ok(got)
    }

    /// Caches `page` (reclaiming frames, which may write a vertex page
    /// back on the demand port), keeping freed buffers for reuse.
    fn cache_insert(&mut self, page: u64, p: Arc<Vec<u8>>) -> Result<()> {
        let mut freed = Vec::new();
        self.store.cache.insert_edge(
            page,
            p,
            self.store.pager.as_ref().map(Pager::inner),
            &mut self.port,
            &mut freed,
        )?;
        for b in freed {
            if b.len() == PAGE_BYTES as usize
                && self.spare.len() < 2 + self.store.readahead_pages as usize
            {
                self.spare.push(b);
            }
        }
        Ok(())
    }
}

impl<F: Fabric> Drop for PagedStream<'_, F> {
    fn drop(&mut self) {
        // Readahead still in flight lands in a buffer nobody reads; wait for
        // it so the port closes idle (best effort: errors only end the wait).
        while self.ahead.inflight() > 0 {
            match self.ahead.wait(&mut self.landed) {
                Ok(n) if n > 0 => self.landed.clear(),
                _ => break,
            }
        }
    }
}

impl<F: Fabric> FetchStream for PagedStream<'_, F> {
    fn begin(&mut self, seg: Segment) -> Result<()> {
        debug_assert!(self.pending.len() < self.depth_max());
        // Demand paging: nothing happens until the bytes are touched.
        self.pending.push_back(seg);
        Ok(())
    }

    fn consume(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        let seg = self.pending.pop_front().expect("consume after begin");
        let a = self.store.at[seg.order.index()][seg.position as usize] + seg.offset;
        let b = a + seg.len;
        for page in a / PAGE_BYTES..b.div_ceil(PAGE_BYTES) {
            let base = page * PAGE_BYTES;
            let lo = (a.max(base) - base) as usize;
            let hi = (b.min(base + PAGE_BYTES) - base) as usize;
            let (p, hit) = self.page(page)?;
            if hit {
                self.stats.bytes_resident += (hi - lo) as u64;
            }
            f(&p[lo..hi]);
        }
        let held = 1 + self.spare.len() + self.inflight.len();
        self.stats.buffer_bytes_peak = self.stats.buffer_bytes_peak.max(PAGE_BYTES * held as u64);
        Ok(())
    }

    fn stats(&self) -> StreamStats {
        self.stats
    }
}
