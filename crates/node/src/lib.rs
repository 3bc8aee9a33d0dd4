//! One machine of the Locus store, assembled once (issue 58; the plan is in
//! `docs/design.md`, "The node, and its simulated twin").
//!
//! - [`config`]: the node's configuration ([`config::NodeConfig`]: `[store]`,
//!   `[policy]`, `[durability]`, `[recovery]`, `[limits]`), read by the
//!   cluster file (`locus-server`) and the benchmarks' TOML (`locus-bench`)
//!   with one spelling per key.
//! - [`embedded`]: every machine in this process on one fabric, a graph
//!   loaded into them ([`embedded_config::Config`] is its TOML file): what
//!   `locus query`, `locus load`, `locus rdf`, `locus sparql` and the
//!   benchmarks run. (Assembling each machine as a node is the next step.)
//! - [`progress`]: [`progress::Reporter`], progress bars and notes on stderr.
//! - [`node`]: [`Node`], one machine of the store serving clients: its
//!   store, its log, Pragh 5 recovery; transport-free (`locus server`
//!   runs it over TCP, the simulated cluster under a seed).

#![warn(missing_docs)]

pub mod config;
pub mod embedded;
pub mod embedded_config;
pub mod member;
pub mod node;
pub mod progress;

pub use config::NodeConfig;
pub use node::{Created, Faults, LogParts, Node, NodeParts, Session};

/// What a node's configuration can be wrong about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// A setting that cannot work.
    #[error("{key} = {value}: {expected}")]
    Setting {
        /// The key, as written in the file (`section.key`).
        key: &'static str,
        /// The value given.
        value: String,
        /// What it must be.
        expected: String,
    },
    /// A key spelled as it was before it was renamed.
    #[error("{old} was renamed {new}; write {new} instead")]
    Renamed {
        /// The old spelling.
        old: &'static str,
        /// The key's name now.
        new: &'static str,
    },
    /// The store refuses its settings.
    #[error(transparent)]
    Store(#[from] locus_store::StoreError),
    /// The coordinator's policy refuses its settings.
    #[error(transparent)]
    Policy(#[from] locus_coordinator::CoordinatorError),
    /// A configuration file cannot be read or parsed.
    #[error("config file {path}: {reason}")]
    ConfigFile {
        /// The file.
        path: std::path::PathBuf,
        /// What was wrong (the TOML parser names the line and key).
        reason: String,
    },
    /// The fabric failed.
    #[error(transparent)]
    Fabric(#[from] locus_fabric::FabricError),
    /// A graph could not be generated or loaded.
    #[error(transparent)]
    Graph(#[from] locus_graph::GraphError),
    /// The write-ahead log failed (a corrupt log names its file and offset).
    #[error(transparent)]
    Wal(#[from] locus_wal::WalError),
    /// Recovery could not put something back.
    #[error("recovery: {0}")]
    Recovery(String),
    /// The membership store (etcd, or its simulated stand-in) failed.
    #[error("membership: {0}")]
    Membership(String),
    /// A worker thread panicked.
    #[error("thread {thread} panicked")]
    ThreadPanicked {
        /// Which thread.
        thread: String,
    },
    /// A step of a slot move that cannot be taken.
    #[error("slot move: {0}")]
    Move(String),
}

impl NodeError {
    /// A setting error.
    pub fn setting(key: &'static str, value: String, expected: impl Into<String>) -> Self {
        NodeError::Setting {
            key,
            value,
            expected: expected.into(),
        }
    }
}

/// The crate's result.
pub type Result<T, E = NodeError> = std::result::Result<T, E>;
