//! `locus`: the command-line front end of Locus. Flags and printing only:
//! every experiment (`locus demo`, `locus bench ...`) is a driver in
//! `locus_bench`, called with settings built from the flags.

mod analytics;
mod bench;
mod bench_elastic;
mod bench_failover;
mod bench_sparql;
mod cluster;
mod cluster_add;
mod cluster_etcd;
mod cluster_move;
mod cluster_primaries;
mod cluster_reshape;
mod cluster_status;
mod commands;
mod demo;
mod fargraph;
mod kv;
mod load_rmat;
mod migrate_speed;
mod netmigrate;
mod pragh;
mod rdf;
mod rdf_cluster;
mod remote;
mod serve;
mod sparql;
mod sparql_serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use locus_node::embedded_config as config;

/// Blocks until `lifetime` has passed or standard input closes (the parent
/// process went away): how the server commands know when to stop.
pub fn wait_for_lifetime_or_parent(lifetime: std::time::Duration) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(lifetime);
}

/// Set by SIGTERM or SIGINT.
static SIGNALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, std::sync::atomic::Ordering::Release);
}

/// Blocks until SIGTERM or SIGINT arrives, or `lifetime` (if any) passes:
/// how `locus server` knows when to stop.
pub fn wait_for_signal(lifetime: Option<std::time::Duration>) {
    wait_for_signal_or(lifetime, || false);
}

/// Like [`wait_for_signal`], also returning as soon as `done()` is true.
pub fn wait_for_signal_or(lifetime: Option<std::time::Duration>, done: impl Fn() -> bool) {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let t0 = std::time::Instant::now();
    while !SIGNALLED.load(std::sync::atomic::Ordering::Acquire)
        && lifetime.is_none_or(|l| t0.elapsed() < l)
        && !done()
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// What a command returns: any error, printed as `error: ...` with exit code 2.
pub type CliResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Locus: a distributed in-memory graph store that keeps traversals local by
/// migrating values live, one vertex at a time.
///
/// Most commands run an embedded cluster: N machines in this process over the
/// in-process one-sided fabric, with a modelled remote latency (2.0 us plus
/// payload at 12.5 GB/s by default); settings come from a TOML file
/// (--config) and flags override them. `locus cluster up` starts a real
/// cluster of server processes instead, and `--cluster FILE` (load, query,
/// migrate, stats) talks to it.
#[derive(Parser, Debug)]
#[command(name = "locus", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate an R-MAT graph, load it into 1 machine (Ideal) and into N
    /// machines (hash-partitioned), run two-hop queries on both and print
    /// throughput, p50/p99 latency and the remote-access rate.
    Demo(demo::DemoArgs),
    /// Write a Graph500 R-MAT edge list to a file (text or GridGraph binary).
    Generate(commands::GenerateArgs),
    /// Validate an edge list, load it into an embedded cluster and summarise it
    /// (vertices, edges, max degree, bytes per machine).
    Load(commands::LoadArgs),
    /// Run a k-hop query from one vertex and print what it found and what it cost.
    Query(commands::QueryArgs),
    /// Run an experiment (foundation, migrate-speed, pragh, fargraph,
    /// netmigrate) and print its results; --out keeps them as JSON and plots.
    Bench(bench::BenchArgs),
    /// Serve machines' memory over TCP (a memory node of the TCP fabric).
    Serve(serve::ServeArgs),
    /// Run one machine of the store as a server process (see `locus cluster up`).
    ///
    /// Fenced out of the cluster (its etcd lease lost), it exits with code 3;
    /// LOCUS_FENCED_EXIT_DELAY_MS (0 to 60000, for tests) keeps it alive that
    /// long first, refusing every request.
    Server(cluster::ServerArgs),
    /// Run the coordinator (Pragh 4.4) as its own process: servers' monitors
    /// report to it; it approves migrations and replicas, recording each
    /// approval before the job is sent.
    Coordinator(cluster::CoordinatorArgs),
    /// Start, stop or inspect a local cluster of server processes on loopback.
    Cluster(cluster::ClusterArgs),
    /// Move a vertex's value to another machine of a running cluster.
    Migrate(remote::MigrateArgs),
    /// Insert or delete an edge of a running cluster.
    Edge(remote::EdgeArgs),
    /// Read or delete a vertex of a running cluster.
    Vertex(remote::VertexArgs),
    /// Statistics of every server of a running cluster.
    Stats(remote::StatsArgs),
    /// Far-memory graph analytics (Fargraph+): run an algorithm on a backend,
    /// serve far memory over TCP, or build the thread table.
    Analytics(analytics::AnalyticsArgs),
    /// Live shard migration on loopback UDP (NetMigrate): router and KV server
    /// processes, get/set through the router, migrate, migration status.
    Kv(kv::KvArgs),
    /// RDF (Pragh 6.5, Wukong's layout): load N-Triples into an embedded
    /// cluster, or generate a LUBM dataset.
    Rdf(rdf::RdfArgs),
    /// Answer a SPARQL query over an N-Triples file loaded into an embedded
    /// cluster, by graph exploration (a table, or --json in the W3C format);
    /// `locus sparql serve`: the SPARQL 1.1 Protocol over HTTP.
    Sparql(sparql::SparqlArgs),
}

/// Flags shared by commands that build an embedded cluster.
#[derive(Args, Debug, Clone)]
pub struct ClusterFlags {
    /// TOML config file (see ARCHITECTURE.md or `locus demo --help` for keys).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Machines in the embedded cluster (1..=128).
    #[arg(long)]
    pub machines: Option<usize>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Modelled remote latency in nanoseconds (0 together with --bandwidth 0 turns the model off).
    #[arg(long, value_name = "NS")]
    pub latency_ns: Option<u64>,
    /// Modelled link bandwidth in bytes per second (0: infinite).
    #[arg(long, value_name = "BYTES_PER_S")]
    pub bandwidth: Option<u64>,
}

impl ClusterFlags {
    /// The config file with these flags applied, validated.
    pub fn resolve(&self) -> CliResult<config::Config> {
        let mut c = config::Config::load(self.config.as_deref())?;
        if let Some(m) = self.machines {
            c.cluster.machines = m;
        }
        if let Some(t) = self.threads {
            c.cluster.threads = t;
        }
        if let Some(l) = self.latency_ns {
            c.cluster.latency_ns = l;
        }
        if let Some(b) = self.bandwidth {
            c.cluster.bandwidth_bytes_per_s = b;
        }
        c.validate()?;
        Ok(c)
    }
}

/// Keeps freed memory in the allocator for reuse instead of handing it back
/// to the kernel. glibc serves large allocations (a location cache shard's
/// table as it doubles, B-tree nodes, batch vectors) with fresh `mmap`s and
/// unmaps them when freed, so each growth faults in and zeroes new pages:
/// in a profile of 1 KB migrations on a freshly booted VM that was 17% of
/// the batch's time (docs/results.md, "Migration speed, stop 30").
/// Servers keep their maps for their lifetime; the memory a process
/// freed is the memory it will want again. Allocations up to 32 MiB (glibc's
/// largest threshold) come from the heap, and the heap is never trimmed.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any
    // thread starts, as glibc asks.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

fn main() -> ExitCode {
    // Output piped into `head` and the like: end quietly when the reader
    // leaves, as other command-line tools do, instead of panicking.
    #[cfg(unix)]
    // SAFETY: restores the default action of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    keep_freed_memory();
    let cli = Cli::parse();
    // Logs go to standard error, filtered by RUST_LOG (default: warnings).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let r = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Generate(a) => commands::generate(a),
        Command::Load(a) => commands::load(a),
        Command::Query(a) => commands::query(a),
        Command::Bench(a) => bench::run(a),
        Command::Serve(a) => serve::serve(a),
        Command::Server(a) => cluster::server(a),
        Command::Coordinator(a) => cluster::coordinator(a),
        Command::Cluster(a) => cluster::run(a),
        Command::Migrate(a) => remote::migrate(a),
        Command::Edge(a) => remote::edge(a),
        Command::Vertex(a) => remote::vertex(a),
        Command::Stats(a) => remote::stats(a),
        Command::Analytics(a) => analytics::run_command(a),
        Command::Kv(a) => kv::run(a).map_err(Into::into),
        Command::Rdf(a) => rdf::run(a),
        Command::Sparql(a) => sparql::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
