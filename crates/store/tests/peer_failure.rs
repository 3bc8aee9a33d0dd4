//! A survivor's steps after a peer's failure (`src/recover.rs`, F1-F4), on
//! the in-process fabric: the "dead" machine is simply never touched again
//! after the survivor runs its steps, and its memory is what a replacement
//! would have to overwrite. A key homed here whose value the dead machine
//! held is either put back at home (its whole list, every part) or marked
//! lost, and a lost key fails loudly on every path (read, 2-hop, update),
//! never as "absent"; the survivor forgets the dead machine's cache entries,
//! replicas and directory entries; and the dead machine's block that the
//! reload left behind is named by no address word. A migration the dead
//! machine left half done (old copy invalidated, new one never published)
//! is put back at home from the old copy (F5).

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, Port};
use locus_store::addr::Addr;
use locus_store::{
    HopReads, Key, KhopLimits, Replication, Store, StoreConfig, StoreError, VALUES_REGION,
};

fn store() -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig {
        machines: 3,
        ..LocalConfig::default()
    })
    .unwrap();
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 4 << 20,
            part_neighbors_max: 4,
            replica_bytes_max: 1 << 16,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn a_home_puts_back_or_marks_lost_the_values_a_dead_machine_held() {
    let s = store();
    let _services = s.spawn_services().unwrap();
    let (home, dead) = (0u8, 1u8);
    let mut h = s.worker(home).unwrap();
    let mut d = s.worker(dead).unwrap();
    // Vertex 3 (homed on 0) spans three parts; vertex 6 one part. Both move to 1.
    let long: Vec<u32> = (100..110).collect();
    h.put(3, &long).unwrap();
    h.put(6, &[7, 8]).unwrap();
    h.put(9, &[6, 3]).unwrap(); // stays at home; its 2-hop reads 6 and 3
    assert_eq!(d.migrate_vertex(3).unwrap(), 3);
    assert_eq!(d.migrate_vertex(6).unwrap(), 1);
    drop(d);
    // Machine 1 dies. The home finds its keys by its own table.
    let mut found = h.keys_held_by(dead).unwrap();
    found.sort_unstable_by_key(|k| k.0);
    let want: Vec<Key> = vec![
        Key::part(3, 0),
        Key::part(6, 0),
        Key::part(3, 1),
        Key::part(3, 2),
    ];
    let mut want_sorted = want.clone();
    want_sorted.sort_unstable_by_key(|k| k.0);
    assert_eq!(found, want_sorted);
    // 3 is reloaded from the home's log (here: the list the test knows);
    // 6 has no durable copy and is marked lost.
    assert_eq!(h.republish_at_home(3, &long, dead).unwrap(), 3);
    assert!(h.mark_lost(Key::part(6, 0), dead).unwrap());
    assert!(!h.mark_lost(Key::part(6, 0), dead).unwrap(), "once");
    assert!(h.keys_held_by(dead).unwrap().is_empty());
    let mut other = s.worker(2).unwrap();
    for w in [&mut h, &mut other] {
        assert_eq!(w.get(3).unwrap(), Some(long.clone()));
        // Every path fails on the lost key, naming it and the machine.
        let e = w.get(6).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::ValueLost {
                    vertex: 6,
                    machine: 1,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("machine 1"), "{e}");
        let mut out = Vec::new();
        assert!(matches!(
            w.k_hop(
                9,
                2,
                usize::MAX,
                HopReads::OneAtATime,
                KhopLimits::default(),
                &mut out
            ),
            Err(StoreError::ValueLost { vertex: 6, .. })
        ));
        assert!(matches!(
            w.k_hop(
                9,
                2,
                usize::MAX,
                HopReads::Pipelined,
                KhopLimits::default(),
                &mut out
            ),
            Err(StoreError::ValueLost { vertex: 6, .. })
        ));
    }
    assert!(matches!(
        h.insert_edge(6, 1),
        Err(StoreError::ValueLost { .. })
    ));
    // The reloaded vertex is an ordinary one again.
    assert!(h.insert_edge(3, 1).unwrap());
    assert_eq!(other.get(3).unwrap().unwrap().len(), 11);
    // A shorter reload empties the leftover parts.
    assert_eq!(h.republish_at_home(3, &[5], dead).unwrap(), 3);
    assert_eq!(other.get(3).unwrap(), Some(vec![5]));
}

#[test]
fn a_survivor_forgets_the_dead_machines_cache_entries_replicas_and_directory_entries() {
    let s = store();
    let _services = s.spawn_services().unwrap();
    let (survivor, dead) = (0u8, 1u8);
    let mut w0 = s.worker(survivor).unwrap();
    let mut w1 = s.worker(dead).unwrap();
    let mut w2 = s.worker(2).unwrap();
    // 4 is homed on 1 (the dead one), 3 on 0, 5 on 2.
    w1.put(4, &[1]).unwrap();
    w0.put(3, &[2]).unwrap();
    w2.put(5, &[3]).unwrap();
    // Survivor 0 caches 4 and holds a replica of it; 1 holds a replica of
    // 3 (listed in 0's directory); 5's value moves to 1 and 0 caches that.
    assert_eq!(w0.get(4).unwrap(), Some(vec![1]));
    assert!(matches!(
        w0.replicate(Key::part(4, 0)).unwrap(),
        Replication::Created { .. }
    ));
    assert!(matches!(
        w1.replicate(Key::part(3, 0)).unwrap(),
        Replication::Created { .. }
    ));
    assert_eq!(w1.migrate_vertex(5).unwrap(), 1);
    assert_eq!(w0.get(5).unwrap(), Some(vec![3]));
    let f = w0.forget_peer(dead).unwrap();
    assert_eq!(f.replicas, 1, "{f:?}");
    assert_eq!(f.directory_entries, 1, "{f:?}");
    assert!(f.cache_entries >= 2, "{f:?}");
    assert_eq!(w0.replicas_held().0, 0);
    assert_eq!(w0.forget_peer(dead).unwrap().replicas, 0, "idempotent");
    // An update of 3 no longer invalidates anything on the dead machine
    // (its replacement's memory must not be written).
    w0.put(3, &[9]).unwrap();
    assert_eq!(w0.get(3).unwrap(), Some(vec![9]));
}

/// F5: the dead machine was the target of two migrations and died after
/// zeroing the old copies' headers (the invalidation, P2) and before its
/// CASes. Their words still name live copies, so `keys_held_by` does not
/// find them, and nobody can read them, until the home restores them.
#[test]
fn migrations_the_dead_target_left_half_done_are_put_back_from_the_old_copies() {
    let s = store();
    let _services = s.spawn_services().unwrap();
    let (home, dead, other) = (0u8, 1u8, 2u8);
    let mut h = s.worker(home).unwrap();
    let mut o = s.worker(other).unwrap();
    let long: Vec<u32> = (100..110).collect(); // three parts
    h.put(3, &long).unwrap(); // part 0 held at home
    h.put(6, &[7, 8]).unwrap();
    h.put(9, &[1]).unwrap(); // left alone
    assert_eq!(o.migrate_vertex(6).unwrap(), 1); // held by survivor 2
                                                 // What the dead target's Invalidate steps wrote before it died.
    let mut p = s.fabric().port(dead).unwrap();
    for v in [3u32, 6] {
        let a = Addr::decode(h.address_word(v).unwrap()).unwrap();
        let holder = a.holder(home);
        let vr = s.fabric().lookup(holder, VALUES_REGION).unwrap().id;
        p.write_word(holder, vr, a.offset_units() * 8, 0).unwrap();
    }
    drop(p);
    assert!(
        matches!(h.get(3), Err(StoreError::Contention { .. })),
        "the hazard F5 repairs"
    );
    assert!(matches!(o.get(6), Err(StoreError::Contention { .. })));
    assert!(
        h.keys_held_by(dead).unwrap().is_empty(),
        "not the reload's keys"
    );
    let r = h.restore_interrupted(dead).unwrap();
    assert_eq!(r.restored, 2, "{r:?}");
    assert!(r.unparseable.is_empty(), "{r:?}");
    for w in [&mut h, &mut o] {
        assert_eq!(w.get(3).unwrap(), Some(long.clone()));
        assert_eq!(w.get(6).unwrap(), Some(vec![7, 8]));
        assert_eq!(w.get(9).unwrap(), Some(vec![1]));
    }
    let at_home = |h: &mut locus_store::Worker<LocalFabric>, v| {
        Addr::decode(h.address_word(v).unwrap())
            .unwrap()
            .holder(home)
    };
    assert_eq!(at_home(&mut h, 6), home, "republished at the home");
    assert_eq!(
        h.restore_interrupted(dead).unwrap().restored,
        0,
        "idempotent"
    );
    // Ordinary keys again: updated, migrated, read from anywhere.
    assert!(h.insert_edge(6, 1).unwrap());
    assert_eq!(o.migrate_vertex(3).unwrap(), 3);
    assert!(h.insert_edge(3, 1).unwrap());
    assert_eq!(o.get(6).unwrap(), Some(vec![7, 8, 1]));
    assert_eq!(h.get(3).unwrap().unwrap().len(), 11);
}
