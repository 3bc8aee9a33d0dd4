//! Source stripes (issue 12: BFS skipping inactive source ranges inside
//! blocks): a pass with a sparse active set streams only the stripes its
//! active vertices are in, and no result changes, bit for bit, whatever the
//! stripe width.

mod common;

use common::{check, small_graphs, Graph};
use locus_analytics::algo::{self, Algo, Params};
use locus_analytics::engine::{Engine, EngineConfig};
use locus_analytics::grid::Order;
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::local::LocalStore;
use locus_analytics::store::Backend;
use locus_analytics::{GraphInput, Grid};
use locus_fabric::local::{LocalConfig, LocalFabric};

fn regrid(g: &Graph, partitions: Option<u32>, stripe_ids: u64) -> Graph {
    let grid = Grid::build_striped(
        GraphInput::Edges {
            vertex_count: g.vertices as u64,
            edges: &g.edges,
        },
        partitions,
        stripe_ids,
    )
    .unwrap();
    Graph {
        name: format!("{} striped by {stripe_ids}", g.name),
        vertices: g.vertices,
        edges: g.edges.clone(),
        grid,
    }
}

/// (output, bytes streamed) of `algo` on the Oracle.
fn oracle(g: &Graph, algo: Algo, threads: usize, params: &Params) -> (algo::Output, u64) {
    let store = LocalStore::new(&g.grid, algo.orders()).unwrap();
    let engine = Engine::new(
        &store,
        EngineConfig {
            threads,
            buffering: true,
        },
    )
    .unwrap();
    let r = algo::run(&engine, algo, g.grid.out_degree(), params).unwrap();
    check(g, &r.output, params);
    let streamed = engine.profile().block_bytes[Order::Column.index()]
        .iter()
        .sum();
    (r.output, streamed)
}

/// A chain of 300 vertices on scattered ids (every BFS level is one vertex)
/// inside 4096 vertices whose other 60,000 edges start outside the chain, so
/// BFS from the chain's head never reaches them but every block is full.
fn chain_in_noise() -> Graph {
    let n = 4096u32;
    let mix = |x: u64| {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    // The chain: ids 91 * k + 5 mod 4096 (91 is odd, so distinct).
    let chain: Vec<u32> = (0..300u32).map(|k| (k * 91 + 5) % n).collect();
    let mut on_chain = vec![false; n as usize];
    chain.iter().for_each(|&v| on_chain[v as usize] = true);
    let mut edges: Vec<(u32, u32)> = chain.windows(2).map(|w| (w[0], w[1])).collect();
    let mut i = 0u64;
    while edges.len() < 60_000 {
        let (s, d) = (
            (mix(2 * i) % u64::from(n)) as u32,
            (mix(2 * i + 1) % u64::from(n)) as u32,
        );
        i += 1;
        if !on_chain[s as usize] {
            edges.push((s, d));
        }
    }
    let grid = Grid::build(
        GraphInput::Edges {
            vertex_count: u64::from(n),
            edges: &edges,
        },
        Some(4),
    )
    .unwrap();
    Graph {
        name: format!("chain from {}", chain[0]),
        vertices: n as usize,
        edges,
        grid,
    }
}

#[test]
fn a_sparse_bfs_level_streams_only_its_stripes() {
    let g = chain_in_noise();
    let params = Params {
        root: Some(g.edges[0].0),
        ..Params::default()
    };
    let plain = regrid(&g, Some(4), u64::MAX);
    assert_eq!(plain.grid.stripes(), 1);
    let (want, plain_bytes) = oracle(&plain, Algo::Bfs, 2, &params);
    for ids in [1, 16, 64] {
        let striped = regrid(&g, Some(4), ids);
        assert_eq!(striped.grid.stripes() as u64, 1024u64.div_ceil(ids));
        let (got, bytes) = oracle(&striped, Algo::Bfs, 2, &params);
        // Same depths and the same parents (a destination still meets its
        // in-edges in increasing source order).
        assert_eq!(got, want, "{}", striped.name);
        assert!(
            bytes * 8 < plain_bytes,
            "{}: streamed {bytes} B, unstriped {plain_bytes} B",
            striped.name
        );
    }
    // Far memory fetches fewer bytes too (the skipped stripes stay far).
    let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
    let mut fetched = Vec::new();
    for grid in [&plain.grid, &regrid(&g, Some(4), 16).grid] {
        let mut cfg = RunConfig::new(Algo::Bfs, Backend::Far, 1.0);
        cfg.params = params.clone();
        let (report, result, _) = run(grid, Some(&fabric), &cfg, None).unwrap();
        check(&g, &result.output, &params);
        fetched.push(report.bytes_fetched);
    }
    assert!(fetched[1] * 4 < fetched[0], "fetched {fetched:?}");
}

#[test]
fn stripes_change_no_result_of_any_algorithm() {
    let mut graphs = small_graphs();
    graphs.push(common::rmat(12, 2, Some(8)));
    for g in &graphs {
        for algo in Algo::ALL {
            let params = Params::default();
            let (want, _) = oracle(&regrid(g, None, u64::MAX), algo, 1, &params);
            for ids in [1, 3, 64] {
                let striped = regrid(g, None, ids);
                for threads in [1, 2] {
                    let (got, _) = oracle(&striped, algo, threads, &params);
                    // Bit for bit: PageRank's per-destination sums see the same order.
                    assert_eq!(
                        got.digest(),
                        want.digest(),
                        "{} {algo:?} {threads} thread(s)",
                        striped.name
                    );
                }
            }
        }
    }
}
