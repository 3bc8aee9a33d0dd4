//! The location cache (Pragh 4.2, reused by the monitor of 4.4).
//!
//! (About 1,060 lines, most of them this doc and the settings' checks: the
//! shard, its replacement policy and the epochs change together under one
//! lock, so they stay in one file; the tests are in `cache/tests.rs` and
//! the workers' lock-free copies in `worker/recent.rs`.)
//!
//! **What is cached.** Each machine keeps the 64-bit address words
//! ([`crate::addr`]) of keys whose home is another machine, and of keys whose
//! values were migrated to this machine. A hit gives the value's address
//! without the remote READ of the key's bucket, so after a split migration a
//! read of a migrated value is fully local. Only addresses are cached, never
//! values: an entry is a few words, so a small cache covers the hot keys.
//!
//! **Lease rule.** An address cached `lease_ms` or more ago is never returned
//! (Pragh Fig. 8 lines 21-26): `get` at `now_ns >= cached_at_ns + lease` is a
//! miss and drops the entry. The cache lease must not exceed the reclaim
//! lease ([`CacheConfig::check_against_reclaim`]): a retired value's block is
//! reused only after the reclaim lease, so an address that may be used for
//! longer could point at memory that now holds another value. Time is passed
//! in (`now_ns`), never read here, so a simulation controls it.
//!
//! **Shards and locks.** The cache is shared by all worker threads acting as
//! one machine. Keys are spread over `shards` (a power of two) shards by bits
//! 32.. of `mix(key)`; each shard is a `std::sync::Mutex` over a `HashMap`
//! and is padded to its own cache lines. The map is keyed by `mix(key)`
//! itself (`mix` is a bijection, inverted by [`unmix`] when entries are
//! listed) and hashes with a pass-through hasher: no per-process random
//! state, so runs are reproducible, and no second hash. Bits 32.. do not
//! overlap the low bits the map indexes with nor the top 7 bits it tags with,
//! so one shard's keys still spread over its table. A hit takes one lock,
//! one lookup and no allocation; counters live inside the shards (no shared
//! atomics on the hot path).
//!
//! **Replacement: sampled LFU with aging.** Every entry counts the `get` hits
//! it served. When an insertion finds its shard full, [`SAMPLE_ENTRIES`]
//! entries are drawn from the shard's dense key array by a per-shard
//! deterministic generator; an expired one is evicted at once, otherwise the
//! one with the lowest count (ties: the oldest `cached_at_ns`). Every
//! [`AGING_INSERTS_PER_STEP`] insertions of new keys, an aging hand sweeping
//! the key array halves one entry's count, so every count halves once per
//! about four turnovers of the shard: keys that were hot long ago give way to
//! keys hot now, while a key hit a few times per turnover keeps a count above
//! the cold keys' zeros (plain LRU would drop it if more keys than fit pass
//! between its hits). All of this is O(1) per operation, needs no list links on the hit
//! path (unlike LRU, a hit only bumps a counter), and is deterministic for a
//! given sequence of operations. The counts are exactly what the monitor
//! needs (Pragh 4.4): the replacement policy keeps the frequently accessed
//! remote keys and [`LocationCache::take_access_counts`] reads one interval's
//! accesses and starts the next.
//!
//! **Intervals.** Counts are per monitoring interval, ended by
//! [`LocationCache::take_access_counts`] or
//! [`LocationCache::take_counts_at_least`]. Ending one writes no entry: each
//! shard numbers its intervals, each entry carries the number its count was
//! made in, and a count from an earlier interval reads as 0 and restarts at
//! the entry's next access. A take with a least count `min` also makes each
//! shard list the keys whose count reaches `min` in the next interval, at
//! the access that makes it so; the next take with the same `min` visits
//! those keys instead of every entry. Under uniform access most entries are
//! counted a few times an interval and few reach the monitor's
//! `report_count_min`, so the monitor need not sweep every machine's whole
//! cache each interval while workers run. A shard lists at most its entry
//! bound; past that, its next take walks every entry.
//!
//! **Hot keys.** An entry whose interval count reaches `hot_count` is listed
//! in its shard for the monitor's instant report, and the shard is marked in
//! one word of 64 bits (shard `i` as bit `i % 64`). The monitor looks every
//! 100 ms; [`LocationCache::take_hot`] clears the word and locks only the
//! marked shards. It used to lock every shard of every machine's cache at
//! each look (5,120 locks a second at the quick preset's eight machines),
//! each taking a line a worker would lock next to another core. Now a look
//! locks as many shards as keys turned hot since the last (fewer if they
//! share a shard's bit), and a look that finds nothing reads one word, which
//! no worker writes until a key turns hot.
//!
//! **Replica entries.** With read-only replicas on ([`crate::replica`]), the
//! entry of a key this machine keeps a replica of holds the replica's address
//! (a block in this machine's value region) with [`REPLICA_POSITION`] as its
//! position. Only the read path sees such entries
//! ([`LocationCache::get_for_read`]); they do not expire (the replica is
//! this machine's own block, checked by its header on every read), are never
//! overwritten by an address learned elsewhere, are never listed hot, and are
//! left out of the monitor's counts (a replica hit is a local access, nothing
//! to migrate for). Every other lookup treats them as a miss.
//!
//! **Epochs, for workers' recent-hit tables.** Each shard has an epoch, an
//! atomic counter bumped (under the shard's lock, after the change) whenever
//! a cached word of one of its keys is replaced by a different word or
//! position, made a replica entry, or dropped by `remove`/`remove_if`.
//! Inserting a new key, evicting one or dropping an expired one does not
//! bump it. A worker keeps a small private table of its recent hits
//! (`worker/recent.rs`) stamped with the epoch read under the lock
//! ([`LocationCache::get_epoch`]); while [`LocationCache::epoch`] is
//! unchanged and the lease has not passed, the shared entry still holds that
//! word, so the private copy is as good a hint as the shared one and is used
//! without a lock. Hits it serves come back in batches through
//! [`LocationCache::fold`], so the counts the monitor reads are kept.
//!
//! **Bytes per entry.** The byte bound is accounted as [`ENTRY_BYTES`] = 72
//! bytes per entry. Really used: a map slot of 48 bytes (8-byte mixed key,
//! 8-byte address word, 8-byte position, 8-byte `cached_at_ns`, 4-byte
//! count, 4-byte index into the key array, 4-byte interval, 4 of padding)
//! plus one control byte, at the map's load factor (7/16 to 7/8, so 56 to
//! 112 bytes), plus 8 bytes in the shard's dense key array, and 8 bytes for
//! a key listed as reaching the monitor's count. Each shard holds at most
//! `bytes_max / ENTRY_BYTES / shards` entries, so [`LocationCache::bytes`]
//! never exceeds `bytes_max`; the memory really used differs from the
//! accounted bytes by the table's load.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::table::{mix, Key};
use crate::{Result, StoreError};

/// Bytes accounted per cached entry (see the module doc for the breakdown).
pub const ENTRY_BYTES: u64 = 72;
/// Entries examined per eviction.
pub const SAMPLE_ENTRIES: usize = 8;
/// Insertions of new keys into a shard per step of its aging hand: every
/// count halves once per about this many turnovers of the shard.
pub const AGING_INSERTS_PER_STEP: u64 = 4;
/// Hot keys a shard lists between two looks of the monitor; more are counted
/// in [`CacheStats::hot_dropped`] and still reported with the interval.
pub const HOT_KEYS_MAX_PER_SHARD: usize = 256;
/// Most shards a cache may have (shards are picked with 16 bits of the hash).
pub const SHARDS_MAX: usize = 1 << 16;
/// The position recorded for a replica entry (see "Replica entries" above):
/// no key region is that large, so it never names a real address word.
pub const REPLICA_POSITION: u64 = u64::MAX - 1;

const NS_PER_MS: u64 = 1_000_000;
/// Bit where the shard index starts in `mix(key)` (see the module doc).
const SHARD_SHIFT: u32 = 32;
/// Weyl increment of the per-shard sampling generator (SplitMix64's).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// Settings of one machine's location cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Bytes the cache may account for at most ([`ENTRY_BYTES`] per entry).
    pub bytes_max: u64,
    /// An address cached this long ago or longer is never returned (Pragh 4.2).
    pub lease_ms: u64,
    /// Lock shards (a power of two, at most [`SHARDS_MAX`]).
    pub shards: usize,
    /// An entry whose interval count reaches this is listed as hot for the
    /// monitor's instant report (Pragh 4.4, 6.4); 0 turns the list off.
    pub hot_count: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            bytes_max: 128 << 20,
            lease_ms: 60_000,
            shards: 64,
            hot_count: 0,
        }
    }
}

impl CacheConfig {
    /// Rejects settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(StoreError::Config(m));
        if !self.shards.is_power_of_two() || self.shards > SHARDS_MAX {
            return bad(format!(
                "cache shards = {} must be a power of two in 1..={SHARDS_MAX} (a shard is picked by masking bits of the key's hash)",
                self.shards
            ));
        }
        let shards = self.shards as u64;
        if self.bytes_max / ENTRY_BYTES < shards {
            return bad(format!(
                "cache bytes_max = {} must hold at least one {ENTRY_BYTES}-byte entry per shard ({} bytes for {} shards); raise bytes_max or lower shards",
                self.bytes_max,
                ENTRY_BYTES * shards,
                self.shards
            ));
        }
        if self.entries_max_per_shard() > u32::MAX as u64 {
            return bad(format!(
                "cache bytes_max = {} gives {} entries per shard, more than the {} a shard can index; raise shards",
                self.bytes_max,
                self.entries_max_per_shard(),
                u32::MAX
            ));
        }
        if self.lease_ms == 0 {
            return bad("cache lease_ms must be positive".into());
        }
        if self.lease_ms.checked_mul(NS_PER_MS).is_none() {
            return bad(format!(
                "cache lease_ms = {} is too long to count in nanoseconds",
                self.lease_ms
            ));
        }
        Ok(())
    }

    /// Errors when the cache lease is longer than the reclaim lease: a cached
    /// address could then outlive the memory it points to (Pragh 4.2).
    pub fn check_against_reclaim(&self, reclaim_lease_ms: u64) -> Result<()> {
        if self.lease_ms > reclaim_lease_ms {
            return Err(StoreError::Config(format!(
                "cache lease_ms = {} exceeds reclaim_lease_ms = {reclaim_lease_ms}: a cached address could outlive the memory it points to (a retired value's block is reused after the reclaim lease while the cache would still return its address); set the cache lease_ms at most the reclaim lease",
                self.lease_ms
            )));
        }
        Ok(())
    }

    /// Entries one shard holds at most.
    pub fn entries_max_per_shard(&self) -> u64 {
        self.bytes_max / ENTRY_BYTES / self.shards.max(1) as u64
    }

    /// Entries the cache holds at most.
    pub fn entries_max(&self) -> u64 {
        self.entries_max_per_shard() * self.shards as u64
    }
}

/// Counters of a cache, summed over its shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `get`s that returned an address.
    pub hits: u64,
    /// `get`s that returned nothing (expired ones included).
    pub misses: u64,
    /// Misses that found an expired entry (and dropped it).
    pub expired: u64,
    /// Insertions of a key not cached.
    pub inserts: u64,
    /// Insertions that replaced a cached key's address.
    pub replaces: u64,
    /// Entries evicted to stay within `bytes_max`.
    pub evictions: u64,
    /// Entries dropped by `remove` or a matching `remove_if`.
    pub removes: u64,
    /// Hot keys not listed because a shard's hot list was full.
    pub hot_dropped: u64,
}

impl CacheStats {
    /// Hits over all `get`s (0 when there were none).
    pub fn hit_rate(&self) -> f64 {
        let gets = self.hits + self.misses;
        if gets == 0 {
            0.0
        } else {
            self.hits as f64 / gets as f64
        }
    }

    fn add(&mut self, o: &CacheStats) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.expired += o.expired;
        self.inserts += o.inserts;
        self.replaces += o.replaces;
        self.evictions += o.evictions;
        self.removes += o.removes;
        self.hot_dropped += o.hot_dropped;
    }
}

/// The location cache of one machine: `Send + Sync`, shared by its workers.
#[derive(Debug)]
pub struct LocationCache {
    config: CacheConfig,
    lease_ns: u64,
    entries_max_per_shard: usize,
    shard_mask: u64,
    shards: Box<[Padded]>,
    epochs: Box<[Epoch]>,
    /// Bit `i % 64` is set when shard `i` lists a hot key; the monitor's
    /// [`LocationCache::take_hot`] locks only the shards of set bits ("Hot
    /// keys" above).
    hot_shards: Epoch,
}

/// A shard's epoch on cache lines of its own (read by every hit of the
/// workers' recent tables, written only when a cached word changes).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Epoch(AtomicU64);

/// A shard on cache lines of its own, so locking one does not slow its neighbours.
#[derive(Debug)]
#[repr(align(128))]
struct Padded(Mutex<Shard>);

#[derive(Debug, Clone, Copy)]
struct Entry {
    word: u64,
    /// Where the key's address word lives in its home's key region
    /// (keys never move, so this never goes stale); `u64::MAX` if unknown.
    position: u64,
    cached_at_ns: u64,
    /// Accesses counted in interval `interval` (see "Intervals" above).
    count: u32,
    /// Index of this entry's key in `Shard::keys`.
    slot: u32,
    /// The shard's interval `count` was counted in: a count from an earlier
    /// interval is read as 0 and restarts at the entry's next access.
    interval: u32,
}

impl Entry {
    /// The entry's count in the shard's current `interval` (0 if it was
    /// last counted in an earlier one).
    #[inline]
    fn count_in(&self, interval: u32) -> u32 {
        if self.interval == interval {
            self.count
        } else {
            0
        }
    }

    /// Adds `n` accesses in interval `interval`; returns the count before.
    #[inline]
    fn add(&mut self, interval: u32, n: u32) -> u32 {
        let before = self.count_in(interval);
        self.count = before.saturating_add(n);
        self.interval = interval;
        before
    }
}

/// Passes the already-mixed key through as the hash (keys are `mix(key)`).
#[derive(Debug, Default, Clone, Copy)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
    fn write(&mut self, bytes: &[u8]) {
        // Never called for u64 keys; folded anyway so the hasher is total.
        for &b in bytes {
            self.0 = mix(self.0 ^ b as u64);
        }
    }
}

type Map = HashMap<u64, Entry, BuildHasherDefault<PassThrough>>;

#[derive(Debug)]
struct Shard {
    /// `mix(key)` to entry.
    map: Map,
    /// Every cached `mix(key)`, densely, so evictions can sample in O(1).
    keys: Vec<u64>,
    /// State of the sampling generator (a Weyl sequence fed through `mix`).
    sample_state: u64,
    /// Next index of `keys` whose count is halved.
    age_hand: usize,
    /// Keys whose count reached `hot_count` since the monitor last looked
    /// (at most [`HOT_KEYS_MAX_PER_SHARD`]).
    hot: Vec<Key>,
    /// The current monitoring interval (see "Intervals" above).
    interval: u32,
    /// The count at which a key is listed in `crossed` (the least count the
    /// monitor last asked for); 0: nothing is listed.
    report_count: u32,
    /// Mixed keys whose count reached `report_count` in this interval, in
    /// the order they reached it (a key removed and cached again may be
    /// listed twice); at most the shard's entry bound.
    crossed: Vec<u64>,
    /// `crossed` was full: the next take walks every entry.
    crossed_overflow: bool,
    stats: CacheStats,
}

#[inline]
fn expired(cached_at_ns: u64, now_ns: u64, lease_ns: u64) -> bool {
    // A clock read by another thread may be a little behind: age 0, not a wrap.
    now_ns.saturating_sub(cached_at_ns) >= lease_ns
}

impl Shard {
    fn new(seed: u64) -> Shard {
        Shard {
            map: Map::default(),
            keys: Vec::new(),
            sample_state: seed,
            age_hand: 0,
            hot: Vec::new(),
            interval: 0,
            report_count: 0,
            crossed: Vec::new(),
            crossed_overflow: false,
            stats: CacheStats::default(),
        }
    }

    /// Lists mixed key `h` if its count went from `before` to `after`
    /// across `report_count`.
    #[inline]
    fn note_counted(&mut self, h: u64, before: u32, after: u32, entries_max: usize) {
        let r = self.report_count;
        if r == 0 || before >= r || after < r {
            return;
        }
        if self.crossed.len() < entries_max {
            self.crossed.push(h);
        } else {
            self.crossed_overflow = true;
        }
    }

    /// Ends the interval: every count restarts from 0 at its next access.
    fn next_interval(&mut self, report_count: u32) {
        self.interval = self.interval.wrapping_add(1);
        self.report_count = report_count;
        self.crossed.clear();
        self.crossed_overflow = false;
    }

    /// Drops the entry of mixed key `h`, keeping `keys` dense.
    fn remove_mixed(&mut self, h: u64) -> Option<Entry> {
        let e = self.map.remove(&h)?;
        let slot = e.slot as usize;
        debug_assert_eq!(self.keys[slot], h);
        self.keys.swap_remove(slot);
        if let Some(&moved) = self.keys.get(slot) {
            self.map
                .get_mut(&moved)
                .expect("every key in the key array is in the map")
                .slot = slot as u32;
        }
        debug_assert_eq!(self.map.len(), self.keys.len());
        Some(e)
    }

    /// Evicts one entry: an expired one if the sample has one, else the
    /// sampled entry with the lowest count, ties to the oldest.
    fn evict(&mut self, now_ns: u64, lease_ns: u64) {
        let len = self.keys.len();
        assert!(len > 0, "evicting from an empty shard");
        let mut victim = self.keys[0];
        let mut best = (u32::MAX, u64::MAX);
        for i in 0..SAMPLE_ENTRIES {
            self.sample_state = self.sample_state.wrapping_add(GOLDEN);
            let r = mix(self.sample_state);
            // Multiply-shift maps r onto 0..len without a division.
            let idx = ((r as u128 * len as u128) >> 64) as usize;
            let h = self.keys[idx];
            let e = &self.map[&h];
            if e.position != REPLICA_POSITION && expired(e.cached_at_ns, now_ns, lease_ns) {
                victim = h;
                break;
            }
            let rank = (e.count_in(self.interval), e.cached_at_ns);
            if i == 0 || rank < best {
                best = rank;
                victim = h;
            }
        }
        self.remove_mixed(victim);
        self.stats.evictions += 1;
    }

    /// Lists `key` as hot unless the list is full; true if it listed it.
    #[must_use]
    fn note_hot(&mut self, key: Key) -> bool {
        if self.hot.len() < HOT_KEYS_MAX_PER_SHARD {
            self.hot.push(key);
            true
        } else {
            self.stats.hot_dropped += 1;
            false
        }
    }

    /// Halves the count of the entry under the aging hand and moves the hand.
    fn age_one(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        if self.age_hand >= self.keys.len() {
            self.age_hand = 0;
        }
        let h = self.keys[self.age_hand];
        self.map
            .get_mut(&h)
            .expect("every key in the key array is in the map")
            .count >>= 1;
        self.age_hand += 1;
    }
}

impl LocationCache {
    /// A cache with `config`, checked with [`CacheConfig::validate`].
    pub fn new(config: CacheConfig) -> Result<LocationCache> {
        config.validate()?;
        let shards = (0..config.shards as u64)
            .map(|i| Padded(Mutex::new(Shard::new(mix(i ^ 0x4c4f_4355_5343_4143)))))
            .collect();
        Ok(LocationCache {
            config,
            lease_ns: config.lease_ms * NS_PER_MS,
            entries_max_per_shard: config.entries_max_per_shard() as usize,
            shard_mask: config.shards as u64 - 1,
            shards,
            epochs: (0..config.shards).map(|_| Epoch::default()).collect(),
            hot_shards: Epoch::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// The lease in nanoseconds.
    #[inline]
    pub fn lease_ns(&self) -> u64 {
        self.lease_ns
    }

    #[inline]
    fn shard_index(&self, h: u64) -> usize {
        ((h >> SHARD_SHIFT) & self.shard_mask) as usize
    }

    #[inline]
    fn shard_of(&self, h: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_index(h)])
    }

    /// Lists `key` (mixed `h`) hot in its shard `s` (locked) and marks the
    /// shard for the monitor, under the lock: a [`LocationCache::take_hot`]
    /// that clears the mark before this is seen then locks the shard after
    /// the listing and finds the key, or clears the mark after it and looks
    /// next time.
    #[inline]
    fn list_hot(&self, s: &mut Shard, h: u64, key: Key) {
        if s.note_hot(key) {
            let bit = 1u64 << (self.shard_index(h) % 64);
            if self.hot_shards.0.load(Ordering::Relaxed) & bit == 0 {
                self.hot_shards.0.fetch_or(bit, Ordering::Release);
            }
        }
    }

    /// Bumps the epoch of mixed key `h`'s shard; call with its lock held,
    /// after the change.
    #[inline]
    fn bump(&self, h: u64) {
        self.epochs[self.shard_index(h)]
            .0
            .fetch_add(1, Ordering::Release);
    }

    /// The epoch of `key`'s shard, without a lock (see "Epochs" above).
    #[inline]
    pub fn epoch(&self, key: Key) -> u64 {
        self.epochs[self.shard_index(mix(key.0))]
            .0
            .load(Ordering::Acquire)
    }

    /// [`LocationCache::get_for_read`] (with `replicas`) or
    /// [`LocationCache::get_with_position`] (without), also returning when
    /// the entry was stamped and its shard's epoch, read under the lock.
    #[inline]
    pub fn get_epoch(&self, key: Key, now_ns: u64, replicas: bool) -> Option<(u64, u64, u64, u64)> {
        self.lookup(key, now_ns, replicas)
    }

    /// Adds `hits` lookups served by a worker's recent table to `key`'s
    /// count and to the hit counter, listing the key hot if its count
    /// crosses `hot_count`. Nothing is counted on the entry if it is gone.
    pub fn fold(&self, key: Key, hits: u32) {
        let h = mix(key.0);
        let mut guard = self.shard_of(h);
        let s = &mut *guard;
        s.stats.hits += hits as u64;
        let interval = s.interval;
        if let Some(e) = s.map.get_mut(&h) {
            let before = e.add(interval, hits);
            let after = e.count;
            let hot = self.config.hot_count;
            if e.position != REPLICA_POSITION {
                if hot > 0 && before < hot && after >= hot {
                    self.list_hot(s, h, key);
                }
                s.note_counted(h, before, after, self.entries_max_per_shard);
            }
        }
    }

    /// The cached address word of `key`, if it was cached less than a lease
    /// before `now_ns` (Pragh Fig. 8 lines 21-23); counts an access on the
    /// entry. An expired entry is dropped and is a miss.
    #[inline]
    pub fn get(&self, key: Key, now_ns: u64) -> Option<u64> {
        self.get_with_position(key, now_ns).map(|(w, _)| w)
    }

    /// Like [`LocationCache::get`], also returning where the key's address
    /// word lives at its home (`u64::MAX` if it was cached without it). A
    /// migration uses it to skip the lookup READ (Pragh 5).
    #[inline]
    pub fn get_with_position(&self, key: Key, now_ns: u64) -> Option<(u64, u64)> {
        self.lookup(key, now_ns, false).map(|(w, p, _, _)| (w, p))
    }

    /// Like [`LocationCache::get_with_position`], also returning when the
    /// entry was stamped (a time before the READ or CAS that made its address
    /// current): a block the address names cannot have been reused before
    /// that time plus the reclaim lease (invariant P3).
    #[inline]
    pub fn get_stamped(&self, key: Key, now_ns: u64) -> Option<(u64, u64, u64)> {
        self.lookup(key, now_ns, false)
            .map(|(w, p, t, _)| (w, p, t))
    }

    /// [`LocationCache::get_with_position`] for the read path: a replica
    /// entry is returned too (with position [`REPLICA_POSITION`]), whatever
    /// its age, and counts a hit but is never listed hot.
    #[inline]
    pub fn get_for_read(&self, key: Key, now_ns: u64) -> Option<(u64, u64)> {
        self.lookup(key, now_ns, true).map(|(w, p, _, _)| (w, p))
    }

    /// A lookup: (word, position, stamped at, the shard's epoch under the lock).
    #[inline]
    fn lookup(&self, key: Key, now_ns: u64, replicas: bool) -> Option<(u64, u64, u64, u64)> {
        let h = mix(key.0);
        let i = self.shard_index(h);
        let mut guard = lock(&self.shards[i]);
        let s = &mut *guard;
        let epoch = || self.epochs[i].0.load(Ordering::Acquire);
        let interval = s.interval;
        match s.map.get_mut(&h) {
            Some(e) if e.position == REPLICA_POSITION && replicas => {
                e.add(interval, 1);
                let found = (e.word, e.position, e.cached_at_ns, epoch());
                s.stats.hits += 1;
                Some(found)
            }
            Some(e) if e.position == REPLICA_POSITION => {
                s.stats.misses += 1;
                None
            }
            Some(e) if !expired(e.cached_at_ns, now_ns, self.lease_ns) => {
                let before = e.add(interval, 1);
                let after = e.count;
                let hot = after == self.config.hot_count;
                let found = (e.word, e.position, e.cached_at_ns, epoch());
                s.stats.hits += 1;
                if hot {
                    self.list_hot(s, h, key);
                }
                s.note_counted(h, before, after, self.entries_max_per_shard);
                Some(found)
            }
            Some(_) => {
                s.remove_mixed(h);
                s.stats.misses += 1;
                s.stats.expired += 1;
                None
            }
            None => {
                s.stats.misses += 1;
                None
            }
        }
    }

    /// Makes `key`'s entry a replica entry for the replica block at
    /// `replica_word` (replacing whatever was cached for the key).
    pub fn insert_replica(&self, key: Key, replica_word: u64, now_ns: u64) {
        let h = mix(key.0);
        {
            let mut s = self.shard_of(h);
            if let Some(e) = s.map.get_mut(&h) {
                e.word = replica_word;
                e.position = REPLICA_POSITION;
                e.cached_at_ns = now_ns;
                s.stats.replaces += 1;
                self.bump(h);
                return;
            }
        }
        self.insert_at(key, replica_word, REPLICA_POSITION, now_ns);
    }

    /// Caches `addr_word` for `key`, stamped `now_ns` (Fig. 8 lines 25-26),
    /// replacing a cached word and keeping its access count; a new entry
    /// starts at count 0 and may evict another to stay within `bytes_max`.
    ///
    /// Pass as `now_ns` the time taken *before* the READ that found the
    /// address: the lease must count from when the address was observed,
    /// or a slow reader could cache an address already retired.
    pub fn insert(&self, key: Key, addr_word: u64, now_ns: u64) {
        self.insert_at(key, addr_word, u64::MAX, now_ns)
    }

    /// [`LocationCache::insert`] that also records where the key's address
    /// word lives at its home (`position`, a byte offset in its key region).
    pub fn insert_at(&self, key: Key, addr_word: u64, position: u64, now_ns: u64) {
        let h = mix(key.0);
        let mut guard = self.shard_of(h);
        self.insert_locked(&mut guard, key, h, addr_word, position, now_ns);
    }

    /// [`LocationCache::insert_at`] for many entries `(key, addr_word,
    /// position, now_ns)`, as if inserted one by one in the order given
    /// (shards are independent, and the order is kept within each), with
    /// each shard's lock taken once. Between lock acquisitions a CPU cannot
    /// overlap the cache misses of one insertion with the next; within one
    /// it can, so a batch of a migration's new addresses costs far less than
    /// its insertions one at a time.
    pub fn insert_many_at(&self, entries: &[(Key, u64, u64, u64)]) {
        assert!(
            entries.len() <= u32::MAX as usize,
            "a batch indexes its entries with 32 bits"
        );
        // A counting sort by shard: stable, so each shard sees its entries
        // in the order given, and linear, with no hashing inside a sort.
        let shard_of: Vec<u32> = entries
            .iter()
            .map(|e| self.shard_index(mix(e.0 .0)) as u32)
            .collect();
        let mut start = vec![0u32; self.shards.len() + 1];
        for &s in &shard_of {
            start[s as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut order = vec![0u32; entries.len()];
        let mut next = start.clone();
        for (i, &s) in shard_of.iter().enumerate() {
            order[next[s as usize] as usize] = i as u32;
            next[s as usize] += 1;
        }
        for (shard, w) in start.windows(2).enumerate() {
            if w[0] == w[1] {
                continue;
            }
            let mut guard = lock(&self.shards[shard]);
            for &i in &order[w[0] as usize..w[1] as usize] {
                let (key, addr_word, position, now_ns) = entries[i as usize];
                self.insert_locked(&mut guard, key, mix(key.0), addr_word, position, now_ns);
            }
        }
    }

    /// The body of [`LocationCache::insert_at`], with `h = mix(key)`'s shard locked.
    #[inline]
    fn insert_locked(
        &self,
        s: &mut Shard,
        key: Key,
        h: u64,
        addr_word: u64,
        position: u64,
        now_ns: u64,
    ) {
        debug_assert_ne!(addr_word, 0, "caching the null address of key {key:?}");
        if let Some(e) = s.map.get_mut(&h) {
            if e.position == REPLICA_POSITION {
                // The replica serves reads until it is found invalid.
                return;
            }
            let changed = e.word != addr_word || (position != u64::MAX && e.position != position);
            e.word = addr_word;
            if position != u64::MAX {
                e.position = position;
            }
            e.cached_at_ns = now_ns;
            s.stats.replaces += 1;
            if changed {
                self.bump(h);
            }
            return;
        }
        if s.keys.len() >= self.entries_max_per_shard {
            s.evict(now_ns, self.lease_ns);
        }
        let slot = s.keys.len();
        s.keys.push(h);
        s.map.insert(
            h,
            Entry {
                word: addr_word,
                position,
                cached_at_ns: now_ns,
                count: 0,
                slot: slot as u32,
                interval: s.interval,
            },
        );
        s.stats.inserts += 1;
        if s.stats.inserts.is_multiple_of(AGING_INSERTS_PER_STEP) {
            s.age_one();
        }
        assert!(
            s.keys.len() <= self.entries_max_per_shard && s.map.len() == s.keys.len(),
            "location cache shard over its bound or out of step"
        );
    }

    /// Counts one access to `key` whose address word is `addr_word` without
    /// serving a lookup: caches the word if absent (as `insert`) and counts
    /// the access either way. The monitor's view of accesses the cache does
    /// not serve (a key homed here whose value is elsewhere, or lookups with
    /// the cache off for locations, the "Split" scheme of Pragh 6).
    pub fn record(&self, key: Key, addr_word: u64, now_ns: u64) {
        let h = mix(key.0);
        {
            let mut guard = self.shard_of(h);
            let s = &mut *guard;
            let interval = s.interval;
            if let Some(e) = s.map.get_mut(&h) {
                if e.position == REPLICA_POSITION {
                    return;
                }
                let changed = e.word != addr_word;
                e.word = addr_word;
                e.cached_at_ns = now_ns;
                if changed {
                    // The position named where the old word lived, maybe
                    // in another home's table (cached while another server
                    // homed the key): a CAS there would miss the key, after
                    // a MIGRATE had invalidated its value (the twin's
                    // handovers, seed 100). Unknown from here on.
                    e.position = u64::MAX;
                }
                let before = e.add(interval, 1);
                let after = e.count;
                if changed {
                    self.bump(h);
                }
                if after == self.config.hot_count {
                    self.list_hot(s, h, key);
                }
                s.note_counted(h, before, after, self.entries_max_per_shard);
                return;
            }
        }
        self.insert(key, addr_word, now_ns);
        let mut guard = self.shard_of(h);
        let s = &mut *guard;
        let interval = s.interval;
        if let Some(e) = s.map.get_mut(&h) {
            let before = e.add(interval, 1);
            let after = e.count;
            s.note_counted(h, before, after, self.entries_max_per_shard);
        }
    }

    /// `key`'s cached word and access count, without counting an access or
    /// checking the lease (for the monitor, never for a lookup).
    pub fn peek(&self, key: Key) -> Option<(u64, u32)> {
        let h = mix(key.0);
        let s = self.shard_of(h);
        s.map
            .get(&h)
            .filter(|e| e.position != REPLICA_POSITION)
            .map(|e| (e.word, e.count_in(s.interval)))
    }

    /// Hands every key listed hot since the last call to `f` and clears the
    /// lists. Locks only the shards marked as listing one: with none marked
    /// it reads one word, which the workers do not write.
    pub fn take_hot(&self, mut f: impl FnMut(Key)) {
        let bits = self.hot_shards.0.swap(0, Ordering::Acquire);
        if bits == 0 {
            return;
        }
        for (i, p) in self.shards.iter().enumerate() {
            if bits & (1u64 << (i % 64)) == 0 {
                continue;
            }
            let hot = std::mem::take(&mut lock(p).hot);
            for k in hot {
                f(k);
            }
        }
    }

    /// Drops `key`'s entry; true if there was one.
    pub fn remove(&self, key: Key) -> bool {
        let h = mix(key.0);
        let mut s = self.shard_of(h);
        let removed = s.remove_mixed(h).is_some();
        s.stats.removes += removed as u64;
        if removed {
            self.bump(h);
        }
        removed
    }

    /// Drops `key`'s entry only if it still holds `addr_word` (Fig. 8 lines
    /// 16-17): a reader that found its cached address invalid must not drop
    /// a newer address another thread just cached. True if it dropped one.
    pub fn remove_if(&self, key: Key, addr_word: u64) -> bool {
        let h = mix(key.0);
        let mut s = self.shard_of(h);
        if s.map.get(&h).is_none_or(|e| e.word != addr_word) {
            return false;
        }
        s.remove_mixed(h);
        s.stats.removes += 1;
        self.bump(h);
        true
    }

    /// Drops every entry (replica entries included) for which `drop(key,
    /// word)` is true, bumping the epochs of the shards it changed so no
    /// worker's recent table serves them; returns how many. For a dead
    /// peer's keys and addresses (Pragh 5, `recover.rs`).
    pub fn remove_where(&self, mut drop: impl FnMut(Key, u64) -> bool) -> usize {
        let mut removed = 0;
        for p in self.shards.iter() {
            let mut s = lock(p);
            let gone: Vec<u64> = s
                .map
                .iter()
                .filter(|(&h, e)| drop(Key(unmix(h)), e.word))
                .map(|(&h, _)| h)
                .collect();
            for &h in &gone {
                s.remove_mixed(h);
                self.bump(h);
            }
            s.stats.removes += gone.len() as u64;
            removed += gone.len();
        }
        removed
    }

    /// Visits every entry (expired ones included) as (key, address word,
    /// access count), shard by shard in a deterministic order. `f` runs
    /// under a shard's lock: it must not call back into the cache.
    pub fn access_counts(&self, mut f: impl FnMut(Key, u64, u32)) {
        for p in self.shards.iter() {
            let s = lock(p);
            for (&h, e) in s.map.iter() {
                if e.position != REPLICA_POSITION {
                    f(Key(unmix(h)), e.word, e.count_in(s.interval));
                }
            }
        }
    }

    /// Like [`LocationCache::access_counts`], and starts the next interval
    /// (every count restarts from 0): one monitoring interval's accesses
    /// (Pragh 4.4).
    pub fn take_access_counts(&self, f: impl FnMut(Key, u64, u32)) {
        self.take_counts_at_least(0, f)
    }

    /// [`LocationCache::take_access_counts`] of the entries counted at
    /// least `min` times only. From the second call with the same or a
    /// larger `min`, a shard visits just the keys listed as they reached
    /// the last call's `min`, not every entry (see "Intervals" above); the
    /// order is then the order they reached it.
    pub fn take_counts_at_least(&self, min: u32, mut f: impl FnMut(Key, u64, u32)) {
        for p in self.shards.iter() {
            let mut guard = lock(p);
            let s = &mut *guard;
            let interval = s.interval;
            if min > 0 && s.report_count > 0 && s.report_count <= min && !s.crossed_overflow {
                let crossed = std::mem::take(&mut s.crossed);
                for h in &crossed {
                    if let Some(e) = s.map.get_mut(h) {
                        let n = e.count_in(interval);
                        if n >= min && e.position != REPLICA_POSITION {
                            f(Key(unmix(*h)), e.word, n);
                        }
                        // Visited: a second listing of the key is skipped.
                        e.count = 0;
                    }
                }
                s.crossed = crossed;
            } else {
                for (&h, e) in s.map.iter() {
                    let n = e.count_in(interval);
                    if n >= min && e.position != REPLICA_POSITION {
                        f(Key(unmix(h)), e.word, n);
                    }
                }
            }
            s.next_interval(min);
        }
    }

    /// Entries cached.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|p| lock(p).map.len()).sum()
    }

    /// True if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes accounted for the entries ([`ENTRY_BYTES`] each), at most `bytes_max`.
    pub fn bytes(&self) -> u64 {
        self.len() as u64 * ENTRY_BYTES
    }

    /// Counters summed over the shards.
    pub fn stats(&self) -> CacheStats {
        let mut total = CacheStats::default();
        for p in self.shards.iter() {
            total.add(&lock(p).stats);
        }
        total
    }
}

fn lock(p: &Padded) -> MutexGuard<'_, Shard> {
    // A panic under the lock may have left the map and the key array out of
    // step: fail loudly rather than serve from a broken shard.
    p.0.lock()
        .expect("location cache shard poisoned: a thread panicked while holding it")
}

/// Modular inverse of an odd `c` modulo 2^64 (Newton's iteration).
const fn inverse_odd(c: u64) -> u64 {
    let mut y = c; // correct to 3 bits for odd c; each step doubles the bits
    let mut i = 0;
    while i < 5 {
        y = y.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(y)));
        i += 1;
    }
    y
}

/// Inverse of [`mix`] (`unmix(mix(x)) == x`): entries are keyed by `mix(key)`.
pub fn unmix(mut x: u64) -> u64 {
    const INV_2: u64 = inverse_odd(0x94d0_49bb_1331_11eb);
    const INV_1: u64 = inverse_odd(0xbf58_476d_1ce4_e5b9);
    x ^= (x >> 31) ^ (x >> 62);
    x = x.wrapping_mul(INV_2);
    x ^= (x >> 27) ^ (x >> 54);
    x = x.wrapping_mul(INV_1);
    x ^= (x >> 30) ^ (x >> 60);
    x
}

#[cfg(test)]
mod tests;
