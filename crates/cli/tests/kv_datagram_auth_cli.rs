//! `locus kv` with `LOCUS_SECRET` set: router and servers seal every wire packet and every
//! management datagram (`LKADM1` JSON) with a MAC
//! (`kvmigrate::auth`); a client with the secret is served, one without it or with another is
//! not, and the router's drops show in `kv migration status`. Nothing here depends on speed:
//! every wait is a poll with a generous bound, and every child is killed at the end.

mod common;

use std::net::UdpSocket;
use std::time::Duration;

use common::kv::{eventually, free_base, run_with as run, status_json, text, Procs, PATIENCE};
use locus_kvmigrate::auth::{DatagramKey, Sealer};

const SECRET: &str = "a cluster secret of the test, 32+";

#[test]
fn only_clients_with_the_secret_are_served_and_drops_are_counted() {
    let base = free_base();
    let router = format!("127.0.0.1:{base}");
    let r = router.as_str();
    let mut procs = Procs::new(Some(SECRET));
    procs.router(r);
    procs.server(r, "1", &["--records", "10", "--buckets-log2", "6"]);
    let get = |secret, timeout: &str| {
        run(
            secret,
            &[
                "kv",
                "get",
                "--router",
                r,
                "--shard",
                "1",
                "--timeout-ms",
                timeout,
                "5",
            ],
        )
    };
    let out = eventually("a GET served", || {
        let out = get(Some(SECRET), "1000");
        out.status.success().then_some(out)
    });
    assert_eq!(text(&out.stdout).trim(), "v5");
    // No secret, and another secret: never answered.
    for secret in [None, Some("another secret, another cluster")] {
        let out = get(secret, "500");
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("no reply"),
            "{}",
            text(&out.stderr)
        );
    }
    let st = eventually("a status listing the server", || {
        status_json(Some(SECRET), r)
            .filter(|v| v["servers"].as_array().is_some_and(|s| !s.is_empty()))
    });
    let a = &st["router"]["auth"];
    let dropped = a["short"].as_u64().unwrap_or(0) + a["bad_mac"].as_u64().unwrap_or(0);
    assert!(dropped >= 2, "{a}");
    assert!(a["accepted"].as_u64().unwrap_or(0) >= 1, "{a}");
    let out = run(Some(SECRET), &["kv", "migration", "status", "--router", r]);
    assert!(
        text(&out.stdout).contains("datagram MACs"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).contains("management MACs"),
        "{}",
        text(&out.stdout)
    );

    // Management datagrams are sealed too: forged, replayed and misaddressed ones are dropped
    // and counted by the router before their JSON is read. The request is one only the router
    // answers (a migration from a server it does not know), so one answer is all there is.
    let key = DatagramKey::from_secret(SECRET.as_bytes()).expect("key");
    let (me, my_id) = (100..200u16)
        .find_map(|id| {
            UdpSocket::bind(("127.0.0.1", base + id))
                .ok()
                .map(|s| (s, id))
        })
        .expect("a free client port");
    let request = |sealer: Option<&mut Sealer>| {
        let mut d = br#"LKADM1 {"op":"migrate","shard":9,"from":9,"to":1,"protocol":"netmigrate"}"#
            .to_vec();
        if let Some(s) = sealer {
            s.seal(&mut d);
        }
        d
    };
    let answer = |sock: &UdpSocket, wait: Duration| {
        sock.set_read_timeout(Some(wait)).expect("timeout");
        let mut buf = vec![0u8; 65536];
        sock.recv(&mut buf).ok().map(|n| text(&buf[..n]))
    };
    // Sealed right, from its sender's port: answered (the router is up and loopback does not
    // lose a datagram to an idle socket).
    let mut sealer = Sealer::new(key.management(), my_id);
    let good = request(Some(&mut sealer));
    me.send_to(&good, r).expect("send");
    let got = answer(&me, PATIENCE).expect("a sealed request went unanswered");
    assert!(got.contains("has not registered"), "{got}");
    // The same datagram again: a replay, never answered.
    let quiet = Duration::from_secs(1);
    me.send_to(&good, r).expect("send");
    assert_eq!(answer(&me, quiet), None, "a replayed request was answered");
    // Unsealed, sealed with the wire key, or with another cluster's secret: forged.
    let other = DatagramKey::from_secret(b"another secret, another cluster").expect("key");
    for forged in [
        request(None),
        request(Some(&mut Sealer::new(key.clone(), my_id))),
        request(Some(&mut Sealer::new(other.management(), my_id))),
    ] {
        me.send_to(&forged, r).expect("send");
        assert_eq!(answer(&me, quiet), None, "a forged request was answered");
    }
    // Sealed right but sent from another port than its sender's.
    let stranger = UdpSocket::bind("127.0.0.1:0").expect("bind");
    stranger
        .send_to(&request(Some(&mut sealer)), r)
        .expect("send");
    assert_eq!(
        answer(&stranger, quiet),
        None,
        "a misaddressed request was answered"
    );
    let st = eventually("status", || status_json(Some(SECRET), r));
    let a = &st["router"]["admin_auth"];
    assert!(a["replayed"].as_u64().unwrap_or(0) >= 1, "{a}");
    assert!(a["bad_mac"].as_u64().unwrap_or(0) >= 3, "{a}");
    assert!(a["wrong_sender"].as_u64().unwrap_or(0) >= 1, "{a}");
    assert_eq!(st["router"]["admin_malformed"], 0, "{st}");
    // The server's hellos and the requests above opened at the router.
    assert!(a["accepted"].as_u64().unwrap_or(0) >= 2, "{a}");
    procs.assert_alive();
}
