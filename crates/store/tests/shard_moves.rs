//! The shard-based baseline (Pragh 2.3): whole shards move, keys and values,
//! and every machine then finds them through its shard map.

use locus_fabric::counting::{Counting, Locality};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{home_of, Store, StoreConfig};

const MACHINES: usize = 4;

fn list(v: u32) -> Vec<u32> {
    (0..(v % 7 + 1)).map(|i| v * 10 + i).collect()
}

#[test]
fn moved_shards_are_read_and_updated_at_their_new_machine() {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(MACHINES).without_model()).unwrap(),
    );
    let store = Store::create(
        fabric.clone(),
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 4 << 20,
            reclaim_lease_ms: 1,
            cache_bytes_max: 0,
            shards_per_machine: 4,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let _services = store.spawn_services().unwrap();
    for v in 0..200u32 {
        assert_eq!(
            store.owner(v),
            home_of(v, MACHINES),
            "starts as hash placement"
        );
        store
            .worker(store.owner(v))
            .unwrap()
            .put(v, &list(v))
            .unwrap();
    }
    // Shards 1 (machine 1) and 6 (machine 2) move to machine 3; shard 3 (machine 3) to 0.
    let (keys, bytes) = store
        .move_shards(&[(1, 1, 3), (6, 2, 3), (3, 3, 0)])
        .unwrap();
    let moved = |v: u32| [1, 6, 3].contains(&(v % 16));
    assert_eq!(keys, (0..200u32).filter(|&v| moved(v)).count() as u64);
    assert!(bytes > keys * 16);
    for v in 0..200u32 {
        let want = match v % 16 {
            1 | 6 => 3,
            3 => 0,
            _ => home_of(v, MACHINES),
        };
        assert_eq!(store.owner(v), want, "vertex {v}");
        for m in 0..MACHINES as u8 {
            assert_eq!(
                store.worker(m).unwrap().get(v).unwrap(),
                Some(list(v)),
                "vertex {v} from {m}"
            );
        }
    }
    // A read of a moved vertex at its new machine is local.
    fabric.counters().reset();
    store.worker(3).unwrap().get(1).unwrap();
    assert_eq!(fabric.counters().total().ops_total(Locality::Remote), 0);
    // Updates go to the new machine too, from anywhere.
    store.worker(0).unwrap().insert_edge(1, 999).unwrap();
    let mut want = list(1);
    want.push(999);
    assert_eq!(store.worker(2).unwrap().get(1).unwrap(), Some(want.clone()));
    // And back again.
    store.move_shards(&[(1, 3, 1)]).unwrap();
    assert_eq!(store.owner(1), 1);
    assert_eq!(store.worker(0).unwrap().get(1).unwrap(), Some(want));
    // A move from the wrong machine is refused.
    assert!(store
        .move_shards(&[(2, 0, 1)])
        .unwrap_err()
        .to_string()
        .contains("shard 2"));
}
