//! `locus bench fargraph <experiment>`: the Fargraph+ evaluation (10.1-10.4)
//! on R-MAT graphs over the in-process fabric (2 us + payload / 12.5 GB/s),
//! written as JSON plus a PNG per experiment.
//!
//! - `overall` (Fig. 15): every algorithm on every backend at far ratio 0.8,
//!   times normalised to the Oracle, each algorithm on the grid `locus
//!   analytics run` builds for it by default (its partitions, stripes and
//!   edge layout); the other experiments use one grid for every run.
//! - `ratio` (Fig. 18): BFS time as the far ratio rises from 0 to 0.95, far
//!   versus paged with Linux's default readahead (8 pages), paged
//!   without readahead, and paged with readahead whose vertex data pages
//!   too (`paged_vertices`).
//! - `chunk` (Fig. 19): BFS and PageRank on far at 0.8 with chunks of 4 KB to
//!   4 MB, normalised to 4 KB.
//! - `buffering` (Table 4): BFS and PageRank on far at 0.8 with and without
//!   double buffering.
//! - `threads` (Fig. 16): every algorithm on far at 0.8 with 1 and 2 threads
//!   and the count `--threads auto` picks from an offline table, which this
//!   experiment first builds on a smaller graph (or reads from
//!   [`Settings::profile_table`]).
//!
//! Each configuration runs [`Settings::repeat`] times (default 3), round-robin
//! over the configurations so that interference from other processes on the
//! machine spreads evenly; derived numbers use each configuration's median
//! run (the lower middle one for an even count) and give its min-max range
//! beside it (`*_range_s`), and the JSON keeps every time. Placement comes from one untimed
//! profiling run per algorithm on the Oracle.

mod plots;

use std::path::{Path, PathBuf};

use locus_analytics::algo::Algo;
use locus_analytics::algo::Params;
use locus_analytics::control::{self, Table};
use locus_analytics::grid::GridOptions;
use locus_analytics::layout::layout_for;
use locus_analytics::run::{run as run_analytics, PlacementSource, Report as RunReport, RunConfig};
use locus_analytics::store::Backend;
use locus_analytics::{local_fabric, EngineConfig, GraphInput, Grid};
use locus_graph::{Rmat, RmatConfig};
use serde::Serialize;

use crate::output::{self, OutDir};
use crate::{BenchError, Preset, Reporter, Result};

/// The experiments of Fargraph+ 10 (serialized as their names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Every algorithm x backend at far ratio 0.8, normalised to the Oracle (Fig. 15).
    Overall,
    /// BFS time by far ratio, far vs paged (Fig. 18).
    Ratio,
    /// Chunk sizes 4 KB .. 4 MB (Fig. 19).
    Chunk,
    /// With and without double buffering (Table 4).
    Buffering,
    /// 1, 2 and auto threads (Fig. 16).
    Threads,
}

impl Experiment {
    /// The experiment's name on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Overall => "overall",
            Experiment::Ratio => "ratio",
            Experiment::Chunk => "chunk",
            Experiment::Buffering => "buffering",
            Experiment::Threads => "threads",
        }
    }
}

/// Fewest runs per configuration: a median needs at least three.
pub const REPEAT_MIN: usize = 3;
/// Most runs per configuration.
pub const REPEAT_MAX: usize = 20;

/// Settings of one experiment run, from a [`Preset`] and overrides.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The preset the settings came from.
    pub preset: Preset,
    /// R-MAT scale of the graph.
    pub scale: u32,
    /// Runs per configuration; the median is used, with min and max.
    pub repeat: usize,
    /// Engine threads (the `threads` experiment sets its own; this is also
    /// the core count `auto` picks for).
    pub threads: usize,
    /// `threads`: read the offline table from here instead of building one.
    pub profile_table: Option<PathBuf>,
    /// `overall`: where the disk backend's block files go.
    pub disk_dir: PathBuf,
    /// How disk and far runs place blocks: from degrees (the default, what a
    /// real run knows) or a profiling run, timed and reported in each run's
    /// `profile_s` and `wall_s` (`--profile-run`, for comparison).
    pub placement: PlacementSource,
}

impl Settings {
    /// quick (R-MAT scale 20, about a minute per experiment) or full (scale
    /// 22); 3 runs per configuration, one thread per core.
    pub fn new(preset: Preset) -> Settings {
        Settings {
            preset,
            scale: match preset {
                Preset::Quick => 20,
                Preset::Full => 22,
            },
            repeat: 3,
            threads: output::cores(),
            profile_table: None,
            disk_dir: std::env::temp_dir(),
            placement: PlacementSource::Degrees,
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if self.repeat < REPEAT_MIN || self.repeat > REPEAT_MAX {
            return Err(BenchError::setting(
                "--repeat",
                self.repeat,
                format!("must be {REPEAT_MIN}..={REPEAT_MAX} (a median of at least three runs)"),
            ));
        }
        if !(1..=32).contains(&self.scale) {
            return Err(BenchError::setting("--scale", self.scale, "must be 1..=32"));
        }
        if self.placement == PlacementSource::SavedProfile {
            return Err(BenchError::setting(
                "placement",
                self.placement.name(),
                "the benchmark places by degrees or by a timed profiling run (--profile-run)",
            ));
        }
        if self.threads == 0 {
            return Err(BenchError::setting("threads", 0, "must be positive"));
        }
        Ok(())
    }
}

/// One experiment's output (`EXPERIMENT.json`).
#[derive(Debug, Serialize)]
pub struct Report {
    /// The experiment.
    pub experiment: Experiment,
    /// The preset.
    pub preset: Preset,
    /// Cores and architecture ("2 cores, x86_64").
    pub machine: String,
    /// The fabric the far memory was reached over.
    pub fabric: String,
    /// The graph.
    pub graph: GraphInfo,
    /// Runs of each configuration (round-robin, `repeat` each).
    pub repeat: usize,
    /// Every configuration: its median run's report and all its times.
    pub runs: Vec<Sample>,
    /// Numbers derived from the runs (normalised times, speedups).
    pub derived: serde_json::Value,
    /// `threads`: the offline table `auto` picked from.
    pub table: Option<Table>,
}

/// The graph an experiment ran on.
#[derive(Debug, Serialize)]
pub struct GraphInfo {
    /// How it was made.
    pub generator: String,
    /// R-MAT scale.
    pub scale: u32,
    /// Vertices.
    pub vertices: u64,
    /// Edges.
    pub edges: u64,
    /// Grid partitions per side (`overall`: the first algorithm's; each
    /// run's report says its own).
    pub partitions: u32,
    /// R-MAT seed.
    pub seed: u64,
}

/// A measured configuration: the report of its median run and every run's time.
#[derive(Debug, Serialize, Clone)]
pub struct Sample {
    /// The median run (the lower middle one for an even count).
    pub report: RunReport,
    /// The median time (the median run's).
    pub time_s_median: f64,
    /// The fastest run's time.
    pub time_s_min: f64,
    /// The slowest run's time.
    pub time_s_max: f64,
    /// Every run's time, in the order run.
    pub times_s: Vec<f64>,
}

/// Index of the median of `times` (the lower middle one for an even
/// count, so it is always a run that happened). `times` is not empty.
pub fn median_index(times: &[f64]) -> usize {
    assert!(!times.is_empty(), "a configuration ran at least once");
    let mut idx: Vec<usize> = (0..times.len()).collect();
    idx.sort_by(|&a, &b| times[a].total_cmp(&times[b]));
    idx[(times.len() - 1) / 2]
}

/// `[min, max]` of `times`.
fn range(times: &[f64]) -> [f64; 2] {
    times
        .iter()
        .fold([f64::INFINITY, f64::NEG_INFINITY], |[lo, hi], &t| {
            [lo.min(t), hi.max(t)]
        })
}

impl Report {
    /// Writes `EXPERIMENT.json` and `EXPERIMENT.png` into `dir`. Returns the
    /// files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        let name = self.experiment.name();
        out.json(&format!("{name}.json"), self)?;
        let png = out.path(&format!("{name}.png"));
        plots::plot(self, &png)?;
        out.wrote(png);
        Ok(out.written().to_vec())
    }
}

/// The R-MAT grid, striped for BFS when every run is BFS (`ratio`).
fn rmat_grid(scale: u32, stripe_ids: u64) -> Result<Grid> {
    let rmat = Rmat::new(RmatConfig {
        scale,
        ..RmatConfig::default()
    })?;
    Ok(Grid::build_striped(
        GraphInput::Rmat(&rmat),
        None,
        stripe_ids,
    )?)
}

/// The R-MAT grid `locus analytics run --algo ALGO` builds by default: its
/// window and cache (partitions), stripes and edge layout.
fn rmat_grid_for(scale: u32, algo: Algo) -> Result<Grid> {
    let rmat = Rmat::new(RmatConfig {
        scale,
        ..RmatConfig::default()
    })?;
    Ok(Grid::build_with(
        GraphInput::Rmat(&rmat),
        &GridOptions {
            partitions: None,
            stripe_ids: algo.stripe_ids(),
            value_bytes: algo.window_bytes(Params::default().precision),
            window_cache: algo.window_cache(),
            layout: layout_for(algo),
        },
    )?)
}

struct Bench<'g, 'r> {
    grid: &'g Grid,
    /// `overall`: each algorithm on its own default grid (else `grid`).
    grids: &'g [(Algo, Grid)],
    threads: usize,
    disk_dir: PathBuf,
    repeat: usize,
    runs: Vec<Sample>,
    placement: PlacementSource,
    reporter: &'r Reporter,
}

impl Bench<'_, '_> {
    /// The grid `algo` runs on.
    fn grid_for(&self, algo: Algo) -> &Grid {
        self.grids
            .iter()
            .find(|(a, _)| *a == algo)
            .map_or(self.grid, |(_, g)| g)
    }

    fn config(&self, algo: Algo, backend: Backend, ratio: f64) -> RunConfig {
        RunConfig {
            engine: EngineConfig {
                threads: self.threads,
                buffering: true,
            },
            disk_dir: self.disk_dir.clone(),
            placement: self.placement,
            ..RunConfig::new(algo, backend, ratio)
        }
    }

    /// Runs every config `self.repeat` times, round-robin (so interference
    /// from other processes spreads evenly), each on a fresh in-process
    /// fabric; returns per config the report of its median run, whose time
    /// the derived numbers use, and the `[min, max]` of its times. Every
    /// time is kept in the JSON's `runs`.
    fn measure_all(&mut self, cfgs: &[RunConfig]) -> Result<(Vec<RunReport>, Vec<[f64; 2]>)> {
        let mut all: Vec<Vec<RunReport>> = vec![Vec::new(); cfgs.len()];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); cfgs.len()];
        for round in 0..self.repeat {
            for (k, cfg) in cfgs.iter().enumerate() {
                let fabric = local_fabric()?;
                let grid = self.grid_for(cfg.algo);
                let (r, _, _) = run_analytics(grid, Some(&fabric), cfg, None)?;
                self.reporter.note(format!(
                    "  [{round}] {:<8} {:<6} ratio {:.2} threads {} chunk {:>8} buffering {:<5} {:>9.3} s (wall {:.3} s, placement {})  fetched {:>12} B  digest {}",
                    cfg.algo.name(),
                    match (cfg.backend, cfg.readahead_pages, cfg.paged_vertices) {
                        (Backend::Paged, 0, false) => "paged-no-ra".to_string(),
                        (Backend::Paged, w, false) => format!("paged-ra{w}"),
                        (Backend::Paged, w, true) => format!("paged-v-ra{w}"),
                        (b, _, _) => b.name().to_string(),
                    },
                    cfg.far_ratio,
                    cfg.engine.threads,
                    cfg.chunk_bytes,
                    cfg.engine.buffering,
                    r.time_s,
                    r.wall_s,
                    r.placement_source.map_or("-", |p| p.name()),
                    r.bytes_fetched,
                    r.digest
                ));
                times[k].push(r.time_s);
                all[k].push(r);
            }
        }
        // `repeat >= 1` is validated, so every configuration ran.
        let mut medians = Vec::with_capacity(cfgs.len());
        let mut ranges = Vec::with_capacity(cfgs.len());
        for (mut reports, t) in all.into_iter().zip(times) {
            let m = median_index(&t);
            let [lo, hi] = range(&t);
            let report = reports.swap_remove(m);
            self.runs.push(Sample {
                report: report.clone(),
                time_s_median: report.time_s,
                time_s_min: lo,
                time_s_max: hi,
                times_s: t,
            });
            medians.push(report);
            ranges.push([lo, hi]);
        }
        Ok((medians, ranges))
    }
}

/// Runs `experiment` with `settings`.
pub fn run(experiment: Experiment, settings: &Settings, r: &Reporter) -> Result<Report> {
    settings.validate()?;
    let scale = settings.scale;
    let cores = settings.threads;
    r.note(format!(
        "generating and partitioning R-MAT scale {scale} ..."
    ));
    let stripe_ids = match experiment {
        Experiment::Ratio => Algo::Bfs.stripe_ids(),
        _ => locus_analytics::grid::NO_STRIPES,
    };
    // `overall` compares backends on what a user runs: each algorithm's own
    // default grid (PageRank's LLC-sized partitions, BFS's compact striped
    // blocks, ...). The other experiments vary one setting on one grid.
    let (grids, one) = match experiment {
        Experiment::Overall => (
            Algo::ALL
                .iter()
                .map(|&a| rmat_grid_for(scale, a).map(|g| (a, g)))
                .collect::<Result<Vec<_>>>()?,
            None,
        ),
        _ => (Vec::new(), Some(rmat_grid(scale, stripe_ids)?)),
    };
    let grid = match &one {
        Some(g) => g,
        None => &grids[0].1,
    };
    let mut b = Bench {
        grid,
        grids: &grids,
        threads: cores,
        disk_dir: settings.disk_dir.clone(),
        repeat: settings.repeat,
        runs: Vec::new(),
        placement: settings.placement,
        reporter: r,
    };
    let mut table = None;
    let derived = match experiment {
        Experiment::Overall => overall(&mut b)?,
        Experiment::Ratio => ratio(&mut b)?,
        Experiment::Chunk => chunk(&mut b)?,
        Experiment::Buffering => buffering(&mut b)?,
        Experiment::Threads => {
            let t = match &settings.profile_table {
                Some(p) => Table::load(p)?,
                None => {
                    let small = scale.saturating_sub(2).max(10);
                    r.note(format!(
                        "building the offline thread table on R-MAT scale {small} ..."
                    ));
                    let mut threads: Vec<usize> = (1..=cores).collect();
                    threads.push(cores * 2);
                    control::collect(
                        &control::Collect {
                            scales: vec![small],
                            algos: Algo::ALL.to_vec(),
                            threads,
                            ratios: vec![0.8],
                        },
                        &mut |_| {},
                    )?
                }
            };
            let d = threads(&mut b, &t, cores)?;
            table = Some(t);
            d
        }
    };
    Ok(Report {
        experiment,
        preset: settings.preset,
        machine: format!("{} cores, {}", output::cores(), std::env::consts::ARCH),
        fabric: "in-process, 2 machines, 2000 ns + payload / 12.5 GB/s per remote operation".into(),
        graph: GraphInfo {
            generator: "Graph500 R-MAT a=0.57 b=c=0.19, edge factor 16, permuted ids".into(),
            scale,
            vertices: grid.vertex_count(),
            edges: grid.edge_count(),
            partitions: grid.shape().partitions,
            seed: 1,
        },
        repeat: settings.repeat,
        runs: b.runs,
        derived,
        table,
    })
}

const OVERALL_RATIO: f64 = 0.8;

fn overall(b: &mut Bench<'_, '_>) -> Result<serde_json::Value> {
    let mut cfgs = Vec::new();
    for algo in Algo::ALL {
        for backend in Backend::ALL {
            let ratio = if backend == Backend::Local {
                0.0
            } else {
                OVERALL_RATIO
            };
            cfgs.push(b.config(algo, backend, ratio));
        }
    }
    let (reports, ranges) = b.measure_all(&cfgs)?;
    let mut rows = Vec::new();
    let n = Backend::ALL.len();
    for ((algo, runs), rg) in Algo::ALL
        .iter()
        .zip(reports.chunks(n))
        .zip(ranges.chunks(n))
    {
        let t = |k: Backend| {
            runs.iter()
                .find(|r| r.backend == k)
                .map_or(f64::NAN, |r| r.time_s)
        };
        let range_s: serde_json::Map<String, serde_json::Value> = runs
            .iter()
            .zip(rg)
            .map(|(r, x)| (r.backend.name().to_string(), serde_json::json!(x)))
            .collect();
        let oracle = t(Backend::Local);
        let same = runs.windows(2).all(|w| w[0].digest == w[1].digest);
        rows.push(serde_json::json!({
            "algo": algo.name(),
            "oracle_s": oracle,
            "median_s": {
                "local": oracle,
                "disk": t(Backend::Disk),
                "far": t(Backend::Far),
                "paged": t(Backend::Paged),
            },
            "range_s": range_s,
            "normalised_to_oracle": {
                "local": 1.0,
                "disk": t(Backend::Disk) / oracle,
                "far": t(Backend::Far) / oracle,
                "paged": t(Backend::Paged) / oracle,
            },
            "far_speedup_over_paged": t(Backend::Paged) / t(Backend::Far),
            "far_speedup_over_disk": t(Backend::Disk) / t(Backend::Far),
            "same_digest_on_every_backend": same,
        }));
    }
    Ok(serde_json::json!({ "far_ratio": OVERALL_RATIO, "by_algo": rows }))
}

const RATIOS: [f64; 8] = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95];

fn ratio(b: &mut Bench<'_, '_>) -> Result<serde_json::Value> {
    // Per ratio: far, paged with Linux's default readahead (Fastswap as it
    // is for edges, vertex data local), paged without readahead (demand
    // faults only), and paged with readahead whose vertex data pages too in
    // the same budget (Fastswap as it is: the kernel swaps both).
    let cfgs: Vec<RunConfig> = RATIOS
        .iter()
        .flat_map(|&r| {
            let no_readahead = RunConfig {
                readahead_pages: 0,
                ..b.config(Algo::Bfs, Backend::Paged, r)
            };
            let vertices = RunConfig {
                paged_vertices: true,
                ..b.config(Algo::Bfs, Backend::Paged, r)
            };
            [
                b.config(Algo::Bfs, Backend::Far, r),
                b.config(Algo::Bfs, Backend::Paged, r),
                no_readahead,
                vertices,
            ]
        })
        .collect();
    let (reports, ranges) = b.measure_all(&cfgs)?;
    let rows: Vec<_> = RATIOS
        .iter()
        .zip(reports.chunks(4))
        .zip(ranges.chunks(4))
        .map(|((r, four), rg)| {
            let (far, ra, plain, pv) = (&four[0], &four[1], &four[2], &four[3]);
            let vp = pv.vertex_paging.unwrap_or_default();
            serde_json::json!({
                "far_ratio": r,
                "far_s": far.time_s,
                "far_range_s": rg[0],
                "far_ratio_achieved": far.far_ratio_achieved,
                "paged_readahead_pages": ra.readahead_window,
                "paged_readahead_s": ra.time_s,
                "paged_readahead_range_s": rg[1],
                "paged_readahead_page_faults": ra.page_faults,
                "paged_readahead_pages_read_ahead": ra.readahead_pages,
                "paged_readahead_bytes_fetched": ra.bytes_fetched,
                "paged_no_readahead_s": plain.time_s,
                "paged_no_readahead_range_s": rg[2],
                "paged_no_readahead_page_faults": plain.page_faults,
                "paged_no_readahead_bytes_fetched": plain.bytes_fetched,
                "paged_far_ratio_achieved": ra.far_ratio_achieved,
                "paged_vertices_s": pv.time_s,
                "paged_vertices_range_s": rg[3],
                "paged_vertices_page_faults": pv.page_faults,
                "paged_vertices_bytes_fetched": pv.bytes_fetched,
                "paged_vertices_vertex_faults": vp.faults,
                "paged_vertices_vertex_readahead_pages": vp.readahead_pages,
                "paged_vertices_vertex_minor_faults": vp.minor_faults,
                "paged_vertices_vertex_writebacks": vp.writebacks,
                "paged_vertices_vertex_zero_fills": vp.zero_fills,
                "paged_vertices_far_ratio_achieved": pv.far_ratio_achieved,
                "paged_readahead_over_far": ra.time_s / far.time_s,
                "paged_no_readahead_over_far": plain.time_s / far.time_s,
                "paged_vertices_over_far": pv.time_s / far.time_s,
            })
        })
        .collect();
    Ok(serde_json::json!({ "algo": "bfs", "by_ratio": rows }))
}

const CHUNKS: [u64; 6] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];

fn chunk(b: &mut Bench<'_, '_>) -> Result<serde_json::Value> {
    let algos = [Algo::Bfs, Algo::PageRank];
    let mut cfgs = Vec::new();
    for algo in algos {
        for c in CHUNKS {
            let mut cfg = b.config(algo, Backend::Far, OVERALL_RATIO);
            cfg.chunk_bytes = c;
            cfgs.push(cfg);
        }
    }
    let (reports, ranges) = b.measure_all(&cfgs)?;
    let out: Vec<_> = algos
        .iter()
        .zip(reports.chunks(CHUNKS.len()))
        .zip(ranges.chunks(CHUNKS.len()))
        .map(|((algo, runs), rg)| {
            let base = runs[0].time_s;
            serde_json::json!({
                "algo": algo.name(),
                "by_chunk": runs.iter().zip(rg).map(|(r, x)| serde_json::json!({
                    "chunk_bytes": r.chunk_bytes,
                    "time_s": r.time_s,
                    "range_s": x,
                    "normalised_to_4k": r.time_s / base,
                    "fetch_ops": r.fetch_ops,
                    "buffer_bytes_peak": r.buffer_bytes_peak,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(serde_json::json!({ "far_ratio": OVERALL_RATIO, "by_algo": out }))
}

fn buffering(b: &mut Bench<'_, '_>) -> Result<serde_json::Value> {
    let algos = [Algo::Bfs, Algo::PageRank];
    let mut cfgs = Vec::new();
    for algo in algos {
        for on in [false, true] {
            let mut cfg = b.config(algo, Backend::Far, OVERALL_RATIO);
            cfg.engine.buffering = on;
            cfgs.push(cfg);
        }
    }
    let (reports, ranges) = b.measure_all(&cfgs)?;
    let out: Vec<_> = algos
        .iter()
        .zip(reports.chunks(2))
        .zip(ranges.chunks(2))
        .map(|((algo, pair), rg)| {
            let (off, on) = (&pair[0], &pair[1]);
            serde_json::json!({
                "algo": algo.name(),
                "without_buffering_s": off.time_s,
                "without_buffering_range_s": rg[0],
                "with_buffering_s": on.time_s,
                "with_buffering_range_s": rg[1],
                "reduction_s": off.time_s - on.time_s,
                "reduction_relative": (off.time_s - on.time_s) / off.time_s,
                "buffer_bytes_peak": on.buffer_bytes_peak,
                "wait_s_without": off.wait_s,
                "wait_s_with": on.wait_s,
            })
        })
        .collect();
    Ok(serde_json::json!({ "far_ratio": OVERALL_RATIO, "by_algo": out }))
}

fn threads(b: &mut Bench<'_, '_>, table: &Table, cores: usize) -> Result<serde_json::Value> {
    let mut cfgs = Vec::new();
    let mut autos = Vec::new();
    for algo in Algo::ALL {
        let auto = table.pick_threads(algo, b.grid.edge_count(), OVERALL_RATIO, cores)?;
        autos.push(auto);
        for t in [1usize, 2, auto] {
            let mut cfg = b.config(algo, Backend::Far, OVERALL_RATIO);
            cfg.engine.threads = t;
            cfgs.push(cfg);
        }
    }
    let (reports, ranges) = b.measure_all(&cfgs)?;
    let out: Vec<_> = Algo::ALL
        .iter()
        .zip(reports.chunks(3))
        .zip(ranges.chunks(3))
        .zip(autos)
        .map(|(((algo, r), rg), auto)| {
            serde_json::json!({
                "algo": algo.name(),
                "one_thread_s": r[0].time_s,
                "one_thread_range_s": rg[0],
                "two_threads_s": r[1].time_s,
                "two_threads_range_s": rg[1],
                "auto_threads": auto,
                "auto_s": r[2].time_s,
                "auto_range_s": rg[2],
                "speedup_two_over_one": r[0].time_s / r[1].time_s,
            })
        })
        .collect();
    Ok(serde_json::json!({ "far_ratio": OVERALL_RATIO, "by_algo": out }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_a_run_that_happened() {
        assert_eq!(median_index(&[3.0, 1.0, 2.0]), 2);
        assert_eq!(median_index(&[5.0]), 0);
        // Even count: the lower middle.
        assert_eq!(median_index(&[4.0, 1.0, 3.0, 2.0]), 3);
        // Not the fastest: one lucky run does not decide.
        let t = [9.0, 1.0, 8.5, 9.5, 8.0];
        assert_eq!(t[median_index(&t)], 8.5);
        assert_eq!(range(&t), [1.0, 9.5]);
    }
}
