//! [`Homes`]: the slot table as the store reads it on every operation
//! (issue 59, requirement 1; `docs/design.md`, "The elastic cluster").
//!
//! A vertex's home is the owner of its slot, `v % slots`. The owners are
//! one atomic byte each, so a lookup is a relaxed load and a new table is
//! installed in place while operations run. An operation racing an
//! install may see some slots at the old owner and some at the new: the
//! table is a hint that the servers check (a request at a server that does
//! not own the slot is refused with `WrongHome`; moves hand each key over
//! by a marker in its address word, E1-E6), so a torn view costs a retry,
//! never a wrong answer.
//!
//! A slot may also have a *view* on this machine: the server that
//! coordinates its vertex ops here while a move has handed it over but the
//! table does not name the new owner yet (`docs/design.md`, "B serves each
//! group before the commit"). [`Homes::owner`] follows the view; the table
//! served to clients ([`Homes::table`]) does not.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use locus_fabric::MachineId;
pub use locus_placement::slots::{SlotMove, SlotTable, SLOTS_DEFAULT, SLOTS_MAX};

use crate::{Result, StoreError, VertexId};

/// A slot without a view: the table decides.
const NO_VIEW: u8 = u8::MAX;

/// The live slot table of one store (see the module doc).
pub struct Homes {
    owners: Box<[AtomicU8]>,
    /// Per slot: the owner a handed move names on this machine ahead of
    /// the table, or [`NO_VIEW`].
    views: Box<[AtomicU8]>,
    machines: u16,
    epoch: AtomicU64,
    /// Serialises installs, so a snapshot taken under it is one table.
    install: Mutex<()>,
    /// The table installed last, whole: with replication (issue 60) each
    /// slot's backups and primary epoch, which the update path reads.
    current: Mutex<Arc<SlotTable>>,
}

impl std::fmt::Debug for Homes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Homes")
            .field("slots", &self.owners.len())
            .field("epoch", &self.epoch())
            .finish()
    }
}

impl Homes {
    /// Homes as `table` places them.
    pub fn new(table: &SlotTable) -> Homes {
        Homes {
            owners: table.owners().iter().map(|&o| AtomicU8::new(o)).collect(),
            views: table
                .owners()
                .iter()
                .map(|_| AtomicU8::new(NO_VIEW))
                .collect(),
            machines: table.machines(),
            epoch: AtomicU64::new(table.epoch()),
            install: Mutex::new(()),
            current: Mutex::new(Arc::new(table.clone())),
        }
    }

    /// The table installed last, whole (owners, and with replication each
    /// slot's backups and primary epoch). Views are not in it.
    pub fn current(&self) -> Arc<SlotTable> {
        Arc::clone(&self.current.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Slots (fixed for the store's life).
    pub fn slots(&self) -> u32 {
        self.owners.len() as u32
    }

    /// `v`'s slot.
    #[inline]
    pub fn slot_of(&self, v: VertexId) -> u32 {
        v % self.owners.len() as u32
    }

    /// `v`'s home on this machine: its slot's view if a handed move set
    /// one, else the slot's owner by the table.
    #[inline]
    pub fn owner(&self, v: VertexId) -> MachineId {
        let s = self.slot_of(v) as usize;
        match self.views[s].load(Ordering::Acquire) {
            NO_VIEW => self.owners[s].load(Ordering::Relaxed),
            m => m,
        }
    }

    /// `v`'s slot's owner by the table alone (what clients are told).
    #[inline]
    pub fn table_owner(&self, v: VertexId) -> MachineId {
        self.owners[self.slot_of(v) as usize].load(Ordering::Relaxed)
    }

    /// Whether `slot` is served ahead of the table: a view names an owner
    /// the table does not (yet). Keys of such a slot are neither created
    /// nor removed (design V3: a reader by the table must find every key
    /// at the old owner, as an entry or a marker).
    #[inline]
    pub fn ahead_of_table(&self, slot: u32) -> bool {
        let s = slot as usize;
        match self.views[s].load(Ordering::Acquire) {
            NO_VIEW => false,
            m => m != self.owners[s].load(Ordering::Relaxed),
        }
    }

    /// `slot`'s view, if one is set.
    pub fn view(&self, slot: u32) -> Option<MachineId> {
        match self.views.get(slot as usize)?.load(Ordering::Acquire) {
            NO_VIEW => None,
            m => Some(m),
        }
    }

    /// Sets the view of `slots` to `owner` (a handed move), or clears it
    /// (`None`: the table decides again).
    pub fn set_view(&self, slots: &[u32], owner: Option<MachineId>) -> Result<()> {
        if let Some(&s) = slots.iter().find(|&&s| s >= self.slots()) {
            return Err(StoreError::Config(format!(
                "slot {s} is past the table's {} slots",
                self.slots()
            )));
        }
        let _g = self.install.lock().unwrap_or_else(|e| e.into_inner());
        for &s in slots {
            self.views[s as usize].store(owner.unwrap_or(NO_VIEW), Ordering::Release);
        }
        Ok(())
    }

    /// The epoch of the table installed last.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// A copy of the table.
    pub fn table(&self) -> SlotTable {
        let _g = self.install.lock().unwrap_or_else(|e| e.into_inner());
        (*self.current()).clone()
    }

    /// Replaces the table a new store starts with (epoch 1: each slot's
    /// owner `s % machines`) by `table`, also at epoch 1: a cluster made
    /// with room for servers added later starts over its first servers
    /// (`SlotTable::uniform_among`). Only before any newer table is held.
    pub fn set_initial(&self, table: &SlotTable) -> Result<()> {
        let _g = self.install.lock().unwrap_or_else(|e| e.into_inner());
        if table.slots() != self.slots()
            || table.machines() != self.machines
            || table.epoch() != 1
            || self.epoch() != 1
        {
            return Err(StoreError::Config(format!(
                "an initial slot table (epoch {}, {} slots over {} machines) cannot replace this store's (epoch {}, {} slots over {})",
                table.epoch(),
                table.slots(),
                table.machines(),
                self.epoch(),
                self.slots(),
                self.machines
            )));
        }
        for (o, &n) in self.owners.iter().zip(table.owners()) {
            o.store(n, Ordering::Relaxed);
        }
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(table.clone());
        Ok(())
    }

    /// Takes the cluster's table (read from its record, e.g. etcd): at
    /// epoch 1 (no move ever committed) it replaces the store's first one,
    /// which a server added later made from a file listing more servers
    /// ([`Homes::set_initial`]); past it, it is installed if newer.
    pub fn adopt(&self, table: &SlotTable) -> Result<()> {
        if table.epoch() == 1 && self.epoch() == 1 {
            self.set_initial(table)
        } else {
            self.install(table).map(|_| ())
        }
    }

    /// Installs `table` if it is newer than the one held; false if it is
    /// not (an older or equal epoch changes nothing). Its shape (slots,
    /// machines) must be the store's.
    pub fn install(&self, table: &SlotTable) -> Result<bool> {
        if table.slots() != self.slots() || table.machines() != self.machines {
            return Err(StoreError::Config(format!(
                "a slot table of {} slots over {} machines cannot replace this store's {} slots over {}: the slot count is fixed when the cluster is made",
                table.slots(),
                table.machines(),
                self.slots(),
                self.machines
            )));
        }
        let _g = self.install.lock().unwrap_or_else(|e| e.into_inner());
        if table.epoch() <= self.epoch() {
            return Ok(false);
        }
        for ((o, v), &n) in self
            .owners
            .iter()
            .zip(self.views.iter())
            .zip(table.owners())
        {
            o.store(n, Ordering::Relaxed);
            // A view the table now agrees with has done its work.
            if v.load(Ordering::Relaxed) == n {
                v.store(NO_VIEW, Ordering::Release);
            }
        }
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(table.clone());
        self.epoch.store(table.epoch(), Ordering::Release);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_follows_the_slot() {
        let h = Homes::new(&SlotTable::uniform(8, 3).unwrap());
        assert_eq!(h.owner(5), 2);
        assert_eq!(h.owner(8 + 5), 2, "v and v + slots share a slot");
        assert_eq!(h.owner(9), 1);
    }

    #[test]
    fn install_takes_only_newer_tables_of_the_same_shape() {
        let t = SlotTable::uniform(8, 3).unwrap();
        let h = Homes::new(&t);
        let moves = [SlotMove {
            slot: 5,
            from: 2,
            to: 0,
        }];
        let next = t.after(&moves).unwrap();
        assert!(h.install(&next).unwrap());
        assert_eq!((h.owner(5), h.epoch()), (0, 2));
        assert!(!h.install(&t).unwrap(), "an older table changes nothing");
        assert_eq!(h.owner(5), 0);
        assert_eq!(h.table(), next);
        let other = SlotTable::uniform(16, 3).unwrap();
        assert!(h.install(&other).is_err(), "the slot count is fixed");
    }

    #[test]
    fn a_view_leads_the_table_until_a_table_agrees() {
        let t = SlotTable::uniform(8, 3).unwrap();
        let h = Homes::new(&t);
        h.set_view(&[5], Some(0)).unwrap();
        assert_eq!((h.owner(5), h.table_owner(5)), (0, 2));
        assert!(h.ahead_of_table(5) && !h.ahead_of_table(4));
        assert_eq!(h.table(), t, "clients are served the table, not the view");
        let other = t
            .after(&[SlotMove {
                slot: 4,
                from: 1,
                to: 0,
            }])
            .unwrap();
        h.install(&other).unwrap();
        assert_eq!(
            h.view(5),
            Some(0),
            "a table that does not agree keeps the view"
        );
        let next = other
            .after(&[SlotMove {
                slot: 5,
                from: 2,
                to: 0,
            }])
            .unwrap();
        h.install(&next).unwrap();
        assert_eq!((h.view(5), h.owner(5)), (None, 0));
        assert!(!h.ahead_of_table(5));
        assert!(h.set_view(&[8], Some(1)).is_err());
    }
}
