//! Faults: cuts by iptables rules and delay queues, each in a namespace the
//! lab made, each undone by `heal` or `clear_netem`.
//!
//! Where a one-way cut `from -> to` lives:
//!
//! ```text
//!  to = Node(j)              in j's namespace: locus-in  -s addr(from) -j DROP
//!  to = Host, from = Node(i) in i's namespace: locus-out -d host      -j DROP
//! ```
//!
//! (The host's side is the root namespace, which a lab never changes, so a
//! cut towards the host is made where it leaves the node.)

use std::sync::PoisonError;

use crate::error::{NetlabError, Result};
use crate::netem::{self, Netem};
use crate::{Netlab, Party};

impl Netlab {
    /// Drops every packet between each party of `a` and each party of `b`,
    /// both ways; what stays within `a` or within `b` still flows. Include
    /// [`Party::Host`] to cut the root namespace's clients off too.
    pub fn partition(&self, a: &[Party], b: &[Party]) -> Result<()> {
        for &party in a.iter().chain(b) {
            self.check(party)?;
        }
        if let Some(&party) = a.iter().find(|p| b.contains(p)) {
            return Err(NetlabError::SameParty { party });
        }
        for &p in a {
            for &q in b {
                self.drop_one_way(p, q)?;
                self.drop_one_way(q, p)?;
            }
        }
        Ok(())
    }

    /// Cuts node `node` from every other node and from the host.
    pub fn isolate(&self, node: usize) -> Result<()> {
        self.check(Party::Node(node))?;
        let others: Vec<Party> = std::iter::once(Party::Host)
            .chain((0..self.nodes).filter(|&n| n != node).map(Party::Node))
            .collect();
        self.partition(&[Party::Node(node)], &others)
    }

    /// Drops what `from` sends to `to`, and only that direction.
    pub fn drop_one_way(&self, from: Party, to: Party) -> Result<()> {
        self.check(from)?;
        self.check(to)?;
        if from == to {
            return Err(NetlabError::SameParty { party: from });
        }
        match (from, to) {
            (_, Party::Node(j)) => {
                let source = self.party_addr(from).to_string();
                self.rule(j, &["-A", "locus-in", "-s", &source, "-j", "DROP"])
            }
            (Party::Node(i), Party::Host) => {
                let host = self.host_addr().to_string();
                self.rule(i, &["-A", "locus-out", "-d", &host, "-j", "DROP"])
            }
            (Party::Host, Party::Host) => unreachable!("from == to was refused above"),
        }
    }

    /// Removes every cut ([`Netlab::partition`], [`Netlab::isolate`],
    /// [`Netlab::drop_one_way`]); delay queues stay.
    pub fn heal(&self) -> Result<()> {
        for node in 0..self.nodes {
            self.rule(node, &["-F", "locus-in"])?;
            self.rule(node, &["-F", "locus-out"])?;
        }
        Ok(())
    }

    /// Delays (and drops a share of) what node `node` sends on its link,
    /// replacing any earlier setting of that node. See [`Netem`] for how.
    pub fn netem(&self, node: usize, netem: Netem) -> Result<()> {
        netem.validate()?;
        self.clear_netem(node)?;
        let engine = netem::Engine::start(node, self.namespace(node), netem)?;
        // Only now the rule: a packet queued before the queue is bound
        // would be dropped.
        let queue = netem::QUEUE_NUM.to_string();
        let rule = [
            "-A",
            "locus-netem",
            "-o",
            "eth0",
            "-j",
            "NFQUEUE",
            "--queue-num",
            &queue,
        ];
        if let Err(e) = self.rule(node, &rule) {
            let _ = engine.stop();
            return Err(e);
        }
        self.engines.lock().unwrap_or_else(PoisonError::into_inner)[node] = Some(engine);
        Ok(())
    }

    /// Removes node `node`'s delay queue (nothing if it has none). Packets
    /// it holds go on at once. Returns the error the queue failed on, if it
    /// failed while set.
    pub fn clear_netem(&self, node: usize) -> Result<()> {
        self.check(Party::Node(node))?;
        // The rule first, so nothing new is queued while the engine stops.
        self.rule(node, &["-F", "locus-netem"])?;
        let engine = self.engines.lock().unwrap_or_else(PoisonError::into_inner)[node].take();
        match engine {
            None => Ok(()),
            Some(engine) => engine
                .stop()
                .map_err(|message| NetlabError::Netem { node, message }),
        }
    }

    fn check(&self, party: Party) -> Result<()> {
        match party {
            Party::Node(node) if node >= self.nodes => Err(NetlabError::NoSuchNode {
                node,
                nodes: self.nodes,
            }),
            _ => Ok(()),
        }
    }

    /// One iptables command in node `node`'s namespace.
    fn rule(&self, node: usize, args: &[&str]) -> Result<()> {
        let iptables = self
            .iptables
            .as_ref()
            .expect("a lab that was made has found its iptables");
        self.tools.iptables(iptables, self.namespace(node), args)
    }
}
