//! `locus bench load-rmat`: an R-MAT graph loaded into an embedded cluster
//! without its CSR (`locus_bench::cluster::build_rmat_ranged`), with the
//! memory it takes and the load rate (issue 13: R-MAT 26 on this machine).

use std::path::PathBuf;

use clap::Args;
use locus_bench::cluster::build_rmat_ranged;
use locus_bench::config::Config;
use locus_bench::output::OutDir;
use locus_bench::Reporter;
use locus_graph::CsrOptions;

use crate::CliResult;

#[derive(Args, Debug)]
pub struct LoadRmatArgs {
    /// R-MAT scale: 2^scale vertices (Pragh's graph: 26).
    #[arg(long, default_value_t = 20)]
    pub scale: u32,
    /// Edges per vertex (Pragh, Graph500: 16).
    #[arg(long, default_value_t = 16)]
    pub edge_factor: u32,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Store each edge in both directions (as `bench pragh` does); default:
    /// directed, as generated (half the memory; Pragh's queries follow
    /// out-edges).
    #[arg(long)]
    pub symmetrize: bool,
    /// Machines of the embedded cluster.
    #[arg(long, default_value_t = 8)]
    pub machines: usize,
    /// Loader threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// MiB of adjacency entries built per range (4 bytes per entry while
    /// building, plus 16 per vertex); the graph is generated once more per
    /// range.
    #[arg(long, default_value_t = 2048.0)]
    pub range_mb: f64,
    /// Do not fault in every region page at start (as RDMA registration
    /// pins memory, the default): untouched slack then costs nothing.
    #[arg(long)]
    pub no_pin: bool,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory for load-rmat.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(a: LoadRmatArgs) -> CliResult {
    let mut config = Config::default();
    config.cluster.machines = a.machines;
    config.cluster.threads = a.threads.unwrap_or(0);
    config.graph.scale = a.scale;
    config.graph.edge_factor = a.edge_factor;
    config.graph.seed = a.seed;
    config.cluster.pin_memory = !a.no_pin;
    config.validate()?;
    let opts = CsrOptions {
        symmetrize: a.symmetrize,
        ..CsrOptions::default()
    };
    if !(a.range_mb.is_finite() && a.range_mb > 0.0) {
        return Err(format!("--range-mb {} must be a positive number of MiB", a.range_mb).into());
    }
    let range_entries = ((a.range_mb * (1u64 << 20) as f64)
        / locus_bench::cluster::RANGED_BYTES_PER_ENTRY as f64)
        .max(1.0) as u64;
    let (cluster, _degrees, load) = build_rmat_ranged(
        &config.graph,
        opts,
        a.machines,
        &config,
        range_entries,
        &Reporter::terminal(),
        |_| {},
    )?;
    let peak_rss = peak_rss_bytes();
    drop(cluster);
    let json = serde_json::json!({
        "scale": a.scale,
        "edge_factor": a.edge_factor,
        "seed": a.seed,
        "symmetrized": a.symmetrize,
        "machines": a.machines,
        "pinned": !a.no_pin,
        "load": load,
        "peak_rss_bytes": peak_rss,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!(
            "R-MAT scale {} ({} vertices, {} generated edges, stored {}): {} vertices with edges, {} adjacency entries",
            a.scale,
            load.vertices,
            load.generated_edges,
            if a.symmetrize { "in both directions" } else { "directed" },
            load.vertices_with_edges,
            load.stored_edges
        );
        println!(
            "degree pass {:.1} s; {} range(s) built and put in {:.1} s; {:.2} M generated edges/s over the whole load",
            load.degrees_s,
            load.ranges,
            load.load_s,
            load.edges_per_s / 1e6
        );
        println!(
            "store: {:.2} GB of key tables, {:.2} GB of values; {:.1} bytes per vertex, {:.2} value bytes per entry; peak RSS {}",
            load.key_bytes as f64 / 1e9,
            load.value_bytes as f64 / 1e9,
            load.bytes_per_vertex,
            load.value_bytes_per_edge,
            peak_rss.map_or("unknown".to_string(), |b| format!("{:.2} GB", b as f64 / 1e9))
        );
    }
    if let Some(dir) = &a.out {
        let mut out = OutDir::create(dir)?;
        out.json("load-rmat.json", &json)?;
        for f in out.written() {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// The process's peak resident set (`VmHWM` of /proc/self/status), if known.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
