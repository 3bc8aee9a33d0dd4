//! `locus bench`: the experiments' subcommands, and `bench foundation`'s flags
//! and table; the experiments themselves are `locus_bench`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use locus_bench::client_bench;
use locus_bench::foundation::{self, Foundation, Settings};
use locus_bench::output::OutDir;
use locus_bench::{Preset, Reporter};

use crate::CliResult;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: Bench,
}

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Fabric and store micro-figures plus two-hop throughput, Ideal vs 8 machines.
    Foundation(FoundationArgs),
    /// Split-migration speed (Pragh Fig. 13): values/s and bytes/s by payload and threads.
    MigrateSpeed(crate::migrate_speed::MigrateSpeedArgs),
    /// Pragh's traversal benchmark (section 6): schemes side by side in one run.
    Pragh(crate::pragh::PraghArgs),
    /// An R-MAT graph loaded into an embedded cluster without its CSR (a
    /// degree pass, then vertex ranges built and put one at a time): bytes
    /// per vertex and per edge, load rate, peak memory.
    LoadRmat(crate::load_rmat::LoadRmatArgs),
    /// Far-memory analytics (Fargraph+ Figs. 15, 18, 19, Table 4, threads).
    Fargraph(crate::fargraph::FargraphArgs),
    /// Live shard migration (NetMigrate 6: Figs. 4-6, Tables 2-7), every protocol side by side.
    Netmigrate(crate::netmigrate::NetmigrateArgs),
    /// The SPARQL mix on LUBM (Pragh 6.5, Fig. 16): Orig, Shard, Split,
    /// Split+Cache and Replica side by side (Ideal and Cache for reference).
    Sparql(crate::bench_sparql::SparqlBenchArgs),
    /// Client round trips (NEIGHBORS, KHOP 100 x 100) and the bulk-load rate
    /// over the client protocol, on `locus server` processes started for it.
    Client(ClientArgs),
    /// Acknowledged updates per second and update latency with the
    /// write-ahead log off, `sync = interval` and `sync = always`.
    Durability(DurabilityArgs),
    /// The fault lab (needs root): servers, etcd and a coordinator in
    /// network namespaces, clients under a seeded nemesis (partitions,
    /// pauses, kill -9, delay and loss), every history checked.
    Faults(FaultsArgs),
    /// Slot moves under a closed-loop load of two-hop queries and 5%
    /// inserts on 3 server processes (issue 59; a first form: Locus's own
    /// moves only, one run).
    Elastic(crate::bench_elastic::ElasticArgs),
    /// A kill -9 of a server under the same load, for each replication
    /// factor (issue 60): steady throughput and latency, seconds until
    /// every vertex answers, failed operations and lost acknowledged writes.
    Failover(crate::bench_failover::FailoverArgs),
}

#[derive(Args, Debug)]
pub struct FaultsArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory for faults.json and faults-timeline.png.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Servers, 3 to 5.
    #[arg(long, default_value_t = 3)]
    pub servers: usize,
    /// Client threads, each sticking to one server.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Seconds of operations under faults.
    #[arg(long, default_value_t = 60)]
    pub duration_s: u64,
    /// Seed of the fault schedule and the operation mix (default: from the
    /// clock, printed first).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Move slots between the servers all along (a batch of 4 about every
    /// second), through every fault.
    #[arg(long)]
    pub slot_moves: bool,
    /// Servers per slot (1-3; issue 60): above 1, a server down past its
    /// lease has its slots failed over to their backups; no joins or
    /// leaves then, and no --slot-moves.
    #[arg(long, default_value_t = 1)]
    pub replication: u8,
}

#[derive(Args, Debug)]
pub struct DurabilityArgs {
    /// quick (5 s of updates per mode and run) or full (20 s).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory for durability.json and durability.meta.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Servers.
    #[arg(long, default_value_t = 3)]
    pub servers: usize,
    /// Client threads, one update in flight each.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Runs (modes interleaved within each); medians with min and max.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seconds of updates per mode and run (default: the preset's).
    #[arg(long)]
    pub duration_s: Option<u64>,
    /// `interval_ms` of the interval mode.
    #[arg(long, default_value_t = 10)]
    pub interval_ms: u64,
}

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// quick (R-MAT scale 16, 1,000 requests of each kind per run) or full
    /// (scale 20, 5,000).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory for client.json and client.meta.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Cluster sizes (servers), comma-separated, interleaved within a run.
    #[arg(long, value_delimiter = ',')]
    pub servers: Vec<usize>,
    /// Server setups, comma-separated: orig (no location cache, no
    /// coordinator), cache (location cache), migrated (cache and a
    /// coordinator, measured once its moves stop); default all three.
    #[arg(long, value_delimiter = ',')]
    pub setups: Vec<String>,
    /// Runs (each a fresh cluster per size); medians with min and max.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Timed requests of each kind per run (default: the preset's).
    #[arg(long)]
    pub samples: Option<usize>,
    /// R-MAT scale (overrides the preset).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Threads sending LOAD batches (1: as `locus load --cluster`).
    #[arg(long, default_value_t = 1)]
    pub senders: usize,
}

#[derive(Args, Debug)]
pub struct FoundationArgs {
    /// quick (a minute or so) or full (larger graph, more queries).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory to write foundation.json into.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the TCP measurements (they start a `locus serve` child process).
    #[arg(long)]
    pub no_tcp: bool,
}

pub fn run(a: BenchArgs) -> CliResult {
    match a.which {
        Bench::Foundation(f) => run_foundation(f),
        Bench::MigrateSpeed(m) => crate::migrate_speed::run(m),
        Bench::Pragh(p) => crate::pragh::run(p),
        Bench::LoadRmat(l) => crate::load_rmat::run(l),
        Bench::Fargraph(g) => crate::fargraph::run(g),
        Bench::Netmigrate(n) => crate::netmigrate::run(n),
        Bench::Client(c) => run_client(c),
        Bench::Sparql(s) => crate::bench_sparql::run(s),
        Bench::Durability(d) => run_durability(d),
        Bench::Faults(f) => run_faults(f),
        Bench::Elastic(e) => crate::bench_elastic::run(e),
        Bench::Failover(f) => crate::bench_failover::run(f),
    }
}

/// Creates `--out` before a run starts, so a directory that cannot be made
/// fails at once instead of after the measurements.
pub fn check_out(out: Option<&Path>) -> CliResult {
    if let Some(dir) = out {
        OutDir::create(dir).map_err(|e| format!("--out {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Prints `wrote PATH` for every file of a report.
pub fn print_written(files: &[PathBuf]) {
    for f in files {
        eprintln!("wrote {}", f.display());
    }
}

fn run_foundation(f: FoundationArgs) -> CliResult {
    check_out(f.out.as_deref())?;
    let mut settings = Settings::new(f.preset);
    if !f.no_tcp {
        // The TCP figures run against this very binary's `serve` command.
        settings.serve_exe = Some(std::env::current_exe()?);
    }
    let report = foundation::run(&settings, &Reporter::terminal())?;
    if let Some(dir) = &f.out {
        print_written(&report.write(dir)?);
    }
    if f.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn print_table(o: &Foundation) {
    println!(
        "in-process fabric (model: {} ns + payload / 12.5 GB/s):",
        o.model_latency_ns
    );
    println!(
        "  local get, 100 neighbours      {:>10.0} ns (median)",
        o.local_get_100_median_ns
    );
    println!(
        "  remote get, 100 neighbours     {:>10.0} ns",
        o.remote_get_100_median_ns
    );
    println!(
        "  remote 8-byte read             {:>10.0} ns",
        o.remote_read_8b_median_ns
    );
    println!(
        "  64 pipelined remote reads      {:>10.0} ns for the batch",
        o.pipelined_64_remote_reads_median_ns
    );
    if let (Some(rtt), Some(rate)) = (o.tcp_read_8b_rtt_median_us, o.tcp_pipelined_reads_per_s) {
        println!("TCP fabric, loopback, separate server process:");
        println!("  8-byte read round trip         {:>10.1} us (median)", rtt);
        println!(
            "  pipelined 8-byte reads         {:>10.0} /s on one connection (window {})",
            rate,
            o.tcp_pipeline_window.unwrap_or(0)
        );
    }
    println!("two-hop queries (100 x 100):");
    println!(
        "  {:<8} {:>9} {:>8} {:>12} {:>12} {:>10} {:>10} {:>8}",
        "scheme", "pipelined", "threads", "queries/s", "per core", "p50(us)", "p99(us)", "remote"
    );
    for r in &o.two_hop {
        println!(
            "  {:<8} {:>9} {:>8} {:>12.0} {:>12.0} {:>10.1} {:>10.1} {:>7.1}%",
            r.scheme,
            r.pipelined,
            r.threads,
            r.throughput_qps,
            r.qps_per_core,
            r.p50_us,
            r.p99_us,
            r.remote_rate * 100.0
        );
    }
}

fn run_client(a: ClientArgs) -> CliResult {
    check_out(a.out.as_deref())?;
    let mut s = client_bench::Settings::new(a.preset, std::env::current_exe()?);
    if !a.servers.is_empty() {
        s.servers = a.servers;
    }
    if !a.setups.is_empty() {
        s.setups = a
            .setups
            .iter()
            .map(|x| client_bench::Setup::parse(x))
            .collect::<Result<_, _>>()?;
    }
    s.runs = a.runs;
    s.senders = a.senders;
    if let Some(n) = a.samples {
        s.samples = n;
    }
    if let Some(sc) = a.scale {
        s.scale = sc;
    }
    let report = client_bench::run(&s, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        print_written(&report.write(dir)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "R-MAT scale {} ({} vertices, {} stored edges); {} requests of each kind per run, one at a time from one client thread; median [min-max] of {} runs",
        s.scale, report.vertices, report.stored_edges, s.samples, s.runs
    );
    println!(
        "{:>8} {:>7} {:>24} {:>24} {:>18} {:>24} {:>8} {:>30}",
        "setup",
        "servers",
        "NEIGHBORS k=100 rtt (us)",
        "KHOP 2 x 100 rtt (us)",
        "vs smallest",
        "KHOP at the server (us)",
        "remote",
        "bulk load (stored edges/s)"
    );
    let cell = |x: locus_bench::output::Spread, prec: usize| {
        format!("{:.prec$} [{:.prec$}-{:.prec$}]", x.median, x.min, x.max)
    };
    for r in &report.summary {
        println!(
            "{:>8} {:>7} {:>24} {:>24} {:>18} {:>24} {:>7.1}% {:>30}",
            r.setup.name(),
            r.servers,
            cell(r.neighbors_rtt_us, 1),
            cell(r.khop_rtt_us, 0),
            cell(r.khop_vs_smallest, 2),
            cell(r.khop_server_us, 0),
            r.khop_remote_rate.median * 100.0,
            cell(r.load_stored_edges_per_s, 0)
        );
    }
    Ok(())
}

fn run_faults(a: FaultsArgs) -> CliResult {
    use locus_bench::faults;
    check_out(a.out.as_deref())?;
    let seed = a.seed.unwrap_or_else(faults::random_seed);
    let mut s = faults::Settings::new(std::env::current_exe()?, seed);
    s.servers = a.servers;
    s.clients = a.clients;
    s.duration_s = a.duration_s;
    s.slot_moves = a.slot_moves;
    s.replication = a.replication;
    let report = faults::run(&s, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        print_written(&report.write(dir)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "seed {}: {} ops ({} succeeded, {} retries), {} acknowledged writes, {} lost, {} keys checked, {} violations, {} failed probes",
            report.seed,
            report.ops,
            report.ops_succeeded,
            report.retries,
            report.checked.acknowledged_writes,
            report.checked.lost_acknowledged_writes,
            report.checked.keys_checked,
            report.checked.violations,
            report.probes_failed
        );
        if let Some(m) = &report.slot_moves {
            println!(
                "  slot moves all along: {} batches committed ({} slots, {} vertices), {} failed, {} settled later",
                m.committed, m.slots, m.vertices, m.failed, m.settled
            );
        }
        if let Some(f) = &report.failovers {
            println!(
                "  primaries changed (failovers and handovers): {} times a slot ({} slots), {} slots short of a backup at the end, table epoch {}",
                f.slot_failovers, f.slots, f.slots_short_of_backups, f.table_epoch
            );
        }
        for w in &report.windows {
            println!(
                "  {:>6}-{:<6} ms  {:<20} {:<40} availability {:>5.1}% of {:>5} ops  probe {}",
                w.window.start_ms,
                w.window.end_ms,
                w.window.kind.name(),
                w.window.target,
                w.availability * 100.0,
                w.ops,
                if w.window.probe_ok { "ok" } else { "FAILED" }
            );
        }
        for d in &report.checked.details {
            println!("{d}");
        }
    }
    match report.failure() {
        Some(why) => Err(why.into()),
        None => Ok(()),
    }
}

fn run_durability(a: DurabilityArgs) -> CliResult {
    use locus_bench::durability;
    check_out(a.out.as_deref())?;
    let mut s = durability::Settings::new(a.preset, std::env::current_exe()?);
    s.servers = a.servers;
    s.clients = a.clients;
    s.runs = a.runs;
    s.interval_ms = a.interval_ms;
    if let Some(d) = a.duration_s {
        s.duration_s = d;
    }
    let report = durability::run(&s, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        print_written(&report.write(dir)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{} servers, {} client threads (one update in flight each), {} vertices, {} s of updates per mode and run; median [min-max] of {} runs, modes interleaved",
        s.servers, s.clients, s.vertices, s.duration_s, s.runs
    );
    println!(
        "{:>16} {:>28} {:>26} {:>26} {:>20}",
        "durability",
        "acknowledged updates/s",
        "latency p50 (us)",
        "latency p99 (us)",
        "records per group"
    );
    let cell = |x: locus_bench::output::Spread, prec: usize| {
        format!("{:.prec$} [{:.prec$}-{:.prec$}]", x.median, x.min, x.max)
    };
    for r in &report.summary {
        println!(
            "{:>16} {:>28} {:>26} {:>26} {:>20}",
            r.mode,
            cell(r.updates_per_s, 0),
            cell(r.p50_us, 0),
            cell(r.p99_us, 0),
            cell(r.records_per_group, 1)
        );
    }
    Ok(())
}
