//! Unit tests of `tcp/mod.rs`.

use super::*;
use crate::{Output, Port, RegionId, WorkRequest};

fn addrs(n: usize) -> Vec<SocketAddr> {
    (0..n)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 1 + i as u16)))
        .collect()
}

#[test]
fn config_limits() {
    assert!(TcpConfig::new(vec![0], addrs(1)).validate().is_ok());
    assert!(TcpConfig::new(vec![127], addrs(128)).validate().is_ok());
    assert!(TcpConfig::new(vec![0], addrs(129)).validate().is_err());
    assert!(TcpConfig::new(vec![0], vec![]).validate().is_err());
    assert!(TcpConfig::new(vec![], addrs(2)).validate().is_err());
    assert!(TcpConfig::new(vec![2], addrs(2)).validate().is_err());
    assert!(TcpConfig::new(vec![1, 1], addrs(2)).validate().is_err());
    let mut c = TcpConfig::new(vec![0], addrs(2));
    c.peers.pop();
    assert!(c.validate().is_err(), "one address per machine");
    let mut c = TcpConfig::new(vec![0], addrs(2));
    c.io_timeout_ms = 0;
    assert!(c.validate().is_err());
    let mut c = TcpConfig::new(vec![0], addrs(2));
    c.frame_bytes_max = 1 << 16;
    assert!(
        matches!(c.validate(), Err(FabricError::Config(m)) if m.contains("message_bytes_max")),
        "a message must fit in a frame"
    );
    c.message_bytes_max = (1 << 16) - HEADER_BYTES - 1;
    assert!(c.validate().is_ok(), "the largest message that fits");
    c.message_bytes_max += 1;
    assert!(c.validate().is_err());
}

#[test]
fn hosted_targets_go_straight_to_memory() {
    // Machine 1's node does not exist: nothing listens at port 1. Ports
    // of machine 0 never need it for machine 0's own memory.
    let config = TcpConfig::new(vec![0], addrs(2));
    let node = TcpFabric::bind(config, SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let r = node.register(0, "r", 64).unwrap().id;
    let mut p = node.port(0).unwrap();
    p.write_word(0, r, 8, 5).unwrap();
    assert_eq!(p.cas(0, r, 8, 5, 6).unwrap(), 5);
    p.post(WorkRequest::read(1, 0, r, 8, 8)).unwrap();
    let mut out = Vec::new();
    assert_eq!(p.wait(&mut out).unwrap(), 1);
    assert_eq!(out[0].result, Ok(Output::Data(6u64.to_le_bytes().to_vec())));
    p.send(0, b"me").unwrap();
    assert_eq!(p.try_recv().unwrap().unwrap().payload, b"me");
    assert!(matches!(
        node.port(1),
        Err(FabricError::NotHosted { machine: 1 })
    ));
    assert!(matches!(
        node.register(1, "x", 8),
        Err(FabricError::NotHosted { machine: 1 })
    ));
    assert!(node.hosts(0) && !node.hosts(1) && !node.hosts(2));
}

#[test]
fn machines_sharing_a_node_share_its_connection() {
    let nodes = loopback_nodes(
        TcpConfig {
            machines: 4,
            ..TcpConfig::default()
        },
        &[vec![0, 2], vec![1, 3]],
    )
    .unwrap();
    assert_eq!(nodes[0].inner.nodes.len(), 1, "one remote node");
    let r1 = nodes[1].register(1, "r", 64).unwrap().id;
    let r3 = nodes[1].register(3, "r", 64).unwrap().id;
    let mut p = nodes[0].port(2).unwrap();
    p.write_word(1, r1, 0, 11).unwrap();
    p.write_word(3, r3, 0, 33).unwrap();
    let mut q = nodes[1].port(3).unwrap();
    assert_eq!(q.read_word(1, r1, 0).unwrap(), 11, "local to node 1");
    assert_eq!(q.read_word(3, r3, 0).unwrap(), 33);
    assert_eq!(nodes[0].lookup(3, "r").unwrap().id, r3);
    assert!(
        loopback_nodes(
            TcpConfig {
                machines: 2,
                ..TcpConfig::default()
            },
            &[vec![0]]
        )
        .is_err(),
        "every machine needs a node"
    );
}

fn cluster(machines: usize, tweak: impl Fn(&mut TcpConfig)) -> Vec<TcpFabric> {
    let mut c = TcpConfig {
        machines,
        ..TcpConfig::default()
    };
    tweak(&mut c);
    loopback_cluster_with(c).unwrap()
}

fn drain(p: &mut impl Port, out: &mut Vec<crate::Completion>) {
    while p.inflight() > 0 {
        p.wait(out).unwrap();
    }
}

/// One port's seeded random mix of posted and synchronous operations,
/// fences, bad targets/regions/offsets and messages, run on the TCP
/// fabric and on the in-process fabric (the reference): every result must
/// be identical. One issuing port makes the outcome deterministic
/// (per-target order is all that matters).
#[test]
fn matches_the_in_process_fabric() {
    use crate::local::{LocalConfig, LocalFabric};
    use crate::Completion;
    let seed = 0x5EED_u64;
    let tcp = cluster(3, |_| {});
    let local = LocalFabric::new(LocalConfig::with_machines(3).without_model()).unwrap();
    for m in 0..3u8 {
        for (name, len) in [("a", 256u64), ("b", 64)] {
            let t = tcp[m as usize].register(m, name, len).unwrap();
            assert_eq!(t, local.register(m, name, len).unwrap());
        }
    }
    let mut x = seed;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut pt = tcp[0].port(0).unwrap();
    let mut pl = local.port(0).unwrap();
    let (mut ct, mut cl): (Vec<Completion>, Vec<Completion>) = (Vec::new(), Vec::new());
    for step in 0..3000u64 {
        let target = [0u8, 1, 2, 2, 1, 3][rnd(6) as usize];
        let region = RegionId([0u16, 1, 0, 2][rnd(4) as usize]);
        let offset = match rnd(10) {
            0 => 4,
            1 => 256,
            _ => rnd(32) * 8,
        };
        let len = (rnd(4) * 8) as usize;
        let wr = match rnd(4) {
            0 => WorkRequest::read(step, target, region, offset, len),
            1 => WorkRequest::write(step, target, region, offset, vec![step as u8; len]),
            2 => WorkRequest::cas(step, target, region, offset, rnd(3), step),
            _ => WorkRequest::fetch_add(step, target, region, offset, step),
        };
        let wr = if rnd(8) == 0 { wr.fenced() } else { wr };
        let ctx = format!("seed {seed:#x} step {step}: {wr:?}");
        match rnd(10) {
            0..=4 => {
                pt.post(wr.clone()).unwrap();
                pl.post(wr).unwrap();
            }
            5..=7 => assert_eq!(pt.execute(wr.clone()), pl.execute(wr), "{ctx}"),
            8 => {
                let mut bt = vec![0u8; len];
                let mut bl = vec![0u8; len];
                let rt = pt.read(target, region, offset, &mut bt);
                assert_eq!(rt, pl.read(target, region, offset, &mut bl), "{ctx}");
                assert_eq!(bt, bl, "{ctx}");
            }
            _ => {
                let payload = step.to_le_bytes();
                assert_eq!(
                    pt.send(target, &payload),
                    pl.send(target, &payload),
                    "{ctx}"
                );
            }
        }
        if rnd(4) == 0 || pt.inflight() > 48 {
            pt.poll(&mut ct).unwrap();
            pl.poll(&mut cl).unwrap();
        }
        if rnd(50) == 0 {
            drain(&mut pt, &mut ct);
            drain(&mut pl, &mut cl);
        }
    }
    drain(&mut pt, &mut ct);
    drain(&mut pl, &mut cl);
    ct.sort_by_key(|c| c.id);
    cl.sort_by_key(|c| c.id);
    assert_eq!(ct.len(), cl.len());
    for (t, l) in ct.iter().zip(&cl) {
        assert_eq!(t, l, "seed {seed:#x}");
    }
    for m in 0..3u8 {
        let mut qt = tcp[m as usize].port(m).unwrap();
        let mut ql = local.port(m).unwrap();
        loop {
            let (a, b) = (qt.try_recv().unwrap(), ql.try_recv().unwrap());
            assert_eq!(a, b, "messages to machine {m}");
            if a.is_none() {
                break;
            }
        }
        for r in 0..2u16 {
            let len = if r == 0 { 256 } else { 64 };
            let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
            qt.read(m, RegionId(r), 0, &mut a).unwrap();
            ql.read(m, RegionId(r), 0, &mut b).unwrap();
            assert_eq!(a, b, "final memory of machine {m} region {r}");
        }
    }
}

/// Large reads and writes pipelined to one node without polling, far
/// beyond socket buffers: the response window and the service thread's
/// write timeout keep both ends moving.
#[test]
fn big_pipelines_both_ways_do_not_deadlock() {
    let nodes = cluster(2, |c| c.frame_bytes_max = 2 << 20);
    let chunk = 256 << 10;
    let r = nodes[1].register(1, "big", 64 * chunk as u64).unwrap().id;
    let mut p = nodes[0].port(0).unwrap();
    for i in 0..64u64 {
        let off = i * chunk as u64;
        p.post(WorkRequest::write(2 * i, 1, r, off, vec![i as u8; chunk]))
            .unwrap();
        p.post(WorkRequest::read(2 * i + 1, 1, r, off, chunk))
            .unwrap();
    }
    let mut out = Vec::new();
    drain(&mut p, &mut out);
    assert_eq!(out.len(), 128);
    for (k, c) in out.iter().enumerate() {
        assert_eq!(c.id, k as u64, "posting order");
        let i = k as u64 / 2;
        match &c.result {
            Ok(Output::Written(d)) => assert_eq!(d.len(), chunk),
            Ok(Output::Data(d)) => assert!(d.iter().all(|&b| b == i as u8), "read {i}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn operations_too_large_for_a_frame_fail_before_sending() {
    let nodes = cluster(2, |c| {
        c.frame_bytes_max = 64 << 10;
        c.message_bytes_max = 1024;
    });
    let r = nodes[1].register(1, "r", 1 << 20).unwrap().id;
    let mut p = nodes[0].port(0).unwrap();
    let max_read = (64 << 10) - HEADER_BYTES;
    let mut big = vec![0u8; max_read + 8];
    assert!(matches!(
        p.read(1, r, 0, &mut big),
        Err(FabricError::MessageTooLarge { .. })
    ));
    p.read(1, r, 0, &mut big[..max_read]).unwrap();
    let max_write = max_read - 8;
    assert!(p.write(1, r, 0, &big[..max_write + 8]).is_err());
    p.write(1, r, 0, &big[..max_write]).unwrap();
    p.post(WorkRequest::read(1, 1, r, 0, max_read + 8)).unwrap();
    let mut out = Vec::new();
    drain(&mut p, &mut out);
    assert!(matches!(
        out[0].result,
        Err(FabricError::MessageTooLarge { .. })
    ));
    assert!(matches!(
        p.send(1, &[0; 1025]),
        Err(FabricError::MessageTooLarge {
            len: 1025,
            limit: 1024
        })
    ));
    p.send(1, &[0; 1024]).unwrap();
    // Locally the frame limit does not apply.
    let r0 = nodes[0].register(0, "r", 1 << 20).unwrap().id;
    p.write(0, r0, 0, &vec![1u8; 1 << 20]).unwrap();
}

#[test]
fn a_full_remote_inbox_pushes_back() {
    let nodes = cluster(2, |c| c.inbox_messages_max = 3);
    let mut p = nodes[0].port(0).unwrap();
    for i in 0..3u8 {
        p.send(1, &[i]).unwrap();
    }
    assert_eq!(
        p.send(1, b"x"),
        Err(FabricError::InboxFull {
            machine: 1,
            limit: 3
        })
    );
    let mut q = nodes[1].port(1).unwrap();
    assert_eq!(q.try_recv().unwrap().unwrap().payload, vec![0]);
    p.send(1, b"y").unwrap();
    let big = vec![7u8; 1 << 20];
    let mut q0 = nodes[0].port(0).unwrap();
    q.send(0, &big).unwrap();
    assert_eq!(
        q0.try_recv().unwrap().unwrap().payload,
        big,
        "a 1 MiB message"
    );
}

#[test]
fn sync_calls_leave_posted_completions_for_poll() {
    let nodes = cluster(3, |_| {});
    let r1 = nodes[1].register(1, "r", 64).unwrap().id;
    let r2 = nodes[2].register(2, "r", 64).unwrap().id;
    let mut p = nodes[0].port(0).unwrap();
    p.post(WorkRequest::fetch_add(1, 1, r1, 0, 5)).unwrap();
    p.post(WorkRequest::fetch_add(2, 2, r2, 0, 6)).unwrap();
    // Same target as request 1: sees its effect (per-target order).
    assert_eq!(p.fetch_add(1, r1, 0, 1).unwrap(), 5);
    assert_eq!(p.cas(2, r2, 0, 6, 60).unwrap(), 6);
    p.send(1, b"m").unwrap();
    assert_eq!(p.inflight(), 2);
    let mut out = Vec::new();
    drain(&mut p, &mut out);
    out.sort_by_key(|c| c.id);
    assert_eq!(out[0].result, Ok(Output::Word(0)));
    assert_eq!(out[1].result, Ok(Output::Word(0)));
    // A fenced request to machine 2 waits for a posted one to machine 1.
    p.post(WorkRequest::write(3, 1, r1, 8, vec![1; 8])).unwrap();
    p.post(WorkRequest::read(4, 2, r2, 0, 8).fenced()).unwrap();
    let mut out = Vec::new();
    drain(&mut p, &mut out);
    assert_eq!(out.iter().map(|c| c.id).collect::<Vec<_>>(), vec![3, 4]);
}

// ------------------------------------------------------------------ epochs

/// Two nodes at epochs 1 (machine 0) and 2 (machine 1), each knowing the other.
fn two_at_epochs() -> (Vec<TcpFabric>, RegionId) {
    let nodes = loopback_cluster(2).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    nodes[0].set_own_epoch(1);
    nodes[1].set_own_epoch(2);
    nodes[0].set_peer_epoch(1, 2).unwrap();
    nodes[1].set_peer_epoch(0, 1).unwrap();
    (nodes, r)
}

fn unavailable_reason(e: FabricError) -> String {
    match e {
        FabricError::PeerUnavailable { reason, .. } => reason,
        other => panic!("expected PeerUnavailable, got {other:?}"),
    }
}

#[test]
fn matching_epochs_serve_as_before() {
    let (nodes, r) = two_at_epochs();
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, r, 0, 7).unwrap();
    assert_eq!(p.read_word(1, r, 0).unwrap(), 7);
    assert_eq!(nodes[1].epoch_refusals(), 0);
}

#[test]
fn a_connection_from_a_fenced_out_incarnation_is_refused() {
    let (nodes, r) = two_at_epochs();
    // Machine 0 re-registered at epoch 5 elsewhere; this node 0 is the old one.
    nodes[1].set_peer_epoch(0, 5).unwrap();
    let mut p = nodes[0].port(0).unwrap();
    let why = unavailable_reason(p.read_word(1, r, 0).unwrap_err());
    assert!(
        why.contains("machine 0 at epoch 1") && why.contains("epoch 5"),
        "{why}"
    );
    // At the epoch known to be down: refused too.
    nodes[1].mark_down(0, 1).unwrap();
    let why = unavailable_reason(p.read_word(1, r, 0).unwrap_err());
    assert!(why.contains("down"), "{why}");
    assert!(nodes[1].epoch_refusals() >= 2);
}

#[test]
fn a_connection_expecting_another_incarnation_is_refused() {
    let (nodes, r) = two_at_epochs();
    nodes[0].set_peer_epoch(1, 1).unwrap(); // a stale view of machine 1
    let mut p = nodes[0].port(0).unwrap();
    let why = unavailable_reason(p.read_word(1, r, 0).unwrap_err());
    assert!(
        why.contains("expects this node at epoch 1") && why.contains("at epoch 2"),
        "{why}"
    );
    // Once the view is current, the port reconnects and is served.
    nodes[0].set_peer_epoch(1, 2).unwrap();
    p.write_word(1, r, 0, 9).unwrap();
    assert_eq!(p.read_word(1, r, 0).unwrap(), 9);
}

#[test]
fn a_peer_marked_down_after_connecting_is_cut_off_at_its_next_request() {
    let (nodes, r) = two_at_epochs();
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, r, 0, 1).unwrap(); // connected at epoch 1
    nodes[1].mark_down(0, 1).unwrap();
    let why = unavailable_reason(p.read_word(1, r, 0).unwrap_err());
    assert!(why.contains("machine 0 at epoch 1 is down"), "{why}");
}

#[test]
fn operations_to_a_machine_marked_down_fail_at_once_and_resume_at_its_new_epoch() {
    let (nodes, r) = two_at_epochs();
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, r, 0, 3).unwrap();
    assert!(p.check_peer(1).is_ok());
    nodes[0].mark_down(1, 2).unwrap();
    // What a forward waiting for machine 1's reply checks (Port::check_peer).
    assert!(matches!(
        p.check_peer(1),
        Err(FabricError::PeerUnavailable { machine: 1, .. })
    ));
    assert_eq!(
        nodes[0].peer_epoch(1).unwrap(),
        PeerEpoch {
            epoch: 2,
            down: true
        }
    );
    let e = p.read_word(1, r, 0).unwrap_err();
    assert!(matches!(e, FabricError::PeerUnavailable { machine: 1, .. }));
    let why = unavailable_reason(e);
    assert!(
        why.contains("machine 1 is down") && why.contains("epoch 2"),
        "{why}"
    );
    p.post(WorkRequest::read(1, 1, r, 0, 8)).unwrap();
    let mut out = Vec::new();
    assert_eq!(p.wait(&mut out).unwrap(), 1);
    assert!(matches!(
        out[0].result,
        Err(FabricError::PeerUnavailable { machine: 1, .. })
    ));
    assert!(nodes[0].lookup(1, "r").is_err());
    // Machine 1's node comes back as a new incarnation at epoch 3.
    nodes[1].set_own_epoch(3);
    nodes[0].set_peer_epoch(1, 3).unwrap();
    assert!(p.check_peer(1).is_ok());
    assert_eq!(p.read_word(1, r, 0).unwrap(), 3);
    assert_eq!(nodes[0].lookup(1, "r").unwrap().id, r);
}

// ------------------------------------------------------ machines added later

#[test]
fn a_machine_without_an_address_is_unavailable_until_given_one() {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    // Machine 2 has no server yet: nodes 0 and 1 list it UNASSIGNED.
    let first = |id: MachineId| {
        let mut c = TcpConfig::new(vec![id], vec![UNASSIGNED; 3]);
        c.connect_timeout_ms = 500;
        TcpFabric::bind(c, any).unwrap()
    };
    let n0 = first(0);
    let n1 = first(1);
    assert_eq!(n0.peer_addr(1), Some(UNASSIGNED));
    n0.set_peer_addr(1, n1.local_addr()).unwrap();
    n1.set_peer_addr(0, n0.local_addr()).unwrap();
    let r1 = n1.register(1, "r", 64).unwrap().id;
    let mut p = n0.port(0).unwrap();
    p.write_word(1, r1, 0, 9).unwrap();
    match p.read_word(2, RegionId(0), 0) {
        Err(FabricError::PeerUnavailable { machine: 2, reason }) => {
            assert!(reason.contains("no address yet"), "{reason}")
        }
        other => panic!("machine 2 has no address: {other:?}"),
    }
    // Machine 2 joins: its own node knows the others; they learn its address.
    let mut c = TcpConfig::new(vec![2], vec![n0.local_addr(), n1.local_addr(), UNASSIGNED]);
    c.connect_timeout_ms = 500;
    let n2 = TcpFabric::bind(c, any).unwrap();
    let r2 = n2.register(2, "r", 64).unwrap().id;
    n0.set_peer_addr(2, n2.local_addr()).unwrap();
    n0.set_peer_addr(2, n2.local_addr()).unwrap(); // the same again: nothing
    p.write_word(2, r2, 8, 7).unwrap();
    assert_eq!(n2.port(2).unwrap().read_word(2, r2, 8).unwrap(), 7);
    assert_eq!(n2.port(2).unwrap().read_word(1, r1, 0).unwrap(), 9);
    // A known address does not change, and a hosted machine has none.
    assert!(matches!(
        n0.set_peer_addr(2, n1.local_addr()),
        Err(FabricError::Config(m)) if m.contains("cannot move")
    ));
    assert!(n0.set_peer_addr(0, n1.local_addr()).is_err());
    // Unassigned machines do not share a node: each got its own address.
    assert_eq!(n0.peer_addr(1), Some(n1.local_addr()));
    assert_eq!(n0.peer_addr(2), Some(n2.local_addr()));
}
