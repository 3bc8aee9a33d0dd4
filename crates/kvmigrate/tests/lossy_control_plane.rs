//! The reliable control plane (NetMigrate 7) under a lossy network: the seeded simulation with
//! a `Lossy` transport that drops, duplicates and reorders a share of the migration and control
//! datagrams. Every client history stays linearizable per key; with modest loss every
//! migration finishes; with heavy loss some give up, and an abort leaves the source
//! authoritative with nothing acknowledged lost (destination writes are mirrored). One more
//! test runs the threaded cluster over real UDP sockets under the same decorator. A failure
//! names its seed.

use std::sync::Arc;
use std::time::Duration;

use locus_kvmigrate::check::check_history;
use locus_kvmigrate::runtime::{Cluster, ClusterConfig};
use locus_kvmigrate::sim::{run, SimConfig, SimReport};
use locus_kvmigrate::transport::{Faults, Lossy, SharedTransport, Udp};
use locus_kvmigrate::{Geometry, MigrationPhase, Protocol, ServerConfig};

fn lossy_run(seed: u64, protocol: Protocol, faults: Faults, retries_max: u32) -> SimReport {
    let mut cfg = SimConfig::small(seed, protocol);
    cfg.faults = faults;
    cfg.retries_max = retries_max;
    // An abort must lose nothing acknowledged: destination writes are mirrored first.
    cfg.mirror_writes = true;
    cfg.bf_bytes = if seed.is_multiple_of(2) { 1 } else { 64 };
    cfg.steps_max = 2_000_000;
    let report = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = check_history(&report.history, |k| report.initial.get(&k).cloned()) {
        panic!("seed {seed} ({}): {e}", protocol.name());
    }
    assert!(
        matches!(
            report.status.phase,
            MigrationPhase::Done | MigrationPhase::Aborted
        ),
        "seed {seed}: {:?}",
        report.status
    );
    report
}

/// A packet and its answer each meet a fault one time in ten, so one exchange fails about one
/// time in five: 9 tries fail together about once in 3 million.
const ENOUGH_RETRIES: u32 = 8;

const SOME_LOSS: Faults = Faults {
    drop_pct: 10,
    duplicate_pct: 10,
    reorder_pct: 10,
    queries: false,
};

#[test]
fn netmigrate_finishes_linearizably_when_a_tenth_is_dropped_duplicated_or_reordered() {
    let reports: Vec<SimReport> = (0..300)
        .map(|seed| lossy_run(seed, Protocol::NetMigrate, SOME_LOSS, ENOUGH_RETRIES))
        .collect();
    for (seed, r) in reports.iter().enumerate() {
        assert_eq!(
            r.status.phase,
            MigrationPhase::Done,
            "seed {seed}: {:?}",
            r.status
        );
    }
    // The faults and the mechanisms against them were all exercised.
    let sum = |f: fn(&SimReport) -> u64| reports.iter().map(f).sum::<u64>();
    assert!(sum(|r| r.faults.dropped) > 0);
    assert!(sum(|r| r.faults.duplicated) > 0);
    assert!(sum(|r| r.faults.reordered) > 0);
    assert!(
        sum(|r| r.source.resent) > 0,
        "the source sent something again"
    );
    assert!(
        sum(|r| r.destination.resent) > 0,
        "the destination pulled or mirrored again"
    );
    assert!(
        sum(|r| r.source.duplicates) > 0,
        "a duplicate answer was ignored"
    );
    assert!(
        sum(|r| r.router.control_duplicates) > 0,
        "the router saw a control packet twice"
    );
}

#[test]
fn the_baselines_finish_linearizably_under_the_same_loss() {
    for p in [
        Protocol::StopAndCopy,
        Protocol::SourceBased,
        Protocol::Rocksteady,
        Protocol::Fulva,
    ] {
        for seed in 0..80 {
            let r = lossy_run(seed, p, SOME_LOSS, ENOUGH_RETRIES);
            assert_eq!(
                r.status.phase,
                MigrationPhase::Done,
                "{} seed {seed}: {:?}",
                p.name(),
                r.status
            );
        }
    }
}

#[test]
fn loss_beyond_the_bound_aborts_cleanly_and_loses_nothing_acknowledged() {
    let heavy = Faults {
        drop_pct: 60,
        duplicate_pct: 10,
        reorder_pct: 10,
        queries: false,
    };
    let mut aborted = 0;
    for seed in 0..150 {
        // `lossy_run` checks the histories, the read-back after the run included.
        let r = lossy_run(seed, Protocol::NetMigrate, heavy, 4);
        if r.status.phase == MigrationPhase::Aborted {
            aborted += 1;
            let why = r.status.last_error.clone().unwrap_or_default();
            assert!(why.contains("went unanswered"), "seed {seed}: {why}");
        }
    }
    assert!(aborted > 0, "60% loss never exhausted the retries");
}

#[test]
fn a_migration_over_lossy_udp_sockets_finishes_and_keeps_every_value() {
    let geometry = Geometry::new(10, 3).unwrap();
    let mut server = ServerConfig::new(0, 0, geometry);
    // Slow machines: patience for stalls, quick resends for losses.
    server.ack_timeout_us = 30_000_000;
    server.retransmit_us = 2_000;
    server.retries_max = 30;
    let cfg = ClusterConfig::new(2, 2, server);
    let udp = Udp::bind_loopback(cfg.nodes()).unwrap();
    let faults = Faults {
        drop_pct: 10,
        duplicate_pct: 10,
        reorder_pct: 10,
        queries: false,
    };
    let net = Arc::new(Lossy::new(udp, faults, 16).unwrap());
    let transport: SharedTransport = net.clone();
    let cluster = Cluster::start_with(cfg, transport).unwrap();
    let values: Vec<(u64, Vec<u8>)> = (0..500)
        .map(|k| (k, format!("v{k}").into_bytes()))
        .collect();
    cluster.load(1, values.clone()).unwrap();
    let mut client = cluster.client().unwrap();
    cluster.migrate(1, 1, 2, Protocol::NetMigrate).unwrap();
    for k in 0..50 {
        client.set(1, k, format!("w{k}").into_bytes()).unwrap();
    }
    let status = cluster.wait_migration(1, Duration::from_secs(120)).unwrap();
    assert_eq!(status.phase, MigrationPhase::Done, "{status:?}");
    for (k, v) in values {
        let want = if k < 50 {
            format!("w{k}").into_bytes()
        } else {
            v
        };
        assert_eq!(client.get(1, k).unwrap(), Some(want), "key {k}");
    }
    assert_eq!(
        cluster.peek(2, 1, 7).unwrap().map(|i| i.value),
        Some(Some(b"w7".to_vec()))
    );
    let c = net.counters();
    assert!(c.dropped + c.duplicated + c.reordered > 0, "{c:?}");
    cluster.shutdown().unwrap();
}
