//! A replicated cluster changes shape (`cluster add-server`,
//! `remove-server`, `rebalance` and `move` with replication; `docs/design.md`,
//! "A replicated cluster changes shape", S1-S3): the plan of rejoins and
//! handovers (`SlotTable::reshape_plan`, `move_plan`) run in batches, each
//! committed alone, under the mover's lock held for the whole run.
//!
//! ```text
//!  lock P/mover (waiting while the coordinator's own step holds it, or a
//!  dead driver's goal is pending) ─▶ plan from the table
//!  per batch: a server dead holding slots? stop (its failover needs the lock)
//!             cancelled? stop (what is made stays made: each batch left the
//!             cluster whole)
//!             Rejoin: LEARN, COPY, commit (rejoin.rs) | HandOver (handover.rs)
//!  ─▶ the caller's last words under the lock (remove-server: recall, stop)
//! ```

use std::time::{Duration, Instant};

use locus_placement::slots::{ReshapePlan, ReshapeStep};

use super::{bare, err, Handover, Mover, Progress, Shortfall};
use crate::Result;

/// How long a reshaping waits for the lock while the coordinator holds it
/// (one rejoin or failover of its own) or finishes a dead driver's goal.
const LOCK_PATIENCE: Duration = Duration::from_secs(60);

/// What a reshaping did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reshaped {
    /// Rejoins committed (batches of copies).
    pub rejoins: u64,
    /// Slots a new backup took a copy of.
    pub slots_copied: u64,
    /// Vertices copied.
    pub vertices: u64,
    /// Bytes of lists copied.
    pub bytes: u64,
    /// Handovers committed (batches).
    pub handovers: u64,
    /// Slots handed to a backup of theirs.
    pub slots_handed: u64,
    /// The slot table's epoch at the end.
    pub table_epoch: u64,
}

impl Mover<'_> {
    /// The plan that leaves every slot on `members`, evenly, from the
    /// table as it is now (nothing is locked or made).
    pub fn reshape_plan(&self, members: &[u8]) -> Result<ReshapePlan> {
        let (_, t) = self.table()?;
        t.reshape_plan(members).map_err(|e| err(e.to_string()))
    }

    /// Runs `f` holding the mover's lock, waiting for it up to a minute
    /// while the leading coordinator holds it or has a goal left by a dead
    /// driver to finish (the calls `f` makes share the lock).
    pub fn holding<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let since = Instant::now();
        let held = loop {
            let waited = since.elapsed() >= LOCK_PATIENCE;
            match self.hold() {
                Ok(h) => {
                    let goal = self
                        .etcd
                        .goal_load()
                        .map_err(|e| err(format!("reading the mover's goal in etcd: {e}")))?;
                    match goal {
                        None => break h,
                        Some(g) if waited => {
                            return Err(err(format!(
                                "a driver that died left a goal in etcd ({}) and the leading coordinator has not finished it in {LOCK_PATIENCE:?}",
                                String::from_utf8_lossy(&g)
                            )))
                        }
                        // The coordinator finishes it once the lock is free.
                        Some(_) => drop(h),
                    }
                }
                Err(e) if !waited && bare(&e).contains("the coordinator") => {}
                Err(e) => return Err(e),
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        let r = f();
        drop(held);
        r
    }

    /// Leaves every slot on `members`, primaries and backups even (S3), by
    /// the plan's steps in batches of at most `batch_slots` slots; calls
    /// `progress(slots done, slots in the plan)` after each batch.
    pub fn reshape(
        &self,
        members: &[u8],
        batch_slots: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Reshaped> {
        self.holding(|| {
            let plan = self.reshape_plan(members)?;
            if !plan.done {
                tracing::warn!(
                    rounds = plan.rounds,
                    "the reshaping plan stops short of even; run it again afterwards"
                );
            }
            self.run_steps(&plan.steps, batch_slots, progress)
        })
    }

    /// Gives `to` the primaries of `slots` (`cluster move` with
    /// replication): a copy for each slot `to` does not back, then the
    /// handovers ([`locus_store::SlotTable::move_plan`]).
    pub fn move_replicated(
        &self,
        slots: &[u32],
        to: u8,
        batch_slots: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Reshaped> {
        self.check_target(to)?;
        self.holding(|| {
            let (_, t) = self.table()?;
            let steps = t.move_plan(slots, to).map_err(|e| err(e.to_string()))?;
            self.run_steps(&steps, batch_slots, progress)
        })
    }

    /// Runs `steps` (see the module doc).
    fn run_steps(
        &self,
        steps: &[ReshapeStep],
        batch_slots: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Reshaped> {
        let total: u64 = steps.iter().map(|s| s.slots().len() as u64).sum();
        let mut done = Reshaped::default();
        let mut slots_done = 0u64;
        progress(0, total);
        let mut record = self.journal.as_ref().map(|j| j.start(total));
        let note = |done: &Reshaped, slots_done: u64, record: &mut Option<Progress>| {
            if let (Some(j), Some(p)) = (&self.journal, record.as_mut()) {
                p.slots_done = slots_done;
                p.batches = done.rejoins + done.handovers;
                p.vertices = done.vertices;
                p.bytes = done.bytes;
                j.write(p);
            }
        };
        note(&done, 0, &mut record);
        let outcome = (|| -> Result<()> {
            for step in steps {
                for batch in step.slots().chunks(batch_slots.max(1)) {
                    if self.journal.as_ref().is_some_and(|j| j.cancelled()) {
                        return Err(err("cancelled"));
                    }
                    // A server dead holding slots is failed over first: its
                    // failover needs this lock.
                    if let Some(dead) = self.dead_holders()?.first() {
                        return Err(err(format!(
                            "server {dead} died holding slots: the coordinator fails it over once this command lets the lock go; run the command again then"
                        )));
                    }
                    match step.with_slots(batch.to_vec()) {
                        ReshapeStep::Rejoin {
                            owner,
                            learner,
                            replaces,
                            slots,
                        } => {
                            let r = self.rejoin(&Shortfall {
                                primary: owner,
                                learner,
                                replaces,
                                slots,
                            })?;
                            done.rejoins += 1;
                            done.slots_copied += r.slots;
                            done.vertices += r.vertices;
                            done.bytes += r.bytes;
                            done.table_epoch = r.table_epoch;
                        }
                        ReshapeStep::HandOver { from, to, slots } => {
                            let r = self.hand_over(&Handover { from, to, slots })?;
                            done.handovers += 1;
                            done.slots_handed += r.slots;
                            done.table_epoch = r.table_epoch;
                        }
                    }
                    slots_done += batch.len() as u64;
                    progress(slots_done, total);
                    note(&done, slots_done, &mut record);
                }
            }
            Ok(())
        })();
        let state = match &outcome {
            Ok(()) => "done",
            Err(e) if bare(e) == "cancelled" => "cancelled",
            Err(_) => "failed",
        };
        if let (Some(j), Some(p)) = (&self.journal, record.as_mut()) {
            p.state = state.into();
            p.error = outcome.as_ref().err().map(|e| {
                format!(
                    "{}; the {slots_done} slot(s) of the steps made stay where they went (each left every slot with its copies)",
                    bare(e)
                )
            });
            j.write(p);
        }
        match outcome {
            Ok(()) => {
                done.table_epoch = self.table()?.1.epoch();
                Ok(done)
            }
            Err(e) => Err(err(format!(
                "{} ({slots_done} of {total} slot(s) done before it, each batch committed whole; run the command again to go on)",
                bare(&e)
            ))),
        }
    }
}
