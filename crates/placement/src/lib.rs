//! Where a key lives, without I/O: shared by the graph store's elastic
//! cluster (`docs/design.md`, "The elastic cluster") and NetMigrate's
//! key-value store (`locus-kvmigrate`).
//!
//! - [`slots`]: the slot table: `slot(v) = v % slots`, an owner per slot, an
//!   epoch; with replication, up to two backups and a primary epoch per slot
//!   and fail-over; its wire form and a balancing plan.
//! - [`index`]: NetMigrate 4.2's migration index: a Bloom filter of groups
//!   done and a counting Bloom filter of groups in flight, 4 hash functions
//!   each (NetMigrate 5), and the routing decision of NetMigrate Fig. 3
//!   ([`index::classify`], [`index::decide`]).

mod error;
pub mod index;
pub mod slots;

pub use error::{PlacementError, Result};

/// A 64-bit mixer (splitmix64's finaliser): a cheap, well-spread hash, as a
/// switch would compute with its CRC units.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    #[test]
    fn mix64_is_pinned_for_the_other_clients() {
        // The Python client's migration-index look-ups hash the same way
        // (clients/python/locus_client/slots.py checks this value too).
        assert_eq!(super::mix64(5), 0x6303_3b0c_a389_c35a);
    }
}
