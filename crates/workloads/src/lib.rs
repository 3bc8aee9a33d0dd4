//! Workloads: how start vertices are chosen ([`zipf`], uniform) and the
//! driver that runs traversal queries on a worker pool ([`traversal`]),
//! measuring throughput, latency percentiles and the remote-access rate;
//! and YCSB's core workloads reproduced sample for sample ([`ycsb`]); the
//! linearizability checker of per-vertex histories ([`history`]).
//! Every failure is a [`WorkloadError`] ([`error`]).

#![warn(missing_docs)]

pub mod error;
pub mod history;
pub mod traversal;
pub mod ycsb;
pub mod zipf;

pub use error::{Result, WorkloadError};
