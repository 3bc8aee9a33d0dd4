//! Shard-based placement, the baseline of Pragh 2.3 and 6 ("Shard-based").
//!
//! Keys are hashed into `machines * shards_per_machine` shards (Pragh: 100
//! per machine); shard `s` starts on machine `s % machines`, so with vertex
//! `v` in shard `v % shards` the initial placement is `v % machines`, the
//! other schemes' slot placement whenever the machine count divides the
//! slot count (as Pragh's 8 machines divide 4096). Every machine keeps its
//! own copy of the shard map and consults it on every access to find a key's
//! machine. Migration moves whole shards, keys and values
//! ([`crate::Store::move_shards`]); afterwards every copy of the map is
//! updated. The move is stop-the-world: the caller pauses traffic around it
//! (a shard under copy is not protected against concurrent updates).
//!
//! The plan ([`plan`]) is optimal given full per-shard access counts, as in
//! the paper: each shard goes to the machine that accesses it most, subject to
//! a per-machine capacity in keys (so no key table overflows).

use std::sync::atomic::{AtomicU8, Ordering};

use locus_fabric::MachineId;

use crate::VertexId;

/// Pragh's shards per machine.
pub const SHARDS_PER_MACHINE_DEFAULT: u32 = 100;
/// Most shards per machine (128 machines times this fits a `u32`).
pub const SHARDS_PER_MACHINE_MAX: u32 = 1 << 20;

/// Every machine's copy of the shard map.
#[derive(Debug)]
pub struct ShardMap {
    shards: u32,
    /// `copies[viewer][shard]` = machine holding the shard, as `viewer` knows it.
    copies: Vec<Box<[AtomicU8]>>,
}

impl ShardMap {
    /// Shards start at `shard % machines`.
    pub fn new(machines: usize, shards_per_machine: u32) -> ShardMap {
        let shards = machines as u32 * shards_per_machine;
        let copies = (0..machines)
            .map(|_| {
                (0..shards)
                    .map(|s| AtomicU8::new((s as usize % machines) as u8))
                    .collect()
            })
            .collect();
        ShardMap { shards, copies }
    }

    /// Shards in all.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The shard of vertex `v`.
    #[inline]
    pub fn shard_of(&self, v: VertexId) -> u32 {
        v % self.shards
    }

    /// The machine holding `v`'s shard, from `viewer`'s copy of the map.
    #[inline]
    pub fn owner(&self, v: VertexId, viewer: MachineId) -> MachineId {
        self.copies[viewer as usize][self.shard_of(v) as usize].load(Ordering::Acquire)
    }

    /// The machine holding `shard`, from machine 0's copy.
    pub fn owner_of_shard(&self, shard: u32) -> MachineId {
        self.copies[0][shard as usize].load(Ordering::Acquire)
    }

    /// Points every copy's entry for `shard` at `to`.
    pub fn set(&self, shard: u32, to: MachineId) {
        for c in &self.copies {
            c[shard as usize].store(to, Ordering::Release);
        }
    }
}

/// The optimal plan for full per-shard access counts: `counts[s][m]` is how
/// often machine `m` accessed shard `s`; `keys[s]` its keys; `current[s]`
/// where it is. Shards are placed busiest first at their most frequent
/// accessor that still has room (`capacity_keys` per machine). Returns the
/// moves `(shard, from, to)`.
pub fn plan(
    counts: &[Vec<u64>],
    keys: &[u64],
    current: &[MachineId],
    capacity_keys: u64,
) -> Vec<(u32, MachineId, MachineId)> {
    let machines = counts.first().map_or(0, |c| c.len());
    let mut load = vec![0u64; machines];
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&s| std::cmp::Reverse(counts[s].iter().sum::<u64>()));
    let mut moves = Vec::new();
    let mut placed = vec![None; counts.len()];
    // Untouched shards stay where they are and keep their room.
    for s in 0..counts.len() {
        if counts[s].iter().all(|&c| c == 0) {
            load[current[s] as usize] += keys[s];
            placed[s] = Some(current[s]);
        }
    }
    for s in order {
        if placed[s].is_some() {
            continue;
        }
        let mut by_count: Vec<usize> = (0..machines).collect();
        // Most accesses first; ties keep the shard where it is.
        by_count.sort_by_key(|&m| (std::cmp::Reverse(counts[s][m]), m != current[s] as usize));
        let to = by_count
            .into_iter()
            .find(|&m| load[m] + keys[s] <= capacity_keys)
            .unwrap_or(current[s] as usize);
        load[to] += keys[s];
        placed[s] = Some(to as MachineId);
        if to != current[s] as usize {
            moves.push((s as u32, current[s], to as MachineId));
        }
    }
    moves.sort_unstable();
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_placement_is_the_hash_placement() {
        let m = ShardMap::new(8, 100);
        for v in [0u32, 7, 8, 799, 800, 123_456] {
            assert_eq!(m.owner(v, 3), crate::home_of(v, 8));
        }
        m.set(5, 2);
        assert_eq!(m.owner(5, 0), 2);
        assert_eq!(m.owner(805, 7), 2);
        assert_eq!(m.owner_of_shard(5), 2);
    }

    #[test]
    fn plan_sends_shards_to_their_busiest_accessor_within_capacity() {
        // 3 shards on 2 machines; shard 0 busiest at machine 1, shard 1 at 0,
        // shard 2 also wants machine 1 but it is full.
        let counts = vec![vec![1, 50], vec![30, 2], vec![0, 20]];
        let keys = vec![10, 10, 10];
        let current = vec![0, 1, 0];
        let moves = plan(&counts, &keys, &current, 15);
        assert_eq!(moves, vec![(0, 0, 1), (1, 1, 0)]);
        // With room, shard 2 follows too.
        let moves = plan(&counts, &keys, &current, 30);
        assert_eq!(moves, vec![(0, 0, 1), (1, 1, 0), (2, 0, 1)]);
    }
}
