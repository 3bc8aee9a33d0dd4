//! The far and paged backends against a far-memory server over real sockets
//! (the TCP fabric on loopback): same results, control protocol limits, and
//! region reuse after FREE.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use locus_analytics::algo::Algo;
use locus_analytics::run::{run, RunConfig};
use locus_analytics::server::{serve, Control};
use locus_analytics::store::far::{FarConfig, FarStore};
use locus_analytics::store::{BlockTable, Residency};
use locus_analytics::Backend;
use locus_fabric::tcp::{loopback_cluster_with, TcpConfig, TcpFabric};

fn cluster() -> Vec<TcpFabric> {
    loopback_cluster_with(TcpConfig {
        machines: 2,
        ..TcpConfig::default()
    })
    .unwrap()
}

/// Runs `body` with a server for machine 1 on `nodes[1]` lending at most `limit` bytes.
fn with_tcp_server(nodes: &[TcpFabric], limit: u64, body: impl FnOnce(&TcpFabric)) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let server = s.spawn(|| serve(&nodes[1], 1, limit, &stop));
        body(&nodes[0]);
        stop.store(true, Ordering::Release);
        server.join().unwrap().unwrap();
    });
}

#[test]
fn every_algorithm_over_tcp() {
    let nodes = cluster();
    let g = common::shipped("lesmis.txt", None, Some(4));
    with_tcp_server(&nodes, 64 << 20, |client| {
        for backend in [Backend::Far, Backend::Paged] {
            for algo in Algo::ALL {
                let mut cfg = RunConfig::new(algo, backend, 0.9);
                cfg.engine.threads = 2;
                cfg.chunk_bytes = 512;
                let (report, result, _) = run(&g.grid, Some(client), &cfg, None).unwrap();
                common::check(&g, &result.output, &cfg.params);
                assert!(report.bytes_fetched > 0, "{backend:?} {algo:?}");
            }
        }
    });
}

#[test]
fn a_full_server_says_so() {
    let nodes = cluster();
    let g = common::shipped("karate.txt", None, None);
    with_tcp_server(&nodes, 64, |client| {
        let orders = Algo::Bfs.orders();
        let table = BlockTable::new(&g.grid, orders).unwrap();
        let e = FarStore::new(
            client.clone(),
            &g.grid,
            orders,
            &Residency::all(&table, false),
            FarConfig::default(),
        )
        .err()
        .expect("624 bytes do not fit in 64");
        let msg = e.to_string();
        assert!(
            msg.contains("memory limit") && msg.contains("--memory"),
            "{msg}"
        );
    });
}

#[test]
fn freed_regions_are_lent_again() {
    let nodes = cluster();
    with_tcp_server(&nodes, 1 << 20, |client| {
        let mut c = Control::connect(client, 0, 1).unwrap();
        let a = c.alloc(4096).unwrap();
        let b = c.alloc(4096).unwrap();
        assert_ne!(a.region, b.region);
        c.free(a).unwrap();
        // FREE is unanswered; the next ALLOC is handled after it (one inbox, in order).
        let again = c.alloc(1000).unwrap();
        assert_eq!(again.region, a.region);
        assert_eq!(again.len_bytes, 4096);
        assert!(c.alloc(2 << 20).is_err(), "over the limit");
    });
}

#[test]
fn no_server_is_a_clear_error() {
    let nodes = cluster();
    // Nobody registered the control region on machine 1.
    let e = Control::connect_within(&nodes[0], 0, 1, 200)
        .err()
        .expect("no server");
    assert!(e.to_string().contains("analytics serve"), "{e}");
}
