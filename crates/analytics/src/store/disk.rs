//! GridGraph's out-of-core original (Fargraph+ 9.2, "Original"): blocks that
//! are not resident live in a file and are read back with one large
//! sequential read per segment.
//!
//! File layout: remote blocks back to back, each starting at a multiple of
//! 4096 bytes (zero padding between), the file padded to a whole 4096. Reads
//! use `O_DIRECT` when the file system accepts it, so the operating system's
//! page cache does not turn the disk into memory (the paper limits memory
//! with a cgroup, which bounds the page cache too); where `O_DIRECT` is
//! refused (tmpfs, some overlay file systems) reads are buffered and the
//! report says so. Each engine thread opens its own file handle. Reads are
//! synchronous: the original has no overlap of I/O and computation.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{
    ns_since, BlockTable, EdgeStore, FetchStream, Footprint, Residency, Resident, Segment,
    StreamStats, SEGMENT_BYTES_DEFAULT,
};
use crate::error::{io_err, Result};
use crate::grid::{Grid, Order};
use crate::store::Backend;

/// Alignment of blocks in the file, of read offsets and lengths, and of read buffers.
pub const ALIGN_BYTES: u64 = 4096;

/// Blocks split between local memory and a file.
pub struct DiskStore {
    path: PathBuf,
    direct: bool,
    table: BlockTable,
    resident: Resident,
    /// Per order: the offset in the file of the block's part after its
    /// resident prefix, if any of it is on disk.
    at: [Vec<Option<u64>>; 2],
    remote_bytes: u64,
}

impl DiskStore {
    /// Keeps the blocks `residency` marks resident in memory and writes the
    /// others to a new file in `dir` (removed when the store is dropped).
    pub fn new(
        grid: &Grid,
        orders: &[Order],
        residency: &Residency,
        dir: &Path,
    ) -> Result<DiskStore> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let table = BlockTable::new(grid, orders)?;
        let resident = Resident::copy(grid, &table, residency);
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let path = dir.join(format!(
            "locus-fargraph-{}-{}.blocks",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let n = table.shape().blocks();
        let mut at = [vec![None; n], vec![None; n]];
        let mut remote_bytes = 0u64;
        {
            let file = File::create(&path).map_err(io_err("create", &path))?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            let mut pos = 0u64;
            for (o, p) in table.blocks() {
                // The part after the block's resident prefix.
                let r = grid.block_bytes(o, p);
                let from = r.start + residency.resident_bytes(o, p);
                if from >= r.end {
                    continue;
                }
                at[o.index()][p] = Some(pos);
                w.write_all(&grid.bytes(o)[from as usize..r.end as usize])
                    .map_err(io_err("write", &path))?;
                let len = r.end - from;
                remote_bytes += len;
                let padded = len.next_multiple_of(ALIGN_BYTES);
                w.write_all(&vec![0u8; (padded - len) as usize])
                    .map_err(io_err("write", &path))?;
                pos += padded;
            }
            w.flush().map_err(io_err("write", &path))?;
            w.get_ref().sync_all().map_err(io_err("write", &path))?;
        }
        let direct = open(&path, true).is_ok_and(|f| {
            let mut buf = AlignedBuf::new(ALIGN_BYTES as usize);
            f.read_at(buf.slice(ALIGN_BYTES as usize), 0).is_ok()
        });
        Ok(DiskStore {
            path,
            direct,
            table,
            resident,
            at,
            remote_bytes,
        })
    }

    /// Whether reads bypass the page cache (`O_DIRECT`).
    pub fn direct_io(&self) -> bool {
        self.direct
    }
}

fn open(path: &Path, direct: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

impl Drop for DiskStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl EdgeStore for DiskStore {
    fn backend(&self) -> Backend {
        Backend::Disk
    }

    fn table(&self) -> &BlockTable {
        &self.table
    }

    fn open_stream(&self) -> Result<Box<dyn FetchStream + '_>> {
        let file = open(&self.path, self.direct).map_err(io_err("open", &self.path))?;
        Ok(Box::new(DiskStream {
            store: self,
            file,
            pending: VecDeque::with_capacity(2),
            buf: AlignedBuf::new(0),
            stats: StreamStats::default(),
        }))
    }

    fn segment_bytes_max(&self) -> u64 {
        SEGMENT_BYTES_DEFAULT
    }

    fn footprint(&self) -> Footprint {
        Footprint {
            resident_bytes: self.resident.len(),
            remote_bytes: self.remote_bytes,
            page_cache_bytes: 0,
        }
    }

    fn direct_io(&self) -> Option<bool> {
        Some(self.direct)
    }
}

/// A byte buffer whose usable part starts at a 4096-byte boundary (found
/// inside an over-allocated `Vec`, so no unsafe allocation is needed).
struct AlignedBuf {
    raw: Vec<u8>,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        AlignedBuf {
            raw: vec![0u8; len + ALIGN_BYTES as usize],
        }
    }

    /// The aligned slice of `len` bytes, growing the buffer if needed.
    fn slice(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() < len + ALIGN_BYTES as usize {
            self.raw = vec![0u8; len + ALIGN_BYTES as usize];
        }
        let skew = self.raw.as_ptr() as usize % ALIGN_BYTES as usize;
        let start = (ALIGN_BYTES as usize - skew) % ALIGN_BYTES as usize;
        &mut self.raw[start..start + len]
    }

    fn capacity(&self) -> u64 {
        self.raw.len() as u64
    }
}

struct DiskStream<'s> {
    store: &'s DiskStore,
    file: File,
    pending: VecDeque<Segment>,
    buf: AlignedBuf,
    stats: StreamStats,
}

impl FetchStream for DiskStream<'_> {
    fn begin(&mut self, seg: Segment) -> Result<()> {
        debug_assert!(self.pending.len() < self.depth_max());
        self.pending.push_back(seg);
        Ok(())
    }

    fn consume(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        let seg = self.pending.pop_front().expect("consume after begin");
        let (local, rest) = self.store.resident.split(&seg);
        if let Some(bytes) = local {
            self.stats.bytes_resident += bytes.len() as u64;
            f(bytes);
        }
        let Some(seg) = rest else {
            return Ok(());
        };
        let prefix = self.store.resident.prefix(seg.order, seg.position as usize);
        let at = self.store.at[seg.order.index()][seg.position as usize]
            .expect("a block with bytes past its prefix is on disk");
        let a = at + seg.offset - prefix;
        let (lo, hi) = (
            a / ALIGN_BYTES * ALIGN_BYTES,
            (a + seg.len).next_multiple_of(ALIGN_BYTES),
        );
        let t = Instant::now();
        let span = self.buf.slice((hi - lo) as usize);
        self.file
            .read_exact_at(span, lo)
            .map_err(io_err("read", &self.store.path))?;
        self.stats.wait_ns += ns_since(t);
        self.stats.fetch_ops += 1;
        self.stats.bytes_fetched += hi - lo;
        let skip = (a - lo) as usize;
        f(&span[skip..skip + seg.len as usize]);
        self.stats.buffer_bytes_peak = self.stats.buffer_bytes_peak.max(self.buf.capacity());
        Ok(())
    }

    fn depth_max(&self) -> usize {
        2
    }

    fn stats(&self) -> StreamStats {
        self.stats
    }
}
