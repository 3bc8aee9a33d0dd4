//! Faults on the TCP fabric surface as errors within a bounded time, never as
//! hangs: a node dropped with requests in flight to it, a peer that closes or
//! goes silent, an address where nothing listens, garbage on the wire, a
//! mismatched cluster, and faults injected through `Faulty`. Only 127.0.0.1.
//! Time bounds are generous (10 s against a 500 ms io timeout) so a loaded
//! machine cannot make them flaky.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use locus_fabric::faulty::{Fault, Faulty};
use locus_fabric::tcp::{loopback_cluster, loopback_cluster_with, TcpConfig, TcpFabric};
use locus_fabric::{Completion, Fabric, FabricError, Output, Port, RegionId, WorkRequest};

/// Longest any failure may take to surface.
const BOUND: Duration = Duration::from_secs(10);

fn short_timeouts(machines: usize) -> TcpConfig {
    TcpConfig {
        machines,
        io_timeout_ms: 500,
        connect_timeout_ms: 500,
        ..TcpConfig::default()
    }
}

fn loopback_any() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A node hosting machine 0 of a 2-machine cluster whose machine 1 is served at `peer`.
fn node_facing(peer: SocketAddr) -> TcpFabric {
    let config = TcpConfig {
        hosted: vec![0],
        peers: vec![loopback_any(), peer],
        ..short_timeouts(2)
    };
    TcpFabric::bind(config, loopback_any()).expect("bind node 0")
}

fn is_unavailable(r: &Result<impl std::fmt::Debug, FabricError>, machine: u8) -> bool {
    matches!(r, Err(FabricError::PeerUnavailable { machine: m, .. }) if *m == machine)
}

/// Collects `n` completions, failing the test if that takes longer than `BOUND`.
fn drain_bounded<P: Port>(p: &mut P, n: usize) -> Vec<Completion> {
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < n {
        p.wait(&mut out).expect("wait");
        assert!(
            start.elapsed() < BOUND,
            "{} of {n} completions after {BOUND:?}",
            out.len()
        );
    }
    out
}

#[test]
fn dropping_a_node_fails_requests_in_flight_to_it() {
    let mut nodes = loopback_cluster_with(short_timeouts(3)).unwrap();
    let n1 = nodes.remove(1);
    let r = n1.register(1, "r", 4096).unwrap().id;
    let r2 = nodes[1].register(2, "r", 64).unwrap().id;
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, r, 0, 7).unwrap();
    for i in 0..100 {
        p.post(WorkRequest::read(i, 1, r, 0, 8)).unwrap();
    }
    let mut early = Vec::new();
    p.poll(&mut early).unwrap(); // on the wire; some may be answered
    let start = Instant::now();
    drop(n1); // the node dies: listener and connections closed, threads joined
    for i in 100..200 {
        p.post(WorkRequest::read(i, 1, r, 0, 8)).unwrap();
    }
    let rest = drain_bounded(&mut p, 200 - early.len());
    assert!(start.elapsed() < BOUND);
    let all: Vec<Completion> = early.into_iter().chain(rest).collect();
    assert_eq!(all.len(), 200);
    // Per-target completion order: answered ones first, then only failures.
    let ids: Vec<u64> = all.iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        (0..200).collect::<Vec<_>>(),
        "completions in posting order"
    );
    let first_err = all
        .iter()
        .position(|c| c.result.is_err())
        .expect("some fail");
    assert!(
        first_err <= 100,
        "requests posted after the drop cannot succeed"
    );
    for c in &all[..first_err] {
        assert_eq!(c.result, Ok(Output::Data(7u64.to_le_bytes().to_vec())));
    }
    for c in &all[first_err..] {
        assert!(is_unavailable(&c.result, 1), "{:?}", c.result);
    }
    // Later operations to the dead node fail too; other nodes are unaffected.
    assert!(is_unavailable(&p.read_word(1, r, 0), 1));
    assert!(is_unavailable(&p.write_word(1, r, 0, 1), 1));
    assert!(is_unavailable(&p.send(1, b"x"), 1));
    assert!(is_unavailable(&nodes[0].lookup(1, "r"), 1));
    p.write_word(2, r2, 0, 9).unwrap();
    assert_eq!(p.read_word(2, r2, 0).unwrap(), 9);
    assert_eq!(p.inflight(), 0);
}

#[test]
fn a_sync_read_to_a_dead_node_errors() {
    let mut nodes = loopback_cluster_with(short_timeouts(2)).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    nodes[1].shutdown();
    let mut p = nodes[0].port(0).unwrap();
    let start = Instant::now();
    let err = p.read_word(1, r, 0).unwrap_err();
    assert!(start.elapsed() < BOUND);
    assert!(
        matches!(&err, FabricError::PeerUnavailable { machine: 1, reason } if reason.contains("127.0.0.1")),
        "{err}"
    );
    drop(nodes.pop());
    assert!(is_unavailable(&p.read_word(1, r, 0), 1));
}

#[test]
fn connecting_where_nothing_listens_fails_fast() {
    // A port that was free a moment ago; nothing listens there now.
    let addr = TcpListener::bind(loopback_any())
        .unwrap()
        .local_addr()
        .unwrap();
    let node = node_facing(addr);
    let mut p = node.port(0).unwrap();
    let start = Instant::now();
    assert!(is_unavailable(&p.read_word(1, RegionId(0), 0), 1));
    p.post(WorkRequest::fetch_add(5, 1, RegionId(0), 0, 1))
        .unwrap();
    let done = drain_bounded(&mut p, 1);
    assert_eq!(done[0].id, 5);
    assert!(is_unavailable(&done[0].result, 1));
    assert!(is_unavailable(&node.lookup(1, "r"), 1));
    assert!(start.elapsed() < BOUND);
}

#[test]
fn a_peer_that_closes_fails_every_request_in_flight() {
    let listener = TcpListener::bind(loopback_any()).unwrap();
    let addr = listener.local_addr().unwrap();
    // Takes the HELLO and some requests, answers nothing, hangs up.
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
    });
    let node = node_facing(addr);
    let mut p = node.port(0).unwrap();
    for i in 0..10 {
        p.post(WorkRequest::read(i, 1, RegionId(0), 0, 8)).unwrap();
    }
    let done = drain_bounded(&mut p, 10);
    for c in &done {
        assert!(is_unavailable(&c.result, 1), "{:?}", c.result);
    }
    peer.join().unwrap();
}

#[test]
fn a_silent_peer_times_out() {
    let listener = TcpListener::bind(loopback_any()).unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts and reads everything, answers nothing, until the client leaves.
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    });
    let node = node_facing(addr);
    let mut p = node.port(0).unwrap();
    p.post(WorkRequest::write(1, 1, RegionId(0), 0, vec![0; 8]))
        .unwrap();
    let start = Instant::now();
    let err = p.read_word(1, RegionId(0), 0).unwrap_err();
    assert!(
        start.elapsed() < BOUND,
        "timed out after {:?}",
        start.elapsed()
    );
    assert!(
        matches!(&err, FabricError::PeerUnavailable { machine: 1, reason } if reason.contains("io_timeout_ms")),
        "{err}"
    );
    // The posted write waiting ahead of it failed with it.
    let done = drain_bounded(&mut p, 1);
    assert!(is_unavailable(&done[0].result, 1));
    peer.join().unwrap();
}

#[test]
fn a_restarted_node_is_reached_again() {
    let mut nodes = loopback_cluster_with(short_timeouts(2)).unwrap();
    let config = nodes[1].config().clone();
    let addr = nodes[1].local_addr();
    nodes[1].register(1, "r", 64).unwrap();
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, RegionId(0), 0, 1).unwrap();
    drop(nodes.pop());
    assert!(is_unavailable(&p.read_word(1, RegionId(0), 0), 1));
    // The address was just released; give the OS a moment if it needs one.
    let start = Instant::now();
    let back = loop {
        match TcpFabric::bind(config.clone(), addr) {
            Ok(n) => break n,
            Err(e) if start.elapsed() < BOUND => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("cannot rebind {addr}: {e}"),
        }
    };
    let r = back.register(1, "r", 64).unwrap().id;
    assert_eq!(p.read_word(1, r, 0).unwrap(), 0, "a fresh node");
    p.write_word(1, r, 0, 2).unwrap();
    assert_eq!(nodes[0].lookup(1, "r").unwrap().id, r);
    assert_eq!(p.read_word(1, r, 0).unwrap(), 2);
}

/// Reads everything until the node closes the connection (bounded).
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the node neither answered nor closed: {e}"),
        }
    }
}

/// A frame header as drawn in the `tcp::frame` docs.
fn header(body_len: u32, op: u8, machine: u8, aux: u16, req: u64) -> Vec<u8> {
    let mut h = body_len.to_le_bytes().to_vec();
    h.push(op);
    h.push(machine);
    h.extend_from_slice(&aux.to_le_bytes());
    h.extend_from_slice(&req.to_le_bytes());
    h
}

fn hello(machines: u16) -> Vec<u8> {
    let mut f = header(28, 0x01, 0, 0, 1);
    f.extend_from_slice(b"LCS1");
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&machines.to_le_bytes());
    f.extend_from_slice(&(16u32 << 20).to_le_bytes());
    f.extend_from_slice(&0u64.to_le_bytes()); // epoch
    f.extend_from_slice(&0u64.to_le_bytes()); // expected epoch
    f
}

#[test]
fn hand_made_frames_get_the_documented_answers() {
    let nodes = loopback_cluster(2).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    let mut p = nodes[1].port(1).unwrap();
    p.write_word(1, r, 8, 0x1122_3344_5566_7788).unwrap();
    let mut s = TcpStream::connect(nodes[1].local_addr()).unwrap();
    let mut out = hello(2);
    // READ machine 1, region r, offset 8, 8 bytes; then one out of bounds.
    out.extend(header(12, 0x02, 1, r.0, 2));
    out.extend_from_slice(&8u64.to_le_bytes());
    out.extend_from_slice(&8u32.to_le_bytes());
    out.extend(header(12, 0x02, 1, r.0, 3));
    out.extend_from_slice(&64u64.to_le_bytes());
    out.extend_from_slice(&8u32.to_le_bytes());
    s.write_all(&out).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let got = read_to_close(&mut s);
    let mut want = header(0, 0x81, 0, 0, 1);
    want.extend(header(8, 0x82, 1, 0, 2));
    want.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
    // Status 5 = OutOfBounds: machine, region, offset, len, region_len.
    want.extend(header(1 + 2 + 24, 0x82, 1, 5, 3));
    want.push(1);
    want.extend_from_slice(&r.0.to_le_bytes());
    for v in [64u64, 8, 64] {
        want.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(got, want);
}

#[test]
fn garbage_closes_only_that_connection() {
    let nodes = loopback_cluster(2).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, r, 0, 3).unwrap();
    let garbage: [&[u8]; 4] = [
        // "GET " is a 542 MB length prefix: over the frame limit.
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        // A well-formed header with an unknown op, before any HELLO.
        &header(0, 0x42, 1, 0, 9),
        // A READ before HELLO.
        &header(12, 0x02, 1, 0, 9)
            .into_iter()
            .chain([0u8; 12])
            .collect::<Vec<u8>>(),
        // A HELLO for a cluster of another size.
        &hello(3),
    ];
    for g in garbage {
        let mut s = TcpStream::connect(nodes[1].local_addr()).unwrap();
        s.write_all(g).unwrap();
        let got = read_to_close(&mut s);
        // The node explains (a fatal 0xFF frame, or a refused HELLO) and closes.
        if got.len() >= 16 {
            assert!(got[4] == 0xFF || got[4] == 0x81, "{got:?}");
            assert_ne!(got[6], 0, "an error status");
        }
    }
    // Truncated: half a header, then the client leaves.
    let mut s = TcpStream::connect(nodes[1].local_addr()).unwrap();
    s.write_all(&hello(2)[..7]).unwrap();
    drop(s);
    // The node still serves everyone else.
    assert_eq!(p.read_word(1, r, 0).unwrap(), 3);
    assert_eq!(nodes[0].lookup(1, "r").unwrap().id, r);
}

#[test]
fn a_node_of_another_cluster_is_refused() {
    let nodes = loopback_cluster(2).unwrap();
    nodes[0].register(0, "r", 64).unwrap();
    // A node that believes the cluster has 3 machines.
    let config = TcpConfig {
        hosted: vec![2],
        peers: vec![nodes[0].local_addr(), nodes[1].local_addr(), loopback_any()],
        ..short_timeouts(3)
    };
    let stranger = TcpFabric::bind(config, loopback_any()).unwrap();
    let mut p = stranger.port(2).unwrap();
    let err = p.read_word(0, RegionId(0), 0).unwrap_err();
    assert!(
        matches!(&err, FabricError::Config(m) if m.contains("3 machines")),
        "{err}"
    );
}

#[test]
fn faults_injected_into_a_tcp_cluster_surface() {
    let mut nodes = loopback_cluster_with(short_timeouts(2)).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    let f = Faulty::new(nodes[0].clone());
    let mut p = f.port(0).unwrap();
    p.write_word(1, r, 0, 5).unwrap(); // op 0
    f.inject(Fault::FailAt(1));
    assert_eq!(
        p.read_word(1, r, 0),
        Err(FabricError::Injected { op_index: 1 })
    );
    assert_eq!(p.read_word(1, r, 0).unwrap(), 5); // op 2
    f.inject(Fault::FailFrom(4));
    p.post(WorkRequest::read(10, 1, r, 0, 8)).unwrap(); // op 3
    p.post(WorkRequest::read(11, 1, r, 0, 8)).unwrap(); // op 4: fails
    let mut done = drain_bounded(&mut p, 2);
    done.sort_by_key(|c| c.id);
    assert_eq!(
        done[0].result,
        Ok(Output::Data(5u64.to_le_bytes().to_vec()))
    );
    assert_eq!(done[1].result, Err(FabricError::Injected { op_index: 4 }));
    assert!(matches!(p.send(1, b"x"), Err(FabricError::Injected { .. })));
    // A real failure passes through the decorator unchanged.
    f.clear();
    drop(nodes.pop());
    assert!(is_unavailable(&p.read_word(1, r, 0), 1));
}
