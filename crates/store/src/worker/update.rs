//! The update path: PUT as an out-of-place read-modify-write (Pragh Fig. 9),
//! and the vertex and part ops that check-and-forward carries (Pragh 4.3).
//!
//! A vertex op (`put`, `insert_edge`, `delete_edge`) runs at the vertex's
//! home under its update lock, which first invalidates the vertex's replicas
//! (replica invariant R1); each part op runs where the part's value is held,
//! writing the new value into that machine's own region and CASing the
//! address word at the home.

use std::sync::Arc;

use locus_fabric::{Fabric, Port};

use super::{Change, Slot, Worker, FORWARD_HOPS_MAX, READ_RETRIES_MAX};
use crate::addr::{Addr, Header, LOCAL_SIZE_UNITS_MAX};
use crate::adjacency::{self, PartView, MORE};
use crate::forward::{PartOp, PartReply, Reply, Request, VertexOp};
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

impl<F: Fabric> Worker<F> {
    /// Read-modify-write of one key (PUT in Pragh Fig. 9): reads the current
    /// part, lets `decide` look at it (`None`: no value yet) and fill
    /// `self.encode`, writes the new value out of place, CASes the address
    /// word, then invalidates and retires the old value. Retries on a lost
    /// CAS. Returns false if `decide` asked for a restart.
    pub(super) fn rmw(
        &mut self,
        key: Key,
        mut decide: impl FnMut(Option<PartView<'_>>, &mut Vec<u8>) -> Change,
    ) -> Result<bool> {
        loop {
            let (slot, old) = match self.read_value(key)? {
                Some((slot, addr)) => (slot, Some(addr)),
                None => {
                    // A new key's value starts at its home: refuse elsewhere
                    // before claiming a slot that would then stay empty.
                    let home = self.home(key);
                    if home != self.machine {
                        return Err(StoreError::NotHolder {
                            vertex: key.vertex(),
                            holder: home,
                            this: self.machine,
                        });
                    }
                    self.check_not_ahead(key)?;
                    (self.find_or_claim(key)?, None)
                }
            };
            let old = match (old, Addr::decode(slot.addr_word)) {
                (None, Some(_)) => continue, // published meanwhile: read it
                (o, _) => o,
            };
            let holder = old.map_or(slot.home, |a| a.holder(slot.home));
            if holder != self.machine {
                return Err(StoreError::NotHolder {
                    vertex: key.vertex(),
                    holder,
                    this: self.machine,
                });
            }
            let mut encode = std::mem::take(&mut self.encode);
            let change = {
                let view = old.map(|_| self.current_part());
                decide(view, &mut encode)
            };
            let r = match (change, old) {
                (Change::Keep, _) | (Change::Remove, None) => Ok(Some(true)),
                (Change::Replace, _) => self.publish(key, slot, old, &encode),
                (Change::Remove, Some(old)) => match self.check_not_ahead(key) {
                    Ok(()) => self.unpublish(key, slot, old),
                    Err(e) => Err(e),
                },
            };
            self.encode = encode;
            match r? {
                Some(done) => return Ok(done),
                None => {
                    self.stats.cas_conflicts += 1;
                    continue;
                }
            }
        }
    }

    /// Neighbours one part holds at most (a longer list is decomposed).
    pub fn part_neighbors_max(&self) -> u32 {
        self.shared.config.part_neighbors_max
    }

    /// Marks this worker as putting back a log's lists (see
    /// [`Worker::check_not_ahead`]): keys of slots served ahead of the
    /// table existed before the restart, so putting them back is no
    /// creation that V3 refuses.
    pub fn set_replaying(&mut self, on: bool) {
        self.replaying = on;
    }

    /// Refuses to create or remove `key` at a home that serves its slot
    /// ahead of the slot table (design V3: a reader by the table must find
    /// every key of a moving slot at its old owner, as an entry or a marker).
    pub fn check_not_ahead(&self, key: Key) -> Result<()> {
        let homes = &self.shared.homes;
        let slot = homes.slot_of(key.vertex());
        if !self.replaying && self.shared.shard_map.is_none() && homes.ahead_of_table(slot) {
            return Err(StoreError::AheadOfTable {
                vertex: key.vertex(),
                slot,
            });
        }
        Ok(())
    }

    /// Writes `payload` as a new value here and CASes it into `slot`.
    /// `Some(true)` on success, `None` if the CAS lost.
    pub(super) fn publish(
        &mut self,
        key: Key,
        slot: Slot,
        old: Option<Addr>,
        payload: &[u8],
    ) -> Result<Option<bool>> {
        let header = Header::for_payload(payload.len())?;
        let size_units = header.size_units as u64;
        let me = self.machine;
        debug_assert!(size_units <= LOCAL_SIZE_UNITS_MAX);
        // Check the address limits before taking room for the value.
        Addr::at(slot.home, me, size_units, 0)?;
        let shared = Arc::clone(&self.shared);
        let mut bytes = std::mem::take(&mut self.value);
        bytes.clear();
        bytes.extend_from_slice(&header.encode().to_le_bytes());
        bytes.extend_from_slice(payload);
        bytes.resize((size_units * 8) as usize, 0);
        let block = self.write_block(shared.alloc(me)?, &bytes);
        self.value = bytes;
        let block = block?;
        let new_addr = Addr::at(slot.home, me, size_units, block.offset_units())?;
        // A snapshot's pre-image is recorded before anything of the old
        // value changes (design S2): a reader that sees the new value finds
        // the old word in the record it fetches after its reads.
        self.snapshot_note(key, slot.home, slot.addr_word)?;
        // Invalidate the old value *before* publishing the new one (a
        // deliberate change of Fig. 9's order, see the protocol notes in
        // ARCHITECTURE.md): a reader holding the old address, even a cached
        // one, then either finds the old header zeroed and looks again, or read
        // before this point, when the old value was still current. So reads
        // stay linearizable with location caches. The old value is ours.
        if let Some(old) = old {
            debug_assert_eq!(old.holder(slot.home), me);
            let vr = self.values_region(me);
            self.port.write_word(me, vr, old.offset_units() * 8, 0)?;
        }
        if !self.cas_publish(block, slot.home, slot.addr_offset, slot.addr_word, new_addr)? {
            // The cached word (if any) is stale: drop it so the retry looks again.
            // The old value was superseded by whoever changed the word (only
            // a migration can, updates of a vertex being serialised), and that
            // migration reclaims it.
            if slot.cached {
                if let Some(c) = self.shared.caches[self.machine as usize].as_ref() {
                    if let Some(w) = super::cache_form(slot.home, slot.addr_word) {
                        c.remove_if(key, w);
                    }
                    self.recent.forget(c, key);
                }
            }
            return Ok(None);
        }
        if let Some(old) = old {
            // Unless an open snapshot keeps it as a pre-image (S3).
            let entry = Addr::local(old.size_units(), old.offset_units())?.encode();
            if !self
                .snapshot_keeps(key, slot.home, slot.addr_word, me, entry)
                .kept()
            {
                shared
                    .alloc(me)?
                    .retire(old.offset_units(), old.size_units(), self.port.now_ns());
            }
        }
        Ok(Some(true))
    }

    /// Removes the value at `old` from `slot` (its address word becomes 0):
    /// the removal's half of [`Worker::publish`], in the same order (the old
    /// value is invalidated first, then the word changes, then the old block
    /// is retired). `Some(true)` on success, `None` if the CAS lost.
    fn unpublish(&mut self, key: Key, slot: Slot, old: Addr) -> Result<Option<bool>> {
        let me = self.machine;
        debug_assert_eq!(old.holder(slot.home), me);
        self.snapshot_note(key, slot.home, slot.addr_word)?; // S2, as in publish
        let vr = self.values_region(me);
        self.port.write_word(me, vr, old.offset_units() * 8, 0)?;
        let kr = self.keys_region(slot.home);
        let prev = self
            .port
            .cas(slot.home, kr, slot.addr_offset, slot.addr_word, 0)?;
        if prev != slot.addr_word {
            if slot.cached {
                if let Some(c) = self.shared.caches[me as usize].as_ref() {
                    if let Some(w) = super::cache_form(slot.home, slot.addr_word) {
                        c.remove_if(key, w);
                    }
                    self.recent.forget(c, key);
                }
            }
            return Ok(None);
        }
        let entry = Addr::local(old.size_units(), old.offset_units())?.encode();
        if !self
            .snapshot_keeps(key, slot.home, slot.addr_word, me, entry)
            .kept()
        {
            self.shared
                .alloc(me)?
                .retire(old.offset_units(), old.size_units(), self.port.now_ns());
        }
        Ok(Some(true))
    }

    /// Replaces `v`'s adjacency list. Runs anywhere: the update is carried to
    /// `v`'s home, which coordinates it under its per-vertex lock, and each
    /// part is rewritten by the machine holding it (check-and-forward, Pragh
    /// 4.3). A list longer than `part_neighbors_max` is split into several
    /// keys (vertex decomposition); a reader may see such a list half
    /// replaced (each part is replaced atomically, the list is not).
    pub fn put(&mut self, v: VertexId, neighbors: &[VertexId]) -> Result<()> {
        self.vertex_op(v, VertexOp::Put(neighbors.to_vec()))
            .map(|_| ())
    }

    /// Adds the edge v -> u unless present. Returns whether it was added.
    pub fn insert_edge(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        let home = self.vertex_home(v);
        self.vertex_op(v, VertexOp::Insert(u))
            .and_then(|r| changed(r, home))
    }

    /// Removes every occurrence of the edge v -> u. Returns whether there was one.
    pub fn delete_edge(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        let home = self.vertex_home(v);
        self.vertex_op(v, VertexOp::Delete(u))
            .and_then(|r| changed(r, home))
    }

    /// Removes vertex `v`: every part of its list, so that reads find no
    /// entry afterwards (its key slots stay, with no value). Returns the
    /// list it had, or `None` if it had no entry. Edges of other vertices
    /// that point at `v` are theirs: a caller storing both directions
    /// deletes them (`locus_client::Client::delete_vertex`). Runs anywhere,
    /// coordinated by the home as every vertex op.
    pub fn delete_vertex(&mut self, v: VertexId) -> Result<Option<Vec<VertexId>>> {
        match self.vertex_op(v, VertexOp::Remove)? {
            Reply::Removed(list) => Ok(list),
            other => Err(StoreError::ReplyMismatch {
                machine: self.vertex_home(v),
                request: "vertex removal",
                reply: other.kind(),
            }),
        }
    }

    /// Runs a vertex op at `v`'s home: here under the vertex's lock, or by
    /// forwarding it there and waiting for the reply. The reply is
    /// `Reply::Vertex` (whether anything changed) or, for `Remove`,
    /// `Reply::Removed`.
    pub(super) fn vertex_op(&mut self, v: VertexId, op: VertexOp) -> Result<Reply> {
        let home = self.vertex_home(v);
        if home != self.machine {
            return match self.forward(home, Request::Vertex { vertex: v, op })? {
                r @ (Reply::Vertex(_) | Reply::Removed(_)) => Ok(r),
                other => Err(StoreError::ReplyMismatch {
                    machine: home,
                    request: "vertex",
                    reply: other.kind(),
                }),
            };
        }
        self.vertex_op_here(v, op)
    }

    /// Runs a vertex op that reached `v`'s home (this machine by its table
    /// a moment ago): refused with `Moved` if the table names another home
    /// now, never forwarded on. A service waiting for another service's
    /// reply runs no vertex ops meanwhile, so two services forwarding to
    /// each other would each wait out the timeout (the simulation's seed 30
    /// of the slot-move variant).
    pub(super) fn vertex_op_here(&mut self, v: VertexId, op: VertexOp) -> Result<Reply> {
        let shared = Arc::clone(&self.shared);
        // Held for the whole op: a move of v's slot waits for the ops its
        // old home coordinates and refuses new ones there, so no op runs
        // on at the old home after the table names the new one (two
        // coordinators of one vertex would each serialise only their own).
        let held = self.held_ops.load(std::sync::atomic::Ordering::Relaxed) > 0;
        let _coordinating = match shared.guards[self.machine as usize].as_ref() {
            Some(g) if !held => Some(g.enter(shared.homes.slot_of(v), Key::part(v, 0))?),
            _ => None,
        };
        // A move may have ended between the home check above and the guard.
        let now_home = self.vertex_home(v);
        if now_home != self.machine {
            return Err(StoreError::Moved {
                key: Key::part(v, 0).0,
                vertex: v,
                to: now_home,
            });
        }
        let _serial = loop {
            match shared.try_update_lock(self.machine, v) {
                Some(g) => break g,
                None => self.port.relax(),
            }
        };
        // Replicas go before anything publishes (replica invariant 1).
        self.invalidate_replicas(v)?;
        match op {
            VertexOp::Put(list) => self.put_at_home(v, &list).map(|_| Reply::Vertex(true)),
            VertexOp::Insert(u) => self.insert_at_home(v, u).map(Reply::Vertex),
            VertexOp::Delete(u) => self.delete_at_home(v, u).map(Reply::Vertex),
            VertexOp::Remove => {
                // Its parts are dropped where they are held, which may not
                // be here: refuse at the coordinator.
                self.check_not_ahead(Key::part(v, 0))?;
                self.remove_at_home(v).map(Reply::Removed)
            }
        }
    }

    /// Removes `v`'s parts, part 0 first: once it is gone every read finds
    /// no entry, and the parts after it are unreachable until they are gone
    /// too (a failure part-way leaves only unreachable parts, which a later
    /// `put` of the vertex overwrites). Updates of `v` are serialised here,
    /// so the list read first is the list removed.
    pub(super) fn remove_at_home(&mut self, v: VertexId) -> Result<Option<Vec<VertexId>>> {
        let Some(list) = self.get(v)? else {
            return Ok(None);
        };
        let mut part = 0u32;
        loop {
            match self.part_op(Key::part(v, part), PartOp::Drop)? {
                PartReply::Done { more: true, .. } => part += 1,
                _ => return Ok(Some(list)),
            }
        }
    }

    pub(super) fn put_at_home(&mut self, v: VertexId, neighbors: &[VertexId]) -> Result<()> {
        let max = self.shared.config.part_neighbors_max as usize;
        let parts: Vec<&[VertexId]> = if neighbors.is_empty() {
            vec![&[]]
        } else {
            neighbors.chunks(max).collect()
        };
        let last = parts.len() - 1;
        // Write parts from the last to the first, so a MORE flag never points
        // at a part that is not there yet.
        for (i, chunk) in parts.iter().enumerate().rev() {
            let flags = if i < last { MORE } else { 0 };
            let op = PartOp::Replace {
                ids: chunk.to_vec(),
                flags,
            };
            self.part_op(Key::part(v, i as u32), op)?;
        }
        // Empty what is left of a longer previous list (updates of v are
        // serialised here, so what we read cannot change under us).
        let mut p = parts.len() as u32;
        loop {
            if self.read_value(Key::part(v, p))?.is_none() {
                break;
            }
            let had_more = self.current_part().more();
            self.part_op(
                Key::part(v, p),
                PartOp::Replace {
                    ids: Vec::new(),
                    flags: 0,
                },
            )?;
            if !had_more {
                break;
            }
            p += 1;
        }
        Ok(())
    }

    pub(super) fn insert_at_home(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        let max = self.shared.config.part_neighbors_max;
        for _ in 0..READ_RETRIES_MAX {
            // Find the last part, and whether u is already there.
            let mut part = 0u32;
            loop {
                if self.read_value(Key::part(v, part))?.is_none() {
                    break;
                }
                let view = self.current_part();
                if view.iter().any(|x| x == u) {
                    return Ok(false);
                }
                if !view.more() {
                    break;
                }
                part += 1;
            }
            let key = Key::part(v, part);
            match self.part_op(key, PartOp::Append { u, max })? {
                PartReply::Done { changed, .. } => return Ok(changed),
                PartReply::HasMore => continue,
                PartReply::Absent => {
                    if let PartReply::Done { changed: true, .. } =
                        self.part_op(key, PartOp::CreateWith { u })?
                    {
                        return Ok(true);
                    }
                }
                PartReply::Full => {
                    // Publish the next part, then flag the full one.
                    let next = Key::part(v, part + 1);
                    let created = matches!(
                        self.part_op(next, PartOp::CreateWith { u })?,
                        PartReply::Done { changed: true, .. }
                    );
                    self.part_op(key, PartOp::SetMore)?;
                    if created {
                        return Ok(true);
                    }
                    // An emptied part from a longer earlier list was there:
                    // it is linked now; scan again.
                }
                PartReply::Moved(m) => unreachable!("part_op follows moves, got Moved({m})"),
            }
        }
        Err(StoreError::Contention {
            key: Key::part(v, 0).0,
            retries: READ_RETRIES_MAX,
        })
    }

    pub(super) fn delete_at_home(&mut self, v: VertexId, u: VertexId) -> Result<bool> {
        let mut any = false;
        let mut part = 0u32;
        loop {
            match self.part_op(Key::part(v, part), PartOp::Remove { u })? {
                PartReply::Done { changed, more } => {
                    any |= changed;
                    if !more {
                        return Ok(any);
                    }
                }
                _ => return Ok(any),
            }
            part += 1;
        }
    }

    /// Applies a part op where the key's value is: here if it is held here,
    /// else at its holder (following moves). Pragh 4.3's check-and-forward.
    pub(super) fn part_op(&mut self, key: Key, op: PartOp) -> Result<PartReply> {
        let mut target = self.machine;
        for _ in 0..FORWARD_HOPS_MAX {
            let reply = if target == self.machine {
                self.part_op_here(key, &op)?
            } else {
                match self.forward(
                    target,
                    Request::Part {
                        key: key.0,
                        op: op.clone(),
                    },
                )? {
                    Reply::Part(r) => r,
                    other => {
                        return Err(StoreError::ReplyMismatch {
                            machine: target,
                            request: "part",
                            reply: other.kind(),
                        })
                    }
                }
            };
            match reply {
                PartReply::Moved(m) => target = m,
                r => return Ok(r),
            }
        }
        Err(StoreError::Contention {
            key: key.0,
            retries: FORWARD_HOPS_MAX,
        })
    }

    /// Applies a part op on this machine; `Moved` if the value is held elsewhere.
    pub(super) fn part_op_here(&mut self, key: Key, op: &PartOp) -> Result<PartReply> {
        let mut reply = PartReply::Absent;
        let mut ids: Vec<VertexId> = Vec::new();
        let r = self.rmw(key, |cur, enc| {
            let (change, r) = decide_part_op(op, cur, enc, &mut ids);
            reply = r;
            change
        });
        match r {
            Ok(_) => Ok(reply),
            Err(StoreError::NotHolder { holder, .. }) => Ok(PartReply::Moved(holder)),
            Err(e) => Err(e),
        }
    }
}

/// What a vertex op's reply (from `home`) says changed (`Reply::Vertex`).
fn changed(r: Reply, home: locus_fabric::MachineId) -> Result<bool> {
    match r {
        Reply::Vertex(b) => Ok(b),
        other => Err(StoreError::ReplyMismatch {
            machine: home,
            request: "vertex",
            reply: other.kind(),
        }),
    }
}

/// What a part op does to the current part (or its absence): the change to
/// make and the reply to give. `ids` is scratch space.
fn decide_part_op(
    op: &PartOp,
    cur: Option<PartView<'_>>,
    enc: &mut Vec<u8>,
    ids: &mut Vec<VertexId>,
) -> (Change, PartReply) {
    let more_of = |c: &PartView<'_>| c.more();
    match (op, cur) {
        (PartOp::Replace { ids: new, flags }, _) => {
            adjacency::encode(new, *flags, enc);
            (
                Change::Replace,
                PartReply::Done {
                    changed: true,
                    more: flags & MORE != 0,
                },
            )
        }
        (PartOp::CreateWith { u }, None) => {
            adjacency::encode(&[*u], 0, enc);
            (
                Change::Replace,
                PartReply::Done {
                    changed: true,
                    more: false,
                },
            )
        }
        (PartOp::CreateWith { .. }, Some(c)) => (
            Change::Keep,
            PartReply::Done {
                changed: false,
                more: more_of(&c),
            },
        ),
        (_, None) => (Change::Keep, PartReply::Absent),
        (PartOp::Drop, Some(c)) => (
            Change::Remove,
            PartReply::Done {
                changed: true,
                more: c.more(),
            },
        ),
        (PartOp::Append { u, max }, Some(c)) => {
            if c.iter().any(|x| x == *u) {
                (
                    Change::Keep,
                    PartReply::Done {
                        changed: false,
                        more: c.more(),
                    },
                )
            } else if c.more() {
                (Change::Keep, PartReply::HasMore)
            } else if c.len() >= *max as usize {
                (Change::Keep, PartReply::Full)
            } else {
                ids.clear();
                ids.extend(c.iter());
                ids.push(*u);
                adjacency::encode(ids, c.flags, enc);
                (
                    Change::Replace,
                    PartReply::Done {
                        changed: true,
                        more: false,
                    },
                )
            }
        }
        (PartOp::Remove { u }, Some(c)) => {
            if c.iter().any(|x| x == *u) {
                ids.clear();
                ids.extend(c.iter().filter(|x| x != u));
                adjacency::encode(ids, c.flags, enc);
                (
                    Change::Replace,
                    PartReply::Done {
                        changed: true,
                        more: c.more(),
                    },
                )
            } else {
                (
                    Change::Keep,
                    PartReply::Done {
                        changed: false,
                        more: c.more(),
                    },
                )
            }
        }
        (PartOp::SetMore, Some(c)) => {
            if c.more() {
                (
                    Change::Keep,
                    PartReply::Done {
                        changed: false,
                        more: true,
                    },
                )
            } else {
                ids.clear();
                ids.extend(c.iter());
                adjacency::encode(ids, c.flags | MORE, enc);
                (
                    Change::Replace,
                    PartReply::Done {
                        changed: true,
                        more: true,
                    },
                )
            }
        }
    }
}
