//! Decoders of every frame drawn in `frame.rs`: the length prefix, requests
//! (a server's side), responses and errors (a client's side). Malformed input is
//! a [`FabricError::Protocol`], never a panic.

use super::{
    op_name, protocol, Header, HEADER_BYTES, HELLO_MAGIC, OP_CAS, OP_ERROR, OP_FETCH_ADD, OP_HELLO,
    OP_LOOKUP, OP_READ, OP_SEND, OP_WRITE, RESPONSE_BIT,
};
use crate::{FabricError, MachineId, RegionId, RegionInfo, Result};

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
        /// The client node's own epoch (0 without a membership).
        epoch: u64,
        /// The epoch the client expects this node at (0: no expectation).
        expect: u64,
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
                let version = f.u16("version")?;
                let machines = f.u16("machines")?;
                let frame_bytes_max = f.u32("frame_bytes_max")?;
                // Version 1 had no epochs: decode it so the version check can
                // refuse it by name.
                let (epoch, expect) = if version >= 2 {
                    (f.u64("epoch")?, f.u64("expected epoch")?)
                } else {
                    f.buf = &[];
                    (0, 0)
                };
                Request::Hello {
                    from: machine,
                    version,
                    machines,
                    frame_bytes_max,
                    epoch,
                    expect,
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
        16 => {
            let len = f.u64("len")?;
            E::NoMemory {
                name: text(&mut f, "name")?,
                len,
            }
        }
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
