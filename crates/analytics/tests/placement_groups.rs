//! Graph-aware placement (Fargraph+ 5.1, 5.2): the profile puts vertex data
//! in the write-much groups and edge blocks in the transferable ones; vertex
//! data never goes far; the ratio decides how much of the edges does.

mod common;

use locus_analytics::algo::{Algo, Precision};
use locus_analytics::placement::{plan, Group};
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::{Backend, BlockTable};
use locus_fabric::local::LocalFabric;

fn profile(g: &common::Graph, algo: Algo) -> locus_analytics::Profile {
    let cfg = RunConfig::new(algo, Backend::Local, 0.0);
    run::<LocalFabric>(&g.grid, None, &cfg, None).unwrap().2
}

#[test]
fn pagerank_groups() {
    let g = common::rmat(11, 1, None);
    let p = profile(&g, Algo::PageRank);
    let table = BlockTable::new(&g.grid, Algo::PageRank.orders()).unwrap();
    let plan = plan(Algo::PageRank, Precision::F32, &table, &p, 0.8).unwrap();
    let group = |name: &str| {
        plan.vertex_segments
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .group
    };
    // Vertex values read and written every iteration: MO-sensitive.
    for name in ["sum", "contrib", "rank"] {
        assert_eq!(group(name), Group::G1, "{name}");
    }
    // Only read: not write-much, but vertex data stays local anyway.
    assert!(matches!(group("out-degree"), Group::G3 | Group::G4));
    assert!(
        plan.vertex_segments.iter().all(|s| !s.far),
        "vertex data stays local"
    );
    // Edge blocks are read, never written: groups 3 and 4 only.
    let blocks = plan.groups[2].segments + plan.groups[3].segments;
    let nonempty = (0..table.shape().blocks())
        .filter(|&b| table.block_len(locus_analytics::Order::Column, b) > 0)
        .count();
    // Blocks plus out-degree.
    assert_eq!(blocks as usize, nonempty + 1);
    assert_eq!(plan.groups[0].far_bytes + plan.groups[1].far_bytes, 0);
    // The vertex data placed is the run's: f64 values take 12 more bytes a vertex.
    let f64_plan =
        locus_analytics::placement::plan(Algo::PageRank, Precision::F64, &table, &p, 0.8).unwrap();
    assert_eq!(
        f64_plan.vertex_bytes - plan.vertex_bytes,
        12 * table.shape().vertex_count
    );
    assert_eq!(
        plan.vertex_bytes,
        Algo::PageRank.vertex_bytes_at(table.shape().vertex_count, Precision::F32)
    );
}

#[test]
fn bfs_leaves_cold_blocks_in_group_4_and_sends_them_first() {
    let g = common::rmat(11, 1, Some(16));
    let p = profile(&g, Algo::Bfs);
    let table = BlockTable::new(&g.grid, Algo::Bfs.orders()).unwrap();
    let half = plan(Algo::Bfs, Precision::F32, &table, &p, 0.5).unwrap();
    assert!(
        half.groups[3].segments > 0,
        "some blocks are streamed rarely: {:?}",
        half.groups
    );
    // Cold blocks go far before hot ones: the budget is filled hottest
    // group first, whole blocks while they fit, then a prefix of the next
    // one with the room left, so no cold block stays once a hot one went
    // (even partly) far.
    let kept_cold = half
        .blocks
        .iter()
        .filter(|c| c.group == Group::G4 && !c.far)
        .map(|c| c.bytes)
        .max();
    let far_hot = half
        .blocks
        .iter()
        .filter(|c| c.group == Group::G3 && c.far)
        .map(|c| c.bytes)
        .min();
    if let (Some(kept), Some(far)) = (kept_cold, far_hot) {
        panic!("a cold block of {kept} bytes stayed while a hot one of {far} went far");
    }
    assert!(
        half.blocks.iter().any(|c| c.group == Group::G4 && c.far),
        "cold blocks go far at ratio 0.5: {:?}",
        half.groups
    );
}

#[test]
fn the_ratio_decides_how_much_goes_far() {
    let g = common::rmat(10, 7, None);
    for algo in Algo::ALL {
        let p = profile(&g, algo);
        let table = BlockTable::new(&g.grid, algo.orders()).unwrap();
        let mut last = -1.0;
        for ratio in [0.0, 0.2, 0.5, 0.8, 0.9, 1.0] {
            let pl = plan(algo, Precision::F32, &table, &p, ratio).unwrap();
            assert!(pl.far_ratio_achieved >= last, "{algo:?} {ratio}");
            last = pl.far_ratio_achieved;
            assert_eq!(pl.resident_edge_bytes + pl.far_edge_bytes, pl.edge_bytes);
            assert!(
                pl.vertex_bytes + pl.resident_edge_bytes
                    <= pl.local_budget_bytes.max(pl.vertex_bytes)
            );
            if ratio == 0.0 {
                assert_eq!(pl.far_edge_bytes, 0);
            }
            if ratio == 1.0 {
                assert_eq!(pl.resident_edge_bytes, 0);
            }
            // What goes far is at least what the ratio asks of the edges.
            let total = (pl.vertex_bytes + pl.edge_bytes) as f64;
            assert!(
                pl.far_edge_bytes as f64
                    >= (ratio * total - pl.vertex_bytes as f64).min(pl.edge_bytes as f64) - 1.0
            );
            // And no more: the room the vertex data leaves is filled to a
            // word, a prefix of a block if no whole block fits.
            let room = pl.local_budget_bytes.saturating_sub(pl.vertex_bytes);
            if room < pl.edge_bytes {
                assert!(
                    room - pl.resident_edge_bytes < 8,
                    "{algo:?} {ratio}: {} of {room} bytes of room kept",
                    pl.resident_edge_bytes
                );
            }
            let far: u64 = pl.blocks.iter().map(|c| c.far_bytes).sum();
            assert_eq!(far, pl.far_edge_bytes);
        }
    }
    assert!(plan(
        Algo::Bfs,
        Precision::F32,
        &BlockTable::new(&g.grid, Algo::Bfs.orders()).unwrap(),
        &profile(&g, Algo::Bfs),
        1.5
    )
    .is_err());
}
