//! Several migrations at once through one router (NetMigrate 3: the migration instance table),
//! and a shard that moves twice (the router's redirect follows it, old homes forward).

use std::time::Duration;

use locus_kvmigrate::runtime::{Cluster, ClusterConfig};
use locus_kvmigrate::{Geometry, MigrationPhase, Protocol, ServerConfig};

#[test]
fn two_shards_migrate_at_once_then_one_moves_again() {
    let geometry = Geometry::new(10, 3).unwrap();
    let mut server = ServerConfig::new(0, 0, geometry);
    server.ack_timeout_us = 30_000_000;
    let mut cfg = ClusterConfig::new(4, 2, server);
    cfg.op_timeout_ms = 10_000;
    let cluster = Cluster::start(cfg).unwrap();
    for shard in [1u16, 2] {
        let pairs = (0..2000u64).map(|k| (k, vec![shard as u8; 32])).collect();
        cluster.load(shard, pairs).unwrap();
    }
    let mut client = cluster.client().unwrap();
    cluster.migrate(1, 1, 3, Protocol::NetMigrate).unwrap();
    cluster.migrate(2, 2, 4, Protocol::Fulva).unwrap();
    for k in 0..300u64 {
        client.set(1, k, vec![11; 8]).unwrap();
        client.set(2, k, vec![22; 8]).unwrap();
    }
    for shard in [1u16, 2] {
        let s = cluster
            .wait_migration(shard, Duration::from_secs(30))
            .unwrap();
        assert_eq!(s.phase, MigrationPhase::Done, "{s:?}");
    }
    // Shard 1 moves on from server 3 to server 4.
    cluster.migrate(3, 1, 4, Protocol::NetMigrate).unwrap();
    for k in 300..400u64 {
        client.set(1, k, vec![33; 8]).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !cluster
        .migration_status()
        .iter()
        .any(|s| s.source == 3 && s.phase == MigrationPhase::Done)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            cluster.migration_status()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // Every written key, and a sample of the untouched ones.
    for k in (0..400u64).chain((400..2000).step_by(7)) {
        let want1 = match k {
            0..300 => vec![11; 8],
            300..400 => vec![33; 8],
            _ => vec![1; 32],
        };
        let want2 = if k < 300 { vec![22; 8] } else { vec![2; 32] };
        assert_eq!(client.get(1, k).unwrap(), Some(want1), "shard 1 key {k}");
        assert_eq!(client.get(2, k).unwrap(), Some(want2), "shard 2 key {k}");
    }
    assert!(
        cluster.peek(4, 1, 5).unwrap().is_some(),
        "server 4 holds shard 1"
    );
    assert!(
        cluster.peek(3, 1, 5).unwrap().is_none(),
        "server 3 cleaned up"
    );
    cluster.shutdown().unwrap();
}
