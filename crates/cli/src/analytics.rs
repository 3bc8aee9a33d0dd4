//! `locus analytics`: far-memory graph analytics (Fargraph+) from the command
//! line. `run` runs one algorithm on one backend and prints time, iterations,
//! bytes fetched and a result digest (and with `--output` writes every
//! vertex's result); it refuses, before allocating, a graph whose estimated
//! memory exceeds `--memory-max` (`--compact-ids` numbers only the vertices
//! present); `serve` is a far-memory server over
//! TCP; `profile` builds the offline thread table that `--threads auto` uses.
//!
//! (Slightly over 800 lines: every flag of `run` is checked and reported
//! here, next to the one place that turns them into a `RunConfig`.)

mod serve;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use locus_analytics::algo::{
    self, Algo, Params, Precision, PAGERANK_ITERATIONS_DEFAULT, RADII_SEED_DEFAULT,
};
use locus_analytics::control::Table;
use locus_analytics::grid::{LayoutChoice, NO_STRIPES};
use locus_analytics::input::EdgeMode;
use locus_analytics::input::{self as graph_input, IdMap, LoadLimits, Loaded};
use locus_analytics::layout::layout_for;
use locus_analytics::memory::{self, Estimate};
use locus_analytics::prepared;
use locus_analytics::results::{self, ResultFormat};
use locus_analytics::run::{run, PlacementSource, Report, RunConfig};
use locus_analytics::saved::SavedProfile;
use locus_analytics::store::paged::READAHEAD_PAGES_DEFAULT;
use locus_analytics::store::Backend;
use locus_analytics::{local_fabric, EngineConfig, Grid, Profile};

use crate::CliResult;
use locus_fabric::tcp::{TcpConfig, TcpFabric};
use locus_fabric::Fabric;
use locus_graph::{Format, LoadOptions, Rmat, RmatConfig};

/// Default file of the offline thread table.
pub const PROFILE_TABLE_DEFAULT: &str = "fargraph-profile.json";

#[derive(Args, Debug)]
pub struct AnalyticsArgs {
    #[command(subcommand)]
    pub which: AnalyticsCommand,
}

#[derive(Subcommand, Debug)]
pub enum AnalyticsCommand {
    /// Run BFS, SSSP, PageRank, CC (WCC), BC, TC or Radii on one backend
    /// and print time, iterations, bytes fetched and a digest of the result.
    ///
    /// BC streams both block orders (forward levels by column, backward
    /// levels by row), so its grid holds twice the bytes of the others'.
    ///
    /// TC streams the edge blocks once from the backend, then counts on a
    /// CSR of the undirected simple graph in local memory (about 12 bytes
    /// per edge that --far-ratio does not move far).
    ///
    /// SSSP reads edge weights (a third text or `.wel` column, a valued
    /// .mtx's values: non-negative integers) into the grid's blocks beside
    /// the edges, which doubles the bytes every pass fetches from far
    /// memory or disk; input without weights, or with --ignore-weights,
    /// gives every edge weight 1, and the output says which.
    Run(Box<RunArgs>),
    /// Preprocess a graph into a grid on disk once (`DIR/grid.bin`, format
    /// in `locus_analytics::prepared`); `analytics run --prepared DIR` reuses it.
    Prepare(PrepareArgs),
    /// Serve far memory over TCP for `analytics run --server ADDR`.
    Serve(ServeArgs),
    /// Build the offline table (algorithm, graph size, threads, far ratio ->
    /// time) that `--threads auto` picks from (Fargraph+ 7).
    Profile(ProfileArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// bfs, sssp, pagerank, cc (or wcc), bc, tc or radii.
    #[arg(long)]
    pub algo: String,
    /// A grid written by `analytics prepare` (instead of --graph or --rmat-scale).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["graph", "rmat_scale", "partitions", "compact_ids", "vertex_count", "format", "stripe_ids", "edge_layout", "symmetrize", "ignore_weights"])]
    pub prepared: Option<PathBuf>,
    /// Edge list: SNAP text (`.wel`: a third weight column), Matrix Market
    /// (`.mtx`), or GridGraph binary u32 pairs (`.bin`); gzip-compressed too.
    #[arg(long, value_name = "FILE", conflicts_with = "rmat_scale")]
    pub graph: Option<PathBuf>,
    /// Edge-list format (text, mtx or binary; default: from the extension).
    #[arg(long)]
    pub format: Option<String>,
    /// Drop edge weights (a third text column, a real or integer .mtx's
    /// values): the algorithms but SSSP refuse a weighted file without it;
    /// SSSP then gives every edge weight 1 (and says so).
    #[arg(long)]
    pub ignore_weights: bool,
    /// Take every edge in both directions (duplicates removed).
    #[arg(long, conflicts_with = "directed")]
    pub symmetrize: bool,
    /// Take edges as directed, as given (the default; stated in the output).
    #[arg(long)]
    pub directed: bool,
    /// Vertex count of the edge list (default: largest id + 1).
    #[arg(long)]
    pub vertex_count: Option<u64>,
    /// Generate a Graph500 R-MAT graph of 2^SCALE vertices instead of reading a file.
    #[arg(long, value_name = "SCALE")]
    pub rmat_scale: Option<u32>,
    /// R-MAT edges per vertex.
    #[arg(long, default_value_t = 16)]
    pub edge_factor: u32,
    /// R-MAT seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// local (Oracle), disk, far (Fargraph+) or paged (Fastswap-like).
    #[arg(long, default_value = "far")]
    pub backend: String,
    /// Far-memory ratio: far memory over all memory the run uses (0..=1).
    #[arg(long, default_value_t = 0.8)]
    pub far_ratio: f64,
    /// Engine threads, or `auto` (picked from the profile table; default: one per core).
    #[arg(long)]
    pub threads: Option<String>,
    /// The offline table for `--threads auto`.
    #[arg(long, value_name = "FILE", default_value = PROFILE_TABLE_DEFAULT)]
    pub profile_table: PathBuf,
    /// Bytes per one-sided READ of the far backend (K, M suffixes).
    #[arg(long, default_value = "256K")]
    pub chunk: String,
    /// Fetch, then compute (no double buffering).
    #[arg(long)]
    pub no_buffering: bool,
    /// Paged backend: pages read ahead, asynchronously, after a fault (0: none;
    /// 8 is Linux's default swap readahead, `vm.page-cluster` 3).
    #[arg(long, default_value_t = READAHEAD_PAGES_DEFAULT)]
    pub readahead_pages: u32,
    /// Paged backend: vertex data pages too, in the same local budget as the
    /// edge pages (userfaultfd; Fastswap as it is, where the kernel swaps both).
    #[arg(long)]
    pub paged_vertices: bool,
    /// Grid partitions per side (default: automatic).
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Source ids per stripe of a column block, so sparse levels skip
    /// inactive source ranges (0: one stripe per block; default: 8192 for
    /// bfs and radii, none for wcc and pagerank).
    #[arg(long)]
    pub stripe_ids: Option<u64>,
    /// Edge encoding: compact (4-byte block-relative edges; automatic
    /// partitions at most 65536 ids wide), wide (8-byte) or auto (compact
    /// where the L2-sized partitions allow). Default: compact for bfs and
    /// radii, auto for wcc and pagerank.
    #[arg(long)]
    pub edge_layout: Option<String>,

    /// PageRank iterations (with --tolerance, the most).
    #[arg(long, default_value_t = PAGERANK_ITERATIONS_DEFAULT)]
    pub iterations: u32,
    /// PageRank: stop after the first iteration that moves the ranks by
    /// less than this in L1, as GAPBS does (its default is 1e-4).
    #[arg(long)]
    pub tolerance: Option<f64>,
    /// PageRank's value type: f32 (half the vertex bytes, within the bound
    /// in `locus_analytics::algo::pagerank_f32_tolerance` of f64) or f64.
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// BFS and SSSP root (default: the vertex with the most out-edges).
    #[arg(long)]
    pub root: Option<u32>,
    /// SSSP: the delta-stepping bin width (GAPBS's default, 1). Each bin
    /// costs at least one pass over its vertices' blocks, so with weights
    /// up to 255 a delta of tens makes many-fold fewer passes.
    #[arg(long, default_value_t = algo::SSSP_DELTA_DEFAULT)]
    pub delta: u32,
    /// BC: `all`, a count N (sampled as GAPBS does: uniformly among vertices
    /// with an out-edge, repeats allowed, from --sources-seed), or vertices
    /// V,V,... (default: --root, else the vertex with the most out-edges).
    #[arg(long)]
    pub sources: Option<String>,
    /// BC: the seed of a sampled --sources N (GAPBS's kRandSeed by default).
    #[arg(long, default_value_t = algo::bc::BC_SEED_DEFAULT)]
    pub sources_seed: u64,
    /// Radii sample seed.
    #[arg(long, default_value_t = RADII_SEED_DEFAULT)]
    pub radii_seed: u64,
    /// Directory for the disk backend's block file.
    #[arg(long, value_name = "DIR")]
    pub disk_dir: Option<PathBuf>,
    /// A far-memory server (`locus analytics serve`) to use over TCP instead
    /// of the in-process fabric.
    #[arg(long, value_name = "ADDR")]
    pub server: Option<SocketAddr>,
    /// Disk and far: place blocks from a profile saved by an earlier run
    /// (`--save-profile`) on this graph with another root or seed, instead
    /// of from block sizes and degrees.
    #[arg(long, value_name = "FILE", conflicts_with = "profile_run")]
    pub profile: Option<PathBuf>,
    /// Accept a `--profile` made with this run's own root or seed (it knows
    /// which blocks this run reads; the report says so).
    #[arg(long, requires = "profile")]
    pub profile_same_root_ok: bool,
    /// Disk and far: place blocks from a profiling run of the same algorithm
    /// on the Oracle first, timed (`profile_s`, and in `wall_s`).
    #[arg(long)]
    pub profile_run: bool,
    /// Write this run's profile (with the graph's identity and the root or
    /// seed) for a later run's `--profile`.
    #[arg(long, value_name = "FILE")]
    pub save_profile: Option<PathBuf>,
    /// Check the result after the run with GAPBS's verification logic
    /// (`locus_analytics::verify`: a serial BFS, Dijkstra, Brandes,
    /// set intersections, component search or PageRank on the graph the
    /// run saw); a difference exits non-zero naming the vertices.
    #[arg(long)]
    pub verify: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Refuse a run whose estimated memory exceeds this (K, M, G suffixes;
    /// default: half of this machine's memory).
    #[arg(long, value_name = "BYTES")]
    pub memory_max: Option<String>,
    /// Number vertices by the ids the edges name, in increasing order, so
    /// sparse or huge ids cost nothing; results keep the input's ids.
    #[arg(long)]
    pub compact_ids: bool,
    /// Write every vertex's result (BFS depth and parent, SSSP distance, WCC label,
    /// PageRank score, BC score, Radii estimate, TC triangles through it)
    /// to FILE.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// text (`vertex value` lines) or binary (see `locus_analytics::results`).
    #[arg(long, default_value = "text")]
    pub output_format: String,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; printed on start).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Most bytes of far memory to lend (K, M, G suffixes).
    #[arg(long, default_value = "16G")]
    pub memory: String,
    /// Exit after this many seconds (or when standard input closes).
    #[arg(long, default_value_t = 3600)]
    pub lifetime_s: u64,
}

#[derive(Args, Debug)]
pub struct PrepareArgs {
    /// Edge list (SNAP text, or GridGraph binary u32 pairs for .bin).
    #[arg(value_name = "GRAPH", conflicts_with = "rmat_scale")]
    pub graph: Option<PathBuf>,
    /// Edge-list format: snap or binary (default: from the extension).
    #[arg(long)]
    pub format: Option<String>,
    /// Vertex count of the edge list (default: largest id + 1).
    #[arg(long)]
    pub vertex_count: Option<u64>,
    /// Generate a Graph500 R-MAT graph of 2^SCALE vertices instead.
    #[arg(long, value_name = "SCALE")]
    pub rmat_scale: Option<u32>,
    /// R-MAT edges per vertex.
    #[arg(long, default_value_t = 16)]
    pub edge_factor: u32,
    /// R-MAT seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Grid partitions per side (default: a partition's values fit L2).
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Source ids per stripe of a column block, so sparse levels skip
    /// inactive source ranges (0: one stripe per block; default: 8192 for
    /// bfs and radii, none for wcc and pagerank).
    #[arg(long)]
    pub stripe_ids: Option<u64>,
    /// Edge encoding: compact (4-byte block-relative edges; automatic
    /// partitions at most 65536 ids wide), wide (8-byte) or auto (compact
    /// where the L2-sized partitions allow). Default: compact for bfs and
    /// radii, auto for wcc and pagerank.
    #[arg(long)]
    pub edge_layout: Option<String>,

    /// Size the automatic partitions for this algorithm's values.
    #[arg(long, default_value = "pagerank")]
    pub algo: String,
    /// ... and this PageRank precision.
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// Number only the vertices the edges name (see `analytics run`).
    #[arg(long)]
    pub compact_ids: bool,
    /// Refuse a graph whose estimated memory exceeds this (default: half of memory).
    #[arg(long, value_name = "BYTES")]
    pub memory_max: Option<String>,
    /// The directory to write `grid.bin` into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// quick (R-MAT scales 14 and 16) or full (16, 18, 20).
    #[arg(long, value_enum, default_value = "quick")]
    pub preset: ProfileSize,
    /// Where to write the table.
    #[arg(long, value_name = "FILE", default_value = PROFILE_TABLE_DEFAULT)]
    pub out: PathBuf,
}

/// How large a profile `analytics profile` collects.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileSize {
    /// R-MAT scales 14 and 16, far ratios 0 and 0.8.
    Quick,
    /// R-MAT scales 16, 18 and 20, far ratios 0, 0.5 and 0.8.
    Full,
}

/// Cores of this machine (at least 1).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Parses a byte count with an optional K, M or G suffix.
fn parse_bytes(flag: &str, s: &str) -> Result<u64, String> {
    let (digits, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{flag} {s}: not a byte count (e.g. 4096, 256K, 4M)"))
}

pub fn run_command(a: AnalyticsArgs) -> CliResult {
    match a.which {
        AnalyticsCommand::Run(r) => run_one(*r),
        AnalyticsCommand::Prepare(p) => prepare(p),
        AnalyticsCommand::Serve(s) => serve::serve(s),
        AnalyticsCommand::Profile(p) => serve::profile(p),
    }
}

/// The grid of a file or an R-MAT graph, admitted under `limits` for `algo`.
#[allow(clippy::too_many_arguments)]
fn load_grid(
    graph: Option<&Path>,
    format: Option<&str>,
    vertex_count: Option<u64>,
    ignore_weights: bool,
    rmat: Option<RmatConfig>,
    partitions: Option<u32>,
    algo: Algo,
    limits: LoadLimits,
) -> CliResult<Loaded> {
    match (graph, rmat) {
        (Some(path), _) => {
            let format = format.map(|f| f.parse::<Format>()).transpose()?;
            let opts = LoadOptions {
                vertex_count,
                ignore_weights,
                ..LoadOptions::default()
            };
            Ok(graph_input::load_graph(
                path, format, &opts, partitions, algo, limits,
            )?)
        }
        (None, Some(cfg)) => {
            let rmat = Rmat::new(cfg)?;
            Ok(graph_input::rmat_graph(&rmat, partitions, algo, limits)?)
        }
        (None, None) => Err("give --graph FILE or --rmat-scale SCALE".into()),
    }
}

/// `--root` in the input's ids, as the run's (compacted) id.
fn run_root(root: Option<u32>, ids: Option<&IdMap>) -> CliResult<Option<u32>> {
    match (root, ids) {
        (Some(r), Some(m)) => m
            .compacted(r)
            .map(Some)
            .ok_or_else(|| format!("--root {r}: no edge names vertex {r}").into()),
        (r, _) => Ok(r),
    }
}

fn run_one(a: RunArgs) -> CliResult {
    let algo = Algo::parse(&a.algo)?;
    let backend = Backend::parse(&a.backend)?;
    let chunk_bytes = parse_bytes("--chunk", &a.chunk)?;
    let precision = Precision::parse(&a.precision)?;
    let rmat = a.rmat_scale.map(|scale| RmatConfig {
        scale,
        edge_factor: a.edge_factor,
        seed: a.seed,
        ..RmatConfig::default()
    });
    let output_format = ResultFormat::parse(&a.output_format)?;
    let limits = LoadLimits {
        memory_bytes_max: match &a.memory_max {
            Some(m) => parse_bytes("--memory-max", m)?,
            None => memory::default_limit_bytes(),
        },
        compact_ids: a.compact_ids,
        window_bytes: algo.window_bytes(precision),
        window_cache: algo.window_cache(),
        stripe_ids: match a.stripe_ids {
            None => algo.stripe_ids(),
            Some(0) => NO_STRIPES,
            Some(n) => n,
        },
        edge_layout: match &a.edge_layout {
            None => layout_for(algo),
            Some(l) => LayoutChoice::parse(l)?,
        },
        // --directed is the default, stated; clap refuses both.
        symmetrize: a.symmetrize && !a.directed,
    };
    let t = std::time::Instant::now();
    let (grid, ids, weights) = match &a.prepared {
        Some(dir) => {
            // The estimate from the header, before the payload is read.
            let h = prepared::read_header(dir)?;
            Estimate::new(algo, h.vertices, h.edges, false, h.layout.edge_bytes()).check(
                algo,
                limits.memory_bytes_max,
                &format!("the prepared grid in '{}'", dir.display()),
                "raise --memory-max",
            )?;
            let (grid, ids, _) = prepared::read(dir)?;
            (grid, ids, None)
        }
        None => {
            let Loaded {
                grid, ids, weights, ..
            } = load_grid(
                a.graph.as_deref(),
                a.format.as_deref(),
                a.vertex_count,
                a.ignore_weights,
                rmat,
                a.partitions,
                algo,
                limits,
            )?;
            (grid, ids, Some(weights))
        }
    };
    let load_s = t.elapsed().as_secs_f64();
    let root = run_root(a.root, ids.as_ref())?;
    let threads = match a.threads.as_deref().unwrap_or("") {
        "" => cores(),
        "auto" => {
            let table = Table::load(&a.profile_table).map_err(|e| {
                format!("--threads auto needs the offline table: {e} (or give --threads N)")
            })?;
            table.pick_threads(algo, grid.edge_count(), a.far_ratio, cores())?
        }
        n => n
            .parse::<usize>()
            .map_err(|_| format!("--threads {n}: expected a number or auto"))?,
    };
    let cfg = RunConfig {
        params: Params {
            root,
            iterations: a.iterations,
            tolerance: a.tolerance,
            seed: a.radii_seed,
            precision,
            delta: a.delta,
            sources: match a.sources.as_deref() {
                None => algo::bc::Sources::Root,
                Some(s) => match algo::bc::Sources::parse(s)? {
                    algo::bc::Sources::List(l) => algo::bc::Sources::List(
                        l.into_iter()
                            .map(|v| {
                                run_root(Some(v), ids.as_ref())
                                    .map(|r| r.expect("a vertex was given"))
                                    .map_err(|e| format!("--sources: {e}"))
                            })
                            .collect::<Result<Vec<u32>, String>>()?,
                    ),
                    other => other,
                },
            },
            sources_seed: a.sources_seed,
        },
        engine: EngineConfig {
            threads,
            buffering: !a.no_buffering,
        },
        chunk_bytes,
        disk_dir: a.disk_dir.clone().unwrap_or_else(std::env::temp_dir),
        readahead_pages: a.readahead_pages,
        paged_vertices: a.paged_vertices,
        placement: if a.profile_run {
            PlacementSource::ProfilingRun
        } else {
            PlacementSource::Degrees
        },
        ..RunConfig::new(algo, backend, a.far_ratio)
    };
    // A saved profile is checked against this graph and root before anything runs.
    let saved = match &a.profile {
        None => None,
        Some(path) => {
            let s = SavedProfile::load(path)?;
            let ok = s.check(path, &grid, algo, &cfg.params, a.profile_same_root_ok)?;
            if ok.same_root {
                eprintln!(
                    "warning: --profile {} was made by {}, this run's own root or seed: \
                     placement knows which blocks this run reads",
                    path.display(),
                    s.origin.describe()
                );
            }
            Some((s, ok))
        }
    };
    let profile = saved.as_ref().map(|(s, _)| &s.profile);
    let ((mut report, result, run_profile), fabric_name) = match a.server {
        None => {
            let fabric = local_fabric()?;
            (
                run_with(&grid, &fabric, &cfg, profile)?,
                "in-process fabric (2 us + payload / 12.5 GB/s)",
            )
        }
        Some(addr) => {
            let fabric = tcp_client(addr)?;
            let r = run_with(&grid, &fabric, &cfg, profile)?;
            fabric.shutdown();
            (r, "TCP fabric")
        }
    };
    if let Some((s, ok)) = &saved {
        if report.placement_source == Some(PlacementSource::SavedProfile) {
            report.profile_origin = Some(s.origin.clone());
            report.profile_same_root = Some(ok.same_root);
        }
    }
    if a.prepared.is_none() {
        report.edges_as = EdgeMode::of(&limits);
        report.weights_dropped = a.ignore_weights;
    }
    if let Some(w) = weights.filter(|_| algo.uses_weights()) {
        report.weights = w;
    }
    if let Some(path) = &a.save_profile {
        SavedProfile::new(&grid, algo, &cfg.params, run_profile).save(path)?;
        eprintln!(
            "saved this run's profile to {} (for --profile on another root or seed)",
            path.display()
        );
    }
    if let Some(path) = &a.output {
        let n = results::write(path, output_format, &result.output, ids.as_ref())?;
        eprintln!("wrote {n} vertices' results to {}", path.display());
    }
    let verified = if a.verify {
        let t = std::time::Instant::now();
        let what = locus_analytics::verify::verify(&grid, &result.output, &cfg.params)?;
        Some(format!(
            "{what} ({:.2} s; vertex ids are the run's{})",
            t.elapsed().as_secs_f64(),
            if ids.is_some() { ", compacted" } else { "" }
        ))
    } else {
        None
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "graph: {} vertices, {} edges, {}x{} grid of {} edges ({} in {load_s:.2} s)",
        report.vertices,
        report.edges,
        report.partitions,
        report.partitions,
        report.edge_layout.name(),
        if a.prepared.is_some() {
            "prepared grid read"
        } else {
            "loaded and preprocessed"
        }
    );
    println!(
        "{} on {} at far ratio {:.2} (achieved {:.3}), {} thread(s), buffering {}, {}",
        algo.name(),
        backend.name(),
        report.far_ratio,
        report.far_ratio_achieved,
        report.threads,
        if report.buffering { "on" } else { "off" },
        fabric_name
    );
    println!(
        "input           edges {}{}",
        if a.prepared.is_some() {
            "as the prepared grid holds them"
        } else {
            report.edges_as.name()
        },
        if report.weights_dropped {
            ", weights dropped (--ignore-weights)"
        } else {
            ""
        }
    );
    if algo.uses_weights() {
        println!("weights         {}", report.weights.describe());
    }
    print_report(&report);
    if let Some(v) = verified {
        println!("verify          {v}");
    }
    Ok(())
}

/// `analytics prepare`: load and preprocess once, write the grid.
fn prepare(a: PrepareArgs) -> CliResult {
    let algo = Algo::parse(&a.algo)?;
    let precision = Precision::parse(&a.precision)?;
    let limits = LoadLimits {
        memory_bytes_max: match &a.memory_max {
            Some(m) => parse_bytes("--memory-max", m)?,
            None => memory::default_limit_bytes(),
        },
        compact_ids: a.compact_ids,
        window_bytes: algo.window_bytes(precision),
        window_cache: algo.window_cache(),
        stripe_ids: match a.stripe_ids {
            None => algo.stripe_ids(),
            Some(0) => NO_STRIPES,
            Some(n) => n,
        },
        edge_layout: match &a.edge_layout {
            None => layout_for(algo),
            Some(l) => LayoutChoice::parse(l)?,
        },
        symmetrize: false,
    };
    let rmat = a.rmat_scale.map(|scale| RmatConfig {
        scale,
        edge_factor: a.edge_factor,
        seed: a.seed,
        ..RmatConfig::default()
    });
    let t = std::time::Instant::now();
    let Loaded { grid, ids, .. } = load_grid(
        a.graph.as_deref(),
        a.format.as_deref(),
        a.vertex_count,
        false,
        rmat,
        a.partitions,
        algo,
        limits,
    )?;
    let load_s = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let path = prepared::write(&a.out, &grid, ids.as_ref(), limits.window_bytes)?;
    let write_s = t.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let sh = grid.shape();
    println!(
        "prepared {} vertices, {} edges: {}x{} grid of {} edges, {} stripes per column block",
        sh.vertex_count,
        grid.edge_count(),
        sh.partitions,
        sh.partitions,
        grid.layout().name(),
        grid.stripes()
    );
    println!("load+preprocess {load_s:.2} s, write {write_s:.2} s");
    println!("wrote {} ({bytes} B)", path.display());
    Ok(())
}

fn run_with<F: Fabric + Clone>(
    grid: &Grid,
    fabric: &F,
    cfg: &RunConfig,
    profile: Option<&Profile>,
) -> CliResult<(Report, algo::Run, Profile)> {
    run(grid, Some(fabric), cfg, profile).map_err(Into::into)
}

fn print_report(r: &Report) {
    println!(
        "time            {:.3} s (setup {:.2} s; wall {:.3} s)",
        r.time_s, r.setup_s, r.wall_s
    );
    match (r.placement_source, r.profile_s, &r.profile_origin) {
        (None, ..) => {}
        (Some(PlacementSource::ProfilingRun), Some(p), _) => {
            println!("placement       profiling run on the Oracle, {p:.3} s (in wall)")
        }
        (Some(PlacementSource::SavedProfile), _, Some(o)) => println!(
            "placement       saved profile of {}{}",
            o.describe(),
            if r.profile_same_root == Some(true) {
                " (this run's own root: accepted on request)"
            } else {
                ""
            }
        ),
        (Some(s), ..) => println!("placement       {}", s.name()),
    }
    println!("iterations      {}", r.iterations);
    println!(
        "bytes fetched   {} in {} reads ({} page faults, {} hits, {} pages read ahead)",
        r.bytes_fetched, r.fetch_ops, r.page_faults, r.page_hits, r.readahead_pages
    );
    println!(
        "local memory    budget {} B: vertex data {} B, resident edges {} B, page cache {} B, fetch buffers {} B",
        r.local_budget_bytes,
        r.vertex_bytes,
        r.resident_edge_bytes,
        r.page_cache_bytes,
        r.buffer_bytes_peak
    );
    println!("remote edges    {} B", r.remote_edge_bytes);
    if let Some(v) = &r.vertex_paging {
        println!(
            "vertex paging   {} faults (+{} read ahead), {} zero-filled, {} minor, {} first writes, \
             {} unmapped, {} written back; peak {} pages",
            v.faults,
            v.readahead_pages,
            v.zero_fills,
            v.minor_faults,
            v.write_faults,
            v.deactivations,
            v.writebacks,
            v.resident_pages_peak
        );
    }
    if let Some(d) = r.direct_io {
        println!("direct I/O      {d}");
    }
    println!("result          {}", r.summary);
    println!("digest          {}", r.digest);
}

/// A TCP node hosting machine 0 whose machine 1 is the server at `addr`.
fn tcp_client(addr: SocketAddr) -> CliResult<TcpFabric> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot listen on 127.0.0.1:0: {e}"))?;
    let me = listener.local_addr()?;
    Ok(TcpFabric::from_listener(
        TcpConfig::new(vec![0], vec![me, addr]),
        listener,
    )?)
}
