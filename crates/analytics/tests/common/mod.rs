//! Shared helpers: the test graphs and the comparison with the references.
#![allow(dead_code)]

use std::path::PathBuf;

use locus_analytics::algo::{pagerank_f32_tolerance, Output, Precision, UNREACHED};
use locus_analytics::{reference, GraphInput, Grid, Params};
use locus_graph::{Edge, LoadOptions, Rmat, RmatConfig};

/// A test graph: its edges (as the references see them) and its grid.
pub struct Graph {
    pub name: String,
    pub vertices: usize,
    pub edges: Vec<Edge>,
    pub grid: Grid,
}

pub fn data(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

/// A shipped graph (tests/data/README.md says where each came from).
pub fn shipped(file: &str, vertex_count: Option<u64>, partitions: Option<u32>) -> Graph {
    let opts = LoadOptions {
        vertex_count,
        ..LoadOptions::default()
    };
    let list = locus_graph::input::load(data(file), None, &opts).unwrap();
    let grid = Grid::build(
        GraphInput::Edges {
            vertex_count: list.vertex_count,
            edges: &list.edges,
        },
        partitions,
    )
    .unwrap();
    Graph {
        name: file.to_string(),
        vertices: list.vertex_count as usize,
        edges: list.edges,
        grid,
    }
}

/// A Graph500 R-MAT graph (edge factor 16).
pub fn rmat(scale: u32, seed: u64, partitions: Option<u32>) -> Graph {
    let r = Rmat::new(RmatConfig {
        scale,
        seed,
        ..RmatConfig::default()
    })
    .unwrap();
    let edges: Vec<Edge> = (0..r.edge_count()).map(|i| r.edge(i)).collect();
    let grid = Grid::build(
        GraphInput::Edges {
            vertex_count: r.vertex_count(),
            edges: &edges,
        },
        partitions,
    )
    .unwrap();
    Graph {
        name: format!("rmat{scale}-seed{seed}"),
        vertices: r.vertex_count() as usize,
        edges,
        grid,
    }
}

/// The small graphs every backend is checked on.
pub fn small_graphs() -> Vec<Graph> {
    vec![
        shipped("karate.txt", None, None),
        shipped("lesmis.txt", None, Some(4)),
        shipped("florentine.txt", None, Some(3)),
        shipped("dangling.txt", Some(12), Some(5)),
        rmat(9, 3, Some(6)),
    ]
}

/// Panics unless `out` is what the reference computes on `g`.
pub fn check(g: &Graph, out: &Output, params: &Params) {
    let n = g.vertices;
    match out {
        Output::Bfs {
            root,
            depth,
            parent,
        } => {
            let want = reference::bfs_depth(n, &g.edges, *root);
            assert_eq!(depth, &want, "{}: BFS depths from {root}", g.name);
            // Every reached vertex but the root has a parent one level up along an edge.
            for v in 0..n {
                if v as u32 == *root {
                    assert_eq!(parent[v], *root);
                } else if depth[v] == UNREACHED {
                    assert_eq!(parent[v], UNREACHED);
                } else {
                    let p = parent[v];
                    assert_eq!(depth[p as usize] + 1, depth[v], "{}: parent of {v}", g.name);
                    assert!(
                        g.edges.contains(&(p, v as u32)),
                        "{}: ({p},{v}) is no edge",
                        g.name
                    );
                }
            }
        }
        Output::Sssp { root, dist } => {
            // These graphs are unweighted: every edge weighs 1.
            let want = reference::sssp(n, &g.edges, &vec![1; g.edges.len()], *root);
            assert_eq!(dist, &want, "{}: SSSP from {root}", g.name);
        }
        Output::Bc { sources, score } => {
            // Sums of quotients in another order than the reference's: equal
            // to 1e-9 relative (each score is a sum of at most V terms).
            let want = reference::bc(n, &g.edges, sources);
            for (v, (a, b)) in score.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                    "{}: BC score of {v}: {a} vs {b}",
                    g.name
                );
            }
            assert!(
                want.iter().any(|&x| x > 0.0) || n < 3,
                "{}: no path",
                g.name
            );
        }
        Output::Tc { count, total } => {
            let want = reference::triangles(n, &g.edges);
            assert_eq!(count, &want, "{}: triangles per vertex", g.name);
            assert_eq!(*total * 3, want.iter().sum::<u64>(), "{}: total", g.name);
        }
        Output::Wcc { label } => {
            assert_eq!(label, &reference::wcc(n, &g.edges), "{}: WCC", g.name);
        }
        Output::PageRank { rank } => {
            let want = reference::pagerank(n, &g.edges, params.iterations);
            let sum: f64 = rank.iter().sum();
            assert!((sum - 1.0).abs() < 1e-12, "{}: ranks sum to {sum}", g.name);
            if params.precision == Precision::F32 {
                // f32 against the f64 reference: the L1 bound argued at
                // `pagerank_f32_tolerance`, from the largest in-degree.
                let mut indeg = vec![0u64; n];
                g.edges.iter().for_each(|&(_, d)| indeg[d as usize] += 1);
                let tol = pagerank_f32_tolerance(indeg.iter().copied().max().unwrap_or(0));
                let l1: f64 = rank.iter().zip(&want).map(|(a, b)| (a - b).abs()).sum();
                assert!(
                    l1 <= tol,
                    "{}: f32 ranks {l1} from f64 in L1, bound {tol}",
                    g.name
                );
                return;
            }
            for v in 0..n {
                let (a, b) = (rank[v], want[v]);
                assert!(
                    (a - b).abs() <= 1e-12 + 1e-9 * b.abs(),
                    "{}: rank of {v} is {a}, reference {b}",
                    g.name
                );
            }
        }
        Output::Radii { radius, .. } => {
            assert_eq!(
                radius,
                &reference::radii(n, &g.edges, params.seed),
                "{}: Radii",
                g.name
            );
        }
    }
}
