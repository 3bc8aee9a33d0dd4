//! The driver end to end on a small in-process cluster (Pragh 3 "Execution
//! flow"): a machine that keeps reading remote values gets them migrated to
//! it, reads stay correct throughout, the coordinator can stop and restart
//! from its record while workers serve and queued migrations finish, and
//! deferred mode's tracking runs through the driver.

use std::time::{Duration, Instant};

use locus_coordinator::{CoordinatorError, Driver, DriverConfig, PolicyConfig};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::addr::Addr;
use locus_store::{home_of, Store, StoreConfig};

const MACHINES: usize = 4;
const READER: u8 = 3;

fn cluster() -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig::with_machines(MACHINES).without_model()).unwrap();
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 256,
            value_region_bytes: 8 << 20,
            // Counts live in cache entries: a lease shorter than the monitoring
            // interval would drop them before they are reported.
            reclaim_lease_ms: 1_000,
            cache_lease_ms: 1_000,
            cache_bytes_max: 1 << 20,
            hot_accesses: 20,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

fn list(v: u32) -> Vec<u32> {
    (0..8).map(|i| v * 100 + i).collect()
}

fn holder(store: &Store<LocalFabric>, v: u32) -> u8 {
    let word = store.worker(0).unwrap().address_word(v).unwrap();
    Addr::decode(word).unwrap().holder(home_of(v, MACHINES))
}

/// Reads every vertex in `vs` from the reader machine four times, checking
/// each value: polled every 10 ms, about 80 reads of each in a 200 ms
/// interval, clear of the 37 or so the coordinator asks of a reader whose
/// rivals it cannot see (7 accesses an interval each).
fn read_all(store: &Store<LocalFabric>, vs: &[u32]) {
    let mut w = store.worker(READER).unwrap();
    for _ in 0..4 {
        for &v in vs {
            assert_eq!(w.get(v).unwrap(), Some(list(v)), "vertex {v}");
        }
    }
}

/// Puts vertices 0-39 at their homes; returns those homed away from the reader.
fn put_values(store: &Store<LocalFabric>) -> Vec<u32> {
    for v in 0..40 {
        store
            .worker(home_of(v, MACHINES))
            .unwrap()
            .put(v, &list(v))
            .unwrap();
    }
    (0..40)
        .filter(|&v| home_of(v, MACHINES) != READER)
        .collect()
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn hot_remote_values_move_to_their_reader_and_survive_a_coordinator_restart() {
    let store = cluster();
    let _services = store.spawn_services().unwrap();
    let hot = put_values(&store);
    let dir = tempfile::tempdir().unwrap();
    let too_long = DriverConfig {
        policy: PolicyConfig {
            interval_ms: 5_000,
            ..PolicyConfig::default()
        },
        ..DriverConfig::default()
    };
    let e = Driver::start(store.clone().into(), too_long)
        .err()
        .expect("refused");
    assert!(
        matches!(
            e,
            CoordinatorError::SettingBelow {
                field: "cache_lease_ms",
                min_field: "interval_ms",
                min_value: 5_000,
                ..
            }
        ),
        "{e:?}"
    );
    let no_executors = DriverConfig {
        migration_threads: 0,
        ..DriverConfig::default()
    };
    let e = Driver::start(store.clone().into(), no_executors)
        .err()
        .expect("refused");
    assert!(
        matches!(
            e,
            CoordinatorError::InvalidSetting {
                field: "migration_threads",
                ..
            }
        ),
        "{e:?}"
    );
    let mut driver = Driver::start(
        store.clone().into(),
        DriverConfig {
            policy: PolicyConfig {
                interval_ms: 200,
                dwell_ms: 200,
                forget_after_ms: 1_000,
                ..PolicyConfig::default()
            },
            hot_poll_ms: 20,
            record_path: Some(dir.path().join("coordinator.redb")),
            ..DriverConfig::default()
        },
    )
    .unwrap();
    // Keep reading until every hot value is held by the reader.
    wait_until(
        "hot values to move to the reader",
        Duration::from_secs(60),
        || {
            read_all(&store, &hot);
            hot.iter().all(|&v| holder(&store, v) == READER)
        },
    );
    assert!(
        driver
            .stats()
            .moved
            .load(std::sync::atomic::Ordering::Relaxed)
            >= hot.len() as u64
    );
    assert!(driver.error().is_none(), "{:?}", driver.error());

    // Stop the coordinator: reads go on, nothing moves back.
    let c = driver.stop_coordinator().expect("it was running");
    assert!(c.stats().approved >= hot.len() as u64);
    for _ in 0..20 {
        read_all(&store, &hot);
    }
    // Restart: the record says where every hot value went.
    driver.start_coordinator().unwrap();
    let restored = driver.stop_coordinator().unwrap();
    for &v in &hot {
        assert_eq!(
            restored.holder(locus_store::Key::part(v, 0)),
            Some(READER),
            "vertex {v}"
        );
    }
    driver.stop();
    read_all(&store, &hot);
}

/// Deferred mode (Pragh 4.4) through the driver: the holders track their own
/// reads for an interval, the coordinator (which waits for events or its
/// next deadline rather than polling) collects the counts, and the values
/// move. `coordinator_decisions.rs` checks the deadline itself.
#[test]
fn deferred_mode_tracks_the_holders_then_moves_hot_values() {
    let store = cluster();
    let _services = store.spawn_services().unwrap();
    let hot = put_values(&store);
    let driver = Driver::start(
        store.clone().into(),
        DriverConfig {
            policy: PolicyConfig {
                mode: locus_coordinator::Mode::Deferred,
                interval_ms: 200,
                dwell_ms: 200,
                forget_after_ms: 1_000,
                ..PolicyConfig::default()
            },
            hot_poll_ms: 20,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    wait_until(
        "hot values to move to the reader after tracking",
        Duration::from_secs(60),
        || {
            read_all(&store, &hot);
            hot.iter().all(|&v| holder(&store, v) == READER)
        },
    );
    let stats = driver.stop().expect("the coordinator ran").stats();
    assert!(stats.track_requests >= 1, "{stats:?}");
    assert!(stats.approved >= hot.len() as u64, "{stats:?}");
    read_all(&store, &hot);
}

/// A paused driver moves nothing however hot its values run, for several
/// intervals; resumed, it moves them to their reader; paused again, it
/// still stops at once (a stop wakes paused threads).
#[test]
fn a_paused_driver_moves_nothing_until_it_is_resumed() {
    let store = cluster();
    let hot = put_values(&store);
    let driver = Driver::start(
        store.clone().into(),
        DriverConfig {
            policy: PolicyConfig {
                interval_ms: 200,
                dwell_ms: 200,
                forget_after_ms: 1_000,
                ..PolicyConfig::default()
            },
            hot_poll_ms: 20,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    driver.pause();
    assert!(driver.is_paused());
    let moved = || {
        driver
            .stats()
            .moved
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1_500) {
        read_all(&store, &hot);
        std::thread::sleep(Duration::from_millis(10));
    }
    let approved = driver
        .stats()
        .approved
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((moved(), approved), (0, 0), "a paused driver worked");
    assert!(hot
        .iter()
        .all(|&v| holder(&store, v) == home_of(v, MACHINES)));
    driver.resume();
    assert!(!driver.is_paused());
    // The executor counts a move after the value is at its new holder, so
    // the count is awaited too (alone it lagged once on a loaded host).
    wait_until(
        "hot values to move to the reader once resumed, and be counted",
        Duration::from_secs(60),
        || {
            read_all(&store, &hot);
            hot.iter().all(|&v| holder(&store, v) == READER) && moved() >= hot.len() as u64
        },
    );
    driver.pause();
    let t = Instant::now();
    driver.stop();
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "a paused driver took {:?} to stop",
        t.elapsed()
    );
    read_all(&store, &hot);
}

/// The driver keeps time on a clock that stands still while it is paused:
/// paused for three intervals while its values run hot, it sends no
/// periodic report the moment it resumes (on the wall clock the interval
/// would be long past, and the report would divide the counts by time
/// nothing ran), and sends one once an interval of running time has passed.
#[test]
fn a_paused_drivers_intervals_count_running_time_only() {
    let store = cluster();
    let hot = put_values(&store);
    let driver = Driver::start(
        store.clone().into(),
        DriverConfig {
            policy: PolicyConfig {
                // Within the cluster's 1 s cache lease, which holds the counts.
                interval_ms: 800,
                dwell_ms: 800,
                forget_after_ms: 3_000,
                ..PolicyConfig::default()
            },
            hot_poll_ms: 20,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    driver.pause();
    let reports = || {
        driver
            .stats()
            .reports
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let read_for = |d: Duration| {
        let t0 = Instant::now();
        while t0.elapsed() < d {
            read_all(&store, &hot);
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    read_for(Duration::from_millis(2_500));
    assert_eq!(reports(), 0, "a paused driver reported");
    driver.resume();
    let resumed = Instant::now();
    read_for(Duration::from_millis(300));
    let early = reports();
    let ran = resumed.elapsed();
    // Less than the interval has run since the start (the driver was paused
    // at once), unless the host stalled this thread for most of it.
    if ran < Duration::from_millis(700) {
        assert_eq!(
            early, 0,
            "reported {ran:?} after resuming: the pause was counted"
        );
    }
    wait_until(
        "a periodic report after an interval of running time",
        Duration::from_secs(30),
        || {
            read_all(&store, &hot);
            reports() >= 1
        },
    );
    driver.stop();
}
