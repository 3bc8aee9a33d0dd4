//! Live shard migration for key-value stores: NetMigrate (in-network migration tracking) and
//! the classic baselines, under the same agents and transport.
//!
//! A shard moves from a source server to a destination server while clients keep querying it.
//! Every query passes through a [`router::Router`] (the programmable switch of the paper), which
//! tracks per migration group whether it has not started, is migrating, or has migrated, with a
//! Bloom filter and a counting Bloom filter, and sends each query to the source, the destination,
//! or both (double read). The servers ([`server::Server`]) run the migration agents: the source
//! scans groups of adjacent hash buckets and streams them; the destination installs pairs unless
//! it already has a newer version, and PriorityPulls keys it is asked for but lacks.
//!
//! The router and the servers are state machines without I/O (packets in, packets out). Drivers
//! run them: [`node`] is the one packet loop of a node over a [`transport::Transport`] (the
//! CPU budget for client queries of [`budget`], timers, store failure), which [`runtime`] runs
//! on threads (in-process channels by default) and `locus kv` runs one per process over UDP; [`sim`] steps them one at a time in
//! an order drawn from a seed. [`check`] verifies client
//! histories are linearizable per key, and [`history`] records and checks them in measured runs; [`measure`] runs a closed-loop client load during a
//! migration and reports throughput, latency and extra bandwidth. [`wire`] is the packet format.
//!
//! The same agents and transport run every [`Protocol`]: NetMigrate, stop-and-copy,
//! source-based, Rocksteady and Fulva. A server keeps its shards in a [`table::ShardStore`]: the
//! in-memory [`table::Table`], or a stock `redis-server` spoken to with ordinary commands
//! ([`redis`]), so every protocol also migrates between two Redis instances.

#![warn(missing_docs)]

pub mod auth;
pub mod budget;
pub mod check;
pub mod client;
pub mod error;
pub mod filter;
pub mod group;
pub mod history;
pub mod install;
pub mod measure;
pub mod node;
pub mod redis;
pub mod reliable;
pub mod resp;
pub mod router;
pub mod runtime;
pub mod server;
pub mod sim;
pub mod status;
pub mod table;
pub mod transport;
pub mod wire;

pub use error::{Error, Result};
pub use group::Geometry;
pub use router::{Router, RouterConfig};
pub use server::{Server, ServerConfig};
pub use status::{MigrationPhase, MigrationStatus};
pub use wire::{Protocol, RouterMode};
