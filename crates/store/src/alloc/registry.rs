//! One shard of the allocator's block registry: the blocks of the runs that
//! hash to it, as a vector sorted by offset, with freed blocks kept as
//! tombstones.
//!
//! Why this shape: blocks come from the bump pointer, which only grows, so
//! a shard's new offsets arrive in increasing order (its runs are visited
//! in order) and a registration is a push at the end, on a line that stays
//! in the CPU's cache. A freed block is marked, not removed; a free list
//! hands out only offsets that were bump-allocated once, so a reused block
//! revives its own tombstone in place. Nothing is ever inserted in the
//! middle but when two threads' bump allocations register out of order,
//! which moves a few entries near the end. Lookups (retire, free, the
//! scan's checks) are binary searches. The tombstones are bounded by the
//! blocks the bump pointer ever handed out. (A B-tree did the same work
//! with a walk down its right edge per registration: about 7% of a 1 KB
//! migration, docs/results.md, "Migration speed, stop 30".)

/// One allocated block as the registry knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BlockInfo {
    pub(super) size_units: u64,
    pub(super) generation: u64,
    pub(super) alloc_ns: u64,
    pub(super) retired: bool,
}

/// A registry shard (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Registry {
    /// Sorted by offset; `None` marks a freed block (a tombstone).
    blocks: Vec<(u64, Option<BlockInfo>)>,
    /// The last generation handed out.
    generation: u64,
}

impl Registry {
    /// A generation never handed out by this shard before.
    #[inline]
    pub(super) fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// Where `offset` is, or would be inserted.
    #[inline]
    fn find(&self, offset: u64) -> Result<usize, usize> {
        match self.blocks.last() {
            None => Err(0),
            Some(&(last, _)) if offset > last => Err(self.blocks.len()),
            _ => self.blocks.binary_search_by_key(&offset, |b| b.0),
        }
    }

    /// Registers the block at `offset`; returns the live block already
    /// registered there, if any (a block handed out twice).
    #[inline]
    pub(super) fn insert(&mut self, offset: u64, info: BlockInfo) -> Option<BlockInfo> {
        match self.find(offset) {
            Ok(i) => self.blocks[i].1.replace(info),
            Err(i) if i == self.blocks.len() => {
                self.blocks.push((offset, Some(info)));
                None
            }
            Err(i) => {
                self.blocks.insert(i, (offset, Some(info)));
                None
            }
        }
    }

    /// The live block at `offset`.
    #[inline]
    pub(super) fn get(&self, offset: u64) -> Option<&BlockInfo> {
        self.find(offset)
            .ok()
            .and_then(|i| self.blocks[i].1.as_ref())
    }

    /// The live block at `offset`, to change.
    #[inline]
    pub(super) fn get_mut(&mut self, offset: u64) -> Option<&mut BlockInfo> {
        let i = self.find(offset).ok()?;
        self.blocks[i].1.as_mut()
    }

    /// Forgets the block at `offset` (leaves a tombstone); returns it.
    #[inline]
    pub(super) fn remove(&mut self, offset: u64) -> Option<BlockInfo> {
        let i = self.find(offset).ok()?;
        self.blocks[i].1.take()
    }

    /// The live blocks, in offset order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &BlockInfo)> {
        self.blocks
            .iter()
            .filter_map(|(o, b)| b.as_ref().map(|b| (*o, b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn info(g: u64) -> BlockInfo {
        BlockInfo {
            size_units: 1 + g % 5,
            generation: g,
            alloc_ns: g * 10,
            retired: g.is_multiple_of(3),
        }
    }

    /// Against a `BTreeMap`: appends, out-of-order inserts, reuse of freed
    /// offsets, double registrations, lookups and removals of any offset.
    #[test]
    fn behaves_as_an_ordered_map() {
        let mut r = Registry::default();
        let mut model: BTreeMap<u64, BlockInfo> = BTreeMap::new();
        let mut x = 7u64;
        let mut next = 0u64;
        for g in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let op = (x >> 60) % 8;
            // Offsets seen so far, or new ones (mostly at the end).
            let offset = if op < 3 {
                next += 1 + (x >> 40) % 9;
                next
            } else if op == 3 {
                next.saturating_sub((x >> 32) % 5)
            } else {
                (x >> 20) % (next + 2)
            };
            match op {
                0..=3 => assert_eq!(r.insert(offset, info(g)), model.insert(offset, info(g))),
                4 => assert_eq!(r.remove(offset), model.remove(&offset)),
                5 => {
                    if let (Some(a), Some(b)) = (r.get_mut(offset), model.get_mut(&offset)) {
                        a.retired = true;
                        b.retired = true;
                    }
                }
                _ => assert_eq!(r.get(offset), model.get(&offset)),
            }
        }
        let listed: Vec<(u64, BlockInfo)> = r.iter().map(|(o, b)| (o, *b)).collect();
        let want: Vec<(u64, BlockInfo)> = model.into_iter().collect();
        assert_eq!(listed, want);
    }
}
