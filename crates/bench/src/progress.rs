//! [`Reporter`] lives in `locus-node` (embedded commands report progress
//! too); the benchmarks use it from there.

pub use locus_node::progress::Reporter;
