//! The value-region scan (Pragh 5; `src/scan.rs`, invariants S1-S4): a block
//! leaked by an interrupted migration (CAS done, reclaim-ring write not) is
//! freed a whole lease after the scan first saw it unreferenced and not
//! before; under a seeded stress of migrations and updates on real threads,
//! with scans running all along, no block an address word names is ever
//! freed and every value equals the model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::scan::Scanner;
use locus_store::{home_of, Store, StoreConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn store(machines: usize, lease_ms: u64) -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig {
        machines,
        ..LocalConfig::default()
    })
    .unwrap();
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 8 << 20,
            part_neighbors_max: 4,
            reclaim_lease_ms: lease_ms,
            cache_lease_ms: lease_ms,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

fn live(s: &Store<LocalFabric>, m: usize) -> u64 {
    s.usage()[m].value_live_bytes
}

#[test]
fn a_block_leaked_by_an_interrupted_migration_is_freed_after_the_lease_and_not_before() {
    const LEASE_MS: u64 = 400;
    let s = store(2, LEASE_MS);
    let _services = s.spawn_services().unwrap();
    let mut home = s.worker(0).unwrap();
    let mut target = s.worker(1).unwrap();
    home.put(4, &[1, 2, 3]).unwrap();
    let live_before = live(&s, 0);
    // Machine 1 migrates vertex 4 here and "dies" before its ring write.
    target.inject_lost_reclaims(true);
    assert_eq!(target.migrate_vertex(4).unwrap(), 1, "one part moved");
    assert_eq!(
        live(&s, 0),
        live_before,
        "the old block leaked on machine 0"
    );
    let mut scanner = Scanner::new(LEASE_MS * 1_000_000);
    let mut other = Scanner::new(LEASE_MS * 1_000_000);
    let t0 = Instant::now();
    let mut first_waiting: Option<Instant> = None;
    let freed_at = loop {
        assert!(t0.elapsed() < Duration::from_secs(30), "never freed");
        let r = home.scan_values(&mut scanner).unwrap();
        let r1 = target.scan_values(&mut other).unwrap();
        assert_eq!(r1.freed, 0, "machine 1's block is the live value");
        if r.freed > 0 {
            assert_eq!(r.freed, 1);
            break Instant::now();
        }
        if r.waiting > 0 && first_waiting.is_none() {
            first_waiting = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let waited = freed_at - first_waiting.expect("stamped before freed");
    assert!(
        waited >= Duration::from_millis(LEASE_MS),
        "freed {waited:?} after first seen unreferenced, under the {LEASE_MS} ms lease"
    );
    assert!(live(&s, 0) < live_before, "the leaked block is free again");
    // The value is intact, read from either machine.
    assert_eq!(home.get(4).unwrap(), Some(vec![1, 2, 3]));
    assert_eq!(target.get(4).unwrap(), Some(vec![1, 2, 3]));
    assert!(home.audit_references().unwrap().is_empty());
}

#[test]
fn no_block_in_use_is_freed_under_migrations_and_updates() {
    const MACHINES: usize = 3;
    const VERTICES: u32 = 48;
    // Long enough that no thread of this test stalls for a lease on a loaded
    // machine (the scan's stated assumption), short enough to free during it.
    const LEASE_MS: u64 = 1_000;
    let seed = 0x5ca1;
    let s = store(MACHINES, LEASE_MS);
    let _services = s.spawn_services().unwrap();
    let mut model: HashMap<u32, Vec<u32>> = HashMap::new();
    for v in 0..VERTICES {
        let list: Vec<u32> = (0..(v % 9)).collect();
        s.worker(home_of(v, MACHINES))
            .unwrap()
            .put(v, &list)
            .unwrap();
        model.insert(v, list);
    }
    let stop = AtomicBool::new(false);
    let run_for = Duration::from_millis(4 * LEASE_MS);
    let (finals, freed) = std::thread::scope(|sc| {
        // Updaters: one per machine, each owning the vertices it homes (so
        // the model is exact), random PUTs, some growing past a part.
        let updaters: Vec<_> = (0..MACHINES)
            .map(|m| {
                let s = &s;
                let stop = &stop;
                sc.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed + m as u64);
                    let mut w = s.worker(m as u8).unwrap();
                    let mut mine: HashMap<u32, Vec<u32>> = HashMap::new();
                    while !stop.load(Ordering::Relaxed) {
                        // Only the lower half: the upper half is moved by
                        // migrations only, its top quarter not even that, so
                        // blocks grow older than a lease while named.
                        let v = rng.gen_range(0..VERTICES / 2 / MACHINES as u32) * MACHINES as u32
                            + m as u32;
                        let n = rng.gen_range(0..10);
                        let list: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1000)).collect();
                        w.put(v, &list).unwrap();
                        mine.insert(v, list);
                    }
                    mine
                })
            })
            .collect();
        // Migrators: pull random vertices to their machine, back and forth.
        for m in 0..MACHINES {
            let s = &s;
            let stop = &stop;
            sc.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 7 + m as u64);
                let mut w = s.worker(m as u8).unwrap();
                // Machine 2's migrations leak their old blocks (as if it died
                // after each CAS): the scans must free those, and only those.
                w.inject_lost_reclaims(m == 2);
                while !stop.load(Ordering::Relaxed) {
                    // The top quarter is never touched after the load.
                    let v = rng.gen_range(0..VERTICES * 3 / 4);
                    w.migrate_vertex(v).unwrap();
                    w.collect_garbage().unwrap();
                }
            });
        }
        // Scanners: one per machine, a round every 50 ms.
        let scanners: Vec<_> = (0..MACHINES)
            .map(|m| {
                let s = &s;
                let stop = &stop;
                sc.spawn(move || {
                    let mut w = s.worker(m as u8).unwrap();
                    let mut scanner = Scanner::new(LEASE_MS * 1_000_000);
                    while !stop.load(Ordering::Relaxed) {
                        w.scan_values(&mut scanner).unwrap();
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    (scanner.rounds, scanner.freed_total)
                })
            })
            .collect();
        std::thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
        let finals: Vec<HashMap<u32, Vec<u32>>> =
            updaters.into_iter().map(|h| h.join().unwrap()).collect();
        let scans: Vec<(u64, u64)> = scanners.into_iter().map(|h| h.join().unwrap()).collect();
        (finals, scans)
    });
    assert!(
        freed.iter().all(|&(rounds, _)| rounds >= 3),
        "(rounds, freed) per machine: {freed:?}"
    );
    assert!(
        freed.iter().map(|f| f.1).sum::<u64>() > 0,
        "machine 2's leaks were never freed: {freed:?}"
    );
    for m in finals {
        model.extend(m);
    }
    let mut w = s.worker(0).unwrap();
    let bad = w.audit_references().unwrap();
    assert!(bad.is_empty(), "seed {seed:#x}: {bad:?}");
    for v in 0..VERTICES {
        assert_eq!(
            w.get(v).unwrap().as_ref(),
            Some(&model[&v]),
            "seed {seed:#x}: vertex {v}"
        );
    }
}
