//! A router that restarts mid-migration (a switch reboot: instance table, filters and redirects
//! gone): the source's next control packet is refused, the source aborts and is authoritative
//! again (or, past its last GROUP-COMPLETE, finishes), the destination drops or owns the shard,
//! and with mirrored writes no acknowledged write is lost (histories linearizable, the
//! read-back of every key included).

use locus_kvmigrate::check::check_history;
use locus_kvmigrate::sim::{run, SimConfig};
use locus_kvmigrate::{MigrationPhase, Protocol};

#[test]
fn a_restarted_router_ends_the_migration_and_loses_nothing_acknowledged() {
    for protocol in [Protocol::NetMigrate, Protocol::Rocksteady, Protocol::Fulva] {
        let mut aborted = 0;
        for seed in 0..16 {
            let mut cfg = SimConfig::small(seed, protocol);
            cfg.mirror_writes = true;
            cfg.migration_start_step_max = 20;
            cfg.restart_router_at_step = Some(200 + seed * 53 % 900);
            cfg.client_timeout_us = 20_000;
            cfg.ack_timeout_us = 10_000;
            let r = run(&cfg).unwrap_or_else(|e| panic!("{}: {e}", protocol.name()));
            check_history(&r.history, |k| r.initial.get(&k).cloned())
                .unwrap_or_else(|e| panic!("{} seed {seed}: {e}", protocol.name()));
            assert_eq!(r.router_instances, 0, "{} seed {seed}", protocol.name());
            assert_eq!(
                r.lost_reads,
                0,
                "{} seed {seed}: nothing died",
                protocol.name()
            );
            match r.status.phase {
                MigrationPhase::Aborted => {
                    aborted += 1;
                    let why = r.status.last_error.as_deref().unwrap_or("");
                    // Its next control packet refused, or a write the router would never
                    // have sent it: either way the source learns the router forgot.
                    assert!(
                        why.contains("refused") || why.contains("lost its migration state"),
                        "{} seed {seed}: {why}",
                        protocol.name()
                    );
                }
                MigrationPhase::Done => {}
                p => panic!("{} seed {seed}: {p:?}", protocol.name()),
            }
        }
        assert!(
            aborted > 0,
            "{}: the restart never hit a migration",
            protocol.name()
        );
    }
}
