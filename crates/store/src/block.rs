//! [`Unpublished`]: the one owner of a value block that no address word names yet.
//!
//! Every path that makes a new value (an update, a migration, a replica, a
//! shard move) follows the same sequence: allocate a block in this machine's
//! value region, WRITE the bytes, then make the block reachable with one step
//! (a CAS of the address word, or a replica registration at the key's home).
//! Until that step succeeds nobody can hold the block's address, so it must
//! be freed at once on every way out: a failed WRITE, a lost CAS, a refused
//! registration, an error anywhere in between. The guard does that in `Drop`.
//!
//! ```text
//!            alloc                    publishing()                published()
//!   (none) ─────────▶ Armed ─────────────────────────▶ InDoubt ─────────────▶ (kept: reachable)
//!                       │ drop: free now                 │ refused(): free now (the step
//!                       ▼                                │   answered "no": never reachable)
//!                     freed                              │ drop: leak (the step may have been
//!                                                        ▼   applied: fabric guarantee 4)
//!                                                      leaked
//! ```
//!
//! Leaking in doubt is deliberate: a CAS (or a registration) that failed with
//! a peer error may still have been applied, and freeing a block an address
//! word may name would let the allocator hand out memory a reader can reach.
//! A leak is bounded (one block per failed operation); a wrong answer is not.

use crate::alloc::ValueAllocator;
use crate::Result;

/// A block allocated in this machine's value region that is not reachable
/// from any address word yet (invariant P1). Freed on drop unless published;
/// leaked on drop while its publishing step is in doubt.
#[derive(Debug)]
#[must_use = "an unpublished block is freed when dropped"]
pub(crate) struct Unpublished<'a> {
    alloc: &'a ValueAllocator,
    offset_units: u64,
    size_units: u64,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Unreachable for sure: free on drop.
    Armed,
    /// The publishing step was issued and its outcome is unknown: leak on drop.
    InDoubt,
}

impl<'a> Unpublished<'a> {
    /// Allocates a block of `size_units` 8-byte units.
    pub(crate) fn alloc(alloc: &'a ValueAllocator, size_units: u64, now_ns: u64) -> Result<Self> {
        let offset_units = alloc.alloc(size_units, now_ns)?;
        Ok(Unpublished {
            alloc,
            offset_units,
            size_units,
            state: State::Armed,
        })
    }

    /// Offset of the block in the value region, in 8-byte units.
    pub(crate) fn offset_units(&self) -> u64 {
        self.offset_units
    }

    /// The step that would make the block reachable (a CAS, a registration)
    /// is about to be issued: until its answer is known, dropping leaks.
    pub(crate) fn publishing(&mut self) {
        self.state = State::InDoubt;
    }

    /// The step succeeded: the block is reachable and no longer ours to free.
    pub(crate) fn published(self) {
        std::mem::forget(self);
    }

    /// The step answered and did not publish (a lost CAS, a refused
    /// registration): the block was never reachable, free it now.
    pub(crate) fn refused(mut self) {
        self.state = State::Armed;
        // Drop frees it.
    }
}

impl Drop for Unpublished<'_> {
    fn drop(&mut self) {
        match self.state {
            State::Armed => self.alloc.free_now(self.offset_units, self.size_units),
            State::InDoubt => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn allocator() -> ValueAllocator {
        ValueAllocator::new(0, 8, 1 << 12, Duration::from_secs(60))
    }

    #[test]
    fn dropped_armed_block_is_freed() {
        let a = allocator();
        let before = a.live_bytes();
        {
            let b = Unpublished::alloc(&a, 4, 0).unwrap();
            assert!(a.live_bytes() > before);
            assert_eq!(b.size_units, 4);
        }
        assert_eq!(a.live_bytes(), before);
    }

    #[test]
    fn published_block_stays_allocated() {
        let a = allocator();
        let before = a.live_bytes();
        let mut b = Unpublished::alloc(&a, 4, 0).unwrap();
        b.publishing();
        b.published();
        assert!(a.live_bytes() > before);
    }

    #[test]
    fn refused_block_is_freed_and_in_doubt_block_leaks() {
        let a = allocator();
        let before = a.live_bytes();
        let mut b = Unpublished::alloc(&a, 4, 0).unwrap();
        b.publishing();
        b.refused();
        assert_eq!(a.live_bytes(), before);
        let mut b = Unpublished::alloc(&a, 4, 0).unwrap();
        b.publishing();
        drop(b);
        assert!(
            a.live_bytes() > before,
            "a block in doubt must never be freed"
        );
    }

    #[test]
    fn freed_block_is_reused() {
        let a = allocator();
        let off = Unpublished::alloc(&a, 4, 0).unwrap().offset_units();
        let again = Unpublished::alloc(&a, 4, 0).unwrap();
        assert_eq!(again.offset_units(), off);
    }
}
