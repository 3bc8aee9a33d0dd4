//! The four algorithms of Fargraph+ 9.3 (Table 3) on the streaming engine:
//! BFS, WCC, PageRank and Radii, as GridGraph writes them (vertex data in
//! [`VertexVec`]s, local arrays unless the paged backend pages them too;
//! edges streamed block by block with selective scheduling).
//!
//! Every update goes to the owned side of a column-order pass, so results
//! do not depend on the thread count or the backend; CC links a shared
//! forest by compare-and-swap whose roots are the components' smallest ids,
//! whatever the interleaving. Radii
//! is synchronous (Jacobi): a pass reads last iteration's masks and writes a
//! copy; BFS writes each vertex once; PageRank sums into a fresh
//! array. [`crate::reference`] has the plain in-memory versions the tests
//! compare against.

use serde::Serialize;

use crate::bitmap::Bitmap;
use crate::engine::Engine;
use crate::error::{config_err, Result};
use crate::grid::Order;
use crate::vertex::{self, VertexVec};

pub mod bc;
mod pagerank;
mod sssp;
pub mod tc;
use pagerank::pagerank;
pub use sssp::{sssp, SSSP_DELTA_DEFAULT};

/// Depth and radius of a vertex no search reached.
pub const UNREACHED: u32 = u32::MAX;
/// PageRank iterations (Fargraph+ 9.3: "We run 20 iterations for PageRank").
pub const PAGERANK_ITERATIONS_DEFAULT: u32 = 20;
/// PageRank damping factor (the usual 0.85).
pub const PAGERANK_DAMPING: f64 = 0.85;
/// Radii: sources searched at once, one bit each of a u64 (Ligra/GridGraph radii estimation).
pub const RADII_SAMPLES_MAX: u32 = 64;
/// Radii: the default seed of the sample choice.
pub const RADII_SEED_DEFAULT: u64 = 1;
/// Most iterations any algorithm runs (a bound, far above any diameter met here).
pub const ITERATIONS_MAX: u32 = 100_000;

/// Which algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    /// Breadth-first search from a root, along edge directions.
    Bfs,
    /// Connected components, weakly (label = smallest vertex id of the
    /// component): GAP's `cc`, named so in output and JSON; `wcc` parses too.
    #[serde(rename = "cc")]
    Wcc,
    /// PageRank.
    PageRank,
    /// Radii estimation: multi-source BFS from up to 64 sampled vertices.
    Radii,
    /// Single-source shortest paths by delta-stepping (GAPBS's SSSP) on
    /// the edges' weights (1 where the input has none).
    Sssp,
    /// Triangle counting (GAPBS's TC) on the undirected simple graph, on a
    /// CSR built from one pass over the store ([`tc`]).
    Tc,
    /// Betweenness centrality by Brandes from `--sources` ([`bc`]).
    Bc,
}

impl Algo {
    /// Fargraph+'s four (Table 3), the ones every backend test sweeps.
    pub const ALL: [Algo; 4] = [Algo::Bfs, Algo::Wcc, Algo::PageRank, Algo::Radii];
    /// The kernels added for issue 63 beside them (GAP's).
    pub const GAP_EXTRA: [Algo; 3] = [Algo::Sssp, Algo::Tc, Algo::Bc];

    /// Whether it reads edge weights (a weighted grid when the input has them).
    pub fn uses_weights(self) -> bool {
        self == Algo::Sssp
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Bfs => "bfs",
            Algo::Wcc => "cc",
            Algo::PageRank => "pagerank",
            Algo::Radii => "radii",
            Algo::Sssp => "sssp",
            Algo::Tc => "tc",
            Algo::Bc => "bc",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Result<Algo> {
        match s.to_ascii_lowercase().as_str() {
            "bfs" => Ok(Algo::Bfs),
            "wcc" | "cc" => Ok(Algo::Wcc),
            "pagerank" | "pr" => Ok(Algo::PageRank),
            "radii" => Ok(Algo::Radii),
            "sssp" => Ok(Algo::Sssp),
            "tc" => Ok(Algo::Tc),
            "bc" => Ok(Algo::Bc),
            _ => Err(config_err(
                "algo",
                format!("'{s}' is not one of bfs, sssp, pagerank, cc (wcc), bc, tc, radii"),
            )),
        }
    }

    /// The grid orders it streams: the column order for all (WCC applies
    /// each edge both ways in that one order) but BC, whose backward passes
    /// own the source and stream the row order too.
    pub fn orders(self) -> &'static [Order] {
        match self {
            Algo::Bc => &[Order::Column, Order::Row],
            _ => &[Order::Column],
        }
    }

    /// Its vertex arrays and how it touches them (Fargraph+ Fig. 8-9's
    /// vertex-related data segments), for placement and the memory budget.
    pub fn vertex_segments(self) -> &'static [VertexSegment] {
        match self {
            Algo::Bfs => BFS_SEGMENTS,
            Algo::Wcc => WCC_SEGMENTS,
            Algo::PageRank => PAGERANK_SEGMENTS,
            Algo::Radii => RADII_SEGMENTS,
            Algo::Sssp => SSSP_SEGMENTS,
            Algo::Tc => TC_SEGMENTS,
            Algo::Bc => BC_SEGMENTS,
        }
    }

    /// Bytes per vertex of the values a column pass owns (the window the
    /// automatic partition count sizes to [`Algo::window_cache`]): BFS depth
    /// and parent, WCC's label, PageRank's sum, Radii's mask, SSSP's distance.
    pub fn window_bytes(self, precision: Precision) -> u64 {
        match self {
            Algo::Bfs | Algo::Radii | Algo::Bc => 8,
            Algo::Wcc | Algo::Sssp | Algo::Tc => 4,
            Algo::PageRank => precision.bytes(),
        }
    }

    /// Which cache its window is sized to (see [`crate::grid::WindowCache`]):
    /// the LLC for PageRank's fold, L2 for the others.
    pub fn window_cache(self) -> crate::grid::WindowCache {
        match self {
            Algo::PageRank => crate::grid::WindowCache::Llc,
            _ => crate::grid::WindowCache::L2,
        }
    }

    /// Source ids per stripe of the grid it runs best on: BFS and Radii
    /// stream with an active set and skip inactive stripes (so does SSSP,
    /// one bin at a time); WCC and PageRank stream every edge and keep one
    /// stripe per block.
    pub fn stripe_ids(self) -> u64 {
        match self {
            Algo::Bfs | Algo::Radii | Algo::Sssp | Algo::Bc => crate::grid::STRIPE_IDS_SPARSE,
            Algo::Wcc | Algo::PageRank | Algo::Tc => crate::grid::NO_STRIPES,
        }
    }

    /// Bytes of its vertex data for `vertices` vertices (bitmaps rounded
    /// up), PageRank's values in f64.
    pub fn vertex_bytes(self, vertices: u64) -> u64 {
        self.vertex_segments()
            .iter()
            .map(|s| s.bytes(vertices))
            .sum()
    }

    /// [`Algo::vertex_bytes`] with PageRank's rank, contribution and sum in
    /// `precision`.
    pub fn vertex_bytes_at(self, vertices: u64, precision: Precision) -> u64 {
        self.vertex_segments_at(precision)
            .iter()
            .map(|s| s.bytes(vertices))
            .sum()
    }

    /// [`Algo::vertex_segments`] as a run in `precision` lays them out
    /// (PageRank's f32 values take 4 bytes, not 8).
    pub fn vertex_segments_at(self, precision: Precision) -> Vec<VertexSegment> {
        self.vertex_segments()
            .iter()
            .map(|&s| match (self, precision) {
                (Algo::PageRank, Precision::F32) if s.bytes_per_vertex == 8 => VertexSegment {
                    bytes_per_vertex: 4,
                    ..s
                },
                _ => s,
            })
            .collect()
    }
}

const fn seg(
    name: &'static str,
    bytes_per_vertex: u64,
    per_edge: (u32, u32),
    per_vertex: (u32, u32),
) -> VertexSegment {
    VertexSegment {
        name,
        bytes_per_vertex,
        reads_per_edge: per_edge.0,
        writes_per_edge: per_edge.1,
        reads_per_vertex: per_vertex.0,
        writes_per_vertex: per_vertex.1,
    }
}

// (name, bytes per vertex, (reads, writes) per edge, (reads, writes) per vertex)
const BFS_SEGMENTS: &[VertexSegment] = &[
    seg("depth+parent", 8, (1, 0), (1, 0)),
    seg("frontier", 1, (1, 0), (0, 1)),
];
const WCC_SEGMENTS: &[VertexSegment] = &[seg("parent", 4, (2, 1), (3, 1))];
const PAGERANK_SEGMENTS: &[VertexSegment] = &[
    seg("rank", 8, (0, 0), (2, 1)),
    seg("contrib", 8, (1, 0), (0, 1)),
    seg("sum", 8, (1, 1), (1, 1)),
    seg("out-degree", 4, (0, 0), (1, 0)),
];
const SSSP_SEGMENTS: &[VertexSegment] = &[
    seg("distance", 4, (1, 1), (2, 0)),
    seg("done", 4, (1, 0), (2, 1)),
    seg("frontier", 1, (1, 0), (0, 1)),
];
// The in-neighbour lists the one pass fills (the CSR is per edge, not here).
const TC_SEGMENTS: &[VertexSegment] = &[
    seg("in-neighbours", 24, (0, 1), (1, 0)),
    seg("count", 8, (0, 0), (0, 1)),
];
const BC_SEGMENTS: &[VertexSegment] = &[
    seg("depth+paths", 16, (1, 1), (2, 0)),
    seg("paths-read", 8, (1, 0), (0, 1)),
    seg("coefficient", 8, (1, 0), (0, 1)),
    seg("sum", 8, (1, 1), (1, 1)),
    seg("score", 8, (0, 0), (0, 1)),
    seg("levels", 1, (1, 0), (1, 1)),
];
const RADII_SEGMENTS: &[VertexSegment] = &[
    seg("visited", 8, (1, 0), (1, 1)),
    seg("next-visited", 8, (1, 1), (1, 0)),
    seg("radius", 4, (0, 0), (0, 1)),
    seg("active", 1, (1, 0), (0, 1)),
];

/// A vertex array of an algorithm and its access pattern per edge applied
/// and per vertex visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VertexSegment {
    /// Array name.
    pub name: &'static str,
    /// Bytes per vertex (1 stands for a bitmap: one bit).
    pub bytes_per_vertex: u64,
    /// Reads per edge applied.
    pub reads_per_edge: u32,
    /// Writes per edge applied.
    pub writes_per_edge: u32,
    /// Reads per vertex visited.
    pub reads_per_vertex: u32,
    /// Writes per vertex visited.
    pub writes_per_vertex: u32,
}

impl VertexSegment {
    /// Bytes for `vertices` vertices.
    pub fn bytes(&self, vertices: u64) -> u64 {
        if self.bytes_per_vertex == 1 {
            vertices.div_ceil(64) * 8
        } else {
            vertices * self.bytes_per_vertex
        }
    }
}

/// PageRank's vertex value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Ranks, contributions and sums in f32 (half the vertex bytes); the
    /// dangling mass and the normalising total are summed in f64. Within
    /// [`pagerank_f32_tolerance`] of the f64 result.
    F32,
    /// Everything in f64 (the reference's type; checked against networkx).
    F64,
}

impl Precision {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// Parses `f32` or `f64`.
    pub fn parse(s: &str) -> Result<Precision> {
        match s {
            "f32" => Ok(Precision::F32),
            "f64" => Ok(Precision::F64),
            _ => Err(config_err(
                "precision",
                format!("'{s}' is not one of f32, f64"),
            )),
        }
    }

    /// Bytes of one value.
    pub fn bytes(self) -> u64 {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
}

/// How far, in the L1 norm, f32 PageRank may be from f64 PageRank after any
/// number of iterations on a graph whose largest in-degree is `max_in_degree`.
///
/// The argument. Let u = 2^-24 (f32's unit roundoff) and d the damping
/// factor. One iteration computes, per vertex v with in-degree k,
/// `r'(v) = base + d * sum(c(s))` with `c(s) = r(s) / deg(s)`: the division
/// rounds each term once (relative u), the k-term sum of non-negative terms
/// in recursive order adds at most (k - 1) u of the sum, the product and the
/// addition of `base` one u each, so the computed `r'(v)` is within
/// (k + 3) u * r'(v) of the exact image of the previous f32 ranks (`base`
/// comes from the f64 dangling sum, exact to f64 rounding). Summed over v,
/// the rounding added per iteration is at most (K + 3) u * sum(r') <=
/// (K + 3) u, K the largest in-degree, since the ranks sum to 1. The exact
/// map is a contraction with factor d in L1 (its linear part is d times a
/// column-stochastic matrix, dangling mass spread uniformly), so errors
/// from earlier iterations shrink by d each iteration and the total after
/// any number of them is at most (K + 3) u / (1 - d); the initial 1/n in
/// f32 adds u more. Dividing by the f64 total of the f32 ranks, which is
/// 1 within that same error e, at most doubles it (plus u). Hence
/// `2 (K + 5) u / (1 - d)`.
pub fn pagerank_f32_tolerance(max_in_degree: u64) -> f64 {
    let u = f64::powi(2.0, -24);
    2.0 * (max_in_degree as f64 + 5.0) * u / (1.0 - PAGERANK_DAMPING)
}

/// Per-algorithm settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// BFS and SSSP root (None: the vertex with the largest out-degree,
    /// lowest id on ties).
    pub root: Option<u32>,
    /// PageRank iterations (the most, with a tolerance).
    pub iterations: u32,
    /// PageRank: stop once an iteration moves the ranks by less than this
    /// in L1 (GAPBS's rule; None: run every iteration).
    pub tolerance: Option<f64>,
    /// Radii sample seed.
    pub seed: u64,
    /// PageRank's value type.
    pub precision: Precision,
    /// SSSP's bin width (delta-stepping).
    pub delta: u32,
    /// BC's sources.
    pub sources: bc::Sources,
    /// BC's sample seed (with a count of sources).
    pub sources_seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            root: None,
            iterations: PAGERANK_ITERATIONS_DEFAULT,
            tolerance: None,
            seed: RADII_SEED_DEFAULT,
            precision: Precision::F32,
            delta: SSSP_DELTA_DEFAULT,
            sources: bc::Sources::Root,
            sources_seed: bc::BC_SEED_DEFAULT,
        }
    }
}

/// What an algorithm computed.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// BFS: depth (edges from the root, [`UNREACHED`]) and parent of every vertex.
    Bfs {
        /// The root.
        root: u32,
        /// Depth per vertex.
        depth: Vec<u32>,
        /// Parent per vertex (the root is its own; [`UNREACHED`] if not reached).
        parent: Vec<u32>,
    },
    /// WCC: the smallest vertex id of each vertex's weakly connected component.
    Wcc {
        /// Label per vertex.
        label: Vec<u32>,
    },
    /// PageRank: scores summing to 1.
    PageRank {
        /// Score per vertex.
        rank: Vec<f64>,
    },
    /// Radii: per vertex, the largest distance from any sample that reaches
    /// it ([`UNREACHED`] if none does).
    Radii {
        /// The sampled sources.
        samples: Vec<u32>,
        /// Radius estimate per vertex.
        radius: Vec<u32>,
    },
    /// SSSP: the weight of a lightest path from the root ([`UNREACHED`] if none).
    Sssp {
        /// The root.
        root: u32,
        /// Distance per vertex.
        dist: Vec<u32>,
    },
    /// TC: triangles through each vertex of the undirected simple graph.
    Tc {
        /// Triangles per vertex.
        count: Vec<u64>,
        /// Triangles in all (the counts sum to three times this).
        total: u64,
    },
    /// BC: Brandes's dependencies summed over the sources.
    Bc {
        /// The sources, in the order run.
        sources: Vec<u32>,
        /// Score per vertex.
        score: Vec<f64>,
    },
}

impl Output {
    /// A 64-bit digest of the result (FNV-1a over little-endian values): BFS
    /// depths, WCC labels, PageRank scores' bits, Radii radii. Equal across
    /// backends and thread counts, since the engine's update order is fixed.
    pub fn digest(&self) -> u64 {
        let mut h = Fnv::new();
        match self {
            Output::Bfs { depth, .. } => depth.iter().for_each(|d| h.write(&d.to_le_bytes())),
            Output::Wcc { label } => label.iter().for_each(|l| h.write(&l.to_le_bytes())),
            Output::PageRank { rank } => rank.iter().for_each(|r| h.write(&r.to_le_bytes())),
            Output::Radii { radius, .. } => radius.iter().for_each(|r| h.write(&r.to_le_bytes())),
            Output::Sssp { dist, .. } => dist.iter().for_each(|d| h.write(&d.to_le_bytes())),
            Output::Tc { count, .. } => count.iter().for_each(|c| h.write(&c.to_le_bytes())),
            Output::Bc { score, .. } => score.iter().for_each(|c| h.write(&c.to_le_bytes())),
        }
        h.0
    }

    /// A one-line summary (reached vertices, components, top score, radius).
    pub fn summary(&self) -> String {
        match self {
            Output::Bfs { root, depth, .. } => {
                let reached = depth.iter().filter(|&&d| d != UNREACHED).count();
                let max = depth
                    .iter()
                    .filter(|&&d| d != UNREACHED)
                    .max()
                    .unwrap_or(&0);
                format!("root {root}: {reached} vertices reached, deepest at {max}")
            }
            Output::Wcc { label } => {
                let comps = label
                    .iter()
                    .enumerate()
                    .filter(|&(v, &l)| v as u32 == l)
                    .count();
                format!("{comps} weakly connected components")
            }
            Output::PageRank { rank } => {
                let (v, r) =
                    rank.iter()
                        .enumerate()
                        .fold((0, f64::MIN), |b, (v, &r)| if r > b.1 { (v, r) } else { b });
                format!("top vertex {v} with score {r:.6e}")
            }
            Output::Radii { samples, radius } => {
                let max = radius
                    .iter()
                    .filter(|&&r| r != UNREACHED)
                    .max()
                    .unwrap_or(&0);
                format!("{} samples: estimated radius {max}", samples.len())
            }
            Output::Sssp { root, dist } => {
                let reached = dist.iter().filter(|&&d| d != UNREACHED).count();
                let max = dist.iter().filter(|&&d| d != UNREACHED).max().unwrap_or(&0);
                format!("root {root}: {reached} vertices reached, farthest at distance {max}")
            }
            Output::Bc { sources, score } => {
                let (v, r) =
                    score
                        .iter()
                        .enumerate()
                        .fold((0, f64::MIN), |b, (v, &r)| if r > b.1 { (v, r) } else { b });
                format!(
                    "{} sources: top vertex {v} with score {r:.6e}",
                    sources.len()
                )
            }
            Output::Tc { count, total } => {
                let most = count.iter().max().unwrap_or(&0);
                format!("{total} triangles (the undirected simple graph); at most {most} through one vertex")
            }
        }
    }
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// An algorithm's result and how many edge-streaming iterations it took.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The result.
    pub output: Output,
    /// Iterations (rounds of edge passes).
    pub iterations: u32,
}

/// The default BFS root: the vertex with the largest out-degree (lowest id on ties).
pub fn default_root(out_degree: &[u32]) -> u32 {
    let mut best = 0usize;
    for (v, &d) in out_degree.iter().enumerate() {
        if d > out_degree[best] {
            best = v;
        }
    }
    best as u32
}

/// The Radii samples: `min(64, V)` distinct vertices chosen by a seeded hash.
pub fn radii_samples(vertices: u64, seed: u64) -> Vec<u32> {
    let k = u64::from(RADII_SAMPLES_MAX).min(vertices);
    if vertices <= u64::from(RADII_SAMPLES_MAX) {
        return (0..vertices as u32).collect();
    }
    let mut out: Vec<u32> = Vec::with_capacity(k as usize);
    let mut i = 0u64;
    while (out.len() as u64) < k {
        let v = (mix64(seed ^ mix64(i)) % vertices) as u32;
        if !out.contains(&v) {
            out.push(v);
        }
        i += 1;
    }
    out
}

fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs `algo` on `engine`; `out_degree` is the grid's (local vertex data).
pub fn run(engine: &Engine<'_>, algo: Algo, out_degree: &[u32], params: &Params) -> Result<Run> {
    let v = engine.vertex_count();
    assert_eq!(out_degree.len() as u64, v, "one degree per vertex");
    // Vertex arrays (VertexVec, bitmaps) allocated from here on live where
    // the store says: local, or paged with the edges (`paged_vertices`).
    let mem = engine.store().vertex_memory();
    let _vertex_scope = vertex::scope(mem.clone());
    let paged_degree =
        (mem.is_some() && algo == Algo::PageRank).then(|| VertexVec::from_slice(out_degree));
    let out_degree: &[u32] = paged_degree.as_deref().unwrap_or(out_degree);
    let root = || {
        let root = params.root.unwrap_or_else(|| default_root(out_degree));
        if u64::from(root) >= v {
            return Err(config_err(
                "root",
                format!("vertex {root} is not below the vertex count {v}"),
            ));
        }
        Ok(root)
    };
    match algo {
        Algo::Bfs => bfs(engine, root()?),
        Algo::Sssp => sssp(engine, root()?, params.delta),
        Algo::Tc => tc::tc(engine),
        Algo::Bc => {
            let sources = match &params.sources {
                bc::Sources::Root => vec![root()?],
                bc::Sources::All => (0..v as u32).collect(),
                bc::Sources::Sample(k) => bc::sample_sources(out_degree, *k, params.sources_seed),
                bc::Sources::List(l) => l.clone(),
            };
            bc::bc(engine, &sources)
        }
        Algo::Wcc => wcc(engine),
        Algo::PageRank => match params.precision {
            Precision::F32 => {
                pagerank::<f32>(engine, out_degree, params.iterations, params.tolerance)
            }
            Precision::F64 => {
                pagerank::<f64>(engine, out_degree, params.iterations, params.tolerance)
            }
        },
        Algo::Radii => radii(engine, params.seed),
    }
}

fn bfs(engine: &Engine<'_>, root: u32) -> Result<Run> {
    let v = engine.vertex_count();
    // (depth, parent): the owned side of the column pass.
    let mut state = VertexVec::filled((UNREACHED, UNREACHED), v as usize);
    state[root as usize] = (0, root);
    let mut frontier = Bitmap::new(v);
    frontier.set(u64::from(root));
    let mut level = 0u32;
    loop {
        let next = level + 1;
        // A reached destination skips the rest of its edges before the
        // frontier's bit is looked at.
        engine.stream_edges_wanted(
            Order::Column,
            Some(&frontier),
            &mut state,
            |st| st.0 == UNREACHED,
            |s, _, st| *st = (next, s),
        )?;
        level = next;
        frontier = engine.vertex_bitmap(|x| state[x as usize].0 == next);
        if frontier.count() == 0 || level >= ITERATIONS_MAX {
            break;
        }
    }
    let (depth, parent) = state.iter().copied().unzip();
    Ok(Run {
        output: Output::Bfs {
            root,
            depth,
            parent,
        },
        iterations: level,
    })
}

/// Connected components by linking (GAPBS's Afforest `Link` and `Compress`,
/// Sutton et al. IPDPS 2018; issue 63): `parent` is a forest in which every
/// vertex points at a smaller id or itself, so a tree's root is its smallest
/// vertex. One pass over the column order links each edge's two trees by
/// one compare-and-swap of the larger root to the smaller; then pointer
/// jumping points every vertex at its root. After the pass every edge's
/// endpoints share a tree, so the roots are the components' smallest ids,
/// whatever the thread interleaving: the same labels as the label
/// propagation it replaces, in one pass instead of one per label hop, so
/// far memory and disk are read once. No sampling (Afforest's skip of the
/// largest component): a grid pass reads every block anyway.
fn wcc(engine: &Engine<'_>) -> Result<Run> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let v = engine.vertex_count();
    let parent: VertexVec<AtomicU32> = VertexVec::from_fn(v as usize, |x| AtomicU32::new(x as u32));
    // The engine hands each owned vertex's element to the callback; the
    // forest is shared atomics instead, so the owned side carries nothing.
    let mut unit = vec![(); v as usize];
    let p = &parent;
    engine.stream_edges(Order::Column, None, &mut unit, |s, d, _| link(p, s, d))?;
    engine.stream_vertices(&mut unit, |x, _| {
        let me = &p[x as usize];
        loop {
            let up = me.load(Relaxed);
            let upper = p[up as usize].load(Relaxed);
            if upper == up {
                break 0u64;
            }
            // Only ever lowered: another thread's jump is as good as ours.
            me.fetch_min(upper, Relaxed);
        }
    });
    let label: Vec<u32> = parent.iter().map(|l| l.load(Relaxed)).collect();
    debug_assert!(
        label.iter().all(|&l| label[l as usize] == l),
        "every label is a root"
    );
    Ok(Run {
        output: Output::Wcc { label },
        iterations: 1,
    })
}

/// Joins the trees of `u` and `w` (GAPBS's `Link`): the larger root is
/// hooked under the smaller by compare-and-swap; a lost race, or a root that
/// is no longer one, climbs and retries. Parents only decrease, so it ends.
fn link(parent: &[std::sync::atomic::AtomicU32], u: u32, w: u32) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut p1 = parent[u as usize].load(Relaxed);
    let mut p2 = parent[w as usize].load(Relaxed);
    while p1 != p2 {
        let (high, low) = (p1.max(p2), p1.min(p2));
        let p_high = parent[high as usize].load(Relaxed);
        if p_high == low
            || (p_high == high
                && parent[high as usize]
                    .compare_exchange(high, low, Relaxed, Relaxed)
                    .is_ok())
        {
            return;
        }
        p1 = parent[parent[high as usize].load(Relaxed) as usize].load(Relaxed);
        p2 = parent[low as usize].load(Relaxed);
    }
}

fn radii(engine: &Engine<'_>, seed: u64) -> Result<Run> {
    let v = engine.vertex_count();
    let samples = radii_samples(v, seed);
    let mut visited = VertexVec::filled(0u64, v as usize);
    let mut radius = VertexVec::filled(UNREACHED, v as usize);
    let mut active = Bitmap::new(v);
    for (b, &s) in samples.iter().enumerate() {
        visited[s as usize] |= 1 << b;
        radius[s as usize] = 0;
        active.set(u64::from(s));
    }
    let mut iterations = 0u32;
    loop {
        let mut next = visited.clone();
        let old = &visited;
        engine.stream_edges(Order::Column, Some(&active), &mut next, |s, _, x| {
            *x |= old[s as usize];
        })?;
        iterations += 1;
        let it = iterations;
        let changed = engine.vertex_bitmap(|x| next[x as usize] != visited[x as usize]);
        let ch = &changed;
        engine.stream_vertices(&mut radius, |x, r| {
            if ch.get(u64::from(x)) {
                *r = it;
            }
            0u64
        });
        visited = next;
        if changed.count() == 0 || iterations >= ITERATIONS_MAX {
            break;
        }
        active = changed;
    }
    Ok(Run {
        output: Output::Radii {
            samples,
            radius: radius.to_vec(),
        },
        iterations,
    })
}
