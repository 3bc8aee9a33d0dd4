//! Micro-benchmarks of the router's per-packet work (NetMigrate 4.3: a constant number of filter
//! probes, whatever the filter size) and of the wire encoding.
//! `cargo bench -p locus-kvmigrate`; system-level figures: the measurement driver.

use criterion::{criterion_group, criterion_main, Criterion};
use locus_kvmigrate::wire::{Body, Packet, RouterMode};
use locus_kvmigrate::{Geometry, Router, RouterConfig};

fn router(bf_bytes: usize) -> Router {
    let mut r = Router::new(RouterConfig {
        bf_bytes,
        cbf_bytes: bf_bytes,
        ..RouterConfig::default()
    })
    .expect("router");
    let geometry = Geometry::new(20, 11).expect("geometry");
    r.on_packet(Packet {
        from: 1,
        shard: 1,
        seq: 0,
        flags: 0,
        body: Body::Register {
            src: 1,
            dst: 2,
            mode: RouterMode::Filters,
            geometry,
        },
    });
    for group in 0..200 {
        r.on_packet(Packet {
            from: 1,
            shard: 1,
            seq: 0,
            flags: 0,
            body: Body::GroupStart { group },
        });
    }
    r
}

fn benches(c: &mut Criterion) {
    for bytes in [64, 512 << 10] {
        let mut r = router(bytes);
        let mut key = 0u64;
        c.bench_function(&format!("route GET (filters {bytes} B)"), |b| {
            b.iter(|| {
                key = key.wrapping_add(0x9e37_79b9);
                r.on_packet(Packet {
                    from: 9,
                    shard: 1,
                    seq: 1,
                    flags: 0,
                    body: Body::Get { key },
                })
            })
        });
    }
    let p = Packet {
        from: 9,
        shard: 1,
        seq: 1,
        flags: 0,
        body: Body::Set {
            key: 7,
            value: vec![0; 64],
        },
    };
    let mut buf = Vec::new();
    c.bench_function("encode+decode SET 64 B", |b| {
        b.iter(|| {
            p.encode(&mut buf).expect("encode");
            Packet::decode(&buf).expect("decode")
        })
    });
}

criterion_group!(router_benches, benches);
criterion_main!(router_benches);
