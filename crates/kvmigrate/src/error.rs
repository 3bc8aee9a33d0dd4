//! The crate's one error type.

use crate::wire::NodeId;

/// Everything that can go wrong in `locus-kvmigrate`; bugs are assertions, not variants.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range; the message names the key and the limit.
    #[error("invalid configuration: {0}")]
    Config(String),
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
    /// A request got no reply in time.
    #[error("timed out after {0} ms waiting for node {1}")]
    Timeout(u64, NodeId),
    /// The server answered a query with an error (busy, aborted migration, ...).
    #[error("server {0} refused the query")]
    Refused(NodeId),
    /// A migration could not start: the shard is unknown, busy, or the router table is full.
    #[error("migration of shard {shard} cannot start: {reason}")]
    MigrationRejected {
        /// The shard (its home server id).
        shard: u16,
        /// What to change.
        reason: String,
    },
    /// A migration was aborted (destination silent past its timeout, or told to).
    #[error("migration of shard {0} aborted: {1}")]
    Aborted(u16, String),
    /// A `redis-server` behind an agent (or an inspecting client) failed or answered nonsense.
    #[error("redis store: {0}")]
    Redis(#[from] crate::resp::RespError),
    /// A background thread of the runtime panicked or stopped unexpectedly.
    #[error("runtime thread failed: {0}")]
    Runtime(String),
}

/// Result with the crate's error.
pub type Result<T> = std::result::Result<T, Error>;
