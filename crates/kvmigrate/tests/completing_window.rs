//! The copy window and the completing window (design: "NetMigrate: the copy window and the
//! completing window"; NetMigrate 4.1, 4.3, 6.3). A group whose START and DATA are acknowledged
//! leaves the copy window by sending GROUP-COMPLETE, so the next group starts while that
//! COMPLETE is still unanswered; at most `completing_max` groups await their COMPLETE ack.
//!
//! Driven by hand, as `paper_sections.rs`: the router and two servers as state machines, one
//! FIFO inbox per node, and the router's GROUP-COMPLETE acks held back by the test. Resends are
//! pushed past the test's clock, so every packet here is its first send.

use std::collections::VecDeque;

use locus_kvmigrate::wire::{op, Body, NodeId, Packet};
use locus_kvmigrate::{
    Geometry, MigrationPhase, Protocol, Router, RouterConfig, Server, ServerConfig,
};

const R: NodeId = 0;
const S: NodeId = 1;
const D: NodeId = 2;
const KEYS: u64 = 300;

/// What happened, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// The router got a GROUP-START.
    Start(u32),
    /// The router got a GROUP-COMPLETE.
    Complete(u32),
    /// The source got the router's GROUP-COMPLETE ack.
    CompleteAcked(u32),
}

struct Net {
    router: Router,
    servers: [Server; 2],
    inbox: [VecDeque<Packet>; 3],
    /// GROUP-COMPLETE acks on their way back to the source, held by the test.
    held_acks: VecDeque<Packet>,
    events: Vec<Event>,
    now_us: u64,
    geometry: Geometry,
}

impl Net {
    fn new(groups_inflight_max: usize, completing_max: usize) -> Self {
        // 2^6 buckets, 2^2 per group: 16 groups.
        let geometry = Geometry::new(6, 2).unwrap();
        let cfg = |id| ServerConfig {
            groups_inflight_max,
            completing_max,
            batch_items_max: 4,
            // No resend and no give-up within the test: the clock moves 1 us per delivery,
            // and a stalled copy is watched for 0.1 s.
            ack_timeout_us: 60_000_000,
            retransmit_us: 1_000_000,
            mirror_writes: false,
            ..ServerConfig::new(id, R, geometry)
        };
        let mut servers = [Server::new(cfg(S)).unwrap(), Server::new(cfg(D)).unwrap()];
        for k in 0..KEYS {
            servers[0].load(S, k, format!("v{k}").into_bytes()).unwrap();
        }
        Self {
            router: Router::new(RouterConfig {
                id: R,
                ..RouterConfig::default()
            })
            .unwrap(),
            servers,
            inbox: Default::default(),
            held_acks: VecDeque::new(),
            events: Vec::new(),
            now_us: 0,
            geometry,
        }
    }

    fn push(&mut self, out: Vec<(NodeId, Packet)>) {
        for (to, p) in out {
            match p.body {
                Body::ControlAck {
                    op: op::GROUP_COMPLETE,
                    ..
                } if to == S => self.held_acks.push_back(p),
                _ => self.inbox[to as usize].push_back(p),
            }
        }
    }

    fn deliver(&mut self, node: NodeId) {
        self.now_us += 1;
        let p = self.inbox[node as usize].pop_front().expect("inbox empty");
        match p.body {
            Body::GroupStart { group } => self.events.push(Event::Start(group)),
            Body::GroupComplete { group } => self.events.push(Event::Complete(group)),
            _ => {}
        }
        let out = match node {
            R => self.router.on_packet(p),
            _ => self.servers[(node - 1) as usize].handle(self.now_us, p),
        };
        self.push(out);
    }

    /// Delivers everything but the held acks until the network is quiet.
    fn pump(&mut self) {
        for _ in 0..1_000_000 {
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

    /// Hands the oldest held GROUP-COMPLETE ack to the source.
    fn release_ack(&mut self) -> bool {
        let Some(p) = self.held_acks.pop_front() else {
            return false;
        };
        if let Body::ControlAck { group, .. } = p.body {
            self.events.push(Event::CompleteAcked(group));
        }
        self.inbox[S as usize].push_front(p);
        true
    }

    fn starts(&self) -> Vec<u32> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Start(g) => Some(*g),
                _ => None,
            })
            .collect()
    }

    fn completes(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Complete(_)))
            .count()
    }

    fn start(&mut self) {
        let out = self.servers[0]
            .start_migration(self.now_us, S, D, Protocol::NetMigrate)
            .unwrap();
        self.push(out);
    }
}

/// A router that never acknowledges GROUP-COMPLETE: the copy stops after exactly
/// copy window + completing window groups, with `completing_max` COMPLETEs sent, and stays
/// stopped. An unbounded completing window runs on through every group.
#[test]
fn a_router_that_never_acks_complete_stalls_the_copy_after_both_windows() {
    for (copy, completing) in [(1, 1), (2, 3), (4, 4)] {
        let mut net = Net::new(copy, completing);
        assert!(net.geometry.groups() as usize > copy + completing);
        net.start();
        net.pump();
        // Once more, with time moving: still nothing starts.
        for _ in 0..100 {
            net.now_us += 1000;
            let t = net.servers[0].tick(net.now_us);
            net.push(t);
            net.pump();
        }
        let starts = net.starts();
        assert_eq!(
            starts.len(),
            copy + completing,
            "copy window {copy}, completing window {completing}: groups started {starts:?}"
        );
        assert_eq!(
            net.completes(),
            completing,
            "copy window {copy}, completing window {completing}: COMPLETEs sent"
        );
        assert_eq!(net.held_acks.len(), completing);
        let status = net.servers[0].migration_status().pop().unwrap();
        assert_eq!(status.phase, MigrationPhase::Copying, "{status:?}");
        assert_eq!(status.groups_done, 0);
    }
}

/// With the COMPLETE acks delivered only when everything else is quiet, a group starts before
/// the previous group's COMPLETE is acknowledged (even with one copy slot: the overlap that
/// takes the router's second round trip off the copy's path), and the migration finishes.
#[test]
fn a_new_group_starts_before_the_previous_complete_is_acked() {
    let mut net = Net::new(1, 1);
    net.start();
    loop {
        net.pump();
        if !net.release_ack() {
            break;
        }
    }
    let status = net.servers[0].migration_status().pop().unwrap();
    assert_eq!(status.phase, MigrationPhase::Done, "{status:?}");
    assert_eq!(status.groups_done, net.geometry.groups());
    assert!(net.servers[1].owns(S));
    assert_eq!(net.servers[1].live_keys(S), KEYS as usize);
    let ev = &net.events;
    let at = |e: Event| ev.iter().position(|x| *x == e);
    let overlaps = (0..net.geometry.groups() - 1)
        .filter(|&g| {
            let (Some(next), Some(acked)) = (at(Event::Start(g + 1)), at(Event::CompleteAcked(g)))
            else {
                panic!("group {g}: no START of the next group or no COMPLETE ack: {ev:?}");
            };
            next < acked
        })
        .count();
    assert!(
        overlaps > 0,
        "no group started before the previous COMPLETE was acked: {ev:?}"
    );
}
