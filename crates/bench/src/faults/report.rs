//! REPORT: the figures of a fault run (`faults.json`) and its timeline
//! (`faults-timeline.png`: operations that succeeded per second, in 100 ms
//! bins, and a step line that is high while a fault window is open).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use locus_plot::{LineChart, Series};
use serde::Serialize;

use super::check::Checked;
use super::clients::{Op, OpKind, Outcome};
use super::nemesis::{self, WindowRecord};
use super::Settings;
use crate::output::OutDir;
use crate::Result;

/// Width of a timeline bin.
const BIN_MS: u64 = 100;

/// One fault window with its operations.
#[derive(Debug, Clone, Serialize)]
pub struct WindowRow {
    /// The window.
    #[serde(flatten)]
    pub window: WindowRecord,
    /// Operations invoked while it was open.
    pub ops: u64,
    /// Of those, the ones that got a reply.
    pub succeeded: u64,
    /// `succeeded / ops` (1 when no operation was made).
    pub availability: f64,
}

/// What `locus bench faults` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The schedule's seed.
    pub seed: u64,
    /// The settings.
    pub settings: Settings,
    /// Operations made (retries included).
    pub ops: u64,
    /// Of those, the ones that got a reply.
    pub ops_succeeded: u64,
    /// Operations by kind.
    pub ops_by_kind: BTreeMap<&'static str, u64>,
    /// Acknowledged inserts and deletes by the server that took them (the
    /// home by the client's slot table): a server that joined has some
    /// once the clients follow the table to it.
    pub updates_by_server: BTreeMap<u8, u64>,
    /// Failures with no effect (`NOT_READY`).
    pub failed_no_effect: u64,
    /// Failures whose effect is unknown.
    pub failed_unknown: u64,
    /// Retries (each also an operation).
    pub retries: u64,
    /// Failures by reason (digits masked), most frequent first, at most 12.
    pub failure_reasons: Vec<(String, u64)>,
    /// The check.
    #[serde(flatten)]
    pub checked: Checked,
    /// Faults injected, by kind.
    pub faults_injected: BTreeMap<&'static str, u64>,
    /// Kinds the duration left no window for.
    pub kinds_not_scheduled: Vec<&'static str>,
    /// Windows whose probe did not show the fault.
    pub probes_failed: u64,
    /// Every window.
    pub windows: Vec<WindowRow>,
    /// Migrations the servers reported at the end (since each process started).
    pub migrations: Option<u64>,
    /// Whether the loaded vertices ran out before the end.
    pub vertices_exhausted: bool,
    /// When the clients stopped (ms).
    pub ops_end_ms: u64,
    /// Throughput per 100 ms bin (operations that succeeded).
    #[serde(skip)]
    pub timeline: Vec<u64>,
    /// Slot moves made all along (`--slot-moves`).
    pub slot_moves: Option<super::SlotMoves>,
    /// With `--replication` above 1: what failed over, by etcd's table at
    /// the end (None: etcd did not answer).
    pub failovers: Option<super::elastic::FailedOver>,
}

impl Report {
    /// Whether the run passed: no violation, no lost write, every probe positive.
    pub fn passed(&self) -> bool {
        self.checked.violations == 0
            && self.checked.lost_acknowledged_writes == 0
            && self.probes_failed == 0
    }

    /// Why it did not pass, in one line.
    pub fn failure(&self) -> Option<String> {
        (!self.passed()).then(|| {
            format!(
                "the fault run failed (seed {}): {} violations, {} lost acknowledged writes, {} failed probes",
                self.seed,
                self.checked.violations,
                self.checked.lost_acknowledged_writes,
                self.probes_failed
            )
        })
    }

    /// Writes `faults.json` and `faults-timeline.png` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        out.json("faults.json", self)?;
        let png = out.path("faults-timeline.png");
        let ops: Vec<(f64, f64)> = self
            .timeline
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                (
                    i as f64 * BIN_MS as f64 / 1e3,
                    n as f64 * 1e3 / BIN_MS as f64,
                )
            })
            .collect();
        let high = ops.iter().map(|p| p.1).fold(1.0, f64::max);
        let mut faults = vec![(0.0, 0.0)];
        for w in &self.windows {
            let (a, b) = (w.window.start_ms as f64 / 1e3, w.window.end_ms as f64 / 1e3);
            faults.extend([(a, 0.0), (a, high), (b, high), (b, 0.0)]);
        }
        faults.push((self.ops_end_ms as f64 / 1e3, 0.0));
        LineChart {
            title: format!("locus bench faults, seed {}", self.seed),
            x_label: "time (s)".into(),
            y_label: "operations that succeeded per s".into(),
            series: vec![
                Series {
                    label: "throughput (100 ms bins)".into(),
                    points: ops,
                },
                Series {
                    label: "fault window open".into(),
                    points: faults,
                },
            ],
            ..LineChart::default()
        }
        .write_png(&png)?;
        out.wrote(png);
        Ok(out.written().to_vec())
    }
}

/// Assembles the report.
#[allow(clippy::too_many_arguments)]
pub fn build(
    s: &Settings,
    ops: &[Op],
    retries: u64,
    windows: Vec<WindowRecord>,
    checked: Checked,
    migrations: Option<u64>,
    ops_end_ms: u64,
    vertices_exhausted: bool,
) -> Report {
    let ok = |o: &Op| o.outcome == Outcome::Ok;
    let mut ops_by_kind = BTreeMap::new();
    for o in ops {
        let k = match o.kind {
            OpKind::Insert => "insert",
            OpKind::Delete => "delete",
            OpKind::Read => "read",
            OpKind::TwoHop => "two_hop",
        };
        *ops_by_kind.entry(k).or_insert(0) += 1;
    }
    let mut updates_by_server = BTreeMap::new();
    for o in ops.iter().filter(|o| ok(o)) {
        if matches!(o.kind, OpKind::Insert | OpKind::Delete) {
            *updates_by_server.entry(o.event.machine).or_insert(0) += 1;
        }
    }
    let bins = (ops_end_ms / BIN_MS + 1) as usize;
    let mut timeline = vec![0u64; bins];
    for o in ops.iter().filter(|o| ok(o)) {
        let b = (o.event.response_ns / 1_000_000 / BIN_MS) as usize;
        if b < bins {
            timeline[b] += 1;
        }
    }
    let faults_injected = nemesis::injected(&windows);
    let kinds_not_scheduled = nemesis::Kind::ALL
        .iter()
        .map(|k| k.name())
        .filter(|k| !faults_injected.contains_key(k))
        .collect();
    let probes_failed = windows.iter().filter(|w| !w.probe_ok).count() as u64;
    let windows = windows
        .into_iter()
        .map(|w| {
            let inside: Vec<&Op> = ops
                .iter()
                .filter(|o| {
                    let t = o.event.invoke_ns / 1_000_000;
                    t >= w.start_ms && t < w.end_ms
                })
                .collect();
            let n = inside.len() as u64;
            let good = inside.iter().filter(|o| ok(o)).count() as u64;
            WindowRow {
                window: w,
                ops: n,
                succeeded: good,
                availability: if n == 0 { 1.0 } else { good as f64 / n as f64 },
            }
        })
        .collect();
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    for o in ops {
        if let Outcome::Failed(why) | Outcome::Unknown(why) = &o.outcome {
            let masked: String = why
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .take(160)
                .collect();
            *reasons.entry(masked).or_insert(0) += 1;
        }
    }
    let mut failure_reasons: Vec<(String, u64)> = reasons.into_iter().collect();
    failure_reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    failure_reasons.truncate(12);
    Report {
        seed: s.seed,
        failure_reasons,
        settings: s.clone(),
        ops: ops.len() as u64,
        ops_succeeded: ops.iter().filter(|o| ok(o)).count() as u64,
        ops_by_kind,
        updates_by_server,
        failed_no_effect: ops
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Failed(_)))
            .count() as u64,
        failed_unknown: ops
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Unknown(_)))
            .count() as u64,
        retries,
        checked,
        faults_injected,
        kinds_not_scheduled,
        probes_failed,
        windows,
        migrations,
        vertices_exhausted,
        ops_end_ms,
        timeline,
        slot_moves: None,
        failovers: None,
    }
}
