//! The measurement driver behind `locus bench netmigrate` (NetMigrate 6.1's metrics): a
//! closed-loop client load against a source/destination pair while one protocol migrates the
//! source's shard. It reports a throughput/latency timeline, average throughput, migration time,
//! the source's pause, failed and lost operations, per-key linearizability violations of what the
//! clients saw ([`crate::history`]), and the extra bytes on the client side
//! (double-read copies and their replies) and the server side (late and dirty re-sends,
//! PriorityPulls, mirrored writes) beside the first-copy migration bytes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::group::Geometry;
use crate::history::{self, value_id, value_of, Event, HistoryConfig, HistoryReport, Recorder};
use crate::router::{RouterConfig, RouterStats};
use crate::runtime::{Cluster, ClusterConfig, CpuBudget, HistoryClock};
use crate::server::ServerConfig;
use crate::status::{MigrationPhase, MigrationStatus};
use crate::wire::{Key, Protocol, VALUE_BYTES_MAX};

/// One query the workload drew: its key (in `0..keys`) and whether it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    /// The key, `0..keys`.
    pub key: Key,
    /// A SET (otherwise a GET).
    pub write: bool,
}

/// Makes each client thread's operation generator, from (client index, seed). One generator
/// draws both the read/write choice and the key, in that order, from one uniform stream, as
/// YCSB's `CoreWorkload.doTransaction` does; for example `locus_workloads`' `OpGenerator` (its
/// scrambled Zipfian over `records + 1` items, drawing again past the last record) over one
/// `FastUniform` per client. The driver uses the keys as drawn: one outside `0..keys` is a bug
/// of the generator and stops the client loudly.
pub type OpChooser = Arc<dyn Fn(u16, u64) -> Box<dyn FnMut() -> Draw + Send> + Send + Sync>;

/// One measured run.
#[derive(Clone, Debug)]
pub struct MeasureConfig {
    /// Protocol to migrate with.
    pub protocol: Protocol,
    /// Closed-loop client threads.
    pub clients: u16,
    /// Share of queries that are SETs (0.0..=1.0); the rest are GETs. The [`OpChooser`] given to
    /// [`measure`] draws them; this is the setting it was built from, checked and recorded.
    pub write_ratio: f64,
    /// Keys `0..keys` preloaded on the source.
    pub keys: u64,
    /// Value size (at least 16: a writer id and a counter are embedded).
    pub value_bytes: usize,
    /// Source table shape.
    pub geometry: Geometry,
    /// Router filter sizes and limits.
    pub router: RouterConfig,
    /// Server settings (batches, windows, mirroring).
    pub server: ServerConfig,
    /// Source CPU budget (NetMigrate 4.4 policies, 6.5 overload levels).
    pub source_budget: CpuBudget,
    /// Destination CPU budget.
    pub destination_budget: CpuBudget,
    /// Timeline bin width.
    pub interval_ms: u64,
    /// Load before the migration starts.
    pub warmup_ms: u64,
    /// Load after it ends.
    pub cooldown_ms: u64,
    /// Give up on the migration after this long (reported, not an error).
    pub migration_timeout_ms: u64,
    /// A client gives up on one query after this long.
    pub op_timeout_ms: u64,
    /// Seeds the clients' random choices.
    pub seed: u64,
    /// Which keys' histories are recorded and checked, and the memory bound.
    pub history: HistoryConfig,
}

impl MeasureConfig {
    /// A small configuration (seconds of run time) for `protocol`.
    pub fn quick(protocol: Protocol) -> Self {
        let geometry = Geometry {
            buckets_log2: 14,
            group_buckets_log2: 4,
        };
        Self {
            protocol,
            clients: 2,
            write_ratio: 0.05,
            keys: 20_000,
            value_bytes: 64,
            geometry,
            router: RouterConfig::default(),
            server: ServerConfig::new(0, 0, geometry),
            source_budget: CpuBudget::default(),
            destination_budget: CpuBudget::default(),
            interval_ms: 100,
            warmup_ms: 200,
            cooldown_ms: 200,
            migration_timeout_ms: 60_000,
            op_timeout_ms: 5_000,
            seed: 1,
            history: HistoryConfig::default(),
        }
    }
}

/// One timeline bin.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalStats {
    /// Bin start, ms since the load started.
    pub start_ms: u64,
    /// Queries completed in the bin.
    pub ops: u64,
    /// Throughput.
    pub ops_per_s: f64,
    /// Median latency.
    pub p50_us: u64,
    /// 99th percentile latency.
    pub p99_us: u64,
}

/// How a measured migration ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It finished.
    Done,
    /// It stopped with an error (the source stays the owner).
    Aborted,
    /// It did not finish within `migration_timeout_ms`.
    Timeout,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct MeasureReport {
    /// What migrated: a protocol's name (`Protocol::name`) or `redis-cluster`.
    pub system: String,
    /// How the migration ended.
    pub outcome: Outcome,
    /// Per-interval throughput and latency.
    pub timeline: Vec<IntervalStats>,
    /// Migration start, ms since the load started.
    pub migration_start_ms: u64,
    /// Migration end (done, aborted, or timed out), ms since the load started.
    pub migration_end_ms: u64,
    /// Migration time.
    pub migration_ms: u64,
    /// Time the source held queries (stop-and-copy, source-based final pause).
    pub pause_ms: u64,
    /// Average throughput while migrating.
    pub avg_ops_per_s_migrating: f64,
    /// Average throughput over the whole run.
    pub avg_ops_per_s: f64,
    /// Queries completed.
    pub ops: u64,
    /// Queries that failed or timed out.
    pub failed_ops: u64,
    /// Keys whose final value is older than an acknowledged write (must be 0).
    pub lost_writes: u64,
    /// Sampled keys whose client history is not linearizable (must be 0); see `history`.
    pub violations: u64,
    /// The linearizability check: sample size, keys and operations checked, undecided keys.
    pub history: HistoryReport,
    /// Client bytes (queries and replies).
    pub client_bytes: u64,
    /// Extra client-side bytes (double-read copies and second replies).
    pub client_extra_bytes: u64,
    /// First-copy migration bytes.
    pub server_data_bytes: u64,
    /// Extra server-to-server bytes (late/dirty, pulls, mirrors, resends).
    pub server_extra_bytes: u64,
    /// Of those, packets sent again because an answer was slow (a loaded host's cost, not
    /// the protocol's).
    pub server_resent_bytes: u64,
    /// The migration's final status (the agents' runs; `None` for Redis Cluster or a timeout).
    pub status: Option<MigrationStatus>,
    /// Router counters at the end.
    pub router: RouterStats,
}

struct ClientLog {
    done: Vec<(u32, u32)>,
    failed: u64,
    writes: Vec<u64>,
    events: Vec<Event>,
    last_acked_invoke: HashMap<Key, u64>,
    bytes: u64,
    extra_bytes: u64,
}

/// Keys per load command.
const LOAD_BATCH_KEYS: u64 = 2_000;

fn percentile(sorted: &[u32], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as u64
}

/// Runs the load, migrates shard 1 from server 1 to server 2 with `cfg.protocol`, and measures.
pub fn measure(cfg: &MeasureConfig, choose: OpChooser) -> Result<MeasureReport> {
    measure_on(cfg, choose, Cluster::start)
}

/// A key-value system a measured run drives: it loads the keys, gives each client thread its
/// own connection, moves the keys once, and reports its counters at the end. The agents'
/// [`Cluster`] is one; Redis Cluster's own resharding (`crate::redis::cluster`) is another.
pub trait Subject {
    /// One client thread's connection.
    type Client: SubjectClient + Send + 'static;
    /// Stores `pairs` before the load starts.
    fn load(&mut self, pairs: Vec<(Key, Vec<u8>)>) -> Result<()>;
    /// A new client connection.
    fn client(&mut self) -> Result<Self::Client>;
    /// Starts moving every key to the other server.
    fn start_migration(&mut self) -> Result<()>;
    /// Waits up to `timeout` for the migration to end.
    fn wait_migration(&mut self, timeout: Duration) -> (Outcome, Option<MigrationStatus>);
    /// Counters at the end (router, server bytes), and shuts the system down.
    fn finish(self) -> Result<SubjectCounters>;
}

/// One client connection of a [`Subject`].
pub trait SubjectClient {
    /// GET.
    fn get(&mut self, key: Key) -> Result<Option<Vec<u8>>>;
    /// SET.
    fn set(&mut self, key: Key, value: Vec<u8>) -> Result<()>;
    /// (all bytes sent and received, extra client-side bytes) so far.
    fn bytes(&self) -> (u64, u64);
}

/// What a [`Subject`] counts besides the clients.
#[derive(Clone, Debug, Default)]
pub struct SubjectCounters {
    /// Router counters (zero without a router).
    pub router: RouterStats,
    /// First-copy migration bytes.
    pub server_data_bytes: u64,
    /// Extra server-to-server bytes.
    pub server_extra_bytes: u64,
    /// Of those, packets sent again (`ServerStats::resent_bytes`).
    pub server_resent_bytes: u64,
}

impl SubjectClient for crate::runtime::Client {
    fn get(&mut self, key: Key) -> Result<Option<Vec<u8>>> {
        crate::runtime::Client::get(self, 1, key)
    }
    fn set(&mut self, key: Key, value: Vec<u8>) -> Result<()> {
        crate::runtime::Client::set(self, 1, key, value)
    }
    fn bytes(&self) -> (u64, u64) {
        (self.bytes_sent + self.bytes_received, self.extra_bytes)
    }
}

/// The agents' cluster: shard 1 moves from server 1 to server 2 with one protocol.
struct Agents {
    cluster: Cluster,
    protocol: Protocol,
}

impl Subject for Agents {
    type Client = crate::runtime::Client;
    fn load(&mut self, pairs: Vec<(Key, Vec<u8>)>) -> Result<()> {
        self.cluster.load(1, pairs)
    }
    fn client(&mut self) -> Result<Self::Client> {
        self.cluster.client()
    }
    fn start_migration(&mut self) -> Result<()> {
        self.cluster.migrate(1, 1, 2, self.protocol)
    }
    fn wait_migration(&mut self, timeout: Duration) -> (Outcome, Option<MigrationStatus>) {
        let status = self
            .cluster
            .wait_migration(1, timeout)
            .ok()
            .filter(|s| matches!(s.phase, MigrationPhase::Done | MigrationPhase::Aborted));
        let outcome = match status.as_ref().map(|s| s.phase) {
            Some(MigrationPhase::Done) => Outcome::Done,
            Some(_) => Outcome::Aborted,
            None => Outcome::Timeout,
        };
        (outcome, status)
    }
    fn finish(self) -> Result<SubjectCounters> {
        let router = self.cluster.router_stats();
        let (s1, s2) = (self.cluster.server_stats(1)?, self.cluster.server_stats(2)?);
        self.cluster.shutdown()?;
        Ok(SubjectCounters {
            router,
            server_data_bytes: s1.data_bytes + s2.data_bytes,
            server_extra_bytes: s1.extra_bytes + s2.extra_bytes,
            server_resent_bytes: s1.resent_bytes + s2.resent_bytes,
        })
    }
}

/// Checks the settings every [`Subject`] shares.
pub fn validate(cfg: &MeasureConfig) -> Result<()> {
    if !(0.0..=1.0).contains(&cfg.write_ratio) {
        return Err(Error::InvalidSetting {
            key: "write_ratio",
            value: cfg.write_ratio.to_string(),
            expected: "0..=1".into(),
        });
    }
    if cfg.value_bytes < 16 || cfg.value_bytes > VALUE_BYTES_MAX {
        return Err(Error::InvalidSetting {
            key: "value_bytes",
            value: cfg.value_bytes.to_string(),
            expected: format!("16..={VALUE_BYTES_MAX}"),
        });
    }
    for (key, v) in [
        ("clients", cfg.clients as u64),
        ("interval_ms", cfg.interval_ms),
    ] {
        if v == 0 {
            return Err(Error::InvalidSetting {
                key,
                value: "0".into(),
                expected: "more than 0".into(),
            });
        }
    }
    Ok(())
}

/// [`measure`] on a cluster that `start` builds from the configuration (for example with its
/// servers' shards kept in `redis-server`s, see `crate::redis::measure_redis`).
pub fn measure_on(
    cfg: &MeasureConfig,
    choose: OpChooser,
    start: impl FnOnce(ClusterConfig) -> Result<Cluster>,
) -> Result<MeasureReport> {
    validate(cfg)?;
    let mut cc = ClusterConfig::new(
        2,
        cfg.clients + 1,
        ServerConfig {
            geometry: cfg.geometry,
            ..cfg.server.clone()
        },
    );
    cc.router = cfg.router.clone();
    cc.op_timeout_ms = cfg.op_timeout_ms;
    cc.budgets.insert(1, cfg.source_budget);
    cc.budgets.insert(2, cfg.destination_budget);
    let subject = Agents {
        cluster: start(cc)?,
        protocol: cfg.protocol,
    };
    drive(cfg, choose, subject, cfg.protocol.name())
}

/// Runs the load on `subject` (named `system` in the report), migrates, and measures: the
/// driver every [`Subject`] shares, so the numbers of different systems mean the same.
pub fn drive<S: Subject>(
    cfg: &MeasureConfig,
    choose: OpChooser,
    mut subject: S,
    system: &str,
) -> Result<MeasureReport> {
    validate(cfg)?;
    let initial = value_of(u16::MAX - 1, 0, cfg.value_bytes);
    let mut k = 0;
    while k < cfg.keys {
        // Bounded per command, so a remote store loads each batch within `op_timeout_ms`.
        let end = (k + LOAD_BATCH_KEYS).min(cfg.keys);
        subject.load((k..end).map(|k| (k, initial.clone())).collect())?;
        k = end;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let clock = Arc::new(HistoryClock::default());
    let t0 = Instant::now();
    let recorder = Arc::new(Recorder::new(&cfg.history, cfg.keys, cfg.seed, t0));
    let mut handles = Vec::new();
    for c in 0..cfg.clients {
        let mut client = match subject.client() {
            Ok(client) => client,
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                return Err(e);
            }
        };
        let (stopping, clock, recorder) = (stop.clone(), clock.clone(), recorder.clone());
        let (len, seed, keys) = (cfg.value_bytes, cfg.seed, cfg.keys);
        let client_seed = seed.wrapping_mul(1000) + c as u64;
        let mut next_op = choose(c, client_seed);
        let name = format!("kv-measure-client-{c}");
        let spawned = std::thread::Builder::new().name(name.clone());
        let handle = spawned.spawn(move || {
            let mut log = ClientLog {
                done: Vec::new(),
                failed: 0,
                writes: Vec::new(),
                events: Vec::new(),
                last_acked_invoke: HashMap::new(),
                bytes: 0,
                extra_bytes: 0,
            };
            while !stopping.load(Ordering::Relaxed) {
                let Draw { key, write } = next_op();
                assert!(key < keys, "the workload drew key {key}, past 0..{keys}");
                let start = Instant::now();
                let ok = if write {
                    let counter = log.writes.len() as u64 + 1;
                    let value = value_of(c, counter, len);
                    let invoke = clock.tick();
                    let r = client.set(key, value.clone());
                    let response = clock.tick();
                    log.writes.push(if r.is_ok() { response } else { u64::MAX });
                    if r.is_ok() {
                        let e = log.last_acked_invoke.entry(key).or_insert(0);
                        *e = (*e).max(invoke);
                    }
                    let acked = r.is_ok().then_some(response);
                    let ev = Event::write(key, invoke, acked, &value);
                    recorder.record(&mut log.events, ev, &clock);
                    r.is_ok()
                } else {
                    let invoke = clock.tick();
                    let r = client.get(key);
                    let response = clock.tick();
                    if let Ok(v) = &r {
                        // A failed read says nothing and is left out.
                        let ev = Event::read(key, invoke, response, v.as_deref());
                        recorder.record(&mut log.events, ev, &clock);
                    }
                    r.is_ok()
                };
                if ok {
                    let at_ms = t0.elapsed().as_millis() as u32;
                    let lat_us = start.elapsed().as_micros().min(u32::MAX as u128) as u32;
                    log.done.push((at_ms, lat_us));
                } else {
                    log.failed += 1;
                }
            }
            (log.bytes, log.extra_bytes) = client.bytes();
            log
        });
        match handle {
            Ok(h) => handles.push(h),
            Err(source) => {
                // The clients already running must not outlive this call.
                stop.store(true, Ordering::SeqCst);
                return Err(Error::ThreadSpawn { name, source });
            }
        }
    }
    std::thread::sleep(Duration::from_millis(cfg.warmup_ms));
    let migration_start_ms = t0.elapsed().as_millis() as u64;
    let started = subject.start_migration();
    let (outcome, status) = match &started {
        Ok(()) => subject.wait_migration(Duration::from_millis(cfg.migration_timeout_ms)),
        Err(_) => (Outcome::Aborted, None),
    };
    let migration_end_ms = t0.elapsed().as_millis() as u64;
    if started.is_ok() {
        std::thread::sleep(Duration::from_millis(cfg.cooldown_ms));
    }
    stop.store(true, Ordering::SeqCst);
    let mut logs: Vec<ClientLog> = Vec::new();
    for h in handles {
        let thread = h.thread().name().unwrap_or("kv-measure-client").to_string();
        logs.push(h.join().map_err(|_| Error::ThreadPanicked { thread })?);
    }
    started?;
    let total_ms = t0.elapsed().as_millis() as u64;

    // Lost writes: a key's final value must not predate an acknowledged write of it.
    let mut last_acked: HashMap<Key, u64> = HashMap::new();
    for log in &logs {
        for (&k, &i) in &log.last_acked_invoke {
            let e = last_acked.entry(k).or_insert(0);
            *e = (*e).max(i);
        }
    }
    let mut reader = subject.client()?;
    let mut lost_writes = 0;
    for (&key, &invoke) in &last_acked {
        let v = reader.get(key)?;
        let final_response = match v.as_deref() {
            Some(v) if v.len() >= 10 => {
                let writer = u16::from_le_bytes([v[0], v[1]]).wrapping_sub(1);
                let mut c = [0u8; 8];
                c.copy_from_slice(&v[2..10]);
                let counter = u64::from_le_bytes(c);
                logs.get(writer as usize)
                    .and_then(|l| l.writes.get((counter as usize).wrapping_sub(1)))
                    .copied()
                    .unwrap_or(0)
            }
            _ => 0,
        };
        if final_response < invoke {
            lost_writes += 1;
        }
    }
    drop(reader);
    let events = logs
        .iter_mut()
        .map(|l| std::mem::take(&mut l.events))
        .collect();
    let history = history::check(events, &recorder, value_id(&initial));

    let mut done: Vec<(u32, u32)> = logs.iter().flat_map(|l| l.done.iter().copied()).collect();
    done.sort_unstable();
    // Every completion happened at or before total_ms, so this many bins hold them all.
    let bins = total_ms / cfg.interval_ms + 1;
    let mut timeline = Vec::new();
    let mut lats: Vec<Vec<u32>> = vec![Vec::new(); bins as usize];
    for &(at, lat) in &done {
        let i = ((at as u64 / cfg.interval_ms) as usize).min(bins as usize - 1);
        lats[i].push(lat);
    }
    for (i, mut l) in lats.into_iter().enumerate() {
        l.sort_unstable();
        timeline.push(IntervalStats {
            start_ms: i as u64 * cfg.interval_ms,
            ops: l.len() as u64,
            ops_per_s: l.len() as f64 * 1000.0 / cfg.interval_ms as f64,
            p50_us: percentile(&l, 0.5),
            p99_us: percentile(&l, 0.99),
        });
    }
    let during = done
        .iter()
        .filter(|(at, _)| (migration_start_ms..migration_end_ms).contains(&(*at as u64)))
        .count();
    let migration_ms = migration_end_ms.saturating_sub(migration_start_ms);
    let counters = subject.finish()?;
    Ok(MeasureReport {
        system: system.to_string(),
        outcome,
        timeline,
        migration_start_ms,
        migration_end_ms,
        migration_ms,
        pause_ms: status.as_ref().map_or(0, |s| s.pause_us / 1000),
        avg_ops_per_s_migrating: during as f64 * 1000.0 / migration_ms.max(1) as f64,
        avg_ops_per_s: done.len() as f64 * 1000.0 / total_ms.max(1) as f64,
        ops: done.len() as u64,
        failed_ops: logs.iter().map(|l| l.failed).sum(),
        lost_writes,
        violations: history.violations,
        history,
        client_bytes: logs.iter().map(|l| l.bytes).sum(),
        client_extra_bytes: logs.iter().map(|l| l.extra_bytes).sum::<u64>()
            + counters.router.double_read_bytes,
        server_data_bytes: counters.server_data_bytes,
        server_extra_bytes: counters.server_extra_bytes,
        server_resent_bytes: counters.server_resent_bytes,
        status,
        router: counters.router,
    })
}
