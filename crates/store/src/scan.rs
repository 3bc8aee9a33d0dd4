//! The value-region scan (Pragh 5: "a background scan of the value region
//! finds blocks no address word points to"), as a decision procedure without
//! I/O. The worker side (`worker/scan.rs`) gathers one round's inputs and
//! frees what [`Scanner::round`] hands back.
//!
//! What leaks without it: the old block of a migration whose CAS was applied
//! but whose reclaim-ring append never happened (the migrating machine died,
//! or its fabric operation failed in doubt); values of a dead machine's keys
//! that had been migrated here (the restarted home puts them back at home);
//! unpublished copies whose publishing CAS failed with a peer error
//! (`block.rs`: leaked in doubt); entries of a wedged reclaim ring.
//!
//! One round at machine M, in this order:
//! ```text
//!  now := clock                       (read first)
//!  B   := M's allocated, not retired blocks (the allocator's registry)
//!  R   := offsets of M named by any address word of any machine's key table
//!         (every table read one-sidedly; any failed READ aborts the round:
//!          nothing is stamped or freed, since a missing table hides references)
//!  X   := M's replica blocks (held and orphaned) + entries in M's reclaim
//!         ring (slots head..tail) + the collector's pending entries
//!  for b in B:
//!     b in R or X, or allocated less than a lease before now  -> unstamp b
//!     else if b was stamped unreferenced at t with the same generation
//!          and now - t >= lease                                 -> free b
//!     else                                                      -> stamp b (now)
//! ```
//!
//! Invariants:
//! - **S1 Only the unreachable.** A block is freed only if it was seen
//!   unreferenced (not in R, not in X) by two rounds a whole reclaim lease
//!   apart, and by every round in between, with the same generation (so the
//!   same allocation), and was allocated at least a lease before the first.
//!   A block published in between would have been seen referenced by some
//!   round unless it was also superseded in between; a superseded block is
//!   retired or in a ring (X), or its retirement is in flight.
//! - **S2 No stale reader.** The block was unreferenced for a lease, and a
//!   location-cache entry lives at most a cache lease (<= the reclaim
//!   lease, P3), so no reader still holds an address of it.
//! - **S3 Freed once.** The free is [`crate::alloc::ValueAllocator::free_if_unchanged`]:
//!   under the registry's lock, only if the generation still matches and the
//!   block is not retired; retired and ring-held blocks are excluded (X), and
//!   the ring is read under the collector's lock, so the collector cannot
//!   take an entry between the read and the free.
//! - **S4 Half-open rounds are harmless.** A round that fails part-way changes
//!   nothing.
//!
//! Assumption, the same one P3 makes for readers: no thread stalls for a
//! whole reclaim lease between allocating a block and publishing it, or
//! between a CAS that superseded a block and that block's retirement (its
//! ring append). A thread that does is treated as dead: its block may be
//! freed, and a late ring append of it would free it twice.

use std::collections::{HashMap, HashSet};

use crate::alloc::LiveBlock;

/// What one round found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Allocated, not retired blocks looked at.
    pub blocks: u64,
    /// Of them, named by some address word.
    pub referenced: u64,
    /// Of them, replicas or waiting in the reclaim ring.
    pub excluded: u64,
    /// Of them, allocated less than a lease ago (may be unpublished copies in flight).
    pub young: u64,
    /// Unreferenced blocks stamped (waiting for a lease to pass).
    pub waiting: u64,
    /// Blocks freed by this round.
    pub freed: u64,
    /// Bytes freed by this round.
    pub freed_bytes: u64,
}

/// The state the scan keeps between rounds: when each unreferenced block was
/// first seen unreferenced.
#[derive(Debug)]
pub struct Scanner {
    lease_ns: u64,
    /// offset -> (generation, first seen unreferenced at)
    stamps: HashMap<u64, (u64, u64)>,
    /// Rounds run (completed).
    pub rounds: u64,
    /// Blocks freed over all rounds.
    pub freed_total: u64,
}

impl Scanner {
    /// A scanner whose blocks must stay unreferenced for `lease_ns` (the reclaim lease).
    pub fn new(lease_ns: u64) -> Scanner {
        Scanner {
            lease_ns,
            stamps: HashMap::new(),
            rounds: 0,
            freed_total: 0,
        }
    }

    /// Blocks currently stamped unreferenced.
    pub fn waiting(&self) -> usize {
        self.stamps.len()
    }

    /// One round's decision (see the module doc): `blocks` taken before the
    /// tables were read, `referenced` and `excluded` offsets, `now_ns` read
    /// before either. Returns the blocks to free and the report (whose
    /// `freed` the caller fills from what it really freed).
    pub fn round(
        &mut self,
        now_ns: u64,
        blocks: &[LiveBlock],
        referenced: &HashSet<u64>,
        excluded: &HashSet<u64>,
    ) -> (Vec<LiveBlock>, ScanReport) {
        let mut r = ScanReport {
            blocks: blocks.len() as u64,
            ..ScanReport::default()
        };
        let mut free = Vec::new();
        let mut next = HashMap::with_capacity(self.stamps.len());
        for b in blocks {
            let off = b.offset_units;
            if referenced.contains(&off) {
                r.referenced += 1;
                continue;
            }
            if excluded.contains(&off) {
                r.excluded += 1;
                continue;
            }
            if now_ns.saturating_sub(b.alloc_ns) < self.lease_ns {
                r.young += 1;
                continue;
            }
            match self.stamps.get(&off) {
                Some(&(g, t)) if g == b.generation => {
                    if now_ns.saturating_sub(t) >= self.lease_ns {
                        free.push(*b);
                    } else {
                        r.waiting += 1;
                        next.insert(off, (g, t));
                    }
                }
                _ => {
                    r.waiting += 1;
                    next.insert(off, (b.generation, now_ns));
                }
            }
        }
        // Blocks not seen unreferenced this round (referenced, excluded,
        // freed, reallocated) lose their stamp: S1's "every round in between".
        self.stamps = next;
        self.rounds += 1;
        (free, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(off: u64, generation: u64, alloc_ns: u64) -> LiveBlock {
        LiveBlock {
            offset_units: off,
            size_units: 4,
            generation,
            alloc_ns,
        }
    }

    const LEASE: u64 = 1_000;

    #[test]
    fn an_unreferenced_block_is_freed_a_lease_after_it_was_first_seen_and_not_before() {
        let mut s = Scanner::new(LEASE);
        let none = HashSet::new();
        let b = [block(8, 1, 0)];
        let (f, r) = s.round(LEASE, &b, &none, &none);
        assert!(f.is_empty());
        assert_eq!(r.waiting, 1);
        let (f, _) = s.round(2 * LEASE - 1, &b, &none, &none);
        assert!(f.is_empty(), "one ns short of the lease");
        let (f, _) = s.round(2 * LEASE, &b, &none, &none);
        assert_eq!(f, b.to_vec());
    }

    #[test]
    fn a_reference_in_any_round_restarts_the_wait() {
        let mut s = Scanner::new(LEASE);
        let none = HashSet::new();
        let refd: HashSet<u64> = [8].into();
        let b = [block(8, 1, 0)];
        s.round(LEASE, &b, &none, &none);
        let (_, r) = s.round(LEASE + 10, &b, &refd, &none);
        assert_eq!(r.referenced, 1);
        let (f, _) = s.round(2 * LEASE, &b, &none, &none);
        assert!(f.is_empty(), "seen referenced in between: stamped anew");
        let (f, _) = s.round(3 * LEASE, &b, &none, &none);
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn excluded_young_and_reallocated_blocks_are_never_freed_early() {
        let mut s = Scanner::new(LEASE);
        let none = HashSet::new();
        let ring: HashSet<u64> = [16].into();
        let blocks = [block(8, 1, 0), block(16, 2, 0), block(24, 3, 5 * LEASE)];
        for t in 1..=6 {
            let (f, _) = s.round(t * LEASE, &blocks, &none, &ring);
            assert!(
                f.iter().all(|b| b.offset_units == 8),
                "round {t} freed {f:?}"
            );
        }
        // Offset 8 reallocated (a new generation) after its stamp: wait anew.
        let mut s = Scanner::new(LEASE);
        s.round(LEASE, &[block(8, 1, 0)], &none, &none);
        let (f, _) = s.round(3 * LEASE, &[block(8, 9, 0)], &none, &none);
        assert!(f.is_empty());
        let (f, _) = s.round(4 * LEASE, &[block(8, 9, 0)], &none, &none);
        assert_eq!(f.len(), 1);
    }
}
