//! Selective scheduling (GridGraph 3.3): a block whose read-side partition
//! has no active vertex is never fetched.

use locus_analytics::algo::{self, Algo, Params};
use locus_analytics::engine::{Engine, EngineConfig};
use locus_analytics::grid::Order;
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::local::LocalStore;
use locus_analytics::store::Backend;
use locus_analytics::{GraphInput, Grid};
use locus_fabric::local::{LocalConfig, LocalFabric};

/// Two chains, 0 -> 1 -> ... -> 49 and 50 -> ... -> 99, on a 10 x 10 grid.
fn two_chains() -> Grid {
    let mut edges = Vec::new();
    for base in [0u32, 50] {
        for v in base..base + 49 {
            edges.push((v, v + 1));
        }
    }
    Grid::build(
        GraphInput::Edges {
            vertex_count: 100,
            edges: &edges,
        },
        Some(10),
    )
    .unwrap()
}

#[test]
fn blocks_of_inactive_rows_are_never_streamed() {
    let grid = two_chains();
    let store = LocalStore::new(&grid, &[Order::Column]).unwrap();
    let engine = Engine::new(&store, EngineConfig::default()).unwrap();
    let params = Params {
        root: Some(0),
        ..Params::default()
    };
    let r = algo::run(&engine, Algo::Bfs, grid.out_degree(), &params).unwrap();
    assert_eq!(
        r.iterations, 50,
        "49 levels, then one pass that finds nothing"
    );
    let profile = engine.profile();
    let shape = grid.shape();
    for pos in 0..shape.blocks() {
        let (i, _) = shape.block_at(Order::Column, pos);
        let streamed = profile.block_bytes[Order::Column.index()][pos];
        if i >= 5 {
            assert_eq!(streamed, 0, "row {i} never has an active vertex");
        }
    }
    // Each row's diagonal block holds 9 or 10 edges and is streamed once per level
    // its partition is on the frontier (10 levels per row), not 50 times.
    let diag = shape.position(Order::Column, 0, 0);
    let eb = grid.layout().edge_bytes();
    assert_eq!(
        profile.block_bytes[Order::Column.index()][diag],
        9 * eb * 10
    );
    // Edges applied: only those whose source is on the frontier, once each.
    assert_eq!(profile.edges_applied, 49);
}

#[test]
fn far_fetches_only_active_blocks() {
    let grid = two_chains();
    let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
    let mut cfg = RunConfig::new(Algo::Bfs, Backend::Far, 1.0);
    cfg.params.root = Some(50);
    let (report, _, _) = run(&grid, Some(&fabric), &cfg, None).unwrap();
    // 49 edges of the second chain, each block fetched once per level it is active.
    let second_chain_bytes = 49 * 8;
    assert!(report.bytes_fetched >= second_chain_bytes);
    assert!(report.bytes_fetched <= 10 * second_chain_bytes);
    assert_eq!(report.edges_applied, 49);
}
