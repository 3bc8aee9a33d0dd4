//! The crate's one error type.
//!
//! Every variant carries the facts as fields (which setting, which server, which shard, which
//! thread) and its message says what was wrong, where, and what to do. Bugs are assertions, not
//! variants.

use std::path::PathBuf;

use crate::wire::{NodeId, ShardId};

/// Everything that can go wrong in `locus-kvmigrate`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range.
    #[error("invalid setting {key} = {value}: expected {expected}; change {key} and retry")]
    InvalidSetting {
        /// The setting's name, as spelled in its config struct.
        key: &'static str,
        /// The value given.
        value: String,
        /// The accepted range or rule.
        expected: String,
    },
    /// A server's CPU budget is out of range.
    #[error(
        "CPU budget of server {server}: query_pct = {query_pct}, interval_us = {interval_us}; \
         query_pct must be in 1..=100 and interval_us > 0"
    )]
    InvalidBudget {
        /// The server the budget was given for.
        server: NodeId,
        /// Share of each interval for queries.
        query_pct: u8,
        /// Accounting interval.
        interval_us: u64,
    },
    /// A cluster's router, servers and clients do not fit the 16-bit node id space.
    #[error(
        "clients_max = {clients_max} with {servers} servers and the router needs more than 65535 \
         node ids; lower clients_max to at most {clients_fit}"
    )]
    TooManyClients {
        /// Client handles asked for.
        clients_max: u16,
        /// Servers in the cluster.
        servers: u16,
        /// The most clients that fit beside the router and the servers.
        clients_fit: usize,
    },
    /// Every client handle of a cluster is already handed out.
    #[error("all {clients_max} client handles are in use; raise ClusterConfig::clients_max")]
    ClientsExhausted {
        /// The configured limit.
        clients_max: u16,
    },
    /// A packet could not be decoded (the router and the agents drop and count these).
    #[error("malformed packet: {0}")]
    Malformed(&'static str),
    /// A packet would not fit the wire limits (value or datagram size).
    #[error("packet too large: {what} is {len} bytes, limit {max}")]
    TooLarge {
        /// Which field or packet.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The transport has no such node, or the node is down.
    #[error("node {0} is unreachable")]
    Unreachable(NodeId),
    /// A request to a server's thread got no answer in time.
    #[error("timed out after {0} ms waiting for node {1}")]
    Timeout(u64, NodeId),
    /// A client's query got no reply in time.
    #[error(
        "no reply to a query on shard {shard} within {waited_ms} ms: the router or the shard's \
         server may be down, overloaded, or the datagram was lost; retry or raise op_timeout_ms"
    )]
    QueryTimeout {
        /// The shard queried.
        shard: ShardId,
        /// How long the client waited.
        waited_ms: u64,
    },
    /// A migration was still running when the caller stopped waiting for it.
    #[error(
        "migration of shard {shard} neither finished nor aborted within {waited_ms} ms; \
         check the servers' migration status, or wait longer"
    )]
    MigrationNotFinished {
        /// The shard being migrated.
        shard: ShardId,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The server answered a query with an error (busy, aborted migration, ...).
    #[error("server {0} refused the query")]
    Refused(NodeId),
    /// An operator's `recover` or `abort` named a shard that is not orphaned at that server.
    #[error(
        "server {server} holds no orphaned shard {shard} (one whose source died mid-migration): \
         see `locus kv migration status` for the shard's destination and phase"
    )]
    NotOrphaned {
        /// The shard.
        shard: ShardId,
        /// The server asked.
        server: NodeId,
    },
    /// The key's data may exist only on a server that died during a migration (never reported
    /// as an absent key).
    #[error("server {server}: {message}")]
    DataLost {
        /// The server that answered.
        server: NodeId,
        /// What was lost, with whom, and the operator's commands.
        message: String,
    },
    /// A server was asked about a shard it does not hold.
    #[error(
        "server {server} holds no shard {shard}: send the request to the server that holds it \
         (a shard starts on the server of the same id, and moves with each migration)"
    )]
    ShardUnknown {
        /// The server asked.
        server: NodeId,
        /// The shard named.
        shard: ShardId,
    },
    /// A migration's destination is not another server.
    #[error(
        "migration of shard {shard} cannot start: destination {destination} is not another \
         server (the source is {server}, the router is {router}); pick another server id"
    )]
    BadDestination {
        /// The shard to move.
        shard: ShardId,
        /// The source server.
        server: NodeId,
        /// The router's id.
        router: NodeId,
        /// The destination asked for.
        destination: NodeId,
    },
    /// A shard cannot start a migration while one of it is in flight or after it moved away.
    #[error(
        "migration of shard {shard} cannot start: server {server} is already migrating it or \
         it has moved away; wait for that migration to finish (see the migration status) and \
         ask the shard's current server"
    )]
    MigrationBusy {
        /// The shard.
        shard: ShardId,
        /// The server asked.
        server: NodeId,
    },
    /// A server's shard store failed; the server stopped as if it had crashed.
    #[error(
        "server {server}'s store failed: {reason}; the server stopped (as if it crashed) and \
         its last step was dropped: check its backing store (for example its redis-server) \
         and restart the cluster"
    )]
    StoreFailed {
        /// The server.
        server: NodeId,
        /// The store's first error.
        reason: String,
    },
    /// A `redis-server` behind an agent (or an inspecting client) failed or answered nonsense.
    #[error("redis store: {0}")]
    Redis(#[from] crate::resp::RespError),
    /// A Redis did not load one of the agent's Lua scripts.
    #[error(
        "redis at {addr} answered SCRIPT LOAD with {reply} instead of a script SHA; the agents \
         need a Redis with Lua scripting (2.6 or later, EVALSHA not disabled)"
    )]
    RedisScriptLoad {
        /// The Redis address.
        addr: String,
        /// Its reply, abbreviated.
        reply: String,
    },
    /// A Redis-backed cluster was given a different number of addresses than servers.
    #[error("{addrs} redis addresses for {servers} servers: give exactly one address per server")]
    RedisAddressCount {
        /// Addresses given.
        addrs: usize,
        /// Servers in the cluster.
        servers: u16,
    },
    /// No Redis address for a server of a Redis-backed cluster.
    #[error("no redis address for server {server}: give one address per server, in id order")]
    RedisAddressMissing {
        /// The server.
        server: NodeId,
    },
    /// A Redis Cluster (started for `measure_redis_cluster`) misbehaved or answered nonsense.
    #[error("redis cluster: {what}")]
    RedisCluster {
        /// What happened, with the node or command.
        what: String,
    },
    /// A `redis-server` binary cannot be run at all.
    #[error(
        "{} is not runnable ({why}): install redis (Debian: `apt-get install -y redis-server`) \
         or pass the path of a redis-server binary",
        bin.display()
    )]
    RedisNotRunnable {
        /// The binary tried.
        bin: PathBuf,
        /// What running it said.
        why: String,
    },
    /// A private `redis-server` ran but never became ready.
    #[error(
        "could not start a private {} in {attempts} attempts: {last}; is the machine out of \
         ports or memory?",
        bin.display()
    )]
    RedisStartFailed {
        /// The binary.
        bin: PathBuf,
        /// Attempts made, each on a fresh port.
        attempts: u32,
        /// The last attempt's failure.
        last: String,
    },
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, and on which address or node.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start thread {name}: {source}; the process may be out of threads or memory")]
    ThreadSpawn {
        /// The thread's name.
        name: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A background thread panicked.
    #[error(
        "thread {thread} panicked (its message is on stderr); results of this run are \
         unreliable: rerun, and report the panic if it repeats"
    )]
    ThreadPanicked {
        /// The thread's name.
        thread: String,
    },
}

impl From<locus_placement::PlacementError> for Error {
    /// The shared index's settings are this crate's settings (`bf_bytes`, `cbf_bytes`).
    fn from(e: locus_placement::PlacementError) -> Self {
        match e {
            locus_placement::PlacementError::InvalidSetting {
                key,
                value,
                expected,
            } => Error::InvalidSetting {
                key,
                value,
                expected,
            },
            other => Error::InvalidSetting {
                key: "placement",
                value: String::new(),
                expected: other.to_string(),
            },
        }
    }
}

/// Result with the crate's error.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_fact_and_the_fix() {
        let e = Error::InvalidSetting {
            key: "instances_max",
            value: "0".into(),
            expected: "1..=64".into(),
        };
        assert_eq!(
            e.to_string(),
            "invalid setting instances_max = 0: expected 1..=64; change instances_max and retry"
        );
        let e = Error::ShardUnknown {
            server: 2,
            shard: 7,
        };
        assert!(
            e.to_string().starts_with("server 2 holds no shard 7"),
            "{e}"
        );
        let e = Error::StoreFailed {
            server: 1,
            reason: "redis at 127.0.0.1:1 closed the connection".into(),
        };
        assert!(e.to_string().contains("closed the connection"), "{e}");
        let e = Error::TooManyClients {
            clients_max: u16::MAX,
            servers: 2,
            clients_fit: 65_532,
        };
        assert!(e.to_string().contains("at most 65532"), "{e}");
    }
}
