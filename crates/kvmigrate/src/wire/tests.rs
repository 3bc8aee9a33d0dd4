//! Unit tests of `wire.rs`.

use super::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn samples() -> Vec<Packet> {
    let geo = Geometry::new(28, 11).unwrap();
    let big = vec![0xAB; VALUE_BYTES_MAX];
    let item = |k: u64, v: u64, val: Option<Vec<u8>>| Item {
        key: k,
        version: v,
        value: val,
    };
    let bodies = vec![
        Body::Get { key: u64::MAX },
        Body::Set {
            key: 0,
            value: big.clone(),
        },
        Body::Delete { key: 7 },
        Body::Reply {
            status: Status::NotFound,
            version: u64::MAX,
            value: vec![],
        },
        Body::Register {
            src: u16::MAX,
            dst: 0,
            mode: RouterMode::ClientTracked,
            geometry: geo,
        },
        Body::GroupStart { group: u32::MAX },
        Body::GroupComplete { group: 0 },
        Body::Terminate,
        Body::Abort,
        Body::ControlAck {
            op: op::GROUP_START,
            ok: true,
            group: 5,
        },
        Body::Init {
            era: u16::MAX,
            protocol: Protocol::Fulva,
            geometry: geo,
        },
        Body::InitAck {
            ok: false,
            buckets_log2_max: Geometry::BUCKETS_LOG2_MAX,
        },
        Body::Data {
            batch: 3,
            group: 9,
            items: vec![
                item(1, 2, Some(big.clone())),
                item(2, 9, None),
                item(3, 0, None),
                item(4, 1, Some(vec![])),
            ],
        },
        Body::DataAck { batch: u32::MAX },
        Body::GroupDone { group: 1 },
        Body::Finish,
        Body::Pull { key: 1 },
        Body::PullReply {
            item: item(5, 0, None),
        },
        Body::Mirror {
            item: item(6, u64::MAX, Some(vec![1])),
        },
        Body::MirrorAck { ok: true },
        Body::Probe,
        Body::ProbeAck { ok: false },
        Body::SourceLost,
        Body::HandBack { to: u16::MAX },
        Body::Reply {
            status: Status::Lost,
            version: 0,
            value: b"lost with server 1".to_vec(),
        },
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Packet {
            from: (i as u16).wrapping_mul(4099),
            shard: u16::MAX - i as u16,
            seq: u32::MAX - i as u32,
            flags: (i % 16) as u8,
            body,
        })
        .collect()
}

#[test]
fn every_op_round_trips_at_its_limits() {
    let mut buf = Vec::new();
    for p in samples() {
        p.encode(&mut buf).unwrap();
        assert_eq!(buf.len(), p.encoded_len());
        assert_eq!(Packet::decode(&buf).unwrap(), p);
    }
}

#[test]
fn header_is_little_endian_at_fixed_offsets() {
    let p = Packet {
        from: 0x0102,
        shard: 0x0304,
        seq: 0x0506_0708,
        flags: FLAG_DOUBLE | FLAG_LATE,
        body: Body::Get { key: 0x1122 },
    };
    let mut buf = Vec::new();
    p.encode(&mut buf).unwrap();
    assert_eq!(
        &buf[..16],
        &[0x4E, 0x4D, 1, 1, 9, 0, 2, 1, 4, 3, 8, 7, 6, 5, 8, 0]
    );
    assert_eq!(&buf[16..18], &[0x22, 0x11]);
}

#[test]
fn oversized_values_and_batches_are_refused() {
    let mut buf = Vec::new();
    let p = Packet {
        from: 1,
        shard: 1,
        seq: 1,
        flags: 0,
        body: Body::Set {
            key: 1,
            value: vec![0; VALUE_BYTES_MAX + 1],
        },
    };
    assert!(matches!(p.encode(&mut buf), Err(Error::TooLarge { .. })));
    let items = (0..64)
        .map(|k| Item {
            key: k,
            version: 1,
            value: Some(vec![0; VALUE_BYTES_MAX]),
        })
        .collect();
    let p = Packet {
        body: Body::Data {
            batch: 0,
            group: 0,
            items,
        },
        ..p
    };
    assert!(matches!(p.encode(&mut buf), Err(Error::TooLarge { .. })));
}

#[test]
fn truncations_and_corruptions_never_panic() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let mut buf = Vec::new();
    for p in samples() {
        p.encode(&mut buf).unwrap();
        for cut in 0..buf.len() {
            assert!(Packet::decode(&buf[..cut]).is_err());
        }
        for _ in 0..200 {
            let mut bad = buf.clone();
            let i = rng.gen_range(0..bad.len());
            bad[i] ^= 1 << rng.gen_range(0..8);
            let _ = Packet::decode(&bad);
        }
        let mut long = buf.clone();
        long.push(0);
        assert!(Packet::decode(&long).is_err());
    }
    for _ in 0..2000 {
        let len = rng.gen_range(0..64);
        let junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let _ = Packet::decode(&junk);
    }
}
