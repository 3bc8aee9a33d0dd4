//! The coordinator crate's error type.
//!
//! Settings that cannot work are refused before anything starts
//! ([`CoordinatorError::InvalidSetting`], [`CoordinatorError::SettingBelow`],
//! naming the field); the durable record's failures carry the file; the
//! driver's background failures say which thread, machine or key, and keep
//! the store's error as their source. [`crate::Driver::error`] hands the
//! first background failure back as this type.

use std::path::PathBuf;

use locus_fabric::MachineId;
use locus_store::{Key, StoreError};

/// What the coordinator, its record or its driver can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinatorError {
    /// A setting outside the range it must be in.
    #[error("{field} = {value} is invalid: it must be {expected}")]
    InvalidSetting {
        /// The setting's name, as in the config struct.
        field: &'static str,
        /// The value given.
        value: String,
        /// The range it must be in, and why if it is not obvious.
        expected: &'static str,
    },
    /// A duration shorter than another one it must not be below.
    #[error("{field} = {value} is shorter than {min_field} = {min_value}: {why}")]
    SettingBelow {
        /// The setting that is too small.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The setting it must be at least.
        min_field: &'static str,
        /// That setting's value.
        min_value: u64,
        /// Why, and what to change.
        why: &'static str,
    },
    /// The record file could not be opened, or is not a record.
    #[error("coordinator record {path}: {source}; delete it to start with an empty record, or use another record_path")]
    RecordOpen {
        /// The file.
        path: PathBuf,
        /// What redb said (boxed: redb's errors are large, and this enum
        /// is every function's `Err`).
        #[source]
        source: Box<redb::DatabaseError>,
    },
    /// A read or write of the record failed.
    #[error("coordinator record {path}: {action}: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// What was being done ("persisting approvals", "loading").
        action: &'static str,
        /// What redb said (boxed, as above).
        #[source]
        source: Box<redb::Error>,
    },
    /// The temporary directory for a record without `record_path` could not be made.
    #[error("cannot create a temporary directory for the coordinator record: {source}; set record_path, or make the temporary directory ($TMPDIR) writable")]
    TempRecord {
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A driver thread could not be started.
    #[error("cannot start thread {thread}: {source}")]
    Spawn {
        /// The thread's name.
        thread: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A driver thread could not lower its scheduling priority
    /// ([`crate::DriverConfig::background_nice`]); it runs on at the priority it has.
    #[error("thread {thread} could not raise its niceness by {by}: {source}; set background_nice = 0 to leave the driver's threads at the process's priority")]
    Nice {
        /// The thread's name.
        thread: String,
        /// The niceness it tried to add.
        by: i32,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A driver thread panicked (a bug: report it with the message).
    #[error("thread {thread} panicked: {reason}")]
    ThreadPanicked {
        /// The thread's name.
        thread: String,
        /// The panic message.
        reason: String,
    },
    /// An executor could not act as a machine (make a store worker for it).
    #[error("{role} for machine {machine}: {source}")]
    Worker {
        /// "migration executor" or "replica executor".
        role: &'static str,
        /// The machine it would act as.
        machine: MachineId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A pipelined migration batch failed; its keys stay where they were.
    #[error("migrating {keys} keys (first {first:?}) to machine {machine}: {source}")]
    Migrate {
        /// Keys in the batch.
        keys: usize,
        /// The batch's first key.
        first: Key,
        /// The target.
        machine: MachineId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A replica could not be made.
    #[error("replicating {key:?} to machine {machine}: {source}")]
    Replicate {
        /// The key.
        key: Key,
        /// The reader that was to get the replica.
        machine: MachineId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// On-demand tracking (deferred mode) could not be started on a holder.
    #[error("tracking {keys} keys on machine {machine}: {source}")]
    Track {
        /// Keys it was asked to track.
        keys: usize,
        /// The holder.
        machine: MachineId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

/// Result alias for the coordinator crate.
pub type Result<T> = std::result::Result<T, CoordinatorError>;

impl CoordinatorError {
    /// An [`CoordinatorError::InvalidSetting`] for `field = value`.
    pub(crate) fn invalid(
        field: &'static str,
        value: impl std::fmt::Display,
        expected: &'static str,
    ) -> Self {
        CoordinatorError::InvalidSetting {
            field,
            value: value.to_string(),
            expected,
        }
    }
}
