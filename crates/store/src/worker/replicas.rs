//! Read-only replicas of hot shared values, the worker side ([`crate::replica`]
//! holds the data types and the protocol, R1-R5): make a replica, list it at
//! the key's home, invalidate a vertex's replicas before an update publishes,
//! drop replicas found invalid, sweep the ones nobody noticed.

use std::sync::Arc;

use locus_fabric::{Fabric, MachineId, Port};

use super::Worker;
use crate::addr::{Addr, Header};
use crate::alloc::ValueAllocator;
use crate::block::Unpublished;
use crate::forward::{Reply, Request};
use crate::replica::{Listed, ReplicaSet};
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

/// What [`Worker::replicate`] did for a key.
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

/// A value copied into a block here for a replica, its registration at the
/// key's home still to be answered.
struct Copied<'a> {
    key: Key,
    block: Unpublished<'a>,
    home: MachineId,
    /// The key's address word the copy was read through.
    seen: u64,
    /// The replica's address word here.
    word: u64,
    bytes: u64,
}

/// Where one key of a batch stands after its copy.
enum Copy<'a> {
    Done(Result<Replication>),
    Register(Copied<'a>),
}

impl<F: Fabric> Worker<F> {
    /// Makes a read-only replica of `key`'s value on this machine
    /// ([`crate::replica`]): copy the value into a block here, have the key's
    /// home list it, then serve this machine's reads from it until an update
    /// invalidates it. Replicas must be on (`replica_bytes_max > 0`).
    pub fn replicate(&mut self, key: Key) -> Result<Replication> {
        self.replicate_batch(&[key])?
            .pop()
            .expect("one result per key")
    }

    /// [`Worker::replicate`] for several keys: the copies are made one after
    /// another, then every registration is sent before any answer is
    /// awaited, each home's service woken once, so a batch costs about one
    /// round trip a home instead of one a key (the executor's replicas used
    /// to wait for each registration in turn, its home's service woken for
    /// each). Each key's result in the order of `keys`; a key named twice is
    /// tried once, its first place saying what happened and its later places
    /// answering [`Replication::Present`].
    /// Fails as a whole only if replicas are off or this machine is not
    /// hosted here.
    pub fn replicate_batch(&mut self, keys: &[Key]) -> Result<Vec<Result<Replication>>> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let set = shared.replica_sets[me as usize]
            .as_ref()
            .ok_or(StoreError::FeatureOff {
                operation: "replicate",
                setting: "replicas (replica_bytes_max > 0)",
            })?;
        let alloc = shared.alloc(me)?;
        let mut steps: Vec<Copy<'_>> = Vec::with_capacity(keys.len());
        // Bytes of this batch's copies, not in the set until registered:
        // the budget holds them too.
        let mut reserved = 0;
        for (i, &key) in keys.iter().enumerate() {
            if keys[..i].contains(&key) {
                steps.push(Copy::Done(Ok(Replication::Present)));
                continue;
            }
            steps.push(match self.copy_for_replica(key, set, alloc, reserved) {
                Ok(step) => {
                    if let Copy::Register(c) = &step {
                        reserved += c.bytes;
                    }
                    step
                }
                Err(e) => Copy::Done(Err(e)),
            });
        }
        // A copy whose home is here is listed at once; the rest are sent.
        let mut requests = Vec::new();
        for step in &mut steps {
            if let Copy::Register(c) = step {
                // From here the home may list the block (replica invariant
                // R4): if the answer is lost, the block leaks rather than
                // being freed.
                c.block.publishing();
                if c.home == me {
                    let listed = self.list_replica(c.key, me, c.seen, c.block.offset_units());
                    let Copy::Register(c) =
                        std::mem::replace(step, Copy::Done(Ok(Replication::Absent)))
                    else {
                        unreachable!("matched above")
                    };
                    *step = Copy::Done(listed.map(|l| self.registered(c, l)));
                } else {
                    requests.push((
                        c.home,
                        Request::Replica {
                            key: c.key.0,
                            seen: c.seen,
                            offset_units: c.block.offset_units(),
                        },
                    ));
                }
            }
        }
        let mut replies = self.forward_all(&requests).into_iter();
        let results = steps
            .into_iter()
            .map(|step| match step {
                Copy::Done(r) => r,
                Copy::Register(c) => {
                    let home = c.home;
                    match replies.next().expect("one reply per registration")? {
                        Reply::Replica(listed) => Ok(self.registered(c, listed)),
                        // The block is in doubt and leaks (R4).
                        other => Err(StoreError::ReplyMismatch {
                            machine: home,
                            request: "replica",
                            reply: other.kind(),
                        }),
                    }
                }
            })
            .collect();
        Ok(results)
    }

    /// A replica's first half: copies `key`'s value into a block here, or
    /// says why no copy is needed or possible; `reserved` bytes of the
    /// budget are taken by copies not yet registered.
    fn copy_for_replica<'a>(
        &mut self,
        key: Key,
        set: &ReplicaSet,
        alloc: &'a ValueAllocator,
        reserved: u64,
    ) -> Result<Copy<'a>> {
        let me = self.machine;
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
                return Ok(Copy::Done(Ok(Replication::Present)));
            }
            self.drop_replica(key, word, a);
        }
        let Some((slot, addr)) = self.read_value(key)? else {
            return Ok(Copy::Done(Ok(Replication::Absent)));
        };
        if addr.holder(slot.home) == me {
            return Ok(Copy::Done(Ok(Replication::HeldHere)));
        }
        let size_units = addr.size_units();
        let max = self.shared.config.replica_bytes_max;
        if set.bytes() + reserved + size_units * 8 > max {
            let interval_ns = self.shared.config.replica_sweep_interval_ms * 1_000_000;
            if set.claim_sweep(self.port.now_ns(), interval_ns) {
                self.sweep_replicas()?;
            }
            if set.bytes() + reserved + size_units * 8 > max {
                return Ok(Copy::Done(Ok(Replication::Full)));
            }
        }
        // Within the remote address's limits: the value is held elsewhere already.
        let probe = Addr::remote(me, size_units, 0)?;
        debug_assert_eq!(probe.size_units(), size_units);
        // `self.value` holds the copy, header included (checked by the read).
        let bytes = std::mem::take(&mut self.value);
        let block = self.write_block(alloc, &bytes[..(size_units * 8) as usize]);
        self.value = bytes;
        let block = block?;
        let word = Addr::remote(me, size_units, block.offset_units())?.encode();
        Ok(Copy::Register(Copied {
            key,
            block,
            home: slot.home,
            seen: slot.addr_word,
            word,
            bytes: size_units * 8,
        }))
    }

    /// A replica's second half, once its home answered: a listed copy is
    /// published and found by reads here; a refused one was never listed,
    /// so no invalidation can reach it (R4) and nobody read it: reused at once.
    fn registered(&mut self, c: Copied<'_>, listed: bool) -> Replication {
        if !listed {
            c.block.refused();
            return Replication::Refused;
        }
        c.block.published();
        if let Some(set) = self.shared.replica_sets[self.machine as usize].as_ref() {
            set.insert(c.key, c.word, c.bytes);
        }
        let now = self.port.now_ns();
        if let Some(cache) = self.cache() {
            cache.insert_replica(c.key, c.word, now);
        }
        self.stats.replicas_created += 1;
        Replication::Created { bytes: c.bytes }
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
        // A slot moving away lists no replica: its move dropped the ones
        // listed when it began, and its new home keeps no list of them
        // (`docs/design.md`, "Moves across servers": replicas).
        let slot = shared.homes.slot_of(key.vertex());
        if shared.guards[self.machine as usize]
            .as_ref()
            .is_some_and(|g| g.moving(slot))
        {
            return Ok(false);
        }
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

    /// A slot move's old home, once the slots are guarded (so no replica of
    /// them is listed any more): zeroes the header of every listed replica
    /// of `vertices`, each under its vertex lock (a registration that took
    /// the lock first is listed, then dropped here; one that takes it after
    /// sees the guard and is refused). The new home starts with no list, as
    /// after an update. Returns the replicas dropped.
    pub fn drop_replicas(&mut self, vertices: &[VertexId]) -> Result<u64> {
        let shared = Arc::clone(&self.shared);
        if shared.directories[self.machine as usize].is_none() {
            return Ok(0);
        }
        let before = self.stats.replica_invalidations;
        for &v in vertices {
            let _serial = loop {
                match shared.try_update_lock(self.machine, v) {
                    Some(g) => break g,
                    None => self.port.relax(),
                }
            };
            self.invalidate_replicas(v)?;
        }
        Ok(self.stats.replica_invalidations - before)
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
        if let Some(c) = self.shared.caches[self.machine as usize].as_ref() {
            c.remove_if(key, word);
            self.recent.forget(c, key);
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
