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
}

impl EdgeLayout {
    /// Bytes per edge.
    pub fn edge_bytes(self) -> u64 {
        match self {
            EdgeLayout::Wide => WIDE_EDGE_BYTES,
            EdgeLayout::Compact => COMPACT_EDGE_BYTES,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            EdgeLayout::Wide => "wide",
            EdgeLayout::Compact => "compact",
        }
    }

    /// The layout of `edge_bytes` bytes per edge, if there is one.
    pub fn from_edge_bytes(edge_bytes: u64) -> Option<EdgeLayout> {
        match edge_bytes {
            WIDE_EDGE_BYTES => Some(EdgeLayout::Wide),
            COMPACT_EDGE_BYTES => Some(EdgeLayout::Compact),
            _ => None,
        }
    }

    /// Whether partitions `width` ids wide can use this layout.
    pub fn fits(self, width: u64) -> bool {
        self == EdgeLayout::Wide || width <= COMPACT_WIDTH_MAX
    }

    /// Decodes the edge at the start of `b` in a block whose source
    /// partition starts at `src_lo` and destination partition at `dst_lo`.
    #[inline(always)]
    pub fn decode(self, b: &[u8], src_lo: u32, dst_lo: u32) -> (u32, u32) {
        match self {
            EdgeLayout::Wide => decode_wide(b),
            EdgeLayout::Compact => decode_compact(b, src_lo, dst_lo),
        }
    }

    /// Writes edge `(s, d)` of a block with partition starts `src_lo` and
    /// `dst_lo` into the first [`EdgeLayout::edge_bytes`] of `out`.
    #[inline]
    pub fn encode(self, s: u32, d: u32, src_lo: u32, dst_lo: u32, out: &mut [u8]) {
        match self {
            EdgeLayout::Wide => {
                out[..4].copy_from_slice(&s.to_le_bytes());
                out[4..8].copy_from_slice(&d.to_le_bytes());
            }
            EdgeLayout::Compact => {
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
        Algo::PageRank | Algo::Wcc => LayoutChoice::Auto,
        Algo::Bfs | Algo::Radii => LayoutChoice::Compact,
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
