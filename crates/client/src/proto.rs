//! The wire protocol of `docs/protocol.md` (version 1): the frame header,
//! ops, error codes and field coding here; the requests and replies of the
//! client protocol in `proto/client.rs`; the one-way frames of the
//! coordinator's control link in `proto/control.rs`. Each frame's encoder
//! sits beside its decoder, with an explicit little-endian encoding and a
//! decoder that checks every length before it allocates. No I/O here beyond
//! [`read_frame`], which reads one whole frame from a blocking stream.
//!
//! ```text
//!  0        2        3        4                 8                               16
//!  +--------+--------+--------+-----------------+-------------------------------+
//!  | "LK"   | version|  op    |  body_len (u32) |  request id (u64)             |
//!  +--------+--------+--------+-----------------+-------------------------------+
//! ```
//!
//! A request body starts with `deadline_ms: u32`; replies use `op | 0x80`,
//! errors `0xFF` (`code: u16`, `message: str`). Decoding is total: any byte
//! string gives a value or a [`ProtoError`], never a panic (property-tested
//! in `tests/decoder_props.rs`).

use std::io::Read;

/// The two magic bytes that open every frame.
pub const MAGIC: [u8; 2] = *b"LK";
/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Bytes of a frame header.
pub const HEADER_BYTES: usize = 16;
/// Largest frame (header included) unless a server's HELLO says less.
pub const FRAME_BYTES_MAX: usize = 16 << 20;
/// Smallest frame limit a server may announce.
pub const FRAME_BYTES_MIN: usize = 4096;
/// Ids in one PUT, or in one vertex of a LOAD.
pub const IDS_MAX: usize = 4 << 20;
/// Vertices in one LOAD.
pub const LOAD_VERTICES_MAX: usize = 1 << 20;
/// Bytes of an error message.
pub const ERROR_MESSAGE_MAX: usize = 4096;
/// Bytes of a STATS reply's JSON.
pub const STATS_JSON_MAX: usize = 1 << 20;
/// Largest slot table in a SLOTS reply (or a MOVE): the longest wire form,
/// version 2 at the most slots, each with the most backups.
pub const SLOTS_TABLE_BYTES_MAX: usize = locus_placement::slots::ENCODED_BYTES_MAX;
/// Bytes of a HELLO name (client or server).
pub const NAME_MAX: usize = 256;
/// Longest deadline a request may carry.
pub const DEADLINE_MS_MAX: u32 = 3_600_000;
/// Hops of a k-hop query.
pub const HOPS_MAX: u8 = 8;
/// Neighbours per vertex per hop of a k-hop query.
pub const K_MAX: u32 = 1_000_000;
/// Entries of a control-link list.
pub const CONTROL_LIST_MAX: usize = 1 << 20;
/// The op of an error reply.
pub const ERROR_OP: u8 = 0xFF;
/// Bit set in the op of a successful reply.
pub const REPLY_BIT: u8 = 0x80;

/// Request and control ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// First frame of a connection.
    Hello = 0x01,
    /// Liveness check.
    Ping = 0x02,
    /// A vertex's neighbours.
    Neighbors = 0x03,
    /// Replace an adjacency list.
    Put = 0x04,
    /// Add one edge.
    InsertEdge = 0x05,
    /// Remove one edge.
    DeleteEdge = 0x06,
    /// k-hop traversal at the receiving server.
    Khop = 0x07,
    /// Bulk load batch.
    Load = 0x08,
    /// Migrate a value to the receiving server.
    Migrate = 0x09,
    /// Where a value is.
    Where = 0x0A,
    /// Server statistics (JSON).
    Stats = 0x0B,
    /// Remove a vertex.
    DeleteVertex = 0x0C,
    /// The slot table the server holds (issue 59).
    Slots = 0x0D,
    /// A step of a slot move (issue 59; `locus cluster move`).
    Move = 0x0E,
    /// The servers the receiving server knows and their client addresses
    /// (issue 59: servers added to a running cluster).
    Servers = 0x0F,
    /// The whole lists of many vertices at once (reads posted together).
    Lists = 0x10,
    /// A vertex's neighbours, from the receiving server's backup of its
    /// slot if it holds one (may be stale; `--read stale-ok`, issue 60).
    StaleNeighbors = 0x11,
    /// Control: a server introduces itself.
    Register = 0x20,
    /// Control: periodic report.
    Report = 0x21,
    /// Control: instant report.
    Hot = 0x22,
    /// Control: tracked counts.
    Tracked = 0x23,
    /// Control: migrations ended.
    Migrated = 0x24,
    /// Control: jobs for the receiving server.
    Jobs = 0x30,
    /// Control: start tracking keys.
    Track = 0x31,
    /// Control: stop tracking and report.
    Collect = 0x32,
}

impl Op {
    /// Every op, client ops first (in code order), then the control link's.
    pub const ALL: [Op; 25] = [
        Op::Hello,
        Op::Ping,
        Op::Neighbors,
        Op::Put,
        Op::InsertEdge,
        Op::DeleteEdge,
        Op::Khop,
        Op::Load,
        Op::Migrate,
        Op::Where,
        Op::Stats,
        Op::DeleteVertex,
        Op::Slots,
        Op::Move,
        Op::Servers,
        Op::Lists,
        Op::StaleNeighbors,
        Op::Register,
        Op::Report,
        Op::Hot,
        Op::Tracked,
        Op::Migrated,
        Op::Jobs,
        Op::Track,
        Op::Collect,
    ];

    /// The op with this code, if any.
    pub fn from_u8(b: u8) -> Option<Op> {
        use Op::*;
        Some(match b {
            0x01 => Hello,
            0x02 => Ping,
            0x03 => Neighbors,
            0x04 => Put,
            0x05 => InsertEdge,
            0x06 => DeleteEdge,
            0x07 => Khop,
            0x08 => Load,
            0x09 => Migrate,
            0x0A => Where,
            0x0B => Stats,
            0x0C => DeleteVertex,
            0x0D => Slots,
            0x0E => Move,
            0x0F => Servers,
            0x10 => Lists,
            0x11 => StaleNeighbors,
            0x20 => Register,
            0x21 => Report,
            0x22 => Hot,
            0x23 => Tracked,
            0x24 => Migrated,
            0x30 => Jobs,
            0x31 => Track,
            0x32 => Collect,
            _ => return None,
        })
    }

    /// Whether this op belongs to the control link.
    pub fn is_control(self) -> bool {
        self as u8 >= 0x20
    }

    /// Lower-case name, for metrics and messages.
    pub fn name(self) -> &'static str {
        use Op::*;
        match self {
            Hello => "hello",
            Ping => "ping",
            Neighbors => "neighbors",
            Put => "put",
            InsertEdge => "insert_edge",
            DeleteEdge => "delete_edge",
            Khop => "khop",
            Load => "load",
            Migrate => "migrate",
            Where => "where",
            Stats => "stats",
            DeleteVertex => "delete_vertex",
            Slots => "slots",
            Move => "move",
            Servers => "servers",
            Lists => "lists",
            StaleNeighbors => "stale_neighbors",
            Register => "register",
            Report => "report",
            Hot => "hot",
            Tracked => "tracked",
            Migrated => "migrated",
            Jobs => "jobs",
            Track => "track",
            Collect => "collect",
        }
    }
}

/// Error codes of an error reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A body or header that does not parse.
    Malformed,
    /// Header version is not [`VERSION`].
    UnsupportedVersion,
    /// Op not known to the server.
    UnknownOp,
    /// The vertex has no entry.
    UnknownVertex,
    /// Past a limit.
    TooLarge,
    /// The deadline passed.
    Deadline,
    /// Region or table full; nothing applied.
    Full,
    /// A machine the request needs did not answer.
    PeerUnavailable,
    /// A LOAD vertex is homed elsewhere.
    WrongHome,
    /// An argument out of range.
    Invalid,
    /// At a connection or queue limit.
    Busy,
    /// Any other failure.
    Internal,
    /// HELLO missing or server starting.
    NotReady,
    /// A code this crate does not know (a newer server).
    Other(u16),
}

impl ErrorCode {
    /// The wire code.
    pub fn code(self) -> u16 {
        use ErrorCode::*;
        match self {
            Malformed => 1,
            UnsupportedVersion => 2,
            UnknownOp => 3,
            UnknownVertex => 4,
            TooLarge => 5,
            Deadline => 6,
            Full => 7,
            PeerUnavailable => 8,
            WrongHome => 9,
            Invalid => 10,
            Busy => 11,
            Internal => 12,
            NotReady => 13,
            Other(c) => c,
        }
    }

    /// The code's meaning.
    pub fn from_code(c: u16) -> ErrorCode {
        use ErrorCode::*;
        match c {
            1 => Malformed,
            2 => UnsupportedVersion,
            3 => UnknownOp,
            4 => UnknownVertex,
            5 => TooLarge,
            6 => Deadline,
            7 => Full,
            8 => PeerUnavailable,
            9 => WrongHome,
            10 => Invalid,
            11 => Busy,
            12 => Internal,
            13 => NotReady,
            c => Other(c),
        }
    }

    /// Upper-case name as in `docs/protocol.md`.
    pub fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            Malformed => "MALFORMED",
            UnsupportedVersion => "UNSUPPORTED_VERSION",
            UnknownOp => "UNKNOWN_OP",
            UnknownVertex => "UNKNOWN_VERTEX",
            TooLarge => "TOO_LARGE",
            Deadline => "DEADLINE",
            Full => "FULL",
            PeerUnavailable => "PEER_UNAVAILABLE",
            WrongHome => "WRONG_HOME",
            Invalid => "INVALID",
            Busy => "BUSY",
            Internal => "INTERNAL",
            NotReady => "NOT_READY",
            Other(_) => "OTHER",
        }
    }
}

/// Why bytes are not a valid frame or body.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtoError {
    /// The frame does not start with [`MAGIC`].
    #[error(
        "not a Locus frame (magic {found:02x?}, expected \"LK\"): the peer speaks another protocol"
    )]
    BadMagic {
        /// The two bytes found.
        found: [u8; 2],
    },
    /// A length past its limit.
    #[error("{what} is {len}, past the limit of {max}")]
    TooLarge {
        /// Which length.
        what: &'static str,
        /// Its value.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A body that does not parse.
    #[error("malformed {op} body: {what}")]
    Malformed {
        /// The op's name.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// An op code this side does not know.
    #[error("unknown op 0x{0:02x}")]
    UnknownOp(u8),
    /// A field out of its range.
    #[error("{field} = {value}: {expected}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        expected: &'static str,
    },
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version.
    pub version: u8,
    /// Op byte (request op, `op | 0x80`, or [`ERROR_OP`]).
    pub op: u8,
    /// Body bytes that follow.
    pub body_len: u32,
    /// Request id, echoed by the reply.
    pub id: u64,
}

impl Header {
    /// Parses a header; checks the magic and that the frame fits `frame_bytes_max`.
    /// The version is not checked here: a server answers a foreign version
    /// with `UNSUPPORTED_VERSION` rather than dropping it silently.
    pub fn parse(b: &[u8; HEADER_BYTES], frame_bytes_max: usize) -> Result<Header, ProtoError> {
        if b[0..2] != MAGIC {
            return Err(ProtoError::BadMagic {
                found: [b[0], b[1]],
            });
        }
        let body_len = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
        let max = frame_bytes_max.saturating_sub(HEADER_BYTES) as u64;
        if body_len as u64 > max {
            return Err(ProtoError::TooLarge {
                what: "frame body",
                len: body_len as u64,
                max,
            });
        }
        Ok(Header {
            version: b[2],
            op: b[3],
            body_len,
            id: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        })
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.push(self.version);
        out.push(self.op);
        out.extend_from_slice(&self.body_len.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
    }
}

/// Why [`read_frame`] returned no frame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The stream failed, timed out, or ended (`UnexpectedEof`).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The header is not valid; the connection cannot be resynchronised.
    #[error("{0}")]
    Proto(ProtoError),
}

/// Reads one frame: its header, and its body into `body` (cleared first).
/// A header past `frame_bytes_max` is rejected before its body is read.
pub fn read_frame(
    r: &mut impl Read,
    frame_bytes_max: usize,
    body: &mut Vec<u8>,
) -> Result<Header, ReadError> {
    let mut h = [0u8; HEADER_BYTES];
    r.read_exact(&mut h)?;
    let header = Header::parse(&h, frame_bytes_max).map_err(ReadError::Proto)?;
    body.clear();
    // Grow with the bytes that arrive, not with what the header promises: a
    // peer that sends a header and stops costs no more than what it sent.
    let want = header.body_len as u64;
    let got = r.take(want).read_to_end(body)?;
    if (got as u64) < want {
        return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(header)
}

/// Starts a frame in `out` (header with a zero length, patched by [`end_frame`]).
fn begin_frame(out: &mut Vec<u8>, op: u8, id: u64) -> usize {
    let start = out.len();
    Header {
        version: VERSION,
        op,
        body_len: 0,
        id,
    }
    .write(out);
    start
}

/// Patches the body length of the frame begun at `start`.
fn end_frame(out: &mut [u8], start: usize) {
    let body = (out.len() - start - HEADER_BYTES) as u32;
    out[start + 4..start + 8].copy_from_slice(&body.to_le_bytes());
}

/// Appends little-endian fields.
struct Enc<'a>(&'a mut Vec<u8>);

impl Enc<'_> {
    fn u8(&mut self, x: u8) -> &mut Self {
        self.0.push(x);
        self
    }
    fn u16(&mut self, x: u16) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn u32(&mut self, x: u32) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn u64(&mut self, x: u64) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn bits(&mut self, flags: &[bool]) -> &mut Self {
        self.u32(flags.len() as u32);
        for chunk in flags.chunks(8) {
            let byte = chunk
                .iter()
                .enumerate()
                .fold(0u8, |b, (i, &f)| b | (f as u8) << i);
            self.u8(byte);
        }
        self
    }
    fn ids(&mut self, ids: &[u32]) -> &mut Self {
        self.u32(ids.len() as u32);
        self.0.reserve(ids.len() * 4);
        for &x in ids {
            self.0.extend_from_slice(&x.to_le_bytes());
        }
        self
    }
    /// A `str`, cut at a character boundary to at most `max` bytes.
    fn str(&mut self, s: &str, max: usize) -> &mut Self {
        let mut end = s.len().min(max);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u16(end as u16);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
        self
    }
}

/// Reads little-endian fields, checking each length against what is left.
struct Dec<'a> {
    b: &'a [u8],
    op: &'static str,
}

impl<'a> Dec<'a> {
    fn new(b: &'a [u8], op: &'static str) -> Self {
        Dec { b, op }
    }
    fn malformed(&self, what: impl Into<String>) -> ProtoError {
        ProtoError::Malformed {
            op: self.op,
            what: what.into(),
        }
    }
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], ProtoError> {
        if self.b.len() < n {
            return Err(self.malformed(format!("{field} needs {n} bytes, {} left", self.b.len())));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    fn u8(&mut self, field: &str) -> Result<u8, ProtoError> {
        Ok(self.take(1, field)?[0])
    }
    fn u16(&mut self, field: &str) -> Result<u16, ProtoError> {
        Ok(u16::from_le_bytes(
            self.take(2, field)?.try_into().expect("2"),
        ))
    }
    fn u32(&mut self, field: &str) -> Result<u32, ProtoError> {
        Ok(u32::from_le_bytes(
            self.take(4, field)?.try_into().expect("4"),
        ))
    }
    fn u64(&mut self, field: &str) -> Result<u64, ProtoError> {
        Ok(u64::from_le_bytes(
            self.take(8, field)?.try_into().expect("8"),
        ))
    }
    /// A count, checked against `max` and against the bytes left
    /// (`unit` bytes per entry at least) before anything is allocated.
    fn count(&mut self, field: &'static str, max: usize, unit: usize) -> Result<usize, ProtoError> {
        let n = self.u32(field)? as usize;
        if n > max {
            return Err(ProtoError::TooLarge {
                what: field,
                len: n as u64,
                max: max as u64,
            });
        }
        if n.saturating_mul(unit) > self.b.len() {
            return Err(self.malformed(format!(
                "{field} = {n} needs at least {} bytes, {} left",
                n.saturating_mul(unit),
                self.b.len()
            )));
        }
        Ok(n)
    }
    fn ids(&mut self, field: &'static str, max: usize) -> Result<Vec<u32>, ProtoError> {
        let n = self.count(field, max, 4)?;
        let raw = self.take(n * 4, field)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
            .collect())
    }
    /// Flags as a bitmap: `count: u32` (at most `max`), then `ceil(count / 8)`
    /// bytes, flag i in bit `i % 8` of byte `i / 8`; unused bits are zero.
    fn bits(&mut self, field: &'static str, max: usize) -> Result<Vec<bool>, ProtoError> {
        let n = self.u32(field)? as usize;
        if n > max {
            return Err(ProtoError::TooLarge {
                what: field,
                len: n as u64,
                max: max as u64,
            });
        }
        let raw = self.take(n.div_ceil(8), field)?;
        if !n.is_multiple_of(8) && raw[n / 8] >> (n % 8) != 0 {
            return Err(self.malformed(format!("{field}: bits set past its {n} flags")));
        }
        Ok((0..n).map(|i| raw[i / 8] >> (i % 8) & 1 == 1).collect())
    }
    fn str(&mut self, field: &'static str, max: usize) -> Result<String, ProtoError> {
        let n = self.u16(field)? as usize;
        if n > max {
            return Err(ProtoError::TooLarge {
                what: field,
                len: n as u64,
                max: max as u64,
            });
        }
        let raw = self.take(n, field)?;
        String::from_utf8(raw.to_vec()).map_err(|_| self.malformed(format!("{field} is not UTF-8")))
    }
    fn finish(&self) -> Result<(), ProtoError> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(self.malformed(format!("{} trailing bytes", self.b.len())))
        }
    }
}

mod client;
mod control;
mod moves;

pub use client::{KhopReply, Reply, Request, LISTS_VERTICES_MAX, LIST_ABSENT};
pub use control::{AccessEntry, Control, JobKind};
pub use moves::{
    MoveHint, MoveReply, MoveStep, SlotInFlight, HINTS_MAX, HINT_FILTER_BYTES_MAX, MOVE_KEYS_MAX,
    MOVE_SLOTS_MAX,
};

#[cfg(test)]
mod tests;
