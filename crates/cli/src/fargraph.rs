//! `locus bench fargraph <experiment>`: flags and printing; the experiments are
//! `locus_bench::fargraph` (Fargraph+ Figs. 15, 16, 18, 19, Table 4).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use locus_analytics::run::PlacementSource;
use locus_bench::fargraph::{self, Experiment, Settings};
use locus_bench::{Preset, Reporter};

use crate::bench::{check_out, print_written};
use crate::CliResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExperimentArg {
    /// Every algorithm x backend at far ratio 0.8, normalised to the Oracle (Fig. 15).
    Overall,
    /// BFS time by far ratio, far vs paged with and without readahead (Fig. 18).
    Ratio,
    /// Chunk sizes 4 KB .. 4 MB (Fig. 19).
    Chunk,
    /// With and without double buffering (Table 4).
    Buffering,
    /// 1, 2 and auto threads (Fig. 16).
    Threads,
}

impl From<ExperimentArg> for Experiment {
    fn from(e: ExperimentArg) -> Experiment {
        match e {
            ExperimentArg::Overall => Experiment::Overall,
            ExperimentArg::Ratio => Experiment::Ratio,
            ExperimentArg::Chunk => Experiment::Chunk,
            ExperimentArg::Buffering => Experiment::Buffering,
            ExperimentArg::Threads => Experiment::Threads,
        }
    }
}

#[derive(Args, Debug)]
pub struct FargraphArgs {
    /// Which experiment.
    pub experiment: ExperimentArg,
    /// quick (R-MAT scale 20, about a minute each) or full (scale 22).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// R-MAT scale instead of the preset's.
    #[arg(long)]
    pub scale: Option<u32>,
    /// Print the JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory to write EXPERIMENT.json and EXPERIMENT.png into.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Runs per configuration (default 3), interleaved; the median is used, with min and max.
    #[arg(long)]
    pub repeat: Option<usize>,
    /// `threads`: read the offline table from here instead of building one.
    #[arg(long, value_name = "FILE")]
    pub profile_table: Option<PathBuf>,
    /// `overall`: where the disk backend's block files go.
    #[arg(long, value_name = "DIR")]
    pub disk_dir: Option<PathBuf>,
    /// Place disk and far runs' blocks from a profiling run on the Oracle
    /// (timed: each run reports `profile_s` and `wall_s`) instead of from
    /// block sizes and degrees, for comparison with the honest default.
    #[arg(long)]
    pub profile_run: bool,
}

pub fn run(a: FargraphArgs) -> CliResult {
    let mut s = Settings::new(a.preset);
    if let Some(scale) = a.scale {
        s.scale = scale;
    }
    if let Some(r) = a.repeat {
        s.repeat = r;
    }
    if let Some(d) = a.disk_dir {
        s.disk_dir = d;
    }
    s.profile_table = a.profile_table;
    if a.profile_run {
        s.placement = PlacementSource::ProfilingRun;
    }
    s.validate()?;
    check_out(a.out.as_deref())?;
    let report = fargraph::run(a.experiment.into(), &s, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        print_written(&report.write(dir)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", serde_json::to_string_pretty(&report.derived)?);
    }
    Ok(())
}
