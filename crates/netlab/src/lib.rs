//! The fault lab's network of its own (issue 61 requirement 1): each server
//! of a test cluster runs in a network namespace of its own, on a private
//! bridge, so a fault hits one link, never the host's loopback that every
//! process shares.
//!
//! ```text
//!   root namespace: the host (test clients, a coordinator); lo untouched
//!   +-------------------------------------------------------------------+
//!   |  locusX  10.213.X.1/24   the lab's one interface here, with its   |
//!   |    |                     address and /24 route; no rule, no qdisc |
//!   +----|--------------------------------------------------------------+
//!        | veth
//!   +----|----------- namespace locus-<pid>-<lab>-sw -------------------+
//!   |  host ---+                                                        |
//!   |          br0   the bridge: no address, empty iptables             |
//!   |  n0 -----+----- n1 ----- ... n<N-1>                               |
//!   +--|---------------|------------------------------------------------+
//!      | veth          | veth
//!   +--|-- locus-<pid>-<lab>-0 ---+  +--|-- locus-<pid>-<lab>-1 ---+
//!   |  eth0  10.213.X.10/24       |  |  eth0  10.213.X.11/24       |  ...
//!   |  lo    127.0.0.1            |  |  lo    127.0.0.1            |
//!   |  INPUT  -> locus-in         |  |  (the same chains)          |
//!   |  OUTPUT -> locus-out        |  |                             |
//!   |         -> locus-netem      |  |                             |
//!   +-----------------------------+  +-----------------------------+
//! ```
//!
//! **Faults.** A cut is a DROP rule in a node's own namespace matching a
//! peer's address: `locus-in` drops what arrives from a peer, `locus-out`
//! what goes to the host ([`Netlab::partition`], [`Netlab::isolate`],
//! [`Netlab::drop_one_way`]; [`Netlab::heal`] empties both chains). Delay,
//! jitter and loss ([`Netlab::netem`]) send the packets node i sends on its
//! `eth0` through a queue: `locus-netem` holds one NFQUEUE rule, and a
//! thread of this process, bound to that queue inside node i's namespace,
//! holds each packet for its delay or drops it. Every rule sits in a
//! namespace the lab made, so it hits only that node's link; loopback, the
//! host's or a node's, passes none of them.
//!
//! **Why not `tc netem`.** The kernels this project runs on, its CI's among
//! them, are built without `sch_netem` (`CONFIG_NET_SCH_NETEM` unset, no
//! modules): `tc qdisc add ... netem` answers "Specified qdisc kind is
//! unknown". NFQUEUE is built in, and the queue gives netem's semantics on
//! the same link (see [`Netem`]), with seeded draws.
//!
//! **Why the bridge has a namespace of its own.** With `br_netfilter`
//! loaded (`net.bridge.bridge-nf-call-iptables = 1`, as on this project's
//! machines and wherever Docker runs), bridged IPv4 packets pass the
//! iptables FORWARD chain of the bridge's namespace. In the root namespace
//! that is the host's chain (Docker sets its policy to DROP), so traffic
//! between nodes would depend on, or need changes to, the host's firewall.
//! In the switch namespace the chain is empty: the lab reads and changes no
//! host setting, so there is nothing to restore. Nor is IP forwarding
//! needed: the bridge works at layer 2 and the host is on the link.
//!
//! **Nothing leaves the machine.** A node has no default route: it reaches
//! only the lab's /24, even on a host that forwards packets. The /24 is one
//! of 10.213.0.0/16 that no route of the machine overlaps; creating the
//! interface `locusX` claims it (a second lab gets "File exists" and takes
//! the next). IPv4 only: the links also carry IPv6 link-local addresses,
//! which no fault touches.
//!
//! **Teardown.** `Drop` (or [`Netlab::close`]) stops the delay queues,
//! kills any process still running in the lab's namespaces, deletes
//! `locusX` (which takes its veth peer with it) and the namespaces (with
//! their bridge, veths and rules). It never panics; a failure is printed
//! to stderr. A test run killed before its `Drop` ran leaves its lab
//! behind: every name carries the creating pid, and [`Netlab::sweep`],
//! run at the start of every [`Netlab::create`], removes the labs of dead
//! processes.
//!
//! Needs root, `ip` (iproute2) and `iptables` (the nf_tables `iptables`,
//! else `iptables-legacy`, whichever works inside a namespace);
//! `scripts/setup` installs them. Without them [`Netlab::create`] fails and
//! says what to install.

mod error;
mod faults;
mod lab;
mod netem;
mod subnet;
mod sweep;
mod tools;

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Mutex;

pub use error::{NetlabError, Result};
pub use netem::{Netem, NETEM_DELAY_MS_MAX};

/// The most nodes one lab has.
pub const NODES_MAX: usize = 16;

/// Node i's address is 10.213.X.(NODE_OCTET_FIRST + i); the host's is .1.
const NODE_OCTET_FIRST: u8 = 10;

/// What to build.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct NetlabSpec {
    /// How many nodes, each in a namespace of its own: 1 to [`NODES_MAX`].
    pub nodes: usize,
}

impl NetlabSpec {
    /// A lab of `nodes` nodes.
    pub fn new(nodes: usize) -> NetlabSpec {
        NetlabSpec { nodes }
    }
}

/// One end of a cut: a node, or the host (the root namespace, where test
/// clients and a coordinator run).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Party {
    /// The root namespace, at [`Netlab::host_addr`].
    Host,
    /// Node i, at [`Netlab::addr`]`(i)`.
    Node(usize),
}

/// A lab: a bridge, `nodes` namespaces on it and the host's interface, torn
/// down on drop. Faults take `&self`, so a nemesis thread may share it.
pub struct Netlab {
    tools: tools::Tools,
    owner: sweep::Owner,
    nodes: usize,
    /// The lab's /24 is 10.213.`subnet`.0/24.
    subnet: u8,
    /// `locusX` in the root namespace, once claimed.
    host_link: Option<String>,
    /// The switch's namespace, once made.
    switch_namespace: Option<String>,
    /// The nodes' namespaces made so far, node i at index i.
    node_namespaces: Vec<String>,
    /// The iptables that works in the namespaces (found at creation).
    iptables: Option<tools::Iptables>,
    /// Each node's delay queue, while one is set.
    engines: Mutex<Vec<Option<netem::Engine>>>,
}

impl Netlab {
    /// How many nodes the lab has.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Node `node`'s address.
    ///
    /// # Panics
    /// If the lab has no such node (a bug in the caller).
    pub fn addr(&self, node: usize) -> Ipv4Addr {
        assert!(
            node < self.nodes,
            "node {node} is not in this lab of {} nodes",
            self.nodes
        );
        self.octet(NODE_OCTET_FIRST + node as u8)
    }

    /// The host's address: processes in the root namespace reach every node
    /// from it.
    pub fn host_addr(&self) -> Ipv4Addr {
        self.octet(1)
    }

    /// The address of `party`.
    ///
    /// # Panics
    /// If it names a node the lab does not have.
    pub fn party_addr(&self, party: Party) -> Ipv4Addr {
        match party {
            Party::Host => self.host_addr(),
            Party::Node(node) => self.addr(node),
        }
    }

    fn octet(&self, last: u8) -> Ipv4Addr {
        let [a, b] = subnet::LAB_NET;
        Ipv4Addr::new(a, b, self.subnet, last)
    }

    /// The name of node `node`'s namespace (for `ip netns exec`).
    ///
    /// # Panics
    /// If the lab has no such node.
    pub fn namespace(&self, node: usize) -> &str {
        assert!(
            node < self.nodes,
            "node {node} is not in this lab of {} nodes",
            self.nodes
        );
        &self.node_namespaces[node]
    }

    /// `<pid>-<lab>`: the creating process and its count of labs, in every
    /// name of the lab (its namespaces `locus-<tag>-...` and the alias
    /// `locus-netlab <tag>` of its root interface). Unlike `locusX`, which a
    /// later lab may reuse, no other lab has it while this process lives.
    pub fn tag(&self) -> String {
        self.owner.tag()
    }

    /// The lab's interface in the root namespace (`locusX`).
    pub fn host_link(&self) -> &str {
        self.host_link.as_deref().unwrap_or_default()
    }

    /// A command that runs `program` inside node `node`'s namespace
    /// (`ip netns exec <namespace> <program>`); add its arguments and spawn
    /// it. The process is the caller's to end; one still running when the
    /// lab is torn down is killed then, so the namespace goes with the lab.
    ///
    /// # Panics
    /// If the lab has no such node.
    pub fn command(&self, node: usize, program: impl AsRef<OsStr>) -> Command {
        self.tools.in_namespace(self.namespace(node), program)
    }
}
