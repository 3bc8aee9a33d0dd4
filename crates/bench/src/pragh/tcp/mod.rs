//! `locus bench pragh schemes --fabric tcp`: the schemes of Pragh 6 with
//! real server processes on loopback, side by side with the in-process
//! fabric's run of the same workload, in one command.
//!
//! The same graph (R-MAT of the preset, same seed), the same warm-up and
//! measured operation sequences ([`super::scheme::workload`]: Zipf 0.99 over
//! 1,024 start vertices, 5% edge inserts) and the same store settings
//! ([`crate::cluster::store_config`] and [`Scheme::configure`], written into
//! the cluster file) for both fabrics. Each run interleaves them: for every
//! scheme, the in-process run, then the TCP run; `runs` such runs give a
//! median with its minimum and maximum.
//!
//! A TCP run of a scheme ([`drive`]): one `locus server` per machine (one for
//! Ideal), plus a `locus coordinator` for Split+Cache and Replica, all
//! children of this process ([`crate::processes`]); the graph loaded over the
//! client in stored order; warm-up with the warm-up sequence (migrating
//! schemes: windows of 1.5 monitoring intervals until the values moved and
//! replicas held stop changing, at most `warm_s_max`); then `measure_s` of
//! the measured sequence on `clients` closed-loop threads here, each query a
//! KHOP (hops 2, k 100) sent to its start vertex's home and run there, each
//! update an INSERT_EDGE sent to its vertex's home.
//!
//! What is the same and what differs from the in-process run:
//! - The first warm-up and measured sequences are the same; after them the
//!   clients here repeat them (edge inserts shifted, as
//!   [`locus_workloads::traversal::repeat_fresh`] does), where the in-process
//!   run draws every further round and repetition afresh (`Workload::fresh`).
//!   Under these Zipf starts over 1,024 vertices the two sample one
//!   distribution; the inserts here stay on the first sequence's vertices.
//! - A KHOP of 2 hops does the one-sided work of the in-process `two_hop`:
//!   the first `k` neighbours of the start, then the first `k` of each of
//!   those, one synchronous GET at a time, on a worker of the home machine.
//!   The server then sorts and deduplicates the last frontier and sends it
//!   back; the in-process query does neither.
//! - Latency here is the client's round trip (request to reply, network and
//!   the server's queueing included); the in-process latency is the query's
//!   service time on its worker. The KHOP's own server-side time is reported
//!   too (`server_p50_us`), which is the comparable figure.
//! - The remote share is remote over all one-sided operations of every
//!   server in the measured window (STATS `ops` deltas): queries, updates,
//!   forwarded updates, migrations and monitors, as the in-process counters
//!   count them. It includes one STATS key-table scan per server (a few
//!   thousand local reads). `query_remote_rate` counts the queries' own.
//! - In process, all machines share `threads` workers; here every client
//!   connection has its own worker thread at its server, and all processes
//!   share the machine's cores.
//! - Migration: in process, one driver (monitor, coordinator, one executor
//!   thread) serves every machine; here each server runs its monitor and an
//!   executor thread and the coordinator is its own process, with the same
//!   policy (mode, profit, interval, dwell, replicas, hot polling, report
//!   minimum) except forgetting: the cluster file's policy forgets a key
//!   after max(3 intervals, 30 s), the in-process driver after 3 intervals.

mod drive;

use std::path::{Path, PathBuf};

use locus_coordinator::Mode;
use locus_graph::Csr;
use locus_server::config::{PolicySection, StoreSection};
use locus_store::StoreConfig;
use serde::Serialize;

use super::{fill_ratios, placement_bound, scheme, PlacementBound, Row, Scheme, Settings, SKEWED};
use crate::client_bench::Loaded;
use crate::cluster::rmat_csr;
use crate::output::{MachineMeta, OutDir, Spread};
use crate::processes::Spec;
use crate::{BenchError, Reporter, Result};

/// The schemes that run over TCP (the others need an offline plan or a
/// store setting the cluster file does not carry).
pub const TCP_SCHEMES: [Scheme; 4] = [
    Scheme::Ideal,
    Scheme::Orig,
    Scheme::SplitCache,
    Scheme::Replica,
];

/// Seconds a server process may live past the longest a scheme's run can
/// take (load, warm-up cap, measurement): a bound, not a schedule.
const LIFETIME_MARGIN_S: u64 = 600;

/// What the TCP side needs beyond the in-process [`Settings`].
#[derive(Debug, Clone, Serialize)]
pub struct TcpSettings {
    /// The `locus` executable (its `server` and `coordinator` commands).
    #[serde(skip)]
    pub exe: PathBuf,
    /// Interleaved runs (3 or more for a median with a spread).
    pub runs: usize,
    /// Closed-loop client threads (each with its connections).
    pub clients: usize,
    /// Seconds of the measured window.
    pub measure_s: f64,
    /// Threads sending LOAD batches.
    pub senders: usize,
}

impl TcpSettings {
    /// Defaults for `p`: 3 runs, 8 clients, at least 5 s measured, 4 senders.
    pub fn new(p: &Settings, exe: PathBuf) -> TcpSettings {
        TcpSettings {
            exe,
            runs: 3,
            clients: 8,
            measure_s: p.measure_s_min.max(5.0),
            senders: 4,
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if self.runs == 0 || self.runs > 100 {
            return Err(BenchError::setting("--runs", self.runs, "must be 1..=100"));
        }
        if self.clients == 0 || self.clients > 256 {
            return Err(BenchError::setting(
                "--clients",
                self.clients,
                "must be 1..=256 (a server serves 256 connections)",
            ));
        }
        if !(self.measure_s > 0.0 && self.measure_s <= 3600.0) {
            return Err(BenchError::setting(
                "--measure-s",
                self.measure_s,
                "must be in (0, 3600]",
            ));
        }
        if self.senders == 0 {
            return Err(BenchError::setting("--senders", 0, "must be positive"));
        }
        Ok(())
    }
}

/// One scheme's TCP run.
#[derive(Debug, Clone, Serialize)]
pub struct TcpRow {
    /// The scheme.
    pub scheme: String,
    /// Run number (1-based).
    pub run: usize,
    /// Queries per second over the measured window.
    pub throughput_qps: f64,
    /// Client round trip of the queries, percentiles (us).
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// The queries' server-side time (KHOP `elapsed_ns`), median (us).
    pub server_p50_us: f64,
    /// 99th percentile.
    pub server_p99_us: f64,
    /// Client round trip of the updates, median (us).
    pub update_p50_us: f64,
    /// 99th percentile.
    pub update_p99_us: f64,
    /// Remote one-sided operations over all, every server, measured window.
    pub remote_rate: f64,
    /// The same for the queries' own operations (KHOP replies).
    pub query_remote_rate: f64,
    /// Location-cache hits over lookups in the window (schemes with a cache).
    pub cache_hit_rate: Option<f64>,
    /// Vertices whose value is held away from their home at the end.
    pub migrated_fraction: f64,
    /// Values the servers moved to themselves in all (STATS `migrations_in`).
    pub migrations: u64,
    /// Of those, during the measured window.
    pub migrations_measured: u64,
    /// Read-only replicas held at the end.
    pub replicas_held: u64,
    /// Throughput over the same run's TCP Orig.
    pub vs_orig: f64,
    /// Throughput over the same run's TCP Ideal.
    pub vs_ideal: f64,
    /// Server processes.
    pub machines: usize,
    /// Client threads.
    pub clients: usize,
    /// Queries measured.
    pub queries: u64,
    /// Updates measured.
    pub updates: u64,
    /// Seconds measured (to the last reply).
    pub measure_s: f64,
    /// Seconds of warm-up.
    pub warm_s: f64,
    /// The graph's load over the client.
    pub load: Loaded,
    /// Whether a coordinator process ran.
    pub coordinator: bool,
    /// The processes started (all gone when the row is returned).
    pub pids: Vec<u32>,
}

/// Both fabrics' rows of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRows {
    /// Run number (1-based).
    pub run: usize,
    /// The in-process fabric.
    pub local: Vec<Row>,
    /// Server processes over TCP.
    pub tcp: Vec<TcpRow>,
}

/// One fabric's figures of one scheme over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct FabricSpread {
    /// Queries per second.
    pub throughput_qps: Spread,
    /// Median latency (us): service time in process, round trip over TCP.
    pub p50_us: Spread,
    /// 99th percentile (us).
    pub p99_us: Spread,
    /// Remote share of one-sided operations.
    pub remote_rate: Spread,
    /// Throughput over the same run's Orig.
    pub vs_orig: Spread,
    /// Throughput over the same run's Ideal.
    pub vs_ideal: Spread,
    /// Vertices whose value is away at the end.
    pub migrated_fraction: Spread,
}

/// One scheme, both fabrics, side by side.
#[derive(Debug, Clone, Serialize)]
pub struct SideBySide {
    /// The scheme.
    pub scheme: String,
    /// In process.
    pub local: FabricSpread,
    /// Over TCP.
    pub tcp: FabricSpread,
    /// Over TCP: the queries' server-side median (us).
    pub tcp_server_p50_us: Spread,
}

/// What `pragh schemes --fabric tcp` measured.
#[derive(Debug, Clone, Serialize)]
pub struct TcpReport {
    /// The in-process settings (graph, workload, interval, warm-up cap).
    pub settings: Settings,
    /// The TCP side's.
    pub tcp: TcpSettings,
    /// Vertices of the graph.
    pub vertices: u64,
    /// Stored (directed) edges.
    pub stored_edges: u64,
    /// What placement alone could achieve.
    pub placement_bound: PlacementBound,
    /// Median, min and max per scheme and fabric.
    pub summary: Vec<SideBySide>,
    /// Every run.
    pub runs: Vec<RunRows>,
    /// The machine.
    pub machine: MachineMeta,
}

impl TcpReport {
    /// Writes `pragh-schemes-tcp.json` (summary and runs),
    /// `pragh-schemes-tcp.meta.json` and a PNG of throughput relative to
    /// Ideal per fabric into `dir`.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let name = "pragh-schemes-tcp";
        let mut out = OutDir::create(dir)?;
        out.json(
            &format!("{name}.json"),
            &serde_json::json!({"summary": self.summary, "runs": self.runs}),
        )?;
        let meta = serde_json::json!({
            "experiment": name,
            "settings": self.settings,
            "tcp": self.tcp,
            "vertices": self.vertices,
            "stored_edges": self.stored_edges,
            "graph_seed": self.settings.config().graph.seed,
            "placement_bound": self.placement_bound,
            "machine": self.machine,
        });
        out.json(&format!("{name}.meta.json"), &meta)?;
        let png = out.path(&format!("{name}.png"));
        locus_plot::BarChart {
            title: format!(
                "{name}: throughput of Ideal (%), median of {} runs",
                self.runs.len()
            ),
            y_label: "% of the same fabric's Ideal".into(),
            groups: self.summary.iter().map(|s| s.scheme.clone()).collect(),
            series: vec![
                (
                    "in-process".into(),
                    self.summary
                        .iter()
                        .map(|s| s.local.vs_ideal.median * 100.0)
                        .collect(),
                ),
                (
                    "TCP processes".into(),
                    self.summary
                        .iter()
                        .map(|s| s.tcp.vs_ideal.median * 100.0)
                        .collect(),
                ),
            ],
        }
        .write_png(&png)?;
        out.wrote(png);
        Ok(out.written().to_vec())
    }
}

/// The cluster file's `[store]` for `c` (sizes rounded up to whole MiB).
pub fn store_section(c: &StoreConfig) -> StoreSection {
    let mb = |b: u64| b.div_ceil(1 << 20);
    StoreSection {
        buckets: Some(c.buckets_per_machine),
        overflow_buckets: Some(c.overflow_buckets_per_machine),
        value_region_mb: Some(mb(c.value_region_bytes)),
        value_region_extra_mb: 0,
        part_neighbors_max: c.part_neighbors_max,
        reclaim_lease_ms: c.reclaim_lease_ms,
        cache_mb: mb(c.cache_bytes_max),
        cache_lease_ms: Some(c.cache_lease_ms),
        hot_accesses: c.hot_accesses,
        replica_mb: Some(c.replica_bytes_max as f64 / (1u64 << 20) as f64),
        slots: Some(c.slots),
    }
}

/// The processes of `scheme`: its machines, the in-process run's store
/// settings and driver policy, a coordinator if it migrates.
fn spec(scheme: Scheme, csr: &Csr, p: &Settings, tcp: &TcpSettings) -> Spec {
    let machines = scheme.machines(p.machines);
    let mut c = crate::cluster::store_config(csr, machines, &p.config());
    scheme.configure(&mut c, None);
    let d = scheme.driver_config(p.interval_ms, Mode::Eager);
    let policy = PolicySection {
        mode: "eager".into(),
        profit: d.policy.profit,
        interval_ms: d.policy.interval_ms,
        dwell_ms: d.policy.dwell_ms,
        rate_min_per_s: d.policy.rate_min_per_s,
        eager_rate_min_per_s: d.policy.eager_rate_min_per_s,
        lead_intervals: d.policy.lead_intervals,
        replicas: d.policy.replicas,
        hot_poll_ms: d.hot_poll_ms,
        report_count_min: d.policy.report_count_min,
        listen_intervals: d.policy.listen_intervals,
    };
    Spec {
        exe: tcp.exe.clone(),
        machines,
        store: store_section(&c),
        policy,
        coordinator: scheme.migrates(),
        lifetime_s: p.warm_s_max as u64 + tcp.measure_s as u64 + LIFETIME_MARGIN_S,
    }
}

/// Runs every scheme of `only` (all of [`TCP_SCHEMES`] if empty) on both
/// fabrics, interleaved, `tcp.runs` times.
pub fn run(p: &Settings, tcp: &TcpSettings, only: &[Scheme], r: &Reporter) -> Result<TcpReport> {
    p.validate()?;
    tcp.validate()?;
    if let Some(s) = only.iter().find(|s| !TCP_SCHEMES.contains(s)) {
        return Err(BenchError::setting(
            "--schemes",
            s.name(),
            "must be Ideal, Orig, Split+Cache or Replica with --fabric tcp",
        ));
    }
    let schemes: Vec<Scheme> = TCP_SCHEMES
        .into_iter()
        .filter(|s| only.is_empty() || only.contains(s))
        .collect();
    let mut machine = MachineMeta::start();
    r.note(format!("generating R-MAT scale {} ...", p.scale));
    let graph = super::Graph::Csr(rmat_csr(&p.config().graph)?);
    let w = scheme::workload(&graph, p, SKEWED)?;
    let bound = placement_bound(&graph, &w.measure, p.machines, p.k);
    let mut runs = Vec::new();
    for run in 1..=tcp.runs {
        let (mut local, mut over_tcp) = (Vec::new(), Vec::new());
        for &s in &schemes {
            r.note(format!(
                "run {run}/{}: {} in process ...",
                tcp.runs,
                s.name()
            ));
            local.push(
                super::run::run_scheme(s, &w, p, Mode::Eager, r)
                    .map_err(|e| e.in_scheme(s.name()))?,
            );
            r.note(format!("run {run}/{}: {} over TCP ...", tcp.runs, s.name()));
            over_tcp.push(
                drive::run_scheme(s, &w, p, tcp, run, r)
                    .map_err(|e| e.in_scheme(format!("{} over TCP", s.name())))?,
            );
        }
        fill_ratios(&mut local);
        fill_tcp_ratios(&mut over_tcp);
        runs.push(RunRows {
            run,
            local,
            tcp: over_tcp,
        });
    }
    machine.finish();
    Ok(TcpReport {
        settings: p.clone(),
        tcp: tcp.clone(),
        vertices: graph.vertex_count(),
        stored_edges: graph.stored_edges(),
        placement_bound: bound,
        summary: summarize(&schemes, &runs),
        runs,
        machine,
    })
}

/// Each TCP row's throughput over the same run's TCP Orig and Ideal.
fn fill_tcp_ratios(rows: &mut [TcpRow]) {
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.scheme == name)
            .map(|r| r.throughput_qps)
    };
    let (orig, ideal) = (find("Orig"), find("Ideal"));
    for r in rows.iter_mut() {
        if let Some(o) = orig {
            r.vs_orig = r.throughput_qps / o;
        }
        if let Some(i) = ideal {
            r.vs_ideal = r.throughput_qps / i;
        }
    }
}

/// Median, min and max of every figure, per scheme and fabric.
fn summarize(schemes: &[Scheme], runs: &[RunRows]) -> Vec<SideBySide> {
    schemes
        .iter()
        .map(|s| {
            let name = s.name();
            let local: Vec<&Row> = runs
                .iter()
                .flat_map(|r| r.local.iter().filter(|x| x.scheme == name))
                .collect();
            let tcp: Vec<&TcpRow> = runs
                .iter()
                .flat_map(|r| r.tcp.iter().filter(|x| x.scheme == name))
                .collect();
            let l = |f: fn(&Row) -> f64| Spread::of(local.iter().map(|x| f(x)));
            let t = |f: fn(&TcpRow) -> f64| Spread::of(tcp.iter().map(|x| f(x)));
            SideBySide {
                scheme: name.into(),
                local: FabricSpread {
                    throughput_qps: l(|x| x.throughput_qps),
                    p50_us: l(|x| x.p50_us),
                    p99_us: l(|x| x.p99_us),
                    remote_rate: l(|x| x.remote_rate),
                    vs_orig: l(|x| x.vs_orig),
                    vs_ideal: l(|x| x.vs_ideal),
                    migrated_fraction: l(|x| x.migrated_fraction),
                },
                tcp: FabricSpread {
                    throughput_qps: t(|x| x.throughput_qps),
                    p50_us: t(|x| x.p50_us),
                    p99_us: t(|x| x.p99_us),
                    remote_rate: t(|x| x.remote_rate),
                    vs_orig: t(|x| x.vs_orig),
                    vs_ideal: t(|x| x.vs_ideal),
                    migrated_fraction: t(|x| x.migrated_fraction),
                },
                tcp_server_p50_us: t(|x| x.server_p50_us),
            }
        })
        .collect()
}

/// Values the servers of `client`'s cluster moved to themselves in all
/// (the sum of STATS `migrations_in`).
pub fn migrations_in(client: &locus_client::Client) -> Result<u64> {
    Ok(drive::totals(client)?.migrations_in)
}
