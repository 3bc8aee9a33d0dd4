//! A write-ahead log with group commit, and checkpoints, for one server.
//!
//! What it knows: opaque records (byte strings) framed with a length and a
//! CRC-32C (`frame.rs`, diagram there). What it does not know: what a
//! record means; the server encodes vertices into records and replays them
//! (`locus-server`'s `durable.rs`).
//!
//! On disk, one directory per server:
//!
//! ```text
//!  DIR/LOCK                       flock(2)ed by the one process using DIR
//!  DIR/00000000000000000007.wal   log segments, numbered; each starts with a
//!  DIR/00000000000000000008.wal   header frame (magic, version, number, identity)
//!  DIR/checkpoint                 the last checkpoint: header frame (magic,
//!                                 version, first segment to replay, identity),
//!                                 entry frames, end frame (entry count)
//! ```
//!
//! **Group commit.** [`Wal::append`] frames a record into the pending group
//! and returns its sequence number (LSN) at once; [`Wal::wait`] blocks until
//! the record is durable. One flusher thread takes the whole pending group,
//! writes it with one `write`, and with `SyncMode::Always` calls `fdatasync`
//! once for the group before waking every waiter of it. With
//! `SyncMode::Interval` the group is written at once (so a process that dies
//! loses nothing written) and `fdatasync` runs at most every interval (a
//! machine that loses power loses at most that long of acknowledged
//! records). A failed write or sync poisons the log: every waiter and every
//! later append gets the error (a failed fsync is not retried: the kernel may
//! have dropped the dirty pages).
//!
//! **Flushing in the caller.** [`Wal::open_with`] and [`Flusher::Caller`]
//! start no thread: `append` only frames the record, and [`Wal::wait`] (if
//! its record is not durable yet), [`Wal::flush`], [`Wal::flush_and_sync`]
//! and [`Wal::rotate`] take the whole pending group and write it, with one
//! write and under `Always` one `fdatasync`, in the calling thread. It is
//! for the seeded simulation of a cluster (issue 58), whose scheduler runs
//! one actor at a time: a crash at a seeded step must find durable what
//! the seed's steps made durable, not what a thread happened to finish, or
//! a log that acknowledges before its sync would go unseen. The cost: the
//! caller pays the write and the sync inside `wait`, and shares a group
//! only with records appended before it flushed; under `Interval` nothing
//! syncs on a clock, only `flush_and_sync`, a rotation and the close.
//! Callers flushing at once serialise on the open segment's lock, held
//! only across the storage's calls, never across a wait for a thread. The
//! format is the same in both modes: one thread's calls write the same
//! bytes either way.
//!
//! **Checkpoints.** [`Wal::rotate`] starts a new segment after every record
//! appended before the call; the caller then writes a snapshot with a
//! [`CheckpointWriter`] (temporary file, fsync, rename, fsync of the
//! directory) naming that segment as the first to replay, and
//! [`Wal::remove_segments_before`] deletes the older ones.
//!
//! **Storage.** Every file operation goes through the [`Storage`] trait
//! (`storage/`): [`FileStorage`] is `std::fs` (the files above, byte for
//! byte); [`MemStorage`] is a simulated disk that keeps written and synced
//! bytes apart and can [`crash`](MemStorage::crash) (process crash, power
//! loss, power loss with a torn last write), so the tests in `tests/` check
//! W1 against what a power loss keeps, not what the page cache keeps.
//! [`WalConfig::storage`] is an `Arc<dyn Storage>`, not a type parameter:
//! `Wal`, `WalConfig` and [`CheckpointWriter`] stay one type, so their users
//! (`locus-server`'s `Durability`, a node in a simulation) pick the storage
//! at run time without a generic threaded through them, and a decorator
//! (the tests' crash gate) wraps any storage. The cost is one indirect call
//! per file operation: a few per group, against a `write` and an
//! `fdatasync` system call each.
//!
//! **Recovery** ([`Wal::open`]): the checkpoint's entries, then the records
//! of every segment from its first one, in order. A torn final frame of the
//! last segment is truncated (logged); anything else that does not parse is
//! [`WalError::Corrupt`] naming the file and byte offset. A last segment
//! with no header (a crash between its creation and its header's sync) holds
//! no record and is rewritten as the new segment. The newest segment is
//! synced before the new one starts: a killed process's written, unsynced
//! records were just replayed, and an older segment must end synced (W3).
//!
//! Invariants:
//! - W1: `wait(lsn)` returns Ok only once every record with a smaller or
//!   equal LSN is written (`Interval`) or written and synced (`Always`).
//! - W2: records reach the file in LSN order; segments in number order.
//! - W3: a segment other than the newest ends with a sync (rotation syncs
//!   before creating the next), so only the newest can end torn.
//! - W4: every record appended before `rotate` returned segment `s` lives in
//!   a segment below `s`; the checkpoint that names `s` is durable before
//!   any segment below `s` is removed.

#![warn(missing_docs)]

pub mod checkpoint;
pub mod crc32c;
pub mod frame;
mod log;
pub mod storage;

pub use checkpoint::CheckpointWriter;
pub use log::{Entry, Flusher, Lsn, Recovery, SyncMode, Wal, WalConfig, WalStats};
pub use storage::{Crash, FileStorage, LockGuard, MemStorage, Storage, StorageFile};

use std::path::PathBuf;

/// What the log can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// An I/O failure, with what was being done and on which file.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// Durable data does not parse: recovery stops here.
    #[error("{} is corrupt at byte offset {offset}: {why}; the server refuses to start rather than lose acknowledged updates silently: restore the directory from a copy, or move this file away to accept losing what it holds", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where the bad frame starts.
        offset: u64,
        /// What was found.
        why: String,
    },
    /// The directory belongs to another server or cluster shape.
    #[error("{} was written by {found}, not {expected}; point durability.dir at this server's own directory", path.display())]
    Identity {
        /// The file.
        path: PathBuf,
        /// Who wrote it.
        found: String,
        /// Who reads it.
        expected: String,
    },
    /// Another process holds the directory.
    #[error("{} is locked by another process (a second server with the same id and durability.dir?)", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A record larger than a frame may carry.
    #[error("a record of {bytes} bytes is past the log's limit of {max} bytes")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The flusher failed earlier; nothing more can be made durable.
    #[error("the write-ahead log failed earlier and accepts nothing more: {0}")]
    Failed(String),
}

/// The crate's result.
pub type Result<T, E = WalError> = std::result::Result<T, E>;

/// Syncs a directory (so a rename or a new file in it is durable).
pub(crate) fn sync_dir(storage: &dyn Storage, dir: &std::path::Path) -> Result<()> {
    storage.sync_dir(dir).map_err(|source| WalError::Io {
        what: "cannot sync the directory",
        path: dir.to_path_buf(),
        source,
    })
}
