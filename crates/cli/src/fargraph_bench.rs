//! `locus bench fargraph <experiment>`: the Fargraph+ evaluation (10.1-10.4)
//! on R-MAT graphs over the in-process fabric (2 us + payload / 12.5 GB/s),
//! written as JSON plus a PNG per experiment.
//!
//! - `overall` (Fig. 15): every algorithm on every backend at far ratio 0.8,
//!   times normalised to the Oracle.
//! - `ratio` (Fig. 18): BFS time as the far ratio rises from 0 to 0.95, far
//!   versus paged.
//! - `chunk` (Fig. 19): BFS and PageRank on far at 0.8 with chunks of 4 KB to
//!   4 MB, normalised to 4 KB.
//! - `buffering` (Table 4): BFS and PageRank on far at 0.8 with and without
//!   double buffering.
//! - `threads` (Fig. 16): every algorithm on far at 0.8 with 1 and 2 threads
//!   and the count `--threads auto` picks from an offline table, which this
//!   experiment first builds on a smaller graph (or reads with
//!   `--profile-table`).
//!
//! Each configuration runs `--repeat` times (default 3), round-robin over the
//! configurations so that interference from other processes on the machine
//! spreads evenly; derived numbers use each configuration's fastest run, and
//! the JSON keeps every time. Placement comes from one untimed profiling run
//! per algorithm on the Oracle.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use locus_analytics::algo::Algo;
use locus_analytics::control::{self, Table};
use locus_analytics::engine::Profile;
use locus_analytics::run::{run as run_analytics, Report, RunConfig};
use locus_analytics::store::Backend;
use locus_analytics::{local_fabric, EngineConfig, GraphInput, Grid};
use locus_graph::{Rmat, RmatConfig};
use locus_plot::{BarChart, LineChart, Series};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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
    fn name(self) -> &'static str {
        match self {
            Experiment::Overall => "overall",
            Experiment::Ratio => "ratio",
            Experiment::Chunk => "chunk",
            Experiment::Buffering => "buffering",
            Experiment::Threads => "threads",
        }
    }
}

#[derive(Args, Debug)]
pub struct FargraphArgs {
    /// Which experiment.
    pub experiment: Experiment,
    /// quick (R-MAT scale 20, about a minute each) or full (scale 22).
    #[arg(long, default_value = "quick")]
    pub preset: String,
    /// R-MAT scale instead of the preset's.
    #[arg(long)]
    pub scale: Option<u32>,
    /// Print the JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory to write EXPERIMENT.json and EXPERIMENT.png into.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Runs per configuration (default 3); the fastest is used.
    #[arg(long)]
    pub repeat: Option<usize>,
    /// `threads`: read the offline table from here instead of building one.
    #[arg(long, value_name = "FILE")]
    pub profile_table: Option<PathBuf>,
    /// `overall`: where the disk backend's block files go.
    #[arg(long, value_name = "DIR")]
    pub disk_dir: Option<PathBuf>,
}

/// One experiment's output.
#[derive(Serialize)]
struct Output {
    experiment: String,
    preset: String,
    machine: String,
    fabric: String,
    graph: GraphInfo,
    /// Runs of each configuration (round-robin, `repeat` each).
    repeat: usize,
    /// Every configuration: its fastest run's report and all its times.
    runs: Vec<Sample>,
    /// Numbers derived from the runs (normalised times, speedups).
    derived: serde_json::Value,
    /// `threads`: the offline table `auto` picked from.
    table: Option<Table>,
}

#[derive(Serialize)]
struct GraphInfo {
    generator: String,
    scale: u32,
    vertices: u64,
    edges: u64,
    partitions: u32,
    seed: u64,
}

fn rmat_grid(scale: u32) -> Result<Grid, String> {
    let rmat = Rmat::new(RmatConfig {
        scale,
        ..RmatConfig::default()
    })
    .map_err(|e| e.to_string())?;
    Grid::build(GraphInput::Rmat(&rmat), None).map_err(|e| e.to_string())
}

struct Bench<'g> {
    grid: &'g Grid,
    threads: usize,
    disk_dir: PathBuf,
    repeat: usize,
    runs: Vec<Sample>,
    profiles: Vec<(Algo, Profile)>,
}

/// A measured configuration: the report of its fastest run and every run's time.
#[derive(Serialize, Clone)]
struct Sample {
    report: Report,
    times_s: Vec<f64>,
}

impl Bench<'_> {
    /// The Oracle's profile of `algo` (measured once, untimed for placement).
    fn profile(&mut self, algo: Algo) -> Result<Profile, String> {
        if let Some((_, p)) = self.profiles.iter().find(|(a, _)| *a == algo) {
            return Ok(p.clone());
        }
        let cfg = self.config(algo, Backend::Local, 0.0);
        let fabric = local_fabric().map_err(|e| e.to_string())?;
        let (_, _, p) =
            run_analytics(self.grid, Some(&fabric), &cfg, None).map_err(|e| e.to_string())?;
        self.profiles.push((algo, p.clone()));
        Ok(p)
    }

    fn config(&self, algo: Algo, backend: Backend, ratio: f64) -> RunConfig {
        RunConfig {
            engine: EngineConfig {
                threads: self.threads,
                buffering: true,
            },
            disk_dir: self.disk_dir.clone(),
            ..RunConfig::new(algo, backend, ratio)
        }
    }

    /// Runs every config `self.repeat` times, round-robin (so interference
    /// from other processes spreads evenly), each on a fresh in-process
    /// fabric; returns per config the report of its fastest run, whose time
    /// the derived numbers use. Every time is kept in `times`.
    fn measure_all(&mut self, cfgs: &[RunConfig]) -> Result<Vec<Report>, String> {
        let mut best: Vec<Option<Report>> = vec![None; cfgs.len()];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); cfgs.len()];
        for round in 0..self.repeat {
            for (k, cfg) in cfgs.iter().enumerate() {
                let profile = self.profile(cfg.algo)?;
                let fabric = local_fabric().map_err(|e| e.to_string())?;
                let (r, _, _) = run_analytics(self.grid, Some(&fabric), cfg, Some(&profile))
                    .map_err(|e| e.to_string())?;
                eprintln!(
                    "  [{round}] {:<8} {:<6} ratio {:.2} threads {} chunk {:>8} buffering {:<5} {:>9.3} s  fetched {:>12} B  digest {}",
                    cfg.algo.name(),
                    cfg.backend.name(),
                    cfg.far_ratio,
                    cfg.engine.threads,
                    cfg.chunk_bytes,
                    cfg.engine.buffering,
                    r.time_s,
                    r.bytes_fetched,
                    r.digest
                );
                times[k].push(r.time_s);
                if best[k].as_ref().is_none_or(|b| r.time_s < b.time_s) {
                    best[k] = Some(r);
                }
            }
        }
        let best: Vec<Report> = best.into_iter().map(|b| b.expect("repeat >= 1")).collect();
        for (r, t) in best.iter().zip(times) {
            self.runs.push(Sample {
                report: r.clone(),
                times_s: t,
            });
        }
        Ok(best)
    }
}

pub fn run(a: FargraphArgs) -> Result<(), String> {
    let full = match a.preset.as_str() {
        "quick" => false,
        "full" => true,
        other => return Err(format!("--preset {other}: expected quick or full")),
    };
    let scale = a.scale.unwrap_or(if full { 22 } else { 20 });
    let repeat = a.repeat.unwrap_or(3);
    if repeat == 0 || repeat > REPEAT_MAX {
        return Err(format!("--repeat {repeat}: must be 1..={REPEAT_MAX}"));
    }
    let cores = crate::analytics::cores();
    eprintln!("generating and partitioning R-MAT scale {scale} ...");
    let grid = rmat_grid(scale)?;
    let mut b = Bench {
        grid: &grid,
        threads: cores,
        disk_dir: a.disk_dir.clone().unwrap_or_else(std::env::temp_dir),
        repeat,
        runs: Vec::new(),
        profiles: Vec::new(),
    };
    let mut table = None;
    let derived = match a.experiment {
        Experiment::Overall => overall(&mut b)?,
        Experiment::Ratio => ratio(&mut b)?,
        Experiment::Chunk => chunk(&mut b)?,
        Experiment::Buffering => buffering(&mut b)?,
        Experiment::Threads => {
            let t = match &a.profile_table {
                Some(p) => Table::load(p).map_err(|e| e.to_string())?,
                None => {
                    let small = scale.saturating_sub(2).max(10);
                    eprintln!("building the offline thread table on R-MAT scale {small} ...");
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
                    )
                    .map_err(|e| e.to_string())?
                }
            };
            let d = threads(&mut b, &t, cores)?;
            table = Some(t);
            d
        }
    };
    let out = Output {
        experiment: a.experiment.name().into(),
        preset: a.preset.clone(),
        machine: format!("{cores} cores, {}", std::env::consts::ARCH),
        fabric: "in-process, 2 machines, 2000 ns + payload / 12.5 GB/s per remote operation".into(),
        graph: GraphInfo {
            generator: "Graph500 R-MAT a=0.57 b=c=0.19, edge factor 16, permuted ids".into(),
            scale,
            vertices: grid.vertex_count(),
            edges: grid.edge_count(),
            partitions: grid.shape().partitions,
            seed: 1,
        },
        repeat,
        runs: b.runs,
        derived,
        table,
    };
    let json = serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join(format!("{}.json", a.experiment.name()));
        std::fs::write(&path, &json)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
        let png = dir.join(format!("{}.png", a.experiment.name()));
        plot(a.experiment, &out, &png)?;
        eprintln!("wrote {}", png.display());
    }
    if a.json {
        println!("{json}");
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(&out.derived).map_err(|e| e.to_string())?
        );
    }
    Ok(())
}

const OVERALL_RATIO: f64 = 0.8;
/// Most runs per configuration.
const REPEAT_MAX: usize = 20;

fn overall(b: &mut Bench<'_>) -> Result<serde_json::Value, String> {
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
    let reports = b.measure_all(&cfgs)?;
    let mut rows = Vec::new();
    for (algo, runs) in Algo::ALL.iter().zip(reports.chunks(Backend::ALL.len())) {
        let t = |k: Backend| {
            runs.iter()
                .find(|r| r.backend == k)
                .map_or(f64::NAN, |r| r.time_s)
        };
        let oracle = t(Backend::Local);
        let same = runs.windows(2).all(|w| w[0].digest == w[1].digest);
        rows.push(serde_json::json!({
            "algo": algo.name(),
            "oracle_s": oracle,
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

fn ratio(b: &mut Bench<'_>) -> Result<serde_json::Value, String> {
    let cfgs: Vec<RunConfig> = RATIOS
        .iter()
        .flat_map(|&r| {
            [
                b.config(Algo::Bfs, Backend::Far, r),
                b.config(Algo::Bfs, Backend::Paged, r),
            ]
        })
        .collect();
    let reports = b.measure_all(&cfgs)?;
    let rows: Vec<_> = RATIOS
        .iter()
        .zip(reports.chunks(2))
        .map(|(r, pair)| {
            let (far, paged) = (&pair[0], &pair[1]);
            serde_json::json!({
                "far_ratio": r,
                "far_s": far.time_s,
                "far_ratio_achieved": far.far_ratio_achieved,
                "paged_s": paged.time_s,
                "paged_far_ratio_achieved": paged.far_ratio_achieved,
                "paged_page_faults": paged.page_faults,
                "paged_over_far": paged.time_s / far.time_s,
            })
        })
        .collect();
    Ok(serde_json::json!({ "algo": "bfs", "by_ratio": rows }))
}

const CHUNKS: [u64; 6] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];

fn chunk(b: &mut Bench<'_>) -> Result<serde_json::Value, String> {
    let algos = [Algo::Bfs, Algo::PageRank];
    let mut cfgs = Vec::new();
    for algo in algos {
        for c in CHUNKS {
            let mut cfg = b.config(algo, Backend::Far, OVERALL_RATIO);
            cfg.chunk_bytes = c;
            cfgs.push(cfg);
        }
    }
    let reports = b.measure_all(&cfgs)?;
    let out: Vec<_> = algos
        .iter()
        .zip(reports.chunks(CHUNKS.len()))
        .map(|(algo, runs)| {
            let base = runs[0].time_s;
            serde_json::json!({
                "algo": algo.name(),
                "by_chunk": runs.iter().map(|r| serde_json::json!({
                    "chunk_bytes": r.chunk_bytes,
                    "time_s": r.time_s,
                    "normalised_to_4k": r.time_s / base,
                    "fetch_ops": r.fetch_ops,
                    "buffer_bytes_peak": r.buffer_bytes_peak,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(serde_json::json!({ "far_ratio": OVERALL_RATIO, "by_algo": out }))
}

fn buffering(b: &mut Bench<'_>) -> Result<serde_json::Value, String> {
    let algos = [Algo::Bfs, Algo::PageRank];
    let mut cfgs = Vec::new();
    for algo in algos {
        for on in [false, true] {
            let mut cfg = b.config(algo, Backend::Far, OVERALL_RATIO);
            cfg.engine.buffering = on;
            cfgs.push(cfg);
        }
    }
    let reports = b.measure_all(&cfgs)?;
    let out: Vec<_> = algos
        .iter()
        .zip(reports.chunks(2))
        .map(|(algo, pair)| {
            let (off, on) = (&pair[0], &pair[1]);
            serde_json::json!({
                "algo": algo.name(),
                "without_buffering_s": off.time_s,
                "with_buffering_s": on.time_s,
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

fn threads(b: &mut Bench<'_>, table: &Table, cores: usize) -> Result<serde_json::Value, String> {
    let mut cfgs = Vec::new();
    let mut autos = Vec::new();
    for algo in Algo::ALL {
        let auto = table
            .pick_threads(algo, b.grid.edge_count(), OVERALL_RATIO, cores)
            .map_err(|e| e.to_string())?;
        autos.push(auto);
        for t in [1usize, 2, auto] {
            let mut cfg = b.config(algo, Backend::Far, OVERALL_RATIO);
            cfg.engine.threads = t;
            cfgs.push(cfg);
        }
    }
    let reports = b.measure_all(&cfgs)?;
    let out: Vec<_> = Algo::ALL
        .iter()
        .zip(reports.chunks(3))
        .zip(autos)
        .map(|((algo, r), auto)| {
            serde_json::json!({
                "algo": algo.name(),
                "one_thread_s": r[0].time_s,
                "two_threads_s": r[1].time_s,
                "auto_threads": auto,
                "auto_s": r[2].time_s,
                "speedup_two_over_one": r[0].time_s / r[1].time_s,
            })
        })
        .collect();
    Ok(serde_json::json!({ "far_ratio": OVERALL_RATIO, "by_algo": out }))
}

fn plot(e: Experiment, o: &Output, path: &Path) -> Result<(), String> {
    let d = &o.derived;
    let by = |key: &str| d[key].as_array().cloned().unwrap_or_default();
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let scale = o.graph.scale;
    let r = match e {
        Experiment::Overall => {
            let rows = by("by_algo");
            let groups = rows
                .iter()
                .map(|r| r["algo"].as_str().unwrap_or("?").to_string())
                .collect();
            let series = Backend::ALL
                .iter()
                .map(|k| {
                    (
                        k.name().to_string(),
                        rows.iter()
                            .map(|r| num(&r["normalised_to_oracle"][k.name()]))
                            .collect(),
                    )
                })
                .collect();
            BarChart {
                title: format!(
                    "Fig. 15: time at far ratio 0.8, normalised to Oracle (R-MAT {scale})"
                ),
                y_label: "time / Oracle time".into(),
                groups,
                series,
            }
            .write_png(path)
        }
        Experiment::Ratio => {
            let rows = by("by_ratio");
            let series = |key: &str, label: &str| Series {
                label: label.into(),
                points: rows
                    .iter()
                    .map(|r| (num(&r["far_ratio"]), num(&r[key])))
                    .collect(),
            };
            LineChart {
                title: format!("Fig. 18: BFS time by far-memory ratio (R-MAT {scale})"),
                x_label: "far-memory ratio".into(),
                y_label: "time (s)".into(),
                x_log: false,
                y_log: true,
                series: vec![
                    series("far_s", "far (Fargraph+)"),
                    series("paged_s", "paged (Fastswap-like)"),
                ],
            }
            .write_png(path)
        }
        Experiment::Chunk => {
            let series = by("by_algo")
                .iter()
                .map(|a| Series {
                    label: a["algo"].as_str().unwrap_or("?").to_string(),
                    points: a["by_chunk"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .iter()
                        .map(|r| (num(&r["chunk_bytes"]), num(&r["normalised_to_4k"])))
                        .collect(),
                })
                .collect();
            LineChart {
                title: format!(
                    "Fig. 19: far at ratio 0.8 by chunk size, normalised to 4 KB (R-MAT {scale})"
                ),
                x_label: "chunk (bytes)".into(),
                y_label: "time / time at 4 KB".into(),
                x_log: true,
                y_log: false,
                series,
            }
            .write_png(path)
        }
        Experiment::Buffering => {
            let rows = by("by_algo");
            BarChart {
                title: format!(
                    "Table 4: far at ratio 0.8 with and without double buffering (R-MAT {scale})"
                ),
                y_label: "time (s)".into(),
                groups: rows
                    .iter()
                    .map(|r| r["algo"].as_str().unwrap_or("?").to_string())
                    .collect(),
                series: vec![
                    (
                        "without buffering".into(),
                        rows.iter()
                            .map(|r| num(&r["without_buffering_s"]))
                            .collect(),
                    ),
                    (
                        "with buffering".into(),
                        rows.iter().map(|r| num(&r["with_buffering_s"])).collect(),
                    ),
                ],
            }
            .write_png(path)
        }
        Experiment::Threads => {
            let rows = by("by_algo");
            BarChart {
                title: format!("Fig. 16: far at ratio 0.8 by threads (R-MAT {scale})"),
                y_label: "time (s)".into(),
                groups: rows
                    .iter()
                    .map(|r| {
                        format!(
                            "{} (auto={})",
                            r["algo"].as_str().unwrap_or("?"),
                            r["auto_threads"]
                        )
                    })
                    .collect(),
                series: vec![
                    (
                        "1 thread".into(),
                        rows.iter().map(|r| num(&r["one_thread_s"])).collect(),
                    ),
                    (
                        "2 threads".into(),
                        rows.iter().map(|r| num(&r["two_threads_s"])).collect(),
                    ),
                    (
                        "auto".into(),
                        rows.iter().map(|r| num(&r["auto_s"])).collect(),
                    ),
                ],
            }
            .write_png(path)
        }
    };
    r.map_err(|e| e.to_string())
}
