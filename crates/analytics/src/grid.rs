//! Grid preprocessing (GridGraph 3, used by Fargraph+ 5.3): an edge list cut
//! into P x P blocks by source and destination vertex range.
//!
//! Vertices `0..V` fall into P partitions of `width = ceil(V / P)` ids each
//! (the last one may be shorter). Block `(i, j)` holds the edges whose source
//! is in partition `i` and destination in partition `j`: in row order in
//! input order, in column order sorted by (destination, source), so that a
//! destination's edges in a block are adjacent and a pass that owns the
//! destinations (every algorithm's) updates each one in a run of consecutive
//! edges instead of a random read-modify-write per edge. The
//! grid keeps every edge twice: once in **row order** (blocks `(0,0), (0,1),
//! ..., (1,0), ...`) and once in **column order** (`(0,0), (1,0), ...,
//! (0,1), ...`), each with `P*P + 1` block offsets counted in edges (u64, so
//! edge counts above 2^32 are fine). An edge is 4 bytes, its ids relative to
//! the block's partitions, when the width is at most 2^16, else 8 bytes as
//! in GridGraph's binary format ([`crate::layout`]); each block is stored
//! padded to a whole 8-byte word, so its byte start comes from the offsets
//! and the layout ([`storage_starts`]), not from the offsets alone:
//!
//! ```text
//!  order bytes:  | block 0 edges (pad) | block 1 edges (pad) | ... | block P*P-1 edges (pad) |
//!  offsets:      0                     o1                    o2   ...                       E  (in edges)
//!  edge:         wide | src u32 LE | dst u32 LE |   compact | src-src_lo u16 | dst-dst_lo u16 |
//! ```
//!
//! The automatic partition count sizes a partition's window to L2 for the
//! value type (to a quarter of the last-level cache for PageRank, whose
//! per-destination runs narrow partitions cut short: [`WindowCache`]); asked
//! for compact edges, it also caps the width at 2^16 (256 KiB of 4-byte or
//! 512 KiB of 8-byte values) so they apply.
//!
//! **Source stripes** (issue 12: BFS skipping inactive source ranges inside
//! blocks). A column-order block is cut by source id into stripes of
//! `stripe_ids` ids (the block's source range split from its start; the last
//! stripe may be shorter), laid out in stripe order, each stripe sorted by
//! (destination, source), with `P*P*S + 1` stripe offsets (S stripes per
//! block). A pass with an active set skips the bytes of stripes with no
//! active source ([`crate::engine`]). A destination still meets its edges in
//! increasing source order (stripes ascend by source, and within a stripe its
//! edges ascend by source), so every per-destination fold sees the same order
//! as with one stripe and results are bit-for-bit unchanged. With one stripe
//! per block (`stripe_ids >= width`) the layout is the plain (destination,
//! source) sort.
//!
//! Column order lets a thread own a destination range (no atomics, a fixed
//! update order); row order lets it own a source range. Preprocessing is two
//! passes over the input (count per block and out-degree, then fill), so its
//! extra memory is the two copies plus the offsets.

use std::ops::Range;
use std::path::Path;

use locus_graph::{Edge, EdgeList, Format, LoadOptions, Rmat, VERTEX_COUNT_MAX};
use serde::Serialize;

use crate::error::{config_err, Result};
pub use crate::layout::{decode_wide as decode, storage_starts, EdgeLayout, LayoutChoice};

/// Most partitions per side; P*P blocks, so at most 2^20 blocks.
pub const PARTITIONS_MAX: u32 = 1024;
pub use crate::window::{
    l2_bytes, llc_bytes, partition_vertices_auto, partition_vertices_auto_in, WindowCache,
    L2_BYTES_FALLBACK, LLC_BYTES_FALLBACK, PARTITIONS_AUTO_MIN, PARTITIONS_AUTO_MIN_LLC,
    PARTITION_VERTICES_AUTO_MIN,
};

/// How to build a grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridOptions {
    /// Partitions per side (None: automatic, from `value_bytes` and L2).
    pub partitions: Option<u32>,
    /// Source ids per stripe of a column block (`u64::MAX`: one stripe).
    pub stripe_ids: u64,
    /// Bytes per vertex of the window the automatic P sizes to `window_cache`.
    pub value_bytes: u64,
    /// Which cache the automatic P sizes the window to.
    pub window_cache: WindowCache,
    /// The edge encoding (automatic: compact where the width allows).
    pub layout: LayoutChoice,
}

impl Default for GridOptions {
    fn default() -> Self {
        GridOptions {
            partitions: None,
            stripe_ids: NO_STRIPES,
            value_bytes: 4,
            window_cache: WindowCache::L2,
            layout: LayoutChoice::Auto,
        }
    }
}
/// Source ids per stripe for the algorithms that stream with an active set
/// (BFS, Radii; see the module doc): 8192 ids, 128 bitmap words, 16 stripes
/// per block at R-MAT 20. Measured at R-MAT 20 (docs/results/fargraph.md): BFS was
/// faster with 8192 than with 1024 or none, while PageRank, which streams
/// every edge, was slower with any stripes (its destination runs shorten).
pub const STRIPE_IDS_SPARSE: u64 = 1 << 13;
/// `stripe_ids` meaning one stripe per block: the plain (destination,
/// source) sort.
pub const NO_STRIPES: u64 = u64::MAX;

/// Which copy of the edges, by block order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Blocks `(i, 0..P)` of source partition `i` are adjacent.
    Row,
    /// Blocks `(0..P, j)` of destination partition `j` are adjacent.
    Column,
}

impl Order {
    /// Both orders.
    pub const ALL: [Order; 2] = [Order::Row, Order::Column];

    /// Index into per-order arrays.
    pub fn index(self) -> usize {
        match self {
            Order::Row => 0,
            Order::Column => 1,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Order::Row => "row",
            Order::Column => "column",
        }
    }
}

/// Where an edge list comes from.
#[derive(Clone, Copy, Debug)]
pub enum GraphInput<'a> {
    /// Edges already in memory, on vertices `0..vertex_count`.
    Edges {
        /// The vertex count (every id must be below it).
        vertex_count: u64,
        /// The edges.
        edges: &'a [Edge],
    },
    /// A generated R-MAT graph.
    Rmat(&'a Rmat),
    /// Edges with a u32 weight each (`weights[k]` is `edges[k]`'s): the
    /// grid is built in the weighted form of the layout asked for
    /// ([`crate::layout`], twice the bytes per edge).
    Weighted {
        /// The vertex count (every id must be below it).
        vertex_count: u64,
        /// The edges.
        edges: &'a [Edge],
        /// One weight per edge.
        weights: &'a [u32],
    },
}

/// Shape of a grid: vertex count, partitions, and the partition width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// Vertices `0..vertex_count`.
    pub vertex_count: u64,
    /// P: partitions per side.
    pub partitions: u32,
    /// Vertex ids per partition (the last may hold fewer).
    pub width: u64,
}

impl Shape {
    /// The shape for `vertex_count` vertices and `partitions` (None:
    /// automatic, for 4-byte values).
    pub fn new(vertex_count: u64, partitions: Option<u32>) -> Result<Shape> {
        Shape::new_for(vertex_count, partitions, 4)
    }

    /// [`Shape::new`], the automatic P sized for owned values of `value_bytes`.
    pub fn new_for(vertex_count: u64, partitions: Option<u32>, value_bytes: u64) -> Result<Shape> {
        Shape::new_capped(vertex_count, partitions, value_bytes, u64::MAX)
    }

    /// [`Shape::new_for`], an automatic width also at most `width_max`.
    pub fn new_capped(
        vertex_count: u64,
        partitions: Option<u32>,
        value_bytes: u64,
        width_max: u64,
    ) -> Result<Shape> {
        Shape::new_in(
            vertex_count,
            partitions,
            value_bytes,
            WindowCache::L2,
            width_max,
        )
    }

    /// [`Shape::new_capped`], the automatic window sized to `cache`.
    pub fn new_in(
        vertex_count: u64,
        partitions: Option<u32>,
        value_bytes: u64,
        cache: WindowCache,
        width_max: u64,
    ) -> Result<Shape> {
        if vertex_count == 0 {
            return Err(config_err(
                "vertex_count",
                "a graph needs at least one vertex",
            ));
        }
        if vertex_count > VERTEX_COUNT_MAX {
            return Err(config_err(
                "vertex_count",
                format!("{vertex_count} exceeds {VERTEX_COUNT_MAX}: vertex ids are u32"),
            ));
        }
        let asked = match partitions {
            Some(0) => return Err(config_err("partitions", "must be at least 1")),
            Some(p) if p > PARTITIONS_MAX => {
                return Err(config_err(
                    "partitions",
                    format!("{p} exceeds {PARTITIONS_MAX} (P*P blocks)"),
                ))
            }
            Some(p) => u64::from(p),
            None => vertex_count
                .div_ceil(partition_vertices_auto_in(value_bytes, cache).min(width_max.max(1)))
                .clamp(u64::from(cache.partitions_min()), u64::from(PARTITIONS_MAX)),
        };
        let asked = asked.min(vertex_count);
        let width = vertex_count.div_ceil(asked);
        // With rounding, fewer partitions may cover the ids (e.g. V = 5, P = 4 -> 3 of 2).
        let partitions = vertex_count.div_ceil(width) as u32;
        Ok(Shape {
            vertex_count,
            partitions,
            width,
        })
    }

    /// Number of blocks, P*P.
    pub fn blocks(&self) -> usize {
        self.partitions as usize * self.partitions as usize
    }

    /// The vertex ids of partition `p`.
    pub fn range(&self, p: u32) -> Range<u64> {
        let lo = u64::from(p) * self.width;
        lo..(lo + self.width).min(self.vertex_count)
    }

    /// Position of block `(i, j)` in `order`.
    pub fn position(&self, order: Order, i: u32, j: u32) -> usize {
        let p = self.partitions as usize;
        match order {
            Order::Row => i as usize * p + j as usize,
            Order::Column => j as usize * p + i as usize,
        }
    }

    /// `(i, j)` of the block at `position` in `order`.
    pub fn block_at(&self, order: Order, position: usize) -> (u32, u32) {
        let p = self.partitions as usize;
        let (a, b) = ((position / p) as u32, (position % p) as u32);
        match order {
            Order::Row => (a, b),
            Order::Column => (b, a),
        }
    }
}

/// Exact `x / d` for `x < 2^32` by one multiplication and one correction
/// (preprocessing divides twice per edge per pass).
#[derive(Clone, Copy)]
struct Divider {
    d: u64,
    m: u64,
}

impl Divider {
    fn new(d: u64) -> Divider {
        debug_assert!(d > 0);
        Divider {
            d,
            m: (1u64 << 32).div_ceil(d),
        }
    }

    #[inline]
    fn div(&self, x: u64) -> u64 {
        // q is floor(x/d) or one more: m exceeds 2^32/d by less than 1.
        let q = ((x as u128 * self.m as u128) >> 32) as u64;
        let q = q - u64::from(q * self.d > x);
        debug_assert_eq!(q, x / self.d);
        q
    }
}

/// A preprocessed graph: both block orders, their offsets, and out-degrees.
pub struct Grid {
    shape: Shape,
    edge_count: u64,
    out_degree: Vec<u32>,
    /// How edges are encoded.
    layout: EdgeLayout,
    /// Per order: edge bytes, `blocks + 1` offsets in edges, and `blocks +
    /// 1` byte starts (blocks padded to whole words).
    bytes: [Vec<u8>; 2],
    offsets: [Vec<u64>; 2],
    starts: [Vec<u64>; 2],
    /// Source ids per stripe of a column-order block.
    stripe_ids: u64,
    /// Stripes per block.
    stripes: u32,
    /// Column order: `blocks * stripes + 1` stripe offsets, in edges.
    stripe_offsets: Vec<u64>,
}

impl std::fmt::Debug for Grid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grid")
            .field("shape", &self.shape)
            .field("edge_count", &self.edge_count)
            .field("layout", &self.layout)
            .finish()
    }
}

impl Grid {
    /// Loads an edge-list file (SNAP text or GridGraph binary, validated by
    /// `locus-graph`: errors name the file and line or byte offset) and
    /// partitions it. Nothing is built unless the whole file is valid.
    pub fn load(
        path: &Path,
        format: Option<Format>,
        opts: &LoadOptions,
        partitions: Option<u32>,
    ) -> Result<Grid> {
        let list: EdgeList = locus_graph::input::load(path, format, opts)?;
        Grid::build(
            GraphInput::Edges {
                vertex_count: list.vertex_count,
                edges: &list.edges,
            },
            partitions,
        )
    }

    /// Partitions `input` into a grid with `partitions` per side (None:
    /// automatic) and one stripe per block.
    pub fn build(input: GraphInput<'_>, partitions: Option<u32>) -> Result<Grid> {
        Grid::build_striped(input, partitions, NO_STRIPES)
    }

    /// [`Grid::build`] with `stripe_ids` source ids per stripe of a column
    /// block (`u64::MAX`: one stripe per block).
    pub fn build_striped(
        input: GraphInput<'_>,
        partitions: Option<u32>,
        stripe_ids: u64,
    ) -> Result<Grid> {
        Grid::build_with(
            input,
            &GridOptions {
                partitions,
                stripe_ids,
                ..GridOptions::default()
            },
        )
    }

    /// Partitions `input` as `opts` says.
    pub fn build_with(input: GraphInput<'_>, opts: &GridOptions) -> Result<Grid> {
        if opts.stripe_ids == 0 {
            return Err(config_err("stripe_ids", "must be at least 1"));
        }
        match input {
            GraphInput::Edges {
                vertex_count,
                edges,
            } => Grid::from_edges(vertex_count, edges, None, opts),
            GraphInput::Weighted {
                vertex_count,
                edges,
                weights,
            } => {
                if weights.len() != edges.len() {
                    return Err(config_err(
                        "weights",
                        format!("{} weights for {} edges", weights.len(), edges.len()),
                    ));
                }
                Grid::from_edges(vertex_count, edges, Some(weights), opts)
            }
            GraphInput::Rmat(rmat) => {
                let mut edges = Vec::with_capacity(rmat.edge_count() as usize);
                rmat.try_for_each_chunk_in_order(locus_graph::default_threads(), |_, chunk| {
                    edges.extend_from_slice(chunk);
                    Ok::<(), std::convert::Infallible>(())
                })
                .unwrap_or_else(|e| match e {});
                Grid::from_edges(rmat.vertex_count(), &edges, None, opts)
            }
        }
    }

    fn from_edges(
        vertex_count: u64,
        edges: &[Edge],
        weights: Option<&[u32]>,
        opts: &GridOptions,
    ) -> Result<Grid> {
        let shape = Shape::new_in(
            vertex_count,
            opts.partitions,
            opts.value_bytes,
            opts.window_cache,
            opts.layout.width_max(),
        )?;
        let layout = opts.layout.resolve(shape.width)?;
        let layout = if weights.is_some() {
            layout.weighted()
        } else {
            layout
        };
        let eb = layout.edge_bytes();
        let stripe_ids = opts.stripe_ids.min(shape.width);
        let stripes = shape.width.div_ceil(stripe_ids) as u32;
        if edges.is_empty() {
            return Err(config_err("edges", "the graph has no edges"));
        }
        let div = Divider::new(shape.width);
        let p = shape.partitions as usize;
        // Pass 1: edges per block (row-order position) and out-degrees.
        let mut counts = vec![0u64; shape.blocks()];
        let mut out_degree = vec![0u32; vertex_count as usize];
        for (k, &(s, d)) in edges.iter().enumerate() {
            if u64::from(s) >= vertex_count || u64::from(d) >= vertex_count {
                return Err(config_err(
                    "edges",
                    format!(
                        "edge {k} ({s}, {d}) names a vertex outside 0..{vertex_count}; \
                         give a vertex count above the largest id"
                    ),
                ));
            }
            let (i, j) = (
                div.div(u64::from(s)) as usize,
                div.div(u64::from(d)) as usize,
            );
            counts[i * p + j] += 1;
            out_degree[s as usize] = out_degree[s as usize].checked_add(1).ok_or_else(|| {
                config_err(
                    "edges",
                    format!("vertex {s} has more than {} out-edges", u32::MAX),
                )
            })?;
        }
        // Offsets of both orders.
        let mut offsets = [vec![0u64; p * p + 1], vec![0u64; p * p + 1]];
        for order in Order::ALL {
            let o = &mut offsets[order.index()];
            for pos in 0..p * p {
                let (i, j) = shape.block_at(order, pos);
                o[pos + 1] = o[pos] + counts[i as usize * p + j as usize];
            }
        }
        // Pass 2: fill, in input order within each block (column order is
        // sorted after); pads stay zero.
        let starts = [
            storage_starts(&offsets[0], layout),
            storage_starts(&offsets[1], layout),
        ];
        let mut bytes = [
            vec![0u8; starts[0][p * p] as usize],
            vec![0u8; starts[1][p * p] as usize],
        ];
        let mut cursor = [starts[0][..p * p].to_vec(), starts[1][..p * p].to_vec()];
        let w = shape.width as u32;
        for (e, &(s, d)) in edges.iter().enumerate() {
            let (i, j) = (div.div(u64::from(s)) as u32, div.div(u64::from(d)) as u32);
            let wt = weights.map_or(1, |ws| ws[e]);
            for order in Order::ALL {
                let k = order.index();
                let c = &mut cursor[k][shape.position(order, i, j)];
                let at = *c as usize;
                let out = &mut bytes[k][at..at + eb as usize];
                layout.encode_weighted(s, d, wt, i * w, j * w, out);
                *c += eb;
            }
        }
        let stripe_offsets = sort_column_blocks(
            &mut bytes[Order::Column.index()],
            &offsets[1],
            &starts[1],
            layout,
            &shape,
            stripe_ids,
            stripes,
        );
        Ok(Grid {
            shape,
            edge_count: edges.len() as u64,
            out_degree,
            layout,
            bytes,
            offsets,
            starts,
            stripe_ids,
            stripes,
            stripe_offsets,
        })
    }

    /// A grid from its parts, as [`crate::prepared`] reads them back (the
    /// reader has checked them, and that each order's bytes are
    /// [`storage_starts`]' length).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        shape: Shape,
        edge_count: u64,
        out_degree: Vec<u32>,
        layout: EdgeLayout,
        bytes: [Vec<u8>; 2],
        offsets: [Vec<u64>; 2],
        stripe_ids: u64,
        stripes: u32,
        stripe_offsets: Vec<u64>,
    ) -> Grid {
        let starts = [
            storage_starts(&offsets[0], layout),
            storage_starts(&offsets[1], layout),
        ];
        for k in 0..2 {
            assert_eq!(starts[k].last().copied(), Some(bytes[k].len() as u64));
        }
        Grid {
            shape,
            edge_count,
            out_degree,
            layout,
            bytes,
            offsets,
            starts,
            stripe_ids,
            stripes,
            stripe_offsets,
        }
    }

    /// The grid's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Vertices.
    pub fn vertex_count(&self) -> u64 {
        self.shape.vertex_count
    }

    /// Edges (each stored once per order).
    pub fn edge_count(&self) -> u64 {
        self.edge_count
    }

    /// Out-degree of every vertex.
    pub fn out_degree(&self) -> &[u32] {
        &self.out_degree
    }

    /// The edge bytes of `order`.
    pub fn bytes(&self, order: Order) -> &[u8] {
        &self.bytes[order.index()]
    }

    /// The `blocks + 1` offsets of `order`, in edges.
    pub fn offsets(&self, order: Order) -> &[u64] {
        &self.offsets[order.index()]
    }

    /// How edges are encoded.
    pub fn layout(&self) -> EdgeLayout {
        self.layout
    }

    /// Whether the blocks hold a weight with each edge.
    pub fn weighted(&self) -> bool {
        self.layout.is_weighted()
    }

    /// [`Grid::block_edges`] with each edge's weight (1 in an unweighted grid).
    pub fn block_weighted_edges(&self, order: Order, position: usize) -> Vec<(u32, u32, u32)> {
        let o = &self.offsets[order.index()];
        let eb = self.layout.edge_bytes() as usize;
        let at = self.starts[order.index()][position] as usize;
        let n = (o[position + 1] - o[position]) as usize;
        let (i, j) = self.shape.block_at(order, position);
        let (sl, dl) = (
            self.shape.range(i).start as u32,
            self.shape.range(j).start as u32,
        );
        self.bytes[order.index()][at..at + n * eb]
            .chunks_exact(eb)
            .map(|e| {
                let (s, d) = self.layout.decode(e, sl, dl);
                (s, d, self.layout.weight(e))
            })
            .collect()
    }

    /// The `blocks + 1` byte starts of `order`'s blocks (stored padded).
    pub fn starts(&self, order: Order) -> &[u64] {
        &self.starts[order.index()]
    }

    /// Byte range of the block at `position` of `order` as stored: its
    /// edges and, for an odd compact block, the 4-byte pad.
    pub fn block_bytes(&self, order: Order, position: usize) -> Range<u64> {
        let s = &self.starts[order.index()];
        s[position]..s[position + 1]
    }

    /// The edges of the block at `position` of `order`, decoded, in stored order.
    pub fn block_edges(&self, order: Order, position: usize) -> Vec<Edge> {
        let o = &self.offsets[order.index()];
        let eb = self.layout.edge_bytes() as usize;
        let at = self.starts[order.index()][position] as usize;
        let n = (o[position + 1] - o[position]) as usize;
        let (i, j) = self.shape.block_at(order, position);
        let (sl, dl) = (
            self.shape.range(i).start as u32,
            self.shape.range(j).start as u32,
        );
        self.bytes[order.index()][at..at + n * eb]
            .chunks_exact(eb)
            .map(|e| self.layout.decode(e, sl, dl))
            .collect()
    }

    /// Stored bytes of one order's blocks (both orders store the same).
    pub fn edge_bytes(&self) -> u64 {
        self.bytes[0].len() as u64
    }

    /// Source ids per stripe of a column-order block.
    pub fn stripe_ids(&self) -> u64 {
        self.stripe_ids
    }

    /// Stripes per column-order block.
    pub fn stripes(&self) -> u32 {
        self.stripes
    }

    /// Column order: the `blocks * stripes + 1` stripe offsets, in edges.
    pub fn stripe_offsets(&self) -> &[u64] {
        &self.stripe_offsets
    }
}

/// Lays out every column-order block (blocks delimited by `offsets`, in
/// edges, stored from `starts`, in bytes) as its source stripes in order,
/// each sorted by (destination, source); returns the stripe offsets
/// (`blocks * stripes + 1`, in edges).
fn sort_column_blocks(
    order_bytes: &mut [u8],
    offsets: &[u64],
    starts: &[u64],
    layout: EdgeLayout,
    shape: &Shape,
    stripe_ids: u64,
    stripes: u32,
) -> Vec<u64> {
    let s_count = stripes as usize;
    let mut stripe_offsets = Vec::with_capacity(offsets.len().saturating_sub(1) * s_count + 1);
    // (destination << 32 | source, weight): the weight sorts parallel edges
    // too, so a weighted block's order is fixed by its contents alone.
    let mut keys: Vec<(u64, u32)> = Vec::new();
    let mut out: Vec<(u64, u32)> = Vec::new();
    let mut cursor = vec![0usize; s_count];
    let eb = layout.edge_bytes() as usize;
    for (pos, w) in offsets.windows(2).enumerate() {
        let at = starts[pos] as usize;
        let block = &mut order_bytes[at..at + (w[1] - w[0]) as usize * eb];
        let (i, j) = shape.block_at(Order::Column, pos);
        let (sl, dl) = (shape.range(i).start as u32, shape.range(j).start as u32);
        keys.clear();
        keys.extend(block.chunks_exact(eb).map(|e| {
            let (s, d) = layout.decode(e, sl, dl);
            (u64::from(d) << 32 | u64::from(s), layout.weight(e))
        }));
        keys.sort_unstable();
        let src_lo = u64::from(sl);
        let stripe_of = |k: u64| ((k as u32 as u64 - src_lo) / stripe_ids) as usize;
        let sorted: &[(u64, u32)] = if s_count == 1 {
            stripe_offsets.push(w[0]);
            &keys
        } else {
            // A stable counting sort by stripe keeps (destination, source)
            // order inside each stripe.
            cursor.iter_mut().for_each(|c| *c = 0);
            for &(k, _) in &keys {
                cursor[stripe_of(k)] += 1;
            }
            let mut at = 0usize;
            for c in cursor.iter_mut() {
                stripe_offsets.push(w[0] + at as u64);
                let n = *c;
                *c = at;
                at += n;
            }
            out.clear();
            out.resize(keys.len(), (0, 0));
            for &(k, wt) in &keys {
                let t = stripe_of(k);
                out[cursor[t]] = (k, wt);
                cursor[t] += 1;
            }
            &out
        };
        for (e, &(k, wt)) in block.chunks_exact_mut(eb).zip(sorted) {
            layout.encode_weighted(k as u32, (k >> 32) as u32, wt, sl, dl, e);
        }
    }
    stripe_offsets.push(*offsets.last().expect("offsets has blocks + 1 entries"));
    stripe_offsets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divider_is_exact() {
        for d in [1u64, 2, 3, 7, 1000, 65_537, (1 << 18) + 3, u32::MAX as u64] {
            let div = Divider::new(d);
            for x in [0u64, 1, d - 1, d, d + 1, 12345, 1 << 31, u32::MAX as u64] {
                assert_eq!(div.div(x), x / d, "{x} / {d}");
            }
        }
    }

    #[test]
    fn shape_rounds_partitions() {
        let s = Shape::new(5, Some(4)).unwrap();
        assert_eq!((s.partitions, s.width), (3, 2));
        assert_eq!(s.range(2), 4..5);
        let s = Shape::new(1 << 22, None).unwrap();
        let want = (1u64 << 22)
            .div_ceil(partition_vertices_auto(4))
            .clamp(8, 1024);
        assert_eq!(u64::from(s.partitions), want);
        let s = Shape::new(34, None).unwrap();
        assert_eq!(s.partitions, 7); // 8 asked: width 5, 7 partitions cover 34 ids
        assert!(Shape::new(10, Some(0)).is_err());
        assert!(Shape::new(10, Some(PARTITIONS_MAX + 1)).is_err());
        assert!(Shape::new(0, None).is_err());
    }

    #[test]
    fn positions_round_trip() {
        let s = Shape::new(100, Some(7)).unwrap();
        for order in Order::ALL {
            for pos in 0..s.blocks() {
                let (i, j) = s.block_at(order, pos);
                assert_eq!(s.position(order, i, j), pos);
            }
        }
    }
}
