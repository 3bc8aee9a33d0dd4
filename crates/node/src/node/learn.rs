//! Rejoin as a backup (issue 60 requirement 3; `docs/design.md`,
//! "Replication and failover", "Rejoin"): a server made a backup again of
//! slots short of backups learns them from their primary before the
//! table names it.
//!
//! ```text
//!  driver, slots S owned by P, learner D, at table epoch E (installed at both):
//!   LEARN at D (peer P): D drops what it held of S, takes P's records of S at E
//!   LEARN at P (peer D): every update of S is sent to D too, as to a backup
//!        (acknowledged only once D stored it: a learner that is down refuses them)
//!   COPY at P (peer D): each vertex of S read under its stripe lock, sent as a copy;
//!        D keeps a copy only of a vertex no live record wrote since LEARN
//!   etcd: add D to S's backups, at E + 1, fenced by P's and D's epochs
//!   INSTALL everywhere: the learning ends at each end with the table it began at
//!   any failure: etcd's table moved to E + 1 unchanged, INSTALL everywhere
//! ```
//!
//! A learner is a backup the table does not name: `fail_over` never
//! promotes it. A learning ends only with the table it began at, never
//! by a step of its own: a primary that stopped sending a slot's updates
//! to its learner while the commit that names it could still land would
//! acknowledge updates without a backup the table names (R1). It lives in
//! memory only: a restart of P or D forgets it and takes a new epoch,
//! which fails the commit.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use locus_fabric::counting::Counting;
use locus_fabric::{Fabric, MachineId};
use locus_store::{SlotTable, Worker};

use super::backup::{encode_requests, Entry1, STORED};
use super::moves::MoveReport;
use super::Node;
use crate::{NodeError, Result};

/// Vertices a COPY reads before it sends them.
const COPY_VERTICES: usize = 4096;

/// At a primary: per slot, the server learning it and the table epoch
/// it learns at (a newer table ends it).
#[derive(Debug, Default)]
pub(crate) struct Learners(Mutex<HashMap<u32, (MachineId, u64)>>);

impl Learners {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, (MachineId, u64)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server learning `slot` at `t`'s epoch, if any.
    pub(crate) fn of(&self, t: &SlotTable, slot: u32) -> Option<MachineId> {
        let m = self.lock();
        if m.is_empty() {
            return None;
        }
        m.get(&slot)
            .filter(|&&(_, epoch)| epoch == t.epoch())
            .map(|&(l, _)| l)
    }
}

fn refused(what: String) -> NodeError {
    NodeError::Move(what)
}

impl<F: Fabric> Node<F> {
    /// The installed table, if `table` is it: the driver's steps of a
    /// rejoin (or a handover) are taken at one table epoch at both ends;
    /// `slots` must be some of its slots, and the node keep backups.
    pub(super) fn step_table(
        &self,
        table: &SlotTable,
        slots: &[u32],
        step: &str,
    ) -> Result<SlotTable> {
        if self.backup.is_none() || self.durable.is_none() {
            return Err(refused(format!(
                "{step} needs a node with [durability]: it has no backups"
            )));
        }
        let t = self.store.homes().current();
        if t.epoch() != table.epoch() {
            return Err(refused(format!(
                "{step} at table epoch {}, but server {} has installed epoch {}",
                table.epoch(),
                self.me,
                t.epoch()
            )));
        }
        if slots.is_empty() {
            return Err(refused(format!("{step} names no slot")));
        }
        if let Some(s) = slots.iter().find(|&&s| s >= t.slots()) {
            return Err(refused(format!(
                "{step} names slot {s}, past the table's {}",
                t.slots()
            )));
        }
        Ok((*t).clone())
    }

    /// LEARN: at the slots' owner, `peer` learns them from here (every
    /// update of them goes to it too); at `peer`'s learner, it takes
    /// `peer`'s records of them. Idempotent.
    pub fn learn(&self, table: &SlotTable, slots: &[u32], peer: MachineId) -> Result<MoveReport> {
        let t = self.step_table(table, slots, "LEARN")?;
        if peer == self.me || usize::from(peer) >= self.machines {
            return Err(refused(format!(
                "LEARN names server {peer}: it must be another of the {} servers",
                self.machines
            )));
        }
        let owned_by = |m: MachineId| slots.iter().all(|&s| t.owner_of_slot(s) == Some(m));
        let (owner, learner) = if owned_by(self.me) {
            (self.me, peer)
        } else if owned_by(peer) {
            (peer, self.me)
        } else {
            return Err(refused(format!(
                "LEARN names slots that are neither all server {}'s nor all server {peer}'s by table epoch {}",
                self.me,
                t.epoch()
            )));
        };
        if let Some(s) = slots.iter().find(|&&s| t.is_backup(s, learner)) {
            return Err(refused(format!(
                "server {learner} backs slot {s} already (table epoch {}): nothing to learn",
                t.epoch()
            )));
        }
        if owner == self.me {
            let mut m = self.learners.lock();
            m.retain(|_, &mut (_, epoch)| epoch == t.epoch());
            for &s in slots {
                m.insert(s, (learner, t.epoch()));
            }
        } else {
            let b = self.backup.as_ref().expect("checked by step_table");
            b.learn(slots, owner, t.epoch())?;
        }
        Ok(MoveReport {
            slots: slots.len() as u64,
            ..MoveReport::default()
        })
    }

    /// COPY at the slots' owner: each vertex of `slots` homed here, read
    /// under its stripe lock (an update of it in flight has ended, and
    /// any later one goes to the learner as a live record), is sent to
    /// `peer`, which learns them, as a copy; the answer waits until
    /// `peer` stored every one.
    pub fn copy_to_learner(
        &self,
        w: &mut Worker<Counting<F>>,
        table: &SlotTable,
        slots: &[u32],
        peer: MachineId,
    ) -> Result<MoveReport> {
        let t = self.step_table(table, slots, "COPY")?;
        if let Some(s) = slots
            .iter()
            .find(|&&s| self.learners.of(&t, s) != Some(peer))
        {
            return Err(refused(format!(
                "COPY of slot {s}: server {peer} does not learn it here at table epoch {} (LEARN first)",
                t.epoch()
            )));
        }
        let d = self.durable.as_ref().expect("checked by step_table");
        let set: HashSet<u32> = slots.iter().copied().collect();
        let mut vertices: Vec<u32> = w
            .keys_in_slots(self.me, &set)?
            .iter()
            .map(|k| k.vertex())
            .collect();
        vertices.dedup();
        let mut report = MoveReport {
            slots: slots.len() as u64,
            ..MoveReport::default()
        };
        for chunk in vertices.chunks(COPY_VERTICES) {
            let mut entries = Vec::with_capacity(chunk.len());
            for &v in chunk {
                let list = {
                    let _stripe = d.lock(v, &mut || w.relax());
                    w.get(v)?
                };
                let Some(list) = list else { continue };
                let slot = t.slot_of(v);
                report.bytes += 4 * list.len() as u64;
                entries.push(Entry1 {
                    slot,
                    primary_epoch: t.primary_epoch(slot),
                    vertex: v,
                    list: Some(list),
                    copied: true,
                });
            }
            report.vertices += entries.len() as u64;
            let requests: Vec<(MachineId, Vec<u8>)> = encode_requests(&entries)
                .into_iter()
                .map(|r| (peer, r))
                .collect();
            for answer in w.node_requests(requests) {
                match answer {
                    Ok(a) if a == [STORED] => {}
                    Ok(a) => {
                        return Err(refused(format!(
                            "COPY: server {peer} answered {a:?}, not STORED"
                        )))
                    }
                    Err(e) => {
                        return Err(refused(format!(
                            "COPY: server {peer} did not store the copy: {e}"
                        )))
                    }
                }
            }
        }
        Ok(report)
    }
}
