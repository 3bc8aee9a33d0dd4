//! The driver end to end with replicas on (a Locus extension past Pragh 6.1):
//! values that two machines keep reading cannot move to both, so the
//! coordinator keeps them put and each reader gets a replica; reads become
//! local and stay correct while updates invalidate replicas and the driver
//! makes new ones.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use locus_coordinator::{Driver, DriverConfig, PolicyConfig};
use locus_fabric::counting::{Counting, Locality};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::OpKind;
use locus_store::{home_of, Store, StoreConfig};

const MACHINES: usize = 4;
const READERS: [u8; 2] = [2, 3];
type F = Counting<LocalFabric>;

fn cluster() -> Store<F> {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(MACHINES).without_model()).unwrap(),
    );
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 256,
            value_region_bytes: 8 << 20,
            reclaim_lease_ms: 1_000,
            cache_lease_ms: 1_000,
            cache_bytes_max: 1 << 20,
            hot_accesses: 20,
            replica_bytes_max: 1 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

fn list(v: u32, extra: u32) -> Vec<u32> {
    (0..8)
        .map(|i| v * 100 + i)
        .chain(1000..1000 + extra)
        .collect()
}

#[test]
fn values_two_machines_read_get_replicas_and_updates_stay_visible() {
    let store = cluster();
    let _services = store.spawn_services().unwrap();
    // Homed on machines 0 and 1, read equally by 2 and 3: contended.
    let shared: Vec<u32> = (0..40)
        .filter(|&v| !READERS.contains(&home_of(v, MACHINES)))
        .collect();
    for &v in &shared {
        store
            .worker(home_of(v, MACHINES))
            .unwrap()
            .put(v, &list(v, 0))
            .unwrap();
    }
    let driver = Driver::start(
        store.clone().into(),
        DriverConfig {
            policy: PolicyConfig {
                interval_ms: 200,
                dwell_ms: 200,
                forget_after_ms: 1_000,
                replicas: true,
                ..PolicyConfig::default()
            },
            hot_poll_ms: 20,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    let mut readers: Vec<_> = READERS.iter().map(|&m| store.worker(m).unwrap()).collect();
    let mut extra = 0u32;
    let read_all = |readers: &mut Vec<locus_store::Worker<F>>, extra: u32| {
        for w in readers.iter_mut() {
            for &v in &shared {
                assert_eq!(w.get(v).unwrap(), Some(list(v, extra)), "vertex {v}");
            }
        }
    };
    // Read until one round of reads on both machines is local, or give up.
    let read_until_local = |readers: &mut Vec<locus_store::Worker<F>>, extra: u32, what: &str| {
        let t0 = Instant::now();
        loop {
            let before = store.fabric().counters().total();
            read_all(readers, extra);
            let d = store.fabric().counters().total().minus(&before);
            if d.ops_of(Locality::Remote, OpKind::Read) == 0 {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{what}: reads still remote after 60 s: {d:?}, driver {:?}",
                driver.stats()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    read_until_local(&mut readers, extra, "first replicas");
    assert!(driver.stats().replicas_created.load(Ordering::Relaxed) >= shared.len() as u64);
    // Updates from the homes: every reader sees each one at once (the
    // replicas were invalidated before it was acknowledged)...
    for round in 1..=3u32 {
        for &v in &shared {
            assert!(store
                .worker(home_of(v, MACHINES))
                .unwrap()
                .insert_edge(v, 1000 + round - 1)
                .unwrap());
        }
        extra = round;
        read_all(&mut readers, extra);
    }
    // ...and the driver replicates them again.
    read_until_local(&mut readers, extra, "replicas after the updates");
    assert!(driver.error().is_none(), "{:?}", driver.error());
    driver.stop();
}
