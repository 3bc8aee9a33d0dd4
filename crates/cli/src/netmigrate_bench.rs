//! `locus bench netmigrate <experiment>`: NetMigrate's evaluation (section 6) on the
//! `locus-kvmigrate` runtime: one router thread and two server threads in this process over
//! the in-process transport, closed-loop clients issuing YCSB queries (scrambled Zipfian 0.99,
//! 4-byte key space, 64-byte values) while shard 1 moves from server 1 to server 2.
//!
//! - `overall` (Figs. 4-6): every protocol under YCSB-B (5% writes), source budget 100%, and
//!   NetMigrate at its three policies (long 100%, medium 70%, short 40% source budget);
//!   throughput, p50 and p99 timelines.
//! - `filters` (Table 2): BF and CBF sizes, scaled to this run's group count by bits per group.
//! - `groups` (Table 3): keys per migration group.
//! - `bandwidth` (Table 4): client- and server-side extra bytes as a share of each side's total.
//! - `budgets` (Tables 5-7): write ratios 0/10/20/30% x source budgets 100/70/40%.
//!
//! Servers run with `mirror_writes = false` (the paper's protocol: the destination acks its
//! writes without copying them back to the source); NetMigrate with the crate's default
//! (mirrored writes, which keeps an aborted migration lossless) is its own row everywhere.
//! Every run uses the same seed, so protocols see the same key sequences.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use locus_kvmigrate::measure::{measure, IntervalStats, KeyChooser, MeasureConfig, MeasureReport};
use locus_kvmigrate::router::RouterConfig;
use locus_kvmigrate::runtime::CpuBudget;
use locus_kvmigrate::{Geometry, MigrationPhase, Protocol, ServerConfig};
use locus_plot::{BarChart, LineChart, Series};
use locus_workloads::ycsb::{FastUniform, ScrambledZipfian, Workload};
use serde::Serialize;

/// Records, at most (the source table's memory and load time).
const RECORDS_MAX: u64 = 1 << 26;
/// Records, at least (enough keys for the smallest geometry).
const RECORDS_MIN: u64 = 256;
/// Closed-loop client threads, at most.
const CLIENTS_MAX: u16 = 64;
/// Timeline bin width bounds.
const INTERVAL_MS_MAX: u64 = 10_000;
/// Warm-up and cool-down bound.
const PHASE_MS_MAX: u64 = 60_000;
/// A migration that takes longer is reported as timed out (a loaded machine must not make a
/// slow migration an abort, so the server's ack timeout is as long).
const MIGRATION_TIMEOUT_MS: u64 = 600_000;
/// A client gives up on one query after this long (reported as a failed op).
const OP_TIMEOUT_MS: u64 = 30_000;
/// Keys per migration group by default (the paper's 2048 at 2^28 keys is coarse at our sizes;
/// Table 3 shows small groups cost nothing).
const GROUP_BUCKETS_LOG2_DEFAULT: u8 = 4;
/// The paper's default filters (6.1).
const BF_BYTES_DEFAULT: usize = 512 << 10;
const CBF_BYTES_DEFAULT: usize = 1024 << 10;
/// Runs per configuration, at most.
const REPEAT_MAX: usize = 20;
/// Zipf constant of YCSB's scrambled Zipfian (fixed by the generator).
const ZIPF_THETA: f64 = 0.99;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
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

impl Experiment {
    fn name(self) -> &'static str {
        match self {
            Experiment::Overall => "overall",
            Experiment::Filters => "filters",
            Experiment::Groups => "groups",
            Experiment::Bandwidth => "bandwidth",
            Experiment::Budgets => "budgets",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Small shard, a few minutes per experiment on 2 cores.
    Quick,
    /// Larger shard and longer phases.
    Full,
}

/// Where the migrating shard's pairs live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The built-in in-memory KV server.
    Builtin,
    /// Two stock `redis-server` processes on loopback, each behind its migration agent
    /// (ordinary commands only; `locus_kvmigrate::redis`).
    Redis,
}

#[derive(Args, Debug)]
pub struct NetmigrateArgs {
    /// Which experiment.
    pub experiment: Experiment,
    /// builtin (the in-memory KV server) or redis (two private redis-server processes).
    #[arg(long, value_enum, default_value = "builtin")]
    pub backend: Backend,
    /// The redis-server binary for `--backend redis` (default: found on PATH).
    #[arg(long, value_name = "PATH")]
    pub redis_server: Option<PathBuf>,
    /// quick (minutes on 2 cores) or full (larger shard).
    #[arg(long, value_enum, default_value = "quick")]
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
}

/// Everything a run depends on (written to the .meta.json).
#[derive(Clone, Debug, Serialize)]
struct Settings {
    preset: Preset,
    records: u64,
    key_bytes: usize,
    key_note: &'static str,
    value_bytes: usize,
    clients: u16,
    distribution: &'static str,
    zipf_theta: f64,
    buckets_log2: u8,
    group_buckets_log2: u8,
    bf_bytes: usize,
    cbf_bytes: usize,
    interval_ms: u64,
    warmup_ms: u64,
    cooldown_ms: u64,
    seed: u64,
    mirror_writes: bool,
    mirror_note: &'static str,
    ack_timeout_us: u64,
    op_timeout_ms: u64,
    migration_timeout_ms: u64,
    repeat: usize,
    repeat_note: &'static str,
    transport: &'static str,
    backend: Backend,
    #[serde(skip)]
    redis_server: Option<PathBuf>,
}

impl Settings {
    fn resolve(a: &NetmigrateArgs) -> Result<Self, String> {
        // Measured on 2 vCPUs: a 2^20-key shard migrates in about 1-2.5 s, a run with its
        // load, warm-up and cool-down takes about 3-4 s; `overall` has 8 runs, the sweeps 7-9,
        // the write-ratio x budget matrix 60, so the matrix gets the smaller shard.
        let big = a.experiment == Experiment::Overall;
        let (records, clients, phase_ms, interval_ms) = match (a.preset, big) {
            (Preset::Quick, true) => (1u64 << 20, 4u16, 500u64, 100u64),
            (Preset::Quick, false) => (1 << 19, 4, 300, 50),
            (Preset::Full, true) => (1 << 22, 8, 1000, 200),
            (Preset::Full, false) => (1 << 21, 8, 500, 100),
        };
        // Over Redis every pair is loaded and migrated through RESP round trips (about 40k
        // pairs/s here): a 16x smaller shard keeps a run within seconds.
        let records = if a.backend == Backend::Redis {
            records >> 4
        } else {
            records
        };
        let redis_server = match a.backend {
            Backend::Builtin => None,
            Backend::Redis => Some(match &a.redis_server {
                Some(p) if p.is_file() => p.clone(),
                Some(p) => {
                    return Err(format!(
                        "--redis-server {}: no such file",
                        p.display()
                    ))
                }
                None => find_on_path("redis-server").ok_or(
                    "--backend redis: redis-server is not on PATH; install it (Debian: apt-get install -y redis-server) or pass --redis-server PATH",
                )?,
            }),
        };
        let records = a.records.unwrap_or(records);
        if !(RECORDS_MIN..=RECORDS_MAX).contains(&records) {
            return Err(format!(
                "--records {records}: must be in {RECORDS_MIN}..={RECORDS_MAX}"
            ));
        }
        let clients = a.clients.unwrap_or(clients);
        if clients == 0 || clients > CLIENTS_MAX {
            return Err(format!("--clients {clients}: must be in 1..={CLIENTS_MAX}"));
        }
        if !(16..=locus_kvmigrate::wire::VALUE_BYTES_MAX).contains(&a.value_bytes) {
            return Err(format!(
                "--value-bytes {}: must be in 16..={} (a writer id and counter are embedded)",
                a.value_bytes,
                locus_kvmigrate::wire::VALUE_BYTES_MAX
            ));
        }
        let phase_ms = a.phase_ms.unwrap_or(phase_ms);
        if phase_ms > PHASE_MS_MAX {
            return Err(format!(
                "--phase-ms {phase_ms}: must be at most {PHASE_MS_MAX}"
            ));
        }
        let interval_ms = a.interval_ms.unwrap_or(interval_ms);
        if interval_ms == 0 || interval_ms > INTERVAL_MS_MAX {
            return Err(format!(
                "--interval-ms {interval_ms}: must be in 1..={INTERVAL_MS_MAX}"
            ));
        }
        let matrix = matches!(a.experiment, Experiment::Bandwidth | Experiment::Budgets);
        let repeat = a.repeat.unwrap_or(if matrix && a.preset == Preset::Quick {
            1
        } else {
            3
        });
        if repeat == 0 || repeat > REPEAT_MAX {
            return Err(format!("--repeat {repeat}: must be in 1..={REPEAT_MAX}"));
        }
        // About one key per bucket, as the paper's table.
        let buckets_log2 = (64 - (records - 1).leading_zeros()) as u8;
        Ok(Self {
            preset: a.preset,
            records,
            key_bytes: 4,
            key_note: "keys are 0..records (a 4-byte key space); the wire carries them as u64",
            value_bytes: a.value_bytes,
            clients,
            distribution: "YCSB scrambled Zipfian",
            zipf_theta: ZIPF_THETA,
            buckets_log2,
            group_buckets_log2: GROUP_BUCKETS_LOG2_DEFAULT.min(buckets_log2),
            bf_bytes: BF_BYTES_DEFAULT,
            cbf_bytes: CBF_BYTES_DEFAULT,
            interval_ms,
            warmup_ms: phase_ms,
            cooldown_ms: phase_ms,
            seed: a.seed,
            mirror_writes: false,
            mirror_note: "rows labelled *-mirrored run with the crate default mirror_writes = true",
            ack_timeout_us: MIGRATION_TIMEOUT_MS * 1000,
            op_timeout_ms: OP_TIMEOUT_MS,
            migration_timeout_ms: MIGRATION_TIMEOUT_MS,
            repeat,
            repeat_note:
                "configurations run round-robin, repeat times; each row is the run with the \
                          median throughput during migration, repeat_* list every run",
            transport: match a.backend {
                Backend::Builtin => {
                    "in-process channels; router, 2 servers and the clients are threads of one process"
                }
                Backend::Redis => {
                    "in-process channels between router, agents and clients; each agent keeps its pairs in its own redis-server process on loopback (RESP)"
                }
            },
            backend: a.backend,
            redis_server,
        })
    }

    fn groups(&self, group_buckets_log2: u8) -> u64 {
        1u64 << (self.buckets_log2 - group_buckets_log2)
    }
}

/// One configuration to measure.
#[derive(Clone, Debug)]
struct Case {
    label: String,
    protocol: Protocol,
    mirror_writes: bool,
    write_ratio: f64,
    source_budget_pct: u8,
    bf_bytes: usize,
    cbf_bytes: usize,
    group_buckets_log2: u8,
}

impl Case {
    fn new(s: &Settings, protocol: Protocol, write_ratio: f64, source_budget_pct: u8) -> Self {
        Self {
            label: protocol.name().to_string(),
            protocol,
            mirror_writes: s.mirror_writes,
            write_ratio,
            source_budget_pct,
            bf_bytes: s.bf_bytes,
            cbf_bytes: s.cbf_bytes,
            group_buckets_log2: s.group_buckets_log2,
        }
    }

    fn mirrored(mut self) -> Self {
        self.mirror_writes = true;
        self.label = format!("{}-mirrored", self.label);
        self
    }

    fn labelled(mut self, label: &str) -> Self {
        self.label = label.to_string();
        self
    }
}

/// One measured configuration.
#[derive(Clone, Debug, Serialize)]
struct Row {
    label: String,
    protocol: &'static str,
    mirror_writes: bool,
    write_ratio: f64,
    source_budget_pct: u8,
    bf_bytes: usize,
    cbf_bytes: usize,
    groups: u64,
    keys_per_group: f64,
    /// Filters' bits per group (Table 2's "Bits/Ele" counts BF bits only, per group).
    bf_bits_per_group: f64,
    /// Upper bound of a BF false positive with every group inserted (4 hashes).
    bf_fp_bound: f64,
    /// Upper bound of a CBF false positive with `groups_inflight_max` groups migrating.
    cbf_fp_bound: f64,
    /// done, aborted or timeout.
    outcome: &'static str,
    migration_ms: u64,
    pause_ms: u64,
    avg_ops_per_s_migrating: f64,
    avg_ops_per_s: f64,
    /// Mean of the per-interval medians while migrating (the paper's "average median").
    p50_us_migrating: f64,
    /// Mean of the per-interval 99th percentiles while migrating.
    p99_us_migrating: f64,
    ops: u64,
    failed_ops: u64,
    lost_ops: u64,
    /// Client-side extra bytes / all client-side bytes, percent.
    client_extra_pct: f64,
    /// Server-side extra bytes / all server-to-server bytes, percent.
    server_extra_pct: f64,
    client_bytes: u64,
    client_extra_bytes: u64,
    server_data_bytes: u64,
    server_extra_bytes: u64,
    double_reads: u64,
    to_destination: u64,
    sticky_writes: u64,
    wall_s: f64,
    /// Every run's throughput during migration and migration time (round-robin order).
    repeat_ops_per_s_migrating: Vec<f64>,
    repeat_migration_ms: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    migration_start_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    migration_end_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeline: Option<Vec<IntervalStats>>,
}

fn chooser(records: u64) -> KeyChooser {
    Arc::new(move |_client, seed| {
        // ScrambledZipfian::new fails only for 0 items, and records >= RECORDS_MIN.
        let mut zipf = ScrambledZipfian::new(records).expect("records > 0 is validated");
        let mut uniform = FastUniform::new(seed);
        Box::new(move || zipf.next(&mut uniform))
    })
}

/// The first executable file called `name` in a directory of PATH.
fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
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

fn run_case(s: &Settings, c: &Case, keep_timeline: bool) -> Result<Row, String> {
    let geometry =
        Geometry::new(s.buckets_log2, c.group_buckets_log2).map_err(|e| e.to_string())?;
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
    };
    let t = Instant::now();
    let r = match &s.redis_server {
        None => measure(&cfg, chooser(s.records)),
        Some(bin) => locus_kvmigrate::redis::measure_redis(&cfg, chooser(s.records), bin),
    }
    .map_err(|e| format!("{}: {e}", c.label))?;
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
    s: &Settings,
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
    let outcome = match r.status.as_ref().map(|st| st.phase) {
        Some(MigrationPhase::Done) => "done",
        Some(_) => "aborted",
        None => "timeout",
    };
    Row {
        label: c.label.clone(),
        protocol: c.protocol.name(),
        mirror_writes: c.mirror_writes,
        write_ratio: c.write_ratio,
        source_budget_pct: c.source_budget_pct,
        bf_bytes: c.bf_bytes,
        cbf_bytes: c.cbf_bytes,
        groups,
        keys_per_group: s.records as f64 / groups as f64,
        bf_bits_per_group: c.bf_bytes as f64 * 8.0 / groups as f64,
        bf_fp_bound: bloom_fp(c.bf_bytes as f64 * 8.0, groups as f64),
        cbf_fp_bound: bloom_fp(c.cbf_bytes as f64, server.groups_inflight_max as f64),
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
        client_extra_pct: 100.0 * r.client_extra_bytes as f64 / client_total.max(1) as f64,
        server_extra_pct: 100.0 * r.server_extra_bytes as f64 / server_total.max(1) as f64,
        client_bytes: client_total,
        client_extra_bytes: r.client_extra_bytes,
        server_data_bytes: r.server_data_bytes,
        server_extra_bytes: r.server_extra_bytes,
        double_reads: r.router.double_reads,
        to_destination: r.router.to_destination,
        sticky_writes: r.router.sticky_writes,
        wall_s,
        repeat_ops_per_s_migrating: Vec::new(),
        repeat_migration_ms: Vec::new(),
        migration_start_ms: keep_timeline.then_some(r.migration_start_ms),
        migration_end_ms: keep_timeline.then_some(r.migration_end_ms),
        timeline: keep_timeline.then(|| r.timeline.clone()),
    }
}

/// Runs every case `s.repeat` times round-robin (so interference from other processes spreads
/// over all of them), printing progress on stderr; keeps each case's median-throughput run.
fn run_all(s: &Settings, cases: &[Case], keep_timeline: bool) -> Result<Vec<Row>, String> {
    let mut runs: Vec<Vec<Row>> = vec![Vec::new(); cases.len()];
    let t = Instant::now();
    let total = cases.len() * s.repeat;
    for round in 0..s.repeat {
        for (i, c) in cases.iter().enumerate() {
            eprint!(
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
            eprintln!(
                "{:>9.0} ops/s migrating, p50 {:>6.0} us, migration {:>6} ms ({}), {:.1} s, {:.0} s total",
                r.avg_ops_per_s_migrating,
                r.p50_us_migrating,
                r.migration_ms,
                r.outcome,
                r.wall_s,
                t.elapsed().as_secs_f64()
            );
            runs[i].push(r);
        }
    }
    Ok(runs.into_iter().map(median_run).collect())
}

/// The run with the median throughput during migration, carrying every run's figures. Failed
/// and lost operations are summed over all runs, so none can hide in a discarded run.
fn median_run(mut runs: Vec<Row>) -> Row {
    let ops: Vec<f64> = runs.iter().map(|r| r.avg_ops_per_s_migrating).collect();
    let times: Vec<u64> = runs.iter().map(|r| r.migration_ms).collect();
    let failed = runs.iter().map(|r| r.failed_ops).sum();
    let lost = runs.iter().map(|r| r.lost_ops).sum();
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
    m.failed_ops = failed;
    m.lost_ops = lost;
    if worst != "done" {
        m.outcome = worst;
    }
    m
}

const WRITE_RATIOS: [f64; 4] = [0.0, 0.1, 0.2, 0.3];
const BUDGETS_PCT: [u8; 3] = [100, 70, 40];

/// The protocols of Tables 4-7 plus mirrored NetMigrate.
fn matrix_cases(s: &Settings) -> Vec<Case> {
    let mut cases = Vec::new();
    for &w in &WRITE_RATIOS {
        for &b in &BUDGETS_PCT {
            for p in [
                Protocol::SourceBased,
                Protocol::Rocksteady,
                Protocol::Fulva,
                Protocol::NetMigrate,
            ] {
                cases.push(Case::new(s, p, w, b));
            }
            cases.push(Case::new(s, Protocol::NetMigrate, w, b).mirrored());
        }
    }
    cases
}

fn ycsb_b_write_ratio() -> f64 {
    Workload::b().update_proportion
}

fn overall_cases(s: &Settings) -> Vec<Case> {
    let w = ycsb_b_write_ratio();
    let mut cases = vec![
        Case::new(s, Protocol::NetMigrate, w, 100).labelled("netmigrate-long"),
        Case::new(s, Protocol::NetMigrate, w, 70).labelled("netmigrate-medium"),
        Case::new(s, Protocol::NetMigrate, w, 40).labelled("netmigrate-short"),
        Case::new(s, Protocol::NetMigrate, w, 100).mirrored(),
    ];
    for p in [
        Protocol::StopAndCopy,
        Protocol::SourceBased,
        Protocol::Rocksteady,
        Protocol::Fulva,
    ] {
        cases.push(Case::new(s, p, w, 100));
    }
    cases
}

/// Table 2's settings: CBF sweep at 32 bits per group, then BF sweep at a 64-byte CBF. The
/// paper's byte sizes are for 2^17 groups; the BF is scaled to keep its bits per group, the CBF
/// (which holds only the groups in flight) keeps its size.
fn filter_cases(s: &Settings) -> Vec<Case> {
    let groups = s.groups(s.group_buckets_log2) as usize;
    let bf_for = |bits: usize| (groups * bits / 8).max(1);
    let w = ycsb_b_write_ratio();
    let mut settings = Vec::new();
    for cbf in [128, 64, 32, 16] {
        settings.push((bf_for(32), cbf));
    }
    for bits in [16, 8, 4, 2, 1] {
        settings.push((bf_for(bits), 64));
    }
    settings
        .into_iter()
        .map(|(bf, cbf)| {
            let mut c = Case::new(s, Protocol::NetMigrate, w, 100);
            c.bf_bytes = bf;
            c.cbf_bytes = cbf;
            c.label = format!("bf {bf} B, cbf {cbf} B");
            c
        })
        .collect()
}

/// Table 3: keys per group from 1 to 2^12 (bounded by the table), 512 KB BF and 64 B CBF.
fn group_cases(s: &Settings) -> Vec<Case> {
    let w = ycsb_b_write_ratio();
    (0..=12u8)
        .step_by(2)
        .filter(|&g| g < s.buckets_log2)
        .map(|g| {
            let mut c = Case::new(s, Protocol::NetMigrate, w, 100);
            c.group_buckets_log2 = g;
            c.cbf_bytes = 64;
            c.label = format!("{} keys/group", s.records >> (s.buckets_log2 - g).min(63));
            c
        })
        .collect()
}

#[derive(Serialize)]
struct Output {
    experiment: &'static str,
    rows: Vec<Row>,
    derived: serde_json::Value,
}

#[derive(Serialize)]
struct Meta {
    experiment: &'static str,
    command: String,
    settings: Settings,
    machine: Machine,
    wall_s: f64,
}

#[derive(Serialize)]
struct Machine {
    cores: usize,
    arch: &'static str,
    os: &'static str,
    loadavg_before: String,
    loadavg_after: String,
    note: &'static str,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unavailable".into())
}

pub fn run(a: NetmigrateArgs) -> Result<(), String> {
    let s = Settings::resolve(&a)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create --out {}: {e}", dir.display()))?;
    }
    let loadavg_before = loadavg();
    let t = Instant::now();
    eprintln!(
        "netmigrate {} ({:?} backend): {} records, {} clients, value {} B, {} groups, seed {}",
        a.experiment.name(),
        a.backend,
        s.records,
        s.clients,
        s.value_bytes,
        s.groups(s.group_buckets_log2),
        s.seed
    );
    let (rows, derived) = match a.experiment {
        Experiment::Overall => {
            let rows = run_all(&s, &overall_cases(&s), true)?;
            let d = overall_derived(&rows);
            (rows, d)
        }
        Experiment::Filters => (
            run_all(&s, &filter_cases(&s), false)?,
            serde_json::Value::Null,
        ),
        Experiment::Groups => (
            run_all(&s, &group_cases(&s), false)?,
            serde_json::Value::Null,
        ),
        Experiment::Bandwidth | Experiment::Budgets => {
            let rows = run_all(&s, &matrix_cases(&s), false)?;
            let d = matrix_derived(&rows);
            (rows, d)
        }
    };
    let out = Output {
        experiment: a.experiment.name(),
        rows,
        derived,
    };
    let meta = Meta {
        experiment: a.experiment.name(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        settings: s.clone(),
        machine: Machine {
            cores: crate::analytics::cores(),
            arch: std::env::consts::ARCH,
            os: std::env::consts::OS,
            loadavg_before,
            loadavg_after: loadavg(),
            note: "every node is a thread of this process: servers, router and clients share the cores, \
                   so a source CPU budget limits the source thread's share, not a dedicated server",
        },
        wall_s: t.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?;
    if let Some(dir) = &a.out {
        let base = match a.backend {
            Backend::Builtin => format!("netmigrate-{}", a.experiment.name()),
            Backend::Redis => format!("netmigrate-{}-redis", a.experiment.name()),
        };
        write(&dir.join(format!("{base}.json")), &json)?;
        let meta_json = serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?;
        write(&dir.join(format!("{base}.meta.json")), &meta_json)?;
        for png in plot(a.experiment, &out.rows, dir, &base)? {
            eprintln!("wrote {}", png.display());
        }
    }
    if a.json {
        println!("{json}");
    } else {
        print_table(&out.rows);
        if !out.derived.is_null() {
            println!(
                "{}",
                serde_json::to_string_pretty(&out.derived).map_err(|e| e.to_string())?
            );
        }
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<24} {:>6} {:>7} {:>12} {:>9} {:>9} {:>10} {:>7} {:>6} {:>8} {:>8}",
        "configuration",
        "writes",
        "budget",
        "ops/s(migr)",
        "p50(us)",
        "p99(us)",
        "migr(ms)",
        "failed",
        "lost",
        "C-extra%",
        "S-extra%"
    );
    for r in rows {
        println!(
            "{:<24} {:>5.0}% {:>6}% {:>12.0} {:>9.0} {:>9.0} {:>10} {:>7} {:>6} {:>8.4} {:>8.4}",
            r.label,
            r.write_ratio * 100.0,
            r.source_budget_pct,
            r.avg_ops_per_s_migrating,
            r.p50_us_migrating,
            r.p99_us_migrating,
            r.migration_ms,
            r.failed_ops,
            r.lost_ops,
            r.client_extra_pct,
            r.server_extra_pct
        );
    }
}

fn pct_gain(ours: f64, theirs: f64) -> f64 {
    if theirs > 0.0 {
        100.0 * (ours / theirs - 1.0)
    } else {
        f64::INFINITY
    }
}

/// Per baseline: the NetMigrate policy (unmirrored) with the closest migration time, and how
/// its throughput and median latency compare (the targets).
fn overall_derived(rows: &[Row]) -> serde_json::Value {
    let nm: Vec<&Row> = rows
        .iter()
        .filter(|r| r.protocol == "netmigrate" && !r.mirror_writes)
        .collect();
    let mut cmp = Vec::new();
    for b in rows.iter().filter(|r| r.protocol != "netmigrate") {
        let Some(n) = nm
            .iter()
            .min_by_key(|n| n.migration_ms.abs_diff(b.migration_ms))
        else {
            continue;
        };
        cmp.push(serde_json::json!({
            "baseline": b.label,
            "baseline_migration_ms": b.migration_ms,
            "netmigrate": n.label,
            "netmigrate_migration_ms": n.migration_ms,
            "throughput_gain_pct": finite(pct_gain(n.avg_ops_per_s_migrating, b.avg_ops_per_s_migrating)),
            "p50_reduction_pct": finite(100.0 * (1.0 - n.p50_us_migrating / b.p50_us_migrating.max(1e-9))),
            "throughput_above": n.avg_ops_per_s_migrating > b.avg_ops_per_s_migrating,
            "p50_below": n.p50_us_migrating < b.p50_us_migrating,
        }));
    }
    serde_json::json!({
        "closest_migration_time": cmp,
        "netmigrate_client_extra_pct_max": nm.iter().map(|r| r.client_extra_pct).fold(0.0, f64::max),
        "failed_ops_total": rows.iter().map(|r| r.failed_ops).sum::<u64>(),
        "lost_ops_total": rows.iter().map(|r| r.lost_ops).sum::<u64>(),
    })
}

/// JSON has no infinity; an infinite gain (a baseline at zero) is written as null.
fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else {
        serde_json::Value::Null
    }
}

/// Per (write ratio, budget): NetMigrate's throughput gain over each baseline.
fn matrix_derived(rows: &[Row]) -> serde_json::Value {
    let mut cells = Vec::new();
    for &w in &WRITE_RATIOS {
        for &b in &BUDGETS_PCT {
            let cell: Vec<&Row> = rows
                .iter()
                .filter(|r| r.write_ratio == w && r.source_budget_pct == b)
                .collect();
            let Some(nm) = cell.iter().find(|r| r.label == "netmigrate") else {
                continue;
            };
            let gains: serde_json::Map<String, serde_json::Value> = cell
                .iter()
                .filter(|r| r.protocol != "netmigrate")
                .map(|r| {
                    (
                        r.label.clone(),
                        finite(pct_gain(
                            nm.avg_ops_per_s_migrating,
                            r.avg_ops_per_s_migrating,
                        )),
                    )
                })
                .collect();
            cells.push(serde_json::json!({
                "write_ratio": w,
                "source_budget_pct": b,
                "netmigrate_throughput_gain_pct": gains,
            }));
        }
    }
    serde_json::json!({ "cells": cells })
}

/// A plotted figure of a row.
type RowMetric = fn(&Row) -> f64;

fn plot(exp: Experiment, rows: &[Row], dir: &Path, base: &str) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    let mut out = |name: &str| {
        let p = dir.join(format!("{base}-{name}.png"));
        written.push(p.clone());
        p
    };
    match exp {
        Experiment::Overall => {
            type Metric = fn(&IntervalStats) -> f64;
            let metrics: [(&str, &str, &str, Metric); 3] = [
                (
                    "throughput",
                    "Fig. 4: throughput during migration (YCSB-B)",
                    "K ops/s",
                    |b| b.ops_per_s / 1000.0,
                ),
                ("p50", "Fig. 5: median latency (YCSB-B)", "p50 (us)", |b| {
                    b.p50_us as f64
                }),
                (
                    "p99",
                    "Fig. 6: 99th percentile latency (YCSB-B)",
                    "p99 (us)",
                    |b| b.p99_us as f64,
                ),
            ];
            for (name, title, y, f) in metrics {
                let series = rows
                    .iter()
                    .map(|r| Series {
                        label: format!("{} ({} ms)", r.label, r.migration_ms),
                        points: r
                            .timeline
                            .iter()
                            .flatten()
                            .filter(|b| b.ops > 0 || name == "throughput")
                            .map(|b| (b.start_ms as f64 / 1000.0, f(b)))
                            .collect(),
                    })
                    .collect();
                LineChart {
                    title: title.into(),
                    x_label: "time since load start (s); migration starts after the warm-up".into(),
                    y_label: y.into(),
                    x_log: false,
                    y_log: false,
                    series,
                }
                .write_png(&out(name))
                .map_err(|e| e.to_string())?;
            }
        }
        Experiment::Filters | Experiment::Groups => {
            let groups: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
            let (t2, t3) = if exp == Experiment::Filters {
                ("Table 2", "BF, CBF size")
            } else {
                ("Table 3", "group size")
            };
            let charts: [(&str, String, &str, RowMetric); 3] = [
                (
                    "throughput",
                    format!("{t2}: throughput during migration by {t3}"),
                    "K ops/s",
                    |r| r.avg_ops_per_s_migrating / 1000.0,
                ),
                (
                    "p99",
                    format!("{t2}: mean p99 during migration by {t3}"),
                    "p99 (us)",
                    |r| r.p99_us_migrating,
                ),
                (
                    "client-bw",
                    format!("{t2}: client-side extra bandwidth by {t3}"),
                    "% of client bytes",
                    |r| r.client_extra_pct,
                ),
            ];
            for (name, title, y, f) in charts {
                BarChart {
                    title,
                    y_label: y.into(),
                    groups: groups.clone(),
                    series: vec![("netmigrate".into(), rows.iter().map(f).collect())],
                }
                .write_png(&out(name))
                .map_err(|e| e.to_string())?;
            }
        }
        Experiment::Bandwidth | Experiment::Budgets => {
            let mut labels: Vec<String> = Vec::new();
            for r in rows {
                if !labels.contains(&r.label) {
                    labels.push(r.label.clone());
                }
            }
            let cells: Vec<(f64, u8)> = WRITE_RATIOS
                .iter()
                .flat_map(|&w| BUDGETS_PCT.iter().map(move |&b| (w, b)))
                .collect();
            let groups: Vec<String> = cells
                .iter()
                .map(|(w, b)| format!("w{:.0} b{b}", w * 100.0))
                .collect();
            let charts: Vec<(&str, &str, &str, RowMetric)> = if exp == Experiment::Bandwidth {
                vec![
                    (
                        "client",
                        "Table 4: client-side extra bandwidth (write % / source budget %)",
                        "% of client bytes",
                        |r| r.client_extra_pct,
                    ),
                    (
                        "server",
                        "Table 4: server-side extra bandwidth (write % / source budget %)",
                        "% of server bytes",
                        |r| r.server_extra_pct,
                    ),
                ]
            } else {
                vec![
                    (
                        "throughput",
                        "Table 5: throughput during migration (write % / source budget %)",
                        "K ops/s",
                        |r| r.avg_ops_per_s_migrating / 1000.0,
                    ),
                    (
                        "p50",
                        "Table 6: mean median latency during migration",
                        "p50 (us)",
                        |r| r.p50_us_migrating,
                    ),
                    (
                        "p99",
                        "Table 7: mean p99 latency during migration",
                        "p99 (us)",
                        |r| r.p99_us_migrating,
                    ),
                    (
                        "time",
                        "migration time (write % / source budget %)",
                        "ms",
                        |r| r.migration_ms as f64,
                    ),
                ]
            };
            for (name, title, y, f) in charts {
                let series = labels
                    .iter()
                    .map(|l| {
                        let vals = cells
                            .iter()
                            .map(|&(w, b)| {
                                rows.iter()
                                    .find(|r| {
                                        &r.label == l
                                            && r.write_ratio == w
                                            && r.source_budget_pct == b
                                    })
                                    .map_or(0.0, f)
                            })
                            .collect();
                        (l.clone(), vals)
                    })
                    .collect();
                BarChart {
                    title: title.into(),
                    y_label: y.into(),
                    groups: groups.clone(),
                    series,
                }
                .write_png(&out(name))
                .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(written)
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

    #[test]
    fn filter_cases_scale_the_bf_by_bits_per_group() {
        let a = NetmigrateArgs {
            experiment: Experiment::Filters,
            backend: Backend::Builtin,
            redis_server: None,
            preset: Preset::Quick,
            json: false,
            out: None,
            records: Some(1 << 12),
            clients: None,
            value_bytes: 64,
            seed: 1,
            repeat: None,
            phase_ms: None,
            interval_ms: None,
        };
        let s = Settings::resolve(&a).unwrap();
        let groups = s.groups(s.group_buckets_log2) as usize;
        let cases = filter_cases(&s);
        assert_eq!(cases.len(), 9);
        assert_eq!(cases[0].bf_bytes, groups * 4);
        assert_eq!(cases[8].bf_bytes, groups / 8);
    }
}
