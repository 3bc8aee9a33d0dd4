//! The crate's one error type.

use std::path::PathBuf;

/// What an experiment can fail with. Each wraps the failing layer's own error,
/// so a caller can still match on it; settings that cannot work name the setting.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A setting (flag, preset, config key) that cannot work.
    #[error("{setting} = {value}: {expected}")]
    Setting {
        /// The setting, as the user names it (`--scale`, `cluster.machines`).
        setting: String,
        /// The value given.
        value: String,
        /// What it must be instead.
        expected: String,
    },
    /// A configuration file could not be read or parsed.
    #[error("config file {path}: {reason}")]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What was wrong (the TOML parser names the line and key).
        reason: String,
    },
    /// A results file written by an earlier run could not be read back.
    #[error("results file {path}: {reason}")]
    ResultsFile {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// A file could not be written or read.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("writing", "creating").
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A loopback socket could not be opened or used.
    #[error("{action} {addr}: {source}")]
    Socket {
        /// What was being done ("listening on").
        action: &'static str,
        /// The address.
        addr: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A child process the experiment started misbehaved.
    #[error("{program}: {reason}")]
    Child {
        /// The program that was started.
        program: PathBuf,
        /// What it did instead of what was expected.
        reason: String,
    },
    /// A measured operation failed or returned a wrong result, so the
    /// figure would be meaningless.
    #[error("{experiment}: {what}")]
    Measurement {
        /// The experiment.
        experiment: &'static str,
        /// What went wrong.
        what: String,
    },
    /// A machine's service thread stopped during a run (its forwards would
    /// otherwise show up as timeouts).
    #[error("{scheme}: {source}")]
    Service {
        /// The scheme or run that was going on.
        scheme: String,
        /// The service's failure.
        #[source]
        source: locus_store::StoreError,
    },
    /// The migration driver of a scheme stopped on an error.
    #[error("{scheme}: the migration driver failed: {source}")]
    Driver {
        /// The scheme.
        scheme: String,
        /// The driver's first failure.
        #[source]
        source: std::sync::Arc<locus_coordinator::CoordinatorError>,
    },
    /// A run could not be carried out by the scheme it was measuring.
    #[error("{scheme}: {source}")]
    Scheme {
        /// The scheme.
        scheme: String,
        /// What failed.
        #[source]
        source: Box<BenchError>,
    },
    /// A thread of the experiment panicked (a bug).
    #[error("thread {thread} panicked; this is a bug, please report it")]
    ThreadPanicked {
        /// Which thread.
        thread: String,
    },
    /// A graph could not be generated or loaded.
    #[error(transparent)]
    Graph(#[from] locus_graph::GraphError),
    /// The fabric failed.
    #[error(transparent)]
    Fabric(#[from] locus_fabric::FabricError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] locus_store::StoreError),
    /// A workload could not be made or run.
    #[error(transparent)]
    Workload(#[from] locus_workloads::WorkloadError),
    /// The monitor, coordinator or migration driver failed.
    #[error(transparent)]
    Coordinator(#[from] locus_coordinator::CoordinatorError),
    /// Far-memory analytics failed.
    #[error(transparent)]
    Analytics(#[from] locus_analytics::AnalyticsError),
    /// Live shard migration failed.
    #[error(transparent)]
    Kv(#[from] locus_kvmigrate::Error),
    /// A plot could not be drawn or written.
    #[error(transparent)]
    Plot(#[from] locus_plot::PlotError),
    /// A request to a server process failed (the error names the server).
    #[error(transparent)]
    Client(#[from] locus_client::ClientError),
    /// A cluster file could not be made, or a server could not start.
    #[error(transparent)]
    Server(#[from] locus_server::ServerError),
    /// RDF data could not be generated, loaded or queried.
    #[error(transparent)]
    Rdf(#[from] locus_rdf::RdfError),
    /// A result could not be turned into JSON.
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl BenchError {
    /// A setting that cannot work.
    pub fn setting(
        setting: impl Into<String>,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> BenchError {
        BenchError::Setting {
            setting: setting.into(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    /// Wraps an error with the scheme that was running.
    pub fn in_scheme(self, scheme: impl Into<String>) -> BenchError {
        BenchError::Scheme {
            scheme: scheme.into(),
            source: Box::new(self),
        }
    }
}

impl From<std::convert::Infallible> for BenchError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

/// Result with the crate's error.
pub type Result<T> = std::result::Result<T, BenchError>;

impl From<locus_node::NodeError> for BenchError {
    fn from(e: locus_node::NodeError) -> Self {
        use locus_node::NodeError as N;
        match e {
            N::Setting {
                key,
                value,
                expected,
            } => BenchError::setting(key, value, expected),
            N::ConfigFile { path, reason } => BenchError::ConfigFile { path, reason },
            N::Store(e) => BenchError::Store(e),
            N::Fabric(e) => BenchError::Fabric(e),
            N::Graph(e) => BenchError::Graph(e),
            N::Policy(e) => BenchError::Coordinator(e),
            N::ThreadPanicked { thread } => BenchError::ThreadPanicked { thread },
            other => BenchError::setting("config", "", other.to_string()),
        }
    }
}
