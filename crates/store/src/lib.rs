//! The graph key-value store (Pragh 2.1, 3, 4.1).
//!
//! Vertices are keys and adjacency lists are values, hash-partitioned over the
//! machines of a [`locus_fabric::Fabric`]: a vertex's key lives in the key
//! region of its home machine (its slot's owner, [`homes`]; Pragh's
//! `vertex % machines` when slots equal machines), a fixed-size hash table
//! of buckets ([`table`]); each slot holds the key and a 64-bit address word
//! ([`addr`]) pointing at the value, which lives in some machine's value
//! region behind a header word holding its size. Readers fetch a whole bucket
//! with one READ, then the value with another, and check the header against
//! the address (passive invalidation). Updates are out of place: write a new
//! value, CAS the address word, zero the old header, retire the old block for
//! a lease ([`alloc`]).
//!
//! [`Store`] is the cluster-wide handle (regions, allocators, settings);
//! [`Worker`] is one thread's handle acting as one machine, with its port and
//! scratch buffers; its operations live in `worker/` by concern (read, update,
//! service, migrate, gc, replicas, shard). MIGRATE itself is a step machine
//! without I/O ([`migrate`]) that the worker drives. Every operation goes through the fabric, so the same code
//! runs on the in-process and the TCP fabric, and counters see every access.

#![warn(missing_docs)]

pub mod addr;
pub mod adjacency;
pub mod alloc;
mod block;
pub mod cache;
mod config;
mod error;
pub mod forward;
pub mod handoff;
pub mod homes;
pub mod migrate;
pub mod reclaim;
pub mod recover;
pub mod replica;
pub mod scan;
pub mod shard;
pub mod slotmove;
pub mod snapshot;
mod store;
mod stores;
pub mod table;
pub mod track;
mod worker;

pub use config::{StoreConfig, FORWARD_TIMEOUT_MS};

/// The node above a store, answering the bytes other machines' nodes send
/// it through the store's messaging ([`forward::Request::Node`];
/// `Worker::node_requests` sends them). It runs in the machine's service
/// (never in a worker waiting for a reply of its own), so it may wait,
/// e.g. for its log.
pub trait NodeHandler: Send + Sync {
    /// The answer to `bytes` from machine `from`, or why there is none
    /// (sent back as a failure).
    fn handle(
        &self,
        from: locus_fabric::MachineId,
        bytes: &[u8],
    ) -> std::result::Result<Vec<u8>, String>;

    /// The answers to several requests that arrived together, in order (a
    /// backup makes their log records durable with one sync: issue 60's
    /// group commit). By default, one [`NodeHandler::handle`] after another.
    fn handle_many(
        &self,
        requests: &[(locus_fabric::MachineId, &[u8])],
    ) -> Vec<std::result::Result<Vec<u8>, String>> {
        requests
            .iter()
            .map(|&(from, bytes)| self.handle(from, bytes))
            .collect()
    }
}
pub use error::{Result, StoreError};
pub use homes::{Homes, SlotMove, SlotTable};
pub use migrate::Migration;
pub use store::{MachineUsage, Store, KEYS_REGION, VALUES_REGION};
pub use stores::Stores;
pub use table::{home_of, Key};
pub use worker::{
    Cut, HomeSummary, HopReads, Khop, KhopLimits, Replication, ServiceStats, Services, VertexMoved,
    Worker, WorkerStats, CUT_ROUNDS_MAX, DEFERRED_VERTEX_OPS_MAX, FORWARDS_WAITING_MAX,
    FORWARD_HOPS_MAX, FRONTIER_MAX, PIPELINE_WINDOW, READ_RETRIES_MAX,
};

/// A vertex id.
pub type VertexId = u32;
