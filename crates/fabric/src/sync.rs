//! The atomics behind [`crate::Region`], switched to loom's under `cfg(loom)`.
//!
//! Normal builds use `std`'s. Built with `RUSTFLAGS="--cfg loom"`, regions are
//! arrays of loom atomics, so a loom model (`crates/store/tests/loom.rs`) runs
//! the store's word protocol on the real `Region` and explores every
//! interleaving and every weak-memory outcome its orderings allow.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU64, Ordering};
