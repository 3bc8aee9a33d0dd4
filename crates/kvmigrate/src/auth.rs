//! Datagram authentication (issue 64, requirement 4): every wire packet on a deployment's UDP
//! sockets carries a MAC keyed from the cluster secret and a per-sender sequence number, so a
//! forged, altered or replayed datagram, or one from an unexpected sender, is dropped and
//! counted. The fabric authenticates only its TCP handshake (`locus-fabric` `auth`); datagrams
//! have no connection, so each needs its own proof. This module does no I/O: [`Sealer::seal`]
//! appends the trailer to an encoded packet, [`Opener::open`] checks one and returns the packet
//! bytes.
//!
//! ```text
//!  0            n            n+2                 n+10                       n+26
//!  +------------+------------+-------------------+--------------------------+
//!  | packet     | sender u16 | sequence u64      | tag: 16 bytes            |
//!  | (wire.rs)  | node id    | per sender, rising| HMAC-SHA256, truncated   |
//!  +------------+------------+-------------------+--------------------------+
//!  key = HMAC-SHA256(secret, "locus-kv-datagram-key-v1")    (the secret's bytes as written)
//!  tag = first 16 bytes of HMAC-SHA256(key, packet || sender || sequence)
//! ```
//!
//! Senders: a datagram's sender must be the packet's `from` (its author) or the router (which
//! forwards clients' queries with the client's id as `from`, so that servers answer the client
//! directly). A driver that knows each node's address also checks that the datagram came from
//! the sender's address ([`Opener::open`]'s `came_from_sender`).
//!
//! Management datagrams (a driver's own, such as `locus kv`'s JSON requests) are sealed the
//! same way under their own key, HMAC-SHA256(key, "locus-kv-management-key-v1")
//! ([`DatagramKey::management`], [`Opener::management`]): a wire packet's tag never opens as a
//! management datagram nor the reverse, and each kind keeps its own replay windows (a node
//! seals each kind with its own numbering). They have no author field: the sender is the
//! author, so only its address is checked.
//!
//! Replays: a sender numbers its datagrams from the wall clock's nanoseconds at start, so a
//! restarted sender starts above anything it sent before. A receiver keeps, per sender, the
//! highest number seen and a 64-wide window below it (as IPsec does): a number seen before,
//! or older than the window, is a replay. Reordering within the window is accepted.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};
use crate::wire::{NodeId, HEADER_BYTES};

/// Bytes appended to each packet.
pub const TRAILER_BYTES: usize = 2 + 8 + TAG_BYTES;
/// Bytes of the truncated tag.
pub const TAG_BYTES: usize = 16;
/// Shortest cluster secret accepted.
pub const SECRET_BYTES_MIN: usize = 16;
/// Sequence numbers below a sender's highest that are still accepted once (reordering).
pub const REPLAY_WINDOW: u64 = 64;
const KEY_LABEL: &[u8] = b"locus-kv-datagram-key-v1";
const MANAGEMENT_KEY_LABEL: &[u8] = b"locus-kv-management-key-v1";

type HmacSha256 = Hmac<Sha256>;

/// The datagram key, derived from the cluster secret.
#[derive(Clone)]
pub struct DatagramKey([u8; 32]);

impl std::fmt::Debug for DatagramKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DatagramKey(..)")
    }
}

impl DatagramKey {
    /// Derives the key; the secret must be at least [`SECRET_BYTES_MIN`] bytes.
    pub fn from_secret(secret: &[u8]) -> Result<Self> {
        if secret.len() < SECRET_BYTES_MIN {
            return Err(Error::InvalidSetting {
                key: "secret",
                value: format!("{} bytes", secret.len()),
                expected: format!("at least {SECRET_BYTES_MIN} bytes (LOCUS_SECRET)"),
            });
        }
        let mut mac = HmacSha256::new_from_slice(secret).map_err(|_| Error::InvalidSetting {
            key: "secret",
            value: "unusable".into(),
            expected: "any bytes".into(),
        })?;
        mac.update(KEY_LABEL);
        Ok(Self(mac.finalize().into_bytes().into()))
    }

    /// The key of management datagrams, derived from this one (module doc).
    pub fn management(&self) -> DatagramKey {
        let mut mac = self.keyed();
        mac.update(MANAGEMENT_KEY_LABEL);
        Self(mac.finalize().into_bytes().into())
    }

    fn keyed(&self) -> HmacSha256 {
        // A 32-byte key always fits HMAC-SHA256.
        match HmacSha256::new_from_slice(&self.0) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC takes keys of any length"),
        }
    }

    fn mac(&self, packet: &[u8], sender: NodeId, seq: u64) -> HmacSha256 {
        let mut mac = self.keyed();
        mac.update(packet);
        mac.update(&sender.to_le_bytes());
        mac.update(&seq.to_le_bytes());
        mac
    }
}

/// A node's sending side: numbers and seals its datagrams.
#[derive(Debug)]
pub struct Sealer {
    key: DatagramKey,
    node: NodeId,
    next: u64,
}

impl Sealer {
    /// Sealing as `node`, numbering from the wall clock (module doc).
    pub fn new(key: DatagramKey, node: NodeId) -> Self {
        let now_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Self::starting_at(key, node, now_ns)
    }

    /// Sealing as `node`, numbering from `first` (tests).
    pub fn starting_at(key: DatagramKey, node: NodeId, first: u64) -> Self {
        Self {
            key,
            node,
            next: first,
        }
    }

    /// Appends the trailer to `buf`, an encoded packet.
    pub fn seal(&mut self, buf: &mut Vec<u8>) {
        let seq = self.next;
        self.next += 1;
        let tag = self.key.mac(buf, self.node, seq).finalize().into_bytes();
        buf.extend_from_slice(&self.node.to_le_bytes());
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&tag[..TAG_BYTES]);
    }
}

/// Datagrams an [`Opener`] took and dropped, by reason (shown by `kv migration status`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AuthCounters {
    /// Datagrams accepted.
    pub accepted: u64,
    /// Too short to hold a packet header and a trailer.
    pub short: u64,
    /// The tag did not match: forged, altered, or sealed with another secret.
    pub bad_mac: u64,
    /// A sequence number seen before, or older than the replay window.
    pub replayed: u64,
    /// The sender was neither the packet's author nor the router, or the datagram did not come
    /// from the sender's address.
    pub wrong_sender: u64,
}

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// See [`AuthCounters::short`].
    Short,
    /// See [`AuthCounters::bad_mac`].
    BadMac,
    /// See [`AuthCounters::replayed`].
    Replayed,
    /// See [`AuthCounters::wrong_sender`].
    WrongSender,
}

#[derive(Clone, Copy, Debug, Default)]
struct Window {
    highest: u64,
    /// Bit i: `highest - i` was seen.
    seen: u64,
}

impl Window {
    /// Marks `seq` seen; false if it was, or is too old to tell.
    fn admit(&mut self, seq: u64) -> bool {
        if seq > self.highest {
            let shift = seq - self.highest;
            self.seen = if shift >= REPLAY_WINDOW {
                0
            } else {
                self.seen << shift
            };
            self.seen |= 1;
            self.highest = seq;
            return true;
        }
        let back = self.highest - seq;
        if back >= REPLAY_WINDOW || self.seen & (1 << back) != 0 {
            return false;
        }
        self.seen |= 1 << back;
        true
    }
}

/// Who may have sent a datagram, given what it carries.
#[derive(Clone, Copy, Debug)]
enum Senders {
    /// Wire packets: the packet's author (its `from`) or this router.
    AuthorOrRouter(NodeId),
    /// Management datagrams: any node, as itself (they carry no author).
    Any,
}

/// A node's receiving side: checks tags, senders and sequence numbers. Its memory is bounded
/// by the node id space: one 16-byte window per sender seen (at most 65,536).
#[derive(Debug)]
pub struct Opener {
    key: DatagramKey,
    senders: Senders,
    windows: BTreeMap<NodeId, Window>,
    counters: AuthCounters,
}

impl Opener {
    /// Opening datagrams of a deployment whose router is `router`.
    pub fn new(key: DatagramKey, router: NodeId) -> Self {
        Self {
            key,
            senders: Senders::AuthorOrRouter(router),
            windows: BTreeMap::new(),
            counters: AuthCounters::default(),
        }
    }

    /// Opening management datagrams (module doc): sealed by a [`Sealer`] made with
    /// `key.management()`, from any node as itself, whose address `open` checks.
    pub fn management(key: &DatagramKey) -> Self {
        Self {
            key: key.management(),
            senders: Senders::Any,
            windows: BTreeMap::new(),
            counters: AuthCounters::default(),
        }
    }

    /// Counters so far.
    pub fn counters(&self) -> &AuthCounters {
        &self.counters
    }

    /// Checks `datagram` and returns the packet bytes in it, or counts and says why not.
    /// `came_from_sender(n)` says whether the datagram came from node `n`'s address (a driver
    /// that cannot tell passes `|_| true`).
    pub fn open<'a>(
        &mut self,
        datagram: &'a [u8],
        came_from_sender: impl Fn(NodeId) -> bool,
    ) -> std::result::Result<&'a [u8], Rejected> {
        let r = self.check(datagram, came_from_sender);
        match r {
            Ok(_) => self.counters.accepted += 1,
            Err(Rejected::Short) => self.counters.short += 1,
            Err(Rejected::BadMac) => self.counters.bad_mac += 1,
            Err(Rejected::Replayed) => self.counters.replayed += 1,
            Err(Rejected::WrongSender) => self.counters.wrong_sender += 1,
        }
        r
    }

    fn check<'a>(
        &mut self,
        datagram: &'a [u8],
        came_from_sender: impl Fn(NodeId) -> bool,
    ) -> std::result::Result<&'a [u8], Rejected> {
        let body_bytes_min = match self.senders {
            Senders::AuthorOrRouter(_) => HEADER_BYTES,
            Senders::Any => 1,
        };
        if datagram.len() < body_bytes_min + TRAILER_BYTES {
            return Err(Rejected::Short);
        }
        let (packet, trailer) = datagram.split_at(datagram.len() - TRAILER_BYTES);
        let sender = u16::from_le_bytes([trailer[0], trailer[1]]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&trailer[2..10]);
        let seq = u64::from_le_bytes(seq);
        // Constant-time comparison (`hmac`'s verify).
        self.key
            .mac(packet, sender, seq)
            .verify_truncated_left(&trailer[10..])
            .map_err(|_| Rejected::BadMac)?;
        let may_send = match self.senders {
            // The packet's author: the `from` field of the wire header (bytes 6..8).
            Senders::AuthorOrRouter(router) => {
                sender == u16::from_le_bytes([packet[6], packet[7]]) || sender == router
            }
            Senders::Any => true,
        };
        if !may_send || !came_from_sender(sender) {
            return Err(Rejected::WrongSender);
        }
        if !self.windows.entry(sender).or_default().admit(seq) {
            return Err(Rejected::Replayed);
        }
        Ok(packet)
    }
}

#[cfg(test)]
mod tests;
