//! (Over 800 lines on purpose: the encoder and decoder of every frame sit
//! side by side, so a field changes in one place; splitting them by frame
//! kind would separate each encoder from its decoder.)
//!
//! The wire protocol of `docs/protocol.md` (version 1): frame header, the
//! requests and replies of the client protocol and the one-way frames of the
//! control link, each with an explicit little-endian encoding and a decoder
//! that checks every length before it allocates. No I/O here beyond
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
    pub const ALL: [Op; 19] = [
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

/// A client request (without its deadline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// First frame: the client's name.
    Hello {
        /// Free text naming the client (logs).
        client: String,
    },
    /// Liveness.
    Ping,
    /// Up to `k` neighbours (0: all).
    Neighbors {
        /// The vertex.
        vertex: u32,
        /// Neighbours wanted; 0 for all.
        k: u32,
    },
    /// Replace the adjacency list.
    Put {
        /// The vertex.
        vertex: u32,
        /// Its new list.
        ids: Vec<u32>,
    },
    /// Add `vertex -> neighbor`.
    InsertEdge {
        /// Source.
        vertex: u32,
        /// Target.
        neighbor: u32,
    },
    /// Remove `vertex -> neighbor`.
    DeleteEdge {
        /// Source.
        vertex: u32,
        /// Target.
        neighbor: u32,
    },
    /// k-hop traversal from `vertex`.
    Khop {
        /// Start vertex.
        vertex: u32,
        /// Hops, 1..=8.
        hops: u8,
        /// Neighbours per vertex per hop, 1..=1,000,000.
        k: u32,
    },
    /// Bulk load batch: neighbours to merge into each vertex's list.
    Load {
        /// (vertex, neighbours to add).
        vertices: Vec<(u32, Vec<u32>)>,
    },
    /// Move `vertex`'s value to the receiving server.
    Migrate {
        /// The vertex.
        vertex: u32,
    },
    /// Where `vertex`'s value is.
    Where {
        /// The vertex.
        vertex: u32,
    },
    /// Server statistics.
    Stats,
}

impl Request {
    /// The request's op.
    pub fn op(&self) -> Op {
        match self {
            Request::Hello { .. } => Op::Hello,
            Request::Ping => Op::Ping,
            Request::Neighbors { .. } => Op::Neighbors,
            Request::Put { .. } => Op::Put,
            Request::InsertEdge { .. } => Op::InsertEdge,
            Request::DeleteEdge { .. } => Op::DeleteEdge,
            Request::Khop { .. } => Op::Khop,
            Request::Load { .. } => Op::Load,
            Request::Migrate { .. } => Op::Migrate,
            Request::Where { .. } => Op::Where,
            Request::Stats => Op::Stats,
        }
    }

    /// Appends the request as a frame. Lists past their limits are the
    /// caller's bug (the client splits loads); they are asserted.
    pub fn encode(&self, out: &mut Vec<u8>, id: u64, deadline_ms: u32) {
        let start = begin_frame(out, self.op() as u8, id);
        let mut e = Enc(out);
        e.u32(deadline_ms);
        match self {
            Request::Hello { client } => {
                e.str(client, NAME_MAX);
            }
            Request::Ping | Request::Stats => {}
            Request::Neighbors { vertex, k } => {
                e.u32(*vertex).u32(*k);
            }
            Request::Put { vertex, ids } => {
                assert!(ids.len() <= IDS_MAX, "PUT of {} ids", ids.len());
                e.u32(*vertex).ids(ids);
            }
            Request::InsertEdge { vertex, neighbor } | Request::DeleteEdge { vertex, neighbor } => {
                e.u32(*vertex).u32(*neighbor);
            }
            Request::Khop { vertex, hops, k } => {
                e.u32(*vertex).u8(*hops).u32(*k);
            }
            Request::Load { vertices } => {
                assert!(vertices.len() <= LOAD_VERTICES_MAX);
                e.u32(vertices.len() as u32);
                for (v, ids) in vertices {
                    assert!(ids.len() <= IDS_MAX);
                    e.u32(*v).ids(ids);
                }
            }
            Request::Migrate { vertex } | Request::Where { vertex } => {
                e.u32(*vertex);
            }
        }
        end_frame(out, start);
    }

    /// Decodes a request body of `op`; returns its deadline and the request.
    /// Control ops are [`ProtoError::UnknownOp`] here (see [`Control::decode`]).
    pub fn decode(op: u8, body: &[u8]) -> Result<(u32, Request), ProtoError> {
        let op = match Op::from_u8(op) {
            Some(o) if !o.is_control() => o,
            _ => return Err(ProtoError::UnknownOp(op)),
        };
        let mut d = Dec::new(body, op.name());
        let deadline_ms = d.u32("deadline_ms")?;
        if deadline_ms == 0 || deadline_ms > DEADLINE_MS_MAX {
            return Err(ProtoError::Invalid {
                field: "deadline_ms",
                value: deadline_ms as u64,
                expected: "must be 1..=3600000",
            });
        }
        let r = match op {
            Op::Hello => Request::Hello {
                client: d.str("client", NAME_MAX)?,
            },
            Op::Ping => Request::Ping,
            Op::Stats => Request::Stats,
            Op::Neighbors => Request::Neighbors {
                vertex: d.u32("vertex")?,
                k: d.u32("k")?,
            },
            Op::Put => Request::Put {
                vertex: d.u32("vertex")?,
                ids: d.ids("ids", IDS_MAX)?,
            },
            Op::InsertEdge => Request::InsertEdge {
                vertex: d.u32("vertex")?,
                neighbor: d.u32("neighbor")?,
            },
            Op::DeleteEdge => Request::DeleteEdge {
                vertex: d.u32("vertex")?,
                neighbor: d.u32("neighbor")?,
            },
            Op::Khop => {
                let vertex = d.u32("vertex")?;
                let hops = d.u8("hops")?;
                let k = d.u32("k")?;
                if hops == 0 || hops > HOPS_MAX {
                    return Err(ProtoError::Invalid {
                        field: "hops",
                        value: hops as u64,
                        expected: "must be 1..=8",
                    });
                }
                if k == 0 || k > K_MAX {
                    return Err(ProtoError::Invalid {
                        field: "k",
                        value: k as u64,
                        expected: "must be 1..=1000000",
                    });
                }
                Request::Khop { vertex, hops, k }
            }
            Op::Load => {
                let n = d.count("vertices", LOAD_VERTICES_MAX, 8)?;
                let mut vertices = Vec::with_capacity(n);
                for _ in 0..n {
                    let v = d.u32("vertex")?;
                    vertices.push((v, d.ids("ids", IDS_MAX)?));
                }
                Request::Load { vertices }
            }
            Op::Migrate => Request::Migrate {
                vertex: d.u32("vertex")?,
            },
            Op::Where => Request::Where {
                vertex: d.u32("vertex")?,
            },
            _ => unreachable!("control ops were rejected above"),
        };
        d.finish()?;
        Ok((deadline_ms, r))
    }
}

/// What a k-hop query found and cost.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KhopReply {
    /// Last frontier's size counting repeats.
    pub with_repeats: u64,
    /// Server-side time of the traversal.
    pub elapsed_ns: u64,
    /// One-sided operations to the server's own machine.
    pub local_ops: u64,
    /// One-sided operations to other machines.
    pub remote_ops: u64,
    /// Payload bytes of the local operations.
    pub local_bytes: u64,
    /// Payload bytes of the remote operations.
    pub remote_bytes: u64,
    /// Distinct vertices of the last frontier, increasing.
    pub distinct: Vec<u32>,
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// HELLO accepted.
    Hello {
        /// The server's machine.
        server_id: u8,
        /// Machines in the cluster.
        machines: u16,
        /// The frame limit on this connection.
        frame_bytes_max: u32,
        /// Server version text.
        server: String,
    },
    /// PING answered.
    Pong,
    /// Neighbours.
    Neighbors(Vec<u32>),
    /// PUT applied.
    Put,
    /// INSERT_EDGE or DELETE_EDGE: whether the list changed.
    Changed(bool),
    /// k-hop result.
    Khop(KhopReply),
    /// LOAD applied.
    Load {
        /// Vertices changed.
        vertices: u32,
        /// Edges added.
        edges_added: u64,
    },
    /// MIGRATE done.
    Migrate {
        /// Where part 0 was.
        from: u8,
        /// Where it is.
        to: u8,
        /// Values moved.
        parts: u32,
        /// Bytes copied.
        bytes: u64,
    },
    /// WHERE answered.
    Where {
        /// Home machine.
        home: u8,
        /// Machine holding the value.
        holder: u8,
        /// Whether the vertex has an entry.
        found: bool,
    },
    /// STATS JSON.
    Stats(String),
    /// An error reply.
    Error {
        /// Its code.
        code: ErrorCode,
        /// What went wrong, naming the server.
        message: String,
    },
}

impl Reply {
    /// Appends the reply to a request of `op` as a frame.
    pub fn encode(&self, out: &mut Vec<u8>, op: Op, id: u64) {
        if let Reply::Stats(json) = self {
            if json.len() > STATS_JSON_MAX {
                // Cutting JSON would make it unreadable: say so instead.
                return Reply::Error {
                    code: ErrorCode::TooLarge,
                    message: format!(
                        "statistics of {} bytes are past the {STATS_JSON_MAX}-byte limit",
                        json.len()
                    ),
                }
                .encode(out, op, id);
            }
        }
        let op_byte = match self {
            Reply::Error { .. } => ERROR_OP,
            _ => op as u8 | REPLY_BIT,
        };
        let start = begin_frame(out, op_byte, id);
        let mut e = Enc(out);
        match self {
            Reply::Hello {
                server_id,
                machines,
                frame_bytes_max,
                server,
            } => {
                e.u8(*server_id)
                    .u16(*machines)
                    .u32(*frame_bytes_max)
                    .str(server, NAME_MAX);
            }
            Reply::Pong | Reply::Put => {}
            Reply::Neighbors(ids) => {
                e.ids(ids);
            }
            Reply::Changed(c) => {
                e.u8(*c as u8);
            }
            Reply::Khop(k) => {
                e.u64(k.with_repeats)
                    .u64(k.elapsed_ns)
                    .u64(k.local_ops)
                    .u64(k.remote_ops)
                    .u64(k.local_bytes)
                    .u64(k.remote_bytes)
                    .ids(&k.distinct);
            }
            Reply::Load {
                vertices,
                edges_added,
            } => {
                e.u32(*vertices).u64(*edges_added);
            }
            Reply::Migrate {
                from,
                to,
                parts,
                bytes,
            } => {
                e.u8(*from).u8(*to).u32(*parts).u64(*bytes);
            }
            Reply::Where {
                home,
                holder,
                found,
            } => {
                e.u8(*home).u8(*holder).u8(*found as u8);
            }
            Reply::Stats(json) => {
                e.u32(json.len() as u32);
                e.0.extend_from_slice(json.as_bytes());
            }
            Reply::Error { code, message } => {
                e.u16(code.code()).str(message, ERROR_MESSAGE_MAX);
            }
        }
        end_frame(out, start);
    }

    /// Decodes the reply (op byte `op_byte`) to a request of `op`.
    pub fn decode(op: Op, op_byte: u8, body: &[u8]) -> Result<Reply, ProtoError> {
        if op_byte == ERROR_OP {
            let mut d = Dec::new(body, "error");
            let code = ErrorCode::from_code(d.u16("code")?);
            let message = d.str("message", ERROR_MESSAGE_MAX)?;
            d.finish()?;
            return Ok(Reply::Error { code, message });
        }
        if op_byte != op as u8 | REPLY_BIT {
            return Err(ProtoError::Malformed {
                op: op.name(),
                what: format!(
                    "reply op 0x{op_byte:02x} does not answer op 0x{:02x}",
                    op as u8
                ),
            });
        }
        let mut d = Dec::new(body, op.name());
        let r = match op {
            Op::Hello => {
                let server_id = d.u8("server_id")?;
                let machines = d.u16("machines")?;
                let frame_bytes_max = d.u32("frame_bytes_max")?;
                if (frame_bytes_max as usize) < FRAME_BYTES_MIN {
                    return Err(ProtoError::Invalid {
                        field: "frame_bytes_max",
                        value: frame_bytes_max as u64,
                        expected: "must be at least 4096",
                    });
                }
                Reply::Hello {
                    server_id,
                    machines,
                    frame_bytes_max,
                    server: d.str("server", NAME_MAX)?,
                }
            }
            Op::Ping => Reply::Pong,
            Op::Put => Reply::Put,
            Op::Neighbors => Reply::Neighbors(d.ids("ids", FRAME_BYTES_MAX / 4)?),
            Op::InsertEdge | Op::DeleteEdge => Reply::Changed(match d.u8("changed")? {
                0 => false,
                1 => true,
                b => return Err(d.malformed(format!("changed = {b}, expected 0 or 1"))),
            }),
            Op::Khop => Reply::Khop(KhopReply {
                with_repeats: d.u64("with_repeats")?,
                elapsed_ns: d.u64("elapsed_ns")?,
                local_ops: d.u64("local_ops")?,
                remote_ops: d.u64("remote_ops")?,
                local_bytes: d.u64("local_bytes")?,
                remote_bytes: d.u64("remote_bytes")?,
                distinct: d.ids("distinct", FRAME_BYTES_MAX / 4)?,
            }),
            Op::Load => Reply::Load {
                vertices: d.u32("vertices")?,
                edges_added: d.u64("edges_added")?,
            },
            Op::Migrate => Reply::Migrate {
                from: d.u8("from")?,
                to: d.u8("to")?,
                parts: d.u32("parts")?,
                bytes: d.u64("bytes")?,
            },
            Op::Where => Reply::Where {
                home: d.u8("home")?,
                holder: d.u8("holder")?,
                found: match d.u8("found")? {
                    0 => false,
                    1 => true,
                    b => return Err(d.malformed(format!("found = {b}, expected 0 or 1"))),
                },
            },
            Op::Stats => {
                let n = d.count("json", STATS_JSON_MAX, 1)?;
                let raw = d.take(n, "json")?;
                Reply::Stats(
                    String::from_utf8(raw.to_vec())
                        .map_err(|_| d.malformed("json is not UTF-8"))?,
                )
            }
            other => return Err(ProtoError::UnknownOp(other as u8)),
        };
        d.finish()?;
        Ok(r)
    }
}

/// A job the coordinator hands a server (run as the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// Migrate the key's value here.
    Migrate = 1,
    /// Make a read-only replica here.
    Replicate = 2,
}

/// A report entry: accesses by the reporter to `key`, found at `holder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessEntry {
    /// `vertex | part << 32`.
    pub key: u64,
    /// Where the reporter found the value.
    pub holder: u8,
    /// Accesses counted.
    pub count: u32,
}

/// A one-way frame of the control link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// A server introduces itself.
    Register {
        /// Its machine.
        machine: u8,
    },
    /// Periodic report.
    Report {
        /// Reporter.
        machine: u8,
        /// Interval covered.
        interval_ms: u64,
        /// Counts.
        accesses: Vec<AccessEntry>,
    },
    /// Instant report.
    Hot {
        /// Reporter.
        machine: u8,
        /// Time into the interval.
        elapsed_ms: u64,
        /// The key.
        access: AccessEntry,
    },
    /// Tracked counts (deferred mode).
    Tracked {
        /// The holder that tracked.
        machine: u8,
        /// How long.
        interval_ms: u64,
        /// (key, count).
        counts: Vec<(u64, u32)>,
    },
    /// Migrations ended: (key, to, ok).
    Migrated(Vec<(u64, u8, bool)>),
    /// Jobs for the receiving server.
    Jobs(Vec<(JobKind, u64)>),
    /// Start tracking these keys.
    Track(Vec<u64>),
    /// Stop tracking and report.
    Collect,
}

impl Control {
    /// The frame's op.
    pub fn op(&self) -> Op {
        match self {
            Control::Register { .. } => Op::Register,
            Control::Report { .. } => Op::Report,
            Control::Hot { .. } => Op::Hot,
            Control::Tracked { .. } => Op::Tracked,
            Control::Migrated(_) => Op::Migrated,
            Control::Jobs(_) => Op::Jobs,
            Control::Track(_) => Op::Track,
            Control::Collect => Op::Collect,
        }
    }

    /// Appends the frame (request id 0). Lists are at most
    /// [`CONTROL_LIST_MAX`]; senders split longer ones (asserted).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = begin_frame(out, self.op() as u8, 0);
        let mut e = Enc(out);
        match self {
            Control::Register { machine } => {
                e.u8(*machine);
            }
            Control::Report {
                machine,
                interval_ms,
                accesses,
            } => {
                assert!(accesses.len() <= CONTROL_LIST_MAX);
                e.u8(*machine).u64(*interval_ms).u32(accesses.len() as u32);
                for a in accesses {
                    e.u64(a.key).u8(a.holder).u32(a.count);
                }
            }
            Control::Hot {
                machine,
                elapsed_ms,
                access,
            } => {
                e.u8(*machine)
                    .u64(*elapsed_ms)
                    .u64(access.key)
                    .u8(access.holder)
                    .u32(access.count);
            }
            Control::Tracked {
                machine,
                interval_ms,
                counts,
            } => {
                assert!(counts.len() <= CONTROL_LIST_MAX);
                e.u8(*machine).u64(*interval_ms).u32(counts.len() as u32);
                for (k, c) in counts {
                    e.u64(*k).u32(*c);
                }
            }
            Control::Migrated(list) => {
                assert!(list.len() <= CONTROL_LIST_MAX);
                e.u32(list.len() as u32);
                for (k, to, ok) in list {
                    e.u64(*k).u8(*to).u8(*ok as u8);
                }
            }
            Control::Jobs(list) => {
                assert!(list.len() <= CONTROL_LIST_MAX);
                e.u32(list.len() as u32);
                for (kind, k) in list {
                    e.u8(*kind as u8).u64(*k);
                }
            }
            Control::Track(keys) => {
                assert!(keys.len() <= CONTROL_LIST_MAX);
                e.u32(keys.len() as u32);
                for k in keys {
                    e.u64(*k);
                }
            }
            Control::Collect => {}
        }
        end_frame(out, start);
    }

    /// Decodes a control frame's body.
    pub fn decode(op: u8, body: &[u8]) -> Result<Control, ProtoError> {
        let op = match Op::from_u8(op) {
            Some(o) if o.is_control() => o,
            _ => return Err(ProtoError::UnknownOp(op)),
        };
        let mut d = Dec::new(body, op.name());
        let c = match op {
            Op::Register => Control::Register {
                machine: d.u8("machine")?,
            },
            Op::Report => {
                let machine = d.u8("machine")?;
                let interval_ms = d.u64("interval_ms")?;
                let n = d.count("accesses", CONTROL_LIST_MAX, 13)?;
                let mut accesses = Vec::with_capacity(n);
                for _ in 0..n {
                    accesses.push(AccessEntry {
                        key: d.u64("key")?,
                        holder: d.u8("holder")?,
                        count: d.u32("count")?,
                    });
                }
                Control::Report {
                    machine,
                    interval_ms,
                    accesses,
                }
            }
            Op::Hot => Control::Hot {
                machine: d.u8("machine")?,
                elapsed_ms: d.u64("elapsed_ms")?,
                access: AccessEntry {
                    key: d.u64("key")?,
                    holder: d.u8("holder")?,
                    count: d.u32("count")?,
                },
            },
            Op::Tracked => {
                let machine = d.u8("machine")?;
                let interval_ms = d.u64("interval_ms")?;
                let n = d.count("counts", CONTROL_LIST_MAX, 12)?;
                let mut counts = Vec::with_capacity(n);
                for _ in 0..n {
                    counts.push((d.u64("key")?, d.u32("count")?));
                }
                Control::Tracked {
                    machine,
                    interval_ms,
                    counts,
                }
            }
            Op::Migrated => {
                let n = d.count("migrated", CONTROL_LIST_MAX, 10)?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = d.u64("key")?;
                    let to = d.u8("to")?;
                    let ok = match d.u8("ok")? {
                        0 => false,
                        1 => true,
                        b => return Err(d.malformed(format!("ok = {b}, expected 0 or 1"))),
                    };
                    list.push((k, to, ok));
                }
                Control::Migrated(list)
            }
            Op::Jobs => {
                let n = d.count("jobs", CONTROL_LIST_MAX, 9)?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    let kind = match d.u8("kind")? {
                        1 => JobKind::Migrate,
                        2 => JobKind::Replicate,
                        b => return Err(d.malformed(format!("job kind {b}, expected 1 or 2"))),
                    };
                    list.push((kind, d.u64("key")?));
                }
                Control::Jobs(list)
            }
            Op::Track => {
                let n = d.count("keys", CONTROL_LIST_MAX, 8)?;
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    keys.push(d.u64("key")?);
                }
                Control::Track(keys)
            }
            Op::Collect => Control::Collect,
            _ => unreachable!("client ops were rejected above"),
        };
        d.finish()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests;
