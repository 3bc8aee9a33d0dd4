//! A prepared grid (`analytics prepare`) reads back as the grid it was
//! written from, runs give the same results, and a corrupt, truncated or
//! other-version file is refused naming the file and what is wrong.

mod common;

use common::{check, small_graphs};
use locus_analytics::algo::{self, Algo, Params};
use locus_analytics::engine::{Engine, EngineConfig};
use locus_analytics::grid::Order;
use locus_analytics::input::IdMap;
use locus_analytics::prepared::{self, GRID_FILE, HEADER_BYTES};
use locus_analytics::store::local::LocalStore;
use locus_analytics::{GraphInput, Grid};

fn same_grid(a: &Grid, b: &Grid) {
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.edge_count(), b.edge_count());
    assert_eq!(a.out_degree(), b.out_degree());
    assert_eq!(a.stripes(), b.stripes());
    assert_eq!(a.stripe_ids(), b.stripe_ids());
    assert_eq!(a.stripe_offsets(), b.stripe_offsets());
    for o in Order::ALL {
        assert_eq!(a.offsets(o), b.offsets(o));
        assert_eq!(a.bytes(o), b.bytes(o));
    }
}

#[test]
fn a_prepared_grid_reads_back_and_runs_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut graphs = small_graphs();
    graphs.push(common::rmat(11, 3, None));
    for g in graphs {
        let d = dir.path().join(&g.name);
        prepared::write(&d, &g.grid, None, 4).unwrap();
        let (back, ids, header) = prepared::read(&d).unwrap();
        assert!(ids.is_none());
        assert_eq!(header.vertices, g.vertices as u64);
        same_grid(&g.grid, &back);
        for algo in Algo::ALL {
            let store = LocalStore::new(&back, algo.orders()).unwrap();
            let engine = Engine::new(&store, EngineConfig::default()).unwrap();
            let params = Params::default();
            let r = algo::run(&engine, algo, back.out_degree(), &params).unwrap();
            check(&g, &r.output, &params);
        }
    }
    // Compacted ids travel with the grid.
    let grid = Grid::build(
        GraphInput::Edges {
            vertex_count: 2,
            edges: &[(0, 1)],
        },
        None,
    )
    .unwrap();
    let ids = IdMap::from_originals(vec![7, 4_000_000_000]).unwrap();
    let d = dir.path().join("compacted");
    prepared::write(&d, &grid, Some(&ids), 8).unwrap();
    let (back, got, h) = prepared::read(&d).unwrap();
    same_grid(&grid, &back);
    assert_eq!(got, Some(ids));
    assert_eq!(h.value_bytes, 8);
}

#[test]
fn damage_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let g = common::rmat(8, 1, Some(3));
    let d = dir.path().join("p");
    let path = prepared::write(&d, &g.grid, None, 4).unwrap();
    assert_eq!(path, d.join(GRID_FILE));
    let good = std::fs::read(&path).unwrap();
    let refused = |bytes: &[u8], want: &str| {
        std::fs::write(&path, bytes).unwrap();
        let msg = prepared::read(&d).expect_err("refused").to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains(want), "{want}: {msg}");
    };
    // A flipped edge byte.
    let mut b = good.clone();
    let at = b.len() - 100;
    b[at] ^= 0x10;
    refused(&b, "payload's checksum");
    // Truncated.
    refused(&good[..good.len() - 8], "truncated");
    refused(&good[..40], "shorter than");
    // Another format version.
    let mut b = good.clone();
    b[8] = 9;
    refused(&b, "format version 9");
    // A header field changed without its checksum.
    let mut b = good.clone();
    b[32] ^= 1;
    refused(&b, "header's checksum");
    // Not a prepared grid.
    let mut b = good.clone();
    b[0] = b'X';
    refused(&b, "magic");
    // The original reads again; a missing directory is an open error naming it.
    std::fs::write(&path, &good).unwrap();
    assert!(prepared::read(&d).is_ok());
    let msg = prepared::read(&dir.path().join("none"))
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("none") && msg.contains(GRID_FILE), "{msg}");
    assert!(good.len() > HEADER_BYTES);
}
