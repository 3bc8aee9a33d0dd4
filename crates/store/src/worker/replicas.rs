//! Read-only replicas of hot shared values, the worker side ([`crate::replica`]
//! holds the data types and the protocol, R1-R5): make a replica, list it at
//! the key's home, invalidate a vertex's replicas before an update publishes,
//! drop replicas found invalid, sweep the ones nobody noticed.

use std::sync::Arc;

use locus_fabric::{Fabric, MachineId, Port};

use super::Worker;
use crate::addr::{Addr, Header};
use crate::forward::{Reply, Request};
use crate::replica::Listed;
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

/// What [`Worker::replicate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// A replica was made and listed at the key's home.
    Created {
        /// Bytes copied (header included).
        bytes: u64,
    },
    /// A valid replica was here already.
    Present,
    /// The value itself is held here: nothing to replicate.
    HeldHere,
    /// The key has no value.
    Absent,
    /// The home refused (the value changed meanwhile, or an update was in progress).
    Refused,
    /// This machine's replica budget is spent.
    Full,
}

impl<F: Fabric> Worker<F> {
    /// Makes a read-only replica of `key`'s value on this machine
    /// ([`crate::replica`]): copy the value into a block here, have the key's
    /// home list it, then serve this machine's reads from it until an update
    /// invalidates it. Replicas must be on (`replica_bytes_max > 0`).
    pub fn replicate(&mut self, key: Key) -> Result<Replication> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let set = shared.replica_sets[me as usize]
            .as_ref()
            .ok_or(StoreError::FeatureOff {
                operation: "replicate",
                setting: "replicas (replica_bytes_max > 0)",
            })?;
        let alloc = shared.alloc(me)?;
        let vr = self.values_region(me);
        if let Some(word) = set.get(key) {
            let a = Addr::decode(word).expect("replica words are valid addresses");
            let header = Header::decode(self.port.read_word(me, vr, a.offset_units() * 8)?);
            if header.matches(a) {
                // Still listed and valid: make sure reads find it.
                let now = self.port.now_ns();
                if let Some(c) = self.cache() {
                    c.insert_replica(key, word, now);
                }
                return Ok(Replication::Present);
            }
            self.drop_replica(key, word, a);
        }
        let Some((slot, addr)) = self.read_value(key)? else {
            return Ok(Replication::Absent);
        };
        if addr.holder(slot.home) == me {
            return Ok(Replication::HeldHere);
        }
        let size_units = addr.size_units();
        if set.bytes() + size_units * 8 > shared.config.replica_bytes_max {
            let interval_ns = shared.config.replica_sweep_interval_ms * 1_000_000;
            if set.claim_sweep(self.port.now_ns(), interval_ns) {
                self.sweep_replicas()?;
            }
            if set.bytes() + size_units * 8 > shared.config.replica_bytes_max {
                return Ok(Replication::Full);
            }
        }
        // Within the remote address's limits: the value is held elsewhere already.
        let probe = Addr::remote(me, size_units, 0)?;
        debug_assert_eq!(probe.size_units(), size_units);
        // `self.value` holds the copy, header included (checked by the read).
        let bytes = std::mem::take(&mut self.value);
        let block = self.write_block(alloc, &bytes[..(size_units * 8) as usize]);
        self.value = bytes;
        let mut block = block?;
        let offset_units = block.offset_units();
        let word = Addr::remote(me, size_units, offset_units)?.encode();
        // From here the home may list the block (replica invariant R4): if the
        // registration's answer is lost, the block leaks rather than being freed.
        block.publishing();
        let listed = if slot.home == me {
            self.list_replica(key, me, slot.addr_word, offset_units)?
        } else {
            let request = Request::Replica {
                key: key.0,
                seen: slot.addr_word,
                offset_units,
            };
            match self.forward(slot.home, request)? {
                Reply::Replica(b) => b,
                other => {
                    return Err(StoreError::ReplyMismatch {
                        machine: slot.home,
                        request: "replica",
                        reply: other.kind(),
                    })
                }
            }
        };
        if !listed {
            // Never listed, so no invalidation can reach it (replica invariant R4);
            // nobody read it either: reuse at once.
            block.refused();
            return Ok(Replication::Refused);
        }
        block.published();
        set.insert(key, word, size_units * 8);
        let now = self.port.now_ns();
        if let Some(c) = self.cache() {
            c.insert_replica(key, word, now);
        }
        self.stats.replicas_created += 1;
        Ok(Replication::Created {
            bytes: size_units * 8,
        })
    }

    /// The home's side of a replica registration (replica invariants 2, 5):
    /// lists `machine`'s replica of `key` if the key's address word is still
    /// `seen`, checked under the vertex lock, which it never waits for.
    pub(super) fn list_replica(
        &mut self,
        key: Key,
        machine: MachineId,
        seen: u64,
        offset_units: u64,
    ) -> Result<bool> {
        let shared = Arc::clone(&self.shared);
        let Some(dir) = shared.directories[self.machine as usize].as_ref() else {
            return Ok(false);
        };
        if self.home(key) != self.machine {
            return Ok(false);
        }
        let Some(_serial) = shared.try_update_lock(self.machine, key.vertex()) else {
            return Ok(false); // an update is in progress: the copy may be stale
        };
        let current = self.lookup(key)?.map(|s| s.addr_word);
        if current != Some(seen) || seen == 0 {
            return Ok(false);
        }
        Ok(dir.list(Listed {
            key,
            machine,
            offset_units,
        }))
    }

    /// The update path at `v`'s home, under its vertex lock: zeroes the
    /// header of every replica of `v`'s keys before anything publishes
    /// (replica invariant 1).
    pub(super) fn invalidate_replicas(&mut self, v: VertexId) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let Some(dir) = shared.directories[self.machine as usize].as_ref() else {
            return Ok(());
        };
        if dir.is_empty() {
            return Ok(());
        }
        for r in dir.take(v) {
            let (_, vr) = self.regions_of(r.machine)?;
            self.port.write_word(r.machine, vr, r.offset_units * 8, 0)?;
            self.stats.replica_invalidations += 1;
        }
        Ok(())
    }

    /// A read found this machine's replica of `key` invalidated: forget it
    /// and retire its block (replica invariant 4).
    pub(super) fn drop_replica(&mut self, key: Key, word: u64, addr: Addr) {
        if let Some(c) = self.cache() {
            c.remove_if(key, word);
        }
        let me = self.machine as usize;
        let (Some(set), Some(alloc)) = (
            self.shared.replica_sets[me].as_ref(),
            self.shared.allocs[me].as_ref(),
        ) else {
            return;
        };
        if set.remove_if(key, word, addr.size_units() * 8) {
            alloc.retire(addr.offset_units(), addr.size_units(), self.port.now_ns());
        }
    }

    /// Retires the blocks of replicas here that updates invalidated but no
    /// read has noticed yet. Returns how many.
    pub fn sweep_replicas(&mut self) -> Result<usize> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let (Some(set), Some(alloc)) = (
            shared.replica_sets[me as usize].as_ref(),
            shared.allocs[me as usize].as_ref(),
        ) else {
            return Ok(0);
        };
        let vr = self.values_region(me);
        // Read headers without the set's lock (replica invariant 4: only a
        // zeroed header, which no later WRITE can target, frees a block).
        let mut invalid = Vec::new();
        for (key, w) in set.snapshot() {
            let a = Addr::decode(w).expect("replica words are valid addresses");
            let h = self.port.read_word(me, vr, a.offset_units() * 8)?;
            if !Header::decode(h).matches(a) {
                invalid.push((key, w));
            }
        }
        let dead = set.forget(&invalid, |w| {
            Addr::decode(w).map_or(0, |a| a.size_units() * 8)
        });
        let now = self.port.now_ns();
        for (key, w) in &dead {
            let a = Addr::decode(*w).expect("replica words are valid addresses");
            if let (Some(k), Some(c)) = (key, self.cache()) {
                c.remove_if(*k, *w);
            }
            alloc.retire(a.offset_units(), a.size_units(), now);
        }
        Ok(dead.len())
    }

    /// Replicas held by this machine and their bytes (orphans included).
    pub fn replicas_held(&self) -> (usize, u64) {
        self.shared.replica_sets[self.machine as usize]
            .as_ref()
            .map_or((0, 0), |s| (s.len(), s.bytes()))
    }
}
