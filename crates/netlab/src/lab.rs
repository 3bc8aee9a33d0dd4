//! Making a lab and tearing it down.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::{NetlabError, Result};
use crate::subnet;
use crate::sweep::{self, Owner};
use crate::tools::{self, Tools};
use crate::{Netlab, NetlabSpec, NODES_MAX};

/// Labs made by this process so far: the second half of every lab's tag.
static LABS_MADE: AtomicU64 = AtomicU64::new(0);

/// One creation at a time in this process: the first `ip netns add` of a
/// boot sets up `/run/netns`, which two at once can do twice, and one sweep
/// at a time is enough. Teardown needs no lock (a lab removes only its own).
static CREATING: Mutex<()> = Mutex::new(());

/// Every node's own iptables chains and the rules that jump to them:
/// `locus-in` (INPUT) and `locus-out` (OUTPUT) hold cuts, so `heal` can
/// empty them without knowing which were made; `locus-netem` (OUTPUT,
/// after the cuts) holds the queue rule.
const CHAINS: [&str; 3] = ["locus-in", "locus-out", "locus-netem"];
const HOOKS: [[&str; 4]; 3] = [
    ["-A", "INPUT", "-j", "locus-in"],
    ["-A", "OUTPUT", "-j", "locus-out"],
    ["-A", "OUTPUT", "-j", "locus-netem"],
];

impl Netlab {
    /// Makes a lab of `spec.nodes` nodes, first removing the leftovers of
    /// labs whose creating process is dead ([`Netlab::sweep`]). A failure
    /// part way removes what was made.
    pub fn create(spec: NetlabSpec) -> Result<Netlab> {
        if spec.nodes == 0 || spec.nodes > NODES_MAX {
            return Err(NetlabError::NodeCount {
                nodes: spec.nodes,
                nodes_max: NODES_MAX,
            });
        }
        let tools = Tools::find()?;
        tools::check_root()?;
        let creating = CREATING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = sweep::sweep(&tools) {
            eprintln!("netlab: sweeping the labs of dead processes failed: {e}");
        }
        let mut lab = Netlab {
            tools,
            owner: Owner {
                pid: std::process::id(),
                lab: LABS_MADE.fetch_add(1, Ordering::Relaxed),
            },
            nodes: spec.nodes,
            subnet: 0,
            host_link: None,
            switch_namespace: None,
            node_namespaces: Vec::with_capacity(spec.nodes),
            iptables: None,
            engines: Mutex::new((0..spec.nodes).map(|_| None).collect()),
        };
        let built = lab.build();
        drop(creating);
        match built {
            Ok(()) => Ok(lab),
            Err(e) => {
                // Drop removes what was made, printing what it could not.
                drop(lab);
                Err(e)
            }
        }
    }

    /// Removes the leftovers of every lab whose creating process is dead;
    /// returns how many it found. [`Netlab::create`] runs it first, so a
    /// killed test run leaves its lab only until the next lab is made. (A
    /// lab whose creator's pid a live process has since been given stays
    /// until that process ends.)
    pub fn sweep() -> Result<usize> {
        let tools = Tools::find()?;
        tools::check_root()?;
        sweep::sweep(&tools)
    }

    /// Tears the lab down now and says whether every part went (`Drop` does
    /// the same and prints failures instead).
    pub fn close(mut self) -> Result<()> {
        let failures = self.teardown();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(NetlabError::Teardown {
                tag: self.owner.tag(),
                failures: failures.join("; "),
            })
        }
    }

    fn build(&mut self) -> Result<()> {
        let switch = self.owner.switch_namespace();
        self.tools.ip(["netns", "add", switch.as_str()])?;
        self.switch_namespace = Some(switch.clone());
        self.tools
            .ip_in(&switch, &["link", "add", "br0", "type", "bridge"])?;
        self.tools.ip_in(&switch, &["link", "set", "br0", "up"])?;

        let link = self.claim_subnet(&switch)?;
        let alias = self.owner.alias();
        // The alias first: from now on a sweep can tell whose it is.
        self.tools
            .ip(["link", "set", "dev", link.as_str(), "alias", alias.as_str()])?;
        let host_cidr = format!("{}/24", self.host_addr());
        self.tools
            .ip(["addr", "add", host_cidr.as_str(), "dev", link.as_str()])?;
        self.tools.ip(["link", "set", "dev", link.as_str(), "up"])?;
        self.tools
            .ip_in(&switch, &["link", "set", "host", "master", "br0", "up"])?;

        for node in 0..self.nodes {
            self.add_node(&switch, node)?;
        }
        Ok(())
    }

    /// Claims the first free 10.213.X.0/24 by creating `locusX`, one end of
    /// the host's veth pair, whose other end (`host`) goes straight into the
    /// switch. Interface names are unique, so of two labs after one X (in
    /// this process or another) one gets "File exists" and tries the next.
    fn claim_subnet(&mut self, switch: &str) -> Result<String> {
        let routes = self.tools.ip(["-4", "route", "show", "table", "all"])?;
        let (free, overlapping) = subnet::free_candidates(&routes);
        let mut held = 0;
        for x in free {
            let link = format!("{}{x}", sweep::LINK_PREFIX);
            let args = [
                "link",
                "add",
                link.as_str(),
                "type",
                "veth",
                "peer",
                "name",
                "host",
                "netns",
                switch,
            ];
            match self.tools.ip(args) {
                Ok(_) => {
                    self.host_link = Some(link.clone());
                    self.subnet = x;
                    return Ok(link);
                }
                Err(NetlabError::Command { stderr, .. }) if stderr.contains("File exists") => {
                    held += 1
                }
                Err(e) => return Err(e),
            }
        }
        Err(NetlabError::NoFreeSubnet { overlapping, held })
    }

    fn add_node(&mut self, switch: &str, node: usize) -> Result<()> {
        let ns = self.owner.node_namespace(node);
        self.tools.ip(["netns", "add", ns.as_str()])?;
        self.node_namespaces.push(ns.clone());
        let port = format!("n{node}");
        let tools = &self.tools;
        tools.ip_in(
            switch,
            &[
                "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ],
        )?;
        tools.ip_in(switch, &["link", "set", &port, "master", "br0", "up"])?;
        tools.ip_in(&ns, &["link", "set", "lo", "up"])?;
        let cidr = format!("{}/24", self.addr(node));
        tools.ip_in(&ns, &["addr", "add", &cidr, "dev", "eth0"])?;
        tools.ip_in(&ns, &["link", "set", "eth0", "up"])?;

        // Making the first chain of the first node picks the iptables that
        // works in a namespace here.
        let first = ["-N", CHAINS[0]];
        let iptables = match self.iptables.clone() {
            Some(iptables) => {
                self.tools.iptables(&iptables, &ns, &first)?;
                iptables
            }
            None => {
                let chosen = self.tools.probe_iptables(&ns, &first)?;
                self.iptables = Some(chosen.clone());
                chosen
            }
        };
        for chain in &CHAINS[1..] {
            self.tools.iptables(&iptables, &ns, &["-N", chain])?;
        }
        for hook in &HOOKS {
            self.tools.iptables(&iptables, &ns, hook)?;
        }
        Ok(())
    }

    /// Removes every part made so far; returns what failed. Runs once: the
    /// parts are taken out as they go.
    fn teardown(&mut self) -> Vec<String> {
        let mut failures = Vec::new();
        // The queues first: their threads live in the nodes' namespaces.
        let engines: Vec<_> = {
            let mut engines = self.engines.lock().unwrap_or_else(PoisonError::into_inner);
            engines
                .iter_mut()
                .enumerate()
                .filter_map(|(i, e)| Some((i, e.take()?)))
                .collect()
        };
        for (node, engine) in engines {
            if let Err(message) = engine.stop() {
                failures.push(format!(
                    "the delay queue of node {node} had failed: {message}"
                ));
            }
        }
        // Deleting locusX is synchronous and takes its peer along, so the
        // /24 is free when this returns, though the namespaces below are
        // freed by the kernel in the background.
        if let Some(link) = self.host_link.take() {
            if let Err(e) = self.tools.ip(["link", "delete", link.as_str()]) {
                failures.push(e.to_string());
            }
        }
        let namespaces = self
            .node_namespaces
            .drain(..)
            .chain(self.switch_namespace.take());
        for ns in namespaces.collect::<Vec<_>>() {
            if let Err(e) = sweep::remove_namespace(&self.tools, &ns) {
                failures.push(e.to_string());
            }
        }
        failures
    }
}

impl Drop for Netlab {
    fn drop(&mut self) {
        for failure in self.teardown() {
            eprintln!("netlab: tearing down lab {}: {failure}", self.owner.tag());
        }
    }
}
