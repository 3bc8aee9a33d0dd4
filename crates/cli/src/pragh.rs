//! `locus bench pragh <experiment>`: flags and printing; the experiment is
//! `locus_bench::pragh`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use locus_bench::pragh::tcp::{FabricSpread, TcpReport, TcpSettings};
use locus_bench::pragh::{self, Experiment, Loader, Row, Scheme, Settings};
use locus_bench::{Preset, Reporter};

use crate::CliResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExperimentArg {
    /// Every scheme, skewed starts (Pragh Table 1, Fig. 10).
    Schemes,
    /// Every scheme, uniform starts over every vertex, or over each of --scopes (Pragh 6.1's "Uniform workload" is --scopes 1024).
    Uniform,
    /// Orig and Split+Cache as the start scope grows (Pragh Fig. 11).
    Scope,
    /// 50% updates: update latency with and without migration (Pragh Fig. 12).
    PutHeavy,
    /// Throughput timeline from a cold start, eager vs deferred (Pragh Fig. 14).
    EagerDeferred,
    /// Throughput timeline as the start scope switches, Shard vs Split+Cache (Pragh Fig. 15).
    Dynamic,
    /// Replica throughput against its memory: Ideal, Orig and Replica at budgets from 0
    /// (Split+Cache) to 100% of a machine's share of the graph's value bytes.
    ReplicaBudget,
}

impl From<ExperimentArg> for Experiment {
    fn from(e: ExperimentArg) -> Experiment {
        match e {
            ExperimentArg::Schemes => Experiment::Schemes,
            ExperimentArg::Uniform => Experiment::Uniform,
            ExperimentArg::Scope => Experiment::Scope,
            ExperimentArg::PutHeavy => Experiment::PutHeavy,
            ExperimentArg::EagerDeferred => Experiment::EagerDeferred,
            ExperimentArg::Dynamic => Experiment::Dynamic,
            ExperimentArg::ReplicaBudget => Experiment::ReplicaBudget,
        }
    }
}

#[derive(Args, Debug)]
pub struct PraghArgs {
    /// Which experiment.
    #[arg(value_enum)]
    pub experiment: ExperimentArg,
    /// quick (a few minutes here), full (R-MAT 20, Pragh's 10 s interval) or
    /// paper (R-MAT 26 without a CSR: hours).
    #[arg(long, value_enum, default_value = "quick")]
    pub preset: PresetArg,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// Directory for `pragh-<experiment>.json`, its `.meta.json` and PNG plots.
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
    /// Operations per warm-up round and measured sequence (overrides the preset).
    #[arg(long)]
    pub ops: Option<usize>,
    /// Longest warm-up, seconds (overrides the preset). Every scheme warms in
    /// rounds of an interval and a half, at least two, until one approves
    /// no new migrations: three intervals for a scheme that migrates nothing.
    /// Only the first round's edge inserts are applied (later rounds query
    /// from those vertices instead), so every scheme is measured on the same
    /// graph however long it warmed.
    #[arg(long)]
    pub warm_s_max: Option<f64>,
    /// Warm-up ends after a round approving at most this share of all
    /// migrations approved so far (overrides the preset: 0 at quick and
    /// full, a round approving none; 0.01 at paper).
    #[arg(long)]
    pub settle_share: Option<f64>,
    /// Run nothing: redraw the PNG plots from the `pragh-<experiment>.json`
    /// an earlier run wrote into --out.
    #[arg(long, requires = "out")]
    pub plot_only: bool,
    /// Start scopes, comma-separated. Scope experiment: Zipf over each
    /// (default: 1024, 4096, ... every other power of two up to the vertex
    /// count, which is included). Uniform experiment: uniform over each
    /// (default: over every vertex; `--scopes 1024` is Pragh 6.1's uniform
    /// workload, in the paper's default scope).
    #[arg(long, value_delimiter = ',')]
    pub scopes: Vec<u64>,
    /// Run only these schemes (comma-separated: Ideal,Orig,Shard,Split,Cache,Split+Cache,Replica; Replica is Split+Cache with read-only replicas). Orig-again (schemes and uniform experiments, only when named) is a second Orig cluster: its ratio to Orig is the benchmark's noise between identical schemes.
    #[arg(long, value_delimiter = ',')]
    pub schemes: Vec<String>,
    /// local: the in-process fabric only. tcp (schemes only): Ideal, Orig,
    /// Split+Cache and Replica also as `locus server` (and `locus coordinator`)
    /// processes on loopback with query clients here, interleaved with the
    /// in-process run of the same workload; writes pragh-schemes-tcp.json.
    #[arg(long, value_enum, default_value = "local")]
    pub fabric: FabricArg,
    /// Interleaved runs of every scheme (rows are medians, with min and max;
    /// every run's rows go to pragh-<experiment>.runs.json). The runs order
    /// the schemes so that each is first, last and after every other equally
    /// often over a cycle (n runs for n schemes, 2n if n is odd).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Parts each scheme's measured window is cut into: the schemes of a
    /// run are all warmed up, then measured in turns, a part each, so that a
    /// slow spell of a shared host falls on all of them alike. 1: each
    /// scheme measured whole, one after another (default: 8 at --preset
    /// quick; 1 at full, and with --loads shared, which it needs).
    #[arg(long)]
    pub slices: Option<usize>,
    /// How the graph is held: csr (a CSR beside each store) or ranged (no
    /// CSR: each store is loaded from the generator a vertex range at a
    /// time; what R-MAT 26 needs here). Default: csr up to scale 22.
    #[arg(long, value_enum)]
    pub loader: Option<LoaderArg>,
    /// each: every scheme of every round loads its own graph. shared: the
    /// schemes on one machine count share a load per round, each running in
    /// a process forked from the loaded one, so its changes vanish with it
    /// (the default at --preset paper, where a load takes minutes).
    #[arg(long, value_enum)]
    pub loads: Option<LoadsArg>,
    /// Replica budget per machine in MiB (fractions allowed) for the Replica
    /// scheme; default: a quarter of the value region, at most 256 MiB (at
    /// --preset paper 56 MiB, 4.75% of R-MAT 26's values over 8 machines).
    #[arg(long)]
    pub replica_mb: Option<f64>,
    /// With --fabric tcp: closed-loop client threads.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Seconds of the measured window, at least (default: the preset's
    /// measuring time; with --fabric tcp at least 5).
    #[arg(long)]
    pub measure_s: Option<f64>,
    /// With --fabric tcp: threads sending the graph's LOAD batches.
    #[arg(long, default_value_t = 4)]
    pub senders: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PresetArg {
    /// R-MAT 16, 1 s monitoring interval: minutes here.
    Quick,
    /// R-MAT 20, Pragh's 10 s interval.
    Full,
    /// Pragh 6's graph, R-MAT 26 (2^26 vertices, 2^30 edges), loaded without a
    /// CSR, Pragh's 10 s interval: hours here, and most of the machine's memory.
    Paper,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoaderArg {
    /// A CSR in memory.
    Csr,
    /// No CSR: vertex ranges built from the generator and put one at a time.
    Ranged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadsArg {
    /// A load per scheme and round.
    Each,
    /// A load per machine count and round, schemes in forked processes.
    Shared,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FabricArg {
    /// The in-process fabric.
    Local,
    /// Server processes over TCP beside the in-process fabric.
    Tcp,
}

pub fn run(a: PraghArgs) -> CliResult {
    if a.plot_only {
        let dir = a
            .out
            .as_deref()
            .expect("clap requires --out with --plot-only");
        for f in pragh::replot(a.experiment.into(), dir)? {
            eprintln!("wrote {}", f.display());
        }
        return Ok(());
    }
    let mut settings = match a.preset {
        PresetArg::Quick => Settings::new(Preset::Quick, a.seed),
        PresetArg::Full => Settings::new(Preset::Full, a.seed),
        PresetArg::Paper => Settings::paper(a.seed),
    };
    if let Some(s) = a.scale {
        settings.scale = s;
    }
    if let Some(t) = a.threads {
        settings.threads = t;
    }
    if let Some(n) = a.ops {
        settings.ops = n;
    }
    if let Some(w) = a.warm_s_max {
        settings.warm_s_max = w;
    }
    if let Some(m) = a.measure_s {
        settings.measure_s_min = m;
    }
    if let Some(f) = a.settle_share {
        settings.settle_share = f;
    }
    settings.runs = a.runs;
    if !a.scopes.is_empty()
        && !matches!(a.experiment, ExperimentArg::Scope | ExperimentArg::Uniform)
    {
        return Err("--scopes is for the `scope` and `uniform` experiments only".into());
    }
    settings.scopes = a.scopes.clone();
    if a.replica_mb.is_some() {
        settings.replica_mb = a.replica_mb;
    }
    if let Some(l) = a.loads {
        settings.shared_load = l == LoadsArg::Shared;
    }
    match a.slices {
        Some(n) => settings.slices = n,
        // Turns keep every cluster in one process: not with shared loads.
        None if settings.shared_load => settings.slices = 1,
        None => {}
    }
    settings.loader = a.loader.map(|l| match l {
        LoaderArg::Csr => Loader::Csr,
        LoaderArg::Ranged => Loader::Ranged,
    });
    let only = a
        .schemes
        .iter()
        .map(|n| Scheme::parse(n))
        .collect::<locus_bench::Result<Vec<_>>>()?;
    if a.fabric == FabricArg::Tcp {
        return run_tcp(&a, &settings, &only);
    }
    let report = pragh::run(a.experiment.into(), &settings, &only, &Reporter::terminal())?;
    for t in &report.timelines {
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
    if a.json && !report.timelines.is_empty() {
        println!("{}", serde_json::to_string_pretty(&report.timelines)?);
    } else if a.json {
        println!("{}", serde_json::to_string_pretty(&report.rows)?);
    } else if !report.rows.is_empty() {
        let p = &report.settings;
        println!(
            "R-MAT scale {} ({} vertices, {} stored edges), {} machines, {} worker threads, interval {} ms; median [min-max] of {} interleaved run(s)",
            p.scale, report.vertices, report.stored_edges, p.machines, p.threads, p.interval_ms, p.runs
        );
        print_rows(&report.rows);
    }
    if let Some(dir) = &a.out {
        for f in report.write(dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

fn print_rows(rows: &[Row]) {
    println!(
        "{:<12} {:>7} {:>22} {:>9} {:>9} {:>8} {:>8} {:>9} {:>10} {:>8} {:>17} {:>8}",
        "scheme",
        "scope",
        "queries/s",
        "p50(us)",
        "p99(us)",
        "remote",
        "rem.GET",
        "migrated",
        "moved(MB)",
        "replicas",
        "vs Orig",
        "vs Ideal"
    );
    for r in rows {
        println!(
            "{:<12} {:>7} {:>22} {:>9.1} {:>9.1} {:>7.1}% {:>7.1}% {:>8.2}% {:>10.1} {:>7.2}% {:>17} {:>7.1}%",
            r.scheme,
            r.scope.map_or("-".to_string(), |s| s.to_string()),
            format!(
                "{:.0} [{:.0}-{:.0}]",
                r.throughput_qps, r.throughput_qps_range[0], r.throughput_qps_range[1]
            ),
            r.p50_us,
            r.p99_us,
            r.remote_rate * 100.0,
            r.remote_gets * 100.0,
            r.migrated_fraction * 100.0,
            r.bytes_moved as f64 / 1e6,
            r.replica_share * 100.0,
            format!(
                "{:.2}x [{:.2}-{:.2}]",
                r.vs_orig, r.vs_orig_range[0], r.vs_orig_range[1]
            ),
            r.vs_ideal * 100.0
        );
    }
    println!("(replicas: replica bytes as a share of the graph's value bytes; the JSON has bytes per machine and the budget)");
}

/// `pragh schemes --fabric tcp`.
fn run_tcp(a: &PraghArgs, settings: &Settings, only: &[Scheme]) -> CliResult {
    if a.experiment != ExperimentArg::Schemes {
        return Err("--fabric tcp runs the `schemes` experiment only".into());
    }
    crate::bench::check_out(a.out.as_deref())?;
    let mut tcp = TcpSettings::new(settings, std::env::current_exe()?);
    tcp.runs = a.runs;
    tcp.clients = a.clients;
    tcp.senders = a.senders;
    if let Some(m) = a.measure_s {
        tcp.measure_s = m;
    }
    let report = pragh::tcp::run(settings, &tcp, only, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        crate::bench::print_written(&report.write(dir)?);
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"summary": report.summary, "runs": report.runs})
            )?
        );
    } else {
        print_tcp(&report);
    }
    Ok(())
}

fn print_tcp(r: &TcpReport) {
    let p = &r.settings;
    println!(
        "R-MAT scale {} ({} vertices, {} stored edges), {} machines, interval {} ms; in process: {} worker threads; \
         TCP: server processes on loopback, {} client threads; median [min-max] of {} interleaved runs",
        p.scale,
        r.vertices,
        r.stored_edges,
        p.machines,
        p.interval_ms,
        p.threads,
        r.tcp.clients,
        r.runs.len()
    );
    println!(
        "{:<12} {:<10} {:>26} {:>22} {:>24} {:>20} {:>20} {:>20}",
        "scheme",
        "fabric",
        "queries/s",
        "p50(us)",
        "p99(us)",
        "remote(%)",
        "vs Orig",
        "vs Ideal(%)"
    );
    let cell = |s: locus_bench::output::Spread, scale: f64, prec: usize| {
        format!(
            "{:.prec$} [{:.prec$}-{:.prec$}]",
            s.median * scale,
            s.min * scale,
            s.max * scale
        )
    };
    let line = |scheme: &str, fabric: &str, f: &FabricSpread| {
        println!(
            "{:<12} {:<10} {:>26} {:>22} {:>24} {:>20} {:>20} {:>20}",
            scheme,
            fabric,
            cell(f.throughput_qps, 1.0, 0),
            cell(f.p50_us, 1.0, 1),
            cell(f.p99_us, 1.0, 0),
            cell(f.remote_rate, 100.0, 1),
            cell(f.vs_orig, 1.0, 2),
            cell(f.vs_ideal, 100.0, 1),
        );
    };
    for s in &r.summary {
        line(&s.scheme, "in-process", &s.local);
        line("", "tcp", &s.tcp);
    }
    println!("(latency: service time on a worker in process; client round trip over TCP, where the queries' server-side median was:");
    for s in &r.summary {
        println!("  {:<12} {}", s.scheme, cell(s.tcp_server_p50_us, 1.0, 1));
    }
    println!(")");
    for run in &r.runs {
        for t in &run.tcp {
            if t.coordinator {
                println!(
                    "run {} {} over TCP: {} values moved ({} while measuring), {} replicas held, {:.2}% of vertices away, warm-up {:.0} s",
                    run.run,
                    t.scheme,
                    t.migrations,
                    t.migrations_measured,
                    t.replicas_held,
                    t.migrated_fraction * 100.0,
                    t.warm_s
                );
            }
        }
    }
}
