//! The router's migration index (NetMigrate 4.2): the Bloom filter of completed groups and the
//! counting Bloom filter of groups under migration live in `locus-placement`, shared with the
//! graph store's elastic cluster; this module names them where the router has always found them.

pub use locus_placement::index::{BloomFilter, CountingBloomFilter, FILTER_BYTES_MAX, HASHES};
