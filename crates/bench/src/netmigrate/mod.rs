//! `locus bench netmigrate <experiment>`: NetMigrate's evaluation (section 6) on the
//! `locus-kvmigrate` runtime: one router thread and two server threads in this process over
//! the in-process transport, closed-loop clients issuing YCSB queries (scrambled Zipfian 0.99,
//! 4-byte key space, 64-byte values) while shard 1 moves from server 1 to server 2.
//!
//! - `overall` (Figs. 4-6): every protocol under YCSB-B (5% writes), source budget 100%, and
//!   NetMigrate at its three policies (long 100%, medium 70%, short 40% source budget);
//!   throughput, p50 and p99 timelines. With `--backend redis`, one more row: Redis Cluster's
//!   own live resharding (`redis-cli --cluster reshard` moving every slot between two
//!   cluster-mode `redis-server`s, a client following MOVED and ASK) under the same load.
//! - `filters` (Table 2): BF and CBF sizes, scaled to this run's group count by bits per group.
//! - `groups` (Table 3): keys per migration group.
//! - `bandwidth` (Table 4): client- and server-side extra bytes as a share of each side's total.
//! - `budgets` (Tables 5-7): write ratios 0/10/20/30% x source budgets 100/70/40%.
//!
//! Servers run with `mirror_writes = false` (the paper's protocol: the destination acks its
//! writes without copying them back to the source); NetMigrate with the crate's default
//! (mirrored writes, which keeps an aborted migration lossless) is its own row everywhere.
//! Every run uses the same seed, so protocols see the same key sequences. Every run checks that
//! what its clients saw is linearizable per key (`locus_kvmigrate::history`, every key) and
//! reports `violations` beside `failed_ops` and `lost_ops`. `--fault-skip-double-read` breaks
//! the router's double read on purpose (`RouterConfig::fault_double_read_source_only`) to show
//! that the checker catches it: such rows carry a `fault` field and report violations. It
//! implies `--read-back-writes` (each write followed by a read of its key), the workload in
//! which it shows: a stale read needs a read of a key written at the destination while its
//! group is still in S2 (or S4), and with the paper's filters and a pipelined copy those
//! windows are short, so YCSB's own reads seldom land in one (the mechanism of `overall`'s
//! NetMigrate rows; `filters`' small CBFs hold most groups in S2 for the whole copy).
//!
//! [`Settings::new`] turns an experiment, a [`Preset`](crate::Preset) and a backend into the
//! run's sizes; callers override fields, and [`Settings::resolve`] validates
//! them (naming the flag) into the [`RunSettings`] the `.meta.json` records.

mod cases;
mod derived;
mod plots;
mod run;
mod settings;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

pub use self::run::{Row, FAULT_SKIP_DOUBLE_READ};
pub use self::settings::{find_on_path, RunSettings, Settings};
use crate::output::{MachineMeta, OutDir};
use crate::{Reporter, Result};

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
        for png in plots::plot(self.results.experiment, &self.results.rows, dir, &base)? {
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
    if s.fault_skip_double_read {
        r.note(format!(
            "fault injection, not a measurement: {FAULT_SKIP_DOUBLE_READ}; every write is read \
             back; the history checker should report violations"
        ));
    }
    let (rows, derived) = match experiment {
        Experiment::Overall => {
            let rows = run::run_all(&s, &cases::overall_cases(&s), true, r)?;
            let d = derived::overall_derived(&rows);
            (rows, d)
        }
        Experiment::Filters => (
            run::run_all(&s, &cases::filter_cases(&s), false, r)?,
            serde_json::Value::Null,
        ),
        Experiment::Groups => (
            run::run_all(&s, &cases::group_cases(&s), false, r)?,
            serde_json::Value::Null,
        ),
        Experiment::Bandwidth | Experiment::Budgets => {
            let rows = run::run_all(&s, &cases::matrix_cases(&s), false, r)?;
            let d = derived::matrix_derived(&rows);
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
