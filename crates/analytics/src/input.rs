//! A run's graph, loaded within a memory limit (issue 12, requirement 6).
//!
//! The edge list is read first (its size is the file's), then the run's
//! peak memory is estimated from the vertex count ([`crate::memory`]) and
//! the run refused, naming the file and line of the largest id, before any
//! array of one entry per vertex exists. With `compact_ids` the ids the
//! edges name are renumbered `0..n` in increasing order (an [`IdMap`]), so
//! a graph of two vertices with ids 0 and 4294967293 is a graph of two.
//!
//! The renumbering is monotone, so results map back exactly: BFS depths
//! and Radii estimates are per vertex, a WCC label (the smallest id of the
//! component) maps to the smallest *original* id of it. Vertices no edge
//! names drop out: they would be isolated, but PageRank gives every vertex a
//! share, so compacted PageRank is that of the graph on the vertices present,
//! and Radii samples among those vertices.
//!
//! With `symmetrize` every edge `u -> v` (not a self loop) gets its reverse
//! `v -> u`, and duplicate edges are then removed, so the graph is
//! undirected with each direction once; without it edges are taken as
//! directed, as given. Every run states which ([`EdgeMode`]). Parsing is
//! `locus_graph::input`'s, the store's loader's: SNAP text (a third weight
//! column, as in `.wel`, refused unless weights are dropped on request),
//! Matrix Market `.mtx`, GridGraph binary, any of them gzip-compressed.
//!
//! **Weights.** A run of an algorithm that uses weights ([`Algo::uses_weights`]:
//! SSSP) reads them with [`crate::weighted`] and builds a weighted grid;
//! symmetrizing keeps the lightest weight of each pair. Its input without
//! weights (two-column text, binary, a pattern matrix), or with weights
//! dropped by `--ignore-weights` (the same flag that lets the other
//! algorithms read a weighted file), gives every edge weight 1, and the run
//! says which ([`WeightSource`]). A generated R-MAT graph for such a run
//! gets GAPBS's weights: uniform in `1..=255`, here from a hash of the seed
//! and the edge's index ([`rmat_weight`]).

use std::path::Path;

use locus_graph::{Edge, Format, LoadOptions, Rmat};

use crate::algo::Algo;
use crate::error::Result;
use crate::grid::{GraphInput, Grid, GridOptions, LayoutChoice, Shape, WindowCache};
use crate::memory::{human_bytes, Estimate};
use crate::weighted::{self, WeightSource};

/// What a load may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadLimits {
    /// Refuse a run whose estimate exceeds this (`--memory-max`).
    pub memory_bytes_max: u64,
    /// Renumber ids to the vertices present (`--compact-ids`).
    pub compact_ids: bool,
    /// Bytes per vertex of the values a pass owns, which size the automatic
    /// partition count to a cache ([`Algo::window_bytes`]).
    pub window_bytes: u64,
    /// Which cache that window is sized to ([`Algo::window_cache`]).
    pub window_cache: WindowCache,
    /// Source ids per stripe of a column block (`u64::MAX`: one stripe).
    pub stripe_ids: u64,
    /// The edge encoding (`--edge-layout`).
    pub edge_layout: LayoutChoice,
    /// Add every edge's reverse and drop duplicates (`--symmetrize`).
    pub symmetrize: bool,
}

/// How a run took its input's edges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeMode {
    /// As given, one direction each (`--directed`, the default).
    #[default]
    Directed,
    /// Each edge in both directions, duplicates removed (`--symmetrize`).
    Symmetrized,
}

impl EdgeMode {
    /// The mode `limits` ask for.
    pub fn of(limits: &LoadLimits) -> EdgeMode {
        if limits.symmetrize {
            EdgeMode::Symmetrized
        } else {
            EdgeMode::Directed
        }
    }

    /// `directed` or `symmetrized`.
    pub fn name(self) -> &'static str {
        match self {
            EdgeMode::Directed => "directed",
            EdgeMode::Symmetrized => "symmetrized",
        }
    }
}

/// [`symmetrize`] with a weight per edge: a reverse edge takes its
/// edge's weight, and of duplicates the lightest is kept.
pub fn symmetrize_weighted(edges: &mut Vec<Edge>, weights: &mut Vec<u32>) {
    let n = edges.len();
    let mut all: Vec<(u32, u32, u32)> = Vec::with_capacity(2 * n);
    for (&(s, d), &w) in edges.iter().zip(weights.iter()) {
        all.push((s, d, w));
        if s != d {
            all.push((d, s, w));
        }
    }
    all.sort_unstable();
    all.dedup_by_key(|e| (e.0, e.1));
    *edges = all.iter().map(|&(s, d, _)| (s, d)).collect();
    *weights = all.iter().map(|&(_, _, w)| w).collect();
}

/// GAPBS's generated weight for edge `index` of an R-MAT graph made with
/// `seed`: uniform in `1..=255` (a hash here, not GAPBS's generator).
pub fn rmat_weight(seed: u64, index: u64) -> u32 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    1 + ((z ^ (z >> 31)) % 255) as u32
}

/// Adds the reverse of every edge that is not a self loop, then sorts and
/// removes duplicates (so each direction appears once).
pub fn symmetrize(edges: &mut Vec<Edge>) {
    let n = edges.len();
    edges.reserve(n);
    for k in 0..n {
        let (s, d) = edges[k];
        if s != d {
            edges.push((d, s));
        }
    }
    edges.sort_unstable();
    edges.dedup();
    edges.shrink_to_fit();
}

impl LoadLimits {
    /// Bytes per edge the grid of `vertices` in `partitions` will use (the
    /// wide size if the shape or layout is refused: the build says why).
    pub fn edge_bytes(&self, vertices: u64, partitions: Option<u32>) -> u64 {
        let cap = self.edge_layout.width_max();
        Shape::new_in(
            vertices,
            partitions,
            self.window_bytes,
            self.window_cache,
            cap,
        )
        .and_then(|s| self.edge_layout.resolve(s.width))
        .map_or(crate::layout::WIDE_EDGE_BYTES, |l| l.edge_bytes())
    }
}

/// The original id of every compacted vertex, in increasing order:
/// compacted vertex `v` is `original[v]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdMap {
    original: Vec<u32>,
}

impl IdMap {
    /// Renumbers `edges` in place to `0..n` over the ids they name, keeping
    /// the order of ids; returns the map back. Holds one sorted copy of the
    /// ids meanwhile (8 bytes per edge).
    pub fn compact(edges: &mut [Edge]) -> IdMap {
        let mut ids: Vec<u32> = Vec::with_capacity(edges.len() * 2);
        for &(s, d) in edges.iter() {
            ids.push(s);
            ids.push(d);
        }
        ids.sort_unstable();
        ids.dedup();
        ids.shrink_to_fit();
        let pos = |x: u32| -> u32 {
            // Every endpoint is in `ids` by construction.
            ids.binary_search(&x)
                .expect("an endpoint's id was collected") as u32
        };
        for e in edges.iter_mut() {
            *e = (pos(e.0), pos(e.1));
        }
        IdMap { original: ids }
    }

    /// Vertices after compaction.
    pub fn len(&self) -> u64 {
        self.original.len() as u64
    }

    /// Whether no vertex is present.
    pub fn is_empty(&self) -> bool {
        self.original.is_empty()
    }

    /// The map with these original ids, if strictly increasing.
    pub fn from_originals(original: Vec<u32>) -> Option<IdMap> {
        original
            .windows(2)
            .all(|w| w[0] < w[1])
            .then_some(IdMap { original })
    }

    /// The input id of compacted vertex `v`.
    pub fn original(&self, v: u32) -> u32 {
        self.original[v as usize]
    }

    /// Every original id, by compacted id.
    pub fn originals(&self) -> &[u32] {
        &self.original
    }

    /// The compacted id of original id `id`, if an edge names it.
    pub fn compacted(&self, id: u32) -> Option<u32> {
        self.original.binary_search(&id).ok().map(|v| v as u32)
    }
}

/// A grid ready to run, with its id map (when compacted) and the estimate
/// it was admitted under.
#[derive(Debug)]
pub struct Loaded {
    /// The grid.
    pub grid: Grid,
    /// Compacted ids back to the input's (None: ids are the input's).
    pub ids: Option<IdMap>,
    /// The memory estimate checked against the limit.
    pub estimate: Estimate,
    /// Where the grid's weights came from ([`WeightSource::Unused`] unless
    /// the algorithm uses weights).
    pub weights: WeightSource,
}

/// Loads `path` (errors name the file and line or byte offset), checks the
/// run of `algo` on it against `limits`, compacts ids if asked, and builds
/// the grid. A refusal names the line of the largest id.
pub fn load_graph(
    path: &Path,
    format: Option<Format>,
    opts: &LoadOptions,
    partitions: Option<u32>,
    algo: Algo,
    limits: LoadLimits,
) -> Result<Loaded> {
    let cause = || match opts.vertex_count {
        Some(n) => format!("the vertex count {n} given for '{}'", path.display()),
        None => largest_id_cause(path, format, opts),
    };
    if !algo.uses_weights() {
        let list = locus_graph::input::load(path, format, opts)?;
        let edges = (list.edges, None);
        return admit(list.vertex_count, edges, partitions, algo, limits, cause);
    }
    let (list, source) = if opts.ignore_weights {
        let list = locus_graph::input::load(path, format, opts)?;
        let list = weighted::WeightedList {
            vertex_count: list.vertex_count,
            edges: list.edges,
            weights: None,
        };
        (list, WeightSource::UnitDropped)
    } else {
        let list = weighted::load(path, format, opts)?;
        let source = if list.weights.is_some() {
            WeightSource::Input
        } else {
            WeightSource::UnitNoneInInput
        };
        (list, source)
    };
    // A run that uses weights always builds a weighted grid (weight 1 where
    // the input has none), so the grid's blocks are the same size either way.
    let m = list.edges.len();
    let w = list.weights.unwrap_or_else(|| vec![1; m]);
    let mut loaded = admit(
        list.vertex_count,
        (list.edges, Some(w)),
        partitions,
        algo,
        limits,
        cause,
    )?;
    loaded.weights = source;
    Ok(loaded)
}

/// Checks the run of `algo` on R-MAT `rmat` against `limits` before
/// generating it, then generates (and compacts, if asked) and builds it.
pub fn rmat_graph(
    rmat: &Rmat,
    partitions: Option<u32>,
    algo: Algo,
    limits: LoadLimits,
) -> Result<Loaded> {
    let cause = || format!("R-MAT with {} vertices", rmat.vertex_count());
    // The compacted count is not known before generating: check the full one.
    let wf = if algo.uses_weights() { 2 } else { 1 };
    let eb = wf * limits.edge_bytes(rmat.vertex_count(), partitions);
    let est = Estimate::new(algo, rmat.vertex_count(), rmat.edge_count(), false, eb);
    est.check(
        algo,
        limits.memory_bytes_max,
        &cause(),
        "use a smaller scale or raise --memory-max",
    )?;
    let mut edges = Vec::with_capacity(rmat.edge_count() as usize);
    rmat.try_for_each_chunk_in_order(locus_graph::default_threads(), |_, chunk| {
        edges.extend_from_slice(chunk);
        Ok::<(), std::convert::Infallible>(())
    })
    .unwrap_or_else(|e| match e {});
    let weights = algo.uses_weights().then(|| {
        let seed = rmat.config().seed;
        (0..edges.len() as u64)
            .map(|k| rmat_weight(seed, k))
            .collect()
    });
    let mut loaded = admit(
        rmat.vertex_count(),
        (edges, weights),
        partitions,
        algo,
        limits,
        cause,
    )?;
    if algo.uses_weights() {
        loaded.weights = WeightSource::Generated;
    }
    Ok(loaded)
}

fn admit(
    vertex_count: u64,
    (mut edges, mut weights): (Vec<Edge>, Option<Vec<u32>>),
    partitions: Option<u32>,
    algo: Algo,
    limits: LoadLimits,
    cause: impl FnOnce() -> String,
) -> Result<Loaded> {
    if limits.symmetrize {
        match weights.as_mut() {
            Some(w) => symmetrize_weighted(&mut edges, w),
            None => symmetrize(&mut edges),
        }
    }
    let e = edges.len() as u64;
    // A weighted edge is twice the bytes ([`crate::layout`]).
    let wf = if weights.is_some() { 2 } else { 1 };
    let (vertices, ids, estimate) = if limits.compact_ids {
        // Compaction holds one more copy of the ids; check that much first
        // against the most vertices the edges can name.
        let most = (2 * e).min(vertex_count);
        let eb = wf * limits.edge_bytes(most, partitions);
        Estimate::new(algo, most, e, true, eb).check(
            algo,
            limits.memory_bytes_max,
            &format!("compacting {e} edges"),
            "raise --memory-max",
        )?;
        let ids = IdMap::compact(&mut edges);
        let eb = wf * limits.edge_bytes(ids.len(), partitions);
        let est = Estimate::new(algo, ids.len(), e, true, eb);
        est.check(
            algo,
            limits.memory_bytes_max,
            &format!("{} vertices present after compaction", ids.len()),
            "raise --memory-max",
        )?;
        (ids.len(), Some(ids), est)
    } else {
        let eb = wf * limits.edge_bytes(vertex_count, partitions);
        let est = Estimate::new(algo, vertex_count, e, false, eb);
        if est.total_bytes > limits.memory_bytes_max {
            est.check(
                algo,
                limits.memory_bytes_max,
                &cause(),
                "give --compact-ids to number only the vertices the edges name, \
                 or raise --memory-max",
            )?;
        }
        (vertex_count, None, est)
    };
    let input = match &weights {
        Some(w) => GraphInput::Weighted {
            vertex_count: vertices,
            edges: &edges,
            weights: w,
        },
        None => GraphInput::Edges {
            vertex_count: vertices,
            edges: &edges,
        },
    };
    let grid = Grid::build_with(
        input,
        &GridOptions {
            partitions,
            value_bytes: limits.window_bytes,
            window_cache: limits.window_cache,
            stripe_ids: limits.stripe_ids,
            layout: limits.edge_layout,
        },
    )?;
    Ok(Loaded {
        grid,
        ids,
        estimate,
        weights: WeightSource::Unused,
    })
}

/// "'PATH' line N names vertex ID, so vertices are numbered 0..=ID": a
/// second pass over the file, only on the way to an error.
fn largest_id_cause(path: &Path, format: Option<Format>, opts: &LoadOptions) -> String {
    let mut max = 0u32;
    let mut at = None;
    let visited = locus_graph::input::visit(path, format, opts, |(s, d), pos| {
        let m = s.max(d);
        if at.is_none() || m > max {
            max = m;
            at = Some(pos);
        }
        Ok::<(), std::convert::Infallible>(())
    });
    match (visited, at) {
        (Ok(_), Some(pos)) => format!(
            "'{}' {pos} names vertex {max}, so vertices are numbered 0..={max}",
            path.display()
        ),
        _ => format!("'{}' names vertices up to {max}", path.display()),
    }
}

/// A one-line description of an estimate, for reports.
pub fn describe(e: &Estimate) -> String {
    format!(
        "about {} ({} vertex data, {} edges)",
        human_bytes(e.total_bytes),
        human_bytes(e.vertex_bytes),
        human_bytes(e.edge_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_the_order_of_ids() {
        let mut edges = vec![(7, 4_294_967_293), (0, 7), (4_294_967_293, 0)];
        let ids = IdMap::compact(&mut edges);
        assert_eq!(ids.originals(), &[0, 7, 4_294_967_293]);
        assert_eq!(edges, vec![(1, 2), (0, 1), (2, 0)]);
        assert_eq!(ids.compacted(7), Some(1));
        assert_eq!(ids.compacted(8), None);
        assert_eq!(ids.original(2), 4_294_967_293);
    }

    #[test]
    fn symmetrize_adds_reverses_once_and_keeps_self_loops_single() {
        let mut edges = vec![(0, 1), (1, 0), (2, 2), (3, 1), (0, 1)];
        symmetrize(&mut edges);
        assert_eq!(edges, vec![(0, 1), (1, 0), (1, 3), (2, 2), (3, 1)]);
    }
}
