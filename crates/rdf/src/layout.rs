//! Wukong's key layout (OSDI'16, 4.2) over the store's `u32` vertex keys.
//!
//! Wukong keys a value by `(vid, pid, dir)`: the neighbours of term `vid`
//! along predicate `pid`, outgoing (`vid` is the subject) or incoming (`vid`
//! is the object). The store keys values by a `u32` vertex whose home is
//! `vertex % machines` and splits long lists into parts itself. This module
//! packs a Wukong key into one store vertex so that **the key's home is the
//! home of its term**, whatever the machine count `M`:
//!
//! ```text
//!  owner o   = term id + M            (normal vertices: o >= M)
//!            = m                      (index vertices of machine m: o < M)
//!  slot      = 2 * pt + dir           (pt: predicate-or-type id, dir: 0 out / 1 in)
//!  vertex    = ((o / M) * S + slot) * M + o % M        S = 2 * pt capacity (slots per owner)
//!
//!  vertex % M == o % M == term id % M: a term's keys all live on its home,
//!  hash-partitioned by term id exactly as the store partitions vertices.
//! ```
//! Index vertices (Wukong's `vid = 0`) are split by machine as in Wukong, so
//! each machine's index lists only the terms it homes and a query starting
//! from an index runs on every machine over local data (fork-join):
//! - predicate index: `(m, pid, OUT)` = subjects of `pid` homed on `m`,
//!   `(m, pid, IN)` = objects of `pid` homed on `m`;
//! - type index: `(m, tid, OUT)` = instances of class `tid` homed on `m`.
//!   The class's own incoming `rdf:type` list is not stored: the type index
//!   replaces it (a class can have most of the data as instances, one hot
//!   key on one machine).
//!
//! The packing needs `(terms + M) * S` below `u32::MAX`; [`Layout::new`]
//! refuses a dataset past that, naming the sizes. A load reserves pt
//! capacity beyond the data's pts ([`Layout::with_headroom`]) so an update
//! that adds a predicate or class changes no key's packing.

use locus_store::VertexId;

use crate::{RdfError, Result};

/// Outgoing: the term is the subject (or, for an index, the list is of subjects / instances).
pub const OUT: u32 = 0;
/// Incoming: the term is the object (or, for an index, the list is of objects).
pub const IN: u32 = 1;

/// Predicate-or-type ids a loaded dataset's layout reserves beyond its own
/// (at least; twice the data's when that is more), for updates.
pub const PTS_HEADROOM: u64 = 32;

/// Largest store vertex the layout hands out (the store's ids stop below `u32::MAX`).
pub const VERTEX_MAX: u64 = u32::MAX as u64 - 1;

/// The packing of Wukong keys into store vertices for one dataset and machine count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    machines: u64,
    /// Predicate-or-type ids in use (`pt < pts`).
    pts: u64,
    /// Term ids in use (`id < terms`).
    terms: u64,
}

impl Layout {
    /// The layout for `terms` term ids and `pts` predicate-or-type ids on `machines` machines.
    pub fn new(terms: u64, pts: u64, machines: usize) -> Result<Layout> {
        if machines == 0 || machines > 128 {
            return Err(RdfError::Layout(format!(
                "{machines} machines: must be 1..=128"
            )));
        }
        let l = Layout {
            machines: machines as u64,
            pts: pts.max(1),
            terms,
        };
        let owners = terms + l.machines;
        let top = owners
            .div_ceil(l.machines)
            .checked_mul(l.slots())
            .and_then(|x| x.checked_mul(l.machines));
        if top.is_none_or(|t| t > VERTEX_MAX) {
            return Err(RdfError::Layout(format!(
                "{terms} terms x {pts} predicates and types need {} store keys per term, more than the store's 32-bit vertex space holds; split the dataset or use fewer predicates",
                l.slots()
            )));
        }
        Ok(l)
    }

    /// The layout for `pts` predicate-or-type ids with room reserved for
    /// more (up to [`PTS_HEADROOM`] or twice `pts`, less if the vertex space
    /// is short), so an update that adds a predicate or class keeps every
    /// key where it is. `pts` slots are always there.
    pub fn with_headroom(terms: u64, pts: u64, machines: usize) -> Result<Layout> {
        let want = pts + PTS_HEADROOM.max(pts);
        let mut cap = want;
        loop {
            match Layout::new(terms, cap, machines) {
                Ok(l) => return Ok(l),
                Err(e) if cap <= pts => return Err(e),
                Err(_) => cap = pts.max(cap - cap.div_ceil(4)),
            }
        }
    }

    /// Predicate-or-type ids the packing has room for (keys stay put while
    /// the data's pts stay below it).
    pub fn pts_capacity(&self) -> u64 {
        self.pts
    }

    /// This layout with room for `terms` term ids (the packing of every
    /// existing key unchanged), or an error if the vertex space is short.
    pub fn with_terms(&self, terms: u64) -> Result<Layout> {
        Layout::new(terms.max(self.terms), self.pts, self.machines as usize)
    }

    /// Machines.
    pub fn machines(&self) -> usize {
        self.machines as usize
    }

    /// Slots per owner (two directions per predicate-or-type id).
    fn slots(&self) -> u64 {
        2 * self.pts
    }

    fn pack(&self, owner: u64, pt: u32, dir: u32) -> VertexId {
        debug_assert!((pt as u64) < self.pts && dir <= 1, "pt {pt} dir {dir}");
        let slot = 2 * pt as u64 + dir as u64;
        let v =
            ((owner / self.machines) * self.slots() + slot) * self.machines + owner % self.machines;
        debug_assert!(v <= VERTEX_MAX);
        v as VertexId
    }

    /// The store vertex of normal vertex `(id, pid, dir)`.
    pub fn normal(&self, id: u32, pid: u32, dir: u32) -> VertexId {
        debug_assert!((id as u64) < self.terms, "term {id} beyond {}", self.terms);
        self.pack(id as u64 + self.machines, pid, dir)
    }

    /// The store vertex of machine `m`'s part of index `(pt, dir)`.
    pub fn index(&self, m: usize, pt: u32, dir: u32) -> VertexId {
        debug_assert!((m as u64) < self.machines);
        self.pack(m as u64, pt, dir)
    }

    /// The home machine of term `id` (the store's `home_of` of all its keys).
    pub fn home(&self, id: u32) -> usize {
        (id as u64 % self.machines) as usize
    }

    /// Decodes a store vertex: `(owner, pt, dir)` with owner `Err(m)` for an
    /// index of machine `m`, `Ok(id)` for a term (for tests and tools).
    pub fn decode(&self, v: VertexId) -> (std::result::Result<u32, usize>, u32, u32) {
        let v = v as u64;
        let r = v % self.machines;
        let q = v / self.machines;
        let slot = q % self.slots();
        let owner = (q / self.slots()) * self.machines + r;
        let who = if owner < self.machines {
            Err(owner as usize)
        } else {
            Ok((owner - self.machines) as u32)
        };
        (who, (slot / 2) as u32, (slot % 2) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_store::home_of;
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_homed_with_their_term_and_round_trip() {
        for machines in [1usize, 3, 8] {
            let l = Layout::new(50, 5, machines).unwrap();
            let mut seen = HashSet::new();
            for id in 0..50u32 {
                for pt in 0..5 {
                    for dir in [OUT, IN] {
                        let v = l.normal(id, pt, dir);
                        assert!(seen.insert(v), "collision at {id} {pt} {dir}");
                        assert_eq!(home_of(v, machines) as usize, l.home(id));
                        assert_eq!(l.decode(v), (Ok(id), pt, dir));
                    }
                }
            }
            for m in 0..machines {
                for pt in 0..5 {
                    for dir in [OUT, IN] {
                        let v = l.index(m, pt, dir);
                        assert!(seen.insert(v), "index collision");
                        assert_eq!(home_of(v, machines) as usize, m);
                        assert_eq!(l.decode(v), (Err(m), pt, dir));
                    }
                }
            }
        }
    }

    #[test]
    fn headroom_keeps_keys_and_shrinks_to_fit() {
        let l = Layout::with_headroom(100, 5, 3).unwrap();
        assert_eq!(l.pts_capacity(), 5 + PTS_HEADROOM);
        let v = l.normal(7, 4, IN);
        let more = l.with_terms(1000).unwrap();
        assert_eq!(more.normal(7, 4, IN), v, "more terms move no key");
        assert_eq!(more.decode(more.normal(999, 30, OUT)), (Ok(999), 30, OUT));
        // Near the top of the vertex space the headroom shrinks, never below the data's pts.
        let pts = 32u64;
        let terms = VERTEX_MAX / (2 * pts * 8) * 8 - 8;
        assert_eq!(
            Layout::with_headroom(terms, pts, 8).unwrap().pts_capacity(),
            pts
        );
        assert!(Layout::with_headroom(terms * 2, pts, 8).is_err());
    }

    #[test]
    fn the_largest_dataset_fits_and_one_more_term_is_refused() {
        // (terms + M) / M * S * M <= VERTEX_MAX with S = 2 * pts.
        let pts = 32u64;
        let m = 8usize;
        let owners_max = VERTEX_MAX / (2 * pts * m as u64) * m as u64;
        let terms = owners_max - m as u64;
        let l = Layout::new(terms, pts, m).unwrap();
        let v = l.normal((terms - 1) as u32, pts as u32 - 1, IN);
        assert_eq!(l.decode(v), (Ok((terms - 1) as u32), pts as u32 - 1, IN));
        let e = Layout::new(terms + m as u64, pts, m).unwrap_err();
        assert!(e.to_string().contains("32-bit vertex space"), "{e}");
        assert!(Layout::new(1, 1, 0).is_err());
        assert!(Layout::new(1, 1, 129).is_err());
    }
}
