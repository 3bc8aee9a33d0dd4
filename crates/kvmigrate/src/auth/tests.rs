use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::wire::{Body, Packet};

const ROUTER: NodeId = 0;

fn key(s: &str) -> DatagramKey {
    DatagramKey::from_secret(s.as_bytes()).unwrap()
}

fn packet(from: NodeId) -> Vec<u8> {
    let p = Packet {
        from,
        shard: 1,
        seq: 7,
        flags: 0,
        body: Body::GroupStart { group: 3 },
    };
    let mut buf = Vec::new();
    p.encode(&mut buf).unwrap();
    buf
}

fn sealed(k: &DatagramKey, sender: NodeId, from: NodeId, seq: u64) -> Vec<u8> {
    let mut buf = packet(from);
    Sealer::starting_at(k.clone(), sender, seq).seal(&mut buf);
    buf
}

#[test]
fn a_sealed_packet_opens_to_itself_once() {
    let k = key("0123456789abcdef");
    let mut o = Opener::new(k.clone(), ROUTER);
    let d = sealed(&k, 1, 1, 100);
    assert_eq!(d.len(), packet(1).len() + TRAILER_BYTES);
    assert_eq!(o.open(&d, |_| true), Ok(&packet(1)[..]));
    assert!(Packet::decode(o.open(&d, |_| true).unwrap_or(&[])).is_err());
    assert_eq!(o.counters().accepted, 1);
    assert_eq!(o.counters().replayed, 1);
}

#[test]
fn forged_altered_and_foreign_key_datagrams_are_dropped_and_counted() {
    let k = key("0123456789abcdef");
    let mut o = Opener::new(k.clone(), ROUTER);
    // Sealed with another secret.
    let other = sealed(&key("fedcba9876543210"), 1, 1, 1);
    assert_eq!(o.open(&other, |_| true), Err(Rejected::BadMac));
    // Every single-bit flip, in the packet or the trailer.
    let good = sealed(&k, 1, 1, 5);
    for i in 0..good.len() * 8 {
        let mut d = good.clone();
        d[i / 8] ^= 1 << (i % 8);
        assert_eq!(o.open(&d, |_| true), Err(Rejected::BadMac), "bit {i}");
    }
    // A bare, unsealed packet (shorter than any sealed one), a truncated one, and a packet
    // with a trailer of zeros.
    let bare = packet(1);
    assert_eq!(o.open(&bare, |_| true), Err(Rejected::Short));
    assert_eq!(o.open(&good[..10], |_| true), Err(Rejected::Short));
    let mut zeros = packet(1);
    zeros.extend_from_slice(&[0; TRAILER_BYTES]);
    assert_eq!(o.open(&zeros, |_| true), Err(Rejected::BadMac));
    let c = o.counters();
    assert_eq!(c.accepted, 0);
    assert_eq!(c.bad_mac, 1 + good.len() as u64 * 8 + 1);
    assert_eq!(c.short, 2);
    // The untouched datagram still opens: nothing above consumed its number.
    assert!(o.open(&good, |_| true).is_ok());
}

#[test]
fn replays_are_dropped_and_reordering_within_the_window_is_not() {
    let k = key("0123456789abcdef");
    let mut o = Opener::new(k.clone(), ROUTER);
    let d = |seq| sealed(&k, 2, 2, seq);
    assert!(o.open(&d(1000), |_| true).is_ok());
    assert!(o.open(&d(1003), |_| true).is_ok());
    // Late but inside the window: accepted once.
    assert!(o.open(&d(1001), |_| true).is_ok());
    assert_eq!(o.open(&d(1001), |_| true), Err(Rejected::Replayed));
    assert_eq!(o.open(&d(1003), |_| true), Err(Rejected::Replayed));
    // Far behind the highest: too old to tell, dropped.
    assert!(o.open(&d(1003 + REPLAY_WINDOW), |_| true).is_ok());
    assert_eq!(o.open(&d(1002), |_| true), Err(Rejected::Replayed));
    // Each sender has its own numbers.
    assert!(o.open(&sealed(&k, 3, 3, 1001), |_| true).is_ok());
    assert_eq!(o.counters().replayed, 3);
}

#[test]
fn unexpected_senders_are_dropped_and_counted() {
    let k = key("0123456789abcdef");
    let mut o = Opener::new(k.clone(), ROUTER);
    // Server 2 sending a packet authored by server 1: not its own, and it is no router.
    assert_eq!(
        o.open(&sealed(&k, 2, 1, 1), |_| true),
        Err(Rejected::WrongSender)
    );
    // The router forwards a client's query with the client as `from`: accepted.
    assert!(o.open(&sealed(&k, ROUTER, 105, 1), |_| true).is_ok());
    // The right claims from the wrong address.
    assert_eq!(
        o.open(&sealed(&k, 1, 1, 1), |n| n != 1),
        Err(Rejected::WrongSender)
    );
    assert_eq!(o.counters().wrong_sender, 2);
    // A wrong-sender datagram consumed no number: the real one still opens.
    assert!(o.open(&sealed(&k, 1, 1, 1), |_| true).is_ok());
}

#[test]
fn random_datagrams_never_open() {
    // Fuzz-ish: random bytes, and random bytes behind a valid packet header, never pass.
    let k = key("0123456789abcdef");
    let mut o = Opener::new(k.clone(), ROUTER);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(64);
    let header = packet(1);
    for i in 0..20_000u32 {
        let len = rng.gen_range(0..200);
        let mut d: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if i % 2 == 0 && d.len() > header.len() {
            d[..header.len()].copy_from_slice(&header);
        }
        assert!(o.open(&d, |_| true).is_err(), "seed 64, datagram {i}");
    }
    assert_eq!(o.counters().accepted, 0);
}

#[test]
fn a_short_secret_is_refused_with_its_name() {
    let e = DatagramKey::from_secret(b"short").unwrap_err();
    assert!(e.to_string().contains("secret"), "{e}");
}

#[test]
fn management_datagrams_open_once_only_under_their_own_key_and_from_their_sender() {
    let k = key("0123456789abcdef");
    let mut o = Opener::management(&k);
    let seal = |key: DatagramKey, sender: NodeId, seq: u64| {
        let mut d = b"LKADM1 {\"op\":\"migration_status\"}".to_vec();
        Sealer::starting_at(key, sender, seq).seal(&mut d);
        d
    };
    let d = seal(k.management(), 100, 9);
    // From any node as itself, at its address; then never again.
    assert_eq!(
        o.open(&d, |n| n == 100),
        Ok(&b"LKADM1 {\"op\":\"migration_status\"}"[..])
    );
    assert_eq!(o.open(&d, |n| n == 100), Err(Rejected::Replayed));
    // From another address than the sender's.
    let d = seal(k.management(), 100, 10);
    assert_eq!(o.open(&d, |n| n == 101), Err(Rejected::WrongSender));
    // Sealed with the wire key, or another secret's management key: forged.
    assert_eq!(
        o.open(&seal(k.clone(), 100, 11), |_| true),
        Err(Rejected::BadMac)
    );
    let other = key("fedcba9876543210").management();
    assert_eq!(
        o.open(&seal(other, 100, 12), |_| true),
        Err(Rejected::BadMac)
    );
    // Unsealed.
    assert_eq!(
        o.open(
            b"LKADM1 {\"op\":\"abort\",\"shard\":1,\"server\":2}",
            |_| true
        ),
        Err(Rejected::BadMac)
    );
    assert_eq!(o.open(b"LKADM1 {}", |_| true), Err(Rejected::Short));
    // And a management seal never opens as a wire packet.
    let mut wire = packet(1);
    Sealer::starting_at(k.management(), 1, 1).seal(&mut wire);
    assert_eq!(
        Opener::new(k.clone(), ROUTER).open(&wire, |_| true),
        Err(Rejected::BadMac)
    );
    let c = o.counters();
    assert_eq!(
        (c.accepted, c.replayed, c.wrong_sender, c.bad_mac, c.short),
        (1, 1, 1, 3, 1)
    );
}
