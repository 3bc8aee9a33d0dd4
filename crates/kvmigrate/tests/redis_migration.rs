//! NetMigrate and source-based migration between two stock `redis-server`s, with the router in
//! front and the agents talking RESP: concurrent clients, every key ends at the destination,
//! every key's history is linearizable, zero failed or lost operations (the read-back of every
//! key is part of the checked history). Also: tiny filters force BF/CBF false positives
//! (NetMigrate 4.3's S3/S4 cases: PriorityPulls and double reads) over Redis.

mod redis_common;

use locus_kvmigrate::router::RouterConfig;
use locus_kvmigrate::{MigrationPhase, Protocol};
use redis_common::{assert_all_at_destination, run, Scenario};

#[test]
fn netmigrate_over_redis_moves_every_key_linearizably() {
    let s = Scenario::new(Protocol::NetMigrate);
    let o = run(&s);
    assert_eq!(o.status.phase, MigrationPhase::Done, "{:?}", o.status);
    assert_eq!(o.failed_ops, 0);
    assert_all_at_destination(&s, &o);
    // The load met the migration: queries went to the destination or both servers.
    assert!(o.router.to_destination + o.router.double_reads > 0);
    assert_eq!(o.source.late_after_flush, 0);
    assert!(o.ops > s.keys);
}

#[test]
fn source_based_over_redis_moves_every_key_linearizably() {
    let s = Scenario::new(Protocol::SourceBased);
    let o = run(&s);
    assert_eq!(o.status.phase, MigrationPhase::Done, "{:?}", o.status);
    assert_eq!(o.failed_ops, 0);
    assert_all_at_destination(&s, &o);
    // Writes to copied groups were re-sent from the dirty log.
    assert!(o.source.dirty_items > 0, "{:?}", o.source);
}

#[test]
fn tiny_filters_force_false_positives_over_redis() {
    let mut s = Scenario::new(Protocol::NetMigrate);
    // A 1-byte BF is positive for nearly every group once a few completed. The CBF has 16
    // counters: one counter would stay positive through the whole copy (with the completing
    // window some group is always counted), making every such group S4, never S3.
    s.router = RouterConfig {
        bf_bytes: 1,
        cbf_bytes: 16,
        ..RouterConfig::default()
    };
    s.write_ratio = 0.2;
    s.seed = 11;
    let o = run(&s);
    assert_eq!(o.status.phase, MigrationPhase::Done, "{:?}", o.status);
    assert_eq!(o.failed_ops, 0);
    assert_all_at_destination(&s, &o);
    // S3 false positives made the destination pull keys it did not have yet.
    let d = o.destination.expect("destination stats");
    assert!(d.pulls > 0, "{d:?}");
}

#[test]
fn the_other_protocols_run_over_redis_too() {
    for protocol in [Protocol::StopAndCopy, Protocol::Rocksteady, Protocol::Fulva] {
        let mut s = Scenario::new(protocol);
        s.keys = 2_000;
        let o = run(&s);
        assert_eq!(o.status.phase, MigrationPhase::Done, "{:?}", o.status);
        assert_eq!(o.failed_ops, 0, "{}", protocol.name());
        assert_all_at_destination(&s, &o);
    }
}
