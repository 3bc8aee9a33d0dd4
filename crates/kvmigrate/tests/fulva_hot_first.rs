//! Fulva as NetMigrate 6.1 describes it: "the hot keys are migrated with a higher priority
//! based on sampling statistics". The source samples the queries it serves and copies the
//! hottest sampled groups first, then the rest in order; the other protocols copy in order.

use std::collections::VecDeque;

use locus_kvmigrate::wire::{Body, Key, NodeId, Packet};
use locus_kvmigrate::{
    Geometry, MigrationPhase, Protocol, Router, RouterConfig, Server, ServerConfig,
};

const R: NodeId = 0;
const S: NodeId = 1;
const D: NodeId = 2;
const C: NodeId = 3;

/// The order in which `protocol` starts copying groups after `hot` queries per key (a key per
/// entry, hottest first) were served by the source.
fn copy_order(protocol: Protocol, hot: &[(Key, u32)]) -> Vec<u32> {
    let geometry = Geometry::new(6, 1).unwrap(); // 32 groups of 2 buckets
    let cfg = |id| ServerConfig {
        groups_inflight_max: 1,
        mirror_writes: false,
        ..ServerConfig::new(id, R, geometry)
    };
    let mut router = Router::new(RouterConfig {
        id: R,
        bf_bytes: 256,
        cbf_bytes: 256,
        ..RouterConfig::default()
    })
    .unwrap();
    let mut servers = [Server::new(cfg(S)).unwrap(), Server::new(cfg(D)).unwrap()];
    for k in 0..300 {
        servers[0].load(S, k, vec![7]).unwrap();
    }
    let mut now = 1;
    for &(key, n) in hot {
        for seq in 0..n {
            let q = Packet {
                from: C,
                shard: S,
                seq,
                flags: 0,
                body: Body::Get { key },
            };
            now += 1;
            servers[0].handle(now, q);
        }
    }
    let mut inbox: [VecDeque<Packet>; 3] = Default::default();
    let mut order = Vec::new();
    let push = |inbox: &mut [VecDeque<Packet>; 3], out: Vec<(NodeId, Packet)>| {
        for (to, p) in out {
            if (to as usize) < 3 {
                inbox[to as usize].push_back(p);
            }
        }
    };
    let out = servers[0].start_migration(now, S, D, protocol).unwrap();
    push(&mut inbox, out);
    for _ in 0..100_000 {
        let Some(n) = (0..3).find(|&n| !inbox[n].is_empty()) else {
            break;
        };
        let p = inbox[n].pop_front().unwrap();
        now += 1;
        let out = match n as NodeId {
            R => router.on_packet(p),
            node => {
                if let (D, Body::Data { group, .. }) = (node, &p.body) {
                    if p.flags == 0 && order.last() != Some(group) {
                        order.push(*group);
                    }
                }
                servers[(node - 1) as usize].handle(now, p)
            }
        };
        push(&mut inbox, out);
        let out = servers[0].tick(now);
        push(&mut inbox, out);
    }
    let status = servers[0].migration_status().pop().unwrap();
    assert_eq!(status.phase, MigrationPhase::Done, "{}", protocol.name());
    order
}

fn key_in(group: u32) -> Key {
    let g = Geometry::new(6, 1).unwrap();
    (0..300).find(|&k| g.group_of(k) == group).unwrap()
}

#[test]
fn fulva_copies_the_sampled_hot_groups_first_hottest_first() {
    // Group 29 is the hottest, then 17, then 3; the sampler sees one query in 8.
    let hot = [(key_in(3), 40), (key_in(29), 400), (key_in(17), 160)];
    let order = copy_order(Protocol::Fulva, &hot);
    assert_eq!(&order[..3], &[29, 17, 3], "{order:?}");
    let rest: Vec<u32> = (0..32).filter(|g| ![29, 17, 3].contains(g)).collect();
    assert_eq!(&order[3..], &rest[..], "then the others in order");
}

#[test]
fn the_other_protocols_copy_in_order_whatever_the_heat() {
    let hot = [(key_in(29), 400)];
    for p in [
        Protocol::NetMigrate,
        Protocol::Rocksteady,
        Protocol::SourceBased,
    ] {
        let order = copy_order(p, &hot);
        assert_eq!(order, (0..32).collect::<Vec<_>>(), "{}", p.name());
    }
}
