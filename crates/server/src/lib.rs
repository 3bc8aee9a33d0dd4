//! Locus as running processes (Pragh 3: one server per machine, a
//! coordinator, clients).
//!
//! - [`config`]: the cluster file every process and client reads.
//! - [`Server`]: one machine of the store over the TCP fabric, serving the
//!   client protocol of `docs/protocol.md` (`conn.rs` the listener and
//!   connections, `stats.rs` STATS; the node answers every other request).
//! - [`CoordinatorProcess`]: the coordinator of Pragh 4.4 as its own
//!   process; servers reach it over the control link (`control.rs` is the
//!   server's side: its monitor and migration executor). With `[etcd]` it is
//!   elected and keeps its record in etcd (`election.rs`).
//! - `metrics.rs`: Prometheus metrics on a loopback port.
//! - The store, the log, request handling and Pragh 5 recovery are the
//!   node's ([`locus_node::Node`]); a server runs one node behind its
//!   threads: connections, the checkpointer, the value-region scan, the
//!   coordinator link and the membership watch.
//! - [`supervise`]: the one supervisor of these processes (ports, start,
//!   readiness, log tails, ending them), for `locus cluster` and the
//!   benchmarks.
//! - [`moves`]: the driver of slot moves across running servers
//!   (`locus cluster move`).
//! - `member.rs`: with `[etcd]`, the server's epoch, registration under a
//!   lease, the membership watch (each event through
//!   `locus_node::member::on_event`, as the simulated cluster's) and
//!   fencing when the lease is lost.

#![warn(missing_docs)]

pub mod config;
mod conn;
mod control;
mod coordinator;
mod election;
mod error;
mod member;
mod metrics;
pub mod moves;
mod server;
mod settler;
mod stats;
pub mod supervise;

pub use config::ClusterFile;
pub use coordinator::{CoordinatorProcess, CoordinatorStats, COORDINATOR_ID};
pub use error::{Result, ServerError};
pub use locus_node::node::recovery;
pub use locus_node::node::FRONTIER_MAX;
pub use server::{Server, ServerFabric};
