//! An embedded cluster: N machines on the in-process fabric, with a graph loaded.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use locus_fabric::counting::Counting;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_graph::Csr;
use locus_store::{home_of, Store, StoreConfig};

use crate::config::Config;

/// The fabric every embedded cluster runs on.
pub type EmbeddedFabric = Counting<LocalFabric>;

/// A loaded embedded cluster.
pub struct Embedded {
    pub fabric: EmbeddedFabric,
    pub store: Store<EmbeddedFabric>,
    pub load_s: f64,
}

/// A progress bar on stderr if it is a terminal, hidden otherwise.
pub fn progress(len: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style =
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {human_pos}/{human_len} (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    pb.set_style(style);
    pb.set_message(what.to_string());
    pb
}

/// Builds a cluster of `machines` machines and loads `csr` into it: every
/// vertex with at least one neighbour becomes a key at its home machine.
/// Capacity is checked first, so a load either completes or loads nothing.
pub fn build(csr: &Csr, machines: usize, config: &Config) -> Result<Embedded, String> {
    build_with(csr, machines, config, |_| {})
}

/// [`build`] with the store settings adjusted by `tweak` before the cluster is made.
pub fn build_with(
    csr: &Csr,
    machines: usize,
    config: &Config,
    tweak: impl FnOnce(&mut StoreConfig),
) -> Result<Embedded, String> {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig {
            machines,
            latency_ns: config.cluster.latency_ns,
            bandwidth_bytes_per_s: config.cluster.bandwidth_bytes_per_s,
            pin_memory: config.cluster.pin_memory,
            ..LocalConfig::default()
        })
        .map_err(|e| e.to_string())?,
    );
    let store_config = StoreConfig {
        reclaim_lease_ms: config.store.reclaim_lease_ms,
        cache_bytes_max: config.store.location_cache_mb << 20,
        cache_lease_ms: config.store.reclaim_lease_ms.min(60_000),
        ..StoreConfig::for_graph(
            csr.vertex_count(),
            csr.edge_count(),
            machines,
            config.store.part_neighbors_max,
        )
    };
    let mut store_config = store_config;
    tweak(&mut store_config);
    let store = Store::create(fabric.clone(), store_config).map_err(|e| e.to_string())?;
    store
        .check_capacity(csr.vertex_count(), |v| csr.degree(v as u32))
        .map_err(|e| format!("the graph does not fit: {e}"))?;
    let t0 = Instant::now();
    let threads = config.threads();
    let n = csr.vertex_count();
    let pb = progress(n, &format!("loading {machines} machine(s)"));
    let result: Result<(), String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (store, pb) = (&store, &pb);
                s.spawn(move || -> Result<(), String> {
                    let mut workers = (0..machines)
                        .map(|m| store.worker(m as u8))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| e.to_string())?;
                    let mut v = t as u64;
                    let mut since = 0u64;
                    while v < n {
                        let list = csr.neighbors(v as u32);
                        if !list.is_empty() {
                            let home = home_of(v as u32, machines) as usize;
                            workers[home]
                                .put(v as u32, list)
                                .map_err(|e| format!("loading vertex {v}: {e}"))?;
                        }
                        v += threads as u64;
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
            h.join()
                .unwrap_or_else(|_| Err("a loader thread panicked".into()))
        })
    });
    pb.finish_and_clear();
    result?;
    fabric.counters().reset();
    Ok(Embedded {
        fabric,
        store,
        load_s: t0.elapsed().as_secs_f64(),
    })
}
