//! The traversal driver: two-hop queries (Pragh 6, "Traversal benchmark"),
//! each run on the machine that owns its start vertex, by a pool of worker
//! threads shared by all emulated machines.
//!
//! Latency is the service time of one query on its worker (from the moment a
//! worker picks it up to its last read), in microseconds. The remote-access
//! rate is remote one-sided operations over all one-sided operations issued
//! during the run, from the fabric's exact counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use locus_fabric::counting::{Counters, Locality};
use locus_fabric::pool::Pool;
use locus_fabric::{Fabric, OpKind};
use locus_store::{home_of, Store, VertexId};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

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
}

/// Draws `queries` start vertices among `0..vertex_count` that satisfy `eligible`
/// (e.g. have neighbours). Deterministic in `seed`.
pub fn start_vertices(
    vertex_count: u64,
    queries: usize,
    dist: StartDist,
    seed: u64,
    eligible: impl Fn(VertexId) -> bool,
) -> Result<Vec<VertexId>, String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let pool: Vec<VertexId> = (0..vertex_count as VertexId)
        .filter(|&v| eligible(v))
        .collect();
    if pool.is_empty() {
        return Err("no vertex qualifies as a start vertex (is the graph empty?)".into());
    }
    match dist {
        StartDist::Uniform => Ok((0..queries)
            .map(|_| pool[rng.gen_range(0..pool.len())])
            .collect()),
        StartDist::Zipf { theta, scope } => {
            let scope = scope.min(pool.len() as u64);
            let chosen: Vec<VertexId> = pool
                .choose_multiple(&mut rng, scope as usize)
                .copied()
                .collect();
            let z = Zipf::new(scope, theta)?;
            Ok((0..queries)
                .map(|_| chosen[z.sample(&mut rng) as usize])
                .collect())
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
}

/// Query settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwoHop {
    /// Neighbours per hop.
    pub k: usize,
    /// Pipeline the second hop (posted reads) instead of one GET at a time.
    pub pipelined: bool,
}

/// Runs one two-hop query per start vertex on `threads` workers and reports.
/// `counters` must be the counters of `store`'s fabric.
pub fn run_two_hop<F: Fabric>(
    store: &Store<F>,
    counters: &Counters,
    threads: usize,
    starts: &[VertexId],
    q: TwoHop,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<RunReport, String> {
    let machines = store.machines();
    let s = store.clone();
    let pool = Pool::new(threads, machines, move |m| {
        s.worker(m).map_err(|e| e.to_string())
    })
    .map_err(|e| e.to_string())?;
    let n = starts.len();
    let latencies: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let results = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let before = counters.total();
    let t0 = Instant::now();
    for (i, &v) in starts.iter().enumerate() {
        let (latencies, results, done_job, error) = (
            Arc::clone(&latencies),
            Arc::clone(&results),
            Arc::clone(&done),
            Arc::clone(&error),
        );
        pool.execute(home_of(v, machines), move |w| {
            thread_local!(static OUT: std::cell::RefCell<Vec<VertexId>> = const { std::cell::RefCell::new(Vec::new()) });
            OUT.with(|out| {
                let mut out = out.borrow_mut();
                out.clear();
                let t = Instant::now();
                let r = if q.pipelined {
                    w.two_hop_pipelined(v, q.k, &mut out)
                } else {
                    w.two_hop(v, q.k, &mut out)
                };
                latencies[i].store(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                match r {
                    Ok(_) => {
                        results.fetch_add(out.len() as u64, Ordering::Relaxed);
                    }
                    Err(e) => {
                        error
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(format!("query from vertex {v}: {e}"));
                    }
                }
            });
            done_job.fetch_add(1, Ordering::Relaxed);
        })
        .map_err(|e| e.to_string())?;
        if i % 1024 == 0 {
            progress(done.load(Ordering::Relaxed));
        }
    }
    pool.wait_idle().map_err(|e| e.to_string())?;
    let elapsed = t0.elapsed().as_secs_f64();
    progress(n as u64);
    if let Some(e) = error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let delta = counters.total().minus(&before);
    let mut lat: Vec<u64> = latencies
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    lat.sort_unstable();
    let pct = |p: f64| -> f64 {
        if lat.is_empty() {
            return 0.0;
        }
        let idx = ((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1;
        lat[idx] as f64 / 1000.0
    };
    Ok(RunReport {
        queries: n as u64,
        threads,
        elapsed_s: elapsed,
        throughput_qps: n as f64 / elapsed.max(1e-9),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
        remote_rate: delta.remote_rate(),
        results: results.load(Ordering::Relaxed),
        reads: delta.ops_of(Locality::Local, OpKind::Read)
            + delta.ops_of(Locality::Remote, OpKind::Read),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(start_vertices(10, 5, StartDist::Uniform, 1, |_| false).is_err());
    }
}
