//! `locus bench sparql`: flags and printing; the benchmark is
//! `locus_bench::sparql` (Pragh 6.5, Fig. 16).

use std::path::PathBuf;

use clap::Args;
use locus_bench::pragh::Scheme;
use locus_bench::sparql::{self, Settings, CLASSES};
use locus_bench::{Preset, Reporter};

use crate::CliResult;

#[derive(Args, Debug)]
pub struct SparqlBenchArgs {
    /// quick (LUBM-2, 1 s monitoring interval, a few minutes here) or full
    /// (LUBM-20, Pragh's 10 s interval).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Directory for sparql-mix.json (every run and the medians), its
    /// .meta.json and the PNGs of Fig. 16.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// LUBM universities (overrides the preset).
    #[arg(long)]
    pub universities: Option<u32>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Interleaved runs of every scheme; figures are medians with min and max.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Queries per warm-up round and measured sequence (overrides the preset).
    #[arg(long)]
    pub queries: Option<usize>,
    /// Longest warm-up of a migrating scheme, seconds (overrides the preset).
    #[arg(long)]
    pub warm_s_max: Option<f64>,
    /// Zipf skew of the start constants.
    #[arg(long, default_value_t = 0.99)]
    pub theta: f64,
    /// Data and workload seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run only these schemes (comma-separated: Ideal,Orig,Shard,Split,Cache,Split+Cache,Replica).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Vec<String>,
}

pub fn run(a: SparqlBenchArgs) -> CliResult {
    let mut p = Settings::new(a.preset, a.seed);
    if let Some(u) = a.universities {
        p.universities = u;
    }
    if let Some(t) = a.threads {
        p.threads = t;
    }
    if let Some(q) = a.queries {
        p.queries = q;
    }
    if let Some(w) = a.warm_s_max {
        p.warm_s_max = w;
    }
    p.runs = a.runs;
    p.theta = a.theta;
    let only = a
        .schemes
        .iter()
        .map(|n| Scheme::parse(n))
        .collect::<locus_bench::Result<Vec<_>>>()?;
    p.validate()?;
    crate::bench::check_out(a.out.as_deref())?;
    let report = sparql::run(&p, &only, &Reporter::terminal())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report.summary)?);
    } else {
        println!(
            "LUBM-{} ({} triples), {} machines, {} worker threads, interval {} ms, Zipf {} starts; median of {} interleaved runs [min-max]",
            p.universities, report.triples, p.machines, p.threads, p.interval_ms, p.theta, p.runs
        );
        println!(
            "classes (candidates): {}",
            CLASSES
                .iter()
                .zip(&report.candidates)
                .map(|(c, n)| format!("{} ({n})", c.name))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "{:<12} {:>26} {:>9} {:>9} {:>17} {:>8} {:>9} {:>8}",
            "scheme",
            "queries/s",
            "p50(us)",
            "p99(us)",
            "remote ops",
            "rem.GET",
            "migrated",
            "vs Orig"
        );
        for s in &report.summary {
            println!(
                "{:<12} {:>9.0} [{:>7.0}-{:>7.0}] {:>9.1} {:>9.1} {:>5.1}% [{:.1}-{:.1}] {:>7.1}% {:>8.2}% {:>7.2}x",
                s.scheme,
                s.throughput_qps.median,
                s.throughput_qps.min,
                s.throughput_qps.max,
                s.p50_us.median,
                s.p99_us.median,
                s.remote_rate.median * 100.0,
                s.remote_rate.min * 100.0,
                s.remote_rate.max * 100.0,
                s.remote_gets.median * 100.0,
                s.migrated_fraction.median * 100.0,
                s.vs_orig
            );
        }
    }
    if let Some(dir) = &a.out {
        for f in report.write(dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}
