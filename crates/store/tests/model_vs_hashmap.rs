//! Random operation sequences against a plain `HashMap<vertex, Vec<neighbour>>`
//! model, on 1 and 8 machines, with small parts so vertex decomposition is
//! exercised. Updates run on the vertex's home machine (where its value is).

use std::collections::HashMap;

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{home_of, HopReads, KhopLimits, Store, StoreConfig, Worker};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn store(machines: usize, part_neighbors_max: u32) -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap();
    let config = StoreConfig {
        buckets_per_machine: 8, // tiny: forces overflow chains
        overflow_buckets_per_machine: 64,
        value_region_bytes: 8 << 20,
        part_neighbors_max,
        reclaim_lease_ms: 1,
        cache_lease_ms: 1,
        ..StoreConfig::default()
    };
    Store::create(fabric, config).unwrap()
}

fn run(machines: usize, part_neighbors_max: u32, seed: u64) {
    let s = store(machines, part_neighbors_max);
    let mut workers: Vec<Worker<LocalFabric>> =
        (0..machines).map(|m| s.worker(m as u8).unwrap()).collect();
    let mut model: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let vertices = 60u32;
    for step in 0..3000 {
        let v = rng.gen_range(0..vertices);
        let home = home_of(v, machines) as usize;
        let reader = rng.gen_range(0..machines);
        match rng.gen_range(0..11) {
            10 => {
                // Remove the vertex (at its home: this test runs no services).
                let removed = workers[home].delete_vertex(v).unwrap();
                assert_eq!(removed, model.remove(&v), "step {step}: delete_vertex({v})");
                let mut out = Vec::new();
                assert!(!workers[reader].neighbors(v, usize::MAX, &mut out).unwrap());
            }
            0 => {
                let n = rng.gen_range(0..3 * part_neighbors_max as usize);
                let list: Vec<u32> = (0..n).map(|_| rng.gen_range(0..vertices)).collect();
                workers[home].put(v, &list).unwrap();
                model.insert(v, list);
            }
            1..=4 => {
                let u = rng.gen_range(0..vertices);
                let added = workers[home].insert_edge(v, u).unwrap();
                let e = model.entry(v).or_default();
                assert_eq!(added, !e.contains(&u), "step {step}: insert {v}->{u}");
                if added {
                    e.push(u);
                }
            }
            5 => {
                let u = rng.gen_range(0..vertices);
                let removed = workers[home].delete_edge(v, u).unwrap();
                let e = model.get_mut(&v);
                let expect = e.as_ref().is_some_and(|e| e.contains(&u));
                assert_eq!(removed, expect, "step {step}: delete {v}->{u}");
                if let Some(e) = e {
                    e.retain(|&x| x != u);
                }
            }
            6 => {
                let k = rng.gen_range(0..10);
                let mut out = Vec::new();
                let found = workers[reader].neighbors(v, k, &mut out).unwrap();
                let want: Vec<u32> = model
                    .get(&v)
                    .map(|e| e.iter().copied().take(k).collect())
                    .unwrap_or_default();
                assert_eq!(found, model.contains_key(&v), "step {step}");
                assert_eq!(out, want, "step {step}: neighbors({v}, {k})");
            }
            7 => {
                let k = rng.gen_range(1..6);
                let mut a = Vec::new();
                let mut b = Vec::new();
                workers[reader]
                    .k_hop(v, 2, k, HopReads::OneAtATime, KhopLimits::default(), &mut a)
                    .unwrap();
                workers[reader]
                    .k_hop(v, 2, k, HopReads::Pipelined, KhopLimits::default(), &mut b)
                    .unwrap();
                let mut want = Vec::new();
                if let Some(first) = model.get(&v) {
                    for u in first.iter().take(k) {
                        if let Some(n) = model.get(u) {
                            want.extend(n.iter().take(k));
                        }
                    }
                }
                assert_eq!(
                    a, want,
                    "step {step}: k_hop({v}, {k}, 2 hops, one at a time)"
                );
                assert_eq!(b, want, "step {step}: k_hop({v}, {k}, 2 hops, pipelined)");
            }
            _ => {
                let got = workers[reader].get(v).unwrap();
                assert!(
                    got == model.get(&v).cloned(),
                    "step {step}: get({v}) = {got:?}, want {:?}",
                    model.get(&v)
                );
            }
        }
        if step % 500 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            for w in &mut workers {
                w.collect_garbage().unwrap();
            }
        }
    }
    for v in 0..vertices {
        assert_eq!(
            workers[0].get(v).unwrap(),
            model.get(&v).cloned(),
            "final get({v})"
        );
    }
}

#[test]
fn one_machine_single_part() {
    run(1, 1000, 1);
}

#[test]
fn eight_machines_single_part() {
    run(8, 1000, 2);
}

#[test]
fn eight_machines_decomposed() {
    for seed in 3..6 {
        run(8, 3, seed);
    }
}

#[test]
fn one_machine_decomposed() {
    run(1, 2, 7);
}
