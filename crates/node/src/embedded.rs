//! An embedded cluster: N machines in this process on the fabric the
//! configuration names, with a graph loaded (what `locus query`, `locus
//! load`, `locus rdf` and the benchmarks run).
//!
//! It is one [`Node`] per machine, each over a view of one in-process
//! fabric that hosts its machine alone (`LocalFabric::hosting_only`: the
//! same memory, one epoch table per machine), made by the same
//! `Node::create` / `Created::recover` as `locus server`'s. Whatever runs
//! over every machine takes them as [`Stores`]: machine `m`'s workers,
//! cache and tracker come from node `m`'s store. The nodes count into one
//! table of counters, the fabric's.

use std::time::Instant;

use locus_fabric::any::{AnyFabric, FabricKind};
use locus_fabric::counting::Counting;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::MachineId;
use locus_graph::{Csr, CsrOptions, Lists, Rmat, RmatConfig};
use locus_store::{StoreConfig, Stores};
use serde::Serialize;

use crate::config::NodeConfig;
use crate::embedded_config::{Config, GraphSection};
use crate::node::{Node, NodeParts};
use crate::progress::Reporter;
use crate::{NodeError, Result};

/// The fabric every embedded cluster runs on: the one the configuration
/// names (`[cluster] fabric`), with exact counters.
pub type EmbeddedFabric = Counting<AnyFabric>;

/// A loaded embedded cluster.
pub struct Embedded {
    /// The fabric hosting every machine (its counters, which every node
    /// counts into, measure local and remote operations).
    pub fabric: EmbeddedFabric,
    /// The nodes, `nodes[m]` serving machine `m`.
    pub nodes: Vec<Node<AnyFabric>>,
    /// The nodes' stores, seen as one.
    pub stores: Stores<EmbeddedFabric>,
    /// Seconds the load took.
    pub load_s: f64,
    /// Value-region bytes the loaded graph occupies over all machines (the
    /// base replica memory is measured against).
    pub value_bytes: u64,
}

/// The R-MAT generator of `g`.
pub fn rmat_of(g: &GraphSection) -> Result<Rmat> {
    Ok(Rmat::new(RmatConfig {
        scale: g.scale,
        edge_factor: g.edge_factor,
        seed: g.seed,
        ..RmatConfig::default()
    })?)
}

/// Builds the R-MAT graph of `g` as a CSR (undirected, simple).
pub fn rmat_csr(g: &GraphSection) -> Result<Csr> {
    Ok(Csr::from_rmat(&rmat_of(g)?, CsrOptions::default())?)
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
            return Err(NodeError::setting(
                "cluster.fabric",
                "\"tcp\"".into(),
                "must be \"local\" (embedded clusters run in one process)",
            ))
        }
    };
    Ok(Counting::new(fabric))
}

impl Embedded {
    /// A cluster of `machines` empty nodes with store settings `store_config`.
    pub fn create(machines: usize, config: &Config, store_config: StoreConfig) -> Result<Embedded> {
        let fabric = fabric(machines, config)?;
        let AnyFabric::Local(local) = fabric.inner() else {
            unreachable!("embedded clusters run on the local fabric (checked by `fabric`)")
        };
        let node_config = NodeConfig {
            store: config.store.clone(),
            ..NodeConfig::default()
        };
        let created = (0..machines)
            .map(|m| {
                Node::create_with(
                    NodeParts {
                        fabric: AnyFabric::Local(local.hosting_only(m as MachineId)?),
                        me: m as MachineId,
                        config: node_config.clone(),
                        log: None,
                        label: format!("machine {m}"),
                        counters: Some(std::sync::Arc::clone(fabric.counters())),
                    },
                    store_config.clone(),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let nodes = created
            .into_iter()
            .enumerate()
            .map(|(m, c)| {
                let mut w = c.store().worker(m as MachineId)?;
                c.recover(&mut w)
            })
            .collect::<Result<Vec<_>>>()?;
        let stores = Stores::per_machine(nodes.iter().map(|n| n.store().clone()).collect())?;
        Ok(Embedded {
            fabric,
            nodes,
            stores,
            load_s: 0.0,
            value_bytes: 0,
        })
    }

    /// Machines in the cluster.
    pub fn machines(&self) -> usize {
        self.nodes.len()
    }

    /// Changes every node's in-memory store settings (cache and replicas;
    /// see `Store::reconfigure`): no worker, service or driver may run.
    pub fn reconfigure(&mut self, store_config: StoreConfig) -> Result<()> {
        // Drop the nodes' shared handles first: a store reconfigures only
        // through its one handle.
        self.stores = Stores::per_machine(Vec::new())?;
        let result = self
            .nodes
            .iter_mut()
            .try_for_each(|n| n.reconfigure(store_config.clone()));
        self.stores = Stores::per_machine(self.nodes.iter().map(|n| n.store().clone()).collect())?;
        result
    }
}

/// The store settings of a cluster of `machines` machines sized for `graph`
/// (before a scheme adjusts them). Server processes of the TCP benchmark get
/// the same settings through their cluster file.
pub fn store_config(graph: &impl Lists, machines: usize, config: &Config) -> StoreConfig {
    config.store.store_config_for(StoreConfig::for_graph(
        graph.entries(),
        graph.stored_edges(),
        machines,
        config.store.part_neighbors_max,
    ))
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
    let mut store_config = store_config(csr, machines, config);
    tweak(&mut store_config);
    let mut e = Embedded::create(machines, config, store_config)?;
    e.stores.check_capacity_of(
        (0..csr.entries())
            .map(|i| (csr.vertex(i), csr.list(i).len() as u64))
            .filter(|&(_, d)| d > 0),
    )?;
    let t0 = Instant::now();
    let pb = r.bar(csr.entries(), &format!("loading {machines} machine(s)"));
    let result = put_lists(&e.stores, csr, config.threads(), &|n| pb.inc(n));
    pb.finish_and_clear();
    result?;
    e.fabric.counters().reset();
    e.load_s = t0.elapsed().as_secs_f64();
    e.value_bytes = e.stores.usage().iter().map(|u| u.value_live_bytes).sum();
    Ok(e)
}

/// Puts every non-empty list of `lists` at its vertex's home, from
/// `threads` threads; `progress(n)` is told of entries done.
fn put_lists(
    store: &Stores<EmbeddedFabric>,
    lists: &impl Lists,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<()> {
    let n = lists.entries();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<()> {
                    let mut workers = store.workers()?;
                    let mut i = t as u64;
                    let mut since = 0u64;
                    while i < n {
                        let list = lists.list(i);
                        if !list.is_empty() {
                            let v = lists.vertex(i);
                            workers[store.owner(v) as usize].put(v, list)?;
                        }
                        i += threads as u64;
                        since += 1;
                        if since == 4096 {
                            progress(since);
                            since = 0;
                        }
                    }
                    progress(since);
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join().unwrap_or_else(|_| {
                Err(NodeError::ThreadPanicked {
                    thread: "loader".into(),
                })
            })
        })
    })
}

/// Bytes per raw adjacency entry while a range is built (the target id; the
/// offsets and cursors add 16 bytes per vertex of the range).
pub const RANGED_BYTES_PER_ENTRY: u64 = 4;

/// What [`build_rmat_ranged`] measured of its load.
#[derive(Debug, Clone, Serialize)]
pub struct RangedLoad {
    /// Vertices of the graph (`2^scale`).
    pub vertices: u64,
    /// Vertices with a list.
    pub vertices_with_edges: u64,
    /// Adjacency entries stored (after dedup; both directions if symmetrized).
    pub stored_edges: u64,
    /// Generated edges.
    pub generated_edges: u64,
    /// Vertex ranges the lists were built in (passes over the generator after the degree pass).
    pub ranges: usize,
    /// Seconds of the degree pass.
    pub degrees_s: f64,
    /// Seconds from the first range's build to the last list put.
    pub load_s: f64,
    /// Generated edges per second over the whole load (degree pass included).
    pub edges_per_s: f64,
    /// Key-table bytes over all machines.
    pub key_bytes: u64,
    /// Value-region bytes in use (the lists) over all machines.
    pub value_bytes: u64,
    /// (key + value bytes) per vertex of the graph.
    pub bytes_per_vertex: f64,
    /// Value bytes per stored adjacency entry.
    pub value_bytes_per_edge: f64,
}

/// Builds a cluster of `machines` machines and loads the R-MAT graph of `g`
/// into it without ever holding its CSR: one pass of the counter-based
/// generator counts each vertex's raw degree (4 bytes per vertex, kept: a
/// zero says the vertex has no list); then the vertices are cut into ranges
/// of at most `range_entries` raw adjacency entries, and for each range the
/// generator runs once more, filling only that range's lists into slots the
/// degrees already sized; they are sorted, deduplicated, self loops dropped,
/// symmetrized if `opts` says, put at their homes and dropped. Peak memory
/// beyond the store: the degrees and one range's lists
/// ([`RANGED_BYTES_PER_ENTRY`] per entry, plus 16 bytes per vertex of the
/// range). Generator passes: one for the degrees, one per range. The store is sized from
/// the raw degrees (an upper bound), and its capacity is checked before
/// anything is put.
pub fn build_rmat_ranged(
    g: &GraphSection,
    opts: CsrOptions,
    machines: usize,
    config: &Config,
    range_entries: u64,
    r: &Reporter,
    tweak: impl FnOnce(&mut StoreConfig),
) -> Result<(Embedded, Vec<u32>, RangedLoad)> {
    let rmat = rmat_of(g)?;
    let n = rmat.vertex_count();
    let threads = config.threads();
    let t0 = Instant::now();
    r.note(format!(
        "R-MAT scale {}: counting the degrees of {} vertices over {} edges ...",
        g.scale,
        n,
        rmat.edge_count()
    ));
    let degrees = locus_graph::csr::raw_degrees(n, opts, &rmat, threads)?;
    let degrees_s = t0.elapsed().as_secs_f64();
    let (e, mut load) =
        load_rmat_ranged(g, opts, &degrees, machines, config, range_entries, r, tweak)?;
    load.degrees_s = degrees_s;
    load.edges_per_s = rmat.edge_count() as f64 / t0.elapsed().as_secs_f64();
    Ok((e, degrees, load))
}

/// [`build_rmat_ranged`] with the raw degrees already counted (a run that
/// loads the same graph into several stores counts them once).
#[allow(clippy::too_many_arguments)]
pub fn load_rmat_ranged(
    g: &GraphSection,
    opts: CsrOptions,
    degrees: &[u32],
    machines: usize,
    config: &Config,
    range_entries: u64,
    r: &Reporter,
    tweak: impl FnOnce(&mut StoreConfig),
) -> Result<(Embedded, RangedLoad)> {
    let rmat = rmat_of(g)?;
    let n = rmat.vertex_count();
    let threads = config.threads();
    let raw_entries: u64 = degrees.iter().map(|&d| u64::from(d)).sum();
    let mut store_config = config.store.store_config_for(StoreConfig::for_graph(
        n,
        raw_entries,
        machines,
        config.store.part_neighbors_max,
    ));
    tweak(&mut store_config);
    let mut e = Embedded::create(machines, config, store_config)?;
    e.stores.check_capacity_of(
        degrees
            .iter()
            .enumerate()
            .filter(|&(_, &d)| d > 0)
            .map(|(v, &d)| (v as u32, u64::from(d))),
    )?;
    let ranges = locus_graph::csr::ranges_by_entries(degrees, range_entries.max(1));
    let t1 = Instant::now();
    let pb = r.bar(
        n,
        &format!("loading {machines} machine(s), {} range(s)", ranges.len()),
    );
    let mut stored_edges = 0u64;
    for range in &ranges {
        let part = Csr::build_range_from_degrees(n, opts, &rmat, range.clone(), degrees, threads)?;
        stored_edges += part.edge_count();
        let lists = Offset {
            csr: &part,
            first: range.start as u32,
        };
        put_lists(&e.stores, &lists, threads, &|k| pb.inc(k))?;
    }
    pb.finish_and_clear();
    e.fabric.counters().reset();
    let load_s = t1.elapsed().as_secs_f64();
    let usage = e.stores.usage();
    let key_bytes: u64 = usage.iter().map(|u| u.key_region_bytes).sum();
    let value_bytes: u64 = usage.iter().map(|u| u.value_live_bytes).sum();
    let load = RangedLoad {
        vertices: n,
        vertices_with_edges: degrees.iter().filter(|&&d| d > 0).count() as u64,
        stored_edges,
        generated_edges: rmat.edge_count(),
        ranges: ranges.len(),
        degrees_s: 0.0,
        load_s,
        edges_per_s: rmat.edge_count() as f64 / load_s.max(1e-9),
        key_bytes,
        value_bytes,
        bytes_per_vertex: (key_bytes + value_bytes) as f64 / n as f64,
        value_bytes_per_edge: value_bytes as f64 / stored_edges.max(1) as f64,
    };
    e.load_s = load_s;
    e.value_bytes = value_bytes;
    Ok((e, load))
}

/// One range's CSR seen as lists of the graph's own vertex ids.
struct Offset<'a> {
    csr: &'a Csr,
    first: u32,
}

impl Lists for Offset<'_> {
    fn entries(&self) -> u64 {
        self.csr.vertex_count()
    }
    fn vertex(&self, i: u64) -> u32 {
        self.first + i as u32
    }
    fn list(&self, i: u64) -> &[u32] {
        self.csr.neighbors(i as u32)
    }
    fn vertices_with_edges(&self) -> u64 {
        Lists::vertices_with_edges(self.csr)
    }
    fn stored_edges(&self) -> u64 {
        self.csr.edge_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranged loader stores exactly the lists a CSR-built cluster holds,
    /// for both directed and symmetrized graphs, whatever the range size.
    #[test]
    fn ranged_rmat_load_stores_what_the_csr_load_stores() {
        let mut config = Config::default();
        config.cluster.machines = 4;
        config.cluster.threads = 2;
        config.cluster.latency_ns = 0;
        config.cluster.bandwidth_bytes_per_s = 0;
        config.cluster.pin_memory = false;
        config.graph.scale = 10;
        config.graph.edge_factor = 8;
        let r = Reporter::quiet();
        for opts in [
            CsrOptions::default(),
            CsrOptions {
                symmetrize: false,
                ..CsrOptions::default()
            },
        ] {
            let rmat = rmat_of(&config.graph).unwrap();
            let csr = Csr::from_rmat(&rmat, opts).unwrap();
            for range_entries in [700, 1 << 30] {
                let (e, degrees, load) =
                    build_rmat_ranged(&config.graph, opts, 4, &config, range_entries, &r, |_| {})
                        .unwrap();
                assert_eq!(load.stored_edges, csr.edge_count());
                assert_eq!(load.vertices, 1024);
                assert!(load.ranges > 1 || range_entries > 1 << 20);
                let mut w = e.stores.worker(0).unwrap();
                for v in 0..1024u32 {
                    let got = w.get(v).unwrap();
                    if csr.degree(v) == 0 {
                        assert_eq!(degrees[v as usize], 0);
                        assert!(got.is_none(), "{v} has no edges but a value");
                    } else {
                        assert_eq!(got.as_deref(), Some(csr.neighbors(v)), "{opts:?} {v}");
                    }
                }
                assert!(load.value_bytes_per_edge >= 4.0);
            }
        }
    }
}
