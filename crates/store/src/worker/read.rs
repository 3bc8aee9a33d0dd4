//! The read path: GET (Pragh Fig. 8) with the location cache (Pragh 4.2) and
//! read-only replicas, and `neighbors` over the parts of a decomposed vertex
//! (the k-hop query built on them is `khop.rs`).

use locus_fabric::{Fabric, FabricError, MachineId, Port};

use super::{Slot, Worker, READ_RETRIES_MAX};
use crate::addr::Addr;
use crate::cache::REPLICA_POSITION;
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

impl<F: Fabric> Worker<F> {
    /// Reads a key's value into `self.value` (GET in Pragh Fig. 8, without the
    /// location cache): returns the slot whose address matched a valid header,
    /// or `None` if the key has no published value.
    pub(super) fn read_value(&mut self, key: Key) -> Result<Option<(Slot, Addr)>> {
        self.read_value_from(key, false)
    }

    /// [`Worker::read_value`] for queries: with `replica_ok`, a replica of the
    /// value held here may serve it ([`crate::replica`]).
    pub(super) fn read_value_from(
        &mut self,
        key: Key,
        replica_ok: bool,
    ) -> Result<Option<(Slot, Addr)>> {
        let mut retries = 0;
        let mut first_retry_ns = None;
        loop {
            let Some(slot) = self.locate(key, replica_ok)? else {
                return Ok(None);
            };
            let Some(addr) = Addr::decode(slot.addr_word) else {
                return lost(key, slot.addr_word).map(|()| None);
            };
            // Counted while the value's READ is in flight: an access that
            // then finds the value invalidated and retries is counted twice.
            let record = self
                .records(&slot, addr)
                .then(|| (key, slot.addr_word, self.lookup_now_ns()));
            let valid = match self.fetch_counting(slot.home, addr, record) {
                // A cached address (or replica) naming a machine that is
                // gone (a server removed, or dead before the membership
                // says so): the home's word is the authority, read it.
                Err(StoreError::Fabric(FabricError::PeerUnavailable { .. }))
                    if slot.cached || slot.replica =>
                {
                    false
                }
                r => r?,
            };
            if valid {
                self.note_tracked(key);
                return Ok(Some((slot, addr)));
            }
            // Invalidated (updated or migrated, Pragh Fig. 8 lines 15-18): drop
            // a cached address and look the key up again.
            self.forget_invalid(key, &slot, addr);
            retries += 1;
            // A migration whose target died between invalidating the old copy
            // and publishing the new one (F5 in `recover.rs`) never ends: only
            // Pragh 5 at the home repairs it, and that needs the update lock
            // an updater spinning here may hold. So a value invalid for
            // longer than `read_stall_ms` (two reclaim leases unless set; a
            // migration takes microseconds) is an error, on the fabric's
            // clock, not only after many retries.
            let now = self.port.now_ns();
            let since = *first_retry_ns.get_or_insert(now);
            let stall_ns = self.shared.config.read_stall_ns();
            if retries >= READ_RETRIES_MAX || now.saturating_sub(since) > stall_ns {
                return Err(StoreError::Contention {
                    key: key.0,
                    retries,
                });
            }
        }
    }

    /// A read through `slot` found the value at `addr` invalidated: drops
    /// the cached address (or the replica) it came from, here and in the
    /// worker's recent hits, so the next lookup reads the key's bucket.
    pub(super) fn forget_invalid(&mut self, key: Key, slot: &Slot, addr: Addr) {
        if slot.replica {
            self.drop_replica(key, slot.addr_word, addr);
        } else if slot.cached {
            if let Some(c) = self.shared.caches[self.machine as usize].as_ref() {
                if let Some(w) = super::cache_form(slot.home, slot.addr_word) {
                    c.remove_if(key, w);
                }
                self.recent.forget(c, key);
            }
        }
        self.stats.invalid_retries += 1;
    }

    /// Counts a successful read of `key` in the on-demand table if the key
    /// is tracked (Pragh 4.4's deferred mechanism).
    #[inline]
    pub(super) fn note_tracked(&mut self, key: Key) {
        self.shared.trackers[self.machine as usize].refresh(&mut self.tracker);
        if !self.tracker.tracked().is_empty() {
            self.tracker.tracked().note(key);
        }
    }

    /// Whether a read of the value at `addr` through `slot` is counted for
    /// the monitor in the location cache (Pragh 4.4): when the cache did not
    /// see it, that is a key homed here whose value is elsewhere, or any
    /// remote key when the cache is not used for lookups (Split).
    #[inline]
    pub(super) fn records(&self, slot: &Slot, addr: Addr) -> bool {
        if slot.cached || self.shared.caches[self.machine as usize].is_none() {
            return false;
        }
        if slot.home == self.machine {
            addr.holder(slot.home) != self.machine
        } else {
            !self.shared.config.cache_lookups
        }
    }

    /// The time a cache lookup checks leases against: the query's start if
    /// one is running ([`Worker::k_hop`]), else now.
    #[inline]
    pub(super) fn lookup_now_ns(&self) -> u64 {
        self.query_now_ns.unwrap_or_else(|| self.port.now_ns())
    }

    /// LOOKUP with the location cache (Pragh Fig. 8 lines 19-27): a key homed
    /// here is read from the local table; another machine's key is taken from
    /// the cache if its entry is younger than the cache lease, else read
    /// remotely and cached with the position of its address word, so a CAS
    /// needs no lookup READ either (Pragh 5, first optimization). After a
    /// slot move the position is the old home's: a CAS there expects this
    /// key's word, which no other key holds, so it fails and the next lookup
    /// reads the new home's bucket.
    pub(super) fn locate(&mut self, key: Key, replica_ok: bool) -> Result<Option<Slot>> {
        if self.home_hint.is_some() {
            // Following a MOVED marker (`read_part`): the new home's bucket,
            // uncached (the table still names the old home).
            return self.lookup(key);
        }
        let home = self.home(key);
        let replicas = replica_ok && self.shared.config.replica_bytes_max > 0;
        if home == self.machine || !self.shared.config.cache_lookups {
            let slot = self.lookup(key)?;
            // A key homed here whose value is away may have a replica here.
            if replicas {
                if let Some(s) = &slot {
                    if Addr::decode(s.addr_word).is_some_and(|a| a.holder(home) != self.machine) {
                        let now = self.lookup_now_ns();
                        let hit = self.cached_lookup(key, home, now, true);
                        if let Some((word, REPLICA_POSITION)) = hit {
                            self.stats.replica_reads += 1;
                            return Ok(Some(Slot {
                                addr_word: word,
                                cached: true,
                                replica: true,
                                ..*s
                            }));
                        }
                    }
                }
            }
            return Ok(slot);
        }
        let now = self.lookup_now_ns();
        let hit = self.cached_lookup(key, home, now, replicas);
        if let Some((addr_word, addr_offset)) = hit.filter(|h| h.1 != u64::MAX) {
            let replica = addr_offset == REPLICA_POSITION;
            if replica {
                self.stats.replica_reads += 1;
            }
            return Ok(Some(Slot {
                home,
                // A replica slot is only read, never CASed: the position is unused.
                addr_offset,
                addr_word,
                cached: true,
                replica,
            }));
        }
        self.locate_fresh(key)
    }

    /// A location-cache lookup, first in this worker's recent hits
    /// (`recent.rs`, no lock), then in the shared cache; `replicas` as in
    /// [`crate::cache::LocationCache::get_for_read`]. The word comes back
    /// as `home`'s table would hold it ([`super::table_form`]).
    #[inline]
    pub(super) fn cached_lookup(
        &mut self,
        key: Key,
        home: MachineId,
        now: u64,
        replicas: bool,
    ) -> Option<(u64, u64)> {
        // A replica's word is kept as made (`Remote(here)`): it is never
        // CASed, and the replica set knows it in that form.
        self.cached_lookup_absolute(key, now, replicas)
            .map(|(w, p)| match p {
                REPLICA_POSITION => (w, p),
                _ => (super::table_form(home, w), p),
            })
    }

    #[inline]
    fn cached_lookup_absolute(&mut self, key: Key, now: u64, replicas: bool) -> Option<(u64, u64)> {
        let c = self.shared.caches[self.machine as usize].as_ref()?;
        if !self.shared.config.cache_recent_hits {
            return c.get_epoch(key, now, replicas).map(|h| (h.0, h.1));
        }
        if let Some(hit) = self.recent.get(c, key, now, c.lease_ns(), replicas) {
            return Some(hit);
        }
        let hit = c.get_epoch(key, now, replicas)?;
        if hit.1 != u64::MAX {
            self.recent.put(c, key, hit);
        }
        Some((hit.0, hit.1))
    }

    /// LOOKUP that reads the key's bucket (and refreshes the cache).
    pub(super) fn locate_fresh(&mut self, key: Key) -> Result<Option<Slot>> {
        // Stamp the cache entry with the time *before* the READ: the address
        // may have been retired just after we read it, and its lease started then.
        let now = self.port.now_ns();
        let slot = self.lookup(key)?;
        if let Some(s) = &slot {
            if s.addr_word != 0 {
                self.remember_at(key, s.home, s.addr_word, s.addr_offset, now);
            }
        }
        Ok(slot)
    }

    /// Caches a key's address word, for keys homed elsewhere, stamped `now`
    /// (a time before the READ or CAS that made the address current).
    /// Only words that name a value: a marker (lost, moved, pending) is
    /// read afresh each time, since a pending word changes within a
    /// handoff and a lost one when recovery republishes the value.
    /// `addr_word` is as `home`'s table held it; the cache keeps it
    /// absolute ([`super::cache_form`]).
    pub(super) fn remember_at(
        &mut self,
        key: Key,
        home: MachineId,
        addr_word: u64,
        addr_offset: u64,
        now: u64,
    ) {
        if home != self.machine {
            if let (Some(c), Some(w)) = (self.cache(), super::cache_form(home, addr_word)) {
                c.insert_at(key, w, addr_offset, now);
            }
        }
    }

    /// Appends up to `k` neighbours of `v` to `out` (all of them for `usize::MAX`).
    /// Returns false if the vertex does not exist.
    pub fn neighbors(&mut self, v: VertexId, k: usize, out: &mut Vec<VertexId>) -> Result<bool> {
        self.neighbors_from(v, 0, k, out)
    }

    /// Reads one part for [`Worker::neighbors_from`]. A part whose home's
    /// word says MOVED(B) (a slot move handed it to B, and the table does
    /// not name B yet) is read once more in B's table: until the table
    /// changes no update of the vertex runs anywhere (its old home guards
    /// the slot, design M5), so B's copy is the part's value. B holds it:
    /// B put the key in its table before the CAS that marked A's word; if
    /// B has no entry, the `Moved` error stands.
    fn read_part(&mut self, key: Key) -> Result<Option<()>> {
        match self.read_value_from(key, true) {
            Err(moved @ StoreError::Moved { to, .. }) if self.home_hint.is_none() => {
                self.home_hint = Some((key.vertex(), to));
                let r = self.read_value_from(key, true);
                self.home_hint = None;
                match r {
                    // No entry at B: B removed the key after taking it
                    // over, or the marker is not a handoff's. Not "absent"
                    // from here: the caller asks again by a newer table.
                    Ok(None) => Err(moved),
                    r => r.map(|o| o.map(|_| ())),
                }
            }
            r => r.map(|o| o.map(|_| ())),
        }
    }

    /// [`Worker::neighbors`] from part `first_part` on (a k-hop that has
    /// part 0 already continues the list here).
    pub(super) fn neighbors_from(
        &mut self,
        v: VertexId,
        first_part: u32,
        k: usize,
        out: &mut Vec<VertexId>,
    ) -> Result<bool> {
        let start = out.len();
        let mut part = first_part;
        loop {
            if self.read_part(Key::part(v, part))?.is_none() {
                // A part after one with MORE is missing only if the vertex
                // was removed since that part was read: what was read stands.
                return Ok(part > 0);
            }
            let view = self.current_part();
            let want = k - (out.len() - start);
            view.extend_into(want, out);
            if out.len() - start >= k || !view.more() {
                return Ok(true);
            }
            part += 1;
        }
    }

    /// All neighbours of `v`, or `None` if it does not exist.
    pub fn get(&mut self, v: VertexId) -> Result<Option<Vec<VertexId>>> {
        let mut out = Vec::new();
        Ok(self.neighbors(v, usize::MAX, &mut out)?.then_some(out))
    }
}

/// For a word that names no value: `Ok` if it is the null word (no value
/// yet), else the error its marker means: `ValueLost` ([`crate::addr::lost_word`]),
/// `Moved` ([`crate::addr::moved_word`]) or `NotOwnedYet`
/// ([`crate::addr::pending_word`]). A marker is never read as "absent".
#[inline]
pub(super) fn lost(key: Key, word: u64) -> Result<()> {
    use crate::addr::{lost_on, moved_to, pending_from};
    let (k, vertex) = (key.0, key.vertex());
    if word == 0 {
        Ok(())
    } else if let Some(machine) = lost_on(word) {
        Err(StoreError::ValueLost {
            key: k,
            vertex,
            machine,
        })
    } else if let Some(to) = moved_to(word) {
        Err(StoreError::Moved { key: k, vertex, to })
    } else if let Some(owner) = pending_from(word) {
        Err(StoreError::NotOwnedYet {
            key: k,
            vertex,
            owner,
        })
    } else {
        // Any other size-0 word is none the store writes: read as "no
        // value", as before markers existed.
        Ok(())
    }
}
