//! The bulk loader's pure part: edges in, LOAD batches per home server out. No I/O
//! beyond reading the edge file in [`validate_file`]; the client sends the batches.
//!
//! A load reads its file twice. [`validate_file`] visits it once and stops at the first
//! malformed line, so a bad file loads nothing. The second visit feeds each edge to a
//! [`Batcher`], which keeps one buffer per home server (the owner of the vertex's slot in
//! the cluster's slot table; `vertex % machines` for [`Batcher::new`]) and
//! hands back a [`Batch`] as soon as a buffer is full; [`Batcher::finish`] hands back the
//! rest.
//!
//! ```text
//!  edge (s, d) @ line 7 ──▶ directed:   s ─▶ d  into buffer[s % machines]
//!                           undirected: s ─▶ d  into buffer[s % machines]
//!                                       d ─▶ s  into buffer[d % machines]  (s == d: dropped)
//!
//!  buffer[h]: [(v1, [n, n, ..]), (v2, [n, ..]), ..]   neighbours grouped by vertex, in input order
//!             lines first..=last                        the input the batch came from
//!  full (any limit of BatchLimits reached) ──▶ Batch ──▶ Request::Load to server h
//! ```
//!
//! A batch is full when it holds `batch_edges_max` neighbour ids or `batch_vertices_max`
//! vertices, when one of its vertices holds `vertex_ids_max` ids, or when one more
//! vertex with one id would no longer fit in `frame_bytes_max`. So every batch encodes
//! to a frame the server accepts, within the protocol's limits, and is never empty.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::RangeInclusive;
use std::path::Path;

use locus_graph::input::{self, Format, Position, Summary};
use locus_graph::{Edge, GraphError, LoadOptions};

use crate::proto::{
    Request, FRAME_BYTES_MAX, FRAME_BYTES_MIN, HEADER_BYTES, IDS_MAX, LOAD_VERTICES_MAX,
};

/// Neighbour ids in one batch unless configured otherwise.
pub const BATCH_EDGES_DEFAULT: usize = 65_536;

/// Bytes of a LOAD frame with no vertices: header, `deadline_ms`, `vertices` count.
const LOAD_FRAME_EMPTY_BYTES: usize = HEADER_BYTES + 4 + 4;
/// Bytes a vertex adds to a LOAD body: `vertex`, and its `ids` count.
const VERTEX_BYTES: usize = 4 + 4;
/// Bytes a neighbour id adds.
const ID_BYTES: usize = 4;

/// Validates `path` (in `format`, or the detected one) with `opts`: every edge parsed,
/// nothing kept. Returns the edge count and largest id, or the first problem with its
/// line (text) or byte offset (binary). Run before sending anything, so that a
/// malformed file loads nothing.
pub fn validate_file(
    path: impl AsRef<Path>,
    format: Option<Format>,
    opts: &LoadOptions,
) -> Result<Summary, GraphError> {
    Ok(input::visit(path, format, opts, |_, _| {
        Ok::<(), Infallible>(())
    })?)
}

/// How an edge `(src, dst)` of the file becomes adjacency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `src -> dst` only, as given; self loops kept.
    Directed,
    /// `src -> dst` and `dst -> src`; self loops dropped.
    Undirected,
}

/// Limits of one LOAD batch. Defaults: [`BATCH_EDGES_DEFAULT`] ids, and the protocol's
/// own limits for the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Neighbour ids in one batch, `1..=IDS_MAX`.
    pub batch_edges_max: usize,
    /// Vertices in one batch, `1..=LOAD_VERTICES_MAX`.
    pub batch_vertices_max: usize,
    /// Neighbour ids of one vertex in one batch, `1..=IDS_MAX`.
    pub vertex_ids_max: usize,
    /// Bytes of the encoded frame, header included: the connection's frame limit
    /// (from the server's HELLO), `FRAME_BYTES_MIN..=FRAME_BYTES_MAX`.
    pub frame_bytes_max: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            batch_edges_max: BATCH_EDGES_DEFAULT,
            batch_vertices_max: LOAD_VERTICES_MAX,
            vertex_ids_max: IDS_MAX,
            frame_bytes_max: FRAME_BYTES_MAX,
        }
    }
}

/// A load setting out of its range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid load setting `{field}` = {value}: must be {min}..={max}")]
pub struct LimitError {
    /// The setting.
    pub field: &'static str,
    /// Its value.
    pub value: u64,
    /// Smallest allowed value.
    pub min: u64,
    /// Largest allowed value.
    pub max: u64,
}

fn check(field: &'static str, value: usize, min: usize, max: usize) -> Result<(), LimitError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(LimitError {
            field,
            value: value as u64,
            min: min as u64,
            max: max as u64,
        })
    }
}

impl BatchLimits {
    /// Checks every limit against its range, naming the first that is out of it.
    pub fn validate(&self) -> Result<(), LimitError> {
        check("batch_edges_max", self.batch_edges_max, 1, IDS_MAX)?;
        check(
            "batch_vertices_max",
            self.batch_vertices_max,
            1,
            LOAD_VERTICES_MAX,
        )?;
        check("vertex_ids_max", self.vertex_ids_max, 1, IDS_MAX)?;
        check(
            "frame_bytes_max",
            self.frame_bytes_max,
            FRAME_BYTES_MIN,
            FRAME_BYTES_MAX,
        )
    }
}

/// One LOAD batch for one home server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The server every vertex of the batch has as its home.
    pub home: u16,
    /// Vertices and the neighbours to merge into their lists, in input order.
    pub vertices: Vec<(u32, Vec<u32>)>,
    /// Neighbour ids in `vertices`.
    pub ids: usize,
    /// Position of the first input edge that contributed.
    pub first: Position,
    /// Position of the last input edge that contributed.
    pub last: Position,
}

impl Batch {
    /// The part of the input the batch came from. Edges inside the range that went to
    /// other homes are not in this batch.
    pub fn positions(&self) -> RangeInclusive<Position> {
        self.first..=self.last
    }

    /// Bytes of the batch's LOAD frame, header included.
    pub fn frame_bytes(&self) -> usize {
        LOAD_FRAME_EMPTY_BYTES + self.vertices.len() * VERTEX_BYTES + self.ids * ID_BYTES
    }

    /// The LOAD request that carries the batch.
    pub fn into_request(self) -> Request {
        Request::Load {
            vertices: self.vertices,
        }
    }
}

impl fmt::Display for Batch {
    /// `LOAD batch for server 2 from lines 10-500 (3 vertices, 900 edges)`; binary
    /// input names `records at byte offsets 0-96`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LOAD batch for server {} from ", self.home)?;
        match (self.first, self.last) {
            (Position::Line(a), Position::Line(b)) if a == b => write!(f, "line {a}")?,
            (Position::Line(a), Position::Line(b)) => write!(f, "lines {a}-{b}")?,
            (Position::Offset(a), Position::Offset(b)) if a == b => {
                write!(f, "the record at byte offset {a}")?
            }
            (Position::Offset(a), Position::Offset(b)) => {
                write!(f, "records at byte offsets {a}-{b}")?
            }
            (a, b) => write!(f, "{a} to {b}")?,
        }
        write!(f, " ({} vertices, {} edges)", self.vertices.len(), self.ids)
    }
}

/// SplitMix64's finaliser as the hash of a vertex id. The ids of one buffer share
/// their residue mod `machines`, so a plain multiplicative hash would leave its low
/// bits (hashbrown's bucket index) nearly constant; SipHash is more than the user's own
/// file needs and would dominate the cost of an edge.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        let mut z = u64::from(n).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.0 = z ^ (z >> 31);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The batch being filled for one home.
#[derive(Default)]
struct Pending {
    vertices: Vec<(u32, Vec<u32>)>,
    /// Vertex -> its index in `vertices`.
    index: HashMap<u32, usize, BuildHasherDefault<IdHasher>>,
    ids: usize,
    first: Option<Position>,
    last: Option<Position>,
}

impl Pending {
    fn frame_bytes(&self) -> usize {
        LOAD_FRAME_EMPTY_BYTES + self.vertices.len() * VERTEX_BYTES + self.ids * ID_BYTES
    }

    /// Empties the buffer into a batch; `None` if it holds nothing.
    fn take(&mut self, home: u16) -> Option<Batch> {
        let (first, last) = (self.first.take()?, self.last.take()?);
        self.index.clear();
        let batch = Batch {
            home,
            vertices: std::mem::take(&mut self.vertices),
            ids: std::mem::replace(&mut self.ids, 0),
            first,
            last,
        };
        debug_assert!(batch.ids > 0 && batch.vertices.iter().all(|(_, n)| !n.is_empty()));
        Some(batch)
    }
}

/// Counts of what a [`Batcher`] has seen and handed back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatcherStats {
    /// Edges pushed.
    pub edges: u64,
    /// Self loops dropped (undirected only).
    pub self_loops_dropped: u64,
    /// Neighbour ids handed back in batches.
    pub ids_emitted: u64,
    /// Batches handed back.
    pub batches: u64,
}

/// Turns input edges into LOAD batches per home server; see the module doc.
///
/// Memory is bounded by `machines` buffers of at most one batch each.
pub struct Batcher {
    machines: u16,
    /// Each slot's owner; a vertex's slot is `vertex % owners.len()`.
    owners: Vec<u8>,
    direction: Direction,
    limits: BatchLimits,
    pending: Vec<Pending>,
    stats: BatcherStats,
}

impl Batcher {
    /// A batcher for a cluster of `machines` servers (at least 1) homing
    /// `vertex` at `vertex % machines`.
    pub fn new(
        machines: u16,
        direction: Direction,
        limits: BatchLimits,
    ) -> Result<Batcher, LimitError> {
        check("machines", machines.into(), 1, u16::MAX.into())?;
        Batcher::with_owners(
            machines,
            (0..machines).map(|m| m as u8).collect(),
            direction,
            limits,
        )
    }

    /// A batcher for a cluster placing vertices by `table` (homes are the
    /// slots' owners).
    pub fn with_table(
        table: &locus_placement::slots::SlotTable,
        direction: Direction,
        limits: BatchLimits,
    ) -> Result<Batcher, LimitError> {
        Batcher::with_owners(table.machines(), table.owners().to_vec(), direction, limits)
    }

    fn with_owners(
        machines: u16,
        owners: Vec<u8>,
        direction: Direction,
        limits: BatchLimits,
    ) -> Result<Batcher, LimitError> {
        limits.validate()?;
        Ok(Batcher {
            machines,
            owners,
            direction,
            limits,
            pending: (0..machines).map(|_| Pending::default()).collect(),
            stats: BatcherStats::default(),
        })
    }

    /// The home server of `vertex`.
    pub fn home(&self, vertex: u32) -> u16 {
        u16::from(self.owners[(vertex % self.owners.len() as u32) as usize])
    }

    /// Adds the edge found at `at` (positions never decrease: push in file order);
    /// returns the batches it filled (none, one, or in undirected mode two), which the
    /// caller must send.
    #[must_use = "the returned batches are full and will not be emitted again"]
    pub fn push(&mut self, (src, dst): Edge, at: Position) -> Vec<Batch> {
        self.stats.edges += 1;
        let mut out = Vec::new();
        match self.direction {
            Direction::Directed => out.extend(self.add(src, dst, at)),
            Direction::Undirected if src == dst => self.stats.self_loops_dropped += 1,
            Direction::Undirected => {
                out.extend(self.add(src, dst, at));
                out.extend(self.add(dst, src, at));
            }
        }
        out
    }

    /// Hands back every partly filled batch, in home order.
    #[must_use = "the returned batches are the rest of the load"]
    pub fn finish(mut self) -> Vec<Batch> {
        let mut out = Vec::new();
        for home in 0..self.machines {
            if let Some(batch) = self.pending[usize::from(home)].take(home) {
                self.count(&batch);
                out.push(batch);
            }
        }
        out
    }

    /// What has been pushed and handed back so far.
    pub fn stats(&self) -> BatcherStats {
        self.stats
    }

    /// Neighbour ids buffered and not yet handed back.
    pub fn pending_ids(&self) -> usize {
        self.pending.iter().map(|p| p.ids).sum()
    }

    /// Appends `neighbor` to `vertex`'s list in its home's buffer; the batch if that
    /// made the buffer full.
    fn add(&mut self, vertex: u32, neighbor: u32, at: Position) -> Option<Batch> {
        let home = self.home(vertex);
        let limits = self.limits;
        let p = &mut self.pending[usize::from(home)];
        let i = *p.index.entry(vertex).or_insert_with(|| {
            p.vertices.push((vertex, Vec::new()));
            p.vertices.len() - 1
        });
        let list = &mut p.vertices[i].1;
        list.push(neighbor);
        let list_full = list.len() >= limits.vertex_ids_max;
        p.ids += 1;
        p.first.get_or_insert(at);
        debug_assert!(
            !matches!(p.last, Some(last) if last > at),
            "positions go forward"
        );
        p.last = Some(at);
        // Full when any limit is reached, or when the largest next addition (a new
        // vertex with one id) would not fit the frame: so no limit is ever exceeded.
        let full = list_full
            || p.ids >= limits.batch_edges_max
            || p.vertices.len() >= limits.batch_vertices_max
            || p.frame_bytes() + VERTEX_BYTES + ID_BYTES > limits.frame_bytes_max;
        if !full {
            return None;
        }
        let batch = p.take(home)?;
        debug_assert!(batch.frame_bytes() <= limits.frame_bytes_max);
        self.count(&batch);
        Some(batch)
    }

    fn count(&mut self, batch: &Batch) {
        self.stats.ids_emitted += batch.ids as u64;
        self.stats.batches += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Header, HEADER_BYTES};
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn limits(batch_edges_max: usize) -> BatchLimits {
        BatchLimits {
            batch_edges_max,
            ..BatchLimits::default()
        }
    }

    /// Pushes `edges` at lines 1, 2, ...; every batch in emission order.
    fn run(batcher: Batcher, edges: &[Edge]) -> Vec<Batch> {
        let mut batcher = batcher;
        let mut out = Vec::new();
        for (i, &e) in edges.iter().enumerate() {
            out.extend(batcher.push(e, Position::Line(i as u64 + 1)));
        }
        out.extend(batcher.finish());
        out
    }

    /// Every (vertex, neighbour) pair of `batches`, sorted.
    fn pairs(batches: &[Batch]) -> Vec<(u32, u32)> {
        let mut all: Vec<(u32, u32)> = batches
            .iter()
            .flat_map(|b| {
                b.vertices
                    .iter()
                    .flat_map(|(v, ns)| ns.iter().map(move |&n| (*v, n)))
            })
            .collect();
        all.sort_unstable();
        all
    }

    /// The pairs a load of `edges` must produce: the reference the batches are checked against.
    fn reference(edges: &[Edge], direction: Direction) -> Vec<(u32, u32)> {
        let mut all = Vec::new();
        for &(s, d) in edges {
            match direction {
                Direction::Directed => all.push((s, d)),
                Direction::Undirected if s == d => {}
                Direction::Undirected => all.extend([(s, d), (d, s)]),
            }
        }
        all.sort_unstable();
        all
    }

    /// Checks the invariants every batch keeps.
    fn check_batch(b: &Batch, machines: u16, l: &BatchLimits) {
        assert!(b.ids > 0 && !b.vertices.is_empty(), "no empty batch");
        assert_eq!(
            b.ids,
            b.vertices.iter().map(|(_, n)| n.len()).sum::<usize>()
        );
        assert!(b.ids <= l.batch_edges_max, "{} ids", b.ids);
        assert!(b.vertices.len() <= l.batch_vertices_max);
        let mut seen = std::collections::HashSet::new();
        for (v, ns) in &b.vertices {
            assert_eq!(*v % u32::from(machines), u32::from(b.home), "vertex {v}");
            assert!(seen.insert(*v), "vertex {v} listed twice in one batch");
            assert!(!ns.is_empty() && ns.len() <= l.vertex_ids_max);
        }
        assert!(b.first <= b.last);
        let mut frame = Vec::new();
        b.clone().into_request().encode(&mut frame, 1, 1000);
        assert_eq!(frame.len(), b.frame_bytes());
        assert!(frame.len() <= l.frame_bytes_max, "{} bytes", frame.len());
        let header = Header::parse(
            frame[..HEADER_BYTES].try_into().expect("16 bytes"),
            l.frame_bytes_max,
        )
        .expect("the frame fits its limit");
        let (_, decoded) =
            Request::decode(header.op, &frame[HEADER_BYTES..]).expect("a valid LOAD");
        assert_eq!(decoded, b.clone().into_request());
    }

    #[test]
    fn vertices_go_to_their_home_and_neighbours_are_grouped_in_order() {
        let b = Batcher::new(3, Direction::Directed, BatchLimits::default()).expect("valid");
        let batches = run(b, &[(0, 5), (4, 1), (3, 9), (0, 7), (1, 2), (3, 8), (0, 5)]);
        let homes: Vec<u16> = batches.iter().map(|b| b.home).collect();
        assert_eq!(
            homes,
            vec![0, 1],
            "finish hands back in home order, none empty"
        );
        assert_eq!(
            batches[0].vertices,
            vec![(0, vec![5, 7, 5]), (3, vec![9, 8])],
            "duplicates kept: the server skips them"
        );
        assert_eq!(batches[1].vertices, vec![(4, vec![1]), (1, vec![2])]);
        assert_eq!(
            batches[0].positions(),
            Position::Line(1)..=Position::Line(7)
        );
        assert_eq!(
            batches[1].positions(),
            Position::Line(2)..=Position::Line(5)
        );
    }

    #[test]
    fn undirected_adds_both_directions_and_drops_self_loops() {
        let mut b = Batcher::new(2, Direction::Undirected, BatchLimits::default()).expect("valid");
        for (i, e) in [(1, 2), (3, 3), (4, 1)].into_iter().enumerate() {
            assert!(b.push(e, Position::Line(i as u64 + 1)).is_empty());
        }
        let stats = b.stats();
        let batches = b.finish();
        assert_eq!(batches[0].vertices, vec![(2, vec![1]), (4, vec![1])]);
        assert_eq!(batches[1].vertices, vec![(1, vec![2, 4])]);
        assert_eq!(stats.edges, 3);
        assert_eq!(stats.self_loops_dropped, 1);
        assert_eq!(
            batches[0].positions(),
            Position::Line(1)..=Position::Line(3)
        );
    }

    #[test]
    fn directed_keeps_self_loops_and_one_direction() {
        let b = Batcher::new(2, Direction::Directed, BatchLimits::default()).expect("valid");
        let batches = run(b, &[(1, 2), (3, 3)]);
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].vertices, vec![(1, vec![2]), (3, vec![3])]);
    }

    #[test]
    fn a_full_buffer_is_handed_back_by_the_push_that_filled_it() {
        let mut b = Batcher::new(2, Direction::Directed, limits(3)).expect("valid");
        assert!(b.push((0, 1), Position::Line(1)).is_empty());
        assert!(b.push((1, 1), Position::Line(2)).is_empty());
        assert!(b.push((2, 1), Position::Line(3)).is_empty());
        let full = b.push((0, 9), Position::Line(4));
        assert_eq!(full.len(), 1);
        assert_eq!(full[0].home, 0);
        assert_eq!(full[0].vertices, vec![(0, vec![1, 9]), (2, vec![1])]);
        assert_eq!(full[0].positions(), Position::Line(1)..=Position::Line(4));
        assert_eq!(b.pending_ids(), 1);
        // The next batch of home 0 starts at the next edge's line.
        assert!(b.push((4, 4), Position::Line(5)).is_empty());
        let rest = b.finish();
        assert_eq!(rest.len(), 2);
        assert_eq!(rest[0].positions(), Position::Line(5)..=Position::Line(5));
        assert_eq!(rest[1].positions(), Position::Line(2)..=Position::Line(2));
    }

    #[test]
    fn undirected_push_can_fill_two_homes_at_once() {
        let mut b = Batcher::new(2, Direction::Undirected, limits(1)).expect("valid");
        let out = b.push((2, 3), Position::Offset(16));
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].home, out[1].home), (0, 1));
        assert!(out
            .iter()
            .all(|b| b.positions() == (Position::Offset(16)..=Position::Offset(16))));
        assert!(b.finish().is_empty());
    }

    #[test]
    fn tiny_limits_are_respected() {
        let machines = 3;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let edges: Vec<Edge> = (0..2000)
            .map(|_| (rng.gen_range(0..20), rng.gen_range(0..50)))
            .collect();
        for l in [
            BatchLimits {
                batch_edges_max: 5,
                ..BatchLimits::default()
            },
            BatchLimits {
                batch_vertices_max: 2,
                ..BatchLimits::default()
            },
            BatchLimits {
                vertex_ids_max: 3,
                ..BatchLimits::default()
            },
            BatchLimits {
                frame_bytes_max: FRAME_BYTES_MIN,
                ..BatchLimits::default()
            },
            BatchLimits {
                batch_edges_max: 1,
                batch_vertices_max: 1,
                vertex_ids_max: 1,
                frame_bytes_max: FRAME_BYTES_MIN,
            },
        ] {
            for direction in [Direction::Directed, Direction::Undirected] {
                let batches = run(Batcher::new(machines, direction, l).expect("valid"), &edges);
                for b in &batches {
                    check_batch(b, machines, &l);
                }
                assert_eq!(pairs(&batches), reference(&edges, direction), "{l:?}");
            }
        }
        // The frame limit alone decides: a batch leaves once a new vertex with one id
        // might not fit, so a 4 KiB frame of one vertex carries 1014 ids (4088 bytes).
        let l = BatchLimits {
            frame_bytes_max: FRAME_BYTES_MIN,
            ..BatchLimits::default()
        };
        let star: Vec<Edge> = (0..5000).map(|i| (0, i)).collect();
        let batches = run(
            Batcher::new(1, Direction::Directed, l).expect("valid"),
            &star,
        );
        assert_eq!(batches[0].ids, 1014);
        assert!(batches[0].frame_bytes() <= FRAME_BYTES_MIN);
        assert!(batches[0].frame_bytes() + VERTEX_BYTES + ID_BYTES > FRAME_BYTES_MIN);
    }

    #[test]
    fn every_edge_is_emitted_exactly_once_with_its_position() {
        // Model: the multiset of (vertex, neighbour) pairs equals the reference, and
        // each pair's line lies within its batch's range.
        for seed in 0..40u64 {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let machines = rng.gen_range(1..=9u16);
            let n = rng.gen_range(1..600);
            let id_max = rng.gen_range(1..200u32);
            let edges: Vec<Edge> = (0..n)
                .map(|_| (rng.gen_range(0..=id_max), rng.gen_range(0..=id_max)))
                .collect();
            let l = BatchLimits {
                batch_edges_max: rng.gen_range(1..64),
                batch_vertices_max: rng.gen_range(1..16),
                vertex_ids_max: rng.gen_range(1..8),
                frame_bytes_max: FRAME_BYTES_MAX,
            };
            let direction = if rng.gen() {
                Direction::Directed
            } else {
                Direction::Undirected
            };
            let batches = run(Batcher::new(machines, direction, l).expect("valid"), &edges);
            for b in &batches {
                check_batch(b, machines, &l);
                for (v, ns) in &b.vertices {
                    for &u in ns {
                        let in_range = (b.first.get()..=b.last.get()).any(|line| {
                            let (s, d) = edges[line as usize - 1];
                            (s, d) == (*v, u)
                                || (direction == Direction::Undirected && (d, s) == (*v, u))
                        });
                        assert!(in_range, "seed {seed}: ({v}, {u}) not from {b}");
                    }
                }
            }
            assert_eq!(
                pairs(&batches),
                reference(&edges, direction),
                "seed {seed}: {machines} machines, {direction:?}, {l:?}"
            );
            let emitted: u64 = batches.iter().map(|b| b.ids as u64).sum();
            assert_eq!(emitted, reference(&edges, direction).len() as u64);
        }
    }

    #[test]
    fn stats_count_edges_and_batches() {
        let mut b = Batcher::new(2, Direction::Undirected, limits(2)).expect("valid");
        let mut batches = Vec::new();
        for (i, e) in [(0, 2), (1, 1), (2, 4), (3, 5)].into_iter().enumerate() {
            batches.extend(b.push(e, Position::Line(i as u64 + 1)));
        }
        let before = b.stats();
        assert_eq!(before.edges, 4);
        assert_eq!(before.self_loops_dropped, 1);
        assert_eq!(before.batches, batches.len() as u64);
        assert_eq!(
            before.ids_emitted + b.pending_ids() as u64,
            6,
            "three edges, both ways"
        );
    }

    #[test]
    fn limits_out_of_range_name_the_setting() {
        let bad = |l: BatchLimits| Batcher::new(1, Direction::Directed, l).err();
        assert_eq!(bad(limits(0)).map(|e| e.field), Some("batch_edges_max"));
        assert_eq!(
            bad(BatchLimits {
                batch_vertices_max: LOAD_VERTICES_MAX + 1,
                ..BatchLimits::default()
            })
            .map(|e| e.field),
            Some("batch_vertices_max")
        );
        assert_eq!(
            bad(BatchLimits {
                vertex_ids_max: 0,
                ..BatchLimits::default()
            })
            .map(|e| e.field),
            Some("vertex_ids_max")
        );
        let e = bad(BatchLimits {
            frame_bytes_max: 100,
            ..BatchLimits::default()
        })
        .expect("too small");
        assert_eq!(
            e.to_string(),
            format!("invalid load setting `frame_bytes_max` = 100: must be {FRAME_BYTES_MIN}..={FRAME_BYTES_MAX}")
        );
        let e = Batcher::new(0, Direction::Directed, BatchLimits::default()).err();
        assert_eq!(e.map(|e| e.field), Some("machines"));
    }

    #[test]
    fn a_batch_names_the_input_it_came_from() {
        let mut b = Batch {
            home: 2,
            vertices: vec![(2, vec![1, 3])],
            ids: 2,
            first: Position::Line(10),
            last: Position::Line(500),
        };
        assert_eq!(
            b.to_string(),
            "LOAD batch for server 2 from lines 10-500 (1 vertices, 2 edges)"
        );
        b.last = Position::Line(10);
        assert!(b.to_string().contains("from line 10 ("));
        b.first = Position::Offset(0);
        b.last = Position::Offset(96);
        assert!(b
            .to_string()
            .contains("from records at byte offsets 0-96 ("));
    }

    #[test]
    fn validate_file_counts_or_names_the_first_bad_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("good.txt");
        std::fs::write(&good, "# g\n1 2\n2 30\n").expect("write");
        let summary = validate_file(&good, None, &LoadOptions::default()).expect("valid");
        assert_eq!((summary.edges, summary.id_max), (2, 30));

        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "1 2\n2 x\n3 4\n5\n").expect("write");
        let err = validate_file(&bad, None, &LoadOptions::default()).expect_err("malformed");
        assert!(
            matches!(err, GraphError::MalformedLine { line: 2, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("bad.txt:2:"), "{err}");

        let bin = dir.path().join("g.bin");
        std::fs::write(&bin, [1u8, 0, 0, 0, 2, 0, 0, 0, 9]).expect("write");
        let err = validate_file(&bin, None, &LoadOptions::default()).expect_err("truncated");
        assert!(
            matches!(err, GraphError::TruncatedRecord { offset: 8, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn id_hash_spreads_ids_of_one_residue() {
        // Ids of one home share their residue; their hashes must not share low bits.
        let low_bits: std::collections::HashSet<u64> = (0..1024u32)
            .map(|i| {
                let mut h = IdHasher::default();
                h.write_u32(i * 64 + 5);
                h.finish() & 0xff
            })
            .collect();
        assert!(low_bits.len() > 200, "{} distinct", low_bits.len());
    }
}
