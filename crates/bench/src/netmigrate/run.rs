//! Measuring one configuration ([`run_case`], on `locus_kvmigrate::measure` or
//! `measure_redis`), turning its report into a [`Row`], and running every
//! configuration round-robin ([`run_all`]), keeping the median run.

use std::sync::Arc;
use std::time::Instant;

use locus_kvmigrate::history::HistoryConfig;
use locus_kvmigrate::measure::{
    measure, Draw, IntervalStats, MeasureConfig, MeasureReport, OpChooser, Outcome,
};
use locus_kvmigrate::router::RouterConfig;
use locus_kvmigrate::runtime::CpuBudget;
use locus_kvmigrate::{Geometry, ServerConfig};
use locus_workloads::ycsb::{FastUniform, Op, Workload};
use serde::Serialize;

use super::cases::Case;
use super::RunSettings;
use crate::{BenchError, Reporter, Result};

/// One measured configuration (its median-throughput run).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The configuration's name ("netmigrate-long", "bf 64 B, cbf 64 B").
    pub label: String,
    /// The protocol.
    pub protocol: &'static str,
    /// Whether destinations mirrored writes to the source.
    pub mirror_writes: bool,
    /// Share of queries that were SETs.
    pub write_ratio: f64,
    /// The source's CPU budget for queries, percent.
    pub source_budget_pct: u8,
    /// Bloom filter bytes.
    pub bf_bytes: usize,
    /// Counting Bloom filter bytes.
    pub cbf_bytes: usize,
    /// Migration groups.
    pub groups: u64,
    /// Keys per group.
    pub keys_per_group: f64,
    /// Filters' bits per group (Table 2's "Bits/Ele" counts BF bits only, per group).
    pub bf_bits_per_group: f64,
    /// Upper bound of a BF false positive with every group inserted (4 hashes).
    pub bf_fp_bound: f64,
    /// Upper bound of a CBF false positive with both of a source's windows full:
    /// `groups_inflight_max` groups copying and `completing_max` awaiting GROUP-COMPLETE acks.
    pub cbf_fp_bound: f64,
    /// done, aborted or timeout ("not all done" if any repeat was not done).
    pub outcome: &'static str,
    /// Migration time.
    pub migration_ms: u64,
    /// Time the shard took no queries (stop-and-copy's pause).
    pub pause_ms: u64,
    /// Operations per second while migrating.
    pub avg_ops_per_s_migrating: f64,
    /// Operations per second over the whole run.
    pub avg_ops_per_s: f64,
    /// Mean of the per-interval medians while migrating (the paper's "average median").
    pub p50_us_migrating: f64,
    /// Mean of the per-interval 99th percentiles while migrating.
    pub p99_us_migrating: f64,
    /// Operations completed.
    pub ops: u64,
    /// Operations that failed, summed over every repeat.
    pub failed_ops: u64,
    /// Acknowledged writes lost, summed over every repeat.
    pub lost_ops: u64,
    /// Keys whose client history was not linearizable, summed over every repeat.
    pub violations: u64,
    /// Keys in the checked sample (every key by default; see `history_stopped_ms`).
    pub history_keys_sampled: u64,
    /// Keys whose history was checked, and their operations (this run).
    pub history_keys_checked: u64,
    /// Operations in the checked histories (this run).
    pub history_ops_checked: u64,
    /// Keys the checker could not decide, summed over every repeat (never counted as a pass).
    pub history_keys_unchecked: u64,
    /// When recording stopped at its memory bound, ms into the run (this run), if it did.
    pub history_stopped_ms: Option<u64>,
    /// Client-side extra bytes / all client-side bytes, percent.
    pub client_extra_pct: f64,
    /// Server-side extra bytes / all server-to-server bytes, percent.
    pub server_extra_pct: f64,
    /// Client-side bytes, double reads included.
    pub client_bytes: u64,
    /// Client-side extra bytes (double reads).
    pub client_extra_bytes: u64,
    /// Server-to-server data bytes.
    pub server_data_bytes: u64,
    /// Server-to-server extra bytes (pulls, late writes, control).
    pub server_extra_bytes: u64,
    /// Reads the router sent to both servers.
    pub double_reads: u64,
    /// A fault injected on purpose (`--fault-skip-double-read`), if any: this row is not a
    /// measurement of the protocol but a check that the history checker catches the fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<&'static str>,
    /// Queries the router sent to the destination.
    pub to_destination: u64,
    /// Writes kept at the destination once there (sticky).
    pub sticky_writes: u64,
    /// Seconds the run took, load included.
    pub wall_s: f64,
    /// Every run's throughput during migration (round-robin order).
    pub repeat_ops_per_s_migrating: Vec<f64>,
    /// Every run's migration time.
    pub repeat_migration_ms: Vec<u64>,
    /// Every run's mean p50 during migration.
    pub repeat_p50_us_migrating: Vec<f64>,
    /// Every run's mean p99 during migration.
    pub repeat_p99_us_migrating: Vec<f64>,
    /// Migration start in the timeline (`overall`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration_start_ms: Option<u64>,
    /// Migration end in the timeline (`overall`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration_end_ms: Option<u64>,
    /// Throughput and latency per interval (`overall`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<IntervalStats>>,
}

/// What a row's `fault` says under `--fault-skip-double-read`.
pub const FAULT_SKIP_DOUBLE_READ: &str =
    "the router sent S2/S4 double reads to the source only (injected)";

/// YCSB's `CoreWorkload` for one client: one uniform stream draws the read/write choice, then
/// the key from a scrambled Zipfian over `records + 1` items, drawing again past the last record.
/// With `read_back`, every write is followed by a read of its key (not drawn from the stream):
/// a write during its group's S2 goes to the destination, and the read right behind it, while
/// the group is still in S2, is what a skipped double read answers stale.
fn chooser(records: u64, write_ratio: f64, read_back: bool) -> Result<OpChooser> {
    // Checked once here, so that every client's generator below is valid.
    Workload::with_write_ratio(write_ratio)?.generator(records)?;
    Ok(Arc::new(move |_client, seed| {
        let mut ops = Workload::with_write_ratio(write_ratio)
            .and_then(|w| w.generator(records))
            .expect("checked when the chooser was made");
        let mut uniform = FastUniform::new(seed);
        let mut written = None;
        Box::new(move || {
            if let Some(key) = written.take() {
                return Draw { key, write: false };
            }
            match ops.next(&mut uniform) {
                Op::Read(key) => Draw { key, write: false },
                Op::Update(key) => {
                    written = read_back.then_some(key);
                    Draw { key, write: true }
                }
            }
        })
    }))
}

/// Bloom filter false-positive bound: (1 - e^(-k n / m))^k.
fn bloom_fp(entries: f64, items: f64) -> f64 {
    let k = locus_kvmigrate::filter::HASHES as f64;
    (1.0 - (-k * items / entries).exp()).powf(k)
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

pub(super) fn run_case(s: &RunSettings, c: &Case, keep_timeline: bool) -> Result<Row> {
    let in_case = |e: locus_kvmigrate::Error| BenchError::from(e).in_scheme(&c.label);
    let geometry = Geometry::new(s.buckets_log2, c.group_buckets_log2).map_err(in_case)?;
    let mut server = ServerConfig::new(0, 0, geometry);
    server.mirror_writes = c.mirror_writes;
    server.ack_timeout_us = s.ack_timeout_us;
    let cfg = MeasureConfig {
        protocol: c.protocol,
        clients: s.clients,
        write_ratio: c.write_ratio,
        keys: s.records,
        value_bytes: s.value_bytes,
        geometry,
        router: RouterConfig {
            bf_bytes: c.bf_bytes,
            cbf_bytes: c.cbf_bytes,
            fault_double_read_source_only: s.fault_skip_double_read,
            ..RouterConfig::default()
        },
        server: server.clone(),
        source_budget: CpuBudget {
            query_pct: c.source_budget_pct,
            ..CpuBudget::default()
        },
        destination_budget: CpuBudget::default(),
        interval_ms: s.interval_ms,
        warmup_ms: s.warmup_ms,
        cooldown_ms: s.cooldown_ms,
        migration_timeout_ms: s.migration_timeout_ms,
        op_timeout_ms: s.op_timeout_ms,
        seed: s.seed,
        history: HistoryConfig::default(),
    };
    let t = Instant::now();
    let choose = chooser(s.records, c.write_ratio, s.read_back_writes)?;
    let r = match &s.redis_server {
        None => measure(&cfg, choose),
        Some(bin) if c.redis_cluster => {
            locus_kvmigrate::redis::measure_redis_cluster(&cfg, choose, bin)
        }
        Some(bin) => locus_kvmigrate::redis::measure_redis(&cfg, choose, bin),
    }
    .map_err(in_case)?;
    Ok(row(
        s,
        c,
        &server,
        &r,
        t.elapsed().as_secs_f64(),
        keep_timeline,
    ))
}

fn row(
    s: &RunSettings,
    c: &Case,
    server: &ServerConfig,
    r: &MeasureReport,
    wall_s: f64,
    keep_timeline: bool,
) -> Row {
    let groups = s.groups(c.group_buckets_log2);
    // Bins overlapping the migration; a migration shorter than a bin still gets its bin.
    let (start, end) = (
        r.migration_start_ms,
        r.migration_end_ms.max(r.migration_start_ms + 1),
    );
    let during: Vec<&IntervalStats> = r
        .timeline
        .iter()
        .filter(|b| b.ops > 0 && b.start_ms < end && b.start_ms + s.interval_ms > start)
        .collect();
    let client_total = r.client_bytes + r.router.double_read_bytes;
    let server_total = r.server_data_bytes + r.server_extra_bytes;
    let outcome = match r.outcome {
        Outcome::Done => "done",
        Outcome::Aborted => "aborted",
        Outcome::Timeout => "timeout",
    };
    Row {
        label: c.label.clone(),
        protocol: if c.redis_cluster {
            "redis-cluster"
        } else {
            c.protocol.name()
        },
        mirror_writes: c.mirror_writes,
        write_ratio: c.write_ratio,
        source_budget_pct: c.source_budget_pct,
        bf_bytes: c.bf_bytes,
        cbf_bytes: c.cbf_bytes,
        groups,
        keys_per_group: s.records as f64 / groups as f64,
        bf_bits_per_group: c.bf_bytes as f64 * 8.0 / groups as f64,
        bf_fp_bound: bloom_fp(c.bf_bytes as f64 * 8.0, groups as f64),
        cbf_fp_bound: bloom_fp(
            c.cbf_bytes as f64,
            (server.groups_inflight_max + server.completing_max) as f64,
        ),
        outcome,
        migration_ms: r.migration_ms,
        pause_ms: r.pause_ms,
        avg_ops_per_s_migrating: r.avg_ops_per_s_migrating,
        avg_ops_per_s: r.avg_ops_per_s,
        p50_us_migrating: mean(during.iter().map(|b| b.p50_us as f64)),
        p99_us_migrating: mean(during.iter().map(|b| b.p99_us as f64)),
        ops: r.ops,
        failed_ops: r.failed_ops,
        lost_ops: r.lost_writes,
        violations: r.violations,
        history_keys_sampled: r.history.keys_sampled,
        history_keys_checked: r.history.keys_checked,
        history_ops_checked: r.history.ops_checked,
        history_keys_unchecked: r.history.keys_unchecked,
        history_stopped_ms: r.history.recording_stopped_ms,
        client_extra_pct: 100.0 * r.client_extra_bytes as f64 / client_total.max(1) as f64,
        server_extra_pct: 100.0 * r.server_extra_bytes as f64 / server_total.max(1) as f64,
        client_bytes: client_total,
        client_extra_bytes: r.client_extra_bytes,
        server_data_bytes: r.server_data_bytes,
        server_extra_bytes: r.server_extra_bytes,
        double_reads: r.router.double_reads,
        fault: (s.fault_skip_double_read && !c.redis_cluster).then_some(FAULT_SKIP_DOUBLE_READ),
        to_destination: r.router.to_destination,
        sticky_writes: r.router.sticky_writes,
        wall_s,
        repeat_ops_per_s_migrating: Vec::new(),
        repeat_migration_ms: Vec::new(),
        repeat_p50_us_migrating: Vec::new(),
        repeat_p99_us_migrating: Vec::new(),
        migration_start_ms: keep_timeline.then_some(r.migration_start_ms),
        migration_end_ms: keep_timeline.then_some(r.migration_end_ms),
        timeline: keep_timeline.then(|| r.timeline.clone()),
    }
}

/// Runs every case `s.repeat` times round-robin (so interference from other processes spreads
/// over all of them), reporting each run; keeps each case's median-throughput run.
pub(super) fn run_all(
    s: &RunSettings,
    cases: &[Case],
    keep_timeline: bool,
    reporter: &Reporter,
) -> Result<Vec<Row>> {
    let mut runs: Vec<Vec<Row>> = vec![Vec::new(); cases.len()];
    let t = Instant::now();
    let total = cases.len() * s.repeat;
    for round in 0..s.repeat {
        for (i, c) in cases.iter().enumerate() {
            let case = format!(
                "[{}/{total}] {:<22} writes {:>3.0}% source budget {:>3}% bf {:>7} B cbf {:>7} B groups {:>7} ... ",
                round * cases.len() + i + 1,
                c.label,
                c.write_ratio * 100.0,
                c.source_budget_pct,
                c.bf_bytes,
                c.cbf_bytes,
                s.groups(c.group_buckets_log2),
            );
            let r = run_case(s, c, keep_timeline)?;
            reporter.note(format_args!(
                "{case}{:>9.0} ops/s migrating, p50 {:>6.0} us, migration {:>6} ms ({}), failed {} lost {} violations {} ({} keys, {} ops checked, {} undecided), {:.1} s, {:.0} s total",
                r.avg_ops_per_s_migrating,
                r.p50_us_migrating,
                r.migration_ms,
                r.outcome,
                r.failed_ops,
                r.lost_ops,
                r.violations,
                r.history_keys_checked,
                r.history_ops_checked,
                r.history_keys_unchecked,
                r.wall_s,
                t.elapsed().as_secs_f64()
            ));
            runs[i].push(r);
        }
    }
    Ok(runs.into_iter().map(median_run).collect())
}

/// The run with the median throughput during migration, carrying every run's figures. Failed
/// and lost operations, violations and undecided keys are summed over all runs, so none can hide in a discarded run.
fn median_run(mut runs: Vec<Row>) -> Row {
    let ops: Vec<f64> = runs.iter().map(|r| r.avg_ops_per_s_migrating).collect();
    let times: Vec<u64> = runs.iter().map(|r| r.migration_ms).collect();
    let p50s: Vec<f64> = runs.iter().map(|r| r.p50_us_migrating).collect();
    let p99s: Vec<f64> = runs.iter().map(|r| r.p99_us_migrating).collect();
    let failed = runs.iter().map(|r| r.failed_ops).sum();
    let lost = runs.iter().map(|r| r.lost_ops).sum();
    let violations = runs.iter().map(|r| r.violations).sum();
    let unchecked = runs.iter().map(|r| r.history_keys_unchecked).sum();
    let worst = if runs.iter().all(|r| r.outcome == "done") {
        "done"
    } else {
        "not all done"
    };
    runs.sort_by(|a, b| {
        a.avg_ops_per_s_migrating
            .total_cmp(&b.avg_ops_per_s_migrating)
    });
    let mut m = runs.swap_remove(runs.len() / 2);
    m.repeat_ops_per_s_migrating = ops;
    m.repeat_migration_ms = times;
    m.repeat_p50_us_migrating = p50s;
    m.repeat_p99_us_migrating = p99s;
    m.failed_ops = failed;
    m.lost_ops = lost;
    m.violations = violations;
    m.history_keys_unchecked = unchecked;
    if worst != "done" {
        m.outcome = worst;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_bound_matches_the_paper_scale() {
        // 32 bits per element, 4 hashes: about 0.0006 (the paper's table reports combined bounds).
        let fp = bloom_fp(32.0 * 1000.0, 1000.0);
        assert!(fp > 0.0001 && fp < 0.001, "{fp}");
        assert!(bloom_fp(8.0, 1000.0) > 0.99);
    }

    /// A model of YCSB's `doTransaction` written from its description: one draw picks READ or
    /// UPDATE, then scrambled-Zipfian draws over `records + 1` items until one is a record.
    #[test]
    fn the_driver_draws_as_ycsb_one_stream_op_then_key_with_rejection() {
        use locus_workloads::ycsb::{ScrambledZipfian, UniformSource};
        let (records, write_ratio, seed) = (3, 0.25, 42);
        let mut drawn = chooser(records, write_ratio, false).unwrap()(0, seed);
        let mut u = FastUniform::new(seed);
        let mut zipf = ScrambledZipfian::with_range(0, records).unwrap();
        let mut rejected = 0;
        for _ in 0..10_000 {
            let write = u.next_f64() >= 1.0 - write_ratio;
            let key = loop {
                let k = zipf.next(&mut u);
                if k < records {
                    break k;
                }
                rejected += 1;
            };
            assert_eq!(drawn(), Draw { key, write });
        }
        assert!(rejected > 0, "item `records` was drawn and rejected");
        assert!(chooser(0, 0.5, false).is_err(), "no records");
        assert!(chooser(10, 1.5, false).is_err(), "a ratio past 1");
    }

    #[test]
    fn read_back_follows_every_write_with_a_read_of_its_key_and_draws_the_rest_as_ycsb() {
        let (records, write_ratio, seed) = (100, 0.3, 7);
        let mut plain = chooser(records, write_ratio, false).unwrap()(0, seed);
        let mut back = chooser(records, write_ratio, true).unwrap()(0, seed);
        let mut writes = 0;
        for _ in 0..1000 {
            let d = plain();
            assert_eq!(back(), d);
            if d.write {
                writes += 1;
                assert_eq!(
                    back(),
                    Draw {
                        key: d.key,
                        write: false
                    }
                );
            }
        }
        assert!(writes > 0);
    }
}
