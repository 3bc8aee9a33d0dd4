//! Read-only replicas (`locus_store::replica`, a Locus extension of Pragh 6.1):
//! a replica serves its machine's reads locally, an update invalidates it
//! before publishing, a migration leaves it valid, and the home refuses a
//! registration for a value that changed. The seeded simulation in
//! `sim_linearizability.rs` checks the interleavings; these check behaviour.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use locus_fabric::counting::{Counting, Locality};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::OpKind;
use locus_store::{Key, Replication, Store, StoreConfig, StoreError};

type F = Counting<LocalFabric>;

fn config() -> StoreConfig {
    StoreConfig {
        buckets_per_machine: 64,
        value_region_bytes: 8 << 20,
        part_neighbors_max: 4,
        reclaim_lease_ms: 1,
        // Live migrators on a loaded machine may wait out many time slices:
        // a read gives up only after a minute, not two (short) leases.
        read_stall_ms: 60_000,
        cache_lease_ms: 1,
        replica_bytes_max: 1 << 20,
        ..StoreConfig::default()
    }
}

fn store(machines: usize, config: StoreConfig) -> Store<F> {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap(),
    );
    Store::create(fabric, config).unwrap()
}

fn remote_reads(s: &Store<F>) -> u64 {
    s.fabric()
        .counters()
        .total()
        .ops_of(Locality::Remote, OpKind::Read)
}

#[test]
fn a_replica_serves_reads_locally_until_an_update_invalidates_it() {
    let s = store(3, config());
    let _services = s.spawn_services().unwrap();
    s.worker(1).unwrap().put(1, &[10, 11]).unwrap(); // home 1
    let mut r = s.worker(2).unwrap();
    assert!(matches!(
        r.replicate(Key::part(1, 0)).unwrap(),
        Replication::Created { .. }
    ));
    assert_eq!(r.replicas_held().0, 1);
    let before = remote_reads(&s);
    for _ in 0..10 {
        assert_eq!(r.get(1).unwrap(), Some(vec![10, 11]));
    }
    assert_eq!(remote_reads(&s), before, "replica reads must be local");
    assert_eq!(r.stats.replica_reads, 10);

    // An update from a third machine is forwarded to the home, which zeroes
    // the replica's header before publishing.
    assert!(s.worker(0).unwrap().insert_edge(1, 12).unwrap());
    assert_eq!(r.get(1).unwrap(), Some(vec![10, 11, 12]));
    assert_eq!(r.replicas_held().0, 0, "the invalidated replica is dropped");
    // A new replica sees the new value.
    assert!(matches!(
        r.replicate(Key::part(1, 0)).unwrap(),
        Replication::Created { .. }
    ));
    assert_eq!(r.get(1).unwrap(), Some(vec![10, 11, 12]));
    assert_eq!(r.replicate(Key::part(1, 0)).unwrap(), Replication::Present);
}

#[test]
fn a_migration_keeps_replicas_valid_and_later_updates_still_reach_them() {
    let s = store(4, config());
    let _services = s.spawn_services().unwrap();
    s.worker(1).unwrap().put(1, &[5]).unwrap();
    let mut r = s.worker(2).unwrap();
    r.replicate(Key::part(1, 0)).unwrap();
    // The value moves to machine 3; the content is the same, the replica stays.
    s.worker(3).unwrap().migrate(Key::part(1, 0)).unwrap();
    let before = remote_reads(&s);
    assert_eq!(r.get(1).unwrap(), Some(vec![5]));
    assert_eq!(remote_reads(&s), before);
    // The update is coordinated by the home, applied by the holder (3), and
    // the replica on 2 is invalidated first.
    s.worker(0).unwrap().insert_edge(1, 6).unwrap();
    assert_eq!(r.get(1).unwrap(), Some(vec![5, 6]));
    // Replicating where the value is held is refused politely.
    assert_eq!(
        s.worker(3).unwrap().replicate(Key::part(1, 0)).unwrap(),
        Replication::HeldHere
    );
    assert_eq!(r.replicate(Key::part(42, 0)).unwrap(), Replication::Absent);
}

#[test]
fn the_home_can_hold_a_replica_of_a_value_migrated_away() {
    let s = store(3, config());
    let _services = s.spawn_services().unwrap();
    s.worker(1).unwrap().put(1, &[7, 8]).unwrap();
    s.worker(2).unwrap().migrate(Key::part(1, 0)).unwrap();
    let mut home = s.worker(1).unwrap();
    assert!(matches!(
        home.replicate(Key::part(1, 0)).unwrap(),
        Replication::Created { .. }
    ));
    let before = remote_reads(&s);
    assert_eq!(home.get(1).unwrap(), Some(vec![7, 8]));
    assert_eq!(remote_reads(&s), before, "the home reads its replica");
    home.delete_edge(1, 7).unwrap();
    assert_eq!(home.get(1).unwrap(), Some(vec![8]));
}

#[test]
fn every_part_of_a_decomposed_vertex_is_invalidated() {
    let s = store(3, config());
    let _services = s.spawn_services().unwrap();
    // part_neighbors_max = 4: three parts.
    let list: Vec<u32> = (100..110).collect();
    s.worker(1).unwrap().put(1, &list).unwrap();
    let mut r = s.worker(0).unwrap();
    for p in 0..3 {
        assert!(matches!(
            r.replicate(Key::part(1, p)).unwrap(),
            Replication::Created { .. }
        ));
    }
    assert_eq!(r.get(1).unwrap(), Some(list.clone()));
    s.worker(2).unwrap().put(1, &[1, 2]).unwrap();
    assert_eq!(r.get(1).unwrap(), Some(vec![1, 2]));
}

#[test]
fn the_replica_budget_is_enforced() {
    let s = store(
        3,
        StoreConfig {
            replica_bytes_max: 24,
            ..config()
        },
    );
    let _services = s.spawn_services().unwrap();
    s.worker(1).unwrap().put(1, &[1, 2, 3, 4]).unwrap();
    s.worker(1).unwrap().put(4, &[1]).unwrap();
    let mut r = s.worker(2).unwrap();
    assert_eq!(r.replicate(Key::part(1, 0)).unwrap(), Replication::Full);
    assert!(matches!(
        r.replicate(Key::part(4, 0)).unwrap(),
        Replication::Created { bytes: 24 }
    ));
    assert_eq!(r.replicas_held(), (1, 24));
    // Once an update invalidates it, a sweep gives the budget back.
    s.worker(1).unwrap().insert_edge(4, 2).unwrap();
    assert_eq!(r.sweep_replicas().unwrap(), 1);
    assert_eq!(r.replicas_held(), (0, 0));
}

#[test]
fn a_full_set_is_swept_at_most_once_per_interval() {
    // With an hour between sweeps the second full request is refused without
    // one; with 0 every full request sweeps first.
    for (interval_ms, sweeps_every_time) in [(3_600_000, false), (0, true)] {
        let s = store(
            3,
            StoreConfig {
                replica_bytes_max: 24,
                replica_sweep_interval_ms: interval_ms,
                ..config()
            },
        );
        let _services = s.spawn_services().unwrap();
        let mut home = s.worker(1).unwrap();
        for v in [1, 4, 7] {
            home.put(v, &[1]).unwrap(); // 24 bytes each, homed on machine 1
        }
        let mut r = s.worker(2).unwrap();
        let created = Replication::Created { bytes: 24 };
        assert_eq!(r.replicate(Key::part(1, 0)).unwrap(), created);
        // The set is full; an update invalidates its one replica, and the
        // first full request sweeps it away (no sweep was claimed yet).
        home.insert_edge(1, 2).unwrap();
        assert_eq!(r.replicate(Key::part(4, 0)).unwrap(), created);
        home.insert_edge(4, 2).unwrap();
        let third = r.replicate(Key::part(7, 0)).unwrap();
        if sweeps_every_time {
            assert_eq!(third, created, "interval 0: swept again");
        } else {
            assert_eq!(
                third,
                Replication::Full,
                "within the interval: no second sweep"
            );
            assert_eq!(r.replicas_held(), (1, 24));
            // An explicit sweep is never rate-limited.
            assert_eq!(r.sweep_replicas().unwrap(), 1);
            assert_eq!(r.replicate(Key::part(7, 0)).unwrap(), created);
        }
    }
}

#[test]
fn replicas_need_the_location_cache_and_hash_placement() {
    for (bad, field) in [
        (
            StoreConfig {
                cache_bytes_max: 0,
                ..config()
            },
            "replica_bytes_max",
        ),
        (
            StoreConfig {
                cache_lookups: false,
                ..config()
            },
            "replica_bytes_max",
        ),
        (
            StoreConfig {
                shards_per_machine: 4,
                ..config()
            },
            "shard",
        ),
    ] {
        match bad.validate() {
            Err(StoreError::Config(m)) => assert!(m.contains(field), "{m}"),
            other => panic!("accepted {bad:?}: {other:?}"),
        }
    }
    // Off: replicate says so.
    let s = store(
        2,
        StoreConfig {
            replica_bytes_max: 0,
            ..config()
        },
    );
    s.worker(0).unwrap().put(0, &[1]).unwrap();
    assert!(s.worker(1).unwrap().replicate(Key::part(0, 0)).is_err());
}

/// Real threads: readers on every machine keep replicating and reading while
/// an updater appends edges. Every list a reader sees must be a prefix of the
/// final list that is at least as long as what the updater had finished
/// before the read started (no stale replica after an acknowledged update).
#[test]
fn readers_never_see_an_update_undone_under_concurrent_replication() {
    let s = store(4, config());
    let _services = s.spawn_services().unwrap();
    let vertices = 4u32;
    for v in 0..vertices {
        s.worker((v % 4) as u8).unwrap().put(v, &[]).unwrap();
    }
    let appended: Arc<Vec<std::sync::atomic::AtomicU32>> = Arc::new(
        (0..vertices)
            .map(|_| std::sync::atomic::AtomicU32::new(0))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = 300u32;
    std::thread::scope(|scope| {
        let updater = {
            let (s, appended) = (s.clone(), Arc::clone(&appended));
            scope.spawn(move || {
                let mut w = s.worker(0).unwrap();
                for i in 0..rounds {
                    for v in 0..vertices {
                        w.insert_edge(v, 1000 + i).unwrap();
                        appended[v as usize].store(i + 1, Ordering::SeqCst);
                    }
                }
            })
        };
        let mut readers = Vec::new();
        for m in 1..4u8 {
            let (s, appended, stop) = (s.clone(), Arc::clone(&appended), Arc::clone(&stop));
            readers.push(scope.spawn(move || {
                let mut w = s.worker(m).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    for v in 0..vertices {
                        if n.is_multiple_of(3) {
                            w.replicate(Key::part(v, 0)).unwrap();
                        }
                        let done = appended[v as usize].load(Ordering::SeqCst);
                        let got = w.get(v).unwrap().expect("loaded");
                        assert!(
                            got.len() as u32 >= done,
                            "machine {m} read {} edges of vertex {v} after {done} were acknowledged",
                            got.len()
                        );
                        for (i, &u) in got.iter().enumerate() {
                            assert_eq!(u, 1000 + i as u32, "vertex {v} list {got:?}");
                        }
                        n += 1;
                    }
                }
                w.stats
            }));
        }
        updater.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        let mut created = 0;
        for r in readers {
            created += r.join().unwrap().replicas_created;
        }
        assert!(created > 0, "no replica was ever made");
    });
}

/// A batch copies every key first and then has the homes list them with
/// their registrations in flight together: each key gets the answer it
/// would get alone, a key named twice is copied once, and the replicas made
/// serve reads locally until an update invalidates them.
#[test]
fn a_batch_of_replicas_answers_each_key_as_alone() {
    let s = store(4, config());
    let _services = s.spawn_services().unwrap();
    let homed = |m: u8, from: u32| {
        (from..from + 1000)
            .find(|&v| locus_store::home_of(v, 4) == m)
            .unwrap()
    };
    let (a, b, c) = (homed(1, 100), homed(2, 100), homed(3, 100));
    let d = homed(3, c + 1);
    for v in [a, b, c, d] {
        s.worker(locus_store::home_of(v, 4))
            .unwrap()
            .put(v, &[v, v + 1])
            .unwrap();
    }
    // c is homed at the reader but held elsewhere: its home lists it locally.
    s.worker(0).unwrap().migrate(Key::part(c, 0)).unwrap();
    let mut r = s.worker(3).unwrap();
    let forwarded = r.stats.forwarded;
    let results: Vec<Replication> = r
        .replicate_batch(&[
            Key::part(a, 0),
            Key::part(b, 0),
            Key::part(c, 0),
            Key::part(d, 0),
            Key::part(7_777, 0),
            Key::part(a, 0),
        ])
        .unwrap()
        .into_iter()
        .map(|x| x.unwrap())
        .collect();
    assert!(
        matches!(results[0], Replication::Created { .. }),
        "{results:?}"
    );
    assert!(
        matches!(results[1], Replication::Created { .. }),
        "{results:?}"
    );
    assert!(
        matches!(results[2], Replication::Created { .. }),
        "{results:?}"
    );
    assert_eq!(
        results[3..],
        [
            Replication::HeldHere,
            Replication::Absent,
            Replication::Present
        ]
    );
    assert_eq!(r.replicas_held().0, 3, "the key named twice is held once");
    assert_eq!(
        r.stats.forwarded - forwarded,
        2,
        "one registration forwarded a remote home, none for the home here"
    );
    let before = remote_reads(&s);
    for v in [a, b, c] {
        assert_eq!(r.get(v).unwrap(), Some(vec![v, v + 1]));
    }
    assert_eq!(remote_reads(&s), before, "replica reads must be local");
    s.worker(0).unwrap().insert_edge(a, 9).unwrap();
    assert_eq!(r.get(a).unwrap(), Some(vec![a, a + 1, 9]));
    assert_eq!(
        r.replicas_held().0,
        2,
        "the updated key's replica is dropped"
    );
}

/// A batch's copies count against the budget before their homes answer:
/// two values that each fit alone, but not together, make one replica and
/// one `Full` (the CLI's replica-budget run caught a batch that did not).
#[test]
fn a_batch_stays_within_the_replica_budget() {
    let s = store(
        3,
        StoreConfig {
            replica_bytes_max: 24,
            ..config()
        },
    );
    let _services = s.spawn_services().unwrap();
    let homed = |from: u32| {
        (from..from + 1000)
            .find(|&v| locus_store::home_of(v, 3) == 1)
            .unwrap()
    };
    let (a, b) = (homed(10), homed(homed(10) + 1));
    for v in [a, b] {
        s.worker(1).unwrap().put(v, &[1]).unwrap(); // 24 bytes a copy
    }
    let mut r = s.worker(2).unwrap();
    let got: Vec<Replication> = r
        .replicate_batch(&[Key::part(a, 0), Key::part(b, 0)])
        .unwrap()
        .into_iter()
        .map(|x| x.unwrap())
        .collect();
    assert_eq!(got, [Replication::Created { bytes: 24 }, Replication::Full]);
    assert_eq!(r.replicas_held(), (1, 24));
}
