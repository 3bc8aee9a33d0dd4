//! The crate's one error type.

use std::path::PathBuf;

/// What loading, generating or querying RDF can fail with.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RdfError {
    /// A line of an N-Triples file is not a valid triple, or breaks a limit.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// The file (or `-` for a stream without a name).
        file: String,
        /// The 1-based line.
        line: u64,
        /// What is wrong and what to do.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A persisted dictionary is damaged or from another version.
    #[error("dictionary {}: {message}", path.display())]
    Dictionary {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the byte offset.
        message: String,
    },
    /// The dataset does not fit the key layout (too many terms or predicates).
    #[error("layout: {0}")]
    Layout(String),
    /// The input holds no triple.
    #[error("{file}: no triples (an empty dataset cannot be queried)")]
    Empty {
        /// The file.
        file: String,
    },
    /// A generator setting is out of range.
    #[error("{name} = {value}: {expected}")]
    Setting {
        /// The flag or field.
        name: &'static str,
        /// The value given.
        value: String,
        /// The range it must be in.
        expected: &'static str,
    },
    /// The SPARQL text does not parse.
    #[error("SPARQL syntax: {0}")]
    QuerySyntax(String),
    /// The query uses a feature this engine does not implement.
    #[error("unsupported SPARQL feature: {0}")]
    Unsupported(String),
    /// A prepared query (a benchmark's template) cannot be run by swapping its start constant.
    #[error("query template: {0}")]
    Template(String),
    /// A query would keep more intermediate rows than its limit.
    #[error("the query kept more than {rows_max} intermediate rows at step {step} ({pattern}); add a constant or a LIMIT, or raise rows_max")]
    TooManyRows {
        /// The bound.
        rows_max: usize,
        /// 1-based step of the plan.
        step: usize,
        /// The triple pattern of that step.
        pattern: String,
    },
    /// An operator around exploration would keep more solutions than the limit.
    #[error("{operator} made more than {rows_max} solutions; add a constant or a LIMIT, or raise rows_max")]
    TooManySolutions {
        /// The bound.
        rows_max: usize,
        /// The operator (a join, OPTIONAL, a property path...).
        operator: String,
    },
    /// A request the endpoint's settings do not allow (a LOAD outside its load directory).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A query ran past its time limit (checked at every store read).
    #[error("the query ran longer than its limit of {ms} ms; add a constant or a LIMIT, or raise the limit (locus sparql serve --timeout-ms)")]
    Timeout {
        /// The limit.
        ms: u64,
    },
    /// A list could not be read from where the data lives (a cluster's server).
    #[error("reading key {key}: {message}")]
    Source {
        /// The store key.
        key: u32,
        /// What the source said.
        message: String,
    },
    /// The store failed underneath.
    #[error("store: {0}")]
    Store(#[from] locus_store::StoreError),
}

/// The crate's result type.
pub type Result<T, E = RdfError> = std::result::Result<T, E>;
