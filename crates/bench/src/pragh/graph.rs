//! The graph every scheme of a `bench pragh` run loads, held in one of two
//! ways:
//! - [`Graph::Csr`]: the whole CSR in memory beside each scheme's store (small
//!   scales; what the TCP side loads over the client too);
//! - [`Graph::Ranged`]: nothing but each vertex's raw degree (4 bytes per
//!   vertex) and the lists of the workload's start vertices; each scheme's
//!   store is loaded straight from the counter-based generator, a vertex
//!   range at a time ([`crate::cluster::build_rmat_ranged`]), so R-MAT 26
//!   fits on one machine beside its store (issue 13).
//!
//! Both give the benchmark the same answers: which vertices have a value,
//! and the first neighbours of the start vertices (the placement bound and
//! the Shard plan read those).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use locus_graph::{Csr, CsrOptions};
use locus_store::StoreConfig;
use serde::Serialize;

use crate::cluster::{self, Embedded};
use crate::config::{Config, GraphSection};
use crate::{Reporter, Result};

/// How a run holds its graph (`--loader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Loader {
    /// A CSR in memory, each store loaded from it.
    Csr,
    /// No CSR: stores loaded from the generator a vertex range at a time.
    Ranged,
}

impl Loader {
    /// The default for a scale: a CSR up to R-MAT 22, ranged above.
    pub fn for_scale(scale: u32) -> Loader {
        if scale <= 22 {
            Loader::Csr
        } else {
            Loader::Ranged
        }
    }
}

/// Adjacency entries built per range by the ranged loader (about 2 GiB of
/// them while building).
const RANGE_ENTRIES: u64 = (2u64 << 30) / cluster::RANGED_BYTES_PER_ENTRY;

/// A run's graph (see the module doc).
pub enum Graph {
    /// The whole CSR.
    Csr(Csr),
    /// Degrees and start lists only.
    Ranged(Ranged),
}

/// The ranged graph's state.
pub struct Ranged {
    section: GraphSection,
    opts: CsrOptions,
    degrees: Vec<u32>,
    /// Lists of the vertices asked for by [`Graph::remember_lists`].
    lists: Mutex<HashMap<u32, Vec<u32>>>,
    /// Stored adjacency entries, known after the first load.
    stored_edges: OnceLock<u64>,
}

impl Graph {
    /// The R-MAT graph of `g` (undirected, simple, as Pragh's), held as `loader` says.
    pub fn generate(
        g: &GraphSection,
        loader: Loader,
        threads: usize,
        r: &Reporter,
    ) -> Result<Graph> {
        let opts = CsrOptions::default();
        match loader {
            Loader::Csr => Ok(Graph::Csr(cluster::rmat_csr(g)?)),
            Loader::Ranged => {
                let rmat = cluster::rmat_of(g)?;
                r.note(format!(
                    "R-MAT scale {}: counting degrees (no CSR: each store loads a range at a time) ...",
                    g.scale
                ));
                let degrees =
                    locus_graph::csr::raw_degrees(rmat.vertex_count(), opts, &rmat, threads)?;
                Ok(Graph::Ranged(Ranged {
                    section: g.clone(),
                    opts,
                    degrees,
                    lists: Mutex::new(HashMap::new()),
                    stored_edges: OnceLock::new(),
                }))
            }
        }
    }

    /// The CSR, if the graph is held as one.
    pub fn csr(&self) -> Option<&Csr> {
        match self {
            Graph::Csr(c) => Some(c),
            Graph::Ranged(_) => None,
        }
    }

    /// Vertices of the graph (ids `0..vertex_count()`).
    pub fn vertex_count(&self) -> u64 {
        match self {
            Graph::Csr(c) => c.vertex_count(),
            Graph::Ranged(g) => g.degrees.len() as u64,
        }
    }

    /// Whether `v` has a list (a value in the store).
    pub fn has_edges(&self, v: u32) -> bool {
        match self {
            Graph::Csr(c) => c.degree(v) > 0,
            Graph::Ranged(g) => g.degrees[v as usize] > 0,
        }
    }

    /// Stored adjacency entries (for a ranged graph: 0 until a store was loaded).
    pub fn stored_edges(&self) -> u64 {
        match self {
            Graph::Csr(c) => c.edge_count(),
            Graph::Ranged(g) => g.stored_edges.get().copied().unwrap_or(0),
        }
    }

    /// Makes the lists of `vertices` available to [`Graph::neighbors`]
    /// (a ranged graph reads them in one more pass of the generator).
    pub fn remember_lists(&self, vertices: &[u32], threads: usize) -> Result<()> {
        let Graph::Ranged(g) = self else {
            return Ok(());
        };
        let mut missing: Vec<u32> = {
            let have = g.lists.lock().unwrap_or_else(|e| e.into_inner());
            vertices
                .iter()
                .copied()
                .filter(|v| !have.contains_key(v))
                .collect()
        };
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        let rmat = cluster::rmat_of(&g.section)?;
        let found =
            locus_graph::csr::lists_of(rmat.vertex_count(), g.opts, &rmat, &missing, threads)?;
        g.lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(found);
        Ok(())
    }

    /// The first `k` neighbours of `v` (of a ranged graph: only for vertices
    /// passed to [`Graph::remember_lists`]; others panic, a bug of the caller).
    pub fn neighbors(&self, v: u32, k: usize) -> Vec<u32> {
        match self {
            Graph::Csr(c) => c.neighbors(v).iter().take(k).copied().collect(),
            Graph::Ranged(g) => {
                let lists = g.lists.lock().unwrap_or_else(|e| e.into_inner());
                let list = lists
                    .get(&v)
                    .unwrap_or_else(|| panic!("the list of {v} was not remembered"));
                list.iter().take(k).copied().collect()
            }
        }
    }

    /// Builds a cluster of `machines` machines with the graph loaded.
    pub fn build(
        &self,
        machines: usize,
        config: &Config,
        r: &Reporter,
        tweak: impl FnOnce(&mut StoreConfig),
    ) -> Result<Embedded> {
        match self {
            Graph::Csr(c) => Ok(cluster::build_with(c, machines, config, r, tweak)?),
            Graph::Ranged(g) => {
                let (e, load) = cluster::load_rmat_ranged(
                    &g.section,
                    g.opts,
                    &g.degrees,
                    machines,
                    config,
                    RANGE_ENTRIES,
                    r,
                    tweak,
                )?;
                let _ = g.stored_edges.set(load.stored_edges);
                r.note(format!(
                    "loaded {} entries in {:.1} s ({:.2} M generated edges/s, {:.1} bytes per vertex)",
                    load.stored_edges,
                    load.load_s,
                    load.edges_per_s / 1e6,
                    load.bytes_per_vertex
                ));
                Ok(e)
            }
        }
    }
}
