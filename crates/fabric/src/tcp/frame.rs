//! Wire frames of the TCP fabric: layout, encoders and decoders. No I/O here
//! except [`RecvBuf::read_from`], so every rule is unit-tested without sockets.
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
//!  0x01 HELLO      magic u32 = "LCS1" | version u16 | machines u16 | frame_bytes_max u32   (12 bytes)
//!  0x02 READ       off u64 | len u32                                                        (12)
//!  0x03 WRITE      off u64 | data                                                           (8 + n)
//!  0x04 CAS        off u64 | expected u64 | new u64                                         (24)
//!  0x05 FETCH_ADD  off u64 | add u64                                                        (16)
//!  0x06 SEND       from u8 | payload                                                        (1 + n)
//!  0x07 LOOKUP     region name, UTF-8                                                       (n)
//! ```
//! HELLO is the first frame of every connection; the server refuses a peer
//! whose magic, version, cluster size or frame limit differ from its own.
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
//! ```

use std::io::{self, Read};

use crate::{FabricError, MachineId, RegionId, RegionInfo, Result};

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
pub(crate) const PROTOCOL_VERSION: u16 = 1;

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

fn protocol(peer: MachineId, reason: impl Into<String>) -> FabricError {
    FabricError::Protocol {
        machine: peer,
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------- encoding

/// Appends a header with a zero body length; returns its position for [`finish`].
#[inline]
fn begin(buf: &mut Vec<u8>, op: u8, machine: MachineId, aux: u16, req: u64) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    buf.push(op);
    buf.push(machine);
    buf.extend_from_slice(&aux.to_le_bytes());
    buf.extend_from_slice(&req.to_le_bytes());
    at
}

/// Writes the body length of the frame begun at `at`.
#[inline]
fn finish(buf: &mut [u8], at: usize) {
    let body = buf.len() - at - HEADER_BYTES;
    debug_assert!(body <= u32::MAX as usize, "frame body of {body} bytes");
    buf[at..at + 4].copy_from_slice(&(body as u32).to_le_bytes());
}

/// HELLO from the client's machine `from`.
pub(crate) fn encode_hello(
    buf: &mut Vec<u8>,
    req: u64,
    from: MachineId,
    machines: usize,
    frame_bytes_max: usize,
) {
    let at = begin(buf, OP_HELLO, from, 0, req);
    buf.extend_from_slice(&HELLO_MAGIC.to_le_bytes());
    buf.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    buf.extend_from_slice(&(machines as u16).to_le_bytes());
    buf.extend_from_slice(&(frame_bytes_max as u32).to_le_bytes());
    finish(buf, at);
}

/// READ of `len` bytes.
#[inline]
pub(crate) fn encode_read(
    buf: &mut Vec<u8>,
    req: u64,
    machine: MachineId,
    region: RegionId,
    offset: u64,
    len: u32,
) {
    let at = begin(buf, OP_READ, machine, region.0, req);
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&len.to_le_bytes());
    finish(buf, at);
}

/// WRITE of `data`.
#[inline]
pub(crate) fn encode_write(
    buf: &mut Vec<u8>,
    req: u64,
    machine: MachineId,
    region: RegionId,
    offset: u64,
    data: &[u8],
) {
    let at = begin(buf, OP_WRITE, machine, region.0, req);
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(data);
    finish(buf, at);
}

/// CAS.
#[inline]
pub(crate) fn encode_cas(
    buf: &mut Vec<u8>,
    req: u64,
    machine: MachineId,
    region: RegionId,
    offset: u64,
    expected: u64,
    new: u64,
) {
    let at = begin(buf, OP_CAS, machine, region.0, req);
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&expected.to_le_bytes());
    buf.extend_from_slice(&new.to_le_bytes());
    finish(buf, at);
}

/// FETCH_ADD.
#[inline]
pub(crate) fn encode_fetch_add(
    buf: &mut Vec<u8>,
    req: u64,
    machine: MachineId,
    region: RegionId,
    offset: u64,
    add: u64,
) {
    let at = begin(buf, OP_FETCH_ADD, machine, region.0, req);
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&add.to_le_bytes());
    finish(buf, at);
}

/// SEND of `payload` from `from` to `to`.
pub(crate) fn encode_send(
    buf: &mut Vec<u8>,
    req: u64,
    to: MachineId,
    from: MachineId,
    payload: &[u8],
) {
    let at = begin(buf, OP_SEND, to, 0, req);
    buf.push(from);
    buf.extend_from_slice(payload);
    finish(buf, at);
}

/// LOOKUP of region `name` on `machine`.
pub(crate) fn encode_lookup(buf: &mut Vec<u8>, req: u64, machine: MachineId, name: &str) {
    let at = begin(buf, OP_LOOKUP, machine, 0, req);
    buf.extend_from_slice(name.as_bytes());
    finish(buf, at);
}

/// Starts an OK response to request `op`; append the body, then call [`end_response`].
#[inline]
pub(crate) fn begin_ok(buf: &mut Vec<u8>, op: u8, machine: MachineId, req: u64) -> usize {
    begin(buf, op | RESPONSE_BIT, machine, 0, req)
}

/// Ends a response begun with [`begin_ok`].
#[inline]
pub(crate) fn end_response(buf: &mut [u8], at: usize) {
    finish(buf, at)
}

/// An OK response with an empty body.
#[inline]
pub(crate) fn encode_ok_empty(buf: &mut Vec<u8>, op: u8, machine: MachineId, req: u64) {
    let at = begin_ok(buf, op, machine, req);
    finish(buf, at);
}

/// An OK response carrying one word (CAS, FETCH_ADD).
#[inline]
pub(crate) fn encode_ok_word(buf: &mut Vec<u8>, op: u8, machine: MachineId, req: u64, w: u64) {
    let at = begin_ok(buf, op, machine, req);
    buf.extend_from_slice(&w.to_le_bytes());
    finish(buf, at);
}

/// An OK LOOKUP response.
pub(crate) fn encode_ok_lookup(buf: &mut Vec<u8>, machine: MachineId, req: u64, info: RegionInfo) {
    let at = begin_ok(buf, OP_LOOKUP, machine, req);
    buf.extend_from_slice(&info.id.0.to_le_bytes());
    buf.extend_from_slice(&info.len_bytes.to_le_bytes());
    finish(buf, at);
}

/// An error response to request `op` (use [`OP_ERROR`] for a fatal error frame).
pub(crate) fn encode_err(
    buf: &mut Vec<u8>,
    op: u8,
    machine: MachineId,
    req: u64,
    err: &FabricError,
) {
    let at = begin(buf, op | RESPONSE_BIT, machine, 0, req);
    let code = encode_error_body(buf, err);
    buf[at + 6..at + 8].copy_from_slice(&u16::from(code).to_le_bytes());
    finish(buf, at);
}

fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

/// Appends the fields of `err`; returns its status code.
fn encode_error_body(buf: &mut Vec<u8>, err: &FabricError) -> u8 {
    use FabricError as E;
    match err {
        E::NoSuchMachine { machine, machines } => {
            buf.push(*machine);
            put_u64(buf, *machines as u64);
            1
        }
        E::NoSuchRegion { machine, region } => {
            buf.push(*machine);
            buf.extend_from_slice(region.as_bytes());
            2
        }
        E::DuplicateRegion { machine, name } => {
            buf.push(*machine);
            buf.extend_from_slice(name.as_bytes());
            3
        }
        E::NotHosted { machine } => {
            buf.push(*machine);
            4
        }
        E::OutOfBounds {
            machine,
            region,
            offset,
            len,
            region_len,
        } => {
            buf.push(*machine);
            buf.extend_from_slice(&region.0.to_le_bytes());
            put_u64(buf, *offset);
            put_u64(buf, *len);
            put_u64(buf, *region_len);
            5
        }
        E::Misaligned { offset, len } => {
            put_u64(buf, *offset);
            put_u64(buf, *len);
            6
        }
        E::RegionTooLarge { name, len, limit } => {
            put_u64(buf, *len);
            put_u64(buf, *limit);
            buf.extend_from_slice(name.as_bytes());
            7
        }
        E::TooManyInflight { inflight, limit } => {
            put_u64(buf, *inflight as u64);
            put_u64(buf, *limit as u64);
            8
        }
        E::InboxFull { machine, limit } => {
            buf.push(*machine);
            put_u64(buf, *limit as u64);
            9
        }
        E::MessageTooLarge { len, limit } => {
            put_u64(buf, *len as u64);
            put_u64(buf, *limit as u64);
            10
        }
        E::PeerUnavailable { machine, reason } => {
            buf.push(*machine);
            buf.extend_from_slice(reason.as_bytes());
            11
        }
        E::Protocol { machine, reason } => {
            buf.push(*machine);
            buf.extend_from_slice(reason.as_bytes());
            12
        }
        E::Injected { op_index } => {
            put_u64(buf, *op_index);
            13
        }
        E::WorkerPanicked { reason } => {
            buf.extend_from_slice(reason.as_bytes());
            14
        }
        E::Config(reason) => {
            buf.extend_from_slice(reason.as_bytes());
            15
        }
    }
}

// ---------------------------------------------------------------- decoding

/// Reads fields off the front of a body; every shortfall is an error, never a panic.
struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err(format!(
                "body too short: {what} needs {n} bytes, {} left",
                self.buf.len()
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> std::result::Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> std::result::Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> std::result::Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> std::result::Result<u64, String> {
        let b = self.take(8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
    fn usize(&mut self, what: &str) -> std::result::Result<usize, String> {
        let v = self.u64(what)?;
        usize::try_from(v).map_err(|_| format!("{what} = {v} does not fit in usize"))
    }
    /// The rest of the body.
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }
    /// The rest of the body as UTF-8.
    fn text(&mut self, what: &str) -> std::result::Result<&'a str, String> {
        std::str::from_utf8(self.rest()).map_err(|e| format!("{what} is not UTF-8: {e}"))
    }
    /// Fails if bytes are left over.
    fn end(&self, what: &str) -> std::result::Result<(), String> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(format!("{} unexpected bytes after {what}", self.buf.len()))
        }
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

fn parse_header(frame: &[u8]) -> Header {
    debug_assert!(frame.len() >= HEADER_BYTES);
    let mut f = Fields { buf: frame };
    // Cannot fail: the caller checked the length.
    let mut get = || -> std::result::Result<Header, String> {
        Ok(Header {
            body_len: f.u32("")?,
            op: f.u8("")?,
            machine: f.u8("")?,
            aux: f.u16("")?,
            req: f.u64("")?,
        })
    };
    get().expect("a header is 16 bytes")
}

/// The length of the frame at the front of `buf`: `Ok(None)` until the whole
/// frame has arrived, an error as soon as the length prefix exceeds `frame_bytes_max`.
#[inline]
pub(crate) fn frame_len(
    buf: &[u8],
    frame_bytes_max: usize,
    peer: MachineId,
) -> Result<Option<usize>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let body = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    let total = HEADER_BYTES + body;
    if total > frame_bytes_max {
        return Err(protocol(
            peer,
            format!(
                "frame of {total} bytes exceeds the limit of {frame_bytes_max} bytes \
                 (frame_bytes_max; both ends must use the same limit)"
            ),
        ));
    }
    Ok(if buf.len() >= total {
        Some(total)
    } else {
        None
    })
}

fn whole_frame(frame: &[u8], peer: MachineId) -> Result<Header> {
    if frame.len() < HEADER_BYTES {
        return Err(protocol(
            peer,
            format!(
                "truncated frame: {} bytes, the header alone is {HEADER_BYTES}",
                frame.len()
            ),
        ));
    }
    let h = parse_header(frame);
    if frame.len() != HEADER_BYTES + h.body_len as usize {
        return Err(protocol(
            peer,
            format!(
                "frame of {} bytes but its header announces {} body bytes",
                frame.len(),
                h.body_len
            ),
        ));
    }
    Ok(h)
}

/// A decoded request; byte fields borrow the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request<'a> {
    /// Connection opening.
    Hello {
        /// The client's machine.
        from: MachineId,
        /// Protocol version.
        version: u16,
        /// The client's cluster size.
        machines: u16,
        /// The client's frame limit.
        frame_bytes_max: u32,
    },
    /// READ `len` bytes.
    Read {
        /// Target.
        machine: MachineId,
        /// Region.
        region: RegionId,
        /// Byte offset.
        offset: u64,
        /// Bytes to read.
        len: u32,
    },
    /// WRITE `data`.
    Write {
        /// Target.
        machine: MachineId,
        /// Region.
        region: RegionId,
        /// Byte offset.
        offset: u64,
        /// Bytes to write.
        data: &'a [u8],
    },
    /// CAS.
    Cas {
        /// Target.
        machine: MachineId,
        /// Region.
        region: RegionId,
        /// Byte offset.
        offset: u64,
        /// Expected word.
        expected: u64,
        /// New word.
        new: u64,
    },
    /// FETCH_ADD.
    FetchAdd {
        /// Target.
        machine: MachineId,
        /// Region.
        region: RegionId,
        /// Byte offset.
        offset: u64,
        /// Addend.
        add: u64,
    },
    /// SEND.
    Send {
        /// Receiver.
        to: MachineId,
        /// Sender.
        from: MachineId,
        /// Payload.
        payload: &'a [u8],
    },
    /// LOOKUP.
    Lookup {
        /// Owner.
        machine: MachineId,
        /// Region name.
        name: &'a str,
    },
}

/// Decodes one whole request frame (as delimited by [`frame_len`]). Returns
/// the header (for the reply) and the request; anything malformed is a
/// [`FabricError::Protocol`] attributed to `peer`.
pub(crate) fn decode_request(frame: &[u8], peer: MachineId) -> Result<(Header, Request<'_>)> {
    let h = whole_frame(frame, peer)?;
    let mut f = Fields {
        buf: &frame[HEADER_BYTES..],
    };
    let region = RegionId(h.aux);
    let machine = h.machine;
    let zero_aux = |h: &Header| -> std::result::Result<(), String> {
        if h.aux == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} request with non-zero aux {}",
                op_name(h.op),
                h.aux
            ))
        }
    };
    let decoded = (|| -> std::result::Result<Request<'_>, String> {
        let r = match h.op {
            OP_HELLO => {
                zero_aux(&h)?;
                let magic = f.u32("magic")?;
                if magic != HELLO_MAGIC {
                    return Err(format!(
                        "bad magic {magic:#010x}: the peer is not a Locus fabric client"
                    ));
                }
                Request::Hello {
                    from: machine,
                    version: f.u16("version")?,
                    machines: f.u16("machines")?,
                    frame_bytes_max: f.u32("frame_bytes_max")?,
                }
            }
            OP_READ => Request::Read {
                machine,
                region,
                offset: f.u64("offset")?,
                len: f.u32("len")?,
            },
            OP_WRITE => Request::Write {
                machine,
                region,
                offset: f.u64("offset")?,
                data: f.rest(),
            },
            OP_CAS => Request::Cas {
                machine,
                region,
                offset: f.u64("offset")?,
                expected: f.u64("expected")?,
                new: f.u64("new")?,
            },
            OP_FETCH_ADD => Request::FetchAdd {
                machine,
                region,
                offset: f.u64("offset")?,
                add: f.u64("add")?,
            },
            OP_SEND => {
                zero_aux(&h)?;
                Request::Send {
                    to: machine,
                    from: f.u8("from")?,
                    payload: f.rest(),
                }
            }
            OP_LOOKUP => {
                zero_aux(&h)?;
                Request::Lookup {
                    machine,
                    name: f.text("region name")?,
                }
            }
            other => return Err(format!("unknown request op {other:#04x}")),
        };
        f.end(op_name(h.op))?;
        Ok(r)
    })();
    decoded
        .map(|r| (h, r))
        .map_err(|reason| protocol(peer, format!("bad {} request: {reason}", op_name(h.op))))
}

/// A decoded response; the body borrows the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response<'a> {
    /// The request op answered ([`OP_ERROR`] for a fatal error frame).
    pub(crate) op: u8,
    /// The machine echoed from the request.
    pub(crate) machine: MachineId,
    /// The request id echoed.
    pub(crate) req: u64,
    /// The OK body, or the error the peer reported.
    pub(crate) result: std::result::Result<&'a [u8], FabricError>,
}

/// Decodes one whole response frame; anything malformed is a
/// [`FabricError::Protocol`] attributed to `peer`.
pub(crate) fn decode_response(frame: &[u8], peer: MachineId) -> Result<Response<'_>> {
    let h = whole_frame(frame, peer)?;
    let body = &frame[HEADER_BYTES..];
    let bad = |reason: String| protocol(peer, format!("bad response: {reason}"));
    if h.op & RESPONSE_BIT == 0 {
        return Err(bad(format!("op {:#04x} is not a response", h.op)));
    }
    let op = h.op & !RESPONSE_BIT;
    if !(OP_HELLO..=OP_LOOKUP).contains(&op) && op != OP_ERROR {
        return Err(bad(format!("unknown response op {:#04x}", h.op)));
    }
    if h.aux > 0xFF {
        return Err(bad(format!(
            "status word {:#06x} has a non-zero high byte",
            h.aux
        )));
    }
    let status = h.aux as u8;
    let result = if status == 0 {
        if op == OP_ERROR {
            return Err(bad("an error frame with status 0".into()));
        }
        Ok(body)
    } else {
        Err(decode_error(status, body).map_err(bad)?)
    };
    Ok(Response {
        op,
        machine: h.machine,
        req: h.req,
        result,
    })
}

/// Decodes the fields of error `code`.
fn decode_error(code: u8, body: &[u8]) -> std::result::Result<FabricError, String> {
    use FabricError as E;
    let mut f = Fields { buf: body };
    let text = |f: &mut Fields<'_>, what: &str| f.text(what).map(str::to_string);
    let e = match code {
        1 => E::NoSuchMachine {
            machine: f.u8("machine")?,
            machines: f.usize("machines")?,
        },
        2 => E::NoSuchRegion {
            machine: f.u8("machine")?,
            region: text(&mut f, "region")?,
        },
        3 => E::DuplicateRegion {
            machine: f.u8("machine")?,
            name: text(&mut f, "name")?,
        },
        4 => E::NotHosted {
            machine: f.u8("machine")?,
        },
        5 => E::OutOfBounds {
            machine: f.u8("machine")?,
            region: RegionId(f.u16("region")?),
            offset: f.u64("offset")?,
            len: f.u64("len")?,
            region_len: f.u64("region_len")?,
        },
        6 => E::Misaligned {
            offset: f.u64("offset")?,
            len: f.u64("len")?,
        },
        7 => {
            let len = f.u64("len")?;
            let limit = f.u64("limit")?;
            E::RegionTooLarge {
                name: text(&mut f, "name")?,
                len,
                limit,
            }
        }
        8 => E::TooManyInflight {
            inflight: f.usize("inflight")?,
            limit: f.usize("limit")?,
        },
        9 => E::InboxFull {
            machine: f.u8("machine")?,
            limit: f.usize("limit")?,
        },
        10 => E::MessageTooLarge {
            len: f.usize("len")?,
            limit: f.usize("limit")?,
        },
        11 => E::PeerUnavailable {
            machine: f.u8("machine")?,
            reason: text(&mut f, "reason")?,
        },
        12 => E::Protocol {
            machine: f.u8("machine")?,
            reason: text(&mut f, "reason")?,
        },
        13 => E::Injected {
            op_index: f.u64("op_index")?,
        },
        14 => E::WorkerPanicked {
            reason: text(&mut f, "reason")?,
        },
        15 => E::Config(text(&mut f, "reason")?),
        other => return Err(format!("unknown error status {other}")),
    };
    f.end(&format!("error status {code}"))?;
    Ok(e)
}

/// Decodes the body of an OK LOOKUP response.
pub(crate) fn decode_lookup_reply(body: &[u8], peer: MachineId) -> Result<RegionInfo> {
    let mut f = Fields { buf: body };
    let parse = |f: &mut Fields<'_>| -> std::result::Result<RegionInfo, String> {
        let info = RegionInfo {
            id: RegionId(f.u16("region id")?),
            len_bytes: f.u64("len_bytes")?,
        };
        f.end("LOOKUP reply")?;
        Ok(info)
    };
    parse(&mut f).map_err(|r| protocol(peer, format!("bad LOOKUP reply: {r}")))
}

/// The word of an OK CAS/FETCH_ADD response body (length checked by the caller).
#[inline]
pub(crate) fn word(body: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&body[..8]);
    u64::from_le_bytes(w)
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
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;
    const READ_BODY_BYTES: usize = 12;
    const CAS_BODY_BYTES: usize = 24;
    const FETCH_ADD_BODY_BYTES: usize = 16;
    const HELLO_BODY_BYTES: usize = 12;

    fn one_request(buf: &[u8]) -> Request<'_> {
        let len = frame_len(buf, MAX, 0).unwrap().expect("whole frame");
        assert_eq!(len, buf.len(), "exactly one frame");
        decode_request(buf, 0).unwrap().1
    }

    #[test]
    fn requests_round_trip_at_their_limits() {
        let mut b = Vec::new();
        encode_read(
            &mut b,
            u64::MAX,
            127,
            RegionId(u16::MAX),
            u64::MAX,
            u32::MAX,
        );
        assert_eq!(b.len(), HEADER_BYTES + READ_BODY_BYTES);
        assert_eq!(
            one_request(&b),
            Request::Read {
                machine: 127,
                region: RegionId(u16::MAX),
                offset: u64::MAX,
                len: u32::MAX
            }
        );
        let (h, _) = decode_request(&b, 0).unwrap();
        assert_eq!((h.req, h.op, h.machine), (u64::MAX, OP_READ, 127));

        let data: Vec<u8> = (0..MAX - HEADER_BYTES - 8).map(|i| i as u8).collect();
        b.clear();
        encode_write(&mut b, 7, 3, RegionId(2), 1 << 40, &data);
        assert_eq!(b.len(), MAX, "largest write fills the frame");
        assert_eq!(
            one_request(&b),
            Request::Write {
                machine: 3,
                region: RegionId(2),
                offset: 1 << 40,
                data: &data
            }
        );
        b.clear();
        encode_write(&mut b, 8, 0, RegionId(0), 0, &[]);
        assert!(matches!(one_request(&b), Request::Write { data: [], .. }));

        b.clear();
        encode_cas(&mut b, 1, 127, RegionId(9), 8, u64::MAX, 1);
        assert_eq!(b.len(), HEADER_BYTES + CAS_BODY_BYTES);
        assert_eq!(
            one_request(&b),
            Request::Cas {
                machine: 127,
                region: RegionId(9),
                offset: 8,
                expected: u64::MAX,
                new: 1
            }
        );
        b.clear();
        encode_fetch_add(&mut b, 2, 1, RegionId(1), 16, u64::MAX);
        assert_eq!(b.len(), HEADER_BYTES + FETCH_ADD_BODY_BYTES);
        assert_eq!(
            one_request(&b),
            Request::FetchAdd {
                machine: 1,
                region: RegionId(1),
                offset: 16,
                add: u64::MAX
            }
        );
        b.clear();
        encode_send(&mut b, 3, 127, 126, b"hello");
        assert_eq!(
            one_request(&b),
            Request::Send {
                to: 127,
                from: 126,
                payload: b"hello"
            }
        );
        b.clear();
        encode_lookup(&mut b, 4, 5, "values/\u{e9}");
        assert_eq!(
            one_request(&b),
            Request::Lookup {
                machine: 5,
                name: "values/\u{e9}"
            }
        );
        b.clear();
        encode_hello(&mut b, 0, 127, 128, MAX);
        assert_eq!(b.len(), HEADER_BYTES + HELLO_BODY_BYTES);
        assert_eq!(
            one_request(&b),
            Request::Hello {
                from: 127,
                version: PROTOCOL_VERSION,
                machines: 128,
                frame_bytes_max: MAX as u32
            }
        );
    }

    #[test]
    fn frames_are_little_endian_as_drawn() {
        let mut b = Vec::new();
        encode_fetch_add(
            &mut b,
            0x0102_0304_0506_0708,
            5,
            RegionId(0x0A0B),
            0x10,
            0x20,
        );
        assert_eq!(&b[0..4], &16u32.to_le_bytes(), "body_len");
        assert_eq!(b[4], OP_FETCH_ADD);
        assert_eq!(b[5], 5, "machine");
        assert_eq!(&b[6..8], &[0x0B, 0x0A], "region, little-endian");
        assert_eq!(&b[8..16], &[8, 7, 6, 5, 4, 3, 2, 1], "request id");
        assert_eq!(&b[16..24], &0x10u64.to_le_bytes(), "offset");
        assert_eq!(&b[24..32], &0x20u64.to_le_bytes(), "add");
    }

    #[test]
    fn responses_round_trip() {
        let mut b = Vec::new();
        let at = begin_ok(&mut b, OP_READ, 127, u64::MAX);
        b.extend_from_slice(&[9; 24]);
        end_response(&mut b, at);
        encode_ok_word(&mut b, OP_CAS, 1, 5, u64::MAX);
        encode_ok_empty(&mut b, OP_WRITE, 2, 6);
        let info = RegionInfo {
            id: RegionId(u16::MAX),
            len_bytes: crate::REGION_BYTES_MAX,
        };
        encode_ok_lookup(&mut b, 3, 7, info);
        let mut rest = &b[..];
        let mut got = Vec::new();
        while let Some(n) = frame_len(rest, MAX, 0).unwrap() {
            let r = decode_response(&rest[..n], 0).unwrap();
            got.push((r.op, r.machine, r.req, r.result.unwrap().to_vec()));
            rest = &rest[n..];
        }
        assert!(rest.is_empty());
        assert_eq!(got[0], (OP_READ, 127, u64::MAX, vec![9; 24]));
        assert_eq!(got[1].0, OP_CAS);
        assert_eq!(word(&got[1].3), u64::MAX);
        assert_eq!(got[2], (OP_WRITE, 2, 6, vec![]));
        assert_eq!(decode_lookup_reply(&got[3].3, 0).unwrap(), info);
        assert!(matches!(
            decode_lookup_reply(&got[3].3[..9], 4),
            Err(FabricError::Protocol { machine: 4, .. })
        ));
    }

    fn every_error() -> Vec<FabricError> {
        use FabricError as E;
        vec![
            E::NoSuchMachine {
                machine: 200,
                machines: 128,
            },
            E::NoSuchRegion {
                machine: 127,
                region: "'vals'".into(),
            },
            E::DuplicateRegion {
                machine: 0,
                name: "x".into(),
            },
            E::NotHosted { machine: 9 },
            E::OutOfBounds {
                machine: 127,
                region: RegionId(u16::MAX),
                offset: u64::MAX - 7,
                len: 16,
                region_len: crate::REGION_BYTES_MAX,
            },
            E::Misaligned {
                offset: 3,
                len: u64::MAX,
            },
            E::RegionTooLarge {
                name: String::new(),
                len: u64::MAX,
                limit: 1 << 37,
            },
            E::TooManyInflight {
                inflight: 4096,
                limit: 4096,
            },
            E::InboxFull {
                machine: 1,
                limit: 65536,
            },
            E::MessageTooLarge {
                len: 64 << 20,
                limit: 1 << 20,
            },
            E::PeerUnavailable {
                machine: 2,
                reason: "gone".into(),
            },
            E::Protocol {
                machine: 3,
                reason: "bad \u{1F980}".into(),
            },
            E::Injected { op_index: 17 },
            E::WorkerPanicked {
                reason: "boom".into(),
            },
            E::Config("no".into()),
        ]
    }

    #[test]
    fn every_error_round_trips_as_the_same_variant() {
        for e in every_error() {
            let mut b = Vec::new();
            encode_err(&mut b, OP_READ, 4, 99, &e);
            let r = decode_response(&b, 0).unwrap();
            assert_eq!((r.op, r.machine, r.req), (OP_READ, 4, 99));
            assert_eq!(r.result, Err(e));
        }
        let mut b = Vec::new();
        encode_err(&mut b, OP_ERROR, 0, 0, &FabricError::Config("x".into()));
        assert_eq!(b[4], 0xFF, "fatal error frames carry op 0xFF");
        assert_eq!(decode_response(&b, 0).unwrap().op, OP_ERROR);
    }

    fn is_protocol<T: std::fmt::Debug>(r: Result<T>) -> bool {
        matches!(r, Err(FabricError::Protocol { .. }))
    }

    #[test]
    fn truncated_frames_are_incomplete_or_protocol_errors() {
        let mut reqs = Vec::new();
        encode_read(&mut reqs, 1, 1, RegionId(1), 8, 8);
        encode_write(&mut reqs, 2, 1, RegionId(1), 8, &[1; 16]);
        encode_cas(&mut reqs, 3, 1, RegionId(1), 8, 1, 2);
        encode_fetch_add(&mut reqs, 4, 1, RegionId(1), 8, 1);
        encode_send(&mut reqs, 5, 1, 0, b"m");
        encode_lookup(&mut reqs, 6, 1, "r");
        encode_hello(&mut reqs, 7, 0, 4, MAX);
        // Every prefix of the stream is "not yet" for frame_len, and
        // decoding a cut frame is a Protocol error, never a panic.
        let mut at = 0;
        while at < reqs.len() {
            let n = frame_len(&reqs[at..], MAX, 0).unwrap().unwrap();
            for cut in 0..n {
                assert_eq!(frame_len(&reqs[at..at + cut], MAX, 0).unwrap(), None);
                assert!(is_protocol(decode_request(&reqs[at..at + cut], 0)));
                assert!(is_protocol(decode_response(&reqs[at..at + cut], 0)));
            }
            // A request is not a response, nor the other way round.
            assert!(is_protocol(decode_response(&reqs[at..at + n], 0)));
            at += n;
        }
        for e in every_error() {
            let mut b = Vec::new();
            encode_err(&mut b, OP_CAS, 1, 1, &e);
            for cut in HEADER_BYTES..b.len() {
                // Shorten the body but keep the header consistent.
                let mut t = b[..cut].to_vec();
                let body = (cut - HEADER_BYTES) as u32;
                t[0..4].copy_from_slice(&body.to_le_bytes());
                match decode_response(&t, 0) {
                    // A shorter string is still a valid error.
                    Ok(r) => assert!(r.result.is_err()),
                    Err(e) => assert!(matches!(e, FabricError::Protocol { .. })),
                }
            }
        }
        // A response is not a request.
        let mut b2 = Vec::new();
        encode_ok_empty(&mut b2, OP_HELLO, 0, 0);
        assert!(is_protocol(decode_request(&b2, 0)));
    }

    #[test]
    fn malformed_frames_are_protocol_errors() {
        let mut b = Vec::new();
        encode_read(&mut b, 1, 1, RegionId(0), 0, 8);
        let mut bad = b.clone();
        bad[4] = 0x42;
        assert!(is_protocol(decode_request(&bad, 3)));
        // Wrong body size for a fixed-size op.
        let mut long = b.clone();
        long.extend_from_slice(&[0; 8]);
        long[0..4].copy_from_slice(&20u32.to_le_bytes());
        assert!(is_protocol(decode_request(&long, 3)));
        // Header length disagreeing with the frame.
        assert!(is_protocol(decode_request(&b[..b.len() - 1], 3)));
        // Bad magic, bad UTF-8, non-zero aux where none belongs.
        let mut h = Vec::new();
        encode_hello(&mut h, 0, 0, 4, MAX);
        h[16] ^= 0xFF;
        assert!(is_protocol(decode_request(&h, 3)));
        let mut l = Vec::new();
        encode_lookup(&mut l, 0, 0, "ab");
        l[16] = 0xFF;
        assert!(is_protocol(decode_request(&l, 3)));
        let mut s = Vec::new();
        encode_send(&mut s, 0, 0, 1, b"x");
        s[6] = 1;
        assert!(is_protocol(decode_request(&s, 3)));
        // Responses: unknown status, non-zero high status byte, OK error frame.
        let mut r = Vec::new();
        encode_ok_empty(&mut r, OP_WRITE, 0, 0);
        r[6] = 200;
        assert!(is_protocol(decode_response(&r, 3)));
        r[6] = 0;
        r[7] = 1;
        assert!(is_protocol(decode_response(&r, 3)));
        let mut e = Vec::new();
        encode_ok_empty(&mut e, OP_ERROR, 0, 0);
        assert!(is_protocol(decode_response(&e, 3)));
        let err = decode_request(&bad, 3).unwrap_err();
        assert!(
            matches!(err, FabricError::Protocol { machine: 3, .. }),
            "{err}"
        );
    }

    #[test]
    fn oversized_frames_are_rejected_from_their_length_prefix() {
        let mut b = Vec::new();
        encode_write(&mut b, 1, 1, RegionId(0), 0, &[0; 1024]);
        assert_eq!(frame_len(&b, b.len(), 0).unwrap(), Some(b.len()));
        let err = frame_len(&b[..4], b.len() - 1, 2).unwrap_err();
        assert!(
            matches!(&err, FabricError::Protocol { machine: 2, reason } if reason.contains("exceeds the limit")),
            "{err}"
        );
        assert!(frame_len(&u32::MAX.to_le_bytes(), MAX, 0).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        // Seeded xorshift: deterministic garbage.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 48) as usize;
            let mut g: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if g.len() >= 4 && next() % 2 == 0 {
                // Often give it a consistent length so the body decoders run.
                let body = (g.len().max(HEADER_BYTES) - HEADER_BYTES) as u32;
                g[0..4].copy_from_slice(&body.to_le_bytes());
                if g.len() > 4 && next() % 2 == 0 {
                    g[4] = (next() % 8) as u8 | if next() % 2 == 0 { RESPONSE_BIT } else { 0 };
                }
                if g.len() > 7 && next() % 2 == 0 {
                    g[6] = (next() % 17) as u8;
                    g[7] = 0;
                }
            }
            let _ = frame_len(&g, 64, 0);
            let _ = decode_request(&g, 0);
            let _ = decode_response(&g, 0);
        }
    }

    #[test]
    fn recv_buf_reassembles_split_frames() {
        let mut stream = Vec::new();
        for i in 0..100u64 {
            encode_write(
                &mut stream,
                i,
                1,
                RegionId(0),
                i * 8,
                &vec![i as u8; (i as usize) * 8],
            );
        }
        // Deliver in awkward 7-byte pieces.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(7).min(out.len());
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut src = Trickle(&stream);
        let mut rb = RecvBuf::default();
        let mut seen = 0u64;
        while rb.read_from(&mut src, MAX).unwrap() > 0 {
            while let Some(n) = frame_len(rb.data(), MAX, 0).unwrap() {
                let (h, r) = decode_request(&rb.data()[..n], 0).unwrap();
                assert_eq!(h.req, seen);
                assert!(
                    matches!(r, Request::Write { data, .. } if data.len() == seen as usize * 8)
                );
                rb.consume(n);
                seen += 1;
            }
        }
        assert_eq!(seen, 100);
        assert!(rb.is_empty());
        // A lying length prefix cannot make the buffer grow past the limit.
        let mut lie = Vec::new();
        encode_read(&mut lie, 0, 0, RegionId(0), 0, 8);
        lie[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut src = Trickle(&lie);
        let mut rb = RecvBuf::default();
        while rb.read_from(&mut src, MAX).unwrap() > 0 {}
        assert!(rb.buf.len() <= MAX.max(RECV_CHUNK_BYTES) + HEADER_BYTES);
    }
}
