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

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use locus_fabric::MachineId;
pub use locus_placement::slots::{SlotMove, SlotTable, SLOTS_DEFAULT, SLOTS_MAX};

use crate::{Result, StoreError, VertexId};

/// The live slot table of one store (see the module doc).
pub struct Homes {
    owners: Box<[AtomicU8]>,
    machines: u16,
    epoch: AtomicU64,
    /// Serialises installs, so a snapshot taken under it is one table.
    install: Mutex<()>,
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
            machines: table.machines(),
            epoch: AtomicU64::new(table.epoch()),
            install: Mutex::new(()),
        }
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

    /// `v`'s home: its slot's owner.
    #[inline]
    pub fn owner(&self, v: VertexId) -> MachineId {
        self.owners[self.slot_of(v) as usize].load(Ordering::Relaxed)
    }

    /// The epoch of the table installed last.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// A copy of the table.
    pub fn table(&self) -> SlotTable {
        let _g = self.install.lock().unwrap_or_else(|e| e.into_inner());
        let owners = self
            .owners
            .iter()
            .map(|o| o.load(Ordering::Relaxed))
            .collect();
        SlotTable::from_owners(self.epoch(), self.machines, owners)
            .expect("installed tables were checked")
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
        for (o, &n) in self.owners.iter().zip(table.owners()) {
            o.store(n, Ordering::Relaxed);
        }
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
}
