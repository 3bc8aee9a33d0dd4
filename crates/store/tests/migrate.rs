//! Split live migration (Pragh 4.1-4.3): values move, keys stay; reads follow;
//! updates are forwarded to the holder; old blocks are invalidated and reclaimed.

use locus_fabric::counting::{Counting, Locality};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, Port};
use locus_store::addr::Addr;
use locus_store::{Key, Migration, Store, StoreConfig};

type F = Counting<LocalFabric>;

fn store(machines: usize) -> Store<F> {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap(),
    );
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 8 << 20,
            part_neighbors_max: 4,
            reclaim_lease_ms: 1,
            cache_lease_ms: 1,
            // Live migrators on a loaded machine may wait out many time
            // slices: a read gives up only after a minute, not two leases.
            read_stall_ms: 60_000,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

fn addr_of(s: &Store<F>, v: u32) -> Addr {
    Addr::decode(s.worker(0).unwrap().address_word(v).unwrap()).expect("published")
}

#[test]
fn a_value_moves_and_every_machine_still_reads_it() {
    let s = store(4);
    let list = vec![10, 11, 12];
    s.worker(1).unwrap().put(1, &list).unwrap(); // home 1
    let before = addr_of(&s, 1);
    assert!(matches!(before, Addr::Local { .. }));
    let mut w2 = s.worker(2).unwrap();
    assert!(matches!(
        w2.migrate(Key::part(1, 0)).unwrap(),
        Migration::Moved { from: 1, .. }
    ));
    let after = addr_of(&s, 1);
    assert_eq!(
        after,
        Addr::remote(2, before.size_units(), after.offset_units()).unwrap()
    );
    for m in 0..4 {
        assert_eq!(
            s.worker(m).unwrap().get(1).unwrap(),
            Some(list.clone()),
            "machine {m}"
        );
    }
    // The old copy is invalidated: its header reads zero.
    let values1 = s.fabric().lookup(1, "values").unwrap().id;
    let mut p = s.fabric().port(0).unwrap();
    assert_eq!(
        p.read_word(1, values1, before.offset_units() * 8).unwrap(),
        0
    );
    assert_eq!(w2.migrate(Key::part(1, 0)).unwrap(), Migration::AlreadyHere);
    assert_eq!(w2.migrate(Key::part(99, 0)).unwrap(), Migration::Absent);
}

#[test]
fn back_home_and_between_non_home_machines() {
    let s = store(4);
    s.worker(1).unwrap().put(5, &[1, 2]).unwrap(); // home 1
    s.worker(2).unwrap().migrate(Key::part(5, 0)).unwrap();
    s.worker(3).unwrap().migrate(Key::part(5, 0)).unwrap();
    assert!(matches!(addr_of(&s, 5), Addr::Remote { machine: 3, .. }));
    assert_eq!(s.worker(0).unwrap().get(5).unwrap(), Some(vec![1, 2]));
    s.worker(1).unwrap().migrate(Key::part(5, 0)).unwrap();
    assert!(
        matches!(addr_of(&s, 5), Addr::Local { .. }),
        "home again: a local address"
    );
    assert_eq!(s.worker(2).unwrap().get(5).unwrap(), Some(vec![1, 2]));
}

#[test]
fn a_migrated_value_is_read_locally_through_the_cache() {
    let s = store(4);
    let list: Vec<u32> = (0..3).collect();
    s.worker(1).unwrap().put(1, &list).unwrap();
    let mut w2 = s.worker(2).unwrap();
    w2.migrate(Key::part(1, 0)).unwrap();
    let mut out = Vec::new();
    w2.neighbors(1, usize::MAX, &mut out).unwrap();
    let before = s.fabric().counters().snapshot()[2];
    out.clear();
    w2.neighbors(1, usize::MAX, &mut out).unwrap();
    let d = s.fabric().counters().snapshot()[2].minus(&before);
    assert_eq!(out, list);
    assert_eq!(
        d.ops_total(Locality::Remote),
        0,
        "fully local after migration (Pragh 4.2)"
    );
    assert!(d.ops_total(Locality::Local) >= 1);
}

#[test]
fn updates_follow_the_value() {
    let s = store(4);
    let _services = s.spawn_services().unwrap();
    s.worker(1).unwrap().put(1, &[1, 2, 3]).unwrap();
    s.worker(3).unwrap().migrate_vertex(1).unwrap();
    // From the home, from the holder and from a third machine.
    assert!(s.worker(1).unwrap().insert_edge(1, 4).unwrap());
    assert!(s.worker(3).unwrap().insert_edge(1, 5).unwrap());
    assert!(s.worker(0).unwrap().delete_edge(1, 2).unwrap());
    assert!(!s.worker(2).unwrap().insert_edge(1, 5).unwrap());
    assert_eq!(s.worker(2).unwrap().get(1).unwrap(), Some(vec![1, 3, 4, 5]));
    // Updated where it was: still held by machine 3 (Pragh 4.3), across parts.
    assert!(matches!(addr_of(&s, 1), Addr::Remote { machine: 3, .. }));
    let long: Vec<u32> = (100..110).collect();
    s.worker(2).unwrap().put(1, &long).unwrap();
    assert_eq!(s.worker(0).unwrap().get(1).unwrap(), Some(long.clone()));
    assert_eq!(
        s.worker(3).unwrap().migrate_vertex(1).unwrap(),
        2,
        "the two new parts move"
    );
    assert_eq!(s.worker(1).unwrap().get(1).unwrap(), Some(long));
}

#[test]
fn old_blocks_come_back_through_the_reclaim_ring() {
    let s = store(2);
    let mut w0 = s.worker(0).unwrap();
    let mut w1 = s.worker(1).unwrap();
    w0.put(0, &[1, 2, 3]).unwrap();
    let used = s.usage()[0].value_live_bytes;
    for _ in 0..50 {
        w1.migrate(Key::part(0, 0)).unwrap();
        w0.migrate(Key::part(0, 0)).unwrap();
    }
    // The collector stamps an entry when it first sees it and frees it one
    // lease later (stamping at observation is never earlier than the retire).
    let first = w0.collect_garbage().unwrap() + w1.collect_garbage().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let freed = first + w0.collect_garbage().unwrap() + w1.collect_garbage().unwrap();
    assert_eq!(freed, 100, "every superseded copy is freed after the lease");
    assert_eq!(s.usage()[0].value_live_bytes, used);
    assert_eq!(s.usage()[1].value_live_bytes, 0);
    assert_eq!(w1.get(0).unwrap(), Some(vec![1, 2, 3]));
}

#[test]
fn cache_lease_longer_than_reclaim_lease_is_rejected() {
    let fabric = LocalFabric::new(LocalConfig::with_machines(2)).unwrap();
    let e = Store::create(
        fabric,
        StoreConfig {
            cache_lease_ms: 120_000,
            ..StoreConfig::default()
        },
    )
    .err()
    .expect("rejected")
    .to_string();
    assert!(e.contains("lease"), "{e}");
}

#[test]
fn a_pipelined_batch_moves_many_keys() {
    for model in [false, true] {
        let lc = LocalConfig::with_machines(4);
        let fabric =
            Counting::new(LocalFabric::new(if model { lc } else { lc.without_model() }).unwrap());
        let s = Store::create(
            fabric,
            StoreConfig {
                buckets_per_machine: 256,
                value_region_bytes: 8 << 20,
                reclaim_ring_entries: 64, // smaller than the batch: appends must wait for GC
                reclaim_lease_ms: 1,
                cache_lease_ms: 1,
                ..StoreConfig::default()
            },
        )
        .unwrap();
        let _services = s.spawn_services().unwrap(); // their GC drains the rings
        for v in 0..600u32 {
            let home = (v % 4) as u8;
            s.worker(home).unwrap().put(v, &[v, v + 1]).unwrap();
        }
        let mut keys: Vec<Key> = (0..600).map(|v| Key::part(v, 0)).collect();
        keys.push(Key::part(9999, 0)); // absent
        let mut w2 = s.worker(2).unwrap();
        let out = w2.migrate_batch(&keys).unwrap();
        assert_eq!(out.len(), 601);
        for (v, m) in out.iter().enumerate().take(600) {
            if v % 4 == 2 {
                assert_eq!(*m, Migration::AlreadyHere, "vertex {v}");
            } else {
                assert!(matches!(m, Migration::Moved { .. }), "vertex {v}: {m:?}");
            }
        }
        assert_eq!(out[600], Migration::Absent);
        for v in 0..600u32 {
            assert!(matches!(
                addr_of_any(&s, v),
                Addr::Remote { machine: 2, .. } | Addr::Local { .. }
            ));
            assert_eq!(
                s.worker((v % 3) as u8).unwrap().get(v).unwrap(),
                Some(vec![v, v + 1])
            );
        }
        // A second batch finds everything here already.
        assert!(w2
            .migrate_batch(&keys[..600])
            .unwrap()
            .iter()
            .all(|m| *m == Migration::AlreadyHere));
    }
}

fn addr_of_any(s: &Store<F>, v: u32) -> Addr {
    Addr::decode(s.worker(0).unwrap().address_word(v).unwrap()).expect("published")
}

/// The monitor's counts (Pragh 4.4) come from the location cache: with the
/// cache off for lookups (the Split scheme), every read of a remote key is
/// counted once, as is a home's read of its own key whose value is away; a
/// read of a value at home by its home is not. (The counting rides on the
/// value's READ while it is in flight.)
#[test]
fn reads_are_counted_for_the_monitor_once_each() {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(3)).unwrap(), // latency model on
    );
    let s = Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 8 << 20,
            cache_lookups: false,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    s.worker(1).unwrap().put(1, &[5, 6]).unwrap(); // home 1
    s.worker(2).unwrap().put(2, &[7]).unwrap(); // home 2
    s.worker(2).unwrap().migrate(Key::part(1, 0)).unwrap(); // 1's value to 2
    let count = |m: u8, v: u32| {
        s.cache(m)
            .unwrap()
            .peek(Key::part(v, 0))
            .map_or(0, |(_, n)| n)
    };
    let before = (count(0, 1), count(0, 2), count(1, 1), count(2, 2));
    let mut w0 = s.worker(0).unwrap();
    let mut w1 = s.worker(1).unwrap();
    let mut w2 = s.worker(2).unwrap();
    for _ in 0..3 {
        assert_eq!(w0.get(1).unwrap(), Some(vec![5, 6])); // remote key, value at 2
        assert_eq!(w0.get(2).unwrap(), Some(vec![7])); // remote key, value at home
        assert_eq!(w1.get(1).unwrap(), Some(vec![5, 6])); // home 1, value away at 2
        assert_eq!(w2.get(2).unwrap(), Some(vec![7])); // home 2, value here
    }
    assert_eq!(count(0, 1) - before.0, 3);
    assert_eq!(count(0, 2) - before.1, 3);
    assert_eq!(count(1, 1) - before.2, 3);
    assert_eq!(count(2, 2) - before.3, 0);
}
