//! Locus as running processes (Pragh 3: one server per machine, a
//! coordinator, clients).
//!
//! - [`config`]: the cluster file every process and client reads.
//! - [`Server`]: one machine of the store over the TCP fabric, serving the
//!   client protocol of `docs/protocol.md` (`conn.rs` the listener and
//!   connections, `ops.rs` the requests, `stats.rs` STATS).
//! - [`CoordinatorProcess`]: the coordinator of Pragh 4.4 as its own
//!   process; servers reach it over the control link (`control.rs` is the
//!   server's side: its monitor and migration executor). With `[etcd]` it is
//!   elected and keeps its record in etcd (`election.rs`).
//! - `metrics.rs`: Prometheus metrics on a loopback port.
//! - `durable.rs`: with `[durability]`, the write-ahead log of what this
//!   server homes, checkpoints and recovery at start (`locus-wal`).
//! - [`recovery`]: Pragh 5 at a survivor when a peer dies or rejoins, and
//!   the background value-region scan.
//! - [`supervise`]: the one supervisor of these processes (ports, start,
//!   readiness, log tails, ending them), for `locus cluster` and the
//!   benchmarks.
//! - `member.rs`: with `[etcd]`, the server's epoch, registration under a
//!   lease, the membership watch (fabric epoch table, then the
//!   `on_membership_event` hook) and fencing when the lease is lost.

#![warn(missing_docs)]

pub mod config;
mod conn;
mod control;
mod coordinator;
mod durable;
mod election;
mod error;
mod member;
mod metrics;
mod ops;
pub mod recovery;
mod server;
mod stats;
pub mod supervise;

pub use config::ClusterFile;
pub use coordinator::{CoordinatorProcess, CoordinatorStats, COORDINATOR_ID};
pub use error::{Result, ServerError};
pub use ops::FRONTIER_MAX;
pub use server::{Server, ServerFabric};
