//! One scheme's run of the SPARQL mix: load, warm up (and migrate), measure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use locus_coordinator::{Driver, Mode};
use locus_fabric::counting::Counters;
use locus_fabric::pool::Pool;
use locus_rdf::sparql::Prepared;
use locus_rdf::{Dataset, RdfStore};
use locus_store::{Services, VertexId};
use locus_workloads::traversal::percentile_us;
use oxrdf::{NamedNode, Term};

use super::{Row, Settings, Workload, CLASSES};
use crate::cluster::{self, EmbeddedFabric};
use crate::pragh::Scheme;
use crate::{BenchError, Reporter, Result};

type Rdf = RdfStore<EmbeddedFabric>;

/// A loaded scheme: fields drop in order, the driver before the services.
struct Running {
    scheme: Scheme,
    driver: Option<Driver<EmbeddedFabric>>,
    services: Services,
    rdf: Arc<Rdf>,
    prepared: Arc<Vec<Prepared>>,
    counters: Arc<Counters>,
    /// The nodes holding the data, one per machine (held while it runs;
    /// dropped after the driver and services, which use their stores).
    _nodes: cluster::Embedded,
}

/// What one pass over a sequence measured.
struct Pass {
    elapsed_s: f64,
    /// Latencies in nanoseconds, per op.
    latencies_ns: Vec<u64>,
    reads: u64,
    rows: u64,
    remote_rate: f64,
    /// Values read, and of them read from another machine than the query's.
    gets: u64,
    remote_gets: u64,
}

impl Running {
    fn start(scheme: Scheme, d: &Dataset, w: &Workload, p: &Settings) -> Result<(Running, f64)> {
        let config = p.config();
        let machines = scheme.machines(p.machines);
        let t0 = Instant::now();
        let mut nodes = None;
        let rdf = RdfStore::load_into(
            machines,
            d.clone(),
            |mut s| -> Result<_> {
                s.reclaim_lease_ms = config.store.reclaim_lease_ms;
                s.cache_lease_ms = config.store.reclaim_lease_ms.min(60_000);
                scheme.configure(&mut s, None);
                let e = cluster::Embedded::create(machines, &config, s)?;
                let stores = e.stores.clone();
                nodes = Some(e);
                Ok(stores)
            },
            &(),
        )?;
        let nodes = nodes.expect("load_into made the cluster");
        let counters = Arc::clone(nodes.fabric.counters());
        let load_s = t0.elapsed().as_secs_f64();
        let prepared = CLASSES
            .iter()
            .zip(&w.classes)
            .map(|(c, (start, _))| {
                let term = Term::NamedNode(NamedNode::new_unchecked(start.clone()));
                Prepared::new(rdf.catalog(), &c.query(start), &term)
            })
            .collect::<locus_rdf::Result<Vec<_>>>()?;
        let services = rdf.store().spawn_services()?;
        let driver = if scheme.migrates() {
            Some(Driver::start(
                rdf.store().clone(),
                scheme.driver_config(p.interval_ms, Mode::Eager),
            )?)
        } else {
            None
        };
        Ok((
            Running {
                scheme,
                driver,
                services,
                rdf: Arc::new(rdf),
                prepared: Arc::new(prepared),
                counters,
                _nodes: nodes,
            },
            load_s,
        ))
    }

    fn check(&self) -> Result<()> {
        if let Some(e) = self.services.failure() {
            return Err(BenchError::Service {
                scheme: self.scheme.name().into(),
                source: e,
            });
        }
        if let Some(e) = self.driver.as_ref().and_then(|d| d.error()) {
            return Err(BenchError::Driver {
                scheme: self.scheme.name().into(),
                source: e,
            });
        }
        Ok(())
    }

    /// Runs `ops` on `threads` workers, each query on its constant's home.
    fn pass(&self, ops: &[(u8, u32)], threads: usize, label: &str, r: &Reporter) -> Result<Pass> {
        let store = self.rdf.store().clone();
        let machines = store.machines();
        let pool = Pool::new(threads, machines, move |m| {
            store.worker(m).map_err(|e| e.to_string())
        })?;
        let n = ops.len();
        let latencies: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let reads = Arc::new(AtomicU64::new(0));
        let rows = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let pb = r.bar(n as u64, label);
        let before = self.counters.total();
        let gets_before = self.rdf.store().get_counts();
        let t0 = Instant::now();
        for (i, &(class, start)) in ops.iter().enumerate() {
            let (rdf, prepared) = (Arc::clone(&self.rdf), Arc::clone(&self.prepared));
            let (latencies, reads, rows, done_job, error) = (
                Arc::clone(&latencies),
                Arc::clone(&reads),
                Arc::clone(&rows),
                Arc::clone(&done),
                Arc::clone(&error),
            );
            let q = &self.prepared[class as usize];
            let machine = q.machine(&self.rdf, start) as u8;
            pool.execute(machine, move |w| {
                let t = Instant::now();
                let out = prepared[class as usize].run(rdf.catalog(), w, start, None);
                latencies[i].store(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                match out {
                    Ok(o) => {
                        reads.fetch_add(o.reads, Ordering::Relaxed);
                        rows.fetch_add(o.rows as u64, Ordering::Relaxed);
                    }
                    Err(e) => {
                        error
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert_with(|| {
                                format!(
                                    "query {} from id {start} on machine {machine}: {e}",
                                    CLASSES[class as usize].name
                                )
                            });
                    }
                }
                done_job.fetch_add(1, Ordering::Relaxed);
            })?;
            if i % 1024 == 0 {
                pb.set_position(done.load(Ordering::Relaxed));
            }
        }
        pool.wait_idle()?;
        let elapsed_s = t0.elapsed().as_secs_f64();
        // The pool's workers hand their GET counts to the store when dropped.
        drop(pool);
        let gets_after = self.rdf.store().get_counts();
        pb.finish_and_clear();
        self.check()?;
        if let Some(e) = error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(BenchError::Measurement {
                experiment: "sparql",
                what: e,
            });
        }
        let delta = self.counters.total().minus(&before);
        Ok(Pass {
            elapsed_s,
            latencies_ns: latencies
                .iter()
                .map(|l| l.load(Ordering::Relaxed))
                .collect(),
            reads: reads.load(Ordering::Relaxed),
            rows: rows.load(Ordering::Relaxed),
            remote_rate: delta.remote_rate(),
            gets: gets_after.0 - gets_before.0,
            remote_gets: gets_after.1 - gets_before.1,
        })
    }

    /// Shard's plan and move (as `bench pragh`'s Shard: full access counts
    /// of the warm-up sequence, tracking not charged, traffic paused): every
    /// key a query reads counts for its shard at the query's machine.
    fn move_shards(&self, ops: &[(u8, u32)], r: &Reporter) -> Result<(u64, u64)> {
        let store = self.rdf.store();
        let map = store.shard_map().ok_or(BenchError::setting(
            "scheme",
            "Shard",
            "needs a store with shard-based placement",
        ))?;
        let shards = map.shards() as usize;
        let machines = store.machines();
        let mut counts = vec![vec![0u64; machines]; shards];
        let mut workers = self.rdf.workers()?;
        let mut log: Vec<VertexId> = Vec::new();
        for &(class, start) in ops {
            let q = &self.prepared[class as usize];
            let m = q.machine(&self.rdf, start);
            log.clear();
            q.run(self.rdf.catalog(), &mut workers[m], start, Some(&mut log))?;
            for &k in &log {
                counts[map.shard_of(k) as usize][m] += 1;
            }
        }
        let mut keys = vec![0u64; shards];
        for &k in self.rdf.keys() {
            keys[map.shard_of(k) as usize] += 1;
        }
        let current: Vec<u8> = (0..shards as u32).map(|s| map.owner_of_shard(s)).collect();
        let total: u64 = keys.iter().sum();
        let moves =
            locus_store::shard::plan(&counts, &keys, &current, total * 2 / machines as u64 + 1);
        r.note(format!(
            "Shard: moving {} of {} shards",
            moves.len(),
            shards
        ));
        Ok(store.move_shards(&moves)?)
    }

    /// Keys whose value is held away from the key's machine.
    fn values_away(&self) -> Result<u64> {
        let store = self.rdf.store();
        let mut w0 = store.worker(0)?;
        let mut away = 0;
        for &k in self.rdf.keys() {
            let home = store.owner(k);
            let word = w0.address_word(k)?;
            if locus_store::addr::Addr::decode(word).is_some_and(|a| a.holder(home) != home) {
                away += 1;
            }
        }
        Ok(away)
    }
}

/// Runs one scheme: load, warm up (and migrate), measure.
pub(super) fn run_scheme(
    scheme: Scheme,
    d: &Dataset,
    w: &Workload,
    p: &Settings,
    r: &Reporter,
) -> Result<Row> {
    let (run, load_s) = Running::start(scheme, d, w, p)?;
    let t0 = Instant::now();
    let label = format!("{}: warm-up", scheme.name());
    let mut shard_moved = (0, 0);
    if scheme == Scheme::Shard {
        run.pass(&w.warm, p.threads, &label, r)?;
        shard_moved = run.move_shards(&w.warm, r)?;
    }
    // Warm-up: fills caches; for migrating schemes, runs until a round of
    // at least 1.5 intervals approves nothing new.
    let interval = Duration::from_millis(p.interval_ms + p.interval_ms / 2);
    let mut last_approved = u64::MAX;
    loop {
        let round_start = Instant::now();
        run.pass(&w.warm, p.threads, &label, r)?;
        let Some(d) = &run.driver else { break };
        while round_start.elapsed() < interval {
            run.pass(&w.warm, p.threads, &label, r)?;
        }
        d.wait_drained(Duration::from_secs(30));
        let approved = d.stats().approved.load(Ordering::Relaxed)
            + d.stats().replicas_approved.load(Ordering::Relaxed);
        if approved == last_approved || t0.elapsed().as_secs_f64() > p.warm_s_max {
            break;
        }
        last_approved = approved;
    }
    let warm_s = t0.elapsed().as_secs_f64();
    // Measure: the sequence, repeated until it lasts long enough.
    let label = format!("{}: measuring", scheme.name());
    let mut passes = vec![run.pass(&w.measure, p.threads, &label, r)?];
    let mut measured: f64 = passes[0].elapsed_s;
    while measured < p.measure_s_min {
        let pass = run.pass(&w.measure, p.threads, &label, r)?;
        measured += pass.elapsed_s;
        passes.push(pass);
    }
    let (moved, bytes_moved) = match &run.driver {
        Some(d) => (
            d.stats().moved.load(Ordering::Relaxed),
            d.stats().bytes_moved.load(Ordering::Relaxed),
        ),
        None => shard_moved,
    };
    let keys = run.rdf.keys().len().max(1) as f64;
    let migrated = if scheme.migrates() {
        run.values_away()? as f64 / keys
    } else {
        shard_moved.0 as f64 / keys
    };
    let queries = passes.iter().map(|x| x.latencies_ns.len()).sum::<usize>();
    let mut all: Vec<u64> = passes.iter().flat_map(|x| x.latencies_ns.clone()).collect();
    let class_p50_us = (0..CLASSES.len())
        .map(|c| {
            let mut l: Vec<u64> = passes
                .iter()
                .flat_map(|x| {
                    x.latencies_ns
                        .iter()
                        .zip(&w.measure)
                        .filter(|(_, q)| q.0 as usize == c)
                        .map(|(l, _)| *l)
                })
                .collect();
            l.sort_unstable();
            percentile_us(&l, 0.5)
        })
        .collect();
    all.sort_unstable();
    // The remote rate weighs each pass by its length (passes are the same sequence).
    let remote_rate = passes.iter().map(|x| x.remote_rate).sum::<f64>() / passes.len() as f64;
    let q = queries.max(1) as f64;
    let gets: u64 = passes.iter().map(|x| x.gets).sum();
    let remote_gets = passes.iter().map(|x| x.remote_gets).sum::<u64>() as f64 / gets.max(1) as f64;
    let row = Row {
        scheme: scheme.name().into(),
        run: 0,
        throughput_qps: queries as f64 / measured.max(1e-9),
        p50_us: percentile_us(&all, 0.5),
        p99_us: percentile_us(&all, 0.99),
        remote_rate,
        remote_gets,
        reads_per_query: passes.iter().map(|x| x.reads).sum::<u64>() as f64 / q,
        rows_per_query: passes.iter().map(|x| x.rows).sum::<u64>() as f64 / q,
        migrated_fraction: migrated,
        values_moved: moved,
        bytes_moved,
        warm_s,
        load_s,
        queries: queries as u64,
        machines: scheme.machines(p.machines),
        class_p50_us,
    };
    if let Some(d) = run.driver {
        d.stop();
    }
    Ok(row)
}
