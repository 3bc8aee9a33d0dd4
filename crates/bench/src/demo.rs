//! `locus demo`: the problem and the solution on one graph and one query set.
//!
//! 1. **Ideal**: every value on one machine; every access is local.
//! 2. **Hash-N**: the same graph hash-partitioned over N machines (Pragh's
//!    "Orig"): about (N-1)/N of the one-sided operations are remote.
//! 3. **Split live migration** on the same N machines and the same queries:
//!    the monitor counts accesses, the coordinator moves each hot value to the
//!    machine that reads it (Split+Cache), and, past the paper, gives shared
//!    hot values read-only replicas (Replica). The queries run in a loop while
//!    values move; throughput is reported second by second until it settles
//!    (or a time limit passes), then the same query set is measured again.
//!    Settled means throughput stopped rising after migration began: the
//!    last seconds agree, and all of them come after the first value moved
//!    (by three monitoring intervals at least); a run in which nothing moved
//!    never settles, and says so.
//!
//! The Ideal run's CPU share is measured (process CPU time over worker
//! threads x wall time): if other work on the machine took much of it, the
//! report says so, because every "% of Ideal" is then unreliable.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use locus_coordinator::Mode;
use locus_workloads::traversal::{run_two_hop, start_vertices, Op, RunReport, StartDist, TwoHop};
use serde::Serialize;

use crate::cluster::{self, rmat_csr};
use crate::config::{Config, Dist};
use crate::pragh::{Running, Scheme};
use crate::{BenchError, Reporter, Result};

/// A share of the worker threads' CPU below which the Ideal run counts as disturbed.
const UNDISTURBED_CPU_SHARE_MIN: f64 = 0.7;
/// An Ideal run shorter than this is too short for its CPU share to mean
/// anything (thread start-up and the clock's resolution dominate).
const CPU_SHARE_WALL_S_MIN: f64 = 0.2;
/// Queries per chunk of the recovery loop (a chunk is a fraction of a second).
const RECOVERY_CHUNK_QUERIES: usize = 2_000;
/// Seconds whose throughput must agree within [`SETTLED_SPREAD_MAX`] to call a run settled.
const SETTLED_SECONDS: usize = 3;
/// Largest spread (max - min over mean) of the last seconds of a settled run.
const SETTLED_SPREAD_MAX: f64 = 0.10;

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoSettings {
    /// Cluster, graph and workload (as `locus demo --config` and flags give them).
    pub config: Config,
    /// The migrating schemes to show after Ideal and Hash-N.
    pub migrating: Vec<Scheme>,
    /// The coordinator's monitoring interval (Pragh uses 10 s; the demo 1 s).
    pub interval_ms: u64,
    /// A migrating scheme's recovery loop stops after this long even if
    /// throughput has not settled.
    pub settle_s_max: f64,
}

impl DemoSettings {
    /// Split+Cache and Replica with a 1 s interval, at most 20 s each.
    pub fn new(config: Config) -> DemoSettings {
        DemoSettings {
            config,
            migrating: vec![Scheme::SplitCache, Scheme::Replica],
            interval_ms: 1_000,
            settle_s_max: 20.0,
        }
    }

    /// Rejects settings that cannot work, naming the flag or key.
    pub fn validate(&self) -> Result<()> {
        self.config.validate()?;
        if !(100..=60_000).contains(&self.interval_ms) {
            return Err(BenchError::setting(
                "--interval-ms",
                self.interval_ms,
                "must be 100..=60000",
            ));
        }
        if !(self.settle_s_max >= 1.0 && self.settle_s_max <= 600.0) {
            return Err(BenchError::setting(
                "--settle-s",
                self.settle_s_max,
                "must be 1..=600 seconds",
            ));
        }
        if let Some(s) = self.migrating.iter().find(|s| !s.migrates()) {
            return Err(BenchError::setting(
                "migrating scheme",
                s.name(),
                "must be Split, Split+Cache or Replica",
            ));
        }
        Ok(())
    }
}

/// One scheme's measured run over the demo's query set.
#[derive(Debug, Clone, Serialize)]
pub struct DemoRow {
    /// The scheme ("Ideal", "Hash-8", "Split+Cache", "Replica").
    pub scheme: String,
    /// Machines it ran on.
    pub machines: usize,
    /// Seconds the graph load took.
    pub load_s: f64,
    /// Throughput, latencies and remote rate of the query set.
    #[serde(flatten)]
    pub report: RunReport,
    /// Values moved (or replicas made) before and during the measurement.
    pub values_moved: u64,
    /// Bytes those moves copied.
    pub bytes_moved: u64,
}

/// One second of a migrating scheme's recovery.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Second {
    /// Seconds since the scheme's queries started (end of this second).
    pub t_s: u64,
    /// Queries completed in this second.
    pub throughput_qps: f64,
    /// Remote one-sided operations / all, in this second (migration included).
    pub remote_rate: f64,
    /// Values moved (and replicas made) since the start.
    pub values_moved: u64,
}

/// A migrating scheme's throughput, second by second, as values move.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    /// The scheme.
    pub scheme: String,
    /// Every whole second.
    pub seconds: Vec<Second>,
    /// When throughput settled (the end of the first run of settled seconds),
    /// or `None` if the time limit came first.
    pub settled_after_s: Option<u64>,
    /// The second in which the first value moved (or replica was made), or
    /// `None` if none did before the time limit.
    pub migration_began_s: Option<u64>,
}

/// Something the demo has just measured, for a caller that prints as it goes.
#[derive(Debug, Clone, Copy)]
pub enum DemoEvent<'a> {
    /// The graph is ready.
    Graph {
        /// Vertices.
        vertices: u64,
        /// Stored (directed) edges.
        edges: u64,
        /// Largest degree.
        max_degree: u64,
        /// Seconds to generate it.
        gen_s: f64,
    },
    /// A scheme's measured row.
    Row(&'a DemoRow),
    /// A migrating scheme starts its recovery loop.
    Migrating(Scheme),
    /// One more second of a migrating scheme.
    Second(Scheme, &'a Second),
    /// A migrating scheme's loop ended.
    Settled(Scheme, &'a Recovery),
}

/// What the demo measured.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    /// R-MAT scale.
    pub scale: u32,
    /// Vertices.
    pub vertices: u64,
    /// Stored (directed) edges.
    pub edges: u64,
    /// Largest degree.
    pub max_degree: u64,
    /// Seconds to generate the graph.
    pub gen_s: f64,
    /// Ideal, Hash-N, then each migrating scheme after it settled.
    pub rows: Vec<DemoRow>,
    /// Each migrating scheme's recovery.
    pub recoveries: Vec<Recovery>,
    /// The Ideal run's share of the worker threads' CPU (1.0: undisturbed;
    /// `None` for a run too short to tell).
    pub ideal_cpu_share: Option<f64>,
    /// Things a reader must know (a disturbed Ideal run, a scheme that did not settle).
    pub warnings: Vec<String>,
}

/// Runs the demo, calling `on` with each result as it is measured.
pub fn run(
    s: &DemoSettings,
    r: &Reporter,
    on: &mut dyn FnMut(DemoEvent<'_>),
) -> Result<DemoReport> {
    s.validate()?;
    let c = &s.config;
    let t0 = Instant::now();
    let graph = crate::pragh::Graph::Csr(rmat_csr(&c.graph)?);
    let csr = graph.csr().expect("held as a CSR just above");
    let gen_s = t0.elapsed().as_secs_f64();
    on(DemoEvent::Graph {
        vertices: csr.vertex_count(),
        edges: csr.edge_count(),
        max_degree: csr.max_degree(),
        gen_s,
    });
    let dist = match c.workload.dist {
        Dist::Zipf => StartDist::Zipf {
            theta: c.workload.zipf_theta,
            scope: c.workload.scope,
        },
        Dist::Uniform => StartDist::Uniform,
    };
    let starts = start_vertices(
        csr.vertex_count(),
        c.workload.queries,
        dist,
        c.workload.seed,
        |v| csr.degree(v) > 0,
    )?;
    let q = TwoHop {
        k: c.workload.k,
        pipelined: c.workload.pipelined,
    };
    let threads = c.threads();
    let n = c.cluster.machines;
    let mut warnings = Vec::new();
    let mut rows = Vec::new();

    // Ideal and Hash-N: load, run the query set once.
    let mut ideal_cpu_share = None;
    for (name, machines) in [("Ideal".to_string(), 1), (format!("Hash-{n}"), n)] {
        let e = cluster::build(csr, machines, c, r)?;
        let pb = r.bar(starts.len() as u64, &format!("{name}: queries"));
        let cpu0 = crate::threads::process_cpu_s();
        let wall = Instant::now();
        let report = run_two_hop(&e.stores, e.fabric.counters(), threads, &starts, q, &|d| {
            pb.set_position(d)
        })?;
        let wall_s = wall.elapsed().as_secs_f64();
        pb.finish_and_clear();
        if machines == 1 && wall_s >= CPU_SHARE_WALL_S_MIN {
            if let (Some(a), Some(b)) = (cpu0, crate::threads::process_cpu_s()) {
                let busy = threads.min(crate::output::cores()) as f64;
                let share = ((b - a) / (wall_s * busy)).min(1.0);
                ideal_cpu_share = Some(share);
                if share < UNDISTURBED_CPU_SHARE_MIN {
                    warnings.push(format!(
                        "the Ideal run got {:.0}% of its {} worker threads' CPU: other work on this machine disturbed it, so comparisons with Ideal are unreliable (loadavg {})",
                        share * 100.0,
                        busy,
                        crate::output::loadavg()
                    ));
                }
            }
        }
        rows.push(DemoRow {
            scheme: name,
            machines,
            load_s: e.load_s,
            report,
            values_moved: 0,
            bytes_moved: 0,
        });
        on(DemoEvent::Row(rows.last().expect("just pushed")));
    }

    // Split live migration on the same machines and queries.
    let ops: Vec<Op> = starts.iter().map(|&v| Op::TwoHop(v)).collect();
    let mut recoveries = Vec::new();
    for &scheme in &s.migrating {
        let run = Running::start(scheme, &graph, c, n, s.interval_ms, Mode::Eager, r)?;
        on(DemoEvent::Migrating(scheme));
        let recovery =
            recover(&run, &ops, q, threads, s, on).map_err(|e| e.in_scheme(scheme.name()))?;
        on(DemoEvent::Settled(scheme, &recovery));
        match (recovery.migration_began_s, recovery.settled_after_s) {
            (None, _) => warnings.push(format!(
                "{}: no value moved in {:.0} s (the coordinator approved nothing), so migration never began; its row is the hash placement's",
                scheme.name(),
                s.settle_s_max
            )),
            (Some(_), None) => warnings.push(format!(
                "{} had not settled after {:.0} s (a loaded machine slows migration down); its row is measured anyway",
                scheme.name(),
                s.settle_s_max
            )),
            (Some(_), Some(_)) => {}
        }
        recoveries.push(recovery);
        let label = format!("{}: queries", scheme.name());
        let after = run.run(&ops, q, threads, &label, r)?;
        let (moved, bytes, _) = run.moved();
        let replicas = run
            .driver
            .as_ref()
            .map_or(0, |d| d.stats().replicas_created.load(Ordering::Relaxed));
        rows.push(DemoRow {
            scheme: scheme.name().into(),
            machines: n,
            load_s: run.cluster.load_s,
            report: after.queries,
            values_moved: moved + replicas,
            bytes_moved: bytes,
        });
        on(DemoEvent::Row(rows.last().expect("just pushed")));
    }
    Ok(DemoReport {
        scale: c.graph.scale,
        vertices: csr.vertex_count(),
        edges: csr.edge_count(),
        max_degree: csr.max_degree(),
        gen_s,
        rows,
        recoveries,
        ideal_cpu_share,
        warnings,
    })
}

/// Runs the query set in a loop on `run`'s cluster while its driver moves
/// values, reporting each whole second, until throughput settles or the time
/// limit passes.
fn recover(
    run: &Running,
    ops: &[Op],
    q: TwoHop,
    threads: usize,
    s: &DemoSettings,
    on: &mut dyn FnMut(DemoEvent<'_>),
) -> Result<Recovery> {
    let scheme = run.scheme;
    let counters = run.cluster.fabric.counters();
    let quiet = Reporter::quiet();
    let t0 = Instant::now();
    let limit = Duration::from_secs_f64(s.settle_s_max);
    // Settling needs a few monitoring intervals of migration first.
    let settle_from_s = (3 * s.interval_ms)
        .div_ceil(1000)
        .max(SETTLED_SECONDS as u64);
    let mut done: Vec<f64> = Vec::new();
    let mut seconds: Vec<Second> = Vec::new();
    let mut last_counts = counters.total();
    let mut at = 0usize;
    let mut settled = None;
    while t0.elapsed() < limit && settled.is_none() {
        let chunk: Vec<Op> = (0..RECOVERY_CHUNK_QUERIES)
            .map(|i| ops[(at + i) % ops.len()])
            .collect();
        at = (at + RECOVERY_CHUNK_QUERIES) % ops.len();
        let offset = t0.elapsed().as_secs_f64();
        let report = run.run(&chunk, q, threads, "", &quiet)?;
        done.extend(report.done_at_s.iter().map(|t| t + offset));
        // Close every whole second that has passed.
        let now_s = t0.elapsed().as_secs_f64();
        while (seconds.len() + 1) as f64 <= now_s {
            let k = seconds.len() as f64;
            let count = done.iter().filter(|&&t| t >= k && t < k + 1.0).count();
            let counts = counters.total();
            let delta = counts.minus(&last_counts);
            last_counts = counts;
            let (moved, _, _) = run.moved();
            let replicas = run
                .driver
                .as_ref()
                .map_or(0, |d| d.stats().replicas_created.load(Ordering::Relaxed));
            seconds.push(Second {
                t_s: seconds.len() as u64 + 1,
                throughput_qps: count as f64,
                remote_rate: delta.remote_rate(),
                values_moved: moved + replicas,
            });
            done.retain(|&t| t >= k + 1.0);
            on(DemoEvent::Second(
                scheme,
                seconds.last().expect("just pushed"),
            ));
            if is_settled(&seconds, settle_from_s) {
                settled = Some(seconds.len() as u64);
                break;
            }
        }
    }
    Ok(Recovery {
        scheme: scheme.name().into(),
        migration_began_s: began(&seconds),
        seconds,
        settled_after_s: settled,
    })
}

/// The second in which the first value moved.
fn began(seconds: &[Second]) -> Option<u64> {
    seconds.iter().find(|s| s.values_moved > 0).map(|s| s.t_s)
}

/// Whether throughput stopped rising after migration began: at least
/// `after_s` seconds (and [`SETTLED_SECONDS`]) have passed since the first
/// value moved, and the last [`SETTLED_SECONDS`] agree within
/// [`SETTLED_SPREAD_MAX`].
fn is_settled(seconds: &[Second], after_s: u64) -> bool {
    let Some(first) = seconds.iter().position(|s| s.values_moved > 0) else {
        return false;
    };
    let since = (seconds.len() - first) as u64;
    if since < after_s.max(SETTLED_SECONDS as u64) {
        return false;
    }
    let last = &seconds[seconds.len() - SETTLED_SECONDS..];
    let qps: Vec<f64> = last.iter().map(|s| s.throughput_qps).collect();
    let mean = qps.iter().sum::<f64>() / qps.len() as f64;
    let (lo, hi) = qps
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    mean > 0.0 && (hi - lo) / mean <= SETTLED_SPREAD_MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds of the given throughputs; values start moving in second `from`.
    fn seconds(qps: &[f64], from: usize) -> Vec<Second> {
        qps.iter()
            .enumerate()
            .map(|(i, &q)| Second {
                t_s: i as u64 + 1,
                throughput_qps: q,
                remote_rate: 0.0,
                values_moved: if i + 1 >= from {
                    10 * (i as u64 + 1)
                } else {
                    0
                },
            })
            .collect()
    }

    #[test]
    fn settled_means_the_last_seconds_agree_after_migration_began() {
        let s = seconds(&[100.0, 500.0, 950.0, 980.0, 1000.0], 1);
        assert!(is_settled(&s, 3), "950..1000 spreads 5% of their mean");
        let s = seconds(&[100.0, 500.0, 800.0, 950.0, 1000.0], 1);
        assert!(!is_settled(&s, 3), "still climbing");
        assert!(!is_settled(&seconds(&[1.0], 1), 3));
        assert!(!is_settled(&seconds(&[0.0, 0.0, 0.0], 1), 3), "nothing ran");
    }

    #[test]
    fn a_run_is_not_settled_before_its_first_move_and_never_without_one() {
        // Flat from the start: the old rule called this settled after 3 s,
        // before the coordinator's first approval (issue 58, req. 8).
        let flat = [100.0, 101.0, 99.0, 100.0, 250.0, 400.0, 410.0, 405.0, 408.0];
        let s = seconds(&flat, 5);
        assert_eq!(began(&s), Some(5));
        for n in 3..=7 {
            assert!(
                !is_settled(&s[..n], 3),
                "{n} seconds, first move in second 5"
            );
        }
        assert!(is_settled(&s[..8], 3), "406..410 after the moves began");
        let never = seconds(&flat, 100);
        assert_eq!(began(&never), None);
        assert!(!is_settled(&never, 3), "nothing moved: never settled");
    }

    #[test]
    fn process_cpu_time_grows_with_work() {
        let a = crate::threads::process_cpu_s().unwrap();
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(crate::threads::process_cpu_s().unwrap() > a);
    }

    #[test]
    fn settings_are_validated() {
        let mut s = DemoSettings::new(Config::default());
        s.validate().unwrap();
        s.settle_s_max = 0.0;
        assert!(s.validate().unwrap_err().to_string().contains("--settle-s"));
        let mut s = DemoSettings::new(Config::default());
        s.migrating = vec![Scheme::Orig];
        assert!(s.validate().unwrap_err().to_string().contains("Orig"));
    }
}
