//! The monitor and coordinator threads run nicer than the process by
//! `background_nice` (so that, sharing cores with query workers, they do not
//! preempt them), executors at the process's priority (workers wait on the
//! moves they make), and impossible settings are refused naming the field.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use locus_coordinator::{CoordinatorError, Driver, DriverConfig};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Store, StoreConfig};

fn cluster() -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 1 << 20,
            reclaim_lease_ms: 60_000,
            cache_bytes_max: 1 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

/// The nice value in a `/proc/.../stat` line (field 19; the fields after the
/// command name, which is in parentheses and may hold spaces, start at 3).
fn nice_in(stat: &str) -> i32 {
    let rest = &stat[stat.rfind(')').expect("a stat line") + 1..];
    rest.split_whitespace().nth(16).unwrap().parse().unwrap()
}

/// Every thread of this process whose name starts with one of the driver's,
/// as (name, nice).
fn driver_threads() -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = e.unwrap().path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue; // the thread ended while we looked
        };
        let comm = comm.trim().to_string();
        if ["locus-monitor", "locus-migrate", "locus-coordinat"]
            .iter()
            .any(|p| comm.starts_with(p))
        {
            out.push((comm, nice_in(&stat)));
        }
    }
    out.sort();
    out
}

/// Waits until the monitor and coordinator run at `background` (each lowers
/// its own priority as it starts) and the executors at `own`; panics with
/// what it saw otherwise.
fn wait_for_nice(background: i32, own: i32) {
    let t0 = Instant::now();
    loop {
        let seen = driver_threads();
        let kinds = ["locus-monitor", "locus-migrate", "locus-coordinat"]
            .iter()
            .filter(|p| seen.iter().any(|(c, _)| c.starts_with(*p)))
            .count();
        let expected = |comm: &str| {
            if comm.starts_with("locus-migrate") {
                own
            } else {
                background
            }
        };
        if kinds == 3 && seen.iter().all(|(c, n)| *n == expected(c)) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "driver threads not at nice {background} (executors {own}): {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn driver_threads_run_nicer_than_the_process_and_bad_settings_are_refused() {
    let store = cluster();
    let _services = store.spawn_services().unwrap();
    for bad in [-1, 20] {
        let e = Driver::start(
            store.clone().into(),
            DriverConfig {
                background_nice: bad,
                ..DriverConfig::default()
            },
        )
        .err()
        .expect("refused");
        assert!(
            matches!(
                e,
                CoordinatorError::InvalidSetting {
                    field: "background_nice",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("0..=19"), "{e}");
    }
    assert_eq!(DriverConfig::default().background_nice, 19);
    // This test's own thread runs at the process's niceness (0 unless the
    // test runner itself was started with nice).
    let own = nice_in(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
    for by in [7, 0, 19] {
        let driver = Driver::start(
            store.clone().into(),
            DriverConfig {
                background_nice: by,
                ..DriverConfig::default()
            },
        )
        .unwrap();
        wait_for_nice((own + by).min(19), own);
        assert!(driver.error().is_none(), "{:?}", driver.error());
        driver.stop();
        assert!(driver_threads().is_empty(), "{:?}", driver_threads());
    }
}
