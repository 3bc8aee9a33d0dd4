//! Wukong's key layout (OSDI'16, 4.2) over the store's `u32` vertex keys,
//! packed by the store's slots so a dataset survives servers coming and going.
//!
//! Wukong keys a value by `(vid, pid, dir)`: the neighbours of term `vid`
//! along predicate `pid`, outgoing (`vid` is the subject) or incoming (`vid`
//! is the object). The store keys values by a `u32` vertex whose home is the
//! owner of its slot `vertex % slots` (`locus_store::homes`; `slots` is fixed
//! when a cluster is made, 4096 by default, while slots move between servers
//! and servers are added and removed). This module packs a Wukong key into
//! one store vertex so that **all of a term's keys share the term's store
//! slot**, whatever the machine count, and so move together:
//!
//! ```text
//!  S_store   = the store's slot count (recorded in the catalog)
//!  owner o   = term id + S_store      (normal vertices: o >= S_store)
//!            = s                      (index vertices of store slot s: o < S_store)
//!  lane      = 2 * pt + dir           (pt: predicate-or-type id, dir: 0 out / 1 in)
//!  vertex    = base + ((o / S_store) * L + lane) * S_store + o % S_store    L = 2 * pt capacity
//!  base      = GRAPH_VERTICES rounded up to a multiple of S_store   (0 in catalogs of format 3)
//!
//!  vertex % S_store == o % S_store == term id % S_store: every key of a term
//!  is in the term's slot, and the part of an index for slot s is in slot s.
//! ```
//! Index vertices (Wukong's `vid = 0`) are split by **store slot**, not by
//! machine: the part for slot `s` lists the terms of slot `s`, so it moves
//! with the slot and the terms it lists. A query starting from an index runs
//! on every machine (fork-join), each reading the parts of the slots it owns
//! in the store's slot table at the time of the query:
//! - predicate index: `(s, pid, OUT)` = subjects of `pid` in slot `s`,
//!   `(s, pid, IN)` = objects of `pid` in slot `s`;
//! - type index: `(s, tid, OUT)` = instances of class `tid` in slot `s`.
//!   The class's own incoming `rdf:type` list is not stored: the type index
//!   replaces it (a class can have most of the data as instances, one hot
//!   key on one machine).
//!
//! Why per slot and not per machine (as Wukong, and this layout before the
//! elastic cluster): a machine's part would list terms of many slots, so a
//! slot moving to another server would leave its terms listed on the old
//! server's part, and a catalog laid out for `M` machines could not be read
//! once a server is added or removed. Per slot, nothing in the layout names
//! a machine: a move carries a slot's keys, index parts included, and
//! queries find the parts through the live slot table. The price is up to
//! `S_store` parts per `(pt, dir)` where there were `M`: more keys (LUBM-5 on
//! 3 machines: 666K keys where there were 566K) and an index start reads up
//! to `S_store` parts. The catalog records which parts hold anything
//! ([`crate::catalog::Parts`]), so a read skips the empty ones without a
//! store read: a small index costs a read per non-empty part, a large one
//! about as many reads as the rows it yields anyway.
//!
//! The packing needs `ceil((terms + S_store) / S_store) * L * S_store` at most
//! [`VERTEX_MAX`]: `(terms + S_store) * L` rounded up, the same bound as
//! before with `S_store` owners for the index in place of `M` (LUBM-5's
//! 149K terms use under 1% of the 4.29G). [`Layout::new`] refuses a dataset
//! past it, naming the sizes. A load reserves pt capacity beyond the data's pts
//! ([`Layout::with_headroom`]) so an update that adds a predicate or class
//! changes no key's packing.
//!
//! **Beside a graph.** A dataset's keys start at `base`, at or past
//! [`GRAPH_VERTICES`] (a multiple of the slot count, so a key's slot is
//! unchanged), so one cluster serves a graph whose vertex ids are below
//! `GRAPH_VERTICES` and an RDF dataset without their keys meeting; `locus
//! load` into a cluster with a catalog refuses ids at or past the catalog's
//! base. A dataset too large for the upper half of the vertex space is laid
//! out from 0 instead (its catalog says so, and a graph load is refused).

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

/// Graph vertex ids below this stay clear of a dataset laid out at its
/// shared base ([`Layout::shared_base`]): 2^31, the lower half of the ids.
pub const GRAPH_VERTICES: u64 = 1 << 31;

/// The packing of Wukong keys into store vertices for one dataset and store slot count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The store's slots (`vertex % slots` is a vertex's slot).
    slots: u64,
    /// Predicate-or-type ids in use (`pt < pts`).
    pts: u64,
    /// Term ids in use (`id < terms`).
    terms: u64,
    /// The first store vertex of the packing (a multiple of `slots`).
    base: u64,
}

impl Layout {
    /// The layout for `terms` term ids and `pts` predicate-or-type ids in a
    /// store of `slots` slots.
    pub fn new(terms: u64, pts: u64, slots: u32) -> Result<Layout> {
        Layout::new_at(terms, pts, slots, 0)
    }

    /// The first vertex at or past [`GRAPH_VERTICES`] that is a multiple of
    /// `slots` (so packing from it keeps every key's slot).
    pub fn shared_base(slots: u32) -> u64 {
        GRAPH_VERTICES.div_ceil(slots.max(1) as u64) * slots.max(1) as u64
    }

    /// [`Layout::new`] with the packing starting at store vertex `base`, a
    /// multiple of `slots`.
    pub fn new_at(terms: u64, pts: u64, slots: u32, base: u64) -> Result<Layout> {
        if slots == 0 || slots > locus_store::homes::SLOTS_MAX {
            return Err(RdfError::Layout(format!(
                "{slots} store slots: must be 1..={}",
                locus_store::homes::SLOTS_MAX
            )));
        }
        if !base.is_multiple_of(slots as u64) || base > VERTEX_MAX {
            return Err(RdfError::Layout(format!(
                "a packing from vertex {base} would move keys off their slots: the base must be a multiple of the {slots} store slots"
            )));
        }
        let l = Layout {
            slots: slots as u64,
            pts: pts.max(1),
            terms,
            base,
        };
        let owners = terms + l.slots;
        let top = owners
            .div_ceil(l.slots)
            .checked_mul(l.lanes())
            .and_then(|x| x.checked_mul(l.slots))
            .and_then(|x| x.checked_add(base));
        if top.is_none_or(|t| t > VERTEX_MAX) {
            let space = if base == 0 {
                "the store's 32-bit vertex space".to_string()
            } else {
                format!("the store's vertex ids from {base} on")
            };
            return Err(RdfError::Layout(format!(
                "{terms} terms x {pts} predicates and types need {} store keys per term (and {slots} index owners, one per store slot), more than {space} holds; split the dataset or use fewer predicates",
                l.lanes()
            )));
        }
        Ok(l)
    }

    /// The layout for `pts` predicate-or-type ids with room reserved for
    /// more (up to [`PTS_HEADROOM`] or twice `pts`, less if the vertex space
    /// is short), so an update that adds a predicate or class keeps every
    /// key where it is. `pts` lanes are always there.
    /// Packed from the shared base ([`Layout::shared_base`]) if the data
    /// fits there with its pts, else from 0.
    pub fn with_headroom(terms: u64, pts: u64, slots: u32) -> Result<Layout> {
        Layout::with_headroom_at(terms, pts, slots, Layout::shared_base(slots))
            .or_else(|_| Layout::with_headroom_at(terms, pts, slots, 0))
    }

    fn with_headroom_at(terms: u64, pts: u64, slots: u32, base: u64) -> Result<Layout> {
        let want = pts + PTS_HEADROOM.max(pts);
        let mut cap = want;
        loop {
            match Layout::new_at(terms, cap, slots, base) {
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
        Layout::new_at(
            terms.max(self.terms),
            self.pts,
            self.slots as u32,
            self.base,
        )
    }

    /// The first store vertex of the packing: graph ids below it are clear
    /// of this dataset's keys (0: the dataset takes the whole id space).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The store's slot count the keys are packed by.
    pub fn slots(&self) -> u32 {
        self.slots as u32
    }

    /// Lanes per owner (two directions per predicate-or-type id).
    fn lanes(&self) -> u64 {
        2 * self.pts
    }

    fn pack(&self, owner: u64, pt: u32, dir: u32) -> VertexId {
        debug_assert!((pt as u64) < self.pts && dir <= 1, "pt {pt} dir {dir}");
        let lane = 2 * pt as u64 + dir as u64;
        let v = self.base
            + ((owner / self.slots) * self.lanes() + lane) * self.slots
            + owner % self.slots;
        debug_assert!(v <= VERTEX_MAX);
        v as VertexId
    }

    /// The store vertex of normal vertex `(id, pid, dir)`.
    pub fn normal(&self, id: u32, pid: u32, dir: u32) -> VertexId {
        debug_assert!((id as u64) < self.terms, "term {id} beyond {}", self.terms);
        self.pack(id as u64 + self.slots, pid, dir)
    }

    /// The store vertex of store slot `slot`'s part of index `(pt, dir)`.
    pub fn index(&self, slot: u32, pt: u32, dir: u32) -> VertexId {
        debug_assert!((slot as u64) < self.slots);
        self.pack(slot as u64, pt, dir)
    }

    /// The store slot of term `id`: the slot of every key of the term, and
    /// the index parts that list it.
    pub fn slot(&self, id: u32) -> u32 {
        (id as u64 % self.slots) as u32
    }

    /// Decodes a store vertex: `(owner, pt, dir)` with owner `Err(s)` for
    /// the index part of store slot `s`, `Ok(id)` for a term (for tests and tools).
    pub fn decode(&self, v: VertexId) -> (std::result::Result<u32, u32>, u32, u32) {
        debug_assert!(
            v as u64 >= self.base,
            "vertex {v} below the base {}",
            self.base
        );
        let v = (v as u64).wrapping_sub(self.base);
        let r = v % self.slots;
        let q = v / self.slots;
        let lane = q % self.lanes();
        let owner = (q / self.lanes()) * self.slots + r;
        let who = if owner < self.slots {
            Err(owner as u32)
        } else {
            Ok((owner - self.slots) as u32)
        };
        (who, (lane / 2) as u32, (lane % 2) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_store::SlotTable;
    use std::collections::HashSet;

    #[test]
    fn a_terms_keys_share_its_slot_index_parts_are_per_slot_and_round_trip() {
        for slots in [1u32, 3, 8, 4096] {
            let l = Layout::new(50, 5, slots).unwrap();
            assert_eq!(l.slots(), slots);
            let table = SlotTable::uniform(slots, 3).unwrap();
            let mut seen = HashSet::new();
            for id in 0..50u32 {
                assert_eq!(l.slot(id), id % slots);
                for pt in 0..5 {
                    for dir in [OUT, IN] {
                        let v = l.normal(id, pt, dir);
                        assert!(seen.insert(v), "collision at {id} {pt} {dir}");
                        assert_eq!(table.slot_of(v), l.slot(id), "{id} {pt} {dir}");
                        assert_eq!(l.decode(v), (Ok(id), pt, dir));
                    }
                }
            }
            for s in 0..slots {
                for pt in 0..5 {
                    for dir in [OUT, IN] {
                        let v = l.index(s, pt, dir);
                        assert!(seen.insert(v), "index collision at slot {s}");
                        assert_eq!(table.slot_of(v), s, "the part of slot {s} is in slot {s}");
                        assert_eq!(l.decode(v), (Err(s), pt, dir));
                    }
                }
            }
        }
    }

    #[test]
    fn nothing_in_the_packing_depends_on_the_machine_count() {
        // A slot's keys (its terms' and its index parts) go wherever the
        // table sends the slot: with 3 servers, after a fourth is added,
        // after server 0 is removed.
        let l = Layout::new(10_000, 4, 4096).unwrap();
        let t3 = SlotTable::uniform(4096, 3).unwrap();
        let t4 = SlotTable::uniform(4096, 4).unwrap();
        for id in (0..10_000u32).step_by(7) {
            let s = l.slot(id);
            for table in [&t3, &t4] {
                let home = table.owner_of_slot(s).unwrap();
                assert_eq!(table.owner_of(l.normal(id, 3, IN)), home);
                assert_eq!(table.owner_of(l.index(s, 1, OUT)), home);
            }
        }
    }

    #[test]
    fn the_shared_base_keeps_slots_and_leaves_graph_ids_clear() {
        for slots in [1u32, 3, 7, 4096] {
            let base = Layout::shared_base(slots);
            assert!(base >= GRAPH_VERTICES && base.is_multiple_of(slots as u64));
            assert!(base < GRAPH_VERTICES + slots as u64);
            let l = Layout::with_headroom(1000, 5, slots).unwrap();
            assert_eq!(l.base(), base);
            let table = SlotTable::uniform(slots, 3).unwrap();
            for id in (0..1000u32).step_by(13) {
                let v = l.normal(id, 4, IN);
                assert!(v as u64 >= GRAPH_VERTICES, "{v}");
                assert_eq!(table.slot_of(v), l.slot(id));
                assert_eq!(l.decode(v), (Ok(id), 4, IN));
            }
            assert!(l.index(0, 0, OUT) as u64 >= GRAPH_VERTICES);
            assert_eq!(
                l.with_terms(2000).unwrap().normal(7, 1, OUT),
                l.normal(7, 1, OUT)
            );
        }
        assert!(
            Layout::new_at(10, 2, 4096, 4095).is_err(),
            "a base off the slots"
        );
        // Too large for the upper half: laid out from 0.
        let pts = 32u64;
        let terms = VERTEX_MAX / (2 * pts * 4096) * 4096 - 4096;
        assert_eq!(Layout::with_headroom(terms, pts, 4096).unwrap().base(), 0);
    }

    #[test]
    fn headroom_keeps_keys_and_shrinks_to_fit() {
        let l = Layout::with_headroom(100, 5, 4096).unwrap();
        assert_eq!(l.pts_capacity(), 5 + PTS_HEADROOM);
        let v = l.normal(7, 4, IN);
        let more = l.with_terms(1000).unwrap();
        assert_eq!(more.normal(7, 4, IN), v, "more terms move no key");
        assert_eq!(more.decode(more.normal(999, 30, OUT)), (Ok(999), 30, OUT));
        // Near the top of the vertex space the headroom shrinks, never below the data's pts.
        let pts = 32u64;
        let s = 4096u64;
        let terms = VERTEX_MAX / (2 * pts * s) * s - s;
        assert_eq!(
            Layout::with_headroom(terms, pts, 4096)
                .unwrap()
                .pts_capacity(),
            pts
        );
        assert!(Layout::with_headroom(terms * 2, pts, 4096).is_err());
    }

    #[test]
    fn the_largest_dataset_fits_and_one_more_term_is_refused() {
        // ceil((terms + S) / S) * L * S <= VERTEX_MAX with L = 2 * pts.
        let pts = 32u64;
        let s = 4096u64;
        let owners_max = VERTEX_MAX / (2 * pts * s) * s;
        let terms = owners_max - s;
        let l = Layout::new(terms, pts, 4096).unwrap();
        let v = l.normal((terms - 1) as u32, pts as u32 - 1, IN);
        assert_eq!(l.decode(v), (Ok((terms - 1) as u32), pts as u32 - 1, IN));
        assert_eq!(
            l.decode(l.index(4095, pts as u32 - 1, IN)),
            (Err(4095), pts as u32 - 1, IN)
        );
        let e = Layout::new(terms + 1, pts, 4096).unwrap_err();
        assert!(e.to_string().contains("32-bit vertex space"), "{e}");
        assert!(e.to_string().contains("4096 index owners"), "{e}");
        assert!(Layout::new(1, 1, 0).is_err());
        assert!(Layout::new(1, 1, locus_store::homes::SLOTS_MAX + 1).is_err());
        // LUBM's ~40 pts: tens of millions of terms fit at the default slot
        // count beside a graph, with less headroom (LUBM-5 has about a
        // hundred thousand terms); a million with all of it.
        let l = Layout::with_headroom(20_000_000, 40, 4096).unwrap();
        assert_eq!(l.base(), Layout::shared_base(4096));
        assert!((40..80).contains(&l.pts_capacity()), "{}", l.pts_capacity());
        let l = Layout::with_headroom(1_000_000, 40, 4096).unwrap();
        assert_eq!(
            (l.base(), l.pts_capacity()),
            (Layout::shared_base(4096), 80)
        );
    }
}
