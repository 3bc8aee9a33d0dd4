//! Stress with real threads: every hot value migrates back and forth between
//! machines while readers traverse and writers insert and delete edges from
//! any machine (check-and-forward). Readers must only ever see well-formed
//! lists; the final state must equal the reference, on the in-process fabric
//! (latency model off and on) and on TCP.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::tcp::{loopback_cluster, TcpFabric};
use locus_fabric::Fabric;
use locus_store::{home_of, Key, Migration, Store, StoreConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MACHINES: usize = 4;
const VERTICES: u32 = 32;
const WRITERS: u32 = 2;
const PAIRS_PER_WRITER: u32 = 40;

fn config() -> StoreConfig {
    StoreConfig {
        buckets_per_machine: 64,
        value_region_bytes: 32 << 20,
        part_neighbors_max: 4, // hot vertices span several parts
        reclaim_lease_ms: 50,
        // Live migrators on a loaded machine may wait out many time slices:
        // a read gives up only after a minute, not two (short) leases.
        read_stall_ms: 60_000,
        cache_lease_ms: 50,
        ..StoreConfig::default()
    }
}

/// Neighbour ids that writer `w` owns for vertex `v`: disjoint from the base list and other writers.
fn owned(w: u32, v: u32) -> impl Iterator<Item = u32> {
    (0..PAIRS_PER_WRITER / 4).map(move |i| 10_000 + v * 1000 + w * 100 + i)
}

fn base(v: u32) -> Vec<u32> {
    (0..(v % 7 + 1)).map(|i| (v + i + 1) % VERTICES).collect()
}

/// `node(m)` gives the store of the process hosting machine m.
fn run<F: Fabric>(node: &(dyn Fn(usize) -> Store<F> + Sync), seed: u64) {
    for v in 0..VERTICES {
        let home = home_of(v, MACHINES) as usize;
        node(home)
            .worker(home as u8)
            .unwrap()
            .put(v, &base(v))
            .unwrap();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Writers: each inserts then deletes half of its own pairs, from random machines.
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 100 + w as u64);
                    for v in 0..VERTICES {
                        for (i, u) in owned(w, v).enumerate() {
                            let m = rng.gen_range(0..MACHINES);
                            let mut wk = node(m).worker(m as u8).unwrap();
                            assert!(wk.insert_edge(v, u).unwrap(), "insert {v}->{u} from {m}");
                            if i % 2 == 1 {
                                let m = rng.gen_range(0..MACHINES);
                                let mut wk = node(m).worker(m as u8).unwrap();
                                assert!(wk.delete_edge(v, u).unwrap(), "delete {v}->{u} from {m}");
                            }
                        }
                    }
                })
            })
            .collect();
        // Migrators: move hot vertices around until the writers are done (bounded).
        let migrators: Vec<_> = (0..2u64)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || {
                    let mut moved = 0u32;
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 1000 + t);
                    let mut workers: Vec<_> = (0..MACHINES)
                        .map(|m| node(m).worker(m as u8).unwrap())
                        .collect();
                    for _ in 0..20_000 {
                        // Go on past the writers until this thread has moved
                        // something: on a loaded machine it may not have run yet.
                        if stop.load(Ordering::Relaxed) && moved >= 64 {
                            break;
                        }
                        let v = rng.gen_range(0..8); // the hot set
                        let m = rng.gen_range(0..MACHINES);
                        if t == 0 {
                            moved += workers[m].migrate_vertex(v).unwrap();
                        } else {
                            // Pipelined: the first two parts of a few hot vertices at once.
                            let keys: Vec<Key> = (0..4)
                                .flat_map(|i| {
                                    [Key::part((v + i) % 8, 0), Key::part((v + i) % 8, 1)]
                                })
                                .collect();
                            let out = workers[m].migrate_batch(&keys).unwrap();
                            moved += out
                                .iter()
                                .filter(|o| matches!(o, Migration::Moved { .. }))
                                .count() as u32;
                        }
                        if rng.gen_range(0..16) == 0 {
                            workers[m].collect_garbage().unwrap();
                        }
                    }
                    moved
                })
            })
            .collect();
        // Readers: every list they see is well formed.
        for t in 0..2u64 {
            let stop = &stop;
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 7 + t);
                let mut workers: Vec<_> = (0..MACHINES)
                    .map(|m| node(m).worker(m as u8).unwrap())
                    .collect();
                let mut out = Vec::new();
                for _ in 0..200_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let v = rng.gen_range(0..VERTICES);
                    let m = rng.gen_range(0..MACHINES);
                    out.clear();
                    assert!(
                        workers[m].neighbors(v, usize::MAX, &mut out).unwrap(),
                        "vertex {v} vanished"
                    );
                    let set: BTreeSet<u32> = out.iter().copied().collect();
                    assert_eq!(set.len(), out.len(), "duplicate in {v}: {out:?}");
                    for b in base(v) {
                        assert!(
                            set.contains(&b),
                            "base neighbour {b} of {v} missing: {out:?}"
                        );
                    }
                    assert!(out.iter().all(|&x| x < VERTICES
                        || (10_000 + v * 1000..10_000 + v * 1000 + 1000).contains(&x)));
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        let moved: u32 = migrators.into_iter().map(|m| m.join().unwrap()).sum();
        assert!(moved > 100, "only {moved} parts migrated during the run");
    });
    for v in 0..VERTICES {
        let mut want: BTreeSet<u32> = base(v).into_iter().collect();
        for w in 0..WRITERS {
            want.extend(
                owned(w, v)
                    .enumerate()
                    .filter(|(i, _)| i % 2 == 0)
                    .map(|(_, u)| u),
            );
        }
        for m in 0..MACHINES {
            let got: BTreeSet<u32> = node(m)
                .worker(m as u8)
                .unwrap()
                .get(v)
                .unwrap()
                .unwrap()
                .into_iter()
                .collect();
            assert_eq!(got, want, "final state of {v} read on {m}");
        }
    }
}

fn local(model: bool) {
    let lc = LocalConfig::with_machines(MACHINES);
    let fabric = LocalFabric::new(if model { lc } else { lc.without_model() }).unwrap();
    let store = Store::create(fabric, config()).unwrap();
    let services = store.spawn_services().unwrap();
    run(&|_| store.clone(), 1);
    assert!(services.failure().is_none(), "{:?}", services.failure());
}

#[test]
fn in_process_without_latency_model() {
    local(false);
}

#[test]
fn in_process_with_latency_model() {
    local(true);
}

#[test]
fn over_tcp() {
    let nodes: Vec<TcpFabric> = loopback_cluster(MACHINES).unwrap();
    let stores: Vec<Store<TcpFabric>> = nodes
        .into_iter()
        .map(|f| Store::create(f, config()).unwrap())
        .collect();
    let services: Vec<_> = stores.iter().map(|s| s.spawn_services().unwrap()).collect();
    run(&|m| stores[m].clone(), 2);
    for s in &services {
        assert!(s.failure().is_none(), "{:?}", s.failure());
    }
}
