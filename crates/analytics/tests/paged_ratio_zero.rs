//! The paged baseline at far ratio 0 holds its whole region (issue 63,
//! requirement 1): its cache is the edge bytes rounded up to whole pages, so
//! each edge page is fetched at most once however many passes a run makes.
//! With the cache one page short, LRU over a cyclic scan misses on every
//! page of every pass (PageRank fetched 155 MB for 16.8 MB of edges).

mod common;

use common::rmat;
use locus_analytics::algo::Algo;
use locus_analytics::engine::EngineConfig;
use locus_analytics::run::{paged_cache_bytes, run, RunConfig};
use locus_analytics::store::far::segment_bytes_for;
use locus_analytics::store::{Backend, CHUNK_BYTES_DEFAULT, PAGE_BYTES};
use locus_fabric::local::{LocalConfig, LocalFabric};

#[test]
fn each_edge_page_is_fetched_at_most_once_at_ratio_zero() {
    let g = rmat(14, 5, None);
    let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
    for algo in [Algo::PageRank, Algo::Wcc, Algo::Bfs] {
        for readahead in [0, 8] {
            let cfg = RunConfig {
                engine: EngineConfig {
                    threads: 1,
                    buffering: false,
                },
                readahead_pages: readahead,
                ..RunConfig::new(algo, Backend::Paged, 0.0)
            };
            let (r, _, _) = run(&g.grid, Some(&fabric), &cfg, None).unwrap();
            let edge_bytes = r.remote_edge_bytes;
            // The graph must make the old sizing fail: edges not a page
            // multiple, and more than the fetch-buffer floor of the cache.
            assert_ne!(
                edge_bytes % PAGE_BYTES,
                0,
                "pick a graph whose edges end mid-page"
            );
            let floor = 2 * segment_bytes_for(CHUNK_BYTES_DEFAULT);
            assert!(
                edge_bytes > floor,
                "{edge_bytes} B of edges is under the floor"
            );
            let region = edge_bytes.next_multiple_of(PAGE_BYTES);
            assert!(
                r.bytes_fetched <= region,
                "{algo:?} readahead {readahead}: fetched {} B for {region} B of edge pages \
                 ({} iterations)",
                r.bytes_fetched,
                r.iterations
            );
            assert!(
                r.page_cache_bytes >= region,
                "{algo:?}: cache {} B < region {region} B",
                r.page_cache_bytes
            );
            assert_eq!(
                paged_cache_bytes(&g.grid, &cfg).unwrap(),
                r.page_cache_bytes
            );
            assert_eq!(r.far_ratio_achieved, 0.0);
        }
    }
}
