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
}

pub fn run(a: MigrateSpeedArgs) -> CliResult {
    check_out(a.out.as_deref())?;
    let mut settings = Settings::new(a.preset);
    settings.tcp = !a.no_tcp;
    let report = migrate_speed::run(&settings, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        print_written(&report.write(dir)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report.rows)?);
    } else {
        println!(
            "{:<6} {:>7} {:>9} {:>8} {:>14} {:>12}",
            "fabric", "threads", "payload", "values", "values/s", "MB/s"
        );
        for r in &report.rows {
            println!(
                "{:<6} {:>7} {:>9} {:>8} {:>14.0} {:>12.1}",
                r.fabric,
                r.threads,
                r.payload_bytes,
                r.values,
                r.values_per_s,
                r.bytes_per_s / 1e6
            );
        }
    }
    Ok(())
}
