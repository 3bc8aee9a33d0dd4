use super::*;
use crate::wire::{op, FLAG_DOUBLE};

const SRC: NodeId = 1;
const DST: NodeId = 2;
const CLIENT: NodeId = 100;

fn router(bf: usize, cbf: usize) -> Router {
    Router::new(RouterConfig {
        bf_bytes: bf,
        cbf_bytes: cbf,
        ..RouterConfig::default()
    })
    .unwrap()
}

fn ctl(body: Body) -> Packet {
    Packet {
        from: SRC,
        shard: SRC,
        seq: 0,
        flags: 0,
        body,
    }
}

fn query(body: Body) -> Packet {
    Packet {
        from: CLIENT,
        shard: SRC,
        seq: 1,
        flags: 0,
        body,
    }
}

fn register(r: &mut Router, mode: RouterMode) -> Geometry {
    let geometry = Geometry::new(8, 2).unwrap();
    let out = r.on_packet(ctl(Body::Register {
        src: SRC,
        dst: DST,
        mode,
        geometry,
    }));
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: true, .. }));
    geometry
}

fn key_in(geo: Geometry, group: u32) -> u64 {
    (0..).find(|&k| geo.group_of(k) == group).unwrap()
}

fn targets(out: &[(NodeId, Packet)]) -> Vec<NodeId> {
    out.iter().map(|(n, _)| *n).collect()
}

#[test]
fn decision_table_matches_fig3() {
    use GroupState::*;
    assert_eq!(decide(NotStarted, false), Route::Source);
    assert_eq!(decide(NotStarted, true), Route::Source);
    assert_eq!(decide(Migrating, false), Route::DoubleRead);
    assert_eq!(decide(Migrating, true), Route::Destination);
    assert_eq!(decide(Migrated, false), Route::Destination);
    assert_eq!(decide(Migrated, true), Route::Destination);
    assert_eq!(decide(Conflict, false), Route::DoubleRead);
    assert_eq!(decide(Conflict, true), Route::Destination);
    assert_eq!(classify(true, true), Conflict);
}

#[test]
fn group_walks_s1_s2_s3() {
    let mut r = router(4096, 4096);
    let geo = register(&mut r, RouterMode::Filters);
    let k = key_in(geo, 5);
    let get = query(Body::Get { key: k });
    assert_eq!(targets(&r.on_packet(get.clone())), vec![SRC]);
    r.on_packet(ctl(Body::GroupStart { group: 5 }));
    let out = r.on_packet(get.clone());
    assert_eq!(targets(&out), vec![SRC, DST]);
    assert!(out.iter().all(|(_, p)| p.flags & FLAG_DOUBLE != 0));
    r.on_packet(ctl(Body::GroupComplete { group: 5 }));
    assert_eq!(targets(&r.on_packet(get)), vec![DST]);
    assert_eq!(r.lookup(SRC, k), Some(GroupState::Migrated));
    // Termination drops the instance and redirects the shard.
    r.on_packet(ctl(Body::Terminate));
    assert!(r.instances().is_empty());
    assert_eq!(
        targets(&r.on_packet(query(Body::Delete { key: k }))),
        vec![DST]
    );
}

#[test]
fn sticky_write_keeps_a_false_positive_group_off_source_only_reads() {
    // One CBF counter: every group collides.
    let mut r = router(4096, 1);
    let geo = register(&mut r, RouterMode::Filters);
    let (a, b) = (key_in(geo, 1), key_in(geo, 2));
    r.on_packet(ctl(Body::GroupStart { group: 1 }));
    assert_eq!(
        r.lookup(SRC, b),
        Some(GroupState::Migrating),
        "CBF false positive"
    );
    let out = r.on_packet(query(Body::Set {
        key: b,
        value: vec![1],
    }));
    assert_eq!(targets(&out), vec![DST]);
    r.on_packet(ctl(Body::GroupComplete { group: 1 }));
    // Group 2 never started, but a write of it went to the destination.
    assert_ne!(r.lookup(SRC, b), Some(GroupState::NotStarted));
    assert_eq!(
        targets(&r.on_packet(query(Body::Get { key: b }))),
        vec![DST]
    );
    assert_eq!(
        targets(&r.on_packet(query(Body::Get { key: a }))),
        vec![DST]
    );
    assert_eq!(r.stats().sticky_writes, 1);
}

#[test]
fn several_instances_are_independent_and_bounded() {
    let mut r = Router::new(RouterConfig {
        instances_max: 2,
        bf_bytes: 64,
        cbf_bytes: 64,
        ..RouterConfig::default()
    })
    .unwrap();
    let geometry = Geometry::new(6, 1).unwrap();
    for (src, ok) in [(1u16, true), (3, true), (5, false)] {
        let out = r.on_packet(Packet {
            from: src,
            shard: src,
            seq: 0,
            flags: 0,
            body: Body::Register {
                src,
                dst: src + 1,
                mode: RouterMode::DestinationFirst,
                geometry,
            },
        });
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: o, .. } if o == ok));
    }
    let to = |r: &mut Router, shard: u16| {
        targets(&r.on_packet(Packet {
            from: CLIENT,
            shard,
            seq: 0,
            flags: 0,
            body: Body::Get { key: 9 },
        }))
    };
    assert_eq!(to(&mut r, 1), vec![2]);
    assert_eq!(to(&mut r, 3), vec![4]);
    assert_eq!(to(&mut r, 5), vec![5]);
}

#[test]
fn control_from_a_stranger_or_for_no_instance_is_refused() {
    let mut r = router(64, 64);
    let out = r.on_packet(ctl(Body::GroupStart { group: 0 }));
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
    register(&mut r, RouterMode::Filters);
    let mut p = ctl(Body::GroupStart { group: 0 });
    p.from = 77;
    let out = r.on_packet(p);
    assert_eq!(out[0].0, 77);
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
    let out = r.on_packet(ctl(Body::GroupStart { group: 1 << 20 }));
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
    assert_eq!(r.stats().controls_refused, 3);
}

#[test]
fn random_packets_never_panic_the_router() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
    let mut r = router(8, 2);
    let geometry = Geometry::new(6, 1).unwrap();
    for _ in 0..20_000 {
        let from = rng.gen_range(0..4);
        let shard = rng.gen_range(0..4);
        let group = rng.gen_range(0..40);
        let body = match rng.gen_range(0..9) {
            0 => Body::Get { key: rng.gen() },
            1 => Body::Set {
                key: rng.gen(),
                value: vec![1],
            },
            2 => Body::Delete { key: rng.gen() },
            3 => Body::Register {
                src: rng.gen_range(0..4),
                dst: rng.gen_range(0..4),
                mode: [RouterMode::Filters, RouterMode::ClientTracked][rng.gen_range(0..2)],
                geometry,
            },
            4 => Body::GroupStart { group },
            5 => Body::GroupComplete { group },
            6 => Body::Terminate,
            7 => Body::Abort,
            _ => Body::DataAck { batch: 0 },
        };
        r.on_packet(Packet {
            from,
            shard,
            seq: 0,
            flags: 0,
            body,
        });
    }
    assert!(r.stats().controls_refused > 0);
    assert!(r.stats().unexpected > 0);
}

#[test]
fn a_duplicate_group_complete_is_acked_again_and_a_stray_one_refused() {
    let mut r = router(64, 64);
    register(&mut r, RouterMode::Filters);
    r.on_packet(ctl(Body::GroupStart { group: 2 }));
    let ok = r.on_packet(ctl(Body::GroupComplete { group: 2 }));
    assert!(matches!(ok[0].1.body, Body::ControlAck { ok: true, .. }));
    let dup = r.on_packet(ctl(Body::GroupComplete { group: 2 }));
    assert!(matches!(dup[0].1.body, Body::ControlAck { ok: true, .. }));
    assert_eq!(r.stats().control_duplicates, 1);
    // A COMPLETE for a group never started is refused (the 64-byte BF has no bit for it).
    let stray = (0..64).find(|&g| !r.bfs[0].contains(g)).unwrap();
    let out = r.on_packet(ctl(Body::GroupComplete { group: stray }));
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
}

#[test]
fn malformed_datagrams_are_counted_and_dropped() {
    let mut r = router(64, 64);
    assert!(r.on_datagram(&[1, 2, 3]).is_empty());
    assert!(r.on_datagram(&[]).is_empty());
    let mut buf = Vec::new();
    query(Body::Get { key: 1 }).encode(&mut buf).unwrap();
    buf[3] = 200;
    assert!(r.on_datagram(&buf).is_empty());
    assert_eq!(r.stats().malformed, 3);
    buf[3] = op::GET;
    assert_eq!(targets(&r.on_datagram(&buf)), vec![SRC]);
}

#[test]
fn fulva_exact_tracking_and_rocksteady_modes() {
    let mut r = router(64, 64);
    let geo = register(&mut r, RouterMode::ClientTracked);
    let k0 = key_in(geo, 0);
    let k1 = key_in(geo, 1);
    assert_eq!(
        targets(&r.on_packet(query(Body::Get { key: k0 }))),
        vec![SRC, DST]
    );
    assert_eq!(
        targets(&r.on_packet(query(Body::Delete { key: k1 }))),
        vec![DST]
    );
    r.on_packet(ctl(Body::GroupComplete { group: 0 }));
    assert_eq!(
        targets(&r.on_packet(query(Body::Get { key: k0 }))),
        vec![DST]
    );
    // Fulva's clients track the exact set: groups complete in any order (hot ones first).
    let k3 = key_in(geo, 3);
    let out = r.on_packet(ctl(Body::GroupComplete { group: 3 }));
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: true, .. }));
    assert_eq!(
        targets(&r.on_packet(query(Body::Get { key: k3 }))),
        vec![DST]
    );
    assert_eq!(
        targets(&r.on_packet(query(Body::Get { key: k1 }))),
        vec![SRC, DST],
        "group 1 has not completed"
    );
}

fn numbered(seq: u32, body: Body) -> Packet {
    Packet { seq, ..ctl(body) }
}

#[test]
fn control_packets_sent_again_are_acked_again_and_applied_once() {
    let mut r = router(64, 64);
    let geo = register(&mut r, RouterMode::Filters);
    let k = key_in(geo, 2);
    let start = numbered(5, Body::GroupStart { group: 2 });
    let first = r.on_packet(start.clone());
    let again = r.on_packet(start.clone());
    assert_eq!(first, again, "the same ack");
    assert_eq!(again[0].1.seq, 5, "echoing the number");
    assert_eq!(r.stats().control_duplicates, 1);
    let complete = numbered(6, Body::GroupComplete { group: 2 });
    let done = r.on_packet(complete.clone());
    assert!(matches!(done[0].1.body, Body::ControlAck { ok: true, .. }));
    // Counted once: one COMPLETE empties the CBF and the group is S3, not S4.
    assert_eq!(r.lookup(SRC, k), Some(GroupState::Migrated));
    assert_eq!(
        r.on_packet(complete),
        done,
        "a second COMPLETE is acked ok again"
    );
    assert_eq!(
        r.on_packet(start),
        first,
        "and a late START changes nothing"
    );
    assert_eq!(r.lookup(SRC, k), Some(GroupState::Migrated));
    // A REGISTER sent again is acked again; the instance stays.
    let reg = r.on_packet(ctl(Body::Register {
        src: SRC,
        dst: DST,
        mode: RouterMode::Filters,
        geometry: geo,
    }));
    assert!(matches!(reg[0].1.body, Body::ControlAck { ok: true, .. }));
    assert_eq!(r.lookup(SRC, k), Some(GroupState::Migrated));
}

#[test]
fn an_instance_counts_at_most_its_table_of_groups() {
    let mut r = router(1 << 12, 64);
    register(&mut r, RouterMode::Filters);
    for g in 0..GROUPS_INFLIGHT_MAX as u32 {
        let out = r.on_packet(ctl(Body::GroupStart { group: g }));
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: true, .. }));
    }
    let out = r.on_packet(ctl(Body::GroupStart { group: 40 }));
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
}

#[test]
fn a_fulva_shard_with_more_groups_than_tracked_is_refused() {
    let mut r = Router::new(RouterConfig {
        tracked_groups_max: 32,
        bf_bytes: 64,
        cbf_bytes: 64,
        ..RouterConfig::default()
    })
    .unwrap();
    let out = r.on_packet(ctl(Body::Register {
        src: SRC,
        dst: DST,
        mode: RouterMode::ClientTracked,
        geometry: Geometry::new(8, 2).unwrap(),
    }));
    assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
}
