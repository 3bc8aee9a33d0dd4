//! NetMigrate 4.1 pipelines a group's DATA right behind its GROUP-START. Over a network the
//! DATA (and client queries) can overtake the START: the destination then holds a group's copy
//! while the router, not having counted the START, routes the group by its filters alone, and a
//! BF false positive sends its reads to the destination as S3 while late writes of the group
//! are still at the source. The seeded simulation holds every GROUP-START back for a random
//! number of steps, with 1-byte filters (false positives everywhere): every history stays
//! linearizable per key, the read-back sees every acknowledged write, and the overtaking
//! actually happened. A failure names its seed.

use locus_kvmigrate::check::check_history;
use locus_kvmigrate::sim::{run, SimConfig, SimReport};
use locus_kvmigrate::transport::Faults;
use locus_kvmigrate::{MigrationPhase, Protocol};

fn delayed_start_run(seed: u64, faults: Faults) -> SimReport {
    let mut cfg = SimConfig::small(seed, Protocol::NetMigrate);
    cfg.group_start_delay_steps_max = 400;
    cfg.faults = faults;
    cfg.retries_max = 8;
    cfg.steps_max = 2_000_000;
    // Odd seeds: a roomier BF, so groups start as S1 and only turn S3 as others complete.
    cfg.bf_bytes = if seed.is_multiple_of(2) { 1 } else { 2 };
    cfg.mirror_writes = seed.is_multiple_of(3);
    let report = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        report.status.phase,
        MigrationPhase::Done,
        "seed {seed}: {:?}",
        report.status
    );
    if let Err(e) = check_history(&report.history, |k| report.initial.get(&k).cloned()) {
        panic!("seed {seed}: {e}");
    }
    report
}

fn sum(reports: &[SimReport], f: fn(&SimReport) -> u64) -> u64 {
    reports.iter().map(f).sum()
}

#[test]
fn data_that_overtakes_its_group_start_is_never_read_stale() {
    let reports: Vec<SimReport> = (0..300)
        .map(|seed| delayed_start_run(seed, Faults::default()))
        .collect();
    // The race was reached: DATA installed before the router counted the START, reads pulled
    // past a copy, late writes forwarded.
    assert!(
        sum(&reports, |r| r.data_before_start) > 0,
        "DATA never overtook"
    );
    assert!(
        sum(&reports, |r| r.destination.copy_pulls) > 0,
        "no read met an unconfirmed copy"
    );
    assert!(
        sum(&reports, |r| r.source.late_writes) > 0,
        "no late writes"
    );
    assert!(reports.iter().all(|r| r.failed_ops == 0));
}

#[test]
fn overtaking_under_loss_duplication_and_reordering_stays_linearizable() {
    let faults = Faults {
        drop_pct: 10,
        duplicate_pct: 10,
        reorder_pct: 10,
        queries: false,
    };
    let reports: Vec<SimReport> = (1000..1150)
        .map(|seed| delayed_start_run(seed, faults))
        .collect();
    assert!(sum(&reports, |r| r.data_before_start) > 0);
    assert!(sum(&reports, |r| r.faults.reordered) > 0);
}
