//! Interleaved measurement (`--slices`): the schemes of a round measured in
//! turns of short parts, so that a slow spell of the host falls on all of
//! them alike instead of on whichever scheme it happened to meet.
//!
//! Why: on this shared 2-core VM the CPU-bound schemes drift with the host.
//! Ideal alone, in consecutive 2 s windows of one process, ran 162k-210k
//! queries/s, and 164k-201k in 6 s windows (docs/results.md, stop 46): the
//! slow spells last seconds, longer than a window, so a longer window does
//! not average them out, while a scheme measured minutes after another
//! meets a different host.
//!
//! How, and what holds:
//! - Every scheme of the round is warmed up first (in the round's order)
//!   and paused as its warm-up ends ([`super::scheme::Running::pause`]: its
//!   driver's threads wait, its services answer messages but collect no
//!   garbage); all the clusters stay in this process. A scheme is resumed
//!   for its parts only, so its background work (a backlog of reports, the
//!   replicas its updates invalidated) runs in its own parts and counts as
//!   its own background CPU, not in another scheme's turn.
//! - Measuring runs in cycles. In each cycle every scheme still measuring
//!   runs one part; cycle `c` starts with the `c`-th scheme of the round's
//!   order, so no scheme always runs right after another.
//! - Each scheme runs the same measured stream from its start (the measured
//!   sequence, then fresh draws of it), as far as its speed takes it. Each
//!   of the first `slices` parts runs at least a `slices`-th of the measured
//!   sequence, so that sequence is always measured whole, and otherwise what
//!   the scheme's last rate (at first its last warm-up round's) says fills
//!   its share of the time still to measure.
//! - After `slices` cycles a scheme measured for less than `--measure-s`
//!   gets further parts sized to finish, [`super::scheme`]'s resize limit
//!   at most.
//! - A scheme's window is its parts merged: queries over the sum of the
//!   parts' wall time (the pauses between parts are not in it), percentiles
//!   over every part's latencies, CPU summed.

use std::time::Instant;

use locus_workloads::traversal::{MixReport, Op};

use super::run::{Measured, Warmed, MEASURE_RESIZES};
use super::scheme::Workload;
use super::Settings;
use crate::{Reporter, Result};

/// One scheme's place in the measured stream and what it measured so far.
struct Progress {
    /// Next part of the stream to draw, and the part being taken from.
    rep: u64,
    buf: Vec<Op>,
    at: usize,
    /// Operations per second of the last part.
    rate: f64,
    parts: Vec<MixReport>,
    spans: Vec<(Instant, Instant)>,
    cpu: crate::threads::Usage,
    elapsed_s: f64,
}

impl Progress {
    /// The stream's next `n` operations.
    fn take(&mut self, w: &Workload, n: usize) -> Vec<Op> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if self.at == self.buf.len() {
                self.buf = w.measured(self.rep);
                self.rep += 1;
                self.at = 0;
                if self.buf.is_empty() {
                    break;
                }
            }
            let k = (n - out.len()).min(self.buf.len() - self.at);
            out.extend_from_slice(&self.buf[self.at..self.at + k]);
            self.at += k;
        }
        out
    }
}

/// Measures `warmed` (in the round's order) in interleaved parts, as the
/// module's doc says; one [`Measured`] per scheme, in the same order.
pub(super) fn measure(
    warmed: &[&Warmed],
    w: &Workload,
    p: &Settings,
    r: &Reporter,
) -> Result<Vec<Measured>> {
    let n = warmed.len();
    let slices = p.slices.max(1);
    let min_part = w.measure.len().div_ceil(slices).max(1);
    r.note(format!(
        "measuring {n} scheme(s) in turns: {slices} parts each, {:.2} s of each scheme at least",
        p.measure_s_min
    ));
    let host_before = crate::host_probe::probe_ns(p.threads);
    let handoff_before = crate::host_probe::handoff_ns();
    let mut progress: Vec<Progress> = warmed
        .iter()
        .map(|s| Progress {
            rep: 0,
            buf: Vec::new(),
            at: 0,
            rate: s.warm_ops_per_s,
            parts: Vec::new(),
            spans: Vec::new(),
            cpu: crate::threads::Usage::default(),
            elapsed_s: 0.0,
        })
        .collect();
    for cycle in 0..slices + MEASURE_RESIZES {
        let extra = cycle >= slices;
        for j in 0..n {
            let i = (cycle + j) % n;
            let st = &mut progress[i];
            let left_s = (p.measure_s_min - st.elapsed_s).max(0.0);
            if extra && left_s <= 0.0 {
                continue;
            }
            let target_s = if extra {
                left_s * 1.1
            } else {
                left_s / (slices - cycle) as f64
            };
            let mut want = (st.rate * target_s).ceil() as usize;
            if !extra {
                want = want.max(min_part);
            }
            let ops = st.take(w, want.max(1));
            let began = Instant::now();
            warmed[i].resume();
            let part = warmed[i].measure_part(&ops, p, r);
            warmed[i].pause();
            let (report, cpu) = part.map_err(|e| e.in_scheme(warmed[i].scheme().name()))?;
            st.rate = ops.len() as f64 / report.queries.elapsed_s.max(1e-9);
            st.elapsed_s += report.queries.elapsed_s;
            st.cpu.add(&cpu);
            st.parts.push(report);
            st.spans.push((began, Instant::now()));
        }
    }
    let host_probe_ns = (host_before + crate::host_probe::probe_ns(p.threads)) / 2.0;
    let handoff_ns = (handoff_before + crate::host_probe::handoff_ns()) / 2.0;
    Ok(progress
        .into_iter()
        .map(|st| Measured {
            report: MixReport::merge(&st.parts).expect("every scheme runs a part per cycle"),
            cpu: st.cpu,
            host_probe_ns,
            handoff_ns,
            parts: st.spans,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::graph::Graph;
    use super::super::run::{load, warm_up};
    use super::super::scheme::{workload, Scheme};
    use super::*;
    use crate::config::Config;
    use locus_coordinator::Mode;
    use locus_workloads::traversal::StartDist;

    /// Two schemes take turns, a part each per cycle, the first of a cycle
    /// moving along: parts never overlap, their order is Orig Ideal, Ideal
    /// Orig, Orig Ideal, ...; each scheme measures the whole measured
    /// sequence and at least `measure_s_min` in all, and its window is its
    /// parts merged.
    #[test]
    fn schemes_take_turns_and_each_measures_its_whole_window() {
        let mut g = Config::default().graph;
        g.scale = 6;
        let csr = Graph::Csr(crate::cluster::rmat_csr(&g).unwrap());
        let mut p = Settings::new(crate::Preset::Quick, 3);
        p.scale = 6;
        p.ops = 300;
        p.update_fraction = 0.0;
        p.measure_s_min = 0.3;
        p.threads = 2;
        p.machines = 2;
        p.slices = 4;
        let r = Reporter::quiet();
        let w = workload(&csr, &p, StartDist::Uniform).unwrap();
        let warmed: Vec<Warmed> = [Scheme::Orig, Scheme::Ideal]
            .into_iter()
            .map(|s| warm_up(s, load(s, &csr, &p, &r).unwrap(), &w, &p, Mode::Eager, &r).unwrap())
            .collect();
        let refs: Vec<&Warmed> = warmed.iter().collect();
        let m = measure(&refs, &w, &p, &r).unwrap();
        assert_eq!(m.len(), 2);
        let mut spans: Vec<(Instant, Instant, usize)> = Vec::new();
        for (i, x) in m.iter().enumerate() {
            assert!(x.parts.len() >= p.slices, "{} parts", x.parts.len());
            spans.extend(x.parts.iter().map(|&(a, b)| (a, b, i)));
            let q = &x.report.queries;
            assert!(q.queries >= w.measure.len() as u64, "{q:?}");
            assert!(q.elapsed_s >= p.measure_s_min, "{q:?}");
            assert!((q.throughput_qps - q.queries as f64 / q.elapsed_s).abs() < 1e-6);
            assert_eq!(x.report.query_latencies_ns.len() as u64, q.queries);
            let busy: f64 = x.parts.iter().map(|(a, b)| (*b - *a).as_secs_f64()).sum();
            assert!(busy >= q.elapsed_s * 0.99, "{busy} {q:?}");
        }
        spans.sort_by_key(|s| s.0);
        assert!(spans.windows(2).all(|s| s[0].1 <= s[1].0), "parts overlap");
        let order: Vec<usize> = spans.iter().map(|s| s.2).take(2 * p.slices).collect();
        let want: Vec<usize> = (0..p.slices).flat_map(|c| [c % 2, (c + 1) % 2]).collect();
        assert_eq!(order, want);
        // Ideal's one machine reads locally; Orig's two read remotely too.
        assert_eq!(m[1].report.queries.remote_gets, 0);
        assert!(m[0].report.queries.remote_gets > 0);
        for (warm, x) in warmed.into_iter().zip(m) {
            let parts = x.parts.len();
            let row = warm.finish(&w, &p, x, &r).unwrap();
            assert_eq!(row.measure_parts, parts);
        }
    }
}
