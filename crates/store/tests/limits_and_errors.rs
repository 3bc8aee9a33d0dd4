//! Limits and expected failures come back as clear errors, never panics or partial state.

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, Port};
use locus_store::addr::Addr;
use locus_store::{Store, StoreConfig, StoreError};

fn fabric(machines: usize) -> LocalFabric {
    LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap()
}

fn small() -> StoreConfig {
    StoreConfig {
        buckets_per_machine: 4,
        overflow_buckets_per_machine: 2,
        value_region_bytes: 4096,
        part_neighbors_max: 64,
        ..StoreConfig::default()
    }
}

#[test]
fn config_validation() {
    let bad = |c: StoreConfig| {
        Store::create(fabric(1), c)
            .err()
            .expect("rejected")
            .to_string()
    };
    assert!(bad(StoreConfig {
        buckets_per_machine: 3,
        ..small()
    })
    .contains("power of two"));
    assert!(bad(StoreConfig {
        value_region_bytes: 4100,
        ..small()
    })
    .contains("multiple of 8"));
    assert!(bad(StoreConfig {
        value_region_bytes: 1 << 40,
        ..small()
    })
    .contains("128 GiB"));
    assert!(bad(StoreConfig {
        part_neighbors_max: 0,
        ..small()
    })
    .contains("part_neighbors_max"));
    assert!(bad(StoreConfig {
        part_neighbors_max: 9_000_000,
        ..small()
    })
    .contains("32 MiB"));
    assert!(bad(StoreConfig {
        reclaim_lease_ms: 0,
        ..small()
    })
    .contains("lease"));
}

#[test]
fn full_value_region_is_an_error_and_changes_nothing() {
    let s = Store::create(fabric(1), small()).unwrap();
    let mut w = s.worker(0).unwrap();
    w.put(1, &[1, 2, 3]).unwrap();
    let big: Vec<u32> = (0..2000).collect();
    let e = w
        .put(2, &big[..400])
        .and_then(|_| w.put(3, &big[..400]))
        .and_then(|_| w.put(4, &big[..400]));
    assert!(
        matches!(e, Err(StoreError::RegionFull { machine: 0, .. })),
        "{e:?}"
    );
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("raise value_region_bytes"));
    assert_eq!(
        w.get(1).unwrap(),
        Some(vec![1, 2, 3]),
        "earlier data intact"
    );
}

#[test]
fn full_key_table_is_an_error() {
    let s = Store::create(
        fabric(1),
        StoreConfig {
            value_region_bytes: 1 << 20,
            ..small()
        },
    )
    .unwrap();
    let mut w = s.worker(0).unwrap();
    // 4 main + 2 overflow buckets of 7 slots: at most 42 keys.
    let mut err = None;
    for v in 0..100 {
        if let Err(e) = w.put(v, &[v]) {
            err = Some((v, e));
            break;
        }
    }
    let (v, e) = err.expect("table fills up");
    assert!(matches!(e, StoreError::TableFull { .. }), "{e}");
    assert!((28..=42).contains(&v), "filled after {v} keys");
    for u in 0..v {
        assert_eq!(w.get(u).unwrap(), Some(vec![u]));
    }
}

#[test]
fn capacity_check_before_a_load() {
    let s = Store::create(fabric(2), small()).unwrap();
    assert!(s.check_capacity(10, |_| 4).is_ok());
    assert!(matches!(
        s.check_capacity(10, |_| 1000),
        Err(StoreError::RegionFull { .. })
    ));
    assert!(matches!(
        s.check_capacity(100, |_| 0),
        Err(StoreError::TableFull { .. })
    ));
}

#[test]
fn updates_are_forwarded_to_the_home() {
    let s = Store::create(
        fabric(2),
        StoreConfig {
            value_region_bytes: 1 << 20,
            forward_timeout_ms: 300,
            ..small()
        },
    )
    .unwrap();
    let mut w1 = s.worker(1).unwrap();
    // Nobody serves machine 0: the forwarded update fails with a clear error.
    // Like any peer failure it means "maybe applied": the request stays queued.
    let e = w1.insert_edge(0, 5).unwrap_err();
    assert!(matches!(e, StoreError::Forwarded { machine: 0, .. }), "{e}");
    assert!(e.to_string().contains("service"), "{e}");
    let services = s.spawn_services().unwrap();
    let mut w1 = s.worker(1).unwrap();
    assert!(
        w1.insert_edge(0, 6).unwrap(),
        "forwarded to machine 0 and applied there"
    );
    assert!(!w1.insert_edge(0, 6).unwrap());
    assert_eq!(
        w1.get(0).unwrap(),
        Some(vec![5, 6]),
        "the queued update ran first"
    );
    assert!(w1.delete_edge(0, 5).unwrap());
    w1.put(0, &[7, 8]).unwrap();
    assert_eq!(s.worker(0).unwrap().get(0).unwrap(), Some(vec![7, 8]));
    assert!(
        w1.insert_edge(1, 5).unwrap(),
        "local vertices need no forwarding"
    );
    assert!(services.failure().is_none());
}

#[test]
fn out_of_place_update_invalidates_the_old_value() {
    let s = Store::create(
        fabric(2),
        StoreConfig {
            value_region_bytes: 1 << 20,
            ..small()
        },
    )
    .unwrap();
    let mut w = s.worker(0).unwrap();
    w.put(2, &[7, 8]).unwrap();
    let old = Addr::decode(w.address_word(2).unwrap()).expect("published");
    w.insert_edge(2, 9).unwrap();
    let new = Addr::decode(w.address_word(2).unwrap()).expect("published");
    assert_ne!(old, new, "updates are out of place");
    // A reader holding the old address finds a zeroed header (passive invalidation).
    let values = s.fabric().lookup(0, "values").unwrap().id;
    let mut p = s.fabric().port(1).unwrap();
    assert_eq!(p.read_word(0, values, old.offset_units() * 8).unwrap(), 0);
    assert_eq!(w.get(2).unwrap(), Some(vec![7, 8, 9]));
}

#[test]
fn workers_only_for_hosted_machines() {
    let s = Store::create(fabric(2), small()).unwrap();
    assert!(s.worker(5).is_err());
}
