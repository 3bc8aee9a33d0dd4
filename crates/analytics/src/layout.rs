//! How an edge is encoded in a block (issue 12, requirement 2: the compact
//! grid). Two layouts:
//!
//! ```text
//!  wide (8 B):     | src u32 LE | dst u32 LE |                  GridGraph's binary edge
//!  compact (4 B):  | src - src_lo u16 LE | dst - dst_lo u16 LE |
//!                  = the u32 LE word (dst - dst_lo) << 16 | (src - src_lo)
//! ```
//!
//! `src_lo` and `dst_lo` are the first ids of the block's source and
//! destination partitions, which the engine knows from the block's position,
//! so a compact edge is block-relative: both ids fit in 16 bits when the
//! partition width is at most [`COMPACT_WIDTH_MAX`] = 2^16. The destination
//! is in the high half so that sorting a column block's words sorts it by
//! (destination, source), the order the grid keeps.
//!
//! **Why block-relative 16+16 and not a stripe-relative source.** A source
//! relative to its stripe (at most 2^13 ids) plus a partition-relative
//! destination would fit widths up to 2^19, but only for striped column
//! blocks: the row order and the unstriped column blocks that PageRank and
//! WCC stream would still need both ids partition-relative, and the engine
//! would have to cut every fetched piece at stripe boundaries to know each
//! edge's base. Capping the automatic width at 2^16 instead keeps one rule
//! for every block; its windows (256 KiB of 4-byte values, 512 KiB of 8-byte
//! ones) still fit the L2 the automatic choice sizes for.
//!
//! **Which algorithms cap** ([`layout_for`], measured at R-MAT 20 and 22 in
//! `docs/results/fargraph.md`): BFS and Radii ask for compact edges
//! ([`LayoutChoice::Compact`]: the automatic width is capped at 2^16, twice
//! the partitions of their L2 choice on this machine) and were as fast or
//! faster with them. PageRank and WCC keep their automatic width
//! ([`LayoutChoice::Auto`]: compact only where that width is at most 2^16).
//! For PageRank, more partitions shorten its destination runs in a block
//! (each run is a load and a store of the destination's sum) and made it
//! slower by more than the halved bytes saved; for the same reason its
//! window is sized to the last-level cache, not L2 (`grid::WindowCache`). WCC's 4-byte labels make
//! its L2 width 2^18, so the cap quadruples its partitions; at R-MAT 22 that
//! made it 2.1x slower. A width above 2^16 under `Auto` falls back to the
//! wide layout; a run reports which layout it used.
//!
//! **Weighted layouts** (issue 63: SSSP on weighted graphs). A weighted
//! grid keeps each edge's weight (a u32, GAPBS's integer weight) in the
//! block beside its ids, so a pass that relaxes an edge gets its weight in
//! the same fetch and no second per-edge array exists:
//!
//! ```text
//!  compact-weighted (8 B):  | compact word u32 LE | weight u32 LE |
//!  wide-weighted (16 B):    | src u32 LE | dst u32 LE | weight u32 LE | zero u32 |
//! ```
//!
//! What that costs: a weighted block is twice the bytes of its unweighted
//! layout, so every pass over it (any algorithm, not only SSSP) fetches
//! twice the far-memory or disk bytes, placement fits half the edges in the
//! same local budget, and a segment of the same byte size holds half the
//! edges. The wide form is padded to 16 bytes so that every edge size is a
//! power of two dividing the 4 KiB page, the fabric's word and every chunk
//! and segment size: a fetched piece never splits an edge on any backend.
//! Only a run that asks for weights (SSSP on weighted input) builds a
//! weighted grid; every other grid stays 4 or 8 bytes per edge.
//!
//! **Word alignment.** The fabric moves whole 8-byte words
//! (`locus_fabric::check_alignment`), so every block is *stored* padded to
//! a multiple of [`ALIGN_BYTES`]: a compact block with an odd edge count
//! ends with one 4-byte zero word that is no edge. Block offsets still count
//! edges; [`storage_starts`] gives each block's byte start, and the engine
//! only ever asks for bytes inside a block's edges, so the pad is never
//! decoded. Segments and stripes of compact blocks may still start or end
//! on a 4-byte boundary: the far backend rounds its READs out to whole words
//! inside the padded block and trims locally; paged and disk read aligned
//! pages and spans already.

use serde::Serialize;

use crate::algo::Algo;
use crate::error::{config_err, Result};

/// Bytes of a wide edge.
pub const WIDE_EDGE_BYTES: u64 = 8;
/// Bytes of a compact edge.
pub const COMPACT_EDGE_BYTES: u64 = 4;
/// Bytes of a compact edge with its weight.
pub const COMPACT_WEIGHTED_EDGE_BYTES: u64 = 8;
/// Bytes of a wide edge with its weight (and 4 zero bytes of padding).
pub const WIDE_WEIGHTED_EDGE_BYTES: u64 = 16;
/// Widest partition the compact layout encodes (ids relative to the
/// partition's first are below 2^16).
pub const COMPACT_WIDTH_MAX: u64 = 1 << 16;
/// Blocks are stored padded to a multiple of this (the fabric's word), and
/// chunk and segment sizes are multiples of it.
pub const ALIGN_BYTES: u64 = 8;

/// The encoding of the edges in a grid's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeLayout {
    /// 8 bytes: absolute source and destination ids.
    Wide,
    /// 4 bytes: 16-bit block-relative source and destination.
    Compact,
    /// 16 bytes: a wide edge, its u32 weight and 4 zero bytes.
    #[serde(rename = "wide-weighted")]
    WideWeighted,
    /// 8 bytes: a compact edge and its u32 weight.
    #[serde(rename = "compact-weighted")]
    CompactWeighted,
}

/// [`EdgeLayout`] as a const generic code, so the engine's kernels are
/// compiled once per layout: `EdgeLayout::from_code(layout.code())` is the
/// identity.
impl EdgeLayout {
    /// The layout's code (0 wide, 1 compact, 2 wide-weighted, 3 compact-weighted).
    pub const fn code(self) -> u8 {
        match self {
            EdgeLayout::Wide => 0,
            EdgeLayout::Compact => 1,
            EdgeLayout::WideWeighted => 2,
            EdgeLayout::CompactWeighted => 3,
        }
    }

    /// The layout of a code from [`EdgeLayout::code`] (codes above 3 are compact-weighted).
    #[inline(always)]
    pub const fn from_code(code: u8) -> EdgeLayout {
        match code {
            0 => EdgeLayout::Wide,
            1 => EdgeLayout::Compact,
            2 => EdgeLayout::WideWeighted,
            _ => EdgeLayout::CompactWeighted,
        }
    }

    /// Whether edges carry a weight.
    #[inline(always)]
    pub const fn is_weighted(self) -> bool {
        matches!(self, EdgeLayout::WideWeighted | EdgeLayout::CompactWeighted)
    }

    /// The same ids' encoding with a weight beside them.
    pub fn weighted(self) -> EdgeLayout {
        match self {
            EdgeLayout::Wide | EdgeLayout::WideWeighted => EdgeLayout::WideWeighted,
            EdgeLayout::Compact | EdgeLayout::CompactWeighted => EdgeLayout::CompactWeighted,
        }
    }

    /// The weight of the edge at the start of `b` (1 in an unweighted layout).
    #[inline(always)]
    pub fn weight(self, b: &[u8]) -> u32 {
        match self {
            EdgeLayout::Wide | EdgeLayout::Compact => 1,
            EdgeLayout::CompactWeighted => u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            EdgeLayout::WideWeighted => u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
        }
    }

    /// Writes edge `(s, d)` with weight `w` (dropped by an unweighted layout).
    #[inline]
    pub fn encode_weighted(self, s: u32, d: u32, w: u32, src_lo: u32, dst_lo: u32, out: &mut [u8]) {
        self.encode(s, d, src_lo, dst_lo, out);
        match self {
            EdgeLayout::Wide | EdgeLayout::Compact => {}
            EdgeLayout::CompactWeighted => out[4..8].copy_from_slice(&w.to_le_bytes()),
            EdgeLayout::WideWeighted => {
                out[8..12].copy_from_slice(&w.to_le_bytes());
                out[12..16].fill(0);
            }
        }
    }
}

impl EdgeLayout {
    /// Bytes per edge.
    pub fn edge_bytes(self) -> u64 {
        match self {
            EdgeLayout::Wide => WIDE_EDGE_BYTES,
            EdgeLayout::Compact => COMPACT_EDGE_BYTES,
            EdgeLayout::WideWeighted => WIDE_WEIGHTED_EDGE_BYTES,
            EdgeLayout::CompactWeighted => COMPACT_WEIGHTED_EDGE_BYTES,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            EdgeLayout::Wide => "wide",
            EdgeLayout::Compact => "compact",
            EdgeLayout::WideWeighted => "wide-weighted",
            EdgeLayout::CompactWeighted => "compact-weighted",
        }
    }

    /// The unweighted layout of `edge_bytes` bytes per edge, if there is
    /// one (a prepared grid's header; prepared grids are unweighted).
    pub fn from_edge_bytes(edge_bytes: u64) -> Option<EdgeLayout> {
        match edge_bytes {
            WIDE_EDGE_BYTES => Some(EdgeLayout::Wide),
            COMPACT_EDGE_BYTES => Some(EdgeLayout::Compact),
            _ => None,
        }
    }

    /// Whether partitions `width` ids wide can use this layout.
    pub fn fits(self, width: u64) -> bool {
        matches!(self, EdgeLayout::Wide | EdgeLayout::WideWeighted) || width <= COMPACT_WIDTH_MAX
    }

    /// Decodes the edge at the start of `b` in a block whose source
    /// partition starts at `src_lo` and destination partition at `dst_lo`.
    #[inline(always)]
    pub fn decode(self, b: &[u8], src_lo: u32, dst_lo: u32) -> (u32, u32) {
        match self {
            EdgeLayout::Wide | EdgeLayout::WideWeighted => decode_wide(b),
            EdgeLayout::Compact | EdgeLayout::CompactWeighted => decode_compact(b, src_lo, dst_lo),
        }
    }

    /// Writes edge `(s, d)` of a block with partition starts `src_lo` and
    /// `dst_lo` into the first [`EdgeLayout::edge_bytes`] of `out`.
    #[inline]
    pub fn encode(self, s: u32, d: u32, src_lo: u32, dst_lo: u32, out: &mut [u8]) {
        match self {
            EdgeLayout::Wide | EdgeLayout::WideWeighted => {
                out[..4].copy_from_slice(&s.to_le_bytes());
                out[4..8].copy_from_slice(&d.to_le_bytes());
            }
            EdgeLayout::Compact | EdgeLayout::CompactWeighted => {
                let (rs, rd) = (s - src_lo, d - dst_lo);
                debug_assert!(rs < 1 << 16 && rd < 1 << 16, "({s}, {d}) outside its block");
                out[..4].copy_from_slice(&(rd << 16 | rs).to_le_bytes());
            }
        }
    }
}

/// A wide edge: `src u32 LE, dst u32 LE`.
#[inline(always)]
pub fn decode_wide(b: &[u8]) -> (u32, u32) {
    let s = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let d = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    (s, d)
}

/// A compact edge relative to `src_lo` and `dst_lo`.
#[inline(always)]
pub fn decode_compact(b: &[u8], src_lo: u32, dst_lo: u32) -> (u32, u32) {
    let w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    (src_lo + (w & 0xFFFF), dst_lo + (w >> 16))
}

/// Which layout to build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayoutChoice {
    /// Compact where the partition width (sized to L2 if automatic)
    /// allows, else wide.
    #[default]
    Auto,
    /// Compact: an automatic width is capped at [`COMPACT_WIDTH_MAX`]; a
    /// given partition count too wide for it is an error naming the width.
    Compact,
    /// Wide.
    Wide,
}

/// The layout `algo` asks for by default (module doc: measured).
pub fn layout_for(algo: Algo) -> LayoutChoice {
    match algo {
        Algo::PageRank | Algo::Wcc | Algo::Tc => LayoutChoice::Auto,
        Algo::Bfs | Algo::Radii | Algo::Sssp | Algo::Bc => LayoutChoice::Compact,
    }
}

impl LayoutChoice {
    /// Parses `auto`, `compact` or `wide`.
    pub fn parse(s: &str) -> Result<LayoutChoice> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(LayoutChoice::Auto),
            "compact" => Ok(LayoutChoice::Compact),
            "wide" => Ok(LayoutChoice::Wide),
            _ => Err(config_err(
                "edge_layout",
                format!("'{s}' is not one of auto, compact, wide"),
            )),
        }
    }

    /// The widest partition the automatic partition count may make.
    pub fn width_max(self) -> u64 {
        match self {
            LayoutChoice::Compact => COMPACT_WIDTH_MAX,
            LayoutChoice::Auto | LayoutChoice::Wide => u64::MAX,
        }
    }

    /// The layout for partitions `width` ids wide.
    pub fn resolve(self, width: u64) -> Result<EdgeLayout> {
        match self {
            LayoutChoice::Wide => Ok(EdgeLayout::Wide),
            LayoutChoice::Auto if EdgeLayout::Compact.fits(width) => Ok(EdgeLayout::Compact),
            LayoutChoice::Auto => Ok(EdgeLayout::Wide),
            LayoutChoice::Compact if EdgeLayout::Compact.fits(width) => Ok(EdgeLayout::Compact),
            LayoutChoice::Compact => Err(config_err(
                "edge_layout",
                format!(
                    "compact edges need partitions of at most {COMPACT_WIDTH_MAX} ids, \
                     these are {width} wide: give more partitions or the wide layout"
                ),
            )),
        }
    }

    /// Bytes per edge a memory estimate assumes before the width is known:
    /// the wide size unless compact is required.
    pub fn edge_bytes_max(self) -> u64 {
        match self {
            LayoutChoice::Compact => COMPACT_EDGE_BYTES,
            LayoutChoice::Auto | LayoutChoice::Wide => WIDE_EDGE_BYTES,
        }
    }
}

/// Byte start of every block of one order (`offsets.len()` entries, the
/// last the order's stored length): each block's edges padded to a
/// multiple of [`ALIGN_BYTES`].
pub fn storage_starts(offsets: &[u64], layout: EdgeLayout) -> Vec<u64> {
    let eb = layout.edge_bytes();
    let mut starts = Vec::with_capacity(offsets.len());
    let mut at = 0u64;
    starts.push(0);
    for w in offsets.windows(2) {
        at += ((w[1] - w[0]) * eb).next_multiple_of(ALIGN_BYTES);
        starts.push(at);
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_round_trips_at_the_limits() {
        let mut b = [0u8; 8];
        let lo = 3 * COMPACT_WIDTH_MAX as u32;
        for (s, d) in [
            (0u32, 0u32),
            (65_535, 0),
            (0, 65_535),
            (65_535, 65_535),
            (7, 9),
        ] {
            for (sl, dl) in [(0, 0), (lo, 0), (0, lo), (u32::MAX - 65_535, lo)] {
                EdgeLayout::Compact.encode(sl + s, dl + d, sl, dl, &mut b);
                assert_eq!(
                    EdgeLayout::Compact.decode(&b, sl, dl),
                    (sl + s, dl + d),
                    "({s}, {d}) at ({sl}, {dl})"
                );
            }
        }
        // The destination is the high half: word order is (dst, src) order.
        EdgeLayout::Compact.encode(1, 2, 0, 0, &mut b);
        assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 2 << 16 | 1);
        for (s, d) in [(0u32, u32::MAX), (u32::MAX, 0), (12, 34)] {
            EdgeLayout::Wide.encode(s, d, 5, 6, &mut b);
            assert_eq!(EdgeLayout::Wide.decode(&b, 5, 6), (s, d));
        }
    }

    #[test]
    fn choice_falls_back_or_refuses() {
        let w = COMPACT_WIDTH_MAX;
        assert_eq!(LayoutChoice::Auto.resolve(w).unwrap(), EdgeLayout::Compact);
        assert_eq!(LayoutChoice::Auto.resolve(w + 1).unwrap(), EdgeLayout::Wide);
        assert_eq!(LayoutChoice::Wide.resolve(1).unwrap(), EdgeLayout::Wide);
        let err = LayoutChoice::Compact
            .resolve(w + 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("65537") && err.contains("edge_layout"),
            "{err}"
        );
        assert!(LayoutChoice::parse("tiny").is_err());
        assert_eq!(LayoutChoice::parse("Wide").unwrap(), LayoutChoice::Wide);
        assert_eq!(EdgeLayout::from_edge_bytes(4), Some(EdgeLayout::Compact));
        assert_eq!(EdgeLayout::from_edge_bytes(6), None);
    }

    #[test]
    fn weighted_layouts_round_trip_and_keep_word_order() {
        let mut b = [0xAAu8; 16];
        for layout in [EdgeLayout::CompactWeighted, EdgeLayout::WideWeighted] {
            assert_eq!(EdgeLayout::from_code(layout.code()), layout);
            assert!(layout.is_weighted());
            let eb = layout.edge_bytes() as usize;
            for w in [0u32, 1, 255, u32::MAX] {
                layout.encode_weighted(70_000 + 3, 70_000 + 9, w, 70_000, 70_000, &mut b[..eb]);
                assert_eq!(layout.decode(&b, 70_000, 70_000), (70_003, 70_009));
                assert_eq!(layout.weight(&b), w, "{layout:?} weight {w}");
            }
            assert!(4096usize.is_multiple_of(eb) && (eb as u64).is_multiple_of(ALIGN_BYTES));
        }
        assert_eq!(EdgeLayout::Compact.weighted(), EdgeLayout::CompactWeighted);
        assert_eq!(EdgeLayout::Wide.weighted(), EdgeLayout::WideWeighted);
        assert_eq!(EdgeLayout::Compact.weight(&b), 1);
        // The compact word still comes first: sorting by it sorts by (dst, src).
        EdgeLayout::CompactWeighted.encode_weighted(1, 2, 9, 0, 0, &mut b);
        assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 2 << 16 | 1);
        for l in [EdgeLayout::Wide, EdgeLayout::Compact] {
            assert_eq!(EdgeLayout::from_code(l.code()), l);
        }
    }

    #[test]
    fn blocks_are_stored_word_aligned() {
        let off = [0u64, 3, 3, 4, 6];
        assert_eq!(
            storage_starts(&off, EdgeLayout::Compact),
            vec![0, 16, 16, 24, 32]
        );
        assert_eq!(
            storage_starts(&off, EdgeLayout::Wide),
            vec![0, 24, 24, 32, 48]
        );
    }
}
