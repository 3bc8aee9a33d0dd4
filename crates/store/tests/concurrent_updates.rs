//! Real threads: several workers of a vertex's home machine insert edges into
//! the same vertices while workers of other machines read them. Every read
//! must be a valid list (no duplicates, only inserted ids) and the final state
//! must hold every inserted edge exactly once.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{home_of, Store, StoreConfig};

fn run(part_neighbors_max: u32, latency: bool) {
    let machines = 4;
    let mut lc = LocalConfig::with_machines(machines);
    if !latency {
        lc = lc.without_model();
    }
    let fabric = LocalFabric::new(lc).unwrap();
    let config = StoreConfig {
        buckets_per_machine: 16,
        overflow_buckets_per_machine: 64,
        value_region_bytes: 64 << 20,
        part_neighbors_max,
        reclaim_lease_ms: 60_000,
        ..StoreConfig::default()
    };
    let store = Store::create(fabric, config).unwrap();
    let vertices: Vec<u32> = (0..8).map(|i| i * machines as u32).collect(); // all homed on machine 0
    assert!(vertices.iter().all(|&v| home_of(v, machines) == 0));
    let writers = 3u32;
    let per_writer = 60u32;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..writers {
            let mut w = store.worker(0).unwrap();
            let vertices = &vertices;
            s.spawn(move || {
                for i in 0..per_writer {
                    for &v in vertices {
                        assert!(w.insert_edge(v, 1000 + t * per_writer + i).unwrap());
                    }
                }
            });
        }
        for r in 1..machines {
            let mut w = store.worker(r as u8).unwrap();
            let (vertices, stop) = (&vertices, &stop);
            s.spawn(move || {
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for &v in vertices {
                        out.clear();
                        w.neighbors(v, usize::MAX, &mut out).unwrap();
                        let set: BTreeSet<u32> = out.iter().copied().collect();
                        assert_eq!(set.len(), out.len(), "a read saw a duplicate");
                        assert!(out
                            .iter()
                            .all(|&x| (1000..1000 + writers * per_writer).contains(&x)));
                    }
                }
            });
        }
        // Stop the readers once the writers are done (scope joins writers first by order).
        s.spawn(|| {
            let mut w = store.worker(0).unwrap();
            loop {
                let done = vertices.iter().all(|&v| {
                    w.get(v)
                        .unwrap()
                        .is_some_and(|l| l.len() == (writers * per_writer) as usize)
                });
                if done {
                    break;
                }
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    let mut w = store.worker(2).unwrap();
    for &v in &vertices {
        let got: BTreeSet<u32> = w.get(v).unwrap().unwrap().into_iter().collect();
        let want: BTreeSet<u32> = (1000..1000 + writers * per_writer).collect();
        assert_eq!(got, want, "vertex {v}");
    }
}

#[test]
fn single_part_values() {
    run(1 << 16, false);
}

#[test]
fn decomposed_values() {
    run(16, false);
}

#[test]
fn with_the_latency_model() {
    run(1 << 16, true);
}

/// Concurrent `put`s of multi-part lists on one vertex: the result is one of the lists written,
/// never a mix (updates of a vertex are serialised on its holder).
#[test]
fn concurrent_multi_part_puts_do_not_mix() {
    let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
    let config = StoreConfig {
        buckets_per_machine: 16,
        overflow_buckets_per_machine: 64,
        value_region_bytes: 64 << 20,
        part_neighbors_max: 2,
        reclaim_lease_ms: 60_000,
        ..StoreConfig::default()
    };
    let store = Store::create(fabric, config).unwrap();
    let long: Vec<u32> = (1..=7).collect();
    let short: Vec<u32> = vec![9];
    for round in 0..200 {
        std::thread::scope(|s| {
            for list in [&long, &short] {
                let mut w = store.worker(0).unwrap();
                s.spawn(move || w.put(0, list).unwrap());
            }
            let mut w = store.worker(0).unwrap();
            s.spawn(move || {
                let _ = w.insert_edge(0, 100 + round);
            });
        });
        let got = store.worker(1).unwrap().get(0).unwrap().unwrap();
        let base: Vec<u32> = got.iter().copied().filter(|&x| x < 100).collect();
        assert!(
            base == long || base == short,
            "round {round}: {got:?} mixes two puts"
        );
        assert!(got.iter().filter(|&&x| x >= 100).count() <= 1);
    }
}
