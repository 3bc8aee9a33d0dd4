//! The shard-based baseline's shard moves (Pragh 2.3): stop-the-world copies
//! of whole shards between machines' key tables and value regions.

use std::sync::Arc;

use locus_fabric::{Fabric, MachineId};

use super::Worker;
use crate::addr::Addr;
use crate::store::Store;
use crate::table::Key;
use crate::{Result, StoreError};

impl<F: Fabric> Store<F> {
    /// Moves whole shards (the shard-based baseline, Pragh 2.3): for each
    /// `(shard, from, to)`, a worker acting as `to` scans `from`'s key table
    /// with large READs, copies every key of the shard and its value into its
    /// own table and value region, and then every machine's shard map names
    /// `to`; the old blocks go to their holders' reclaim rings. The stale key
    /// slots at `from` are unreachable (no map names `from` for the shard) and
    /// are reused if the shard comes back.
    ///
    /// Stop-the-world: no other operation may run on the cluster meanwhile,
    /// and the machines' services must be running (they drain the reclaim
    /// rings). Returns (keys moved, bytes moved: values plus 16-byte slots).
    pub fn move_shards(&self, moves: &[(u32, MachineId, MachineId)]) -> Result<(u64, u64)> {
        let map = self.shard_map_or_off()?;
        move_shards(&|m| self.worker(m), &[map], moves)
    }

    /// The shard map, or the error of an operation that needs one.
    pub(crate) fn shard_map_or_off(&self) -> Result<&crate::shard::ShardMap> {
        self.shared
            .shard_map
            .as_ref()
            .ok_or(StoreError::FeatureOff {
                operation: "move_shards",
                setting: "shard-based placement (shards_per_machine > 0)",
            })
    }
}

/// [`Store::move_shards`] with the workers of `worker_of` (the machine they
/// act as may be hosted by different stores), updating every map of `maps`
/// (each store keeps its own); `maps[0]` says where shards are.
pub(crate) fn move_shards<F: Fabric>(
    worker_of: &dyn Fn(MachineId) -> Result<Worker<F>>,
    maps: &[&crate::shard::ShardMap],
    moves: &[(u32, MachineId, MachineId)],
) -> Result<(u64, u64)> {
    let map = maps[0];
    let mut sources: Vec<MachineId> = moves.iter().map(|m| m.1).collect();
    sources.sort_unstable();
    sources.dedup();
    let (mut keys_moved, mut bytes_moved) = (0u64, 0u64);
    for from in sources {
        let mine: Vec<(u32, MachineId)> = moves
            .iter()
            .filter(|m| m.1 == from)
            .map(|m| (m.0, m.2))
            .collect();
        for &(shard, _) in &mine {
            if map.owner_of_shard(shard) != from {
                return Err(StoreError::ShardElsewhere {
                    shard,
                    expected: from,
                    actual: map.owner_of_shard(shard),
                });
            }
        }
        let mut scanner = worker_of(mine[0].1)?;
        let entries = scanner.scan_table(from)?;
        for (shard, to) in mine {
            let mut w = worker_of(to)?;
            for &(key, word) in entries
                .iter()
                .filter(|(k, _)| map.shard_of(k.vertex()) == shard)
            {
                bytes_moved += w.copy_key_here(key, word, from)?;
                keys_moved += 1;
                if w.reclaim_queue.len() >= 4096 {
                    w.flush_reclaims()?;
                }
            }
            w.flush_reclaims()?;
            for m in maps {
                m.set(shard, to);
            }
        }
    }
    Ok((keys_moved, bytes_moved))
}

impl<F: Fabric> Worker<F> {
    /// Copies `key` (address word `word`, keyed at `from`) with its value into
    /// this machine's key table and value region; returns the bytes copied.
    pub(super) fn copy_key_here(&mut self, key: Key, word: u64, from: MachineId) -> Result<u64> {
        let Some(addr) = Addr::decode(word) else {
            return Ok(0);
        };
        let me = self.machine;
        if !self.fetch(from, addr)? {
            return Err(StoreError::ShardMoveRace {
                key: key.0,
                machine: addr.holder(from),
            });
        }
        let size_units = addr.size_units();
        let shared = Arc::clone(&self.shared);
        let bytes = std::mem::take(&mut self.value);
        let block = self.write_block(shared.alloc(me)?, &bytes[..(size_units * 8) as usize]);
        self.value = bytes;
        let block = block?;
        let slot = self.find_or_claim_at(key, me)?;
        let new = Addr::local(size_units, block.offset_units())?;
        if !self.cas_publish(block, me, slot.addr_offset, slot.addr_word, new)? {
            return Err(StoreError::ShardMoveRace {
                key: key.0,
                machine: me,
            });
        }
        self.reclaim_queue.push((
            addr.holder(from),
            Addr::local(size_units, addr.offset_units())?.encode(),
        ));
        Ok(size_units * 8 + 16)
    }
}
