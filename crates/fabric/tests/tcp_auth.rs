//! The TCP fabric behind the cluster secret: nodes that share it work as
//! before; a node with another secret, or none, is refused with an error that
//! says so, within the configured timeouts; the refusals are counted; a raw
//! socket sending garbage or nothing is closed without holding up anyone else.
//! Only 127.0.0.1. Time bounds are generous (10 s against 500 ms timeouts) so
//! a loaded machine cannot make them flaky.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use locus_fabric::auth::Secret;
use locus_fabric::tcp::{loopback_cluster_with, TcpConfig, TcpFabric};
use locus_fabric::{Fabric, FabricError, Port, WorkRequest};

/// Longest any failure may take to surface.
const BOUND: Duration = Duration::from_secs(10);

fn cluster_secret() -> Secret {
    Secret::new("tcp-auth-test-cluster-secret").expect("a valid secret")
}

fn other_secret() -> Secret {
    Secret::new("another-clusters-secret-0000").expect("a valid secret")
}

fn config(machines: usize, secret: Option<Secret>) -> TcpConfig {
    TcpConfig {
        machines,
        io_timeout_ms: 500,
        connect_timeout_ms: 500,
        secret,
        ..TcpConfig::default()
    }
}

fn loopback_any() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A node hosting machine 0 of a 2-machine cluster whose machine 1 is served at `peer`.
fn stranger_facing(peer: SocketAddr, secret: Option<Secret>) -> TcpFabric {
    let c = TcpConfig {
        hosted: vec![0],
        peers: vec![loopback_any(), peer],
        ..config(2, secret)
    };
    TcpFabric::bind(c, loopback_any()).expect("bind the stranger")
}

/// Waits (bounded) until `node` has counted at least `n` refusals.
fn await_refusals(node: &TcpFabric, n: u64) {
    let start = Instant::now();
    while node.auth_refusals() < n {
        assert!(
            start.elapsed() < BOUND,
            "{} refusals counted after {BOUND:?}, {n} expected",
            node.auth_refusals()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The reason of a `PeerUnavailable` for machine 1, or a panic saying what came instead.
fn unavailable_reason<T: std::fmt::Debug>(r: Result<T, FabricError>) -> String {
    match r {
        Err(FabricError::PeerUnavailable { machine: 1, reason }) => reason,
        other => panic!("expected machine 1 to be unavailable, got {other:?}"),
    }
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

#[test]
fn nodes_sharing_the_secret_serve_every_verb() {
    let start = Instant::now();
    let nodes = loopback_cluster_with(config(3, Some(cluster_secret()))).unwrap();
    for n in &nodes {
        assert_eq!(n.config().secret, Some(cluster_secret()), "propagated");
    }
    let r1 = nodes[1].register(1, "r", 4096).unwrap().id;
    let r2 = nodes[2].register(2, "r", 64).unwrap().id;
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, r1, 0, 41).unwrap();
    assert_eq!(p.read_word(1, r1, 0).unwrap(), 41);
    assert_eq!(p.cas(1, r1, 0, 41, 42).unwrap(), 41);
    assert_eq!(p.fetch_add(2, r2, 8, 5).unwrap(), 0);
    assert_eq!(p.read_word(2, r2, 8).unwrap(), 5);
    for i in 0..50 {
        p.post(WorkRequest::read(i, 1, r1, 0, 8)).unwrap();
    }
    let mut done = Vec::new();
    while done.len() < 50 {
        p.wait(&mut done).unwrap();
        assert!(start.elapsed() < BOUND);
    }
    assert!(done.iter().all(|c| c.result.is_ok()), "{done:?}");
    p.send(2, b"behind the secret").unwrap();
    let got = nodes[2]
        .port(2)
        .unwrap()
        .recv_timeout(BOUND)
        .unwrap()
        .expect("the message arrives");
    assert_eq!((got.from, &got.payload[..]), (0, &b"behind the secret"[..]));
    assert_eq!(nodes[0].lookup(2, "r").unwrap().id, r2);
    for n in &nodes {
        assert_eq!(n.auth_refusals(), 0);
    }
    assert!(start.elapsed() < BOUND);
}

#[test]
fn a_node_with_another_secret_is_refused_and_counted() {
    let nodes = loopback_cluster_with(config(2, Some(cluster_secret()))).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    let stranger = stranger_facing(nodes[1].local_addr(), Some(other_secret()));
    let mut p = stranger.port(0).unwrap();
    let start = Instant::now();
    let reason = unavailable_reason(p.read_word(1, r, 0));
    assert!(
        reason.contains(&format!("node at {} refused us", nodes[1].local_addr()))
            && reason.contains("wrong cluster secret")
            && reason.contains("LOCUS_SECRET"),
        "{reason}"
    );
    let reason = unavailable_reason(stranger.lookup(1, "r"));
    assert!(reason.contains("refused us"), "{reason}");
    assert!(start.elapsed() < BOUND);
    await_refusals(&nodes[1], 2);
    // The cluster's own nodes are unaffected.
    let mut q = nodes[0].port(0).unwrap();
    q.write_word(1, r, 0, 7).unwrap();
    assert_eq!(q.read_word(1, r, 0).unwrap(), 7);
    assert_eq!(nodes[1].auth_refusals(), 2);
}

#[test]
fn a_node_without_the_secret_is_told_the_node_requires_one() {
    let nodes = loopback_cluster_with(config(2, Some(cluster_secret()))).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    let stranger = stranger_facing(nodes[1].local_addr(), None);
    let mut p = stranger.port(0).unwrap();
    let start = Instant::now();
    let reason = unavailable_reason(p.read_word(1, r, 0));
    assert!(
        reason.contains("requires the cluster secret") && reason.contains("LOCUS_SECRET"),
        "{reason}"
    );
    assert!(start.elapsed() < BOUND);
    // Its connection never proved anything: counted once it is gone.
    await_refusals(&nodes[1], 1);
}

#[test]
fn a_node_with_a_secret_facing_a_node_without_one_fails_within_the_connect_timeout() {
    let nodes = loopback_cluster_with(config(2, None)).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    let stranger = stranger_facing(nodes[1].local_addr(), Some(cluster_secret()));
    let mut p = stranger.port(0).unwrap();
    let start = Instant::now();
    let reason = unavailable_reason(p.read_word(1, r, 0));
    assert!(start.elapsed() < BOUND, "took {:?}", start.elapsed());
    assert!(
        reason.contains("authentication with the node at")
            && reason.contains("connect_timeout_ms = 500")
            && reason.contains("waiting for the listener's challenge"),
        "{reason}"
    );
    assert_eq!(
        nodes[1].auth_refusals(),
        0,
        "a node without a secret refuses nobody"
    );
}

#[test]
fn garbage_and_silence_are_closed_and_do_not_hold_up_an_authenticated_peer() {
    // io_timeout (how long a silent client may hold its own service thread)
    // is longer than connect_timeout (how long our handshake may take): if the
    // silent client held up the accept thread, our port could not get in.
    let c = TcpConfig {
        io_timeout_ms: 2_000,
        ..config(2, Some(cluster_secret()))
    };
    let nodes = loopback_cluster_with(c).unwrap();
    let r = nodes[1].register(1, "r", 64).unwrap().id;
    let start = Instant::now();
    let mut silent = TcpStream::connect(nodes[1].local_addr()).unwrap();
    let mut garbage = TcpStream::connect(nodes[1].local_addr()).unwrap();
    garbage
        .write_all(&b"GET / HTTP/1.1\r\nHost: locus\r\n\r\n".repeat(4))
        .unwrap();
    let mut p = nodes[0].port(0).unwrap();
    p.write_word(1, r, 0, 9).unwrap();
    assert_eq!(p.read_word(1, r, 0).unwrap(), 9);
    // Garbage as a proof: the challenge, the refusal, then the close.
    let got = read_to_close(&mut garbage);
    assert_eq!(&got[..8], b"LOCUSAU1");
    let reason = b"wrong cluster secret for this fabric listener";
    assert_eq!(got[40], 0x01, "refused");
    assert_eq!(
        u16::from_le_bytes([got[41], got[42]]) as usize,
        reason.len()
    );
    assert_eq!(&got[43..], reason);
    // Silence: the challenge, then the close once io_timeout has passed.
    let got = read_to_close(&mut silent);
    assert_eq!(got.len(), 40);
    assert_eq!(&got[..8], b"LOCUSAU1");
    assert!(start.elapsed() < BOUND, "took {:?}", start.elapsed());
    await_refusals(&nodes[1], 2);
    assert_eq!(p.read_word(1, r, 0).unwrap(), 9, "still served");
}

#[test]
fn the_secret_does_not_show_in_a_config_debug() {
    let c = config(2, Some(cluster_secret()));
    let shown = format!("{c:?}");
    assert!(!shown.contains(cluster_secret().expose()), "{shown}");
    assert!(shown.contains("Secret(..)"), "{shown}");
}
