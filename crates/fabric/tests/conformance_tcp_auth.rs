//! The conformance suite on a 4-machine TCP loopback cluster whose nodes all
//! have the cluster secret, so every verb is proven to work behind the
//! authentication handshake.

use locus_fabric::auth::Secret;
use locus_fabric::conformance::Cluster;
use locus_fabric::tcp::{loopback_cluster_with, TcpConfig, TcpFabric};
use locus_fabric::MachineId;

struct Nodes(Vec<TcpFabric>);

impl Cluster for Nodes {
    type F = TcpFabric;
    fn node(&self, machine: MachineId) -> &TcpFabric {
        &self.0[machine as usize]
    }
}

fn with_secret() -> Nodes {
    let secret = Secret::new("conformance-behind-the-secret").expect("a valid secret");
    let nodes = loopback_cluster_with(TcpConfig {
        machines: 4,
        secret: Some(secret),
        ..TcpConfig::default()
    })
    .expect("loopback cluster");
    Nodes(nodes)
}

mod one_node_per_machine_with_a_secret {
    use super::*;
    locus_fabric::conformance_suite!(with_secret());
}
