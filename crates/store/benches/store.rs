//! Micro-benchmarks of store operations on the in-process fabric (default
//! latency model): local and remote `get` of a 100-neighbour vertex, an edge
//! insert, and a 100 x 100 two-hop. `cargo bench -p locus-store`.

use criterion::{criterion_group, criterion_main, Criterion};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{HopReads, KhopLimits, Store, StoreConfig};

fn ops(c: &mut Criterion) {
    let fabric = LocalFabric::new(LocalConfig::with_machines(8)).expect("fabric");
    let store = Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 1 << 12,
            value_region_bytes: 256 << 20,
            // Updates retire a block per operation; a short lease keeps the
            // region from filling during millions of benchmark iterations.
            reclaim_lease_ms: 100,
            cache_lease_ms: 100,
            ..StoreConfig::default()
        },
    )
    .expect("store");
    // Vertices 0..20000, each with 100 neighbours, put by their home machines.
    let mut workers: Vec<_> = (0..8).map(|m| store.worker(m).expect("worker")).collect();
    for v in 0..20_000u32 {
        let list: Vec<u32> = (1..=100)
            .map(|i| (v.wrapping_mul(7919) + i * 131) % 20_000)
            .collect();
        workers[(v % 8) as usize].put(v, &list).expect("put");
    }
    let w = &mut workers[0];
    let mut out = Vec::with_capacity(10_000);
    c.bench_function("get 100 neighbours, local", |b| {
        b.iter(|| {
            out.clear();
            w.neighbors(8, usize::MAX, &mut out).expect("get")
        })
    });
    c.bench_function(
        "get 100 neighbours, remote (address in the location cache)",
        |b| {
            b.iter(|| {
                out.clear();
                w.neighbors(9, usize::MAX, &mut out).expect("get")
            })
        },
    );
    // Vertex 17 is homed on machine 1; after it migrates to machine 0, a GET
    // on machine 0 finds its address in the location cache and reads it locally.
    w.migrate_vertex(17).expect("migrate");
    c.bench_function("get 100 neighbours, migrated here (cache hit)", |b| {
        b.iter(|| {
            out.clear();
            w.neighbors(17, usize::MAX, &mut out).expect("get")
        })
    });
    let mut n = 0u32;
    c.bench_function("insert + delete edge, local", |b| {
        b.iter(|| {
            n = n.wrapping_add(1);
            w.insert_edge(16, 1_000_000 + n % 64).expect("insert");
            w.delete_edge(16, 1_000_000 + n % 64).expect("delete")
        })
    });
    let mut g = c.benchmark_group("two-hop 100x100, 8 machines");
    g.sample_size(20);
    g.bench_function("one GET at a time", |b| {
        b.iter(|| {
            out.clear();
            w.k_hop(
                8,
                2,
                100,
                HopReads::OneAtATime,
                KhopLimits::default(),
                &mut out,
            )
            .expect("two-hop")
        })
    });
    g.bench_function("second hop pipelined", |b| {
        b.iter(|| {
            out.clear();
            w.k_hop(
                8,
                2,
                100,
                HopReads::Pipelined,
                KhopLimits::default(),
                &mut out,
            )
            .expect("two-hop")
        })
    });
    g.finish();
}

/// A location-cache hit (Pragh 4.2), with the cache holding few or many keys.
fn cache(c: &mut Criterion) {
    use locus_store::cache::{CacheConfig, LocationCache};
    use locus_store::Key;
    for keys in [1u64 << 10, 1 << 20] {
        let cache = LocationCache::new(CacheConfig::default()).expect("cache");
        for k in 0..keys {
            cache.insert(Key(k), k + 1, 0);
        }
        let mut i = 0u64;
        c.bench_function(&format!("location cache hit ({keys} keys)"), |b| {
            b.iter(|| {
                i = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
                cache.get(Key((i >> 17) & (keys - 1)), 1)
            })
        });
    }
}

/// GETs of migrated values whose addresses are location-cache hits, by one
/// and by two workers of one machine at once, with the workers' recent-hit
/// tables on (the lock-free read path) and off (every hit takes the shard's
/// lock). Side by side in one run.
fn cached_gets(c: &mut Criterion) {
    use std::time::Instant;
    let mut g = c.benchmark_group("cache-hit GET of 64 migrated values (8 neighbours)");
    for recent in [false, true] {
        let fabric = LocalFabric::new(LocalConfig::with_machines(8)).expect("fabric");
        let store = Store::create(
            fabric,
            StoreConfig {
                buckets_per_machine: 1 << 12,
                value_region_bytes: 64 << 20,
                cache_recent_hits: recent,
                ..StoreConfig::default()
            },
        )
        .expect("store");
        let mut w0 = store.worker(0).expect("worker");
        let keys: Vec<u32> = (0..512u32).filter(|v| v % 8 != 0).take(64).collect();
        for &v in &keys {
            let mut w = store.worker((v % 8) as u8).expect("worker");
            w.put(v, &(0..8).collect::<Vec<u32>>()).expect("put");
            w0.migrate_vertex(v).expect("migrate");
        }
        let name = if recent { "recent table" } else { "shard lock" };
        for threads in [1usize, 2] {
            g.bench_function(format!("{name}, {threads} worker(s)"), |b| {
                b.iter_custom(|iters| {
                    let t0 = Instant::now();
                    std::thread::scope(|s| {
                        for t in 0..threads {
                            let store = &store;
                            let keys = &keys;
                            s.spawn(move || {
                                let mut w = store.worker(0).expect("worker");
                                let mut out = Vec::with_capacity(8);
                                for i in 0..iters as usize {
                                    out.clear();
                                    let v = keys[(i * 7 + t * 13) % keys.len()];
                                    w.neighbors(v, usize::MAX, &mut out).expect("get");
                                }
                            });
                        }
                    });
                    // Time per GET of the machine as a whole.
                    t0.elapsed() / threads as u32
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, ops, cache, cached_gets);
criterion_main!(benches);
