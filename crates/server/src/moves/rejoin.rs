//! A server made a backup again (issue 60 requirement 3; `docs/design.md`,
//! "Replication and failover", "Rejoin"): after failovers, slots short of
//! backups are learned by live servers from their primaries, then the
//! table names them, by the node's LEARN, COPY and UNLEARN steps
//! (`crates/node/src/node/learn.rs`) under the mover's lock, with a goal
//! in etcd whose rerun abandons a rejoin its driver left half done.
//!
//! ```text
//!  slots S of primary P short of a backup (or whose backup B backs more than
//!  its share), learner D (live, neither owner nor backup):
//!   goal Rejoin(P, D, S) ─▶ LEARN at D ─▶ LEARN at P ─▶ COPY at P
//!   ─▶ etcd: swap P/slots to T.add_backups(S, D), fenced by P's and D's epochs
//!   ─▶ INSTALL everywhere ─▶ UNLEARN at both ─▶ goal cleared
//!   any failure before the swap: UNLEARN at both (the goal's rerun does it
//!   if the driver died), nothing committed
//! ```

use locus_client::proto::MoveStep;

use super::{bare, err, Goal, Mover};
use crate::Result;

/// Slots of one primary, short of a backup (or backed by a server that
/// backs more than its share), to be learned by one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    /// The slots' owner.
    pub primary: u8,
    /// The live server to back them.
    pub learner: u8,
    /// The backup it replaces (the backups evened out), if any.
    pub replaces: Option<u8>,
    /// The slots.
    pub slots: Vec<u32>,
}

/// What a rejoin did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rejoined {
    /// Slots the learner now backs.
    pub slots: u64,
    /// Vertices copied to it.
    pub vertices: u64,
    /// Bytes of lists copied.
    pub bytes: u64,
    /// The table's epoch at the end.
    pub table_epoch: u64,
}

impl Mover<'_> {
    /// The rejoins that would make every slot of a live primary whole, one
    /// backup per slot at a time, or else even the backups out over the live
    /// servers ([`locus_store::SlotTable::backup_plan`]).
    pub fn short_of_backups(&self) -> Result<Vec<Shortfall>> {
        let (_, t) = self.table()?;
        if t.replication() <= 1 {
            return Ok(Vec::new());
        }
        let (live, _) = self
            .etcd
            .members()
            .map_err(|e| err(format!("reading the membership: {e}")))?;
        let live: Vec<u8> = live.iter().map(|m| m.machine).collect();
        Ok(t.backup_plan(&live)
            .into_iter()
            .map(|(primary, learner, replaces, slots)| Shortfall {
                primary,
                learner,
                replaces,
                slots,
            })
            .collect())
    }

    /// Makes `f.learner` a backup of `f.slots` (see the module doc).
    pub fn rejoin(&self, f: &Shortfall) -> Result<Rejoined> {
        let _lock = self.hold()?;
        let goal = Goal::Rejoin {
            primary: f.primary,
            learner: f.learner,
            replaces: f.replaces,
            slots: f.slots.clone(),
        };
        let r = self.with_goal(&goal, || {
            let (raw, t) = self.table()?;
            let taught = std::cell::Cell::new(false);
            match self.rejoin_held(f, &raw, &t, &taught) {
                Ok(r) => Ok(Ok(r)),
                // Once the primary may send the learner updates, only a
                // newer table ends that (a learner alone is harmless: its
                // lists go with the next table). Ended: the goal goes.
                Err(e) if !taught.get() => Ok(Err(e)),
                Err(e) => match self.end_learning(&raw, &t) {
                    Ok(()) => Ok(Err(e)),
                    Err(a) => Err(err(format!(
                        "{}; and ending its learning failed ({}): the goal's rerun ends it",
                        bare(&e),
                        bare(&a)
                    ))),
                },
            }
        })?;
        if let Err(e) = &r {
            tracing::info!(
                primary = f.primary,
                learner = f.learner,
                "a rejoin did not commit: {e}"
            );
        }
        r
    }

    /// A rejoin's goal found in etcd (its driver died): ends its learning
    /// ([`Mover::end_learning`] at the table held now). What it committed,
    /// if it did, stays committed (the table moved on: nothing to end).
    pub fn abandon_rejoin(&self, f: &Shortfall) -> Result<()> {
        let _lock = self.hold()?;
        let goal = Goal::Rejoin {
            primary: f.primary,
            learner: f.learner,
            replaces: f.replaces,
            slots: f.slots.clone(),
        };
        self.with_goal(&goal, || {
            let (raw, t) = self.table()?;
            self.end_learning(&raw, &t)
        })
    }

    /// Ends every learning begun at table `t` (`raw`): swaps it in etcd for
    /// itself at the next epoch, so that a rejoin's commit from `t` can
    /// never land, and installs that everywhere (a learning ends with the
    /// table it began at). A primary never stops sending a learner the
    /// updates in any other way (`learn.rs`). If the table moved on
    /// already, it installs the table held now.
    fn end_learning(&self, raw: &[u8], t: &locus_store::SlotTable) -> Result<()> {
        let next = t.next_epoch();
        let token = self.token()?;
        let swapped = self
            .etcd
            .slots_swap(raw, &next.encode(), &[], Some(&token))
            .map_err(|e| err(format!("moving the table past a rejoin's epoch: {e}")))?;
        let now = if swapped { next } else { self.table()?.1 };
        self.install(&now, &[])
    }

    fn rejoin_held(
        &self,
        f: &Shortfall,
        raw: &[u8],
        t: &locus_store::SlotTable,
        taught: &std::cell::Cell<bool>,
    ) -> Result<Rejoined> {
        if let Some(s) = f.slots.iter().find(|&&s| {
            let room = match f.replaces {
                Some(r) => t.is_backup(s, r),
                None => t.backups_of_slot(s).len() + 1 < usize::from(t.replication()),
            };
            t.owner_of_slot(s) != Some(f.primary) || t.is_backup(s, f.learner) || !room
        }) {
            return Err(err(format!(
                "slot {s} is no longer server {}'s with room for server {} as a backup (table epoch {})",
                f.primary,
                f.learner,
                t.epoch()
            )));
        }
        // The commit is fenced by the incarnations that learn and teach:
        // one that restarts since forgot its learning.
        let fences = self.fences(&[f.primary, f.learner], "rejoin")?;
        let step = |id: u8, step: MoveStep, peer: u8| {
            self.step(id, step, peer, &f.slots, raw, Vec::new())
                .map_err(|e| err(format!("a rejoin's {}", bare(&e))))
        };
        // Both ends at the table the learning begins at (a server that
        // registered as a table was committed, or missed an INSTALL, holds
        // an older one and would refuse LEARN at every look).
        for id in [f.learner, f.primary] {
            self.step(id, MoveStep::Install, 0, &[], raw, Vec::new())
                .map_err(|e| err(format!("a rejoin's {}", bare(&e))))?;
        }
        step(f.learner, MoveStep::Learn, f.primary)?;
        taught.set(true);
        step(f.primary, MoveStep::Learn, f.learner)?;
        let copied = step(f.primary, MoveStep::Copy, f.learner)?;
        let next = match f.replaces {
            Some(r) => t.replace_backups(&f.slots, r, f.learner),
            None => t.add_backups(&f.slots, f.learner),
        }
        .map_err(|e| err(e.to_string()))?;
        let token = self.token()?;
        let swapped = self
            .etcd
            .slots_swap(raw, &next.encode(), &fences, Some(&token))
            .map_err(|e| err(format!("committing a rejoin's table in etcd: {e}")))?;
        if !swapped {
            return Err(err(format!(
                "the table in etcd changed, or server {} or {} restarted, or this mover's lock ended: server {} backs nothing new",
                f.primary, f.learner, f.learner
            )));
        }
        tracing::info!(
            primary = f.primary,
            learner = f.learner,
            slots = f.slots.len(),
            vertices = copied.vertices,
            table_epoch = next.epoch(),
            "committed a rejoin: the learner backs the slots"
        );
        // Committed: the servers install it now, or take it from etcd at
        // their next registration; P and D learn on until they install it.
        if let Err(e) = self.install(&next, &[]) {
            tracing::warn!("installing a rejoin's table: {e}");
        }
        Ok(Rejoined {
            slots: f.slots.len() as u64,
            vertices: copied.vertices,
            bytes: copied.bytes,
            table_epoch: next.epoch(),
        })
    }
}
