//! A prepared grid on disk (`locus analytics prepare GRAPH --out DIR`): the
//! preprocessing done once and reused by later runs (`locus analytics run
//! --prepared DIR`), as GridGraph's `preprocess` writes its grid once.
//!
//! `DIR/grid.bin` holds everything a run needs: the shape, the out-degrees,
//! the compacted ids if any, both orders' offsets, the column order's stripe
//! offsets and both orders' edges. All integers are little-endian.
//!
//! ```text
//!  offset  bytes  field
//!       0      8  magic "LOCUSGRD"
//!       8      4  format version (u32, FORMAT_VERSION = 2)
//!      12      4  header length (u32, 104)
//!      16      8  vertices V (u64)
//!      24      8  edges E per order (u64)
//!      32      4  partitions P (u32)
//!      36      4  stripes per column block S (u32)
//!      40      8  partition width (u64)
//!      48      8  source ids per stripe (u64)
//!      56      8  value bytes the automatic P was sized for (u64; informational)
//!      64      8  compacted ids I (u64; 0: the ids are the input's)
//!      72      8  payload length in bytes (u64)
//!      80      4  CRC-32 of the payload (u32)
//!      84      4  bytes per edge B (u32: 4 compact, 8 wide; crate::layout)
//!      88      8  stored bytes per order D (u64: blocks padded to 8 bytes)
//!      96      4  CRC-32 of bytes 0..96 (u32)
//!     100      4  zero
//!  payload, in this order:
//!         4 V     out-degrees (u32)
//!         4 I     original id of each compacted vertex (u32, increasing)
//!     8 (P*P+1)   row-order block offsets, in edges (u64)
//!     8 (P*P+1)   column-order block offsets (u64)
//!   8 (P*P*S+1)   column-order stripe offsets (u64)
//!           D     row-order blocks (B-byte edges, each block padded to 8 bytes)
//!           D     column-order blocks
//! ```
//!
//! Version 1 (before the compact layout) is still read: its header is 96
//! bytes, bytes 84..88 hold the CRC-32 of bytes 0..84 and 88..96 are zero,
//! and its edges are wide (B = 8, D = 8 E).
//!
//! Invariants a reader checks before anything is used, each failure a
//! [`AnalyticsError::Prepared`] naming the file: the magic; the version
//! (another one says to prepare again); the header's CRC; the payload's
//! length against the header and the file's size (truncation); the
//! payload's CRC (corruption); the shape the header states is the one
//! `V` and `P` give, and B is a layout that width allows; offsets start at
//! 0, never decrease and end at E, the stripe offsets of each block start
//! and end with its block offsets, and the offsets' padded blocks add up to
//! D.
//! The file is written to `grid.bin.partial` and renamed, so a crash never
//! leaves a readable half.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{io_err, AnalyticsError, Result};
use crate::grid::{storage_starts, EdgeLayout, Grid, Shape};
use crate::input::IdMap;

/// The file inside a prepared directory.
pub const GRID_FILE: &str = "grid.bin";
/// The format version this build writes (it reads this and version 1).
pub const FORMAT_VERSION: u32 = 2;
/// Header bytes of [`FORMAT_VERSION`].
pub const HEADER_BYTES: usize = 104;
/// Header bytes of version 1.
pub const HEADER_BYTES_V1: usize = 96;
const MAGIC: &[u8; 8] = b"LOCUSGRD";

/// What the header of a prepared grid says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Vertices.
    pub vertices: u64,
    /// Edges per order.
    pub edges: u64,
    /// Partitions per side.
    pub partitions: u32,
    /// Stripes per column block.
    pub stripes: u32,
    /// Partition width.
    pub width: u64,
    /// Source ids per stripe.
    pub stripe_ids: u64,
    /// Value bytes the automatic P was sized for.
    pub value_bytes: u64,
    /// Compacted ids (0: none).
    pub ids: u64,
    /// How edges are encoded.
    pub layout: EdgeLayout,
    /// Stored bytes of one order's blocks (padded).
    pub stored_bytes: u64,
}

impl Header {
    fn payload_bytes(&self) -> u64 {
        let b = u64::from(self.partitions) * u64::from(self.partitions);
        4 * self.vertices
            + 4 * self.ids
            + 8 * 2 * (b + 1)
            + 8 * (b * u64::from(self.stripes) + 1)
            + 2 * self.stored_bytes
    }
}

/// Writes `grid` (and `ids`) to `dir/grid.bin`, creating `dir`. Returns the
/// file's path.
pub fn write(dir: &Path, grid: &Grid, ids: Option<&IdMap>, value_bytes: u64) -> Result<PathBuf> {
    if grid.weighted() {
        // The header's edge size names an unweighted layout (4 or 8 bytes).
        return Err(crate::error::config_err(
            "prepared",
            "a prepared grid holds unweighted edges only; run a weighted graph from its file",
        ));
    }
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let path = dir.join(GRID_FILE);
    let partial = dir.join(format!("{GRID_FILE}.partial"));
    let shape = grid.shape();
    let header = Header {
        vertices: shape.vertex_count,
        edges: grid.edge_count(),
        partitions: shape.partitions,
        stripes: grid.stripes(),
        width: shape.width,
        stripe_ids: grid.stripe_ids(),
        value_bytes,
        ids: ids.map_or(0, |m| m.originals().len() as u64),
        layout: grid.layout(),
        stored_bytes: grid.edge_bytes(),
    };
    // The payload's CRC first (one pass over the memory), then the file.
    let mut crc = crc32fast::Hasher::new();
    for_each_section(grid, ids, |b| crc.update(b));
    let payload_crc = crc.finalize();
    let mut h = Vec::with_capacity(HEADER_BYTES);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
    for x in [header.vertices, header.edges] {
        h.extend_from_slice(&x.to_le_bytes());
    }
    h.extend_from_slice(&header.partitions.to_le_bytes());
    h.extend_from_slice(&header.stripes.to_le_bytes());
    for x in [
        header.width,
        header.stripe_ids,
        header.value_bytes,
        header.ids,
        header.payload_bytes(),
    ] {
        h.extend_from_slice(&x.to_le_bytes());
    }
    h.extend_from_slice(&payload_crc.to_le_bytes());
    h.extend_from_slice(&(header.layout.edge_bytes() as u32).to_le_bytes());
    h.extend_from_slice(&header.stored_bytes.to_le_bytes());
    let header_crc = crc32fast::hash(&h);
    h.extend_from_slice(&header_crc.to_le_bytes());
    h.resize(HEADER_BYTES, 0);
    let file = File::create(&partial).map_err(io_err("create", &partial))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut res = w.write_all(&h);
    for_each_section(grid, ids, |b| {
        if res.is_ok() {
            res = w.write_all(b);
        }
    });
    res.and_then(|_| w.flush())
        .and_then(|_| w.get_ref().sync_all())
        .map_err(io_err("write", &partial))?;
    drop(w);
    std::fs::rename(&partial, &path).map_err(io_err("rename", &partial))?;
    Ok(path)
}

/// Calls `f` on the payload's sections in file order.
fn for_each_section(grid: &Grid, ids: Option<&IdMap>, mut f: impl FnMut(&[u8])) {
    use crate::grid::Order;
    let words = |xs: &[u32], f: &mut dyn FnMut(&[u8])| {
        for c in xs.chunks(1 << 16) {
            let b: Vec<u8> = c.iter().flat_map(|x| x.to_le_bytes()).collect();
            f(&b);
        }
    };
    let longs = |xs: &[u64], f: &mut dyn FnMut(&[u8])| {
        for c in xs.chunks(1 << 15) {
            let b: Vec<u8> = c.iter().flat_map(|x| x.to_le_bytes()).collect();
            f(&b);
        }
    };
    words(grid.out_degree(), &mut f);
    if let Some(m) = ids {
        words(m.originals(), &mut f);
    }
    longs(grid.offsets(Order::Row), &mut f);
    longs(grid.offsets(Order::Column), &mut f);
    longs(grid.stripe_offsets(), &mut f);
    for c in grid.bytes(Order::Row).chunks(1 << 20) {
        f(c);
    }
    for c in grid.bytes(Order::Column).chunks(1 << 20) {
        f(c);
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> AnalyticsError {
    AnalyticsError::Prepared {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Reads and checks the header of `dir/grid.bin` (cheap: the memory check
/// happens before the payload is read).
pub fn read_header(dir: &Path) -> Result<Header> {
    let path = dir.join(GRID_FILE);
    let mut f = File::open(&path).map_err(io_err("open", &path))?;
    let (h, _, _) = header(&mut f, &path)?;
    Ok(h)
}

/// The header, its payload CRC, and its length (by version).
fn header(f: &mut File, path: &Path) -> Result<(Header, u32, u64)> {
    let mut h = [0u8; HEADER_BYTES];
    let short = |e: std::io::Error, len: usize| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            bad(path, format!("shorter than the {len}-byte header"))
        } else {
            io_err("read", path)(e)
        }
    };
    f.read_exact(&mut h[..HEADER_BYTES_V1])
        .map_err(|e| short(e, HEADER_BYTES_V1))?;
    if &h[..8] != MAGIC {
        return Err(bad(path, "not a prepared grid (no LOCUSGRD magic)"));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    // Where the header's CRC is, and what it covers.
    let (len, crc_at) = match version {
        1 => (HEADER_BYTES_V1, 84),
        FORMAT_VERSION => (HEADER_BYTES, 96),
        _ => {
            return Err(bad(
                path,
                format!(
                    "format version {version}, this locus reads versions 1 and \
                     {FORMAT_VERSION}: run `locus analytics prepare` again"
                ),
            ))
        }
    };
    f.read_exact(&mut h[HEADER_BYTES_V1..len])
        .map_err(|e| short(e, len))?;
    let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
    if crc32fast::hash(&h[..crc_at]) != u32_at(crc_at) {
        return Err(bad(
            path,
            "the header's checksum does not match (corrupt header)",
        ));
    }
    let (edge_bytes, stored_bytes) = if version == 1 {
        (8, u64_at(24).saturating_mul(8))
    } else {
        (u64::from(u32_at(84)), u64_at(88))
    };
    let layout = EdgeLayout::from_edge_bytes(edge_bytes).ok_or_else(|| {
        bad(
            path,
            format!("{edge_bytes} bytes per edge is no edge layout"),
        )
    })?;
    let header = Header {
        vertices: u64_at(16),
        edges: u64_at(24),
        partitions: u32_at(32),
        stripes: u32_at(36),
        width: u64_at(40),
        stripe_ids: u64_at(48),
        value_bytes: u64_at(56),
        ids: u64_at(64),
        layout,
        stored_bytes,
    };
    let shape = Shape::new(header.vertices, Some(header.partitions))
        .map_err(|e| bad(path, format!("the header's shape is impossible: {e}")))?;
    let blocks = u64::from(header.partitions) * u64::from(header.partitions);
    let edge_bytes_min = header.edges.saturating_mul(edge_bytes);
    if u32_at(12) as usize != len
        || !layout.fits(header.width)
        || stored_bytes % 8 != 0
        || stored_bytes < edge_bytes_min
        || stored_bytes > edge_bytes_min.saturating_add(4 * blocks)
        || shape.partitions != header.partitions
        || shape.width != header.width
        || header.stripes == 0
        || header.stripe_ids == 0
        || header.width.div_ceil(header.stripe_ids) != u64::from(header.stripes)
        || (header.ids != 0 && header.ids != header.vertices)
        || u64_at(72) != header.payload_bytes()
    {
        return Err(bad(path, "the header's fields disagree with each other"));
    }
    Ok((header, u32_at(80), len as u64))
}

/// Reads `dir/grid.bin` back: the grid and the compacted ids, after every
/// check in the module doc.
pub fn read(dir: &Path) -> Result<(Grid, Option<IdMap>, Header)> {
    let path = dir.join(GRID_FILE);
    let mut f = File::open(&path).map_err(io_err("open", &path))?;
    let (h, payload_crc, header_bytes) = header(&mut f, &path)?;
    let size = f.metadata().map_err(io_err("stat", &path))?.len();
    let want = header_bytes + h.payload_bytes();
    if size != want {
        return Err(bad(
            &path,
            format!("{size} bytes, the header says {want} (truncated or overwritten)"),
        ));
    }
    let mut crc = crc32fast::Hasher::new();
    let mut section = |len: u64| -> Result<Vec<u8>> {
        let mut b = vec![0u8; len as usize];
        f.read_exact(&mut b).map_err(io_err("read", &path))?;
        crc.update(&b);
        Ok(b)
    };
    let to_u32 = |b: Vec<u8>| -> Vec<u32> {
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    };
    let to_u64 = |b: Vec<u8>| -> Vec<u64> {
        b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    let blocks = u64::from(h.partitions) * u64::from(h.partitions);
    let out_degree = to_u32(section(4 * h.vertices)?);
    let ids = to_u32(section(4 * h.ids)?);
    let row_off = to_u64(section(8 * (blocks + 1))?);
    let col_off = to_u64(section(8 * (blocks + 1))?);
    let stripe_off = to_u64(section(8 * (blocks * u64::from(h.stripes) + 1))?);
    let row = section(h.stored_bytes)?;
    let col = section(h.stored_bytes)?;
    if crc.finalize() != payload_crc {
        return Err(bad(
            &path,
            "the payload's checksum does not match (corrupt data)",
        ));
    }
    let monotone = |o: &[u64]| o[0] == 0 && o.windows(2).all(|w| w[0] <= w[1]);
    if !monotone(&row_off)
        || !monotone(&col_off)
        || !monotone(&stripe_off)
        || row_off[blocks as usize] != h.edges
        || col_off[blocks as usize] != h.edges
        || stripe_off[stripe_off.len() - 1] != h.edges
        || (0..=blocks as usize).any(|p| stripe_off[p * h.stripes as usize] != col_off[p])
        || storage_starts(&row_off, h.layout).last() != Some(&h.stored_bytes)
        || storage_starts(&col_off, h.layout).last() != Some(&h.stored_bytes)
    {
        return Err(bad(&path, "block or stripe offsets are inconsistent"));
    }
    let ids = if h.ids == 0 {
        None
    } else {
        Some(
            IdMap::from_originals(ids)
                .ok_or_else(|| bad(&path, "the compacted ids are not strictly increasing"))?,
        )
    };
    let shape = Shape::new(h.vertices, Some(h.partitions)).expect("checked in the header");
    let grid = Grid::from_parts(
        shape,
        h.edges,
        out_degree,
        h.layout,
        [row, col],
        [row_off, col_off],
        h.stripe_ids,
        h.stripes,
        stripe_off,
    );
    Ok((grid, ids, h))
}
