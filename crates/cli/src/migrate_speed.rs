//! `locus bench migrate-speed` (Pragh Fig. 13): flags and the table; the
//! measurements are `locus_bench::migrate_speed`.

use std::path::PathBuf;

use clap::Args;
use locus_bench::migrate_speed::{self, Settings};
use locus_bench::{Preset, Reporter};

use crate::bench::{check_out, print_written};
use crate::CliResult;

#[derive(Args, Debug)]
pub struct MigrateSpeedArgs {
    /// quick (seconds) or full (more values per measurement).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// Directory to write migrate-speed.json into.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the TCP rows.
    #[arg(long)]
    pub no_tcp: bool,
    /// Migration thread counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Payload sizes to measure in bytes, comma-separated (multiples of 8).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,256,1024,4096,16384,65536"
    )]
    pub payloads: Vec<u64>,
    /// Measure every row this many times, interleaved; a row is the median run
    /// (with min and max).
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
}

pub fn run(a: MigrateSpeedArgs) -> CliResult {
    check_out(a.out.as_deref())?;
    let mut settings = Settings::new(a.preset);
    settings.tcp = !a.no_tcp;
    settings.threads = a.threads;
    settings.payloads = a.payloads;
    settings.runs = a.runs;
    let report = migrate_speed::run(&settings, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        print_written(&report.write(dir)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report.rows)?);
    } else {
        println!(
            "{:<6} {:>7} {:>9} {:>8} {:>14} {:>12} {:>23}",
            "fabric", "threads", "payload", "values", "values/s", "MB/s", "values/s min-max"
        );
        for r in &report.rows {
            println!(
                "{:<6} {:>7} {:>9} {:>8} {:>14.0} {:>12.1} {:>23}",
                r.fabric,
                r.threads,
                r.payload_bytes,
                r.values,
                r.values_per_s,
                r.bytes_per_s / 1e6,
                format!("{:.0}-{:.0}", r.values_per_s_min, r.values_per_s_max)
            );
        }
    }
    Ok(())
}
