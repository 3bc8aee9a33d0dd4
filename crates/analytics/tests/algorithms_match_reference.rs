//! Every algorithm on every backend gives the reference result (the issue's
//! "done when"), on the shipped real graphs and on R-MAT graphs, with one and
//! two threads, double buffering on and off, and far-memory ratios that put
//! some or all blocks far.

mod common;

use common::{check, small_graphs, Graph};
use locus_analytics::algo::{self, Algo, Params};
use locus_analytics::engine::{Engine, EngineConfig};
use locus_analytics::run::{run, RunConfig};
use locus_analytics::store::disk::DiskStore;
use locus_analytics::store::far::{FarConfig, FarStore};
use locus_analytics::store::paged::PagedStore;
use locus_analytics::store::{Backend, BlockTable, EdgeStore, Residency};
use locus_analytics::{local_fabric, server, Order};
use locus_fabric::local::{LocalConfig, LocalFabric};

/// A 2-machine fabric without the latency model (timing is not checked here).
fn fast_fabric() -> LocalFabric {
    LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap()
}

fn run_on(g: &Graph, store: &dyn EdgeStore, algo: Algo, threads: usize, buffering: bool) -> u64 {
    let engine = Engine::new(store, EngineConfig { threads, buffering }).unwrap();
    let params = Params::default();
    let r = algo::run(&engine, algo, g.grid.out_degree(), &params).unwrap();
    check(g, &r.output, &params);
    r.output.digest()
}

#[test]
fn every_backend_through_run() {
    let dir = tempfile::tempdir().unwrap();
    for g in small_graphs() {
        for algo in Algo::ALL {
            let mut digests = Vec::new();
            for backend in Backend::ALL {
                for (ratio, threads) in [(0.0, 1), (0.8, 2), (1.0, 2)] {
                    let fabric = fast_fabric();
                    let mut cfg = RunConfig::new(algo, backend, ratio);
                    cfg.engine.threads = threads;
                    cfg.disk_dir = dir.path().to_path_buf();
                    let (report, result, _) = run(&g.grid, Some(&fabric), &cfg, None).unwrap();
                    check(&g, &result.output, &cfg.params);
                    digests.push(report.digest.clone());
                    if backend == Backend::Far && ratio == 1.0 {
                        assert_eq!(report.resident_edge_bytes, 0, "{}", g.name);
                        assert!(
                            report.bytes_fetched > 0,
                            "{}: nothing came from far memory",
                            g.name
                        );
                    }
                }
            }
            // The engine's update order is fixed: same bits everywhere.
            assert!(
                digests.windows(2).all(|w| w[0] == w[1]),
                "{} {algo:?}: {digests:?}",
                g.name
            );
        }
    }
}

#[test]
fn far_with_tiny_chunks_and_without_buffering() {
    for g in small_graphs() {
        // Both orders, so the store holds more than any one algorithm streams.
        let table_orders = Order::ALL.to_vec();
        let table = BlockTable::new(&g.grid, &table_orders).unwrap();
        let all_far = Residency::all(&table, false);
        let fabric = fast_fabric();
        for chunk_bytes in [8, 64, 4096] {
            let store = server::with_server(&fabric, 1, u64::MAX, || {
                FarStore::new(
                    fabric.clone(),
                    &g.grid,
                    &table_orders,
                    &all_far,
                    FarConfig {
                        chunk_bytes,
                        ..FarConfig::default()
                    },
                )
            })
            .unwrap();
            for algo in Algo::ALL {
                for (threads, buffering) in [(1, false), (2, true), (3, false)] {
                    run_on(&g, &store, algo, threads, buffering);
                }
            }
            let fp = store.footprint();
            assert_eq!(fp.resident_bytes, 0);
            assert_eq!(fp.remote_bytes, g.grid.edge_bytes() * 2);
        }
    }
}

#[test]
fn far_and_disk_with_blocks_split_between_local_and_remote() {
    let dir = tempfile::tempdir().unwrap();
    for g in small_graphs() {
        let orders = Order::ALL.to_vec();
        let table = BlockTable::new(&g.grid, &orders).unwrap();
        // Whole, none, and prefixes that end inside an edge's word, mid-block
        // and one word short of the end, block after block.
        let mut split = Residency::all(&table, false);
        let mut kept = 0;
        for (i, (o, p)) in table.blocks().enumerate() {
            let len = table.block_len(o, p);
            let want = match i % 5 {
                0 => len,
                1 => 0,
                2 => 12,
                3 => len / 2,
                _ => len.saturating_sub(8),
            };
            kept += split.set_prefix(o, p, want);
        }
        let fabric = fast_fabric();
        let far = server::with_server(&fabric, 1, u64::MAX, || {
            FarStore::new(
                fabric.clone(),
                &g.grid,
                &orders,
                &split,
                FarConfig {
                    chunk_bytes: 16,
                    ..FarConfig::default()
                },
            )
        })
        .unwrap();
        let disk = DiskStore::new(&g.grid, &orders, &split, dir.path()).unwrap();
        for store in [&far as &dyn EdgeStore, &disk] {
            let fp = store.footprint();
            assert_eq!(fp.resident_bytes, kept, "{}", g.name);
            assert_eq!(fp.resident_bytes + fp.remote_bytes, table.total_bytes());
            for algo in Algo::ALL {
                for (threads, buffering) in [(1, false), (2, true)] {
                    run_on(&g, store, algo, threads, buffering);
                }
            }
        }
    }
}

#[test]
fn paged_with_a_one_page_cache_evicts_and_stays_correct() {
    for g in small_graphs() {
        let orders = &Order::ALL;
        let fabric = fast_fabric();
        for cache_bytes in [4096, 3 * 4096] {
            let store = server::with_server(&fabric, 1, u64::MAX, || {
                PagedStore::new(
                    fabric.clone(),
                    &g.grid,
                    orders,
                    cache_bytes,
                    FarConfig::default(),
                    0,
                )
            })
            .unwrap();
            for algo in Algo::ALL {
                run_on(&g, &store, algo, 2, true);
            }
            assert_eq!(store.footprint().page_cache_bytes, cache_bytes);
        }
    }
}

#[test]
fn with_the_latency_model_on() {
    // The default model (2 us + payload / 12.5 GB/s): slower, same answers.
    let g = common::rmat(10, 5, None);
    for backend in [Backend::Far, Backend::Paged] {
        let fabric = local_fabric().unwrap();
        let mut cfg = RunConfig::new(Algo::PageRank, backend, 0.9);
        cfg.engine.threads = 2;
        cfg.params = Params {
            iterations: 3,
            ..Params::default()
        };
        let (report, result, _) = run(&g.grid, Some(&fabric), &cfg, None).unwrap();
        check(&g, &result.output, &cfg.params);
        assert!(report.fetch_ops > 0);
    }
}

#[test]
fn cc_linking_reaches_the_reference_under_any_interleaving() {
    // Trees are linked by compare-and-swap from several threads at once;
    // the roots must still be each component's smallest id.
    for seed in 1..4 {
        let g = common::rmat(12, seed, Some(16));
        let store =
            locus_analytics::store::local::LocalStore::new(&g.grid, Algo::Wcc.orders()).unwrap();
        for threads in [1, 2, 4, 7] {
            run_on(&g, &store, Algo::Wcc, threads, threads % 2 == 0);
        }
    }
}
