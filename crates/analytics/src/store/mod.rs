//! Edge-block storage backends behind one trait (Fargraph+ 3.1, 5.2, 6; Table 1).
//!
//! A store holds the edge blocks of the grid orders an algorithm streams. The
//! engine asks for **segments** (a byte range of one block, at most
//! [`EdgeStore::segment_bytes_max`]) through a [`FetchStream`], one stream per
//! engine thread: `begin` starts fetching a segment, `consume` waits for the
//! oldest begun segment and hands its bytes over in pieces. Double buffering
//! is the engine beginning segment k+1 before consuming segment k.
//!
//! | backend | where non-resident blocks live | unit of transfer |
//! |---|---|---|
//! | [`local`] (Oracle) | nowhere: every block is in local memory | none |
//! | [`disk`] (GridGraph's out-of-core original) | a file, block-aligned | one large read per segment (O_DIRECT when the file system allows) |
//! | [`far`] (Fargraph+) | another machine's memory on the fabric | one-sided READs of `chunk_bytes`, all of a segment posted at once |
//! | [`paged`] (Fastswap-like) | another machine's memory on the fabric | 4 KB pages demand-fetched into a shared LRU page cache, with asynchronous readahead of the following pages; with `paged_vertices` the vertex arrays page too, through userfaultfd ([`vpage`]) |
//!
//! Local, disk and far keep the blocks the placement marks resident in local
//! memory (graph-aware placement, [`crate::placement`]); paged is graph-unaware:
//! all edge bytes are in the swap space and its page cache gets the same local
//! budget (with `paged_vertices`, the whole budget, shared with the vertex
//! pages, as the kernel's memory is under Fastswap).

pub mod disk;
pub mod far;
pub mod local;
pub mod paged;
mod pool;
#[allow(unsafe_code)] // mmap, madvise and the userfaultfd ioctls (see its doc)
mod uffd;
pub mod vpage;

use serde::Serialize;

use crate::error::{config_err, Result};
use crate::grid::{Grid, Order, Shape};
use crate::layout::{EdgeLayout, ALIGN_BYTES};

/// Fetch size of the far backend (Fargraph+ 10.3: 256 KB performed best).
pub const CHUNK_BYTES_DEFAULT: u64 = 256 << 10;
/// Smallest chunk (one fabric word: one wide edge or two compact ones).
pub const CHUNK_BYTES_MIN: u64 = ALIGN_BYTES;
/// Largest chunk (the TCP fabric's frames carry up to 16 MiB).
pub const CHUNK_BYTES_MAX: u64 = 8 << 20;
/// Largest segment the engine asks for at once when chunks are smaller: a
/// block bigger than this is streamed in several segments, so a stream's
/// buffers stay bounded whatever the block sizes.
pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 20;
/// Page size of the paged (Fastswap) baseline: the kernel's 4 KB page.
pub const PAGE_BYTES: u64 = 4096;

/// The four schemes of Fargraph+ Table 1 that Locus runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Oracle: all edge blocks in local memory.
    Local,
    /// GridGraph out-of-core: non-resident blocks on disk.
    Disk,
    /// Fargraph+: non-resident blocks in far memory, chunked one-sided reads.
    Far,
    /// Fastswap-like: 4 KB pages demand-fetched from far memory, LRU page cache.
    Paged,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 4] = [Backend::Local, Backend::Disk, Backend::Far, Backend::Paged];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Disk => "disk",
            Backend::Far => "far",
            Backend::Paged => "paged",
        }
    }

    /// Parses a name (`oracle` is accepted for `local`).
    pub fn parse(s: &str) -> Result<Backend> {
        match s.to_ascii_lowercase().as_str() {
            "local" | "oracle" => Ok(Backend::Local),
            "disk" => Ok(Backend::Disk),
            "far" | "fargraph" => Ok(Backend::Far),
            "paged" | "fastswap" => Ok(Backend::Paged),
            _ => Err(config_err(
                "backend",
                format!("'{s}' is not one of local, disk, far, paged"),
            )),
        }
    }
}

/// A byte range of one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The order whose block it is.
    pub order: Order,
    /// The block's position in that order.
    pub position: u32,
    /// First byte, relative to the block's start (a multiple of the edge
    /// size: with compact edges, not necessarily of 8).
    pub offset: u64,
    /// Bytes (a positive multiple of the edge size), inside the block's
    /// edges (never its pad).
    pub len: u64,
}

/// What a stream did, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamStats {
    /// Bytes brought in from far memory or disk.
    pub bytes_fetched: u64,
    /// One-sided READs (far, paged) or read calls (disk).
    pub fetch_ops: u64,
    /// Bytes handed over from resident blocks or cached pages.
    pub bytes_resident: u64,
    /// Paged: page faults (misses) and hits.
    pub page_faults: u64,
    /// Paged: pages found in the cache (or whose readahead READ was in flight).
    pub page_hits: u64,
    /// Paged: pages fetched by readahead (also in `fetch_ops` and `bytes_fetched`).
    pub readahead_pages: u64,
    /// Nanoseconds spent waiting for data in `consume`.
    pub wait_ns: u64,
    /// Most bytes of fetch buffers this stream held at once.
    pub buffer_bytes_peak: u64,
}

impl StreamStats {
    /// Field-wise sum (peaks add: streams hold their buffers at the same time).
    pub fn plus(&self, o: &StreamStats) -> StreamStats {
        StreamStats {
            bytes_fetched: self.bytes_fetched + o.bytes_fetched,
            fetch_ops: self.fetch_ops + o.fetch_ops,
            bytes_resident: self.bytes_resident + o.bytes_resident,
            page_faults: self.page_faults + o.page_faults,
            page_hits: self.page_hits + o.page_hits,
            readahead_pages: self.readahead_pages + o.readahead_pages,
            wait_ns: self.wait_ns + o.wait_ns,
            buffer_bytes_peak: self.buffer_bytes_peak + o.buffer_bytes_peak,
        }
    }
}

/// One thread's fetch stream (its own queue pair, file handle or fault path).
pub trait FetchStream: Send {
    /// Starts fetching `seg`. At most [`FetchStream::depth_max`] segments may be
    /// begun and not yet consumed.
    fn begin(&mut self, seg: Segment) -> Result<()>;

    /// Waits for the oldest begun segment and calls `f` on its bytes, in
    /// order, in one or more pieces (each a whole number of edges).
    fn consume(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<()>;

    /// Segments that may be outstanding at once (2 = double buffering).
    fn depth_max(&self) -> usize {
        2
    }

    /// What the stream did so far.
    fn stats(&self) -> StreamStats;
}

/// Edge blocks of some grid orders, wherever they live.
pub trait EdgeStore: Send + Sync {
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// The blocks' table (shape and per-order offsets).
    fn table(&self) -> &BlockTable;

    /// Opens a fetch stream for one engine thread.
    fn open_stream(&self) -> Result<Box<dyn FetchStream + '_>>;

    /// Largest segment the engine should ask for.
    fn segment_bytes_max(&self) -> u64;

    /// Where the edge bytes are: local memory versus far memory or disk.
    fn footprint(&self) -> Footprint;

    /// Disk: whether reads bypass the operating system's page cache.
    fn direct_io(&self) -> Option<bool> {
        None
    }

    /// Paged with `paged_vertices`: the memory vertex arrays live in
    /// ([`crate::vertex`]); `None`: vertex data is local.
    fn vertex_memory(&self) -> Option<std::sync::Arc<dyn crate::vertex::VertexMemory>> {
        None
    }
}

/// Edge bytes by location, and the local cache of the paged baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Footprint {
    /// Edge bytes kept in local memory (resident blocks).
    pub resident_bytes: u64,
    /// Edge bytes in far memory or on disk.
    pub remote_bytes: u64,
    /// Paged: the page cache's capacity in bytes.
    pub page_cache_bytes: u64,
}

/// Shape and block offsets of the orders a store holds.
#[derive(Clone, Debug)]
pub struct BlockTable {
    shape: Shape,
    layout: EdgeLayout,
    /// Per order (by `Order::index`): `blocks + 1` offsets in edges, if held.
    offsets: [Option<Vec<u64>>; 2],
    /// Per order: `blocks + 1` byte starts of the stored (padded) blocks.
    starts: [Option<Vec<u64>>; 2],
    /// Source ids per stripe of a column block, and stripes per block.
    stripe_ids: u64,
    stripes: u32,
    /// Column order, if held: `blocks * stripes + 1` stripe offsets in edges.
    stripe_offsets: Option<Vec<u64>>,
}

impl BlockTable {
    /// The table of `orders` of `grid`.
    pub fn new(grid: &Grid, orders: &[Order]) -> Result<BlockTable> {
        if orders.is_empty() {
            return Err(config_err("orders", "a store needs at least one order"));
        }
        let (mut offsets, mut starts) = ([None, None], [None, None]);
        for &o in orders {
            offsets[o.index()] = Some(grid.offsets(o).to_vec());
            starts[o.index()] = Some(grid.starts(o).to_vec());
        }
        let stripe_offsets = offsets[Order::Column.index()]
            .is_some()
            .then(|| grid.stripe_offsets().to_vec());
        Ok(BlockTable {
            shape: grid.shape(),
            layout: grid.layout(),
            offsets,
            starts,
            stripe_ids: grid.stripe_ids(),
            stripes: grid.stripes(),
            stripe_offsets,
        })
    }

    /// How the blocks' edges are encoded.
    pub fn layout(&self) -> EdgeLayout {
        self.layout
    }

    /// Source ids per stripe of a column block.
    pub fn stripe_ids(&self) -> u64 {
        self.stripe_ids
    }

    /// Stripes per column block (1: blocks are not striped).
    pub fn stripes(&self) -> u32 {
        self.stripes
    }

    /// Byte range, relative to the block's start, of stripe `t` of the
    /// column block at `position` (empty if the column order is not held).
    pub fn stripe_bytes(&self, position: usize, t: u32) -> std::ops::Range<u64> {
        let Some(so) = &self.stripe_offsets else {
            return 0..0;
        };
        let k = position * self.stripes as usize + t as usize;
        let start = so[position * self.stripes as usize];
        let eb = self.layout.edge_bytes();
        (so[k] - start) * eb..(so[k + 1] - start) * eb
    }

    /// The grid's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Whether `order` is held.
    pub fn has(&self, order: Order) -> bool {
        self.offsets[order.index()].is_some()
    }

    /// The orders held.
    pub fn orders(&self) -> Vec<Order> {
        Order::ALL.into_iter().filter(|&o| self.has(o)).collect()
    }

    /// Stored bytes of the block at `position` of `order`, pad included, a
    /// multiple of 8 (0 if the order is not held): what a store lays out.
    pub fn block_len(&self, order: Order, position: usize) -> u64 {
        self.starts[order.index()]
            .as_ref()
            .map_or(0, |s| s[position + 1] - s[position])
    }

    /// Bytes of the edges of the block at `position` of `order`, without
    /// the pad (0 if the order is not held): what the engine streams.
    pub fn block_edge_bytes(&self, order: Order, position: usize) -> u64 {
        self.offsets[order.index()].as_ref().map_or(0, |o| {
            (o[position + 1] - o[position]) * self.layout.edge_bytes()
        })
    }

    /// Stored bytes of every held order.
    pub fn total_bytes(&self) -> u64 {
        self.starts.iter().flatten().map(|s| s[s.len() - 1]).sum()
    }

    /// Every (order, position) held, orders in `Order::ALL` order.
    pub fn blocks(&self) -> impl Iterator<Item = (Order, usize)> + '_ {
        let n = self.shape.blocks();
        self.orders()
            .into_iter()
            .flat_map(move |o| (0..n).map(move |p| (o, p)))
    }
}

/// How much of each block stays in local memory: a prefix of its stored
/// bytes, from none (the block is remote) to all of it (resident). Placement
/// keeps whole blocks and gives what room is left to a prefix of the next
/// one ([`crate::placement`]), so the achieved ratio is the one asked for
/// even when blocks are large.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Residency {
    /// Per order: resident prefix bytes of each block (a multiple of 8).
    prefix: [Vec<u64>; 2],
    /// Per order: each block's stored length.
    len: [Vec<u64>; 2],
}

impl Residency {
    /// Every block resident (`true`) or every block remote (`false`).
    pub fn all(table: &BlockTable, resident: bool) -> Residency {
        let n = table.shape().blocks();
        let len = [Order::Row, Order::Column]
            .map(|o| (0..n).map(|p| table.block_len(o, p)).collect::<Vec<u64>>());
        debug_assert_eq!(Order::Row.index(), 0);
        let prefix = if resident {
            len.clone()
        } else {
            [vec![0; n], vec![0; n]]
        };
        Residency { prefix, len }
    }

    /// Marks one whole block resident or remote.
    pub fn set(&mut self, order: Order, position: usize, resident: bool) {
        let len = self.len[order.index()][position];
        self.prefix[order.index()][position] = if resident { len } else { 0 };
    }

    /// Keeps the first `bytes` of a block local (rounded down to a whole
    /// fabric word, so to whole edges; at most the block); returns the bytes kept.
    pub fn set_prefix(&mut self, order: Order, position: usize, bytes: u64) -> u64 {
        let len = self.len[order.index()][position];
        let kept = (bytes / ALIGN_BYTES * ALIGN_BYTES).min(len);
        self.prefix[order.index()][position] = kept;
        kept
    }

    /// Bytes of a block kept local (its resident prefix).
    pub fn resident_bytes(&self, order: Order, position: usize) -> u64 {
        self.prefix[order.index()][position]
    }

    /// Whether a whole block is resident.
    pub fn is_resident(&self, order: Order, position: usize) -> bool {
        self.prefix[order.index()][position] == self.len[order.index()][position]
    }
}

/// The resident bytes (whole blocks and prefixes), copied out of the grid,
/// and where each block's are.
pub(crate) struct Resident {
    bytes: Vec<u8>,
    /// Per order: the start in `bytes` of the block's resident prefix.
    at: [Vec<Option<u64>>; 2],
    /// Per order: the resident prefix's length.
    prefix: [Vec<u64>; 2],
}

impl Resident {
    /// Copies what `residency` keeps local.
    pub(crate) fn copy(grid: &Grid, table: &BlockTable, residency: &Residency) -> Resident {
        let n = table.shape().blocks();
        let mut at = [vec![None; n], vec![None; n]];
        let mut prefix = [vec![0; n], vec![0; n]];
        let total: u64 = table
            .blocks()
            .map(|(o, p)| residency.resident_bytes(o, p))
            .sum();
        let mut bytes = Vec::with_capacity(total as usize);
        for (o, p) in table.blocks() {
            let keep = residency.resident_bytes(o, p);
            if keep > 0 {
                let r = grid.block_bytes(o, p);
                at[o.index()][p] = Some(bytes.len() as u64);
                prefix[o.index()][p] = keep;
                let a = r.start as usize;
                bytes.extend_from_slice(&grid.bytes(o)[a..a + keep as usize]);
            }
        }
        Resident { bytes, at, prefix }
    }

    /// Bytes of a block that are resident (a prefix).
    #[inline]
    pub(crate) fn prefix(&self, order: Order, position: usize) -> u64 {
        self.prefix[order.index()][position]
    }

    /// Splits `seg` at its block's resident prefix: the resident bytes it
    /// starts with, if any, and the rest, if any, as a segment of the same
    /// block (offsets still relative to the block's start).
    #[inline]
    pub(crate) fn split(&self, seg: &Segment) -> (Option<&[u8]>, Option<Segment>) {
        let (o, p) = (seg.order.index(), seg.position as usize);
        let keep = self.prefix[o][p];
        let end = seg.offset + seg.len;
        if seg.offset >= keep {
            return (None, Some(*seg));
        }
        let start = self.at[o][p].expect("a block with a resident prefix has a start");
        let local_end = end.min(keep);
        let head = &self.bytes[(start + seg.offset) as usize..(start + local_end) as usize];
        // Lazily: `end - keep` underflows when the segment ends in the prefix.
        let rest = (end > keep).then(|| Segment {
            offset: keep,
            len: end - keep,
            ..*seg
        });
        (Some(head), rest)
    }

    /// Resident bytes.
    pub(crate) fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// Checks a chunk size.
pub fn check_chunk_bytes(chunk_bytes: u64) -> Result<()> {
    if !(CHUNK_BYTES_MIN..=CHUNK_BYTES_MAX).contains(&chunk_bytes)
        || !chunk_bytes.is_multiple_of(ALIGN_BYTES)
    {
        return Err(config_err(
            "chunk_bytes",
            format!(
                "{chunk_bytes} must be a multiple of {ALIGN_BYTES} between {CHUNK_BYTES_MIN} \
                 and {CHUNK_BYTES_MAX}"
            ),
        ));
    }
    Ok(())
}

/// Nanoseconds since `t`.
pub(crate) fn ns_since(t: std::time::Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}
