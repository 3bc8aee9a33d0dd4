//! The server's hash table: `2^buckets_log2` buckets of versioned entries, scanned one migration
//! group (a run of adjacent buckets) at a time (NetMigrate 4.2, 5: "scan key-value pairs in the
//! order of hash values").
//!
//! Deletions leave a tombstone carrying the deleting write's version, so that a migrated copy or
//! a late write can never resurrect a deleted key (the destination compares versions, 7).

use crate::group::Geometry;
use crate::wire::{Item, Key};

#[derive(Clone, Debug)]
struct Entry {
    key: Key,
    version: u64,
    value: Option<Vec<u8>>,
}

/// A versioned, bucketed key-value table.
pub struct Table {
    geometry: Geometry,
    buckets: Vec<Vec<Entry>>,
    live: usize,
}

impl Table {
    /// An empty table of this shape.
    pub fn new(geometry: Geometry) -> Self {
        Self {
            geometry,
            buckets: vec![Vec::new(); geometry.buckets() as usize],
            live: 0,
        }
    }

    /// The table's shape.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Keys with a value (tombstones excluded).
    pub fn live(&self) -> usize {
        self.live
    }

    fn bucket(&self, key: Key) -> usize {
        self.geometry.bucket_of(key) as usize
    }

    /// The entry of `key` (value, tombstone, or absent-marker), if the table has one.
    pub fn get(&self, key: Key) -> Option<Item> {
        self.buckets[self.bucket(key)]
            .iter()
            .find(|e| e.key == key)
            .map(|e| Item {
                key,
                version: e.version,
                value: e.value.clone(),
            })
    }

    /// The version of `key`, 0 if the table has no entry.
    pub fn version(&self, key: Key) -> u64 {
        self.buckets[self.bucket(key)]
            .iter()
            .find(|e| e.key == key)
            .map_or(0, |e| e.version)
    }

    /// Writes unconditionally (the caller chose a version above the current one).
    pub fn put(&mut self, item: Item) {
        let b = self.bucket(item.key);
        let live = item.value.is_some();
        match self.buckets[b].iter_mut().find(|e| e.key == item.key) {
            Some(e) => {
                debug_assert!(item.version >= e.version, "version went backwards");
                match (e.value.is_some(), live) {
                    (true, false) => self.live -= 1,
                    (false, true) => self.live += 1,
                    _ => {}
                }
                e.version = item.version;
                e.value = item.value;
            }
            None => {
                self.live += live as usize;
                self.buckets[b].push(Entry {
                    key: item.key,
                    version: item.version,
                    value: item.value,
                });
            }
        }
    }

    /// Installs a migrated or pulled pair unless the table already holds this or a newer version
    /// (NetMigrate 4.2: never overwrite a newer write). An absent item (version 0) leaves a
    /// marker so the destination does not pull the key again. Returns whether it changed anything.
    pub fn install_if_newer(&mut self, item: Item) -> bool {
        let b = self.bucket(item.key);
        match self.buckets[b].iter().position(|e| e.key == item.key) {
            Some(i) if self.buckets[b][i].version >= item.version => false,
            _ => {
                self.put(item);
                true
            }
        }
    }

    /// Every entry of one migration group (values and tombstones; absent-markers skipped).
    pub fn scan_group(&self, group: u32) -> Vec<Item> {
        let per = 1usize << self.geometry.group_buckets_log2;
        let first = group as usize * per;
        self.buckets[first..first + per]
            .iter()
            .flatten()
            .filter(|e| e.version != 0)
            .map(|e| Item {
                key: e.key,
                version: e.version,
                value: e.value.clone(),
            })
            .collect()
    }

    /// Drops everything (the source's clean-up after termination, NetMigrate 4.1).
    pub fn clear(&mut self) {
        self.buckets.iter_mut().for_each(Vec::clear);
        self.live = 0;
    }
}

/// The storage seam of a server: what the agents need from the store holding one shard. [`Table`]
/// is the built-in in-memory store; `crate::redis::RedisShard` keeps the same entries in a stock
/// `redis-server` with ordinary commands. Methods are infallible so the protocol code stays a
/// plain state machine; a store that cannot reach its backing service answers with placeholders
/// and reports it through [`ShardStore::health`], and the driver then drops everything that step
/// produced and stops the node (a crash, never a wrong answer).
pub trait ShardStore: Send {
    /// The store's shape.
    fn geometry(&self) -> Geometry;
    /// Keys with a value (tombstones excluded).
    fn live(&self) -> usize;
    /// The entry of `key`, if the store has one.
    fn get(&self, key: Key) -> Option<Item>;
    /// The version of `key`, 0 if the store has no entry.
    fn version(&self, key: Key) -> u64;
    /// Writes unconditionally (the caller chose a version above the current one).
    fn put(&mut self, item: Item);
    /// A client write: stores `value` (`None`: a tombstone) at version
    /// `candidate.max(current + 1)` and returns that version. One step, so a remote store
    /// reads the current version and writes in one round trip (issue 16: Redis at par).
    fn put_next(&mut self, key: Key, candidate: u64, value: Option<Vec<u8>>) -> u64 {
        let version = candidate.max(self.version(key) + 1);
        self.put(Item {
            key,
            version,
            value,
        });
        version
    }
    /// Installs unless this or a newer version is already here; whether it changed anything.
    fn install_if_newer(&mut self, item: Item) -> bool;
    /// [`ShardStore::install_if_newer`] for a whole DATA batch (a remote store pipelines it).
    fn install_batch(&mut self, items: Vec<Item>) {
        for item in items {
            self.install_if_newer(item);
        }
    }
    /// Every entry of one migration group (values and tombstones; absent-markers skipped).
    fn scan_group(&self, group: u32) -> Vec<Item>;
    /// Drops everything (the source's clean-up after termination).
    fn clear(&mut self);
    /// A second path to the same backing store that applies DATA batches on a thread of its
    /// own (`crate::install`), for a store whose installs would hold up the queries behind
    /// them (a remote store's pipelines); the node asks its own shard's store once. `None`
    /// (the default): the node installs inline, which is cheaper for an in-memory store.
    fn installer(&self) -> crate::error::Result<Option<Box<dyn crate::install::Installer>>> {
        Ok(None)
    }

    /// `Err` once the store has failed; every answer since then is a placeholder.
    fn health(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}

impl ShardStore for Table {
    fn geometry(&self) -> Geometry {
        Table::geometry(self)
    }
    fn live(&self) -> usize {
        Table::live(self)
    }
    fn get(&self, key: Key) -> Option<Item> {
        Table::get(self, key)
    }
    fn version(&self, key: Key) -> u64 {
        Table::version(self, key)
    }
    fn put(&mut self, item: Item) {
        Table::put(self, item)
    }
    fn install_if_newer(&mut self, item: Item) -> bool {
        Table::install_if_newer(self, item)
    }
    fn scan_group(&self, group: u32) -> Vec<Item> {
        Table::scan_group(self, group)
    }
    fn clear(&mut self) {
        Table::clear(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: Key, version: u64, value: Option<&[u8]>) -> Item {
        Item {
            key,
            version,
            value: value.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn newer_writes_are_never_overwritten() {
        let mut t = Table::new(Geometry::new(4, 1).unwrap());
        t.put(item(1, 10, Some(b"new")));
        assert!(!t.install_if_newer(item(1, 5, Some(b"old"))));
        assert!(!t.install_if_newer(item(1, 10, Some(b"same"))));
        assert_eq!(t.get(1).unwrap().value.as_deref(), Some(&b"new"[..]));
        assert!(t.install_if_newer(item(1, 11, None)));
        assert_eq!(t.live(), 0);
        assert!(
            !t.install_if_newer(item(1, 3, Some(b"zombie"))),
            "tombstone wins"
        );
        assert!(t.install_if_newer(item(2, 0, None)));
        assert_eq!(t.get(2).unwrap().version, 0);
    }

    #[test]
    fn groups_scan_exactly_their_keys() {
        let g = Geometry::new(6, 2).unwrap();
        let mut t = Table::new(g);
        for k in 0..500 {
            t.put(item(k, k + 1, Some(&[1])));
        }
        let mut seen = 0;
        for group in 0..g.groups() {
            for it in t.scan_group(group) {
                assert_eq!(g.group_of(it.key), group);
                seen += 1;
            }
        }
        assert_eq!(seen, 500);
        assert_eq!(t.live(), 500);
    }
}
