//! `locus bench netmigrate <experiment>`: flags and the summary table; the
//! experiments are `locus_bench::netmigrate` (NetMigrate 6: Figs. 4-6, Tables 2-7).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use locus_bench::netmigrate::{self, Backend, Experiment, Row, Settings};
use locus_bench::{Preset, Reporter};

use crate::bench::{check_out, print_written};
use crate::CliResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExperimentArg {
    /// Every protocol, YCSB-B, throughput/p50/p99 timelines (Figs. 4-6).
    Overall,
    /// BF and CBF size sweep (Table 2).
    Filters,
    /// Keys per migration group sweep (Table 3).
    Groups,
    /// Client- and server-side extra bandwidth (Table 4).
    Bandwidth,
    /// Write ratios x source CPU budgets (Tables 5-7).
    Budgets,
}

impl From<ExperimentArg> for Experiment {
    fn from(e: ExperimentArg) -> Experiment {
        match e {
            ExperimentArg::Overall => Experiment::Overall,
            ExperimentArg::Filters => Experiment::Filters,
            ExperimentArg::Groups => Experiment::Groups,
            ExperimentArg::Bandwidth => Experiment::Bandwidth,
            ExperimentArg::Budgets => Experiment::Budgets,
        }
    }
}

/// Where the migrating shard's pairs live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// The built-in in-memory KV server.
    Builtin,
    /// Two stock `redis-server` processes on loopback, each behind its migration agent
    /// (ordinary commands only; `locus_kvmigrate::redis`).
    Redis,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Backend {
        match b {
            BackendArg::Builtin => Backend::Builtin,
            BackendArg::Redis => Backend::Redis,
        }
    }
}

#[derive(Args, Debug)]
pub struct NetmigrateArgs {
    /// Which experiment.
    pub experiment: ExperimentArg,
    /// builtin (the in-memory KV server) or redis (two private redis-server processes).
    #[arg(long, value_enum, default_value = "builtin")]
    pub backend: BackendArg,
    /// The redis-server binary for `--backend redis` (default: found on PATH).
    #[arg(long, value_name = "PATH")]
    pub redis_server: Option<PathBuf>,
    /// quick (minutes on 2 cores) or full (larger shard).
    #[arg(long, default_value = "quick")]
    pub preset: Preset,
    /// Print the JSON on stdout (otherwise a summary table).
    #[arg(long)]
    pub json: bool,
    /// Directory for netmigrate-EXPERIMENT.json, .meta.json and the PNGs.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Records in the migrating shard instead of the preset's.
    #[arg(long)]
    pub records: Option<u64>,
    /// Closed-loop client threads instead of the preset's.
    #[arg(long)]
    pub clients: Option<u16>,
    /// Value bytes (16..=1024; default 64 as in the paper).
    #[arg(long, default_value_t = 64)]
    pub value_bytes: usize,
    /// Seed of the clients' key and operation choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs per configuration, round-robin (the median-throughput run is reported); default 3,
    /// 1 for the 60-configuration bandwidth and budgets matrix under quick.
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Load before and after each migration, ms, instead of the preset's (tests use small values).
    #[arg(long, hide = true)]
    pub phase_ms: Option<u64>,
    /// Timeline bin width, ms, instead of the preset's.
    #[arg(long, hide = true)]
    pub interval_ms: Option<u64>,
    /// FAULT INJECTION, not a measurement: the router sends S2/S4 double reads to the source
    /// only, so the history checker must report violations (rows say `fault`). Implies
    /// --read-back-writes.
    #[arg(long)]
    pub fault_skip_double_read: bool,
    /// Follow every client write with a read of its key (the workload in which a skipped
    /// double read shows; the control run of --fault-skip-double-read).
    #[arg(long, hide = true)]
    pub read_back_writes: bool,
}

pub fn run(a: NetmigrateArgs) -> CliResult {
    let mut s = Settings::new(a.experiment.into(), a.preset, a.backend.into());
    s.redis_server = a.redis_server;
    if let Some(r) = a.records {
        s.records = r;
    }
    if let Some(c) = a.clients {
        s.clients = c;
    }
    s.value_bytes = a.value_bytes;
    s.seed = a.seed;
    if let Some(r) = a.repeat {
        s.repeat = r;
    }
    if let Some(p) = a.phase_ms {
        s.phase_ms = p;
    }
    if let Some(i) = a.interval_ms {
        s.interval_ms = i;
    }
    s.fault_skip_double_read = a.fault_skip_double_read;
    s.read_back_writes = a.read_back_writes;
    s.resolve()?;
    check_out(a.out.as_deref())?;
    let report = netmigrate::run(&s, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        print_written(&report.write(dir)?);
    }
    let results = &report.results;
    if a.json {
        println!("{}", serde_json::to_string_pretty(results)?);
    } else {
        if let Some(fault) = results.rows.iter().find_map(|r| r.fault) {
            println!("FAULT INJECTED (--fault-skip-double-read), not a measurement: {fault}");
        }
        print_table(&results.rows);
        if !results.derived.is_null() {
            println!("{}", serde_json::to_string_pretty(&results.derived)?);
        }
    }
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<24} {:>6} {:>7} {:>12} {:>9} {:>9} {:>10} {:>7} {:>6} {:>6} {:>8} {:>8}",
        "configuration",
        "writes",
        "budget",
        "ops/s(migr)",
        "p50(us)",
        "p99(us)",
        "migr(ms)",
        "failed",
        "lost",
        "viol",
        "C-extra%",
        "S-extra%"
    );
    for r in rows {
        println!(
            "{:<24} {:>5.0}% {:>6}% {:>12.0} {:>9.0} {:>9.0} {:>10} {:>7} {:>6} {:>6} {:>8.4} {:>8.4}",
            r.label,
            r.write_ratio * 100.0,
            r.source_budget_pct,
            r.avg_ops_per_s_migrating,
            r.p50_us_migrating,
            r.p99_us_migrating,
            r.migration_ms,
            r.failed_ops,
            r.lost_ops,
            r.violations,
            r.client_extra_pct,
            r.server_extra_pct
        );
    }
}
