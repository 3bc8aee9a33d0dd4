//! Rounds of one actor on a log that flushes in its caller
//! (`Flusher::Caller`): what a node of the simulated twin does (issue 58,
//! req. 4), without the simulation around it.
//!
//! A round: the actor opens the log on a [`MemStorage`] seen through a
//! [`Tap`] and takes seeded steps ([`Step`]). The tap counts the disk's
//! mutating operations and, just before the seeded one, keeps what a crash
//! of the round's kind would leave (`MemStorage::crash`): in the open, in a
//! flush between its write and its sync, in a rotation or a checkpoint.
//! Nothing blocks: the actor finishes the step unseen, and what that step
//! acknowledged does not count (the process died before it returned). If
//! the seeded operation never comes, the crash is after the last step. The
//! log is reopened on what the crash kept and checked as the parent
//! module's rounds are (`check`: whole records, in order, a prefix of the
//! appends, nothing lost from earlier rounds), with these as must-survive:
//! - a process crash: every record acknowledged, i.e. covered by a `wait`,
//!   `flush`, `flush_and_sync`, `read_back` or rotation that returned Ok
//!   (W1: a `wait(lsn)` covers every LSN up to `lsn`);
//! - a power loss (torn or not): every record acknowledged while synced:
//!   under `Always` every acknowledged one; under `Interval` those before
//!   the last `flush_and_sync` or rotation (caller mode uses no interval).
//!
//! Records appended and never acknowledged may survive or not. Everything
//! here is a function of the seed: [`run`] also returns, per round, the
//! bytes of every file the crash kept and the closed disk held, and what
//! recovery replayed ([`RoundTrace`]), which a second run must repeat.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use locus_wal::{
    Crash, Entry, Flusher, LockGuard, MemStorage, Storage, StorageFile, SyncMode, Wal, WalConfig,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{check, record, record_number, recover_with, Tally, DIR, IDENTITY};

/// What the actor may do at a step, each with a relative weight.
#[derive(Debug, Clone, Copy)]
pub struct Weights {
    /// `append` one record.
    pub append: u32,
    /// `wait` for a record appended this round (one not yet acknowledged if any).
    pub wait: u32,
    /// `flush`.
    pub flush: u32,
    /// `flush_and_sync`.
    pub flush_and_sync: u32,
    /// `rotate`, a checkpoint of every record so far, `remove_segments_before`.
    pub checkpoint: u32,
    /// `read_back`, checked against every record so far.
    pub read_back: u32,
}

/// One step of the actor.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Append,
    Wait,
    Flush,
    FlushAndSync,
    Checkpoint,
    ReadBack,
}

/// What a test runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sync: SyncMode,
    /// Each round's crash.
    pub crash: fn(&mut Xoshiro256PlusPlus) -> Crash,
    pub rounds: usize,
    /// Steps per round.
    pub steps: usize,
    pub weights: Weights,
    pub segment_bytes_max: u64,
    /// The crash comes before a seeded mutating operation in `1..=ops_max`
    /// (past the round's last one: after the last step).
    pub ops_max: u64,
}

/// What the rounds reached (so the tests show they hit their cases).
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    pub rounds: u64,
    /// Crashes at a seeded operation (the others came after the last step).
    pub crashed_mid_round: u64,
    /// Crashes at a segment's `sync_data` (its group written, not synced).
    pub crashed_at_sync: u64,
    /// Crashes while a checkpoint was written, renamed or committed.
    pub crashed_in_checkpoint: u64,
    /// Acknowledged records that had to survive (and did).
    pub acked: u64,
    /// Of those, records not synced at the crash (a process crash kept them).
    pub acked_unsynced: u64,
    /// Records nothing required that survived anyway.
    pub unacked_survived: u64,
    /// Records appended that did not survive (none required).
    pub unacked_lost: u64,
    /// Recoveries that cut a torn tail.
    pub torn_cut: u64,
    pub checkpoints: u64,
    /// Recoveries that found a checkpoint.
    pub recovered_from_checkpoint: u64,
}

impl Tally for Coverage {
    fn add(&mut self, o: &Coverage) {
        self.rounds += o.rounds;
        self.crashed_mid_round += o.crashed_mid_round;
        self.crashed_at_sync += o.crashed_at_sync;
        self.crashed_in_checkpoint += o.crashed_in_checkpoint;
        self.acked += o.acked;
        self.acked_unsynced += o.acked_unsynced;
        self.unacked_survived += o.unacked_survived;
        self.unacked_lost += o.unacked_lost;
        self.torn_cut += o.torn_cut;
        self.checkpoints += o.checkpoints;
        self.recovered_from_checkpoint += o.recovered_from_checkpoint;
    }
}

/// A file's name and bytes.
pub type File = (String, Vec<u8>);

/// What one round left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundTrace {
    /// The crash and the operation it came before.
    pub crash: String,
    /// Every file the crash kept, before recovery touched it.
    pub kept: Vec<File>,
    /// Every file of the disk the actor went on with, after it closed the log.
    pub closed: Vec<File>,
    /// Record numbers recovery replayed: checkpoint entries, then records.
    pub checkpoint: Vec<u64>,
    pub records: Vec<u64>,
    /// The recovery's report.
    pub recovery: String,
}

/// A seed's coverage and its rounds' traces.
#[derive(Debug, Default)]
pub struct Outcome {
    pub coverage: Coverage,
    pub trace: Vec<RoundTrace>,
}

/// A [`Storage`] decorator that keeps a crash's leftovers just before the
/// seeded mutating operation (module doc), and lets every operation pass.
#[derive(Debug)]
struct Tap {
    inner: MemStorage,
    st: Arc<Mutex<TapState>>,
}

#[derive(Debug)]
struct TapState {
    /// Mutating operations begun.
    ops: u64,
    crash_at: u64,
    how: Crash,
    /// What the crash kept, and the operation it came before.
    kept: Option<(MemStorage, String)>,
}

const AFTER_THE_LAST_STEP: &str = "after the last step";

fn lock(st: &Mutex<TapState>) -> MutexGuard<'_, TapState> {
    st.lock().unwrap_or_else(|p| p.into_inner())
}

/// Before a mutating operation of `disk`: counts it, crashes before the seeded one.
fn enter(st: &Mutex<TapState>, disk: &MemStorage, what: impl FnOnce() -> String) {
    let mut st = lock(st);
    st.ops += 1;
    if st.ops == st.crash_at {
        st.kept = Some((disk.crash(st.how), what()));
    }
}

impl Tap {
    fn enter(&self, what: impl FnOnce() -> String) {
        enter(&self.st, &self.inner, what);
    }

    fn crashed(&self) -> bool {
        lock(&self.st).kept.is_some()
    }

    /// The crash after the last step, if none came before.
    fn crash_now(&self) {
        let mut st = lock(&self.st);
        if st.kept.is_none() {
            st.kept = Some((self.inner.crash(st.how), AFTER_THE_LAST_STEP.into()));
        }
    }
}

impl Storage for Tap {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.enter(|| format!("create_dir_all {}", dir.display()));
        self.inner.create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        self.inner.list_dir(dir)
    }

    fn lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        self.enter(|| format!("lock {}", path.display()));
        self.inner.lock(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        self.enter(|| format!("create {}", path.display()));
        Ok(Box::new(TapFile {
            inner: self.inner.create(path)?,
            disk: self.inner.clone(),
            st: Arc::clone(&self.st),
            path: path.to_path_buf(),
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.enter(|| format!("truncate {} to {len}", path.display()));
        self.inner.truncate(path, len)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.enter(|| format!("rename {} to {}", from.display(), to.display()));
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.enter(|| format!("remove {}", path.display()));
        self.inner.remove(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.enter(|| format!("sync_dir {}", dir.display()));
        self.inner.sync_dir(dir)
    }
}

/// A file of a [`Tap`].
struct TapFile {
    inner: Box<dyn StorageFile>,
    disk: MemStorage,
    st: Arc<Mutex<TapState>>,
    path: PathBuf,
}

impl io::Write for TapFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        enter(&self.st, &self.disk, || {
            format!("write of {} bytes to {}", buf.len(), self.path.display())
        });
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl StorageFile for TapFile {
    fn sync_data(&mut self) -> io::Result<()> {
        enter(&self.st, &self.disk, || {
            format!("sync_data {}", self.path.display())
        });
        self.inner.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        enter(&self.st, &self.disk, || {
            format!("sync_all {}", self.path.display())
        });
        self.inner.sync_all()
    }
}

fn config(plan: &Plan, storage: Arc<dyn Storage>) -> WalConfig {
    WalConfig {
        storage,
        dir: PathBuf::from(DIR),
        sync: plan.sync,
        identity: IDENTITY.into(),
        segment_bytes_max: plan.segment_bytes_max,
    }
}

/// Every file of the log's directory, by name (none if it does not exist).
fn files(disk: &MemStorage) -> Vec<File> {
    let dir = Path::new(DIR);
    let mut names: Vec<OsString> = disk.list_dir(dir).unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let bytes = disk.read(&dir.join(&n)).unwrap_or_default();
            (n.to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

fn pick(rng: &mut Xoshiro256PlusPlus, w: &Weights) -> Step {
    let all = [
        (w.append, Step::Append),
        (w.wait, Step::Wait),
        (w.flush, Step::Flush),
        (w.flush_and_sync, Step::FlushAndSync),
        (w.checkpoint, Step::Checkpoint),
        (w.read_back, Step::ReadBack),
    ];
    let total: u32 = all.iter().map(|a| a.0).sum();
    let mut x = rng.gen_range(0..total);
    for (weight, step) in all {
        if x < weight {
            return step;
        }
        x -= weight;
    }
    unreachable!("x < total")
}

/// What a round's process did before its crash.
#[derive(Default)]
struct Acted {
    /// Record numbers appended, in LSN order (LSN i + 1).
    appended: Vec<u64>,
    /// Records `appended[..acked]` were acknowledged before the crash.
    acked: usize,
    /// Records `appended[..synced]` were acknowledged synced before the crash.
    synced: usize,
    checkpoints: u64,
}

/// One round's process (module doc). An error is a failure: the tap never
/// makes an operation fail.
fn act(
    plan: &Plan,
    seed: u64,
    rng: &mut Xoshiro256PlusPlus,
    tap: &Arc<Tap>,
    base: &BTreeSet<u64>,
    next: &mut u64,
) -> Result<Acted, String> {
    let mut a = Acted::default();
    let storage: Arc<dyn Storage> = Arc::clone(tap) as Arc<dyn Storage>;
    let (wal, _) = Wal::open_with(config(plan, storage), Flusher::Caller, |_| Ok(()))
        .map_err(|e| format!("open: {e}"))?;
    let always = plan.sync == SyncMode::Always;
    for i in 0..plan.steps {
        if tap.crashed() {
            break;
        }
        let before = (a.acked, a.synced);
        let step = pick(rng, &plan.weights);
        let len = a.appended.len();
        let r: Result<(), String> = (|| {
            match step {
                Step::Append => {
                    let lsn = wal
                        .append(&record(seed, *next))
                        .map_err(|e| e.to_string())?;
                    a.appended.push(*next);
                    *next += 1;
                    if lsn != a.appended.len() as u64 {
                        return Err(format!("append returned LSN {lsn}, not {}", len + 1));
                    }
                }
                Step::Wait if len == 0 => {}
                Step::Wait => {
                    let lsn = if a.acked < len {
                        rng.gen_range(a.acked + 1..=len)
                    } else {
                        rng.gen_range(1..=len)
                    };
                    wal.wait(lsn as u64).map_err(|e| e.to_string())?;
                    a.acked = a.acked.max(lsn);
                    if always {
                        a.synced = a.synced.max(lsn);
                    }
                }
                Step::Flush | Step::ReadBack => {
                    if let Step::ReadBack = step {
                        read_back(&wal, seed, base, &a.appended)?;
                    } else {
                        wal.flush().map_err(|e| e.to_string())?;
                    }
                    a.acked = len;
                    if always {
                        a.synced = len;
                    }
                }
                Step::FlushAndSync => {
                    wal.flush_and_sync().map_err(|e| e.to_string())?;
                    (a.acked, a.synced) = (len, len);
                }
                Step::Checkpoint => {
                    // D3: rotate first (W3, W4: every record so far is in a
                    // synced segment below `first`), then the snapshot.
                    let ck = || -> locus_wal::Result<()> {
                        let first = wal.rotate()?;
                        let mut ck = wal.checkpoint_writer(first)?;
                        for &n in base.iter().chain(&a.appended) {
                            ck.entry(&record(seed, n))?;
                        }
                        ck.commit()?;
                        wal.remove_segments_before(first)?;
                        Ok(())
                    };
                    ck().map_err(|e| e.to_string())?;
                    (a.acked, a.synced) = (len, len);
                    a.checkpoints += 1;
                }
            }
            Ok(())
        })();
        r.map_err(|e| format!("step {i} ({step:?}): {e}"))?;
        if tap.crashed() {
            // The process died inside this step: nothing it acknowledged was seen.
            (a.acked, a.synced) = before;
        }
    }
    tap.crash_now();
    // A clean close of the process that, unseen, went on after its crash.
    drop(wal);
    Ok(a)
}

/// `read_back` while the log runs: exactly what was recovered and appended.
fn read_back(wal: &Wal, seed: u64, base: &BTreeSet<u64>, appended: &[u64]) -> Result<(), String> {
    let mut seen = Vec::new();
    let mut records = Vec::new();
    wal.read_back(|e| {
        match e {
            Entry::Checkpoint(b) => seen.push(record_number(seed, b)?),
            Entry::Record(b) => records.push(record_number(seed, b)?),
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    if let Some(w) = records.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!("read_back: {} before {}", w[0], w[1]));
    }
    let got: BTreeSet<u64> = seen.into_iter().chain(records).collect();
    let want: BTreeSet<u64> = base.iter().chain(appended).copied().collect();
    if got != want {
        return Err(format!(
            "read_back found {} records, {} were recovered or appended",
            got.len(),
            want.len()
        ));
    }
    Ok(())
}

/// Runs `plan.rounds` rounds of seed `seed` (module doc).
pub fn run(plan: &Plan, seed: u64) -> Result<Outcome, String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut disk = MemStorage::new();
    let mut base: BTreeSet<u64> = BTreeSet::new();
    let mut next = 1u64;
    let mut out = Outcome::default();
    for round in 0..plan.rounds {
        let crash_at = rng.gen_range(1..=plan.ops_max);
        let how = (plan.crash)(&mut rng);
        let st = Arc::new(Mutex::new(TapState {
            ops: 0,
            crash_at,
            how,
            kept: None,
        }));
        let tap = Arc::new(Tap {
            inner: disk.clone(),
            st: Arc::clone(&st),
        });
        let ctx = |msg: String| format!("seed {seed}: round {round}: {msg}");
        let a = act(plan, seed, &mut rng, &tap, &base, &mut next).map_err(ctx)?;
        let (kept, at) = lock(&st).kept.take().expect("crash_now crashed");
        let when = match at.as_str() {
            AFTER_THE_LAST_STEP => format!("{how:?} {at}"),
            op => format!("{how:?} before disk operation {crash_at} ({op})"),
        };
        let ctx = |msg: String| format!("seed {seed}: round {round}: {when}: {msg}");
        let must_len = if how == Crash::ProcessCrash {
            a.acked
        } else {
            a.synced
        };
        let must = &a.appended[..must_len];
        let kept_files = files(&kept);

        let cfg = config(plan, Arc::new(kept.clone()));
        let found = recover_with(cfg.clone(), Flusher::Caller, seed).map_err(ctx)?;
        let all = found.all();
        check(&found, &all, &base, &a.appended, must).map_err(ctx)?;
        let again = recover_with(cfg, Flusher::Caller, seed)
            .map_err(|e| ctx(format!("second recovery: {e}")))?;
        if again.all() != all {
            return Err(ctx(format!(
                "a second recovery found {} records, the first {}",
                again.all().len(),
                all.len()
            )));
        }

        let new = all.len() - base.len();
        let c = &mut out.coverage;
        c.rounds += 1;
        c.crashed_mid_round += u64::from(at != AFTER_THE_LAST_STEP);
        c.crashed_at_sync += u64::from(at.starts_with("sync_data") && at.ends_with(".wal"));
        c.crashed_in_checkpoint += u64::from(at.contains("checkpoint"));
        c.acked += must.len() as u64;
        c.acked_unsynced += must.len().saturating_sub(a.synced) as u64;
        c.unacked_survived += (new - must.len()) as u64;
        c.unacked_lost += (a.appended.len() - new) as u64;
        c.torn_cut += u64::from(found.recovery.truncated.is_some());
        c.checkpoints += a.checkpoints;
        c.recovered_from_checkpoint += u64::from(found.recovery.checkpoint_entries > 0);
        out.trace.push(RoundTrace {
            crash: when.clone(),
            kept: kept_files,
            closed: files(&disk),
            checkpoint: found.checkpoint.clone(),
            records: found.records.clone(),
            recovery: format!("{:?}", found.recovery),
        });
        base = all;
        disk = kept;
    }
    Ok(out)
}
