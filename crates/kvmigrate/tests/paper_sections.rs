//! Scenarios named after the NetMigrate sections they check, driven by hand: the router and two
//! servers as state machines, one FIFO inbox per node, and the test choosing what is delivered.

use std::collections::VecDeque;

use locus_kvmigrate::router::GroupState;
use locus_kvmigrate::wire::{Body, NodeId, Packet, Status, FLAG_LATE};
use locus_kvmigrate::{
    Geometry, MigrationPhase, Protocol, Router, RouterConfig, Server, ServerConfig,
};

const R: NodeId = 0;
const S: NodeId = 1;
const D: NodeId = 2;
const C: NodeId = 3;

struct Net {
    router: Router,
    servers: [Server; 2],
    inbox: [VecDeque<Packet>; 4],
    now_us: u64,
    geometry: Geometry,
}

impl Net {
    fn new(keys: u64) -> Self {
        let geometry = Geometry::new(4, 1).unwrap();
        let cfg = |id| ServerConfig {
            groups_inflight_max: 1,
            ack_timeout_us: 1000,
            retransmit_us: 300,
            retries_max: 2,
            mirror_writes: false,
            ..ServerConfig::new(id, R, geometry)
        };
        let mut servers = [Server::new(cfg(S)).unwrap(), Server::new(cfg(D)).unwrap()];
        for k in 0..keys {
            servers[0].load(S, k, format!("v{k}").into_bytes()).unwrap();
        }
        Self {
            router: Router::new(RouterConfig {
                id: R,
                bf_bytes: 256,
                cbf_bytes: 256,
                ..RouterConfig::default()
            })
            .unwrap(),
            servers,
            inbox: Default::default(),
            now_us: 0,
            geometry,
        }
    }

    fn push(&mut self, out: Vec<(NodeId, Packet)>) {
        for (to, p) in out {
            self.inbox[to as usize].push_back(p);
        }
    }

    /// Delivers one packet to `node`; returns it.
    fn deliver(&mut self, node: NodeId) -> Packet {
        self.now_us += 1;
        let p = self.inbox[node as usize].pop_front().expect("inbox empty");
        let out = match node {
            R => self.router.on_packet(p.clone()),
            S | D => self.servers[(node - 1) as usize].handle(self.now_us, p.clone()),
            _ => Vec::new(),
        };
        self.push(out);
        p
    }

    /// Delivers everything (FIFO per node, nodes in turn) until the network is quiet.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let mut any = false;
            for n in [R, S, D] {
                if !self.inbox[n as usize].is_empty() {
                    self.deliver(n);
                    any = true;
                }
            }
            for i in 0..2 {
                let t = self.servers[i].tick(self.now_us);
                any |= !t.is_empty();
                self.push(t);
            }
            if !any {
                return;
            }
        }
        panic!("network never went quiet");
    }

    fn query(&mut self, body: Body) {
        self.inbox[R as usize].push_back(Packet {
            from: C,
            shard: S,
            seq: 1,
            flags: 0,
            body,
        });
    }

    /// Sends a GET through the router, pumps, and merges the replies.
    fn get(&mut self, key: u64) -> Option<Vec<u8>> {
        self.query(Body::Get { key });
        self.pump();
        let mut m = locus_kvmigrate::client::ReplyMerger::default();
        let mut out = None;
        while let Some(p) = self.inbox[C as usize].pop_front() {
            out = m.feed(&p).or(out);
        }
        let o = out.expect("no complete reply");
        (o.status == Status::Ok).then_some(o.value)
    }

    fn start(&mut self, protocol: Protocol) {
        let out = self.servers[0]
            .start_migration(self.now_us, S, D, protocol)
            .unwrap();
        self.push(out);
    }

    fn key_in_group(&self, g: u32, skip: usize) -> u64 {
        (0..)
            .filter(|&k| self.geometry.group_of(k) == g)
            .nth(skip)
            .unwrap()
    }
}

#[test]
fn workflow_4_1_register_copy_terminate() {
    let mut net = Net::new(40);
    net.start(Protocol::NetMigrate);
    net.deliver(D); // MIGRATE_INIT
    net.deliver(S); // INIT_ACK -> REGISTER to the router
    net.deliver(R);
    assert_eq!(net.router.instances(), vec![(S, S, D)], "registered");
    net.pump();
    let status = net.servers[0].migration_status().pop().unwrap();
    assert_eq!(status.phase, MigrationPhase::Done);
    assert_eq!(status.groups_done, net.geometry.groups());
    assert!(
        net.router.instances().is_empty(),
        "the router dropped the instance"
    );
    assert!(net.servers[1].owns(S), "the destination took ownership");
    assert_eq!(net.servers[0].live_keys(S), 0, "the source cleaned up");
    assert_eq!(net.servers[1].live_keys(S), 40);
    for k in 0..40 {
        assert_eq!(
            net.get(k),
            Some(format!("v{k}").into_bytes()),
            "clients see no change"
        );
    }
    assert_eq!(net.get(1000), None);
}

#[test]
fn groups_4_2_walk_s1_s2_s3_at_the_router() {
    let mut net = Net::new(40);
    let k = net.key_in_group(0, 0);
    net.start(Protocol::NetMigrate);
    for n in [D, S, R] {
        net.deliver(n);
    }
    assert_eq!(net.router.lookup(S, k), Some(GroupState::NotStarted));
    net.deliver(S); // REGISTER ack: group 0 starts, GROUP-START goes to the router
    net.deliver(R);
    assert_eq!(net.router.lookup(S, k), Some(GroupState::Migrating));
    net.pump();
    assert!(net.router.instances().is_empty());
}

#[test]
fn corner_case_4_3_late_write_reaches_the_destination_before_group_complete() {
    let mut net = Net::new(40);
    let k = net.key_in_group(0, 0);
    net.start(Protocol::NetMigrate);
    for n in [D, S, R] {
        net.deliver(n);
    }
    // A write is routed to the source (S1) and waits in its inbox behind the REGISTER ack.
    net.query(Body::Set {
        key: k,
        value: b"late".to_vec(),
    });
    net.deliver(R);
    net.deliver(S); // REGISTER ack: group 0 is scanned and sent with the old value
    net.deliver(S); // the write executes after the scan: a late write
    assert_eq!(
        net.inbox[C as usize].len(),
        1,
        "the client got its ack from the source"
    );
    net.inbox[C as usize].clear();
    net.deliver(R); // GROUP-START; its ack releases the scanned copy (old value)
    let late_in = |net: &Net| {
        net.inbox[D as usize].iter().any(|p| {
            p.flags & FLAG_LATE != 0
                && matches!(&p.body, Body::Data { items, .. } if items.iter().any(|i| i.key == k))
        })
    };
    // The START ack, then data acks (the source flushes the late write); the scanned copy.
    for _ in 0..100 {
        if late_in(&net) {
            break;
        }
        if !net.inbox[S as usize].is_empty() {
            net.deliver(S);
        } else if !net.inbox[D as usize].is_empty() {
            net.deliver(D);
        }
    }
    assert!(late_in(&net), "late batch carries the key");
    assert!(
        !net.inbox[R as usize]
            .iter()
            .any(|p| matches!(p.body, Body::GroupComplete { .. })),
        "GROUP-COMPLETE waits for the late batch's ack"
    );
    net.pump();
    assert_eq!(net.servers[0].stats().late_writes, 1);
    assert_eq!(net.get(k), Some(b"late".to_vec()));
}

#[test]
fn false_positive_4_3_destination_priority_pulls() {
    let mut net = Net::new(40);
    net.start(Protocol::NetMigrate);
    for n in [D, S, R] {
        net.deliver(n);
    }
    // Every BF bit set: every group looks migrated (S3), also those not started.
    assert!(net.router.preset(S, true, false));
    let k = net.key_in_group(net.geometry.groups() - 1, 0);
    net.query(Body::Get { key: k });
    net.deliver(R);
    net.deliver(D); // a miss at the destination: PriorityPull
    assert!(matches!(
        net.inbox[S as usize].back().map(|p| &p.body),
        Some(Body::Pull { .. })
    ));
    net.pump();
    assert!(net.servers[1].stats().pulls >= 1);
    let reply = net.inbox[C as usize].pop_front().unwrap();
    assert!(
        matches!(reply.body, Body::Reply { status: Status::Ok, ref value, .. } if *value == format!("v{k}").into_bytes())
    );
}

#[test]
fn presets_4_4_make_netmigrate_fulva_like() {
    let mut net = Net::new(10);
    net.start(Protocol::NetMigrate);
    for n in [D, S, R] {
        net.deliver(n);
    }
    assert!(net.router.preset(S, false, true));
    let k = net.key_in_group(net.geometry.groups() - 1, 0);
    assert_eq!(net.router.lookup(S, k), Some(GroupState::Migrating));
    net.query(Body::Get { key: k });
    net.deliver(R);
    assert_eq!(
        net.inbox[S as usize].len() + net.inbox[D as usize].len(),
        3,
        "double read (plus the REGISTER ack)"
    );
}

#[test]
fn stuck_migration_is_visible_and_times_out() {
    let mut net = Net::new(10);
    net.start(Protocol::NetMigrate);
    net.inbox[D as usize].clear(); // the destination never answers
                                   // MIGRATE-INIT is sent again once 300 us passed, then once 600 us more passed; then the
                                   // retries are spent and it waits out the patience (1000 us).
    let schedule = [
        (100, false),
        (500, true),
        (900, false),
        (1100, true),
        (1500, false),
    ];
    for (t, resent) in schedule {
        let out = net.servers[0].tick(t);
        let init = |(to, p): &(NodeId, Packet)| *to == D && matches!(p.body, Body::Init { .. });
        assert_eq!(out.iter().any(init), resent, "at {t} us");
        assert_eq!(out.len(), resent as usize, "at {t} us");
        let s = net.servers[0].migration_status().pop().unwrap();
        assert_eq!(s.phase, MigrationPhase::Registering);
        assert_eq!(s.idle_us, t);
        assert_eq!(s.groups_done, 0);
    }
    // Given up once the last resend had its wait (600 us x 2) and the patience passed.
    assert!(net.servers[0].tick(2200).is_empty());
    let out = net.servers[0].tick(2300);
    assert!(out
        .iter()
        .any(|(to, p)| *to == R && matches!(p.body, Body::Abort)));
    let s = net.servers[0].migration_status().pop().unwrap();
    assert_eq!(s.phase, MigrationPhase::Aborted);
    assert!(
        s.last_error
            .as_deref()
            .is_some_and(|e| e.contains("MIGRATE-INIT") && e.contains("2 more times")),
        "{:?}",
        s.last_error
    );
    assert!(net.servers[0].owns(S));
}

#[test]
fn baselines_2_2_same_agents_same_outcome() {
    for p in Protocol::ALL {
        let mut net = Net::new(30);
        net.start(p);
        net.pump();
        let s = net.servers[0].migration_status().pop().unwrap();
        assert_eq!(s.phase, MigrationPhase::Done, "{}", p.name());
        assert!(net.servers[1].owns(S));
        for k in 0..30 {
            assert_eq!(
                net.get(k),
                Some(format!("v{k}").into_bytes()),
                "{}",
                p.name()
            );
        }
    }
}

#[test]
fn workflow_4_1_shard_moves_back_to_its_first_home() {
    let mut net = Net::new(20);
    net.start(Protocol::NetMigrate);
    net.pump();
    net.query(Body::Set {
        key: 3,
        value: b"moved".to_vec(),
    });
    net.pump();
    net.inbox[C as usize].clear();
    // Server 2 now holds shard 1 and sends it back to server 1, which cleaned up its copy.
    let err = net.servers[1].start_migration(net.now_us, S, D, Protocol::Fulva);
    assert!(err.is_err(), "not to itself");
    let out = net.servers[1]
        .start_migration(net.now_us, S, S, Protocol::Fulva)
        .unwrap();
    net.push(out);
    net.pump();
    let s = net.servers[1].migration_status().pop().unwrap();
    assert_eq!(s.phase, MigrationPhase::Done, "{s:?}");
    assert!(net.servers[0].owns(S));
    assert_eq!(net.get(3), Some(b"moved".to_vec()));
    assert_eq!(net.get(4), Some(b"v4".to_vec()));
}
