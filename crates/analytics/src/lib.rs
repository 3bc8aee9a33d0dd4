//! Far-memory graph analytics for Locus: Fargraph+ (JPDC 2023) on GridGraph's
//! design, over the one-sided fabric.
//!
//! How it works. [`grid`] cuts an edge list into P x P blocks by source and
//! destination range, kept in row and column order. The [`engine`] streams
//! blocks to `stream_edges` callbacks with selective scheduling, one fetch
//! stream per thread, double buffered; vertex data lives in local arrays.
//! Edge blocks come from an [`store::EdgeStore`]: [`store::local`] (Oracle,
//! all in memory), [`store::disk`] (GridGraph out-of-core), [`store::far`]
//! (Fargraph+: blocks in another machine's memory, chunked one-sided READs)
//! or [`store::paged`] (Fastswap-like: 4 KB pages into an LRU cache). Under a
//! far-memory ratio, [`placement`] classifies data segments into Fig. 9's
//! four groups from a profile (by default one estimated from block sizes and
//! degrees before the run; or one [`saved`] from an earlier run; or a timed
//! profiling run) and decides which blocks stay local.
//! [`server`] is the far-memory daemon and its control protocol, [`control`]
//! the offline thread table and the online choice from it, [`algo`] BFS,
//! WCC, PageRank and Radii, and GAP's SSSP (on weights stored in the
//! blocks, read by [`weighted`]), BC and TC (on a local CSR), [`verify`]
//! GAPBS's checks of each, [`reference`] their plain versions for tests,
//! and [`run`] a whole run with its report. [`input`] loads a graph within
//! the memory limit [`memory`] estimates (refusing huge ids, or compacting
//! them), [`results`] writes per-vertex results as text or binary, and
//! [`prepared`] keeps a preprocessed grid on disk for later runs; [`layout`]
//! is how an edge is encoded in a block (4-byte block-relative or 8-byte).
//! [`vertex`] holds the algorithms' per-vertex arrays, in local memory or,
//! with the paged backend's `paged_vertices`, in memory the
//! [`store::vpage`] pager pages through userfaultfd.

// Unsafe code is allowed in two modules only: `vertex` (arrays in a raw
// mapping) and `store::uffd` (the userfaultfd calls), each saying why.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod algo;
pub mod bitmap;
pub mod control;
pub mod engine;
mod error;
pub mod grid;
pub mod input;
pub mod layout;
pub mod memory;
mod parallel;
pub mod placement;
pub mod prepared;
pub mod reference;
pub mod results;
pub mod run;
pub mod saved;
pub mod server;
pub mod store;
pub mod verify;
#[allow(unsafe_code)] // arrays placed in the vertex pager's mapping (see its doc)
pub mod vertex;
pub mod weighted;
pub mod window;

pub use algo::{Algo, Output, Params, Precision};
pub use bitmap::Bitmap;
pub use engine::{Engine, EngineConfig, Profile};
pub use error::{AnalyticsError, Result};
pub use grid::{GraphInput, Grid, Order, Shape};
pub use run::{local_fabric, run, Report, RunConfig};
pub use store::{Backend, EdgeStore};
