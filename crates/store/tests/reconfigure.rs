//! `Store::reconfigure`: a loaded store takes another scheme's cache and
//! replica settings, as if it had been created with them, and refuses what
//! it cannot honour (a changed layout, another handle, replicas held).

use locus_fabric::counting::{Counting, Locality};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::OpKind;
use locus_store::{Key, Replication, Store, StoreConfig, StoreError};

type F = Counting<LocalFabric>;

fn plain() -> StoreConfig {
    StoreConfig {
        buckets_per_machine: 64,
        value_region_bytes: 8 << 20,
        part_neighbors_max: 4,
        cache_bytes_max: 0,
        ..StoreConfig::default()
    }
}

fn with_replicas() -> StoreConfig {
    StoreConfig {
        cache_bytes_max: 1 << 20,
        replica_bytes_max: 1 << 20,
        ..plain()
    }
}

fn store() -> Store<F> {
    let fabric =
        Counting::new(LocalFabric::new(LocalConfig::with_machines(3).without_model()).unwrap());
    let s = Store::create(fabric, plain()).unwrap();
    for v in 0..30u32 {
        s.worker((v % 3) as u8)
            .unwrap()
            .put(v, &[v + 100, v + 200])
            .unwrap();
    }
    s
}

/// Remote READs of one GET of `v` from machine 2.
fn remote_reads_of_get(s: &Store<F>, v: u32) -> u64 {
    let reads = || {
        s.fabric()
            .counters()
            .total()
            .ops_of(Locality::Remote, OpKind::Read)
    };
    let before = reads();
    assert_eq!(
        s.worker(2).unwrap().get(v).unwrap(),
        Some(vec![v + 100, v + 200])
    );
    reads() - before
}

#[test]
fn a_loaded_store_takes_the_cache_and_replica_settings_of_a_new_one() {
    let mut s = store();
    assert!(s.cache(2).is_none());
    // No cache: every GET of a remote key reads its bucket and its value.
    assert_eq!(remote_reads_of_get(&s, 1), 2);
    assert_eq!(remote_reads_of_get(&s, 1), 2);

    s.reconfigure(with_replicas()).unwrap();
    assert_eq!(s.config(), &with_replicas());
    assert!(s.cache(2).is_some());
    // The cache is used: the second GET finds the address without the bucket.
    assert_eq!(remote_reads_of_get(&s, 1), 2);
    assert_eq!(remote_reads_of_get(&s, 1), 1);
    // Replicas are on, and every value loaded before is still there.
    {
        let _services = s.spawn_services().unwrap();
        let mut w = s.worker(2).unwrap();
        assert!(matches!(
            w.replicate(Key::part(1, 0)).unwrap(),
            Replication::Created { .. }
        ));
        assert_eq!(remote_reads_of_get(&s, 1), 0, "served by the replica");
        for v in 0..30u32 {
            assert_eq!(w.get(v).unwrap(), Some(vec![v + 100, v + 200]));
        }
    }
    assert!(s.replica_bytes(2) > 0);
    // Dropping the replica sets now would leak their blocks.
    let err = s.reconfigure(plain()).unwrap_err();
    assert!(
        matches!(&err, StoreError::Config(m) if m.contains("machine 2 holds replicas")),
        "{err}"
    );
    assert!(
        s.cache(2).is_some(),
        "a refused reconfigure changes nothing"
    );
}

#[test]
fn reconfigure_refuses_a_layout_change_and_a_shared_store() {
    let mut s = store();
    let bigger = StoreConfig {
        value_region_bytes: 16 << 20,
        ..plain()
    };
    let err = s.reconfigure(bigger).unwrap_err();
    assert!(
        matches!(&err, StoreError::Config(m) if m.contains("only the location cache")),
        "{err}"
    );

    let other = s.clone();
    let err = s.reconfigure(with_replicas()).unwrap_err();
    assert!(
        matches!(&err, StoreError::Config(m) if m.contains("only handle")),
        "{err}"
    );
    drop(other);
    // Invalid settings are refused as `Store::create` refuses them.
    let no_cache_replicas = StoreConfig {
        replica_bytes_max: 1 << 20,
        ..plain()
    };
    assert!(s.reconfigure(no_cache_replicas).is_err());
    s.reconfigure(with_replicas()).unwrap();
    assert_eq!(remote_reads_of_get(&s, 4), 2);
}
