//! The workloads crate's error type.
//!
//! Generator settings that cannot work (an empty item range, a skew outside
//! (0, 1), a proportion outside 0..=1) are refused when the generator is
//! built, with the value given; a traversal run that fails says which
//! operation, machine and worker thread, and keeps the store's error.

use locus_fabric::{FabricError, MachineId};
use locus_store::StoreError;

use crate::traversal::Op;
use crate::ycsb::RECORD_COUNT_MAX;

/// What building a workload or running one can fail with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A distribution over no items (`Zipf::new(0, ..)`, `ScrambledZipfian::new(0)`).
    #[error("{what} needs at least one item, but was asked for 0")]
    NoItems {
        /// Which distribution.
        what: &'static str,
    },
    /// A Zipf skew outside (0, 1).
    #[error("Zipf theta = {theta} must be in (0, 1) (Pragh and YCSB use 0.99)")]
    Theta {
        /// The value given.
        theta: f64,
    },
    /// A YCSB item range that is empty or too large.
    #[error("YCSB item range {min}..={max} is invalid: {why}")]
    Range {
        /// Smallest item.
        min: u64,
        /// Largest item (inclusive).
        max: u64,
        /// What is wrong.
        why: &'static str,
    },
    /// A write ratio or proportion outside 0..=1 or not finite.
    #[error("{what} = {value} must be a number in 0..=1 (e.g. 0.05 for a 5% write ratio)")]
    Proportion {
        /// Which setting.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// Read and update proportions both zero.
    #[error("a workload needs a read or update proportion above 0")]
    NoOperations,
    /// A YCSB record count outside `1..=RECORD_COUNT_MAX`.
    #[error("record count {count} must be in 1..={RECORD_COUNT_MAX} (YCSB truncates key numbers to 32-bit ints)")]
    RecordCount {
        /// The count given.
        count: u64,
    },
    /// A setting outside the range it must be in.
    #[error("{field} = {value} is invalid: it must be {expected}")]
    InvalidSetting {
        /// The setting's name.
        field: &'static str,
        /// The value given.
        value: String,
        /// The range it must be in.
        expected: &'static str,
    },
    /// No vertex passes the start-vertex filter.
    #[error("none of the {vertex_count} vertices qualifies as a start vertex (e.g. has neighbours): is the graph empty, or was it not loaded?")]
    NoStartVertex {
        /// Vertices looked at.
        vertex_count: u64,
    },
    /// The worker pool could not start, or a worker could not set up a
    /// machine or panicked (the reason names the machine).
    #[error("worker pool of {threads} threads: {source}")]
    Pool {
        /// Worker threads asked for.
        threads: usize,
        /// The pool's error.
        #[source]
        source: FabricError,
    },
    /// An operation of a run failed on a worker (the first failure of the run).
    #[error("{op:?} on machine {machine} (thread {thread}) failed: {source}")]
    Op {
        /// The operation.
        op: Op,
        /// The machine it ran as (the one owning its start vertex).
        machine: MachineId,
        /// The worker thread that ran it.
        thread: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

/// Result alias for the workloads crate.
pub type Result<T> = std::result::Result<T, WorkloadError>;
