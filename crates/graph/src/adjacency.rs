//! Adjacency lists of only the vertices that have edges, in memory
//! proportional to the edges whatever the ids: the store hashes keys, so a
//! graph whose ids are spread over the whole `u32` range loads as cheaply as
//! a dense one. [`Csr`] instead indexes by id (`largest id + 1` offsets) and
//! suits dense ids.
//!
//! [`Lists`] is what a loader needs of either: the vertices with a list, in
//! increasing id order, and each one's list.

use crate::csr::{Csr, CsrOptions};
use crate::input::EdgeList;
use crate::VertexId;

/// A graph as the adjacency lists a loader puts into a store.
pub trait Lists: Sync {
    /// Number of entries `0..entries()`; entry `i` is a vertex and its list
    /// (an entry's list may be empty).
    fn entries(&self) -> u64;
    /// The vertex of entry `i`.
    fn vertex(&self, i: u64) -> VertexId;
    /// The list of entry `i`.
    fn list(&self, i: u64) -> &[VertexId];
    /// Vertices with a non-empty list.
    fn vertices_with_edges(&self) -> u64;
    /// Sum of the lists' lengths.
    fn stored_edges(&self) -> u64;
}

impl Lists for Csr {
    fn entries(&self) -> u64 {
        self.vertex_count()
    }
    fn vertex(&self, i: u64) -> VertexId {
        i as VertexId
    }
    fn list(&self, i: u64) -> &[VertexId] {
        self.neighbors(i as VertexId)
    }
    fn vertices_with_edges(&self) -> u64 {
        (0..self.vertex_count())
            .filter(|&v| self.degree(v as VertexId) > 0)
            .count() as u64
    }
    fn stored_edges(&self) -> u64 {
        self.edge_count()
    }
}

/// Sparse adjacency lists: `vertices[i]`'s list is
/// `targets[offsets[i]..offsets[i + 1]]`, vertices in increasing order,
/// each list sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjacency {
    vertices: Vec<VertexId>,
    offsets: Vec<u64>,
    targets: Vec<VertexId>,
}

impl Adjacency {
    /// Builds the lists of `list` with the same options as [`Csr`]
    /// (symmetrize, dedup, drop self loops). Memory: 8 bytes per stored edge
    /// while building, 4 after, plus 12 per vertex with edges.
    pub fn from_edge_list(list: &EdgeList, opts: CsrOptions) -> Adjacency {
        let both = if opts.symmetrize { 2 } else { 1 };
        let mut pairs: Vec<u64> = Vec::with_capacity(list.edges.len() * both);
        for &(u, v) in &list.edges {
            if u == v {
                if !opts.drop_self_loops {
                    pairs.push((u as u64) << 32 | v as u64);
                }
                continue;
            }
            pairs.push((u as u64) << 32 | v as u64);
            if opts.symmetrize {
                pairs.push((v as u64) << 32 | u as u64);
            }
        }
        // Sorting by (source, target) groups each list and sorts it; with
        // dedup off the order within a list is still by target.
        pairs.sort_unstable();
        if opts.dedup {
            pairs.dedup();
        }
        let mut vertices = Vec::new();
        let mut offsets = Vec::new();
        let mut targets = Vec::with_capacity(pairs.len());
        let mut current = None;
        for p in pairs {
            let (u, v) = ((p >> 32) as VertexId, p as VertexId);
            if current != Some(u) {
                vertices.push(u);
                offsets.push(targets.len() as u64);
                current = Some(u);
            }
            targets.push(v);
        }
        offsets.push(targets.len() as u64);
        Adjacency {
            vertices,
            offsets,
            targets,
        }
    }

    /// The largest degree.
    pub fn max_degree(&self) -> u64 {
        self.offsets
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    /// The list of `v` (empty if it has no edges).
    pub fn neighbors(&self, v: VertexId) -> &[VertexId] {
        match self.vertices.binary_search(&v) {
            Ok(i) => self.list(i as u64),
            Err(_) => &[],
        }
    }
}

impl Lists for Adjacency {
    fn entries(&self) -> u64 {
        self.vertices.len() as u64
    }
    fn vertex(&self, i: u64) -> VertexId {
        self.vertices[i as usize]
    }
    fn list(&self, i: u64) -> &[VertexId] {
        &self.targets[self.offsets[i as usize] as usize..self.offsets[i as usize + 1] as usize]
    }
    fn vertices_with_edges(&self) -> u64 {
        self.vertices.len() as u64
    }
    fn stored_edges(&self) -> u64 {
        self.targets.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(e: &[(u32, u32)]) -> EdgeList {
        EdgeList {
            vertex_count: e
                .iter()
                .map(|&(u, v)| u.max(v) as u64 + 1)
                .max()
                .unwrap_or(0),
            edges: e.to_vec(),
        }
    }

    #[test]
    fn same_lists_as_the_csr_for_every_option() {
        let l = edges(&[(0, 1), (1, 0), (2, 2), (0, 1), (5, 3), (3, 0), (5, 1)]);
        for opts in [
            CsrOptions::default(),
            CsrOptions::RAW,
            CsrOptions {
                symmetrize: false,
                ..CsrOptions::default()
            },
        ] {
            let a = Adjacency::from_edge_list(&l, opts);
            let c = Csr::from_edge_list(&l, opts).unwrap();
            for v in 0..c.vertex_count() as u32 {
                let mut want = c.neighbors(v).to_vec();
                want.sort_unstable();
                assert_eq!(a.neighbors(v), want, "vertex {v} with {opts:?}");
            }
            assert_eq!(a.stored_edges(), c.edge_count(), "{opts:?}");
            assert_eq!(a.vertices_with_edges(), Lists::vertices_with_edges(&c));
            assert_eq!(a.max_degree(), c.max_degree());
        }
    }

    #[test]
    fn ids_at_the_top_of_the_range_cost_nothing_extra() {
        let l = edges(&[(0, 4_294_967_294), (7, 4_000_000_000)]);
        let a = Adjacency::from_edge_list(&l, CsrOptions::default());
        assert_eq!(a.entries(), 4);
        assert_eq!(a.neighbors(4_294_967_294), &[0]);
        assert_eq!(a.neighbors(0), &[4_294_967_294]);
        assert_eq!(a.vertex(3), 4_294_967_294);
        assert!(a.neighbors(1).is_empty());
    }
}
