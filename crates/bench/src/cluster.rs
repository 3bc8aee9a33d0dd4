//! An embedded cluster: N machines in this process on the fabric the
//! configuration names, with a graph loaded.

use std::time::Instant;

use locus_fabric::any::{AnyFabric, FabricKind};
use locus_fabric::counting::Counting;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_graph::{Csr, CsrOptions, Lists, Rmat, RmatConfig};
use locus_store::{home_of, Store, StoreConfig};

use crate::config::{Config, GraphSection};
use crate::{BenchError, Reporter, Result};

/// The fabric every embedded cluster runs on: the one the configuration
/// names (`[cluster] fabric`), with exact counters.
pub type EmbeddedFabric = Counting<AnyFabric>;

/// A loaded embedded cluster.
pub struct Embedded {
    /// The fabric (its counters measure local and remote operations).
    pub fabric: EmbeddedFabric,
    /// The store over it.
    pub store: Store<EmbeddedFabric>,
    /// Seconds the load took.
    pub load_s: f64,
    /// Value-region bytes the loaded graph occupies over all machines (the
    /// base replica memory is measured against).
    pub value_bytes: u64,
}

/// Builds the R-MAT graph of `g` as a CSR (undirected, simple).
pub fn rmat_csr(g: &GraphSection) -> Result<Csr> {
    let rmat = Rmat::new(RmatConfig {
        scale: g.scale,
        edge_factor: g.edge_factor,
        seed: g.seed,
        ..RmatConfig::default()
    })?;
    Ok(Csr::from_rmat(&rmat, CsrOptions::default())?)
}

/// The fabric of a cluster of `machines` machines, as `config` chooses it.
pub fn fabric(machines: usize, config: &Config) -> Result<EmbeddedFabric> {
    let fabric = match FabricKind::from(config.cluster.fabric) {
        FabricKind::Local => AnyFabric::Local(LocalFabric::new(LocalConfig {
            machines,
            latency_ns: config.cluster.latency_ns,
            bandwidth_bytes_per_s: config.cluster.bandwidth_bytes_per_s,
            pin_memory: config.cluster.pin_memory,
            ..LocalConfig::default()
        })?),
        FabricKind::Tcp => {
            return Err(BenchError::setting(
                "cluster.fabric",
                "\"tcp\"",
                "must be \"local\" (embedded clusters run in one process)",
            ))
        }
    };
    Ok(Counting::new(fabric))
}

/// The store settings of a cluster of `machines` machines sized for `graph`
/// (before a scheme adjusts them). Server processes of the TCP benchmark get
/// the same settings through their cluster file.
pub fn store_config(graph: &impl Lists, machines: usize, config: &Config) -> StoreConfig {
    StoreConfig {
        reclaim_lease_ms: config.store.reclaim_lease_ms,
        cache_bytes_max: config.store.location_cache_mb << 20,
        cache_lease_ms: config.store.reclaim_lease_ms.min(60_000),
        ..StoreConfig::for_graph(
            graph.entries(),
            graph.stored_edges(),
            machines,
            config.store.part_neighbors_max,
        )
    }
}

/// Builds a cluster of `machines` machines and loads `graph` into it (a
/// dense [`Csr`] or a sparse [`locus_graph::Adjacency`]): every vertex with
/// at least one neighbour becomes a key at its home machine. Capacity is
/// checked first, so a load either completes or loads nothing.
pub fn build(
    graph: &impl Lists,
    machines: usize,
    config: &Config,
    r: &Reporter,
) -> Result<Embedded> {
    build_with(graph, machines, config, r, |_| {})
}

/// [`build`] with the store settings adjusted by `tweak` before the cluster is made.
pub fn build_with(
    csr: &impl Lists,
    machines: usize,
    config: &Config,
    r: &Reporter,
    tweak: impl FnOnce(&mut StoreConfig),
) -> Result<Embedded> {
    let fabric = fabric(machines, config)?;
    let mut store_config = store_config(csr, machines, config);
    tweak(&mut store_config);
    let store = Store::create(fabric.clone(), store_config)?;
    store.check_capacity_of(
        (0..csr.entries())
            .map(|i| (csr.vertex(i), csr.list(i).len() as u64))
            .filter(|&(_, d)| d > 0),
    )?;
    let t0 = Instant::now();
    let threads = config.threads();
    let n = csr.entries();
    let pb = r.bar(n, &format!("loading {machines} machine(s)"));
    let result: Result<()> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (store, pb) = (&store, &pb);
                s.spawn(move || -> Result<()> {
                    let mut workers = (0..machines)
                        .map(|m| store.worker(m as u8))
                        .collect::<locus_store::Result<Vec<_>>>()?;
                    let mut i = t as u64;
                    let mut since = 0u64;
                    while i < n {
                        let list = csr.list(i);
                        if !list.is_empty() {
                            let v = csr.vertex(i);
                            workers[home_of(v, machines) as usize].put(v, list)?;
                        }
                        i += threads as u64;
                        since += 1;
                        if since == 4096 {
                            pb.inc(since);
                            since = 0;
                        }
                    }
                    pb.inc(since);
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join().unwrap_or_else(|_| {
                Err(BenchError::ThreadPanicked {
                    thread: "loader".into(),
                })
            })
        })
    });
    pb.finish_and_clear();
    result?;
    fabric.counters().reset();
    let load_s = t0.elapsed().as_secs_f64();
    let value_bytes = store.usage().iter().map(|u| u.value_live_bytes).sum();
    Ok(Embedded {
        fabric,
        store,
        load_s,
        value_bytes,
    })
}
