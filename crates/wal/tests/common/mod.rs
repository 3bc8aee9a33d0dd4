//! What the crash tests share: seeds, a gate that stops a disk at a seeded
//! operation, and rounds of "append, crash, recover, check".
//!
//! A round: a session thread opens the log on a [`MemStorage`] seen through
//! a [`Gate`], writer threads append records and `wait` for them (recording
//! each acknowledgement), and, if the plan says so, a checkpointer rotates,
//! writes checkpoints and removes old segments. The gate counts the disk's
//! mutating operations; at the seeded one, that operation and every later
//! one block (the machine stops there). The test thread then gives threads
//! already woken a moment to record acknowledgements (a log that acknowledges
//! before its sync is caught here), notes what was acknowledged, crashes the
//! storage, and lets every blocked operation fail (the process is gone).
//! The log is reopened on what the crash kept and checked:
//! - it opens: a torn tail is cut, never reported as corruption;
//! - every record is one that was appended (its bytes are a function of the
//!   seed and its number), and log records come back in append order;
//! - what survives is everything from earlier rounds plus a prefix of this
//!   round's appends (no holes: W2, W3, W4);
//! - every acknowledgement the plan says must survive did (W1).
//!
//! Seeds: `LOCUS_WAL_SEED=N` runs one, `LOCUS_WAL_SEEDS=K` runs `0..K`
//! (each test has its default); `LOCUS_WAL_KEEP_GOING=1` runs every seed
//! and lists all that fail. A failure starts with `seed N:`.
//!
//! [`actor`] runs the same checks on a log that flushes in its caller
//! (`Flusher::Caller`), driven by one seeded actor instead of threads.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use locus_wal::{Crash, Entry, Flusher, MemStorage, Recovery, Storage, SyncMode, Wal, WalConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[allow(dead_code)] // the caller-mode tests use it, the others do not
pub mod actor;
mod gate;

use gate::Gate;

/// The log's directory on the simulated disk.
const DIR: &str = "/data/server-0";
const IDENTITY: &str = "server 0 of 1";
/// How long the test thread waits, once the disk stopped, for woken waiters
/// to record acknowledgements: until none came for `QUIET`, at most
/// `GRACE_MAX`. Not a timing assertion: a longer wait only catches a log
/// that acknowledges early more surely.
const QUIET: Duration = Duration::from_millis(20);
const GRACE_MAX: Duration = Duration::from_millis(500);
/// A round that has not stopped or ended by then is hung (a bug): fail
/// with the seed rather than hang the test run.
const ROUND_LIMIT: Duration = Duration::from_secs(300);

fn env_u64(name: &str) -> Option<u64> {
    let s = std::env::var(name).ok()?;
    Some(
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} = {s:?} is not a number")),
    )
}

/// Coverage counters that add up over seeds.
pub trait Tally: Default + std::fmt::Debug {
    /// Adds `o`'s counters to these.
    fn add(&mut self, o: &Self);
}

/// Runs `run` for each seed (module doc); panics naming the failing seeds.
/// Returns the coverage summed over seeds and how many seeds ran.
pub fn for_each_seed<C: Tally>(
    seeds_default: u64,
    run: impl Fn(u64) -> Result<C, String>,
) -> (C, u64) {
    let seeds: Vec<u64> = match env_u64("LOCUS_WAL_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("LOCUS_WAL_SEEDS").unwrap_or(seeds_default)).collect(),
    };
    let keep_going = std::env::var_os("LOCUS_WAL_KEEP_GOING").is_some();
    let mut total = C::default();
    let mut failures: Vec<(u64, String)> = Vec::new();
    for &seed in &seeds {
        match run(seed) {
            Ok(c) => total.add(&c),
            Err(msg) => {
                failures.push((seed, msg));
                if !keep_going {
                    break;
                }
            }
        }
    }
    if let Some((_, msg)) = failures.first() {
        let all: Vec<u64> = failures.iter().map(|f| f.0).collect();
        panic!(
            "{msg}\n({} failing seeds: {all:?}; replay one with LOCUS_WAL_SEED=N)",
            failures.len()
        );
    }
    eprintln!("{} seeds: {total:?}", seeds.len());
    (total, seeds.len() as u64)
}

/// What the rounds reached (to show the tests hit the cases they are for).
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    pub rounds: u64,
    /// Rounds whose disk stopped mid-run (the others crashed after a clean close).
    pub stopped: u64,
    /// Rounds stopped at a sync of a segment.
    pub stopped_at_sync: u64,
    /// Rounds stopped while a checkpoint was being written or renamed.
    pub stopped_in_checkpoint: u64,
    /// Rounds stopped creating a segment or syncing the directory (a
    /// rotation, or a checkpoint's last step).
    pub stopped_in_rotation: u64,
    /// Mutating disk operations, summed.
    pub ops: u64,
    pub acked: u64,
    /// Acknowledged records a power loss took (allowed with `Interval`).
    pub acked_lost: u64,
    /// Recoveries that cut a torn tail.
    pub torn_cut: u64,
    pub checkpoints: u64,
    /// Recoveries that found a checkpoint.
    pub recovered_from_checkpoint: u64,
}

impl Tally for Coverage {
    fn add(&mut self, o: &Coverage) {
        self.rounds += o.rounds;
        self.stopped += o.stopped;
        self.stopped_at_sync += o.stopped_at_sync;
        self.stopped_in_checkpoint += o.stopped_in_checkpoint;
        self.stopped_in_rotation += o.stopped_in_rotation;
        self.ops += o.ops;
        self.acked += o.acked;
        self.acked_lost += o.acked_lost;
        self.torn_cut += o.torn_cut;
        self.checkpoints += o.checkpoints;
        self.recovered_from_checkpoint += o.recovered_from_checkpoint;
    }
}

/// Record `n` of seed `seed`: its number, the seed, and 0-199 bytes that
/// follow from both (so a record that was never appended, or is damaged,
/// cannot pass).
fn record(seed: u64, n: u64) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let len = rng.gen_range(0..200);
    let mut v = Vec::with_capacity(16 + len);
    v.extend_from_slice(&n.to_le_bytes());
    v.extend_from_slice(&seed.to_le_bytes());
    v.extend((0..len).map(|_| rng.gen::<u8>()));
    v
}

/// The number of a record of `seed`, if it is one.
fn record_number(seed: u64, bytes: &[u8]) -> Result<u64, String> {
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| format!("a record of {} bytes", bytes.len()))?;
    if record(seed, n) != bytes {
        return Err(format!(
            "a record claiming number {n} that is not the one appended ({} bytes)",
            bytes.len()
        ));
    }
    Ok(n)
}

/// Which acknowledged records must survive the crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // each test file names one
pub enum MustSurvive {
    /// Every one acknowledged before the crash (`Always`; `Interval` and a process crash).
    EveryAcknowledged,
    /// Those acknowledged before the last completed sync of a segment
    /// began (`Interval` and a power loss).
    AcknowledgedBeforeTheLastSync,
}

/// What a test runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sync: SyncMode,
    /// Each round's crash.
    pub crash: fn(&mut Xoshiro256PlusPlus) -> Crash,
    pub must_survive: MustSurvive,
    pub rounds: usize,
    pub writers: usize,
    pub records_per_writer: usize,
    pub segment_bytes_max: u64,
    /// A checkpoint after every this many acknowledgements (a seeded number
    /// in the range); `None`: no checkpoints.
    pub checkpoint_every: Option<(usize, usize)>,
    /// The disk stops at a seeded mutating operation in `1..=ops_max` (past
    /// the round's last operation: the round ends, then crashes).
    pub ops_max: u64,
}

/// Acknowledged record numbers, in the order `wait` returned.
#[derive(Debug, Default)]
struct Acks {
    st: Mutex<AckState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct AckState {
    acked: Vec<u64>,
    /// The writers are done (the checkpointer stops).
    writers_done: bool,
}

impl Acks {
    fn lock(&self) -> MutexGuard<'_, AckState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, n: u64) {
        self.lock().acked.push(n);
        self.cv.notify_all();
    }

    fn len(&self) -> usize {
        self.lock().acked.len()
    }

    fn snapshot(&self) -> Vec<u64> {
        self.lock().acked.clone()
    }

    fn finish(&self) {
        self.lock().writers_done = true;
        self.cv.notify_all();
    }

    /// Waits until at least `n` acknowledgements; false if the writers finished first.
    fn wait_for(&self, n: usize) -> bool {
        let mut st = self.lock();
        loop {
            if st.acked.len() >= n {
                return true;
            }
            if st.writers_done {
                return false;
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits until no acknowledgement came for `QUIET` (at most `GRACE_MAX`).
    fn wait_quiet(&self) {
        let t0 = Instant::now();
        let mut st = self.lock();
        loop {
            let seen = st.acked.len();
            let left = GRACE_MAX.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return;
            }
            st = self
                .cv
                .wait_timeout(st, QUIET.min(left))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if st.acked.len() == seen {
                return;
            }
        }
    }
}

/// Record numbers appended in a round, in append (LSN) order.
struct Appended {
    next: u64,
    numbers: Vec<u64>,
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

/// What a recovery found: checkpoint entries and log records (their
/// numbers, in replay order) and its report.
struct Found {
    checkpoint: Vec<u64>,
    records: Vec<u64>,
    recovery: Recovery,
}

impl Found {
    fn all(&self) -> BTreeSet<u64> {
        self.checkpoint
            .iter()
            .chain(&self.records)
            .copied()
            .collect()
    }
}

/// Opens the log on `disk` as a restarted server would, collecting what it
/// replays, then closes it.
fn recover(disk: &MemStorage, plan: &Plan, seed: u64) -> Result<Found, String> {
    let cfg = config(plan, Arc::new(disk.clone()));
    recover_with(cfg, Flusher::Thread, seed)
}

/// [`recover`] of the log `cfg` names, opened with `flusher`.
fn recover_with(cfg: WalConfig, flusher: Flusher, seed: u64) -> Result<Found, String> {
    let mut checkpoint = Vec::new();
    let mut records = Vec::new();
    let (wal, recovery) = Wal::open_with(cfg, flusher, |e| {
        match e {
            Entry::Checkpoint(b) => checkpoint.push(record_number(seed, b)?),
            Entry::Record(b) => records.push(record_number(seed, b)?),
        }
        Ok(())
    })
    .map_err(|e| format!("recovery failed: {e}"))?;
    drop(wal);
    Ok(Found {
        checkpoint,
        records,
        recovery,
    })
}

/// Runs `plan.rounds` rounds of seed `seed` (module doc).
pub fn run(plan: &Plan, seed: u64) -> Result<Coverage, String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut disk = MemStorage::new();
    let mut base: BTreeSet<u64> = BTreeSet::new();
    let mut next = 1u64;
    let mut cov = Coverage::default();
    for round in 0..plan.rounds {
        let stop_at = rng.gen_range(1..=plan.ops_max);
        let how = (plan.crash)(&mut rng);
        let every = plan.checkpoint_every.map(|(lo, hi)| rng.gen_range(lo..=hi));
        let at = |stopped: &Option<String>| match stopped {
            Some(s) => format!("the disk stopped at operation {stop_at} ({s})"),
            None => format!("the round ended before operation {stop_at}"),
        };
        let acks = Arc::new(Acks::default());
        let gate = Arc::new(Gate::new(disk.clone(), stop_at, Arc::clone(&acks)));
        let log = Arc::new(Mutex::new(Appended {
            next,
            numbers: Vec::new(),
        }));
        let session = {
            let (plan, gate, acks, log) = (plan.clone(), gate.clone(), acks.clone(), log.clone());
            let base: Vec<u64> = base.iter().copied().collect();
            std::thread::spawn(move || {
                let r = session(&plan, seed, &gate, &acks, &log, &base, every);
                gate.session_done();
                r
            })
        };
        let stopped = gate
            .wait_stopped_or_done()
            .map_err(|e| format!("seed {seed}: round {round}: {e}"))?;
        if stopped.is_some() {
            acks.wait_quiet();
        }
        let must: Vec<u64> = match plan.must_survive {
            MustSurvive::EveryAcknowledged => acks.snapshot(),
            MustSurvive::AcknowledgedBeforeTheLastSync => {
                let k = gate.acks_synced();
                acks.snapshot()[..k].to_vec()
            }
        };
        let acked = acks.snapshot();
        let ops = gate.ops();
        let crashed = disk.crash(how);
        gate.kill();
        let ctx = |msg: String| {
            format!(
                "seed {seed}: round {round}: {}, then {how:?}: {msg}",
                at(&stopped)
            )
        };
        let checkpoints = session
            .join()
            .map_err(|_| ctx("the session panicked".into()))?
            .map_err(ctx)?;
        let appended = {
            let l = log.lock().unwrap_or_else(|p| p.into_inner());
            next = l.next;
            l.numbers.clone()
        };

        let found = recover(&crashed, plan, seed).map_err(ctx)?;
        let all = found.all();
        check(&found, &all, &base, &appended, &must).map_err(ctx)?;
        // Recovery is repeatable: a second restart finds the same.
        let again =
            recover(&crashed, plan, seed).map_err(|e| ctx(format!("second recovery: {e}")))?;
        if again.all() != all {
            return Err(ctx(format!(
                "a second recovery found {} records, the first {}",
                again.all().len(),
                all.len()
            )));
        }

        cov.rounds += 1;
        cov.ops += ops;
        cov.acked += acked.len() as u64;
        cov.acked_lost += acked.iter().filter(|n| !all.contains(n)).count() as u64;
        cov.checkpoints += checkpoints;
        if let Some(s) = &stopped {
            cov.stopped += 1;
            cov.stopped_at_sync += u64::from(s.starts_with("sync_data") && s.ends_with(".wal"));
            cov.stopped_in_checkpoint += u64::from(s.contains("checkpoint"));
            cov.stopped_in_rotation += u64::from(
                s.starts_with("create") && s.ends_with(".wal") || s.starts_with("sync_dir"),
            );
        }
        cov.torn_cut += u64::from(found.recovery.truncated.is_some());
        cov.recovered_from_checkpoint += u64::from(found.recovery.checkpoint_entries > 0);
        base = all;
        disk = crashed;
    }
    Ok(cov)
}

/// The checks of the module doc.
fn check(
    found: &Found,
    all: &BTreeSet<u64>,
    base: &BTreeSet<u64>,
    appended: &[u64],
    must: &[u64],
) -> Result<(), String> {
    if let Some(w) = found.records.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!(
            "log records out of append order: {} replayed before {}",
            w[0], w[1]
        ));
    }
    let gone: Vec<u64> = base.difference(all).copied().collect();
    if !gone.is_empty() {
        return Err(format!(
            "{} records recovered after the previous crash are gone: {gone:?}",
            gone.len()
        ));
    }
    let new: Vec<u64> = all.difference(base).copied().collect();
    let appended_set: BTreeSet<u64> = appended.iter().copied().collect();
    if let Some(n) = new.iter().find(|n| !appended_set.contains(n)) {
        return Err(format!(
            "record {n} was recovered but never appended in this round (a record lost in an earlier crash came back?)"
        ));
    }
    if new[..] != appended[..new.len()] {
        let hole = appended
            .iter()
            .zip(&new)
            .find(|(a, b)| a != b)
            .map(|(a, _)| *a);
        return Err(format!(
            "the {} records recovered of this round's {} are not a prefix of them: record {hole:?} is missing before later ones",
            new.len(),
            appended.len()
        ));
    }
    let lost: Vec<u64> = must.iter().filter(|n| !all.contains(n)).copied().collect();
    if !lost.is_empty() {
        return Err(format!(
            "{} acknowledged records lost: {lost:?} (of {} that had to survive; recovered {} of {} appended this round, up to record {:?})",
            lost.len(),
            must.len(),
            new.len(),
            appended.len(),
            new.last()
        ));
    }
    Ok(())
}

/// One round's process: opens the log, runs the writers (and the
/// checkpointer), closes the log. Returns the checkpoints committed. An
/// error is a failure only while the machine is up.
fn session(
    plan: &Plan,
    seed: u64,
    gate: &Arc<Gate>,
    acks: &Acks,
    log: &Mutex<Appended>,
    base: &[u64],
    every: Option<usize>,
) -> Result<u64, String> {
    let fail = |what: &str, e: locus_wal::WalError| -> Result<(), String> {
        if gate.is_dead() {
            Ok(())
        } else {
            Err(format!("{what} failed while the machine was up: {e}"))
        }
    };
    let storage: Arc<dyn Storage> = Arc::clone(gate) as Arc<dyn Storage>;
    let wal = match Wal::open(config(plan, storage), |_| Ok(())) {
        Ok((w, _)) => w,
        Err(e) => return fail("open", e).map(|()| 0),
    };
    let wal = &wal;
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..plan.writers)
            .map(|_| {
                s.spawn(move || -> Result<(), String> {
                    for _ in 0..plan.records_per_writer {
                        let (n, lsn) = {
                            let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                            let n = l.next;
                            match wal.append(&record(seed, n)) {
                                Ok(lsn) => {
                                    l.next += 1;
                                    l.numbers.push(n);
                                    (n, lsn)
                                }
                                Err(e) => return fail("append", e),
                            }
                        };
                        match wal.wait(lsn) {
                            Ok(()) => acks.push(n),
                            Err(e) => return fail("wait", e),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let checkpointer = every.map(|every| {
            s.spawn(move || -> Result<u64, String> {
                let mut done = 0;
                let mut at = every;
                while acks.wait_for(at) {
                    at += every;
                    let r = (|| -> locus_wal::Result<()> {
                        // D3: rotate first, then read the state.
                        let first = wal.rotate()?;
                        let state: Vec<u64> = {
                            let l = log.lock().unwrap_or_else(|p| p.into_inner());
                            base.iter().chain(&l.numbers).copied().collect()
                        };
                        let mut ck = wal.checkpoint_writer(first)?;
                        for n in state {
                            ck.entry(&record(seed, n))?;
                        }
                        ck.commit()?;
                        wal.remove_segments_before(first)?;
                        Ok(())
                    })();
                    match r {
                        Ok(()) => done += 1,
                        Err(e) => return fail("checkpoint", e).map(|()| done),
                    }
                }
                Ok(done)
            })
        });
        let mut result = Ok(0);
        for w in writers {
            let r = w.join().map_err(|_| "a writer panicked".to_string());
            if let Err(e) = r.and_then(|r| r) {
                result = Err(e);
            }
        }
        acks.finish();
        if let Some(c) = checkpointer {
            match c
                .join()
                .map_err(|_| "the checkpointer panicked".to_string())
            {
                Ok(Ok(n)) => result = result.map(|_| n),
                Ok(Err(e)) | Err(e) => result = Err(e),
            }
        }
        result
    })
}
