//! Where the CPU went during a measured window: this process's threads
//! grouped by name, the process's share of the machine, and involuntary
//! context switches (issue 13, requirement 7: what makes runs erratic).
//!
//! On 2 vCPUs a run of `bench pragh` has two query workers, a service thread
//! per machine, the monitor, the coordinator and the executors, and other
//! processes besides. A worker that busy-waits on the latency model and is
//! preempted loses whole scheduler slices, so a run's throughput depends on
//! how much CPU the background threads and other processes took while it was
//! measured. [`Usage::since`] says that for each run, from Linux's per-thread
//! accounting in nanoseconds (`/proc/self/task/*/schedstat`; the 10 ms ticks
//! of `stat` where it is missing) and the process's own (`getrusage`, which
//! keeps exited threads); elsewhere it is empty and says so. (Ticks hid what
//! mattered: uniform Split's whole background cost is about 10 ms a window.)
//! It also says how much CPU the hypervisor withheld from
//! this VM's vCPUs (steal time, `/proc/stat`): time no thread of any process
//! here could run, which no per-thread count shows.

use std::collections::BTreeMap;

use serde::Serialize;

/// A snapshot of the process's CPU accounting.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Wall clock of the snapshot.
    at: Option<std::time::Instant>,
    /// CPU nanoseconds of each live thread, by thread id, with its group.
    threads: BTreeMap<u32, (String, u64)>,
    /// CPU nanoseconds of the whole process, exited threads included.
    process_ns: u64,
    /// Involuntary context switches of each live thread, by thread id.
    involuntary: BTreeMap<u32, u64>,
    /// Involuntary context switches of the whole process, exited threads included.
    process_involuntary: u64,
    /// Steal ticks of all CPUs since boot (`/proc/stat`), if readable.
    steal_ticks: Option<u64>,
}

/// The group of threads that ended between two snapshots (a pool made and
/// dropped inside the window: `bench pragh`'s query workers).
pub const EXITED: &str = "exited";

/// CPU use between two snapshots.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Usage {
    /// Wall seconds between the snapshots.
    pub wall_s: f64,
    /// CPU seconds of the process over `wall_s * cores`: the share of the
    /// machine this process had (the rest was idle or went to other processes).
    pub machine_share: f64,
    /// CPU seconds by thread group (the thread name without its trailing
    /// number: `locus-worker`, `locus-service`, ...); `exited` is what threads
    /// that ended in between used.
    pub cpu_s: BTreeMap<String, f64>,
    /// Involuntary context switches (preemptions) by thread group.
    pub preempted: BTreeMap<String, u64>,
    /// CPU time the hypervisor ran something else on this VM's vCPUs (steal),
    /// over `wall_s * cores`: 0.1 means a tenth of the machine was taken
    /// away while measuring.
    pub steal_share: f64,
    /// False where the accounting could not be read (not Linux).
    pub available: bool,
}

/// The group of a thread name: its name without a trailing `-N`, `N` or `#N`
/// (the kernel truncates names to 15 bytes, which the group keeps).
pub fn group_of(name: &str) -> String {
    let t = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let t = t.trim_end_matches(['-', '_', '#', ' ']);
    if t.is_empty() {
        name.to_string()
    } else {
        t.to_string()
    }
}

/// Fields 14 and 15 (utime, stime) of a `stat` line, after the `(comm)` field
/// (which may hold spaces and parentheses).
fn stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The USER_HZ tick, 100 per second on Linux.
const TICK_NS: u64 = 10_000_000;

/// Time on a CPU (the first field of a task's `schedstat`), nanoseconds.
fn schedstat_ns(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

/// The steal field (the eighth number) of the `cpu` line of `/proc/stat`.
fn steal_of(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

fn involuntary_of(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The whole process's resource use (`getrusage(RUSAGE_SELF)`: every
/// thread, exited ones included), if the OS says.
#[allow(unsafe_code)] // one FFI call filling a struct we own
pub fn rusage() -> Option<libc::rusage> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given when it returns 0.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    // SAFETY: rc == 0, so the struct was written.
    (rc == 0).then(|| unsafe { ru.assume_init() })
}

/// CPU seconds this process has used (all threads), if the OS says.
pub fn process_cpu_s() -> Option<f64> {
    let u = rusage()?;
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(tv(u.ru_utime) + tv(u.ru_stime))
}

/// Involuntary context switches of the whole process, exited threads included.
fn process_involuntary() -> u64 {
    rusage().map_or(0, |u| u64::try_from(u.ru_nivcsw).unwrap_or(0))
}

impl Snapshot {
    /// Reads the accounting now (empty if it cannot be read).
    pub fn take() -> Snapshot {
        let mut s = Snapshot {
            at: Some(std::time::Instant::now()),
            ..Snapshot::default()
        };
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return s;
        };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
                continue;
            };
            let p = e.path();
            let Ok(comm) = std::fs::read_to_string(p.join("comm")) else {
                continue; // the thread ended while we looked
            };
            let ns = std::fs::read_to_string(p.join("schedstat"))
                .ok()
                .and_then(|st| schedstat_ns(&st))
                .or_else(|| {
                    let stat = std::fs::read_to_string(p.join("stat")).ok()?;
                    Some(stat_ticks(&stat)? * TICK_NS)
                });
            if let Some(ns) = ns {
                s.threads.insert(tid, (group_of(comm.trim()), ns));
            }
            if let Some(n) = std::fs::read_to_string(p.join("status"))
                .ok()
                .and_then(|st| involuntary_of(&st))
            {
                s.involuntary.insert(tid, n);
            }
        }
        // Read after the threads, so it covers at least what they add up to.
        s.process_ns = process_cpu_s().map_or(0, |c| (c * 1e9) as u64);
        s.process_involuntary = process_involuntary();
        s.steal_ticks = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|st| steal_of(&st));
        s
    }
}

impl Usage {
    /// What happened between `before` and `after` (taken in that order).
    pub fn since(before: &Snapshot, after: &Snapshot) -> Usage {
        let wall_s = match (before.at, after.at) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        if after.threads.is_empty() {
            return Usage {
                wall_s,
                ..Usage::default()
            };
        }
        let ns_s = 1e-9;
        let mut cpu_s: BTreeMap<String, f64> = BTreeMap::new();
        let mut preempted: BTreeMap<String, u64> = BTreeMap::new();
        let mut live_ns = 0u64;
        for (tid, (group, ns)) in &after.threads {
            let was = before.threads.get(tid).map_or(0, |t| t.1);
            let d = ns.saturating_sub(was);
            live_ns += d;
            *cpu_s.entry(group.clone()).or_default() += d as f64 * ns_s;
            let inv = after.involuntary.get(tid).copied().unwrap_or(0);
            let inv_was = before.involuntary.get(tid).copied().unwrap_or(0);
            *preempted.entry(group.clone()).or_default() += inv.saturating_sub(inv_was);
        }
        let process = after.process_ns.saturating_sub(before.process_ns);
        let exited = process.saturating_sub(live_ns);
        cpu_s.insert(EXITED.into(), exited as f64 * ns_s);
        let live_preempted: u64 = preempted.values().sum();
        let process_preempted = after
            .process_involuntary
            .saturating_sub(before.process_involuntary);
        preempted.insert(
            EXITED.into(),
            process_preempted.saturating_sub(live_preempted),
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let steal = match (before.steal_ticks, after.steal_ticks) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        Usage {
            wall_s,
            machine_share: process as f64 * ns_s / (wall_s * cores).max(1e-9),
            cpu_s,
            preempted,
            steal_share: (steal * TICK_NS) as f64 * ns_s / (wall_s * cores).max(1e-9),
            available: true,
        }
    }

    /// Adds `other`, a window after this one: wall time, CPU and preemptions
    /// add up; the shares become those of both windows together.
    pub fn add(&mut self, other: &Usage) {
        let wall = self.wall_s + other.wall_s;
        let weighted = |a: f64, b: f64| (a * self.wall_s + b * other.wall_s) / wall.max(1e-9);
        self.machine_share = weighted(self.machine_share, other.machine_share);
        self.steal_share = weighted(self.steal_share, other.steal_share);
        self.wall_s = wall;
        for (g, s) in &other.cpu_s {
            *self.cpu_s.entry(g.clone()).or_default() += s;
        }
        for (g, n) in &other.preempted {
            *self.preempted.entry(g.clone()).or_default() += n;
        }
        self.available |= other.available;
    }

    /// CPU seconds of the groups named in `groups`.
    pub fn cpu_of(&self, groups: &[&str]) -> f64 {
        groups.iter().filter_map(|g| self.cpu_s.get(*g)).sum()
    }

    /// Preemptions of the groups named in `groups`.
    pub fn preempted_of(&self, groups: &[&str]) -> u64 {
        groups.iter().filter_map(|g| self.preempted.get(*g)).sum()
    }

    /// Share of the process's CPU that went to groups not in `groups` (for
    /// `bench pragh`: everything but the query workers).
    pub fn share_not(&self, groups: &[&str]) -> f64 {
        let all: f64 = self.cpu_s.values().sum();
        if all <= 0.0 {
            return 0.0;
        }
        (all - self.cpu_of(groups)) / all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_add_up_with_their_shares_weighted_by_time() {
        let one = |wall_s: f64, share: f64, cpu: f64, pre: u64| Usage {
            wall_s,
            machine_share: share,
            cpu_s: [("exited".to_string(), cpu)].into(),
            preempted: [("exited".to_string(), pre)].into(),
            steal_share: share / 10.0,
            available: true,
        };
        let mut u = one(1.0, 0.5, 1.0, 3);
        u.add(&one(3.0, 1.0, 6.0, 4));
        assert_eq!(u.wall_s, 4.0);
        assert!((u.machine_share - 0.875).abs() < 1e-12, "{u:?}");
        assert!((u.steal_share - 0.0875).abs() < 1e-12, "{u:?}");
        assert_eq!(u.cpu_s["exited"], 7.0);
        assert_eq!(u.preempted_of(&["exited"]), 7);
        let mut empty = Usage::default();
        empty.add(&u);
        assert_eq!(empty, u);
    }

    #[test]
    fn groups_drop_the_thread_number() {
        assert_eq!(group_of("locus-worker-1"), "locus-worker");
        assert_eq!(group_of("locus-service-12"), "locus-service");
        assert_eq!(group_of("locus-coordinat"), "locus-coordinat");
        assert_eq!(group_of("main"), "main");
        assert_eq!(group_of("7"), "7");
    }

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let stat = "cpu  3244041 125 408072 1029174 6471 0 12566 3133 0 0\n\
                    cpu0 1610122 112 194348 537813 1852 0 5722 1561 0 0\n";
        assert_eq!(steal_of(stat), Some(3133));
        // Kernels before 2.6.11 have no steal field.
        assert_eq!(steal_of("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(steal_of("intr 5\n"), None);
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "123 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(stat_ticks(line), Some(300));
        assert_eq!(stat_ticks("garbage"), None);
    }

    #[test]
    fn schedstat_gives_nanoseconds_on_a_cpu() {
        assert_eq!(schedstat_ns("81663 2261377 1\n"), Some(81663));
        assert_eq!(schedstat_ns(""), None);
        assert_eq!(schedstat_ns("x 1 2"), None);
    }

    /// This thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`), nanoseconds.
    #[allow(unsafe_code)] // one FFI call filling a struct we own
    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec it is given.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// A thread that used 25 ms of CPU is counted to well within a tick:
    /// the 10 ms ticks of `stat` would say 20 or 30 ms.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_threads_cpu_is_counted_finer_than_a_tick() {
        let before = Snapshot::take();
        let (used_tx, used_rx) = std::sync::mpsc::channel();
        let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("tick-test-1".into())
            .spawn(move || {
                let mut x = 0u64;
                while thread_cpu_ns() < 25_000_000 {
                    for _ in 0..1000 {
                        x = x.wrapping_mul(31).wrapping_add(1);
                    }
                    std::hint::black_box(x);
                }
                used_tx.send(thread_cpu_ns()).unwrap();
                let _ = end_rx.recv(); // stay alive until the snapshot
            })
            .unwrap();
        let used = used_rx.recv().unwrap();
        let after = Snapshot::take();
        end_tx.send(()).unwrap();
        t.join().unwrap();
        let counted = Usage::since(&before, &after).cpu_of(&["tick-test"]);
        let used = used as f64 * 1e-9;
        assert!(
            (counted - used).abs() < 0.002,
            "counted {counted} s, the thread says {used} s"
        );
    }

    #[test]
    fn a_busy_thread_shows_up_in_its_group() {
        let before = Snapshot::take();
        let t = std::thread::Builder::new()
            .name("spin-test-3".into())
            .spawn(|| {
                let t0 = std::time::Instant::now();
                let mut x = 0u64;
                while t0.elapsed() < std::time::Duration::from_millis(300) {
                    x = x.wrapping_mul(31).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
            .unwrap();
        // Snapshot while it still runs, so it is a live thread.
        std::thread::sleep(std::time::Duration::from_millis(250));
        let after = Snapshot::take();
        t.join().unwrap();
        let u = Usage::since(&before, &after);
        if !cfg!(target_os = "linux") {
            assert!(!u.available);
            return;
        }
        assert!(u.available);
        // Bounded below loosely: a loaded machine may give it little CPU, but
        // a thread that spun for 250 ms got at least one tick.
        assert!(u.cpu_of(&["spin-test"]) > 0.0, "{u:?}");
        assert!(u.wall_s >= 0.2);
        assert!(u.share_not(&["spin-test"]) < 1.0);
        // A thread that ends inside the window is counted as exited.
        let before = Snapshot::take();
        std::thread::spawn(|| {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_millis(150) {
                std::hint::black_box(t0.elapsed());
            }
        })
        .join()
        .unwrap();
        let u = Usage::since(&before, &Snapshot::take());
        assert!(u.cpu_of(&[EXITED]) > 0.0, "{u:?}");
    }
}
