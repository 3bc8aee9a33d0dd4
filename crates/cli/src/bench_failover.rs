//! `locus bench failover`: flags and printing over `locus_bench::failover`.

use clap::Args;
use locus_bench::failover::{self, Settings};
use locus_bench::output::Spread;
use locus_bench::Reporter;

use crate::CliResult;

#[derive(Args, Debug)]
pub struct FailoverArgs {
    /// Replication factors (1..=3), comma-separated, interleaved within each run.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub replication: Vec<u8>,
    /// Servers of each cluster (server 1 is killed).
    #[arg(long, default_value_t = 3)]
    pub servers: usize,
    /// R-MAT scale of the graph.
    #[arg(long, default_value_t = 14)]
    pub scale: u32,
    /// Closed-loop client threads of each phase: inserts alone, two-hops
    /// alone, then two-hops with 5% inserts through the kill.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Seconds of each phase: inserts alone, two-hops alone, the mixed load
    /// before the kill, and after every vertex answers.
    #[arg(long, default_value_t = 5)]
    pub phase_s: u64,
    /// The clusters' `--sync` (`always`: an fdatasync before each
    /// acknowledgement, at the primary and at every backup; `interval`:
    /// written before it, synced every 10 ms), to see what the disk costs.
    #[arg(long, default_value = "always", value_parser = ["always", "interval"])]
    pub sync: String,
    /// Runs (each a fresh cluster per factor); medians with min and max from 3.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the report (`failover.json`) and the throughput timeline
    /// (`failover-timeline.png`) into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

pub(crate) fn run(a: FailoverArgs) -> CliResult {
    crate::bench::check_out(a.out.as_deref())?;
    let s = Settings {
        replication: a.replication,
        servers: a.servers,
        scale: a.scale,
        clients: a.clients,
        phase_s: a.phase_s,
        sync: a.sync,
        runs: a.runs,
        exe: std::env::current_exe()?,
    };
    let r = failover::run(&s, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        crate::bench::print_written(&r.write(dir)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "R-MAT scale {}, {} servers, sync {}, {} client threads: {} s of inserts alone (updates/s), {} s of two-hops alone (2-hop/s), then two-hops with 5% inserts and kill -9 of server {} after {} s",
        s.scale, s.servers, s.sync, s.clients, s.phase_s, s.phase_s, r.victim, s.phase_s
    );
    println!(
        "{:>2} {:>4} {:>10} {:>10} {:>16} {:>16} {:>9} {:>7} {:>10} {:>8} {:>6} {:>10}",
        "R",
        "run",
        "updates/s",
        "2-hop/s",
        "upd p50/p99 ms",
        "2hop p50/p99 ms",
        "answer s",
        "failed",
        "failed ops",
        "acked",
        "lost",
        "violations"
    );
    for x in &r.rows {
        println!(
            "{:>2} {:>4} {:>10.0} {:>10.0} {:>7.2}/{:>8.2} {:>7.2}/{:>8.2} {:>9} {:>7} {:>10} {:>8} {:>6} {:>10}",
            x.replication,
            x.run,
            x.update_ops_s,
            x.khop_ops_s,
            x.update_p50_ms,
            x.update_p99_ms,
            x.khop_p50_ms,
            x.khop_p99_ms,
            x.answer_s.map_or("none".into(), |a| format!("{a:.2}")),
            if x.failed_over { "over" } else { "no" },
            x.failed_ops,
            x.acknowledged_writes,
            x.lost_acknowledged_writes,
            x.violations
        );
    }
    println!(
        "failed: whether the table moved every slot off the killed server; lost: acknowledged inserts not read back (R=1: their vertex is on the dead server); violations: {}",
        r.violations_checked
    );
    if s.runs >= 3 {
        let cell = |x: Spread, prec: usize| {
            format!("{:.prec$} [{:.prec$}-{:.prec$}]", x.median, x.min, x.max)
        };
        println!("median [min-max] of {} runs:", s.runs);
        println!(
            "{:>10} {:>22} {:>22} {:>20} {:>20} {:>20} {:>9} {:>14}",
            "R", "updates/s", "2-hop/s", "upd p99 ms", "2hop p99 ms", "answer s", "failed", "lost"
        );
        for x in &r.summary {
            let factor = match x.pass {
                1 => x.replication.to_string(),
                p => format!("{} (A/A {p})", x.replication),
            };
            println!(
                "{:>10} {:>22} {:>22} {:>20} {:>20} {:>20} {:>6}/{:<2} {:>14}",
                factor,
                cell(x.update_ops_s, 0),
                cell(x.khop_ops_s, 0),
                cell(x.update_p99_ms, 2),
                cell(x.khop_p99_ms, 2),
                x.answer_s.map_or("none".into(), |a| cell(a, 2)),
                x.failed_over_runs,
                x.runs,
                cell(x.lost_acknowledged_writes, 0)
            );
        }
    }
    Ok(())
}
