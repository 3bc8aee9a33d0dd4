//! Graph input for Locus: where the graphs the store holds come from.
//!
//! Three pieces, each a module:
//! - [`rmat`] generates R-MAT / Graph500 Kronecker graphs. Edge `i` is a pure function
//!   of the seed and `i` (a counter-based SplitMix64 stream), so generation is
//!   deterministic, splits across any number of threads, and can be repeated instead of
//!   stored. Vertex ids are relabelled by a keyed Feistel bijection.
//! - [`input`] loads and writes edge lists: SNAP-style text and GridGraph binary.
//!   Loading is all or nothing, and every rejection names the file, the line or byte
//!   offset, and the reason.
//! - [`csr`] builds compressed sparse row adjacency from any [`EdgeSource`] in two
//!   passes (count, then fill), so an R-MAT graph at scale 26 is built without its
//!   edge list in memory. Adjacency lists come out sorted, optionally symmetrized,
//!   deduplicated and without self loops.
//!
//! Long loads and builds draw an `indicatif` progress bar, but only when stderr is a
//! terminal; otherwise nothing is printed. Every failure is a [`GraphError`].

#![deny(unsafe_code)] // `huge` allows one madvise(2) call
#![warn(missing_docs)]

pub mod adjacency;
pub mod csr;
pub mod error;
mod huge;
pub mod input;
mod progress;
pub mod rmat;

pub use adjacency::{Adjacency, Lists};
pub use csr::{Csr, CsrOptions, EdgeSource};
pub use error::{GraphError, Result};
pub use input::{EdgeList, Format, LoadOptions};
pub use rmat::{FeistelPermutation, Rmat, RmatConfig};

/// A vertex id. `u32::MAX` is reserved (as a sentinel for the layers above).
pub type VertexId = u32;

/// A directed edge `(src, dst)`.
pub type Edge = (VertexId, VertexId);

/// The largest usable vertex id.
pub const VERTEX_ID_MAX: VertexId = u32::MAX - 1;

/// The largest vertex count: ids `0..=VERTEX_ID_MAX`.
pub const VERTEX_COUNT_MAX: u64 = VERTEX_ID_MAX as u64 + 1;

/// Upper bound on worker threads any function here will start.
pub const THREADS_MAX: usize = 256;

/// The number of threads to use by default: the available parallelism, at least 1.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Clamps a requested thread count to `1..=THREADS_MAX`.
pub(crate) fn clamp_threads(threads: usize) -> usize {
    threads.clamp(1, THREADS_MAX)
}
