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
//!
//! [`Settings::new`] turns an experiment, a [`Preset`] and a backend into the
//! run's sizes; callers override fields, and [`Settings::resolve`] validates
//! them (naming the flag) into the [`RunSettings`] the `.meta.json` records.

mod plots;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use locus_kvmigrate::measure::{measure, IntervalStats, KeyChooser, MeasureConfig, MeasureReport};
use locus_kvmigrate::router::RouterConfig;
use locus_kvmigrate::runtime::CpuBudget;
use locus_kvmigrate::{Geometry, MigrationPhase, Protocol, ServerConfig};
use locus_workloads::ycsb::{FastUniform, ScrambledZipfian, Workload};
use serde::Serialize;

use self::plots::plot;
use crate::output::{MachineMeta, OutDir};
use crate::{BenchError, Preset, Reporter, Result};

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
/// Value bytes by default (the paper's).
const VALUE_BYTES_DEFAULT: usize = 64;

/// The experiments of NetMigrate 6 (serialized as their names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
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
    /// The experiment's name on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Overall => "overall",
            Experiment::Filters => "filters",
            Experiment::Groups => "groups",
            Experiment::Bandwidth => "bandwidth",
            Experiment::Budgets => "budgets",
        }
    }
}

/// Where the migrating shard's pairs live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The built-in in-memory KV server.
    Builtin,
    /// Two stock `redis-server` processes on loopback, each behind its migration agent
    /// (ordinary commands only; `locus_kvmigrate::redis`).
    Redis,
}

/// What a run is asked to do, from [`Settings::new`] and overrides; checked
/// and completed by [`Settings::resolve`].
#[derive(Clone, Debug)]
pub struct Settings {
    /// The experiment.
    pub experiment: Experiment,
    /// The preset the sizes came from.
    pub preset: Preset,
    /// Where the migrating shard's pairs live.
    pub backend: Backend,
    /// The redis-server binary for [`Backend::Redis`] (`None`: found on PATH).
    pub redis_server: Option<PathBuf>,
    /// Records in the migrating shard.
    pub records: u64,
    /// Closed-loop client threads.
    pub clients: u16,
    /// Value bytes (16..=1024; 64 as in the paper).
    pub value_bytes: usize,
    /// Seed of the clients' key and operation choices.
    pub seed: u64,
    /// Runs per configuration, round-robin (the median-throughput run is reported).
    pub repeat: usize,
    /// Load before and after each migration (warm-up and cool-down), ms.
    pub phase_ms: u64,
    /// Timeline bin width, ms.
    pub interval_ms: u64,
}

impl Settings {
    /// The sizes of `experiment` under `preset` on `backend`: quick (minutes
    /// on 2 cores) or full (larger shard, longer phases); 64-byte values,
    /// seed 1, 3 runs per configuration (1 for the 60-configuration matrix
    /// under quick).
    pub fn new(experiment: Experiment, preset: Preset, backend: Backend) -> Settings {
        // Measured on 2 vCPUs: a 2^20-key shard migrates in about 1-2.5 s, a run with its
        // load, warm-up and cool-down takes about 3-4 s; `overall` has 8 runs, the sweeps 7-9,
        // the write-ratio x budget matrix 60, so the matrix gets the smaller shard.
        let big = experiment == Experiment::Overall;
        let (records, clients, phase_ms, interval_ms) = match (preset, big) {
            (Preset::Quick, true) => (1u64 << 20, 4u16, 500u64, 100u64),
            (Preset::Quick, false) => (1 << 19, 4, 300, 50),
            (Preset::Full, true) => (1 << 22, 8, 1000, 200),
            (Preset::Full, false) => (1 << 21, 8, 500, 100),
        };
        // Over Redis every pair is loaded and migrated through RESP round trips (about 40k
        // pairs/s here): a 16x smaller shard keeps a run within seconds.
        let records = if backend == Backend::Redis {
            records >> 4
        } else {
            records
        };
        let matrix = matches!(experiment, Experiment::Bandwidth | Experiment::Budgets);
        Settings {
            experiment,
            preset,
            backend,
            redis_server: None,
            records,
            clients,
            value_bytes: VALUE_BYTES_DEFAULT,
            seed: 1,
            repeat: if matrix && preset == Preset::Quick {
                1
            } else {
                3
            },
            phase_ms,
            interval_ms,
        }
    }

    /// Checks every setting (naming the flag of one that cannot work), finds
    /// redis-server for the Redis backend, and derives the geometry.
    pub fn resolve(&self) -> Result<RunSettings> {
        let redis_server = match self.backend {
            Backend::Builtin => None,
            Backend::Redis => Some(match &self.redis_server {
                Some(p) if p.is_file() => p.clone(),
                Some(p) => {
                    return Err(BenchError::setting(
                        "--redis-server",
                        p.display(),
                        "no such file; give the redis-server binary",
                    ))
                }
                None => find_on_path("redis-server").ok_or_else(|| {
                    BenchError::setting(
                        "--backend",
                        "redis",
                        "redis-server is not on PATH; install it (Debian: apt-get install -y redis-server) or pass --redis-server PATH",
                    )
                })?,
            }),
        };
        let records = self.records;
        if !(RECORDS_MIN..=RECORDS_MAX).contains(&records) {
            return Err(BenchError::setting(
                "--records",
                records,
                format!("must be in {RECORDS_MIN}..={RECORDS_MAX}"),
            ));
        }
        let clients = self.clients;
        if clients == 0 || clients > CLIENTS_MAX {
            return Err(BenchError::setting(
                "--clients",
                clients,
                format!("must be in 1..={CLIENTS_MAX}"),
            ));
        }
        if !(16..=locus_kvmigrate::wire::VALUE_BYTES_MAX).contains(&self.value_bytes) {
            return Err(BenchError::setting(
                "--value-bytes",
                self.value_bytes,
                format!(
                    "must be in 16..={} (a writer id and counter are embedded)",
                    locus_kvmigrate::wire::VALUE_BYTES_MAX
                ),
            ));
        }
        let phase_ms = self.phase_ms;
        if phase_ms > PHASE_MS_MAX {
            return Err(BenchError::setting(
                "--phase-ms",
                phase_ms,
                format!("must be at most {PHASE_MS_MAX}"),
            ));
        }
        let interval_ms = self.interval_ms;
        if interval_ms == 0 || interval_ms > INTERVAL_MS_MAX {
            return Err(BenchError::setting(
                "--interval-ms",
                interval_ms,
                format!("must be in 1..={INTERVAL_MS_MAX}"),
            ));
        }
        let repeat = self.repeat;
        if repeat == 0 || repeat > REPEAT_MAX {
            return Err(BenchError::setting(
                "--repeat",
                repeat,
                format!("must be in 1..={REPEAT_MAX}"),
            ));
        }
        // About one key per bucket, as the paper's table.
        let buckets_log2 = (64 - (records - 1).leading_zeros()) as u8;
        Ok(RunSettings {
            preset: self.preset,
            records,
            key_bytes: 4,
            key_note: "keys are 0..records (a 4-byte key space); the wire carries them as u64",
            value_bytes: self.value_bytes,
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
            seed: self.seed,
            mirror_writes: false,
            mirror_note: "rows labelled *-mirrored run with the crate default mirror_writes = true",
            ack_timeout_us: MIGRATION_TIMEOUT_MS * 1000,
            op_timeout_ms: OP_TIMEOUT_MS,
            migration_timeout_ms: MIGRATION_TIMEOUT_MS,
            repeat,
            repeat_note:
                "configurations run round-robin, repeat times; each row is the run with the \
                          median throughput during migration, repeat_* list every run",
            transport: match self.backend {
                Backend::Builtin => {
                    "in-process channels; router, 2 servers and the clients are threads of one process"
                }
                Backend::Redis => {
                    "in-process channels between router, agents and clients; each agent keeps its pairs in its own redis-server process on loopback (RESP)"
                }
            },
            backend: self.backend,
            redis_server,
        })
    }
}

/// Everything a run depends on (written to the .meta.json).
#[derive(Clone, Debug, Serialize)]
pub struct RunSettings {
    /// The preset the sizes came from.
    pub preset: Preset,
    /// Records in the migrating shard.
    pub records: u64,
    /// Bytes of a key's space (keys are `0..records`).
    pub key_bytes: usize,
    /// How keys are carried.
    pub key_note: &'static str,
    /// Value bytes.
    pub value_bytes: usize,
    /// Closed-loop client threads.
    pub clients: u16,
    /// The key distribution.
    pub distribution: &'static str,
    /// Its Zipf constant.
    pub zipf_theta: f64,
    /// log2 of the buckets (about one key per bucket).
    pub buckets_log2: u8,
    /// log2 of the buckets per migration group.
    pub group_buckets_log2: u8,
    /// Bloom filter bytes (completed groups).
    pub bf_bytes: usize,
    /// Counting Bloom filter bytes (groups in flight).
    pub cbf_bytes: usize,
    /// Timeline bin width, ms.
    pub interval_ms: u64,
    /// Load before the migration, ms.
    pub warmup_ms: u64,
    /// Load after it, ms.
    pub cooldown_ms: u64,
    /// Seed of the clients' choices.
    pub seed: u64,
    /// Whether destinations mirror writes to the source (rows `*-mirrored` do).
    pub mirror_writes: bool,
    /// What `mirror_writes` means for the rows.
    pub mirror_note: &'static str,
    /// A server's ack timeout (as long as a migration may take).
    pub ack_timeout_us: u64,
    /// A client gives up on one query after this long.
    pub op_timeout_ms: u64,
    /// A migration taking longer is reported as timed out.
    pub migration_timeout_ms: u64,
    /// Runs per configuration.
    pub repeat: usize,
    /// How repeats are run and reported.
    pub repeat_note: &'static str,
    /// How the nodes talk.
    pub transport: &'static str,
    /// Where the pairs live.
    pub backend: Backend,
    /// The redis-server binary (Redis backend).
    #[serde(skip)]
    pub redis_server: Option<PathBuf>,
}

impl RunSettings {
    /// Migration groups with `2^group_buckets_log2` buckets each.
    pub fn groups(&self, group_buckets_log2: u8) -> u64 {
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
    fn new(s: &RunSettings, protocol: Protocol, write_ratio: f64, source_budget_pct: u8) -> Self {
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
    /// Upper bound of a CBF false positive with `groups_inflight_max` groups migrating.
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

fn run_case(s: &RunSettings, c: &Case, keep_timeline: bool) -> Result<Row> {
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
/// over all of them), reporting each run; keeps each case's median-throughput run.
fn run_all(
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
                "{case}{:>9.0} ops/s migrating, p50 {:>6.0} us, migration {:>6} ms ({}), {:.1} s, {:.0} s total",
                r.avg_ops_per_s_migrating,
                r.p50_us_migrating,
                r.migration_ms,
                r.outcome,
                r.wall_s,
                t.elapsed().as_secs_f64()
            ));
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
fn matrix_cases(s: &RunSettings) -> Vec<Case> {
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

fn overall_cases(s: &RunSettings) -> Vec<Case> {
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
fn filter_cases(s: &RunSettings) -> Vec<Case> {
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
fn group_cases(s: &RunSettings) -> Vec<Case> {
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

/// The results file (`BASE.json`): the rows and what is derived from them.
#[derive(Debug, Serialize)]
pub struct Results {
    /// The experiment.
    pub experiment: Experiment,
    /// One row per configuration (its median-throughput run).
    pub rows: Vec<Row>,
    /// Numbers derived from the rows (gains, totals), or null.
    pub derived: serde_json::Value,
}

/// The metadata file (`BASE.meta.json`): how and where the results were made.
#[derive(Debug, Serialize)]
pub struct Meta {
    /// The experiment.
    pub experiment: Experiment,
    /// The command line.
    pub command: String,
    /// Everything the runs depended on.
    pub settings: RunSettings,
    /// The machine.
    pub machine: Machine,
    /// Seconds the whole experiment took.
    pub wall_s: f64,
}

/// The machine facts, and what sharing it means for these figures.
#[derive(Debug, Serialize)]
pub struct Machine {
    /// Cores, load before and after, command, version.
    #[serde(flatten)]
    pub facts: MachineMeta,
    /// How the nodes share the machine.
    pub note: &'static str,
}

/// What one experiment measured.
#[derive(Debug)]
pub struct Report {
    /// Rows and derived numbers.
    pub results: Results,
    /// Settings and machine.
    pub meta: Meta,
}

impl Report {
    /// The base name of the experiment's files: `netmigrate-EXPERIMENT`, with
    /// `-redis` for the Redis backend.
    pub fn name(&self) -> String {
        let e = self.results.experiment.name();
        match self.meta.settings.backend {
            Backend::Builtin => format!("netmigrate-{e}"),
            Backend::Redis => format!("netmigrate-{e}-redis"),
        }
    }

    /// Writes `BASE.json`, `BASE.meta.json` and the PNGs (`BASE-FIGURE.png`)
    /// into `dir`. Returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        let base = self.name();
        out.json(&format!("{base}.json"), &self.results)?;
        out.json(&format!("{base}.meta.json"), &self.meta)?;
        for png in plot(self.results.experiment, &self.results.rows, dir, &base)? {
            out.wrote(png);
        }
        Ok(out.written().to_vec())
    }
}

/// Runs the experiment of `settings`: every configuration, `repeat` times
/// round-robin, each row its median-throughput run.
pub fn run(settings: &Settings, r: &Reporter) -> Result<Report> {
    let s = settings.resolve()?;
    let experiment = settings.experiment;
    let mut machine = MachineMeta::start();
    let t = Instant::now();
    r.note(format!(
        "netmigrate {} ({:?} backend): {} records, {} clients, value {} B, {} groups, seed {}",
        experiment.name(),
        s.backend,
        s.records,
        s.clients,
        s.value_bytes,
        s.groups(s.group_buckets_log2),
        s.seed
    ));
    let (rows, derived) = match experiment {
        Experiment::Overall => {
            let rows = run_all(&s, &overall_cases(&s), true, r)?;
            let d = overall_derived(&rows);
            (rows, d)
        }
        Experiment::Filters => (
            run_all(&s, &filter_cases(&s), false, r)?,
            serde_json::Value::Null,
        ),
        Experiment::Groups => (
            run_all(&s, &group_cases(&s), false, r)?,
            serde_json::Value::Null,
        ),
        Experiment::Bandwidth | Experiment::Budgets => {
            let rows = run_all(&s, &matrix_cases(&s), false, r)?;
            let d = matrix_derived(&rows);
            (rows, d)
        }
    };
    machine.finish();
    Ok(Report {
        results: Results {
            experiment,
            rows,
            derived,
        },
        meta: Meta {
            experiment,
            command: machine.command.clone(),
            settings: s,
            machine: Machine {
                facts: machine,
                note: "every node is a thread of this process: servers, router and clients share the cores, \
                       so a source CPU budget limits the source thread's share, not a dedicated server",
            },
            wall_s: t.elapsed().as_secs_f64(),
        },
    })
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
        let mut a = Settings::new(Experiment::Filters, Preset::Quick, Backend::Builtin);
        a.records = 1 << 12;
        let s = a.resolve().unwrap();
        let groups = s.groups(s.group_buckets_log2) as usize;
        let cases = filter_cases(&s);
        assert_eq!(cases.len(), 9);
        assert_eq!(cases[0].bf_bytes, groups * 4);
        assert_eq!(cases[8].bf_bytes, groups / 8);
    }

    #[test]
    fn presets_size_the_shard_and_the_repeats() {
        let o = Settings::new(Experiment::Overall, Preset::Quick, Backend::Builtin);
        assert_eq!((o.records, o.clients, o.repeat), (1 << 20, 4, 3));
        let m = Settings::new(Experiment::Budgets, Preset::Quick, Backend::Builtin);
        assert_eq!((m.records, m.repeat), (1 << 19, 1));
        let r = Settings::new(Experiment::Overall, Preset::Full, Backend::Redis);
        assert_eq!((r.records, r.repeat), ((1 << 22) >> 4, 3));
    }

    #[test]
    fn bad_settings_name_their_flag() {
        let ok = Settings::new(Experiment::Overall, Preset::Quick, Backend::Builtin);
        type Spoil = fn(&mut Settings);
        let cases: [(&str, Spoil); 6] = [
            ("--records", |s| s.records = 0),
            ("--clients", |s| s.clients = 0),
            ("--value-bytes", |s| s.value_bytes = 8),
            ("--interval-ms", |s| s.interval_ms = 0),
            ("--phase-ms", |s| s.phase_ms = PHASE_MS_MAX + 1),
            ("--repeat", |s| s.repeat = 0),
        ];
        for (flag, spoil) in cases {
            let mut s = ok.clone();
            spoil(&mut s);
            let e = s.resolve().unwrap_err().to_string();
            assert!(e.contains(flag), "{flag}: {e}");
        }
        let mut s = ok.clone();
        s.backend = Backend::Redis;
        s.redis_server = Some("/nonexistent/redis-server".into());
        let e = s.resolve().unwrap_err().to_string();
        assert!(e.contains("--redis-server"), "{e}");
    }
}
