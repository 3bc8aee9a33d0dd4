//! The key region: a fixed-size hash table of buckets (Pragh 2.1).
//!
//! ```text
//!  key region of one machine
//!  +----------------------+  offset 0
//!  | region header (64 B) |  word 0: magic, word 1: main buckets,
//!  |                      |  word 2: overflow buckets, word 3: overflow used (fetch-add)
//!  +----------------------+  64
//!  | main bucket 0        |  buckets are 128 bytes (one READ fetches a whole bucket)
//!  | ...                  |
//!  | main bucket B-1      |
//!  +----------------------+
//!  | overflow bucket 0    |  chained from full buckets
//!  | ...                  |
//!  +----------------------+
//!
//!  bucket (8 x 16 bytes)
//!  +-----------+---------------+
//!  | key word  | address word  |  slot 0
//!  |   ...     |     ...       |  slots 1..6
//!  | link word | (reserved 0)  |  slot 7: 0, or 1 + index of the next overflow bucket
//!  +-----------+---------------+
//!
//!  key word:  0 = empty;  otherwise 1<<63 | key   (key < 2^63)
//! ```
//! Slots fill in order along a chain and are never emptied (keys are
//! stationary and never deleted), so every inserter of a key visits the same
//! slots in the same order and claims the first empty one with a CAS on its
//! key word: two inserters of one key cannot claim two slots. The address
//! word is published after the key word; a reader that sees a key with a null
//! address treats it as absent. A chain is extended by taking an overflow
//! bucket with fetch-add and CASing it into the link word; the loser of that
//! race leaves its bucket unused (bounded: one bucket per lost race).

use locus_fabric::MachineId;

/// Bytes of the region header.
pub const HEADER_BYTES: u64 = 64;
/// Slots per bucket, including the link slot.
pub const SLOTS_PER_BUCKET: u64 = 8;
/// Slots that hold keys.
pub const KEY_SLOTS: u64 = SLOTS_PER_BUCKET - 1;
/// Bytes per slot (key word + address word).
pub const SLOT_BYTES: u64 = 16;
/// Bytes per bucket.
pub const BUCKET_BYTES: u64 = SLOTS_PER_BUCKET * SLOT_BYTES;
/// The key region's magic word ("LOCUSKEY").
pub const MAGIC: u64 = u64::from_le_bytes(*b"LOCUSKEY");
/// Offset of the overflow-used counter in the header.
pub const OVERFLOW_USED_OFFSET: u64 = 24;

const OCCUPIED: u64 = 1 << 63;

/// A key: vertex id in the low 32 bits, part index above (vertex decomposition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(pub u64);

impl Key {
    /// The key of part `part` of vertex `vertex`'s adjacency list.
    pub fn part(vertex: u32, part: u32) -> Key {
        debug_assert!(part < (1 << 31));
        Key(((part as u64) << 32) | vertex as u64)
    }
    /// The vertex.
    pub fn vertex(self) -> u32 {
        self.0 as u32
    }
    /// The part index.
    pub fn part_index(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// The key word stored in a slot.
    pub fn word(self) -> u64 {
        OCCUPIED | self.0
    }
    /// Decodes a slot's key word (`None`: empty).
    pub fn from_word(w: u64) -> Option<Key> {
        (w & OCCUPIED != 0).then_some(Key(w & !OCCUPIED))
    }
}

/// 64-bit mixer (SplitMix64's finaliser): spreads keys over buckets.
#[inline]
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Geometry of every machine's key region (the same on all machines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLayout {
    /// Main buckets (a power of two).
    pub buckets: u64,
    /// Overflow buckets.
    pub overflow_buckets: u64,
}

impl TableLayout {
    /// Region size in bytes.
    pub fn region_bytes(&self) -> u64 {
        HEADER_BYTES + (self.buckets + self.overflow_buckets) * BUCKET_BYTES
    }
    /// Keys the table can hold at most.
    pub fn capacity_keys(&self) -> u64 {
        (self.buckets + self.overflow_buckets) * KEY_SLOTS
    }
    /// The home bucket of a key.
    #[inline]
    pub fn bucket_of(&self, key: Key) -> u64 {
        mix(key.0) & (self.buckets - 1)
    }
    /// Byte offset of main bucket `b`.
    #[inline]
    pub fn bucket_offset(&self, b: u64) -> u64 {
        HEADER_BYTES + b * BUCKET_BYTES
    }
    /// Byte offset of overflow bucket `i`.
    #[inline]
    pub fn overflow_offset(&self, i: u64) -> u64 {
        self.bucket_offset(self.buckets + i)
    }
}

/// The home of a vertex under a new cluster's slot table (the default
/// slot count, slot `s` at machine `s % machines`), for tests and tools that
/// hold no table; the store places by its live table ([`crate::homes`]).
/// Equal to Pragh's `key % machines` (Fig. 6) when `machines` divides the
/// slot count.
#[inline]
pub fn home_of(vertex: u32, machines: usize) -> MachineId {
    (vertex % crate::homes::SLOTS_DEFAULT % machines as u32) as MachineId
}

/// A bucket's contents as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketView {
    /// (key word, address word) per key slot.
    pub slots: [(u64, u64); KEY_SLOTS as usize],
    /// 0, or 1 + next overflow bucket index.
    pub link: u64,
}

impl BucketView {
    /// Parses a bucket read as little-endian bytes.
    pub fn parse(bytes: &[u8]) -> BucketView {
        debug_assert_eq!(bytes.len() as u64, BUCKET_BYTES);
        let w = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let mut slots = [(0, 0); KEY_SLOTS as usize];
        for (i, s) in slots.iter_mut().enumerate() {
            *s = (w(2 * i), w(2 * i + 1));
        }
        BucketView {
            slots,
            link: w(2 * KEY_SLOTS as usize),
        }
    }

    /// Where a search for `key` stands after this bucket of its chain.
    /// Slots fill in order, so an empty one ends the chain.
    pub fn search(&self, key: Key) -> InChain {
        let found = self
            .slots
            .iter()
            .enumerate()
            .find(|(_, s)| s.0 == key.word() || s.0 == 0);
        match found {
            Some((i, &(kw, aw))) if kw == key.word() => InChain::Found {
                slot: i as u64,
                word: aw,
            },
            Some(_) => InChain::Absent,
            None if self.link == 0 => InChain::Absent,
            None => InChain::Next(self.link - 1),
        }
    }
}

/// A key's search after one bucket of its chain ([`BucketView::search`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InChain {
    /// In slot `slot`, with address word `word`.
    Found {
        /// The slot's index in the bucket.
        slot: u64,
        /// Its address word.
        word: u64,
    },
    /// Not in the table.
    Absent,
    /// Maybe in overflow bucket `n`: read it next.
    Next(u64),
}

/// Byte offset of the key word of slot `slot` in the bucket at `bucket_offset`.
#[inline]
pub fn key_word_offset(bucket_offset: u64, slot: u64) -> u64 {
    bucket_offset + slot * SLOT_BYTES
}

/// Byte offset of the address word of slot `slot`.
#[inline]
pub fn addr_word_offset(bucket_offset: u64, slot: u64) -> u64 {
    bucket_offset + slot * SLOT_BYTES + 8
}

/// Byte offset of the link word.
#[inline]
pub fn link_offset(bucket_offset: u64) -> u64 {
    bucket_offset + KEY_SLOTS * SLOT_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_words_round_trip() {
        for (v, p) in [(0, 0), (u32::MAX, 0), (7, (1 << 31) - 1)] {
            let k = Key::part(v, p);
            assert_eq!((k.vertex(), k.part_index()), (v, p));
            assert_eq!(Key::from_word(k.word()), Some(k));
        }
        assert_eq!(
            Key::from_word(0),
            None,
            "vertex 0 part 0 is not the empty word"
        );
        assert_ne!(Key::part(0, 0).word(), 0);
    }

    #[test]
    fn bucket_parse_reads_slots_and_link() {
        let mut b = vec![0u8; BUCKET_BYTES as usize];
        b[16..24].copy_from_slice(&Key(5).word().to_le_bytes());
        b[24..32].copy_from_slice(&99u64.to_le_bytes());
        b[112..120].copy_from_slice(&3u64.to_le_bytes());
        let v = BucketView::parse(&b);
        assert_eq!(v.slots[1], (Key(5).word(), 99));
        assert_eq!(v.link, 3);
        assert_eq!(link_offset(0), 112);
    }

    #[test]
    fn home_is_vertex_mod_machines() {
        assert_eq!(home_of(17, 8), 1);
        assert_eq!(home_of(17, 1), 0);
        assert_eq!(home_of(u32::MAX, 128), 127);
        // 4096 + 1 is in slot 1, at machine 1 of 3 (4097 % 3 would say 2).
        assert_eq!(home_of(4097, 3), 1);
    }
}
