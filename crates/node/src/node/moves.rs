//! A node's steps of a slot move across servers (issue 59; the protocol,
//! M1-M5 and V1-V5, is `docs/design.md`, "Moves across servers" and "B
//! serves each group before the commit"). The driver (`locus cluster
//! move`) asks the old home A to guard a batch of slots, the new home B to
//! take them over, A to hand them (the decision: HANDED logged at A), B to
//! serve them (SERVE logged at B), commits the new table in etcd, and has
//! every server install it. Before HANDED it may ask A to take the batch
//! back; from HANDED on the batch only rolls forward. A node remembers the
//! batches in flight through it so that an install finishes them and a
//! checkpoint waits for them (M4).
//!
//! ```text
//!  A:  idle ──guard(slots, B)──▶ Out(B) ──hand──▶ Handed(B) ──install(table naming B)──▶ idle
//!                                  └──release──▶ idle (keys taken back from B)      (SLOT_OUT logged)
//!  B:  idle ──take(slots, A)───▶ In(A) ──serve──▶ Served(A) ──install(table naming B)──▶ idle
//!                                  └──forget (A took them back)──▶ idle (SLOT_OUT logged)
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use locus_fabric::counting::Counting;
use locus_fabric::{Fabric, MachineId};
use locus_store::handoff::Outcome;
use locus_store::{Key, SlotTable, StoreError, Worker};

use locus_client::proto::{
    ErrorCode, MoveHint, MoveReply, MoveStep, Reply, SlotInFlight, MOVE_KEYS_MAX,
};

/// Bytes of a hint's Bloom filter of handed slots: 4,096 bits, for the few
/// batches of slots a server hands at once (NetMigrate 5 sizes its filters
/// for a switch's whole key space; a slot table is far smaller).
const HINT_BF_BYTES: usize = 512;
/// Counters of a hint's counting Bloom filter of slots in flight.
const HINT_CBF_BYTES: usize = 1024;

use super::{Node, Session};
use crate::{NodeError, Result};

/// A slot's part in a move, as this node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moving {
    /// Guarded here, leaving for this server.
    Out(MachineId),
    /// Handed to this server (HANDED logged): it serves the slot, the
    /// table not naming it yet (V1).
    Handed(MachineId),
    /// Taken over here from this server, the table not yet naming us.
    In(MachineId),
    /// Served here since SERVE (taken from this server), the table not
    /// naming us yet (V2).
    Served(MachineId),
}

impl Moving {
    /// As MOVE's reply lists it.
    fn listed(self, slot: u32) -> SlotInFlight {
        let (leaving, handed, peer) = match self {
            Moving::Out(p) => (true, false, p),
            Moving::Handed(p) => (true, true, p),
            Moving::In(p) => (false, false, p),
            Moving::Served(p) => (false, true, p),
        };
        SlotInFlight {
            slot,
            leaving,
            handed,
            peer,
        }
    }
}

/// What a step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveReport {
    /// GUARD: the batch's keys in this node's table, once guarded.
    pub listed: Vec<Key>,
    /// Vertices of the batch.
    pub vertices: u64,
    /// Keys (vertex parts) handed over (or back).
    pub keys: u64,
    /// Bytes of values copied.
    pub bytes: u64,
    /// Slots the step finished or gave up.
    pub slots: u64,
}

/// The batches in flight through one node.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    slots: Mutex<HashMap<u32, Moving>>,
}

impl InFlight {
    /// What a log's replay left in flight (`Durability::resumed`).
    pub(crate) fn resumed(r: &[(u32, super::durable::Resumed)]) -> InFlight {
        use super::durable::Resumed;
        let f = InFlight::default();
        f.lock().extend(r.iter().map(|&(s, m)| {
            (
                s,
                match m {
                    Resumed::Handed(to) => Moving::Handed(to),
                    Resumed::Taken(from) => Moving::In(from),
                    Resumed::Served(from) => Moving::Served(from),
                },
            )
        }));
        f
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Moving>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<F: Fabric> Node<F> {
    /// Answers a MOVE request.
    pub(super) fn move_step(
        &self,
        s: &mut Session<F>,
        step: MoveStep,
        peer: u8,
        slots: &[u32],
        table: &[u8],
        keys: &[u64],
    ) -> Reply {
        let r = (|| -> Result<MoveReport> {
            let w = s.worker(self)?;
            match step {
                MoveStep::Guard => self.move_guard(w, slots, peer),
                MoveStep::Take => {
                    let keys: Vec<Key> = keys.iter().map(|&k| Key(k)).collect();
                    self.move_take(w, slots, peer, &keys)
                }
                MoveStep::Install => {
                    let t = SlotTable::decode(table)
                        .map_err(|e| NodeError::Move(format!("the table to install: {e}")))?;
                    self.move_install(w, &t)
                }
                MoveStep::Hand => {
                    let keys: Vec<Key> = keys.iter().map(|&k| Key(k)).collect();
                    self.move_hand(w, slots, peer, &keys)
                }
                MoveStep::Serve => self.move_serve(slots, peer),
                MoveStep::Release => self.move_release(w, slots, peer),
                MoveStep::Forget => self.move_forget(w, slots),
                MoveStep::Status => Ok(MoveReport::default()),
                MoveStep::Recall => self.move_recall(w, peer),
                MoveStep::FailOver | MoveStep::Promote => {
                    let t = SlotTable::decode(table)
                        .map_err(|e| NodeError::Move(format!("the failed-over table: {e}")))?;
                    if step == MoveStep::Promote {
                        self.promote(w, &t)
                    } else {
                        self.fail_over_install(w, &t, peer)
                    }
                }
                MoveStep::HandOver => {
                    let t = SlotTable::decode(table)
                        .map_err(|e| NodeError::Move(format!("the handover's table: {e}")))?;
                    self.hand_over(w, &t, slots, peer)
                }
                MoveStep::Unhand => self.unhand(w, slots),
                MoveStep::Learn | MoveStep::Copy => {
                    let t = SlotTable::decode(table)
                        .map_err(|e| NodeError::Move(format!("the rejoin's table: {e}")))?;
                    if step == MoveStep::Learn {
                        self.learn(&t, slots, peer)
                    } else {
                        self.copy_to_learner(w, &t, slots, peer)
                    }
                }
            }
        })();
        match r {
            Ok(r) => Reply::Move(MoveReply {
                vertices: r.vertices,
                keys: r.keys,
                bytes: r.bytes,
                slots: r.slots,
                in_flight: self
                    .moves_in_flight()
                    .into_iter()
                    .map(|(slot, m)| m.listed(slot))
                    .collect(),
                listed: r.listed.iter().map(|k| k.0).collect(),
            }),
            Err(NodeError::Store(e)) => self.store_error(&e),
            Err(e) => self.error(ErrorCode::Invalid, e.to_string()),
        }
    }

    /// The migration index of the moves leaving this node, one per target
    /// (SLOTS' hints): handed slots in the Bloom filter, guarded ones not
    /// handed yet in the counting Bloom filter (NetMigrate 4.2, a group
    /// being a slot).
    pub fn move_hints(&self) -> Vec<MoveHint> {
        use locus_placement::index::{BloomFilter, CountingBloomFilter};
        let mut by_to: std::collections::BTreeMap<MachineId, (BloomFilter, CountingBloomFilter)> =
            Default::default();
        for (s, m) in self.moves_in_flight() {
            let (to, handed) = match m {
                Moving::Out(to) => (to, false),
                Moving::Handed(to) => (to, true),
                Moving::In(_) | Moving::Served(_) => continue,
            };
            let (bf, cbf) = by_to.entry(to).or_insert_with(|| {
                (
                    BloomFilter::new(HINT_BF_BYTES).expect("a valid size"),
                    CountingBloomFilter::new(HINT_CBF_BYTES).expect("a valid size"),
                )
            });
            if handed {
                bf.insert(s);
            } else {
                cbf.increment(s);
            }
        }
        by_to
            .into_iter()
            .take(locus_client::proto::HINTS_MAX)
            .map(|(to, (bf, cbf))| MoveHint {
                from: self.me,
                to,
                bf: bf.to_bytes(),
                cbf: cbf.as_bytes().to_vec(),
            })
            .collect()
    }

    /// The slots in flight through this node, sorted.
    pub fn moves_in_flight(&self) -> Vec<(u32, Moving)> {
        let mut v: Vec<(u32, Moving)> = self.moving.lock().iter().map(|(s, m)| (*s, *m)).collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    fn set_moving(&self, slots: &[u32], m: Option<Moving>) {
        let mut g = self.moving.lock();
        for &s in slots {
            match m {
                Some(m) => g.insert(s, m),
                None => g.remove(&s),
            };
        }
        if let Some(d) = &self.durable {
            d.moves_in_flight.store(g.len() as u64, Ordering::Release);
        }
    }

    /// Refuses the step unless every slot's state here passes `ok`.
    fn check_states(
        &self,
        slots: &[u32],
        why: &str,
        ok: impl Fn(Option<Moving>) -> bool,
    ) -> Result<()> {
        let held = self.moving.lock();
        match slots.iter().find(|s| !ok(held.get(s).copied())) {
            Some(s) => Err(NodeError::Move(format!(
                "slot {s} {why} ({:?})",
                held.get(s)
            ))),
            None => Ok(()),
        }
    }

    /// Refuses `keys` not all of the batch's `slots`.
    fn check_keys(&self, slots: &[u32], keys: &[Key]) -> Result<()> {
        let set: HashSet<u32> = slots.iter().copied().collect();
        let homes = self.store.homes();
        match keys
            .iter()
            .find(|k| !set.contains(&homes.slot_of(k.vertex())))
        {
            Some(k) => Err(NodeError::Move(format!(
                "key {:#x} (vertex {}) is not in the batch's slots",
                k.0,
                k.vertex()
            ))),
            None => Ok(()),
        }
    }

    /// Checks a batch of `slots` owned by `owner` moving to `to`.
    fn check_batch(&self, slots: &[u32], owner: MachineId, to: MachineId) -> Result<()> {
        if owner == to || owner as usize >= self.machines || to as usize >= self.machines {
            return Err(NodeError::Move(format!(
                "no move from server {owner} to server {to} in a cluster of {} servers",
                self.machines
            )));
        }
        let table = self.store.homes().table();
        for &s in slots {
            match table.owner_of_slot(s) {
                None => {
                    return Err(NodeError::Move(format!(
                        "slot {s} is past the table's {} slots",
                        table.slots()
                    )))
                }
                Some(o) if o != owner => {
                    return Err(NodeError::Move(format!(
                        "slot {s} is server {o}'s at table epoch {}, not server {owner}'s",
                        table.epoch()
                    )))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// A: guards `slots` (this node's) for a move to `to`: their vertex
    /// ops are refused from now on, and the ones in flight have ended
    /// when this returns (M5). Idempotent.
    pub fn move_guard(
        &self,
        w: &mut Worker<Counting<F>>,
        slots: &[u32],
        to: MachineId,
    ) -> Result<MoveReport> {
        self.check_batch(slots, self.me, to)?;
        self.check_states(slots, "is already in a move here", |m| {
            m.is_none() || m == Some(Moving::Out(to))
        })?;
        self.set_moving(slots, Some(Moving::Out(to)));
        w.guard_slots(slots, to)?;
        // Guarded and drained: no key of the batch is created from here on.
        let set: HashSet<u32> = slots.iter().copied().collect();
        let listed = w.keys_in_slots(self.me, &set)?;
        if listed.len() > MOVE_KEYS_MAX {
            return Err(NodeError::Move(format!(
                "the batch has {} keys, past the {MOVE_KEYS_MAX} one request carries; move fewer slots at once",
                listed.len()
            )));
        }
        // No replica of the batch is listed from here on; the listed ones
        // are dropped, so B, whose directory starts empty, has none to track.
        let mut vertices: Vec<u32> = listed.iter().map(|k| k.vertex()).collect();
        vertices.dedup();
        w.drop_replicas(&vertices)?;
        Ok(MoveReport {
            slots: slots.len() as u64,
            listed,
            ..MoveReport::default()
        })
    }

    /// B: takes `slots` over from `from`, which guards them and listed
    /// their `keys`: reads their lists, logs them in one SLOT_IN record and
    /// waits until it is durable (M2), then takes every key over (A's
    /// words say MOVED(here)).
    pub fn move_take(
        &self,
        w: &mut Worker<Counting<F>>,
        slots: &[u32],
        from: MachineId,
        keys: &[Key],
    ) -> Result<MoveReport> {
        self.check_batch(slots, from, self.me)?;
        self.check_keys(slots, keys)?;
        // A served slot's copies have writes since SLOT_IN: a second
        // SLOT_IN would put the older lists back at a replay (V2).
        self.check_states(slots, "is already in a move here", |m| {
            m.is_none() || m == Some(Moving::In(from))
        })?;
        self.set_moving(slots, Some(Moving::In(from)));
        // Every list read at once (a few round trips for the batch).
        let firsts: Vec<u32> = keys
            .iter()
            .filter(|k| k.part_index() == 0)
            .map(|k| k.vertex())
            .collect();
        let got = match w.get_many(&firsts) {
            Ok(got) => got,
            Err(StoreError::Moved { to, vertex, .. }) if to == self.me => {
                return Err(NodeError::Move(format!(
                    "vertex {vertex} was handed here by an earlier attempt that was not released; release the batch first"
                )))
            }
            Err(e) => return Err(e.into()),
        };
        let lists: Vec<(u32, Vec<u32>)> = firsts
            .into_iter()
            .zip(got)
            .filter_map(|(v, l)| l.map(|l| (v, l)))
            .collect();
        if let Some(d) = &self.durable {
            let lsn = d
                .log_slot_in(slots, lists.iter().map(|(v, l)| (*v, l.as_slice())))
                .and_then(|lsn| d.wait(lsn))
                .map_err(|e| NodeError::Move(format!("the batch could not be logged: {e}")));
            lsn?;
        }
        let mut r = MoveReport {
            vertices: lists.len() as u64,
            slots: slots.len() as u64,
            ..MoveReport::default()
        };
        // The SLOT_IN record holds every copy (M2): each key's own log step is empty.
        take(w, keys, from, &mut r)?;
        Ok(r)
    }

    /// Any server: installs `table` (a newer epoch, committed in etcd).
    /// Finishes the batches it ends: A logs SLOT_OUT for its slots that now
    /// name their mover's target and ends their guard; B forgets its
    /// slots that now name it.
    pub fn move_install(
        &self,
        w: &mut Worker<Counting<F>>,
        table: &SlotTable,
    ) -> Result<MoveReport> {
        // A new primary of a failover that missed its PROMOTE (it was not
        // live when the driver asked) puts its backup lists in first: it
        // never serves a slot from an empty key table (issue 60, R3).
        if self.backup.is_some() && !self.faults.adopt_without_promote {
            self.promote(w, table)?;
        }
        // Slots handed from here to their backup: marked MOVED before the
        // table that gives them away is installed (H4).
        let handed = if self.faults.skip_handover_markers {
            Vec::new()
        } else {
            self.demote_handed(w, table)?
        };
        self.store.homes().install(table)?;
        self.end_handed(w, &handed)?;
        // A rejoin's learning ends with a newer table: what it learned stays
        // only if the table names this node a backup of it.
        if let Some(b) = &self.backup {
            b.drop_unbacked()?;
        }
        let now = self.store.homes().table();
        let (mut out, mut done) = (Vec::new(), Vec::new());
        for (s, m) in self.moves_in_flight() {
            match m {
                Moving::Out(to) | Moving::Handed(to) if now.owner_of_slot(s) == Some(to) => {
                    out.push(s)
                }
                Moving::In(_) | Moving::Served(_) if now.owner_of_slot(s) == Some(self.me) => {
                    done.push(s)
                }
                _ => {}
            }
        }
        if !out.is_empty() {
            if let Some(d) = &self.durable {
                d.log_slot_out(&out)
                    .and_then(|lsn| d.wait(lsn))
                    .map_err(|e| NodeError::Move(format!("SLOT_OUT could not be logged: {e}")))?;
            }
            w.unguard_slots(&out)?;
        }
        self.set_moving(&out, None);
        self.set_moving(&done, None);
        Ok(MoveReport {
            slots: (out.len() + done.len()) as u64,
            ..MoveReport::default()
        })
    }

    /// A: hands `slots` (guarded here, every key taken over by `to`) to
    /// `to`: logs HANDED and waits until it is durable, then names `to`
    /// their home on this machine (V1). From here the batch only rolls
    /// forward. Refused if a key of it is not `MOVED(to)` here (`to`
    /// restarted and this server took the key back, M1: take it again).
    /// `keys` are the batch's keys as GUARD listed them (no key of a
    /// guarded slot is created or removed since); empty, the table is
    /// scanned for them. Holds the hand lock meanwhile, so that a reload
    /// after `to`'s failure (M1, which holds it too) either ran before (and
    /// the check sees it) or runs after (and leaves handed slots alone,
    /// V4). Idempotent.
    pub fn move_hand(
        &self,
        w: &mut Worker<Counting<F>>,
        slots: &[u32],
        to: MachineId,
        keys: &[Key],
    ) -> Result<MoveReport> {
        self.check_batch(slots, self.me, to)?;
        let state = |s: &u32| self.moving.lock().get(s).copied();
        self.check_states(
            slots,
            &format!("is not guarded here for a move to server {to}: guard and take it first"),
            |m| matches!(m, Some(Moving::Out(t) | Moving::Handed(t)) if t == to),
        )?;
        let report = MoveReport {
            slots: slots.len() as u64,
            ..MoveReport::default()
        };
        if slots.iter().all(|s| state(s) == Some(Moving::Handed(to))) {
            return Ok(report);
        }
        let mut w2 = self.store.worker(self.me)?;
        let _hand = self
            .durable
            .as_ref()
            .map(|d| d.hand_lock(&mut || w2.relax()));
        let set: HashSet<u32> = slots.iter().copied().collect();
        self.check_keys(slots, keys)?;
        let keys = if keys.is_empty() {
            w.keys_in_slots(self.me, &set)?
        } else {
            keys.to_vec()
        };
        for k in keys {
            if w.handed_to(k)? != Some(to) {
                return Err(NodeError::Move(format!(
                    "key {:#x} (vertex {}) is not handed to server {to} here (taken back after its failure?): take the batch again",
                    k.0,
                    k.vertex()
                )));
            }
        }
        if let Some(d) = &self.durable {
            d.log_handed(slots, to)
                .and_then(|lsn| d.wait(lsn))
                .map_err(|e| NodeError::Move(format!("HANDED could not be logged: {e}")))?;
        }
        self.store.homes().set_view(slots, Some(to))?;
        self.set_moving(slots, Some(Moving::Handed(to)));
        Ok(report)
    }

    /// B: serves `slots`, taken over from `from`, which handed them
    /// (HANDED is durable there: the driver asks only after A's answer):
    /// logs SERVE and waits until it is durable, then names this server
    /// their home here and coordinates their vertex ops (V2); keys are not
    /// created or removed until the table names it (V3). Idempotent.
    pub fn move_serve(&self, slots: &[u32], from: MachineId) -> Result<MoveReport> {
        self.check_batch(slots, from, self.me)?;
        self.check_states(
            slots,
            &format!("was not taken over here from server {from}: take it first"),
            |m| matches!(m, Some(Moving::In(f) | Moving::Served(f)) if f == from),
        )?;
        if let Some(d) = &self.durable {
            d.log_serve(slots, from)
                .and_then(|lsn| d.wait(lsn))
                .map_err(|e| NodeError::Move(format!("SERVE could not be logged: {e}")))?;
        }
        self.store.homes().set_view(slots, Some(self.me))?;
        self.set_moving(slots, Some(Moving::Served(from)));
        Ok(MoveReport {
            slots: slots.len() as u64,
            ..MoveReport::default()
        })
    }

    /// A: gives a batch up before its commit: takes back every key of
    /// `slots` already handed to `to` (A's log still holds them: nothing
    /// is logged here), then ends the guard. B is told with
    /// [`Node::move_forget`]. Refused once the table names `to`.
    pub fn move_release(
        &self,
        w: &mut Worker<Counting<F>>,
        slots: &[u32],
        to: MachineId,
    ) -> Result<MoveReport> {
        self.check_batch(slots, self.me, to)?;
        if let Some(s) = slots
            .iter()
            .find(|s| matches!(self.moving.lock().get(s), Some(Moving::Handed(_))))
        {
            return Err(NodeError::Move(format!(
                "slot {s} was handed to server {to}, which serves it: the move only rolls forward now; run it again to commit it"
            )));
        }
        let set: HashSet<u32> = slots.iter().copied().collect();
        let keys: Vec<Key> = w.keys_in_slots(self.me, &set)?;
        let mut r = MoveReport {
            slots: slots.len() as u64,
            ..MoveReport::default()
        };
        let mut handed = Vec::new();
        for k in keys {
            if w.handed_to(k)? == Some(to) {
                handed.push(k);
            }
        }
        take(w, &handed, to, &mut r)?;
        w.unguard_slots(slots)?;
        self.set_moving(slots, None);
        Ok(r)
    }

    /// Any server: migrates home every value of its keys that `peer` holds
    /// (Pragh's MIGRATE, this node as the target), so that `peer` can leave
    /// without survivors reloading them from their logs. Keys a migration
    /// could not move are reported, not retried: run it again.
    pub fn move_recall(&self, w: &mut Worker<Counting<F>>, peer: MachineId) -> Result<MoveReport> {
        if peer == self.me || peer as usize >= self.machines {
            return Err(NodeError::Move(format!(
                "server {} cannot recall values from server {peer}",
                self.me
            )));
        }
        let keys: Vec<Key> = w
            .keys_held_by(peer)?
            .into_iter()
            .filter(|&k| !matches!(w.handed_to(k), Ok(Some(_))))
            .collect();
        let mut r = MoveReport::default();
        for chunk in keys.chunks(4096) {
            for m in w.migrate_batch(chunk)? {
                if let locus_store::Migration::Moved { bytes, .. } = m {
                    r.keys += 1;
                    r.bytes += bytes;
                }
            }
        }
        let left = w.keys_held_by(peer)?.len();
        if left > 0 {
            return Err(NodeError::Move(format!(
                "{left} value(s) of server {}'s keys are still held at server {peer} (raced by a migration); run it again",
                self.me
            )));
        }
        Ok(r)
    }

    /// B: forgets a batch A took back: logs SLOT_OUT so that a replay drops
    /// its SLOT_IN copies (they would be dropped anyway as slots of another
    /// server, M3; the record says it at once).
    pub fn move_forget(&self, w: &mut Worker<Counting<F>>, slots: &[u32]) -> Result<MoveReport> {
        if let Some(s) = slots
            .iter()
            .find(|s| matches!(self.moving.lock().get(s), Some(Moving::Served(_))))
        {
            return Err(NodeError::Move(format!(
                "slot {s} is served here since its old home handed it: the move only rolls forward now"
            )));
        }
        let table = self.store.homes().table();
        if let Some(s) = slots
            .iter()
            .find(|&&s| table.owner_of_slot(s) == Some(self.me))
        {
            return Err(NodeError::Move(format!(
                "slot {s} is this server's at table epoch {}: nothing to forget",
                table.epoch()
            )));
        }
        if let Some(d) = &self.durable {
            d.log_slot_out(slots)
                .and_then(|lsn| d.wait(lsn))
                .map_err(|e| NodeError::Move(format!("SLOT_OUT could not be logged: {e}")))?;
        }
        // Copies A did not take back (A restarted from its log meanwhile).
        let set: HashSet<u32> = slots.iter().copied().collect();
        let keys = w.drop_copies(&set)?;
        self.set_moving(slots, None);
        Ok(MoveReport {
            slots: slots.len() as u64,
            keys,
            ..MoveReport::default()
        })
    }
}

/// Takes `keys` over from `from`, their operations posted together (no log
/// step: the caller's record holds every copy), counting them in `r`.
fn take<F: Fabric>(
    w: &mut Worker<Counting<F>>,
    keys: &[Key],
    from: MachineId,
    r: &mut MoveReport,
) -> Result<()> {
    for (&k, outcome) in keys.iter().zip(w.take_over_many(keys, from)?) {
        match outcome {
            Outcome::Handed(h) => {
                r.keys += 1;
                r.bytes += h.bytes_copied;
            }
            Outcome::AlreadyHanded | Outcome::Absent => {}
            Outcome::Lost(m) => {
                return Err(StoreError::ValueLost {
                    key: k.0,
                    vertex: k.vertex(),
                    machine: m,
                }
                .into())
            }
            Outcome::MovedElsewhere(m) => {
                return Err(NodeError::Move(format!(
                    "key {:#x} was handed to server {m}, not to server {}: two moves of one slot",
                    k.0,
                    w.machine()
                )))
            }
        }
    }
    Ok(())
}
