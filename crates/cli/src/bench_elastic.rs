//! `locus bench elastic`: flags and printing over `locus_bench::elastic`.

use clap::Args;
use locus_bench::elastic::{self, MoveProtocol, Settings};
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
    /// How slots move: `index` (Locus's: a handed batch is served by its
    /// new home before the commit, clients find it by the migration index)
    /// or `stop-and-copy` (the baseline: a batch's updates wait from its
    /// guard to its commit).
    #[arg(long, default_value = "index", value_parser = ["index", "stop-and-copy"])]
    pub protocol: String,
    /// Also run the same two changes on Redis Cluster (stock redis-server
    /// nodes, `redis-cli --cluster rebalance`) under the same kind of load,
    /// after Locus's run.
    #[arg(long)]
    pub redis_cluster: bool,
    /// The redis-server binary for --redis-cluster (default: on PATH).
    #[arg(long, value_name = "PATH")]
    pub redis_server: Option<std::path::PathBuf>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the report (`elastic.json`) and the throughput timeline
    /// (`elastic-timeline.png`) into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

pub(crate) fn run(a: ElasticArgs) -> CliResult {
    if !(8..=26).contains(&a.scale) || a.clients == 0 || a.phase_s == 0 || a.batch_slots == 0 {
        return Err(
            "--scale must be 8..=26, and --clients, --phase-s and --batch-slots at least 1".into(),
        );
    }
    let redis_server = match (a.redis_cluster, a.redis_server) {
        (false, _) => None,
        (true, Some(p)) if p.is_file() => Some(p),
        (true, Some(p)) => {
            return Err(format!("--redis-server {}: no such file", p.display()).into())
        }
        (true, None) => Some(
            locus_bench::netmigrate::find_on_path("redis-server").ok_or(
                "--redis-cluster: redis-server is not on PATH; install it (Debian: apt-get install -y redis-server) or pass --redis-server PATH",
            )?,
        ),
    };
    let s = Settings {
        protocol: if a.protocol == "index" {
            MoveProtocol::Index
        } else {
            MoveProtocol::StopAndCopy
        },
        redis_server,
        scale: a.scale,
        clients: a.clients,
        phase_s: a.phase_s,
        batch_slots: a.batch_slots,
        exe: std::env::current_exe()?,
    };
    let r = elastic::run(&s, &Reporter::terminal())?;
    if let Some(dir) = &a.out {
        for p in r.write(dir)? {
            eprintln!("wrote {}", p.display());
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "{:<20} {:<34} {:>7} {:>6} {:>10} {:>22} {:>22}",
        "protocol",
        "move",
        "move s",
        "slots",
        "MB moved",
        "ops/s before/during/after",
        "p99 us before/during"
    );
    for row in &r.rows {
        println!(
            "{:<20} {:<34} {:>7.2} {:>6} {:>10.1} {:>7.0}/{:>6.0}/{:>7.0} {:>11.0}/{:>10.0}",
            row.protocol.split(" (").next().unwrap_or(""),
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
        "{} ops, {} failed, {} retries, {} updates sent to a new home by a hint; {} acknowledged inserts, {} lost",
        r.ops, r.failed_ops, r.retries, r.hinted, r.acknowledged_writes, r.lost_acknowledged_writes
    );
    for (why, n) in &r.failure_reasons {
        println!("  {n:>8} x {why}");
    }
    if let Some(t) = &r.redis {
        println!(
            "redis cluster: {} ops, {} failed, {} redirects and retries; {} acknowledged appends, {} lost",
            t.ops, t.failed_ops, t.retries, t.acknowledged_writes, t.lost_acknowledged_writes
        );
    }
    Ok(())
}
