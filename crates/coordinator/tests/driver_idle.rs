//! An idle driver leaves the cores to the workers: with nothing reported and
//! nothing to migrate, its coordinator and executors sleep until an event,
//! a deadline or the stop, instead of polling their queues (each empty poll
//! cost a few `sched_yield`s, each a worker preempted on a 2-core machine).
//!
//! Linux only: counts context switches in `/proc/self/task`. Its own test
//! binary, so no other test's driver threads are counted.

use std::time::{Duration, Instant};

use locus_coordinator::{Driver, DriverConfig, PolicyConfig};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Store, StoreConfig};

/// Context switches (voluntary and not) of this process's threads whose
/// names start with one of `prefixes`.
fn switches(prefixes: &[&str]) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if !prefixes.iter().any(|p| comm.trim().starts_with(p)) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        for line in status.lines() {
            if line.starts_with("voluntary_ctxt_switches:")
                || line.starts_with("nonvoluntary_ctxt_switches:")
            {
                total += line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .expect("a switch count");
            }
        }
    }
    total
}

#[test]
fn an_idle_drivers_coordinator_and_executors_sleep_and_stop_at_once() {
    let fabric = LocalFabric::new(LocalConfig::with_machines(4).without_model()).unwrap();
    let store = Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 256,
            value_region_bytes: 4 << 20,
            cache_bytes_max: 1 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let driver = Driver::start(
        store,
        DriverConfig {
            policy: PolicyConfig {
                interval_ms: 200,
                dwell_ms: 200,
                forget_after_ms: 1_000,
                ..PolicyConfig::default()
            },
            migration_threads: 2,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    let idle = ["locus-coordinat", "locus-migrate"];
    std::thread::sleep(Duration::from_millis(300)); // past start-up
    let before = switches(&idle);
    std::thread::sleep(Duration::from_secs(2));
    let during = switches(&idle) - before;
    eprintln!("idle driver: {during} switches in 2 s");
    // Polling every 50 ms (coordinator) and 20 ms (two executors) woke them
    // 240 times in 2 s, and each empty poll yielded a few times more: over
    // 500 switches. Waiting for work: the coordinator's idle timeout twice,
    // a few yields each.
    assert!(
        during < 60,
        "{during} context switches of an idle driver's coordinator and executors in 2 s"
    );
    let t0 = Instant::now();
    driver.stop();
    let stop = t0.elapsed();
    // Stopping wakes them. Executors wait for nothing else, so without the
    // wake this would hang; a coordinator not woken would cost up to its
    // 1 s idle wait (the bound is loose for a loaded machine: the stop
    // itself takes at most the monitor's 100 ms poll).
    assert!(
        stop < Duration::from_millis(900),
        "the driver took {stop:?} to stop"
    );
}
