//! Requirement 5 of issue 12: per-vertex results written as text and as
//! binary read back equal to the references, for every algorithm, on the
//! shipped real graphs and R-MAT.

mod common;

use common::{small_graphs, Graph};
use locus_analytics::algo::{self, Algo, Output, Params, UNREACHED};
use locus_analytics::results::{self, ResultFormat, Values};
use locus_analytics::store::local::LocalStore;
use locus_analytics::{reference, Engine, EngineConfig};

fn output(g: &Graph, algo: Algo, params: &Params) -> Output {
    let store = LocalStore::new(&g.grid, algo.orders()).unwrap();
    let engine = Engine::new(&store, EngineConfig::default()).unwrap();
    algo::run(&engine, algo, g.grid.out_degree(), params)
        .unwrap()
        .output
}

/// The reference's per-vertex values, as the file must hold them.
fn reference_values(g: &Graph, algo: Algo, out: &Output, params: &Params) -> Values {
    let n = g.vertices;
    let rows = |xs: Vec<u32>| {
        Values::U32(
            xs.into_iter()
                .enumerate()
                .map(|(v, x)| (v as u32, x))
                .collect(),
        )
    };
    match (algo, out) {
        // Depths from the reference; parents are not unique, so the run's
        // (whose validity `common::check` tests) must come back as written.
        (Algo::Bfs, Output::Bfs { root, parent, .. }) => Values::U32Pair(
            reference::bfs_depth(n, &g.edges, *root)
                .into_iter()
                .zip(parent)
                .enumerate()
                .map(|(v, (d, &p))| (v as u32, d, p))
                .collect(),
        ),
        (Algo::Wcc, _) => rows(reference::wcc(n, &g.edges)),
        (Algo::Radii, _) => rows(reference::radii(n, &g.edges, params.seed)),
        (Algo::PageRank, _) => Values::F64(
            reference::pagerank(n, &g.edges, params.iterations)
                .into_iter()
                .enumerate()
                .map(|(v, x)| (v as u32, x))
                .collect(),
        ),
        _ => unreachable!("output of another algorithm"),
    }
}

#[test]
fn written_results_equal_the_references() {
    let dir = tempfile::tempdir().unwrap();
    // f64: compared with the f64 reference at 1e-9.
    let params = Params {
        precision: locus_analytics::Precision::F64,
        ..Params::default()
    };
    for g in small_graphs() {
        for algo in Algo::ALL {
            let out = output(&g, algo, &params);
            let want = reference_values(&g, algo, &out, &params);
            for fmt in [ResultFormat::Text, ResultFormat::Binary] {
                let path = dir.path().join(format!("{}-{}", g.name, algo.name()));
                let n = results::write(&path, fmt, &out, None).unwrap();
                assert_eq!(n, g.vertices as u64);
                let got = results::read(&path, algo).unwrap();
                match (&got, &want) {
                    (Values::F64(a), Values::F64(b)) => {
                        assert_eq!(a.len(), b.len());
                        for (&(va, x), &(vb, y)) in a.iter().zip(b) {
                            assert_eq!(va, vb);
                            assert!(
                                (x - y).abs() <= 1e-12 + 1e-9 * y,
                                "{}: {va}: {x} vs {y}",
                                g.name
                            );
                        }
                        // Text keeps every bit of the f64 the run computed.
                        let Output::PageRank { rank } = &out else {
                            unreachable!()
                        };
                        assert!(a.iter().zip(rank).all(|(&(_, x), &r)| x == r));
                    }
                    _ => assert_eq!(got, want, "{} {algo:?} {fmt:?}", g.name),
                }
            }
        }
    }
}

#[test]
fn text_is_vertex_value_lines_with_minus_one_for_unreached() {
    let dir = tempfile::tempdir().unwrap();
    let g = common::shipped("dangling.txt", Some(12), Some(5));
    let params = Params {
        root: Some(0),
        ..Params::default()
    };
    let out = output(&g, Algo::Bfs, &params);
    let Output::Bfs { depth, parent, .. } = &out else {
        unreachable!()
    };
    assert!(
        depth.contains(&UNREACHED),
        "the test needs an unreached vertex"
    );
    let path = dir.path().join("bfs.txt");
    results::write(&path, ResultFormat::Text, &out, None).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 12);
    for (v, line) in lines.iter().enumerate() {
        let want = if depth[v] == UNREACHED {
            "-1 -1".to_string()
        } else {
            format!("{} {}", depth[v], parent[v])
        };
        assert_eq!(*line, format!("{v} {want}"));
    }
    // Binary: the 24-byte header, then 12-byte records (vertex, depth, parent).
    let bin = dir.path().join("bfs.bin");
    results::write(&bin, ResultFormat::Binary, &out, None).unwrap();
    let bytes = std::fs::read(&bin).unwrap();
    assert_eq!(&bytes[..8], b"LOCUSRES");
    assert_eq!(bytes.len(), results::HEADER_BYTES + 12 * 12);
    assert_eq!(bytes[11], 3, "the u32-pair value kind");
    assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), 12);
}
