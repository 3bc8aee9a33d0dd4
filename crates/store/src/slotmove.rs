//! A slot moved from its owner A to B inside one process (issue 59; the
//! handoff of each key is [`crate::handoff`]). The in-process form of the
//! move the elastic cluster runs across servers: A stops coordinating vertex ops of
//! the slot (E5), B takes every key of the slot over, then the table names B.
//!
//! ```text
//!  A: guard the slot (vertex ops it coordinates refused with Moved(B), in-flight ones drained)
//!  B: take over every key of the slot A's table holds       (readers and writers
//!  every store: install the table naming B                    meeting A's markers
//!  A: unguard (its table now sends the slot's requests to B)  are told Moved(B))
//! ```
//!
//! Between the first handoff and the new table, a request routed to A
//! fails with `Moved`, naming B; its caller retries once the table names B
//! (a client fetches it). No answer is ever wrong: A answers for a key
//! until its word says MOVED (E1); once guarded, A coordinates no vertex
//! op of the slot, so it creates no key of it (E5) and no op it began
//! runs on beside one the new home serialises. Read-only replicas: once
//! guarded, A lists no new replica of the slot and drops the listed ones,
//! so B, whose directory starts empty, has none to invalidate. Not yet here:
//! B pulling keys on demand (PriorityPull), so that requests reaching B
//! before the table changes are served instead of retried; the migration
//! index; the coordinator's record (see `docs/design.md`).

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use locus_fabric::{Fabric, MachineId};

use crate::handoff::Outcome;
use crate::table::Key;
use crate::{Result, SlotMove, StoreError, Stores};

/// No move: the value of a slot's guard when it is not moving.
const NOT_MOVING: u8 = u8::MAX;

/// Per slot of one machine: where it is moving, and the vertex ops it
/// coordinates as the slot's home, in flight.
pub(crate) struct Guards {
    moving_to: Box<[AtomicU8]>,
    ops: Box<[AtomicU32]>,
}

impl Guards {
    pub(crate) fn new(slots: u32) -> Guards {
        Guards {
            moving_to: (0..slots).map(|_| AtomicU8::new(NOT_MOVING)).collect(),
            ops: (0..slots).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Enters a vertex op of `slot` coordinated here; refused with `Moved`
    /// while the slot moves. The op ends when the returned guard drops.
    pub(crate) fn enter(&self, slot: u32, key: Key) -> Result<Coordinating<'_>> {
        self.enter_counted(slot, key)?;
        Ok(Coordinating {
            count: &self.ops[slot as usize],
        })
    }

    /// [`Guards::enter`], leaving the count to the caller to take back.
    pub(crate) fn enter_counted(&self, slot: u32, key: Key) -> Result<()> {
        let s = slot as usize;
        // SeqCst on both sides: an op that saw no move is counted
        // before the mover reads the count (Dekker's pattern with `guard`).
        self.ops[s].fetch_add(1, Ordering::SeqCst);
        let to = self.moving_to[s].load(Ordering::SeqCst);
        if to != NOT_MOVING {
            self.ops[s].fetch_sub(1, Ordering::SeqCst);
            return Err(StoreError::Moved {
                key: key.0,
                vertex: key.vertex(),
                to,
            });
        }
        Ok(())
    }

    /// Marks `slot` moving to `to`, then waits for the vertex ops that began
    /// before to end.
    pub(crate) fn guard(&self, slot: u32, to: MachineId, relax: &mut dyn FnMut()) {
        let s = slot as usize;
        self.moving_to[s].store(to, Ordering::SeqCst);
        while self.ops[s].load(Ordering::SeqCst) != 0 {
            relax();
        }
    }

    /// Whether `slot` is guarded (moving away).
    pub(crate) fn moving(&self, slot: u32) -> bool {
        self.moving_to[slot as usize].load(Ordering::SeqCst) != NOT_MOVING
    }

    pub(crate) fn unguard(&self, slot: u32) {
        self.moving_to[slot as usize].store(NOT_MOVING, Ordering::SeqCst);
    }
}

/// A vertex op in flight (see [`Guards::enter`]).
pub(crate) struct Coordinating<'a> {
    count: &'a AtomicU32,
}

impl Drop for Coordinating<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A vertex op of one slot held open at its home across several store
/// calls (a durable node reads, logs, then applies: design M5). While it
/// is held a move of the slot waits for it, and the worker that made it
/// enters no guard again (its caller holds one for every vertex it
/// changes). Made by [`crate::Worker::enter_home_op`].
pub struct HomeOp {
    pub(crate) guards: std::sync::Arc<Guards>,
    pub(crate) slot: u32,
    pub(crate) held: std::sync::Arc<AtomicU32>,
}

impl Drop for HomeOp {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        self.guards.ops[self.slot as usize].fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a slot move did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotMoved {
    /// Keys handed over.
    pub keys: u64,
    /// Of them, keys whose value was copied out of A's region.
    pub copied: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Keys an earlier, interrupted attempt had already handed over.
    pub already: u64,
}

impl<F: Fabric> Stores<F> {
    /// Moves `slot` from its owner to machine `to` while other threads read
    /// and write (see the module doc); `log(key, payload)` makes each copy
    /// durable at `to` before it is handed over. Ends with every store's
    /// table naming `to`. A slot already at `to` moves nothing.
    pub fn move_slot(
        &self,
        slot: u32,
        to: MachineId,
        log: &mut dyn FnMut(Key, &[u8]) -> Result<()>,
    ) -> Result<SlotMoved> {
        let table = self.distinct()[0].homes().table();
        let from = table.owner_of_slot(slot).ok_or_else(|| {
            StoreError::Config(format!(
                "slot {slot} is past the table's {} slots",
                table.slots()
            ))
        })?;
        let mut r = SlotMoved::default();
        if from == to {
            return Ok(r);
        }
        let next = table
            .after(&[SlotMove { slot, from, to }])
            .map_err(|e| StoreError::Config(e.to_string()))?;
        let a = self.store(from);
        let guards = a.guards(from)?;
        let mut wa = a.worker(from)?;
        guards.guard(slot, to, &mut || wa.relax());
        let moved = (|| {
            let keys: Vec<Key> = wa.keys_in_slot(slot)?.into_iter().map(|(k, _)| k).collect();
            // Guarded: no replica of the slot is listed from here on; the
            // ones listed are dropped, so B starts with none to track.
            let mut vertices: Vec<u32> = keys.iter().map(|k| k.vertex()).collect();
            vertices.dedup();
            wa.drop_replicas(&vertices)?;
            let mut wb = self.worker(to)?;
            for k in keys {
                match wb.take_over(k, from, log)? {
                    Outcome::Handed(h) => {
                        r.keys += 1;
                        r.copied += u64::from(h.bytes_copied > 0);
                        r.bytes += h.bytes_copied;
                    }
                    Outcome::AlreadyHanded => r.already += 1,
                    Outcome::Absent => {}
                    Outcome::Lost(m) => {
                        return Err(StoreError::ValueLost {
                            key: k.0,
                            vertex: k.vertex(),
                            machine: m,
                        })
                    }
                    Outcome::MovedElsewhere(m) => {
                        return Err(StoreError::Config(format!(
                            "key {:#x} of slot {slot} was handed to machine {m}, not {to}: two moves of one slot",
                            k.0
                        )))
                    }
                }
            }
            self.install_slot_table(&next)
        })();
        // Creations may go on: A's table now sends them to B (or, if the
        // move failed, A still owns the slot's unmoved keys).
        guards.unguard(slot);
        moved?;
        Ok(r)
    }
}
