//! A worker's table of recent location-cache hits: the lock-free read path
//! of the location cache (Pragh 4.2).
//!
//! A direct-mapped table of [`SLOTS`] entries, private to the worker (no
//! atomics, no locks). An entry copies a hit of the shared cache: the address
//! word, its position, when the shared entry was stamped, and the epoch of
//! its shard read under the shard's lock ([`LocationCache::get_epoch`]).
//!
//! Invariant: an entry is used only while (a) the shard's epoch is still
//! the one it copied, so the shared cache has not replaced or dropped any
//! word of that shard since, and (b) its stamp is younger than the cache
//! lease (replica entries excepted, as in the shared cache). Then the word
//! is one the shared cache would return too, and every use is validated by
//! the value's header as any cached address is (Pragh Fig. 8); the lease
//! keeps the block it names from reuse. A read that finds the word invalid
//! drops it from the shared cache with `remove_if`, which bumps the epoch and
//! so retires this copy and every other worker's.
//!
//! Counts: hits served here are counted in the entry and handed to the
//! shared cache ([`LocationCache::fold`]) every [`FOLD_HITS`] hits, when the
//! entry is replaced or retired, and for every entry at least every
//! [`FLUSH_NS`] of the worker's clock, so the monitor's counts (Pragh 4.4)
//! lag by at most that.

use crate::cache::{LocationCache, REPLICA_POSITION};
use crate::table::{mix, Key};

/// Entries per worker.
pub const SLOTS: usize = 256;
/// Hits an entry collects before it hands them to the shared cache.
pub const FOLD_HITS: u32 = 8;
/// Longest time (worker clock) pending hits wait before being handed over.
pub const FLUSH_NS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    used: bool,
    key: u64,
    word: u64,
    position: u64,
    stamped_ns: u64,
    epoch: u64,
    pending: u32,
}

/// The table.
#[derive(Debug)]
pub(crate) struct Recent {
    slots: Box<[Entry]>,
    last_flush_ns: u64,
    /// Hits served here.
    pub(crate) hits: u64,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            slots: vec![Entry::default(); SLOTS].into_boxed_slice(),
            last_flush_ns: 0,
            hits: 0,
        }
    }
}

impl Recent {
    #[inline]
    fn index(key: Key) -> usize {
        (mix(key.0) as usize) & (SLOTS - 1)
    }

    /// The word and position of `key` if an entry may serve it (see the
    /// module doc); `replicas` as in [`LocationCache::get_for_read`].
    #[inline]
    pub(crate) fn get(
        &mut self,
        c: &LocationCache,
        key: Key,
        now_ns: u64,
        lease_ns: u64,
        replicas: bool,
    ) -> Option<(u64, u64)> {
        if now_ns.saturating_sub(self.last_flush_ns) >= FLUSH_NS {
            self.flush(c);
            self.last_flush_ns = now_ns;
        }
        let e = &mut self.slots[Self::index(key)];
        if !e.used || e.key != key.0 {
            return None;
        }
        let replica = e.position == REPLICA_POSITION;
        if replica && !replicas {
            return None;
        }
        let expired = !replica && now_ns.saturating_sub(e.stamped_ns) >= lease_ns;
        if expired || c.epoch(key) != e.epoch {
            Self::retire(c, e);
            return None;
        }
        e.pending += 1;
        if e.pending >= FOLD_HITS {
            c.fold(key, e.pending);
            e.pending = 0;
        }
        self.hits += 1;
        Some((e.word, e.position))
    }

    /// Copies a hit of the shared cache (its position known).
    #[inline]
    pub(crate) fn put(
        &mut self,
        c: &LocationCache,
        key: Key,
        (word, position, stamped_ns, epoch): (u64, u64, u64, u64),
    ) {
        let e = &mut self.slots[Self::index(key)];
        if e.used {
            Self::retire(c, e);
        }
        *e = Entry {
            used: true,
            key: key.0,
            word,
            position,
            stamped_ns,
            epoch,
            pending: 0,
        };
    }

    fn retire(c: &LocationCache, e: &mut Entry) {
        if e.pending > 0 {
            c.fold(Key(e.key), e.pending);
        }
        e.used = false;
        e.pending = 0;
    }

    /// Retires this worker's copy of `key`, if it holds one: a read found
    /// its word invalid. `remove_if` on the shared cache retires every
    /// worker's copy only while the shared cache still holds the word; an
    /// entry it already dropped as expired (at a later clock than this
    /// worker's query start) or evicted left the epoch as it was, and this
    /// copy would be served again and again.
    pub(crate) fn forget(&mut self, c: &LocationCache, key: Key) {
        let e = &mut self.slots[Self::index(key)];
        if e.used && e.key == key.0 {
            Self::retire(c, e);
        }
    }

    /// Hands every pending hit to the shared cache.
    pub(crate) fn flush(&mut self, c: &LocationCache) {
        for e in self.slots.iter_mut().filter(|e| e.pending > 0) {
            c.fold(Key(e.key), e.pending);
            e.pending = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheConfig;

    fn cache() -> LocationCache {
        LocationCache::new(CacheConfig {
            bytes_max: 1 << 20,
            lease_ms: 1_000,
            shards: 4,
            hot_count: 20,
        })
        .unwrap()
    }

    const LEASE: u64 = 1_000_000_000;

    fn fill(r: &mut Recent, c: &LocationCache, key: Key, now: u64) -> (u64, u64) {
        let hit = c.get_epoch(key, now, false).unwrap();
        r.put(c, key, hit);
        (hit.0, hit.1)
    }

    #[test]
    fn serves_while_the_shard_is_unchanged_and_counts_every_hit() {
        let c = cache();
        let (k, other) = (Key(7), Key(8));
        c.insert_at(k, 100, 64, 0);
        let mut r = Recent::default();
        assert_eq!(fill(&mut r, &c, k, 1), (100, 64));
        for _ in 0..29 {
            assert_eq!(r.get(&c, k, 2, LEASE, false), Some((100, 64)));
        }
        r.flush(&c);
        assert_eq!(
            c.peek(k),
            Some((100, 30)),
            "1 shared hit + 29 here, none lost"
        );
        assert_eq!(c.stats().hits, 30);
        let mut hot = Vec::new();
        c.take_hot(|key| hot.push(key));
        assert_eq!(
            hot,
            vec![k],
            "crossing hot_count through fold lists the key"
        );
        // A new key in the cache changes nothing for this entry.
        c.insert_at(other, 5, 8, 3);
        assert!(r.get(&c, k, 4, LEASE, false).is_some());
    }

    #[test]
    fn a_changed_or_dropped_word_retires_the_copy_and_keeps_its_counts() {
        for change in 0..3 {
            let c = cache();
            let k = Key(42);
            c.insert_at(k, 100, 64, 0);
            let mut r = Recent::default();
            fill(&mut r, &c, k, 1);
            for _ in 0..3 {
                r.get(&c, k, 2, LEASE, false).unwrap();
            }
            match change {
                0 => c.insert_at(k, 200, 64, 3),
                1 => assert!(c.remove_if(k, 100)),
                _ => c.insert_replica(k, 300, 3),
            }
            assert_eq!(r.get(&c, k, 4, LEASE, false), None, "change {change}");
            let count = c.peek(k).map_or(4, |(_, n)| n);
            // The 3 pending hits reached the entry (if it is still there).
            if change == 0 {
                assert_eq!(count, 4);
            }
        }
    }

    #[test]
    fn a_copy_whose_shared_entry_is_gone_is_retired_by_forget() {
        let c = cache();
        let k = Key(11);
        c.insert_at(k, 100, 64, 0);
        let mut r = Recent::default();
        fill(&mut r, &c, k, 0);
        // Another worker, later, finds the shared entry expired and drops it.
        assert_eq!(c.get_epoch(k, 2 * LEASE, false), None);
        // A read at this worker's (earlier) query start found the word
        // invalid: the shared cache no longer holds it to retire the copy.
        assert!(!c.remove_if(k, 100));
        assert_eq!(
            r.get(&c, k, 1, LEASE, false),
            Some((100, 64)),
            "the copy outlives its shared entry"
        );
        r.forget(&c, k);
        assert_eq!(r.get(&c, k, 1, LEASE, false), None);
    }

    #[test]
    fn an_expired_copy_is_never_served_and_replicas_only_to_reads() {
        let c = cache();
        let k = Key(9);
        c.insert_at(k, 100, 64, 0);
        let mut r = Recent::default();
        fill(&mut r, &c, k, 0);
        assert_eq!(r.get(&c, k, LEASE, LEASE, false), None, "at the lease");
        let k2 = Key(10);
        c.insert_replica(k2, 500, 0);
        let hit = c.get_epoch(k2, 0, true).unwrap();
        r.put(&c, k2, hit);
        assert_eq!(r.get(&c, k2, 1, LEASE, false), None, "not for updates");
        assert_eq!(
            r.get(&c, k2, 10 * LEASE, LEASE, true),
            Some((500, REPLICA_POSITION)),
            "a replica entry does not expire"
        );
    }
}
