//! The destination's `redis-server` is killed (SIGKILL) in the middle of a migration: its agent
//! fails and goes silent, the source aborts after its ack timeout, the router drops the instance,
//! the source (and its Redis) is authoritative again with every key, and no acknowledged write
//! is lost: every history, including a read-back of every key afterwards, is linearizable.
//! Writes that timed out while the destination was dying count as unknown outcomes.

mod redis_common;

use locus_kvmigrate::table::ShardStore;
use locus_kvmigrate::{MigrationPhase, Protocol};
use redis_common::{initial, inspect, run, Scenario};

fn killed(protocol: Protocol) {
    let mut s = Scenario::new(protocol);
    s.kill_destination_after_groups = Some(8);
    s.server.ack_timeout_us = 1_000_000;
    s.op_timeout_ms = 1_500;
    let o = run(&s);
    assert_eq!(o.status.phase, MigrationPhase::Aborted, "{:?}", o.status);
    assert!(o.status.groups_done < o.status.groups_total);
    assert_eq!(o.status.errors, 1);
    assert!(
        o.status
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("timeout"),
        "{:?}",
        o.status
    );
    // The source's Redis holds every key, with the value read through the router.
    let src = inspect(&o.source_redis, 1, s.geometry);
    assert_eq!(src.live(), s.keys as usize);
    for key in 0..s.keys {
        let at_source = src.get(key).and_then(|i| i.value);
        assert_eq!(at_source, o.finals[key as usize], "key {key}");
        if key >= s.hot_keys {
            assert_eq!(at_source, Some(initial(key)), "untouched key {key}");
        }
    }
}

#[test]
fn netmigrate_destination_redis_killed_source_stays_authoritative() {
    killed(Protocol::NetMigrate);
}

#[test]
fn source_based_destination_redis_killed_source_stays_authoritative() {
    killed(Protocol::SourceBased);
}
