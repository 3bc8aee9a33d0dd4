//! Round trips of every frame, and decoders against hand-made bad bodies.

use super::*;

fn requests() -> Vec<Request> {
    vec![
        Request::Hello {
            client: "test ü".into(),
        },
        Request::Ping,
        Request::Neighbors { vertex: 7, k: 0 },
        Request::Put {
            vertex: u32::MAX,
            ids: vec![1, 2, 3],
        },
        Request::InsertEdge {
            vertex: 1,
            neighbor: 2,
        },
        Request::DeleteEdge {
            vertex: 3,
            neighbor: 4,
        },
        Request::Khop {
            vertex: 5,
            hops: 8,
            k: K_MAX,
        },
        Request::Load {
            vertices: vec![(1, vec![2, 3]), (4, vec![])],
        },
        Request::Migrate { vertex: 9 },
        Request::Where { vertex: 10 },
        Request::DeleteVertex { vertex: u32::MAX },
        Request::Stats,
    ]
}

fn frame_parts(buf: &[u8]) -> (Header, &[u8]) {
    let h = Header::parse(buf[..HEADER_BYTES].try_into().unwrap(), FRAME_BYTES_MAX).unwrap();
    assert_eq!(h.body_len as usize, buf.len() - HEADER_BYTES);
    (h, &buf[HEADER_BYTES..])
}

#[test]
fn every_request_round_trips() {
    for (i, r) in requests().into_iter().enumerate() {
        let mut buf = Vec::new();
        r.encode(&mut buf, i as u64, 1234);
        let (h, body) = frame_parts(&buf);
        assert_eq!((h.version, h.op, h.id), (VERSION, r.op() as u8, i as u64));
        assert_eq!(Request::decode(h.op, body).unwrap(), (1234, r));
    }
}

#[test]
fn every_reply_round_trips() {
    let replies = [
        (
            Op::Hello,
            Reply::Hello {
                server_id: 2,
                machines: 128,
                frame_bytes_max: 1 << 20,
                server: "locus 0.1.0".into(),
            },
        ),
        (Op::Ping, Reply::Pong),
        (Op::Neighbors, Reply::Neighbors(vec![4, 5])),
        (Op::Put, Reply::Put),
        (Op::InsertEdge, Reply::Changed(true)),
        (Op::DeleteEdge, Reply::Changed(false)),
        (
            Op::Khop,
            Reply::Khop(KhopReply {
                with_repeats: 9,
                elapsed_ns: 1,
                local_ops: 2,
                remote_ops: 3,
                local_bytes: 4,
                remote_bytes: 5,
                distinct: vec![1, 7],
            }),
        ),
        (
            Op::Load,
            Reply::Load {
                vertices: 3,
                edges_added: 1 << 40,
                changed: vec![true, false, true, true, false, false, false, false, true],
            },
        ),
        (
            Op::Migrate,
            Reply::Migrate {
                from: 1,
                to: 127,
                parts: 2,
                bytes: 99,
            },
        ),
        (
            Op::Where,
            Reply::Where {
                home: 0,
                holder: 1,
                found: true,
            },
        ),
        (Op::Stats, Reply::Stats("{\"a\":1}".into())),
        (Op::DeleteVertex, Reply::Removed(None)),
        (Op::DeleteVertex, Reply::Removed(Some(vec![]))),
        (Op::DeleteVertex, Reply::Removed(Some(vec![3, 1]))),
        (
            Op::Khop,
            Reply::Error {
                code: ErrorCode::UnknownVertex,
                message: "server 1 (127.0.0.1:1): vertex 5 has no entry".into(),
            },
        ),
        (
            Op::Ping,
            Reply::Error {
                code: ErrorCode::Other(999),
                message: String::new(),
            },
        ),
    ];
    for (op, r) in replies {
        let mut buf = Vec::new();
        r.encode(&mut buf, op, 77);
        let (h, body) = frame_parts(&buf);
        assert_eq!(h.id, 77);
        assert_eq!(Reply::decode(op, h.op, body).unwrap(), r, "{op:?}");
    }
}

#[test]
fn every_control_frame_round_trips() {
    let frames = [
        Control::Register { machine: 3 },
        Control::Report {
            machine: 1,
            interval_ms: 10_000,
            accesses: vec![AccessEntry {
                key: 5 | 1 << 32,
                holder: 2,
                count: 300,
            }],
        },
        Control::Hot {
            machine: 0,
            elapsed_ms: 5,
            access: AccessEntry {
                key: 1,
                holder: 127,
                count: u32::MAX,
            },
        },
        Control::Tracked {
            machine: 2,
            interval_ms: 1,
            counts: vec![(1, 2), (3, 4)],
        },
        Control::Migrated(vec![(1, 2, true), (3, 4, false)]),
        Control::Jobs(vec![(JobKind::Migrate, 1), (JobKind::Replicate, 2)]),
        Control::Track(vec![1, 2, 3]),
        Control::Collect,
    ];
    for c in frames {
        let mut buf = Vec::new();
        c.encode(&mut buf);
        let (h, body) = frame_parts(&buf);
        assert_eq!(Control::decode(h.op, body).unwrap(), c);
    }
}

#[test]
fn bad_bodies_are_errors() {
    // A count that promises more ids than the body holds: refused before allocating.
    let mut body = 1000u32.to_le_bytes().to_vec();
    body.extend_from_slice(&7u32.to_le_bytes());
    body.extend_from_slice(&(IDS_MAX as u32).to_le_bytes());
    assert!(matches!(
        Request::decode(Op::Put as u8, &body),
        Err(ProtoError::Malformed { .. })
    ));
    // Past the ids limit.
    let mut body = 1000u32.to_le_bytes().to_vec();
    body.extend_from_slice(&7u32.to_le_bytes());
    body.extend_from_slice(&(IDS_MAX as u32 + 1).to_le_bytes());
    assert!(matches!(
        Request::decode(Op::Put as u8, &body),
        Err(ProtoError::TooLarge { .. })
    ));
    // Deadline 0, trailing bytes, unknown op, control op on the client side.
    assert!(matches!(
        Request::decode(Op::Ping as u8, &0u32.to_le_bytes()),
        Err(ProtoError::Invalid {
            field: "deadline_ms",
            ..
        })
    ));
    assert!(matches!(
        Request::decode(Op::Ping as u8, &[1, 0, 0, 0, 9]),
        Err(ProtoError::Malformed { .. })
    ));
    assert_eq!(
        Request::decode(0x3F, &[1, 0, 0, 0]),
        Err(ProtoError::UnknownOp(0x3F))
    );
    assert_eq!(
        Request::decode(Op::Jobs as u8, &[1, 0, 0, 0]),
        Err(ProtoError::UnknownOp(Op::Jobs as u8))
    );
    // hops out of range.
    let mut body = 10u32.to_le_bytes().to_vec();
    body.extend_from_slice(&1u32.to_le_bytes());
    body.push(9);
    body.extend_from_slice(&5u32.to_le_bytes());
    assert!(matches!(
        Request::decode(Op::Khop as u8, &body),
        Err(ProtoError::Invalid { field: "hops", .. })
    ));
}

#[test]
fn headers_check_magic_and_length() {
    let mut buf = Vec::new();
    Request::Ping.encode(&mut buf, 1, 10);
    let mut h: [u8; HEADER_BYTES] = buf[..HEADER_BYTES].try_into().unwrap();
    assert!(Header::parse(&h, FRAME_BYTES_MAX).is_ok());
    assert!(matches!(
        Header::parse(&h, HEADER_BYTES + 3),
        Err(ProtoError::TooLarge { .. })
    ));
    h[0] = b'X';
    assert!(matches!(
        Header::parse(&h, FRAME_BYTES_MAX),
        Err(ProtoError::BadMagic { .. })
    ));
}

#[test]
fn read_frame_stops_at_the_limit_before_reading_the_body() {
    let mut buf = Vec::new();
    Request::Put {
        vertex: 1,
        ids: vec![0; 100],
    }
    .encode(&mut buf, 1, 10);
    let mut body = Vec::new();
    let mut r = &buf[..];
    assert!(read_frame(&mut r, FRAME_BYTES_MAX, &mut body).is_ok());
    assert_eq!(body.len(), buf.len() - HEADER_BYTES);
    let mut r = &buf[..];
    assert!(matches!(
        read_frame(&mut r, 64, &mut body),
        Err(ReadError::Proto(ProtoError::TooLarge { .. }))
    ));
    let mut r = &buf[..20];
    assert!(matches!(
        read_frame(&mut r, FRAME_BYTES_MAX, &mut body),
        Err(ReadError::Io(_))
    ));
}

#[test]
fn a_load_reply_bitmap_with_bits_past_its_flags_or_cut_short_is_malformed() {
    let mut buf = Vec::new();
    Reply::Load {
        vertices: 1,
        edges_added: 2,
        changed: vec![true, false, true],
    }
    .encode(&mut buf, Op::Load, 9);
    let (op_byte, body) = (buf[3], &buf[HEADER_BYTES..]);
    // vertices u32, edges_added u64, count u32, then one byte: 0b101.
    assert_eq!(&body[12..], &[3, 0, 0, 0, 0b101]);
    let mut past = body.to_vec();
    past[16] |= 0b1000;
    assert!(matches!(
        Reply::decode(Op::Load, op_byte, &past),
        Err(ProtoError::Malformed { .. })
    ));
    assert!(Reply::decode(Op::Load, op_byte, &body[..16]).is_err());
    let mut many = body.to_vec();
    many[12..16].copy_from_slice(&(LOAD_VERTICES_MAX as u32 + 1).to_le_bytes());
    assert!(matches!(
        Reply::decode(Op::Load, op_byte, &many),
        Err(ProtoError::TooLarge { .. })
    ));
}
