//! The server crate's error type: what starting or running a server or the
//! coordinator process can fail with. Settings name their key; I/O names
//! what was being done; failures of lower layers keep their source.

use std::path::PathBuf;

use locus_coordinator::CoordinatorError;
use locus_fabric::FabricError;
use locus_store::StoreError;

/// What a server or the coordinator process can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A setting that cannot work.
    #[error("{key} = {value}: {expected}")]
    Setting {
        /// The key, as written in the cluster file (or the flag).
        key: &'static str,
        /// The value given.
        value: String,
        /// What it must be.
        expected: String,
    },
    /// The cluster file does not parse or validate.
    #[error("cluster file {path}: {reason}")]
    ClusterFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An I/O failure, with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// A peer did not come up in time.
    #[error("server {peer} at {addr} is not reachable after {waited_ms} ms: {reason}; start it, or check its address in the cluster file")]
    PeerUnreachable {
        /// The peer's machine.
        peer: u8,
        /// Its fabric address.
        addr: std::net::SocketAddr,
        /// How long this server waited.
        waited_ms: u64,
        /// The last failure.
        reason: String,
    },
    /// The fabric failed.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A node setting that cannot work.
    #[error(transparent)]
    Node(locus_node::NodeError),
    /// The coordinator's policy or record failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// A thread could not start.
    #[error("cannot start thread {thread}: {source}")]
    Spawn {
        /// Its name.
        thread: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The write-ahead log or a checkpoint failed (recovery names the file and offset).
    #[error(transparent)]
    Wal(#[from] locus_wal::WalError),
    /// Recovery could not put the logged state back.
    #[error("recovery: {0}")]
    Recovery(String),
    /// The metrics recorder could not be installed.
    #[error("metrics: {0}")]
    Metrics(String),
    /// A process the supervisor started did not do what it should (the
    /// reason quotes the end of its log).
    #[error("{role} {reason}")]
    Process {
        /// Which process (`server 2`, `coordinator`).
        role: String,
        /// What it did instead.
        reason: String,
    },
    /// Membership on etcd (`locus-membership`) failed.
    #[error("membership: {0}")]
    Membership(String),
    /// A slot move could not be made (`crate::moves`).
    #[error("slot move: {0}")]
    Move(String),
}

impl ServerError {
    /// A setting error.
    pub fn setting(key: &'static str, value: String, expected: impl Into<String>) -> Self {
        ServerError::Setting {
            key,
            value,
            expected: expected.into(),
        }
    }

    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        ServerError::Io {
            what: what.into(),
            source,
        }
    }
}

/// The crate's result.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

impl From<locus_node::NodeError> for ServerError {
    fn from(e: locus_node::NodeError) -> Self {
        match e {
            locus_node::NodeError::Setting {
                key,
                value,
                expected,
            } => ServerError::Setting {
                key,
                value,
                expected,
            },
            e => ServerError::Node(e),
        }
    }
}
