//! The crash tests' [`Gate`]: a [`Storage`] decorator that stops the disk
//! at a seeded mutating operation (the parent module's doc tells the round).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use locus_wal::{LockGuard, MemStorage, Storage, StorageFile};

use super::{Acks, ROUND_LIMIT};

/// A [`Storage`] decorator that stops the disk at a chosen mutating
/// operation (module doc) and notes what the syncs of segments covered.
#[derive(Debug)]
pub(super) struct Gate {
    inner: MemStorage,
    ctl: Arc<GateCtl>,
}

#[derive(Debug)]
struct GateCtl {
    st: Mutex<GateState>,
    cv: Condvar,
    acks: Arc<Acks>,
}

#[derive(Debug, Default)]
struct GateState {
    /// Mutating operations begun.
    ops: u64,
    /// This operation and every later one block.
    stop_at: u64,
    /// What the blocked operation was.
    stopped: Option<String>,
    /// The process is gone: every operation fails.
    dead: bool,
    /// The session ended by itself.
    session_done: bool,
    /// Acknowledgements counted when the last completed segment sync began.
    acks_synced: usize,
}

fn gone() -> io::Error {
    io::Error::other("the machine crashed")
}

impl Gate {
    pub(super) fn new(inner: MemStorage, stop_at: u64, acks: Arc<Acks>) -> Gate {
        Gate {
            inner,
            ctl: Arc::new(GateCtl {
                st: Mutex::new(GateState {
                    stop_at,
                    ..GateState::default()
                }),
                cv: Condvar::new(),
                acks,
            }),
        }
    }
}

impl GateCtl {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before a mutating operation: counts it, blocks at the stop point.
    fn enter(&self, what: impl FnOnce() -> String) -> io::Result<()> {
        let mut st = self.lock();
        if st.dead {
            return Err(gone());
        }
        st.ops += 1;
        if st.ops >= st.stop_at {
            if st.stopped.is_none() {
                st.stopped = Some(what());
                self.cv.notify_all();
            }
            while !st.dead {
                st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            return Err(gone());
        }
        Ok(())
    }

    /// Before a read: fails once the process is gone.
    fn read(&self) -> io::Result<()> {
        if self.lock().dead {
            return Err(gone());
        }
        Ok(())
    }
}

fn is_segment(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "wal")
}

impl Storage for Gate {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.ctl
            .enter(|| format!("create_dir_all {}", dir.display()))?;
        self.inner.create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        self.ctl.read()?;
        self.inner.list_dir(dir)
    }

    fn lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        self.ctl.enter(|| format!("lock {}", path.display()))?;
        self.inner.lock(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        self.ctl.enter(|| format!("create {}", path.display()))?;
        Ok(Box::new(GateFile {
            inner: self.inner.create(path)?,
            ctl: Arc::clone(&self.ctl),
            path: path.to_path_buf(),
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.ctl.read()?;
        self.inner.read(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.ctl
            .enter(|| format!("truncate {} to {len}", path.display()))?;
        self.inner.truncate(path, len)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.ctl
            .enter(|| format!("rename {} to {}", from.display(), to.display()))?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.ctl.enter(|| format!("remove {}", path.display()))?;
        self.inner.remove(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.ctl.enter(|| format!("sync_dir {}", dir.display()))?;
        self.inner.sync_dir(dir)
    }
}

/// A file of a [`Gate`].
struct GateFile {
    inner: Box<dyn StorageFile>,
    ctl: Arc<GateCtl>,
    path: PathBuf,
}

impl GateFile {
    fn sync(
        &mut self,
        how: &str,
        f: impl FnOnce(&mut dyn StorageFile) -> io::Result<()>,
    ) -> io::Result<()> {
        // Every acknowledgement so far was of a record written before this
        // sync began, so this sync covers it (older segments were synced
        // before the next one began, W3).
        let acks = self.ctl.acks.len();
        self.ctl
            .enter(|| format!("{how} {}", self.path.display()))?;
        f(&mut *self.inner)?;
        if is_segment(&self.path) {
            let mut st = self.ctl.lock();
            st.acks_synced = st.acks_synced.max(acks);
        }
        Ok(())
    }
}

impl io::Write for GateFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.ctl
            .enter(|| format!("write of {} bytes to {}", buf.len(), self.path.display()))?;
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl StorageFile for GateFile {
    fn sync_data(&mut self) -> io::Result<()> {
        self.sync("sync_data", |f| f.sync_data())
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.sync("sync_all", |f| f.sync_all())
    }
}

impl Gate {
    /// Waits until the disk stopped (returns what it stopped at) or the
    /// session ended by itself (`None`).
    pub(super) fn wait_stopped_or_done(&self) -> Result<Option<String>, String> {
        let t0 = Instant::now();
        let mut st = self.ctl.lock();
        loop {
            if let Some(s) = &st.stopped {
                return Ok(Some(s.clone()));
            }
            if st.session_done {
                return Ok(None);
            }
            let left = ROUND_LIMIT.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Err(format!(
                    "hung: neither stopped nor done after {ROUND_LIMIT:?} and {} operations",
                    st.ops
                ));
            }
            st = self
                .ctl
                .cv
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub(super) fn session_done(&self) {
        self.ctl.lock().session_done = true;
        self.ctl.cv.notify_all();
    }

    /// The process is gone: blocked and later operations fail.
    pub(super) fn kill(&self) {
        self.ctl.lock().dead = true;
        self.ctl.cv.notify_all();
    }

    pub(super) fn is_dead(&self) -> bool {
        self.ctl.lock().dead
    }

    pub(super) fn ops(&self) -> u64 {
        self.ctl.lock().ops
    }

    pub(super) fn acks_synced(&self) -> usize {
        self.ctl.lock().acks_synced
    }
}
