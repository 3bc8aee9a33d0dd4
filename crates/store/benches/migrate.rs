//! Micro-benchmark of split live migration (Pragh 4.1, 5): `migrate_batch`
//! of 256 small values from machine 1 to machine 0 and back, in process,
//! with the latency model off (the cost of the protocol's own work: lookup,
//! copy, invalidation, CAS, reclaim) and on (2 us remote operations, as the
//! pipelining hides them). `cargo bench -p locus-store --bench migrate`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Key, Store, StoreConfig};

const KEYS: u32 = 256;

fn bench(c: &mut Criterion, name: &str, config: LocalConfig) {
    let store = Store::create(
        LocalFabric::new(config).expect("fabric"),
        StoreConfig {
            buckets_per_machine: 1 << 10,
            value_region_bytes: 256 << 20,
            // Every round trip retires KEYS blocks on each side; a short lease
            // lets the collector below reuse them.
            reclaim_lease_ms: 20,
            cache_lease_ms: 20,
            ..StoreConfig::default()
        },
    )
    .expect("store");
    let _services = store.spawn_services().expect("services");
    // Vertices homed on machine 1, each with 14 neighbours (a 64-byte value).
    let keys: Vec<Key> = (0..KEYS).map(|i| Key::part(i * 2 + 1, 0)).collect();
    let mut w1 = store.worker(1).expect("worker");
    for k in &keys {
        let list: Vec<u32> = (0..14).map(|i| k.vertex() + i).collect();
        w1.put(k.vertex(), &list).expect("put");
    }
    let mut w0 = store.worker(0).expect("worker");
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(2 * KEYS as u64));
    g.bench_function("256 values there and back", |b| {
        b.iter(|| {
            w0.migrate_batch(&keys).expect("migrate here");
            w1.migrate_batch(&keys).expect("migrate back");
        })
    });
    g.finish();
}

/// First migration of freshly loaded values (as `locus bench migrate-speed`
/// measures): every lookup reads the bucket, every copy lands in a new block.
fn cold(c: &mut Criterion) {
    const COLD_KEYS: u32 = 4096;
    let keys: Vec<Key> = (0..COLD_KEYS).map(|i| Key::part(i * 2 + 1, 0)).collect();
    let mut g = c.benchmark_group("migrate_batch, cold, model");
    g.throughput(Throughput::Elements(COLD_KEYS as u64));
    g.sample_size(20);
    g.bench_function("4096 values, once", |b| {
        b.iter_batched(
            || {
                let store = Store::create(
                    LocalFabric::new(LocalConfig {
                        pin_memory: true,
                        ..LocalConfig::with_machines(2)
                    })
                    .expect("fabric"),
                    StoreConfig {
                        buckets_per_machine: 1 << 12,
                        value_region_bytes: 64 << 20,
                        ..StoreConfig::default()
                    },
                )
                .expect("store");
                let mut w1 = store.worker(1).expect("worker");
                for k in &keys {
                    let list: Vec<u32> = (0..14).map(|i| k.vertex() + i).collect();
                    w1.put(k.vertex(), &list).expect("put");
                }
                let w0 = store.worker(0).expect("worker");
                (store, w0)
            },
            |(_store, mut w0)| w0.migrate_batch(&keys).expect("migrate"),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn migrate(c: &mut Criterion) {
    bench(
        c,
        "migrate_batch, no model",
        LocalConfig::with_machines(2).without_model(),
    );
    bench(c, "migrate_batch, model", LocalConfig::with_machines(2));
}

criterion_group!(benches, migrate, cold);
criterion_main!(benches);
