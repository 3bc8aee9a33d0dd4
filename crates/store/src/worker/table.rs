//! The key table through one-sided operations (Pragh 2.1, Fig. 8's LOOKUP):
//! find a key's slot by reading whole buckets along its chain, claim a slot
//! for a new key, and scan a machine's whole table (shard moves).

use locus_fabric::{Fabric, MachineId, Port};

use super::{Slot, Worker};
use crate::table::{
    addr_word_offset, key_word_offset, link_offset, BucketView, Key, BUCKET_BYTES,
    OVERFLOW_USED_OFFSET,
};
use crate::{Result, StoreError, VertexId};

impl<F: Fabric> Worker<F> {
    /// Finds a key's slot (LOOKUP in Pragh Fig. 8): reads whole buckets along its chain.
    pub(super) fn lookup(&mut self, key: Key) -> Result<Option<Slot>> {
        self.lookup_at(key, self.home(key))
    }

    /// [`Worker::lookup`] in machine `home`'s key table.
    pub(super) fn lookup_at(&mut self, key: Key, home: MachineId) -> Result<Option<Slot>> {
        let layout = self.shared.layout;
        let mut off = layout.bucket_offset(layout.bucket_of(key));
        let kr = self.keys_region(home);
        loop {
            self.port.read(home, kr, off, &mut self.bucket)?;
            let view = BucketView::parse(&self.bucket);
            for (i, &(kw, aw)) in view.slots.iter().enumerate() {
                if kw == key.word() {
                    return Ok(Some(Slot {
                        home,
                        addr_offset: addr_word_offset(off, i as u64),
                        addr_word: aw,
                        cached: false,
                        replica: false,
                    }));
                }
                if kw == 0 {
                    return Ok(None);
                }
            }
            if view.link == 0 {
                return Ok(None);
            }
            self.stats.overflow_hops += 1;
            off = layout.overflow_offset(view.link - 1);
        }
    }

    /// Finds a key's slot, claiming the first empty one on its chain if absent.
    pub(super) fn find_or_claim(&mut self, key: Key) -> Result<Slot> {
        self.find_or_claim_at(key, self.home(key))
    }

    /// [`Worker::find_or_claim`] in machine `home`'s key table.
    pub(super) fn find_or_claim_at(&mut self, key: Key, home: MachineId) -> Result<Slot> {
        let layout = self.shared.layout;
        let kr = self.keys_region(home);
        let mut off = layout.bucket_offset(layout.bucket_of(key));
        loop {
            self.port.read(home, kr, off, &mut self.bucket)?;
            let view = BucketView::parse(&self.bucket);
            for (i, &(kw, aw)) in view.slots.iter().enumerate() {
                let i = i as u64;
                let found = |addr_word| Slot {
                    home,
                    addr_offset: addr_word_offset(off, i),
                    addr_word,
                    cached: false,
                    replica: false,
                };
                if kw == key.word() {
                    return Ok(found(aw));
                }
                if kw == 0 {
                    let prev = self
                        .port
                        .cas(home, kr, key_word_offset(off, i), 0, key.word())?;
                    if prev == 0 {
                        return Ok(found(0));
                    }
                    if prev == key.word() {
                        let aw = self.port.read_word(home, kr, addr_word_offset(off, i))?;
                        return Ok(found(aw));
                    }
                    // Another key took the slot; slots fill in order, go on.
                }
            }
            let link = if view.link != 0 {
                view.link
            } else {
                let idx = self.port.fetch_add(home, kr, OVERFLOW_USED_OFFSET, 1)?;
                if idx >= layout.overflow_buckets {
                    // Another inserter may have linked a bucket since we read this one.
                    let link = self.port.read_word(home, kr, link_offset(off))?;
                    if link == 0 {
                        return Err(StoreError::TableFull {
                            machine: home,
                            capacity_keys: layout.capacity_keys(),
                            overflow_buckets: layout.overflow_buckets,
                        });
                    }
                    link
                } else {
                    let prev = self.port.cas(home, kr, link_offset(off), 0, idx + 1)?;
                    if prev == 0 {
                        idx + 1
                    } else {
                        prev
                    }
                }
            };
            self.stats.overflow_hops += 1;
            off = layout.overflow_offset(link - 1);
        }
    }

    /// Every (key, address word) in machine `m`'s key table, read with large
    /// READs over its main and used overflow buckets; keys without a value
    /// (a null word) are left out.
    pub(super) fn scan_table(&mut self, m: MachineId) -> Result<Vec<(Key, u64)>> {
        self.scan_table_entries(m, false)
    }

    /// [`Worker::scan_table`], with the keys of null words if `null_too`.
    pub(super) fn scan_table_entries(
        &mut self,
        m: MachineId,
        null_too: bool,
    ) -> Result<Vec<(Key, u64)>> {
        const CHUNK_BUCKETS: u64 = 1024;
        let layout = self.shared.layout;
        let kr = self.keys_region(m);
        let used = self
            .port
            .read_word(m, kr, OVERFLOW_USED_OFFSET)?
            .min(layout.overflow_buckets);
        let total = layout.buckets + used;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut b = 0;
        while b < total {
            let n = (total - b).min(CHUNK_BUCKETS);
            buf.resize((n * BUCKET_BYTES) as usize, 0);
            self.port.read(m, kr, layout.bucket_offset(b), &mut buf)?;
            for chunk in buf.chunks_exact(BUCKET_BYTES as usize) {
                for &(kw, aw) in BucketView::parse(chunk).slots.iter() {
                    if let (Some(k), true) = (Key::from_word(kw), null_too || aw != 0) {
                        out.push((k, aw));
                    }
                }
            }
            b += n;
        }
        Ok(out)
    }

    /// Every (key, address word) of this machine's table whose vertex is in
    /// `slot`, keys without a value included (a move hands those over too,
    /// so no stale entry of them is left behind): one scan of the table.
    pub fn keys_in_slot(&mut self, slot: u32) -> Result<Vec<(Key, u64)>> {
        let homes = std::sync::Arc::clone(&self.shared.homes);
        let mut keys = self.scan_table_entries(self.machine, true)?;
        keys.retain(|(k, _)| homes.slot_of(k.vertex()) == slot);
        Ok(keys)
    }

    /// What this machine's key table holds: keys (parts), vertices, and
    /// whether each key's value is held here or away (migrated). One scan of
    /// the table with large local READs; for status reports, not hot paths.
    pub fn home_summary(&mut self) -> Result<HomeSummary> {
        let me = self.machine;
        let mut s = HomeSummary::default();
        for (k, word) in self.scan_table(me)? {
            s.keys += 1;
            if k.part_index() == 0 {
                s.vertices += 1;
            }
            match crate::addr::Addr::decode(word).map(|a| a.holder(me)) {
                Some(h) if h != me => s.held_away += 1,
                Some(_) => s.held_here += 1,
                None => {}
            }
        }
        Ok(s)
    }

    /// The vertices this machine is home of (part-0 keys of its own table,
    /// wherever their values are held), in table order. One scan with large
    /// local READs: for checkpoints, not hot paths.
    /// Only vertices of slots the table gives this machine, and not ones
    /// handed away or still pending here (a slot move's markers).
    pub fn home_vertices(&mut self) -> Result<Vec<VertexId>> {
        let me = self.machine;
        let homes = std::sync::Arc::clone(&self.shared.homes);
        Ok(self
            .scan_table(me)?
            .into_iter()
            .filter(|&(k, w)| {
                k.part_index() == 0
                    && homes.owner(k.vertex()) == me
                    && crate::addr::moved_to(w).is_none()
                    && crate::addr::pending_from(w).is_none()
            })
            .map(|(k, _)| k.vertex())
            .collect())
    }

    /// The address word of `v`'s first part as stored at its home (0: absent).
    pub fn address_word(&mut self, v: VertexId) -> Result<u64> {
        Ok(self.lookup(Key::part(v, 0))?.map_or(0, |s| s.addr_word))
    }
}

/// What [`Worker::home_summary`] found in a machine's key table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HomeSummary {
    /// Keys (one per vertex part).
    pub keys: u64,
    /// Vertices (part-0 keys).
    pub vertices: u64,
    /// Keys whose value is held on this machine.
    pub held_here: u64,
    /// Keys whose value was migrated to another machine.
    pub held_away: u64,
}
