//! `locus bench client`: what a program talking to a running cluster sees.
//! Client round trips of a one-vertex read (NEIGHBORS, 100 neighbours) and of
//! a 100 x 100 two-hop (KHOP hops=2 k=100), and the bulk-load rate over the
//! client (LOAD batches by home, [`locus_client::load::Batcher`]), on server
//! processes started for the run ([`crate::processes`]).
//!
//! One run of one cluster size and setup ([`Setup`]): start the servers
//! (hash placement; no location cache and no coordinator for `orig`,
//! Pragh's Orig; the location cache for `cache`; the cache and a coordinator
//! for `migrated`, whose values move while the KHOPs are sent untimed until
//! the moves stop), load the R-MAT graph over the client (timed), then send
//! `samples` NEIGHBORS and `samples` KHOP requests one at a time from one
//! thread to the start vertex's home, each timed at the client from request
//! to reply (after a few untimed ones that open the connection). A run's
//! figure is the median of its samples; the report gives the median of the
//! runs with their minimum and maximum. Setups and cluster sizes are
//! interleaved within a run.
//!
//! [`load_csr`] is also how `locus bench pragh schemes --fabric tcp` loads its graph.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use locus_client::load::{BatchLimits, Batcher, Direction};
use locus_client::{Client, ClientConfig};
use locus_graph::input::Position;
use locus_graph::Csr;
use locus_server::config::PolicySection;
use locus_workloads::traversal::{start_vertices, StartDist};
use serde::Serialize;

use crate::cluster::rmat_csr;
use crate::config::Config;
use crate::output::{MachineMeta, OutDir, Spread};
use crate::processes::{Processes, Spec};
use crate::{BenchError, Preset, Reporter, Result};

/// Deadline of one LOAD batch.
const LOAD_BATCH_DEADLINE: Duration = Duration::from_secs(120);
/// Untimed requests before a run's samples (connections, caches).
const WARM_REQUESTS: usize = 20;
/// Batches queued per sender thread while it sends one.
const SEND_QUEUE_BATCHES: usize = 2;

/// What loading a graph over the client did.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Loaded {
    /// Neighbour ids sent (the CSR's stored edges: both directions).
    pub stored_edges: u64,
    /// Neighbour ids the servers added.
    pub edges_added: u64,
    /// LOAD batches.
    pub batches: u64,
    /// Threads sending batches (each owns a set of homes).
    pub senders: usize,
    /// Seconds from the first edge batched to the last batch acknowledged.
    pub load_s: f64,
    /// Stored edges per second.
    pub stored_edges_per_s: f64,
}

/// Loads `csr`'s adjacency lists, in stored order, into the empty cluster of
/// `client` with LOAD batches (directed: the CSR already holds both
/// directions). `senders` threads send; each owns the homes `h` with
/// `h % senders == i`, so the batches of one vertex arrive in order. Fails
/// if a batch fails or the servers added fewer edges than were sent (the
/// cluster was not empty).
pub fn load_csr(client: &Client, csr: &Csr, senders: usize, r: &Reporter) -> Result<Loaded> {
    let machines = client.machines();
    let senders = senders.clamp(1, machines);
    // Batches by the servers' slot table (whatever its slot count).
    let table = client.slot_table()?;
    let mut batcher = Batcher::with_table(&table, Direction::Directed, BatchLimits::default())
        .map_err(|e| BenchError::setting(e.field, e.value, e.to_string()))?;
    let error: Mutex<Option<BenchError>> = Mutex::new(None);
    let added = std::sync::atomic::AtomicU64::new(0);
    let bar = r.bar(csr.edge_count(), "loading over the client");
    let t0 = Instant::now();
    let batches = std::thread::scope(|s| {
        let mut queues = Vec::with_capacity(senders);
        for _ in 0..senders {
            let (tx, rx) = mpsc::sync_channel::<locus_client::load::Batch>(SEND_QUEUE_BATCHES);
            queues.push(tx);
            let (error, added, bar) = (&error, &added, &bar);
            s.spawn(move || {
                for b in rx {
                    let what = b.to_string();
                    let ids = b.ids as u64;
                    match client.load_batch(b.home as u8, b.vertices, Some(LOAD_BATCH_DEADLINE)) {
                        Ok((_, e)) => {
                            added.fetch_add(e, std::sync::atomic::Ordering::Relaxed);
                            bar.inc(ids);
                        }
                        Err(e) => {
                            error
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(BenchError::Measurement {
                                    experiment: "load over the client",
                                    what: format!("{what}: {e}"),
                                });
                            // Dropping the receiver stops the producer.
                            return;
                        }
                    }
                }
            });
        }
        let mut batches = 0u64;
        let mut send = |b: locus_client::load::Batch| -> bool {
            batches += 1;
            let q = &queues[b.home as usize % senders];
            q.send(b).is_ok()
        };
        'edges: for v in 0..csr.vertex_count() as u32 {
            for (i, &u) in csr.neighbors(v).iter().enumerate() {
                let at = Position::Line(csr.offsets()[v as usize] + i as u64 + 1);
                for b in batcher.push((v, u), at) {
                    if !send(b) {
                        break 'edges;
                    }
                }
            }
        }
        for b in batcher.finish() {
            if !send(b) {
                break;
            }
        }
        batches
    });
    bar.finish_and_clear();
    let load_s = t0.elapsed().as_secs_f64();
    if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let stored = csr.edge_count();
    let edges_added = added.into_inner();
    if edges_added != stored {
        return Err(BenchError::Measurement {
            experiment: "load over the client",
            what: format!(
                "the servers added {edges_added} of the {stored} neighbour ids sent; was the cluster empty?"
            ),
        });
    }
    Ok(Loaded {
        stored_edges: stored,
        edges_added,
        batches,
        senders,
        load_s,
        stored_edges_per_s: stored as f64 / load_s.max(1e-9),
    })
}

/// How the servers of a run are set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setup {
    /// No location cache, no coordinator (Pragh's Orig): a value homed
    /// elsewhere costs a bucket READ and a value READ.
    Orig,
    /// The location cache (as `locus cluster up` runs), no coordinator.
    Cache,
    /// The location cache and a coordinator; measured after the KHOPs were
    /// sent (untimed) until the coordinator's moves stopped.
    Migrated,
}

impl Setup {
    /// Every setup, in run order.
    pub const ALL: [Setup; 3] = [Setup::Orig, Setup::Cache, Setup::Migrated];

    /// The name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Setup::Orig => "orig",
            Setup::Cache => "cache",
            Setup::Migrated => "migrated",
        }
    }

    /// The setup named `s`.
    pub fn parse(s: &str) -> Result<Setup> {
        Setup::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| BenchError::setting("--setups", s, "must be orig, cache or migrated"))
    }
}

/// The coordinator's monitoring interval in the `migrated` setup (Pragh's
/// is 10 s; a shorter one settles within the bench's time).
const MIGRATED_INTERVAL_MS: u64 = 1_000;
/// Longest warm-up of the `migrated` setup.
const MIGRATED_WARM_S_MAX: f64 = 60.0;

/// Settings of `locus bench client`.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// The preset the settings came from.
    pub preset: Preset,
    /// R-MAT scale of the loaded graph (graph seed as in `[graph]`).
    pub scale: u32,
    /// Cluster sizes measured (servers), interleaved within a run.
    pub servers: Vec<usize>,
    /// Server setups measured, interleaved within a run.
    pub setups: Vec<Setup>,
    /// Runs (at least 3 for a median with a spread).
    pub runs: usize,
    /// Timed requests of each kind per run.
    pub samples: usize,
    /// Neighbours per hop (and of the one-vertex read).
    pub k: u32,
    /// Threads sending LOAD batches (1: as `locus load --cluster` does).
    pub senders: usize,
    /// Seed of the start vertices.
    pub seed: u64,
    /// The `locus` executable whose `server` command runs the servers.
    #[serde(skip)]
    pub exe: PathBuf,
}

impl Settings {
    /// quick: scale 16, 1 and 8 servers, 3 runs of 1,000 requests of each
    /// kind; full: scale 20, 3 runs of 5,000.
    pub fn new(preset: Preset, exe: PathBuf) -> Settings {
        let (scale, samples) = match preset {
            Preset::Quick => (16, 1_000),
            Preset::Full => (20, 5_000),
        };
        Settings {
            preset,
            scale,
            servers: vec![1, 8],
            setups: Setup::ALL.to_vec(),
            runs: 3,
            samples,
            k: 100,
            senders: 1,
            seed: 7,
            exe,
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if !(1..=32).contains(&self.scale) {
            return Err(BenchError::setting("--scale", self.scale, "must be 1..=32"));
        }
        if self.servers.is_empty()
            || self
                .servers
                .iter()
                .any(|&n| n == 0 || n > locus_fabric::MACHINES_MAX)
        {
            return Err(BenchError::setting(
                "--servers",
                format!("{:?}", self.servers),
                "must list cluster sizes of 1..=128 servers",
            ));
        }
        if self.setups.is_empty() {
            return Err(BenchError::setting(
                "--setups",
                "(none)",
                "must name at least one of orig, cache, migrated",
            ));
        }
        if self.runs == 0 || self.samples == 0 || self.senders == 0 {
            return Err(BenchError::setting(
                "--runs, --samples, --senders",
                format!("{}, {}, {}", self.runs, self.samples, self.senders),
                "must be positive",
            ));
        }
        if !(1..=locus_client::proto::K_MAX).contains(&self.k) {
            return Err(BenchError::setting("--k", self.k, "must be 1..=1000000"));
        }
        Ok(())
    }
}

/// One run on one cluster size.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// How the servers were set up.
    pub setup: Setup,
    /// Servers.
    pub servers: usize,
    /// Run number (1-based).
    pub run: usize,
    /// The bulk load.
    pub load: Loaded,
    /// NEIGHBORS round trip, median and 99th percentile of the run's samples (us).
    pub neighbors_p50_us: f64,
    /// 99th percentile.
    pub neighbors_p99_us: f64,
    /// KHOP hops=2 round trip, median and 99th percentile (us).
    pub khop_p50_us: f64,
    /// 99th percentile.
    pub khop_p99_us: f64,
    /// Median of the KHOP's own server-side time (`elapsed_ns` of the reply, us).
    pub khop_server_p50_us: f64,
    /// Remote one-sided operations of the KHOPs over all of theirs.
    pub khop_remote_rate: f64,
    /// Mean distinct vertices a KHOP returned.
    pub khop_distinct_mean: f64,
    /// Values the servers moved to themselves before the samples
    /// (`migrated`; STATS `migrations_in`).
    pub migrations: u64,
    /// Seconds of untimed KHOPs before the samples (`migrated`).
    pub warm_s: f64,
    /// The server processes (all gone when the row is returned).
    pub pids: Vec<u32>,
}

/// The runs of one cluster size and setup.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// How the servers were set up.
    pub setup: Setup,
    /// Servers.
    pub servers: usize,
    /// NEIGHBORS round trip (run medians), us.
    pub neighbors_rtt_us: Spread,
    /// KHOP 100 x 100 round trip (run medians), us.
    pub khop_rtt_us: Spread,
    /// KHOP server-side time (run medians), us.
    pub khop_server_us: Spread,
    /// Bulk-load rate, stored edges per second.
    pub load_stored_edges_per_s: Spread,
    /// The KHOP round trip over the smallest cluster's of the same setup,
    /// run by run (1 for the smallest).
    pub khop_vs_smallest: Spread,
    /// Remote one-sided operations of the KHOPs over all of theirs (runs' medians).
    pub khop_remote_rate: Spread,
}

/// What `locus bench client` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The settings.
    pub settings: Settings,
    /// Vertices of the graph.
    pub vertices: u64,
    /// Stored (directed) edges.
    pub stored_edges: u64,
    /// Every run.
    pub runs: Vec<RunRow>,
    /// Median, min and max per cluster size.
    pub summary: Vec<Summary>,
    /// The machine.
    pub machine: MachineMeta,
}

impl Report {
    /// Writes `client.json` (summary and runs) and `client.meta.json` into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        out.json(
            "client.json",
            &serde_json::json!({"summary": self.summary, "runs": self.runs}),
        )?;
        let meta = serde_json::json!({
            "experiment": "client",
            "settings": self.settings,
            "vertices": self.vertices,
            "stored_edges": self.stored_edges,
            "graph_seed": Config::default().graph.seed,
            "machine": self.machine,
        });
        out.json("client.meta.json", &meta)?;
        Ok(out.written().to_vec())
    }
}

/// The cluster file sections of a cluster of `servers` sized for `csr`,
/// set up as `setup` says.
fn spec(setup: Setup, csr: &Csr, servers: usize, exe: &std::path::Path) -> Spec {
    let mut c = crate::cluster::store_config(csr, servers, &Config::default());
    if setup == Setup::Orig {
        c.cache_bytes_max = 0;
    } else if c.cache_bytes_max == 0 {
        c.cache_bytes_max = SERVER_CACHE_MB << 20;
    }
    Spec {
        exe: exe.to_path_buf(),
        machines: servers,
        store: crate::pragh::tcp::store_section(&c),
        policy: PolicySection {
            interval_ms: MIGRATED_INTERVAL_MS,
            ..PolicySection::default()
        },
        coordinator: setup == Setup::Migrated,
        lifetime_s: 900,
    }
}

/// The location cache of the `cache` and `migrated` setups, MiB per server
/// (the cluster file's default).
const SERVER_CACHE_MB: u64 = 64;

/// The `p` quantile of sorted nanoseconds, in microseconds.
fn pct_us(sorted_ns: &[u64], p: f64) -> f64 {
    locus_workloads::traversal::percentile_us(sorted_ns, p)
}

/// One run of `servers` servers set up as `setup`.
#[allow(clippy::too_many_arguments)]
fn one_run(
    s: &Settings,
    setup: Setup,
    servers: usize,
    run: usize,
    csr: &Csr,
    starts: &[u32],
    config: &ClientConfig,
    r: &Reporter,
) -> Result<RunRow> {
    let mut procs = Processes::start(&spec(setup, csr, servers, &s.exe), r)?;
    let client = procs.client(config.clone())?;
    let load = load_csr(&client, csr, s.senders, r)?;
    let (mut migrations, mut warm_s) = (0, 0.0);
    if setup == Setup::Migrated {
        (migrations, warm_s) = settle(&client, starts, s.k, &mut procs, r)?;
    }
    let mut nb = Vec::with_capacity(s.samples);
    for (i, &v) in starts.iter().enumerate() {
        let t = Instant::now();
        let ids = client.neighbors(v, s.k)?;
        let ns = t.elapsed().as_nanos() as u64;
        if ids.len() != s.k as usize {
            return Err(BenchError::Measurement {
                experiment: "client",
                what: format!(
                    "NEIGHBORS of vertex {v} returned {} ids, expected {}",
                    ids.len(),
                    s.k
                ),
            });
        }
        if i >= WARM_REQUESTS {
            nb.push(ns);
        }
    }
    let (mut kh, mut server) = (Vec::new(), Vec::new());
    let (mut local, mut remote, mut distinct) = (0u64, 0u64, 0u64);
    for (i, &v) in starts.iter().enumerate() {
        let t = Instant::now();
        let q = client.khop(v, 2, s.k)?;
        let ns = t.elapsed().as_nanos() as u64;
        if i >= WARM_REQUESTS {
            kh.push(ns);
            server.push(q.elapsed_ns);
            local += q.local_ops;
            remote += q.remote_ops;
            distinct += q.distinct.len() as u64;
        }
    }
    procs.check()?;
    let pids = procs.pids();
    drop(client);
    procs.stop();
    for v in [&mut nb, &mut kh, &mut server] {
        v.sort_unstable();
    }
    Ok(RunRow {
        setup,
        servers,
        run,
        load,
        neighbors_p50_us: pct_us(&nb, 0.5),
        neighbors_p99_us: pct_us(&nb, 0.99),
        khop_p50_us: pct_us(&kh, 0.5),
        khop_p99_us: pct_us(&kh, 0.99),
        khop_server_p50_us: pct_us(&server, 0.5),
        khop_remote_rate: remote as f64 / (local + remote).max(1) as f64,
        khop_distinct_mean: distinct as f64 / kh.len().max(1) as f64,
        migrations,
        warm_s,
        pids,
    })
}

/// Sends the run's KHOPs (untimed) in windows of 1.5 monitoring intervals
/// until two windows in a row move no value (the coordinator listens an
/// interval before its first approval), or [`MIGRATED_WARM_S_MAX`]. Returns
/// the values moved and the seconds it took.
fn settle(
    client: &Client,
    starts: &[u32],
    k: u32,
    procs: &mut Processes,
    r: &Reporter,
) -> Result<(u64, f64)> {
    let window = Duration::from_millis(MIGRATED_INTERVAL_MS * 3 / 2);
    let t0 = Instant::now();
    let (mut last, mut still) = (None, 0);
    let mut i = 0;
    loop {
        let w0 = Instant::now();
        while w0.elapsed() < window {
            client.khop(starts[i % starts.len()], 2, k)?;
            i += 1;
        }
        procs.check()?;
        let moved = crate::pragh::tcp::migrations_in(client)?;
        r.note(format!(
            "  {:.0} s: {moved} values moved",
            t0.elapsed().as_secs_f64()
        ));
        still = if last == Some(moved) { still + 1 } else { 0 };
        if still >= 2 || t0.elapsed().as_secs_f64() > MIGRATED_WARM_S_MAX {
            return Ok((moved, t0.elapsed().as_secs_f64()));
        }
        last = Some(moved);
    }
}

/// Runs `locus bench client`.
pub fn run(s: &Settings, r: &Reporter) -> Result<Report> {
    s.validate()?;
    let mut machine = MachineMeta::start();
    let mut g = Config::default().graph;
    g.scale = s.scale;
    r.note(format!("generating R-MAT scale {} ...", s.scale));
    let csr = rmat_csr(&g)?;
    let starts = start_vertices(
        csr.vertex_count(),
        s.samples + WARM_REQUESTS,
        StartDist::Uniform,
        s.seed,
        |v| csr.degree(v) >= u64::from(s.k),
    )?;
    let config = ClientConfig {
        deadline: Duration::from_secs(60),
        ..ClientConfig::default()
    };
    let mut runs = Vec::new();
    for run in 1..=s.runs {
        for &setup in &s.setups {
            for &servers in &s.servers {
                r.note(format!(
                    "run {run}: {servers} server(s), {} ...",
                    setup.name()
                ));
                runs.push(one_run(s, setup, servers, run, &csr, &starts, &config, r)?);
            }
        }
    }
    let mut summary = Vec::new();
    for &setup in &s.setups {
        let smallest = s.servers.iter().copied().min().unwrap_or(1);
        for &n in &s.servers {
            let mine = || runs.iter().filter(|x| x.setup == setup && x.servers == n);
            let of = |f: &dyn Fn(&RunRow) -> f64| Spread::of(mine().map(f));
            let base = |x: &RunRow| {
                runs.iter()
                    .find(|y| y.setup == setup && y.servers == smallest && y.run == x.run)
                    .map_or(f64::NAN, |y| x.khop_p50_us / y.khop_p50_us)
            };
            summary.push(Summary {
                setup,
                servers: n,
                neighbors_rtt_us: of(&|x| x.neighbors_p50_us),
                khop_rtt_us: of(&|x| x.khop_p50_us),
                khop_server_us: of(&|x| x.khop_server_p50_us),
                load_stored_edges_per_s: of(&|x| x.load.stored_edges_per_s),
                khop_vs_smallest: Spread::of(mine().map(base)),
                khop_remote_rate: of(&|x| x.khop_remote_rate),
            });
        }
    }
    machine.finish();
    Ok(Report {
        settings: s.clone(),
        vertices: csr.vertex_count(),
        stored_edges: csr.edge_count(),
        runs,
        summary,
        machine,
    })
}
