//! Primaries given back (issue 60 requirement 3, `cluster rebalance
//! --primaries`; `docs/design.md`, "Primaries given back", H1-H5): a
//! slot's primary handed to one of its backups, which holds every list
//! already, under the mover's lock, with a goal in etcd that the leading
//! coordinator finishes (after the commit) or gives up (before it) if the
//! driver dies.
//!
//! ```text
//!  slots S of P, each backed by B:
//!   goal HandOver(P, B, S) ─▶ INSTALL T at P and B ─▶ HANDOVER(S, B) at P
//!   ─▶ etcd: swap P/slots to T.hand_primaries(S, B), fenced by P's and B's epochs
//!   ─▶ PROMOTE at B ─▶ INSTALL at P (its keys of S become MOVED(B))
//!   ─▶ INSTALL everywhere else, B included ─▶ goal cleared
//!   any failure before the swap: UNHAND at P, goal cleared
//!   any failure after it: the goal stays; its rerun goes on from PROMOTE
//! ```

use locus_client::proto::MoveStep;
use locus_store::SlotTable;

use super::{bare, err, Goal, Mover};
use crate::Result;

/// Slots of one primary to hand to one of their backups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    /// The slots' owner.
    pub from: u8,
    /// The backup to own them.
    pub to: u8,
    /// The slots.
    pub slots: Vec<u32>,
}

/// What a handover did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandedOver {
    /// Slots the backup now owns.
    pub slots: u64,
    /// Vertices the new primary serves from its backup lists.
    pub vertices: u64,
    /// The table's epoch at the end.
    pub table_epoch: u64,
}

impl Mover<'_> {
    /// The handovers that would even the primaries out over the live
    /// servers ([`SlotTable::primary_plan`]), at most `batch_slots` slots
    /// each.
    pub fn primary_plan(&self, batch_slots: usize) -> Result<Vec<Handover>> {
        let (_, t) = self.table()?;
        if t.replication() <= 1 {
            return Err(err(
                "the cluster keeps one copy of each slot (replication 1): there are no backups to give primaries to",
            ));
        }
        let live = self.live()?;
        let mut out = Vec::new();
        for (from, to, slots) in t.primary_plan(&live) {
            for chunk in slots.chunks(batch_slots.max(1)) {
                out.push(Handover {
                    from,
                    to,
                    slots: chunk.to_vec(),
                });
            }
        }
        Ok(out)
    }

    fn live(&self) -> Result<Vec<u8>> {
        let (live, _) = self
            .etcd
            .members()
            .map_err(|e| err(format!("reading the membership: {e}")))?;
        Ok(live.iter().map(|m| m.machine).collect())
    }

    /// Hands `h.slots` from `h.from` to `h.to` (see the module doc).
    pub fn hand_over(&self, h: &Handover) -> Result<HandedOver> {
        let _lock = self.hold()?;
        let goal = Goal::HandOver {
            from: h.from,
            to: h.to,
            slots: h.slots.clone(),
        };
        let token = self.token()?;
        if let Some(g) = self
            .etcd
            .goal_load()
            .map_err(|e| err(format!("reading the mover's goal in etcd: {e}")))?
        {
            return Err(err(format!(
                "a driver that died left a goal in etcd ({}): the leading coordinator finishes it first; try again in a few seconds",
                String::from_utf8_lossy(&g)
            )));
        }
        self.etcd
            .goal_put(&token, &goal.encode())
            .map_err(|e| err(format!("recording the handover's goal in etcd: {e}")))?;
        let (raw, t) = self.table()?;
        let mut committed = None;
        let r = self.hand_over_held(h, &raw, &t, &mut committed);
        let clear = match (&r, &committed) {
            (Ok(_), _) => true,
            // Committed: the goal's rerun finishes it.
            (Err(_), Some(_)) => false,
            (Err(_), None) => true,
        };
        let r = match r {
            Err(e) if committed.is_none() => match self.unhand(h) {
                Ok(()) => Err(e),
                Err(a) => {
                    return Err(err(format!(
                        "{}; and giving the handover up failed ({}): the goal's rerun gives it up",
                        bare(&e),
                        bare(&a)
                    )))
                }
            },
            r => r,
        };
        if clear {
            if let Err(e) = self.etcd.goal_delete(&token) {
                tracing::warn!("clearing the handover's goal in etcd: {e}");
            }
        }
        r
    }

    fn hand_over_held(
        &self,
        h: &Handover,
        raw: &[u8],
        t: &SlotTable,
        committed: &mut Option<SlotTable>,
    ) -> Result<HandedOver> {
        if let Some(s) = h
            .slots
            .iter()
            .find(|&&s| t.owner_of_slot(s) != Some(h.from) || !t.is_backup(s, h.to))
        {
            return Err(err(format!(
                "slot {s} is no longer server {}'s with server {} as a backup (table epoch {})",
                h.from,
                h.to,
                t.epoch()
            )));
        }
        let fences = self.fences(&[h.from, h.to], "handover")?;
        let step = |id: u8, step: MoveStep, peer: u8, slots: &[u32], table: &[u8]| {
            self.step(id, step, peer, slots, table, Vec::new())
                .map_err(|e| err(format!("a handover's {}", bare(&e))))
        };
        for id in [h.to, h.from] {
            step(id, MoveStep::Install, 0, &[], raw)?;
        }
        step(h.from, MoveStep::HandOver, h.to, &h.slots, raw)?;
        let next = t
            .hand_primaries(&h.slots, h.to)
            .map_err(|e| err(e.to_string()))?;
        let token = self.token()?;
        let swapped = self
            .etcd
            .slots_swap(raw, &next.encode(), &fences, Some(&token))
            .map_err(|e| err(format!("committing a handover's table in etcd: {e}")))?;
        if !swapped {
            return Err(err(format!(
                "the table in etcd changed, or server {} or {} restarted, or this mover's lock ended: nothing was handed over",
                h.from, h.to
            )));
        }
        tracing::info!(
            from = h.from,
            to = h.to,
            slots = h.slots.len(),
            table_epoch = next.epoch(),
            "committed a handover: the backup owns the slots"
        );
        *committed = Some(next.clone());
        self.finish_handover(h, &next)
    }

    /// A committed handover's steps (idempotent): PROMOTE at the new
    /// primary, INSTALL at the old one (H4), then everywhere. A dead old
    /// primary is skipped (its memory is fenced); a live one that does not
    /// answer stops the run: nobody else installs until it has.
    fn finish_handover(&self, h: &Handover, table: &SlotTable) -> Result<HandedOver> {
        let raw = table.encode();
        let live = self.live()?;
        let mut report = HandedOver {
            slots: h.slots.len() as u64,
            table_epoch: table.epoch(),
            ..HandedOver::default()
        };
        if live.contains(&h.to) {
            let r = self
                .step(h.to, MoveStep::Promote, 0, &[], &raw, Vec::new())
                .map_err(|e| {
                    err(format!(
                        "a handover's {}; its goal's next run goes on",
                        bare(&e)
                    ))
                })?;
            report.vertices = r.vertices;
        }
        if live.contains(&h.from) {
            self.step(h.from, MoveStep::Install, 0, &[], &raw, Vec::new())
                .map_err(|e| {
                    err(format!(
                        "a handover's {}; its goal's next run goes on",
                        bare(&e)
                    ))
                })?;
        }
        let must: Vec<u8> = [h.to].into_iter().filter(|m| live.contains(m)).collect();
        self.install(table, &must)?;
        Ok(report)
    }

    /// UNHAND at the old primary (a handover given up before its commit).
    fn unhand(&self, h: &Handover) -> Result<()> {
        if !self.live()?.contains(&h.from) {
            // Restarted or dead: it forgot the handover.
            return Ok(());
        }
        self.step(h.from, MoveStep::Unhand, h.to, &h.slots, &[], Vec::new())
            .map(|_| ())
    }

    /// A handover's goal found in etcd (its driver died): finished if the
    /// table committed it, else given up.
    pub fn resume_handover(&self, h: &Handover) -> Result<HandedOver> {
        let _lock = self.hold()?;
        let goal = Goal::HandOver {
            from: h.from,
            to: h.to,
            slots: h.slots.clone(),
        };
        self.with_goal(&goal, || {
            let (_, t) = self.table()?;
            if h.slots.iter().any(|&s| t.owner_of_slot(s) == Some(h.to)) {
                self.finish_handover(h, &t)
            } else {
                self.unhand(h)?;
                Ok(HandedOver {
                    table_epoch: t.epoch(),
                    ..HandedOver::default()
                })
            }
        })
    }
}
