//! One scheme over TCP: start its processes, load the graph over the client,
//! warm up, measure with closed-loop client threads, and read the servers'
//! STATS around the measured window.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use locus_client::{Client, ClientConfig};
use locus_workloads::traversal::{percentile_us, repeat_fresh, Op};

use super::{TcpRow, TcpSettings};
use crate::pragh::scheme::Workload;
use crate::pragh::{Scheme, Settings};
use crate::processes::Processes;
use crate::{BenchError, Reporter, Result};

/// Deadline of one request: generous, so a loaded machine slows the run
/// down instead of failing it.
const REQUEST_DEADLINE: Duration = Duration::from_secs(60);

/// An endless operation sequence: `base` repeated, repetition `r` (counted
/// from `first_rep`) inserting other edges than the others, as the
/// in-process run's `repeat_fresh` rounds do.
pub(super) struct Sequence<'a> {
    pub(super) base: &'a [Op],
    pub(super) first_rep: u64,
    pub(super) endpoints: &'a [u32],
    /// Edge inserts in the first pass over `base` only; in later passes each
    /// is undone right after it (the warm-up: every scheme then warms on the
    /// same graph, however long it warms; `run::warm_up`).
    pub(super) updates_once: bool,
}

impl Sequence<'_> {
    fn op(&self, i: u64) -> Op {
        let n = self.base.len() as u64;
        let op = self.base[(i % n) as usize];
        let op = match op {
            Op::InsertEdge(..) => repeat_fresh(&[op], self.first_rep + i / n, 1, self.endpoints)[0],
            q => q,
        };
        if self.updates_once && i >= n {
            crate::pragh::run::undone(op)
        } else {
            op
        }
    }
}

/// What the client threads saw in one window.
#[derive(Debug, Default)]
pub(super) struct Window {
    /// Client-side round trips of the queries (ns, sorted).
    pub(super) query_ns: Vec<u64>,
    /// Server-side times of the queries (`elapsed_ns`, sorted).
    pub(super) server_ns: Vec<u64>,
    /// Client-side round trips of the updates (ns, sorted).
    pub(super) update_ns: Vec<u64>,
    /// One-sided operations the queries issued, local and remote.
    pub(super) query_ops: (u64, u64),
    /// From the start to the last reply.
    pub(super) elapsed_s: f64,
}

/// Runs `seq` from `next` on `clients` closed-loop threads for `duration`
/// (each thread finishes the request it is in). The first failed request
/// stops the window and is the error.
pub(super) fn closed_loop(
    client: &Client,
    seq: &Sequence,
    next: &AtomicU64,
    clients: usize,
    k: u32,
    duration: Duration,
) -> Result<Window> {
    let stop = AtomicBool::new(false);
    let error: Mutex<Option<BenchError>> = Mutex::new(None);
    let t0 = Instant::now();
    let parts: Vec<(Window, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let (stop, error) = (&stop, &error);
                s.spawn(move || {
                    let mut w = Window::default();
                    while !stop.load(Ordering::Relaxed) && t0.elapsed() < duration {
                        let op = seq.op(next.fetch_add(1, Ordering::Relaxed));
                        let t = Instant::now();
                        let r = match op {
                            Op::TwoHop(v) => client.khop(v, 2, k).map(|q| {
                                w.server_ns.push(q.elapsed_ns);
                                w.query_ops.0 += q.local_ops;
                                w.query_ops.1 += q.remote_ops;
                            }),
                            Op::InsertEdge(v, u) => client.insert_edge(v, u).map(|_| ()),
                            Op::InsertUndone(v, u) => match client.insert_edge(v, u) {
                                Ok(true) => client.delete_edge(v, u).map(|_| ()),
                                other => other.map(|_| ()),
                            },
                        };
                        let ns = t.elapsed().as_nanos() as u64;
                        match (r, op) {
                            (Ok(()), Op::TwoHop(_)) => w.query_ns.push(ns),
                            (Ok(()), Op::InsertEdge(..) | Op::InsertUndone(..)) => {
                                w.update_ns.push(ns)
                            }
                            (Err(e), _) => {
                                stop.store(true, Ordering::Relaxed);
                                error
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .get_or_insert(BenchError::Measurement {
                                        experiment: "pragh schemes --fabric tcp",
                                        what: format!("{op:?}: {e}"),
                                    });
                            }
                        }
                    }
                    (w, t0.elapsed())
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if parts.len() != clients {
        return Err(BenchError::ThreadPanicked {
            thread: "TCP query client".into(),
        });
    }
    let mut w = Window::default();
    for (p, end) in parts {
        w.query_ns.extend(p.query_ns);
        w.server_ns.extend(p.server_ns);
        w.update_ns.extend(p.update_ns);
        w.query_ops.0 += p.query_ops.0;
        w.query_ops.1 += p.query_ops.1;
        w.elapsed_s = w.elapsed_s.max(end.as_secs_f64());
    }
    w.query_ns.sort_unstable();
    w.server_ns.sort_unstable();
    w.update_ns.sort_unstable();
    Ok(w)
}

/// Sums of the servers' STATS (docs/protocol.md section 6).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Totals {
    pub(super) local_ops: u64,
    pub(super) remote_ops: u64,
    pub(super) migrations_in: u64,
    pub(super) replicas_held: u64,
    pub(super) values_away: u64,
    pub(super) vertices: u64,
    pub(super) cache_hits: u64,
    pub(super) cache_misses: u64,
}

/// The STATS of every server, summed.
pub(super) fn totals(client: &Client) -> Result<Totals> {
    let mut t = Totals::default();
    for id in 0..client.machines() as u8 {
        let s = client.stats(id)?;
        let field = |path: &[&str]| -> Result<u64> {
            let mut v = &s;
            for p in path {
                v = &v[*p];
            }
            v.as_u64().ok_or_else(|| BenchError::Measurement {
                experiment: "pragh schemes --fabric tcp",
                what: format!(
                    "the STATS of server {id} have no number at {} (docs/protocol.md section 6)",
                    path.join(".")
                ),
            })
        };
        t.local_ops += field(&["ops", "local"])?;
        t.remote_ops += field(&["ops", "remote"])?;
        t.migrations_in += field(&["migrations_in"])?;
        t.replicas_held += field(&["replicas_held"])?;
        t.values_away += field(&["values_away"])?;
        t.vertices += field(&["vertices"])?;
        // No cache (Orig, Ideal): null.
        if !s["cache"].is_null() {
            t.cache_hits += field(&["cache", "hits"])?;
            t.cache_misses += field(&["cache", "misses"])?;
        }
    }
    Ok(t)
}

/// Runs `scheme` over TCP: see the module doc of `pragh::tcp`.
pub(super) fn run_scheme(
    scheme: Scheme,
    w: &Workload,
    p: &Settings,
    tcp: &TcpSettings,
    run: usize,
    r: &Reporter,
) -> Result<TcpRow> {
    let csr = w.graph.csr().ok_or_else(|| {
        BenchError::setting(
            "--loader",
            "ranged",
            "must be csr with --fabric tcp (the graph is loaded over the client from its CSR)",
        )
    })?;
    let spec = super::spec(scheme, csr, p, tcp);
    let mut procs = Processes::start(&spec, r)?;
    let client = procs.client(ClientConfig {
        deadline: REQUEST_DEADLINE,
        connect_timeout: Duration::from_secs(5),
        pool_max_per_server: tcp.clients,
        name: format!("locus-bench {}", scheme.name()),
        ..ClientConfig::default()
    })?;
    r.note(format!(
        "{} over TCP: {} server process(es){}, loading ...",
        scheme.name(),
        spec.machines,
        if spec.coordinator {
            " and a coordinator"
        } else {
            ""
        }
    ));
    let loaded = crate::client_bench::load_csr(&client, csr, tcp.senders, r)?;
    let k = p.k as u32;
    let migrating = spec.coordinator;
    // Warm-up: the warm-up sequence, as in process. Migrating schemes run
    // windows of 1.5 intervals until the values moved and replicas held
    // stop changing over one (or the cap); the others run one interval.
    let t0 = Instant::now();
    let warm = Sequence {
        base: &w.warm,
        first_rep: 2,
        endpoints: &w.endpoints,
        updates_once: true,
    };
    let next = AtomicU64::new(0);
    let interval = Duration::from_millis(p.interval_ms);
    let mut last = None;
    loop {
        let d = if migrating {
            interval * 3 / 2
        } else {
            interval
        };
        closed_loop(&client, &warm, &next, tcp.clients, k, d)?;
        procs.check()?;
        if !migrating {
            break;
        }
        let t = totals(&client)?;
        let now = (t.migrations_in, t.replicas_held);
        if last == Some(now) || t0.elapsed().as_secs_f64() > p.warm_s_max {
            break;
        }
        last = Some(now);
    }
    let warm_s = t0.elapsed().as_secs_f64();
    // Measure: the measured sequence from its start, for a fixed time.
    let measure = Sequence {
        base: &w.measure,
        first_rep: 0,
        endpoints: &w.endpoints,
        updates_once: false,
    };
    let before = totals(&client)?;
    r.note(format!(
        "{} over TCP: measuring {:.0} s ...",
        scheme.name(),
        tcp.measure_s
    ));
    let win = closed_loop(
        &client,
        &measure,
        &AtomicU64::new(0),
        tcp.clients,
        k,
        Duration::from_secs_f64(tcp.measure_s),
    )?;
    let after = totals(&client)?;
    procs.check()?;
    let pids = procs.pids();
    drop(client);
    procs.stop();
    let (local, remote) = (
        after.local_ops - before.local_ops,
        after.remote_ops - before.remote_ops,
    );
    let (hits, misses) = (
        after.cache_hits - before.cache_hits,
        after.cache_misses - before.cache_misses,
    );
    let us = |v: &[u64], q: f64| percentile_us(v, q);
    Ok(TcpRow {
        scheme: scheme.name().into(),
        run,
        throughput_qps: win.query_ns.len() as f64 / win.elapsed_s.max(1e-9),
        p50_us: us(&win.query_ns, 0.5),
        p99_us: us(&win.query_ns, 0.99),
        p999_us: us(&win.query_ns, 0.999),
        server_p50_us: us(&win.server_ns, 0.5),
        server_p99_us: us(&win.server_ns, 0.99),
        update_p50_us: us(&win.update_ns, 0.5),
        update_p99_us: us(&win.update_ns, 0.99),
        remote_rate: remote as f64 / (local + remote).max(1) as f64,
        query_remote_rate: win.query_ops.1 as f64
            / (win.query_ops.0 + win.query_ops.1).max(1) as f64,
        cache_hit_rate: if hits + misses == 0 {
            None
        } else {
            Some(hits as f64 / (hits + misses) as f64)
        },
        migrated_fraction: after.values_away as f64 / after.vertices.max(1) as f64,
        migrations: after.migrations_in,
        migrations_measured: after.migrations_in - before.migrations_in,
        replicas_held: after.replicas_held,
        vs_orig: 0.0,
        vs_ideal: 0.0,
        machines: spec.machines,
        clients: tcp.clients,
        queries: win.query_ns.len() as u64,
        updates: win.update_ns.len() as u64,
        measure_s: win.elapsed_s,
        warm_s,
        load: loaded,
        coordinator: spec.coordinator,
        pids,
    })
}
