//! `locus bench pragh <experiment>`: flags and printing; the experiment is
//! `locus_bench::pragh`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use locus_bench::pragh::{self, Experiment, Row, Scheme, Settings};
use locus_bench::{Preset, Reporter};

use crate::CliResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExperimentArg {
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

impl From<ExperimentArg> for Experiment {
    fn from(e: ExperimentArg) -> Experiment {
        match e {
            ExperimentArg::Schemes => Experiment::Schemes,
            ExperimentArg::Uniform => Experiment::Uniform,
            ExperimentArg::Scope => Experiment::Scope,
            ExperimentArg::PutHeavy => Experiment::PutHeavy,
            ExperimentArg::EagerDeferred => Experiment::EagerDeferred,
            ExperimentArg::Dynamic => Experiment::Dynamic,
        }
    }
}

#[derive(Args, Debug)]
pub struct PraghArgs {
    /// Which experiment.
    #[arg(value_enum)]
    pub experiment: ExperimentArg,
    /// quick (a few minutes here) or full (larger graph, Pragh's 10 s interval).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
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
    /// Run only these schemes (comma-separated: Ideal,Orig,Shard,Split,Cache,Split+Cache,Replica; Replica is Split+Cache with read-only replicas).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Vec<String>,
}

pub fn run(a: PraghArgs) -> CliResult {
    let mut settings = Settings::new(a.preset, a.seed);
    if let Some(s) = a.scale {
        settings.scale = s;
    }
    if let Some(t) = a.threads {
        settings.threads = t;
    }
    let only = a
        .schemes
        .iter()
        .map(|n| Scheme::parse(n))
        .collect::<locus_bench::Result<Vec<_>>>()?;
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
            "R-MAT scale {} ({} vertices, {} stored edges), {} machines, {} worker threads, interval {} ms",
            p.scale, report.vertices, report.stored_edges, p.machines, p.threads, p.interval_ms
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
