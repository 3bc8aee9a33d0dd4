//! Datagram MACs on real loopback sockets (`UdpPeer::with_auth`, `auth`): sealed packets
//! arrive; forged ones, ones sealed with another secret, replays, and ones from an unexpected
//! sender are dropped and counted; the driver's own datagrams still pass as foreign traffic.

use std::net::UdpSocket;
use std::time::Duration;

use locus_kvmigrate::auth::{AuthCounters, DatagramKey, Sealer, TRAILER_BYTES};
use locus_kvmigrate::transport::{Inbound, Transport, UdpPeer};
use locus_kvmigrate::wire::{Body, Packet};

const WAIT: Duration = Duration::from_millis(200);

fn key(s: &str) -> DatagramKey {
    DatagramKey::from_secret(s.as_bytes()).unwrap()
}

fn packet(from: u16, group: u32) -> Packet {
    Packet {
        from,
        shard: 1,
        seq: group,
        flags: 0,
        body: Body::GroupStart { group },
    }
}

fn encoded(p: &Packet) -> Vec<u8> {
    let mut b = Vec::new();
    p.encode(&mut b).unwrap();
    b
}

/// Receives until a packet arrives or `WAIT` passes with nothing.
fn next(peer: &UdpPeer) -> Option<Packet> {
    peer.recv(peer.node(), WAIT).unwrap()
}

fn counters(peer: &UdpPeer) -> AuthCounters {
    peer.auth_counters().expect("auth is on")
}

#[test]
fn only_sealed_fresh_packets_from_their_senders_arrive() {
    let secret = "cluster secret for the test";
    let mut peers = UdpPeer::bind_group(3).unwrap().into_iter();
    let (router, a, b) = (
        peers.next().unwrap().with_auth(key(secret), 0),
        peers.next().unwrap().with_auth(key(secret), 0),
        peers.next().unwrap().with_auth(key(secret), 0),
    );
    let to_b = b.addr_of(2).unwrap();

    // Sealed by the transport: arrives, with the trailer counted in the bytes sent.
    a.send(2, packet(1, 10)).unwrap();
    assert_eq!(next(&b), Some(packet(1, 10)));
    assert_eq!(
        a.bytes_sent(),
        (encoded(&packet(1, 10)).len() + TRAILER_BYTES) as u64
    );
    // The router forwards a packet another node wrote (a client's query): arrives.
    router.send(2, packet(105, 11)).unwrap();
    assert_eq!(next(&b), Some(packet(105, 11)));

    // A bare packet (no MAC), and one sealed with another secret, from a's own socket.
    a.send_datagram(&encoded(&packet(1, 12)), to_b).unwrap();
    let mut other = encoded(&packet(1, 13));
    Sealer::new(key("another secret, another cluster"), 1).seal(&mut other);
    a.send_datagram(&other, to_b).unwrap();
    // A replay: one datagram sealed once and sent twice from a's socket.
    let mut once = encoded(&packet(1, 14));
    Sealer::new(key(secret), 1).seal(&mut once);
    a.send_datagram(&once, to_b).unwrap();
    a.send_datagram(&once, to_b).unwrap();
    // Well sealed as node 1, but sent from some other socket: an unexpected sender.
    let mut stolen = encoded(&packet(1, 15));
    Sealer::new(key(secret), 1).seal(&mut stolen);
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    stranger.send_to(&stolen, to_b).unwrap();
    // Node a sealing a packet it did not write (it is no router).
    let mut relayed = encoded(&packet(7, 16));
    Sealer::new(key(secret), 1).seal(&mut relayed);
    a.send_datagram(&relayed, to_b).unwrap();

    assert_eq!(
        next(&b),
        Some(packet(1, 14)),
        "the first copy of the replayed one"
    );
    assert_eq!(next(&b), None, "nothing else got through");
    let c = counters(&b);
    assert_eq!(c.accepted, 3, "{c:?}");
    assert_eq!(c.short + c.bad_mac, 2, "{c:?}");
    assert_eq!(c.replayed, 1, "{c:?}");
    assert_eq!(c.wrong_sender, 2, "{c:?}");

    // The driver's own traffic (management datagrams) is not a wire packet: passed on.
    stranger.send_to(b"LKADM1 {}", to_b).unwrap();
    let got = loop {
        match b.recv_inbound(2, WAIT).unwrap() {
            Some(i) => break i,
            None => continue,
        }
    };
    assert!(matches!(got, Inbound::Foreign(f) if f.bytes == b"LKADM1 {}"));
}

#[test]
fn without_auth_a_peer_takes_unsealed_packets_and_counts_nothing() {
    let mut peers = UdpPeer::bind_group(2).unwrap().into_iter();
    let (a, b) = (peers.next().unwrap(), peers.next().unwrap());
    a.send(1, packet(0, 1)).unwrap();
    assert_eq!(next(&b), Some(packet(0, 1)));
    assert!(b.auth_counters().is_none());
}
