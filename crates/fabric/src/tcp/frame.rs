//! Wire frames of the TCP fabric: layout, encoders (`encode`) and decoders
//! (`decode`). No I/O here except [`RecvBuf::read_from`], so every rule is
//! unit-tested without sockets.
//!
//! Every frame, in both directions, is a 16-byte header and a body. All
//! integers are little-endian.
//!
//! ```text
//!  0               4       5       6               8                               16
//!  +---------------+-------+-------+---------------+-------------------------------+
//!  | body_len u32  | op u8 | mach  | aux u16       | request id u64                |  body (body_len bytes)
//!  +---------------+-------+-------+---------------+-------------------------------+
//!
//!  body_len    bytes after the header. HEADER_BYTES + body_len <= frame_bytes_max,
//!              else the frame is rejected (Protocol error) as soon as its length is seen.
//!  op          request: 0x01..=0x07 below. response: request op | 0x80.
//!              0xFF: fatal error; the sender closes the connection after it.
//!  mach        the machine the request is about (target of a one-sided op, receiver
//!              of SEND, owner for LOOKUP, the client's own machine for HELLO);
//!              a response echoes it.
//!  aux         request: region id for READ/WRITE/CAS/FETCH_ADD, else 0.
//!              response: status in the low byte (0 = OK, else an error code), high byte 0.
//!  request id  chosen by the client, increasing per connection; the response echoes it.
//! ```
//!
//! Request bodies (`off` = byte offset in the region):
//! ```text
//!  0x01 HELLO      magic u32 = "LCS1" | version u16 | machines u16 | frame_bytes_max u32
//!                  | epoch u64 | expect u64                                                 (28 bytes)
//!  0x02 READ       off u64 | len u32                                                        (12)
//!  0x03 WRITE      off u64 | data                                                           (8 + n)
//!  0x04 CAS        off u64 | expected u64 | new u64                                         (24)
//!  0x05 FETCH_ADD  off u64 | add u64                                                        (16)
//!  0x06 SEND       from u8 | payload                                                        (1 + n)
//!  0x07 LOOKUP     region name, UTF-8                                                       (n)
//! ```
//! HELLO is the first frame of every connection; the server refuses a peer
//! whose magic, version, cluster size or frame limit differ from its own.
//! `epoch` is the connecting node's own epoch, `expect` the epoch it believes
//! the listener is at (both 0 without a membership); the listener refuses a
//! connection that expects another epoch than its own, or comes from an
//! incarnation older than (or at the down epoch of) what it knows, with a
//! `PeerUnavailable` error saying so (see `fencing.rs`). Version 2 added
//! the two epochs; a version-1 HELLO (12 bytes) is refused by its version.
//!
//! Response bodies, status 0 (OK):
//! ```text
//!  HELLO, WRITE, SEND   empty
//!  READ                 the data (exactly len bytes)
//!  CAS, FETCH_ADD       previous word u64
//!  LOOKUP               region id u16 | len_bytes u64                                       (10)
//! ```
//! Response bodies, status != 0: the [`FabricError`] variant's fields, fixed
//! fields first and its one string (if any) as the rest of the body, so a
//! remote error arrives as the same variant with the same fields:
//! ```text
//!   1 NoSuchMachine    machine u8 | machines u64
//!   2 NoSuchRegion     machine u8 | region (str)
//!   3 DuplicateRegion  machine u8 | name (str)
//!   4 NotHosted        machine u8
//!   5 OutOfBounds      machine u8 | region u16 | offset u64 | len u64 | region_len u64
//!   6 Misaligned       offset u64 | len u64
//!   7 RegionTooLarge   len u64 | limit u64 | name (str)
//!   8 TooManyInflight  inflight u64 | limit u64
//!   9 InboxFull        machine u8 | limit u64
//!  10 MessageTooLarge  len u64 | limit u64
//!  11 PeerUnavailable  machine u8 | reason (str)
//!  12 Protocol         machine u8 | reason (str)
//!  13 Injected         op_index u64
//!  14 WorkerPanicked   reason (str)
//!  15 Config           reason (str)
//!  16 NoMemory         len u64 | name (str)
//! ```

use std::io::{self, Read};

use crate::{FabricError, MachineId};

mod decode;
mod encode;

pub(crate) use decode::{
    decode_lookup_reply, decode_request, decode_response, frame_len, word, Request,
};
pub(crate) use encode::{
    begin_ok, encode_cas, encode_err, encode_fetch_add, encode_hello, encode_lookup,
    encode_ok_empty, encode_ok_lookup, encode_ok_word, encode_read, encode_send, encode_write,
    end_response,
};

/// Bytes of the fixed header that starts every frame.
pub(crate) const HEADER_BYTES: usize = 16;
/// Smallest `frame_bytes_max` a configuration may set (a header and a small body).
pub(crate) const FRAME_BYTES_MIN: usize = 256;

/// HELLO: open a connection (always the first request).
pub(crate) const OP_HELLO: u8 = 0x01;
/// One-sided READ.
pub(crate) const OP_READ: u8 = 0x02;
/// One-sided WRITE.
pub(crate) const OP_WRITE: u8 = 0x03;
/// One-sided compare-and-swap.
pub(crate) const OP_CAS: u8 = 0x04;
/// One-sided fetch-and-add.
pub(crate) const OP_FETCH_ADD: u8 = 0x05;
/// Two-sided SEND into an inbox.
pub(crate) const OP_SEND: u8 = 0x06;
/// Region lookup by name.
pub(crate) const OP_LOOKUP: u8 = 0x07;
/// Pseudo-op of a fatal error frame (sent as `OP_ERROR | RESPONSE_BIT` = 0xFF).
pub(crate) const OP_ERROR: u8 = 0x7F;
/// Set in the op of every response.
pub(crate) const RESPONSE_BIT: u8 = 0x80;

/// "LCS1" read as a little-endian u32.
pub(crate) const HELLO_MAGIC: u32 = u32::from_le_bytes(*b"LCS1");
/// Protocol version carried by HELLO.
pub(crate) const PROTOCOL_VERSION: u16 = 2;

/// Body bytes of an OK LOOKUP response.
pub(crate) const LOOKUP_REPLY_BYTES: usize = 10;

/// Name of an op for error messages.
pub(crate) fn op_name(op: u8) -> &'static str {
    match op & !RESPONSE_BIT {
        OP_HELLO => "HELLO",
        OP_READ => "READ",
        OP_WRITE => "WRITE",
        OP_CAS => "CAS",
        OP_FETCH_ADD => "FETCH_ADD",
        OP_SEND => "SEND",
        OP_LOOKUP => "LOOKUP",
        OP_ERROR => "ERROR",
        _ => "unknown op",
    }
}

/// The fixed header of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Bytes after the header.
    pub(crate) body_len: u32,
    /// Opcode (with [`RESPONSE_BIT`] in responses).
    pub(crate) op: u8,
    /// The machine the frame is about.
    pub(crate) machine: MachineId,
    /// Region id (requests) or status (responses).
    pub(crate) aux: u16,
    /// Request id.
    pub(crate) req: u64,
}

fn protocol(peer: MachineId, reason: impl Into<String>) -> FabricError {
    FabricError::Protocol {
        machine: peer,
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------- receive buffer

/// Bytes a receive buffer keeps allocated between frames.
const RECV_BYTES_KEEP: usize = 1 << 20;
/// Smallest read attempted into a receive buffer.
pub(crate) const RECV_CHUNK_BYTES: usize = 64 << 10;

/// A receive buffer: bytes `start..end` of `buf` are received and not yet consumed.
#[derive(Debug, Default)]
pub(crate) struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl RecvBuf {
    /// The received, unconsumed bytes.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Drops `n` bytes from the front.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > RECV_BYTES_KEEP {
                // A huge frame passed; do not keep its buffer forever.
                self.buf = Vec::new();
            }
        }
    }

    /// Whether part of a frame is buffered.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// One `read` call into the buffer, with room for the whole frame at the
    /// front when its length is known (never more than `frame_bytes_max`,
    /// whatever the length prefix says). Returns what `read` returned.
    pub(crate) fn read_from(
        &mut self,
        src: &mut impl Read,
        frame_bytes_max: usize,
    ) -> io::Result<usize> {
        let have = self.end - self.start;
        let frame = if have >= 4 {
            let d = self.data();
            let announced = HEADER_BYTES + u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize;
            announced.min(frame_bytes_max)
        } else {
            0
        };
        let want = frame.saturating_sub(have).max(RECV_CHUNK_BYTES);
        if self.buf.len() - self.end < want {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end = have;
                self.start = 0;
            }
            if self.buf.len() - self.end < want {
                self.buf.resize(self.end + want, 0);
            }
        }
        let n = src.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
