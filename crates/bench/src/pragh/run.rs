//! One scheme's run: build and load the cluster, start the
//! monitor/coordinator/executor driver for the schemes that migrate, warm up
//! until migration settles ([`warm_up`]), then measure a window
//! ([`Warmed::measure`], or in turns with other schemes: `slices.rs`) and
//! make the row ([`Warmed::finish`]).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use locus_coordinator::Mode;
use locus_workloads::traversal::{MixReport, Op, TwoHop};

use super::graph::Graph;
use super::scheme::{move_shards_optimally, values_away, Running, Scheme, Stream, Workload};
use super::{Row, Settings};
use crate::cluster::Embedded;
use crate::{Reporter, Result};

/// Runs one scheme: load, warm up (and migrate), measure. Remote rate and
/// latencies come from the measured part only.
pub(super) fn run_scheme(
    scheme: Scheme,
    w: &Workload,
    p: &Settings,
    mode: Mode,
    r: &Reporter,
) -> Result<Row> {
    let cluster = load(scheme, w.graph, p, r)?;
    run_loaded(scheme, cluster, w, p, mode, r)
}

/// `graph` loaded into a cluster set up for `scheme`.
pub(super) fn load(scheme: Scheme, graph: &Graph, p: &Settings, r: &Reporter) -> Result<Embedded> {
    let config = p.config();
    let machines = scheme.machines(p.machines);
    r.note(format!("loading the graph into {machines} machine(s) ..."));
    graph.build(scheme.machines(p.machines), &config, r, |s| {
        scheme.configure_for(s, &config)
    })
}

/// Runs one scheme on a loaded cluster (see [`run_scheme`]); a cluster
/// loaded for another scheme of the same machine count and layout is
/// reconfigured for this one first.
pub(super) fn run_loaded(
    scheme: Scheme,
    cluster: Embedded,
    w: &Workload,
    p: &Settings,
    mode: Mode,
    r: &Reporter,
) -> Result<Row> {
    let warmed = warm_up(scheme, cluster, w, p, mode, r)?;
    let measured = warmed.measure(w, p, r)?;
    warmed.finish(w, p, measured, r)
}

/// The query every operation sequence runs.
fn query(p: &Settings) -> TwoHop {
    TwoHop {
        k: p.k,
        pipelined: false,
    }
}

/// A scheme's cluster after its warm-up, ready to be measured.
pub(super) struct Warmed {
    run: Running,
    mode: Mode,
    warm_s: f64,
    warm_rounds_approved: Vec<u64>,
    /// (keys, bytes) Shard's plan moved.
    shard_moved: (u64, u64),
    /// Operations per second of the last warm-up round.
    pub(super) warm_ops_per_s: f64,
}

/// What a measured window saw: its operations' report, the process's CPU
/// over it, and the host probes around it.
pub(super) struct Measured {
    pub(super) report: MixReport,
    pub(super) cpu: crate::threads::Usage,
    pub(super) host_probe_ns: f64,
    pub(super) handoff_ns: f64,
    /// When each part of the window began and ended.
    pub(super) parts: Vec<(Instant, Instant)>,
}

/// Starts `scheme` on a loaded cluster (see [`run_loaded`]) and warms it up:
/// rounds of at least an interval and a half each, until a round approves
/// at most `settle_share` of the approvals so far, and at least two.
///
/// Every scheme warms up by the same rule: one with no driver approves
/// nothing, so it settles after its second round, having warmed as long as
/// a migrating scheme at the least (three intervals). Before, it stopped
/// after one round (0.8 s at quick, Ideal 0.06 s, against Split's 3.4 s),
/// and a scheme warmed briefly ran faster beside one warmed long: uniform
/// Split / Orig 0.9956 ± 0.0012 over 96 rounds, 0.9989 ± 0.0012 with every
/// scheme warmed alike (docs/results.md, stop 52).
///
/// Every scheme warms on the same graph: the edges its first draw inserts
/// stay, and in later draws each insert is undone right after it
/// ([`Op::InsertUndone`]: the same churn of replicas and cached addresses,
/// nothing added), whatever the scheme's speed and however long it warms. Before stop 54 every draw inserted its edges, so a scheme
/// that warmed longer or faster was measured on a larger graph: uniform
/// Split+Cache, whose warm-up never settles (30 s at quick against Cache's
/// 3.4 s), read 4.9% more values per query than Cache in the same run.
pub(super) fn warm_up(
    scheme: Scheme,
    cluster: Embedded,
    w: &Workload,
    p: &Settings,
    mode: Mode,
    r: &Reporter,
) -> Result<Warmed> {
    let run = Running::on(scheme, cluster, &p.config(), p.interval_ms, mode)?;
    let q = query(p);
    let t0 = Instant::now();
    let mut shard_moved = (0u64, 0u64);
    if scheme == Scheme::Shard {
        // Its inserts undone too: the first draw below inserts the same
        // number of edges as every other scheme's.
        let warm: Vec<Op> = w.warm.iter().map(|&op| undone(op)).collect();
        run.run(&warm, q, p.threads, "Shard: warm-up", r)?;
        shard_moved = move_shards_optimally(&run.cluster, &w.warm, w.graph, p.k, r)?;
    }
    let mut last_approved = u64::MAX;
    let mut warm_rounds_approved = Vec::new();
    let mut round = 1u64;
    let label = format!("{}: warm-up", scheme.name());
    let mut warm_ops_per_s = 0.0;
    let mut warm_round = || -> Result<()> {
        round += 1;
        let mut ops = w.fresh(Stream::Warm, round);
        if round > 2 {
            ops.iter_mut().for_each(|op| *op = undone(*op));
        }
        let report = run.run(&ops, q, p.threads, &label, r)?;
        warm_ops_per_s = ops.len() as f64 / report.queries.elapsed_s.max(1e-9);
        Ok(())
    };
    let interval = Duration::from_millis(p.interval_ms + p.interval_ms / 2);
    loop {
        let round_start = Instant::now();
        warm_round()?;
        // Keep the round going until a full interval has been reported.
        while round_start.elapsed() < interval {
            warm_round()?;
        }
        // Settled when a round approves no more migrations and replicas than
        // `settle_share` of all approved so far (0: none at all).
        let approved = run.driver.as_ref().map_or(0, |d| {
            d.wait_drained(Duration::from_secs(30));
            d.stats().approved.load(Ordering::Relaxed)
                + d.stats().replicas_approved.load(Ordering::Relaxed)
        });
        let before = if warm_rounds_approved.is_empty() {
            0
        } else {
            last_approved
        };
        let new = approved.saturating_sub(before);
        warm_rounds_approved.push(new);
        let settled =
            warm_rounds_approved.len() > 1 && new as f64 <= p.settle_share * approved as f64;
        if settled || t0.elapsed().as_secs_f64() > p.warm_s_max {
            break;
        }
        last_approved = approved;
    }
    let warm_s = t0.elapsed().as_secs_f64();
    run.check()?;
    Ok(Warmed {
        run,
        mode,
        warm_s,
        warm_rounds_approved,
        shard_moved,
        warm_ops_per_s,
    })
}

/// `op`, an edge insert undone right after it ([`Op::InsertUndone`]).
pub(super) fn undone(op: Op) -> Op {
    match op {
        Op::InsertEdge(v, u) => Op::InsertUndone(v, u),
        q => q,
    }
}

impl Warmed {
    /// The scheme.
    pub(super) fn scheme(&self) -> Scheme {
        self.run.scheme
    }

    /// Pauses the scheme's cluster ([`Running::pause`]).
    pub(super) fn pause(&self) {
        self.run.pause();
    }

    /// Resumes the scheme's cluster ([`Running::resume`]).
    pub(super) fn resume(&self) {
        self.run.resume();
    }

    /// Runs `ops` as (part of) a measured window: their report and the
    /// process's CPU while they ran.
    pub(super) fn measure_part(
        &self,
        ops: &[Op],
        p: &Settings,
        r: &Reporter,
    ) -> Result<(MixReport, crate::threads::Usage)> {
        let label = format!("{}: measuring", self.scheme().name());
        let before = crate::threads::Snapshot::take();
        let report = self.run.run(ops, query(p), p.threads, &label, r)?;
        let cpu = crate::threads::Usage::since(&before, &crate::threads::Snapshot::take());
        Ok((report, cpu))
    }

    /// One measured window: the measured sequence, then fresh draws until
    /// the window lasts `p.measure_s_min`.
    pub(super) fn measure(&self, w: &Workload, p: &Settings, r: &Reporter) -> Result<Measured> {
        let mut host_before = crate::host_probe::probe_ns(p.threads);
        let mut handoff_before = crate::host_probe::handoff_ns();
        let probe = Instant::now();
        let (mut report, mut cpu) = self.measure_part(&w.measure, p, r)?;
        let mut span = (probe, Instant::now());
        // Sized from the run before it, a repeat can still come out short when
        // that run was slowed (a loaded machine): it is sized again from its
        // own rate, with a margin, a few times at most.
        let (mut took, mut ran) = (probe.elapsed().as_secs_f64(), 1usize);
        let mut drawn = 0u64;
        for _ in 0..MEASURE_RESIZES {
            if took >= p.measure_s_min {
                break;
            }
            let per_rep = took.max(1e-3) / ran as f64;
            let reps = (p.measure_s_min * 1.1 / per_rep).ceil() as usize;
            let ops: Vec<Op> = (drawn + 1..=drawn + reps as u64)
                .flat_map(|i| w.fresh(Stream::Measure, i))
                .collect();
            drawn += reps as u64;
            // The host probe and the CPU accounting are of the reported run:
            // not of the probe run, nor of this thread making the operations
            // (which ran while no worker did and read as background CPU).
            host_before = crate::host_probe::probe_ns(p.threads);
            handoff_before = crate::host_probe::handoff_ns();
            let t = Instant::now();
            (report, cpu) = self.measure_part(&ops, p, r)?;
            span = (t, Instant::now());
            (took, ran) = (t.elapsed().as_secs_f64(), reps);
        }
        Ok(Measured {
            report,
            cpu,
            host_probe_ns: (host_before + crate::host_probe::probe_ns(p.threads)) / 2.0,
            handoff_ns: (handoff_before + crate::host_probe::handoff_ns()) / 2.0,
            parts: vec![span],
        })
    }

    /// The scheme's row from what `measured` saw and where its values ended;
    /// stops the scheme's driver.
    pub(super) fn finish(
        self,
        w: &Workload,
        p: &Settings,
        measured: Measured,
        r: &Reporter,
    ) -> Result<Row> {
        let Warmed {
            run,
            mode,
            warm_s,
            warm_rounds_approved,
            shard_moved,
            ..
        } = self;
        let scheme = run.scheme;
        run.check()?;
        let Measured {
            report,
            cpu,
            host_probe_ns,
            handoff_ns,
            parts,
        } = measured;
        let (moved, bytes_moved, approved) = if run.driver.is_some() {
            run.moved()
        } else {
            (shard_moved.0, shard_moved.1, 0)
        };
        // The share of vertices whose value is away from its key's machine now.
        let away = if scheme.migrates() {
            Some(values_away(&run.cluster, w.graph)?)
        } else {
            None
        };
        // How the placement the run ended with serves the measured sequence
        // (single-copy schemes: replicas' reads are not in it).
        let placement_after = if scheme.migrates() && scheme != Scheme::Replica {
            let e = &run.cluster;
            let mut w0 = e.stores.worker(0)?;
            let after = super::placement_after(
                w.graph,
                &w.measure,
                e.stores.machines(),
                p.k,
                scheme.driver_config(p.interval_ms, mode).policy.profit,
                |v| -> Result<usize> {
                    let word = w0.address_word(v)?;
                    let home = e.stores.owner(v);
                    Ok(
                        locus_store::addr::Addr::decode(word).map_or(home, |a| a.holder(home))
                            as usize,
                    )
                },
            )?;
            r.note(format!(
                "{}: its final placement leaves {:.2}% of the measured sequence's GETs remote: \
             {:.2}% no single copy avoids, {:.2}% of values at home read more elsewhere ({}), \
             {:.2}% of values moved to a machine that reads them less than another ({}); \
             of these misplaced values, the profit threshold keeps {:.2}% ({}), \
             contention {:.2}% ({})",
                scheme.name(),
                after.remote_gets * 100.0,
                after.unavoidable_gets * 100.0,
                after.misplaced_home_gets * 100.0,
                after.misplaced_home_values,
                after.misplaced_away_gets * 100.0,
                after.misplaced_away_values,
                after.within_profit_gets * 100.0,
                after.within_profit_values,
                after.contended_gets * 100.0,
                after.contended_values,
            ));
            Some(after)
        } else {
            None
        };
        let store = &run.cluster.stores;
        let replica: Vec<u64> = (0..store.machines())
            .map(|m| store.replica_bytes(m as u8))
            .collect();
        let replica_bytes: u64 = replica.iter().sum();
        let graph_value_bytes = run.cluster.value_bytes;
        let replica_budget_bytes = store.config().replica_bytes_max;
        let Running { driver, .. } = run;
        let contended = driver
            .and_then(|d| d.stop())
            .map_or(0, |c| c.stats().contended);
        let loaded = w.endpoints.len().max(1);
        let migrated_fraction = away.unwrap_or(moved) as f64 / loaded as f64;
        let q = &report.queries;
        let ul = &report.update_latencies_us;
        let pct = |p: f64| -> f64 {
            if ul.is_empty() {
                return 0.0;
            }
            ul[((p * ul.len() as f64).ceil() as usize).clamp(1, ul.len()) - 1]
        };
        Ok(Row {
            scheme: scheme.name().into(),
            scope: None,
            throughput_qps: q.throughput_qps,
            p50_us: q.p50_us,
            p99_us: q.p99_us,
            p999_us: q.p999_us,
            remote_rate: q.remote_rate,
            remote_gets: q.remote_get_rate,
            gets_per_query: q.gets as f64 / q.queries.max(1) as f64,
            migrated_fraction,
            values_moved: moved,
            bytes_moved,
            vs_orig: 0.0,
            vs_ideal: 0.0,
            machines: scheme.machines(p.machines),
            threads: p.threads,
            queries: q.queries,
            updates: ul.len() as u64,
            update_p50_us: pct(0.5),
            update_p99_us: pct(0.99),
            update_p999_us: pct(0.999),
            forwarded_share: report.remote_sends as f64 / 2.0 / (ul.len().max(1)) as f64,
            warm_s,
            warm_rounds_approved,
            migrations_approved: approved,
            contended_decisions: contended,
            replica_bytes,
            replica_bytes_machine_max: replica.iter().copied().max().unwrap_or(0),
            replica_share: replica_bytes as f64 / graph_value_bytes.max(1) as f64,
            replica_budget_bytes,
            graph_value_bytes,
            measure_machine_share: cpu.machine_share,
            measure_background_share: cpu.share_not(&WORKER_GROUPS),
            measure_worker_preempted: cpu.preempted_of(&WORKER_GROUPS),
            measure_cpu_s: cpu.cpu_s,
            measure_host_probe_ns: host_probe_ns,
            measure_host_handoff_ns: handoff_ns,
            measure_steal_share: cpu.steal_share,
            measure_parts: parts.len(),
            placement_after,
            runs: 1,
            throughput_qps_range: [q.throughput_qps; 2],
            vs_orig_range: [0.0; 2],
            vs_ideal_range: [0.0; 2],
            remote_rate_range: [q.remote_rate; 2],
            remote_gets_range: [q.remote_get_rate; 2],
            migrated_fraction_range: [migrated_fraction; 2],
            update_latencies_us: report.update_latencies_us.clone(),
        })
    }
}

/// Times a measured window too short for `measure_s_min` is sized again and
/// rerun (see `run_loaded`).
pub(super) const MEASURE_RESIZES: usize = 3;

/// The thread groups of the query workers: `run_ops` makes a
/// `locus_fabric::pool` for each run and drops it at the end, so inside the
/// measured window its threads are the ones that exited.
const WORKER_GROUPS: [&str; 2] = ["locus-worker", crate::threads::EXITED];
