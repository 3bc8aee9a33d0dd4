//! The client library of a running Locus cluster.
//!
//! - [`proto`]: the wire protocol of `docs/protocol.md` (frames, requests,
//!   replies, the control link's one-way frames) with checked decoders.
//! - [`Conn`]: one authenticated connection (handshake of
//!   `locus_fabric::auth`, HELLO, blocking calls bounded by deadlines).
//! - [`Client`]: a pool of connections per server, requests routed to a
//!   vertex's home, every error naming its server.
//! - [`ClientFile`]: what a client reads of a cluster file.
//! - [`load`]: the bulk loader's pure part (validation, batches by home).

#![warn(missing_docs)]

mod client;
mod conn;
mod error;
mod file;
pub mod load;
pub mod proto;
pub mod settle;
mod stale;

pub use client::{Client, ClientConfig, Location, Moved, Routing, ROUTE_RETRIES_MAX};
pub use conn::{Conn, ServerHello};
pub use error::{ClientError, Result, ServerRef};
pub use file::ClientFile;
pub use stale::ReadFrom;
