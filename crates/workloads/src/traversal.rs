//! The traversal driver: two-hop queries (Pragh 6, "Traversal benchmark"),
//! each run on the machine that owns its start vertex, by a pool of worker
//! threads shared by all emulated machines.
//!
//! Latency is the service time of one query on its worker (from the moment a
//! worker picks it up to its last read), in microseconds. The remote-access
//! rate is remote one-sided operations over all one-sided operations issued
//! during the run, from the fabric's exact counters.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use locus_fabric::counting::{Counters, Locality};
use locus_fabric::pool::Pool;
use locus_fabric::{Fabric, OpKind};
use locus_store::{HopReads, KhopLimits, Stores, VertexId};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::error::{Result, WorkloadError};
use crate::zipf::Zipf;

/// How start vertices are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StartDist {
    /// Zipf over `scope` vertices picked at random (Pragh default: theta 0.99, scope 2^10).
    Zipf {
        /// Skew.
        theta: f64,
        /// Number of distinct start vertices.
        scope: u64,
    },
    /// Uniform over all vertices.
    Uniform,
    /// Uniform over `scope` vertices picked at random: Pragh 6.1's uniform
    /// workload, whose queries start in the default scope of 2^10 (its
    /// Split+Cache reaches 5% remote accesses, which a stream over all
    /// vertices leaves no room for).
    UniformIn {
        /// Number of distinct start vertices.
        scope: u64,
    },
}

/// Draws `queries` start vertices among `0..vertex_count` that satisfy `eligible`
/// (e.g. have neighbours). Deterministic in `seed`. No eligible vertex is
/// [`WorkloadError::NoStartVertex`]; a Zipf scope of 0 is
/// [`WorkloadError::InvalidSetting`], a bad theta [`WorkloadError::Theta`].
pub fn start_vertices(
    vertex_count: u64,
    queries: usize,
    dist: StartDist,
    seed: u64,
    eligible: impl Fn(VertexId) -> bool,
) -> Result<Vec<VertexId>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let sampler = StartSampler::build(vertex_count, dist, &mut rng, eligible)?;
    Ok(sampler.draw_with(queries, &mut rng))
}

/// Draws start vertices afresh from one distribution, as a stream of queries
/// would: the eligible vertices and, for Zipf, the scope are fixed (chosen as
/// [`start_vertices`] chooses them for the same seed), every [`draw`] is new.
/// A benchmark that repeats one finite draw instead turns a uniform stream
/// into a fixed start set, whose repeated neighbourhoods look like locality
/// that the stream does not have.
///
/// [`draw`]: StartSampler::draw
#[derive(Debug, Clone)]
pub struct StartSampler {
    /// The vertices drawn from: every eligible one, or the Zipf scope.
    chosen: Vec<VertexId>,
    /// Ranks over `chosen`; `None` for uniform.
    zipf: Option<Zipf>,
}

impl StartSampler {
    /// The sampler of `dist` over the vertices of `0..vertex_count` that
    /// satisfy `eligible`; fails as [`start_vertices`].
    pub fn new(
        vertex_count: u64,
        dist: StartDist,
        seed: u64,
        eligible: impl Fn(VertexId) -> bool,
    ) -> Result<StartSampler> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        StartSampler::build(vertex_count, dist, &mut rng, eligible)
    }

    fn build(
        vertex_count: u64,
        dist: StartDist,
        rng: &mut Xoshiro256PlusPlus,
        eligible: impl Fn(VertexId) -> bool,
    ) -> Result<StartSampler> {
        if let StartDist::Zipf { scope: 0, .. } | StartDist::UniformIn { scope: 0 } = dist {
            return Err(WorkloadError::InvalidSetting {
                field: "scope",
                value: "0".into(),
                expected: "at least 1 distinct start vertex (Pragh: 1024)",
            });
        }
        let pool: Vec<VertexId> = (0..vertex_count as VertexId)
            .filter(|&v| eligible(v))
            .collect();
        if pool.is_empty() {
            return Err(WorkloadError::NoStartVertex { vertex_count });
        }
        match dist {
            StartDist::Uniform => Ok(StartSampler {
                chosen: pool,
                zipf: None,
            }),
            StartDist::UniformIn { scope } => {
                let scope = scope.min(pool.len() as u64) as usize;
                let chosen = pool.choose_multiple(rng, scope).copied().collect();
                Ok(StartSampler { chosen, zipf: None })
            }
            StartDist::Zipf { theta, scope } => {
                let scope = scope.min(pool.len() as u64);
                let chosen: Vec<VertexId> =
                    pool.choose_multiple(rng, scope as usize).copied().collect();
                let zipf = Some(Zipf::new(scope, theta)?);
                Ok(StartSampler { chosen, zipf })
            }
        }
    }

    /// `queries` start vertices drawn with `seed` (deterministic in it).
    pub fn draw(&self, queries: usize, seed: u64) -> Vec<VertexId> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x4452_4157);
        self.draw_with(queries, &mut rng)
    }

    fn draw_with(&self, queries: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<VertexId> {
        let c = &self.chosen;
        match &self.zipf {
            None => (0..queries).map(|_| c[rng.gen_range(0..c.len())]).collect(),
            Some(z) => (0..queries).map(|_| c[z.sample(rng) as usize]).collect(),
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunReport {
    /// Queries run.
    pub queries: u64,
    /// Worker threads.
    pub threads: usize,
    /// Wall-clock seconds.
    pub elapsed_s: f64,
    /// Queries per second.
    pub throughput_qps: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: f64,
    /// Remote one-sided operations / all one-sided operations.
    pub remote_rate: f64,
    /// Vertices returned by all queries together.
    pub results: u64,
    /// One-sided reads issued.
    pub reads: u64,
    /// Values read (GETs; for two-hop queries, one per vertex visited).
    pub gets: u64,
    /// GETs whose value was on another machine than the reader: the unit of
    /// the placement bound, beside `remote_rate`'s one-sided operations.
    pub remote_get_rate: f64,
    /// One-sided operations issued (`remote_rate`'s denominator).
    pub ops: u64,
    /// Of `ops`, those on another machine's memory.
    pub remote_ops: u64,
    /// Of `gets`, those of a value on another machine.
    pub remote_gets: u64,
}

/// Query settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwoHop {
    /// Neighbours per hop.
    pub k: usize,
    /// Post each hop's reads at once instead of one GET at a time.
    pub pipelined: bool,
}

impl TwoHop {
    /// How the k-hop reads each hop.
    pub fn reads(&self) -> HopReads {
        if self.pipelined {
            HopReads::Pipelined
        } else {
            HopReads::OneAtATime
        }
    }
}

/// One operation of a traversal workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A two-hop query from this vertex, run on its home machine.
    TwoHop(VertexId),
    /// Insert the edge (v, u) (Pragh 6: "edge updates/inserts"), run on v's home.
    InsertEdge(VertexId, VertexId),
    /// Insert the edge (v, u) and, if that added it, delete it again: an
    /// update's churn at v (its value rewritten, its replicas and cached
    /// addresses invalidated) that leaves the graph as it was. Measured as
    /// an update. For warm-ups that must not grow the graph.
    InsertUndone(VertexId, VertexId),
}

impl Op {
    /// The vertex whose home machine runs the operation.
    pub fn start(self) -> VertexId {
        match self {
            Op::TwoHop(v) | Op::InsertEdge(v, _) | Op::InsertUndone(v, _) => v,
        }
    }
}

/// Turns start vertices into a mix: each becomes an edge insert with
/// probability `update_fraction`, between two uniform vertices of
/// `endpoints` (the graph's vertices, sorted; so an update meets a migrated
/// value about as often as a value is migrated, as in Pragh 6.1: 0.11%
/// forwarded for 0.13% migrated), and a two-hop query otherwise.
/// Deterministic in `seed`. Endpoints are existing vertices: an edge to a
/// vertex that has no value would make every later traversal through it
/// look up a key that does not exist.
pub fn mix_ops(
    starts: &[VertexId],
    update_fraction: f64,
    endpoints: &[VertexId],
    seed: u64,
) -> Vec<Op> {
    debug_assert!(
        endpoints.windows(2).all(|w| w[0] < w[1]),
        "endpoints must be sorted"
    );
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5550_4441_5445);
    starts
        .iter()
        .map(|&v| {
            if !endpoints.is_empty() && rng.gen_bool(update_fraction.clamp(0.0, 1.0)) {
                let n = endpoints.len();
                Op::InsertEdge(
                    endpoints[rng.gen_range(0..n)],
                    endpoints[rng.gen_range(0..n)],
                )
            } else {
                Op::TwoHop(v)
            }
        })
        .collect()
}

/// `ops` repeated as repetitions `first..first + reps`, each inserting
/// different edges (the `u` of repetition `r` is shifted by `r` times a prime
/// positions along `endpoints`, as given to [`mix_ops`]; repetition 0 is
/// `ops` itself): a repeated insert of an existing edge would be a read, not
/// an update.
pub fn repeat_fresh(ops: &[Op], first: u64, reps: usize, endpoints: &[VertexId]) -> Vec<Op> {
    let n = endpoints.len().max(1) as u64;
    let mut out = Vec::with_capacity(ops.len() * reps);
    for r in first..first + reps as u64 {
        out.extend(ops.iter().map(|&op| match op {
            Op::InsertEdge(v, u) => {
                let at = endpoints.binary_search(&u).unwrap_or(0) as u64;
                Op::InsertEdge(v, endpoints[((at + r * 7_919) % n) as usize])
            }
            q => q,
        }));
    }
    out
}

/// What a mixed run measured, per kind of operation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MixReport {
    /// The queries (two-hop) part; `throughput_qps` counts queries only.
    pub queries: RunReport,
    /// Two-sided messages sent between machines during the run (a forwarded
    /// update is a request and a reply, Pragh 4.3).
    pub remote_sends: u64,
    /// Update latencies (microseconds, sorted ascending), for CDFs.
    pub update_latencies_us: Vec<f64>,
    /// Query latencies (nanoseconds, sorted ascending): what the query
    /// percentiles were taken from, kept so that runs can be merged.
    #[serde(skip)]
    pub query_latencies_ns: Vec<u64>,
    /// Completion time of every operation (seconds since the start, in
    /// completion order), for throughput timelines.
    #[serde(skip)]
    pub done_at_s: Vec<f64>,
    /// Which of `done_at_s` were queries.
    #[serde(skip)]
    pub done_is_query: Vec<bool>,
}

/// Runs one two-hop query per start vertex on `threads` workers and reports.
/// `counters` must be the counters of `store`'s fabric. Fails as [`run_ops`].
pub fn run_two_hop<F: Fabric>(
    store: &Stores<F>,
    counters: &Counters,
    threads: usize,
    starts: &[VertexId],
    q: TwoHop,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<RunReport> {
    let ops: Vec<Op> = starts.iter().map(|&v| Op::TwoHop(v)).collect();
    Ok(run_ops(store, counters, threads, &ops, q, progress)?.queries)
}

/// Operations a [`run_ops`] worker takes at a time: eight latencies and
/// completion times are one cache line each.
const CLAIM: usize = 8;

/// The operations of one of [`run_ops`]' lanes, with their claim counter
/// and what they measured, on lines of their own.
#[repr(align(128))]
struct Lane {
    /// Indices into the run's operations, in order.
    ops: Vec<usize>,
    /// The first position of `ops` not yet claimed.
    next: AtomicUsize,
    /// Per position of `ops`: its latency, and when it finished since the
    /// start (ns).
    latency: Vec<AtomicU64>,
    finished: Vec<AtomicU64>,
}

impl Lane {
    fn new(ops: Vec<usize>) -> Lane {
        let n = ops.len();
        Lane {
            ops,
            next: AtomicUsize::new(0),
            latency: (0..n).map(|_| AtomicU64::new(0)).collect(),
            finished: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The next [`CLAIM`] positions of `ops` (fewer at the end), none when
    /// all are taken.
    fn claim(&self) -> Option<std::ops::Range<usize>> {
        let first = self.next.fetch_add(CLAIM, Ordering::Relaxed);
        (first < self.ops.len()).then(|| first..(first + CLAIM).min(self.ops.len()))
    }
}

/// How often [`run_ops`] reports progress while it waits for the workers.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Runs `ops` on `threads` workers, each on its start vertex's home machine,
/// and reports queries and updates separately. The operations are split into
/// one lane per thread by start machine; each worker runs a lane in order
/// and then helps with the rest. The run's first failed
/// operation is [`WorkloadError::Op`] (every operation still runs); a pool
/// that cannot start, or a worker that cannot act as a machine, is
/// [`WorkloadError::Pool`].
pub fn run_ops<F: Fabric>(
    store: &Stores<F>,
    counters: &Counters,
    threads: usize,
    ops: &[Op],
    q: TwoHop,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<MixReport> {
    let machines = store.machines();
    let s = store.clone();
    let pool_error = |source| WorkloadError::Pool { threads, source };
    // The pool's factory reports a string (the pool poisons itself with it).
    let pool = Pool::new(threads, machines, move |m| {
        s.worker(m).map_err(|e| e.to_string())
    })
    .map_err(pool_error)?;
    let n = ops.len();
    // One lane per thread: the operations whose start vertex's machine is
    // the lane's (machine modulo threads), in order. A worker runs its own
    // lane first and then helps with the others, so each machine's
    // structures (its location cache, its counters, its link) are written
    // from one core while there is work for it there, as each of Pragh's
    // machines has cores of its own; only the tail of a run shares them.
    let lanes = threads.max(1);
    let mut lane_ops: Vec<Vec<usize>> = vec![Vec::new(); lanes];
    for (i, op) in ops.iter().enumerate() {
        lane_ops[store.owner(op.start()) as usize % lanes].push(i);
    }
    let lanes: Arc<Vec<Lane>> = Arc::new(lane_ops.into_iter().map(Lane::new).collect());
    let results = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let next_lane = Arc::new(AtomicUsize::new(0));
    let error: Arc<Mutex<Option<WorkloadError>>> = Arc::new(Mutex::new(None));
    let shared_ops: Arc<[Op]> = ops.into();
    let before = counters.total();
    let gets_before = store.get_counts();
    let t0 = Instant::now();
    {
        let (lanes, results, done, next_lane, error) = (
            Arc::clone(&lanes),
            Arc::clone(&results),
            Arc::clone(&done),
            Arc::clone(&next_lane),
            Arc::clone(&error),
        );
        let store = store.clone();
        // The workers take the operations from the lanes' counters, each as
        // its start vertex's machine: no thread queues jobs beside them
        // while they are measured (this one sleeps below). They take
        // [`CLAIM`] at a time and count their results apart, so the lines
        // they share change hands once per claim, not several times per
        // operation (stop 33 in docs/results.md).
        pool.broadcast(move |contexts| {
            let mut out = Vec::new();
            let mut found = 0u64;
            let first_lane = next_lane.fetch_add(1, Ordering::Relaxed);
            for l in 0..lanes.len() {
                let lane = &lanes[(first_lane + l) % lanes.len()];
                while let Some(claimed) = lane.claim() {
                    for at in claimed.clone() {
                        let i = lane.ops[at];
                        let op = shared_ops[i];
                        let machine = store.owner(op.start());
                        let w = contexts.get(machine);
                        out.clear();
                        let t = Instant::now();
                        let r = match op {
                            Op::TwoHop(v) => w
                                .k_hop(v, 2, q.k, q.reads(), KhopLimits::default(), &mut out)
                                .map(|_| ()),
                            Op::InsertEdge(v, u) => w.insert_edge(v, u).map(|_| ()),
                            Op::InsertUndone(v, u) => match w.insert_edge(v, u) {
                                Ok(true) => w.delete_edge(v, u).map(|_| ()),
                                other => other.map(|_| ()),
                            },
                        };
                        lane.latency[at].store(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                        lane.finished[at].store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                        match r {
                            Ok(()) => found += out.len() as u64,
                            Err(source) => {
                                error
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .get_or_insert_with(|| WorkloadError::Op {
                                        op,
                                        machine,
                                        thread: std::thread::current()
                                            .name()
                                            .unwrap_or("unnamed")
                                            .to_string(),
                                        source,
                                    });
                            }
                        }
                    }
                    done.fetch_add(claimed.len() as u64, Ordering::Relaxed);
                }
            }
            results.fetch_add(found, Ordering::Relaxed);
        })
        .map_err(pool_error)?;
    }
    while !pool.wait_idle_for(PROGRESS_EVERY).map_err(pool_error)? {
        progress(done.load(Ordering::Relaxed));
    }
    let elapsed = t0.elapsed().as_secs_f64();
    // The pool's workers hand their GET counts to the store when dropped.
    drop(pool);
    let gets_after = store.get_counts();
    let gets = gets_after.0 - gets_before.0;
    let remote_gets = gets_after.1 - gets_before.1;
    progress(n as u64);
    if let Some(e) = error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let delta = counters.total().minus(&before);
    let mut query_lat = Vec::new();
    let mut update_lat = Vec::new();
    let mut done_at: Vec<(u64, bool)> = Vec::with_capacity(n);
    for lane in lanes.iter() {
        for (at, &i) in lane.ops.iter().enumerate() {
            let l = lane.latency[at].load(Ordering::Relaxed);
            let is_query = matches!(ops[i], Op::TwoHop(_));
            if is_query {
                query_lat.push(l);
            } else {
                update_lat.push(l);
            }
            done_at.push((lane.finished[at].load(Ordering::Relaxed), is_query));
        }
    }
    query_lat.sort_unstable();
    update_lat.sort_unstable();
    done_at.sort_unstable();
    let queries = query_lat.len();
    Ok(MixReport {
        queries: RunReport {
            queries: queries as u64,
            threads,
            elapsed_s: elapsed,
            throughput_qps: queries as f64 / elapsed.max(1e-9),
            p50_us: percentile_us(&query_lat, 0.50),
            p99_us: percentile_us(&query_lat, 0.99),
            p999_us: percentile_us(&query_lat, 0.999),
            remote_rate: delta.remote_rate(),
            results: results.load(Ordering::Relaxed),
            reads: delta.ops_of(Locality::Local, OpKind::Read)
                + delta.ops_of(Locality::Remote, OpKind::Read),
            gets,
            remote_get_rate: remote_gets as f64 / gets.max(1) as f64,
            ops: delta.ops_total(Locality::Local) + delta.ops_total(Locality::Remote),
            remote_ops: delta.ops_total(Locality::Remote),
            remote_gets,
        },
        remote_sends: delta.ops_of(Locality::Remote, OpKind::Send),
        update_latencies_us: update_lat.iter().map(|&l| l as f64 / 1000.0).collect(),
        query_latencies_ns: query_lat,
        done_at_s: done_at.iter().map(|&(t, _)| t as f64 / 1e9).collect(),
        done_is_query: done_at.iter().map(|&(_, q)| q).collect(),
    })
}

impl MixReport {
    /// Runs made one after another, reported as one run of all their
    /// operations: counts and wall time add up, rates and percentiles are
    /// taken over all of them, and each part's completion times follow the
    /// parts before it (the pauses between parts are not in the wall time).
    /// `None` for no parts.
    pub fn merge(parts: &[MixReport]) -> Option<MixReport> {
        let first = parts.first()?;
        let sum = |get: fn(&RunReport) -> u64| parts.iter().map(|p| get(&p.queries)).sum::<u64>();
        let elapsed: f64 = parts.iter().map(|p| p.queries.elapsed_s).sum();
        let mut query_lat: Vec<u64> = parts
            .iter()
            .flat_map(|p| p.query_latencies_ns.iter().copied())
            .collect();
        query_lat.sort_unstable();
        let mut update_lat: Vec<f64> = parts
            .iter()
            .flat_map(|p| p.update_latencies_us.iter().copied())
            .collect();
        update_lat.sort_by(f64::total_cmp);
        let (mut done_at_s, mut done_is_query, mut offset) = (Vec::new(), Vec::new(), 0.0);
        for p in parts {
            done_at_s.extend(p.done_at_s.iter().map(|t| t + offset));
            done_is_query.extend_from_slice(&p.done_is_query);
            offset += p.queries.elapsed_s;
        }
        let (queries, gets, ops) = (sum(|r| r.queries), sum(|r| r.gets), sum(|r| r.ops));
        let (remote_gets, remote_ops) = (sum(|r| r.remote_gets), sum(|r| r.remote_ops));
        Some(MixReport {
            queries: RunReport {
                queries,
                threads: first.queries.threads,
                elapsed_s: elapsed,
                throughput_qps: queries as f64 / elapsed.max(1e-9),
                p50_us: percentile_us(&query_lat, 0.50),
                p99_us: percentile_us(&query_lat, 0.99),
                p999_us: percentile_us(&query_lat, 0.999),
                remote_rate: remote_ops as f64 / ops.max(1) as f64,
                results: sum(|r| r.results),
                reads: sum(|r| r.reads),
                gets,
                remote_get_rate: remote_gets as f64 / gets.max(1) as f64,
                ops,
                remote_ops,
                remote_gets,
            },
            remote_sends: parts.iter().map(|p| p.remote_sends).sum(),
            update_latencies_us: update_lat,
            query_latencies_ns: query_lat,
            done_at_s,
            done_is_query,
        })
    }
}

/// The `p` quantile of sorted nanosecond latencies, in microseconds.
pub fn percentile_us(sorted_ns: &[u64], p: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let idx = ((p * sorted_ns.len() as f64).ceil() as usize).clamp(1, sorted_ns.len()) - 1;
    sorted_ns[idx] as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_are_deterministic_and_repetitions_insert_new_edges() {
        let starts: Vec<VertexId> = (0..1000).collect();
        // Every third id exists: endpoints are drawn from these only.
        let ends: Vec<VertexId> = (0..5000).filter(|v| v % 3 == 0).collect();
        let ops = mix_ops(&starts, 0.3, &ends, 9);
        assert_eq!(ops, mix_ops(&starts, 0.3, &ends, 9));
        let updates = ops
            .iter()
            .filter(|o| matches!(o, Op::InsertEdge(..)))
            .count();
        assert!(
            (200..400).contains(&updates),
            "{updates} updates of 1000 at 30%"
        );
        let again = repeat_fresh(&ops, 0, 3, &ends);
        for op in &again {
            if let Op::InsertEdge(v, u) = op {
                assert!(
                    v % 3 == 0 && u % 3 == 0,
                    "{op:?} has an endpoint outside the list"
                );
            }
        }
        assert_eq!(&again[..1000], &ops[..]);
        for (a, b) in again[..1000].iter().zip(&again[1000..2000]) {
            match (a, b) {
                (Op::InsertEdge(v, u), Op::InsertEdge(v2, u2)) => {
                    assert_eq!(v, v2);
                    assert_ne!(u, u2, "a repetition must insert another edge");
                }
                (x, y) => assert_eq!(x, y),
            }
        }
    }

    #[test]
    fn starts_are_deterministic_and_eligible() {
        let a = start_vertices(
            1000,
            500,
            StartDist::Zipf {
                theta: 0.99,
                scope: 64,
            },
            7,
            |v| v % 2 == 0,
        )
        .unwrap();
        let b = start_vertices(
            1000,
            500,
            StartDist::Zipf {
                theta: 0.99,
                scope: 64,
            },
            7,
            |v| v % 2 == 0,
        )
        .unwrap();
        assert_eq!(a, b);
        assert!(a.iter().all(|v| v % 2 == 0));
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() <= 64);
        let u = start_vertices(1000, 500, StartDist::Uniform, 7, |_| true).unwrap();
        assert!(u.iter().all(|&v| v < 1000));
    }

    #[test]
    fn fresh_draws_keep_the_scope_and_change_the_starts() {
        let zipf = StartDist::Zipf {
            theta: 0.99,
            scope: 64,
        };
        let even = |v: VertexId| v.is_multiple_of(2);
        let first = start_vertices(1000, 2000, zipf, 7, even).unwrap();
        let scope: std::collections::HashSet<_> = first.iter().copied().collect();
        let s = StartSampler::new(1000, zipf, 7, even).unwrap();
        let (a, b) = (s.draw(2000, 1), s.draw(2000, 2));
        assert_eq!(a, s.draw(2000, 1), "a draw is deterministic in its seed");
        assert_ne!(a, b, "draws with other seeds differ");
        // The Zipf scope is the one start_vertices chose for this seed.
        assert!(a.iter().chain(&b).all(|v| scope.contains(v)));
        // Uniform draws cover the eligible vertices, not one fixed sample of them.
        let u = StartSampler::new(1000, StartDist::Uniform, 7, even).unwrap();
        let seen: std::collections::HashSet<_> = (0..20).flat_map(|i| u.draw(100, i)).collect();
        assert!(seen.iter().all(|v| v % 2 == 0));
        assert!(
            seen.len() > 450,
            "20 fresh draws of 100 saw {} of 500",
            seen.len()
        );
        // Uniform over a scope: every draw within the same 32 vertices, all of them seen.
        let u32s = StartSampler::new(1000, StartDist::UniformIn { scope: 32 }, 7, even).unwrap();
        let seen: std::collections::HashSet<_> = (0..5).flat_map(|i| u32s.draw(200, i)).collect();
        assert_eq!(
            seen.len(),
            32,
            "1000 draws over a scope of 32 saw {}",
            seen.len()
        );
        assert!(seen.iter().all(|v| v % 2 == 0));
        assert!(matches!(
            StartSampler::new(10, StartDist::UniformIn { scope: 0 }, 1, |_| true).unwrap_err(),
            WorkloadError::InvalidSetting { field: "scope", .. }
        ));
        assert_eq!(
            StartSampler::new(10, StartDist::Uniform, 1, |_| false).unwrap_err(),
            WorkloadError::NoStartVertex { vertex_count: 10 }
        );
    }

    #[test]
    fn start_requests_that_cannot_be_met_say_why() {
        assert_eq!(
            start_vertices(10, 5, StartDist::Uniform, 1, |_| false).unwrap_err(),
            WorkloadError::NoStartVertex { vertex_count: 10 }
        );
        let e = start_vertices(
            10,
            5,
            StartDist::Zipf {
                theta: 0.99,
                scope: 0,
            },
            1,
            |_| true,
        )
        .unwrap_err();
        assert!(
            matches!(
                &e,
                WorkloadError::InvalidSetting { field: "scope", value, .. } if value == "0"
            ),
            "{e:?}"
        );
        assert_eq!(
            start_vertices(
                10,
                5,
                StartDist::Zipf {
                    theta: 1.5,
                    scope: 4,
                },
                1,
                |_| true,
            )
            .unwrap_err(),
            WorkloadError::Theta { theta: 1.5 }
        );
    }
}
