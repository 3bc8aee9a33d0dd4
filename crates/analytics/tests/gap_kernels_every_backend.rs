//! The kernels added for issue 63 (`Algo::GAP_EXTRA`) on every backend,
//! far ratio and thread count give the reference result with the same bits
//! everywhere, on the shipped real graphs and an R-MAT (unweighted: SSSP
//! weighs every edge 1 here; `sssp_weighted.rs` has the weights).

mod common;

use common::{check, small_graphs};
use locus_analytics::algo::bc::Sources;
use locus_analytics::algo::Algo;
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::Backend;
use locus_fabric::local::{LocalConfig, LocalFabric};

#[test]
fn every_backend_ratio_and_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    for g in small_graphs() {
        for algo in Algo::GAP_EXTRA {
            let mut digests = Vec::new();
            for backend in Backend::ALL {
                for (ratio, threads) in [(0.0, 1), (0.8, 2), (1.0, 3)] {
                    let fabric =
                        LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
                    let mut cfg = RunConfig::new(algo, backend, ratio);
                    cfg.engine.threads = threads;
                    cfg.disk_dir = dir.path().to_path_buf();
                    if algo == Algo::Bc {
                        cfg.params.sources = Sources::All;
                    }
                    let (report, result, _) = run(&g.grid, Some(&fabric), &cfg, None).unwrap();
                    check(&g, &result.output, &cfg.params);
                    if backend == Backend::Far && ratio == 1.0 {
                        assert!(
                            report.bytes_fetched > 0,
                            "{}: nothing came from far",
                            g.name
                        );
                    }
                    digests.push(report.digest);
                }
            }
            assert!(
                digests.windows(2).all(|w| w[0] == w[1]),
                "{} {algo:?}: {digests:?}",
                g.name
            );
        }
    }
}

#[test]
fn bc_from_a_sample_a_list_and_the_root() {
    let g = common::rmat(9, 3, Some(6));
    for sources in [
        Sources::Sample(5),
        Sources::List(vec![1, 1, 7]),
        Sources::Root,
    ] {
        let mut digests = Vec::new();
        for backend in Backend::ALL {
            let dir = tempfile::tempdir().unwrap();
            let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
            let mut cfg = RunConfig::new(Algo::Bc, backend, 0.8);
            cfg.engine.threads = 2;
            cfg.disk_dir = dir.path().to_path_buf();
            cfg.params.sources = sources.clone();
            let (report, result, _) = run(&g.grid, Some(&fabric), &cfg, None).unwrap();
            check(&g, &result.output, &cfg.params);
            digests.push(report.digest);
        }
        assert!(digests.windows(2).all(|w| w[0] == w[1]), "{sources:?}");
    }
}

#[test]
fn pagerank_stops_at_a_tolerance_with_the_fixed_runs_bits() {
    let g = common::shipped("lesmis.txt", None, Some(4));
    let mut seen = Vec::new();
    for backend in Backend::ALL {
        let dir = tempfile::tempdir().unwrap();
        let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
        let mut cfg = RunConfig::new(Algo::PageRank, backend, 0.8);
        cfg.engine.threads = 2;
        cfg.disk_dir = dir.path().to_path_buf();
        cfg.params.precision = locus_analytics::Precision::F64;
        cfg.params.iterations = 100;
        cfg.params.tolerance = Some(1e-6);
        let (_, result, _) = run(&g.grid, Some(&fabric), &cfg, None).unwrap();
        let it = result.iterations;
        assert!(it > 1 && it < 100, "{backend:?}: {it} iterations");
        // The same bits as a fixed run of that many iterations, and the
        // reference's scores to 1e-9 relative.
        let locus_analytics::algo::Output::PageRank { rank } = &result.output else {
            panic!()
        };
        let mut fixed_cfg = cfg.clone();
        fixed_cfg.params.tolerance = None;
        fixed_cfg.params.iterations = it;
        let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
        let (_, fixed, _) = run(&g.grid, Some(&fabric), &fixed_cfg, None).unwrap();
        assert_eq!(&fixed.output, &result.output, "{backend:?}");
        let want = locus_analytics::reference::pagerank(g.vertices, &g.edges, it);
        let want_before = locus_analytics::reference::pagerank(g.vertices, &g.edges, it - 1);
        for (a, b) in rank.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-12 + 1e-9 * b, "{backend:?}: {a} vs {b}");
        }
        // It stopped at the first iteration under the tolerance: the last
        // step moved the scores by less than it, the one before by more
        // (the run compares its unnormalised ranks, which sum to 1 within
        // 1e-12; the margins here are far wider).
        let step =
            |x: &[f64], y: &[f64]| -> f64 { x.iter().zip(y).map(|(a, b)| (a - b).abs()).sum() };
        assert!(step(&want, &want_before) < 1e-6 + 1e-12, "{backend:?}");
        let before2 = locus_analytics::reference::pagerank(g.vertices, &g.edges, it - 2);
        assert!(step(&want_before, &before2) > 1e-6 - 1e-12, "{backend:?}");
        seen.push(it);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}
