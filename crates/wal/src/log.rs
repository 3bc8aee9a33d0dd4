//! [`Wal`]: segments, group commit, rotation, and recovery; writing a group
//! is `log/flush.rs`.
//! The protocol and its invariants (W1-W4) are in the crate doc.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::checkpoint::{self, CheckpointWriter};
use crate::frame::{self, End};
use crate::storage::{LockGuard, Storage, StorageFile};
use crate::{sync_dir, Result, WalError};

mod flush;

use flush::Writer;

/// A record's sequence number: 1 for the first record this process appends.
pub type Lsn = u64;

const SEGMENT_MAGIC: &[u8; 8] = b"LOCUSWAL";
const SEGMENT_VERSION: u32 = 1;
const LOCK_FILE: &str = "LOCK";

/// When the flusher calls `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// After every group, before any of its records is acknowledged.
    Always,
    /// At most every `interval_ms`; records are acknowledged once written.
    Interval {
        /// Longest time between a write and its sync.
        interval_ms: u64,
    },
}

/// Who writes and syncs the pending group (crate doc, "Flushing in the
/// caller"). Chosen at [`Wal::open_with`]; [`Wal::open`] is `Thread`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flusher {
    /// The log's own flusher thread: `append` wakes it, `wait` sleeps
    /// until it has made the record durable (servers).
    #[default]
    Thread,
    /// No thread: [`Wal::wait`], [`Wal::flush`], [`Wal::flush_and_sync`]
    /// and [`Wal::rotate`] write (and sync) the pending group in the
    /// calling thread, so when bytes reach the storage is a function of
    /// the calls alone (a simulation's actors). With `SyncMode::Interval`
    /// the interval is not used: a sync happens only at
    /// [`Wal::flush_and_sync`], at a rotation (asked for or by size) and
    /// when the log is dropped (so crash the storage before dropping the
    /// log). Threads flushing at once take turns on a lock held across
    /// the storage's calls only: actors of a simulation sharing one log
    /// need a storage whose calls never yield to another actor, as
    /// `MemStorage`'s do not.
    Caller,
}

/// How to open a log.
#[derive(Debug, Clone)]
pub struct WalConfig {
    /// Where the files live: [`FileStorage`](crate::FileStorage) for a
    /// server, [`MemStorage`](crate::MemStorage) for a simulated disk.
    pub storage: Arc<dyn Storage>,
    /// The directory (created if missing).
    pub dir: PathBuf,
    /// When to sync.
    pub sync: SyncMode,
    /// Who writes here ("server 2 of 3"): checked on every file read back.
    pub identity: String,
    /// A segment past this many bytes is closed and a new one started.
    pub segment_bytes_max: u64,
}

/// What recovery hands to its callback.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'a> {
    /// An entry of the checkpoint.
    Checkpoint(&'a [u8]),
    /// A log record, after every checkpoint entry.
    Record(&'a [u8]),
}

/// What [`Wal::open`] found.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// Entries of the checkpoint (0: none).
    pub checkpoint_entries: u64,
    /// Log records replayed.
    pub records: u64,
    /// Segments read.
    pub segments: u64,
    /// A torn tail that was cut: file, offset, what was there.
    pub truncated: Option<(PathBuf, u64, String)>,
    /// The segment new records go to.
    pub segment: u64,
}

/// Counters of a running log.
#[derive(Debug, Default)]
pub struct WalStats {
    /// Records appended.
    pub records: AtomicU64,
    /// Groups written (one write each).
    pub groups: AtomicU64,
    /// fdatasync calls.
    pub syncs: AtomicU64,
    /// Bytes written to segments.
    pub bytes: AtomicU64,
}

struct State {
    pending: Vec<u8>,
    next: Lsn,
    /// Highest LSN written to the file.
    written: Lsn,
    /// Highest LSN written and synced.
    synced: Lsn,
    want_rotate: bool,
    /// `flush_and_sync` asks the flusher thread for a sync.
    want_sync: bool,
    rotations: u64,
    segment: u64,
    failed: Option<String>,
    stop: bool,
}

struct Inner {
    st: Mutex<State>,
    /// The flusher waits here for work.
    work: Condvar,
    /// Waiters of `wait` and `rotate` wait here.
    done: Condvar,
    cfg: WalConfig,
    stats: WalStats,
    flusher: Flusher,
    /// The open segment, with `Flusher::Caller` (the flusher thread owns
    /// it otherwise). Locked before `st`, never the other way; held only
    /// across the storage's write, sync and segment creation, which wait
    /// for no other thread, so a second flushing caller waits at most
    /// that long and then finds its record durable.
    writer: Mutex<Option<Writer>>,
}

/// A running write-ahead log (see the crate doc).
pub struct Wal {
    inner: Arc<Inner>,
    /// The flusher thread (`Flusher::Thread`).
    thread: Option<JoinHandle<()>>,
    rotating: Mutex<()>,
    _lock: LockGuard,
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:020}.wal"))
}

/// The numbered segments of `dir`, in order.
fn segments(storage: &dyn Storage, dir: &Path) -> Result<Vec<u64>> {
    let names = storage.list_dir(dir).map_err(|source| WalError::Io {
        what: "cannot list",
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for name in names {
        let name = name.to_string_lossy();
        if let Some(n) = name
            .strip_suffix(".wal")
            .and_then(|s| s.parse::<u64>().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn lock_dir(storage: &dyn Storage, dir: &Path) -> Result<LockGuard> {
    let path = dir.join(LOCK_FILE);
    match storage.lock(&path) {
        Ok(Some(g)) => Ok(g),
        Ok(None) => Err(WalError::Locked { path }),
        Err(source) => Err(WalError::Io {
            what: "cannot open the lock file",
            path,
            source,
        }),
    }
}

/// Creates segment `n` with its header frame, synced, and syncs the directory.
fn create_segment(
    storage: &dyn Storage,
    dir: &Path,
    n: u64,
    identity: &str,
) -> Result<Box<dyn StorageFile>> {
    let path = segment_path(dir, n);
    let io = |what, source| WalError::Io {
        what,
        path: path.clone(),
        source,
    };
    let mut f = storage
        .create(&path)
        .map_err(|e| io("cannot create the log segment", e))?;
    let mut h = Vec::new();
    h.extend_from_slice(SEGMENT_MAGIC);
    h.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h.extend_from_slice(&n.to_le_bytes());
    h.extend_from_slice(identity.as_bytes());
    let mut buf = Vec::new();
    frame::encode(&h, &mut buf);
    f.write_all(&buf)
        .and_then(|()| f.sync_data())
        .map_err(|e| io("cannot write the log segment header", e))?;
    sync_dir(storage, dir)?;
    Ok(f)
}

impl Wal {
    /// Locks `cfg.dir`, replays the checkpoint and the log through `replay`
    /// (checkpoint entries first, then records in order), cuts a torn tail,
    /// and starts a new segment and the flusher thread. `replay` returning
    /// an error makes the record corrupt (its file and offset are named).
    pub fn open(
        cfg: WalConfig,
        replay: impl FnMut(Entry<'_>) -> std::result::Result<(), String>,
    ) -> Result<(Wal, Recovery)> {
        Wal::open_with(cfg, Flusher::Thread, replay)
    }

    /// As [`open`](Self::open), with the given [`Flusher`]: with
    /// `Flusher::Caller` no thread is started.
    pub fn open_with(
        cfg: WalConfig,
        flusher: Flusher,
        mut replay: impl FnMut(Entry<'_>) -> std::result::Result<(), String>,
    ) -> Result<(Wal, Recovery)> {
        let dir = cfg.dir.clone();
        let storage = &*cfg.storage;
        storage
            .create_dir_all(&dir)
            .map_err(|source| WalError::Io {
                what: "cannot create",
                path: dir.clone(),
                source,
            })?;
        let lock = lock_dir(storage, &dir)?;
        let mut rec = Recovery::default();
        let first = match checkpoint::read(storage, &dir, &cfg.identity, |_, e| {
            replay(Entry::Checkpoint(e))
        })? {
            Some((first, n)) => {
                rec.checkpoint_entries = n;
                first
            }
            None => 0,
        };
        let all = segments(storage, &dir)?;
        // Segments below the checkpoint's first one were covered by it (a
        // crash between its rename and their removal leaves them).
        for &n in all.iter().filter(|&&n| n < first) {
            let p = segment_path(&dir, n);
            storage.remove(&p).map_err(|source| WalError::Io {
                what: "cannot remove the old log segment",
                path: p,
                source,
            })?;
        }
        let live: Vec<u64> = all.into_iter().filter(|&n| n >= first).collect();
        let mut headed = true;
        for (i, &n) in live.iter().enumerate() {
            let last = i + 1 == live.len();
            let (records, h) =
                replay_segment(storage, &dir, n, last, &cfg.identity, &mut rec, &mut replay)?;
            rec.records += records;
            rec.segments += 1;
            headed = h;
        }
        // A newest segment without a header (a crash between its creation
        // and its header's sync) holds no record: it is rewritten as the new
        // segment rather than left as an older segment without a header,
        // which the next start would have to refuse.
        let segment = match live.last() {
            None => first.max(1),
            Some(&n) if !headed => n,
            Some(&n) => n + 1,
        };
        let file = create_segment(storage, &dir, segment, &cfg.identity)?;
        rec.segment = segment;
        let inner = Arc::new(Inner {
            st: Mutex::new(State {
                pending: Vec::new(),
                next: 1,
                written: 0,
                synced: 0,
                want_rotate: false,
                want_sync: false,
                rotations: 0,
                segment,
                failed: None,
                stop: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            cfg,
            stats: WalStats::default(),
            flusher,
            writer: Mutex::new(None),
        });
        let writer = Writer::new(file, segment);
        let thread = match flusher {
            Flusher::Caller => {
                *inner.writer.lock().unwrap_or_else(|p| p.into_inner()) = Some(writer);
                None
            }
            Flusher::Thread => {
                let i2 = Arc::clone(&inner);
                let t = std::thread::Builder::new()
                    .name("locus-wal-flush".into())
                    .spawn(move || flush::thread(&i2, writer))
                    .map_err(|source| WalError::Io {
                        what: "cannot start the flusher thread for",
                        path: dir.clone(),
                        source,
                    })?;
                Some(t)
            }
        };
        Ok((
            Wal {
                inner,
                thread,
                rotating: Mutex::new(()),
                _lock: lock,
            },
            rec,
        ))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock is a bug in this file; the state
        // is a few counters and a buffer, still coherent: carry on.
        self.inner.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Frames `record` into the pending group; returns its LSN. Durable
    /// only once [`wait`](Self::wait) for it returns.
    pub fn append(&self, record: &[u8]) -> Result<Lsn> {
        if record.len() > frame::RECORD_BYTES_MAX {
            return Err(WalError::TooLarge {
                bytes: record.len(),
                max: frame::RECORD_BYTES_MAX,
            });
        }
        let mut st = self.state();
        if let Some(f) = &st.failed {
            return Err(WalError::Failed(f.clone()));
        }
        frame::encode(record, &mut st.pending);
        let lsn = st.next;
        st.next += 1;
        drop(st);
        self.inner.stats.records.fetch_add(1, Ordering::Relaxed);
        self.inner.work.notify_one();
        Ok(lsn)
    }

    /// The LSN of the last record appended (0: none).
    pub fn last_lsn(&self) -> Lsn {
        self.state().next - 1
    }

    /// Returns once record `lsn` is durable (W1), or the log failed. With
    /// `Flusher::Thread` it sleeps until the flusher made it so; with
    /// `Flusher::Caller` it writes (and syncs) the pending group itself if
    /// the record is not durable yet. `lsn` must have been appended (with
    /// `Caller`, a later one is a bug and panics).
    pub fn wait(&self, lsn: Lsn) -> Result<()> {
        if self.inner.flusher == Flusher::Caller {
            return self.wait_here(lsn);
        }
        let mut st = self.state();
        loop {
            if let Some(r) = self.settled(&st, lsn) {
                return r;
            }
            st = self.inner.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// What `wait(lsn)` returns now: Ok once the record is written
    /// (`Interval`) or synced (`Always`, W1), the failure if the log
    /// failed first, `None` if neither yet.
    fn settled(&self, st: &State, lsn: Lsn) -> Option<Result<()>> {
        let reached = match self.inner.cfg.sync {
            SyncMode::Always => st.synced,
            SyncMode::Interval { .. } => st.written,
        };
        if reached >= lsn {
            return Some(Ok(()));
        }
        st.failed.as_ref().map(|f| Err(WalError::Failed(f.clone())))
    }

    /// Makes every record appended so far durable as `wait` does (a
    /// background actor's flush, without a waiter): `wait(last_lsn())`.
    pub fn flush(&self) -> Result<()> {
        self.wait(self.last_lsn())
    }

    /// Makes every record appended so far written and synced, whatever the
    /// [`SyncMode`] (with `Interval`, what a power loss then keeps).
    pub fn flush_and_sync(&self) -> Result<()> {
        if self.inner.flusher == Flusher::Caller {
            return self.flush_here(true, false).map(|_| ());
        }
        let mut st = self.state();
        let upto = st.next - 1;
        if st.synced < upto {
            st.want_sync = true;
            self.inner.work.notify_one();
        }
        loop {
            if st.synced >= upto {
                return Ok(());
            }
            if let Some(f) = &st.failed {
                return Err(WalError::Failed(f.clone()));
            }
            st = self.inner.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Appends `record` and waits until it is durable.
    pub fn append_and_wait(&self, record: &[u8]) -> Result<Lsn> {
        let lsn = self.append(record)?;
        self.wait(lsn)?;
        Ok(lsn)
    }

    /// Closes the current segment after every record appended so far and
    /// starts a new one; returns its number (W4).
    pub fn rotate(&self) -> Result<u64> {
        if self.inner.flusher == Flusher::Caller {
            return self.flush_here(false, true);
        }
        let _one = self.rotating.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.state();
        let gen = st.rotations;
        st.want_rotate = true;
        self.inner.work.notify_one();
        loop {
            if st.rotations > gen {
                return Ok(st.segment);
            }
            if let Some(f) = &st.failed {
                return Err(WalError::Failed(f.clone()));
            }
            st = self.inner.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A checkpoint whose replay starts at segment `first` (from [`rotate`](Self::rotate)).
    pub fn checkpoint_writer(&self, first: u64) -> Result<CheckpointWriter> {
        let cfg = &self.inner.cfg;
        CheckpointWriter::create(Arc::clone(&cfg.storage), &cfg.dir, first, &cfg.identity)
    }

    /// Removes the segments below `first` (after the checkpoint naming it was committed).
    pub fn remove_segments_before(&self, first: u64) -> Result<usize> {
        let dir = &self.inner.cfg.dir;
        let storage = &*self.inner.cfg.storage;
        let old: Vec<u64> = segments(storage, dir)?
            .into_iter()
            .filter(|&n| n < first)
            .collect();
        for &n in &old {
            let p = segment_path(dir, n);
            storage.remove(&p).map_err(|source| WalError::Io {
                what: "cannot remove the old log segment",
                path: p,
                source,
            })?;
        }
        if !old.is_empty() {
            sync_dir(storage, dir)?;
        }
        Ok(old.len())
    }

    /// Reads back, while the log runs, the checkpoint's entries and then every
    /// record written so far, in order, through `replay` (Pragh 5: a home
    /// reloads values a dead machine held). Waits first until every record
    /// appended before the call is durable, so the caller, holding whatever
    /// lock orders its appends, reads a prefix that includes all of them.
    /// The newest segment may end in a group the flusher is still writing:
    /// a cut frame there ends the read (records after the call's start may
    /// or may not be seen). The caller must keep checkpoints from removing
    /// segments meanwhile.
    pub fn read_back(
        &self,
        mut replay: impl FnMut(Entry<'_>) -> std::result::Result<(), String>,
    ) -> Result<Recovery> {
        self.wait(self.last_lsn())?;
        let dir = &self.inner.cfg.dir;
        let storage = &*self.inner.cfg.storage;
        let identity = &self.inner.cfg.identity;
        let mut rec = Recovery::default();
        let first =
            match checkpoint::read(storage, dir, identity, |_, e| replay(Entry::Checkpoint(e)))? {
                Some((first, n)) => {
                    rec.checkpoint_entries = n;
                    first
                }
                None => 0,
            };
        for n in segments(storage, dir)?.into_iter().filter(|&n| n >= first) {
            let path = segment_path(dir, n);
            let bytes = storage.read(&path).map_err(|source| WalError::Io {
                what: "cannot read the log segment",
                path: path.clone(),
                source,
            })?;
            let (frames, end) = frame::parse(&bytes);
            for &(off, p) in frames.iter().skip(1) {
                replay(Entry::Record(p)).map_err(|why| WalError::Corrupt {
                    path: path.clone(),
                    offset: off,
                    why,
                })?;
                rec.records += 1;
            }
            if let End::Corrupt { offset, why } = end {
                return Err(WalError::Corrupt { path, offset, why });
            }
            rec.segments += 1;
        }
        Ok(rec)
    }

    /// The log's counters.
    pub fn stats(&self) -> &WalStats {
        &self.inner.stats
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.cfg.dir
    }

    /// When it syncs.
    pub fn sync_mode(&self) -> SyncMode {
        self.inner.cfg.sync
    }

    /// Who flushes.
    pub fn flusher(&self) -> Flusher {
        self.inner.flusher
    }
}

impl Drop for Wal {
    /// A clean close: what is pending is written and synced, in either
    /// mode (a simulation crashes the storage before it drops the log).
    fn drop(&mut self) {
        if self.inner.flusher == Flusher::Caller {
            // A failure was logged and poisoned the log; nobody is left to tell.
            let _ = self.flush_here(true, false);
            return;
        }
        self.state().stop = true;
        self.inner.work.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Replays segment `n`; returns its records and whether it has a header.
/// Only the last segment may end torn (W3); its tail is then cut.
fn replay_segment(
    storage: &dyn Storage,
    dir: &Path,
    n: u64,
    last: bool,
    identity: &str,
    rec: &mut Recovery,
    replay: &mut impl FnMut(Entry<'_>) -> std::result::Result<(), String>,
) -> Result<(u64, bool)> {
    let path = segment_path(dir, n);
    let bytes = storage.read(&path).map_err(|source| WalError::Io {
        what: "cannot read the log segment",
        path: path.clone(),
        source,
    })?;
    let corrupt = |offset, why| WalError::Corrupt {
        path: path.clone(),
        offset,
        why,
    };
    let (frames, end) = frame::parse(&bytes);
    let mut records = 0;
    match frames.first() {
        Some(&(_, h)) => {
            if h.len() < 20 || &h[0..8] != SEGMENT_MAGIC {
                return Err(corrupt(0, "no log segment header".into()));
            }
            let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
            let number = u64::from_le_bytes(h[12..20].try_into().expect("8 bytes"));
            if version != SEGMENT_VERSION || number != n {
                return Err(corrupt(
                    0,
                    format!("header says version {version}, segment {number}; expected version {SEGMENT_VERSION}, segment {n}"),
                ));
            }
            let found = String::from_utf8_lossy(&h[20..]);
            if found != identity {
                return Err(WalError::Identity {
                    path,
                    found: found.into(),
                    expected: identity.into(),
                });
            }
        }
        // A segment whose header never made it (created, crash before its
        // sync) holds no record; only the newest can be like that.
        None if last => {}
        None => return Err(corrupt(0, "an older segment without a header".into())),
    }
    for &(off, p) in frames.iter().skip(1) {
        replay(Entry::Record(p)).map_err(|why| corrupt(off, why))?;
        records += 1;
    }
    match end {
        End::Clean if last && !frames.is_empty() => {
            // A process killed before its sync left written bytes in the page
            // cache: they were just replayed, and a new segment is about to
            // follow this one, so make them durable first (W3 across
            // restarts: else a power loss could take records this start
            // served, or tear a segment that is no longer the newest).
            // Truncating to its own length is the storage's "make this file
            // durable" (its contract, `storage/mod.rs`).
            storage
                .truncate(&path, bytes.len() as u64)
                .map_err(|source| WalError::Io {
                    what: "cannot sync the newest log segment",
                    path: path.clone(),
                    source,
                })?;
        }
        End::Clean => {}
        End::Corrupt { offset, why } => return Err(corrupt(offset, why)),
        End::Torn { offset, why } if last => {
            tracing::warn!(
                file = %path.display(),
                offset,
                "write-ahead log: torn final record ({why}); truncating the file to {offset} bytes (it was never acknowledged)"
            );
            storage
                .truncate(&path, offset)
                .map_err(|source| WalError::Io {
                    what: "cannot truncate the torn tail of",
                    path: path.clone(),
                    source,
                })?;
            rec.truncated = Some((path.clone(), offset, why));
        }
        End::Torn { offset, why } => {
            return Err(corrupt(
                offset,
                format!("{why}, in a segment that was synced before the next one began"),
            ))
        }
    }
    Ok((records, !frames.is_empty()))
}
