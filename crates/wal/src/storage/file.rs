//! [`FileStorage`]: the operations of [`Storage`] on the real file system.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use super::{LockGuard, Storage, StorageFile};

/// `std::fs` and `flock(2)`: the files the crate doc draws.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStorage;

impl Storage for FileStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        // An entry that cannot be read is skipped, as a name that is not a
        // segment's is: the caller looks only for names it wrote.
        Ok(std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.file_name())
            .collect())
    }

    fn lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: flock(2) on a descriptor this function owns; released
            // when the file closes, including when the process dies.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if r != 0 {
                return Ok(None);
            }
        }
        Ok(Some(LockGuard::new(f)))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)?;
        Ok(Box::new(f))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

impl StorageFile for File {
    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn sync_all(&mut self) -> io::Result<()> {
        File::sync_all(self)
    }
}
