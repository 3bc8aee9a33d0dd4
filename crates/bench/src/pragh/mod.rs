//! The traversal benchmark of Pragh 6: every scheme on the same graph and the
//! same operation sequence in one run.
//!
//! A run of a scheme: build and load the cluster; for schemes that migrate,
//! start the monitor/coordinator/executor driver and run a warm-up sequence
//! (same distribution, other seed) until a round approves no migration;
//! then run the measured sequence, repeated until it lasts at least the
//! settings' measuring time, with the driver still running. Remote rate and
//! latencies come from the measured part only. The service threads and the
//! driver are checked after every sequence, so a dead service is an error
//! naming the machine, not a run of 30-second timeouts.

pub mod fork;
mod graph;
mod median;
mod placement;
mod plots;
mod report;
mod run;
mod scheme;
mod slices;
pub mod tcp;
mod timeline;

use std::collections::HashSet;

use locus_coordinator::Mode;
use locus_workloads::traversal::{mix_ops, start_vertices, StartDist};
use serde::Serialize;

pub use graph::{Graph, Loader};
pub use median::median_rows;
use median::round_order;
pub use placement::{placement_after, placement_bound, PlacementAfter, PlacementBound};
pub use report::{replot, Report};
pub use scheme::{values_away, Running, Scheme};
pub use timeline::{bin, recovery, TimePoint, Timeline};

use crate::cluster::Embedded;
use crate::config::Config;
use crate::output::MachineMeta;
use crate::{BenchError, Preset, Reporter, Result};

/// The experiments of Pragh 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// Every scheme, skewed starts (Pragh Table 1, Fig. 10).
    Schemes,
    /// Every scheme, uniform starts over every vertex, or over each of
    /// `scopes` (Pragh 6.1's "Uniform workload" starts in its default scope, 2^10).
    Uniform,
    /// Orig and Split+Cache as the start scope grows (Pragh Fig. 11).
    Scope,
    /// 50% updates: update latency with and without migration (Pragh Fig. 12).
    PutHeavy,
    /// Throughput timeline from a cold start, eager vs deferred (Pragh Fig. 14).
    EagerDeferred,
    /// Throughput timeline as the start scope switches, Shard vs Split+Cache (Pragh Fig. 15).
    Dynamic,
    /// Replica throughput and memory as the replica budget grows (Locus's replicas).
    ReplicaBudget,
}

impl Experiment {
    /// The experiment's name on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Schemes => "schemes",
            Experiment::Uniform => "uniform",
            Experiment::Scope => "scope",
            Experiment::PutHeavy => "put-heavy",
            Experiment::EagerDeferred => "eager-deferred",
            Experiment::Dynamic => "dynamic",
            Experiment::ReplicaBudget => "replica-budget",
        }
    }
}

/// Settings of one experiment run, from a [`Preset`] and overrides.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// The preset the settings came from.
    pub preset: PraghPreset,
    /// R-MAT scale.
    pub scale: u32,
    /// Machines of the migrating schemes (Ideal runs on one).
    pub machines: usize,
    /// Worker threads.
    pub threads: usize,
    /// Operations per warm-up round and per measured sequence.
    pub ops: usize,
    /// The measured sequence is repeated until it lasts this long.
    pub measure_s_min: f64,
    /// Warm-up gives up after this long.
    pub warm_s_max: f64,
    /// Warm-up ends after a round (an interval and a half) that approves at
    /// most this share of the migrations and replicas approved so far; 0:
    /// only after a round approving none.
    pub settle_share: f64,
    /// The monitoring interval (Pragh 6: 10 s).
    pub interval_ms: u64,
    /// Share of operations that insert an edge.
    pub update_fraction: f64,
    /// Neighbours per hop.
    pub k: usize,
    /// Workload seed.
    pub seed: u64,
    /// Interleaved runs of every scheme; each row is their median.
    pub runs: usize,
    /// Parts each scheme's measured window is cut into, the schemes of a
    /// round taking turns ([`slices`]); 1: each scheme measured whole, one
    /// after another.
    pub slices: usize,
    /// Replica budget per machine, MiB (None: the scheme's default).
    pub replica_mb: Option<f64>,
    /// How the graph is held: a CSR, or no CSR (stores loaded from the
    /// generator a range at a time); by default a CSR up to scale 22.
    pub loader: Option<Loader>,
    /// Fault in every region page when a store is made (as RDMA registration
    /// pins memory); off at the paper's scale, where the stores' slack for
    /// migrations would not fit in this machine's memory if it were touched.
    pub pin_memory: bool,
    /// Schemes on the same machine count share one load per round: each
    /// runs in a process forked from the one that loaded the graph
    /// ([`fork`]). On at the paper's scale, where a load takes minutes.
    pub shared_load: bool,
    /// Start scopes of the scope experiment (Pragh Fig. 11), or of the
    /// uniform experiment (empty there: every vertex); empty: 2^10,
    /// 2^12, ... up to the graph's vertex count ([`Settings::scope_list`]).
    pub scopes: Vec<u64>,
    /// MiB added to each machine's value region (`[store]
    /// value_region_extra_mb`): room for the old blocks of rewritten values,
    /// which wait out the reclaim lease (60 s, longer than a scheme's
    /// warm-up and window, so nothing a run rewrites is freed during it).
    pub value_region_extra_mb: u64,
}

/// Value-region room `put-heavy` adds per machine, MiB.
pub const PUT_HEAVY_EXTRA_MB: u64 = 448;

/// Parts of a measured window at `--preset quick` ([`Settings::slices`]).
pub const SLICES_DEFAULT: usize = 8;

/// `bench pragh`'s presets: the shared quick and full, and the paper's scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PraghPreset {
    /// Scale 16, 1 s interval: minutes here.
    Quick,
    /// Scale 20, Pragh's 10 s interval.
    Full,
    /// Pragh 6's graph, R-MAT 26 (2^26 vertices, 2^30 edges), loaded without
    /// a CSR, Pragh's 10 s interval: hours here.
    Paper,
}

impl From<Preset> for PraghPreset {
    fn from(p: Preset) -> PraghPreset {
        match p {
            Preset::Quick => PraghPreset::Quick,
            Preset::Full => PraghPreset::Full,
        }
    }
}

impl Settings {
    /// The settings at the paper's scale (see [`PraghPreset::Paper`]).
    pub fn paper(seed: u64) -> Settings {
        Settings {
            preset: PraghPreset::Paper,
            scale: 26,
            ops: 100_000,
            measure_s_min: 10.0,
            warm_s_max: 600.0,
            // At R-MAT 26 a few shared values keep changing hands (stop 26:
            // Split approved ~16k in 600 s); 1% of the approvals is settled.
            settle_share: 0.01,
            interval_ms: 10_000,
            loader: Some(Loader::Ranged),
            pin_memory: false,
            shared_load: true,
            // Turns need every scheme's cluster at once: not at this scale.
            slices: 1,
            // 56 MiB a machine, 4.75% of R-MAT 26's 9.88 GB of values over 8
            // machines: inside the 5% (the default would be 21%).
            replica_mb: Some(56.0),
            scopes: Vec::new(),
            ..Settings::new(Preset::Full, seed)
        }
    }

    /// The settings of `preset`: quick (scale 16, 1 s interval, a few
    /// minutes here) or full (scale 20, Pragh's 10 s interval).
    pub fn new(preset: Preset, seed: u64) -> Settings {
        let threads = locus_fabric::pool::default_threads();
        match preset {
            Preset::Quick => Settings {
                preset: preset.into(),
                scale: 16,
                machines: 8,
                threads,
                ops: 20_000,
                measure_s_min: 2.0,
                warm_s_max: 30.0,
                settle_share: 0.0,
                interval_ms: 1_000,
                update_fraction: 0.05,
                k: 100,
                seed,
                runs: 3,
                slices: SLICES_DEFAULT,
                replica_mb: None,
                loader: None,
                pin_memory: true,
                shared_load: false,
                scopes: Vec::new(),
                value_region_extra_mb: 0,
            },
            Preset::Full => Settings {
                preset: preset.into(),
                scale: 20,
                machines: 8,
                threads,
                ops: 100_000,
                measure_s_min: 10.0,
                warm_s_max: 120.0,
                settle_share: 0.0,
                interval_ms: 10_000,
                update_fraction: 0.05,
                k: 100,
                seed,
                runs: 3,
                slices: 1,
                replica_mb: None,
                loader: None,
                pin_memory: true,
                shared_load: false,
                scopes: Vec::new(),
                value_region_extra_mb: 0,
            },
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if self.threads == 0 {
            return Err(BenchError::setting("--threads", 0, "must be positive"));
        }
        if !(1..=32).contains(&self.scale) {
            return Err(BenchError::setting("--scale", self.scale, "must be 1..=32"));
        }
        if self.ops == 0 {
            return Err(BenchError::setting("--ops", 0, "must be positive"));
        }
        if !(1..=99).contains(&self.runs) {
            return Err(BenchError::setting("--runs", self.runs, "must be 1..=99"));
        }
        if !(1..=1000).contains(&self.slices) {
            return Err(BenchError::setting(
                "--slices",
                self.slices,
                "must be 1..=1000",
            ));
        }
        if self.slices > 1 && self.shared_load {
            return Err(BenchError::setting(
                "--slices",
                self.slices,
                "needs --loads each: the schemes take turns with every cluster in one process, which a shared load's forked runs do not allow",
            ));
        }
        if !(self.warm_s_max >= 0.0 && self.warm_s_max <= 3600.0) {
            return Err(BenchError::setting(
                "--warm-s-max",
                self.warm_s_max,
                "must be in [0, 3600]",
            ));
        }
        if !(self.measure_s_min >= 0.0 && self.measure_s_min <= 3600.0) {
            return Err(BenchError::setting(
                "--measure-s",
                self.measure_s_min,
                "must be in [0, 3600]",
            ));
        }
        if !(0.0..1.0).contains(&self.settle_share) {
            return Err(BenchError::setting(
                "--settle-share",
                self.settle_share,
                "must be in [0, 1)",
            ));
        }
        let vertices = 1u64 << self.scale;
        if let Some(&s) = self.scopes.iter().find(|&&s| s == 0 || s > vertices) {
            return Err(BenchError::setting(
                "--scopes",
                s,
                format!(
                    "every scope must be in 1..={vertices} (2^{} vertices)",
                    self.scale
                ),
            ));
        }
        Ok(self.config().validate()?)
    }

    /// The scope experiment's start scopes: `scopes` if given, else every
    /// other power of two from 2^10 (Pragh Fig. 11's first) up to the
    /// vertex count, which is always included.
    pub fn scope_list(&self) -> Vec<u64> {
        if !self.scopes.is_empty() {
            return self.scopes.clone();
        }
        let mut scopes: Vec<u64> = (10..=self.scale).step_by(2).map(|s| 1u64 << s).collect();
        if scopes.last() != Some(&(1u64 << self.scale)) {
            scopes.push(1 << self.scale);
        }
        scopes
    }

    /// The cluster configuration every scheme starts from.
    pub fn config(&self) -> Config {
        let mut c = Config::default();
        c.cluster.threads = self.threads;
        c.cluster.machines = self.machines;
        c.graph.scale = self.scale;
        c.store.cache_mb = 0;
        c.store.replica_mb = self.replica_mb;
        c.cluster.pin_memory = self.pin_memory;
        c.store.value_region_extra_mb = self.value_region_extra_mb;
        c
    }
}

/// One row of an experiment's JSON.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Row {
    /// The scheme.
    pub scheme: String,
    /// Distinct start vertices (scope experiment).
    pub scope: Option<u64>,
    /// Queries per second over the measured sequence.
    pub throughput_qps: f64,
    /// Query latency percentiles, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Remote one-sided operations / all one-sided operations.
    pub remote_rate: f64,
    /// GETs whose value was on another machine / all GETs (the placement
    /// bound's unit; updates' reads included).
    pub remote_gets: f64,
    /// GETs per query measured (updates' reads included): the work a query
    /// did, the same for every scheme on the same graph and sequence (0 in
    /// files written before it existed).
    #[serde(default)]
    pub gets_per_query: f64,
    /// Share of vertices held away from their key's machine at the end
    /// (Split schemes), or keys moved with their shards (Shard).
    pub migrated_fraction: f64,
    /// Values (Split) or keys (Shard) moved in all, moves back and forth included.
    pub values_moved: u64,
    /// Bytes moved in all.
    pub bytes_moved: u64,
    /// Throughput over Orig's.
    pub vs_orig: f64,
    /// Throughput over Ideal's.
    pub vs_ideal: f64,
    /// Machines.
    pub machines: usize,
    /// Worker threads.
    pub threads: usize,
    /// Queries measured.
    pub queries: u64,
    /// Updates measured.
    pub updates: u64,
    /// Update latency percentiles, microseconds.
    pub update_p50_us: f64,
    /// 99th percentile.
    pub update_p99_us: f64,
    /// 99.9th percentile.
    pub update_p999_us: f64,
    /// Updates forwarded to a machine holding a migrated value (messages / 2) over updates.
    pub forwarded_share: f64,
    /// Seconds of warm-up.
    pub warm_s: f64,
    /// Migrations and replicas approved in each warm-up round.
    pub warm_rounds_approved: Vec<u64>,
    /// Migrations the coordinator approved.
    pub migrations_approved: u64,
    /// Coordinator decisions to leave a key put because several machines
    /// want it (since stop 50 only among keys some machine could lead:
    /// the rest are screened out before any decision).
    pub contended_decisions: u64,
    /// Bytes of read-only replicas held at the end of the run, all machines.
    pub replica_bytes: u64,
    /// The most replica bytes one machine held.
    pub replica_bytes_machine_max: u64,
    /// Replica bytes over the loaded graph's value bytes (`graph_value_bytes`).
    pub replica_share: f64,
    /// The replica budget of each machine (0: no replicas).
    pub replica_budget_bytes: u64,
    /// Value-region bytes of the loaded graph, all machines.
    pub graph_value_bytes: u64,
    /// The share of the machine's CPU this process had while measuring
    /// (process CPU seconds over wall seconds times cores).
    pub measure_machine_share: f64,
    /// The share of the process's CPU while measuring that went to threads
    /// other than the query workers (services, monitor, coordinator,
    /// executors, the driving thread).
    pub measure_background_share: f64,
    /// Times the query workers were preempted (involuntary context switches)
    /// while measuring.
    pub measure_worker_preempted: u64,
    /// CPU seconds while measuring by thread group (of the run with the
    /// median throughput, in a median row).
    pub measure_cpu_s: std::collections::BTreeMap<String, f64>,
    /// How fast the machine itself ran around the measured window:
    /// nanoseconds per step of [`crate::host_probe`] on every worker thread
    /// at once, the mean of a probe just before and just after it (0 in
    /// files written before it existed).
    #[serde(default)]
    pub measure_host_probe_ns: f64,
    /// How long a cache line took to go from one core to the other and
    /// back around the measured window ([`crate::host_probe::handoff_ns`]),
    /// the mean of a probe just before and just after it (0 in files
    /// written before it existed).
    #[serde(default)]
    pub measure_host_handoff_ns: f64,
    /// The share of the machine the hypervisor took from this VM while
    /// measuring (steal time over wall seconds times cores; 0 in files
    /// written before it existed).
    #[serde(default)]
    pub measure_steal_share: f64,
    /// Parts the measured window was run in: 1 when measured whole, more
    /// when the schemes took turns (`--slices`).
    #[serde(default)]
    pub measure_parts: usize,
    /// How the placement the run ended with serves the measured sequence, and
    /// why its remote GETs exceed the placement bound's (Split and
    /// Split+Cache; each field its own median in a median row; absent in
    /// files written before it existed).
    #[serde(default)]
    pub placement_after: Option<PlacementAfter>,
    /// Interleaved runs this row is the median of (each field its own median;
    /// ratios are medians of each run's own ratio).
    pub runs: usize,
    /// [min, max] of `throughput_qps` over the runs.
    pub throughput_qps_range: [f64; 2],
    /// [min, max] of `vs_orig` over the runs.
    pub vs_orig_range: [f64; 2],
    /// [min, max] of `vs_ideal` over the runs.
    pub vs_ideal_range: [f64; 2],
    /// [min, max] of `remote_rate` over the runs.
    pub remote_rate_range: [f64; 2],
    /// [min, max] of `remote_gets` over the runs.
    pub remote_gets_range: [f64; 2],
    /// [min, max] of `migrated_fraction` over the runs.
    pub migrated_fraction_range: [f64; 2],
    /// Every update's latency (for the CDF plot; not in the JSON).
    #[serde(skip)]
    pub update_latencies_us: Vec<f64>,
}

/// Fills each row's throughput ratios against Orig and Ideal.
pub fn fill_ratios(rows: &mut [Row]) {
    let find = |rows: &[Row], name: &str| {
        rows.iter()
            .find(|r| r.scheme == name)
            .map(|r| r.throughput_qps)
    };
    let (orig, ideal) = (find(rows, "Orig"), find(rows, "Ideal"));
    for r in rows.iter_mut() {
        if let Some(o) = orig {
            r.vs_orig = r.throughput_qps / o;
            r.vs_orig_range = [r.vs_orig; 2];
        }
        if let Some(i) = ideal {
            r.vs_ideal = r.throughput_qps / i;
            r.vs_ideal_range = [r.vs_ideal; 2];
        }
    }
}

/// Pragh's skewed start distribution: Zipf 0.99 over 1024 vertices.
const SKEWED: StartDist = StartDist::Zipf {
    theta: 0.99,
    scope: 1024,
};

/// Runs `experiment` with `settings` on the schemes in `only` (all if empty).
///
/// Row experiments run every scheme once per round, `settings.runs` rounds
/// (so the schemes compared alternate in time on a shared machine); each
/// row is the median of its scheme's runs, with the per-run rows kept in
/// [`Report::run_rows`].
pub fn run(
    experiment: Experiment,
    settings: &Settings,
    only: &[Scheme],
    r: &Reporter,
) -> Result<Report> {
    settings.validate()?;
    let p = settings;
    let mut machine = MachineMeta::start();
    r.note(format!("generating R-MAT scale {} ...", p.scale));
    let loader = p.loader.unwrap_or(Loader::for_scale(p.scale));
    let csr = Graph::generate(&p.config().graph, loader, p.threads, r)?;
    let wanted = |s: Scheme| only.is_empty() || only.contains(&s);
    let mut rows = Vec::new();
    let mut run_rows = Vec::new();
    let mut bound = None;
    let mut timelines = Vec::new();
    // Every scheme of `schemes` once per round, `p.runs` rounds; the medians.
    // The loaded cluster schemes share under `shared_load`, with its
    // machine count; `None` inside while a child has taken it (never in
    // this process).
    let mut loaded: Option<(usize, Option<Embedded>)> = None;
    let mut rounds = |schemes: &[(Scheme, Option<f64>)],
                      w: &scheme::Workload,
                      p: &Settings,
                      scope: Option<u64>|
     -> Result<Vec<Row>> {
        let mut all = Vec::new();
        for round in 0..p.runs {
            // No scheme always runs first or last: a position's bias (in
            // turns, the first scheme loaded measures slower) falls on every
            // scheme alike. Balanced (every place, every predecessor equally
            // often over a cycle) unless loads are shared: then every other
            // round runs the schemes in reverse, so a round starts on the
            // graph the last one ended on (Ideal's one machine or the
            // cluster), one load saved per round.
            let order = round_order(schemes.len(), round, !p.shared_load);
            let mut group: Vec<Option<Row>> = vec![None; schemes.len()];
            if p.slices > 1 {
                // Turns: every scheme warmed up, then measured in parts.
                let mut warmed = Vec::with_capacity(order.len());
                for &i in &order {
                    let (s, replica_mb) = schemes[i];
                    r.note(format!(
                        "{}{} (run {}/{}): warming up ...",
                        s.name(),
                        replica_mb.map_or(String::new(), |mb| format!(", {mb:.3} MiB of replicas")),
                        round + 1,
                        p.runs
                    ));
                    let p = Settings {
                        replica_mb: replica_mb.or(p.replica_mb),
                        ..p.clone()
                    };
                    let warm = run::load(s, w.graph, &p, r)
                        .and_then(|c| run::warm_up(s, c, w, &p, Mode::Eager, r))
                        .map_err(|e| e.in_scheme(s.name()))?;
                    // Still until its turns: the next scheme warms up alone.
                    warm.pause();
                    warmed.push((i, p, warm));
                }
                let refs: Vec<&run::Warmed> = warmed.iter().map(|x| &x.2).collect();
                let measured = slices::measure(&refs, w, p, r)?;
                for ((i, p, warm), m) in warmed.into_iter().zip(measured) {
                    let s = warm.scheme();
                    warm.resume();
                    let mut row = warm
                        .finish(w, &p, m, r)
                        .map_err(|e| e.in_scheme(s.name()))?;
                    row.scope = scope;
                    group[i] = Some(row);
                }
            }
            for i in order.into_iter().filter(|_| p.slices <= 1) {
                let (s, replica_mb) = schemes[i];
                let budget =
                    replica_mb.map_or(String::new(), |mb| format!(", {mb:.3} MiB of replicas"));
                r.note(format!(
                    "{}{budget} (run {}/{}) ...",
                    s.name(),
                    round + 1,
                    p.runs
                ));
                let p = Settings {
                    replica_mb: replica_mb.or(p.replica_mb),
                    ..p.clone()
                };
                let mut row = if p.shared_load && s != Scheme::Shard {
                    let m = s.machines(p.machines);
                    if loaded.as_ref().map(|l| l.0) != Some(m) {
                        loaded = None; // free the other store's memory first
                        let c = run::load(s, w.graph, &p, r).map_err(|e| e.in_scheme(s.name()))?;
                        loaded = Some((m, Some(c)));
                    }
                    let slot = &mut loaded.as_mut().expect("loaded above").1;
                    // The update latencies are not in a row's JSON: sent beside it.
                    fork::in_child(s.name(), || {
                        let cluster = slot.take().expect("the parent keeps its cluster");
                        let row = run::run_loaded(s, cluster, w, &p, Mode::Eager, r)?;
                        let latencies = row.update_latencies_us.clone();
                        Ok((row, latencies))
                    })
                    .map(|(mut row, latencies): (Row, Vec<f64>)| {
                        row.update_latencies_us = latencies;
                        row
                    })
                } else {
                    run::run_scheme(s, w, &p, Mode::Eager, r)
                }
                .map_err(|e| e.in_scheme(s.name()))?;
                row.scope = scope;
                group[i] = Some(row);
            }
            let mut group: Vec<Row> = group.into_iter().flatten().collect();
            fill_ratios(&mut group);
            all.push(group);
        }
        let medians = median_rows(&all);
        run_rows.extend(all);
        Ok(medians)
    };
    let plain = |schemes: &[Scheme]| -> Vec<(Scheme, Option<f64>)> {
        schemes
            .iter()
            .filter(|&&s| wanted(s))
            .map(|&s| (s, None))
            .collect()
    };
    // Every scheme, and after Orig the A/A control if `--schemes` names it.
    let mut with_control = Scheme::ALL.to_vec();
    if only.contains(&Scheme::OrigAgain) {
        with_control.insert(2, Scheme::OrigAgain);
    }
    match experiment {
        Experiment::Uniform if !p.scopes.is_empty() => {
            for &scope in &p.scopes {
                let w = scheme::workload(&csr, p, StartDist::UniformIn { scope })?;
                r.note(format!("uniform over a scope of {scope}:"));
                rows.extend(rounds(&plain(&with_control), &w, p, Some(scope))?);
            }
        }
        Experiment::Schemes | Experiment::Uniform => {
            let dist = if experiment == Experiment::Uniform {
                StartDist::Uniform
            } else {
                SKEWED
            };
            let w = scheme::workload(&csr, p, dist)?;
            let b = placement_bound(&csr, &w.measure, p.machines, p.k);
            r.note(format!(
                "placement bound: {} GETs, {:.1}% remote under hash placement, {:.1}% remote at best with one copy per value ({} vertices read by several machines)",
                b.gets,
                b.hash_remote_gets * 100.0,
                b.best_single_copy_remote_gets * 100.0,
                b.shared_vertices
            ));
            bound = Some(b);
            rows = rounds(&plain(&with_control), &w, p, None)?;
        }
        Experiment::Scope => {
            for scope in p.scope_list() {
                let w = scheme::workload(&csr, p, StartDist::Zipf { theta: 0.99, scope })?;
                r.note(format!("scope {scope}:"));
                let schemes = plain(&[
                    Scheme::Ideal,
                    Scheme::Orig,
                    Scheme::Shard,
                    Scheme::SplitCache,
                    Scheme::Replica,
                ]);
                rows.extend(rounds(&schemes, &w, p, Some(scope))?);
            }
        }
        Experiment::PutHeavy => {
            // Ten times the updates of the other experiments: every rewrite
            // leaves its old block allocated for the 60 s reclaim lease,
            // longer than a scheme's warm-up and window, and the warm-up's
            // undone inserts rewrite twice. 64 MiB of room a machine filled
            // in Split+Cache's warm-up at the quick preset (stop 56). The
            // room is not faulted in up front (as at the paper's scale), so
            // it costs memory only as far as the run fills it.
            let p = Settings {
                update_fraction: 0.5,
                value_region_extra_mb: p.value_region_extra_mb.max(PUT_HEAVY_EXTRA_MB),
                pin_memory: false,
                ..p.clone()
            };
            let w = scheme::workload(&csr, &p, SKEWED)?;
            let schemes = plain(&[Scheme::Orig, Scheme::SplitCache, Scheme::Replica]);
            rows = rounds(&schemes, &w, &p, None)?;
        }
        Experiment::ReplicaBudget => {
            let w = scheme::workload(&csr, p, SKEWED)?;
            // A machine's share of the graph's value bytes, from a store
            // sized and loaded as every scheme's is.
            let share = {
                let c = csr.build(p.machines, &p.config(), r, |_| {})?;
                c.value_bytes as f64 / p.machines as f64 / (1u64 << 20) as f64
            };
            let mut schemes = plain(&[Scheme::Ideal, Scheme::Orig]);
            if wanted(Scheme::Replica) {
                for f in REPLICA_BUDGET_SHARES {
                    schemes.push((Scheme::Replica, Some(share * f)));
                }
            }
            rows = rounds(&schemes, &w, p, None)?;
        }
        Experiment::EagerDeferred => {
            let w = scheme::workload(&csr, p, SKEWED)?;
            let run_s = p.interval_ms as f64 / 1000.0 * 4.0;
            for mode in [Mode::Eager, Mode::Deferred] {
                r.note(format!("Split+Cache, {mode:?} ..."));
                timelines.push(
                    timeline::timeline(
                        Scheme::SplitCache,
                        mode,
                        &csr,
                        p,
                        std::slice::from_ref(&w.measure),
                        run_s,
                        r,
                    )
                    .map_err(|e| e.in_scheme("Split+Cache"))?,
                );
            }
        }
        Experiment::Dynamic => {
            let phases = dynamic_phases(&csr, p)?;
            let phase_s = p.interval_ms as f64 / 1000.0 * 5.0;
            for s in [Scheme::Shard, Scheme::SplitCache, Scheme::Replica]
                .into_iter()
                .filter(|&s| wanted(s))
            {
                r.note(format!("{} ...", s.name()));
                timelines.push(
                    timeline::timeline(s, Mode::Eager, &csr, p, &phases, phase_s, r)
                        .map_err(|e| e.in_scheme(s.name()))?,
                );
            }
        }
    }
    machine.finish();
    Ok(Report {
        experiment: experiment.name(),
        settings: p.clone(),
        vertices: csr.vertex_count(),
        stored_edges: csr.stored_edges(),
        placement_bound: bound,
        rows,
        run_rows,
        timelines,
        machine,
    })
}

/// Replica budgets of the `replica-budget` experiment, as shares of one
/// machine's part of the graph's value bytes (0: Split+Cache).
pub const REPLICA_BUDGET_SHARES: [f64; 7] = [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0];

/// Three phases of the dynamic experiment: non-overlapping start scopes.
fn dynamic_phases(csr: &Graph, p: &Settings) -> Result<Vec<Vec<locus_workloads::traversal::Op>>> {
    let mut used = HashSet::new();
    let mut phases = Vec::new();
    let ends = scheme::endpoints(csr);
    for i in 0..3u64 {
        let starts = start_vertices(csr.vertex_count(), p.ops, SKEWED, p.seed + 100 * i, |v| {
            csr.has_edges(v) && !used.contains(&v)
        })?;
        used.extend(starts.iter().copied());
        csr.remember_lists(&starts, p.threads)?;
        phases.push(mix_ops(&starts, p.update_fraction, &ends, p.seed + i));
    }
    Ok(phases)
}
