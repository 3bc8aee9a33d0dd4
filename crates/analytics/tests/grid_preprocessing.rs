//! Grid preprocessing (GridGraph 3, Fargraph+ 5.3): both orders hold exactly
//! the input edges, every block holds exactly its range's edges (row order in
//! input order, column order sorted by destination then source), offsets and
//! degrees are right, and bad input is rejected whole with its position.

mod common;

use std::io::Write;

use locus_analytics::grid::Order;
use locus_analytics::{AnalyticsError, GraphInput, Grid};
use locus_graph::{Edge, LoadOptions};

fn edges_of(grid: &Grid, order: Order, pos: usize) -> Vec<Edge> {
    grid.block_edges(order, pos)
}

fn check_grid(vertices: u64, edges: &[Edge], grid: &Grid) {
    let shape = grid.shape();
    assert_eq!(grid.edge_count(), edges.len() as u64);
    let mut want = edges.to_vec();
    want.sort_unstable();
    for order in Order::ALL {
        let off = grid.offsets(order);
        assert_eq!(off.len(), shape.blocks() + 1);
        assert_eq!(off[0], 0);
        assert_eq!(*off.last().unwrap(), edges.len() as u64);
        assert!(off.windows(2).all(|w| w[0] <= w[1]));
        let mut all = Vec::new();
        for pos in 0..shape.blocks() {
            let (i, j) = shape.block_at(order, pos);
            let block = edges_of(grid, order, pos);
            for &(s, d) in &block {
                assert!(
                    shape.range(i).contains(&u64::from(s)),
                    "{order:?} ({i},{j}) holds src {s}"
                );
                assert!(
                    shape.range(j).contains(&u64::from(d)),
                    "{order:?} ({i},{j}) holds dst {d}"
                );
            }
            // Row order keeps input order within a block; column order sorts
            // it by (source stripe, destination, source).
            let mut expected: Vec<Edge> = edges
                .iter()
                .copied()
                .filter(|&(s, d)| {
                    shape.range(i).contains(&u64::from(s)) && shape.range(j).contains(&u64::from(d))
                })
                .collect();
            let lo = shape.range(i).start;
            let stripe = |s: u32| (u64::from(s) - lo) / grid.stripe_ids();
            if order == Order::Column {
                expected.sort_unstable_by_key(|&(s, d)| (stripe(s), d, s));
                // Every stripe's offsets delimit exactly its sources' edges.
                let so = grid.stripe_offsets();
                let per = grid.stripes() as usize;
                let base = so[pos * per];
                assert_eq!(base, off[pos]);
                assert_eq!(so[pos * per + per], off[pos + 1]);
                for t in 0..per {
                    let (a, b) = (so[pos * per + t] - base, so[pos * per + t + 1] - base);
                    for &(s, _) in &block[a as usize..b as usize] {
                        assert_eq!(stripe(s), t as u64, "({i},{j}) stripe {t} holds src {s}");
                    }
                }
            }
            assert_eq!(block, expected, "{order:?} ({i},{j})");
            all.extend(block);
        }
        all.sort_unstable();
        assert_eq!(all, want, "{order:?} holds the input edges");
    }
    let mut deg = vec![0u32; vertices as usize];
    for &(s, _) in edges {
        deg[s as usize] += 1;
    }
    assert_eq!(grid.out_degree(), &deg[..]);
}

#[test]
fn both_orders_hold_every_edge_in_its_block() {
    for g in common::small_graphs() {
        check_grid(g.vertices as u64, &g.edges, &g.grid);
    }
    let g = common::rmat(11, 9, None);
    assert_eq!(g.grid.shape().partitions, 8, "automatic P on a small graph");
    check_grid(g.vertices as u64, &g.edges, &g.grid);
    for p in [1, 2, 7, 64] {
        let grid = Grid::build(
            GraphInput::Edges {
                vertex_count: g.vertices as u64,
                edges: &g.edges,
            },
            Some(p),
        )
        .unwrap();
        assert_eq!(grid.shape().partitions, p);
        check_grid(g.vertices as u64, &g.edges, &grid);
    }
    // Striped column blocks: several stripe widths, one stripe per block.
    for (p, ids) in [(1, 3), (2, 64), (7, 5), (4, u64::MAX)] {
        let grid = Grid::build_striped(
            GraphInput::Edges {
                vertex_count: g.vertices as u64,
                edges: &g.edges,
            },
            Some(p),
            ids,
        )
        .unwrap();
        let width = grid.shape().width;
        assert_eq!(grid.stripes() as u64, width.div_ceil(ids.min(width)));
        check_grid(g.vertices as u64, &g.edges, &grid);
    }
}

#[test]
fn rmat_input_equals_its_edge_list() {
    let g = common::rmat(10, 4, Some(4));
    let rmat = locus_graph::Rmat::new(locus_graph::RmatConfig {
        scale: 10,
        seed: 4,
        ..Default::default()
    })
    .unwrap();
    let direct = Grid::build(GraphInput::Rmat(&rmat), Some(4)).unwrap();
    for o in Order::ALL {
        assert_eq!(direct.bytes(o), g.grid.bytes(o));
        assert_eq!(direct.offsets(o), g.grid.offsets(o));
    }
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p
}

#[test]
fn bad_input_names_the_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LoadOptions::default();
    // Text: the third line is bad.
    let p = write(&dir, "bad.txt", b"0 1\n1 2\n2 x\n3 4\n");
    let e = Grid::load(&p, None, &opts, None).unwrap_err();
    assert!(matches!(e, AnalyticsError::Graph(_)));
    let msg = e.to_string();
    assert!(msg.contains("bad.txt:3"), "{msg}");
    // Binary: 2 records and 5 stray bytes: truncated at byte offset 16.
    let mut bin = Vec::new();
    for x in [0u32, 1, 1, 2] {
        bin.extend_from_slice(&x.to_le_bytes());
    }
    bin.extend_from_slice(&[1, 2, 3, 4, 5]);
    let p = write(&dir, "cut.bin", &bin);
    let msg = Grid::load(&p, None, &opts, None).unwrap_err().to_string();
    assert!(
        msg.contains("cut.bin") && msg.contains("byte offset 16"),
        "{msg}"
    );
    // A vertex at or past the given count.
    let p = write(&dir, "big.txt", b"0 1\n1 9\n");
    let small = LoadOptions {
        vertex_count: Some(5),
        ..LoadOptions::default()
    };
    let msg = Grid::load(&p, None, &small, None).unwrap_err().to_string();
    assert!(msg.contains("big.txt:2"), "{msg}");
    // No edges at all.
    let p = write(&dir, "empty.txt", b"# nothing\n");
    assert!(Grid::load(&p, None, &opts, None).is_err());
    // Bad partition counts.
    let p = write(&dir, "ok.txt", b"0 1\n");
    let msg = Grid::load(&p, None, &opts, Some(0))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("partitions"), "{msg}");
    // Edges naming vertices outside the count given to the builder.
    let e = Grid::build(
        GraphInput::Edges {
            vertex_count: 3,
            edges: &[(0, 1), (2, 3)],
        },
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("edge 1 (2, 3)"), "{e}");
}
