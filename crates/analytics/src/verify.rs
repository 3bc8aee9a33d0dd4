//! `--verify`: GAPBS's verification logic, reimplemented per kernel, run
//! after the timed run on the graph the run saw (the grid's edges, decoded
//! into plain lists in local memory, with their weights).
//!
//! - **BFS** (GAPBS's BFS verifier): a serial BFS from the root gives the
//!   depths; every vertex must be reached by both or neither; the root is
//!   its own parent; any other reached vertex's parent must have an edge
//!   to it and be exactly one level shallower.
//! - **SSSP**: a serial Dijkstra from the root; every distance must be
//!   equal.
//! - **CC**: labels must be constant on each weakly connected component
//!   (found by a serial search over both edge directions) and differ
//!   between components; which label a component gets is not checked.
//! - **TC**: for every edge `(u, v)` of the undirected simple graph the
//!   sorted neighbour lists are intersected; the total over all edges is
//!   six times the triangle count, and per vertex twice its count.
//! - **BC**: Brandes again, serially, from the same sources; GAPBS compares
//!   scores normalised by the largest to f32's epsilon, and so does this
//!   (the run's scores are f64, so the check is far from its bound).
//! - **PageRank**: with `--tolerance`, GAPBS's check: one more iteration
//!   from the run's scores must move them by less than the tolerance in
//!   L1. With a fixed iteration count there is no tolerance to hold them
//!   to, so the serial reference runs the same iterations and the scores
//!   must agree to 1e-9 relative in f64, or within
//!   [`crate::algo::pagerank_f32_tolerance`] in L1 in f32.
//! - **Radii**: GAPBS has no radii kernel; the serial reference's
//!   estimates must be equal.
//!
//! A failure names the kernel, how many vertices differ and the first few
//! (vertex, what the run has, what the check expects), in the run's ids.

use std::collections::VecDeque;

use locus_graph::Edge;

use crate::algo::{pagerank_f32_tolerance, Output, Params, Precision, UNREACHED};
use crate::error::{AnalyticsError, Result};
use crate::grid::{Grid, Order};
use crate::reference;

/// Differences named in a failure message.
const SHOWN: usize = 5;

/// The grid's edges and weights, in column-block order.
fn edges_of(grid: &Grid) -> (Vec<Edge>, Vec<u32>) {
    let mut edges = Vec::with_capacity(grid.edge_count() as usize);
    let mut weights = Vec::with_capacity(grid.edge_count() as usize);
    for pos in 0..grid.shape().blocks() {
        for (s, d, w) in grid.block_weighted_edges(Order::Column, pos) {
            edges.push((s, d));
            weights.push(w);
        }
    }
    (edges, weights)
}

/// Collects differences and turns them into one error.
struct Diffs {
    kernel: &'static str,
    count: u64,
    shown: Vec<String>,
}

impl Diffs {
    fn new(kernel: &'static str) -> Diffs {
        Diffs {
            kernel,
            count: 0,
            shown: Vec::new(),
        }
    }

    fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.shown.len() < SHOWN {
            self.shown.push(what());
        }
    }

    fn done(self) -> Result<String> {
        if self.count == 0 {
            return Ok(format!("{}: ok", self.kernel));
        }
        Err(AnalyticsError::Verify(format!(
            "{}: {} difference(s); first: {}",
            self.kernel,
            self.count,
            self.shown.join("; ")
        )))
    }
}

/// Checks `out` against GAPBS's checks on `grid` (module doc); the Ok
/// string says what was checked.
pub fn verify(grid: &Grid, out: &Output, params: &Params) -> Result<String> {
    let n = grid.vertex_count() as usize;
    let (edges, weights) = edges_of(grid);
    match out {
        Output::Bfs {
            root,
            depth,
            parent,
        } => {
            let want = reference::bfs_depth(n, &edges, *root);
            let mut has_edge = std::collections::HashSet::with_capacity(edges.len());
            has_edge.extend(edges.iter().copied());
            let mut d = Diffs::new("bfs");
            for v in 0..n {
                let (got, p) = (depth[v], parent[v]);
                if (got == UNREACHED) != (want[v] == UNREACHED) {
                    d.add(|| {
                        format!(
                            "vertex {v}: reachability: run depth {got}, check {}",
                            want[v]
                        )
                    });
                } else if got == UNREACHED {
                    if p != UNREACHED {
                        d.add(|| format!("vertex {v}: unreached with parent {p}"));
                    }
                } else if v as u32 == *root {
                    if p != *root || got != 0 {
                        d.add(|| format!("root {v}: parent {p}, depth {got}"));
                    }
                } else if got != want[v] {
                    d.add(|| format!("vertex {v}: depth {got}, check {}", want[v]));
                } else if !has_edge.contains(&(p, v as u32)) {
                    d.add(|| format!("vertex {v}: parent {p} has no edge to it"));
                } else if depth.get(p as usize).copied() != Some(got - 1) {
                    d.add(|| {
                        format!("vertex {v}: depth {got} but its parent {p} is not one level up")
                    });
                }
            }
            d.done()
        }
        Output::Sssp { root, dist } => {
            let want = reference::sssp(n, &edges, &weights, *root);
            let mut d = Diffs::new("sssp");
            for v in 0..n {
                if dist[v] != want[v] {
                    d.add(|| {
                        format!(
                            "vertex {v}: distance {}, Dijkstra {}",
                            show(dist[v]),
                            show(want[v])
                        )
                    });
                }
            }
            d.done()
        }
        Output::Wcc { label } => {
            let mut d = Diffs::new("cc");
            let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
            for &(s, t) in &edges {
                adj[s as usize].push(t);
                adj[t as usize].push(s);
            }
            let mut comp = vec![u32::MAX; n];
            let mut owner: std::collections::HashMap<u32, u32> = Default::default();
            for start in 0..n {
                if comp[start] != u32::MAX {
                    continue;
                }
                let c = start as u32;
                let l = label[start];
                if let Some(&other) = owner.get(&l) {
                    d.add(|| {
                        format!("label {l} on two components (of vertices {other} and {start})")
                    });
                }
                owner.insert(l, c);
                comp[start] = c;
                let mut queue = VecDeque::from([c]);
                while let Some(u) = queue.pop_front() {
                    if label[u as usize] != l {
                        d.add(|| {
                            format!(
                                "vertex {u}: label {}, its component's is {l}",
                                label[u as usize]
                            )
                        });
                    }
                    for &w in &adj[u as usize] {
                        if comp[w as usize] == u32::MAX {
                            comp[w as usize] = c;
                            queue.push_back(w);
                        }
                    }
                }
            }
            d.done()
        }
        Output::Tc { count, total } => {
            let csr = crate::algo::tc::Csr::undirected(&{
                let mut l = vec![Vec::new(); n];
                for &(s, t) in &edges {
                    l[t as usize].push(s);
                }
                l
            });
            let mut twice = vec![0u64; n];
            let mut all = 0u64;
            for u in 0..n as u32 {
                for &v in csr.of(u) {
                    let k = intersection(csr.of(u), csr.of(v));
                    twice[u as usize] += k;
                    all += k;
                }
            }
            let mut d = Diffs::new("tc");
            if all / 6 != *total || !all.is_multiple_of(6) {
                d.add(|| format!("total {total}, intersections give {}", all / 6));
            }
            for v in 0..n {
                if twice[v] != 2 * count[v] {
                    d.add(|| {
                        format!(
                            "vertex {v}: {} triangles, intersections give {}",
                            count[v],
                            twice[v] / 2
                        )
                    });
                }
            }
            d.done()
        }
        Output::Bc { sources, score } => {
            let want = reference::bc(n, &edges, sources);
            let top = |x: &[f64]| x.iter().copied().fold(0.0f64, f64::max);
            let (tg, tw) = (top(score), top(&want));
            let mut d = Diffs::new("bc");
            for v in 0..n {
                let a = if tg > 0.0 { score[v] / tg } else { score[v] };
                let b = if tw > 0.0 { want[v] / tw } else { want[v] };
                if (a - b).abs() > f64::from(f32::EPSILON) {
                    d.add(|| format!("vertex {v}: normalised score {a}, Brandes {b}"));
                }
            }
            d.done()
        }
        Output::PageRank { rank } => {
            let mut d = Diffs::new("pagerank");
            if let Some(tol) = params.tolerance {
                let change = one_more_iteration_change(n, &edges, rank);
                if change >= tol {
                    d.add(|| format!("one more iteration moves the scores by {change:e} in L1, not below the tolerance {tol:e}"));
                }
                return d.done();
            }
            let want = reference::pagerank(n, &edges, params.iterations);
            match params.precision {
                Precision::F64 => {
                    for v in 0..n {
                        if (rank[v] - want[v]).abs() > 1e-12 + 1e-9 * want[v] {
                            d.add(|| format!("vertex {v}: score {}, serial {}", rank[v], want[v]));
                        }
                    }
                }
                Precision::F32 => {
                    let l1: f64 = rank.iter().zip(&want).map(|(a, b)| (a - b).abs()).sum();
                    let mut indeg = vec![0u64; n];
                    for &(_, t) in &edges {
                        indeg[t as usize] += 1;
                    }
                    let bound = pagerank_f32_tolerance(indeg.iter().copied().max().unwrap_or(0));
                    if l1 > bound {
                        d.add(|| {
                            format!("L1 distance {l1:e} to the f64 serial scores, bound {bound:e}")
                        });
                    }
                }
            }
            d.done()
        }
        Output::Radii { radius, .. } => {
            let want = reference::radii(n, &edges, params.seed);
            let mut d = Diffs::new("radii");
            for v in 0..n {
                if radius[v] != want[v] {
                    d.add(|| {
                        format!(
                            "vertex {v}: estimate {}, serial {}",
                            show(radius[v]),
                            show(want[v])
                        )
                    });
                }
            }
            d.done()
        }
    }
}

/// The L1 distance between `rank` and one PageRank iteration from it
/// (damping 0.85, dangling mass spread evenly).
fn one_more_iteration_change(n: usize, edges: &[Edge], rank: &[f64]) -> f64 {
    let d = crate::algo::PAGERANK_DAMPING;
    let mut deg = vec![0u64; n];
    for &(s, _) in edges {
        deg[s as usize] += 1;
    }
    let dangling: f64 = (0..n).filter(|&v| deg[v] == 0).map(|v| rank[v]).sum();
    let mut next = vec![(1.0 - d) / n as f64 + d * dangling / n as f64; n];
    for &(s, t) in edges {
        next[t as usize] += d * rank[s as usize] / deg[s as usize] as f64;
    }
    next.iter().zip(rank).map(|(a, b)| (a - b).abs()).sum()
}

fn show(x: u32) -> String {
    if x == UNREACHED {
        "unreached".into()
    } else {
        x.to_string()
    }
}

/// Size of the intersection of two sorted lists.
fn intersection(a: &[u32], b: &[u32]) -> u64 {
    let (mut i, mut j, mut k) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                k += 1;
                i += 1;
                j += 1;
            }
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::GraphInput;

    fn grid(n: u64, edges: &[Edge]) -> Grid {
        Grid::build(
            GraphInput::Edges {
                vertex_count: n,
                edges,
            },
            Some(2),
        )
        .unwrap()
    }

    #[test]
    fn each_kernel_accepts_the_right_answer_and_names_a_wrong_one() {
        // 0 -> 1 -> 2, 0 -> 2, 3 alone; one triangle.
        let g = grid(4, &[(0, 1), (1, 2), (0, 2)]);
        let p = Params::default();
        let ok = |o: Output| verify(&g, &o, &p).unwrap();
        let bad = |o: Output| verify(&g, &o, &p).unwrap_err().to_string();
        let u = UNREACHED;
        ok(Output::Bfs {
            root: 0,
            depth: vec![0, 1, 1, u],
            parent: vec![0, 0, 0, u],
        });
        let e = bad(Output::Bfs {
            root: 0,
            depth: vec![0, 1, 1, u],
            parent: vec![0, 0, 1, u],
        });
        assert!(e.contains("vertex 2") && e.contains("one level up"), "{e}");
        let e = bad(Output::Bfs {
            root: 0,
            depth: vec![0, 1, 1, 1],
            parent: vec![0, 0, 0, 0],
        });
        assert!(e.contains("vertex 3") && e.contains("reachability"), "{e}");
        ok(Output::Sssp {
            root: 0,
            dist: vec![0, 1, 1, u],
        });
        let e = bad(Output::Sssp {
            root: 0,
            dist: vec![0, 1, 2, u],
        });
        assert!(e.contains("vertex 2: distance 2, Dijkstra 1"), "{e}");
        ok(Output::Wcc {
            label: vec![7, 7, 7, 3],
        });
        assert!(bad(Output::Wcc {
            label: vec![0, 0, 0, 0]
        })
        .contains("two components"));
        assert!(bad(Output::Wcc {
            label: vec![0, 1, 0, 3]
        })
        .contains("vertex 1"));
        ok(Output::Tc {
            count: vec![1, 1, 1, 0],
            total: 1,
        });
        assert!(bad(Output::Tc {
            count: vec![2, 2, 2, 0],
            total: 2
        })
        .contains("4 difference"));
        ok(Output::Bc {
            sources: vec![0, 1, 2, 3],
            score: vec![0.0, 0.0, 0.0, 0.0],
        });
        let g2 = grid(3, &[(0, 1), (1, 2)]);
        verify(
            &g2,
            &Output::Bc {
                sources: vec![0],
                score: vec![0.0, 1.0, 0.0],
            },
            &p,
        )
        .unwrap();
        let e = verify(
            &g2,
            &Output::Bc {
                sources: vec![0],
                score: vec![0.0, 1.0, 0.5],
            },
            &p,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("vertex 2"), "{e}");
        // PageRank with a tolerance: GAPBS's one-more-iteration check.
        let tol = Params {
            tolerance: Some(1e-6),
            ..Params::default()
        };
        let far = Output::PageRank {
            rank: vec![0.25; 4],
        };
        let e = verify(&g, &far, &tol).unwrap_err().to_string();
        assert!(e.contains("not below the tolerance"), "{e}");
        let fixed = reference::pagerank(4, &[(0, 1), (1, 2), (0, 2)], 200);
        verify(&g, &Output::PageRank { rank: fixed }, &tol).unwrap();
    }
}
