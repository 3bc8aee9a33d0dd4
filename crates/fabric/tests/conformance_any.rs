//! The conformance suite through [`AnyFabric`], the fabric chosen at run time:
//! its in-process variant (latency model on, as in `conformance_local.rs`),
//! its TCP variant (a 4-node loopback cluster, one node per machine, as in
//! `conformance_tcp.rs`), and under the counting decorator, so dispatch
//! changes nothing a fabric promises.

use locus_fabric::any::AnyFabric;
use locus_fabric::conformance::Cluster;
use locus_fabric::counting::Counting;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::tcp::loopback_cluster;
use locus_fabric::{Fabric, MachineId};

/// Nodes of one cluster and, per machine, the node that hosts it.
struct Nodes<F> {
    nodes: Vec<F>,
    node_of: Vec<usize>,
}

impl<F: Fabric> Cluster for Nodes<F> {
    type F = F;
    fn node(&self, machine: MachineId) -> &F {
        &self.nodes[self.node_of[machine as usize]]
    }
}

/// One in-process fabric of 4 machines, as the only node.
fn local() -> Nodes<AnyFabric> {
    let f = LocalFabric::new(LocalConfig::with_machines(4)).expect("local fabric");
    Nodes {
        nodes: vec![AnyFabric::Local(f)],
        node_of: vec![0; 4],
    }
}

/// Four TCP nodes on loopback, node `m` hosting machine `m`.
fn tcp() -> Nodes<AnyFabric> {
    Nodes {
        nodes: loopback_cluster(4)
            .expect("loopback cluster")
            .into_iter()
            .map(AnyFabric::Tcp)
            .collect(),
        node_of: (0..4).collect(),
    }
}

fn counted(c: Nodes<AnyFabric>) -> Nodes<Counting<AnyFabric>> {
    Nodes {
        nodes: c.nodes.into_iter().map(Counting::new).collect(),
        node_of: c.node_of,
    }
}

mod any_local {
    use super::*;
    locus_fabric::conformance_suite!(local());
}

mod any_tcp {
    use super::*;
    locus_fabric::conformance_suite!(tcp());
}

mod counting_any_local {
    use super::*;
    locus_fabric::conformance_suite!(counted(local()));
}

mod counting_any_tcp {
    use super::*;
    locus_fabric::conformance_suite!(counted(tcp()));
}
