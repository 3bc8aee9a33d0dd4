//! Embedded clusters live in `locus-node` (the embedded commands build them
//! too); the benchmarks use them from there.

pub use locus_node::embedded::*;
