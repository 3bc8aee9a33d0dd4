//! A service that has answered a request stops looking for the next one
//! after a bounded time, not after a number of looks: with every core taken
//! by busy threads (as the query workers of a benchmark take them), each of a
//! service's yielding looks hands a core back and forth, so 64 looks cost up
//! to 64 context switches per forwarded request (docs/results.md, stop 44).
//!
//! Linux only: counts context switches in `/proc/self/task`. Its own test
//! binary, so no other test's threads are counted.
#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Store, StoreConfig};

mod common;
use common::switches;

#[test]
fn a_service_on_busy_cores_switches_a_few_times_per_request_not_once_per_look() {
    const MACHINES: usize = 4;
    const FORWARDS: usize = 100;
    let fabric = LocalFabric::new(LocalConfig::with_machines(MACHINES).without_model()).unwrap();
    let store = Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 256,
            value_region_bytes: 1 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let services = store.spawn_services().unwrap();
    // One busy thread per core: every yield of a service gives its core away.
    let stop = Arc::new(AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let busy_threads = cores;
    let busy: Vec<_> = (0..busy_threads)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut w = store.worker(0).unwrap();
    let remote: Vec<u32> = (0..100_000u32)
        .filter(|&v| locus_store::home_of(v, MACHINES) != 0)
        .take(FORWARDS)
        .collect();
    let before = switches("locus-service");
    let started = std::time::Instant::now();
    for &v in &remote {
        w.put(v, &[v, v + 1]).unwrap();
    }
    let took = started.elapsed();
    // Let the last service finish looking before counting.
    std::thread::sleep(Duration::from_millis(100));
    let during = switches("locus-service") - before;
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
    for &v in &remote {
        assert_eq!(w.get(v).unwrap(), Some(vec![v, v + 1]));
    }
    drop(services);
    let per = during as f64 / FORWARDS as f64;
    eprintln!("{FORWARDS} forwards beside {busy_threads} busy threads on {cores} cores in {took:?}: {during} service switches, {per:.1} each");
    // A wake, a few yields within the 50 us of looking (each may lose the
    // core for a scheduler slice, after which the time is up), a park: 4.2-9.3
    // each in most runs on a 2-core machine, but 14.0 in a CI run and 14.8
    // in 1 of 6 local runs (10.3 at most in 6 runs of the code before
    // stop 66's changes, which left the service loop as it was: the spread
    // is the scheduler's). The 64 looks this replaced counted
    // 10.8-42. The two overlap, so this test catches only a return to
    // per-look switching at its worst; the count itself is a measurement,
    // not a behaviour a loaded machine keeps.
    assert!(
        per < 32.0,
        "{during} context switches of the services for {FORWARDS} forwards ({per:.1} each)"
    );
}
