//! Encoders of every frame drawn in `frame.rs`: requests, OK responses, and
//! error responses carrying a [`FabricError`]'s fields (the status table).

use super::{
    HEADER_BYTES, HELLO_MAGIC, OP_CAS, OP_FETCH_ADD, OP_HELLO, OP_LOOKUP, OP_READ, OP_SEND,
    OP_WRITE, PROTOCOL_VERSION, RESPONSE_BIT,
};
use crate::{FabricError, MachineId, RegionId, RegionInfo};

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

/// HELLO from the client's machine `from`, whose node is at `epoch` and
/// expects the listener at `expect`.
pub(crate) fn encode_hello(
    buf: &mut Vec<u8>,
    req: u64,
    from: MachineId,
    machines: usize,
    frame_bytes_max: usize,
    (epoch, expect): (u64, u64),
) {
    let at = begin(buf, OP_HELLO, from, 0, req);
    buf.extend_from_slice(&HELLO_MAGIC.to_le_bytes());
    buf.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    buf.extend_from_slice(&(machines as u16).to_le_bytes());
    buf.extend_from_slice(&(frame_bytes_max as u32).to_le_bytes());
    buf.extend_from_slice(&epoch.to_le_bytes());
    buf.extend_from_slice(&expect.to_le_bytes());
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
        E::NoMemory { name, len } => {
            put_u64(buf, *len);
            buf.extend_from_slice(name.as_bytes());
            16
        }
    }
}
