//! The crate's one error type.

use std::path::PathBuf;

/// Everything analytics can fail with. Each variant says what was wrong, where
/// (file, setting, machine) and, in its message, what to do about it.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum AnalyticsError {
    /// Loading or generating the input graph failed (the message names the
    /// file and the line or byte offset).
    #[error(transparent)]
    Graph(#[from] locus_graph::GraphError),

    /// A fabric operation failed (far memory unreachable, out of bounds, ...).
    #[error("far memory: {0}")]
    Fabric(#[from] locus_fabric::FabricError),

    /// An operating-system I/O call failed on `path`.
    #[error("cannot {action} '{}': {source}", path.display())]
    Io {
        /// What was being done: "create", "write", "read", "open".
        action: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A setting is out of range.
    #[error("invalid setting `{field}`: {reason}")]
    Config {
        /// The offending setting.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },

    /// The memory server refused a control request.
    #[error("the far-memory server on machine {machine} refused: {reason}")]
    Server {
        /// The server's machine.
        machine: u8,
        /// What it said, and what to do.
        reason: String,
    },

    /// A parallelism profile table that cannot be used.
    #[error("profile table '{}': {reason}", path.display())]
    Profile {
        /// The table's file.
        path: PathBuf,
        /// What is wrong, and what to do.
        reason: String,
    },

    /// A saved placement profile (`--profile`) that cannot be used: not a
    /// profile, another graph or algorithm, or made with the run's own root.
    #[error("saved profile '{}': {reason}", path.display())]
    SavedProfile {
        /// The profile's file.
        path: PathBuf,
        /// What is wrong, and what to do.
        reason: String,
    },

    /// The run would need more memory than its limit (`--memory-max`); the
    /// message says how much, why (which file and line named the largest
    /// id) and what to do.
    #[error("not enough memory allowed: {reason}")]
    MemoryLimit {
        /// The estimate, its cause and the advice.
        reason: String,
    },

    /// A prepared grid directory that cannot be used (corrupt, truncated,
    /// another format version, or not what the run asks for).
    #[error("prepared grid '{}': {reason}", path.display())]
    Prepared {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong, and what to do.
        reason: String,
    },

    /// An input file's line that cannot be used (a bad edge weight).
    #[error("'{}' line {line}: {reason}", path.display())]
    Input {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u64,
        /// What is wrong, and what to do.
        reason: String,
    },

    /// `--verify` found the result wrong (GAPBS's checks, reimplemented).
    #[error("verification failed: {0}")]
    Verify(String),

    /// A worker thread of the engine panicked (a bug); the run is abandoned.
    #[error("an engine thread panicked: {0}")]
    WorkerPanicked(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, AnalyticsError>;

/// A closure turning an `io::Error` into [`AnalyticsError::Io`] for `path`.
pub(crate) fn io_err<'p>(
    action: &'static str,
    path: &'p std::path::Path,
) -> impl FnOnce(std::io::Error) -> AnalyticsError + 'p {
    move |source| AnalyticsError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// A [`AnalyticsError::Config`].
pub(crate) fn config_err(field: &'static str, reason: impl Into<String>) -> AnalyticsError {
    AnalyticsError::Config {
        field,
        reason: reason.into(),
    }
}
