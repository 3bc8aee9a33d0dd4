//! The Fargraph+ backend: non-resident blocks live in another machine's
//! memory and come back by chunked one-sided READs (Fargraph+ 6.1-6.3, 8.1).
//!
//! Setup (`Far_write_start/complete`): the client borrows one region from the
//! far-memory server over the control port ([`crate::server`]), lays the
//! remote blocks out back to back in it, and WRITEs them in chunks. The index
//! is per block: `(order, position) -> offset in the region` (Fig. 11).
//!
//! Streaming (`Far_read_start/complete`): each engine thread has its own port
//! (its own queue pair: Fargraph+ 6.3's one data channel per thread). `begin`
//! posts every chunk of a segment as a READ into a recycled buffer, without
//! waiting; `consume` waits for that segment's completions, which arrive in
//! posting order, and hands each chunk to the engine in place (no merge
//! copy). With the engine's double buffering, the next segment's READs are in
//! flight while the current one is processed (Fig. 12). A stream's buffers
//! are bounded by two segments, recycled, and reported.
//!
//! Alignment: the fabric moves whole 8-byte words, and a segment of compact
//! (4-byte) edges may start or end half-way through a word (a stripe or an
//! odd block's end). Every remote block sits at a word-aligned offset and is
//! stored padded to a whole word ([`crate::layout`]), so `begin` rounds the
//! segment out to the words that hold it, still inside its block, and
//! `consume` trims the extra 4 bytes off the first and last chunk. The
//! rounded bytes are fetched and counted.

use std::collections::VecDeque;
use std::time::Instant;

use locus_fabric::{Completion, Fabric, MachineId, Output, Port, RegionId, WorkRequest};

use super::{
    check_chunk_bytes, ns_since, BlockTable, EdgeStore, FetchStream, Footprint, Residency,
    Resident, Segment, StreamStats, SEGMENT_BYTES_DEFAULT,
};
use crate::error::{AnalyticsError, Result};
use crate::grid::{Grid, Order};
use crate::layout::ALIGN_BYTES;
use crate::server::{Control, Lease};
use crate::store::Backend;

/// Most READs one segment may post (segments shrink for tiny chunks so two
/// segments stay well inside a port's in-flight limit of 4096).
pub const READS_PER_SEGMENT_MAX: u64 = 1024;
/// Bytes of one WRITE while the blocks are copied out at setup.
const SETUP_WRITE_BYTES: u64 = 1 << 20;
/// WRITEs in flight during setup.
const SETUP_WINDOW: usize = 16;

/// Settings of the far backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FarConfig {
    /// The machine this process computes as.
    pub client: MachineId,
    /// The far-memory server's machine.
    pub server: MachineId,
    /// Bytes per one-sided READ (Fargraph+ 6.1's chunk).
    pub chunk_bytes: u64,
}

impl Default for FarConfig {
    fn default() -> Self {
        FarConfig {
            client: 0,
            server: 1,
            chunk_bytes: super::CHUNK_BYTES_DEFAULT,
        }
    }
}

/// Segment size for a chunk size: a quarter of this machine's L2 (at most
/// [`SEGMENT_BYTES_DEFAULT`]), or one chunk if larger, and never more than
/// [`READS_PER_SEGMENT_MAX`] chunks.
///
/// A quarter of L2 because the in-process fabric copies a READ's bytes when
/// it is posted: with double buffering a segment is copied, then the one
/// before it is processed, then it is. Two segments in half of L2 are still
/// there when used (the other half is the vertex window's), where 1 MiB
/// segments were read back from the last-level cache. R-MAT 22 BFS at α 0.8,
/// far, 4 interleaved runs: 0.234-0.319 s with 1 MiB segments, 0.233-0.291 s
/// with 256 KiB (this machine's L2 is 1 MiB).
pub fn segment_bytes_for(chunk_bytes: u64) -> u64 {
    (crate::window::l2_bytes() / 4)
        .min(SEGMENT_BYTES_DEFAULT)
        .max(chunk_bytes)
        .min(chunk_bytes * READS_PER_SEGMENT_MAX)
}

/// Blocks split between local memory and a far-memory region.
pub struct FarStore<F: Fabric> {
    fabric: F,
    config: FarConfig,
    table: BlockTable,
    resident: Resident,
    lease: Option<Lease>,
    /// Per order: the offset in the far region of the block's part after
    /// its resident prefix, if any of it is remote.
    remote_at: [Vec<Option<u64>>; 2],
    remote_bytes: u64,
    /// [`segment_bytes_for`] the chunk size, read once.
    segment_bytes: u64,
}

impl<F: Fabric> FarStore<F> {
    /// Keeps the blocks `residency` marks resident in local memory and writes
    /// the others to a region borrowed from the server.
    pub fn new(
        fabric: F,
        grid: &Grid,
        orders: &[Order],
        residency: &Residency,
        config: FarConfig,
    ) -> Result<FarStore<F>> {
        check_chunk_bytes(config.chunk_bytes)?;
        let table = BlockTable::new(grid, orders)?;
        let resident = Resident::copy(grid, &table, residency);
        let n = table.shape().blocks();
        let mut remote_at = [vec![None; n], vec![None; n]];
        let mut remote_bytes = 0u64;
        for (o, p) in table.blocks() {
            // The part after the resident prefix (a multiple of 8, like the prefix).
            let far = table.block_len(o, p) - residency.resident_bytes(o, p);
            if far > 0 {
                remote_at[o.index()][p] = Some(remote_bytes);
                remote_bytes += far;
            }
        }
        let mut store = FarStore {
            fabric,
            config,
            table,
            resident,
            lease: None,
            remote_at,
            remote_bytes,
            segment_bytes: segment_bytes_for(config.chunk_bytes),
        };
        if remote_bytes > 0 {
            let mut control = Control::connect(&store.fabric, config.client, config.server)?;
            let lease = control.alloc(remote_bytes)?;
            store.lease = Some(lease);
            store.write_remote(grid, lease.region)?;
        }
        Ok(store)
    }

    /// Copies every remote block into the far region with pipelined WRITEs.
    fn write_remote(&self, grid: &Grid, region: RegionId) -> Result<()> {
        let mut port = self.fabric.port(self.config.client)?;
        let mut done: Vec<Completion> = Vec::with_capacity(SETUP_WINDOW);
        let check = |done: &mut Vec<Completion>| -> Result<()> {
            for c in done.drain(..) {
                c.result?;
            }
            Ok(())
        };
        for (o, p) in self.table.blocks() {
            let Some(at) = self.remote_at[o.index()][p] else {
                continue;
            };
            let r = grid.block_bytes(o, p);
            let from = r.start + self.resident.prefix(o, p);
            let bytes = &grid.bytes(o)[from as usize..r.end as usize];
            for (k, piece) in bytes.chunks(SETUP_WRITE_BYTES as usize).enumerate() {
                while port.inflight() >= SETUP_WINDOW {
                    port.wait(&mut done)?;
                    check(&mut done)?;
                }
                let offset = at + k as u64 * SETUP_WRITE_BYTES;
                port.post(WorkRequest::write(
                    0,
                    self.config.server,
                    region,
                    offset,
                    piece.to_vec(),
                ))?;
            }
        }
        while port.inflight() > 0 {
            port.wait(&mut done)?;
            check(&mut done)?;
        }
        Ok(())
    }
}

impl<F: Fabric> Drop for FarStore<F> {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            // Best effort: a server that is gone keeps nothing to return.
            if let Ok(mut c) = Control::connect_quick(&self.fabric, self.config) {
                let _ = c.free(lease);
            }
        }
    }
}

impl<P: Port> Control<P> {
    /// A control port for returning a lease, without waiting for the server.
    pub(crate) fn connect_quick<F: Fabric<Port = P>>(
        fabric: &F,
        config: FarConfig,
    ) -> Result<Control<P>> {
        if fabric.hosts(config.server) {
            // In-process: the server thread has stopped; nothing would read the message.
            return Err(AnalyticsError::Server {
                machine: config.server,
                reason: "in-process server already stopped".into(),
            });
        }
        Control::connect(fabric, config.client, config.server)
    }
}

impl<F: Fabric> EdgeStore for FarStore<F> {
    fn backend(&self) -> Backend {
        Backend::Far
    }

    fn table(&self) -> &BlockTable {
        &self.table
    }

    fn open_stream(&self) -> Result<Box<dyn FetchStream + '_>> {
        Ok(Box::new(FarStream {
            store: self,
            port: self.fabric.port(self.config.client)?,
            pending: VecDeque::with_capacity(2),
            stash: VecDeque::new(),
            spare: Vec::new(),
            next_id: 0,
            buffer_bytes: 0,
            stats: StreamStats::default(),
        }))
    }

    fn segment_bytes_max(&self) -> u64 {
        self.segment_bytes
    }

    fn footprint(&self) -> Footprint {
        Footprint {
            resident_bytes: self.resident.len(),
            remote_bytes: self.remote_bytes,
            page_cache_bytes: 0,
        }
    }
}

enum Pending<'s> {
    Resident(&'s [u8]),
    /// READs with ids `first..first + reads` belong to this segment, after
    /// its `local` bytes if it starts in its block's resident prefix; the
    /// first chunk's `head` bytes and the last one's `tail` bytes are word
    /// rounding, not the segment's.
    Remote {
        local: Option<&'s [u8]>,
        first: u64,
        reads: u64,
        head: usize,
        tail: usize,
    },
}

struct FarStream<'s, F: Fabric> {
    store: &'s FarStore<F>,
    port: F::Port,
    pending: VecDeque<Pending<'s>>,
    /// Completions that arrived while waiting for an earlier segment's.
    stash: VecDeque<Completion>,
    spare: Vec<Vec<u8>>,
    next_id: u64,
    /// Bytes of buffers this stream owns (spare plus in flight).
    buffer_bytes: u64,
    stats: StreamStats,
}

impl<F: Fabric> FarStream<'_, F> {
    /// A buffer of exactly `len` bytes, recycled when possible.
    fn buffer(&mut self, len: usize) -> Vec<u8> {
        match self.spare.pop() {
            Some(mut b) => {
                let before = b.capacity();
                // Only the part beyond the old length is zero-filled.
                b.resize(len, 0);
                self.buffer_bytes += (b.capacity() - before) as u64;
                b
            }
            None => {
                self.buffer_bytes += len as u64;
                vec![0u8; len]
            }
        }
    }

    fn next_completion(&mut self) -> Result<Completion> {
        if let Some(c) = self.stash.pop_front() {
            return Ok(c);
        }
        let t = Instant::now();
        let mut got = Vec::new();
        while got.is_empty() {
            let n = self.port.wait(&mut got)?;
            // A begun segment's READs are in flight until consumed: an idle port is a bug.
            assert!(
                n > 0 || self.port.inflight() > 0,
                "a far segment's READs vanished from the port"
            );
        }
        self.stats.wait_ns += ns_since(t);
        let mut it = got.into_iter();
        let first = it.next().expect("non-empty");
        self.stash.extend(it);
        Ok(first)
    }
}

impl<F: Fabric> FetchStream for FarStream<'_, F> {
    fn begin(&mut self, seg: Segment) -> Result<()> {
        debug_assert!(self.pending.len() < self.depth_max());
        let (local, rest) = self.store.resident.split(&seg);
        let Some(seg) = rest else {
            self.pending
                .push_back(Pending::Resident(local.expect("a segment is not empty")));
            return Ok(());
        };
        let prefix = self.store.resident.prefix(seg.order, seg.position as usize);
        let remote = self.store.remote_at[seg.order.index()][seg.position as usize]
            .expect("a block with bytes past its prefix is remote");
        debug_assert!(
            remote.is_multiple_of(ALIGN_BYTES) && prefix.is_multiple_of(ALIGN_BYTES),
            "remote parts are word-aligned"
        );
        debug_assert!(
            seg.offset + seg.len <= self.store.table.block_len(seg.order, seg.position as usize),
            "a segment stays inside its stored block"
        );
        let lease = self.store.lease.expect("remote blocks have a region");
        let chunk = self.store.config.chunk_bytes;
        // The segment's bytes in the region, and the words holding them:
        // inside the block's padded remote part.
        let (a, b) = (
            remote + seg.offset - prefix,
            remote + seg.offset - prefix + seg.len,
        );
        let lo = a / ALIGN_BYTES * ALIGN_BYTES;
        let hi = b.next_multiple_of(ALIGN_BYTES);
        let first = self.next_id;
        let mut off = lo;
        while off < hi {
            let len = chunk.min(hi - off);
            let buf = self.buffer(len as usize);
            self.port.post(WorkRequest::read_into(
                self.next_id,
                self.store.config.server,
                lease.region,
                off,
                buf,
            ))?;
            self.next_id += 1;
            off += len;
        }
        self.stats.fetch_ops += self.next_id - first;
        self.stats.buffer_bytes_peak = self.stats.buffer_bytes_peak.max(self.buffer_bytes);
        self.pending.push_back(Pending::Remote {
            local,
            first,
            reads: self.next_id - first,
            head: (a - lo) as usize,
            tail: (hi - b) as usize,
        });
        Ok(())
    }

    fn consume(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        match self.pending.pop_front().expect("consume after begin") {
            Pending::Resident(bytes) => {
                self.stats.bytes_resident += bytes.len() as u64;
                f(bytes);
            }
            Pending::Remote {
                local,
                first,
                reads,
                head,
                tail,
            } => {
                if let Some(bytes) = local {
                    self.stats.bytes_resident += bytes.len() as u64;
                    f(bytes);
                }
                for k in 0..reads {
                    let c = self.next_completion()?;
                    // One port, one target: completions come in posting order.
                    assert_eq!(c.id, first + k, "far READ completions out of order");
                    match c.result? {
                        Output::Data(buf) => {
                            self.stats.bytes_fetched += buf.len() as u64;
                            let a = if k == 0 { head } else { 0 };
                            let b = buf.len() - if k + 1 == reads { tail } else { 0 };
                            if a < b {
                                f(&buf[a..b]);
                            }
                            self.spare.push(buf);
                        }
                        other => unreachable!("a READ completed with {other:?}"),
                    }
                }
            }
        }
        Ok(())
    }

    fn stats(&self) -> StreamStats {
        self.stats
    }
}
