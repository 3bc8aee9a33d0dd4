//! Seeded simulation of every protocol with 1-byte filters (so the router's BF and CBF report
//! false positives all the time): client histories are linearizable per key, and the final
//! read-back sees every acknowledged write. A failure names its seed.

use locus_kvmigrate::check::check_history;
use locus_kvmigrate::sim::{run, SimConfig};
use locus_kvmigrate::{MigrationPhase, Protocol};

fn run_seeds(
    protocol: Protocol,
    seeds: std::ops::Range<u64>,
) -> Vec<locus_kvmigrate::sim::SimReport> {
    seeds
        .map(|seed| {
            let mut cfg = SimConfig::small(seed, protocol);
            // Odd seeds: a roomier BF and one group copying at a time, so CBF false positives
            // (the single counter) are not masked by BF ones. Seeds 2 mod 4: 16 CBF counters,
            // so groups not in flight read CBF 0 and the 1-byte BF sends them to the
            // destination alone (S3, pulls). A single counter no longer drops to zero between
            // groups: with the completing window the next group is counted before the previous
            // COMPLETE lands, so with it every BF-positive group reads S4 and nothing pulls.
            if seed % 2 == 1 {
                cfg.bf_bytes = 64;
                cfg.groups_inflight_max = 1;
            } else if seed % 4 == 2 {
                cfg.cbf_bytes = 16;
            }
            // Every third seed mirrors destination writes to the source (fault-tolerant mode).
            cfg.mirror_writes = seed % 3 == 0;
            let report = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                report.status.phase,
                MigrationPhase::Done,
                "seed {seed}: {:?}",
                report.status
            );
            assert_eq!(
                report.status.groups_done, report.status.groups_total,
                "seed {seed}"
            );
            if let Err(e) = check_history(&report.history, |k| report.initial.get(&k).cloned()) {
                panic!("seed {seed} ({}): {e}", protocol.name());
            }
            report
        })
        .collect()
}

#[test]
fn netmigrate_is_linearizable_under_false_positives() {
    let reports = run_seeds(Protocol::NetMigrate, 0..400);
    // The small filters must actually have produced the interesting paths somewhere.
    let double: u64 = reports.iter().map(|r| r.router.double_reads).sum();
    let pulls: u64 = reports.iter().map(|r| r.destination.pulls).sum();
    let late: u64 = reports.iter().map(|r| r.source.late_writes).sum();
    let sticky: u64 = reports.iter().map(|r| r.router.sticky_writes).sum();
    assert!(double > 0, "no double reads");
    assert!(pulls > 0, "no PriorityPulls");
    assert!(late > 0, "no late writes");
    assert!(sticky > 0, "no sticky writes");
    assert!(reports.iter().all(|r| r.failed_ops == 0));
}

#[test]
fn baselines_are_linearizable() {
    for p in [
        Protocol::StopAndCopy,
        Protocol::SourceBased,
        Protocol::Rocksteady,
        Protocol::Fulva,
    ] {
        let reports = run_seeds(p, 0..40);
        assert!(reports.iter().all(|r| r.failed_ops == 0), "{}", p.name());
        if p == Protocol::Rocksteady {
            assert!(reports.iter().map(|r| r.destination.pulls).sum::<u64>() > 0);
        }
        if p == Protocol::Fulva {
            assert!(reports.iter().map(|r| r.router.double_reads).sum::<u64>() > 0);
        }
    }
}

#[test]
fn netmigrate_presets_4_4_stay_linearizable() {
    for (preset, seed) in [
        ((true, false), 1000u64),
        ((false, true), 2000),
        ((true, true), 3000),
    ] {
        for seed in seed..seed + 20 {
            let mut cfg = SimConfig::small(seed, Protocol::NetMigrate);
            cfg.router_preset = preset;
            cfg.mirror_writes = seed % 2 == 0;
            let r = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.status.phase, MigrationPhase::Done, "seed {seed}");
            if let Err(e) = check_history(&r.history, |k| r.initial.get(&k).cloned()) {
                panic!("preset {preset:?} seed {seed}: {e}");
            }
        }
    }
}

#[test]
fn same_seed_same_run() {
    let a = run(&SimConfig::small(7, Protocol::NetMigrate)).unwrap();
    let b = run(&SimConfig::small(7, Protocol::NetMigrate)).unwrap();
    assert_eq!(a.history, b.history);
    assert_eq!(a.steps, b.steps);
}
