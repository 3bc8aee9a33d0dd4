//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while generating, loading, writing or building a graph.
///
/// Each variant says what was wrong, where (file, 1-based line or byte offset, setting)
/// and, in its message, what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// An operating-system I/O call failed on `path`.
    #[error("cannot {action} '{}': {source}", path.display())]
    Io {
        /// What was being done: "open", "read", "create", "write", "rename".
        action: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// An R-MAT setting is out of range.
    #[error("invalid R-MAT setting `{field}`: {reason}")]
    InvalidRmatConfig {
        /// The offending field of `RmatConfig`.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },

    /// A `LoadOptions` setting is inconsistent.
    #[error("invalid load option `{field}`: {reason}")]
    InvalidLoadOptions {
        /// The offending field of `LoadOptions`.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },

    /// A line of a text edge list is not a comment, blank, or `src dst`.
    #[error(
        "{}:{line}: {reason} in line '{text}'; each line must be two unsigned vertex ids \
         'src dst', blank, or a comment starting with '#' or '%'",
        path.display()
    )]
    MalformedLine {
        /// The file being read.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The offending line, truncated for display.
        text: String,
        /// What is wrong, e.g. "expected two vertex ids, found 1".
        reason: String,
    },

    /// A line of a Matrix Market file is not what its place in the file needs.
    #[error(
        "{}:{line}: {reason} in line '{text}'; a Matrix Market graph is a \
         '%%MatrixMarket matrix coordinate pattern|integer|real general|symmetric' banner, \
         '%' comments, a 'rows cols entries' size line, then one 'row col [value]' entry \
         per line with 1-based ids",
        path.display()
    )]
    MalformedMatrix {
        /// The file being read.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The offending line, truncated for display.
        text: String,
        /// What is wrong.
        reason: String,
    },

    /// A line of a text edge list is longer than any sane `src dst` line.
    #[error(
        "{}:{line}: line is longer than {line_bytes_max} bytes; is this a binary edge list? \
         load it with the binary format",
        path.display()
    )]
    LineTooLong {
        /// The file being read.
        path: PathBuf,
        /// 1-based line number where the long line starts.
        line: u64,
        /// The limit that was exceeded.
        line_bytes_max: usize,
    },

    /// A record of a binary edge list holds an unacceptable vertex id.
    #[error("{}: record at byte offset {offset}: {reason}", path.display())]
    MalformedRecord {
        /// The file being read.
        path: PathBuf,
        /// Byte offset of the start of the 8-byte record.
        offset: u64,
        /// What is wrong, e.g. "vertex id 4294967295 exceeds the maximum 4294967294".
        reason: String,
    },

    /// A binary edge list ends in the middle of a record.
    #[error(
        "{}: truncated record at byte offset {offset}: the file has {file_bytes} bytes, \
         not a multiple of 8; a binary edge list is little-endian u32 pairs (is this a text file?)",
        path.display()
    )]
    TruncatedRecord {
        /// The file being read.
        path: PathBuf,
        /// Byte offset where the incomplete record starts.
        offset: u64,
        /// Total bytes in the file.
        file_bytes: u64,
    },

    /// A file holds no edges at all.
    #[error("no edges in {}; an edge list needs at least one 'src dst' edge", path.display())]
    NoEdges {
        /// The file that was read.
        path: PathBuf,
    },

    /// An edge handed to the CSR builder names a vertex outside `[0, vertex_count)`.
    #[error(
        "edge ({src}, {dst}) names a vertex outside 0..{vertex_count}; \
         build with a vertex count above the largest id"
    )]
    EdgeOutOfRange {
        /// Source of the offending edge.
        src: u32,
        /// Destination of the offending edge.
        dst: u32,
        /// The vertex count the builder was given.
        vertex_count: u64,
    },

    /// A graph was asked to hold more vertices than 32-bit ids can name.
    #[error(
        "vertex count {vertex_count} exceeds the maximum {vertex_count_max}; \
         vertex ids are u32 and u32::MAX is reserved"
    )]
    TooManyVertices {
        /// The requested count.
        vertex_count: u64,
        /// The largest allowed count.
        vertex_count_max: u64,
    },

    /// A format name that is neither text nor binary.
    #[error("unknown edge-list format '{name}'; use 'text' (SNAP-style 'src dst' lines) or 'binary' (GridGraph u32 pairs)")]
    UnknownFormat {
        /// The name that was given.
        name: String,
    },

    /// An `EdgeSource` yielded different edges on the CSR builder's two passes.
    #[error(
        "the edge source yielded different edges on its counting and filling passes; \
         an EdgeSource must yield the same edges every time it is visited"
    )]
    UnstableSource,
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, GraphError>;

/// Builds a closure turning an `io::Error` into [`GraphError::Io`] for `path`.
pub(crate) fn io_err<'p>(
    action: &'static str,
    path: &'p std::path::Path,
) -> impl FnOnce(std::io::Error) -> GraphError + 'p {
    move |source| GraphError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}
