//! Readahead of the paged (Fastswap-like) baseline changes timing and
//! counters only: every algorithm gives the reference result with any
//! window and cache size, and every page the engine sees came from a
//! charged READ (a demand fault or a readahead).

mod common;

use common::{check, small_graphs};
use locus_analytics::algo::{self, Algo, Params};
use locus_analytics::engine::{Engine, EngineConfig};
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::far::FarConfig;
use locus_analytics::store::paged::{PagedStore, READAHEAD_PAGES_MAX};
use locus_analytics::store::{Backend, PAGE_BYTES};
use locus_analytics::{local_fabric, server, Order};
use locus_fabric::local::{LocalConfig, LocalFabric};

fn fast_fabric() -> LocalFabric {
    LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap()
}

#[test]
fn readahead_changes_no_result_with_any_window_or_cache() {
    for g in small_graphs() {
        let fabric = fast_fabric();
        for algo in Algo::ALL {
            let mut digests = Vec::new();
            for window in [0, 1, 8, 33] {
                for cache_bytes in [PAGE_BYTES, 3 * PAGE_BYTES, 1 << 20] {
                    let store = server::with_server(&fabric, 1, u64::MAX, || {
                        PagedStore::new(
                            fabric.clone(),
                            &g.grid,
                            &Order::ALL,
                            cache_bytes,
                            FarConfig::default(),
                            window,
                        )
                    })
                    .unwrap();
                    for (threads, buffering) in [(1, false), (2, true)] {
                        let engine =
                            Engine::new(&store, EngineConfig { threads, buffering }).unwrap();
                        let params = Params::default();
                        let r = algo::run(&engine, algo, g.grid.out_degree(), &params).unwrap();
                        check(&g, &r.output, &params);
                        digests.push(r.output.digest());
                        let st = engine.stream_stats();
                        // Every fetched byte is a whole page from one READ.
                        assert_eq!(st.fetch_ops, st.page_faults + st.readahead_pages);
                        assert_eq!(st.bytes_fetched, st.fetch_ops * PAGE_BYTES);
                        if window == 0 {
                            assert_eq!(st.readahead_pages, 0);
                        }
                    }
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
fn readahead_turns_sequential_faults_into_hits() {
    // PageRank streams every block each iteration; with the latency model on
    // readahead READs are really in flight when their pages are touched.
    let g = common::rmat(11, 7, Some(4));
    let mut faults = Vec::new();
    for window in [0u32, 8] {
        let fabric = local_fabric().unwrap();
        let mut cfg = RunConfig::new(Algo::PageRank, Backend::Paged, 0.9);
        cfg.engine.threads = 2;
        cfg.readahead_pages = window;
        cfg.params.iterations = 3;
        let (report, result, _) = run(&g.grid, Some(&fabric), &cfg, None).unwrap();
        check(&g, &result.output, &cfg.params);
        assert_eq!(report.readahead_window, window);
        assert_eq!(
            report.fetch_ops,
            report.page_faults + report.readahead_pages
        );
        if window == 0 {
            assert_eq!(report.readahead_pages, 0);
        } else {
            assert!(report.readahead_pages > 0, "{report:?}");
        }
        faults.push(report.page_faults);
    }
    // The edge stream is sequential within a segment: most faults of the
    // demand-only run become readahead hits (at least half of them).
    assert!(
        faults[1] * 2 < faults[0],
        "faults without/with readahead: {faults:?}"
    );
}

#[test]
fn a_window_beyond_the_maximum_is_refused() {
    let g = common::rmat(6, 1, Some(2));
    let fabric = fast_fabric();
    let err = server::with_server(&fabric, 1, u64::MAX, || {
        PagedStore::new(
            fabric.clone(),
            &g.grid,
            &[Order::Column],
            PAGE_BYTES,
            FarConfig::default(),
            READAHEAD_PAGES_MAX + 1,
        )
    })
    .err()
    .expect("refused");
    assert!(err.to_string().contains("readahead_pages"), "{err}");
}
