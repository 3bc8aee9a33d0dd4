//! A primary handed to its backup (issue 60 requirement 3, `cluster
//! rebalance --primaries`; `docs/design.md`, "Primaries given back",
//! H1-H5): the old primary's side.
//!
//! ```text
//!  driver, slots S owned by P (here), backup B, table T installed here:
//!   HANDOVER(S, B) here: guard S; replicas of S dropped; in-doubt lists of S
//!        sent to the backups again (H2); S's lists into the backup map and
//!        log, durable (H3)
//!   etcd: T' = T.hand_primaries(S, B); PROMOTE(T') at B
//!   INSTALL(T') here: every key of S becomes MOVED(B) (H4); SLOT_OUT; the
//!        guard ends; this node backs S          (then INSTALL at B and the rest)
//!   before the commit, UNHAND here: the snapshot leaves the map, the guard ends
//! ```
//!
//! A handover lives in memory: a restart forgets it (and takes a new
//! epoch, which fails the commit); the snapshot it left in the backup log
//! is promoted by the registration, equal to the lists it guarded.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use locus_fabric::counting::Counting;
use locus_fabric::{Fabric, MachineId};
use locus_store::{SlotTable, Worker};

use super::moves::MoveReport;
use super::Node;
use crate::{NodeError, Result};

/// At an old primary: per slot guarded for a handover, the backup it goes
/// to and the slot's primary epoch when it began.
#[derive(Debug, Default)]
pub(crate) struct Handing(Mutex<HashMap<u32, (MachineId, u32)>>);

impl Handing {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, (MachineId, u32)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `slot` is guarded for a handover that `t` has not decided
    /// yet (`t` still names this node its owner at the primary epoch the
    /// handover began at): a PROMOTE leaves its snapshot alone.
    pub(crate) fn undecided(&self, t: &SlotTable, slot: u32, me: MachineId) -> bool {
        let m = self.lock();
        !m.is_empty()
            && m.get(&slot).is_some_and(|&(_, pe)| {
                t.owner_of_slot(slot) == Some(me) && t.primary_epoch(slot) == pe
            })
    }
}

/// Vertices whose list this node applied may differ from what a backup
/// stored: an update logged here whose replication or apply failed (in
/// doubt). A handover sends their lists again (H2).
#[derive(Debug, Default)]
pub(crate) struct InDoubt(Mutex<HashSet<u32>>);

impl InDoubt {
    pub(crate) fn note(&self, vertices: impl Iterator<Item = u32>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(vertices);
    }

    /// Takes the vertices of `slots` out.
    fn take(&self, t: &SlotTable, slots: &HashSet<u32>) -> Vec<u32> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<u32> = m
            .iter()
            .copied()
            .filter(|&v| slots.contains(&t.slot_of(v)))
            .collect();
        // In order: what is sent must not depend on a hash's seed (the
        // twin replays a seed exactly).
        out.sort_unstable();
        for v in &out {
            m.remove(v);
        }
        out
    }
}

fn refused(what: String) -> NodeError {
    NodeError::Move(what)
}

impl<F: Fabric> Node<F> {
    /// HANDOVER at the slots' owner (see the module doc): `table` must be
    /// the one installed here, naming this node the owner of every slot
    /// and `to` a backup of it. Idempotent for the same `to`.
    pub fn hand_over(
        &self,
        w: &mut Worker<Counting<F>>,
        table: &SlotTable,
        slots: &[u32],
        to: MachineId,
    ) -> Result<MoveReport> {
        let t = self.step_table(table, slots, "HANDOVER")?;
        let (Some(b), Some(d)) = (&self.backup, &self.durable) else {
            unreachable!("step_table checked both");
        };
        if let Some(s) = slots
            .iter()
            .find(|&&s| t.owner_of_slot(s) != Some(self.me) || !t.is_backup(s, to))
        {
            return Err(refused(format!(
                "HANDOVER of slot {s}: server {} does not own it with server {to} as a backup at table epoch {}",
                self.me,
                t.epoch()
            )));
        }
        if let Some((s, _)) = self
            .moves_in_flight()
            .into_iter()
            .find(|(s, _)| slots.contains(s))
        {
            return Err(refused(format!("slot {s} is in a move here")));
        }
        {
            let mut h = self.handing.lock();
            if let Some(s) = slots
                .iter()
                .find(|s| h.get(s).is_some_and(|&(other, _)| other != to))
            {
                return Err(refused(format!(
                    "slot {s} is being handed to another server here"
                )));
            }
            for &s in slots {
                h.insert(s, (to, t.primary_epoch(s)));
            }
        }
        // H1: no update of S from here on; those in flight have ended.
        w.guard_slots(slots, to)?;
        let set: HashSet<u32> = slots.iter().copied().collect();
        let mut vertices: Vec<u32> = w
            .keys_in_slots(self.me, &set)?
            .iter()
            .map(|k| k.vertex())
            .collect();
        vertices.dedup();
        // B starts with an empty replica directory (as a move's GUARD).
        w.drop_replicas(&vertices)?;
        // H2: the backups hold what this node applied.
        let doubt = self.in_doubt.take(&t, &set);
        if !doubt.is_empty() && !self.faults.skip_resend_in_doubt {
            let mut lists = Vec::with_capacity(doubt.len());
            for &v in &doubt {
                let _stripe = d.lock(v, &mut || w.relax());
                lists.push((v, w.get(v)?));
            }
            let changes: Vec<(u32, Option<&[u32]>)> =
                lists.iter().map(|(v, l)| (*v, l.as_deref())).collect();
            if let Err(why) = self.replicate(w, &changes) {
                self.in_doubt.note(doubt.into_iter());
                return Err(refused(format!(
                    "HANDOVER: the lists of vertices in doubt could not be sent to the backups again: {why}"
                )));
            }
        }
        // H3: the snapshot is durable here before the table can name this
        // node a backup.
        let mut lists: HashMap<u32, HashMap<u32, Vec<u32>>> =
            slots.iter().map(|&s| (s, HashMap::new())).collect();
        let mut report = MoveReport {
            slots: slots.len() as u64,
            ..MoveReport::default()
        };
        for &v in &vertices {
            if let Some(l) = w.get(v)? {
                report.bytes += 4 * l.len() as u64;
                report.vertices += 1;
                lists
                    .get_mut(&t.slot_of(v))
                    .expect("a vertex of a listed slot")
                    .insert(v, l);
            }
        }
        b.snapshot(lists)?;
        Ok(report)
    }

    /// UNHAND at the slots' owner: a handover given up before its commit.
    /// The snapshot leaves the backup map (durably), then the guard ends.
    /// Refused once the installed table gives a slot to the backup (only
    /// forward then). Idempotent: slots not being handed are skipped.
    pub fn unhand(&self, w: &mut Worker<Counting<F>>, slots: &[u32]) -> Result<MoveReport> {
        let t = self.store.homes().current();
        let mine: Vec<u32> = {
            let h = self.handing.lock();
            slots
                .iter()
                .copied()
                .filter(|s| h.contains_key(s))
                .collect()
        };
        if let Some(s) = mine.iter().find(|&&s| t.owner_of_slot(s) != Some(self.me)) {
            return Err(refused(format!(
                "slot {s} was handed over at table epoch {}: the handover only goes forward now",
                t.epoch()
            )));
        }
        if let Some(b) = &self.backup {
            b.forget(&mine)?;
        }
        w.unguard_slots(&mine)?;
        let mut h = self.handing.lock();
        for s in &mine {
            h.remove(s);
        }
        Ok(MoveReport {
            slots: mine.len() as u64,
            ..MoveReport::default()
        })
    }

    /// Part of an INSTALL of `table` here, before it is installed: the
    /// slots handed from here that `table` gives their backup get their
    /// keys marked `MOVED(backup)` and a SLOT_OUT (H4). Returns the slots
    /// whose handover `table` decides (ended after the install).
    pub(super) fn demote_handed(
        &self,
        w: &mut Worker<Counting<F>>,
        table: &SlotTable,
    ) -> Result<Vec<u32>> {
        let mut handing: Vec<(u32, (MachineId, u32))> =
            self.handing.lock().iter().map(|(&s, &h)| (s, h)).collect();
        if handing.is_empty() {
            return Ok(Vec::new());
        }
        handing.sort_unstable();
        let mut by_to: std::collections::BTreeMap<MachineId, HashSet<u32>> = Default::default();
        let mut decided = Vec::new();
        for (s, (to, pe)) in handing {
            let owner = table.owner_of_slot(s);
            if owner == Some(to) {
                by_to.entry(to).or_default().insert(s);
                decided.push(s);
            } else if owner != Some(self.me) || table.primary_epoch(s) != pe {
                // Failed over back here, or elsewhere: the handover is over.
                decided.push(s);
            }
        }
        for (to, set) in &by_to {
            let keys = w.keys_in_slots(self.me, set)?;
            w.mark_handed_over(&keys, *to)?;
            if let Some(d) = &self.durable {
                let mut out: Vec<u32> = set.iter().copied().collect();
                out.sort_unstable();
                d.log_slot_out(&out)
                    .and_then(|lsn| d.wait(lsn))
                    .map_err(|e| NodeError::Move(format!("a handover's SLOT_OUT: {e}")))?;
            }
            tracing::info!(
                server = self.me,
                to,
                slots = set.len(),
                keys = keys.len(),
                table_epoch = table.epoch(),
                "handed primaries to their backup: this server backs them now"
            );
        }
        Ok(decided)
    }

    /// After the install: the handovers `table` decided end (their guard
    /// too).
    pub(super) fn end_handed(&self, w: &mut Worker<Counting<F>>, decided: &[u32]) -> Result<()> {
        if decided.is_empty() {
            return Ok(());
        }
        w.unguard_slots(decided)?;
        let mut h = self.handing.lock();
        for s in decided {
            h.remove(s);
        }
        Ok(())
    }
}
