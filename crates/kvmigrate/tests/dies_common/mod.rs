//! What `source_dies.rs` and `destination_dies.rs` share: a seeded simulation with a node
//! killed mid-migration whose history is checked, and a threaded cluster whose copy is slow
//! enough to still be running when a test kills a node.

#![allow(dead_code)] // each test binary uses part of it

use std::time::{Duration, Instant};

use locus_kvmigrate::check::check_history;
use locus_kvmigrate::runtime::{Client, Cluster, ClusterConfig};
use locus_kvmigrate::sim::{run, SimConfig, SimReport};
use locus_kvmigrate::{Geometry, Protocol, ServerConfig};

/// One seeded run of `protocol` with write mirroring `mirror`, started within 20 steps, with
/// short client and ack timeouts; `kill` picks the node and the step it dies. The history
/// must be linearizable per key (the error names the seed).
pub fn sim_with_a_kill(
    seed: u64,
    protocol: Protocol,
    mirror: bool,
    kill: impl FnOnce(&mut SimConfig),
) -> Result<SimReport, String> {
    let mut cfg = SimConfig::small(seed, protocol);
    cfg.mirror_writes = mirror;
    cfg.migration_start_step_max = 20;
    cfg.client_timeout_us = 20_000;
    cfg.ack_timeout_us = 10_000;
    kill(&mut cfg);
    let report = run(&cfg).map_err(|e| format!("{}: {e}", protocol.name()))?;
    check_history(&report.history, |k| report.initial.get(&k).cloned())
        .map_err(|e| format!("{} seed {seed}: {e}", protocol.name()))?;
    Ok(report)
}

/// A threaded cluster of `servers` servers with `keys` 64-byte values in shard 1, and a
/// client, migrating shard 1 from server 1 to server 2 with NetMigrate. One item per batch and one batch and group in
/// flight: one acknowledged round trip per key, so the copy is still running when a test
/// kills a node (the source's CPU budget charges client queries only, NetMigrate 4.4, so it
/// cannot slow the copy). Nodes give up on a silent peer after 200 ms, clients after 300 ms.
pub fn slow_copy(servers: u16, keys: u64) -> (Cluster, Client) {
    let geometry = Geometry::new(12, 2).unwrap();
    let mut server = ServerConfig::new(0, 0, geometry);
    server.ack_timeout_us = 200_000;
    server.retries_max = 3;
    server.batch_items_max = 1;
    server.batches_inflight_max = 1;
    server.groups_inflight_max = 1;
    let mut cfg = ClusterConfig::new(servers, 2, server);
    cfg.op_timeout_ms = 300;
    let cluster = Cluster::start(cfg).unwrap();
    cluster
        .load(1, (0..keys).map(|k| (k, vec![1; 64])).collect())
        .unwrap();
    let client = cluster.client().unwrap();
    cluster.migrate(1, 1, 2, Protocol::NetMigrate).unwrap();
    (cluster, client)
}

/// Waits until a migration of `cluster` has `groups` groups done; fails past `deadline`.
pub fn wait_for_groups_done(cluster: &Cluster, groups: u32, deadline: Instant) {
    loop {
        let s = cluster.migration_status();
        if s.iter().any(|s| s.groups_done >= groups) {
            return;
        }
        assert!(Instant::now() < deadline, "no progress: {s:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}
