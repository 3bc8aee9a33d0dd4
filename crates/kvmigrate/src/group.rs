//! Key -> bucket -> migration group (NetMigrate 4.2: a group is a run of adjacent hash buckets).
//!
//! The server's hash table and the router compute the same mapping, so the router needs only
//! the geometry of the migrating shard (two small numbers in its instance table), no per-key state.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The 64-bit mixer the filters hash with (from `locus-placement`).
pub use locus_placement::mix64;

/// Hash-table shape of one shard: `2^buckets_log2` buckets, groups of `2^group_buckets_log2`
/// adjacent buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    /// log2 of the bucket count.
    pub buckets_log2: u8,
    /// log2 of the buckets per migration group.
    pub group_buckets_log2: u8,
}

impl Geometry {
    /// Largest table: 2^28 buckets (the paper's 256 Mi keys at one key per bucket).
    pub const BUCKETS_LOG2_MAX: u8 = 28;

    /// A checked geometry.
    pub fn new(buckets_log2: u8, group_buckets_log2: u8) -> Result<Self> {
        if buckets_log2 > Self::BUCKETS_LOG2_MAX {
            return Err(Error::InvalidSetting {
                key: "buckets_log2",
                value: buckets_log2.to_string(),
                expected: format!("at most {}", Self::BUCKETS_LOG2_MAX),
            });
        }
        if group_buckets_log2 > buckets_log2 {
            return Err(Error::InvalidSetting {
                key: "group_buckets_log2",
                value: group_buckets_log2.to_string(),
                expected: format!("at most buckets_log2 = {buckets_log2}"),
            });
        }
        Ok(Self {
            buckets_log2,
            group_buckets_log2,
        })
    }

    /// Number of buckets.
    pub fn buckets(&self) -> u64 {
        1u64 << self.buckets_log2
    }

    /// Number of migration groups.
    pub fn groups(&self) -> u32 {
        1u32 << (self.buckets_log2 - self.group_buckets_log2)
    }

    /// The bucket a key hashes to.
    #[inline]
    pub fn bucket_of(&self, key: u64) -> u64 {
        mix64(key) & (self.buckets() - 1)
    }

    /// The migration group a key belongs to.
    #[inline]
    pub fn group_of(&self, key: u64) -> u32 {
        (self.bucket_of(key) >> self.group_buckets_log2) as u32
    }
}

impl Default for Geometry {
    /// The paper's group size (2048 pairs per group, NetMigrate 6.1) on a 2^20-bucket table.
    fn default() -> Self {
        Self {
            buckets_log2: 20,
            group_buckets_log2: 11,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_partition_the_buckets() {
        let g = Geometry::new(10, 3).unwrap();
        assert_eq!(g.groups(), 128);
        for key in 0..10_000u64 {
            let b = g.bucket_of(key);
            assert!(b < 1024);
            assert_eq!(g.group_of(key) as u64, b >> 3);
        }
    }

    #[test]
    fn limits_are_checked() {
        assert!(Geometry::new(29, 1).is_err());
        assert!(Geometry::new(4, 5).is_err());
        let g = Geometry::new(28, 0).unwrap();
        assert_eq!(g.groups(), 1 << 28);
        assert_eq!(Geometry::new(5, 5).unwrap().groups(), 1);
    }
}
