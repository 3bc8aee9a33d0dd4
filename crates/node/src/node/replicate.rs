//! A primary's side of replication and a failover's steps at a node
//! (issue 60; `docs/design.md`, "Replication and failover", R1-R4; the
//! backup's side and the request's bytes are `backup.rs`).
//!
//! ```text
//!  update at the primary (under v's stripe lock):
//!    log v's new list ─▶ durable ─▶ send (slot, primary epoch, v, list) to every backup
//!    the installed table names ─▶ every backup answered STORED ─▶ apply ─▶ reply
//!                                  └─ any refused / down / silent ─▶ error, in doubt (D1)
//!  failover of dead server D (the driver, after T' = T.fail_over(D) is committed):
//!    PROMOTE(T') at each new primary P (its gate closed meanwhile):
//!        the slots' lists from P's backup map ─▶ SLOT_IN logged ─▶ put at home
//!        ─▶ SLOT_OUT in the backup log; P's table still names D
//!    FAIL_OVER(T', D) at every live server: Pragh 5's forget of D (cache
//!        entries, replicas of D's keys), then install T' (not at a new primary)
//!    INSTALL(T') at every live server: P serves the slots from here
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use locus_fabric::counting::Counting;
use locus_fabric::{Fabric, MachineId};
use locus_store::{SlotTable, Worker};

use super::backup::{encode_requests, Entry1, STORED};
use super::moves::MoveReport;
use super::Node;
use crate::{NodeError, Result};

/// A gate data requests pass while it is open; PROMOTE closes it and
/// waits for the requests inside to leave (spinning through the worker's
/// `relax`: the simulation runs one actor at a time, so nothing here
/// blocks).
#[derive(Debug, Default)]
pub(crate) struct Gate {
    closed: AtomicBool,
    inside: AtomicU64,
}

/// A request inside the [`Gate`].
pub(crate) struct Inside<'a>(&'a Gate);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    /// Enters, unless the gate is closed.
    pub(crate) fn enter(&self) -> Option<Inside<'_>> {
        self.inside.fetch_add(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.inside.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Inside(self))
    }

    /// Closes, then waits until no request is inside.
    fn close(&self, relax: &mut dyn FnMut()) {
        self.closed.store(true, Ordering::SeqCst);
        while self.inside.load(Ordering::SeqCst) > 0 {
            relax();
        }
    }

    fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
    }
}

impl<F: Fabric> Node<F> {
    /// Why updates of `vertices` are refused before anything is logged: a
    /// backup of their slots that the fabric knows is down (its lease
    /// ended) would fail them in doubt; they wait for the failover that
    /// drops it from the table. None: go on.
    pub(super) fn backups_down(
        &self,
        w: &Worker<Counting<F>>,
        vertices: impl Iterator<Item = u32>,
    ) -> Option<String> {
        self.backup.as_ref()?;
        let t = self.store.homes().current();
        if t.replication() <= 1 {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        for v in vertices {
            let slot = t.slot_of(v);
            if !seen.insert(slot) {
                continue;
            }
            for &b in t.backups_of_slot(slot) {
                if let Err(e) = w.check_peer(b) {
                    return Some(format!(
                        "vertex {v}: slot {slot}'s backup, server {b}, is down ({e}); nothing was logged: the update waits for the failover that drops it (table epoch {})",
                        t.epoch()
                    ));
                }
            }
            if let Some(l) = self.learners.of(&t, slot) {
                if let Err(e) = w.check_peer(l) {
                    return Some(format!(
                        "vertex {v}: slot {slot}'s rejoining backup, server {l}, is down ({e}); nothing was logged: the update waits until its rejoin is abandoned (table epoch {})",
                        t.epoch()
                    ));
                }
            }
        }
        None
    }

    /// Sends `changes` (vertices homed here and their new lists, None:
    /// removed) to every backup the installed table names for their
    /// slots, and waits until each has answered that they are durable
    /// there (R1). Nothing to send (no backups) is done at once. An error
    /// names the backup that did not store them; the caller answers the
    /// update in doubt.
    pub(super) fn replicate(
        &self,
        w: &mut Worker<Counting<F>>,
        changes: &[(u32, Option<&[u32]>)],
    ) -> std::result::Result<(), String> {
        if self.backup.is_none() {
            return Ok(());
        }
        let t = self.store.homes().current();
        if t.replication() <= 1 {
            return Ok(());
        }
        let mut per_backup: BTreeMap<MachineId, Vec<Entry1>> = BTreeMap::new();
        for &(v, list) in changes {
            let slot = t.slot_of(v);
            // A rejoining server learns the slot's updates as a backup does
            // (`learn.rs`), before the table names it.
            let learner = self
                .learners
                .of(&t, slot)
                .filter(|_| !self.faults.skip_learner);
            for &b in t.backups_of_slot(slot).iter().chain(learner.iter()) {
                per_backup.entry(b).or_default().push(Entry1 {
                    slot,
                    primary_epoch: t.primary_epoch(slot),
                    vertex: v,
                    list: list.map(<[u32]>::to_vec),
                    copied: false,
                });
            }
        }
        if per_backup.is_empty() {
            return Ok(());
        }
        if self.faults.skip_backups {
            // Broken on purpose (tests of R1 only): acknowledged without
            // the backups' records.
            return Ok(());
        }
        let mut requests: Vec<(MachineId, Vec<u8>)> = Vec::new();
        for (b, entries) in &per_backup {
            for r in encode_requests(entries) {
                requests.push((*b, r));
            }
        }
        let targets: Vec<MachineId> = requests.iter().map(|r| r.0).collect();
        let mut failed = None;
        for (answer, b) in w.node_requests(requests).into_iter().zip(targets) {
            match answer {
                Ok(a) if a == [STORED] => {}
                Ok(a) => {
                    failed.get_or_insert(format!("backup server {b} answered {a:?}, not STORED"));
                }
                Err(e) => {
                    failed.get_or_insert(format!(
                        "backup server {b} did not store the record (table epoch {}): {e}",
                        t.epoch()
                    ));
                }
            }
        }
        match failed {
            None => Ok(()),
            Some(why) => {
                // Some backups may hold these lists and this node will not
                // apply them: in doubt (a handover sends them again, H2).
                self.in_doubt.note(changes.iter().map(|c| c.0));
                Err(why)
            }
        }
    }

    /// PROMOTE at a new primary: the lists this node backs of the slots
    /// `table` gives it are logged (SLOT_IN) and put into its key table at
    /// home, and leave the backup map (SLOT_OUT in the backup log). The
    /// table is *not* installed here: until the driver's INSTALL, after
    /// every live server's FAIL_OVER, this node's table still names the
    /// old primary, so it takes no update of the slots and no other server
    /// reads them here (R2, R4). Meanwhile this node answers no data
    /// request (its gate is closed: some lists are in, some not).
    /// Idempotent: a slot promoted is no longer in the map. A node whose
    /// installed table already names it (a restart after the commit)
    /// serves the slots from here.
    pub fn promote(&self, w: &mut Worker<Counting<F>>, table: &SlotTable) -> Result<MoveReport> {
        let Some(b) = &self.backup else {
            return Err(NodeError::Move(
                "PROMOTE needs a node with [durability]: it has no backups".into(),
            ));
        };
        let homes = std::sync::Arc::clone(self.store.homes());
        // A handover's snapshot stays while the table has not decided it
        // (H5); a failover back here promotes it.
        let slots: Vec<u32> = b
            .slots()
            .into_iter()
            .filter(|&s| {
                table.owner_of_slot(s) == Some(self.me)
                    && !self.handing.undecided(table, s, self.me)
            })
            .collect();
        if slots.is_empty() {
            return Ok(MoveReport::default());
        }
        let me = self.me;
        self.promoting.close(&mut || w.relax());
        let vertices = b.hand_over(&slots, |lists| {
            if let Some(d) = &self.durable {
                // No checkpoint drops this SLOT_IN before the table names
                // this node (`Durability::promoted_at`).
                d.promoted_at
                    .fetch_max(table.epoch(), std::sync::atomic::Ordering::AcqRel);
                d.log_slot_in(&slots, lists.iter().map(|(v, l)| (*v, l.as_slice())))
                    .and_then(|lsn| d.wait(lsn))
                    .map_err(|e| NodeError::Move(format!("PROMOTE's SLOT_IN: {e}")))?;
            }
            // Put at home here: this node's view names it the slots' home
            // while it writes them (its gate keeps requests out meanwhile).
            let views: Vec<Option<MachineId>> = slots.iter().map(|&s| homes.view(s)).collect();
            homes.set_view(&slots, Some(me))?;
            // An earlier handover of them from here left MOVED markers.
            let set: std::collections::HashSet<u32> = slots.iter().copied().collect();
            w.clear_moved_markers(&set)?;
            let mut order: Vec<&u32> = lists.keys().collect();
            order.sort_unstable();
            // Created under the view, ahead of the table, as a replay does.
            w.set_replaying(true);
            let put = order.iter().try_for_each(|&&v| {
                w.put(v, &lists[&v]).map_err(|e| {
                    NodeError::Move(format!("PROMOTE cannot put vertex {v} at home: {e}"))
                })
            });
            w.set_replaying(false);
            for (s, v) in slots.iter().zip(views) {
                homes.set_view(&[*s], v)?;
            }
            put.map(|()| lists.len() as u64)
        });
        self.promoting.open();
        let vertices = vertices?;
        b.drop_unbacked()?;
        tracing::info!(
            server = me,
            slots = slots.len(),
            vertices,
            table_epoch = table.epoch(),
            "promoted: the slots' backup lists are at home here, served once the table names this server"
        );
        Ok(MoveReport {
            vertices,
            slots: slots.len() as u64,
            ..MoveReport::default()
        })
    }

    /// Installs `table`, committed in etcd, if it is newer than the one
    /// installed here: a server's registration after its recovery, which
    /// adopted an older one. Slots `table` gives this node that its backup
    /// map still holds (a failover committed while it recovered, whose
    /// PROMOTE it missed: the driver asks live servers only) are promoted
    /// first, so that it never serves them from an empty key table (the
    /// fault lab, seed 6060: every server restarted after etcd was cut off,
    /// a failover committed in between, and the new primary answered from
    /// nothing until its next restart promoted the old lists over the
    /// updates taken since). Returns whether it installed.
    pub fn adopt_committed(&self, w: &mut Worker<Counting<F>>, table: &SlotTable) -> Result<bool> {
        if table.epoch() <= self.store.homes().current().epoch() {
            return Ok(false);
        }
        if !self.faults.adopt_without_promote {
            self.promote(w, table)?;
        }
        let installed = self.store.homes().install(table)?;
        if let Some(b) = &self.backup {
            b.drop_unbacked()?;
        }
        Ok(installed)
    }

    /// Sends the backups, again, the lists of the vertices homed here that
    /// the log's replay found written after its checkpoint (under every
    /// stripe lock: no update interleaves). An update of one of them may
    /// have been logged here and not stored by a backup (in doubt: its
    /// client got an error or nothing); the replay made it visible here,
    /// so the backups must hold it before anyone reads it, or a later
    /// failover would take it back. Called once the node is registered
    /// (its peers take its requests) and before it serves; on an error the
    /// vertices stay to send and the caller must not serve. Returns the
    /// vertices sent.
    pub fn resend_replayed(&self, w: &mut Worker<Counting<F>>) -> Result<usize> {
        let Some(d) = &self.durable else {
            return Ok(0);
        };
        let pending = std::mem::take(&mut *d.replayed.lock().unwrap_or_else(|p| p.into_inner()));
        let t = self.store.homes().current();
        if pending.is_empty() || t.replication() <= 1 || self.backup.is_none() {
            return Ok(0);
        }
        let mine: Vec<u32> = pending
            .iter()
            .copied()
            .filter(|&v| t.owner_of(v) == self.me && !t.backups_of(v).is_empty())
            .collect();
        let r = (|| {
            let _stripes = d.lock_all(&mut || w.relax());
            let mut lists = Vec::with_capacity(mine.len());
            for &v in &mine {
                lists.push((v, w.get(v)?));
            }
            let changes: Vec<(u32, Option<&[u32]>)> =
                lists.iter().map(|(v, l)| (*v, l.as_deref())).collect();
            self.replicate(w, &changes).map_err(|why| {
                NodeError::Recovery(format!(
                    "the {} vertices the log replayed could not be sent to their backups again: {why}",
                    changes.len()
                ))
            })
        })();
        if let Err(e) = r {
            *d.replayed.lock().unwrap_or_else(|p| p.into_inner()) = pending;
            return Err(e);
        }
        Ok(mine.len())
    }

    /// The backup's counters, for STATS (None without a log).
    pub fn backup_json(&self) -> Option<serde_json::Value> {
        self.backup.as_ref().map(|b| b.stats_json())
    }

    /// `v`'s list as this node backs it (a stale-ok read), if it does.
    pub fn backup_list(&self, v: u32) -> Option<Vec<u32>> {
        self.backup.as_ref()?.list(v)
    }

    /// FAIL_OVER at a live server: drops what it holds that refers to
    /// `dead` (Pragh 5's forget: cache entries of its keys or naming its
    /// memory, replicas of its keys), then installs `table` unless `table`
    /// makes this node the new primary of slots `dead` held (the driver's
    /// INSTALL does there, last), then drops the backups the table no
    /// longer gives it. R4: after this, nothing here can serve a copy of a
    /// failed-over slot other than its new primary's.
    pub fn fail_over_install(
        &self,
        w: &mut Worker<Counting<F>>,
        table: &SlotTable,
        dead: MachineId,
    ) -> Result<MoveReport> {
        if dead == self.me {
            return Err(NodeError::Move(format!(
                "server {dead} is told it failed: FAIL_OVER names another server"
            )));
        }
        let forgotten = w.forget_peer(dead)?;
        // A new primary installs the table last, by INSTALL, once every
        // other server has forgotten `dead` (R4).
        let held = self.store.homes().current();
        let new_primary = (0..table.slots()).any(|s| {
            table.owner_of_slot(s) == Some(self.me) && held.owner_of_slot(s) == Some(dead)
        });
        if !new_primary {
            self.store.homes().install(table)?;
            if let Some(b) = &self.backup {
                b.drop_unbacked()?;
            }
        }
        Ok(MoveReport {
            keys: forgotten.cache_entries + forgotten.replicas,
            ..MoveReport::default()
        })
    }
}
