//! The configuration of embedded clusters lives in `locus-node` (the
//! embedded commands read it too); the benchmarks use it from there.

pub use locus_node::embedded_config::*;
