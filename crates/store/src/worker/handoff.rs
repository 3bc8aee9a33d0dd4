//! The driver of a key's handoff from its old home to this machine (issue
//! 59): carries out the steps of a [`HandoffJob`] (`crate::handoff`, which
//! holds the protocol and its invariants H1-H3) on this worker's port, one
//! operation at a time.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use locus_fabric::{Fabric, MachineId, Output, Port, WorkRequest};

use super::{Worker, PIPELINE_WINDOW, READ_RETRIES_MAX};
use crate::addr::{moved_to, pending_from, pending_word, Addr};
use crate::alloc::ValueAllocator;
use crate::block::Unpublished;
use crate::handoff::{HandoffJob, Outcome, Step};
use crate::migrate::Access;
use crate::slotmove::HomeOp;
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

/// A key of [`Worker::take_over_many`] in flight.
struct Taking<'a> {
    /// Its place in the keys.
    index: usize,
    job: HandoffJob,
    /// Its copy, allocated and not yet published.
    block: Option<Unpublished<'a>>,
}

impl<F: Fabric> Worker<F> {
    /// Takes `key` over from its old home `from`: afterwards `from`'s word
    /// says MOVED(here) and this machine's table answers for the key (see
    /// [`crate::handoff`] for the steps and why they come in that order).
    /// `log(key, payload)` must make the copy's payload (the value without
    /// its header; empty: the key has no value) durable here before it
    /// returns `Ok`; it is called before the CAS that hands the key over
    /// (H2), and again on each attempt.
    /// Idempotent: a key already handed here ends `AlreadyHanded`.
    ///
    /// The caller makes sure no other machine hands the same key at once,
    /// and that `from` refuses to create keys of the moving slot (E5).
    pub fn take_over(
        &mut self,
        key: Key,
        from: MachineId,
        log: &mut dyn FnMut(Key, &[u8]) -> Result<()>,
    ) -> Result<Outcome> {
        Ok(self.take_over_logged(&[key], from, log)?[0])
    }

    /// [`Worker::take_over`] of many distinct keys with their operations
    /// posted together (at most [`PIPELINE_WINDOW`] keys in flight, one wait
    /// per pass: a batch costs a few round trips per step, not one per key
    /// and step), and no log step: the caller made every copy durable
    /// first (a slot move's SLOT_IN, design M2). Each key runs the same steps
    /// in the same order as alone (H1-H3 are per key). Outcomes come in
    /// `keys`' order; the first error ends the call.
    pub fn take_over_many(&mut self, keys: &[Key], from: MachineId) -> Result<Vec<Outcome>> {
        self.take_over_logged(keys, from, &mut |_, _| Ok(()))
    }

    /// The keys' handoffs in a window, each copy given to `log` before its
    /// CAS (H2).
    fn take_over_logged(
        &mut self,
        keys: &[Key],
        from: MachineId,
        log: &mut dyn FnMut(Key, &[u8]) -> Result<()>,
    ) -> Result<Vec<Outcome>> {
        let shared = Arc::clone(&self.shared);
        let alloc = shared.alloc(self.machine)?;
        let r = self.take_over_window(keys, from, alloc, log);
        if r.is_err() {
            // Leave the port empty: a later call must not meet stale completions.
            self.drain_all();
        }
        let flushed = self.flush_reclaims();
        let out = r?;
        flushed?;
        Ok(out)
    }

    fn take_over_window<'a>(
        &mut self,
        keys: &[Key],
        from: MachineId,
        alloc: &'a ValueAllocator,
        log: &mut dyn FnMut(Key, &[u8]) -> Result<()>,
    ) -> Result<Vec<Outcome>> {
        let (me, layout) = (self.machine, self.shared.layout);
        let lease_ns = self.shared.config.reclaim_lease_ms * 1_000_000;
        let window = PIPELINE_WINDOW.min(keys.len());
        let mut jobs: Vec<Option<Taking<'a>>> = (0..window).map(|_| None).collect();
        let mut free: Vec<usize> = (0..window).rev().collect();
        let mut results: Vec<Option<Outcome>> = vec![None; keys.len()];
        let mut posts: Vec<WorkRequest> = Vec::with_capacity(window);
        let mut done = Vec::new();
        let (mut next, mut active) = (0, 0);
        loop {
            while next < keys.len() {
                let Some(id) = free.pop() else { break };
                let mut t = Taking {
                    index: next,
                    job: HandoffJob::new(keys[next], me, from, layout, lease_ns),
                    block: None,
                };
                next += 1;
                let step = t.job.start(self.port.now_ns());
                match self.drive_taking(&mut t, id, step, from, alloc, &mut posts, log)? {
                    Some(o) => {
                        results[t.index] = Some(o);
                        free.push(id);
                    }
                    None => {
                        jobs[id] = Some(t);
                        active += 1;
                    }
                }
            }
            self.port.post_many(&mut posts)?;
            if active == 0 {
                debug_assert_eq!(next, keys.len());
                break;
            }
            done.clear();
            self.port.wait(&mut done)?;
            for c in done.drain(..) {
                let id = c.id as usize;
                let t = jobs[id].as_mut().expect("a completion for a key in flight");
                let step = t.job.on_completion(c.result?, self.port.now_ns())?;
                if let Some(o) = self.drive_taking(t, id, step, from, alloc, &mut posts, log)? {
                    results[t.index] = Some(o);
                    jobs[id] = None;
                    free.push(id);
                    active -= 1;
                }
            }
        }
        Ok(results
            .into_iter()
            .map(|o| o.expect("every key finished"))
            .collect())
    }

    /// Carries out `step` and the ones after it that need no round trip,
    /// until the key has an operation to post (added to `posts`: `None`) or
    /// finishes (its outcome).
    #[allow(clippy::too_many_arguments)]
    fn drive_taking<'a>(
        &mut self,
        t: &mut Taking<'a>,
        id: usize,
        mut step: Step,
        from: MachineId,
        alloc: &'a ValueAllocator,
        posts: &mut Vec<WorkRequest>,
        log: &mut dyn FnMut(Key, &[u8]) -> Result<()>,
    ) -> Result<Option<Outcome>> {
        let key = t.job.key();
        loop {
            step = match step {
                Step::Post(Access::ReadOwnHeader { offset_units }) => {
                    let vr = self.values_region(self.machine);
                    let word = self.port.read_word(self.machine, vr, offset_units * 8)?;
                    let out = Output::Data(word.to_le_bytes().to_vec());
                    t.job.on_completion(out, self.port.now_ns())?
                }
                Step::Post(access) => {
                    if matches!(access, Access::Publish { home, .. } if home == from) {
                        if let Some(b) = t.block.as_mut() {
                            // From here the CAS may be applied: never free it.
                            b.publishing();
                        }
                    }
                    posts.push(self.work_request(id as u64, access));
                    return Ok(None);
                }
                Step::Alloc { size_units } => {
                    let b = Unpublished::alloc(alloc, size_units, self.port.now_ns())?;
                    let offset = b.offset_units();
                    t.block = Some(b);
                    t.job.on_allocated(offset)?
                }
                Step::Pend { pending } => {
                    let offset = self.pend(key, from, pending)?;
                    t.job.on_pended(offset)
                }
                Step::Log { word } => match self.read_payload(word)? {
                    Some(payload) => {
                        log(key, &payload)?;
                        t.job.on_logged(self.port.now_ns())
                    }
                    None => t.job.on_stale_copy(),
                },
                Step::Restart(_) => {
                    if let Some(b) = t.block.take() {
                        b.refused();
                    }
                    if t.job.restarts() >= READ_RETRIES_MAX {
                        return Err(StoreError::Contention {
                            key: key.0,
                            retries: t.job.restarts(),
                        });
                    }
                    t.job.start(self.port.now_ns())
                }
                Step::Done(outcome) => {
                    if let Outcome::Handed(h) = outcome {
                        if let Some(b) = t.block.take() {
                            b.published();
                        }
                        if let Some((holder, entry)) = h.old_entry {
                            self.reclaim_queue.push((holder, entry));
                        }
                    }
                    if let Some(c) = self.shared.caches[self.machine as usize].as_ref() {
                        c.remove(key);
                        self.recent.forget(c, key);
                    }
                    return Ok(Some(outcome));
                }
            };
        }
    }

    /// Puts `key` into this machine's table with `pending` (H1), keeping a
    /// pending entry of an earlier attempt; returns the byte offset of its
    /// address word.
    fn pend(&mut self, key: Key, from: MachineId, pending: u64) -> Result<u64> {
        let me = self.machine;
        let kr = self.keys_region(me);
        loop {
            let slot = self.find_or_claim_at(key, me)?;
            let w = slot.addr_word;
            if pending_from(w) == Some(from) {
                return Ok(slot.addr_offset);
            }
            // Empty, or a marker this machine left when it handed the key
            // away earlier: the key comes back.
            if w != 0 && moved_to(w).is_none() {
                return Err(StoreError::Config(format!(
                    "key {:#x} (vertex {}) has a live entry here ({w:#x}) while machine {from} still owns it: a second owner would answer for it",
                    key.0,
                    key.vertex()
                )));
            }
            if self.port.cas(me, kr, slot.addr_offset, w, pending)? == w {
                debug_assert_eq!(pending, pending_word(from));
                return Ok(slot.addr_offset);
            }
        }
    }

    /// The payload (without its header) of the value `word` names, as this
    /// machine names it: its own block, or another machine's; `None` if
    /// its header no longer matches (the value changed: start over).
    fn read_payload(&mut self, word: u64) -> Result<Option<Vec<u8>>> {
        let Some(a) = Addr::decode(word) else {
            return Ok(Some(Vec::new()));
        };
        let holder = a.holder(self.machine);
        let vr = self.values_region(holder);
        let mut bytes = vec![0u8; a.size_units() as usize * 8];
        self.port
            .read(holder, vr, a.offset_units() * 8, &mut bytes)?;
        let header = crate::addr::Header::decode(u64::from_le_bytes(
            bytes[..8].try_into().expect("a value has a header"),
        ));
        if !header.matches(a) {
            // C's value (or B's own, migrated there) changed meanwhile: A's
            // word no longer names it, so log nothing and start over.
            return Ok(None);
        }
        bytes.truncate(8 + header.payload_bytes as usize);
        bytes.drain(..8);
        Ok(Some(bytes))
    }
}

/// The steps of a move across servers that run at its old home A and its
/// new home B (`docs/design.md`, "Moves across servers", M1-M5); the driver
/// and the log are the caller's (`locus-node`).
impl<F: Fabric> Worker<F> {
    /// Enters a vertex op of `v` at its home, held open until the returned
    /// [`HomeOp`] drops (M5: a durable node enters before it logs). Refused
    /// with `Moved` if the slot is moving away or the table names another
    /// home. `None` where this machine keeps no guards.
    pub fn enter_home_op(&mut self, v: VertexId) -> Result<Option<HomeOp>> {
        let shared = Arc::clone(&self.shared);
        let Some(guards) = shared.guards[self.machine as usize].as_ref() else {
            return Ok(None);
        };
        let slot = shared.homes.slot_of(v);
        guards.enter_counted(slot, Key::part(v, 0))?;
        let op = HomeOp {
            guards: Arc::clone(guards),
            slot,
            held: Arc::clone(&self.held_ops),
        };
        self.held_ops.fetch_add(1, Ordering::Relaxed);
        let home = self.vertex_home(v);
        if home != self.machine {
            drop(op);
            return Err(StoreError::Moved {
                key: Key::part(v, 0).0,
                vertex: v,
                to: home,
            });
        }
        Ok(Some(op))
    }

    /// A: marks `slots` moving to `to` (vertex ops of them refused with
    /// `Moved`), then waits for the ones in flight to end.
    pub fn guard_slots(&mut self, slots: &[u32], to: MachineId) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let guards =
            shared.guards[self.machine as usize]
                .as_ref()
                .ok_or(StoreError::NotHosted {
                    machine: self.machine,
                })?;
        for &s in slots {
            self.check_slot(s)?;
            guards.guard(s, to, &mut || self.port.relax());
        }
        Ok(())
    }

    /// A: ends the guard of `slots` (after the new table, or to give up).
    pub fn unguard_slots(&mut self, slots: &[u32]) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        if let Some(g) = shared.guards[self.machine as usize].as_ref() {
            for &s in slots {
                self.check_slot(s)?;
                g.unguard(s);
            }
        }
        Ok(())
    }

    /// Whether any of `slots` is guarded here (moving away).
    pub fn slots_guarded(&self, slots: &[u32]) -> bool {
        self.shared.guards[self.machine as usize]
            .as_ref()
            .is_some_and(|g| {
                slots
                    .iter()
                    .any(|&s| s < self.shared.homes.slots() && g.moving(s))
            })
    }

    fn check_slot(&self, slot: u32) -> Result<()> {
        let n = self.shared.homes.slots();
        if slot >= n {
            return Err(StoreError::Config(format!(
                "slot {slot} is past the table's {n} slots"
            )));
        }
        Ok(())
    }

    /// A restarted old home replaying a HANDED record (design V5): puts
    /// `keys` into this machine's table as `MOVED(to)` markers, so that a
    /// reader by the table, which still names this machine, goes on to
    /// `to` instead of finding no entry ("absent"). A key with a word
    /// already is left as it is. Returns the markers written.
    pub fn put_markers(&mut self, keys: &[Key], to: MachineId) -> Result<u64> {
        let me = self.machine;
        let kr = self.keys_region(me);
        let mut written = 0;
        for &k in keys {
            let slot = self.find_or_claim_at(k, me)?;
            if slot.addr_word == 0
                && self
                    .port
                    .cas(me, kr, slot.addr_offset, 0, crate::addr::moved_word(to))?
                    == 0
            {
                written += 1;
            }
        }
        Ok(written)
    }

    /// The machine this machine's word of `key` says it was handed to.
    pub fn handed_to(&mut self, key: Key) -> Result<Option<MachineId>> {
        let me = self.machine;
        Ok(self.lookup_at(key, me)?.and_then(|s| moved_to(s.addr_word)))
    }

    /// B, after a batch was rolled back while its old home was down (the
    /// old home replayed its log and owns the keys again): empties this
    /// machine's entries of `slots`, which it does not own, whose words
    /// still name a copy here. Each word goes to 0 by CAS and the block is
    /// retired for the reclaim lease (a reader that followed a MOVED marker
    /// and holds the word sees it invalid). Returns the entries emptied.
    pub fn drop_copies(&mut self, slots: &HashSet<u32>) -> Result<u64> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let (kr, vr) = (self.keys_region(me), self.values_region(me));
        let alloc = shared.alloc(me)?;
        let mut dropped = 0;
        for (k, w) in self.scan_table_entries(me, false)? {
            let slot = shared.homes.slot_of(k.vertex());
            if !slots.contains(&slot) || shared.homes.owner(k.vertex()) == me {
                continue;
            }
            let Some(a) = Addr::decode(w).filter(|a| a.holder(me) == me) else {
                continue;
            };
            let Some(found) = self.lookup_at(k, me)? else {
                continue;
            };
            if found.addr_word != w {
                continue;
            }
            if self.port.cas(me, kr, found.addr_offset, w, 0)? == w {
                // Zero the header so a reader holding the word sees it invalid.
                self.port.write_word(me, vr, a.offset_units() * 8, 0)?;
                alloc.retire(a.offset_units(), a.size_units(), self.port.now_ns());
                dropped += 1;
            }
        }
        Ok(dropped)
    }

    /// The keys of `slots` in machine `m`'s table (one-sided, one scan),
    /// keys without a value included.
    pub fn keys_in_slots(&mut self, m: MachineId, slots: &HashSet<u32>) -> Result<Vec<Key>> {
        let homes = Arc::clone(&self.shared.homes);
        let mut keys: Vec<Key> = self
            .scan_table_entries(m, true)?
            .into_iter()
            .filter(|(k, _)| slots.contains(&homes.slot_of(k.vertex())))
            .map(|(k, _)| k)
            .collect();
        keys.sort_unstable_by_key(|k| (k.vertex(), k.part_index()));
        Ok(keys)
    }
}
