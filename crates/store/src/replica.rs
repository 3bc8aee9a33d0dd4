//! Read-only replicas of hot shared values (a Locus extension: Pragh 6.1
//! leaves the values that queries on several machines share remote, and
//! names replication as future work).
//!
//! Split migration keeps one copy of every value, so a value read by queries
//! on several machines stays remote for all but one of them. A *replica* is
//! a second, read-only copy of a value in a reader's own value region, found
//! through the reader's location cache (a replica entry, see
//! [`crate::cache`]) and kept correct by the update path.
//!
//! ```text
//!  reader R                              home of v (key's table, vertex lock)
//!  --------                              ------------------------------------
//!  READ value at W (header checked)
//!  ALLOC block B here, WRITE header+payload
//!  REGISTER(key, W, B) ----------------> try the vertex lock (busy: refuse)
//!                                        current word == W ? list (key, R, B) : refuse
//!           <--------------------------- yes / no
//!  yes: cache entry key -> B (replica)
//!  no:  free B (nobody else knows it)
//!
//!  update of v (vertex op at the home, under v's lock):
//!    take v's directory entries; WRITE 0 over each replica's header; wait;
//!    then the part ops publish the new value (Pragh 4.3's path, unchanged)
//!
//!  read at R through the replica entry: one local READ of B; a zero header
//!  means "invalidated": drop the entry, retire B, read the key normally.
//! ```
//!
//! Invariants:
//! 1. A replica block's header is valid only while its payload equals the
//!    key's current value, or while an update of the vertex holds the home's
//!    vertex lock and has not published yet (an update invalidates every
//!    listed replica before its first part op publishes).
//! 2. A registration is accepted only under the vertex lock and only if the
//!    key's address word still equals the word the copy was read from. Every
//!    update and every migration changes that word, and an update holds the
//!    lock from invalidation to publication, so an accepted replica was
//!    current when listed and any later update will invalidate it.
//! 3. Migration never changes a value's content, so it never invalidates a
//!    replica (a migration between copy and registration only makes the
//!    registration fail, by 2).
//! 4. A replica block is reused only after its owner saw its header zeroed
//!    (the home listed it no more: no later WRITE can reach it) or after a
//!    refused registration (never listed), and then only after the reclaim
//!    lease, like any retired value (readers may hold its address).
//! 5. Registration never waits (a busy vertex lock is a refusal), so a
//!    machine answering it while it coordinates an update cannot deadlock.
//!
//! A read served by a valid replica linearizes at its READ: by 1, no update
//! of the key has published since the copy, or one is in progress and has not.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use locus_fabric::MachineId;

use crate::table::Key;
use crate::VertexId;

/// Directory entries a home keeps at most, by default (a refused
/// registration beyond it only costs the reader its replica).
pub const DIRECTORY_ENTRIES_MAX: usize = 1 << 20;
const SHARDS: usize = 64;

/// One replica as its key's home lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    /// The replicated key (a part of the vertex).
    pub key: Key,
    /// The machine holding the replica.
    pub machine: MachineId,
    /// The replica block's offset in that machine's value region, in 8-byte units.
    pub offset_units: u64,
}

type DirectoryShard = Mutex<HashMap<VertexId, Vec<Listed>>>;

/// A home's list of the replicas of its vertices (invariants 1, 2).
#[derive(Debug)]
pub struct ReplicaDirectory {
    shards: Box<[DirectoryShard]>,
    entries: std::sync::atomic::AtomicUsize,
    entries_max: usize,
}

impl ReplicaDirectory {
    /// An empty directory holding at most `entries_max` replicas.
    pub fn new(entries_max: usize) -> Self {
        ReplicaDirectory {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            entries: std::sync::atomic::AtomicUsize::new(0),
            entries_max,
        }
    }

    fn shard(&self, v: VertexId) -> std::sync::MutexGuard<'_, HashMap<VertexId, Vec<Listed>>> {
        let i = crate::table::mix(v as u64) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lists a replica; false if the directory is full. The caller holds the
    /// vertex lock and has checked the key's address word (invariant 2).
    pub fn list(&self, entry: Listed) -> bool {
        use std::sync::atomic::Ordering;
        let mut s = self.shard(entry.key.vertex());
        let list = s.entry(entry.key.vertex()).or_default();
        if list.contains(&entry) {
            return true;
        }
        if self.entries.load(Ordering::Relaxed) >= self.entries_max {
            return false;
        }
        self.entries.fetch_add(1, Ordering::Relaxed);
        list.push(entry);
        true
    }

    /// Removes and returns every replica of `v`'s keys (the update path,
    /// under the vertex lock, before publishing: invariant 1).
    pub fn take(&self, v: VertexId) -> Vec<Listed> {
        let taken = self.shard(v).remove(&v).unwrap_or_default();
        self.entries
            .fetch_sub(taken.len(), std::sync::atomic::Ordering::Relaxed);
        taken
    }

    /// Removes every replica held by `machine` (it died: its region is gone,
    /// and an invalidation WRITE must never reach its replacement's memory).
    /// Returns how many.
    pub fn remove_machine(&self, machine: MachineId) -> usize {
        let mut removed = 0;
        for shard in self.shards.iter() {
            let mut s = shard.lock().unwrap_or_else(|e| e.into_inner());
            s.retain(|_, list| {
                let before = list.len();
                list.retain(|l| l.machine != machine);
                removed += before - list.len();
                !list.is_empty()
            });
        }
        self.entries
            .fetch_sub(removed, std::sync::atomic::Ordering::Relaxed);
        removed
    }

    /// True if some replica of `v` is listed.
    pub fn is_listed(&self, v: VertexId) -> bool {
        self.shard(v).contains_key(&v)
    }

    /// Replicas listed.
    pub fn len(&self) -> usize {
        self.entries.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True if none is listed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The replicas one machine holds: key to the replica block's address word
/// (a remote-type word naming this machine), plus registered blocks that
/// lost their key's entry to a newer replica and wait to be seen invalidated
/// (invariant 4).
#[derive(Debug)]
pub struct ReplicaSet {
    inner: Mutex<SetInner>,
    /// When a full set was last swept (fabric clock, ns; `u64::MAX`: never).
    last_sweep_ns: AtomicU64,
}

#[derive(Debug, Default)]
struct SetInner {
    held: HashMap<Key, u64>,
    /// Registered blocks no key entry points at any more.
    orphans: Vec<u64>,
    bytes: u64,
}

impl Default for ReplicaSet {
    fn default() -> Self {
        ReplicaSet {
            inner: Mutex::default(),
            last_sweep_ns: AtomicU64::new(u64::MAX),
        }
    }
}

impl ReplicaSet {
    fn lock(&self) -> std::sync::MutexGuard<'_, SetInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True (and the sweep is this caller's) if no full-set sweep was
    /// claimed in the `interval_ns` before `now_ns`; one caller wins a race.
    pub fn claim_sweep(&self, now_ns: u64, interval_ns: u64) -> bool {
        let last = self.last_sweep_ns.load(Ordering::Relaxed);
        let due = last == u64::MAX || now_ns.saturating_sub(last) >= interval_ns;
        due && self
            .last_sweep_ns
            .compare_exchange(last, now_ns, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// The replica word held for `key`.
    pub fn get(&self, key: Key) -> Option<u64> {
        self.lock().held.get(&key).copied()
    }

    /// Records a registered replica of `bytes` bytes. An older replica of the
    /// same key becomes an orphan (still listed at the home until it is
    /// invalidated, so its block cannot be reused yet).
    pub fn insert(&self, key: Key, word: u64, bytes: u64) {
        let mut s = self.lock();
        s.bytes += bytes;
        if let Some(old) = s.held.insert(key, word) {
            s.orphans.push(old);
        }
    }

    /// Forgets `key`'s replica if it is still `word`; true if it did (the
    /// caller then owns the block and retires it).
    pub fn remove_if(&self, key: Key, word: u64, bytes: u64) -> bool {
        let mut s = self.lock();
        if s.held.get(&key) != Some(&word) {
            return false;
        }
        s.held.remove(&key);
        s.bytes = s.bytes.saturating_sub(bytes);
        true
    }

    /// Every held (key, word) and every orphan (`None`, word), for a sweep:
    /// the caller reads each block's header without holding this set's lock
    /// (a fabric operation is a scheduling point in the simulation) and
    /// gives back the invalid ones to [`ReplicaSet::forget`].
    /// Sorted, so a seeded simulation visits the blocks in the same order
    /// on every run (the set is a `HashMap` with a random hasher).
    pub fn snapshot(&self) -> Vec<(Option<Key>, u64)> {
        let mut out: Vec<(Option<Key>, u64)> = {
            let s = self.lock();
            s.held
                .iter()
                .map(|(&k, &w)| (Some(k), w))
                .chain(s.orphans.iter().map(|&w| (None, w)))
                .collect()
        };
        out.sort_unstable();
        out
    }

    /// Forgets the replicas a sweep found invalid (a held one only if its key
    /// still maps to that word); returns those forgotten, whose blocks the
    /// caller now owns and retires. `bytes_of(word)` is a block's size.
    pub fn forget(
        &self,
        dead: &[(Option<Key>, u64)],
        bytes_of: impl Fn(u64) -> u64,
    ) -> Vec<(Option<Key>, u64)> {
        let mut s = self.lock();
        let mut out = Vec::new();
        for &(key, w) in dead {
            let gone = match key {
                Some(k) if s.held.get(&k) == Some(&w) => {
                    s.held.remove(&k);
                    true
                }
                Some(_) => false,
                None => match s.orphans.iter().position(|&o| o == w) {
                    Some(i) => {
                        s.orphans.swap_remove(i);
                        true
                    }
                    None => false,
                },
            };
            if gone {
                s.bytes = s.bytes.saturating_sub(bytes_of(w));
                out.push((key, w));
            }
        }
        out
    }

    /// Forgets every held replica whose key `drop` selects and returns them
    /// (key, word); the caller owns their blocks and retires them. For keys
    /// whose home died: no directory lists them any more, so no update
    /// would invalidate them.
    pub fn take_where(
        &self,
        mut drop: impl FnMut(Key) -> bool,
        bytes_of: impl Fn(u64) -> u64,
    ) -> Vec<(Key, u64)> {
        let mut s = self.lock();
        let gone: Vec<(Key, u64)> = s
            .held
            .iter()
            .filter(|(k, _)| drop(**k))
            .map(|(&k, &w)| (k, w))
            .collect();
        for (k, w) in &gone {
            s.held.remove(k);
            s.bytes = s.bytes.saturating_sub(bytes_of(*w));
        }
        gone
    }

    /// Replicas held (not counting orphans).
    pub fn len(&self) -> usize {
        self.lock().held.len()
    }

    /// True if none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of replica blocks held, orphans included.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_lists_takes_and_bounds() {
        let d = ReplicaDirectory::new(2);
        let e = |v, m| Listed {
            key: Key::part(v, 0),
            machine: m,
            offset_units: 8,
        };
        assert!(d.list(e(1, 2)));
        assert!(d.list(e(1, 2)), "listing twice is one entry");
        assert!(d.list(e(1, 3)));
        assert!(!d.list(e(2, 3)), "full");
        assert_eq!(d.len(), 2);
        assert_eq!(d.take(1).len(), 2);
        assert!(d.take(1).is_empty());
        assert!(d.is_empty());
        assert!(d.list(e(2, 3)));
    }

    #[test]
    fn set_orphans_a_replaced_replica_until_it_is_seen_invalid() {
        let s = ReplicaSet::default();
        let k = Key::part(5, 0);
        s.insert(k, 100, 16);
        s.insert(k, 200, 16);
        assert_eq!(s.get(k), Some(200));
        assert_eq!(s.bytes(), 32);
        assert_eq!(s.snapshot(), vec![(None, 100), (Some(k), 200)], "sorted");
        // Only what is still there is forgotten, once.
        let gone = s.forget(&[(None, 100), (Some(k), 300)], |_| 16);
        assert_eq!(gone, vec![(None, 100)]);
        assert!(s.forget(&[(None, 100)], |_| 16).is_empty());
        assert!(!s.remove_if(k, 100, 16));
        assert!(s.remove_if(k, 200, 16));
        assert_eq!(s.bytes(), 0);
        assert!(s.is_empty());
    }
}
