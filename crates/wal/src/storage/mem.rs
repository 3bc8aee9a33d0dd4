//! [`MemStorage`]: a simulated disk that knows what was synced.
//!
//! ```text
//!  dirs:   path -> Dir { live: name -> inode,   durable: name -> inode }
//!                         (what readdir shows)   (as of the last sync_dir)
//!  inodes: id   -> Inode { live: bytes,  durable: bytes,  dirty_from }
//!                          (written)     (as of the last sync of the file)
//! ```
//!
//! `live[..dirty_from] == durable[..dirty_from]`: bytes from `dirty_from` on
//! were written (or cut) since the last sync. A sync copies only that part.
//! A file written through an open handle after its name was removed or
//! replaced keeps being written, as an unlinked inode is (POSIX).
//!
//! [`MemStorage::crash`] returns a new storage holding what survives:
//! - [`Crash::ProcessCrash`] (`kill -9`): the page cache survives, so every
//!   live byte and entry; what is durable stays as it was; locks and open
//!   handles are gone;
//! - [`Crash::PowerLoss`]: each directory's durable entries, each file's
//!   durable bytes;
//! - [`Crash::PowerLossTorn`]: as `PowerLoss`, and a file whose unsynced
//!   part only appends to its durable bytes keeps a seeded random prefix of
//!   that tail (the device wrote some of it before the power went: a torn
//!   write). A file cut or overwritten since its last sync keeps its durable
//!   bytes.
//!
//! Simplifications, on the side of keeping data: a directory is durable once
//! created (only the entries inside it are tracked), and an unsynced
//! directory change is lost as a whole on power loss, never kept.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{LockGuard, Storage, StorageFile};

/// What a crash of the machine holding a [`MemStorage`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// The process dies (`kill -9`): everything written survives in the page cache.
    ProcessCrash,
    /// The machine loses power: only what was synced survives.
    PowerLoss,
    /// As `PowerLoss`, and each file keeps a random prefix (drawn from
    /// `seed`) of what was appended to it after its last sync.
    PowerLossTorn {
        /// Decides every prefix.
        seed: u64,
    },
}

/// An in-memory [`Storage`] tracking live against durable bytes (module
/// doc). Clones share one disk; it is safe to use from many threads.
#[derive(Clone, Default)]
pub struct MemStorage {
    disk: Arc<Mutex<Disk>>,
}

#[derive(Clone, Default)]
struct Disk {
    dirs: BTreeMap<PathBuf, Dir>,
    inodes: BTreeMap<u64, Inode>,
    inode_next: u64,
    /// Paths whose lock is held.
    locks: BTreeSet<PathBuf>,
}

#[derive(Clone, Default)]
struct Dir {
    live: BTreeMap<OsString, u64>,
    durable: BTreeMap<OsString, u64>,
}

#[derive(Clone, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Bytes before this are the same in `live` and `durable`.
    dirty_from: usize,
    /// Open handles (an inode with none and no name is freed).
    handles: usize,
}

impl Inode {
    fn set_len(&mut self, len: usize) {
        self.live.resize(len, 0);
        self.dirty_from = self.dirty_from.min(len);
    }

    fn write_at(&mut self, at: usize, bytes: &[u8]) {
        let end = at + bytes.len();
        if self.live.len() < end {
            self.live.resize(end, 0);
        }
        self.live[at..end].copy_from_slice(bytes);
        self.dirty_from = self.dirty_from.min(at);
    }

    fn sync(&mut self) {
        let from = self.dirty_from;
        self.durable.truncate(from);
        self.durable.extend_from_slice(&self.live[from..]);
        self.dirty_from = self.live.len();
        debug_assert_eq!(self.live, self.durable);
    }

    /// A file holding exactly `bytes`, all of them durable.
    fn settled(bytes: Vec<u8>) -> Inode {
        Inode {
            dirty_from: bytes.len(),
            durable: bytes.clone(),
            live: bytes,
            handles: 0,
        }
    }
}

fn not_found(what: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{what} {} does not exist (memory storage)", path.display()),
    )
}

/// `path`'s directory and name.
fn split(path: &Path) -> io::Result<(&Path, &std::ffi::OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) => Ok((d, n)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )),
    }
}

/// SplitMix64: the torn prefixes' random numbers (no dependency, stable
/// across versions, so a seed means the same crash forever).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Disk {
    fn dir(&self, dir: &Path) -> io::Result<&Dir> {
        self.dirs
            .get(dir)
            .ok_or_else(|| not_found("directory", dir))
    }

    fn dir_mut(&mut self, dir: &Path) -> io::Result<&mut Dir> {
        self.dirs
            .get_mut(dir)
            .ok_or_else(|| not_found("directory", dir))
    }

    /// The inode `path` names now.
    fn inode_of(&self, path: &Path) -> io::Result<u64> {
        let (d, name) = split(path)?;
        self.dir(d)?
            .live
            .get(name)
            .copied()
            .ok_or_else(|| not_found("file", path))
    }

    fn inode(&mut self, id: u64) -> &mut Inode {
        self.inodes
            .get_mut(&id)
            .expect("an inode with a name or a handle is never freed")
    }

    /// The inode `path` names, created empty (with a live entry) if missing.
    fn open_or_create(&mut self, path: &Path) -> io::Result<u64> {
        let (d, name) = split(path)?;
        let name = name.to_os_string();
        let next = self.inode_next;
        let dir = self.dir_mut(d)?;
        if let Some(&id) = dir.live.get(&name) {
            return Ok(id);
        }
        dir.live.insert(name, next);
        self.inode_next += 1;
        self.inodes.insert(next, Inode::default());
        Ok(next)
    }

    /// Frees inodes with no name (live or durable) and no open handle.
    fn collect(&mut self) {
        let named: BTreeSet<u64> = self
            .dirs
            .values()
            .flat_map(|d| d.live.values().chain(d.durable.values()))
            .copied()
            .collect();
        self.inodes
            .retain(|id, i| i.handles > 0 || named.contains(id));
    }

    /// What a crash of kind `how` leaves (module doc).
    fn crashed(&self, how: Crash) -> Disk {
        let mut out = match how {
            Crash::ProcessCrash => {
                let mut d = self.clone();
                for i in d.inodes.values_mut() {
                    i.handles = 0;
                }
                d
            }
            Crash::PowerLoss | Crash::PowerLossTorn { .. } => {
                let mut rng = match how {
                    Crash::PowerLossTorn { seed } => Some(seed),
                    _ => None,
                };
                let mut d = Disk {
                    inode_next: self.inode_next,
                    ..Disk::default()
                };
                for (path, dir) in &self.dirs {
                    d.dirs.insert(
                        path.clone(),
                        Dir {
                            live: dir.durable.clone(),
                            durable: dir.durable.clone(),
                        },
                    );
                }
                let named: BTreeSet<u64> = self
                    .dirs
                    .values()
                    .flat_map(|dir| dir.durable.values())
                    .copied()
                    .collect();
                // In id order, so a seed tears the same files the same way.
                for (&id, i) in self.inodes.iter().filter(|(id, _)| named.contains(id)) {
                    let mut bytes = i.durable.clone();
                    let appended_only = i.dirty_from == i.durable.len();
                    if let (Some(state), true) = (rng.as_mut(), appended_only) {
                        let tail = &i.live[i.dirty_from..];
                        if !tail.is_empty() {
                            let keep = (splitmix64(state) % (tail.len() as u64 + 1)) as usize;
                            bytes.extend_from_slice(&tail[..keep]);
                        }
                    }
                    d.inodes.insert(id, Inode::settled(bytes));
                }
                d
            }
        };
        out.locks.clear();
        out.collect();
        out
    }
}

impl MemStorage {
    /// An empty disk.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        // Every operation leaves the disk whole before it can panic.
        self.disk.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new, independent storage holding what a crash of kind `how` would
    /// leave of this one now (module doc). Taken atomically: no operation
    /// of another thread is half in it. This storage is unchanged, so the
    /// process that "crashed" may run on against it, unseen.
    pub fn crash(&self, how: Crash) -> MemStorage {
        let d = self.disk().crashed(how);
        MemStorage {
            disk: Arc::new(Mutex::new(d)),
        }
    }
}

impl fmt::Debug for MemStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.disk();
        let live: usize = d.inodes.values().map(|i| i.live.len()).sum();
        let durable: usize = d.inodes.values().map(|i| i.durable.len()).sum();
        f.debug_struct("MemStorage")
            .field("dirs", &d.dirs.len())
            .field("files", &d.inodes.len())
            .field("live_bytes", &live)
            .field("durable_bytes", &durable)
            .finish()
    }
}

impl Storage for MemStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut d = self.disk();
        for a in dir.ancestors() {
            d.dirs.entry(a.to_path_buf()).or_default();
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let d = self.disk();
        let mut names: Vec<OsString> = d.dir(dir)?.live.keys().cloned().collect();
        names.extend(
            d.dirs
                .keys()
                .filter(|p| p.parent() == Some(dir))
                .filter_map(|p| p.file_name().map(|n| n.to_os_string())),
        );
        Ok(names)
    }

    fn lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        let mut d = self.disk();
        d.open_or_create(path)?;
        if !d.locks.insert(path.to_path_buf()) {
            return Ok(None);
        }
        Ok(Some(LockGuard::new(MemLock {
            disk: Arc::clone(&self.disk),
            path: path.to_path_buf(),
        })))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let mut d = self.disk();
        let id = d.open_or_create(path)?;
        let i = d.inode(id);
        i.set_len(0);
        i.handles += 1;
        Ok(Box::new(MemFile {
            disk: Arc::clone(&self.disk),
            inode: id,
            at: 0,
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut d = self.disk();
        let id = d.inode_of(path)?;
        Ok(d.inode(id).live.clone())
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut d = self.disk();
        let id = d.inode_of(path)?;
        let i = d.inode(id);
        i.set_len(len as usize);
        i.sync();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut d = self.disk();
        let id = d.inode_of(from)?;
        let (to_dir, to_name) = split(to)?;
        d.dir(to_dir)?;
        let (from_dir, from_name) = split(from)?;
        d.dir_mut(from_dir)?.live.remove(from_name);
        d.dir_mut(to_dir)?.live.insert(to_name.to_os_string(), id);
        d.collect();
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut d = self.disk();
        let (dir, name) = split(path)?;
        if d.dir_mut(dir)?.live.remove(name).is_none() {
            return Err(not_found("file", path));
        }
        d.collect();
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut d = self.disk();
        let e = d.dir_mut(dir)?;
        e.durable = e.live.clone();
        d.collect();
        Ok(())
    }
}

/// A held lock of a [`MemStorage`].
struct MemLock {
    disk: Arc<Mutex<Disk>>,
    path: PathBuf,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut d = self.disk.lock().unwrap_or_else(|p| p.into_inner());
        d.locks.remove(&self.path);
    }
}

/// An open file of a [`MemStorage`].
struct MemFile {
    disk: Arc<Mutex<Disk>>,
    inode: u64,
    /// Where the next write goes.
    at: usize,
}

impl MemFile {
    fn disk(&self) -> MutexGuard<'_, Disk> {
        self.disk.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl io::Write for MemFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let at = self.at;
        self.disk().inode(self.inode).write_at(at, buf);
        self.at += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl StorageFile for MemFile {
    fn sync_data(&mut self) -> io::Result<()> {
        self.disk().inode(self.inode).sync();
        Ok(())
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.sync_data()
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        let id = self.inode;
        let mut d = self.disk();
        d.inode(id).handles -= 1;
        d.collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn disk() -> (MemStorage, PathBuf) {
        let s = MemStorage::new();
        let dir = PathBuf::from("/d");
        s.create_dir_all(&dir).unwrap();
        (s, dir)
    }

    fn read(s: &MemStorage, p: &Path) -> Option<Vec<u8>> {
        match s.read(p) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_process_crash_keeps_what_was_written_a_power_loss_what_was_synced() {
        let (s, dir) = disk();
        let p = dir.join("f");
        let mut f = s.create(&p).unwrap();
        f.write_all(b"synced").unwrap();
        f.sync_data().unwrap();
        s.sync_dir(&dir).unwrap();
        f.write_all(b" written").unwrap();
        assert_eq!(
            read(&s.crash(Crash::ProcessCrash), &p).unwrap(),
            b"synced written"
        );
        assert_eq!(read(&s.crash(Crash::PowerLoss), &p).unwrap(), b"synced");
        // A process crash does not make anything durable.
        let after = s.crash(Crash::ProcessCrash).crash(Crash::PowerLoss);
        assert_eq!(read(&after, &p).unwrap(), b"synced");
        // The original goes on.
        f.write_all(b"!").unwrap();
        assert_eq!(read(&s, &p).unwrap(), b"synced written!");
    }

    #[test]
    fn a_file_whose_entry_was_never_synced_is_lost_with_its_synced_bytes() {
        let (s, dir) = disk();
        let p = dir.join("f");
        let mut f = s.create(&p).unwrap();
        f.write_all(b"x").unwrap();
        f.sync_data().unwrap();
        assert_eq!(read(&s.crash(Crash::PowerLoss), &p), None);
        assert_eq!(read(&s.crash(Crash::ProcessCrash), &p).unwrap(), b"x");
        s.sync_dir(&dir).unwrap();
        assert_eq!(read(&s.crash(Crash::PowerLoss), &p).unwrap(), b"x");
    }

    #[test]
    fn renames_and_removals_last_only_after_the_directory_sync() {
        let (s, dir) = disk();
        let (old, tmp, gone) = (dir.join("ck"), dir.join("ck.tmp"), dir.join("seg"));
        for (p, b) in [(&old, &b"old"[..]), (&gone, b"seg")] {
            let mut f = s.create(p).unwrap();
            f.write_all(b).unwrap();
            f.sync_all().unwrap();
        }
        s.sync_dir(&dir).unwrap();
        let mut f = s.create(&tmp).unwrap();
        f.write_all(b"new").unwrap();
        f.sync_all().unwrap();
        s.rename(&tmp, &old).unwrap();
        s.remove(&gone).unwrap();
        let c = s.crash(Crash::PowerLoss);
        assert_eq!(read(&c, &old).unwrap(), b"old");
        assert_eq!(read(&c, &gone).unwrap(), b"seg");
        assert_eq!(read(&c, &tmp), None);
        s.sync_dir(&dir).unwrap();
        let c = s.crash(Crash::PowerLoss);
        assert_eq!(read(&c, &old).unwrap(), b"new");
        assert_eq!(read(&c, &gone), None);
        let mut names = c.list_dir(&dir).unwrap();
        names.sort();
        assert_eq!(names, vec![OsString::from("ck")]);
    }

    #[test]
    fn a_torn_crash_keeps_a_seeded_prefix_of_the_unsynced_tail() {
        let (s, dir) = disk();
        let p = dir.join("f");
        let mut f = s.create(&p).unwrap();
        f.write_all(b"head").unwrap();
        f.sync_data().unwrap();
        s.sync_dir(&dir).unwrap();
        f.write_all(b"0123456789").unwrap();
        let mut lens = BTreeSet::new();
        for seed in 0..200 {
            let a = read(&s.crash(Crash::PowerLossTorn { seed }), &p).unwrap();
            let b = read(&s.crash(Crash::PowerLossTorn { seed }), &p).unwrap();
            assert_eq!(a, b, "seed {seed}: the same seed tears the same way");
            assert_eq!(&a[..], &b"head0123456789"[..a.len()]);
            assert!(a.len() >= 4);
            lens.insert(a.len());
        }
        assert_eq!(
            lens.len(),
            11,
            "every prefix length, 0 to 10 bytes: {lens:?}"
        );
    }

    #[test]
    fn a_torn_crash_keeps_only_durable_bytes_of_a_file_cut_since_its_sync() {
        let (s, dir) = disk();
        let p = dir.join("f");
        let mut f = s.create(&p).unwrap();
        f.write_all(b"abcdef").unwrap();
        f.sync_data().unwrap();
        s.sync_dir(&dir).unwrap();
        drop(f);
        let mut f = s.create(&p).unwrap(); // truncates
        f.write_all(b"xyz").unwrap();
        for seed in 0..20 {
            let c = s.crash(Crash::PowerLossTorn { seed });
            assert_eq!(read(&c, &p).unwrap(), b"abcdef");
        }
        s.truncate(&p, 2).unwrap();
        assert_eq!(read(&s.crash(Crash::PowerLoss), &p).unwrap(), b"xy");
    }

    #[test]
    fn an_unlinked_file_is_written_on_and_freed_with_its_last_handle() {
        let (s, dir) = disk();
        let p = dir.join("f");
        let mut f = s.create(&p).unwrap();
        s.remove(&p).unwrap();
        f.write_all(b"into the void").unwrap();
        f.sync_data().unwrap();
        assert_eq!(read(&s, &p), None);
        assert_eq!(s.disk().inodes.len(), 1);
        drop(f);
        assert_eq!(s.disk().inodes.len(), 0);
    }

    #[test]
    fn a_lock_is_exclusive_until_dropped_and_a_crash_releases_it() {
        let (s, dir) = disk();
        let p = dir.join("LOCK");
        let g = s.lock(&p).unwrap().expect("free");
        assert!(s.clone().lock(&p).unwrap().is_none());
        assert!(s.crash(Crash::ProcessCrash).lock(&p).unwrap().is_some());
        drop(g);
        assert!(s.lock(&p).unwrap().is_some());
    }
}
