//! Locus as running processes (Pragh 3: one server per machine, a
//! coordinator, clients).
//!
//! - [`config`]: the cluster file every process and client reads.
//! - [`Server`]: one machine of the store over the TCP fabric, serving the
//!   client protocol of `docs/protocol.md` (`conn.rs` the listener and
//!   connections, `ops.rs` the requests, `stats.rs` STATS).
//! - `metrics.rs`: Prometheus metrics on a loopback port.

#![warn(missing_docs)]

pub mod config;
mod conn;
mod error;
mod metrics;
mod ops;
mod server;
mod stats;

pub use config::ClusterFile;
pub use error::{Result, ServerError};
pub use ops::FRONTIER_MAX;
pub use server::{Server, ServerFabric};
