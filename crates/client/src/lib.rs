//! The client library of a running Locus cluster.
//!
//! [`proto`] is the wire protocol of `docs/protocol.md`: frames, requests,
//! replies and the control link's one-way frames, with checked decoders.

#![warn(missing_docs)]

pub mod load;
pub mod proto;
