//! Triangle counting, GAPBS's `tc.cc` kernel, on a CSR built from the
//! grid (issue 63: "a CSR path is fine where a kernel does not fit the
//! grid's streaming").
//!
//! Why a CSR. Counting needs, for each edge `(u, v)`, the intersection of
//! two sorted neighbour lists; the grid keeps a vertex's edges spread over
//! a row or column of blocks, and a block pass sees one edge at a time, so
//! the lists are built once instead. One column pass over the store (from
//! whichever backend: local, disk, far or paged) hands every destination
//! its in-neighbours; then, in local memory, the graph is made undirected
//! and simple as GAPBS builds it for TC (each edge in both directions, self
//! loops and duplicates dropped) and laid out as a CSR with sorted lists.
//!
//! What that means for far memory: the edge blocks are streamed once, from
//! far memory or disk as the backend places them, but the count then runs
//! on the CSR in local memory: 4 bytes per in-neighbour while building, then
//! 4 bytes per direction of each undirected edge plus 8 per vertex, none of
//! which `--far-ratio` moves far (the memory estimate counts it, see
//! [`crate::memory`]). A paged run with `paged_vertices` does not page it.
//!
//! The count is GAPBS's ordered count: for every `u`, every neighbour
//! `v < u` and every neighbour `w < v` of `u`, `w` is looked up in `v`'s
//! list by a merge, so each triangle `w < v < u` is found once; its three
//! vertices' counts go up by one. On a skewed graph it first relabels the
//! vertices by decreasing degree, as GAPBS's heuristic does (average degree
//! at least 10 and the mean above 1.3 times the median; here over every
//! vertex, where GAPBS samples 1000): hubs get the smallest ids, so the
//! `v < u` cut leaves them short lists to scan. Counts are mapped back, so
//! relabelling changes the time, never the result.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::engine::Engine;
use crate::error::{AnalyticsError, Result};
use crate::grid::Order;

use super::{Output, Run};

/// Vertices per work item of the count.
const CHUNK: usize = 64;

/// An undirected simple graph with sorted neighbour lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csr {
    /// `offsets[v]..offsets[v + 1]` index `v`'s neighbours.
    pub offsets: Vec<u64>,
    /// Neighbours, sorted and distinct per vertex, never the vertex itself.
    pub neighbours: Vec<u32>,
}

impl Csr {
    /// The undirected simple graph of the directed edges `in_lists[d]` (the
    /// sources of `d`'s in-edges).
    pub fn undirected(in_lists: &[Vec<u32>]) -> Csr {
        let n = in_lists.len();
        let mut degree = vec![0u64; n + 1];
        for (d, l) in in_lists.iter().enumerate() {
            for &s in l {
                if s as usize != d {
                    degree[s as usize] += 1;
                    degree[d] += 1;
                }
            }
        }
        let mut offsets = vec![0u64; n + 1];
        for v in 0..n {
            offsets[v + 1] = offsets[v] + degree[v];
        }
        let mut neighbours = vec![0u32; offsets[n] as usize];
        let mut cursor: Vec<u64> = offsets[..n].to_vec();
        for (d, l) in in_lists.iter().enumerate() {
            for &s in l {
                if s as usize != d {
                    neighbours[cursor[s as usize] as usize] = d as u32;
                    cursor[s as usize] += 1;
                    neighbours[cursor[d] as usize] = s;
                    cursor[d] += 1;
                }
            }
        }
        // Sort and deduplicate each list, compacting in place.
        let mut at = 0usize;
        let mut out_offsets = vec![0u64; n + 1];
        for v in 0..n {
            let (a, b) = (offsets[v] as usize, offsets[v + 1] as usize);
            neighbours[a..b].sort_unstable();
            let start = at;
            for k in a..b {
                if k == a || neighbours[k] != neighbours[k - 1] {
                    neighbours[at] = neighbours[k];
                    at += 1;
                }
            }
            debug_assert!(start <= at);
            out_offsets[v + 1] = at as u64;
        }
        neighbours.truncate(at);
        neighbours.shrink_to_fit();
        Csr {
            offsets: out_offsets,
            neighbours,
        }
    }

    /// `v`'s neighbours.
    pub fn of(&self, v: u32) -> &[u32] {
        &self.neighbours[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }

    /// Vertices.
    pub fn vertex_count(&self) -> usize {
        self.offsets.len() - 1
    }

    fn degree(&self, v: usize) -> u64 {
        self.offsets[v + 1] - self.offsets[v]
    }

    /// GAPBS's test for a relabelling paying off (module doc).
    pub fn worth_relabelling(&self) -> bool {
        let n = self.vertex_count();
        if n == 0 || (self.neighbours.len() as u64) < 10 * n as u64 {
            return false;
        }
        let mut d: Vec<u64> = (0..n).map(|v| self.degree(v)).collect();
        let mean = self.neighbours.len() as f64 / n as f64;
        let (_, &mut median, _) = d.select_nth_unstable(n / 2);
        mean / 1.3 > median as f64
    }

    /// The same graph with vertices renumbered by decreasing degree (ties
    /// by id), and `new_id[old]`.
    pub fn relabelled_by_degree(&self) -> (Csr, Vec<u32>) {
        let n = self.vertex_count();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&v| (std::cmp::Reverse(self.degree(v as usize)), v));
        let mut new_id = vec![0u32; n];
        for (k, &v) in order.iter().enumerate() {
            new_id[v as usize] = k as u32;
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut neighbours = Vec::with_capacity(self.neighbours.len());
        offsets.push(0u64);
        for &v in &order {
            let start = neighbours.len();
            neighbours.extend(self.of(v).iter().map(|&w| new_id[w as usize]));
            neighbours[start..].sort_unstable();
            offsets.push(neighbours.len() as u64);
        }
        (
            Csr {
                offsets,
                neighbours,
            },
            new_id,
        )
    }
}

/// The CSR of the graph in `engine`'s store, by one column pass.
pub fn csr_from_store(engine: &Engine<'_>) -> Result<Csr> {
    let n = engine.vertex_count() as usize;
    let mut in_lists: Vec<Vec<u32>> = vec![Vec::new(); n];
    engine.stream_edges(Order::Column, None, &mut in_lists, |s, _, l| l.push(s))?;
    Ok(Csr::undirected(&in_lists))
}

/// Triangles through each vertex of `csr`, by the ordered count on
/// `threads` threads.
pub fn count(csr: &Csr, threads: usize) -> Result<Vec<u64>> {
    let n = csr.vertex_count();
    let counts: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let lo = next.fetch_add(CHUNK, Ordering::Relaxed);
        if lo >= n {
            break;
        }
        for u in lo..(lo + CHUNK).min(n) {
            let nu = csr.of(u as u32);
            let mut found_u = 0u64;
            for &v in nu {
                if v as usize >= u {
                    break;
                }
                let nv = csr.of(v);
                let mut it = 0usize;
                let mut found_v = 0u64;
                for &w in nu {
                    if w >= v {
                        break;
                    }
                    while it < nv.len() && nv[it] < w {
                        it += 1;
                    }
                    if it < nv.len() && nv[it] == w {
                        counts[w as usize].fetch_add(1, Ordering::Relaxed);
                        found_v += 1;
                    }
                }
                if found_v > 0 {
                    counts[v as usize].fetch_add(found_v, Ordering::Relaxed);
                    found_u += found_v;
                }
            }
            if found_u > 0 {
                counts[u].fetch_add(found_u, Ordering::Relaxed);
            }
        }
    };
    let threads = threads.clamp(1, n.div_ceil(CHUNK).max(1));
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        work();
        for h in handles {
            h.join()
                .map_err(|_| AnalyticsError::WorkerPanicked("triangle count".into()))?;
        }
        Ok::<(), AnalyticsError>(())
    })?;
    Ok(counts.into_iter().map(AtomicU64::into_inner).collect())
}

/// Triangle counting on `engine`'s graph (module doc).
pub fn tc(engine: &Engine<'_>) -> Result<Run> {
    let csr = csr_from_store(engine)?;
    let count = if csr.worth_relabelling() {
        let (relabelled, new_id) = csr.relabelled_by_degree();
        drop(csr);
        let c = count(&relabelled, engine.threads())?;
        new_id.iter().map(|&k| c[k as usize]).collect()
    } else {
        count(&csr, engine.threads())?
    };
    let total = count.iter().sum::<u64>() / 3;
    Ok(Run {
        output: Output::Tc { count, total },
        iterations: 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr(n: usize, edges: &[(u32, u32)]) -> Csr {
        let mut l = vec![Vec::new(); n];
        for &(s, d) in edges {
            l[d as usize].push(s);
        }
        Csr::undirected(&l)
    }

    #[test]
    fn symmetrizes_and_drops_loops_and_duplicates() {
        let c = csr(4, &[(0, 1), (1, 0), (0, 1), (2, 2), (3, 1), (1, 2)]);
        assert_eq!(c.of(0), &[1]);
        assert_eq!(c.of(1), &[0, 2, 3]);
        assert_eq!(c.of(2), &[1]);
        assert_eq!(c.of(3), &[1]);
    }

    #[test]
    fn counts_a_k4_and_a_pendant_once_per_triangle() {
        // K4 on 0..4 (4 triangles, each vertex in 3), edges given one way or
        // both, duplicated; 4 hangs off 0; 5 has a self loop only.
        let mut e = vec![
            (0, 1),
            (0, 2),
            (0, 3),
            (1, 2),
            (1, 3),
            (2, 3),
            (3, 2),
            (0, 4),
        ];
        e.extend([(2, 1), (5, 5)]);
        let c = csr(6, &e);
        for threads in [1, 3] {
            assert_eq!(count(&c, threads).unwrap(), vec![3, 3, 3, 3, 0, 0]);
        }
        // Relabelled by degree (0 has 4 neighbours: first), the counts
        // mapped back are the same.
        let (r, new_id) = c.relabelled_by_degree();
        assert_eq!(new_id[0], 0);
        let back: Vec<u64> = new_id
            .iter()
            .map(|&k| count(&r, 2).unwrap()[k as usize])
            .collect();
        assert_eq!(back, vec![3, 3, 3, 3, 0, 0]);
    }

    #[test]
    fn relabelling_is_for_skewed_dense_graphs() {
        // A star with 40 leaves plus a clique of 12: mean degree below 10.
        let mut e: Vec<(u32, u32)> = (1..41).map(|v| (0, v)).collect();
        assert!(!csr(41, &e).worth_relabelling());
        // Dense and even (a clique of 24): not skewed.
        e = (0..24u32)
            .flat_map(|a| (a + 1..24).map(move |b| (a, b)))
            .collect();
        assert!(!csr(24, &e).worth_relabelling());
        // Dense and skewed: 30 hubs joined to all of 1030 vertices: leaves
        // have degree 30 (the median), the mean is about 58 > 1.3 * 30.
        e = (0..30u32)
            .flat_map(|h| (0..1030u32).filter(move |&v| v != h).map(move |v| (h, v)))
            .collect();
        assert!(csr(1030, &e).worth_relabelling());
    }
}
