//! The conformance suite on the TCP fabric: a 4-machine loopback cluster with
//! one node per machine, so every operation between machines crosses a socket;
//! the same with two machines per node (local and remote paths mixed); and
//! through both decorators.

use locus_fabric::conformance::Cluster;
use locus_fabric::counting::Counting;
use locus_fabric::faulty::Faulty;
use locus_fabric::tcp::{loopback_cluster, loopback_nodes, TcpConfig, TcpFabric};
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

fn one_per_machine() -> Nodes<TcpFabric> {
    Nodes {
        nodes: loopback_cluster(4).expect("loopback cluster"),
        node_of: (0..4).collect(),
    }
}

fn wrapped<G: Fabric>(wrap: impl Fn(TcpFabric) -> G) -> Nodes<G> {
    let c = one_per_machine();
    Nodes {
        nodes: c.nodes.into_iter().map(wrap).collect(),
        node_of: c.node_of,
    }
}

mod one_node_per_machine {
    use super::*;
    locus_fabric::conformance_suite!(one_per_machine());
}

mod two_machines_per_node {
    use super::*;
    locus_fabric::conformance_suite!(Nodes {
        nodes: loopback_nodes(
            TcpConfig {
                machines: 4,
                ..TcpConfig::default()
            },
            &[vec![0, 3], vec![1, 2]],
        )
        .expect("loopback nodes"),
        node_of: vec![0, 1, 1, 0],
    });
}

mod counting {
    use super::*;
    locus_fabric::conformance_suite!(wrapped(Counting::new));
}

mod faulty_without_faults {
    use super::*;
    locus_fabric::conformance_suite!(wrapped(Faulty::new));
}
