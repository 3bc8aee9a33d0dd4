//! Locus's experiments as a library.
//!
//! What a *scheme* is (Pragh 6: Ideal, Orig, Shard, Split, Cache, Split+Cache
//! and Locus's Replica), how a run warms up until migration settles, what
//! placement alone could achieve (the placement bound), and the drivers of
//! every `locus bench` experiment and of `locus demo` live here, so the
//! `locus` binary only parses flags and prints. Every driver takes plain
//! settings and a [`Reporter`] for progress, and returns its rows; results
//! are kept with [`output`]'s atomic writers.
//!
//! - [`config`]: the TOML configuration of an embedded cluster (`[cluster]`,
//!   `[store]`, `[graph]`, `[workload]`), validated naming the key.
//! - [`cluster`]: build an embedded cluster on the configured fabric and load a graph.
//! - [`preset`]: the one size knob every experiment takes.
//! - [`output`]: atomic JSON writes, result directories, machine facts.
//! - [`pragh`]: the traversal benchmark of Pragh 6 (schemes, warm-up,
//!   placement bound, timelines); [`pragh::tcp`] runs the schemes with
//!   server processes over TCP beside the in-process run.
//! - [`processes`]: `locus server` and `locus coordinator` children on
//!   loopback, killed and reaped by a guard.
//! - [`client_bench`]: client round trips and the bulk-load rate over the
//!   client protocol (`locus bench client`).
//! - [`durability`]: acknowledged updates per second and their latency with
//!   the write-ahead log off, syncing every interval, and always
//!   (`locus bench durability`).
//! - [`faults`]: the fault lab (issue 61): servers, etcd and a coordinator
//!   in network namespaces, clients under a seeded nemesis, every history
//!   checked (`locus bench faults`).
//! - [`elastic`]: slot moves under a closed-loop load on processes started
//!   by `locus cluster up` (`locus bench elastic`); its load and timeline
//!   serve [`failover`] too.
//! - [`failover`]: a kill -9 of a server under that load, for each
//!   replication factor: how long until every vertex answers, what was
//!   lost (`locus bench failover`).
//! - [`foundation`]: fabric and store micro-figures, TCP round trips against
//!   a `locus serve` process, two-hop throughput (`locus bench foundation`).
//! - [`migrate_speed`]: split-migration speed by payload and threads (Pragh
//!   Fig. 13, `locus bench migrate-speed`).
//! - [`fargraph`]: far-memory analytics (Fargraph+ 10: Figs. 15, 16, 18, 19,
//!   Table 4; `locus bench fargraph`).
//! - [`netmigrate`]: live shard migration, every protocol side by side
//!   (NetMigrate 6: Figs. 4-6, Tables 2-7; `locus bench netmigrate`).
//! - [`sparql`]: the SPARQL mix on LUBM, every scheme side by side (Pragh
//!   6.5, Fig. 16; `locus bench sparql`).
//! - [`demo`]: Ideal, hash placement and split live migration side by side,
//!   with the recovery timeline.

pub mod client_bench;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod durability;
pub mod elastic;
mod elastic_redis;
mod error;
pub mod failover;
pub mod fargraph;
pub mod faults;
pub mod foundation;
pub mod host_probe;
pub mod migrate_speed;
pub mod netmigrate;
pub mod output;
pub mod pragh;
pub mod preset;
pub mod processes;
mod progress;
pub mod sparql;
pub mod threads;

pub use error::{BenchError, Result};
pub use preset::Preset;
pub use progress::Reporter;
