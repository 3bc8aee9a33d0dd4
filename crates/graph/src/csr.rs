//! Compressed sparse row adjacency, built in two passes over an [`EdgeSource`].
//!
//! (Slightly over 800 lines: the whole-graph, ranged and from-degrees
//! builders share the fill, sort and compact steps, and their tests need the
//! private ones.)
//!
//! ```text
//!   offsets: [0, 2, 2, 5]          (vertex_count + 1 entries, offsets[n] = edge count)
//!   targets: [1, 2 | | 0, 1, 2]    neighbors(v) = targets[offsets[v] .. offsets[v + 1]]
//! ```
//!
//! Pass one counts degrees with atomic increments; a prefix sum turns the counts into
//! offsets; pass two visits the source again and drops every target into its slot.
//! Visiting twice instead of buffering means an R-MAT graph is regenerated, never
//! stored as an edge list: peak memory is the CSR plus one cursor per vertex.
//! Every adjacency list is then sorted (in parallel over vertex ranges), so the result
//! is the same for any thread count; with `dedup` duplicates are removed too.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::input::EdgeList;
use crate::progress::{self, Unit};
use crate::rmat::Rmat;
use crate::{Edge, VertexId, VERTEX_COUNT_MAX};

/// Edges per work item when a slice is visited in parallel.
const SLICE_EDGES_PER_CHUNK: usize = 1 << 16;

/// Something that can hand its edges to the CSR builder, possibly more than once.
pub trait EdgeSource: Sync {
    /// How many edges one visit yields (used for progress).
    fn edge_count(&self) -> u64;

    /// Calls `f` on every edge exactly once, in chunks, from up to `threads` threads.
    /// Every visit must yield the same multiset of edges.
    fn visit_chunks(&self, threads: usize, f: &(dyn Fn(&[Edge]) + Sync));
}

impl EdgeSource for [Edge] {
    fn edge_count(&self) -> u64 {
        self.len() as u64
    }

    fn visit_chunks(&self, threads: usize, f: &(dyn Fn(&[Edge]) + Sync)) {
        let chunks = self.len().div_ceil(SLICE_EDGES_PER_CHUNK);
        let threads = crate::clamp_threads(threads).min(chunks.max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= chunks {
                break;
            }
            let start = k * SLICE_EDGES_PER_CHUNK;
            let end = (start + SLICE_EDGES_PER_CHUNK).min(self.len());
            f(&self[start..end]);
        };
        if threads == 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(work);
                }
            });
        }
    }
}

impl EdgeSource for Vec<Edge> {
    fn edge_count(&self) -> u64 {
        self.as_slice().edge_count()
    }

    fn visit_chunks(&self, threads: usize, f: &(dyn Fn(&[Edge]) + Sync)) {
        self.as_slice().visit_chunks(threads, f)
    }
}

impl EdgeSource for EdgeList {
    fn edge_count(&self) -> u64 {
        self.edges.edge_count()
    }

    fn visit_chunks(&self, threads: usize, f: &(dyn Fn(&[Edge]) + Sync)) {
        self.edges.visit_chunks(threads, f)
    }
}

impl EdgeSource for Rmat {
    fn edge_count(&self) -> u64 {
        Rmat::edge_count(self)
    }

    fn visit_chunks(&self, threads: usize, f: &(dyn Fn(&[Edge]) + Sync)) {
        self.for_each_chunk(threads, |_, edges| f(edges))
    }
}

/// How edges become adjacency entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CsrOptions {
    /// Also store `dst -> src` for every `src -> dst`. A self loop is stored once.
    pub symmetrize: bool,
    /// Remove repeated targets from each adjacency list.
    pub dedup: bool,
    /// Skip edges `v -> v`.
    pub drop_self_loops: bool,
}

impl Default for CsrOptions {
    /// The store's default: an undirected simple graph (all three options on).
    fn default() -> Self {
        CsrOptions {
            symmetrize: true,
            dedup: true,
            drop_self_loops: true,
        }
    }
}

impl CsrOptions {
    /// Edges exactly as given: directed, duplicates and self loops kept.
    pub const RAW: CsrOptions = CsrOptions {
        symmetrize: false,
        dedup: false,
        drop_self_loops: false,
    };
}

/// Adjacency lists of a graph with vertices `0..vertex_count`, each list sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csr {
    offsets: Vec<u64>,
    targets: Vec<VertexId>,
    max_degree: u64,
}

impl Csr {
    /// Builds the CSR of `source` on vertices `0..vertex_count`, using every core.
    pub fn build<S: EdgeSource + ?Sized>(
        vertex_count: u64,
        opts: CsrOptions,
        source: &S,
    ) -> Result<Csr> {
        Self::build_with_threads(vertex_count, opts, source, crate::default_threads())
    }

    /// Builds the CSR of an R-MAT graph by generating its edges twice.
    pub fn from_rmat(rmat: &Rmat, opts: CsrOptions) -> Result<Csr> {
        Self::build(rmat.vertex_count(), opts, rmat)
    }

    /// Builds the CSR of a loaded edge list on its own vertex count.
    pub fn from_edge_list(list: &EdgeList, opts: CsrOptions) -> Result<Csr> {
        Self::build(list.vertex_count, opts, list)
    }

    /// Like [`Csr::build`] with an explicit thread count; the result does not depend on it.
    pub fn build_with_threads<S: EdgeSource + ?Sized>(
        vertex_count: u64,
        opts: CsrOptions,
        source: &S,
        threads: usize,
    ) -> Result<Csr> {
        let csr = Self::build_range(vertex_count, opts, source, 0..vertex_count, threads)?;
        debug_assert!(csr.check_invariants());
        Ok(csr)
    }

    /// The lists of the vertices in `range` only, in the same two passes over
    /// the whole `source` (edges whose endpoint of interest lies outside the
    /// range are skipped): entry `i` of the result is vertex `range.start + i`,
    /// and targets keep their ids in `0..vertex_count`. Memory is proportional
    /// to the range's entries, so a graph too large for one CSR can be built
    /// and consumed a range at a time ([`raw_degrees`] says how to cut it).
    pub fn build_range<S: EdgeSource + ?Sized>(
        vertex_count: u64,
        opts: CsrOptions,
        source: &S,
        range: std::ops::Range<u64>,
        threads: usize,
    ) -> Result<Csr> {
        if vertex_count > VERTEX_COUNT_MAX {
            return Err(GraphError::TooManyVertices {
                vertex_count,
                vertex_count_max: VERTEX_COUNT_MAX,
            });
        }
        assert!(
            range.start <= range.end && range.end <= vertex_count,
            "range {range:?} not within 0..{vertex_count}"
        );
        let threads = crate::clamp_threads(threads);
        let n = vertex_count as usize;
        let (lo, len) = (range.start as usize, (range.end - range.start) as usize);
        // The local index of `u`, if `u` is in the range.
        let local = |u: VertexId| (u as usize).checked_sub(lo).filter(|&i| i < len);
        let pb = progress::bar(
            source.edge_count().saturating_mul(2),
            Unit::Edges,
            "building CSR",
        );

        // Pass 1: degrees.
        let degrees: Vec<AtomicU64> = crate::huge::atomic_u64(len + 1);
        let bad_edge: Mutex<Option<Edge>> = Mutex::new(None);
        source.visit_chunks(threads, &|chunk| {
            for &(u, v) in chunk {
                if u as usize >= n || v as usize >= n {
                    let mut slot = bad_edge.lock().unwrap_or_else(|e| e.into_inner());
                    slot.get_or_insert((u, v));
                    continue;
                }
                if u == v && opts.drop_self_loops {
                    continue;
                }
                if let Some(i) = local(u) {
                    degrees[i].fetch_add(1, Ordering::Relaxed);
                }
                if opts.symmetrize && u != v {
                    if let Some(i) = local(v) {
                        degrees[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            pb.inc(chunk.len() as u64);
        });
        if let Some((src, dst)) = bad_edge.into_inner().unwrap_or_else(|e| e.into_inner()) {
            pb.finish_and_clear();
            return Err(GraphError::EdgeOutOfRange {
                src,
                dst,
                vertex_count,
            });
        }

        let degrees: Vec<u64> = degrees.into_iter().map(AtomicU64::into_inner).collect();
        Self::fill_range(vertex_count, opts, source, lo, degrees, threads, &pb)
    }

    /// [`Csr::build_range`] with every vertex's raw degree already counted by
    /// [`raw_degrees`] with the same `opts`: the degree pass is skipped, so the
    /// range costs one pass over `source` instead of two. Memory: 4 bytes per
    /// raw entry of the range plus 16 per vertex. Fails with
    /// [`GraphError::UnstableSource`] if `source` does not give the degrees
    /// counted.
    pub fn build_range_from_degrees<S: EdgeSource + ?Sized>(
        vertex_count: u64,
        opts: CsrOptions,
        source: &S,
        range: std::ops::Range<u64>,
        raw_degrees: &[u32],
        threads: usize,
    ) -> Result<Csr> {
        if vertex_count > VERTEX_COUNT_MAX {
            return Err(GraphError::TooManyVertices {
                vertex_count,
                vertex_count_max: VERTEX_COUNT_MAX,
            });
        }
        assert!(
            range.start <= range.end
                && range.end <= vertex_count
                && raw_degrees.len() as u64 == vertex_count,
            "range {range:?} not within 0..{vertex_count}, or {} degrees",
            raw_degrees.len()
        );
        // A saturated degree is not the true count: refuse rather than fill wrong.
        let (lo, hi) = (range.start as usize, range.end as usize);
        if raw_degrees[lo..hi].contains(&u32::MAX) {
            return Err(GraphError::UnstableSource);
        }
        let pb = progress::bar(source.edge_count(), Unit::Edges, "building lists");
        let mut degrees: Vec<u64> = raw_degrees[lo..hi].iter().map(|&d| u64::from(d)).collect();
        degrees.push(0);
        Self::fill_range(
            vertex_count,
            opts,
            source,
            lo,
            degrees,
            crate::clamp_threads(threads),
            &pb,
        )
    }

    /// The second half of [`Csr::build_range`]: `degrees` holds the range's
    /// raw degrees and one extra slot (it becomes the offsets); one pass over
    /// `source` fills the lists, which are then sorted, deduplicated and
    /// compacted as `opts` says.
    fn fill_range<S: EdgeSource + ?Sized>(
        vertex_count: u64,
        opts: CsrOptions,
        source: &S,
        lo: usize,
        degrees: Vec<u64>,
        threads: usize,
        pb: &indicatif::ProgressBar,
    ) -> Result<Csr> {
        let n = vertex_count as usize;
        let len = degrees.len() - 1;
        let local = |u: VertexId| (u as usize).checked_sub(lo).filter(|&i| i < len);
        // Exclusive prefix sum in place.
        let mut offsets = degrees;
        let mut total = 0u64;
        for slot in offsets.iter_mut() {
            let degree = *slot;
            *slot = total;
            total += degree;
        }
        let entries = usize::try_from(total).map_err(|_| GraphError::TooManyVertices {
            vertex_count,
            vertex_count_max: VERTEX_COUNT_MAX,
        })?;

        // Pass 2: fill. Each vertex owns targets[offsets[v]..offsets[v + 1]]; a cursor
        // per vertex hands out its slots.
        let targets: Vec<AtomicU32> = crate::huge::atomic_u32(entries);
        let cursors: Vec<AtomicU64> = crate::huge::atomic_u64(len);
        for (c, &o) in cursors.iter().zip(&offsets[..len]) {
            c.store(o, Ordering::Relaxed);
        }
        let unstable = AtomicBool::new(false);
        source.visit_chunks(threads, &|chunk| {
            // Claim every slot of the chunk first, then store. A locked fetch_add waits
            // for all earlier stores to drain, so interleaving claims with stores that
            // miss the cache serialises the misses; batching lets the stores overlap.
            let mut claims: Vec<(u64, VertexId)> = Vec::with_capacity(2 * chunk.len());
            let mut claim = |u: VertexId, v: VertexId| {
                let Some(i) = local(u) else { return };
                let pos = cursors[i].fetch_add(1, Ordering::Relaxed);
                if pos < offsets[i + 1] {
                    claims.push((pos, v));
                } else {
                    unstable.store(true, Ordering::Relaxed);
                }
            };
            for &(u, v) in chunk {
                if u as usize >= n || v as usize >= n {
                    unstable.store(true, Ordering::Relaxed);
                    continue;
                }
                if u == v && opts.drop_self_loops {
                    continue;
                }
                claim(u, v);
                if opts.symmetrize && u != v {
                    claim(v, u);
                }
            }
            for &(pos, v) in &claims {
                targets[pos as usize].store(v, Ordering::Relaxed);
            }
            pb.inc(chunk.len() as u64);
        });
        pb.finish_and_clear();
        let filled = cursors
            .iter()
            .zip(&offsets[1..])
            .all(|(c, &end)| c.load(Ordering::Relaxed) == end);
        if unstable.into_inner() || !filled {
            return Err(GraphError::UnstableSource);
        }
        drop(cursors);
        let mut targets: Vec<VertexId> = targets.into_iter().map(AtomicU32::into_inner).collect();

        let new_lengths = sort_lists(&offsets, &mut targets, opts.dedup, threads);
        if let Some(lengths) = new_lengths {
            compact(&mut offsets, &mut targets, &lengths);
        }
        let max_degree = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        Ok(Csr {
            offsets,
            targets,
            max_degree,
        })
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> u64 {
        (self.offsets.len() - 1) as u64
    }

    /// Number of adjacency entries (a symmetrized edge counts twice, a self loop once).
    pub fn edge_count(&self) -> u64 {
        self.targets.len() as u64
    }

    /// Out-degree of `v`; panics if `v >= vertex_count()`.
    #[inline]
    pub fn degree(&self, v: VertexId) -> u64 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }

    /// The sorted adjacency list of `v`; panics if `v >= vertex_count()`.
    #[inline]
    pub fn neighbors(&self, v: VertexId) -> &[VertexId] {
        let start = self.offsets[v as usize] as usize;
        let end = self.offsets[v as usize + 1] as usize;
        &self.targets[start..end]
    }

    /// The largest degree (0 for a graph without edges).
    pub fn max_degree(&self) -> u64 {
        self.max_degree
    }

    /// The offsets array: `vertex_count() + 1` entries, non-decreasing, last = edge count.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// All adjacency lists back to back.
    pub fn targets(&self) -> &[VertexId] {
        &self.targets
    }

    /// Gives up the arrays: `(offsets, targets)`.
    pub fn into_parts(self) -> (Vec<u64>, Vec<VertexId>) {
        (self.offsets, self.targets)
    }

    fn check_invariants(&self) -> bool {
        let n = self.vertex_count();
        self.offsets.first() == Some(&0)
            && self.offsets.last() == Some(&(self.targets.len() as u64))
            && self.offsets.windows(2).all(|w| w[0] <= w[1])
            && self.targets.iter().all(|&t| u64::from(t) < n)
    }
}

/// Each vertex's list length before deduplication (self loops already
/// dropped if `opts` drops them), in one pass over `source`: an upper bound
/// on its final degree (equal without dedup), zero exactly when the vertex
/// will have no list. 4 bytes per vertex; lengths saturate at `u32::MAX`.
pub fn raw_degrees<S: EdgeSource + ?Sized>(
    vertex_count: u64,
    opts: CsrOptions,
    source: &S,
    threads: usize,
) -> Result<Vec<u32>> {
    if vertex_count > VERTEX_COUNT_MAX {
        return Err(GraphError::TooManyVertices {
            vertex_count,
            vertex_count_max: VERTEX_COUNT_MAX,
        });
    }
    let n = vertex_count as usize;
    let degrees: Vec<AtomicU32> = crate::huge::atomic_u32(n);
    let bad_edge: Mutex<Option<Edge>> = Mutex::new(None);
    let pb = progress::bar(source.edge_count(), Unit::Edges, "counting degrees");
    let bump = |d: &AtomicU32| {
        let _ = d.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| x.checked_add(1));
    };
    source.visit_chunks(crate::clamp_threads(threads), &|chunk| {
        for &(u, v) in chunk {
            if u as usize >= n || v as usize >= n {
                let mut slot = bad_edge.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert((u, v));
                continue;
            }
            if u == v && opts.drop_self_loops {
                continue;
            }
            bump(&degrees[u as usize]);
            if opts.symmetrize && u != v {
                bump(&degrees[v as usize]);
            }
        }
        pb.inc(chunk.len() as u64);
    });
    pb.finish_and_clear();
    if let Some((src, dst)) = bad_edge.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(GraphError::EdgeOutOfRange {
            src,
            dst,
            vertex_count,
        });
    }
    Ok(degrees.into_iter().map(AtomicU32::into_inner).collect())
}

/// The sorted lists (as [`Csr`] would build them with `opts`) of just
/// `vertices`, in one pass over `source`: a bitmap of the wanted vertices
/// (one bit per vertex) filters the edges, so the memory is that of the
/// wanted lists. Vertices without edges map to empty lists.
pub fn lists_of<S: EdgeSource + ?Sized>(
    vertex_count: u64,
    opts: CsrOptions,
    source: &S,
    vertices: &[VertexId],
    threads: usize,
) -> Result<std::collections::HashMap<VertexId, Vec<VertexId>>> {
    let n = vertex_count as usize;
    let mut wanted = vec![0u64; n.div_ceil(64)];
    for &v in vertices {
        if v as usize >= n {
            return Err(GraphError::EdgeOutOfRange {
                src: v,
                dst: v,
                vertex_count,
            });
        }
        wanted[v as usize / 64] |= 1 << (v % 64);
    }
    let is_wanted = |v: VertexId| (v as usize) < n && wanted[v as usize / 64] >> (v % 64) & 1 == 1;
    let found: Mutex<Vec<Edge>> = Mutex::new(Vec::new());
    let pb = progress::bar(source.edge_count(), Unit::Edges, "reading start lists");
    source.visit_chunks(crate::clamp_threads(threads), &|chunk| {
        let mut mine = Vec::new();
        for &(u, v) in chunk {
            if u == v && opts.drop_self_loops {
                continue;
            }
            if is_wanted(u) {
                mine.push((u, v));
            }
            if opts.symmetrize && u != v && is_wanted(v) {
                mine.push((v, u));
            }
        }
        if !mine.is_empty() {
            found.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
        }
        pb.inc(chunk.len() as u64);
    });
    pb.finish_and_clear();
    let mut pairs = found.into_inner().unwrap_or_else(|e| e.into_inner());
    pairs.sort_unstable();
    if opts.dedup {
        pairs.dedup();
    }
    let mut lists: std::collections::HashMap<VertexId, Vec<VertexId>> =
        vertices.iter().map(|&v| (v, Vec::new())).collect();
    for (u, v) in pairs {
        lists.get_mut(&u).expect("only wanted vertices").push(v);
    }
    Ok(lists)
}

/// Cuts `0..degrees.len()` into consecutive ranges of at most `entries_max`
/// raw entries each (a vertex with more is a range of its own).
pub fn ranges_by_entries(degrees: &[u32], entries_max: u64) -> Vec<std::ops::Range<u64>> {
    let mut out = Vec::new();
    let (mut start, mut sum) = (0u64, 0u64);
    for (v, &d) in degrees.iter().enumerate() {
        let d = u64::from(d);
        if sum + d > entries_max && v as u64 > start {
            out.push(start..v as u64);
            (start, sum) = (v as u64, 0);
        }
        sum += d;
    }
    if (degrees.len() as u64) > start || out.is_empty() {
        out.push(start..degrees.len() as u64);
    }
    out
}

/// Sorts every adjacency list, in parallel over vertex ranges balanced by entries.
/// With `dedup`, also removes duplicates inside each list and returns the new lengths
/// (the tails of the lists are left as garbage for [`compact`]).
fn sort_lists(
    offsets: &[u64],
    targets: &mut [VertexId],
    dedup: bool,
    threads: usize,
) -> Option<Vec<u64>> {
    let n = offsets.len() - 1;
    let total = offsets[n];
    let mut lengths = if dedup { vec![0u64; n] } else { Vec::new() };
    // Piece boundaries: the first vertex whose list starts at or after t/T of the entries.
    let pieces = if total < SLICE_EDGES_PER_CHUNK as u64 {
        1
    } else {
        threads
    };
    let mut bounds: Vec<usize> = (0..pieces)
        .map(|t| offsets[..n].partition_point(|&o| o < total * t as u64 / pieces as u64))
        .collect();
    bounds.push(n);
    bounds.dedup();

    let work = |v0: usize, v1: usize, lists: &mut [VertexId], lens: &mut [u64]| {
        let base = offsets[v0];
        for v in v0..v1 {
            let list = &mut lists[(offsets[v] - base) as usize..(offsets[v + 1] - base) as usize];
            list.sort_unstable();
            if dedup {
                lens[v - v0] = dedup_sorted(list) as u64;
            }
        }
    };
    std::thread::scope(|s| {
        let mut rest_targets = targets;
        let mut rest_lengths = lengths.as_mut_slice();
        for w in bounds.windows(2) {
            let (v0, v1) = (w[0], w[1]);
            let (mine, tail) = rest_targets.split_at_mut((offsets[v1] - offsets[v0]) as usize);
            rest_targets = tail;
            let lens = if dedup {
                let (mine, tail) = rest_lengths.split_at_mut(v1 - v0);
                rest_lengths = tail;
                mine
            } else {
                &mut []
            };
            if bounds.len() == 2 {
                work(v0, v1, mine, lens);
            } else {
                s.spawn(move || work(v0, v1, mine, lens));
            }
        }
    });
    dedup.then_some(lengths)
}

/// Moves the unique prefix of each sorted list to the front; returns its length.
fn dedup_sorted(list: &mut [VertexId]) -> usize {
    if list.is_empty() {
        return 0;
    }
    let mut write = 1;
    for read in 1..list.len() {
        if list[read] != list[write - 1] {
            list[write] = list[read];
            write += 1;
        }
    }
    write
}

/// Closes the gaps left by dedup: list `v` keeps its first `lengths[v]` entries.
fn compact(offsets: &mut [u64], targets: &mut Vec<VertexId>, lengths: &[u64]) {
    let n = lengths.len();
    if offsets[n] == lengths.iter().sum::<u64>() {
        return; // nothing was removed; every list is already in place
    }
    let mut write = 0u64;
    for v in 0..n {
        // offsets[v] still holds the old start: it is overwritten only below.
        let start = offsets[v] as usize;
        let len = lengths[v] as usize;
        targets.copy_within(start..start + len, write as usize);
        offsets[v] = write;
        write += len as u64;
    }
    offsets[n] = write;
    targets.truncate(write as usize);
    targets.shrink_to_fit();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Building range by range gives exactly the full CSR's lists, for
    /// every option set and every cut, and the raw degrees bound them.
    #[test]
    fn ranges_rebuild_the_whole_graph() {
        let rmat = Rmat::new(crate::RmatConfig {
            scale: 10,
            edge_factor: 8,
            seed: 3,
            ..crate::RmatConfig::default()
        })
        .unwrap();
        let n = rmat.vertex_count();
        for opts in [
            CsrOptions::default(),
            CsrOptions::RAW,
            CsrOptions {
                symmetrize: false,
                ..CsrOptions::default()
            },
        ] {
            let full = Csr::build_with_threads(n, opts, &rmat, 2).unwrap();
            let raw = raw_degrees(n, opts, &rmat, 2).unwrap();
            for v in 0..n as u32 {
                assert!(u64::from(raw[v as usize]) >= full.degree(v), "{opts:?} {v}");
                assert_eq!(raw[v as usize] == 0, full.degree(v) == 0);
                if !opts.dedup {
                    assert_eq!(u64::from(raw[v as usize]), full.degree(v));
                }
            }
            for entries_max in [1, 500, 4096, u64::MAX] {
                let ranges = ranges_by_entries(&raw, entries_max);
                assert_eq!(ranges.first().unwrap().start, 0);
                assert_eq!(ranges.last().unwrap().end, n);
                let mut next = 0;
                for r in &ranges {
                    assert_eq!(r.start, next, "ranges are consecutive");
                    next = r.end;
                    let entries: u64 = raw[r.start as usize..r.end as usize]
                        .iter()
                        .map(|&d| u64::from(d))
                        .sum();
                    assert!(entries <= entries_max || r.end - r.start == 1);
                }
                for r in ranges.iter().take(40) {
                    let part = Csr::build_range(n, opts, &rmat, r.clone(), 2).unwrap();
                    let known =
                        Csr::build_range_from_degrees(n, opts, &rmat, r.clone(), &raw, 2).unwrap();
                    for part in [part, known] {
                        assert_eq!(part.vertex_count(), r.end - r.start);
                        for i in 0..part.vertex_count() {
                            let v = (r.start + i) as u32;
                            assert_eq!(part.neighbors(i as u32), full.neighbors(v), "{opts:?} {v}");
                        }
                    }
                }
            }
        }
        for opts in [CsrOptions::default(), CsrOptions::RAW] {
            let full = Csr::build_with_threads(n, opts, &rmat, 2).unwrap();
            let some: Vec<u32> = (0..n as u32).step_by(37).chain([0, 1, 2, 3]).collect();
            let lists = lists_of(n, opts, &rmat, &some, 2).unwrap();
            assert_eq!(lists.len(), (0..n).step_by(37).count() + 3);
            for &v in &some {
                assert_eq!(lists[&v], full.neighbors(v), "{opts:?} {v}");
            }
        }
        // Degrees that do not match the source (too many or too few slots
        // for some vertex) are refused, not filled wrong.
        let opts = CsrOptions::default();
        let mut raw = raw_degrees(n, opts, &rmat, 2).unwrap();
        let v = raw.iter().position(|&d| d > 1).unwrap();
        for wrong in [raw[v] - 1, raw[v] + 1, u32::MAX] {
            let keep = std::mem::replace(&mut raw[v], wrong);
            assert!(matches!(
                Csr::build_range_from_degrees(n, opts, &rmat, 0..n, &raw, 2),
                Err(GraphError::UnstableSource)
            ));
            raw[v] = keep;
        }
        assert!(matches!(
            raw_degrees(2, CsrOptions::default(), &[(0u32, 5u32)][..], 1),
            Err(GraphError::EdgeOutOfRange { .. })
        ));
    }

    #[test]
    fn small_graph_layout() {
        let edges: Vec<Edge> = vec![(0, 1), (0, 2), (2, 0), (2, 1), (2, 2), (2, 1)];
        let csr = Csr::build(3, CsrOptions::RAW, &edges).expect("valid");
        assert_eq!(csr.offsets(), &[0, 2, 2, 6]);
        assert_eq!(csr.neighbors(2), &[0, 1, 1, 2]);
        assert_eq!(csr.max_degree(), 4);

        let csr = Csr::build(3, CsrOptions::default(), &edges).expect("valid");
        assert_eq!(csr.neighbors(0), &[1, 2]);
        assert_eq!(csr.neighbors(1), &[0, 2]);
        assert_eq!(csr.neighbors(2), &[0, 1]);
        assert_eq!(csr.edge_count(), 6);
    }

    #[test]
    fn out_of_range_edge_is_an_error() {
        let edges: Vec<Edge> = vec![(0, 1), (3, 0)];
        match Csr::build(3, CsrOptions::default(), &edges) {
            Err(GraphError::EdgeOutOfRange {
                src: 3,
                dst: 0,
                vertex_count: 3,
            }) => {}
            other => panic!("expected EdgeOutOfRange, got {other:?}"),
        }
    }

    #[test]
    fn empty_graph() {
        let edges: Vec<Edge> = Vec::new();
        let csr = Csr::build(4, CsrOptions::default(), &edges).expect("valid");
        assert_eq!(csr.vertex_count(), 4);
        assert_eq!(csr.edge_count(), 0);
        assert_eq!(csr.max_degree(), 0);
        assert!(csr.neighbors(3).is_empty());
    }

    #[test]
    fn too_many_vertices_is_an_error() {
        let edges: Vec<Edge> = Vec::new();
        assert!(matches!(
            Csr::build(VERTEX_COUNT_MAX + 1, CsrOptions::default(), &edges),
            Err(GraphError::TooManyVertices { .. })
        ));
    }

    /// A source that yields one more edge on every visit, as a buggy source might.
    struct Growing(std::sync::atomic::AtomicUsize);

    impl EdgeSource for Growing {
        fn edge_count(&self) -> u64 {
            0
        }
        fn visit_chunks(&self, _threads: usize, f: &(dyn Fn(&[Edge]) + Sync)) {
            let k = self.0.fetch_add(1, Ordering::Relaxed) + 1;
            let edges: Vec<Edge> = (0..k).map(|_| (0, 1)).collect();
            f(&edges);
        }
    }

    #[test]
    fn unstable_source_is_detected() {
        let src = Growing(std::sync::atomic::AtomicUsize::new(0));
        assert!(matches!(
            Csr::build(2, CsrOptions::RAW, &src),
            Err(GraphError::UnstableSource)
        ));
    }
}
