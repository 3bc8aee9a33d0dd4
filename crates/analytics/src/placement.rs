//! Graph-aware data segment offloading (Fargraph+ 5.1, 5.2, Fig. 9).
//!
//! Data segments are the algorithm's vertex arrays and the grid's edge
//! blocks. An offline profile (one run on the Oracle, counted by the engine:
//! bytes streamed per block, edges applied, vertices visited, times each
//! array's declared accesses per edge and per vertex) gives every segment a
//! read and a write frequency per 4 KB page. As in 5.1's offline analysis, a
//! frequency at or above the average over all segments is "much", below is
//! "few", which puts each segment in one of the four groups of Fig. 9:
//!
//! | group | write | read | what it holds here | placement |
//! |---|---|---|---|---|
//! | 1 MO-sensitive | much | much | vertex values, labels | always local |
//! | 2 MO-less-sensitive | much | few | per-iteration temporaries | always local |
//! | 3 MO-less-insensitive | few | much | edge blocks streamed often | transferable |
//! | 4 MO-insensitive | few | few | blocks rarely or never streamed | transferable, first to go |
//!
//! Vertex data stays local whatever its group (5.2's resistant set plus the
//! issue's rule). The far-memory ratio α of 3.1 sets the local budget to
//! `(1 - α) * (vertex bytes + edge bytes)`; after the vertex data, the
//! budget is filled with transferable blocks in priority order (group 3
//! before group 4, then by read frequency, hottest first), whole while they
//! fit; the first that does not keeps a prefix as large as the room left
//! (placement finer than a block: with 4 x 4 PageRank blocks of 32 MB, whole
//! blocks alone missed α = 0.8 by 0.07); every other block goes far. When vertex data alone exceeds the budget, everything
//! transferable goes far and the achieved ratio is below the requested one;
//! reports show both.
//!
//! Where the profile comes from matters (issue 63): a profile of the very
//! run being timed (BFS from the same root) tells placement exactly which
//! blocks that run will read, which no real run knows before it starts.
//! [`degree_profile`] is the honest default: a profile estimated from the
//! grid alone (block sizes and the in-degree mass of each source partition,
//! with the algorithm's access pattern), before anything runs. A profile
//! measured on an earlier run (another root or seed) can be given instead
//! ([`crate::saved`]), or the profiling run can be made and timed with the
//! run ([`crate::run::PlacementSource`]).

use serde::Serialize;

use crate::algo::{Algo, Params, Precision};
use crate::engine::Profile;
use crate::error::{config_err, Result};
use crate::grid::Order;
use crate::store::{BlockTable, Residency, PAGE_BYTES};

/// The four data segment groups of Fargraph+ Fig. 9.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Group {
    /// Read and written much: memory-offloading sensitive.
    G1,
    /// Written much, read little.
    G2,
    /// Read much, written little (edge blocks): transferable.
    G3,
    /// Read and written little (cold): transferable, first to go far.
    G4,
}

impl Group {
    fn of(read_much: bool, write_much: bool) -> Group {
        match (write_much, read_much) {
            (true, true) => Group::G1,
            (true, false) => Group::G2,
            (false, true) => Group::G3,
            (false, false) => Group::G4,
        }
    }
}

/// One classified data segment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SegmentClass {
    /// Array name, or `block ORDER (i,j)`.
    pub name: String,
    /// Bytes.
    pub bytes: u64,
    /// Reads per 4 KB page in the profiled run.
    pub reads_per_page: f64,
    /// Writes per 4 KB page in the profiled run.
    pub writes_per_page: f64,
    /// Its group.
    pub group: Group,
    /// Whether any of it went to far memory (or disk).
    pub far: bool,
    /// Bytes of it placed far (all of a far block; the rest of a block
    /// whose prefix stays local).
    pub far_bytes: u64,
}

/// Bytes and segments per group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupTotals {
    /// Segments in the group.
    pub segments: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes of them placed far.
    pub far_bytes: u64,
}

/// A placement decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// The α asked for.
    pub far_ratio_requested: f64,
    /// Far bytes over all bytes, as placed.
    pub far_ratio_achieved: f64,
    /// `(1 - α) * total`.
    pub local_budget_bytes: u64,
    /// Vertex data (always local).
    pub vertex_bytes: u64,
    /// Edge bytes of the orders streamed.
    pub edge_bytes: u64,
    /// Edge bytes kept local.
    pub resident_edge_bytes: u64,
    /// Edge bytes placed far.
    pub far_edge_bytes: u64,
    /// Per group G1..G4.
    pub groups: [GroupTotals; 4],
    /// The vertex arrays' classes (blocks are summarised in `groups`).
    pub vertex_segments: Vec<SegmentClass>,
    /// Every non-empty edge block's class, in table order (not in the JSON:
    /// one per block).
    #[serde(skip)]
    pub blocks: Vec<SegmentClass>,
    /// Which blocks stay local.
    #[serde(skip)]
    pub residency: Residency,
}

/// Checks a far-memory ratio.
pub fn check_ratio(far_ratio: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&far_ratio) {
        return Err(config_err(
            "far_ratio",
            format!("{far_ratio} is not between 0 and 1"),
        ));
    }
    Ok(())
}

fn pages(bytes: u64) -> f64 {
    bytes.div_ceil(PAGE_BYTES).max(1) as f64
}

/// The local budget for α: `(1 - α) * total`, rounded down.
pub fn local_budget(far_ratio: f64, total_bytes: u64) -> u64 {
    ((1.0 - far_ratio) * total_bytes as f64).floor() as u64
}

/// A profile estimated before the run from what the grid alone says.
///
/// WCC and PageRank stream every block on every pass (their `stream_edges`
/// has no active set), so every block is read alike: `passes` times its
/// length, with PageRank's iteration count as `passes` and one for WCC (its
/// pass count is not known before it runs; a common factor does not change
/// the order). BFS and Radii stream a block only on levels whose frontier
/// has a vertex in the block's source partition, and a vertex joins the
/// frontier when an edge into it is followed, so a partition with more
/// edges into it is on more frontiers: a block's expected reads are its
/// length times `(in-edges of its source partition + 1) / (most in-edges of
/// any partition + 1)`. The in-edge counts are the column sums of the block
/// table, known from preprocessing. Vertex visits are one pass over the
/// vertices per edge pass.
pub fn degree_profile(algo: Algo, params: &Params, table: &BlockTable) -> Profile {
    let shape = table.shape();
    let p = shape.partitions as usize;
    let passes: u64 = match algo {
        Algo::PageRank => u64::from(params.iterations.max(1)),
        Algo::Wcc | Algo::Bfs | Algo::Radii | Algo::Sssp | Algo::Tc | Algo::Bc => 1,
    };
    // Bytes of edges into each partition (blocks (i, j) with j the destination).
    let mut into = vec![0u64; p];
    for (o, pos) in table.blocks() {
        let (_, j) = shape.block_at(o, pos);
        into[j as usize] += table.block_len(o, pos);
    }
    let into_max = into.iter().copied().max().unwrap_or(0);
    let selective = matches!(algo, Algo::Bfs | Algo::Radii | Algo::Sssp | Algo::Bc);
    let mut block_bytes: [Vec<u64>; 2] = [vec![0; shape.blocks()], vec![0; shape.blocks()]];
    let mut streamed = 0u64;
    for (o, pos) in table.blocks() {
        let len = table.block_len(o, pos);
        let (i, _) = shape.block_at(o, pos);
        let reads = if selective {
            // u128: len * (in-edge bytes + 1) can pass u64 on a large grid.
            (u128::from(len) * u128::from(into[i as usize] + 1) / u128::from(into_max + 1)) as u64
        } else {
            len * passes
        };
        block_bytes[o.index()][pos] = reads;
        streamed += reads;
    }
    Profile {
        block_bytes,
        edges_applied: streamed / table.layout().edge_bytes(),
        vertex_visits: shape.vertex_count * passes,
        edge_passes: passes * table.orders().len() as u64,
        vertex_passes: passes,
    }
}

/// Classifies the segments of `algo` (its values in `precision`) on `table`
/// from `profile` and places them for the far-memory ratio `far_ratio`.
pub fn plan(
    algo: Algo,
    precision: Precision,
    table: &BlockTable,
    profile: &Profile,
    far_ratio: f64,
) -> Result<Plan> {
    check_ratio(far_ratio)?;
    let vertices = table.shape().vertex_count;
    // Segments: vertex arrays first, then every non-empty block.
    let mut classes: Vec<SegmentClass> = Vec::new();
    for s in algo.vertex_segments_at(precision) {
        let bytes = s.bytes(vertices);
        let reads = u64::from(s.reads_per_edge) * profile.edges_applied
            + u64::from(s.reads_per_vertex) * profile.vertex_visits;
        let writes = u64::from(s.writes_per_edge) * profile.edges_applied
            + u64::from(s.writes_per_vertex) * profile.vertex_visits;
        classes.push(SegmentClass {
            name: s.name.to_string(),
            bytes,
            reads_per_page: reads as f64 / pages(bytes),
            writes_per_page: writes as f64 / pages(bytes),
            group: Group::G4,
            far: false,
            far_bytes: 0,
        });
    }
    let vertex_count_segments = classes.len();
    let mut block_ids: Vec<(Order, usize)> = Vec::new();
    for (o, p) in table.blocks() {
        let len = table.block_len(o, p);
        if len == 0 {
            continue;
        }
        let streamed = profile.block_bytes[o.index()].get(p).copied().unwrap_or(0);
        let (i, j) = table.shape().block_at(o, p);
        classes.push(SegmentClass {
            name: format!("block {} ({i},{j})", o.name()),
            bytes: len,
            reads_per_page: (streamed / table.layout().edge_bytes()) as f64 / pages(len),
            writes_per_page: 0.0,
            group: Group::G4,
            far: false,
            far_bytes: 0,
        });
        block_ids.push((o, p));
    }
    let n = classes.len() as f64;
    let avg_r = classes.iter().map(|c| c.reads_per_page).sum::<f64>() / n;
    let avg_w = classes.iter().map(|c| c.writes_per_page).sum::<f64>() / n;
    for c in &mut classes {
        let read_much = c.reads_per_page > 0.0 && c.reads_per_page >= avg_r;
        let write_much = c.writes_per_page > 0.0 && c.writes_per_page >= avg_w;
        c.group = Group::of(read_much, write_much);
    }
    let vertex_bytes: u64 = classes[..vertex_count_segments]
        .iter()
        .map(|c| c.bytes)
        .sum();
    let edge_bytes = table.total_bytes();
    let total = vertex_bytes + edge_bytes;
    let budget = local_budget(far_ratio, total);
    // Transferable blocks, most worth keeping first: group 3 before 4, hotter
    // first, each kept whole while it fits; the first that does not keeps a
    // prefix as large as the room left, so the ratio achieved is the one
    // asked (to a word) however large blocks are, and nothing colder stays.
    let mut order: Vec<usize> = (vertex_count_segments..classes.len()).collect();
    order.sort_by(|&a, &b| {
        let (ca, cb) = (&classes[a], &classes[b]);
        ca.group
            .cmp(&cb.group)
            .then(cb.reads_per_page.total_cmp(&ca.reads_per_page))
            .then(a.cmp(&b))
    });
    let mut residency = Residency::all(table, false);
    let mut room = budget.saturating_sub(vertex_bytes);
    let mut resident_edge_bytes = 0u64;
    for k in order {
        let c = &mut classes[k];
        let (o, p) = block_ids[k - vertex_count_segments];
        let kept = if c.bytes <= room {
            residency.set(o, p, true);
            c.bytes
        } else {
            residency.set_prefix(o, p, room)
        };
        room -= kept;
        resident_edge_bytes += kept;
        c.far_bytes = c.bytes - kept;
        c.far = c.far_bytes > 0;
    }
    let mut groups = [GroupTotals::default(); 4];
    for c in &classes {
        let g = &mut groups[c.group as usize];
        g.segments += 1;
        g.bytes += c.bytes;
        g.far_bytes += c.far_bytes;
    }
    let far_edge_bytes = edge_bytes - resident_edge_bytes;
    Ok(Plan {
        far_ratio_requested: far_ratio,
        far_ratio_achieved: far_edge_bytes as f64 / total as f64,
        local_budget_bytes: budget,
        vertex_bytes,
        edge_bytes,
        resident_edge_bytes,
        far_edge_bytes,
        groups,
        vertex_segments: classes[..vertex_count_segments].to_vec(),
        blocks: classes[vertex_count_segments..].to_vec(),
        residency,
    })
}
