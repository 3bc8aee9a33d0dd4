//! The node loop as `locus kv` runs it, in threads instead of processes: a router and two
//! servers, each a `node::{RouterNode, ServerNode}` on its own `UdpPeer` socket (node n at base
//! port + n), migrate a shard under client traffic and every value survives. The hooks claim
//! their own datagrams (a ping answered with a pong, as the CLI answers management datagrams);
//! garbage is dropped and counted by the router and by the server node, and nobody stops.
//! The same loop runs `runtime::Cluster` (every other test in this directory).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use locus_kvmigrate::client::{Outcome, ReplyMerger};
use locus_kvmigrate::node::{CpuBudget, NodeHooks, RouterNode, ServerNode, Step};
use locus_kvmigrate::transport::{Foreign, Transport, UdpPeer};
use locus_kvmigrate::wire::{Body, NodeId, Packet, Status};
use locus_kvmigrate::{
    Geometry, MigrationPhase, MigrationStatus, Protocol, Router, RouterConfig, Server, ServerConfig,
};

const CLIENT: NodeId = 3;
const KEYS: u64 = 3000;
/// Generous: a loaded machine is slow, never wrong.
const WAIT: Duration = Duration::from_secs(60);

/// A server's hooks: answer pings, publish the migration status after every step.
struct Hooks {
    peer: Arc<UdpPeer>,
    status: Arc<Mutex<Vec<MigrationStatus>>>,
}

impl NodeHooks<ServerNode> for Hooks {
    fn foreign(&mut self, _node: &mut ServerNode, d: Foreign) -> Option<Foreign> {
        if d.bytes != b"ping" {
            return Some(d);
        }
        self.peer.send_datagram(b"pong", d.from).expect("pong");
        None
    }

    fn after(&mut self, node: &mut ServerNode, _step: Step) {
        *self.status.lock().expect("status lock") = node.server().migration_status();
    }
}

/// One query through the router, waiting for its reply or replies.
fn call(peer: &UdpPeer, seq: &mut u32, body: Body) -> Outcome {
    *seq += 1;
    let p = Packet {
        from: CLIENT,
        shard: 1,
        seq: *seq,
        flags: 0,
        body,
    };
    peer.send(0, p).expect("send query");
    let deadline = Instant::now() + WAIT;
    let mut merger = ReplyMerger::default();
    loop {
        assert!(Instant::now() < deadline, "no reply to query {seq}");
        let Some(r) = peer.recv(CLIENT, Duration::from_millis(100)).expect("recv") else {
            continue;
        };
        if r.seq != *seq {
            continue;
        }
        if let Some(out) = merger.feed(&r) {
            return out;
        }
    }
}

fn get(peer: &UdpPeer, seq: &mut u32, key: u64) -> Option<Vec<u8>> {
    let o = call(peer, seq, Body::Get { key });
    (o.status == Status::Ok).then_some(o.value)
}

fn spawn<N: Send + 'static>(
    mut node: N,
    stop: &Arc<AtomicBool>,
    mut run: impl FnMut(&mut N, &AtomicBool) -> locus_kvmigrate::Result<()> + Send + 'static,
) -> JoinHandle<N> {
    let stop = stop.clone();
    std::thread::spawn(move || {
        run(&mut node, &stop).expect("the node loop failed");
        node
    })
}

#[test]
fn router_and_two_servers_on_their_own_sockets_migrate_under_traffic() {
    let mut peers: Vec<Arc<UdpPeer>> = UdpPeer::bind_group(4)
        .expect("four loopback ports")
        .into_iter()
        .map(Arc::new)
        .collect();
    let client = peers.pop().expect("client peer");
    let router = Router::new(RouterConfig {
        bf_bytes: 64,
        cbf_bytes: 8,
        ..RouterConfig::default()
    })
    .expect("router");
    let router = RouterNode::new(router, peers[0].clone());
    let epoch = Instant::now();
    let mut servers = Vec::new();
    let mut statuses = Vec::new();
    for id in [1u16, 2] {
        let mut cfg = ServerConfig::new(id, 0, Geometry::new(10, 3).expect("geometry"));
        // Small windows keep loopback receive buffers far from full.
        cfg.batch_items_max = 16;
        cfg.batches_inflight_max = 2;
        cfg.ack_timeout_us = 60_000_000;
        let server = Server::new(cfg).expect("server");
        let peer = peers[id as usize].clone();
        let node = ServerNode::new(server, peer.clone(), CpuBudget::default(), epoch)
            .expect("server node");
        let status = Arc::new(Mutex::new(Vec::new()));
        statuses.push(status.clone());
        servers.push((node, Hooks { peer, status }));
    }
    let (mut source, source_hooks) = servers.remove(0);
    source
        .load(1, (0..KEYS).map(|k| (k, k.to_le_bytes().to_vec())))
        .expect("preload");
    // Every socket is bound, so the first packets wait in the destination's socket buffer.
    source
        .start_migration(1, 2, Protocol::NetMigrate)
        .expect("start migration");

    let stop = Arc::new(AtomicBool::new(false));
    let router = spawn(router, &stop, |n, stop| n.run(stop, &mut ()));
    let mut hooks = source_hooks;
    let source = spawn(source, &stop, move |n, stop| n.run(stop, &mut hooks));
    let (destination, mut hooks) = servers.remove(0);
    let destination = spawn(destination, &stop, move |n, stop| n.run(stop, &mut hooks));

    // Writes during the migration, each read back at once.
    let mut seq = 0;
    for k in 0..200u64 {
        let o = call(
            &client,
            &mut seq,
            Body::Set {
                key: k,
                value: vec![7; 16],
            },
        );
        assert_eq!(o.status, Status::Ok, "SET {k}");
        assert_eq!(get(&client, &mut seq, k), Some(vec![7; 16]), "key {k}");
    }

    // The hooks get their own datagrams; garbage is counted, and the loop goes on.
    let junk = UdpSocket::bind("127.0.0.1:0").expect("bind");
    junk.set_read_timeout(Some(WAIT)).expect("timeout");
    for (node, d) in [(0, &b"garbage"[..]), (1, &[0xFF; 40][..]), (1, b"ping")] {
        let addr = client.addr_of(node).expect("address");
        junk.send_to(d, addr).expect("send");
    }
    let mut buf = [0u8; 16];
    let (n, from) = junk.recv_from(&mut buf).expect("a pong");
    assert_eq!((&buf[..n], Some(from)), (&b"pong"[..], client.addr_of(1)));

    let deadline = Instant::now() + WAIT;
    let done = loop {
        let s = statuses[0].lock().expect("status lock").clone();
        if let Some(s) = s.into_iter().rfind(|s| s.shard == 1) {
            if matches!(s.phase, MigrationPhase::Done | MigrationPhase::Aborted) {
                break s;
            }
        }
        assert!(Instant::now() < deadline, "migration not finished");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(done.phase, MigrationPhase::Done, "{done:?}");
    for k in 0..KEYS {
        let want = if k < 200 {
            vec![7; 16]
        } else {
            k.to_le_bytes().to_vec()
        };
        assert_eq!(get(&client, &mut seq, k), Some(want), "key {k}");
    }

    stop.store(true, Ordering::SeqCst);
    let router = router.join().expect("router thread");
    let source = source.join().expect("source thread");
    let destination = destination.join().expect("destination thread");
    assert!(router.router().stats().malformed >= 1);
    assert!(router.counters().malformed >= 1);
    assert!(source.counters().malformed >= 1, "{:?}", source.counters());
    assert_eq!(router.counters().unsendable, 0);
    assert!(destination.counters().packets > 0);
    assert!(
        destination.server().owns(1),
        "the destination owns the shard"
    );
    assert!(client.bytes_sent() > 0);
}
