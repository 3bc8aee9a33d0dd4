//! The same router, servers and clients over UDP on 127.0.0.1: every packet goes through the
//! wire encoding, and a NetMigrate migration under client traffic ends with every value intact.

use std::sync::Arc;
use std::time::Duration;

use locus_kvmigrate::runtime::{Cluster, ClusterConfig};
use locus_kvmigrate::transport::{Transport, Udp};
use locus_kvmigrate::{Geometry, MigrationPhase, Protocol, RouterConfig, ServerConfig};

#[test]
fn netmigrate_over_udp_loopback() {
    let geometry = Geometry::new(10, 3).unwrap();
    let mut server = ServerConfig::new(0, 0, geometry);
    // Small windows keep loopback receive buffers far from full.
    server.batch_items_max = 16;
    server.batches_inflight_max = 2;
    server.ack_timeout_us = 30_000_000;
    let mut cfg = ClusterConfig::new(2, 1, server);
    cfg.router = RouterConfig {
        bf_bytes: 64,
        cbf_bytes: 8,
        ..RouterConfig::default()
    };
    cfg.op_timeout_ms = 5000;
    let udp = Arc::new(Udp::bind_loopback(cfg.nodes()).unwrap());
    let cluster = Cluster::start_with(cfg, udp.clone()).unwrap();
    cluster
        .load(
            1,
            (0..3000u64)
                .map(|k| (k, k.to_le_bytes().to_vec()))
                .collect(),
        )
        .unwrap();
    let mut client = cluster.client().unwrap();
    cluster.migrate(1, 1, 2, Protocol::NetMigrate).unwrap();
    for k in 0..200u64 {
        client.set(1, k, vec![7; 16]).unwrap();
        assert_eq!(client.get(1, k).unwrap(), Some(vec![7; 16]));
    }
    let s = cluster.wait_migration(1, Duration::from_secs(60)).unwrap();
    assert_eq!(s.phase, MigrationPhase::Done, "{s:?}");
    for k in 0..3000u64 {
        let want = if k < 200 {
            vec![7; 16]
        } else {
            k.to_le_bytes().to_vec()
        };
        assert_eq!(client.get(1, k).unwrap(), Some(want), "key {k}");
    }
    assert_eq!(udp.malformed(), 0);
    assert!(udp.bytes_sent() > 3000 * 8);
    cluster.shutdown().unwrap();
}
