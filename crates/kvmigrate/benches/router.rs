//! Micro-benchmarks of the router's per-packet work (NetMigrate 4.3: a constant number of filter
//! probes, whatever the filter size), of the wire encoding, and of the datagram MAC.
//! `cargo bench -p locus-kvmigrate`; system-level figures: the measurement driver.

use criterion::{criterion_group, criterion_main, Criterion};
use locus_kvmigrate::auth::{DatagramKey, Opener, Sealer};
use locus_kvmigrate::wire::{Body, Item, Packet, RouterMode};
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
    // What the datagram MAC adds per packet (`auth`): seal at the sender, open at the
    // receiver, for the SET above and for a full DATA batch (32 items of 64 B). Each iteration
    // also copies the datagram once (tens of ns, next to the HMACs' microsecond).
    let data = Packet {
        from: 1,
        shard: 1,
        seq: 1,
        flags: 0,
        body: Body::Data {
            batch: 1,
            group: 1,
            items: (0..32)
                .map(|key| Item {
                    key,
                    version: 1,
                    value: Some(vec![0; 64]),
                })
                .collect(),
        },
    };
    let key = DatagramKey::from_secret(b"a benchmark secret, 32 bytes ok").expect("key");
    for (name, packet) in [("SET 64 B", &p), ("DATA 32 x 64 B", &data)] {
        let mut sealer = Sealer::starting_at(key.clone(), packet.from, 1);
        let mut opener = Opener::new(key.clone(), 0);
        let mut plain = Vec::new();
        packet.encode(&mut plain).expect("encode");
        c.bench_function(&format!("MAC seal+open {name}"), |b| {
            b.iter(|| {
                let mut d = plain.clone();
                sealer.seal(&mut d);
                opener.open(&d, |_| true).map(<[u8]>::len).expect("opens")
            })
        });
    }
}

criterion_group!(router_benches, benches);
criterion_main!(router_benches);
