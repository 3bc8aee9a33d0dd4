//! `Flusher::Caller`: no thread is started; `append` only frames the
//! record; `wait`, `flush`, `flush_and_sync` and `rotate` write (and sync)
//! the whole pending group in the calling thread, with one write and, under
//! `Always`, one sync; under `Interval` nothing syncs but `flush_and_sync`,
//! a rotation and the close; threads flushing at once neither deadlock nor
//! lose a record; a failed write or sync poisons the log. Every log here is
//! opened with `Flusher::Caller`, so the first test can look for the
//! flusher thread in the whole process.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use locus_wal::{
    Crash, Entry, Flusher, LockGuard, MemStorage, Storage, StorageFile, SyncMode, Wal, WalConfig,
    WalError,
};

const DIR: &str = "/data/server-0";

fn cfg(storage: Arc<dyn Storage>, sync: SyncMode) -> WalConfig {
    WalConfig {
        storage,
        dir: PathBuf::from(DIR),
        sync,
        identity: "server 0 of 1".into(),
        segment_bytes_max: 64 << 20,
    }
}

fn open(disk: &MemStorage, sync: SyncMode) -> Wal {
    Wal::open_with(cfg(Arc::new(disk.clone()), sync), Flusher::Caller, |_| {
        Ok(())
    })
    .unwrap()
    .0
}

/// The records a restart finds after a crash of kind `how` of `disk` now.
fn recovered(disk: &MemStorage, how: Crash) -> Vec<Vec<u8>> {
    let mut recs = Vec::new();
    let c = cfg(Arc::new(disk.crash(how)), SyncMode::Always);
    Wal::open_with(c, Flusher::Caller, |e| {
        if let Entry::Record(b) = e {
            recs.push(b.to_vec());
        }
        Ok(())
    })
    .unwrap();
    recs
}

/// Every file of the log's directory with its bytes.
fn files(disk: &MemStorage) -> Vec<(OsString, Vec<u8>)> {
    let mut names = disk.list_dir(Path::new(DIR)).unwrap();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let b = disk.read(&Path::new(DIR).join(&n)).unwrap();
            (n, b)
        })
        .collect()
}

fn rec(i: u8) -> Vec<u8> {
    vec![i; 30]
}

fn groups_and_syncs(w: &Wal) -> (u64, u64) {
    let s = w.stats();
    (
        s.groups.load(Ordering::Relaxed),
        s.syncs.load(Ordering::Relaxed),
    )
}

#[test]
fn no_thread_and_nothing_written_until_a_wait_writes_the_whole_group() {
    let disk = MemStorage::new();
    let w = open(&disk, SyncMode::Always);
    #[cfg(target_os = "linux")]
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let comm = std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap_or_default();
        assert_ne!(comm.trim(), "locus-wal-flush", "a flusher thread runs");
    }
    let before = files(&disk);
    for i in 0..3 {
        assert_eq!(w.append(&rec(i)).unwrap(), u64::from(i) + 1);
    }
    assert_eq!(files(&disk), before, "append wrote");
    assert_eq!(groups_and_syncs(&w), (0, 0));
    assert!(recovered(&disk, Crash::ProcessCrash).is_empty());
    // Waiting for the second writes the whole group: one write, one sync.
    w.wait(2).unwrap();
    assert_eq!(groups_and_syncs(&w), (1, 1));
    assert_eq!(
        recovered(&disk, Crash::PowerLoss),
        (0..3).map(rec).collect::<Vec<_>>()
    );
    // The third is durable already: nothing more to do.
    w.wait(3).unwrap();
    assert_eq!(groups_and_syncs(&w), (1, 1));
}

#[test]
fn interval_writes_at_wait_and_syncs_only_when_asked() {
    let disk = MemStorage::new();
    let w = open(&disk, SyncMode::Interval { interval_ms: 1 });
    w.append_and_wait(&rec(0)).unwrap();
    assert_eq!(recovered(&disk, Crash::ProcessCrash), vec![rec(0)]);
    // Past the interval, nothing syncs by itself: no clock in caller mode.
    std::thread::sleep(Duration::from_millis(20));
    assert!(recovered(&disk, Crash::PowerLoss).is_empty());
    w.append(&rec(1)).unwrap();
    w.flush().unwrap();
    assert_eq!(recovered(&disk, Crash::ProcessCrash), vec![rec(0), rec(1)]);
    assert!(recovered(&disk, Crash::PowerLoss).is_empty());
    assert_eq!(groups_and_syncs(&w), (2, 0));
    w.flush_and_sync().unwrap();
    assert_eq!(groups_and_syncs(&w), (2, 1));
    assert_eq!(recovered(&disk, Crash::PowerLoss), vec![rec(0), rec(1)]);
    // A rotation syncs the segment it closes (W3), appended records first (W4).
    w.append(&rec(2)).unwrap();
    let first = w.rotate().unwrap();
    assert_eq!(
        recovered(&disk, Crash::PowerLoss),
        (0..3).map(rec).collect::<Vec<_>>()
    );
    assert!(first > 1, "{first}");
    // A clean close syncs what was written.
    w.append_and_wait(&rec(3)).unwrap();
    assert_eq!(recovered(&disk, Crash::PowerLoss).len(), 3);
    drop(w);
    assert_eq!(
        recovered(&disk, Crash::PowerLoss),
        (0..4).map(rec).collect::<Vec<_>>()
    );
}

#[test]
fn flush_writes_and_syncs_the_pending_group_without_a_waiter() {
    let disk = MemStorage::new();
    let w = open(&disk, SyncMode::Always);
    for i in 0..5 {
        w.append(&rec(i)).unwrap();
    }
    w.flush().unwrap();
    assert_eq!(groups_and_syncs(&w), (1, 1));
    assert_eq!(
        recovered(&disk, Crash::PowerLoss),
        (0..5).map(rec).collect::<Vec<_>>()
    );
    w.flush().unwrap();
    w.flush_and_sync().unwrap();
    assert_eq!(
        groups_and_syncs(&w),
        (1, 1),
        "nothing pending, nothing unsynced"
    );
}

/// Runs `f` on a thread that says on `done` whether it ended without a
/// panic (so a panic fails the test at once, not at the hang timeout).
fn spawn_reporting(
    done: &mpsc::Sender<bool>,
    f: impl FnOnce() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let done = done.clone();
    std::thread::spawn(move || {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok();
        let _ = done.send(ok);
    })
}

#[test]
fn threads_flushing_at_once_neither_deadlock_nor_lose_a_record() {
    let disk = MemStorage::new();
    let mut c = cfg(Arc::new(disk.clone()), SyncMode::Always);
    c.segment_bytes_max = 4096;
    let w = Arc::new(Wal::open_with(c, Flusher::Caller, |_| Ok(())).unwrap().0);
    let (done, finished) = mpsc::channel();
    let mut threads = Vec::new();
    for t in 0..4u8 {
        let w = Arc::clone(&w);
        threads.push(spawn_reporting(&done, move || {
            for i in 0..250u8 {
                w.append_and_wait(&[t, i]).unwrap();
            }
        }));
    }
    let w2 = Arc::clone(&w);
    threads.push(spawn_reporting(&done, move || {
        for i in 0..200 {
            w2.flush().unwrap();
            if i % 20 == 0 {
                w2.rotate().unwrap();
            }
        }
    }));
    for _ in 0..threads.len() {
        // A deadlock fails here instead of hanging the run.
        let ok = finished
            .recv_timeout(Duration::from_secs(120))
            .expect("threads flushing in caller mode hung");
        assert!(ok, "a thread panicked (its message is above)");
    }
    for t in threads {
        t.join().unwrap();
    }
    let recs = recovered(&disk, Crash::PowerLoss);
    assert_eq!(recs.len(), 1000);
    for t in 0..4u8 {
        let mine: Vec<u8> = recs.iter().filter(|r| r[0] == t).map(|r| r[1]).collect();
        assert_eq!(
            mine,
            (0..250).collect::<Vec<u8>>(),
            "thread {t}'s records, in order"
        );
    }
}

#[test]
#[should_panic(expected = "only 1 were appended")]
fn waiting_for_a_record_never_appended_is_a_bug() {
    let disk = MemStorage::new();
    let w = open(&disk, SyncMode::Always);
    w.append(&rec(0)).unwrap();
    let _ = w.wait(2);
}

const FAIL_NONE: u8 = 0;
const FAIL_WRITE: u8 = 1;
const FAIL_SYNC: u8 = 2;

/// A `MemStorage` whose file writes or syncs fail when told to.
#[derive(Debug)]
struct Flaky {
    inner: MemStorage,
    fail: Arc<AtomicU8>,
}

struct FlakyFile {
    inner: Box<dyn StorageFile>,
    fail: Arc<AtomicU8>,
}

fn injected() -> io::Error {
    io::Error::other("injected failure")
}

impl io::Write for FlakyFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.fail.load(Ordering::Relaxed) == FAIL_WRITE {
            return Err(injected());
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl StorageFile for FlakyFile {
    fn sync_data(&mut self) -> io::Result<()> {
        if self.fail.load(Ordering::Relaxed) == FAIL_SYNC {
            return Err(injected());
        }
        self.inner.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        if self.fail.load(Ordering::Relaxed) == FAIL_SYNC {
            return Err(injected());
        }
        self.inner.sync_all()
    }
}

impl Storage for Flaky {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        self.inner.list_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        self.inner.lock(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(FlakyFile {
            inner: self.inner.create(path)?,
            fail: Arc::clone(&self.fail),
        }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}

#[test]
fn a_failed_write_or_sync_poisons_the_log() {
    for mode in [FAIL_WRITE, FAIL_SYNC] {
        let disk = MemStorage::new();
        let fail = Arc::new(AtomicU8::new(FAIL_NONE));
        let flaky = Flaky {
            inner: disk.clone(),
            fail: Arc::clone(&fail),
        };
        let c = cfg(Arc::new(flaky), SyncMode::Always);
        let (w, _) = Wal::open_with(c, Flusher::Caller, |_| Ok(())).unwrap();
        let a = w.append_and_wait(&rec(0)).unwrap();
        fail.store(mode, Ordering::Relaxed);
        let b = w.append(&rec(1)).unwrap();
        let e = w.wait(b).unwrap_err();
        assert!(e.to_string().contains("injected failure"), "{mode}: {e}");
        // The disk works again; the log does not (a failed fsync is not retried).
        fail.store(FAIL_NONE, Ordering::Relaxed);
        assert!(matches!(w.wait(b), Err(WalError::Failed(_))), "{mode}");
        assert!(
            matches!(w.append(&rec(2)), Err(WalError::Failed(_))),
            "{mode}"
        );
        assert!(matches!(w.flush(), Err(WalError::Failed(_))), "{mode}");
        assert!(
            matches!(w.flush_and_sync(), Err(WalError::Failed(_))),
            "{mode}"
        );
        assert!(matches!(w.rotate(), Err(WalError::Failed(_))), "{mode}");
        // What was durable before the failure stays acknowledged.
        w.wait(a).unwrap();
        drop(w);
        assert_eq!(recovered(&disk, Crash::PowerLoss), vec![rec(0)], "{mode}");
    }
}
