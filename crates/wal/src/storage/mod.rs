//! The file-system operations of the log, behind one trait.
//!
//! Every byte the log and its checkpoints keep goes through [`Storage`]: the
//! operations below are exactly those the crate performs, nothing more.
//! Two siblings implement it:
//! - [`FileStorage`]: `std::fs` and `flock(2)`, the files of the crate doc;
//! - [`MemStorage`]: in memory, keeping apart what was written (*live*) and
//!   what the last sync covered (*durable*), so that
//!   [`MemStorage::crash`] can keep what a process crash or a power loss
//!   would keep (as redb's crash tests track live against durable bytes).
//!
//! ```text
//!  Storage (paths)                       StorageFile (an open handle)
//!   create_dir_all  mkdir -p              write / write_all   write(2)
//!   list_dir        readdir               sync_data           fdatasync(2)
//!   lock            open(O_CREAT) + flock sync_all            fsync(2)
//!   create          open(O_CREAT|O_TRUNC)
//!   read            the whole file
//!   truncate        ftruncate + fsync
//!   rename          rename(2)
//!   remove          unlink(2)
//!   sync_dir        fsync of the directory (entries created, renamed, removed)
//! ```
//!
//! What is durable when (the contract `MemStorage` models and `FileStorage`
//! relies on the kernel for): a file's bytes once a `sync_data`/`sync_all`
//! of a handle to it returned (or `truncate` returned); a directory's
//! entries (a file created, renamed or removed) once `sync_dir` of that
//! directory returned. Nothing else.

mod file;
mod mem;

pub use file::FileStorage;
pub use mem::{Crash, MemStorage};

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::Path;

/// The file-system operations of the log (see the module doc for what each
/// maps to and when its effect is durable).
pub trait Storage: Send + Sync + fmt::Debug {
    /// Creates `dir` and its missing parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The names of the entries of `dir`, in no particular order.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>>;
    /// Opens `path` (created empty if missing, never truncated) and takes its
    /// exclusive lock without blocking: `None` if another holder has it. The
    /// lock lasts as long as the guard, or the process.
    fn lock(&self, path: &Path) -> io::Result<Option<LockGuard>>;
    /// Creates `path`, or truncates it to nothing, for writing from byte 0.
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// The whole of `path` (`ErrorKind::NotFound` if it does not exist).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Cuts `path` to `len` bytes and makes the cut durable.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the file `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes `dir`'s entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// A file open for writing, from [`Storage::create`]. Writes go on from the
/// end of the last one.
pub trait StorageFile: io::Write + Send {
    /// Makes the bytes written so far durable (`fdatasync`).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Makes the bytes written so far and the file's metadata durable (`fsync`).
    fn sync_all(&mut self) -> io::Result<()>;
}

/// An exclusive lock from [`Storage::lock`], released when dropped.
pub struct LockGuard {
    _held: Box<dyn Send + Sync>,
}

impl LockGuard {
    /// A guard holding `held` (whatever releases the lock when dropped).
    pub fn new(held: impl Send + Sync + 'static) -> LockGuard {
        LockGuard {
            _held: Box::new(held),
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockGuard")
    }
}
