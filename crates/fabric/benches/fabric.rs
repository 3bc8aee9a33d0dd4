//! Micro-benchmarks of the in-process fabric: what one operation costs the
//! caller, with the latency model off (pure mechanism) and on (modelled time),
//! and the 8-byte read again through `AnyFabric` (the cost of run-time dispatch).
//! `cargo bench -p locus-fabric`; system-level figures: `locus bench foundation`.

use criterion::{criterion_group, criterion_main, Criterion};
use locus_fabric::any::AnyFabric;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, Port, WorkRequest};

fn fabric(model: bool) -> LocalFabric {
    let c = LocalConfig::with_machines(2);
    LocalFabric::new(if model { c } else { c.without_model() }).expect("config")
}

fn ops(c: &mut Criterion) {
    for model in [false, true] {
        let f = fabric(model);
        let r = f.register(1, "r", 1 << 16).expect("region").id;
        let mut p = f.port(0).expect("port");
        let tag = if model { "model" } else { "no-model" };
        c.bench_function(&format!("remote read 8 B ({tag})"), |b| {
            b.iter(|| p.read_word(1, r, 64).expect("read"))
        });
        // The same read through `AnyFabric`'s dispatch (a fabric chosen at run time).
        let any = AnyFabric::Local(f.clone());
        let mut ap = any.port(0).expect("port");
        c.bench_function(&format!("remote read 8 B via AnyFabric ({tag})"), |b| {
            b.iter(|| ap.read_word(1, r, 64).expect("read"))
        });
        c.bench_function(&format!("remote cas ({tag})"), |b| {
            b.iter(|| p.cas(1, r, 128, 0, 0).expect("cas"))
        });
        let mut done = Vec::with_capacity(64);
        let mut spare: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 8]).collect();
        c.bench_function(&format!("64 pipelined reads ({tag})"), |b| {
            b.iter(|| {
                for i in 0..64u64 {
                    let buf = spare.pop().unwrap_or_else(|| vec![0u8; 8]);
                    p.post(WorkRequest::read_into(i, 1, r, i * 8, buf))
                        .expect("post");
                }
                done.clear();
                while done.len() < 64 {
                    p.wait(&mut done).expect("wait");
                }
                for c in done.drain(..) {
                    if let Ok(Some(b)) = c.result.map(|o| o.into_buf()) {
                        spare.push(b);
                    }
                }
            })
        });
    }
    let f = fabric(true);
    let r = f.register(0, "r", 1 << 16).expect("region").id;
    let mut p = f.port(0).expect("port");
    let mut buf = vec![0u8; 416];
    c.bench_function("local read 416 B", |b| {
        b.iter(|| p.read(0, r, 0, &mut buf).expect("read"))
    });
}

criterion_group!(benches, ops);
criterion_main!(benches);
