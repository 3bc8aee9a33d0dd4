//! A primary handed to its backup (issue 60, `cluster rebalance
//! --primaries`; `docs/design.md`, "Primaries given back", H4): the old
//! primary turns each key of the handed slots into a `MOVED(to)` marker,
//! so that a reader by an older table that reads its key table goes on to
//! the new primary, never to a value the new primary has since replaced.
//! The new primary already holds every list (a backup's), so nothing is
//! copied; the old values are invalidated and reclaimed wherever they
//! are (Pragh may have migrated them to a third machine).

use std::collections::HashSet;

use locus_fabric::{MachineId, Port};

use super::Worker;
use crate::addr::{moved_to, moved_word, Addr};
use crate::table::Key;
use crate::{Result, StoreError};

impl<F: locus_fabric::Fabric> Worker<F> {
    /// At the slots' old primary (this machine, which guards them: no
    /// vertex op changes them), after the new primary `to` put their lists
    /// in at home: each of `keys` (this machine's) gets the word
    /// `MOVED(to)`. A key with a value has the value's header zeroed first
    /// (a cached reader sees it invalid and reads the home's word, as after
    /// an update), within half a reclaim lease of reading the word (the
    /// block cannot have been reused), then its word CASed, then the block
    /// retired at its holder. A MIGRATE that changed the word meanwhile
    /// makes the key start again. Returns the keys marked now (a key
    /// marked already, or without an entry, is skipped: idempotent).
    pub fn mark_handed_over(&mut self, keys: &[Key], to: MachineId) -> Result<u64> {
        let me = self.machine;
        let kr = self.keys_region(me);
        let half_lease_ns = self.shared.config.reclaim_lease_ms * 1_000_000 / 2;
        let mut marked = 0;
        for &key in keys {
            let mut tries = 0;
            loop {
                tries += 1;
                if tries > super::READ_RETRIES_MAX {
                    return Err(StoreError::Contention {
                        key: key.0,
                        retries: tries,
                    });
                }
                let Some(slot) = self.lookup_at(key, me)? else {
                    break;
                };
                let read_at = self.port.now_ns();
                let word = slot.addr_word;
                if moved_to(word) == Some(to) {
                    break;
                }
                let value = Addr::decode(word);
                if let Some(a) = value {
                    self.snapshot_note(key, me, word)?;
                    if self.port.now_ns().saturating_sub(read_at) >= half_lease_ns {
                        continue;
                    }
                    let holder = a.holder(me);
                    let vr = self.values_region(holder);
                    self.port.write_word(holder, vr, a.offset_units() * 8, 0)?;
                }
                if self
                    .port
                    .cas(me, kr, slot.addr_offset, word, moved_word(to))?
                    != word
                {
                    continue;
                }
                if let Some(a) = value {
                    let holder = a.holder(me);
                    let entry = Addr::local(a.size_units(), a.offset_units())?.encode();
                    if !self.snapshot_keeps(key, me, word, holder, entry).kept() {
                        if holder == me {
                            self.shared.alloc(me)?.retire(
                                a.offset_units(),
                                a.size_units(),
                                self.port.now_ns(),
                            );
                        } else {
                            self.reclaim_queue.push((holder, entry));
                        }
                    }
                }
                marked += 1;
                break;
            }
        }
        self.flush_reclaims()?;
        Ok(marked)
    }

    /// At a server about to put `slots`' lists in at home (a PROMOTE): the
    /// `MOVED` markers an earlier handover of them left in this machine's
    /// table go back to the null word, so the lists can be written over
    /// them. Returns the markers cleared.
    pub fn clear_moved_markers(&mut self, slots: &HashSet<u32>) -> Result<u64> {
        let me = self.machine;
        let kr = self.keys_region(me);
        let homes = std::sync::Arc::clone(&self.shared.homes);
        let mut cleared = 0;
        for (k, w) in self.scan_table_entries(me, false)? {
            if moved_to(w).is_none() || !slots.contains(&homes.slot_of(k.vertex())) {
                continue;
            }
            if let Some(slot) = self.lookup_at(k, me)? {
                if slot.addr_word == w && self.port.cas(me, kr, slot.addr_offset, w, 0)? == w {
                    cleared += 1;
                }
            }
        }
        Ok(cleared)
    }
}
