//! Property tests of the wire decoders (`locus_client::proto`, docs/protocol.md).
//!
//! - Totality: for random bytes and for valid frames of every kind mutated (bit flips,
//!   truncation, insertion, removal, overwritten length and count fields),
//!   `Header::parse`, `Request::decode`, `Reply::decode` (for every `Op`),
//!   `Control::decode` and `read_frame` return `Ok` or `Err`, never panic.
//! - Bounded allocation: a counting global allocator measures every decode call; a
//!   decoder allocates at most `ALLOC_PER_BODY_BYTE` bytes per body byte plus a small
//!   constant (error text), whatever a count field claims, and `read_frame` at most
//!   its frame limit. A decoded value re-encodes to exactly the body it came from,
//!   so no decoded list is longer than the body bytes allow.
//! - Round trip: any valid request, reply and control frame encodes and decodes back
//!   to itself, through `Header::parse` and through `read_frame`.
//!
//! 1024-2048 cases per property (well under a second in debug); a fixed-seed tally
//! shows the mutations reach every outcome, successful decodes included.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use locus_client::proto::{
    read_frame, AccessEntry, Control, ErrorCode, Header, JobKind, KhopReply, MoveHint, MoveReply,
    MoveStep, Op, ProtoError, ReadError, Reply, Request, SlotInFlight, CONTROL_LIST_MAX,
    DEADLINE_MS_MAX, ERROR_OP, FRAME_BYTES_MAX, FRAME_BYTES_MIN, HEADER_BYTES, HOPS_MAX, IDS_MAX,
    K_MAX, LIST_ABSENT, LOAD_VERTICES_MAX, MAGIC, REPLY_BIT, STATS_JSON_MAX, VERSION,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

/// Counts the bytes each thread asks the allocator for, so that one decode call's
/// allocations can be measured while other tests run on other threads.
struct CountingAlloc;

thread_local! {
    static ALLOCATED_BYTES: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // try_with: during thread teardown the counter may be gone; nothing to measure then.
    let _ = ALLOCATED_BYTES.try_with(|c| c.set(c.get().saturating_add(bytes)));
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches only a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

/// Runs `f`; returns its result and the bytes it allocated on this thread.
fn allocated_by<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATED_BYTES.with(Cell::get);
    let r = f();
    (r, ALLOCATED_BYTES.with(Cell::get) - before)
}

/// Bytes of decoded value per body byte at most: a LOAD vertex takes 8 body bytes and
/// 32 bytes as a `(u32, Vec<u32>)`; every other list element is denser.
const ALLOC_PER_BODY_BYTE: usize = 4;
/// Allocation allowed beyond that: the text of an error.
const ALLOC_SLACK_BYTES: usize = 512;

/// Every op the protocol defines.
const OPS: [Op; 25] = Op::ALL;

/// Frame limit of the `read_frame` properties: small, so that length fields past it
/// are common.
const SMALL_FRAME_BYTES_MAX: usize = 4096;

// ---- strategies of valid frames ----

fn ids() -> impl Strategy<Value = Vec<u32>> {
    vec(any::<u32>(), 0..48)
}

fn op_of(ops: &'static [Op]) -> impl Strategy<Value = Op> {
    proptest::sample::select(ops)
}

/// Any valid request; strings within their limits (64 chars of at most 4 bytes each
/// fit NAME_MAX), k-hop arguments in range.
fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        "\\PC{0,64}".prop_map(|client| Request::Hello { client }),
        Just(Request::Ping),
        (any::<u32>(), any::<u32>()).prop_map(|(vertex, k)| Request::Neighbors { vertex, k }),
        (any::<u32>(), any::<u32>()).prop_map(|(vertex, k)| Request::StaleNeighbors { vertex, k }),
        vec(any::<u32>(), 0..16).prop_map(|vertices| Request::Lists { vertices }),
        (any::<u32>(), ids()).prop_map(|(vertex, ids)| Request::Put { vertex, ids }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(vertex, neighbor)| Request::InsertEdge { vertex, neighbor }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(vertex, neighbor)| Request::DeleteEdge { vertex, neighbor }),
        (any::<u32>(), 1..=HOPS_MAX, 1..=K_MAX).prop_map(|(vertex, hops, k)| Request::Khop {
            vertex,
            hops,
            k
        }),
        vec((any::<u32>(), vec(any::<u32>(), 0..8)), 0..16)
            .prop_map(|vertices| Request::Load { vertices }),
        any::<u32>().prop_map(|vertex| Request::Migrate { vertex }),
        any::<u32>().prop_map(|vertex| Request::Where { vertex }),
        any::<u32>().prop_map(|vertex| Request::DeleteVertex { vertex }),
        Just(Request::Stats),
        Just(Request::Slots),
        Just(Request::Servers),
        (
            1..=7u8,
            any::<u8>(),
            vec(any::<u32>(), 0..16),
            vec(any::<u8>(), 0..32),
            vec(any::<u64>(), 0..16)
        )
            .prop_map(|(step, peer, slots, table, keys)| Request::Move {
                step: [
                    MoveStep::Guard,
                    MoveStep::Take,
                    MoveStep::Install,
                    MoveStep::Release,
                    MoveStep::Forget,
                    MoveStep::Status,
                    MoveStep::Recall
                ][step as usize - 1],
                peer,
                slots,
                table,
                keys,
            }),
    ]
}

fn khop_reply() -> impl Strategy<Value = KhopReply> {
    (any::<[u64; 6]>(), ids()).prop_map(|(n, distinct)| KhopReply {
        with_repeats: n[0],
        elapsed_ns: n[1],
        local_ops: n[2],
        remote_ops: n[3],
        local_bytes: n[4],
        remote_bytes: n[5],
        distinct,
    })
}

/// Any valid reply with the op of the request it answers. Error codes go through
/// `ErrorCode::from_code`, so a known code is never `Other`.
fn reply() -> impl Strategy<Value = (Op, Reply)> {
    const CLIENT_OPS: &[Op] = &[
        Op::Hello,
        Op::Ping,
        Op::Neighbors,
        Op::StaleNeighbors,
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
        Op::Servers,
        Op::Lists,
        Op::Move,
    ];
    prop_oneof![
        (
            any::<u8>(),
            any::<u16>(),
            FRAME_BYTES_MIN as u32..=u32::MAX,
            "\\PC{0,64}"
        )
            .prop_map(|(server_id, machines, frame_bytes_max, server)| (
                Op::Hello,
                Reply::Hello {
                    server_id,
                    machines,
                    frame_bytes_max,
                    server
                }
            )),
        Just((Op::Ping, Reply::Pong)),
        (
            any::<[u64; 4]>(),
            vec((any::<u32>(), any::<u8>(), any::<u8>()), 0..8),
            vec(any::<u64>(), 0..8)
        )
            .prop_map(|(n, f, listed)| (
                Op::Move,
                Reply::Move(MoveReply {
                    vertices: n[0],
                    keys: n[1],
                    bytes: n[2],
                    slots: n[3],
                    in_flight: f
                        .into_iter()
                        .map(|(slot, state, peer)| SlotInFlight {
                            slot,
                            leaving: state & 1 != 0,
                            handed: state & 2 != 0,
                            peer
                        })
                        .collect(),
                    listed,
                })
            )),
        (
            1..=64u32,
            1..=8u16,
            any::<u64>(),
            vec(
                (
                    any::<u8>(),
                    any::<u8>(),
                    vec(any::<u8>(), 1..8),
                    vec(any::<u8>(), 1..8)
                ),
                0..3
            )
        )
            .prop_map(|(slots, machines, epoch, hints)| {
                let t = locus_placement::slots::SlotTable::uniform(slots, machines).unwrap();
                let t = locus_placement::slots::SlotTable::from_owners(
                    epoch,
                    machines,
                    t.owners().to_vec(),
                )
                .unwrap();
                (
                    Op::Slots,
                    Reply::Slots {
                        table: t.encode(),
                        hints: hints
                            .into_iter()
                            .map(|(from, to, bf, cbf)| MoveHint { from, to, bf, cbf })
                            .collect(),
                    },
                )
            }),
        // Ids below 128 and addresses of 0..=64 chars of at most 4 bytes
        // (within NAME_MAX), as a server lists them.
        vec((0..128u8, "\\PC{0,64}"), 0..8)
            .prop_map(|servers| (Op::Servers, Reply::Servers(servers))),
        ids().prop_map(|ids| (Op::Neighbors, Reply::Neighbors(ids))),
        (any::<bool>(), ids()).prop_map(|(from_backup, ids)| (
            Op::StaleNeighbors,
            Reply::StaleNeighbors { from_backup, ids }
        )),
        // Lists of vertices with and without an entry, back to back.
        vec(proptest::option::of(vec(any::<u32>(), 0..6)), 0..8).prop_map(|lists| {
            let lens = lists
                .iter()
                .map(|l| l.as_ref().map_or(LIST_ABSENT, |l| l.len() as u32))
                .collect();
            let ids = lists.into_iter().flatten().flatten().collect();
            (Op::Lists, Reply::Lists { lens, ids })
        }),
        Just((Op::Put, Reply::Put)),
        (op_of(&[Op::InsertEdge, Op::DeleteEdge]), any::<bool>())
            .prop_map(|(op, c)| (op, Reply::Changed(c))),
        khop_reply().prop_map(|k| (Op::Khop, Reply::Khop(k))),
        proptest::option::of(ids()).prop_map(|l| (Op::DeleteVertex, Reply::Removed(l))),
        (any::<u32>(), any::<u64>(), vec(any::<bool>(), 0..40)).prop_map(
            |(vertices, edges_added, changed)| (
                Op::Load,
                Reply::Load {
                    vertices,
                    edges_added,
                    changed
                }
            )
        ),
        (any::<u8>(), any::<u8>(), any::<u32>(), any::<u64>()).prop_map(
            |(from, to, parts, bytes)| (
                Op::Migrate,
                Reply::Migrate {
                    from,
                    to,
                    parts,
                    bytes
                }
            )
        ),
        (any::<u8>(), any::<u8>(), any::<bool>()).prop_map(|(home, holder, found)| (
            Op::Where,
            Reply::Where {
                home,
                holder,
                found
            }
        )),
        "\\PC{0,100}".prop_map(|json| (Op::Stats, Reply::Stats(json))),
        (op_of(CLIENT_OPS), any::<u16>(), "\\PC{0,200}").prop_map(|(op, code, message)| (
            op,
            Reply::Error {
                code: ErrorCode::from_code(code),
                message
            }
        )),
    ]
}

fn access() -> impl Strategy<Value = AccessEntry> {
    (any::<u64>(), any::<u8>(), any::<u32>()).prop_map(|(key, holder, count)| AccessEntry {
        key,
        holder,
        count,
    })
}

fn control() -> impl Strategy<Value = Control> {
    let job = prop_oneof![Just(JobKind::Migrate), Just(JobKind::Replicate)];
    prop_oneof![
        any::<u8>().prop_map(|machine| Control::Register { machine }),
        (any::<u8>(), any::<u64>(), vec(access(), 0..16)).prop_map(
            |(machine, interval_ms, accesses)| Control::Report {
                machine,
                interval_ms,
                accesses
            }
        ),
        (any::<u8>(), any::<u64>(), access()).prop_map(|(machine, elapsed_ms, access)| {
            Control::Hot {
                machine,
                elapsed_ms,
                access,
            }
        }),
        (any::<u8>(), any::<u64>(), vec(any::<(u64, u32)>(), 0..16)).prop_map(
            |(machine, interval_ms, counts)| Control::Tracked {
                machine,
                interval_ms,
                counts
            }
        ),
        vec(any::<(u64, u8, bool)>(), 0..16).prop_map(Control::Migrated),
        vec((job, any::<u64>()), 0..16).prop_map(Control::Jobs),
        vec(any::<u64>(), 0..16).prop_map(Control::Track),
        Just(Control::Collect),
    ]
}

/// The encoded frame of any valid request, reply or control frame.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (request(), any::<u64>(), 1..=DEADLINE_MS_MAX).prop_map(|(r, id, deadline)| {
            let mut b = Vec::new();
            r.encode(&mut b, id, deadline);
            b
        }),
        (reply(), any::<u64>()).prop_map(|((op, r), id)| {
            let mut b = Vec::new();
            r.encode(&mut b, op, id);
            b
        }),
        control().prop_map(|c| {
            let mut b = Vec::new();
            c.encode(&mut b);
            b
        }),
    ]
}

// ---- mutations ----

/// A value to write over a length or count field: limits and their neighbours, the
/// extremes, small counts, or anything.
fn length_value() -> impl Strategy<Value = u32> {
    let limits = [
        IDS_MAX,
        LOAD_VERTICES_MAX,
        CONTROL_LIST_MAX,
        STATS_JSON_MAX,
        FRAME_BYTES_MAX,
        FRAME_BYTES_MAX - HEADER_BYTES,
        SMALL_FRAME_BYTES_MAX - HEADER_BYTES,
    ];
    prop_oneof![
        0u32..64,
        proptest::sample::select(limits.to_vec()).prop_map(|l| l as u32),
        proptest::sample::select(limits.to_vec()).prop_map(|l| l as u32 + 1),
        Just(u32::MAX),
        Just(u32::MAX / 4 + 1),
        any::<u32>(),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit.
    Flip(Index, u8),
    /// Cut the frame.
    Truncate(Index),
    /// Insert a byte.
    Insert(Index, u8),
    /// Remove a byte.
    Remove(Index),
    /// Overwrite 4 bytes (a count, `ids` length or `body_len`) at any offset.
    Overwrite32(Index, u32),
    /// Overwrite 2 bytes (a `str` length or error code) at any offset.
    Overwrite16(Index, u16),
    /// Set the header's `body_len`.
    BodyLen(u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(i, bit)| Mutation::Flip(i, bit)),
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Remove),
        (any::<Index>(), length_value()).prop_map(|(i, v)| Mutation::Overwrite32(i, v)),
        (any::<Index>(), any::<u16>()).prop_map(|(i, v)| Mutation::Overwrite16(i, v)),
        length_value().prop_map(Mutation::BodyLen),
    ]
}

fn mutate(frame: &mut Vec<u8>, m: &Mutation) {
    let len = frame.len();
    match *m {
        Mutation::Flip(ref i, bit) if len > 0 => frame[i.index(len)] ^= 1 << bit,
        Mutation::Truncate(ref i) => frame.truncate(i.index(len + 1)),
        Mutation::Insert(ref i, b) => frame.insert(i.index(len + 1), b),
        Mutation::Remove(ref i) if len > 0 => {
            frame.remove(i.index(len));
        }
        Mutation::Overwrite32(ref i, v) if len >= 4 => {
            let at = i.index(len - 3);
            frame[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        Mutation::Overwrite16(ref i, v) if len >= 2 => {
            let at = i.index(len - 1);
            frame[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
        Mutation::BodyLen(v) if len >= 8 => frame[4..8].copy_from_slice(&v.to_le_bytes()),
        _ => {}
    }
}

// ---- checks ----

fn alloc_max(body_bytes: usize) -> usize {
    ALLOC_PER_BODY_BYTE * body_bytes + ALLOC_SLACK_BYTES
}

/// What decoding a reply to `op` may allocate. A SERVERS reply lists at most
/// `MACHINES_MAX` servers, and each takes a `(u8, String)` however short its bytes
/// are, so its list has an absolute allowance on top of the per-byte bound.
fn reply_alloc_max(op: Op, body_bytes: usize) -> usize {
    let list = match op {
        Op::Servers => locus_fabric::MACHINES_MAX * std::mem::size_of::<(u8, String)>(),
        _ => 0,
    };
    alloc_max(body_bytes) + list
}

/// Body of a frame produced by an encoder.
fn body_of(frame: &[u8]) -> &[u8] {
    &frame[HEADER_BYTES..]
}

/// Runs every decoder on (`op_byte`, `body`): none may panic or allocate past the
/// bound, and whatever decodes re-encodes to exactly `body` with the same op byte.
fn check_decoders(op_byte: u8, body: &[u8]) -> Result<(), TestCaseError> {
    let bound = alloc_max(body.len());

    let (r, bytes) = allocated_by(|| Request::decode(op_byte, body));
    prop_assert!(
        bytes <= bound,
        "Request::decode(0x{op_byte:02x}) allocated {bytes} bytes for {} body bytes",
        body.len()
    );
    if let Ok((deadline_ms, request)) = r {
        prop_assert!((1..=DEADLINE_MS_MAX).contains(&deadline_ms));
        let mut out = Vec::new();
        request.encode(&mut out, 0, deadline_ms);
        prop_assert_eq!(out[3], op_byte);
        prop_assert_eq!(body_of(&out), body, "request re-encodes to its body");
    }

    for op in OPS {
        let (r, bytes) = allocated_by(|| Reply::decode(op, op_byte, body));
        prop_assert!(
            bytes <= reply_alloc_max(op, body.len()),
            "Reply::decode({op:?}, 0x{op_byte:02x}) allocated {bytes} bytes for {} body bytes",
            body.len()
        );
        if let Ok(reply) = r {
            let mut out = Vec::new();
            reply.encode(&mut out, op, 0);
            prop_assert_eq!(out[3], op_byte);
            prop_assert_eq!(body_of(&out), body, "{:?} reply re-encodes to its body", op);
        }
    }

    let (r, bytes) = allocated_by(|| Control::decode(op_byte, body));
    prop_assert!(
        bytes <= bound,
        "Control::decode(0x{op_byte:02x}) allocated {bytes} bytes for {} body bytes",
        body.len()
    );
    if let Ok(c) = r {
        let mut out = Vec::new();
        c.encode(&mut out);
        prop_assert_eq!(out[3], op_byte);
        prop_assert_eq!(body_of(&out), body, "control frame re-encodes to its body");
    }
    Ok(())
}

/// `read_frame` with a small limit on `input`: never panics, never allocates past the
/// limit, and a frame it returns is the one the bytes hold.
fn check_read_frame(input: &[u8], frame_bytes_max: usize) -> Result<(), TestCaseError> {
    let mut reader = input;
    let mut body = Vec::new();
    let (r, bytes) = allocated_by(|| read_frame(&mut reader, frame_bytes_max, &mut body));
    prop_assert!(
        bytes <= frame_bytes_max + ALLOC_SLACK_BYTES,
        "read_frame allocated {bytes} bytes with a {frame_bytes_max}-byte limit"
    );
    match r {
        Ok(h) => {
            prop_assert_eq!(&input[..2], &MAGIC[..]);
            prop_assert_eq!(h.body_len as usize, body.len());
            // The limit bounds the body to what it leaves after a header, as
            // `Header::parse` applies it (a limit below a header admits empty bodies).
            prop_assert!(body.len() <= frame_bytes_max.saturating_sub(HEADER_BYTES));
            prop_assert_eq!(&input[HEADER_BYTES..HEADER_BYTES + body.len()], &body[..]);
            prop_assert_eq!(reader.len(), input.len() - HEADER_BYTES - body.len());
        }
        Err(ReadError::Io(e)) => {
            prop_assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        }
        Err(ReadError::Proto(_)) => {
            prop_assert!(input.len() >= HEADER_BYTES, "a header error needs a header");
        }
        Err(e) => prop_assert!(false, "unexpected read error {e}"),
    }
    Ok(())
}

/// Every check a possibly broken frame gets.
fn check_frame(frame: &[u8]) -> Result<(), TestCaseError> {
    if frame.len() >= HEADER_BYTES {
        let h: &[u8; HEADER_BYTES] = frame[..HEADER_BYTES].try_into().expect("16 bytes");
        for limit in [0, HEADER_BYTES, SMALL_FRAME_BYTES_MAX, FRAME_BYTES_MAX] {
            if let Ok(header) = Header::parse(h, limit) {
                prop_assert!(header.body_len as usize <= limit.saturating_sub(HEADER_BYTES));
            }
        }
        // The body as sent, whatever the header claims, and the body the header claims.
        let op_byte = frame[3];
        check_decoders(op_byte, &frame[HEADER_BYTES..])?;
        let claimed = u32::from_le_bytes(frame[4..8].try_into().expect("4 bytes")) as usize;
        let end = HEADER_BYTES.saturating_add(claimed).min(frame.len());
        check_decoders(op_byte, &frame[HEADER_BYTES..end])?;
    }
    check_read_frame(frame, SMALL_FRAME_BYTES_MAX)
}

// ---- properties ----

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn any_request_round_trips(r in request(), id in any::<u64>(), deadline_ms in 1..=DEADLINE_MS_MAX) {
        let mut frame = Vec::new();
        r.encode(&mut frame, id, deadline_ms);
        let h = Header::parse(frame[..HEADER_BYTES].try_into().expect("16 bytes"), FRAME_BYTES_MAX)
            .expect("a valid header");
        prop_assert_eq!((h.version, h.op, h.id), (VERSION, r.op() as u8, id));
        prop_assert_eq!(h.body_len as usize, frame.len() - HEADER_BYTES);
        prop_assert_eq!(Request::decode(h.op, body_of(&frame)), Ok((deadline_ms, r.clone())));

        let mut reader = &frame[..];
        let mut body = Vec::new();
        let h2 = read_frame(&mut reader, FRAME_BYTES_MAX, &mut body).expect("one frame");
        prop_assert_eq!(h2, h);
        prop_assert!(reader.is_empty());
        prop_assert_eq!(Request::decode(h2.op, &body), Ok((deadline_ms, r)));
    }

    #[test]
    fn any_reply_round_trips((op, r) in reply(), id in any::<u64>()) {
        let mut frame = Vec::new();
        r.encode(&mut frame, op, id);
        let h = Header::parse(frame[..HEADER_BYTES].try_into().expect("16 bytes"), FRAME_BYTES_MAX)
            .expect("a valid header");
        let op_byte = if matches!(r, Reply::Error { .. }) { ERROR_OP } else { op as u8 | REPLY_BIT };
        prop_assert_eq!((h.version, h.op, h.id), (VERSION, op_byte, id));
        prop_assert_eq!(h.body_len as usize, frame.len() - HEADER_BYTES);
        prop_assert_eq!(Reply::decode(op, h.op, body_of(&frame)), Ok(r));
    }

    #[test]
    fn any_control_frame_round_trips(c in control()) {
        let mut frame = Vec::new();
        c.encode(&mut frame);
        let h = Header::parse(frame[..HEADER_BYTES].try_into().expect("16 bytes"), FRAME_BYTES_MAX)
            .expect("a valid header");
        prop_assert_eq!((h.version, h.op, h.id), (VERSION, c.op() as u8, 0));
        prop_assert_eq!(h.body_len as usize, frame.len() - HEADER_BYTES);
        prop_assert_eq!(Control::decode(h.op, body_of(&frame)), Ok(c));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn mutated_frames_decode_or_fail_within_bounds(
        frame in frame(),
        mutations in vec(mutation(), 1..4),
    ) {
        let mut frame = frame;
        for m in &mutations {
            mutate(&mut frame, m);
        }
        check_frame(&frame)?;
    }

    #[test]
    fn random_bodies_decode_or_fail_within_bounds(
        op_byte in prop_oneof![
            op_of(&OPS).prop_map(|op| op as u8),
            op_of(&OPS).prop_map(|op| op as u8 | REPLY_BIT),
            Just(ERROR_OP),
            any::<u8>(),
        ],
        deadline_ms in prop_oneof![1..=DEADLINE_MS_MAX, any::<u32>()],
        with_deadline in any::<bool>(),
        tail in vec(any::<u8>(), 0..256),
    ) {
        // Half the bodies start with a valid deadline, so request decoding gets past it.
        let mut body = Vec::new();
        if with_deadline {
            body.extend_from_slice(&deadline_ms.to_le_bytes());
        }
        body.extend_from_slice(&tail);
        check_decoders(op_byte, &body)?;
    }

    #[test]
    fn random_streams_read_or_fail_within_bounds(
        header in any::<[u8; HEADER_BYTES]>(),
        with_magic in any::<bool>(),
        body_len in prop_oneof![0u32..256, length_value()],
        rest in vec(any::<u8>(), 0..512),
        frame_bytes_max in 0..=SMALL_FRAME_BYTES_MAX,
    ) {
        let mut input = header.to_vec();
        if with_magic {
            input[..2].copy_from_slice(&MAGIC);
            input[4..8].copy_from_slice(&body_len.to_le_bytes());
        }
        input.extend_from_slice(&rest);
        check_read_frame(&input, frame_bytes_max)?;
        check_read_frame(&input[..input.len().min(HEADER_BYTES + 3)], frame_bytes_max)?;
        for limit in [0, frame_bytes_max, FRAME_BYTES_MAX, usize::MAX] {
            match Header::parse(&header, limit) {
                Ok(h) => {
                    prop_assert_eq!(&header[..2], &MAGIC[..]);
                    prop_assert!(h.body_len as usize <= limit.saturating_sub(HEADER_BYTES));
                }
                Err(_) => prop_assert!(
                    header[..2] != MAGIC
                        || u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize
                            > limit.saturating_sub(HEADER_BYTES)
                ),
            }
        }
    }
}

/// The allocation bound is not vacuous: a LOAD of many empty vertices is the densest
/// body, and it stays within it.
#[test]
fn densest_body_is_within_the_allocation_bound() {
    let r = Request::Load {
        vertices: (0..1000).map(|v| (v, Vec::new())).collect(),
    };
    let mut frame = Vec::new();
    r.encode(&mut frame, 1, 1000);
    let body = body_of(&frame);
    let (decoded, bytes) = allocated_by(|| Request::decode(Op::Load as u8, body));
    assert_eq!(decoded, Ok((1000, r)));
    assert!(bytes > 3 * body.len(), "{bytes} bytes for {}", body.len());
    assert!(bytes <= alloc_max(body.len()));
}

/// A SERVERS reply of the most servers with the shortest addresses is denser than the
/// per-byte bound allows (CI found a mutated count that reached it): the list's
/// allowance covers it, and a claimed count past the servers sent is refused.
#[test]
fn the_longest_servers_list_is_within_its_allocation_bound() {
    let servers: Vec<(u8, String)> = (0..locus_fabric::MACHINES_MAX as u8)
        .map(|id| (id, String::new()))
        .collect();
    let reply = Reply::Servers(servers);
    let mut frame = Vec::new();
    reply.encode(&mut frame, Op::Servers, 1);
    let body = body_of(&frame);
    let (decoded, bytes) = allocated_by(|| Reply::decode(Op::Servers, frame[3], body));
    assert_eq!(decoded, Ok(reply));
    assert!(
        bytes > alloc_max(body.len()),
        "{bytes} bytes for {}",
        body.len()
    );
    assert!(bytes <= reply_alloc_max(Op::Servers, body.len()));
    check_decoders(frame[3], body).expect("every decoder within bounds");

    let mut short = body.to_vec();
    short.truncate(body.len() / 2);
    let (decoded, bytes) = allocated_by(|| Reply::decode(Op::Servers, frame[3], &short));
    assert!(decoded.is_err());
    assert!(bytes <= reply_alloc_max(Op::Servers, short.len()));
}

/// The mutations are not vacuous: over a fixed-seed sample, mutated frames reach every
/// outcome of the header parser and the decoders, successful decodes included.
#[test]
fn mutated_frames_reach_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::collections::BTreeMap;

    fn outcome<T>(r: &Result<T, ProtoError>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(ProtoError::BadMagic { .. }) => "bad magic",
            Err(ProtoError::TooLarge { .. }) => "too large",
            Err(ProtoError::Malformed { .. }) => "malformed",
            Err(ProtoError::UnknownOp(_)) => "unknown op",
            Err(ProtoError::Invalid { .. }) => "invalid",
            Err(_) => "other",
        }
    }

    let mut runner = TestRunner::deterministic();
    let cases = (frame(), vec(mutation(), 1..4));
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..1024 {
        let (mut frame, mutations) = cases.new_tree(&mut runner).expect("a case").current();
        for m in &mutations {
            mutate(&mut frame, m);
        }
        if frame.len() < HEADER_BYTES {
            continue;
        }
        let h: &[u8; HEADER_BYTES] = frame[..HEADER_BYTES].try_into().expect("16 bytes");
        let (op_byte, body) = (frame[3], &frame[HEADER_BYTES..]);
        let mut tally = |what: &str, o: &str| *seen.entry(format!("{what}: {o}")).or_default() += 1;
        tally("header", outcome(&Header::parse(h, FRAME_BYTES_MAX)));
        tally("request", outcome(&Request::decode(op_byte, body)));
        tally("control", outcome(&Control::decode(op_byte, body)));
        if let Some(op) = Op::from_u8(op_byte & !REPLY_BIT) {
            tally("reply", outcome(&Reply::decode(op, op_byte, body)));
        }
    }
    for want in [
        "header: ok",
        "header: bad magic",
        "header: too large",
        "request: ok",
        "request: malformed",
        "request: too large",
        "request: invalid",
        "request: unknown op",
        "reply: ok",
        "reply: malformed",
        "reply: too large",
        "control: ok",
        "control: malformed",
        "control: too large",
    ] {
        assert!(
            seen.get(want).copied().unwrap_or(0) > 0,
            "never reached {want}: {seen:?}"
        );
    }
}

/// Statistics past the limit are not cut (cut JSON is unreadable): the
/// reply becomes a TOO_LARGE error that decodes.
#[test]
fn an_oversized_stats_reply_is_a_too_large_error() {
    let json = format!("{}é", "a".repeat(STATS_JSON_MAX - 1));
    let mut frame = Vec::new();
    Reply::Stats(json).encode(&mut frame, Op::Stats, 1);
    let decoded = Reply::decode(Op::Stats, frame[3], body_of(&frame));
    assert!(
        matches!(
            decoded,
            Ok(Reply::Error {
                code: ErrorCode::TooLarge,
                ..
            })
        ),
        "{decoded:?}"
    );
}
