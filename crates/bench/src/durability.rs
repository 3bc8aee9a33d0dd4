//! `locus bench durability`: what logging every acknowledged update costs
//! (issue 15). The same update workload against server processes with
//! `[durability]` off, with `sync = "interval"` and with `sync = "always"`.
//!
//! One run of one mode: start `servers` servers (no coordinator, no
//! location cache), LOAD `vertices` short lists (one batch per home), then
//! `clients` threads each send updates one at a time for `duration_s`:
//! INSERT_EDGE (60%), DELETE_EDGE (20%) and PUT of 4 ids (20%) on uniform
//! random vertices, each sent to the vertex's home and timed at the client
//! from request to acknowledgement. A run's figures: acknowledged updates
//! per second, and the p50 and p99 of its latencies; the servers' log
//! counters give records per group (what group commit shares). Modes are
//! interleaved within a run; the report gives the median of the runs with
//! their minimum and maximum.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use locus_client::{Client, ClientConfig};
use locus_server::config::{DurabilitySection, PolicySection, StoreSection};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::output::{MachineMeta, OutDir, Spread};
use crate::processes::{Processes, Spec};
use crate::{BenchError, Preset, Reporter, Result};

/// Updates of a thread's first ones left untimed (connections).
const WARM_UPDATES: usize = 20;

/// Settings of `locus bench durability`.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// The preset the settings came from.
    pub preset: Preset,
    /// Servers (machines).
    pub servers: usize,
    /// Client threads, each with one update in flight.
    pub clients: usize,
    /// Vertices loaded and updated.
    pub vertices: u32,
    /// Seconds of updates per run and mode.
    pub duration_s: u64,
    /// Runs (at least 3 for a median with a spread).
    pub runs: usize,
    /// `interval_ms` of the interval mode.
    pub interval_ms: u64,
    /// Seed of the update streams.
    pub seed: u64,
    /// The `locus` executable whose `server` command runs the servers.
    #[serde(skip)]
    pub exe: PathBuf,
}

impl Settings {
    /// quick: 3 servers, 8 clients, 65,536 vertices, 5 s per mode and run;
    /// full: 20 s.
    pub fn new(preset: Preset, exe: PathBuf) -> Settings {
        Settings {
            preset,
            servers: 3,
            clients: 8,
            vertices: 1 << 16,
            duration_s: match preset {
                Preset::Quick => 5,
                Preset::Full => 20,
            },
            runs: 3,
            interval_ms: 10,
            seed: 15,
            exe,
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if !(1..=locus_fabric::MACHINES_MAX).contains(&self.servers) {
            return Err(BenchError::setting(
                "--servers",
                self.servers,
                "must be 1..=128",
            ));
        }
        if !(1..=256).contains(&self.clients) {
            return Err(BenchError::setting(
                "--clients",
                self.clients,
                "must be 1..=256",
            ));
        }
        if !(1..=1 << 24).contains(&self.vertices) {
            return Err(BenchError::setting(
                "--vertices",
                self.vertices,
                "must be 1..=16777216",
            ));
        }
        if self.runs == 0 || !(1..=3600).contains(&self.duration_s) {
            return Err(BenchError::setting(
                "--runs, --duration-s",
                format!("{}, {}", self.runs, self.duration_s),
                "runs must be positive, duration 1..=3600 s",
            ));
        }
        if !(1..=60_000).contains(&self.interval_ms) {
            return Err(BenchError::setting(
                "--interval-ms",
                self.interval_ms,
                "must be 1..=60000",
            ));
        }
        Ok(())
    }

    /// The modes, in the order each run measures them.
    pub fn modes(&self) -> Vec<String> {
        vec![
            "off".into(),
            format!("interval {} ms", self.interval_ms),
            "always".into(),
        ]
    }

    fn section(&self, mode: usize) -> Option<DurabilitySection> {
        let d = DurabilitySection {
            dir: "data".into(),
            interval_ms: self.interval_ms,
            // Longer than any run: the figures are the log's, not a checkpoint's.
            checkpoint_interval_s: 3600,
            ..DurabilitySection::default()
        };
        match mode {
            0 => None,
            1 => Some(DurabilitySection {
                sync: "interval".into(),
                ..d
            }),
            _ => Some(d),
        }
    }
}

/// One run of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// The mode ("off", "interval N ms", "always").
    pub mode: String,
    /// Run number (1-based).
    pub run: usize,
    /// Acknowledged updates.
    pub updates: u64,
    /// Acknowledged updates per second.
    pub updates_per_s: f64,
    /// Latency from request to acknowledgement, median (us).
    pub p50_us: f64,
    /// 99th percentile (us).
    pub p99_us: f64,
    /// Log records over groups written, all servers (0 without a log).
    pub records_per_group: f64,
    /// fdatasync calls, all servers.
    pub syncs: u64,
    /// The server processes (all gone when the row is returned).
    pub pids: Vec<u32>,
}

/// The runs of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The mode.
    pub mode: String,
    /// Acknowledged updates per second (run figures).
    pub updates_per_s: Spread,
    /// Median latency (run figures), us.
    pub p50_us: Spread,
    /// 99th percentile (run figures), us.
    pub p99_us: Spread,
    /// Records per group (run figures).
    pub records_per_group: Spread,
}

/// What `locus bench durability` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The settings.
    pub settings: Settings,
    /// Every run.
    pub runs: Vec<RunRow>,
    /// Median, min and max per mode.
    pub summary: Vec<Summary>,
    /// The machine.
    pub machine: MachineMeta,
}

impl Report {
    /// Writes `durability.json` (summary and runs) and `durability.meta.json` into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        out.json(
            "durability.json",
            &serde_json::json!({"summary": self.summary, "runs": self.runs}),
        )?;
        out.json(
            "durability.meta.json",
            &serde_json::json!({"experiment": "durability", "settings": self.settings, "machine": self.machine}),
        )?;
        Ok(out.written().to_vec())
    }
}

fn spec(s: &Settings) -> Spec {
    Spec {
        exe: s.exe.clone(),
        machines: s.servers,
        store: StoreSection {
            value_region_mb: Some(256),
            cache_mb: 0,
            ..StoreSection::default()
        },
        policy: PolicySection::default(),
        coordinator: false,
        lifetime_s: 900,
    }
}

/// One thread's updates until `until`: latencies (ns) of the timed ones.
fn updates(c: &Client, vertices: u32, seed: u64, until: Instant) -> Result<Vec<u64>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut lat = Vec::new();
    let mut i = 0usize;
    while Instant::now() < until {
        let v = rng.gen_range(0..vertices);
        let u = rng.gen_range(0..vertices);
        let t = Instant::now();
        match rng.gen_range(0..10) {
            0..=5 => c.insert_edge(v, u).map(|_| ())?,
            6 | 7 => c.delete_edge(v, u).map(|_| ())?,
            _ => c.put(v, &[u, u ^ 1, u ^ 2, u ^ 3])?,
        }
        let ns = t.elapsed().as_nanos() as u64;
        if i >= WARM_UPDATES {
            lat.push(ns);
        }
        i += 1;
    }
    Ok(lat)
}

fn one_run(s: &Settings, mode: usize, run: usize, r: &Reporter) -> Result<RunRow> {
    let name = s.modes()[mode].clone();
    r.note(format!("run {run}: durability {name} ..."));
    let mut procs = Processes::start_durable(&spec(s), s.section(mode), r)?;
    let config = ClientConfig {
        deadline: Duration::from_secs(60),
        ..ClientConfig::default()
    };
    let client = procs.client(config.clone())?;
    let machines = client.machines() as u32;
    for home in 0..machines {
        let batch: Vec<(u32, Vec<u32>)> = (home..s.vertices)
            .step_by(machines as usize)
            .map(|v| (v, vec![(v + 1) % s.vertices]))
            .collect();
        client.load_batch(home as u8, batch, Some(Duration::from_secs(120)))?;
    }
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs(s.duration_s);
    let results: Vec<Result<Vec<u64>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..s.clients)
            .map(|i| {
                let c = procs.client(config.clone());
                let seed = s.seed ^ ((run as u64) << 32) ^ i as u64;
                sc.spawn(move || updates(&c?, s.vertices, seed, until))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Measurement {
                        experiment: "durability",
                        what: "a client thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let mut lat = Vec::new();
    for x in results {
        lat.extend(x?);
    }
    let (mut records, mut groups, mut syncs) = (0u64, 0u64, 0u64);
    for id in 0..machines as u8 {
        let st = client.stats(id)?;
        let d = &st["durability"];
        records += d["records"].as_u64().unwrap_or(0);
        groups += d["groups"].as_u64().unwrap_or(0);
        syncs += d["syncs"].as_u64().unwrap_or(0);
    }
    procs.check()?;
    let pids = procs.pids();
    drop(client);
    procs.stop();
    lat.sort_unstable();
    let updates = lat.len() as u64;
    Ok(RunRow {
        mode: name,
        run,
        updates,
        updates_per_s: updates as f64 / elapsed.max(1e-9),
        p50_us: locus_workloads::traversal::percentile_us(&lat, 0.5),
        p99_us: locus_workloads::traversal::percentile_us(&lat, 0.99),
        records_per_group: if groups == 0 {
            0.0
        } else {
            records as f64 / groups as f64
        },
        syncs,
        pids,
    })
}

/// Runs `locus bench durability`.
pub fn run(s: &Settings, r: &Reporter) -> Result<Report> {
    s.validate()?;
    let mut machine = MachineMeta::start();
    let mut runs = Vec::new();
    for run in 1..=s.runs {
        for mode in 0..s.modes().len() {
            runs.push(one_run(s, mode, run, r)?);
        }
    }
    let summary = s
        .modes()
        .into_iter()
        .map(|m| {
            let of =
                |f: &dyn Fn(&RunRow) -> f64| Spread::of(runs.iter().filter(|x| x.mode == m).map(f));
            Summary {
                updates_per_s: of(&|x| x.updates_per_s),
                p50_us: of(&|x| x.p50_us),
                p99_us: of(&|x| x.p99_us),
                records_per_group: of(&|x| x.records_per_group),
                mode: m,
            }
        })
        .collect();
    machine.finish();
    Ok(Report {
        settings: s.clone(),
        runs,
        summary,
        machine,
    })
}
