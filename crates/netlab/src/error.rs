//! The crate's one error type.

use crate::Party;

/// Everything that can go wrong making, changing or removing a lab. Each
/// message says what was wrong and what to do; a missing tool or a missing
/// privilege is an error, never a silent skip.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetlabError {
    /// Namespaces, veth pairs and iptables rules need root.
    #[error(
        "netlab needs root (it creates network namespaces, veth pairs and iptables rules); \
         this process runs as uid {euid}: run the tests as root"
    )]
    NotRoot {
        /// The effective uid of this process.
        euid: u32,
    },
    /// A program the lab runs is not installed.
    #[error(
        "netlab needs `{tool}` (Debian package {package}), which is neither on PATH nor in \
         /usr/sbin, /sbin, /usr/bin or /bin: run scripts/setup, which installs it \
         (or apt-get install -y {package})"
    )]
    ToolMissing {
        /// The program's name.
        tool: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// Neither iptables backend could make a chain inside a lab namespace.
    #[error(
        "neither `iptables` nor `iptables-legacy` can make a chain inside network namespace \
         {namespace}: iptables said: {nft}; iptables-legacy said: {legacy}"
    )]
    NoIptables {
        /// The namespace the probe ran in.
        namespace: String,
        /// What `iptables` printed.
        nft: String,
        /// What `iptables-legacy` printed (or why it could not run).
        legacy: String,
    },
    /// A command exited with a failure.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A command ran past its time limit and was killed.
    #[error("`{command}` did not finish within {timeout_ms} ms and was killed")]
    CommandTimeout {
        /// The command line.
        command: String,
        /// The limit it ran past.
        timeout_ms: u64,
    },
    /// A command could not be started or waited for.
    #[error("could not run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The spec asks for no nodes or for more than [`NODES_MAX`](crate::NODES_MAX).
    #[error("a lab has 1 to {nodes_max} nodes (NetlabSpec::nodes); asked for {nodes}")]
    NodeCount {
        /// What was asked for.
        nodes: usize,
        /// The limit.
        nodes_max: usize,
    },
    /// A fault names a node the lab does not have.
    #[error("node {node} is not in this lab of {nodes} nodes (0..{nodes})")]
    NoSuchNode {
        /// The node named.
        node: usize,
        /// How many the lab has.
        nodes: usize,
    },
    /// A partition or a one-way drop names one party on both of its sides.
    #[error("{party:?} is on both sides of the cut; a party cannot be cut from itself")]
    SameParty {
        /// The party.
        party: Party,
    },
    /// Every candidate /24 overlaps a route of this machine or is held by another lab.
    #[error(
        "no free /24 in 10.213.0.0/16 for the lab: {overlapping} overlap a route of this \
         machine (ip -4 route show table all) and {held} are held by other labs (interfaces \
         locusN); remove stale labs with Netlab::sweep or free a /24 there"
    )]
    NoFreeSubnet {
        /// How many candidates overlap a route.
        overlapping: usize,
        /// How many candidates another lab holds.
        held: usize,
    },
    /// A [`Netem`](crate::Netem) field is out of its range.
    #[error("Netem::{field} = {value} is out of range: {reason}")]
    InvalidNetem {
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: String,
        /// The range it must be in.
        reason: &'static str,
    },
    /// The delay queue of a node could not start, or stopped on an error.
    #[error("the delay queue of node {node} failed: {message}")]
    Netem {
        /// The node.
        node: usize,
        /// What went wrong.
        message: String,
    },
    /// Teardown could not remove every part of the lab.
    #[error("tearing down lab {tag} left parts behind: {failures}")]
    Teardown {
        /// The lab's `<pid>-<lab>`.
        tag: String,
        /// Each failure, separated by "; ".
        failures: String,
    },
    /// A file of the kernel (`/proc`, `/sys`, `/run/netns`) could not be read.
    #[error("{what}: {source}")]
    Io {
        /// What was being read.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// The crate's result.
pub type Result<T, E = NetlabError> = std::result::Result<T, E>;
