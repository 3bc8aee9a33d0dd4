//! Unit tests of `frame.rs`.

use super::*;
use crate::{RegionId, RegionInfo, Result};

const MAX: usize = 1 << 20;
const READ_BODY_BYTES: usize = 12;
const CAS_BODY_BYTES: usize = 24;
const FETCH_ADD_BODY_BYTES: usize = 16;
const HELLO_BODY_BYTES: usize = 28;

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
    encode_hello(&mut b, 0, 127, 128, MAX, (5, 9));
    assert_eq!(b.len(), HEADER_BYTES + HELLO_BODY_BYTES);
    assert_eq!(
        one_request(&b),
        Request::Hello {
            from: 127,
            version: PROTOCOL_VERSION,
            machines: 128,
            frame_bytes_max: MAX as u32,
            epoch: 5,
            expect: 9,
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
        E::NoMemory {
            name: "values".into(),
            len: 1 << 40,
        },
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
    encode_hello(&mut reqs, 7, 0, 4, MAX, (0, 0));
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
    encode_hello(&mut h, 0, 0, 4, MAX, (0, 0));
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
            assert!(matches!(r, Request::Write { data, .. } if data.len() == seen as usize * 8));
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
