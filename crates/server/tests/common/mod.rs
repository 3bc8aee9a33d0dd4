//! Helpers shared by the server's integration tests.

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::sync::Mutex;

/// A loopback address with a port the system had free, never one this
/// process was handed before: a listener bound to port 0 is dropped at once,
/// so without the check two calls could return the same port and a cluster
/// file would name it twice (seen once in CI: a server's fabric and another
/// server's client address on one port).
pub fn free() -> SocketAddr {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let a = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        if GIVEN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(a.port())
        {
            return a;
        }
    }
}

/// A cluster file of `machines` servers on free loopback ports with
/// `secret`, small regions (16 MiB of values, a 4 MiB cache), and no
/// coordinator, log or etcd: each test adds what it needs.
#[allow(dead_code)] // not every test file uses it
pub fn small_cluster(secret: &str, machines: u8) -> locus_server::ClusterFile {
    use locus_server::config::{ClusterSection, ServerEntry};
    let mut f = locus_server::ClusterFile {
        cluster: ClusterSection {
            secret: Some(secret.into()),
            max_servers: None,
        },
        servers: (0..machines)
            .map(|id| ServerEntry {
                id,
                fabric: free(),
                client: free(),
                metrics: None,
            })
            .collect(),
        coordinator: None,
        store: Default::default(),
        policy: Default::default(),
        limits: Default::default(),
        durability: None,
        recovery: Default::default(),
        etcd: None,
        replication: Default::default(),
    };
    f.store.value_region_mb = Some(16);
    f.store.cache_mb = 4;
    f
}
