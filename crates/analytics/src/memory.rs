//! Bounded memory (issue 12, requirement 6): a run's peak bytes estimated
//! from its vertex and edge counts *before* anything sized by them is
//! allocated, and a refusal, naming what made the count large, when the
//! estimate exceeds a limit.
//!
//! Vertex ids index dense arrays, so one edge `0 4294967293` makes a graph
//! of 4,294,967,294 vertices: its out-degrees alone are 16 GiB and PageRank's
//! vertex data another 96 GiB. The estimate is an upper bound of what this
//! process holds at its peak:
//!
//! ```text
//!  edges:    8 B/edge   the loaded edge list (while the grid is built)
//!          2 B' B/edge  the grid (row and column order, B' = 4 compact or 8
//!                       wide bytes per edge each, crate::layout)
//!            B' B/edge  per streamed order, the backend's copy (Oracle: local;
//!                       far and paged on the in-process fabric: the server's
//!                       region in this same process)
//!            8 B/edge   with --compact-ids: the sorted copy of the ids
//!  vertices: 4 B/vertex out-degrees, plus the algorithm's peak vertex data
//!                       (VERTEX_PEAK_BYTES: BFS 17, WCC 9, PageRank 24, Radii 21)
//!  fixed:    64 MiB     grid offsets and counts (P <= 1024), blocks' word
//!                       padding (4 B per block per copy: at most 16 MiB),
//!                       fetch buffers, slack
//! ```

use crate::algo::Algo;
use crate::error::{AnalyticsError, Result};

/// Fixed bytes the estimate adds: grid counters and offsets for up to
/// 1024 x 1024 blocks (three u64 arrays: 24 MiB), fetch buffers and slack.
pub const FIXED_BYTES: u64 = 64 << 20;
/// Bytes per edge of the loaded edge list.
pub const EDGE_LIST_BYTES_PER_EDGE: u64 = 8;
/// Bytes per edge of `--compact-ids`' sorted id copy (two u32 per edge).
pub const COMPACT_BYTES_PER_EDGE: u64 = 8;
/// Bytes per vertex of the out-degrees the grid keeps.
pub const DEGREE_BYTES_PER_VERTEX: u64 = 4;
/// Share of MemTotal the default limit allows.
pub const DEFAULT_SHARE_OF_MACHINE: f64 = 0.5;
/// The limit when /proc/meminfo cannot be read.
pub const DEFAULT_LIMIT_WITHOUT_MEMINFO_BYTES: u64 = 8 << 30;

/// Peak bytes per vertex of an algorithm's own arrays, rounded up: BFS
/// (depth, parent) pairs plus their unzipped copy at the end and two
/// bitmaps; CC parent and the labels copied out; PageRank rank,
/// contribution and sum in f64; Radii two 64-bit visited masks, the
/// radius and two bitmaps; SSSP distance, done and a bitmap; TC an
/// in-neighbour list's header, a CSR offset and a count; BC depth and
/// paths, the paths read, coefficient, sum, score and a bitmap per level
/// (two counted here).
pub fn vertex_peak_bytes(algo: Algo) -> u64 {
    match algo {
        Algo::Bfs => 17,
        Algo::Wcc => 8,
        Algo::PageRank => 24,
        Algo::Radii => 21,
        Algo::Sssp => 9,
        Algo::Tc => 40,
        Algo::Bc => 50,
    }
}

/// TC's local lists per input edge: the in-neighbour entry (4 bytes) and
/// both directions in the CSR (8), [`crate::algo::tc`].
pub const TC_CSR_BYTES_PER_EDGE: u64 = 12;

/// A run's estimated peak memory, by part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Estimate {
    /// Vertices the run numbers (dense ids `0..vertices`).
    pub vertices: u64,
    /// Edges.
    pub edges: u64,
    /// Edge list, grid, backend copy (and compaction's id copy).
    pub edge_bytes: u64,
    /// Out-degrees and the algorithm's vertex arrays.
    pub vertex_bytes: u64,
    /// Everything, with [`FIXED_BYTES`].
    pub total_bytes: u64,
}

impl Estimate {
    /// The estimate for `algo` on `vertices` and `edges` of `edge_bytes`
    /// bytes each in the grid (`compact`: ids are being compacted, which
    /// holds one more copy of them).
    pub fn new(algo: Algo, vertices: u64, edges: u64, compact: bool, edge_bytes: u64) -> Estimate {
        // The grid's two orders, and the backend's copy per order streamed.
        let per_edge = EDGE_LIST_BYTES_PER_EDGE
            + 2 * edge_bytes
            + edge_bytes * algo.orders().len() as u64
            + if compact { COMPACT_BYTES_PER_EDGE } else { 0 }
            + if algo == Algo::Tc {
                TC_CSR_BYTES_PER_EDGE
            } else {
                0
            };
        let edge_bytes = edges.saturating_mul(per_edge);
        let vertex_bytes =
            vertices.saturating_mul(DEGREE_BYTES_PER_VERTEX + vertex_peak_bytes(algo));
        Estimate {
            vertices,
            edges,
            edge_bytes,
            vertex_bytes,
            total_bytes: edge_bytes
                .saturating_add(vertex_bytes)
                .saturating_add(FIXED_BYTES),
        }
    }

    /// `Err` naming the parts and the limit if the estimate exceeds
    /// `limit_bytes`; `cause` says where the vertex count came from and
    /// `advice` what to do (both end up in the message).
    pub fn check(&self, algo: Algo, limit_bytes: u64, cause: &str, advice: &str) -> Result<()> {
        if self.total_bytes <= limit_bytes {
            return Ok(());
        }
        Err(AnalyticsError::MemoryLimit {
            reason: format!(
                "{cause}: {} on {} vertices and {} edges needs about {} \
                 ({} of vertex data, {} of edges), over the limit of {}; {advice}",
                algo.name(),
                self.vertices,
                self.edges,
                human_bytes(self.total_bytes),
                human_bytes(self.vertex_bytes),
                human_bytes(self.edge_bytes),
                human_bytes(limit_bytes),
            ),
        })
    }
}

/// MemTotal of /proc/meminfo in bytes, if it can be read.
pub fn machine_memory_bytes() -> Option<u64> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// MemTotal (kB) of a /proc/meminfo text, in bytes.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut it = line["MemTotal:".len()..].split_whitespace();
    let kb: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") | None => kb.checked_mul(1024),
        Some(_) => None,
    }
}

/// The default `--memory-max`: [`DEFAULT_SHARE_OF_MACHINE`] of MemTotal
/// (the machine is shared; other processes need the rest), or
/// [`DEFAULT_LIMIT_WITHOUT_MEMINFO_BYTES`] when it cannot be read.
pub fn default_limit_bytes() -> u64 {
    machine_memory_bytes().map_or(DEFAULT_LIMIT_WITHOUT_MEMINFO_BYTES, |b| {
        (b as f64 * DEFAULT_SHARE_OF_MACHINE) as u64
    })
}

/// `1.5 GiB`, `120.0 MiB`, `512 B`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut x = b as f64 / 1024.0;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{x:.1} {}", UNITS[u])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_counts_every_part() {
        let e = Estimate::new(Algo::Wcc, 1000, 10, false, 8);
        // One streamed order: 8 + 16 + 8 bytes per edge.
        assert_eq!(Algo::Wcc.orders().len(), 1);
        assert_eq!(e.edge_bytes, 320);
        assert_eq!(e.vertex_bytes, 1000 * (4 + 8));
        assert_eq!(e.total_bytes, 320 + 12_000 + FIXED_BYTES);
        let c = Estimate::new(Algo::Wcc, 1000, 10, true, 8);
        assert_eq!(c.edge_bytes, 400);
        // Compact edges: 8 + 8 + 4.
        let k = Estimate::new(Algo::Wcc, 1000, 10, false, 4);
        assert_eq!(k.edge_bytes, 200);
    }

    #[test]
    fn a_huge_id_is_refused_and_a_small_graph_is_not() {
        let huge = Estimate::new(Algo::PageRank, 4_294_967_294, 1, false, 8);
        assert!(huge.total_bytes > 100 << 30, "{huge:?}");
        let err = huge
            .check(
                Algo::PageRank,
                8 << 30,
                "'g.txt' line 1",
                "give --compact-ids",
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("'g.txt' line 1"), "{err}");
        assert!(err.contains("8.0 GiB"), "{err}");
        assert!(err.contains("--compact-ids"), "{err}");
        let small = Estimate::new(Algo::PageRank, 2, 1, true, 4);
        small.check(Algo::PageRank, 8 << 30, "", "").unwrap();
        // Saturates instead of wrapping.
        let max = Estimate::new(Algo::Bfs, u64::MAX, u64::MAX, true, 8);
        assert_eq!(max.total_bytes, u64::MAX);
    }

    #[test]
    fn meminfo_is_parsed() {
        let text = "MemTotal:       24523456 kB\nMemFree:         1234 kB\n";
        assert_eq!(parse_meminfo(text), Some(24_523_456 * 1024));
        assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: x kB\n"), None);
        assert!(default_limit_bytes() > 0);
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(120 << 20), "120.0 MiB");
    }
}
