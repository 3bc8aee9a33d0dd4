//! What one packet can make a node allocate is bounded, and going past a bound is refused with
//! an error that says which limit and what to do.

use locus_kvmigrate::wire::{Body, NodeId, Packet, DATAGRAM_BYTES_MAX, HEADER_BYTES};
use locus_kvmigrate::{Error, Geometry, MigrationPhase, Protocol, Server, ServerConfig};

const R: NodeId = 0;
const S: NodeId = 1;
const D: NodeId = 2;

fn init(buckets_log2: u8) -> Packet {
    Packet {
        from: S,
        shard: S,
        seq: 0,
        flags: 0,
        body: Body::Init {
            era: 1,
            protocol: Protocol::NetMigrate,
            geometry: Geometry::new(buckets_log2, 0).unwrap(),
        },
    }
}

#[test]
fn an_init_for_a_huge_shard_is_refused_before_anything_is_allocated() {
    let mut dest = Server::new(ServerConfig::new(D, R, Geometry::new(4, 1).unwrap())).unwrap();
    // 2^28 buckets would be gigabytes of empty table and a 32 MB group bitmap.
    let out = dest.handle(1, init(Geometry::BUCKETS_LOG2_MAX));
    match &out[..] {
        [(
            S,
            Packet {
                body:
                    Body::InitAck {
                        ok: false,
                        buckets_log2_max: 24,
                    },
                ..
            },
        )] => {}
        other => panic!("expected a refusal naming the limit, got {other:?}"),
    }
    assert_eq!(dest.stats().inits_too_large, 1);
    assert_eq!(dest.live_keys(S), 0);
    // Nothing was set up for the shard: its data is dropped.
    let data = Packet {
        body: Body::Data {
            batch: 0,
            group: 0,
            items: vec![],
        },
        ..init(4)
    };
    let dropped = dest.stats().dropped;
    assert!(dest.handle(2, data).is_empty());
    assert_eq!(dest.stats().dropped, dropped + 1);
    // At the limit it is accepted.
    let out = dest.handle(3, init(24));
    assert!(matches!(
        &out[..],
        [(
            _,
            Packet {
                body: Body::InitAck { ok: true, .. },
                ..
            }
        )]
    ));
}

#[test]
fn the_source_says_why_its_shard_was_refused() {
    let big = Geometry::new(20, 4).unwrap();
    let mut src = Server::new(ServerConfig::new(S, R, big)).unwrap();
    let mut dest = Server::new(ServerConfig {
        incoming_buckets_log2_max: 16,
        ..ServerConfig::new(D, R, Geometry::new(4, 1).unwrap())
    })
    .unwrap();
    let out = src.start_migration(0, S, D, Protocol::NetMigrate).unwrap();
    let (to, p) = out.into_iter().next().unwrap();
    assert_eq!(to, D);
    let (_, ack) = dest.handle(1, p).into_iter().next().unwrap();
    let out = src.handle(2, ack);
    assert!(
        out.iter().all(|(_, p)| p.body == Body::Abort),
        "the source aborts"
    );
    let status = src.migration_status().pop().unwrap();
    assert_eq!(status.phase, MigrationPhase::Aborted);
    let why = status.last_error.unwrap();
    assert!(
        why.contains("2^20 buckets") && why.contains("incoming_buckets_log2_max = 16"),
        "{why}"
    );
}

#[test]
fn a_limit_past_the_largest_table_is_refused_by_name() {
    let cfg = ServerConfig {
        incoming_buckets_log2_max: Geometry::BUCKETS_LOG2_MAX + 1,
        ..ServerConfig::new(D, R, Geometry::new(4, 1).unwrap())
    };
    match Server::new(cfg) {
        Err(Error::InvalidSetting { key, .. }) => assert_eq!(key, "incoming_buckets_log2_max"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn every_length_field_is_checked_against_the_datagram() {
    // A DATA header claiming 65,535 items in an empty body, and a SET whose value length
    // claims more than VALUE_BYTES_MAX: both are malformed, nothing is reserved for them.
    let mut buf = Vec::new();
    Packet {
        from: S,
        shard: S,
        seq: 0,
        flags: 0,
        body: Body::Data {
            batch: 0,
            group: 0,
            items: vec![],
        },
    }
    .encode(&mut buf)
    .unwrap();
    let count_at = HEADER_BYTES + 8;
    buf[count_at..count_at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(matches!(Packet::decode(&buf), Err(Error::Malformed(_))));
    let mut buf = Vec::new();
    Packet {
        from: 3,
        shard: S,
        seq: 0,
        flags: 0,
        body: Body::Set {
            key: 1,
            value: vec![7; 4],
        },
    }
    .encode(&mut buf)
    .unwrap();
    let len_at = HEADER_BYTES + 8;
    buf[len_at..len_at + 2].copy_from_slice(&2000u16.to_le_bytes());
    assert!(matches!(Packet::decode(&buf), Err(Error::Malformed(_))));
    assert!(Packet::decode(&vec![0; DATAGRAM_BYTES_MAX + 1]).is_err());
}
