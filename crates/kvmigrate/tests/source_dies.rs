//! A source that dies mid-migration (design: "NetMigrate: a dead source"): the destination
//! probes it, the router frees the instance and sends the shard to the destination, every key
//! answers from there or says LOST (never absent: the history checker sees an absent read of a
//! key that had a value), and an operator's `recover` or `abort` frees the orphaned shard.

mod dies_common;

use dies_common::{sim_with_a_kill, slow_copy, wait_for_groups_done};
use locus_kvmigrate::sim::SimReport;
use locus_kvmigrate::wire::{Body, Packet, Status};
use locus_kvmigrate::{MigrationPhase, Protocol};

const SOURCE: u16 = 1;
const DEST: u16 = 2;

fn kill_source(seed: u64, protocol: Protocol) -> SimReport {
    sim_with_a_kill(seed, protocol, true, |cfg| {
        cfg.kill_source_at_step = Some(300 + seed * 37 % 600);
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn orphaned(r: &SimReport) -> bool {
    r.destination_status
        .iter()
        .any(|s| s.phase == MigrationPhase::SourceLost)
}

#[test]
fn dead_source_leaves_no_instance_and_no_key_absent() {
    for protocol in [
        Protocol::NetMigrate,
        Protocol::Rocksteady,
        Protocol::Fulva,
        Protocol::SourceBased,
    ] {
        let (mut hit, mut lost) = (0, 0);
        for seed in 0..10 {
            let r = kill_source(seed, protocol);
            assert_eq!(
                r.router_instances,
                0,
                "{} seed {seed}: the router still holds the migration",
                protocol.name()
            );
            if orphaned(&r) {
                hit += 1;
                lost += r.lost_reads;
                assert!(r.destination.sources_lost >= 1);
                let s = &r.destination_status[0];
                assert_eq!((s.source, s.destination), (SOURCE, DEST));
                assert!(s.groups_done < s.groups_total, "{s:?}");
                let why = s.last_error.as_deref().unwrap_or("");
                assert!(
                    why.contains("did not answer") && why.contains("recover"),
                    "{why}"
                );
            }
        }
        assert!(
            hit > 0,
            "{}: the kill never hit a running migration",
            protocol.name()
        );
        assert!(
            lost > 0,
            "{}: no read was ever answered LOST",
            protocol.name()
        );
    }
}

fn get(key: u64, seq: u32) -> Packet {
    Packet {
        from: 3,
        shard: SOURCE,
        seq,
        flags: 0,
        body: Body::Get { key },
    }
}

/// Routes a GET through the router to the server it picks; the reply's status.
fn read(r: &mut SimReport, key: u64, now_us: u64) -> Vec<Status> {
    let mut statuses = Vec::new();
    for (to, p) in r.end.router.on_packet(get(key, key as u32)) {
        assert_eq!(to, DEST, "the shard is served by the destination");
        for (_, reply) in r.end.servers[1].handle(now_us, p) {
            if let Body::Reply { status, .. } = reply.body {
                statuses.push(status);
            }
        }
    }
    statuses
}

fn first_orphan(protocol: Protocol) -> SimReport {
    (0..20)
        .map(|seed| kill_source(seed, protocol))
        .find(|r| orphaned(r) && r.lost_reads > 0)
        .expect("some seed orphans the shard")
}

#[test]
fn recover_accepts_the_loss_and_frees_the_shard() {
    let mut r = first_orphan(Protocol::NetMigrate);
    let now = 1 << 40;
    let keys = r.initial.len() as u64;
    let before: Vec<Vec<Status>> = (0..keys).map(|k| read(&mut r, k, now)).collect();
    assert!(before.iter().flatten().any(|s| *s == Status::Lost));
    r.end.servers[1].recover_orphan(now, SOURCE).unwrap();
    for k in 0..keys {
        let after = read(&mut r, k, now);
        assert_eq!(after.len(), 1);
        assert_ne!(after[0], Status::Lost, "key {k} still LOST after recover");
        // What answered before still answers the same way.
        if before[k as usize] != [Status::Lost] {
            assert_eq!(after, before[k as usize], "key {k}");
        }
    }
    let status = r.end.servers[1].migration_status();
    assert!(
        status.iter().any(|s| s.phase == MigrationPhase::Recovered),
        "{status:?}"
    );
    assert!(!status.iter().any(|s| s.phase == MigrationPhase::SourceLost));
    // No lasting MigrationBusy: the shard moves on.
    assert!(r.end.servers[1].owns(SOURCE));
    r.end.servers[1]
        .start_migration(now, SOURCE, 5, Protocol::NetMigrate)
        .expect("a recovered shard can migrate again");
    // A second recover names no orphan.
    let e = r.end.servers[1].recover_orphan(now, SOURCE).unwrap_err();
    assert!(e.to_string().contains("no orphaned shard"), "{e}");
}

#[test]
fn abort_sends_the_shard_back_to_its_source() {
    let mut r = first_orphan(Protocol::NetMigrate);
    let now = 1 << 40;
    let out = r.end.servers[1].abandon_orphan(now, SOURCE).unwrap();
    assert!(!r.end.servers[1].owns(SOURCE));
    assert_eq!(
        r.end.servers[1].live_keys(SOURCE),
        0,
        "the partial copy is freed"
    );
    let mut acked = false;
    for (to, p) in out {
        assert_eq!(to, 0);
        for (_, ack) in r.end.router.on_packet(p) {
            acked |= matches!(ack.body, Body::ControlAck { ok: true, .. });
        }
    }
    assert!(acked, "the router accepted HAND-BACK");
    let routed = r.end.router.on_packet(get(1, 1));
    assert_eq!(routed.len(), 1);
    assert_eq!(routed[0].0, SOURCE, "the shard routes to its source again");
    let status = r.end.servers[1].migration_status();
    assert!(
        status.iter().any(|s| s.phase == MigrationPhase::RolledBack),
        "{status:?}"
    );
}

#[test]
fn only_the_destination_can_declare_its_source_lost() {
    let r = first_orphan(Protocol::NetMigrate);
    let mut router = r.end.router;
    // The shard is redirected to the destination now; a HAND-BACK from anyone else, or a
    // SOURCE-LOST for a shard no instance migrates, is refused.
    for (from, body) in [(7, Body::HandBack { to: 7 }), (DEST, Body::SourceLost)] {
        let p = Packet {
            from,
            shard: SOURCE,
            seq: 9,
            flags: 0,
            body,
        };
        let out = router.on_packet(p);
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
    }
    assert_eq!(router.on_packet(get(1, 1))[0].0, DEST);
}

#[test]
fn threaded_cluster_orphans_recovers_and_moves_the_shard_on() {
    use locus_kvmigrate::Error;
    use std::time::{Duration, Instant};

    // A slow copy (as in `destination_dies.rs`): still running when the source dies.
    let keys = 20_000u64;
    let (cluster, mut client) = slow_copy(3, keys);
    let deadline = Instant::now() + Duration::from_secs(30);
    let wait_for = |phase: MigrationPhase| loop {
        let s = cluster.migration_status();
        if let Some(m) = s.iter().find(|m| m.phase == phase && m.destination == DEST) {
            break m.clone();
        }
        assert!(Instant::now() < deadline, "no {phase:?}: {s:?}");
        std::thread::sleep(Duration::from_millis(2));
    };
    wait_for_groups_done(&cluster, 4, deadline);
    cluster.kill(SOURCE);
    let lost = loop {
        let m = wait_for(MigrationPhase::SourceLost);
        if m.last_error
            .as_deref()
            .unwrap_or("")
            .contains("orphaned here")
        {
            break m;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(lost.groups_done < lost.groups_total, "{lost:?}");
    // Every key answers: its value, or LOST naming the dead source; never absent.
    let (mut answered, mut lost_keys) = (0, 0);
    for k in 0..keys {
        match client.get(SOURCE, k) {
            Ok(Some(v)) => {
                assert_eq!(v, vec![1; 64]);
                answered += 1;
            }
            Ok(None) => panic!("key {k} read as absent"),
            Err(Error::DataLost { server, message }) => {
                assert_eq!(server, DEST);
                assert!(message.contains("server 1"), "{message}");
                lost_keys += 1;
            }
            Err(e) => panic!("key {k}: {e}"),
        }
    }
    assert!(answered > 0 && lost_keys > 0, "{answered} {lost_keys}");
    // A write of a lost key makes it answer.
    client.set(SOURCE, keys - 1, b"new".to_vec()).unwrap();
    assert_eq!(client.get(SOURCE, keys - 1).unwrap(), Some(b"new".to_vec()));
    cluster.recover(DEST, SOURCE).unwrap();
    wait_for(MigrationPhase::Recovered);
    for k in (0..keys).step_by(97) {
        assert!(client.get(SOURCE, k).is_ok(), "key {k} after recover");
    }
    // No lasting MigrationBusy: the shard moves on to server 3.
    cluster
        .migrate(DEST, SOURCE, 3, Protocol::NetMigrate)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = cluster.migration_status();
        if s.iter()
            .any(|m| m.source == DEST && m.phase == MigrationPhase::Done)
        {
            break;
        }
        assert!(Instant::now() < deadline, "no second migration: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(client.get(SOURCE, keys - 1).unwrap(), Some(b"new".to_vec()));
    cluster.shutdown().unwrap();
}

#[test]
fn the_router_takes_source_lost_only_from_the_instance_destination() {
    use locus_kvmigrate::{Geometry, Router, RouterConfig, RouterMode};
    let mut router = Router::new(RouterConfig {
        bf_bytes: 64,
        cbf_bytes: 64,
        ..RouterConfig::default()
    })
    .unwrap();
    let control = |from, body| Packet {
        from,
        shard: SOURCE,
        seq: 1,
        flags: 0,
        body,
    };
    let register = Body::Register {
        src: SOURCE,
        dst: DEST,
        mode: RouterMode::Filters,
        geometry: Geometry::new(6, 1).unwrap(),
    };
    let ok = |out: Vec<(u16, Packet)>| matches!(out[0].1.body, Body::ControlAck { ok: true, .. });
    assert!(ok(router.on_packet(control(SOURCE, register))));
    // From a stranger, or from the source itself: refused, the instance stays.
    for from in [7, SOURCE] {
        assert!(!ok(router.on_packet(control(from, Body::SourceLost))));
        assert_eq!(router.instances().len(), 1);
    }
    assert!(ok(router.on_packet(control(DEST, Body::SourceLost))));
    assert!(router.instances().is_empty());
    assert_eq!(router.on_packet(get(1, 1))[0].0, DEST);
    // The source's late ABORT is refused: the router decided.
    assert!(!ok(router.on_packet(control(SOURCE, Body::Abort))));
    assert_eq!(router.on_packet(get(1, 2))[0].0, DEST);
}
