//! `redis::measure_redis`, the entry point behind a CLI benchmark over Redis: the same closed-loop
//! load and migration as `measure`, with both servers' shards in private `redis-server`s. Checks
//! behaviour only (no failed or lost operations, the migration finishes); prints the report.

use std::path::Path;
use std::sync::Arc;

use locus_kvmigrate::measure::{Draw, MeasureConfig, OpChooser};
use locus_kvmigrate::redis::measure_redis;
use locus_kvmigrate::{MigrationPhase, Protocol};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Uniform keys over 5,000 records, a fifth of the queries writes.
fn uniform() -> OpChooser {
    Arc::new(|_, seed| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Box::new(move || Draw {
            write: rng.gen_bool(0.2),
            key: rng.gen_range(0..5_000),
        })
    })
}

#[test]
fn measure_redis_netmigrate_and_source_based() {
    for protocol in [Protocol::NetMigrate, Protocol::SourceBased] {
        let mut cfg = MeasureConfig::quick(protocol);
        cfg.keys = 5_000;
        cfg.write_ratio = 0.2;
        // Failure detection only; a loaded machine may stall a thread for seconds.
        cfg.server.ack_timeout_us = 30_000_000;
        cfg.op_timeout_ms = 30_000;
        let r = measure_redis(&cfg, uniform(), Path::new("redis-server"))
            .unwrap_or_else(|e| panic!("{e} (CI installs redis-server in .ci/run)"));
        eprintln!(
            "{}: {:.0} ops/s migrating, migration {} ms, pause {} ms, {} ops, failed {}, lost {}",
            protocol.name(),
            r.avg_ops_per_s_migrating,
            r.migration_ms,
            r.pause_ms,
            r.ops,
            r.failed_ops,
            r.lost_writes
        );
        let status = r.status.as_ref().expect("the migration finished");
        assert_eq!(status.phase, MigrationPhase::Done, "{status:?}");
        assert_eq!(r.failed_ops, 0);
        assert_eq!(r.lost_writes, 0);
        assert_eq!(r.violations, 0, "{:?}", r.history.first_violation);
        assert!(r.history.keys_checked > 0 && r.history.keys_unchecked == 0);
        assert!(r.ops > 0 && r.server_data_bytes > 0);
    }
}
