//! The driver of slot moves across running servers (issue 59; the protocol
//! and its invariants M1-M5 and V1-V5 are in `docs/design.md`, "Moves
//! across servers" and "B serves each group before the commit"; each
//! server's steps are `locus_node::node::moves`). It keeps no state of its
//! own: the slot table in etcd says whether a batch committed, and each
//! server lists the slots in flight through it (and whether handed), so a
//! driver killed mid-move leaves nothing that the next run's
//! [`Mover::settle`] does not finish or roll back.
//!
//! ```text
//!  per batch (slots of one owner A, to B):
//!   GUARD at A ──keys──▶ TAKE at B ──▶ HAND at A ──▶ SERVE at B ──▶ etcd: swap P/slots ──▶ INSTALL (B first)
//!        └── a failure before HAND: RELEASE at A, FORGET at B ──┘└── from HAND on: only forward ──┘
//! ```

use std::time::{Duration, Instant};

use locus_client::proto::{MoveReply, MoveStep, Reply, Request};
use locus_client::settle::settle_plan;
use locus_client::Client;
use locus_membership::{Membership, MoverLock};
use locus_store::{SlotMove, SlotTable};

use crate::{Result, ServerError};

pub mod failover;
pub mod goal;
pub mod handover;
pub mod journal;
pub mod rejoin;
pub mod reshape;
pub use failover::FailedOver;
pub use goal::Goal;
pub use handover::{HandedOver, Handover};
pub use journal::{Journal, Progress};
pub use locus_placement::slots::{ReshapePlan, ReshapeStep};
pub use rejoin::{Rejoined, Shortfall};
pub use reshape::Reshaped;

/// How long one step may take at a server (a TAKE copies a batch).
const STEP_DEADLINE: Duration = Duration::from_secs(600);
/// Attempts at an INSTALL on the batch's own two servers.
const INSTALL_TRIES: u32 = 5;

/// What a run of moves did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MovesDone {
    /// Batches committed.
    pub batches: u64,
    /// Slots moved.
    pub slots: u64,
    /// Vertices moved.
    pub vertices: u64,
    /// Keys (vertex parts) handed over.
    pub keys: u64,
    /// Bytes of values copied.
    pub bytes: u64,
    /// Batches an earlier, interrupted run left that this one finished or rolled back.
    pub settled: u64,
    /// The slot table's epoch at the end.
    pub table_epoch: u64,
}

/// Moves slots between the servers of a running cluster.
pub struct Mover<'a> {
    client: &'a Client,
    etcd: &'a Membership,
    /// [`Mover::reachable`] as last read from etcd, and when: an install
    /// runs while A still guards the batch's slots, so it must not wait
    /// for etcd each time.
    #[allow(clippy::type_complexity)]
    reachable: std::sync::Mutex<Option<(std::time::Instant, usize, Vec<u8>)>>,
    /// Where progress goes and a cancel request comes from, if anywhere.
    journal: Option<Journal>,
    /// Who this mover is, in `P/mover` (MV1).
    who: String,
    /// `P/mover` while a call holds it, and how many nested calls do.
    lock: std::sync::Mutex<Option<(MoverLock, usize)>>,
    /// Whether B serves a handed batch before the commit (V2; false: a
    /// baseline whose batches' updates wait for the commit).
    serve_early: bool,
    /// Whether a failed run leaves its goal in etcd (the coordinator
    /// finishing a dead driver's goal tries again later) or clears it (a
    /// command: its operator decides).
    keep_goal_on_error: bool,
}

/// `P/mover` held by a call of a [`Mover`] (see [`Mover::hold`]).
struct Holding<'m, 'a>(&'m Mover<'a>);

impl Drop for Holding<'_, '_> {
    fn drop(&mut self) {
        let mut g = self.0.lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, depth)) = g.as_mut() {
            *depth -= 1;
            if *depth == 0 {
                // Revokes the lease: the next driver need not wait its TTL.
                *g = None;
            }
        }
    }
}

/// How long the servers to install tables on are taken as known.
const REACHABLE_FOR: Duration = Duration::from_secs(1);

fn err(what: impl std::fmt::Display) -> ServerError {
    ServerError::Move(what.to_string())
}

/// The text of a move error without its prefix (to wrap it in another).
fn bare(e: &ServerError) -> String {
    match e {
        ServerError::Move(m) => m.clone(),
        e => e.to_string(),
    }
}

impl<'a> Mover<'a> {
    /// A mover over the cluster `client` reaches, whose table `etcd` keeps.
    pub fn new(client: &'a Client, etcd: &'a Membership) -> Mover<'a> {
        Mover {
            client,
            etcd,
            reachable: Default::default(),
            journal: None,
            who: format!("pid {}", std::process::id()),
            lock: Default::default(),
            serve_early: true,
            keep_goal_on_error: false,
        }
    }

    /// This mover, leaving its goal in etcd when a run fails (the
    /// coordinator's, finishing a dead driver's goal: MV4).
    pub fn keeping_goal_on_error(mut self) -> Mover<'a> {
        self.keep_goal_on_error = true;
        self
    }

    /// Runs `f` with `goal` recorded in etcd (MV4), clearing it when `f`
    /// ends (unless it failed and this mover keeps goals on error). Called
    /// with the lock held.
    fn with_goal<T>(&self, goal: &Goal, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let token = self.token()?;
        self.etcd
            .goal_put(&token, &goal.encode())
            .map_err(|e| err(format!("recording the move's goal in etcd: {e}")))?;
        let r = f();
        if r.is_ok() || !self.keep_goal_on_error {
            if let Err(e) = self.etcd.goal_delete(&token) {
                tracing::warn!("clearing the move's goal in etcd: {e}");
            }
        }
        r
    }

    /// This mover, with B serving each handed batch before the commit
    /// (`true`, the default) or only once the table names it (`false`:
    /// the stop-and-copy baseline of `locus bench elastic`, whose batches'
    /// updates wait from GUARD to the commit; reads go on as ever).
    pub fn serve_early(mut self, serve_early: bool) -> Mover<'a> {
        self.serve_early = serve_early;
        self
    }

    /// This mover, named `who` in `P/mover` (the default names the process).
    pub fn named(mut self, who: impl Into<String>) -> Mover<'a> {
        self.who = who.into();
        self
    }

    /// Holds `P/mover` until the returned guard drops (MV1): the calls that
    /// change what is in flight or commit tables hold it; nested calls of
    /// one mover share it. Fails at once, naming the holder, while another
    /// driver holds it.
    fn hold(&self) -> Result<Holding<'_, 'a>> {
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some((_, depth)) => *depth += 1,
            None => {
                let l = self
                    .etcd
                    .mover_acquire(&self.who)
                    .map_err(|e| err(e.to_string()))?;
                *g = Some((l, 1));
            }
        }
        Ok(Holding(self))
    }

    /// The token of `P/mover` as held now, failing if no call holds it or
    /// its lease may have ended (MV2: commit only under the lock).
    fn token(&self) -> Result<String> {
        let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some((l, _)) if l.is_live() => Ok(l.token().to_string()),
            Some((l, _)) => Err(err(format!(
                "this mover's lock ({}) may have ended with its lease: it commits nothing more",
                l.token()
            ))),
            None => Err(err("a table is committed only under the mover's lock")),
        }
    }

    /// This mover, writing its progress to `journal` after each batch and
    /// stopping when it asks to cancel (`journal.rs`): the batches already
    /// made are then moved back, newest first, and the run fails with
    /// `cancelled`.
    pub fn with_journal(mut self, journal: Journal) -> Mover<'a> {
        self.journal = Some(journal);
        self
    }

    /// The servers to ask: every server the client knows but those that
    /// registered in etcd once and are not live now (dead, or removed
    /// with `remove-server`): a server adopts etcd's table when it
    /// restarts, and holds nothing in flight that its replay keeps (M3).
    /// If etcd cannot say, every server.
    fn reachable(&self) -> Vec<u8> {
        let mut held = self.reachable.lock().unwrap_or_else(|e| e.into_inner());
        let known = self.client.machines();
        if let Some((at, n, ids)) = held.as_ref() {
            if at.elapsed() < REACHABLE_FOR && *n == known {
                return ids.clone();
            }
        }
        let ids = self.reachable_now();
        *held = Some((std::time::Instant::now(), known, ids.clone()));
        ids
    }

    fn reachable_now(&self) -> Vec<u8> {
        let all = 0..self.client.machines() as u8;
        let Ok((live, _)) = self.etcd.members() else {
            return all.collect();
        };
        all.filter(|&id| {
            live.iter().any(|m| m.machine == id)
                || self.etcd.last_registered(id).map_or(true, |e| e == 0)
        })
        .collect()
    }

    /// The live incarnations of `ids` (membership epochs) that a commit
    /// is fenced by: one that restarts since forgot its part in `what`.
    fn fences(&self, ids: &[u8], what: &str) -> Result<Vec<(u8, u64)>> {
        let (live, _) = self
            .etcd
            .members()
            .map_err(|e| err(format!("reading the membership: {e}")))?;
        ids.iter()
            .map(|&id| {
                live.iter()
                    .find(|m| m.machine == id)
                    .map(|m| (id, m.epoch))
                    .ok_or_else(|| err(format!("server {id} is not live: no {what} through it")))
            })
            .collect()
    }

    /// The committed table and its bytes, as etcd holds them.
    pub fn table(&self) -> Result<(Vec<u8>, SlotTable)> {
        let raw = self
            .etcd
            .slots_load()
            .map_err(|e| err(format!("reading the table from etcd: {e}")))?
            .ok_or_else(|| err("etcd holds no slot table yet (start the servers first)"))?;
        let t = SlotTable::decode(&raw).map_err(|e| err(format!("the table in etcd: {e}")))?;
        Ok((raw, t))
    }

    fn step(
        &self,
        id: u8,
        step: MoveStep,
        peer: u8,
        slots: &[u32],
        table: &[u8],
        keys: Vec<u64>,
    ) -> Result<MoveReply> {
        let req = Request::Move {
            step,
            peer,
            slots: slots.to_vec(),
            table: table.to_vec(),
            keys,
        };
        match self.client.call(id, &req, Some(STEP_DEADLINE)) {
            Ok(Reply::Move(m)) => Ok(m),
            Ok(other) => Err(err(format!("server {id} answered {step:?} with {other:?}"))),
            Err(e) => Err(err(format!("{step:?} at server {id}: {e}"))),
        }
    }

    /// Refuses a move to a server that does not answer.
    fn check_target(&self, to: u8) -> Result<()> {
        if to as usize >= self.client.machines() {
            return Err(err(format!(
                "no server {to} in a cluster of {}",
                self.client.machines()
            )));
        }
        match self.client.ping(to) {
            Ok(()) => Ok(()),
            Err(e) => Err(err(format!(
                "server {to} does not answer ({e}); slots move only to servers that are up"
            ))),
        }
    }

    /// Installs `table` on every server; the ones in `must` are retried and
    /// a failure there is an error (the others learn it when they next ask,
    /// or at their restart, from etcd).
    fn install(&self, table: &SlotTable, must: &[u8]) -> Result<()> {
        let raw = table.encode();
        let mut ids = self.reachable();
        let missing: Vec<u8> = must.iter().copied().filter(|m| !ids.contains(m)).collect();
        ids.extend(missing);
        for id in ids {
            let tries = if must.contains(&id) { INSTALL_TRIES } else { 1 };
            let mut last = None;
            for t in 0..tries {
                match self.step(id, MoveStep::Install, 0, &[], &raw, Vec::new()) {
                    Ok(_) => {
                        last = None;
                        break;
                    }
                    Err(e) => {
                        last = Some(e);
                        if t + 1 < tries {
                            std::thread::sleep(Duration::from_millis(100 << t));
                        }
                    }
                }
            }
            if let Some(e) = last {
                if must.contains(&id) {
                    return Err(e);
                }
                tracing::warn!(server = id, "the new slot table was not installed: {e}");
            }
        }
        Ok(())
    }

    /// Finishes or rolls back what an interrupted run left in flight: a
    /// batch whose slots etcd's table gives their target is installed,
    /// any other is released at its old home and forgotten at its target.
    /// Returns the batches settled.
    pub fn settle(&self) -> Result<u64> {
        let _held = self.hold()?;
        let (_, table) = self.table()?;
        let mut statuses = Vec::new();
        for a in self.reachable() {
            match self.step(a, MoveStep::Status, 0, &[], &[], Vec::new()) {
                Ok(s) => statuses.push((a, s.in_flight)),
                Err(e) => tracing::warn!(server = a, "cannot ask what is in flight: {e}"),
            }
        }
        let plan = settle_plan(&statuses, &table);
        let mut settled = 0;
        // Handed batches roll forward (V1).
        for b in &plan.forward {
            self.finish(b.from, b.to, &b.slots, &mut |_| {})?;
            settled += 1;
        }
        for b in &plan.back {
            self.step(b.from, MoveStep::Release, b.to, &b.slots, &[], Vec::new())?;
            // A target that is down forgets at its restart: its replay
            // drops slots the table does not give it (M3).
            if let Err(e) = self.step(b.to, MoveStep::Forget, b.from, &b.slots, &[], Vec::new()) {
                tracing::warn!(
                    server = b.to,
                    "the rolled-back batch is not forgotten yet: {e}"
                );
            }
            settled += 1;
        }
        for (server, slots) in &plan.stale {
            self.step(*server, MoveStep::Forget, 0, slots, &[], Vec::new())?;
            settled += 1;
        }
        if plan.install {
            self.install(&table, &[])?;
            settled += 1;
        }
        Ok(settled)
    }

    /// Moves `slots` to server `to`, `batch_slots` at a time (each batch
    /// from one owner), calling `progress(slots done, slots to move)` after
    /// each batch. Slots already at `to` are skipped.
    pub fn move_slots(
        &self,
        slots: &[u32],
        to: u8,
        batch_slots: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<MovesDone> {
        self.check_target(to)?;
        let _held = self.hold()?;
        let settled = self.settle()?;
        let (_, table) = self.table()?;
        refuse_replicated(&table)?;
        let mut moves = Vec::new();
        for &slot in slots {
            match table.owner_of_slot(slot) {
                None => {
                    return Err(err(format!(
                        "slot {slot} is past the table's {} slots",
                        table.slots()
                    )))
                }
                Some(o) if o == to => {}
                Some(from) => moves.push(SlotMove { slot, from, to }),
            }
        }
        let goal = Goal::Move {
            slots: slots.to_vec(),
            to,
            batch_slots,
        };
        let mut done = self.with_goal(&goal, || self.run(&moves, batch_slots, progress))?;
        done.settled = settled;
        Ok(done)
    }

    /// Moves slots so that `members` hold them all, evenly (within one),
    /// with the fewest moves ([`SlotTable::balance`]); `plan_only` returns
    /// the moves without making them.
    pub fn rebalance(
        &self,
        members: &[u8],
        batch_slots: usize,
        plan_only: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(Vec<SlotMove>, MovesDone)> {
        let _held = if plan_only { None } else { Some(self.hold()?) };
        let settled = if plan_only { 0 } else { self.settle()? };
        let (_, table) = self.table()?;
        refuse_replicated(&table)?;
        let moves = table.balance(members).map_err(|e| err(e.to_string()))?;
        if plan_only {
            return Ok((moves, MovesDone::default()));
        }
        let goal = Goal::Rebalance {
            members: members.to_vec(),
            batch_slots,
        };
        let mut done = self.with_goal(&goal, || self.run(&moves, batch_slots, progress))?;
        done.settled = settled;
        Ok((moves, done))
    }

    /// Has every server but `peer` migrate home the values of its keys
    /// that `peer` holds (before `peer` leaves). Returns values and bytes moved.
    pub fn recall(&self, peer: u8) -> Result<(u64, u64)> {
        let (mut keys, mut bytes) = (0, 0);
        for id in self.reachable().into_iter().filter(|&id| id != peer) {
            let r = self.step(id, MoveStep::Recall, peer, &[], &[], Vec::new())?;
            keys += r.keys;
            bytes += r.bytes;
        }
        Ok((keys, bytes))
    }

    /// The slots in flight through each server that answers (`None`: it did not).
    pub fn in_flight(&self) -> Vec<(u8, Option<Vec<locus_client::proto::SlotInFlight>>)> {
        (0..self.client.machines() as u8)
            .map(|id| {
                let s = self.step(id, MoveStep::Status, 0, &[], &[], Vec::new());
                (id, s.ok().map(|s| s.in_flight))
            })
            .collect()
    }

    /// Makes `moves`, batched per (from, to) pair.
    fn run(
        &self,
        moves: &[SlotMove],
        batch_slots: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<MovesDone> {
        let mut done = MovesDone::default();
        let mut by_pair: std::collections::BTreeMap<(u8, u8), Vec<u32>> = Default::default();
        for m in moves {
            by_pair.entry((m.from, m.to)).or_default().push(m.slot);
        }
        let total = moves.len() as u64;
        progress(0, total);
        let mut record = self.journal.as_ref().map(|j| j.start(total));
        let note = |done: &MovesDone, record: &mut Option<Progress>| {
            if let (Some(j), Some(p)) = (&self.journal, record.as_mut()) {
                p.slots_done = done.slots;
                p.batches = done.batches;
                p.vertices = done.vertices;
                p.bytes = done.bytes;
                j.write(p);
            }
        };
        note(&done, &mut record);
        let mut made: Vec<(u8, u8, Vec<u32>)> = Vec::new();
        let outcome = (|| -> Result<()> {
            for ((from, to), slots) in &by_pair {
                for batch in slots.chunks(batch_slots.max(1)) {
                    if self.journal.as_ref().is_some_and(|j| j.cancelled()) {
                        return Err(err("cancelled"));
                    }
                    let r = self.batch(*from, *to, batch)?;
                    made.push((*from, *to, batch.to_vec()));
                    done.batches += 1;
                    done.slots += batch.len() as u64;
                    done.vertices += r.vertices;
                    done.keys += r.keys;
                    done.bytes += r.bytes;
                    progress(done.slots, total);
                    note(&done, &mut record);
                }
            }
            Ok(())
        })();
        let Err(e) = outcome else {
            if let (Some(j), Some(p)) = (&self.journal, record.as_mut()) {
                p.state = "done".into();
                j.write(p);
            }
            done.table_epoch = self.table()?.1.epoch();
            return Ok(done);
        };
        let cancelled = bare(&e) == "cancelled";
        let mut back = 0u64;
        let mut why = bare(&e);
        if cancelled {
            // Undo what was made, newest batch first.
            for (from, to, batch) in made.iter().rev() {
                match self.batch(*to, *from, batch) {
                    Ok(_) => back += batch.len() as u64,
                    Err(b) => {
                        why = format!(
                            "cancelled; moving slots back failed after {back} of {}: {}",
                            done.slots,
                            bare(&b)
                        );
                        break;
                    }
                }
            }
            if back == done.slots {
                why = format!("cancelled: the {back} slot(s) moved were moved back");
            }
        }
        if let (Some(j), Some(p)) = (&self.journal, record.as_mut()) {
            p.state = if cancelled { "cancelled" } else { "failed" }.into();
            p.moved_back = back;
            p.error = Some(why.clone());
            j.write(p);
        }
        Err(err(why))
    }

    /// One batch from `from` to `to` (see the module doc): guard at A,
    /// take at B, hand at A (the decision), serve at B, commit, install.
    /// A failure before the hand rolls the batch back; from the hand on it
    /// only rolls forward ([`Mover::finish`]).
    fn batch(&self, from: u8, to: u8, slots: &[u32]) -> Result<MoveReply> {
        let t0 = Instant::now();
        // Where the batch's time goes (its log line): guard, take, hand and
        // serve, commit, install.
        let mut ms = [0u64; 5];
        let mut lap = Instant::now();
        let mut split = |i: usize| {
            ms[i] = lap.elapsed().as_millis() as u64;
            lap = Instant::now();
        };
        // Both ends judge the batch by the committed table: a server that
        // started after the last install it was sent may hold an older one
        // (installing a table no newer than a server's is a no-op there).
        let (raw, _) = self.table()?;
        for id in [from, to] {
            if let Err(e) = self.step(id, MoveStep::Install, 0, &[], &raw, Vec::new()) {
                tracing::debug!(server = id, "the table before a batch: {e}");
            }
        }
        let guarded = self.step(from, MoveStep::Guard, to, slots, &[], Vec::new());
        split(0);
        let listed = guarded
            .as_ref()
            .map(|g| g.listed.clone())
            .unwrap_or_default();
        let taken = guarded.and_then(|g| self.step(to, MoveStep::Take, from, slots, &[], g.listed));
        split(1);
        // A refuses to hand a batch it no longer guards (it restarted) or
        // whose keys are not all B's (B restarted and A took them back):
        // the state the old epoch fences stood for.
        let handed = taken.and_then(|r| {
            self.step(from, MoveStep::Hand, to, slots, &[], listed)
                .map(|_| r)
        });
        let r = match handed {
            Ok(r) => r,
            Err(e) => {
                let e = bare(&e);
                return match self.step(from, MoveStep::Release, to, slots, &[], Vec::new()) {
                    Ok(_) => {
                        // A target that is down forgets at its restart (M3).
                        if let Err(f) = self.step(to, MoveStep::Forget, from, slots, &[], Vec::new()) {
                            tracing::warn!(server = to, "the rolled-back batch is not forgotten yet: {f}");
                        }
                        Err(err(format!("{e}; the batch was rolled back")))
                    }
                    Err(b) => Err(err(format!(
                        "{e}; rolling the batch back failed too ({}): run the command again to finish it",
                        bare(&b)
                    ))),
                };
            }
        };
        // Past the decision: the batch is B's, whatever fails from here.
        let next = self.finish(from, to, slots, &mut split).map_err(|e| {
            err(format!(
                "{}; the batch was handed to server {to} and rolls forward: run the command again to finish it",
                bare(&e)
            ))
        })?;
        tracing::info!(
            from,
            to,
            slots = slots.len(),
            vertices = r.vertices,
            keys = r.keys,
            bytes = r.bytes,
            table_epoch = next.epoch(),
            elapsed_ms = t0.elapsed().as_millis() as u64,
            guard_ms = ms[0],
            take_ms = ms[1],
            hand_ms = ms[2],
            commit_ms = ms[3],
            install_ms = ms[4],
            "slots moved"
        );
        Ok(r)
    }

    /// Rolls a handed batch forward: B serves it (from here its writes
    /// wait no longer), the table naming B is committed in etcd, B then A
    /// then the rest install it. Every step is idempotent, so a run that
    /// finds a batch handed (`settle`) calls this again. `split(2..=4)`
    /// marks the end of serve, commit and install.
    fn finish(
        &self,
        from: u8,
        to: u8,
        slots: &[u32],
        split: &mut dyn FnMut(usize),
    ) -> Result<SlotTable> {
        if self.serve_early {
            self.step(to, MoveStep::Serve, from, slots, &[], Vec::new())?;
        }
        split(2);
        let moves: Vec<SlotMove> = slots
            .iter()
            .map(|&slot| SlotMove { slot, from, to })
            .collect();
        let mut tries = 0;
        let next = loop {
            let (raw, table) = self.table()?;
            if slots.iter().all(|&s| table.owner_of_slot(s) == Some(to)) {
                break table; // committed by an earlier attempt
            }
            let next = table.after(&moves).map_err(|e| err(e.to_string()))?;
            let token = self.token()?;
            if self
                .etcd
                .slots_swap(&raw, &next.encode(), &[], Some(&token))
                .map_err(|e| err(format!("committing the table in etcd: {e}")))?
            {
                break next;
            }
            let holder = self
                .etcd
                .mover_holder()
                .map_err(|e| err(format!("reading the mover's lock: {e}")))?;
            if holder.as_deref() != Some(token.as_str()) {
                return Err(err(format!(
                    "this mover's lock ({token}) ended with its lease and is held by {}: that driver finishes the batch",
                    holder.as_deref().unwrap_or("nobody now")
                )));
            }
            tries += 1;
            if tries >= INSTALL_TRIES {
                return Err(err(
                    "the table in etcd kept changing under the move (another mover?)",
                ));
            }
        };
        split(3);
        // B first: its writes of the batch need no view once it holds the table.
        let raw = next.encode();
        if let Err(e) = self.step(to, MoveStep::Install, 0, &[], &raw, Vec::new()) {
            tracing::warn!(server = to, "installing the new table at the new home: {e}");
        }
        self.install(&next, &[from, to])?;
        split(4);
        Ok(next)
    }
}

/// A plain slot move cannot serve a replicated slot (its new home's
/// updates would go to backups that follow the old owner): a replicated
/// cluster changes shape by rejoins and handovers ([`Mover::reshape`]).
fn refuse_replicated(t: &SlotTable) -> Result<()> {
    if t.replication() > 1 {
        return Err(err(format!(
            "the cluster keeps each slot on {} servers: its slots move by copies to new backups and handovers (Mover::reshape, Mover::move_replicated), not by plain slot moves",
            t.replication()
        )));
    }
    Ok(())
}

/// Parses a slot list: `0-99,200,300-310`.
pub fn parse_slots(s: &str, slots_max: u32) -> std::result::Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let num = |x: &str| {
            x.parse::<u32>()
                .map_err(|_| format!("{part:?}: {x:?} is not a slot number"))
        };
        let (a, b) = (num(a)?, num(b)?);
        if a > b || b >= slots_max {
            return Err(format!(
                "{part:?}: slots run 0..{} and a range goes up",
                slots_max - 1
            ));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err("no slots given".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_slots;

    #[test]
    fn slot_lists_parse_and_bad_ones_say_why() {
        assert_eq!(parse_slots("3,0-2,2", 16).unwrap(), vec![0, 1, 2, 3]);
        assert!(parse_slots("5-3", 16).unwrap_err().contains("5-3"));
        assert!(parse_slots("16", 16).unwrap_err().contains("0..15"));
        assert!(parse_slots("x", 16).unwrap_err().contains("not a slot"));
        assert!(parse_slots("", 16).is_err());
    }
}
