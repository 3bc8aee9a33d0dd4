//! `locus bench pragh <experiment>`: the traversal benchmark of Pragh 6, every
//! scheme on the same graph and the same operation sequence in one run.
//!
//! A run of a scheme: build and load the cluster; for schemes that migrate,
//! start the monitor/coordinator/executor driver and run a warm-up sequence
//! (same distribution, other seed) until a round approves no migration;
//! then run the measured sequence, repeated until it lasts at least the
//! preset's measuring time, with the driver still running. Remote rate and
//! latencies come from the measured part only.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use locus_coordinator::{Driver, DriverConfig, Mode, PolicyConfig};
use locus_graph::Csr;
use locus_store::StoreConfig;
use locus_workloads::traversal::{
    mix_ops, repeat_fresh, run_ops, start_vertices, MixReport, Op, StartDist, TwoHop,
};
use serde::Serialize;

use crate::cluster::{self, progress, Embedded};
use crate::config::Config;
use crate::demo::rmat_csr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// Every scheme, skewed starts (Pragh Table 1, Fig. 10).
    Schemes,
    /// Every scheme, uniform starts (Pragh 6.1 "Uniform workload").
    Uniform,
    /// Orig and Split+Cache as the start scope grows (Pragh Fig. 11).
    Scope,
    /// 50% updates: update latency with and without migration (Pragh Fig. 12).
    PutHeavy,
    /// Throughput timeline from a cold start, eager vs deferred (Pragh Fig. 14).
    EagerDeferred,
    /// Throughput timeline as the start scope switches, Shard vs Split+Cache (Pragh Fig. 15).
    Dynamic,
}

#[derive(Args, Debug)]
pub struct PraghArgs {
    /// Which experiment.
    #[arg(value_enum)]
    pub experiment: Experiment,
    /// quick (a few minutes here) or full (larger graph, Pragh's 10 s interval).
    #[arg(long, default_value = "quick")]
    pub preset: String,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// Directory for `pragh-<experiment>.json` and its PNG plots.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// R-MAT scale (overrides the preset).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Workload seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Run only these schemes (comma-separated: Ideal,Orig,Shard,Split,Cache,Split+Cache,Replica; Replica is Split+Cache with read-only replicas).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Vec<String>,
}

/// The schemes of Pragh 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Ideal,
    Orig,
    Shard,
    Split,
    Cache,
    SplitCache,
    /// Split+Cache with read-only replicas of shared values (a Locus extension).
    Replica,
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Ideal => "Ideal",
            Scheme::Orig => "Orig",
            Scheme::Shard => "Shard",
            Scheme::Split => "Split",
            Scheme::Cache => "Cache",
            Scheme::SplitCache => "Split+Cache",
            Scheme::Replica => "Replica",
        }
    }

    fn migrates(self) -> bool {
        matches!(self, Scheme::Split | Scheme::SplitCache | Scheme::Replica)
    }
}

/// Settings of one experiment run.
#[derive(Debug, Clone)]
pub struct Preset {
    pub scale: u32,
    pub machines: usize,
    pub threads: usize,
    /// Operations per warm-up round and per measured sequence.
    pub ops: usize,
    pub measure_s_min: f64,
    pub warm_s_max: f64,
    pub interval_ms: u64,
    pub update_fraction: f64,
    pub k: usize,
    pub seed: u64,
}

impl Preset {
    fn new(a: &PraghArgs) -> Result<Preset, String> {
        let mut p = match a.preset.as_str() {
            "quick" => Preset {
                scale: 16,
                machines: 8,
                threads: locus_fabric::pool::default_threads(),
                ops: 20_000,
                measure_s_min: 2.0,
                warm_s_max: 30.0,
                interval_ms: 1_000,
                update_fraction: 0.05,
                k: 100,
                seed: a.seed,
            },
            "full" => Preset {
                scale: 20,
                machines: 8,
                threads: locus_fabric::pool::default_threads(),
                ops: 100_000,
                measure_s_min: 10.0,
                warm_s_max: 120.0,
                interval_ms: 10_000,
                update_fraction: 0.05,
                k: 100,
                seed: a.seed,
            },
            other => return Err(format!("--preset {other}: expected quick or full")),
        };
        if let Some(s) = a.scale {
            p.scale = s;
        }
        if let Some(t) = a.threads {
            if t == 0 {
                return Err("--threads must be positive".into());
            }
            p.threads = t;
        }
        Ok(p)
    }
}

/// One row of an experiment's JSON (the fields the issue names, plus context).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scheme: String,
    pub scope: Option<u64>,
    pub throughput_qps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub remote_rate: f64,
    /// Share of vertices held away from their key's machine at the end
    /// (Split schemes), or keys moved with their shards (Shard).
    pub migrated_fraction: f64,
    /// Values (Split) or keys (Shard) moved in all, moves back and forth included.
    pub values_moved: u64,
    pub bytes_moved: u64,
    pub vs_orig: f64,
    pub vs_ideal: f64,
    pub machines: usize,
    pub threads: usize,
    pub queries: u64,
    pub updates: u64,
    pub update_p50_us: f64,
    pub update_p99_us: f64,
    pub update_p999_us: f64,
    /// Updates forwarded to a machine holding a migrated value (messages / 2) over updates.
    pub forwarded_share: f64,
    pub warm_s: f64,
    pub migrations_approved: u64,
    /// Coordinator decisions to leave a key put because several machines want it.
    pub contended_decisions: u64,
    #[serde(skip)]
    pub update_latencies_us: Vec<f64>,
}

pub struct Workload<'a> {
    csr: &'a Csr,
    /// Vertices with a value (sorted): update endpoints are drawn from them.
    endpoints: Vec<u32>,
    warm: Vec<Op>,
    measure: Vec<Op>,
}

/// The vertices a loaded graph has values for (degree > 0), sorted.
fn endpoints(csr: &Csr) -> Vec<u32> {
    (0..csr.vertex_count() as u32)
        .filter(|&v| csr.degree(v) > 0)
        .collect()
}

fn workload<'a>(csr: &'a Csr, p: &Preset, dist: StartDist) -> Result<Workload<'a>, String> {
    let eligible = |v: u32| csr.degree(v) > 0;
    let n = csr.vertex_count();
    // The measured and warm-up sequences share the start set (same seed for
    // the scope choice) but draw different operations from it.
    let starts = start_vertices(n, p.ops * 2, dist, p.seed, eligible).map_err(|e| e.to_string())?;
    let (warm, measure) = starts.split_at(p.ops);
    let ends = endpoints(csr);
    Ok(Workload {
        csr,
        warm: mix_ops(warm, p.update_fraction, &ends, p.seed ^ 1),
        measure: mix_ops(measure, p.update_fraction, &ends, p.seed ^ 2),
        endpoints: ends,
    })
}

/// What placement alone can achieve for a workload: every GET of a two-hop
/// query (the start and its first `k` neighbours), attributed to the machine
/// that runs the query. With one copy per value the best any placement can
/// do is to put each value where it is read most; the rest of its reads stay
/// remote whatever the policy (Pragh 6.1: "competition on vertices shared by
/// multiple queries running on different machines").
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PlacementBound {
    /// GETs of the measured sequence's queries.
    pub gets: u64,
    /// Share of GETs remote under hash placement (Orig).
    pub hash_remote_gets: f64,
    /// Share of GETs remote with each value at its most frequent reader.
    pub best_single_copy_remote_gets: f64,
    /// Vertices read by more than one machine.
    pub shared_vertices: u64,
}

fn placement_bound(csr: &Csr, ops: &[Op], machines: usize, k: usize) -> PlacementBound {
    use std::collections::HashMap;
    let mut counts: HashMap<u32, [u32; 8]> = HashMap::new();
    let mut gets = 0u64;
    let mut hash_remote = 0u64;
    let m = machines.min(8);
    let mut note = |u: u32, at: usize| {
        gets += 1;
        if locus_store::home_of(u, machines) as usize != at {
            hash_remote += 1;
        }
        counts.entry(u).or_default()[at % m] += 1;
    };
    for op in ops {
        if let Op::TwoHop(s) = op {
            let at = locus_store::home_of(*s, machines) as usize;
            note(*s, at);
            for &u in csr.neighbors(*s).iter().take(k) {
                note(u, at);
            }
        }
    }
    let mut best_remote = 0u64;
    let mut shared = 0u64;
    for c in counts.values() {
        let total: u64 = c.iter().map(|&x| x as u64).sum();
        let max = c.iter().copied().max().unwrap_or(0) as u64;
        best_remote += total - max;
        shared += (c.iter().filter(|&&x| x > 0).count() > 1) as u64;
    }
    PlacementBound {
        gets,
        hash_remote_gets: hash_remote as f64 / gets.max(1) as f64,
        best_single_copy_remote_gets: best_remote as f64 / gets.max(1) as f64,
        shared_vertices: shared,
    }
}

fn base_config(p: &Preset) -> Config {
    let mut c = Config::default();
    c.cluster.threads = p.threads;
    c.cluster.machines = p.machines;
    c.graph.scale = p.scale;
    c.store.location_cache_mb = 0;
    c
}

fn driver_config(p: &Preset, mode: Mode, scheme: Scheme) -> DriverConfig {
    DriverConfig {
        policy: PolicyConfig {
            mode,
            interval_ms: p.interval_ms,
            dwell_ms: p.interval_ms,
            forget_after_ms: p.interval_ms * 3,
            replicas: scheme == Scheme::Replica,
            ..PolicyConfig::default()
        },
        ..DriverConfig::default()
    }
}

fn build(scheme: Scheme, csr: &Csr, p: &Preset) -> Result<Embedded, String> {
    let c = base_config(p);
    let machines = if scheme == Scheme::Ideal {
        1
    } else {
        p.machines
    };
    cluster::build_with(csr, machines, &c, |s: &mut StoreConfig| match scheme {
        Scheme::Ideal | Scheme::Orig => s.cache_bytes_max = 0,
        Scheme::Shard => {
            s.cache_bytes_max = 0;
            s.shards_per_machine = locus_store::shard::SHARDS_PER_MACHINE_DEFAULT;
            // Room for the shards a machine may receive (the plan allows 2x its share).
            s.buckets_per_machine *= 2;
            s.overflow_buckets_per_machine *= 2;
            s.value_region_bytes *= 2;
        }
        Scheme::Cache | Scheme::SplitCache => s.cache_bytes_max = 128 << 20,
        Scheme::Replica => {
            s.cache_bytes_max = 128 << 20;
            s.replica_bytes_max = (s.value_region_bytes / 4).min(256 << 20) / 8 * 8;
        }
        Scheme::Split => {
            // The cache still counts accesses for the monitor, but no lookup uses it.
            s.cache_bytes_max = 128 << 20;
            s.cache_lookups = false;
        }
    })
}

fn run_seq(e: &Embedded, p: &Preset, ops: &[Op], label: &str) -> Result<MixReport, String> {
    let pb = progress(ops.len() as u64, label);
    let r = run_ops(
        &e.store,
        e.fabric.counters(),
        p.threads,
        ops,
        TwoHop {
            k: p.k,
            pipelined: false,
        },
        &|d| pb.set_position(d),
    );
    pb.finish_and_clear();
    r.map_err(|e| e.to_string())
}

/// Runs one scheme: load, warm up (and migrate), measure.
pub fn run_scheme(scheme: Scheme, w: &Workload, p: &Preset, mode: Mode) -> Result<Row, String> {
    let e = build(scheme, w.csr, p)?;
    let _services = e.store.spawn_services().map_err(|x| x.to_string())?;
    let driver = if scheme.migrates() {
        Some(
            Driver::start(e.store.clone(), driver_config(p, mode, scheme))
                .map_err(|x| x.to_string())?,
        )
    } else {
        None
    };
    // Warm-up: fills caches; for migrating schemes, runs until a round of at
    // least one interval approves nothing new.
    let t0 = Instant::now();
    let mut shard_moved = (0u64, 0u64);
    if scheme == Scheme::Shard {
        run_seq(&e, p, &w.warm, "Shard: warm-up")?;
        shard_moved = move_shards_optimally(&e, w, p)?;
    }
    let mut last_approved = u64::MAX;
    let mut round = 1u64;
    let mut warm_round = |e: &Embedded| -> Result<(), String> {
        round += 1;
        let ops = repeat_fresh(&w.warm, round, 1, &w.endpoints);
        run_seq(e, p, &ops, &format!("{}: warm-up", scheme.name())).map(|_| ())
    };
    loop {
        let round_start = Instant::now();
        warm_round(&e)?;
        let Some(d) = &driver else { break };
        if round_start.elapsed() < Duration::from_millis(p.interval_ms + p.interval_ms / 2) {
            // Keep the round going until a full interval has been reported.
            std::thread::sleep(Duration::from_millis(10));
            while round_start.elapsed() < Duration::from_millis(p.interval_ms + p.interval_ms / 2) {
                warm_round(&e)?;
            }
        }
        d.wait_drained(Duration::from_secs(30));
        // Settled when a round approves no migration and no replica.
        let approved = d.stats().approved.load(Ordering::Relaxed)
            + d.stats().replicas_approved.load(Ordering::Relaxed);
        if approved == last_approved || t0.elapsed().as_secs_f64() > p.warm_s_max {
            break;
        }
        last_approved = approved;
    }
    let warm_s = t0.elapsed().as_secs_f64();
    if let Some(d) = &driver {
        if let Some(err) = d.error() {
            return Err(format!("{}: migration failed: {err}", scheme.name()));
        }
    }
    // Measure: repeat the sequence until it lasts long enough.
    let probe = Instant::now();
    let first = run_seq(&e, p, &w.measure, &format!("{}: measuring", scheme.name()))?;
    let took = probe.elapsed().as_secs_f64();
    let report = if took >= p.measure_s_min {
        first
    } else {
        let reps = (p.measure_s_min / took.max(1e-3)).ceil() as usize;
        // Repetitions 1.. insert edges the probe (repetition 0) did not.
        let ops = repeat_fresh(&w.measure, 1, reps, &w.endpoints);
        run_seq(&e, p, &ops, &format!("{}: measuring", scheme.name()))?
    };
    let (bytes_moved, moved, approved) =
        driver
            .as_ref()
            .map_or((shard_moved.1, shard_moved.0, 0), |d| {
                (
                    d.stats().bytes_moved.load(Ordering::Relaxed),
                    d.stats().moved.load(Ordering::Relaxed),
                    d.stats().approved.load(Ordering::Relaxed),
                )
            });
    // The share of vertices whose value is away from its key's machine now.
    let away = if scheme.migrates() {
        let mut w0 = e.store.worker(0).map_err(|x| x.to_string())?;
        let mut away = 0u64;
        for v in 0..w.csr.vertex_count() as u32 {
            if w.csr.degree(v) == 0 {
                continue;
            }
            let word = w0.address_word(v).map_err(|x| x.to_string())?;
            let home = e.store.owner(v);
            if locus_store::addr::Addr::decode(word).is_some_and(|a| a.holder(home) != home) {
                away += 1;
            }
        }
        Some(away)
    } else {
        None
    };
    let contended = driver
        .and_then(|d| d.stop())
        .map_or(0, |c| c.stats().contended);
    let loaded = (0..w.csr.vertex_count() as u32)
        .filter(|&v| w.csr.degree(v) > 0)
        .count()
        .max(1);
    let q = &report.queries;
    let ul = &report.update_latencies_us;
    let pct = |p: f64| -> f64 {
        if ul.is_empty() {
            return 0.0;
        }
        ul[((p * ul.len() as f64).ceil() as usize).clamp(1, ul.len()) - 1]
    };
    Ok(Row {
        scheme: scheme.name().into(),
        scope: None,
        throughput_qps: q.throughput_qps,
        p50_us: q.p50_us,
        p99_us: q.p99_us,
        p999_us: q.p999_us,
        remote_rate: q.remote_rate,
        migrated_fraction: away.unwrap_or(moved) as f64 / loaded as f64,
        values_moved: moved,
        bytes_moved,
        vs_orig: 0.0,
        vs_ideal: 0.0,
        machines: if scheme == Scheme::Ideal {
            1
        } else {
            p.machines
        },
        threads: p.threads,
        queries: q.queries,
        updates: ul.len() as u64,
        update_p50_us: pct(0.5),
        update_p99_us: pct(0.99),
        update_p999_us: pct(0.999),
        forwarded_share: report.remote_sends as f64 / 2.0 / (ul.len().max(1)) as f64,
        warm_s,
        migrations_approved: approved,
        contended_decisions: contended,
        update_latencies_us: report.update_latencies_us.clone(),
    })
}

/// The shard baseline's plan and move (Pragh 6: "optimal migration plans ...
/// by tracking every access", tracking cost not charged): the warm-up
/// sequence's accesses are counted per shard and machine offline, the plan
/// sends each shard to its busiest accessor within 2x a machine's share of
/// keys, and the shards move with traffic paused. Returns (keys, bytes) moved.
fn move_shards_optimally(e: &Embedded, w: &Workload, p: &Preset) -> Result<(u64, u64), String> {
    let store = &e.store;
    let map = store
        .shard_map()
        .ok_or("Shard scheme without a shard map")?;
    let shards = map.shards() as usize;
    let machines = store.machines();
    let mut counts = vec![vec![0u64; machines]; shards];
    for op in &w.warm {
        let at = store.owner(op.start()) as usize;
        match *op {
            Op::TwoHop(s) => {
                counts[map.shard_of(s) as usize][at] += 1;
                for &u in w.csr.neighbors(s).iter().take(p.k) {
                    counts[map.shard_of(u) as usize][at] += 1;
                }
            }
            Op::InsertEdge(v, _) => counts[map.shard_of(v) as usize][at] += 1,
        }
    }
    let mut keys = vec![0u64; shards];
    for v in 0..w.csr.vertex_count() as u32 {
        if w.csr.degree(v) > 0 {
            keys[map.shard_of(v) as usize] += 1;
        }
    }
    let current: Vec<u8> = (0..shards as u32).map(|s| map.owner_of_shard(s)).collect();
    let total: u64 = keys.iter().sum();
    let moves = locus_store::shard::plan(&counts, &keys, &current, total * 2 / machines as u64 + 1);
    eprintln!("Shard: moving {} of {} shards", moves.len(), shards);
    store.move_shards(&moves).map_err(|e| e.to_string())
}

/// A point of a throughput timeline.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TimePoint {
    pub t_s: f64,
    pub throughput_qps: f64,
}

/// One timeline of a timeline experiment.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub scheme: String,
    pub mode: String,
    pub points: Vec<TimePoint>,
    /// Times (s) when the workload switched (dynamic).
    pub switches_s: Vec<f64>,
    /// Per switch: seconds until throughput first reached 90% of the
    /// phase's final level (`None` if it never did).
    pub recover_s: Vec<Option<f64>>,
    pub migrations_approved: u64,
    pub bytes_moved: u64,
}

/// Runs `phases` (each an op sequence, cycled for `phase_s` seconds) on a
/// fresh cluster of `scheme`, recording query completions; the driver runs
/// from the start (no warm-up). Shard re-plans one interval into each phase.
fn timeline(
    scheme: Scheme,
    mode: Mode,
    csr: &Csr,
    p: &Preset,
    phases: &[Vec<Op>],
    phase_s: f64,
    bin_s: f64,
) -> Result<Timeline, String> {
    let ends = endpoints(csr);
    let e = build(scheme, csr, p)?;
    let _services = e.store.spawn_services().map_err(|x| x.to_string())?;
    let driver = if scheme.migrates() {
        Some(
            Driver::start(e.store.clone(), driver_config(p, mode, scheme))
                .map_err(|x| x.to_string())?,
        )
    } else {
        None
    };
    let chunk = 4_000usize;
    let t0 = Instant::now();
    let mut done: Vec<f64> = Vec::new();
    let mut switches = Vec::new();
    let mut bytes_moved = 0;
    for (i, ops) in phases.iter().enumerate() {
        let start = t0.elapsed().as_secs_f64();
        switches.push(start);
        let mut replanned = scheme != Scheme::Shard;
        let mut at = 0usize;
        while t0.elapsed().as_secs_f64() - start < phase_s {
            if !replanned && t0.elapsed().as_secs_f64() - start >= p.interval_ms as f64 / 1000.0 {
                let w = Workload {
                    csr,
                    endpoints: Vec::new(),
                    warm: ops.clone(),
                    measure: Vec::new(),
                };
                bytes_moved += move_shards_optimally(&e, &w, p)?.1;
                replanned = true;
            }
            let rep = (at / ops.len().max(1)) as u64;
            let seq: Vec<Op> = repeat_fresh(ops, rep, 2, &ends)
                .into_iter()
                .skip(at % ops.len().max(1))
                .take(chunk)
                .collect();
            at += chunk;
            let offset = t0.elapsed().as_secs_f64();
            let r = run_seq(&e, p, &seq, &format!("{} phase {i}", scheme.name()))?;
            done.extend(
                r.done_at_s
                    .iter()
                    .zip(&r.done_is_query)
                    .filter(|(_, q)| **q)
                    .map(|(t, _)| t + offset),
            );
        }
    }
    let end = t0.elapsed().as_secs_f64();
    let (approved, moved_bytes) = driver.as_ref().map_or((0, bytes_moved), |d| {
        (
            d.stats().approved.load(Ordering::Relaxed),
            d.stats().bytes_moved.load(Ordering::Relaxed),
        )
    });
    if let Some(d) = driver {
        if let Some(err) = d.error() {
            return Err(format!("{}: migration failed: {err}", scheme.name()));
        }
        d.stop();
    }
    // Whole bins only: a last partial bin would read as a drop.
    let bins = ((end / bin_s).floor() as usize).max(1);
    let mut counts = vec![0u64; bins];
    for t in &done {
        if let Some(c) = counts.get_mut((t / bin_s) as usize) {
            *c += 1;
        }
    }
    let points: Vec<TimePoint> = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| TimePoint {
            t_s: (i as f64 + 0.5) * bin_s,
            throughput_qps: c as f64 / bin_s,
        })
        .collect();
    // Recovery: per phase, the first bin at >= 90% of the level of the
    // phase's last three full bins.
    let mut recover = Vec::new();
    for (i, &sw) in switches.iter().enumerate() {
        let stop = switches.get(i + 1).copied().unwrap_or(end);
        let phase: Vec<&TimePoint> = points
            .iter()
            .filter(|pt| pt.t_s >= sw && pt.t_s < stop - bin_s)
            .collect();
        let tail = phase.len().clamp(1, 3);
        let level = phase
            .iter()
            .rev()
            .take(tail)
            .map(|pt| pt.throughput_qps)
            .sum::<f64>()
            / tail as f64;
        recover.push(
            phase
                .iter()
                .find(|pt| pt.throughput_qps >= 0.9 * level)
                .map(|pt| pt.t_s - sw),
        );
    }
    Ok(Timeline {
        scheme: scheme.name().into(),
        mode: format!("{mode:?}").to_lowercase(),
        points,
        switches_s: switches,
        recover_s: recover,
        migrations_approved: approved,
        bytes_moved: moved_bytes,
    })
}

fn plot_timelines(dir: &std::path::Path, name: &str, tls: &[Timeline]) -> Result<(), String> {
    locus_plot::LineChart {
        title: format!("{name}: throughput timeline"),
        x_label: "time (s)".into(),
        y_label: "queries per second".into(),
        x_log: false,
        y_log: false,
        series: tls
            .iter()
            .map(|t| locus_plot::Series {
                label: format!("{} ({})", t.scheme, t.mode),
                points: t
                    .points
                    .iter()
                    .map(|pt| (pt.t_s, pt.throughput_qps))
                    .collect(),
            })
            .collect(),
    }
    .write_png(&dir.join(format!("{name}.png")))
    .map_err(|e| e.to_string())
}

fn fill_ratios(rows: &mut [Row]) {
    let find = |rows: &[Row], name: &str| {
        rows.iter()
            .find(|r| r.scheme == name)
            .map(|r| r.throughput_qps)
    };
    let (orig, ideal) = (find(rows, "Orig"), find(rows, "Ideal"));
    for r in rows.iter_mut() {
        if let Some(o) = orig {
            r.vs_orig = r.throughput_qps / o;
        }
        if let Some(i) = ideal {
            r.vs_ideal = r.throughput_qps / i;
        }
    }
}

fn print_rows(rows: &[Row]) {
    println!(
        "{:<12} {:>7} {:>12} {:>10} {:>10} {:>10} {:>8} {:>9} {:>11} {:>8} {:>8}",
        "scheme",
        "scope",
        "queries/s",
        "p50(us)",
        "p99(us)",
        "p99.9(us)",
        "remote",
        "migrated",
        "moved(MB)",
        "vs Orig",
        "vs Ideal"
    );
    for r in rows {
        println!(
            "{:<12} {:>7} {:>12.0} {:>10.1} {:>10.1} {:>10.1} {:>7.1}% {:>8.2}% {:>11.1} {:>7.2}x {:>7.1}%",
            r.scheme,
            r.scope.map_or("-".to_string(), |s| s.to_string()),
            r.throughput_qps,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.remote_rate * 100.0,
            r.migrated_fraction * 100.0,
            r.bytes_moved as f64 / 1e6,
            r.vs_orig,
            r.vs_ideal * 100.0
        );
    }
}

pub fn run(a: PraghArgs) -> Result<(), String> {
    let p = Preset::new(&a)?;
    let c = base_config(&p);
    c.validate()?;
    eprintln!("generating R-MAT scale {} ...", p.scale);
    let csr = rmat_csr(&c)?;
    let skewed = StartDist::Zipf {
        theta: 0.99,
        scope: 1024,
    };
    let all = [
        Scheme::Ideal,
        Scheme::Orig,
        Scheme::Shard,
        Scheme::Split,
        Scheme::Cache,
        Scheme::SplitCache,
        Scheme::Replica,
    ];
    for name in &a.schemes {
        if !all.iter().any(|s| s.name().eq_ignore_ascii_case(name)) {
            return Err(format!(
                "--schemes {name}: expected one of Ideal, Orig, Shard, Split, Cache, Split+Cache, Replica"
            ));
        }
    }
    let wanted = |s: Scheme| {
        a.schemes.is_empty() || a.schemes.iter().any(|n| s.name().eq_ignore_ascii_case(n))
    };
    let mut rows = Vec::new();
    let mut bound = None;
    match a.experiment {
        Experiment::Schemes | Experiment::Uniform => {
            let dist = if a.experiment == Experiment::Uniform {
                StartDist::Uniform
            } else {
                skewed
            };
            let w = workload(&csr, &p, dist)?;
            let b = placement_bound(&csr, &w.measure, p.machines, p.k);
            eprintln!(
                "placement bound: {} GETs, {:.1}% remote under hash placement, {:.1}% remote at best with one copy per value ({} vertices read by several machines)",
                b.gets,
                b.hash_remote_gets * 100.0,
                b.best_single_copy_remote_gets * 100.0,
                b.shared_vertices
            );
            bound = Some(b);
            for s in all.into_iter().filter(|&s| wanted(s)) {
                eprintln!("{} ...", s.name());
                rows.push(run_scheme(s, &w, &p, Mode::Eager)?);
            }
            fill_ratios(&mut rows);
        }
        Experiment::Scope => {
            let max_scale = p.scale;
            let mut scopes: Vec<u64> = (10..=max_scale).step_by(2).map(|s| 1u64 << s).collect();
            if scopes.last() != Some(&(1u64 << max_scale)) {
                scopes.push(1 << max_scale);
            }
            for scope in scopes {
                let w = workload(&csr, &p, StartDist::Zipf { theta: 0.99, scope })?;
                let mut group = Vec::new();
                for s in [
                    Scheme::Ideal,
                    Scheme::Orig,
                    Scheme::Shard,
                    Scheme::SplitCache,
                    Scheme::Replica,
                ]
                .into_iter()
                .filter(|&s| wanted(s))
                {
                    eprintln!("scope {scope}: {} ...", s.name());
                    let mut r = run_scheme(s, &w, &p, Mode::Eager)?;
                    r.scope = Some(scope);
                    group.push(r);
                }
                fill_ratios(&mut group);
                rows.extend(group);
            }
        }
        Experiment::EagerDeferred | Experiment::Dynamic => {}
        Experiment::PutHeavy => {
            let p = Preset {
                update_fraction: 0.5,
                ..p.clone()
            };
            let w = workload(&csr, &p, skewed)?;
            for s in [Scheme::Orig, Scheme::SplitCache, Scheme::Replica]
                .into_iter()
                .filter(|&s| wanted(s))
            {
                eprintln!("{} ...", s.name());
                rows.push(run_scheme(s, &w, &p, Mode::Eager)?);
            }
            fill_ratios(&mut rows);
        }
    }
    let mut timelines: Vec<Timeline> = Vec::new();
    match a.experiment {
        Experiment::EagerDeferred => {
            let w = workload(&csr, &p, skewed)?;
            let run_s = p.interval_ms as f64 / 1000.0 * 4.0;
            for mode in [Mode::Eager, Mode::Deferred] {
                eprintln!("Split+Cache, {mode:?} ...");
                timelines.push(timeline(
                    Scheme::SplitCache,
                    mode,
                    &csr,
                    &p,
                    std::slice::from_ref(&w.measure),
                    run_s,
                    p.interval_ms as f64 / 4000.0,
                )?);
            }
        }
        Experiment::Dynamic => {
            // Non-overlapping start scopes, one per phase.
            let mut used = std::collections::HashSet::new();
            let mut phases = Vec::new();
            for i in 0..3u64 {
                let starts =
                    start_vertices(csr.vertex_count(), p.ops, skewed, p.seed + 100 * i, |v| {
                        csr.degree(v) > 0 && !used.contains(&v)
                    })
                    .map_err(|e| e.to_string())?;
                used.extend(starts.iter().copied());
                phases.push(mix_ops(
                    &starts,
                    p.update_fraction,
                    &endpoints(&csr),
                    p.seed + i,
                ));
            }
            let phase_s = p.interval_ms as f64 / 1000.0 * 5.0;
            for s in [Scheme::Shard, Scheme::SplitCache, Scheme::Replica] {
                eprintln!("{} ...", s.name());
                timelines.push(timeline(
                    s,
                    Mode::Eager,
                    &csr,
                    &p,
                    &phases,
                    phase_s,
                    p.interval_ms as f64 / 4000.0,
                )?);
            }
        }
        _ => {}
    }
    for t in &timelines {
        let peak = t
            .points
            .iter()
            .map(|pt| pt.throughput_qps)
            .fold(0.0, f64::max);
        println!(
            "{:<12} {:<9} peak {:>9.0} q/s, {} migrations, {:.1} MB moved, recovery after each switch (s): {:?}",
            t.scheme,
            t.mode,
            peak,
            t.migrations_approved,
            t.bytes_moved as f64 / 1e6,
            t.recover_s
        );
    }
    let name = format!(
        "pragh-{}",
        a.experiment
            .to_possible_value()
            .map_or("x".into(), |v| v.get_name().to_string())
    );
    if a.json && !timelines.is_empty() {
        println!(
            "{}",
            serde_json::to_string_pretty(&timelines).map_err(|e| e.to_string())?
        );
    } else if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
    } else if !rows.is_empty() {
        println!(
            "R-MAT scale {} ({} vertices, {} stored edges), {} machines, {} worker threads, interval {} ms",
            p.scale,
            csr.vertex_count(),
            csr.edge_count(),
            p.machines,
            p.threads,
            p.interval_ms
        );
        print_rows(&rows);
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let write = |file: String, text: String| -> Result<(), String> {
            let path = dir.join(file);
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
            Ok(())
        };
        if timelines.is_empty() {
            write(
                format!("{name}.json"),
                serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?,
            )?;
        } else {
            write(
                format!("{name}.json"),
                serde_json::to_string_pretty(&timelines).map_err(|e| e.to_string())?,
            )?;
            plot_timelines(dir, &name, &timelines)?;
        }
        let meta = serde_json::json!({
            "experiment": name,
            "preset": a.preset,
            "scale": p.scale,
            "vertices": csr.vertex_count(),
            "stored_edges": csr.edge_count(),
            "machines": p.machines,
            "threads": p.threads,
            "ops_per_sequence": p.ops,
            "update_fraction": p.update_fraction,
            "k": p.k,
            "interval_ms": p.interval_ms,
            "seed": p.seed,
            "graph_seed": c.graph.seed,
            "latency_ns": c.cluster.latency_ns,
            "placement_bound": bound,
        });
        write(
            format!("{name}.meta.json"),
            serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?,
        )?;
        if !rows.is_empty() {
            plot_rows(dir, &name, &rows)?;
        }
    }
    Ok(())
}

/// PNG plots of an experiment's rows: throughput and remote rate per scheme
/// (Fig. 10), per scope (Fig. 11), or the update-latency CDF (Fig. 12).
fn plot_rows(dir: &std::path::Path, name: &str, rows: &[Row]) -> Result<(), String> {
    let err = |e: locus_plot::PlotError| e.to_string();
    let mut schemes: Vec<String> = Vec::new();
    for r in rows {
        if !schemes.contains(&r.scheme) {
            schemes.push(r.scheme.clone());
        }
    }
    if rows.iter().any(|r| r.scope.is_some()) {
        let line = |y: &dyn Fn(&Row) -> f64| -> Vec<locus_plot::Series> {
            schemes
                .iter()
                .map(|s| locus_plot::Series {
                    label: s.clone(),
                    points: rows
                        .iter()
                        .filter(|r| &r.scheme == s)
                        .map(|r| (r.scope.unwrap_or(1) as f64, y(r)))
                        .collect(),
                })
                .collect()
        };
        locus_plot::LineChart {
            title: "Throughput by scope of start vertices (Pragh Fig. 11a)".into(),
            x_label: "scope (start vertices)".into(),
            y_label: "queries per second".into(),
            x_log: true,
            y_log: true,
            series: line(&|r| r.throughput_qps.max(1e-3)),
        }
        .write_png(&dir.join(format!("{name}-throughput.png")))
        .map_err(err)?;
        locus_plot::LineChart {
            title: "Remote accesses by scope (Pragh Fig. 11b)".into(),
            x_label: "scope (start vertices)".into(),
            y_label: "remote one-sided operations (%)".into(),
            x_log: true,
            y_log: false,
            series: line(&|r| r.remote_rate * 100.0),
        }
        .write_png(&dir.join(format!("{name}-remote.png")))
        .map_err(err)?;
        return Ok(());
    }
    locus_plot::BarChart {
        title: format!("{name}: throughput by scheme"),
        y_label: "queries per second".into(),
        groups: rows.iter().map(|r| r.scheme.clone()).collect(),
        series: vec![(
            "throughput".into(),
            rows.iter().map(|r| r.throughput_qps).collect(),
        )],
    }
    .write_png(&dir.join(format!("{name}-throughput.png")))
    .map_err(err)?;
    locus_plot::BarChart {
        title: format!("{name}: remote accesses and median latency"),
        y_label: "remote ops (%) / p50 latency (us / 10)".into(),
        groups: rows.iter().map(|r| r.scheme.clone()).collect(),
        series: vec![
            (
                "remote (%)".into(),
                rows.iter().map(|r| r.remote_rate * 100.0).collect(),
            ),
            (
                "p50 (us / 10)".into(),
                rows.iter().map(|r| r.p50_us / 10.0).collect(),
            ),
        ],
    }
    .write_png(&dir.join(format!("{name}-remote.png")))
    .map_err(err)?;
    let cdfs: Vec<locus_plot::Series> = rows
        .iter()
        .filter(|r| !r.update_latencies_us.is_empty())
        .map(|r| locus_plot::cdf_series(r.scheme.clone(), &r.update_latencies_us))
        .collect();
    if !cdfs.is_empty() {
        locus_plot::LineChart {
            title: "Update latency CDF (Pragh Fig. 12a)".into(),
            x_label: "update latency (us)".into(),
            y_label: "fraction of updates".into(),
            x_log: true,
            y_log: false,
            series: cdfs,
        }
        .write_png(&dir.join(format!("{name}-update-cdf.png")))
        .map_err(err)?;
    }
    Ok(())
}
