//! SSSP (delta-stepping) on weighted grids gives Dijkstra's distances on
//! every backend, far ratio, thread count and delta, with the same bits
//! everywhere; weights live in the blocks (twice the bytes); unweighted
//! input runs with weight 1.

mod common;

use common::data;
use locus_analytics::algo::{Algo, Output, Params};
use locus_analytics::input::{load_graph, rmat_graph, rmat_weight, LoadLimits};
use locus_analytics::layout::{layout_for, EdgeLayout};
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::Backend;
use locus_analytics::weighted::{self, WeightSource};
use locus_analytics::{reference, GraphInput, Grid};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_graph::{LoadOptions, Rmat, RmatConfig};

fn limits(symmetrize: bool) -> LoadLimits {
    LoadLimits {
        memory_bytes_max: 1 << 30,
        compact_ids: false,
        window_bytes: Algo::Sssp.window_bytes(locus_analytics::Precision::F64),
        window_cache: Algo::Sssp.window_cache(),
        stripe_ids: 4,
        edge_layout: layout_for(Algo::Sssp),
        symmetrize,
    }
}

/// Runs SSSP from `root` with `delta` everywhere and checks each result
/// against `want`; returns the digests.
fn everywhere(grid: &Grid, root: u32, delta: u32, want: &[u32], name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut digests = Vec::new();
    for backend in Backend::ALL {
        for (ratio, threads) in [(0.0, 1), (0.8, 2), (1.0, 3)] {
            let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
            let mut cfg = RunConfig::new(Algo::Sssp, backend, ratio);
            cfg.engine.threads = threads;
            cfg.disk_dir = dir.path().to_path_buf();
            cfg.params = Params {
                root: Some(root),
                delta,
                ..Params::default()
            };
            let (report, result, _) = run(grid, Some(&fabric), &cfg, None).unwrap();
            let Output::Sssp { dist, .. } = &result.output else {
                panic!("{:?}", result.output)
            };
            assert_eq!(
                dist.as_slice(),
                want,
                "{name}: {backend:?} at {ratio} with {threads} threads, delta {delta}"
            );
            if ratio == 1.0 && backend == Backend::Far {
                assert!(
                    report.bytes_fetched > 0,
                    "{name}: nothing came from far memory"
                );
            }
            digests.push(report.digest);
        }
    }
    assert!(
        digests.windows(2).all(|w| w[0] == w[1]),
        "{name}: {digests:?}"
    );
}

#[test]
fn lesmis_weights_directed_and_symmetrized() {
    let path = data("lesmis.wel");
    let list = weighted::load(&path, None, &LoadOptions::default()).unwrap();
    let w = list.weights.clone().unwrap();
    assert!(
        w.iter().any(|&x| x > 1),
        "the shipped weights are not all 1"
    );
    for symmetrize in [false, true] {
        let g = load_graph(
            &path,
            None,
            &LoadOptions::default(),
            Some(4),
            Algo::Sssp,
            limits(symmetrize),
        )
        .unwrap();
        assert_eq!(g.weights, WeightSource::Input);
        assert_eq!(g.grid.layout(), EdgeLayout::CompactWeighted);
        let (mut e, mut ww) = (list.edges.clone(), w.clone());
        if symmetrize {
            locus_analytics::input::symmetrize_weighted(&mut e, &mut ww);
        }
        let n = list.vertex_count as usize;
        for (root, delta) in [(0, 1), (11, 3), (48, 1000)] {
            let want = reference::sssp(n, &e, &ww, root);
            if root == 0 {
                // Weights matter here: unit weights give other distances.
                assert_ne!(want, reference::sssp(n, &e, &vec![1; e.len()], root));
            }
            everywhere(
                &g.grid,
                root,
                delta,
                &want,
                &format!("lesmis sym={symmetrize}"),
            );
        }
    }
}

#[test]
fn rmat_with_generated_weights() {
    let r = Rmat::new(RmatConfig {
        scale: 9,
        seed: 5,
        ..RmatConfig::default()
    })
    .unwrap();
    let g = rmat_graph(&r, Some(6), Algo::Sssp, limits(false)).unwrap();
    assert_eq!(g.weights, WeightSource::Generated);
    let edges: Vec<_> = (0..r.edge_count()).map(|i| r.edge(i)).collect();
    let w: Vec<u32> = (0..r.edge_count()).map(|k| rmat_weight(5, k)).collect();
    assert!(w.iter().all(|&x| (1..=255).contains(&x)));
    assert!(w.contains(&1) && w.contains(&255));
    let root = locus_analytics::algo::default_root(g.grid.out_degree());
    let want = reference::sssp(r.vertex_count() as usize, &edges, &w, root);
    for delta in [1, 32] {
        everywhere(&g.grid, root, delta, &want, "rmat9");
    }
}

#[test]
fn weights_double_the_block_bytes_and_unweighted_input_weighs_one() {
    let edges: Vec<(u32, u32)> = (0..999).map(|k| (k % 97, (k * 7 + 1) % 101)).collect();
    let w: Vec<u32> = (0..999).map(|k| k % 5).collect();
    let plain = Grid::build(
        GraphInput::Edges {
            vertex_count: 101,
            edges: &edges,
        },
        Some(3),
    )
    .unwrap();
    let heavy = Grid::build_with(
        GraphInput::Weighted {
            vertex_count: 101,
            edges: &edges,
            weights: &w,
        },
        &locus_analytics::grid::GridOptions {
            partitions: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(heavy.layout(), plain.layout().weighted());
    let pad = 8 * heavy.shape().blocks() as u64;
    assert!(heavy.edge_bytes() >= 2 * plain.edge_bytes() - pad);
    assert!(heavy.edge_bytes() <= 2 * plain.edge_bytes() + pad);
    // Each block keeps each edge's own weight in both orders.
    let mut got: Vec<(u32, u32, u32)> = Vec::new();
    for pos in 0..heavy.shape().blocks() {
        got.extend(heavy.block_weighted_edges(locus_analytics::Order::Column, pos));
    }
    got.sort_unstable();
    let mut want: Vec<(u32, u32, u32)> = edges
        .iter()
        .zip(&w)
        .map(|(&(s, d), &x)| (s, d, x))
        .collect();
    want.sort_unstable();
    assert_eq!(got, want);
    // An unweighted grid runs SSSP with weight 1: BFS depths.
    let want = reference::bfs_depth(101, &edges, 0);
    everywhere(&plain, 0, 1, &want, "unweighted");
}
