//! `locus analytics`: far-memory graph analytics (Fargraph+) from the command
//! line. `run` runs one algorithm on one backend and prints time, iterations,
//! bytes fetched and a result digest; `serve` is a far-memory server over
//! TCP; `profile` builds the offline thread table that `--threads auto` uses.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use locus_analytics::algo::{Algo, Params, PAGERANK_ITERATIONS_DEFAULT, RADII_SEED_DEFAULT};
use locus_analytics::control::{self, Table};
use locus_analytics::run::{run, Report, RunConfig};
use locus_analytics::store::Backend;
use locus_analytics::{local_fabric, EngineConfig, GraphInput, Grid};
use locus_bench::output::cores;
use locus_bench::Preset;

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
    /// Run BFS, WCC, PageRank or Radii on one backend and print time,
    /// iterations, bytes fetched and a digest of the result.
    Run(Box<RunArgs>),
    /// Serve far memory over TCP for `analytics run --server ADDR`.
    Serve(ServeArgs),
    /// Build the offline table (algorithm, graph size, threads, far ratio ->
    /// time) that `--threads auto` picks from (Fargraph+ 7).
    Profile(ProfileArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// bfs, wcc, pagerank or radii.
    #[arg(long)]
    pub algo: String,
    /// Edge list (SNAP text, or GridGraph binary u32 pairs for .bin).
    #[arg(long, value_name = "FILE", conflicts_with = "rmat_scale")]
    pub graph: Option<PathBuf>,
    /// Edge-list format (text or binary; default: from the extension).
    #[arg(long)]
    pub format: Option<String>,
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
    /// Grid partitions per side (default: automatic).
    #[arg(long)]
    pub partitions: Option<u32>,
    /// PageRank iterations.
    #[arg(long, default_value_t = PAGERANK_ITERATIONS_DEFAULT)]
    pub iterations: u32,
    /// BFS root (default: the vertex with the most out-edges).
    #[arg(long)]
    pub root: Option<u32>,
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
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
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
pub struct ProfileArgs {
    /// quick (R-MAT scales 14 and 16) or full (16, 18, 20).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// Where to write the table.
    #[arg(long, value_name = "FILE", default_value = PROFILE_TABLE_DEFAULT)]
    pub out: PathBuf,
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
        AnalyticsCommand::Serve(s) => serve(s),
        AnalyticsCommand::Profile(p) => profile(p),
    }
}

/// The grid of a file or an R-MAT graph.
fn load_grid(
    graph: Option<&Path>,
    format: Option<&str>,
    vertex_count: Option<u64>,
    rmat: Option<RmatConfig>,
    partitions: Option<u32>,
) -> CliResult<Grid> {
    match (graph, rmat) {
        (Some(path), _) => {
            let format = format.map(|f| f.parse::<Format>()).transpose()?;
            let opts = LoadOptions {
                vertex_count,
                ..LoadOptions::default()
            };
            Ok(Grid::load(path, format, &opts, partitions)?)
        }
        (None, Some(cfg)) => {
            let rmat = Rmat::new(cfg)?;
            Ok(Grid::build(GraphInput::Rmat(&rmat), partitions)?)
        }
        (None, None) => Err("give --graph FILE or --rmat-scale SCALE".into()),
    }
}

fn run_one(a: RunArgs) -> CliResult {
    let algo = Algo::parse(&a.algo)?;
    let backend = Backend::parse(&a.backend)?;
    let chunk_bytes = parse_bytes("--chunk", &a.chunk)?;
    let rmat = a.rmat_scale.map(|scale| RmatConfig {
        scale,
        edge_factor: a.edge_factor,
        seed: a.seed,
        ..RmatConfig::default()
    });
    let t = std::time::Instant::now();
    let grid = load_grid(
        a.graph.as_deref(),
        a.format.as_deref(),
        a.vertex_count,
        rmat,
        a.partitions,
    )?;
    let load_s = t.elapsed().as_secs_f64();
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
            root: a.root,
            iterations: a.iterations,
            seed: a.radii_seed,
        },
        engine: EngineConfig {
            threads,
            buffering: !a.no_buffering,
        },
        chunk_bytes,
        disk_dir: a.disk_dir.clone().unwrap_or_else(std::env::temp_dir),
        ..RunConfig::new(algo, backend, a.far_ratio)
    };
    let (report, fabric_name) = match a.server {
        None => {
            let fabric = local_fabric()?;
            (
                run_with(&grid, &fabric, &cfg)?,
                "in-process fabric (2 us + payload / 12.5 GB/s)",
            )
        }
        Some(addr) => {
            let fabric = tcp_client(addr)?;
            let r = run_with(&grid, &fabric, &cfg)?;
            fabric.shutdown();
            (r, "TCP fabric")
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "graph: {} vertices, {} edges, {}x{} grid (loaded in {load_s:.1} s)",
        report.vertices, report.edges, report.partitions, report.partitions
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
    print_report(&report);
    Ok(())
}

fn run_with<F: Fabric + Clone>(grid: &Grid, fabric: &F, cfg: &RunConfig) -> CliResult<Report> {
    run(grid, Some(fabric), cfg, None)
        .map(|(r, _, _)| r)
        .map_err(Into::into)
}

fn print_report(r: &Report) {
    println!(
        "time            {:.3} s (setup {:.2} s)",
        r.time_s, r.setup_s
    );
    println!("iterations      {}", r.iterations);
    println!(
        "bytes fetched   {} in {} reads ({} page faults, {} hits)",
        r.bytes_fetched, r.fetch_ops, r.page_faults, r.page_hits
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

fn serve(a: ServeArgs) -> CliResult {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    let memory = parse_bytes("--memory", &a.memory)?;
    let listener =
        TcpListener::bind(&a.listen).map_err(|e| format!("cannot listen on {}: {e}", a.listen))?;
    let addr = listener.local_addr()?;
    // Machine 1 of a two-machine cluster; the client (machine 0) is never called.
    let unused = SocketAddr::from(([127, 0, 0, 1], 9));
    let config = TcpConfig {
        pin_memory: true,
        ..TcpConfig::new(vec![1], vec![unused, addr])
    };
    let fabric = TcpFabric::from_listener(config, listener)?;
    println!("listening on {addr}");
    std::io::stdout().flush()?;
    let stop = AtomicBool::new(false);
    let lifetime = Duration::from_secs(a.lifetime_s);
    std::thread::scope(|s| -> CliResult {
        let daemon = s.spawn(|| locus_analytics::server::serve(&fabric, 1, memory, &stop));
        crate::wait_for_lifetime_or_parent(lifetime);
        stop.store(true, Ordering::Release);
        let r = daemon
            .join()
            .map_err(|_| "the server thread panicked".to_string())?;
        fabric.shutdown();
        Ok(r?)
    })
}

fn profile(a: ProfileArgs) -> CliResult {
    let cores = cores();
    let mut threads: Vec<usize> = (1..=cores).collect();
    threads.push(cores * 2);
    let spec = match a.preset {
        Preset::Quick => control::Collect {
            scales: vec![14, 16],
            algos: Algo::ALL.to_vec(),
            threads,
            ratios: vec![0.0, 0.8],
        },
        Preset::Full => control::Collect {
            scales: vec![16, 18, 20],
            algos: Algo::ALL.to_vec(),
            threads,
            ratios: vec![0.0, 0.5, 0.8],
        },
    };
    let table = control::collect(&spec, &mut |r| {
        eprintln!(
            "{:<8} {:>10} edges  {:>2} threads  ratio {:.2}  {:>8.3} s",
            r.algo, r.edges, r.threads, r.far_ratio, r.time_s
        )
    })?;
    // The one atomic JSON writer of every result (temporary file, sync, rename).
    locus_bench::output::write_json(&a.out, &table)?;
    println!("wrote {} ({} rows)", a.out.display(), table.rows.len());
    Ok(())
}
