//! The compact grid (issue 12, requirement 2): 4-byte block-relative edges
//! hold exactly the wide grid's edges in the same order, every algorithm on
//! every backend gives the reference result and the same bits with either
//! layout, blocks with odd edge counts and stripes starting half-way through
//! a word are read through the fabric's whole-word READs, a layout that does
//! not fit falls back or is refused, and prepared grids keep their layout
//! (and version-1 files still read).

mod common;

use common::{check, small_graphs, Graph};
use locus_analytics::algo::{self, Algo, Params};
use locus_analytics::engine::{Engine, EngineConfig};
use locus_analytics::grid::{EdgeLayout, GridOptions, LayoutChoice, NO_STRIPES};
use locus_analytics::prepared::{self, GRID_FILE};
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::far::{FarConfig, FarStore};
use locus_analytics::store::{Backend, BlockTable, EdgeStore, Residency};
use locus_analytics::{server, GraphInput, Grid, Order};
use locus_fabric::local::{LocalConfig, LocalFabric};

fn fast_fabric() -> LocalFabric {
    LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap()
}

/// `g` rebuilt with `layout` and `stripe_ids`, keeping its partitions.
fn regrid(g: &Graph, layout: LayoutChoice, stripe_ids: u64) -> Graph {
    let grid = Grid::build_with(
        GraphInput::Edges {
            vertex_count: g.vertices as u64,
            edges: &g.edges,
        },
        &GridOptions {
            partitions: Some(g.grid.shape().partitions),
            stripe_ids,
            layout,
            ..GridOptions::default()
        },
    )
    .unwrap();
    Graph {
        name: format!("{} {layout:?} stripes {stripe_ids}", g.name),
        vertices: g.vertices,
        edges: g.edges.clone(),
        grid,
    }
}

/// Every small graph (and an R-MAT 10) in both layouts, unstriped and in
/// stripes of 3 ids (so stripes start at odd edge offsets).
fn variants() -> Vec<(Graph, Graph)> {
    let mut graphs = small_graphs();
    graphs.push(common::rmat(10, 7, Some(5)));
    let mut out = Vec::new();
    for g in &graphs {
        for stripe_ids in [NO_STRIPES, 3] {
            out.push((
                regrid(g, LayoutChoice::Compact, stripe_ids),
                regrid(g, LayoutChoice::Wide, stripe_ids),
            ));
        }
    }
    out
}

#[test]
fn both_layouts_hold_the_same_edges_in_the_same_order() {
    let mut odd_blocks = 0;
    let mut odd_stripes = 0;
    for (c, w) in variants() {
        assert_eq!(c.grid.layout(), EdgeLayout::Compact, "{}", c.name);
        assert_eq!(w.grid.layout(), EdgeLayout::Wide, "{}", w.name);
        assert_eq!(c.grid.stripe_offsets(), w.grid.stripe_offsets());
        for order in Order::ALL {
            assert_eq!(c.grid.offsets(order), w.grid.offsets(order));
            let starts = c.grid.starts(order);
            assert!(starts.iter().all(|s| s % 8 == 0), "{}: {starts:?}", c.name);
            for pos in 0..c.grid.shape().blocks() {
                assert_eq!(
                    c.grid.block_edges(order, pos),
                    w.grid.block_edges(order, pos),
                    "{} {order:?} block {pos}",
                    c.name
                );
                let o = c.grid.offsets(order);
                let n = o[pos + 1] - o[pos];
                odd_blocks += n % 2;
                // The stored block is its edges, padded to a whole word.
                assert_eq!(
                    c.grid.block_bytes(order, pos).end - starts[pos],
                    (4 * n).next_multiple_of(8)
                );
            }
        }
        odd_stripes += c
            .grid
            .stripe_offsets()
            .iter()
            .filter(|&&o| o % 2 == 1)
            .count();
        // Half the bytes, up to the pads.
        let e = c.grid.edge_count();
        assert_eq!(w.grid.edge_bytes(), 8 * e);
        assert!(c.grid.edge_bytes() >= 4 * e);
        assert!(c.grid.edge_bytes() <= 4 * e + 4 * c.grid.shape().blocks() as u64);
    }
    assert!(
        odd_blocks > 10,
        "the cases need blocks with odd edge counts"
    );
    assert!(
        odd_stripes > 10,
        "the cases need stripes at odd edge offsets"
    );
}

#[test]
fn every_backend_gives_the_reference_with_either_layout() {
    let dir = tempfile::tempdir().unwrap();
    for (c, w) in variants() {
        for algo in Algo::ALL {
            let mut digests = Vec::new();
            for g in [&c, &w] {
                for backend in Backend::ALL {
                    for (ratio, threads) in [(0.0, 1), (0.8, 2), (1.0, 2)] {
                        let fabric = fast_fabric();
                        let mut cfg = RunConfig::new(algo, backend, ratio);
                        cfg.engine.threads = threads;
                        cfg.disk_dir = dir.path().to_path_buf();
                        let (report, result, _) = run(&g.grid, Some(&fabric), &cfg, None)
                            .unwrap_or_else(|e| panic!("{} {algo:?} {backend:?}: {e}", g.name));
                        check(g, &result.output, &cfg.params);
                        assert_eq!(report.edge_layout, g.grid.layout());
                        digests.push(report.digest.clone());
                    }
                }
            }
            // Same edges in the same order: the same bits in either layout.
            assert!(
                digests.windows(2).all(|x| x[0] == x[1]),
                "{} {algo:?}: {digests:?}",
                c.name
            );
        }
    }
}

#[test]
fn far_reads_whole_words_around_odd_blocks_and_stripes() {
    // Every block far, chunks down to one word, BFS skipping stripes (so
    // segments start at stripe offsets): a misaligned READ would fail in
    // the fabric, a bad trim would give wrong answers.
    for (c, _) in variants() {
        let orders = Order::ALL.to_vec();
        let table = BlockTable::new(&c.grid, &orders).unwrap();
        let fabric = fast_fabric();
        for chunk_bytes in [8, 24, 4096] {
            let store = server::with_server(&fabric, 1, u64::MAX, || {
                FarStore::new(
                    fabric.clone(),
                    &c.grid,
                    &orders,
                    &Residency::all(&table, false),
                    FarConfig {
                        chunk_bytes,
                        ..FarConfig::default()
                    },
                )
            })
            .unwrap();
            assert_eq!(store.footprint().remote_bytes, 2 * c.grid.edge_bytes());
            for algo in Algo::ALL {
                for (threads, buffering) in [(1, false), (2, true)] {
                    let engine = Engine::new(&store, EngineConfig { threads, buffering }).unwrap();
                    let params = Params::default();
                    let r = algo::run(&engine, algo, c.grid.out_degree(), &params)
                        .unwrap_or_else(|e| panic!("{} {algo:?} chunk {chunk_bytes}: {e}", c.name));
                    check(&c, &r.output, &params);
                }
            }
        }
    }
}

#[test]
fn a_width_over_65536_falls_back_to_wide_or_is_refused() {
    // 70,000 vertices in one partition: ids relative to it need 17 bits.
    let edges: Vec<(u32, u32)> = (0..69_999u32).map(|v| (v, v + 1)).collect();
    let input = GraphInput::Edges {
        vertex_count: 70_000,
        edges: &edges,
    };
    let opts = |layout| GridOptions {
        partitions: Some(1),
        layout,
        ..GridOptions::default()
    };
    let g = Grid::build_with(input, &opts(LayoutChoice::Auto)).unwrap();
    assert_eq!(g.layout(), EdgeLayout::Wide);
    let err = Grid::build_with(input, &opts(LayoutChoice::Compact))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("edge_layout") && err.contains("70000"),
        "{err}"
    );
    // 2^20 vertices: asked for compact edges, the automatic partition count
    // keeps the width within 2^16; automatic, it sizes partitions to L2
    // only, and falls back to wide edges where that is wider.
    let edges: Vec<(u32, u32)> = (0..999u32).map(|v| (v * 1000, v * 1000 + 999)).collect();
    let input = GraphInput::Edges {
        vertex_count: 1 << 20,
        edges: &edges,
    };
    let auto = |layout| GridOptions {
        layout,
        ..GridOptions::default()
    };
    let g = Grid::build_with(input, &auto(LayoutChoice::Compact)).unwrap();
    assert!(g.shape().width <= 1 << 16, "{:?}", g.shape());
    assert_eq!(g.layout(), EdgeLayout::Compact);
    let g = Grid::build_with(input, &auto(LayoutChoice::Auto)).unwrap();
    let l2_width = locus_analytics::grid::partition_vertices_auto(4);
    assert_eq!(g.shape().width, l2_width.min(1 << 20 >> 3));
    let want = if g.shape().width <= 1 << 16 {
        EdgeLayout::Compact
    } else {
        EdgeLayout::Wide
    };
    assert_eq!(g.layout(), want);
    // PageRank and WCC keep L2-sized partitions; BFS and Radii ask for
    // compact edges.
    use locus_analytics::layout::layout_for;
    for a in [Algo::PageRank, Algo::Wcc] {
        assert_eq!(layout_for(a), LayoutChoice::Auto);
    }
    for a in [Algo::Bfs, Algo::Radii] {
        assert_eq!(layout_for(a), LayoutChoice::Compact);
    }
}

fn same_grid(a: &Grid, b: &Grid) {
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.layout(), b.layout());
    assert_eq!(a.out_degree(), b.out_degree());
    assert_eq!(a.stripe_offsets(), b.stripe_offsets());
    for o in Order::ALL {
        assert_eq!(a.offsets(o), b.offsets(o));
        assert_eq!(a.bytes(o), b.bytes(o));
    }
}

#[test]
fn prepared_grids_keep_their_layout_and_version_1_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    for (k, (c, w)) in variants().into_iter().enumerate() {
        for g in [&c, &w] {
            let d = dir.path().join(format!("{k}-{}", g.grid.layout().name()));
            prepared::write(&d, &g.grid, None, 4).unwrap();
            let (back, _, h) = prepared::read(&d).unwrap();
            assert_eq!(h.layout, g.grid.layout());
            same_grid(&g.grid, &back);
        }
        // A version-1 file (wide edges, 96-byte header, CRC at 84) reads as wide.
        let d = dir.path().join(format!("{k}-v1"));
        let path = prepared::write(&d, &w.grid, None, 4).unwrap();
        let v2 = std::fs::read(&path).unwrap();
        let mut v1 = v2[..84].to_vec();
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        v1[12..16].copy_from_slice(&96u32.to_le_bytes());
        let crc = crc32fast::hash(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        v1.resize(96, 0);
        v1.extend_from_slice(&v2[104..]);
        std::fs::write(&path, &v1).unwrap();
        let (back, _, h) = prepared::read(&d).unwrap();
        assert_eq!(h.layout, EdgeLayout::Wide);
        same_grid(&w.grid, &back);
    }
    // A compact file whose edge size was changed (and re-checksummed) is refused.
    let (c, _) = variants().remove(0);
    let d = dir.path().join("bad");
    let path = prepared::write(&d, &c.grid, None, 4).unwrap();
    let mut b = std::fs::read(&path).unwrap();
    b[84..88].copy_from_slice(&6u32.to_le_bytes());
    let crc = crc32fast::hash(&b[..96]);
    b[96..100].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let msg = prepared::read(&d).unwrap_err().to_string();
    assert!(
        msg.contains(GRID_FILE) && msg.contains("6 bytes per edge"),
        "{msg}"
    );
}
