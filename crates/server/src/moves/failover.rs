//! Failover of a dead server's slots (issue 60; `docs/design.md`,
//! "Replication and failover", R1-R4), driven under the mover's lock like
//! a move, with its goal in etcd so that the leading coordinator finishes
//! a failover its driver left half done (MV4).
//!
//! ```text
//!  D registered once and not live now, the table gives it slots or backups:
//!   goal FailOver(D) ─▶ etcd: swap P/slots to T.fail_over(D), fenced by D's last epoch
//!   ─▶ PROMOTE(T') at every reachable server but D (a new primary puts its backup
//!      lists in at home; others do nothing) ─▶ every new primary promoted?
//!      no (one is restarting): stop; the goal's next run goes on from PROMOTE
//!   ─▶ FAIL_OVER(T', D) at each (forget D; install T' unless T' makes it a new
//!      primary) ─▶ INSTALL(T') at each (a new primary serves its slots from
//!      here) ─▶ goal cleared
//! ```
//!
//! No server installs T' before every new primary has promoted: one that
//! did would read the slots one-sidedly in a new primary's key table that
//! does not hold them yet (the twin, a backup restarting during its
//! failover: "vertex missing" at a survivor as soon as it registered).
//!
//! Every step is idempotent, so a driver that dies anywhere leaves a goal
//! whose rerun finishes it. A new incarnation of D that took its epoch
//! before the swap makes the swap fail: D replays its own log and serves
//! its slots again, and nothing fails over.

use locus_client::proto::MoveStep;
use locus_store::SlotTable;

use super::{err, Goal, Mover};
use crate::Result;

/// What a failover did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailedOver {
    /// Slots given to a new primary.
    pub slots: u64,
    /// Vertices the new primaries now serve from their backup lists.
    pub vertices: u64,
    /// The table's epoch at the end.
    pub table_epoch: u64,
}

impl Mover<'_> {
    /// The servers that registered once, are not live now, and that own a
    /// slot with a backup or back one by the committed table: those to
    /// fail over.
    pub fn dead_holders(&self) -> Result<Vec<u8>> {
        let (_, t) = self.table()?;
        if t.replication() <= 1 {
            return Ok(Vec::new());
        }
        let (live, _) = self
            .etcd
            .members()
            .map_err(|e| err(format!("reading the membership: {e}")))?;
        let mut out = Vec::new();
        for id in 0..t.machines().min(u16::from(u8::MAX)) as u8 {
            if live.iter().any(|m| m.machine == id) || !fails_over(&t, id) {
                continue;
            }
            let registered = self
                .etcd
                .last_registered(id)
                .map_err(|e| err(format!("reading server {id}'s registration: {e}")))?;
            if registered > 0 {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Fails `dead`'s slots over to their first backups and drops it from
    /// every slot's backups (see the module doc). Nothing is done while
    /// `dead` is live (it came back before the failover committed).
    pub fn fail_over(&self, dead: u8) -> Result<FailedOver> {
        let _lock = self.hold()?;
        let (_, t) = self.table()?;
        let mut to: Vec<u8> = if fails_over(&t, dead) {
            let (_, moved) = t.fail_over(dead).map_err(|e| err(e.to_string()))?;
            moved.iter().map(|f| f.to).collect()
        } else {
            Vec::new()
        };
        to.sort_unstable();
        to.dedup();
        self.fail_over_to(dead, &to)
    }

    /// [`Mover::fail_over`] whose new primaries are `to` (a goal's rerun:
    /// the table committed may not say which they are).
    pub fn fail_over_to(&self, dead: u8, to: &[u8]) -> Result<FailedOver> {
        let _lock = self.hold()?;
        let goal = Goal::FailOver {
            dead,
            to: to.to_vec(),
        };
        self.with_goal(&goal, || self.fail_over_held(dead, to))
    }

    fn fail_over_held(&self, dead: u8, to: &[u8]) -> Result<FailedOver> {
        let (raw, t) = self.table()?;
        let mut report = FailedOver::default();
        let table = if fails_over(&t, dead) {
            let (live, _) = self
                .etcd
                .members()
                .map_err(|e| err(format!("reading the membership: {e}")))?;
            if live.iter().any(|m| m.machine == dead) {
                // It came back (its own log serves its slots): nothing to do.
                tracing::info!(server = dead, "live again: nothing fails over");
                report.table_epoch = t.epoch();
                return Ok(report);
            }
            let fence = self
                .etcd
                .last_epoch(dead)
                .map_err(|e| err(format!("reading server {dead}'s epoch: {e}")))?;
            let (next, moved) = t.fail_over(dead).map_err(|e| err(e.to_string()))?;
            let token = self.token()?;
            let swapped = self
                .etcd
                .slots_swap(&raw, &next.encode(), &[(dead, fence)], Some(&token))
                .map_err(|e| err(format!("committing the failed-over table in etcd: {e}")))?;
            if !swapped {
                return Err(err(format!(
                    "the table in etcd changed, or server {dead} took a new epoch (it is restarting), or this mover's lock ended: nothing failed over"
                )));
            }
            report.slots = moved.len() as u64;
            tracing::info!(
                dead,
                slots = moved.len(),
                table_epoch = next.epoch(),
                "committed the failover of a dead server's slots"
            );
            next
        } else {
            // Committed by an earlier run: its steps are done again.
            t
        };
        let raw = table.encode();
        let reachable: Vec<u8> = self
            .reachable()
            .into_iter()
            .filter(|&id| id != dead)
            .collect();
        // R4: every server forgets the dead one before any new primary
        // serves a failed-over slot; and none installs the table before
        // every new primary promoted (see the module doc).
        for step in [MoveStep::Promote, MoveStep::FailOver, MoveStep::Install] {
            if step == MoveStep::FailOver {
                if let Some(p) = to.iter().find(|p| !reachable.contains(p)) {
                    return Err(err(format!(
                        "server {p}, a new primary of server {dead}'s slots, is not live (restarting?): the failover is finished by its goal's next run, once it promoted"
                    )));
                }
            }
            for &id in &reachable {
                let r = self
                    .step(id, step, dead, &[], &raw, Vec::new())
                    .map_err(|e| {
                        err(format!(
                            "{}; the failover is finished by its goal's next run",
                            super::bare(&e)
                        ))
                    })?;
                if step == MoveStep::Promote {
                    report.vertices += r.vertices;
                }
            }
        }
        report.table_epoch = table.epoch();
        Ok(report)
    }
}

/// Whether `t.fail_over(id)` would change anything: `id` owns a slot
/// that has a backup, or backs one. (A slot it owns with no backup left
/// waits for it to restart.)
fn fails_over(t: &SlotTable, id: u8) -> bool {
    (0..t.slots()).any(|s| {
        (t.owner_of_slot(s) == Some(id) && !t.backups_of_slot(s).is_empty()) || t.is_backup(s, id)
    })
}
