//! `locus bench elastic`: flags and printing over `locus_bench::elastic`.

use clap::Args;
use locus_bench::elastic::{self, Settings};
use locus_bench::Reporter;

use crate::CliResult;

#[derive(Args, Debug)]
pub struct ElasticArgs {
    /// R-MAT scale of the graph (the full form is 20).
    #[arg(long, default_value_t = 16)]
    pub scale: u32,
    /// Closed-loop client threads.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Seconds of load before and after each move.
    #[arg(long, default_value_t = 5)]
    pub phase_s: u64,
    /// Slots per batch of a move.
    #[arg(long, default_value_t = 16)]
    pub batch_slots: usize,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(a: ElasticArgs) -> CliResult {
    if !(8..=26).contains(&a.scale) || a.clients == 0 || a.phase_s == 0 || a.batch_slots == 0 {
        return Err(
            "--scale must be 8..=26, and --clients, --phase-s and --batch-slots at least 1".into(),
        );
    }
    let s = Settings {
        scale: a.scale,
        clients: a.clients,
        phase_s: a.phase_s,
        batch_slots: a.batch_slots,
        exe: std::env::current_exe()?,
    };
    let r = elastic::run(&s, &Reporter::terminal())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "{:<34} {:>7} {:>6} {:>10} {:>22} {:>22}",
        "move", "move s", "slots", "MB moved", "ops/s before/during/after", "p99 us before/during"
    );
    for row in &r.rows {
        println!(
            "{:<34} {:>7.2} {:>6} {:>10.1} {:>7.0}/{:>6.0}/{:>7.0} {:>11.0}/{:>10.0}",
            row.change,
            row.move_s,
            row.slots,
            row.bytes_moved as f64 / 1e6,
            row.throughput_before,
            row.throughput_during,
            row.throughput_after,
            row.p99_before_us,
            row.p99_during_us
        );
    }
    println!(
        "{} ops, {} failed, {} retries; {} acknowledged inserts, {} lost",
        r.ops, r.failed_ops, r.retries, r.acknowledged_writes, r.lost_acknowledged_writes
    );
    for (why, n) in &r.failure_reasons {
        println!("  {n:>8} x {why}");
    }
    Ok(())
}
