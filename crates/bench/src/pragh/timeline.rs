//! Throughput timelines (Pragh Figs. 14, 15): a scheme's cluster runs phases
//! of operations from a cold start with its driver on, and query completions
//! are binned over time; recovery is the time after each switch until a bin
//! reaches 90% of the phase's final level.

use std::time::Instant;

use locus_coordinator::Mode;
use locus_workloads::traversal::{repeat_fresh, Op, TwoHop};
use serde::Serialize;

use super::graph::Graph;
use super::scheme::{endpoints, move_shards_optimally, Running, Scheme};
use super::Settings;
use crate::{Reporter, Result};

/// A point of a throughput timeline.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TimePoint {
    /// Middle of the bin, seconds since the run started.
    pub t_s: f64,
    /// Queries completed in the bin per second.
    pub throughput_qps: f64,
}

/// One timeline of a timeline experiment.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// The scheme.
    pub scheme: String,
    /// Eager or deferred migration.
    pub mode: String,
    /// Whole bins only.
    pub points: Vec<TimePoint>,
    /// Times (s) when the workload switched (dynamic).
    pub switches_s: Vec<f64>,
    /// Per switch: seconds until throughput first reached 90% of the
    /// phase's final level (`None` if it never did).
    pub recover_s: Vec<Option<f64>>,
    /// Migrations the coordinator approved.
    pub migrations_approved: u64,
    /// Bytes moved by migrations (or shard moves).
    pub bytes_moved: u64,
}

/// Runs `phases` (each an op sequence, cycled for `phase_s` seconds) on a
/// fresh cluster of `scheme`, recording query completions in bins of a
/// quarter interval; the driver runs from the start (no warm-up). Shard
/// re-plans one interval into each phase.
pub(super) fn timeline(
    scheme: Scheme,
    mode: Mode,
    graph: &Graph,
    p: &Settings,
    phases: &[Vec<Op>],
    phase_s: f64,
    r: &Reporter,
) -> Result<Timeline> {
    let bin_s = p.interval_ms as f64 / 4000.0;
    let ends = endpoints(graph);
    let run = Running::start(
        scheme,
        graph,
        &p.config(),
        p.machines,
        p.interval_ms,
        mode,
        r,
    )?;
    let q = TwoHop {
        k: p.k,
        pipelined: false,
    };
    let chunk = 4_000usize;
    let t0 = Instant::now();
    let mut done: Vec<f64> = Vec::new();
    let mut switches = Vec::new();
    let mut bytes_moved = 0;
    for (i, ops) in phases.iter().enumerate() {
        let start = t0.elapsed().as_secs_f64();
        switches.push(start);
        let mut replanned = scheme != Scheme::Shard;
        let mut at = 0usize;
        let label = format!("{} phase {i}", scheme.name());
        while t0.elapsed().as_secs_f64() - start < phase_s {
            if !replanned && t0.elapsed().as_secs_f64() - start >= p.interval_ms as f64 / 1000.0 {
                bytes_moved += move_shards_optimally(&run.cluster, ops, graph, p.k, r)?.1;
                replanned = true;
            }
            let rep = (at / ops.len().max(1)) as u64;
            let seq: Vec<Op> = repeat_fresh(ops, rep, 2, &ends)
                .into_iter()
                .skip(at % ops.len().max(1))
                .take(chunk)
                .collect();
            at += chunk;
            let offset = t0.elapsed().as_secs_f64();
            let report = run.run(&seq, q, p.threads, &label, r)?;
            done.extend(
                report
                    .done_at_s
                    .iter()
                    .zip(&report.done_is_query)
                    .filter(|(_, q)| **q)
                    .map(|(t, _)| t + offset),
            );
        }
    }
    let end = t0.elapsed().as_secs_f64();
    let (approved, moved_bytes) = match &run.driver {
        Some(_) => {
            let (_, bytes, approved) = run.moved();
            (approved, bytes)
        }
        None => (0, bytes_moved),
    };
    run.check()?;
    let points = bin(&done, end, bin_s);
    let recover = recovery(&points, &switches, end, bin_s);
    Ok(Timeline {
        scheme: scheme.name().into(),
        mode: format!("{mode:?}").to_lowercase(),
        points,
        switches_s: switches,
        recover_s: recover,
        migrations_approved: approved,
        bytes_moved: moved_bytes,
    })
}

/// Completion times binned into whole bins of `bin_s` up to `end` (a last
/// partial bin would read as a drop).
pub fn bin(done_s: &[f64], end_s: f64, bin_s: f64) -> Vec<TimePoint> {
    let bins = ((end_s / bin_s).floor() as usize).max(1);
    let mut counts = vec![0u64; bins];
    for t in done_s {
        if let Some(c) = counts.get_mut((t / bin_s) as usize) {
            *c += 1;
        }
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| TimePoint {
            t_s: (i as f64 + 0.5) * bin_s,
            throughput_qps: c as f64 / bin_s,
        })
        .collect()
}

/// Per phase, the time from its switch to the first bin at >= 90% of the
/// level of the phase's last three full bins.
pub fn recovery(
    points: &[TimePoint],
    switches_s: &[f64],
    end_s: f64,
    bin_s: f64,
) -> Vec<Option<f64>> {
    let mut recover = Vec::new();
    for (i, &sw) in switches_s.iter().enumerate() {
        let stop = switches_s.get(i + 1).copied().unwrap_or(end_s);
        let phase: Vec<&TimePoint> = points
            .iter()
            .filter(|pt| pt.t_s >= sw && pt.t_s < stop - bin_s)
            .collect();
        let tail = phase.len().clamp(1, 3);
        let level = phase
            .iter()
            .rev()
            .take(tail)
            .map(|pt| pt.throughput_qps)
            .sum::<f64>()
            / tail as f64;
        recover.push(
            phase
                .iter()
                .find(|pt| pt.throughput_qps >= 0.9 * level)
                .map(|pt| pt.t_s - sw),
        );
    }
    recover
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_whole_and_recovery_is_the_first_bin_near_the_final_level() {
        // 10 completions per 0.1 s for 0.5 s, then 30 per 0.1 s.
        let mut done = Vec::new();
        for b in 0..12 {
            let n = if b < 5 { 10 } else { 30 };
            for i in 0..n {
                done.push(b as f64 * 0.1 + i as f64 * 0.1 / n as f64);
            }
        }
        let points = bin(&done, 1.25, 0.1);
        assert_eq!(points.len(), 12, "the partial last bin is dropped");
        assert!((points[0].throughput_qps - 100.0).abs() < 1e-6);
        assert!((points[7].throughput_qps - 300.0).abs() < 1e-6);
        let rec = recovery(&points, &[0.0], 1.25, 0.1);
        let r = rec[0].expect("recovers");
        assert!((r - 0.55).abs() < 1e-9, "{r}");
        // A phase that never reaches its level is None only if it has no bins.
        assert_eq!(recovery(&[], &[0.0], 1.0, 0.1), vec![None]);
    }
}
