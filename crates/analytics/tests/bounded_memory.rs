//! Requirement 6 of issue 12: a run is refused before anything sized by the
//! vertex count is allocated when its estimate exceeds the limit, with an
//! error naming the file and line of the largest id; `compact_ids` numbers
//! only the vertices present, and its results match the reference on the
//! compacted graph and map back to the input's ids.

mod common;

use common::data;
use locus_analytics::algo::{self, Algo, Output, Params};
use locus_analytics::input::{load_graph, rmat_graph, LoadLimits};
use locus_analytics::store::local::LocalStore;
use locus_analytics::{reference, AnalyticsError, EdgeStore, Engine, EngineConfig};
use locus_graph::{LoadOptions, Rmat, RmatConfig};

const GIB: u64 = 1 << 30;

fn limits(memory_bytes_max: u64, compact_ids: bool) -> LoadLimits {
    LoadLimits {
        memory_bytes_max,
        compact_ids,
        window_bytes: 4,
        window_cache: locus_analytics::grid::WindowCache::L2,
        stripe_ids: locus_analytics::grid::NO_STRIPES,
        edge_layout: locus_analytics::grid::LayoutChoice::Auto,
        symmetrize: false,
    }
}

#[test]
fn one_edge_with_a_huge_id_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.txt");
    std::fs::write(&path, "# one edge\n\n0 4294967293\n").unwrap();
    for algo in Algo::ALL {
        let err = load_graph(
            &path,
            None,
            &LoadOptions::default(),
            None,
            algo,
            limits(4 * GIB, false),
        )
        .unwrap_err();
        assert!(matches!(err, AnalyticsError::MemoryLimit { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("huge.txt' line 3"), "{msg}");
        assert!(msg.contains("vertex 4294967293"), "{msg}");
        assert!(msg.contains("4.0 GiB"), "{msg}");
        assert!(msg.contains("--compact-ids"), "{msg}");
    }
    // A given vertex count is named as the cause instead.
    let opts = LoadOptions {
        vertex_count: Some(4_000_000_000),
        ..LoadOptions::default()
    };
    let small = dir.path().join("small.txt");
    std::fs::write(&small, "0 1\n").unwrap();
    let msg = load_graph(&small, None, &opts, None, Algo::Bfs, limits(GIB, false))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("vertex count 4000000000"), "{msg}");
}

#[test]
fn compacted_ids_just_work_and_map_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.txt");
    std::fs::write(&path, "0 4294967293\n").unwrap();
    let l = load_graph(
        &path,
        None,
        &LoadOptions::default(),
        None,
        Algo::Wcc,
        limits(GIB, true),
    )
    .unwrap();
    assert_eq!(l.grid.vertex_count(), 2);
    let ids = l.ids.as_ref().unwrap();
    assert_eq!(ids.originals(), &[0, 4_294_967_293]);
    assert!(l.estimate.total_bytes < GIB);
}

#[test]
fn a_sparse_real_graph_compacted_matches_the_reference() {
    // karate's ids spread over 0..33 * 1000003: the same graph, sparse ids.
    let list = locus_graph::input::load(data("karate.txt"), None, &LoadOptions::default()).unwrap();
    let spread = |v: u32| v * 1_000_003;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.txt");
    let text: String = list
        .edges
        .iter()
        .map(|&(s, d)| format!("{} {}\n", spread(s), spread(d)))
        .collect();
    std::fs::write(&path, text).unwrap();
    for algo in Algo::ALL {
        let l = load_graph(
            &path,
            None,
            &LoadOptions::default(),
            Some(3),
            algo,
            limits(GIB, true),
        )
        .unwrap();
        let ids = l.ids.unwrap();
        assert_eq!(ids.len(), 34);
        for v in 0..34u32 {
            assert_eq!(ids.original(v), spread(v));
        }
        let store = LocalStore::new(&l.grid, algo.orders()).unwrap();
        assert_eq!(l.grid.edge_count(), 78);
        assert_eq!(
            store.table().total_bytes(),
            l.grid.edge_bytes() * algo.orders().len() as u64
        );
        let engine = Engine::new(&store, EngineConfig::default()).unwrap();
        // f64: compared with the f64 reference at 1e-9.
        let params = Params {
            precision: locus_analytics::Precision::F64,
            ..Params::default()
        };
        let out = algo::run(&engine, algo, l.grid.out_degree(), &params)
            .unwrap()
            .output;
        // Compaction is monotone and karate names every id, so the run is
        // the run on karate itself.
        match out {
            Output::Bfs { root, depth, .. } => {
                assert_eq!(depth, reference::bfs_depth(34, &list.edges, root))
            }
            Output::Wcc { label } => assert_eq!(label, reference::wcc(34, &list.edges)),
            Output::PageRank { rank } => {
                let want = reference::pagerank(34, &list.edges, params.iterations);
                for (a, b) in rank.iter().zip(&want) {
                    assert!((a - b).abs() <= 1e-12 + 1e-9 * b, "{a} vs {b}");
                }
            }
            Output::Radii { radius, .. } => {
                assert_eq!(radius, reference::radii(34, &list.edges, params.seed))
            }
            other => panic!("{algo:?} is not one of Algo::ALL's: {other:?}"),
        }
    }
}

#[test]
fn rmat_is_checked_before_it_is_generated() {
    // Scale 30: 2^30 vertices, 2^34 edges, far over 1 GiB; refused at once.
    let rmat = Rmat::new(RmatConfig {
        scale: 30,
        ..RmatConfig::default()
    })
    .unwrap();
    let msg = rmat_graph(&rmat, None, Algo::Bfs, limits(GIB, false))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("R-MAT with 1073741824 vertices"), "{msg}");
    let small = Rmat::new(RmatConfig {
        scale: 8,
        ..RmatConfig::default()
    })
    .unwrap();
    let l = rmat_graph(&small, None, Algo::Bfs, limits(GIB, true)).unwrap();
    // R-MAT leaves some ids without edges; compaction drops them.
    assert!(l.grid.vertex_count() < 256, "{}", l.grid.vertex_count());
    assert_eq!(l.grid.edge_count(), 256 * 16);
}
