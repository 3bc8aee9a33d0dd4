//! The placement bound: what the best placement with one copy per value could
//! achieve for a workload, computed offline from the operation sequence.

use super::graph::Graph;
use locus_workloads::traversal::Op;
use serde::Serialize;

/// What placement alone can achieve for a workload: every GET of a two-hop
/// query (the start and its first `k` neighbours), attributed to the machine
/// that runs the query. With one copy per value the best any placement can
/// do is to put each value where it is read most; the rest of its reads stay
/// remote whatever the policy (Pragh 6.1: "competition on vertices shared by
/// multiple queries running on different machines").
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PlacementBound {
    /// GETs of the measured sequence's queries.
    pub gets: u64,
    /// Share of GETs remote under hash placement (Orig).
    pub hash_remote_gets: f64,
    /// Share of GETs remote with each value at its most frequent reader.
    pub best_single_copy_remote_gets: f64,
    /// Vertices read by more than one machine.
    pub shared_vertices: u64,
}

pub fn placement_bound(graph: &Graph, ops: &[Op], machines: usize, k: usize) -> PlacementBound {
    use std::collections::HashMap;
    // Per vertex read, its reads by each machine.
    let mut counts: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut gets = 0u64;
    let mut hash_remote = 0u64;
    let mut note = |u: u32, at: usize| {
        gets += 1;
        if locus_store::home_of(u, machines) as usize != at {
            hash_remote += 1;
        }
        counts.entry(u).or_insert_with(|| vec![0; machines])[at] += 1;
    };
    for op in ops {
        if let Op::TwoHop(s) = op {
            let at = locus_store::home_of(*s, machines) as usize;
            note(*s, at);
            for u in graph.neighbors(*s, k) {
                note(u, at);
            }
        }
    }
    let mut best_remote = 0u64;
    let mut shared = 0u64;
    for c in counts.values() {
        let total: u64 = c.iter().map(|&x| x as u64).sum();
        let max = c.iter().copied().max().unwrap_or(0) as u64;
        best_remote += total - max;
        shared += (c.iter().filter(|&&x| x > 0).count() > 1) as u64;
    }
    PlacementBound {
        gets,
        hash_remote_gets: hash_remote as f64 / gets.max(1) as f64,
        best_single_copy_remote_gets: best_remote as f64 / gets.max(1) as f64,
        shared_vertices: shared,
    }
}
