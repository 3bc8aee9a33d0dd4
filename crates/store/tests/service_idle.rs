//! Idle services leave the cores to the workers: with every machine in the
//! process (so every sender wakes them), a service that finds nothing parks
//! longer and longer, up to 50 ms, and collects garbage every 1% of the
//! reclaim lease (100 ms at the default lease) instead of every 10 ms; a
//! service parked that long still answers a forwarded update.
//!
//! Linux only: counts context switches in `/proc/self/task`. Its own test
//! binary, so no other test's services are counted.

use std::time::Duration;

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Store, StoreConfig};

mod common;
use common::switches;

#[test]
fn idle_services_park_long_and_still_answer_a_forward_at_once() {
    const MACHINES: usize = 4;
    let fabric = LocalFabric::new(LocalConfig::with_machines(MACHINES).without_model()).unwrap();
    let store = Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 1 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let services = store.spawn_services().unwrap();
    std::thread::sleep(Duration::from_millis(500)); // past the spins and the parks' growth
    let before = switches("locus-service");
    std::thread::sleep(Duration::from_secs(2));
    let during = switches("locus-service") - before;
    eprintln!("{MACHINES} idle services: {during} switches in 2 s");
    // Parks of at most 5 ms and a collection every 10 ms woke each service
    // ~200 times a second: 1,600 switches here. At 50 ms, ~160.
    assert!(
        during < 600,
        "{during} context switches of {MACHINES} idle services in 2 s"
    );
    // A vertex update homed on another machine is forwarded to that
    // machine's parked service, which the sender wakes.
    let mut w = store.worker(0).unwrap();
    let remote: Vec<u32> = (0..1_000u32)
        .filter(|&v| locus_store::home_of(v, MACHINES) != 0)
        .take(10)
        .collect();
    for &v in &remote {
        w.put(v, &[v, v + 1]).unwrap();
    }
    for &v in &remote {
        assert_eq!(w.get(v).unwrap(), Some(vec![v, v + 1]));
    }
    drop(services);
}
