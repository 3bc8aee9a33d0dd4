//! A survivor's side of a peer's failure (protocol and invariants F1-F4 in
//! [`crate::recover`]).

use std::sync::Arc;

use locus_fabric::{Fabric, MachineId, Port};

use super::Worker;
use crate::addr::{lost_word, Addr, Header};
use crate::adjacency::{self, PartView, MORE};
use crate::forward::PartOp;
use crate::recover::{Forgotten, Interrupted};
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

/// CAS attempts a republish makes on one key before it reports contention.
const REPUBLISH_RETRIES_MAX: u32 = 64;

impl<F: Fabric> Worker<F> {
    /// Drops what this machine holds that refers to `dead`'s memory: cache
    /// entries of keys homed there or naming its region, replicas of its keys,
    /// and its replicas in this machine's directories (F1, F4). Idempotent.
    pub fn forget_peer(&mut self, dead: MachineId) -> Result<Forgotten> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let mut f = Forgotten::default();
        let homed_on_dead = |k: Key| shared.homes.owner(k.vertex()) == dead;
        if let Some(set) = shared.replica_sets[me as usize].as_ref() {
            let size = |w: u64| Addr::decode(w).map_or(0, |a| a.size_units() * 8);
            let gone = set.take_where(homed_on_dead, size);
            let vr = self.values_region(me);
            let alloc = shared.alloc(me)?;
            let now = self.port.now_ns();
            for (_, w) in &gone {
                let a = Addr::decode(*w).expect("replica words are valid addresses");
                // Zero it so a reader holding the word sees it invalid; the
                // block waits out the lease like any retired value (R4).
                self.port.write_word(me, vr, a.offset_units() * 8, 0)?;
                alloc.retire(a.offset_units(), a.size_units(), now);
            }
            f.replicas = gone.len() as u64;
        }
        if let Some(c) = shared.caches[me as usize].as_ref() {
            f.cache_entries = c.remove_where(|k, w| {
                let home = shared.homes.owner(k.vertex());
                home == dead || Addr::decode(w).is_some_and(|a| a.holder(home) == dead)
            }) as u64;
        }
        if let Some(d) = shared.directories[me as usize].as_ref() {
            f.directory_entries = d.remove_machine(dead) as u64;
        }
        Ok(f)
    }

    /// The keys this machine homes whose address word names `dead` (their
    /// values were migrated there), from one scan of its own table: the
    /// address word is the truth. A key of a slot this machine still owns
    /// that a move in flight handed to `dead` counts too (design M1: until
    /// the table names the new home, the old home puts it back).
    pub fn keys_held_by(&mut self, dead: MachineId) -> Result<Vec<Key>> {
        let me = self.machine;
        let homes = Arc::clone(&self.shared.homes);
        Ok(self
            .scan_table(me)?
            .into_iter()
            .filter(|&(k, w)| names_dead(w, me, dead, homes.owner(k.vertex()) == me))
            .map(|(k, _)| k)
            .collect())
    }

    /// Puts `neighbors` back as `v`'s whole list at its home (this machine)
    /// after `dead` died holding some of its parts (F2): under the vertex's
    /// update lock, every part is written here and CASed over whatever its
    /// word names; parts held by a live machine other than this one are
    /// replaced there (check-and-forward); leftover parts of a longer list
    /// are emptied. The old blocks on `dead` are gone with it (nothing to
    /// invalidate or reclaim). Returns the parts written.
    pub fn republish_at_home(
        &mut self,
        v: VertexId,
        neighbors: &[VertexId],
        dead: MachineId,
    ) -> Result<u32> {
        let me = self.machine;
        if self.vertex_home(v) != me {
            return Err(StoreError::NotHolder {
                vertex: v,
                holder: self.vertex_home(v),
                this: me,
            });
        }
        self.republish_taken(v, neighbors, dead)
    }

    /// [`Worker::republish_at_home`] for a vertex whose keys this machine
    /// took over in a slot move not committed yet (issue 59): the table
    /// still names its old home, but the words readers follow are this
    /// machine's (the old home's say `MOVED` here), so they are the ones
    /// put back. Every part is written in this machine's table.
    pub fn republish_taken(
        &mut self,
        v: VertexId,
        neighbors: &[VertexId],
        dead: MachineId,
    ) -> Result<u32> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let _serial = loop {
            match shared.try_update_lock(me, v) {
                Some(g) => break g,
                None => self.port.relax(),
            }
        };
        self.invalidate_replicas(v)?;
        let max = shared.config.part_neighbors_max as usize;
        let parts: Vec<&[VertexId]> = if neighbors.is_empty() {
            vec![&[]]
        } else {
            neighbors.chunks(max).collect()
        };
        let last = parts.len() - 1;
        let mut written = 0;
        for (i, chunk) in parts.iter().enumerate().rev() {
            let flags = if i < last { MORE } else { 0 };
            self.replace_part(Key::part(v, i as u32), chunk, flags, dead)?;
            written += 1;
        }
        // Leftover parts of a longer list: parts are created in order, so
        // they run on until the first key that is absent.
        let mut p = parts.len() as u32;
        while self
            .lookup_at(Key::part(v, p), me)?
            .is_some_and(|s| s.addr_word != 0)
        {
            self.replace_part(Key::part(v, p), &[], 0, dead)?;
            written += 1;
            p += 1;
        }
        Ok(written)
    }

    /// Replaces one part of a vertex homed here: at its live holder through
    /// a part op, else (held here, on `dead`, lost, or absent) by writing it
    /// here and CASing the word this machine's table holds.
    fn replace_part(
        &mut self,
        key: Key,
        ids: &[VertexId],
        flags: u32,
        dead: MachineId,
    ) -> Result<()> {
        let me = self.machine;
        let mut payload = Vec::new();
        adjacency::encode(ids, flags, &mut payload);
        for _ in 0..REPUBLISH_RETRIES_MAX {
            let slot = match self.lookup_at(key, me)? {
                Some(s) => s,
                None => self.find_or_claim_at(key, me)?,
            };
            let old = Addr::decode(slot.addr_word);
            let holder = old.map(|a| a.holder(me));
            if holder.is_some_and(|h| h != me && h != dead) {
                let op = PartOp::Replace {
                    ids: ids.to_vec(),
                    flags,
                };
                self.part_op(key, op)?;
                return Ok(());
            }
            // Held here: the usual publish (invalidate, CAS, retire). On
            // `dead`, lost or absent: nothing to invalidate, the CAS expects
            // the word as read.
            let here = old.filter(|_| holder == Some(me));
            if self.publish(key, slot, here, &payload)?.is_some() {
                return Ok(());
            }
        }
        Err(StoreError::Contention {
            key: key.0,
            retries: REPUBLISH_RETRIES_MAX,
        })
    }

    /// Repairs the keys homed here that `dead` left mid-migration (F5):
    /// a target invalidates the old copy before its CAS publishes the new one
    /// (P2), so a target that died between the two leaves a key whose address
    /// word names a live copy with a zeroed header, unreadable for good. Each
    /// such key is republished here, under its vertex's update lock, from
    /// that copy's payload (only the header word was zeroed; a copy the word
    /// names is never retired). A live migration in the same window loses
    /// its CAS to this one and starts over: the content is the same. Keys
    /// whose word names `dead` are left to [`Worker::republish_at_home`].
    pub fn restore_interrupted(&mut self, dead: MachineId) -> Result<Interrupted> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let mut r = Interrupted::default();
        for (key, word) in self.scan_table(me)? {
            let Some(a) = Addr::decode(word) else {
                continue;
            };
            // The header word alone says whether the copy is valid.
            let holder = a.holder(me);
            if holder == dead {
                continue;
            }
            // A key of a slot handed away (a view names its new home,
            // design V4) is the new home's to repair, and that home may be
            // the dead peer: not looked up there. The scan's words can be
            // that old: the peer's next incarnation may already be up and
            // take, be handed and serve a batch while this pass runs (twin
            // seed 405: the scan read a word `Local`, B's TAKE then made it
            // `MOVED(B)` and invalidated the block, and this pass, reaching
            // the key after HAND, found the block's header zeroed).
            if shared.shard_map.is_none() && shared.homes.owner(key.vertex()) != me {
                continue;
            }
            let vr = self.values_region(holder);
            let header = self.port.read_word(holder, vr, a.offset_units() * 8)?;
            if Header::decode(header).matches(a) {
                continue;
            }
            let _serial = loop {
                match shared.try_update_lock(me, key.vertex()) {
                    Some(g) => break g,
                    None => self.port.relax(),
                }
            };
            // Again under the lock: a live migration may have published,
            // or a move handed the slot away since the scan (its new home,
            // maybe the dead peer, repairs it).
            if shared.shard_map.is_none() && shared.homes.owner(key.vertex()) != me {
                continue;
            }
            let slot = match self.lookup(key) {
                Ok(Some(slot)) => slot,
                Ok(None) => continue,
                Err(StoreError::Fabric(locus_fabric::FabricError::PeerUnavailable {
                    machine,
                    ..
                })) if machine == dead => continue,
                Err(e) => return Err(e),
            };
            // A key whose slot moved away since the scan read this table is
            // its new home's to repair (its word is in that home's form).
            if slot.home != me {
                continue;
            }
            let Some(a) = Addr::decode(slot.addr_word) else {
                continue;
            };
            if a.holder(me) == dead || self.fetch(me, a)? {
                continue;
            }
            // The value's own bytes only: the buffer may hold a longer one's after them.
            let value = &self.value[..(a.size_units() * 8) as usize];
            let Some(payload) = value
                .get(8..)
                .and_then(PartView::parse)
                .map(|p| adjacency::PREFIX_BYTES + p.len() * 4)
            else {
                // Not a part's payload: nothing to rebuild from. Its reads
                // keep failing (Contention), loudly; the caller reports it.
                r.unparseable.push(key);
                continue;
            };
            let payload = self.value[8..8 + payload].to_vec();
            self.invalidate_replicas(key.vertex())?;
            let here = (a.holder(me) == me).then_some(a);
            // A lost CAS: a live migration published first; nothing to do.
            if self.publish(key, slot, here, &payload)?.is_some() {
                r.restored += 1;
            }
        }
        Ok(r)
    }

    /// Marks `key` (homed here) lost with `dead` if its word still names
    /// `dead` (F3): its value cannot be rebuilt. True if it marked it.
    pub fn mark_lost(&mut self, key: Key, dead: MachineId) -> Result<bool> {
        let me = self.machine;
        let Some(slot) = self.lookup(key)? else {
            return Ok(false);
        };
        // Its slot moved away: the word is another home's, not ours to mark.
        if slot.home != me {
            return Ok(false);
        }
        let owned = self.vertex_home(key.vertex()) == me;
        if !names_dead(slot.addr_word, me, dead, owned) {
            return Ok(false);
        }
        let kr = self.keys_region(me);
        let prev = self
            .port
            .cas(me, kr, slot.addr_offset, slot.addr_word, lost_word(dead))?;
        Ok(prev == slot.addr_word)
    }
}

/// Whether address word `w` of a key homed at `me` leaves the value with
/// `dead`: a value held there, or (for a key of a slot `me` still owns) a
/// handoff to it not yet made final by a new table (design M1).
fn names_dead(w: u64, me: MachineId, dead: MachineId, owned: bool) -> bool {
    Addr::decode(w).is_some_and(|a| a.holder(me) == dead)
        || (owned && crate::addr::moved_to(w) == Some(dead))
}
