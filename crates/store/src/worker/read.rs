//! The read path: GET (Pragh Fig. 8) with the location cache (Pragh 4.2) and
//! read-only replicas, `neighbors` over the parts of a decomposed vertex, and
//! two-hop queries, one GET at a time or with the second hop pipelined.

use locus_fabric::{Fabric, Output, Port, WorkRequest};

use super::{Slot, Worker, PIPELINE_WINDOW, READ_RETRIES_MAX};
use crate::addr::{Addr, Header};
use crate::adjacency::PartView;
use crate::cache::REPLICA_POSITION;
use crate::table::{BucketView, Key, BUCKET_BYTES};
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
            if self.fetch_counting(slot.home, addr, record)? {
                self.note_tracked(key);
                return Ok(Some((slot, addr)));
            }
            // Invalidated (updated or migrated, Pragh Fig. 8 lines 15-18): drop
            // a cached address and look the key up again.
            if slot.replica {
                self.drop_replica(key, slot.addr_word, addr);
            } else if slot.cached {
                if let Some(c) = self.cache() {
                    c.remove_if(key, slot.addr_word);
                }
            }
            self.stats.invalid_retries += 1;
            retries += 1;
            if retries >= READ_RETRIES_MAX {
                return Err(StoreError::Contention {
                    key: key.0,
                    retries,
                });
            }
        }
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
    /// one is running ([`Worker::two_hop`]), else now.
    #[inline]
    pub(super) fn lookup_now_ns(&self) -> u64 {
        self.query_now_ns.unwrap_or_else(|| self.port.now_ns())
    }

    /// LOOKUP with the location cache (Pragh Fig. 8 lines 19-27): a key homed
    /// here is read from the local table; another machine's key is taken from
    /// the cache if its entry is younger than the cache lease, else read
    /// remotely and cached with the position of its address word (keys never
    /// move), so a CAS needs no lookup READ either (Pragh 5, first optimization).
    pub(super) fn locate(&mut self, key: Key, replica_ok: bool) -> Result<Option<Slot>> {
        let home = self.home(key);
        let replicas = replica_ok && self.shared.config.replica_bytes_max > 0;
        if home == self.machine || !self.shared.config.cache_lookups {
            let slot = self.lookup(key)?;
            // A key homed here whose value is away may have a replica here.
            if replicas {
                if let Some(s) = &slot {
                    if Addr::decode(s.addr_word).is_some_and(|a| a.holder(home) != self.machine) {
                        let now = self.lookup_now_ns();
                        let hit = self.cached_lookup(key, now, true);
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
        let hit = self.cached_lookup(key, now, replicas);
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
    /// [`crate::cache::LocationCache::get_for_read`].
    #[inline]
    fn cached_lookup(&mut self, key: Key, now: u64, replicas: bool) -> Option<(u64, u64)> {
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
                self.remember_at(key, s.addr_word, s.addr_offset, now);
            }
        }
        Ok(slot)
    }

    /// Caches a key's address word, for keys homed elsewhere, stamped `now`
    /// (a time before the READ or CAS that made the address current).
    pub(super) fn remember_at(&mut self, key: Key, addr_word: u64, addr_offset: u64, now: u64) {
        if self.home(key) != self.machine {
            if let Some(c) = self.cache() {
                c.insert_at(key, addr_word, addr_offset, now);
            }
        }
    }

    /// Appends up to `k` neighbours of `v` to `out` (all of them for `usize::MAX`).
    /// Returns false if the vertex does not exist.
    pub fn neighbors(&mut self, v: VertexId, k: usize, out: &mut Vec<VertexId>) -> Result<bool> {
        let start = out.len();
        let mut part = 0;
        loop {
            if self.read_value_from(Key::part(v, part), true)?.is_none() {
                debug_assert!(part == 0, "a MORE flag points at a missing part");
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

    /// Two-hop query (Pragh 6): up to `k` neighbours of `v`, then up to `k`
    /// neighbours of each of those, one synchronous GET at a time as in Pragh
    /// Fig. 8. Appends the second hop to `out`; returns vertices visited.
    pub fn two_hop(&mut self, v: VertexId, k: usize, out: &mut Vec<VertexId>) -> Result<usize> {
        let mut first = std::mem::take(&mut self.scratch);
        first.clear();
        self.query_now_ns = Some(self.port.now_ns());
        let r = (|| {
            self.neighbors(v, k, &mut first)?;
            for &u in &first {
                self.neighbors(u, k, out)?;
            }
            Ok(1 + first.len())
        })();
        self.query_now_ns = None;
        self.scratch = first;
        r
    }

    /// Two-hop query with the second hop pipelined: the buckets of all
    /// first-hop vertices are read with one batch of posted READs, then their
    /// values with another. Vertices that need more (overflow chains, several
    /// parts, invalidated values) fall back to the synchronous path. Same
    /// result as [`Worker::two_hop`].
    pub fn two_hop_pipelined(
        &mut self,
        v: VertexId,
        k: usize,
        out: &mut Vec<VertexId>,
    ) -> Result<usize> {
        let mut first = std::mem::take(&mut self.scratch);
        first.clear();
        let r = self.two_hop_pipelined_inner(v, k, &mut first, out);
        self.scratch = first;
        r
    }

    pub(super) fn two_hop_pipelined_inner(
        &mut self,
        v: VertexId,
        k: usize,
        first: &mut Vec<VertexId>,
        out: &mut Vec<VertexId>,
    ) -> Result<usize> {
        self.neighbors(v, k, first)?;
        for batch in first.chunks(PIPELINE_WINDOW) {
            if let Err(e) = self.second_hop_batch(batch, k, out) {
                // Leave the port empty: a later call must not meet stale completions.
                self.drain_all();
                return Err(e);
            }
        }
        Ok(1 + first.len())
    }

    /// Second hop for up to [`PIPELINE_WINDOW`] vertices: their buckets with
    /// one batch of posted READs, then their values with another.
    pub(super) fn second_hop_batch(
        &mut self,
        batch: &[VertexId],
        k: usize,
        out: &mut Vec<VertexId>,
    ) -> Result<()> {
        let n = batch.len();
        let layout = self.shared.layout;
        for (i, &u) in batch.iter().enumerate() {
            let key = Key::part(u, 0);
            let home = self.home(key);
            let kr = self.keys_region(home);
            let off = layout.bucket_offset(layout.bucket_of(key));
            let buf = self.buffer(BUCKET_BYTES as usize);
            self.port
                .post(WorkRequest::read_into(i as u64, home, kr, off, buf))?;
        }
        let mut addrs: Vec<Option<Addr>> = vec![None; n];
        let mut fallback = vec![false; n];
        self.drain(n)?;
        for c in std::mem::take(&mut self.completions) {
            let i = c.id as usize;
            debug_assert!(i < n, "a completion this batch did not post");
            let Output::Data(bytes) = c.result? else {
                unreachable!("a READ completes with data")
            };
            if i >= n {
                continue;
            }
            let view = BucketView::parse(&bytes);
            self.keep(bytes);
            let key = Key::part(batch[i], 0);
            match view.slots.iter().find(|s| s.0 == key.word() || s.0 == 0) {
                Some(&(kw, aw)) if kw == key.word() => {
                    lost(key, aw)?;
                    addrs[i] = Addr::decode(aw)
                }
                Some(_) => {}
                None => fallback[i] = view.link != 0,
            }
        }
        let mut posted = 0;
        for i in 0..n {
            if let Some(a) = addrs[i] {
                let home = self.home(Key::part(batch[i], 0));
                let holder = a.holder(home);
                self.stats.values_read_remote += (holder != self.machine) as u64;
                let vr = self.values_region(holder);
                let buf = self.buffer((a.size_units() * 8) as usize);
                self.port.post(WorkRequest::read_into(
                    i as u64,
                    holder,
                    vr,
                    a.offset_units() * 8,
                    buf,
                ))?;
                posted += 1;
            }
        }
        self.drain(posted)?;
        let mut values: Vec<Option<Vec<u8>>> = vec![None; n];
        for c in std::mem::take(&mut self.completions) {
            let Output::Data(bytes) = c.result? else {
                unreachable!("a READ completes with data")
            };
            if let Some(slot) = values.get_mut(c.id as usize) {
                *slot = Some(bytes);
            }
        }
        self.stats.values_read += posted as u64;
        for i in 0..n {
            let done = match (&values[i], addrs[i]) {
                (Some(bytes), Some(a)) => {
                    let header =
                        Header::decode(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")));
                    // Check the header before trusting its length (an invalidated
                    // value's header is zero; `matches` bounds the payload).
                    let view = if header.matches(a) {
                        PartView::parse(&bytes[8..8 + header.payload_bytes as usize])
                    } else {
                        None
                    };
                    match view {
                        Some(view) if !view.more() || view.len() >= k => {
                            view.extend_into(k, out);
                            true
                        }
                        _ => false,
                    }
                }
                _ => !fallback[i] && addrs[i].is_none(),
            };
            if let Some(b) = values[i].take() {
                self.keep(b);
            }
            if !done {
                self.neighbors(batch[i], k, out)?;
            }
        }
        Ok(())
    }
}

/// `Err(ValueLost)` if `word` marks `key`'s value lost ([`crate::addr::lost_word`]).
#[inline]
fn lost(key: Key, word: u64) -> Result<()> {
    match crate::addr::lost_on(word) {
        None => Ok(()),
        Some(machine) => Err(StoreError::ValueLost {
            key: key.0,
            vertex: key.vertex(),
            machine,
        }),
    }
}
