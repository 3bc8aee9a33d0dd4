//! Quiet services (`Services::set_quiet`, for clusters that take turns in
//! one process: `bench pragh --slices`) wake for nothing but messages.
//!
//! Linux only: counts context switches in `/proc/self/task`. Its own test
//! binary, so no other test's services are counted.

use std::time::Duration;

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Store, StoreConfig};

mod common;
use common::switches;

/// Quiet services (`Services::set_quiet`, for clusters taking turns in one
/// process) wake for nothing but messages: no garbage collection, no clock;
/// a forwarded update still wakes them and completes; they stop at once.
#[test]
fn quiet_services_wake_only_for_messages() {
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
    services.set_quiet(true);
    std::thread::sleep(Duration::from_millis(300));
    // Quiet, the 1 s nap bounds each service's wake-ups to ~2 in 2 s;
    // idle but not quiet, they woke ~160 times (service_idle.rs).
    let before = switches("locus-service");
    std::thread::sleep(Duration::from_secs(2));
    let during = switches("locus-service") - before;
    eprintln!("{MACHINES} quiet services: {during} switches in 2 s");
    let mut w = store.worker(0).unwrap();
    let remote: Vec<u32> = (0..1_000u32)
        .filter(|&v| locus_store::home_of(v, MACHINES) != 0)
        .take(10)
        .collect();
    for &v in &remote {
        w.put(v, &[v, v + 2]).unwrap();
    }
    for &v in &remote {
        assert_eq!(w.get(v).unwrap(), Some(vec![v, v + 2]));
    }
    services.set_quiet(false);
    for &v in &remote {
        w.put(v, &[v]).unwrap();
        assert_eq!(w.get(v).unwrap(), Some(vec![v]));
    }
    services.set_quiet(true);
    let t = std::time::Instant::now();
    drop(services);
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "quiet services took {:?} to stop",
        t.elapsed()
    );
    assert!(
        during < 40,
        "{during} context switches of {MACHINES} quiet services in 2 s"
    );
}
